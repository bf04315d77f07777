import { describe, expect, it } from "vitest";
import { hitSource, segmentsToHtml } from "../src/search-render";
import { hitNode } from "../src/search";
import type { SearchHit } from "../src/types";

describe("segmentsToHtml", () => {
  it("escapes every segment and marks the hits", () => {
    const html = segmentsToHtml([
      { text: "a <b>bold</b> & ", hit: false },
      { text: "<script>x</script>", hit: true },
      { text: " end", hit: false },
    ]);
    expect(html).toBe("a &lt;b&gt;bold&lt;/b&gt; &amp; <mark>&lt;script&gt;x&lt;/script&gt;</mark> end");
  });
});

describe("hitNode", () => {
  const hit: SearchHit = {
    conversationId: "c1",
    conversationTitle: "Rust <tips>",
    messageId: 7,
    seq: 3,
    role: "assistant",
    segments: [
      { text: "use ", hit: false },
      { text: "cargo", hit: true },
    ],
  };

  it("carries the conversation and seq, and marks hits", () => {
    const node = hitNode(hit).querySelector<HTMLElement>(".search-result")!;
    expect(node.dataset.conversationId).toBe("c1");
    expect(node.dataset.seq).toBe("3");
    expect(node.querySelector("mark")?.textContent).toBe("cargo");
    expect(node.querySelector(".search-result-title")?.textContent).toBe("Rust <tips>");
    expect(node.querySelector(".search-result-title")?.innerHTML).toBe("Rust &lt;tips&gt;");
    expect(hitSource(hit)).toBe("Assistant");
  });

  it("leaves data-seq off for a title match", () => {
    const node = hitNode({ ...hit, seq: null, messageId: null, role: null }).querySelector<HTMLElement>(".search-result")!;
    expect(node.hasAttribute("data-seq")).toBe(false);
  });
});
