// The sidebar and the search box against a fake backend: order, rename, pin, delete through the
// in-app confirmation, export, and search results that open a conversation at a message.
import { beforeEach, describe, expect, it, vi } from "vitest";
import { fakeBackend, loadPage, press, settle, typeInto, type FakeBackend } from "./page";

vi.mock("@tauri-apps/api/core", async () => {
  const { FakeChannel } = await import("./tauri-mock");
  return { invoke: vi.fn(), Channel: FakeChannel };
});

import { invoke } from "@tauri-apps/api/core";
import { initBanners } from "../src/banner";
import { initConfirm } from "../src/confirm";
import { createSearch } from "../src/search";
import { createSidebar, type Sidebar, type SidebarHooks } from "../src/sidebar";
import type { ConversationItem } from "../src/types";

const invokeMock = vi.mocked(invoke) as unknown as ReturnType<typeof vi.fn>;
const $ = <T extends Element = HTMLElement>(s: string) => document.querySelector<T>(s)!;
const $$ = (s: string) => Array.from(document.querySelectorAll<HTMLElement>(s));

function item(id: string, title: string, pinned: boolean, updatedAt: number): ConversationItem {
  return { id, title, pinned, createdAt: 0, updatedAt, messageCount: 2, preview: `about ${title}`, tools: false };
}

