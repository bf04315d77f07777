// Pictures in the chat. The composer's pending pictures (#pending-pictures: a thumbnail with a
// remove button, `.pending-picture` / `.remove-picture`, for each picture attached, pasted or
// dropped and not sent yet), read in the page as data URLs, which send_message takes and checks.
// And the pictures of stored messages, read for their thumbnails through the `picture` command
// (by sha256), kept here as data URLs so that a re-render shows them at once.
import { call } from "./api";
import { el } from "./dom";

/** The kinds of picture the engine decodes (the hidden file input's `accept`). */
export const PICTURE_TYPES = ["image/png", "image/jpeg", "image/webp", "image/gif"] as const;
/** The store's limit for one picture file. */
export const MAX_PICTURE_BYTES = 32 * 1024 * 1024;
/** The most pictures one message may carry (the Rust side's limit too). */
export const MAX_PICTURES = 8;
/** Shown (on the disabled attach button, and as a notice on a paste or drop) when the loaded
 *  model has no vision projector. */
export const NO_PROJECTOR_NOTICE =
  "This model reads no pictures: import its vision projector (an mmproj file) beside it.";

const PICTURE_EXTENSIONS = ["png", "jpg", "jpeg", "webp", "gif"];

export interface PendingPicture {
  id: number;
  /** `data:image/…;base64,…`, as sent with the message. */
  url: string;
  name: string;
}

/** A file whose type is one the engine reads. */
export function isPictureFile(file: File): boolean {
  return (PICTURE_TYPES as readonly string[]).includes(file.type);
}

/** A dropped path whose extension names a picture the engine reads. */
export function isPicturePath(path: string): boolean {
  const dot = path.lastIndexOf(".");
  return dot > 0 && PICTURE_EXTENSIONS.includes(path.slice(dot + 1).toLowerCase());
}

/** The image files among a paste's or a drop's items. */
export function pictureFiles(data: DataTransfer | null): File[] {
  if (!data) return [];
  const files = Array.from(data.files ?? []);
  if (!files.length && data.items) {
    for (const item of Array.from(data.items)) {
      if (item.kind !== "file") continue;
      const file = item.getAsFile();
      if (file) files.push(file);
    }
  }
  return files.filter((f) => f.type.startsWith("image/"));
}

export function readAsDataUrl(file: Blob): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(reader.error ?? new Error("The picture could not be read."));
    reader.readAsDataURL(file);
  });
}

export interface PictureTray {
  /** Adds files (those that are not pictures Companion reads, or too large, or too many, are
   *  left out, each with a sentence in the returned list). */
  addFiles(files: File[]): Promise<string[]>;
  /** Adds pictures already read (a dropped file the Rust side read). */
  addUrls(pictures: { url: string; name: string }[]): string[];
  /** The pending pictures, in order. */
  list(): PendingPicture[];
  /** Takes them all (they are being sent): the tray is empty afterwards. */
  take(): PendingPicture[];
  /** Puts pictures back (the send was refused), unless others were added meanwhile. */
  restore(pictures: PendingPicture[]): void;
}

