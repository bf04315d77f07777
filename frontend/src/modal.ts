// Modal panels (settings, model, confirmation): opening one moves focus into it and keeps Tab
// inside, Escape or a click on the backdrop closes the topmost, and closing gives focus back.
import { focusables } from "./dom";

interface OpenModal {
  element: HTMLElement;
  restoreFocus: Element | null;
  onClose?: () => void;
}

const stack: OpenModal[] = [];

export function isModalOpen(): boolean {
  return stack.length > 0;
}

export function openModal(element: HTMLElement, onClose?: () => void): void {
  if (stack.some((m) => m.element === element)) return;
  stack.push({ element, restoreFocus: document.activeElement, onClose });
  element.hidden = false;
  document.body.classList.add("modal-open");
  const first =
    element.querySelector<HTMLElement>("[autofocus]") ?? focusables(element)[0] ?? element;
  first.focus();
}

export function closeModal(element: HTMLElement): void {
  const index = stack.findIndex((m) => m.element === element);
  if (index < 0) return;
  const [closed] = stack.splice(index, 1);
  element.hidden = true;
  if (!stack.length) document.body.classList.remove("modal-open");
  if (closed.restoreFocus instanceof HTMLElement && closed.restoreFocus.isConnected) {
    closed.restoreFocus.focus();
  }
  closed.onClose?.();
}

/** Closes the topmost modal; false when none was open. */
export function closeTopModal(): boolean {
  const top = stack[stack.length - 1];
  if (!top) return false;
  closeModal(top.element);
  return true;
}

/** Backdrop clicks and Tab wrapping for a modal element (its first child is the card). */
export function initModal(element: HTMLElement): void {
  element.addEventListener("mousedown", (event) => {
    if (event.target === element) closeModal(element);
  });
  element.addEventListener("keydown", (event) => {
    if (event.key !== "Tab") return;
    const items = focusables(element);
    if (!items.length) return;
    const first = items[0];
    const last = items[items.length - 1];
    if (event.shiftKey && document.activeElement === first) {
      event.preventDefault();
      last.focus();
    } else if (!event.shiftKey && document.activeElement === last) {
      event.preventDefault();
      first.focus();
    }
  });
}
