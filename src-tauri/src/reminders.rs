//! Reminders that fall due, shown by the app itself rather than by the webview: a thread of its
//! own sleeps until the next reminder is due (and looks again at least every
//! [`WATCH_INTERVAL`], for the ones the agent adds meanwhile), marks each one shown, shows it
//! as a desktop notification and queues it for the window, which shows it as a notice
//! (`due_reminders`). A timer in the webview would be throttled or stopped while the window is
//! hidden, which is exactly when a reminder matters.
//!
//! The desktop notification goes through tauri-plugin-notification: the Desktop Notifications
//! D-Bus service (`org.freedesktop.Notifications`) on Linux, the Notification Center on macOS,
//! UNUserNotificationCenter on iOS (which asks the user the first time).

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use memory::Store;
use tauri::{AppHandle, Manager, Runtime};

use crate::shared::Shared;
use crate::state::AppState;

/// The longest the watch sleeps: how late a reminder the agent set for the next few seconds
/// can be, against one cheap indexed query per interval.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(15);

/// The shortest sleep, so that a reminder the store cannot mark as shown is not retried in a
/// busy loop.
const MIN_WAIT: Duration = Duration::from_secs(1);

/// The title of a reminder's desktop notification (its body is the reminder's text).
pub const NOTIFICATION_TITLE: &str = "Reminder";

/// Shows a desktop notification. A trait so that the delivery logic is tested without a
/// desktop; the app's one is [`PluginNotifier`].
pub trait DesktopNotifier: Send + 'static {
    fn show(&self, title: &str, body: &str) -> Result<(), String>;
}

/// The reminders due at `now` that were not shown yet: each is marked shown first (so a store
/// that fails is not a notification every second), then queued for the window and shown on the
/// desktop, unless the platform's own reminders have it (it alerts by itself). A
/// notification that fails is logged, never retried: the window's notice and the Reminders
/// panel still have it. Returns how long to wait before looking again.
pub fn deliver_due(
    store: &Store,
    now: i64,
    shared: &Shared,
    notifier: &dyn DesktopNotifier,
) -> memory::Result<Duration> {
    for reminder in store.due_reminders(now)? {
        store.mark_reminder_notified(reminder.id)?;
        // one in the platform's own reminders (iOS: the Reminders app) alerts by itself
        if reminder.external_id.is_some() {
            shared.push_due_reminder(reminder);
            continue;
        }
        if let Err(e) = notifier.show(NOTIFICATION_TITLE, &reminder.text) {
            // the reminder's text is the user's: not in the log
            tracing::warn!(id = reminder.id.0, error = %e, "a reminder's desktop notification failed");
        }
        shared.push_due_reminder(reminder);
    }
    Ok(wait_until(store.next_reminder_due()?, now))
}

/// How long to sleep at `now` when the next reminder is due at `next`.
fn wait_until(next: Option<i64>, now: i64) -> Duration {
    match next {
        None => WATCH_INTERVAL,
        Some(due) => {
            let ms = u64::try_from(due.saturating_sub(now)).unwrap_or(0);
            Duration::from_millis(ms).clamp(MIN_WAIT, WATCH_INTERVAL)
        }
    }
}

/// The desktop notification of tauri-plugin-notification (registered by [`crate::builder`]).
pub struct PluginNotifier<R: Runtime>(pub AppHandle<R>);

impl<R: Runtime> DesktopNotifier for PluginNotifier<R> {
    fn show(&self, title: &str, body: &str) -> Result<(), String> {
        use tauri_plugin_notification::{NotificationExt, PermissionState};
        let notifications = self.0.notification();
        // always granted on Linux and macOS; iOS asks the user once, here, when the first
        // reminder falls due rather than at the first start
        let mut permission = notifications
            .permission_state()
            .map_err(|e| e.to_string())?;
        if matches!(
            permission,
            PermissionState::Prompt | PermissionState::PromptWithRationale
        ) {
            permission = notifications
                .request_permission()
                .map_err(|e| e.to_string())?;
        }
        if permission != PermissionState::Granted {
            return Err("notifications are turned off for Companion".into());
        }
        notifications
            .builder()
            .title(title)
            .body(body)
            .show()
            .map_err(|e| e.to_string())
    }
}

