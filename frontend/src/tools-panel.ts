// The Tools panel (#tools-panel): what the agent may touch and what it did. Folders: the
// folders granted (`list_folders`), added with the native folder picker (`add_folder`, read
// only unless "may write" is ticked), their mode changed (`set_folder_mode`) or revoked
// (`revoke_folder`); no grant, no file access. Notes and Reminders: what the tools keep, with
// delete and done. Activity: the audit log of every call (`list_activity`), clearable. Servers:
// the MCP servers whose tools join ours (servers-tab.ts).
import { call, errorMessage } from "./api";
import { confirmAction } from "./confirm";
import { el, required } from "./dom";
import { closeModal, initModal, openModal } from "./modal";
import { serversTab } from "./servers-tab";
import type { FolderView, Note, Reminder, ToolCallRecord } from "./types";

export type ToolsTab = "folders" | "notes" | "reminders" | "activity" | "servers";

const TABS: [ToolsTab, string][] = [
  ["folders", "Folders"],
  ["notes", "Notes"],
  ["reminders", "Reminders"],
  ["activity", "Activity"],
  ["servers", "Servers"],
];

export interface ToolsPanel {
  open(tab?: ToolsTab): Promise<void>;
  close(): void;
}

export function dateTime(ms: number): string {
  return new Date(ms).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

/** One line of the Activity log: when, which tool, how it ended. */
export function activityOutcome(r: ToolCallRecord): string {
  if (r.outcome === "ok") return `done in ${r.durationMs} ms`;
  if (r.outcome === "denied") return "you declined";
  return `failed${r.errorCode ? ` (${r.errorCode})` : ""}`;
}

export function createToolsPanel(): ToolsPanel {
  const panel = required("#tools-panel");
  const closeButton = el("button", { type: "button", class: "close", "aria-label": "Close the tools panel", title: "Close" });
  const errorLine = el("p", { class: "panel-error", role: "alert", hidden: true });
  const tabBar = el("div", { class: "tabs", role: "tablist" });
  const body = el("div", { class: "tools-body" });
  let current: ToolsTab = "folders";

  for (const [tab, label] of TABS) {
    const button = el("button", { type: "button", role: "tab", class: "tab", "data-tab": tab, text: label });
    button.addEventListener("click", () => void show(tab));
    tabBar.append(button);
  }
  panel.append(
    el(
      "div",
      { class: "modal-card wide" },
      el("div", { class: "panel-head" }, el("h2", { id: "tools-heading", text: "Tools" }), closeButton),
      el("p", {
        class: "panel-intro",
        text: "With Tools on in a conversation, Companion may read the folders below (nothing else on this device), keep notes and reminders, and search your conversations. Every write asks you first.",
      }),
      tabBar,
      errorLine,
      body,
    ),
  );
  initModal(panel);
  closeButton.addEventListener("click", () => closeModal(panel));

  function fail(error: unknown): void {
    errorLine.textContent = errorMessage(error);
    errorLine.hidden = false;
  }

  function folderRow(f: FolderView): HTMLElement {
    const mode = el("select", { class: "folder-mode", "aria-label": `What Companion may do in ${f.name}` });
    mode.append(
      el("option", { value: "read", text: "Read only", selected: f.mode === "read" }),
      el("option", { value: "write", text: "May write (asks first)", selected: f.mode === "write" }),
    );
    mode.addEventListener("change", () => {
      call("set_folder_mode", { path: f.path, mayWrite: mode.value === "write" })
        .then(() => show("folders"))
        .catch(fail);
    });
    const revoke = el("button", { type: "button", class: "revoke danger", text: "Revoke" });
    revoke.addEventListener("click", async () => {
      const ok = await confirmAction({
        title: `Revoke ${f.name}?`,
        message: `Companion will no longer look in ${f.path}.`,
        confirmLabel: "Revoke",
      });
      if (!ok) return;
      call("revoke_folder", { path: f.path })
        .then(() => show("folders"))
        .catch(fail);
    });
    return el(
      "li",
      { class: "folder", "data-path": f.path, "data-mode": f.mode },
      el(
        "div",
        { class: "folder-text" },
        el("strong", { class: "folder-name", text: f.name }),
        el("span", { class: "folder-path", text: f.path }),
        f.available
          ? null
          : el("span", { class: "tag error", text: "missing", title: f.unavailableReason }),
      ),
      mode,
      revoke,
    );
  }

  async function folders(): Promise<Node[]> {
    const list = await call("list_folders");
    const mayWrite = el("input", { type: "checkbox", id: "grant-may-write" });
    const add = el("button", { type: "button", id: "add-folder", class: "primary", text: "Add a folder…" });
    add.addEventListener("click", () => {
      add.disabled = true;
      call("add_folder", { mayWrite: mayWrite.checked })
        .then(() => show("folders"))
        .catch(fail)
        .finally(() => (add.disabled = false));
    });
    return [
      list.length
        ? el("ul", { id: "folder-list", class: "tools-list" }, ...list.map(folderRow))
        : el("p", { class: "empty", text: "No folder is granted: the tools cannot see any of your files." }),
      el(
        "div",
        { class: "panel-foot" },
        el("label", { class: "check" }, mayWrite, " may write (each write asks first)"),
        add,
      ),
    ];
  }

  async function notes(): Promise<Node[]> {
    const list: Note[] = await call("list_notes");
    if (!list.length) return [el("p", { class: "empty", text: "No notes yet. Ask Companion to note something." })];
    return [
      el(
        "ul",
        { id: "note-list", class: "tools-list" },
        ...list.map((n) => {
          const remove = el("button", { type: "button", class: "danger", text: "Delete" });
          remove.addEventListener("click", () => {
            call("delete_note", { id: n.id })
              .then(() => show("notes"))
              .catch(fail);
          });
          return el(
            "li",
            { class: "note", "data-id": n.id },
            el(
              "div",
              { class: "note-text" },
              el("strong", { text: n.title }),
              el("p", { text: n.text }),
              el("span", { class: "muted", text: dateTime(n.updatedAt) }),
            ),
            remove,
          );
        }),
      ),
    ];
  }

  async function reminders(): Promise<Node[]> {
    const list: Reminder[] = await call("list_reminders");
    if (!list.length) return [el("p", { class: "empty", text: "No reminders. Ask Companion to remind you of something." })];
    return [
      el(
        "ul",
        { id: "reminder-list", class: "tools-list" },
        ...list.map((r) => {
          const done = el("button", { type: "button", text: "Done", disabled: r.doneAt !== null });
          done.addEventListener("click", () => {
            call("complete_reminder", { id: r.id })
              .then(() => show("reminders"))
              .catch(fail);
          });
          const remove = el("button", { type: "button", class: "danger", text: "Delete" });
          remove.addEventListener("click", () => {
            call("delete_reminder", { id: r.id })
              .then(() => show("reminders"))
              .catch(fail);
          });
          return el(
            "li",
            { class: `reminder${r.doneAt !== null ? " done" : ""}`, "data-id": r.id },
            el(
              "div",
              { class: "reminder-text" },
              el("strong", { text: r.text }),
              el("span", { class: "muted", text: `due ${dateTime(r.dueAt)}${r.doneAt !== null ? " · done" : ""}` }),
            ),
            done,
            remove,
          );
        }),
      ),
    ];
  }

  async function activity(): Promise<Node[]> {
    const list: ToolCallRecord[] = await call("list_activity", { conversationId: null });
    const clear = el("button", { type: "button", class: "danger", text: "Clear the log", disabled: !list.length });
    clear.addEventListener("click", async () => {
      const ok = await confirmAction({
        title: "Clear the activity log?",
        message: "The record of every tool call is deleted. Notes, reminders and files stay.",
        confirmLabel: "Clear",
      });
      if (!ok) return;
      call("clear_activity")
        .then(() => show("activity"))
        .catch(fail);
    });
    return [
      list.length
        ? el(
            "ul",
            { id: "activity-list", class: "tools-list" },
            ...list.map((r) =>
              el(
                "li",
                { class: "activity", "data-tool": r.tool, "data-outcome": r.outcome },
                el(
                  "div",
                  { class: "activity-text" },
                  el("strong", { text: r.tool }),
                  el("span", { class: "muted", text: `${dateTime(r.createdAt)} · ${activityOutcome(r)}` }),
                  el("pre", { class: "tool-arguments", text: JSON.stringify(r.arguments) }),
                ),
              ),
            ),
          )
        : el("p", { class: "empty", text: "No tool has been used yet." }),
      el("div", { class: "panel-foot" }, clear),
    ];
  }

  async function show(tab: ToolsTab): Promise<void> {
    current = tab;
    errorLine.hidden = true;
    for (const b of tabBar.querySelectorAll<HTMLElement>(".tab")) {
      b.setAttribute("aria-selected", String(b.dataset.tab === tab));
    }
    panel.dataset.tab = tab;
    try {
      const nodes =
        tab === "folders"
          ? await folders()
          : tab === "notes"
            ? await notes()
            : tab === "reminders"
              ? await reminders()
              : tab === "servers"
                ? await serversTab(() => {
                    if (current === "servers" && !panel.hidden) void show("servers");
                  }, fail)
                : await activity();
      if (current === tab) body.replaceChildren(...nodes);
    } catch (error) {
      fail(error);
    }
  }

  return {
    async open(tab = current) {
      openModal(panel);
      await show(tab);
    },
    close: () => closeModal(panel),
  };
}
