import { describe, expect, it } from "vitest";
import { codeOfCopyButton, renderMarkdown } from "../src/markdown";

function render(text: string): HTMLElement {
  const div = document.createElement("div");
  div.innerHTML = renderMarkdown(text);
  return div;
}

describe("renderMarkdown", () => {
  it("renders Markdown", () => {
    const div = render("Hello **world**\n\n- one\n- two");
    expect(div.querySelector("strong")?.textContent).toBe("world");
    expect(div.querySelectorAll("li")).toHaveLength(2);
  });

  it("never lets raw HTML or script through", () => {
    const html = renderMarkdown(
      'Hi <script>alert(1)</script> <img src=x onerror="alert(2)"> <b onclick="x()">b</b>\n\n<div onmouseover="y()">block</div>',
    );
    const div = document.createElement("div");
    div.innerHTML = html;
    expect(div.querySelector("script")).toBeNull();
    expect(div.querySelector("img")).toBeNull();
    expect(div.querySelector("b")).toBeNull();
    expect(html).not.toMatch(/<script/i);
    const handlers = Array.from(div.querySelectorAll("*")).flatMap((node) =>
      node.getAttributeNames().filter((name) => name.toLowerCase().startsWith("on")),
    );
    expect(handlers).toEqual([]);
    // The model's text is still there, as text.
    expect(div.textContent).toContain("<script>alert(1)</script>");
  });

  it("drops javascript: links and images", () => {
    const div = render("[click](javascript:alert(1)) ![alt text](http://example.com/x.png)");
    expect(div.querySelector("a")?.getAttribute("href") ?? "").not.toMatch(/javascript/i);
    expect(div.querySelector("img")).toBeNull();
    expect(div.textContent).toContain("alt text");
  });

  it("gives every code block a copy button and keeps its text", () => {
    const code = 'const a = 1 < 2 && "<b>";\nconsole.log(a);';
    const div = render(`Before\n\n\`\`\`ts\n${code}\n\`\`\`\n\nand\n\n    indented code`);
    const blocks = div.querySelectorAll(".code-block");
    expect(blocks).toHaveLength(2);
    const button = blocks[0].querySelector("button.copy-code")!;
    expect(button.textContent).toBe("Copy");
    expect(blocks[0].querySelector(".code-language")?.textContent).toBe("ts");
    expect(codeOfCopyButton(button)).toBe(code);
    expect(blocks[0].querySelector("pre code")?.textContent?.replace(/\n$/, "")).toBe(code);
    expect(codeOfCopyButton(blocks[1].querySelector("button.copy-code")!)).toBe("indented code");
  });

  it("leaves inline code without a button", () => {
    const div = render("use `npm test` here");
    expect(div.querySelector("code")?.textContent).toBe("npm test");
    expect(div.querySelector(".copy-code")).toBeNull();
  });
});