/// The watch's thread; [`ReminderWatch::stop`] ends it (the app calls it on exit).
pub struct ReminderWatch {
    stop: Mutex<Option<Sender<()>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ReminderWatch {
    /// Start watching the app's store (the commands' connection, held only while looking).
    /// `AppState` must be managed already; until it is, the watch only waits.
    pub fn start<R: Runtime>(
        app: AppHandle<R>,
        notifier: impl DesktopNotifier,
    ) -> std::io::Result<ReminderWatch> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("reminders".into())
            .spawn(move || {
                loop {
                    let wait = match app.try_state::<AppState>() {
                        Some(state) => state
                            .with_store(|store| {
                                Ok(deliver_due(
                                    store,
                                    memory::now_ms(),
                                    &state.shared,
                                    &notifier,
                                )?)
                            })
                            .unwrap_or_else(|e| {
                                tracing::warn!(code = %e.code, error = %e.message, "due reminders cannot be read");
                                WATCH_INTERVAL
                            }),
                        None => MIN_WAIT,
                    };
                    match stopped.recv_timeout(wait) {
                        Err(RecvTimeoutError::Timeout) => continue,
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
            })?;
        Ok(ReminderWatch {
            stop: Mutex::new(Some(stop)),
            thread: Mutex::new(Some(thread)),
        })
    }

    pub fn stop(&self) {
        lock(&self.stop).take();
        if let Some(thread) = lock(&self.thread).take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Recorder {
        shown: Arc<Mutex<Vec<(String, String)>>>,
        fail: bool,
    }

    impl DesktopNotifier for Recorder {
        fn show(&self, title: &str, body: &str) -> Result<(), String> {
            self.shown
                .lock()
                .unwrap()
                .push((title.to_string(), body.to_string()));
            if self.fail {
                Err("no notification server".into())
            } else {
                Ok(())
            }
        }
    }

    fn store(dir: &tempfile::TempDir) -> Store {
        Store::open(dir.path().join("c.db")).unwrap().store
    }

    #[test]
    fn a_due_reminder_is_shown_once_on_the_desktop_and_in_the_window() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir);
        let shared = Shared::default();
        let notifier = Recorder::default();
        store.add_reminder("call mum", 1_000, None).unwrap();
        store
            .add_reminder("water the plants", 60_000, None)
            .unwrap();

        let wait = deliver_due(&store, 2_000, &shared, &notifier).unwrap();
        assert_eq!(
            *notifier.shown.lock().unwrap(),
            vec![(NOTIFICATION_TITLE.to_string(), "call mum".to_string())]
        );
        let queued = shared.take_due_reminders();
        assert_eq!(queued.len(), 1);
        assert_eq!(queued[0].text, "call mum");
        assert_eq!(wait, WATCH_INTERVAL, "the next one is a minute away");

        // looked at again: nothing new, and the window's queue was handed over
        deliver_due(&store, 3_000, &shared, &notifier).unwrap();
        assert_eq!(notifier.shown.lock().unwrap().len(), 1, "shown once");
        assert!(shared.take_due_reminders().is_empty());

        let wait = deliver_due(&store, 55_000, &shared, &notifier).unwrap();
        assert_eq!(wait, Duration::from_secs(5), "woken when the next is due");
        deliver_due(&store, 60_000, &shared, &notifier).unwrap();
        assert_eq!(notifier.shown.lock().unwrap().len(), 2);
    }

    #[test]
    fn a_failed_notification_still_reaches_the_window_and_is_not_retried() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir);
        let shared = Shared::default();
        let notifier = Recorder {
            fail: true,
            ..Recorder::default()
        };
        let r = store.add_reminder("call mum", 1_000, None).unwrap();
        deliver_due(&store, 2_000, &shared, &notifier).unwrap();
        deliver_due(&store, 3_000, &shared, &notifier).unwrap();
        assert_eq!(notifier.shown.lock().unwrap().len(), 1, "not retried");
        assert_eq!(shared.take_due_reminders().len(), 1);
        assert!(store.reminder(r.id).unwrap().unwrap().notified_at.is_some());
    }

    #[test]
    fn done_reminders_are_not_shown_and_the_wait_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir);
        let shared = Shared::default();
        let notifier = Recorder::default();
        let r = store.add_reminder("call mum", 1_000, None).unwrap();
        store.complete_reminder(r.id).unwrap();
        assert_eq!(
            deliver_due(&store, 2_000, &shared, &notifier).unwrap(),
            WATCH_INTERVAL
        );
        assert!(notifier.shown.lock().unwrap().is_empty());
        assert_eq!(wait_until(Some(1_000), 5_000), MIN_WAIT, "overdue: soon");
        assert_eq!(wait_until(Some(i64::MAX), 0), WATCH_INTERVAL);
        assert_eq!(wait_until(Some(3_500), 1_000), Duration::from_millis(2_500));
    }
}
