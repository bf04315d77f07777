//! What iOS tells the app, as the app's Rust side hears it, and the one thread that hands each
//! event to the app's handler in order.
//!
//! On iOS the Swift side observes `UIApplication`'s lifecycle and memory-warning notifications
//! and `ProcessInfo.thermalStateDidChangeNotification`, and sends each as JSON on a Tauri
//! channel; the channel's callback runs on whatever thread Swift sent from (the main thread,
//! for these observers), so it only queues the event here. The [`Dispatcher`]'s thread runs
//! the handler, which may block (a snapshot, a store flush) and may call back into Swift
//! (`run_mobile_plugin` must not be called on the main thread while Swift needs it).
//! The fake OS of the tests queues its events through the very same path.

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// An event from the OS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", content = "data", rename_all = "camelCase")]
pub enum MobileEvent {
    /// The app is about to stop being active (a call, the app switcher, the lock button).
    WillResignActive,
    /// The app is in the background. iOS granted extra time under `task` (`None`: it would
    /// not); the app ends it with [`crate::Mobile::end_background_task`] once its writes are
    /// done, before iOS suspends it.
    DidEnterBackground { task: Option<u64> },
    /// The app is coming back to the front.
    WillEnterForeground,
    /// `UIApplication.didReceiveMemoryWarningNotification`, with what the app may still
    /// allocate (`os_proc_available_memory`), when iOS says.
    #[serde(rename_all = "camelCase")]
    MemoryWarning { available_bytes: Option<u64> },
    /// `ProcessInfo.thermalStateDidChangeNotification`, with the new state.
    ThermalStateChanged { state: DeviceThermalState },
    /// The background time iOS granted is about to run out (its expiration handler): the app
    /// must end what it can at once.
    BackgroundTimeExpiring,
}

/// `ProcessInfo.ThermalState`'s four levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceThermalState {
    Nominal,
    Fair,
    Serious,
    Critical,
}

/// The app's reaction to events, called on the dispatcher's thread, one event at a time.
pub type EventHandler = Box<dyn Fn(MobileEvent) + Send + 'static>;

enum Message {
    // sent by iOS's channel and the tests' fake OS only
    #[cfg_attr(not(any(target_os = "ios", feature = "fake-os")), allow(dead_code))]
    Event(MobileEvent),
    Handler(EventHandler),
    Flushed(Sender<()>),
}

/// Queues events for the app's handler; events that come before the handler is set wait for
/// it (iOS may post the first thermal state before the app has finished starting). Clones
/// queue to the same thread.
#[derive(Clone)]
pub(crate) struct Dispatcher {
    tx: Arc<Mutex<Sender<Message>>>,
}

impl Dispatcher {
    pub(crate) fn start() -> std::io::Result<Dispatcher> {
        let (tx, rx) = mpsc::channel::<Message>();
        std::thread::Builder::new()
            .name("companion-mobile".into())
            .spawn(move || {
                let mut handler: Option<EventHandler> = None;
                let mut waiting = Vec::new();
                for message in rx {
                    match message {
                        Message::Event(event) => match &handler {
                            Some(h) => h(event),
                            None => waiting.push(event),
                        },
                        Message::Handler(h) => {
                            for event in waiting.drain(..) {
                                h(event);
                            }
                            handler = Some(h);
                        }
                        Message::Flushed(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            })?;
        Ok(Dispatcher {
            tx: Arc::new(Mutex::new(tx)),
        })
    }

    fn send(&self, message: Message) {
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        // the thread ends only with the process
        let _ = tx.send(message);
    }

    #[cfg_attr(not(any(target_os = "ios", feature = "fake-os")), allow(dead_code))]
    pub(crate) fn event(&self, event: MobileEvent) {
        tracing::debug!(?event, "event from the OS");
        self.send(Message::Event(event));
    }

    pub(crate) fn set_handler(&self, handler: EventHandler) {
        self.send(Message::Handler(handler));
    }

    /// Wait until every event queued before this call has been handled.
    pub(crate) fn flush(&self) {
        let (done, wait) = mpsc::channel();
        self.send(Message::Flushed(done));
        let _ = wait.recv();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_read_as_swift_writes_them() {
        let cases = [
            (
                r#"{"event":"willResignActive"}"#,
                MobileEvent::WillResignActive,
            ),
            (
                r#"{"event":"didEnterBackground","data":{"task":7}}"#,
                MobileEvent::DidEnterBackground { task: Some(7) },
            ),
            (
                r#"{"event":"didEnterBackground","data":{"task":null}}"#,
                MobileEvent::DidEnterBackground { task: None },
            ),
            (
                r#"{"event":"memoryWarning","data":{"availableBytes":123456}}"#,
                MobileEvent::MemoryWarning {
                    available_bytes: Some(123456),
                },
            ),
            (
                r#"{"event":"thermalStateChanged","data":{"state":"serious"}}"#,
                MobileEvent::ThermalStateChanged {
                    state: DeviceThermalState::Serious,
                },
            ),
            (
                r#"{"event":"backgroundTimeExpiring"}"#,
                MobileEvent::BackgroundTimeExpiring,
            ),
        ];
        for (json, event) in cases {
            assert_eq!(
                serde_json::from_str::<MobileEvent>(json).unwrap(),
                event,
                "{json}"
            );
        }
        assert!(serde_json::from_str::<MobileEvent>(r#"{"event":"reboot"}"#).is_err());
    }

    #[test]
    fn events_before_the_handler_wait_for_it_and_keep_their_order() {
        let d = Dispatcher::start().unwrap();
        d.event(MobileEvent::WillResignActive);
        d.event(MobileEvent::WillEnterForeground);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        d.set_handler(Box::new(move |e| s.lock().unwrap().push(e)));
        d.event(MobileEvent::BackgroundTimeExpiring);
        d.flush();
        assert_eq!(
            *seen.lock().unwrap(),
            vec![
                MobileEvent::WillResignActive,
                MobileEvent::WillEnterForeground,
                MobileEvent::BackgroundTimeExpiring
            ]
        );
    }
}
