// Small DOM helpers shared by every view: creating elements, finding required ones, escaping
// text for HTML. No state, no app knowledge.

type Child = Node | string | number | null | undefined | false;
type PropValue = string | number | boolean | null | undefined;

/** Creates an element. `text` sets textContent; `class` the class list; booleans toggle
 *  attributes (true sets it empty, false leaves it off); everything else becomes an attribute. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Record<string, PropValue> | null = null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (props) {
    for (const [key, value] of Object.entries(props)) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = String(value);
      else if (key === "class") node.className = String(value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === "number" ? String(child) : child);
  }
  return node;
}

/** The element with this selector; throws a sentence when the page lacks it. */
export function required<T extends Element = HTMLElement>(selector: string, root: ParentNode = document): T {
  const found = root.querySelector<T>(selector);
  if (!found) throw new Error(`The page is missing its ${selector} element; reinstall Companion.`);
  return found;
}

const HTML_ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]);
}

/** The focusable elements inside `root`, in tab order of the document. */
export function focusables(root: ParentNode): HTMLElement[] {
  const selector =
    'a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), [tabindex]:not([tabindex="-1"])';
  return Array.from(root.querySelectorAll<HTMLElement>(selector)).filter(
    (node) => !node.closest("[hidden]"),
  );
}
