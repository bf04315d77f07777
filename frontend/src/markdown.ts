// Markdown to safe HTML for assistant messages: `marked` parses (raw HTML and images from the
// model are shown as text, never as markup), DOMPurify sanitizes the result, and every code block
// gets a "Copy" button. The output is a string to assign to innerHTML.
import DOMPurify from "dompurify";
import { Marked, type Tokens } from "marked";
import { escapeHtml } from "./dom";

const marked = new Marked({ gfm: true, breaks: true, async: false });

marked.use({
  renderer: {
    // No raw HTML from the model: show it as the text it is.
    html(token: Tokens.HTML | Tokens.Tag): string {
      const text = escapeHtml(token.text);
      return "block" in token && token.block ? `<p>${text}</p>\n` : text;
    },
    // The app has no network and loads nothing remote: an image is shown as its alt text.
    image(token: Tokens.Image): string {
      return escapeHtml(token.text || token.href);
    },
  },
});

const PURIFY_CONFIG = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: [
    "style", "img", "picture", "video", "audio", "source", "iframe", "object", "embed",
    "form", "button", "textarea", "select", "svg", "math", "link", "meta", "base",
  ],
  FORBID_ATTR: ["style", "id", "name", "srcset", "formaction"],
  ALLOW_DATA_ATTR: false,
};

/** Sanitized HTML for `text` read as Markdown, with a copy button on each code block. */
export function renderMarkdown(text: string): string {
  const raw = marked.parse(text, { async: false });
  const clean = DOMPurify.sanitize(raw, PURIFY_CONFIG);
  const template = document.createElement("template");
  template.innerHTML = clean;
  decorate(template.content);
  return template.innerHTML.trim();
}

function decorate(root: DocumentFragment): void {
  for (const pre of Array.from(root.querySelectorAll("pre"))) {
    const code = pre.querySelector("code");
    const language = /(?:^|\s)language-([\w+#.-]+)/.exec(code?.className ?? "")?.[1] ?? "";
    const block = document.createElement("div");
    block.className = "code-block";
    const bar = document.createElement("div");
    bar.className = "code-bar";
    const label = document.createElement("span");
    label.className = "code-language";
    label.textContent = language;
    const button = document.createElement("button");
    button.type = "button";
    button.className = "copy-code";
    button.textContent = "Copy";
    button.setAttribute("aria-label", language ? `Copy the ${language} code` : "Copy the code");
    bar.append(label, button);
    pre.replaceWith(block);
    block.append(bar, pre);
  }
  for (const link of Array.from(root.querySelectorAll("a"))) {
    const href = link.getAttribute("href");
    if (href) link.setAttribute("title", href);
    link.setAttribute("rel", "noreferrer noopener");
  }
}

/** The text of the code block a copy button belongs to, without the final newline. */
export function codeOfCopyButton(button: Element): string {
  const pre = button.closest(".code-block")?.querySelector("pre");
  return (pre?.textContent ?? "").replace(/\n$/, "");
}
