// Summarizing documents: the "Summarize a document…" button (`summarize_document`, a native file
// dialog) and a file dropped anywhere on the window (`summarize_dropped`), with the progress card
// (#document-progress: summaries done / total, time left, paused, Cancel → `cancel_document`).
// When the summary is done its conversation opens. Pictures dropped on the window are not
// documents: they go to the composer (`onPictures`), to be sent with the next message.
import type { Channel } from "@tauri-apps/api/core";
import { getCurrentWebview } from "@tauri-apps/api/webview";
import { call, channel, errorCode, errorMessage } from "./api";
import { showError, showNotice } from "./banner";
import { el, required } from "./dom";
import { formatTimeLeft } from "./format";
import { isPicturePath } from "./pictures";
import type { DocumentEvent, DocumentProgress } from "./types";

export interface DocumentsHooks {
  /** The summary is in this conversation: open it. */
  onDone(conversationId: string): void | Promise<void>;
  /** Why a document cannot be summarized now (the app is not ready), or null. */
  blocked(): string | null;
  /** The loaded model's notice (a base model's: its summaries are continuations), or null. */
  modelNotice(): string | null;
  /** Picture files were dropped: they wait in the composer for the next message. */
  onPictures?(paths: string[]): void;
}

export interface Documents {
  pick(): Promise<void>;
  summarizeDropped(path: string): Promise<void>;
  /** Listens for files dropped on the window (a no-op outside the app). */
  listenForDrops(): Promise<void>;
}

export interface ProgressText {
  count: string;
  time: string;
  paused: string | null;
  /** 0..1 */
  fraction: number;
}

export function progressText(progress: DocumentProgress): ProgressText {
  const total = Math.max(progress.total, 0);
  return {
    count: `${progress.done} / ${total} summaries`,
    time: formatTimeLeft(progress.remainingSeconds),
    paused: progress.paused ? "Paused while the device cools down." : null,
    fraction: total > 0 ? Math.min(1, progress.done / total) : 0,
  };
}

export function baseName(path: string): string {
  const parts = path.split(/[\\/]/);
  return parts[parts.length - 1] || path;
}

interface Job {
  cancelled: boolean;
  finished: boolean;
}

