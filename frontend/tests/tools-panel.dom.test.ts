// The Tools panel against a fake backend: folders granted with their mode, added through the
// picker (read-only unless "may write"), changed and revoked after a confirmation; notes,
// reminders and the activity log listed; a refused grant shown as the panel's error.
import { beforeEach, describe, expect, it, vi } from "vitest";
import { fakeBackend, loadPage, settle, type FakeBackend } from "./page";

vi.mock("@tauri-apps/api/core", async () => {
  const { FakeChannel } = await import("./tauri-mock");
  return { invoke: vi.fn(), Channel: FakeChannel };
});

import { invoke } from "@tauri-apps/api/core";
import { initConfirm } from "../src/confirm";
import { activityOutcome, createToolsPanel, type ToolsPanel } from "../src/tools-panel";
import type { FolderView, ToolCallRecord } from "../src/types";

const invokeMock = vi.mocked(invoke) as unknown as ReturnType<typeof vi.fn>;
const $ = <T extends Element = HTMLElement>(s: string) => document.querySelector<T>(s)!;
const $$ = (s: string) => Array.from(document.querySelectorAll<HTMLElement>(s));

function folder(path: string, mode: FolderView["mode"] = "read"): FolderView {
  return { path, name: path.split("/").pop()!, mode, addedAt: 1, available: true, unavailableReason: null };
}

describe("the tools panel", () => {
  let backend: FakeBackend;
  let folders: FolderView[];
  let panel: ToolsPanel;

  beforeEach(() => {
    loadPage();
    initConfirm();
    folders = [folder("/home/me/docs")];
    backend = fakeBackend(invokeMock, {
      list_folders: () => folders,
      add_folder: ({ mayWrite }) => {
        const f = folder("/home/me/garden", mayWrite ? "write" : "read");
        folders = [...folders, f];
        return f;
      },
      set_folder_mode: ({ path, mayWrite }) => {
        folders = folders.map((f) => (f.path === path ? { ...f, mode: mayWrite ? "write" : "read" } : f));
        return folders.find((f) => f.path === path)!;
      },
      revoke_folder: ({ path }) => {
        folders = folders.filter((f) => f.path !== path);
        return true;
      },
      list_notes: () => [],
      list_activity: () => [
        {
          id: 2,
          conversationId: "c",
          tool: "add_note",
          arguments: { title: "t", text: "x" },
          outcome: "denied",
          errorCode: "denied",
          durationMs: 900,
          createdAt: 2,
        },
        { id: 1, conversationId: "c", tool: "read_file", arguments: { path: "docs/a.txt" }, outcome: "ok", errorCode: null, durationMs: 3, createdAt: 1 },
      ],
    });
    panel = createToolsPanel();
  });

  it("lists, adds, changes and revokes folders", async () => {
    await panel.open("folders");
    expect($("#tools-panel").hidden).toBe(false);
    expect($$("#folder-list .folder").map((f) => f.dataset.path)).toEqual(["/home/me/docs"]);

    $<HTMLInputElement>("#grant-may-write").checked = true;
    $("#add-folder").click();
    await settle();
    expect(backend.callsOf("add_folder")).toEqual([{ mayWrite: true }]);
    expect($$("#folder-list .folder").map((f) => [f.dataset.path, f.dataset.mode])).toEqual([
      ["/home/me/docs", "read"],
      ["/home/me/garden", "write"],
    ]);

    const mode = $<HTMLSelectElement>('#folder-list .folder[data-path="/home/me/docs"] .folder-mode');
    mode.value = "write";
    mode.dispatchEvent(new Event("change"));
    await settle();
    expect(backend.callsOf("set_folder_mode")).toEqual([{ path: "/home/me/docs", mayWrite: true }]);

    // revoking asks first; cancelling keeps the grant
    $('#folder-list .folder[data-path="/home/me/docs"] .revoke').click();
    await settle();
    $("#confirm-cancel").click();
    await settle();
    expect(backend.callsOf("revoke_folder")).toHaveLength(0);
    $('#folder-list .folder[data-path="/home/me/docs"] .revoke').click();
    await settle();
    $("#confirm-ok").click();
    await settle();
    expect(backend.callsOf("revoke_folder")).toEqual([{ path: "/home/me/docs" }]);
    expect($$("#folder-list .folder").map((f) => f.dataset.path)).toEqual(["/home/me/garden"]);
  });

  it("says why a folder was refused", async () => {
    invokeMock.mockImplementationOnce(async () => folders); // list_folders
    await panel.open("folders");
    invokeMock.mockImplementationOnce(async () => {
      throw { code: "bad_grant", message: "That folder cannot be granted: it holds Companion's own data. Choose another one." };
    });
    $("#add-folder").click();
    await settle();
    expect($("#tools-panel .panel-error").hidden).toBe(false);
    expect($("#tools-panel .panel-error").textContent).toContain("Companion's own data");
  });

  it("shows the activity log newest first, and empty lists as such", async () => {
    await panel.open("activity");
    expect($$("#activity-list .activity").map((a) => [a.dataset.tool, a.dataset.outcome])).toEqual([
      ["add_note", "denied"],
      ["read_file", "ok"],
    ]);
    expect($$("#activity-list .activity")[1].textContent).toContain('"path":"docs/a.txt"');
    await panel.open("notes");
    expect($("#tools-panel .tools-body .empty").textContent).toContain("No notes");
  });

  it("words an outcome for the log", () => {
    const r: ToolCallRecord = { id: 1, conversationId: null, tool: "x", arguments: {}, outcome: "error", errorCode: "not_found", durationMs: 1, createdAt: 0 };
    expect(activityOutcome(r)).toBe("failed (not_found)");
    expect(activityOutcome({ ...r, outcome: "ok" })).toBe("done in 1 ms");
    expect(activityOutcome({ ...r, outcome: "denied" })).toBe("you declined");
  });
});
