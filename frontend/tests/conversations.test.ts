import { describe, expect, it } from "vitest";
import { mostRecent, sortConversations } from "../src/conversations";
import type { ConversationItem } from "../src/types";

function item(id: string, pinned: boolean, updatedAt: number): ConversationItem {
  return { id, title: id, pinned, createdAt: 0, updatedAt, messageCount: 1, preview: null, tools: false };
}

describe("sortConversations", () => {
  it("puts pinned first, then the most recently updated", () => {
    const sorted = sortConversations([
      item("old", false, 1),
      item("pinned-old", true, 2),
      item("new", false, 10),
      item("pinned-new", true, 5),
    ]);
    expect(sorted.map((c) => c.id)).toEqual(["pinned-new", "pinned-old", "new", "old"]);
  });

  it("does not change its input", () => {
    const input = [item("a", false, 1), item("b", false, 2)];
    sortConversations(input);
    expect(input.map((c) => c.id)).toEqual(["a", "b"]);
  });
});

describe("mostRecent", () => {
  it("ignores pinning", () => {
    expect(mostRecent([item("p", true, 1), item("n", false, 9)])?.id).toBe("n");
    expect(mostRecent([])).toBeNull();
  });
});