export function createDocuments(hooks: DocumentsHooks): Documents {
  const card = required("#document-progress");
  const button = required<HTMLButtonElement>("#summarize-document");
  const overlay = document.querySelector<HTMLElement>("#drop-overlay");
  const overlayText = overlay?.querySelector("p") ?? null;
  const documentOverlayText = overlayText?.textContent ?? "";
  const name = el("strong", { class: "document-name" });
  const cancel = el("button", { type: "button", id: "cancel-document", text: "Cancel" });
  const bar = el("progress", { class: "document-bar", max: 1 });
  const count = el("span", { class: "document-count", text: "Preparing…" });
  const time = el("span", { class: "document-time" });
  const paused = el("p", { class: "document-paused", hidden: true });
  const notice = el("p", { class: "model-notice", hidden: true });
  card.replaceChildren(
    el("div", { class: "progress-head" }, name, cancel),
    bar,
    el("p", { class: "progress-line" }, count, time),
    paused,
    notice,
  );
  card.setAttribute("role", "status");
  card.setAttribute("aria-live", "polite");
  card.hidden = true;

  let job: Job | null = null;

  function showCard(fileName: string): void {
    name.textContent = `Summarizing ${fileName}`;
    count.textContent = "Preparing…";
    time.textContent = "";
    paused.hidden = true;
    const modelNotice = hooks.modelNotice();
    notice.textContent = modelNotice ?? "";
    notice.hidden = modelNotice === null;
    bar.removeAttribute("value");
    cancel.disabled = false;
    card.hidden = false;
  }

  function showProgress(progress: DocumentProgress): void {
    const text = progressText(progress);
    count.textContent = text.count;
    time.textContent = text.time;
    paused.textContent = text.paused ?? "";
    paused.hidden = text.paused === null;
    bar.value = text.fraction;
    card.classList.toggle("paused", progress.paused);
  }

  function hideCard(): void {
    card.hidden = true;
  }

  async function complete(j: Job, conversationId: string): Promise<void> {
    if (j.finished) return;
    j.finished = true;
    hideCard();
    await hooks.onDone(conversationId);
  }

  function fail(j: Job, error: unknown): void {
    if (j.finished) return;
    j.finished = true;
    hideCard();
    if (j.cancelled || errorCode(error) === "cancelled") {
      showNotice("The summary was cancelled; summarizing the same document again resumes where it stopped.", {
        timeoutMs: 8000,
        key: "document",
      });
    } else {
      showError(errorMessage(error));
    }
  }

  function onEvent(j: Job, event: DocumentEvent): void {
    if (j.finished) return;
    switch (event.event) {
      case "started":
        showCard(event.data.fileName);
        break;
      case "progress":
        showProgress(event.data);
        break;
      case "done":
        void complete(j, event.data.conversationId);
        break;
      case "error":
        fail(j, event.data);
        break;
    }
  }

  async function run(
    start: (ch: Channel<DocumentEvent>) => Promise<{ conversationId: string } | null>,
    fileName: string | null,
  ): Promise<void> {
    const reason = hooks.blocked();
    if (reason) {
      showError(reason);
      return;
    }
    if (job) {
      showError("A document is already being summarized; wait for it to finish or cancel it first.");
      return;
    }
    const j: Job = { cancelled: false, finished: false };
    job = j;
    button.disabled = true;
    if (fileName) showCard(fileName);
    try {
      const result = await start(channel<DocumentEvent>((event) => onEvent(j, event)));
      if (result) await complete(j, result.conversationId);
      else j.finished = true;
    } catch (error) {
      fail(j, error);
    } finally {
      if (job === j) job = null;
      button.disabled = false;
      if (!job) hideCard();
    }
  }

  cancel.addEventListener("click", () => {
    if (!job) return;
    job.cancelled = true;
    cancel.disabled = true;
    count.textContent = "Cancelling…";
    call("cancel_document").catch((error) => {
      cancel.disabled = false;
      showError(error);
    });
  });
  button.addEventListener("click", () => void documents.pick());

  // Without this a file dropped outside Tauri's own handling would navigate the window to it.
  window.addEventListener("dragover", (event) => event.preventDefault());
  window.addEventListener("drop", (event) => event.preventDefault());

  const documents: Documents = {
    pick: () => run((ch) => call("summarize_document", { onEvent: ch }), null),
    summarizeDropped: (path) => run((ch) => call("summarize_dropped", { path, onEvent: ch }), baseName(path)),
    async listenForDrops() {
      try {
        await getCurrentWebview().onDragDropEvent((event) => {
          const payload = event.payload;
          if (payload.type === "enter" && overlayText) {
            const pictures = payload.paths.length > 0 && payload.paths.every(isPicturePath) && hooks.onPictures;
            overlayText.textContent = pictures ? "Drop the pictures to send them with your message" : documentOverlayText;
          }
          if (payload.type === "enter" || payload.type === "over") {
            if (overlay) overlay.hidden = false;
            return;
          }
          if (overlay) overlay.hidden = true;
          if (payload.type !== "drop" || !payload.paths.length) return;
          const pictures = hooks.onPictures ? payload.paths.filter(isPicturePath) : [];
          if (pictures.length) hooks.onPictures?.(pictures);
          const files = payload.paths.filter((p) => !pictures.includes(p));
          if (files.length) {
            if (files.length > 1) {
              showNotice(`Summarizing ${baseName(files[0])}; drop the other files one at a time.`, {
                timeoutMs: 8000,
                key: "drop",
              });
            }
            void documents.summarizeDropped(files[0]);
          }
        });
      } catch {
        // Not running inside the app (tests, a plain browser): nothing to listen to.
      }
    },
  };
  return documents;
}
