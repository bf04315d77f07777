// The in-app confirmation dialog (#confirm-dialog): ask a question, resolve true on
// #confirm-ok and false on #confirm-cancel, Escape or the backdrop.
import { required } from "./dom";
import { closeModal, initModal, openModal } from "./modal";

export interface ConfirmOptions {
  title: string;
  message: string;
  confirmLabel: string;
}

let settle: ((ok: boolean) => void) | null = null;

export function initConfirm(): void {
  const dialog = required("#confirm-dialog");
  initModal(dialog);
  required("#confirm-ok", dialog).addEventListener("click", () => finish(true));
  required("#confirm-cancel", dialog).addEventListener("click", () => finish(false));
}

function finish(ok: boolean): void {
  const resolve = settle;
  settle = null;
  closeModal(required("#confirm-dialog"));
  resolve?.(ok);
}

export function confirmAction(options: ConfirmOptions): Promise<boolean> {
  const dialog = required("#confirm-dialog");
  if (settle) finish(false);
  required("#confirm-title", dialog).textContent = options.title;
  required("#confirm-message", dialog).textContent = options.message;
  required("#confirm-ok", dialog).textContent = options.confirmLabel;
  return new Promise((resolve) => {
    settle = resolve;
    // Escape or the backdrop close the modal without an answer: that is a "no".
    openModal(dialog, () => {
      if (settle === resolve) {
        settle = null;
        resolve(false);
      }
    });
    required<HTMLButtonElement>("#confirm-cancel", dialog).focus();
  });
}
