// The banners above the chat: `#error-banner` for an error not tied to a message (its text is
// the message alone) and dismissible notices (startup notices, thermal changes, saved exports).
import { el, required } from "./dom";
import { errorMessage } from "./api";

let errorBanner: HTMLElement | null = null;
let noticeArea: HTMLElement | null = null;

function banner(): HTMLElement {
  if (!errorBanner) errorBanner = required<HTMLElement>("#error-banner");
  return errorBanner;
}

function notices(): HTMLElement {
  if (!noticeArea) noticeArea = required<HTMLElement>("#notices");
  return noticeArea;
}

/** Wires the dismiss button of the error banner. Call once at start. */
export function initBanners(): void {
  errorBanner = null;
  noticeArea = null;
  banner().addEventListener("click", (event) => {
    if ((event.target as Element).closest(".dismiss")) clearError();
  });
}

/** Shows an error (a rejection, an exception or a sentence) in the error banner. */
export function showError(error: unknown): void {
  const node = banner();
  const text = typeof error === "string" ? error : errorMessage(error);
  node.replaceChildren(
    el("span", { class: "banner-text", text }),
    el("button", { type: "button", class: "dismiss", "aria-label": "Dismiss the error", title: "Dismiss" }),
  );
  node.hidden = false;
}

export function clearError(): void {
  const node = banner();
  node.hidden = true;
  node.replaceChildren();
}

export interface NoticeOptions {
  /** Hide by itself after this long; stays until dismissed when left out. */
  timeoutMs?: number;
  /** A notice with the same key replaces the previous one. */
  key?: string;
}

export function showNotice(text: string, options: NoticeOptions = {}): HTMLElement {
  const area = notices();
  if (options.key) {
    for (const old of Array.from(area.querySelectorAll<HTMLElement>(".notice"))) {
      if (old.dataset.key === options.key) old.remove();
    }
  }
  const dismiss = el("button", { type: "button", class: "dismiss", "aria-label": "Dismiss", title: "Dismiss" });
  const notice = el(
    "div",
    { class: "notice", role: "status", "data-key": options.key ?? null },
    el("span", { class: "banner-text", text }),
    dismiss,
  );
  dismiss.addEventListener("click", () => notice.remove());
  area.append(notice);
  if (options.timeoutMs) setTimeout(() => notice.remove(), options.timeoutMs);
  return notice;
}