/** The tray of pending pictures in `root` (#pending-pictures). */
export function createPictureTray(root: HTMLElement, onChange: () => void = () => undefined): PictureTray {
  let pending: PendingPicture[] = [];
  let nextId = 1;

  function render(): void {
    root.replaceChildren(
      ...pending.map((p) =>
        el(
          "div",
          { class: "pending-picture", "data-id": p.id },
          el("img", { src: p.url, alt: p.name, title: p.name }),
          el("button", {
            type: "button",
            class: "remove-picture",
            "aria-label": `Remove ${p.name}`,
            title: "Remove",
            text: "×",
          }),
        ),
      ),
    );
    root.hidden = pending.length === 0;
    onChange();
  }

  root.addEventListener("click", (event) => {
    const button = (event.target as Element).closest(".remove-picture");
    if (!button) return;
    const id = Number(button.closest<HTMLElement>(".pending-picture")?.dataset.id);
    pending = pending.filter((p) => p.id !== id);
    render();
  });

  function room(problems: string[]): boolean {
    if (pending.length < MAX_PICTURES) return true;
    const full = `A message can carry up to ${MAX_PICTURES} pictures.`;
    if (!problems.includes(full)) problems.push(full);
    return false;
  }

  function push(url: string, name: string): void {
    pending.push({ id: nextId++, url, name });
  }

  const tray: PictureTray = {
    async addFiles(files) {
      const problems: string[] = [];
      const accepted: File[] = [];
      for (const file of files) {
        const name = file.name || "The pasted picture";
        if (!isPictureFile(file)) {
          problems.push(`${name} is not a picture Companion reads (PNG, JPEG, WebP or GIF).`);
        } else if (file.size > MAX_PICTURE_BYTES) {
          problems.push(`${name} is larger than the ${MAX_PICTURE_BYTES >> 20} MB a picture may be.`);
        } else {
          accepted.push(file);
        }
      }
      const read = await Promise.all(
        accepted.map((file) =>
          readAsDataUrl(file).then(
            (url) => ({ url, name: file.name || "pasted picture" }),
            () => {
              problems.push(`${file.name || "The pasted picture"} could not be read.`);
              return null;
            },
          ),
        ),
      );
      for (const picture of read) {
        if (picture && room(problems)) push(picture.url, picture.name);
      }
      render();
      return problems;
    },
    addUrls(pictures) {
      const problems: string[] = [];
      for (const p of pictures) if (room(problems)) push(p.url, p.name);
      render();
      return problems;
    },
    list: () => [...pending],
    take() {
      const taken = pending;
      pending = [];
      render();
      return taken;
    },
    restore(pictures) {
      if (pending.length || !pictures.length) return;
      pending = [...pictures];
      render();
    },
  };
  render();
  return tray;
}

/** The pictures of stored messages, as data URLs by sha256: the newest few kept. */
const MAX_CACHED = 64;
const loaded = new Map<string, string>();
const loading = new Map<string, Promise<string>>();
/** Pictures that could not be read (their message is shown without them; not asked again). */
const failed = new Set<string>();

/** The data URL of a stored picture when it was read already (else null: `loadPicture`). */
export function cachedPicture(sha256: string): string | null {
  return loaded.get(sha256) ?? null;
}

/** Reads a stored picture through the `picture` command (once; later calls share it). */
export function loadPicture(sha256: string): Promise<string> {
  const known = loaded.get(sha256);
  if (known) return Promise.resolve(known);
  let pending = loading.get(sha256);
  if (!pending) {
    pending = call("picture", { sha256 })
      .then((url) => {
        if (loaded.size >= MAX_CACHED) {
          const oldest = loaded.keys().next().value;
          if (oldest !== undefined) loaded.delete(oldest);
        }
        loaded.set(sha256, url);
        return url;
      })
      .finally(() => loading.delete(sha256));
    loading.set(sha256, pending);
  }
  return pending;
}

/** Gives every thumbnail in `root` still without its picture (`img.message-picture` with
 *  `data-sha256` and no `src`) its data URL once read; one that cannot be read says so. */
export function fillPictures(root: ParentNode): void {
  const waiting = root.querySelectorAll<HTMLImageElement>("img.message-picture[data-sha256]:not([src])");
  const missing = (img: HTMLImageElement) => {
    img.classList.add("missing");
    img.alt = "This picture could not be read.";
    img.title = img.alt;
  };
  for (const img of Array.from(waiting)) {
    const sha256 = img.dataset.sha256 ?? "";
    if (failed.has(sha256)) {
      missing(img);
      continue;
    }
    loadPicture(sha256).then(
      (url) => {
        for (const same of Array.from(root.querySelectorAll<HTMLImageElement>("img.message-picture:not([src])"))) {
          if (same.dataset.sha256 === sha256) same.src = url;
        }
      },
      () => {
        failed.add(sha256);
        missing(img);
      },
    );
  }
}

/** Forget the pictures read (tests). */
export function clearPictureCache(): void {
  loaded.clear();
  loading.clear();
  failed.clear();
}
