// Reminders that fall due: polled from the store (`due_reminders` returns each one once), shown
// as a notice in the window and, where the webview offers desktop notifications and the user
// allowed them, as a desktop notification too.
import { call } from "./api";
import { showNotice } from "./banner";
import type { Reminder } from "./types";

export const REMINDER_POLL_MS = 30_000;

export function reminderText(r: Reminder): string {
  return `Reminder: ${r.text}`;
}

function notifyDesktop(text: string): void {
  try {
    if (typeof Notification === "undefined") return;
    if (Notification.permission === "granted") new Notification("Companion", { body: text });
    else if (Notification.permission === "default") {
      void Notification.requestPermission().then((p) => {
        if (p === "granted") new Notification("Companion", { body: text });
      });
    }
  } catch {
    // the in-window notice is shown either way
  }
}

export async function showDueReminders(): Promise<number> {
  const due = await call("due_reminders");
  for (const r of due) {
    const text = reminderText(r);
    showNotice(text, { key: `reminder-${r.id}` });
    notifyDesktop(text);
  }
  return due.length;
}

/** Look for due reminders now and every REMINDER_POLL_MS while `ready()`. */
export function watchReminders(ready: () => boolean): void {
  const tick = (): void => {
    if (ready()) showDueReminders().catch(() => undefined);
  };
  setTimeout(tick, 2_000);
  setInterval(tick, REMINDER_POLL_MS);
}
