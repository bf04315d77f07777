// Reminders that fall due: the app's own reminder watch (src-tauri/src/reminders.rs) marks each
// one shown and shows it as a desktop notification, even while this window is hidden; the
// window asks for them (`due_reminders` hands each over once, from memory, no database read)
// and shows each as a notice.
import { call } from "./api";
import { showNotice } from "./banner";
import type { Reminder } from "./types";

export const REMINDER_POLL_MS = 5_000;

export function reminderText(r: Reminder): string {
  return `Reminder: ${r.text}`;
}

export async function showDueReminders(): Promise<number> {
  const due = await call("due_reminders");
  for (const r of due) {
    const text = reminderText(r);
    showNotice(text, { key: `reminder-${r.id}` });
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
