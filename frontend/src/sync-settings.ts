// The settings panel's Sync section (#sync-settings): the folder this device shares with the
// user's other devices (an iCloud Drive folder on a Mac, the app's own on an iPhone, or any
// folder Syncthing, Dropbox or a network share keeps the same), what the last round did, and
// its problems. Choosing or stopping takes effect at once (not with Save): the rounds run in
// the background on the Rust side, so the section only shows and asks.
import { call, errorMessage } from "./api";
import { el } from "./dom";
import type { SyncView } from "./types";

/** How long ago `at` was, in words, at `now` (ms). */
export function agoText(at: number, now: number): string {
  const seconds = Math.max(0, Math.round((now - at) / 1000));
  if (seconds < 10) return "just now";
  if (seconds < 90) return `${seconds} s ago`;
  const minutes = Math.round(seconds / 60);
  if (minutes < 90) return `${minutes} min ago`;
  const hours = Math.round(minutes / 60);
  if (hours < 36) return `${hours} h ago`;
  return `${Math.round(hours / 24)} days ago`;
}

/** The section's status line. */
export function syncLine(view: SyncView, now: number): string {
  if (!view.folder) return "Off. Choose a folder your devices share to keep the same conversations, notes and reminders on each.";
  if (view.syncing) return "Syncing…";
  if (view.lastRoundAt === null) return "Waiting for the first sync.";
  const parts = [`Last synced ${agoText(view.lastRoundAt, now)}.`];
  if (view.lastOutcome && !view.lastError) parts.push(view.lastOutcome);
  const others = view.devices === 1 ? "1 other device" : `${view.devices} other devices`;
  parts.push(view.devices === 0 ? "No other device has synced through this folder yet." : `${others} seen.`);
  if (view.waiting > 0) parts.push(`${view.waiting} change(s) wait for what they belong to.`);
  return parts.join(" ");
}

export interface SyncSection {
  element: HTMLElement;
  /** Show the current state and follow it while the panel is open. */
  start(): void;
  stop(): void;
}

export function createSyncSection(): SyncSection {
  const folder = el("p", { class: "hint", id: "sync-folder" });
  const line = el("p", { class: "hint", id: "sync-status", role: "status" });
  const problem = el("p", { class: "sync-error", id: "sync-error", role: "alert", hidden: true });
  const choose = el("button", { type: "button", id: "sync-choose", text: "Choose folder…" });
  const now = el("button", { type: "button", id: "sync-now", text: "Sync now", hidden: true });
  const off = el("button", { type: "button", id: "sync-stop", text: "Stop syncing", hidden: true });
  const element = el(
    "fieldset",
    { id: "sync-settings" },
    el("legend", { text: "Sync" }),
    el(
      "div",
      { class: "field wide" },
      el("p", {
        class: "hint",
        text: "Conversations, notes and reminders go to your other devices through a folder you own; nothing is sent anywhere else. Models, folder grants and settings stay on each device.",
      }),
      folder,
      line,
      problem,
      el("div", { class: "button-row" }, choose, now, off),
    ),
  );
  let timer: number | null = null;

  function show(view: SyncView): void {
    element.dataset.folder = view.folder ?? "";
    folder.textContent = view.folder ? `Folder: ${view.folder}` : "";
    folder.hidden = !view.folder;
    line.textContent = syncLine(view, Date.now());
    problem.textContent = view.lastError ?? "";
    problem.hidden = !view.lastError;
    now.hidden = off.hidden = !view.folder;
    choose.textContent = view.folder ? "Choose another folder…" : "Choose folder…";
    element.dataset.lastRoundAt = String(view.lastRoundAt ?? "");
  }

  function fail(error: unknown): void {
    problem.textContent = errorMessage(error);
    problem.hidden = false;
  }

  async function refresh(): Promise<void> {
    try {
      show(await call("sync_status"));
    } catch (error) {
      fail(error);
    }
  }

  choose.addEventListener("click", () => {
    void call("choose_sync_folder").then((view) => view && show(view), fail);
  });
  off.addEventListener("click", () => {
    void call("stop_sync").then(show, fail);
  });
  now.addEventListener("click", () => {
    void call("sync_now").then(() => refresh(), fail);
  });

  return {
    element,
    start() {
      void refresh();
      if (timer === null) timer = window.setInterval(() => void refresh(), 2000);
    },
    stop() {
      if (timer !== null) window.clearInterval(timer);
      timer = null;
    },
  };
}