describe("sidebar", () => {
  let items: ConversationItem[];
  let backend: FakeBackend;
  let hooks: SidebarHooks;
  let sidebar: Sidebar;
  let active: string | null;

  beforeEach(async () => {
    loadPage();
    initBanners();
    initConfirm();
    active = "b";
    items = [item("a", "Older", false, 1), item("b", "Newer", false, 5), item("p", "Pinned <b>", true, 0)];
    backend = fakeBackend(invokeMock, {
      list_conversations: () => items.map((i) => ({ ...i })),
      rename_conversation: ({ id, title }) => {
        const found = items.find((i) => i.id === id)!;
        found.title = title;
        return found;
      },
      set_pinned: ({ id, pinned }) => {
        const found = items.find((i) => i.id === id)!;
        found.pinned = pinned;
        return found;
      },
      delete_conversation: ({ id }) => {
        items = items.filter((i) => i.id !== id);
        return null;
      },
      export_conversation: ({ format }) => (format === "json" ? "/home/me/Newer.json" : null),
      search_conversations: ({ query }) => [
        {
          conversationId: "a",
          conversationTitle: "Older",
          messageId: 11,
          seq: 3,
          role: "assistant",
          segments: [
            { text: "the ", hit: false },
            { text: query, hit: true },
          ],
        },
      ],
    });
    hooks = {
      open: vi.fn(),
      newConversation: vi.fn(),
      activeId: () => active,
      onDeleted: vi.fn(),
    };
    sidebar = createSidebar(hooks);
    await sidebar.refresh();
  });

  it("lists pinned first, then the most recent, with the DOM contract's attributes", () => {
    const nodes = $$(".conversation-item");
    expect(nodes.map((n) => n.dataset.id)).toEqual(["p", "b", "a"]);
    expect(nodes.map((n) => n.dataset.pinned)).toEqual(["true", "false", "false"]);
    expect(nodes[1].classList.contains("active")).toBe(true);
    expect(nodes[0].querySelector(".conversation-title")?.textContent).toBe("Pinned <b>");
    for (const node of nodes) {
      for (const action of [".rename", ".pin", ".delete", ".export-markdown", ".export-json"]) {
        expect(node.querySelector(action), action).not.toBeNull();
      }
    }
  });

  it("opens on click and creates with #new-conversation", () => {
    $('.conversation-item[data-id="a"] .conversation-title').click();
    expect(hooks.open).toHaveBeenCalledWith("a");
    $("#new-conversation").click();
    expect(hooks.newConversation).toHaveBeenCalled();
    sidebar.setActive("a");
    expect($(".conversation-item.active").dataset.id).toBe("a");
  });

  it("renames inline: Enter commits, Escape cancels", async () => {
    $('.conversation-item[data-id="a"] .rename').click();
    const input = $<HTMLInputElement>("input.rename-input");
    expect(input.value).toBe("Older");
    typeInto(input, "Renamed");
    press(input, "Enter");
    await settle();
    expect(backend.callsOf("rename_conversation")).toEqual([{ id: "a", title: "Renamed" }]);
    expect($('.conversation-item[data-id="a"] .conversation-title').textContent).toBe("Renamed");

    $('.conversation-item[data-id="b"] .rename').click();
    typeInto($<HTMLInputElement>("input.rename-input"), "Nope");
    press($("input.rename-input"), "Escape");
    await settle();
    expect(backend.callsOf("rename_conversation")).toHaveLength(1);
    expect($('.conversation-item[data-id="b"] .conversation-title').textContent).toBe("Newer");
    expect(hooks.open).not.toHaveBeenCalled();
  });

  it("pins and unpins", async () => {
    $('.conversation-item[data-id="a"] .pin').click();
    await settle();
    expect(backend.callsOf("set_pinned")).toEqual([{ id: "a", pinned: true }]);
    expect($$(".conversation-item").map((n) => n.dataset.id)).toEqual(["a", "p", "b"]);
    expect($('.conversation-item[data-id="a"]').dataset.pinned).toBe("true");
  });

  it("deletes only after the in-app confirmation", async () => {
    const nativeConfirm = vi.spyOn(window, "confirm");
    $('.conversation-item[data-id="b"] .delete').click();
    expect($("#confirm-dialog").hidden).toBe(false);
    $("#confirm-cancel").click();
    await settle();
    expect($("#confirm-dialog").hidden).toBe(true);
    expect(backend.callsOf("delete_conversation")).toHaveLength(0);

    $('.conversation-item[data-id="b"] .delete').click();
    $("#confirm-ok").click();
    await settle();
    expect(backend.callsOf("delete_conversation")).toEqual([{ id: "b" }]);
    expect(hooks.onDeleted).toHaveBeenCalledWith("b", true);
    expect($$(".conversation-item").map((n) => n.dataset.id)).toEqual(["p", "a"]);
    expect(nativeConfirm).not.toHaveBeenCalled();
  });

  it("exports and shows the saved path, or nothing when cancelled", async () => {
    $('.conversation-item[data-id="b"] .export-json').click();
    await settle();
    expect(backend.callsOf("export_conversation")).toEqual([{ id: "b", format: "json" }]);
    expect($("#notices").textContent).toContain("/home/me/Newer.json");
    $('.conversation-item[data-id="b"] .export-markdown').click();
    await settle();
    expect(backend.callsOf("export_conversation")[1]).toEqual({ id: "b", format: "markdown" });
    expect($$("#notices .notice")).toHaveLength(1);
  });

  it("shows an error as a sentence in #error-banner", async () => {
    invokeMock.mockRejectedValueOnce({ code: "db", message: "the database is locked" });
    await sidebar.refresh();
    expect($("#error-banner").hidden).toBe(false);
    expect($("#error-banner").textContent).toBe("The database is locked. (code: db)");
  });

  it("searches after a pause and opens a result at its message", async () => {
    const openHit = vi.fn();
    createSearch({ openHit });
    typeInto($<HTMLInputElement>("#search"), "cargo");
    await settle(260);
    expect(backend.callsOf("search_conversations")).toEqual([{ query: "cargo" }]);
    expect($("#conversation-list").hidden).toBe(true);
    const result = $(".search-result");
    expect(result.dataset.conversationId).toBe("a");
    expect(result.dataset.seq).toBe("3");
    expect(result.querySelector("mark")?.textContent).toBe("cargo");
    result.click();
    expect(openHit).toHaveBeenCalledWith("a", 3);

    typeInto($<HTMLInputElement>("#search"), "");
    expect($("#conversation-list").hidden).toBe(false);
    expect($("#search-results").hidden).toBe(true);
  });
});
