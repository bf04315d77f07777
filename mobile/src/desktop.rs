//! Every platform but iOS: there is no OS side to bridge. No lifecycle event fires, ending a
//! background task and protecting storage do nothing, and the iOS-only calls answer
//! [`Error::Unsupported`].
//!
//! With the `fake-os` feature, [`FakeOs`] stands in for iOS in tests: it sends the events iOS
//! sends, through the same dispatcher, makes bookmarks for folders and revokes them, records
//! the reminders EventKit would get and the background tasks ended.

use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use tauri::plugin::PluginApi;
use tauri::{AppHandle, Runtime};

use crate::error::{Error, Result};
use crate::events::Dispatcher;
use crate::{PickedFolder, ResolvedBookmark};

pub(crate) struct Platform<R: Runtime> {
    #[cfg(feature = "fake-os")]
    fake: FakeOs,
    #[cfg(not(feature = "fake-os"))]
    _dispatcher: Dispatcher,
    _runtime: PhantomData<fn() -> R>,
}

impl<R: Runtime> Platform<R> {
    pub(crate) fn init<C: DeserializeOwned>(
        _app: &AppHandle<R>,
        _api: PluginApi<R, C>,
        dispatcher: &Dispatcher,
    ) -> Result<Self> {
        Ok(Platform {
            #[cfg(feature = "fake-os")]
            fake: FakeOs::new(dispatcher.clone()),
            #[cfg(not(feature = "fake-os"))]
            _dispatcher: dispatcher.clone(),
            _runtime: PhantomData,
        })
    }

    #[cfg(feature = "fake-os")]
    pub(crate) fn fake(&self) -> &FakeOs {
        &self.fake
    }

    pub(crate) fn end_background_task(&self, task: u64) -> Result<()> {
        #[cfg(feature = "fake-os")]
        self.fake.lock().ended_tasks.push(task);
        let _ = task;
        Ok(())
    }

    pub(crate) fn pick_folder(&self) -> Result<Option<PickedFolder>> {
        Err(Error::Unsupported("the document picker"))
    }

    pub(crate) fn resolve_bookmark(&self, bookmark: &[u8]) -> Result<ResolvedBookmark> {
        #[cfg(feature = "fake-os")]
        return self.fake.resolve(bookmark);
        #[cfg(not(feature = "fake-os"))]
        {
            let _ = bookmark;
            Err(Error::Unsupported("a security-scoped bookmark"))
        }
    }

    pub(crate) fn create_reminder(&self, text: &str, due_ms: i64) -> Result<String> {
        #[cfg(feature = "fake-os")]
        return self.fake.create_reminder(text, due_ms);
        #[cfg(not(feature = "fake-os"))]
        {
            let _ = (text, due_ms);
            Err(Error::Unsupported("the Reminders app"))
        }
    }

    /// No app container here: on a Mac the user picks a folder in iCloud Drive.
    pub(crate) fn ubiquity_container(&self) -> Result<Option<std::path::PathBuf>> {
        Ok(None)
    }

    pub(crate) fn protect_storage(&self, folder: &std::path::Path) -> Result<()> {
        #[cfg(feature = "fake-os")]
        self.fake.lock().protected.push(folder.to_path_buf());
        let _ = folder;
        Ok(())
    }
}

#[cfg(feature = "fake-os")]
pub use fake::FakeOs;

#[cfg(feature = "fake-os")]
mod fake {
    use std::path::{Path, PathBuf};
    use std::sync::{Mutex, MutexGuard};

    use super::*;
    use crate::MobileEvent;

    /// What the fake OS saw and holds.
    #[derive(Default)]
    pub(super) struct State {
        /// Bookmarks made, by their bytes: the folder and whether it was revoked.
        bookmarks: Vec<(Vec<u8>, PathBuf, bool)>,
        pub(super) reminders: Vec<(String, i64)>,
        pub(super) ended_tasks: Vec<u64>,
        pub(super) protected: Vec<PathBuf>,
        pub(super) reminders_denied: bool,
    }

    /// iOS, as far as the app's Rust side can tell.
    pub struct FakeOs {
        dispatcher: Dispatcher,
        state: Mutex<State>,
    }

    impl FakeOs {
        pub(super) fn new(dispatcher: Dispatcher) -> Self {
            FakeOs {
                dispatcher,
                state: Mutex::default(),
            }
        }

        pub(super) fn lock(&self) -> MutexGuard<'_, State> {
            self.state.lock().unwrap_or_else(|p| p.into_inner())
        }

        /// Send `event` as iOS would, and wait until the app has handled it.
        pub fn send(&self, event: MobileEvent) {
            self.dispatcher.event(event);
            self.dispatcher.flush();
        }

        /// The bookmark iOS would make for `folder` when the user picks it.
        pub fn bookmark(&self, folder: &Path) -> Vec<u8> {
            let mut s = self.lock();
            let bytes =
                format!("fake-bookmark-{}:{}", s.bookmarks.len(), folder.display()).into_bytes();
            s.bookmarks
                .push((bytes.clone(), folder.to_path_buf(), false));
            bytes
        }

        /// The user revoked the folder's access (or deleted it) in the Files app.
        pub fn revoke(&self, folder: &Path) {
            for b in self.lock().bookmarks.iter_mut() {
                if b.1 == folder {
                    b.2 = true;
                }
            }
        }

        /// The user will answer "Don't Allow" when asked for access to Reminders.
        pub fn deny_reminders(&self) {
            self.lock().reminders_denied = true;
        }

        pub(super) fn resolve(&self, bookmark: &[u8]) -> Result<ResolvedBookmark> {
            let s = self.lock();
            match s.bookmarks.iter().find(|b| b.0 == bookmark) {
                Some((_, path, false)) if path.is_dir() => Ok(ResolvedBookmark {
                    path: path.clone(),
                    refreshed: None,
                }),
                Some((_, path, _)) => Err(Error::BookmarkRevoked(path.display().to_string())),
                None => Err(Error::BookmarkRevoked("an unknown bookmark".into())),
            }
        }

        pub(super) fn create_reminder(&self, text: &str, due_ms: i64) -> Result<String> {
            let mut s = self.lock();
            if s.reminders_denied {
                return Err(Error::Denied(
                    "Companion may not add reminders: allow it in Settings › Companion › Reminders"
                        .into(),
                ));
            }
            s.reminders.push((text.to_string(), due_ms));
            Ok(format!("fake-reminder-{}", s.reminders.len()))
        }

        /// Reminders put in the Reminders app: text and due time.
        pub fn reminders(&self) -> Vec<(String, i64)> {
            self.lock().reminders.clone()
        }

        /// Background tasks the app ended, in order.
        pub fn ended_background_tasks(&self) -> Vec<u64> {
            self.lock().ended_tasks.clone()
        }

        /// Folders the app asked to keep out of backup.
        pub fn protected_folders(&self) -> Vec<PathBuf> {
            self.lock().protected.clone()
        }
    }
}
