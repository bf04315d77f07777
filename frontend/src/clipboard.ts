// Copying text: the async clipboard API when the webview grants it, else the old
// execCommand("copy") route; and the click handling of the code blocks' "Copy" buttons.
import { codeOfCopyButton } from "./markdown";

export async function copyText(text: string): Promise<boolean> {
  try {
    if (navigator.clipboard?.writeText) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // Denied or unavailable: fall through to the older route.
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "offscreen";
  document.body.append(area);
  try {
    area.select();
    return document.execCommand?.("copy") ?? false;
  } catch {
    return false;
  } finally {
    area.remove();
  }
}

function selectContents(node: Node): void {
  const selection = window.getSelection();
  if (!selection) return;
  const range = document.createRange();
  range.selectNodeContents(node);
  selection.removeAllRanges();
  selection.addRange(range);
}

/** Handles clicks on `.copy-code` buttons anywhere inside `root`. */
export function handleCodeCopy(root: HTMLElement): void {
  root.addEventListener("click", (event) => {
    const button = (event.target as Element | null)?.closest<HTMLButtonElement>(".copy-code");
    if (!button || !root.contains(button)) return;
    const text = codeOfCopyButton(button);
    void copyText(text).then((ok) => {
      if (ok) {
        button.textContent = "Copied";
      } else {
        // Leave the code selected so Ctrl/Cmd+C copies it.
        const pre = button.closest(".code-block")?.querySelector("pre");
        if (pre) selectContents(pre);
        button.textContent = "Press Ctrl+C";
      }
      setTimeout(() => (button.textContent = "Copy"), 1500);
    });
  });
}
