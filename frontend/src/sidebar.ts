// The conversation list in the sidebar (#conversation-list, #new-conversation): pinned first,
// then most recent; each `.conversation-item` opens on click and carries its actions — rename
// (inline input), pin/unpin, delete (after the in-app confirmation), export as Markdown / JSON.
import { call } from "./api";
import { showError, showNotice } from "./banner";
import { confirmAction } from "./confirm";
import { sortConversations } from "./conversations";
import { el, required } from "./dom";
import type { ConversationItem } from "./types";

export interface SidebarHooks {
  open(id: string): void;
  newConversation(): void;
  activeId(): string | null;
  /** The conversation was deleted; `wasOpen` when the chat showed it. */
  onDeleted(id: string, wasOpen: boolean): void;
  /** The list was read again (titles may have changed). */
  onRefreshed?(items: ConversationItem[]): void;
}

export interface Sidebar {
  refresh(): Promise<ConversationItem[]>;
  setActive(id: string | null): void;
}

function actionButton(className: string, label: string, title: string): HTMLButtonElement {
  return el("button", { type: "button", class: `item-action ${className}`, text: label, title, "aria-label": title });
}

export function conversationNode(item: ConversationItem, active: boolean): HTMLLIElement {
  const title = item.title.trim() || "New conversation";
  return el(
    "li",
    {
      class: `conversation-item${active ? " active" : ""}`,
      "data-id": item.id,
      "data-pinned": String(item.pinned),
      "aria-current": active ? "true" : null,
    },
    el(
      "button",
      { type: "button", class: "conversation-open", title },
      el("span", { class: "conversation-title", text: title }),
      item.pinned ? el("span", { class: "pinned-mark", text: "Pinned" }) : null,
      el("span", { class: "conversation-preview", text: item.preview ?? "No messages yet" }),
    ),
    el(
      "div",
      { class: "conversation-actions" },
      actionButton("rename", "Rename", `Rename “${title}”`),
      actionButton("pin", item.pinned ? "Unpin" : "Pin", item.pinned ? `Unpin “${title}”` : `Pin “${title}” to the top`),
      actionButton("export-markdown", "MD", `Export “${title}” as Markdown`),
      actionButton("export-json", "JSON", `Export “${title}” as JSON`),
      actionButton("delete", "Delete", `Delete “${title}”`),
    ),
  );
}

export function createSidebar(hooks: SidebarHooks): Sidebar {
  const list = required("#conversation-list");
  let items: ConversationItem[] = [];
  let renaming: string | null = null;
  let refreshToken = 0;

  function render(): void {
    const active = hooks.activeId();
    if (!items.length) {
      list.replaceChildren(el("li", { class: "list-empty", text: "No conversations yet." }));
      return;
    }
    list.replaceChildren(...items.map((item) => conversationNode(item, item.id === active)));
  }

  async function refresh(): Promise<ConversationItem[]> {
    const token = ++refreshToken;
    try {
      const fetched = await call("list_conversations");
      if (token !== refreshToken) return items;
      items = sortConversations(fetched);
      // Do not pull the rename input from under the user; the end of the rename refreshes.
      if (!renaming) render();
      hooks.onRefreshed?.(items);
    } catch (error) {
      showError(error);
    }
    return items;
  }

  function find(id: string): ConversationItem | undefined {
    return items.find((item) => item.id === id);
  }

  function startRename(node: HTMLElement, item: ConversationItem): void {
    const title = node.querySelector(".conversation-title");
    if (!title || renaming) return;
    renaming = item.id;
    const input = el("input", {
      type: "text",
      class: "rename-input",
      "aria-label": "New title",
      maxlength: 200,
    });
    input.value = item.title;
    title.replaceWith(input);
    input.focus();
    input.select();
    let ended = false;
    const end = async (commit: boolean) => {
      if (ended) return;
      ended = true;
      const next = input.value.trim();
      if (commit && next && next !== item.title) {
        try {
          await call("rename_conversation", { id: item.id, title: next });
        } catch (error) {
          showError(error);
        }
      }
      renaming = null;
      await refresh();
    };
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.isComposing) {
        event.preventDefault();
        void end(true);
      } else if (event.key === "Escape") {
        event.preventDefault();
        event.stopPropagation();
        void end(false);
      }
    });
    input.addEventListener("blur", () => void end(true));
  }

  async function togglePin(item: ConversationItem): Promise<void> {
    try {
      await call("set_pinned", { id: item.id, pinned: !item.pinned });
    } catch (error) {
      showError(error);
    }
    await refresh();
  }

  async function remove(item: ConversationItem): Promise<void> {
    const title = item.title.trim() || "This conversation";
    const ok = await confirmAction({
      title: "Delete this conversation?",
      message: `“${title}” and all its messages will be deleted from this device. This cannot be undone.`,
      confirmLabel: "Delete",
    });
    if (!ok) return;
    const wasOpen = hooks.activeId() === item.id;
    try {
      await call("delete_conversation", { id: item.id });
      hooks.onDeleted(item.id, wasOpen);
    } catch (error) {
      showError(error);
    }
    await refresh();
  }

  async function exportAs(item: ConversationItem, format: "markdown" | "json"): Promise<void> {
    try {
      const path = await call("export_conversation", { id: item.id, format });
      if (path) showNotice(`Saved to ${path}`, { timeoutMs: 10_000, key: "export" });
    } catch (error) {
      showError(error);
    }
  }

  list.addEventListener("click", (event) => {
    const target = event.target as Element;
    const node = target.closest<HTMLElement>(".conversation-item");
    if (!node || target.closest(".rename-input")) return;
    const item = find(node.dataset.id ?? "");
    if (!item) return;
    const action = target.closest<HTMLElement>(".item-action");
    if (!action) {
      if (renaming !== item.id) hooks.open(item.id);
      return;
    }
    if (action.classList.contains("rename")) startRename(node, item);
    else if (action.classList.contains("pin")) void togglePin(item);
    else if (action.classList.contains("delete")) void remove(item);
    else if (action.classList.contains("export-markdown")) void exportAs(item, "markdown");
    else if (action.classList.contains("export-json")) void exportAs(item, "json");
  });
  required("#new-conversation").addEventListener("click", () => hooks.newConversation());

  return {
    refresh,
    setActive(id) {
      for (const node of Array.from(list.querySelectorAll<HTMLElement>(".conversation-item"))) {
        const active = node.dataset.id === id;
        node.classList.toggle("active", active);
        if (active) node.setAttribute("aria-current", "true");
        else node.removeAttribute("aria-current");
      }
    },
  };
}
