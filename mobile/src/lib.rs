//! Companion's iOS side, as a Tauri 2 plugin in the plugins-workspace shape: the Swift package
//! under `ios/` (UIKit, EventKit, Foundation) and its Rust side here. The app (src-tauri)
//! registers it with [`init`] and reaches it through [`MobileExt::mobile`].
//!
//! What crosses the bridge:
//! - from iOS: [`MobileEvent`]s — lifecycle (resign active, background with the background
//!   time iOS granted, foreground), memory warnings, thermal state changes — handed to the
//!   app's handler ([`Mobile::on_event`]) one at a time on a thread of their own;
//! - to iOS: end the background task, pick a folder (the document picker; the answer carries
//!   the folder's security-scoped bookmark), resolve a bookmark (at every use: the user may
//!   have moved or revoked the folder), put a reminder in the Reminders app (EventKit, asking
//!   for access the first time), and mark a folder as excluded from backup with file
//!   protection "until first user authentication".
//!
//! Everything that decides what to do lives in Rust (the app's `mobile_bridge`); the Swift
//! side only observes, asks iOS and answers. Elsewhere than iOS there is no OS to bridge:
//! the lifecycle never fires, and the iOS-only calls answer [`Error::Unsupported`] — except
//! with the `fake-os` feature, where [`FakeOs`] stands in for iOS in tests.

// Tauri's plugin shape (plugins-workspace, `tauri plugin new`): `desktop.rs` and `mobile.rs`
// with the same `Platform` API. Tauri gates them with `cfg(desktop)` / `cfg(mobile)`; the mobile
// side here is iOS's alone (Companion has no Android build), so the gate is the target OS and an
// Android build would get the desktop side's answers.
#[cfg(not(target_os = "ios"))]
mod desktop;
mod error;
mod events;
#[cfg(target_os = "ios")]
mod mobile;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tauri::plugin::{Builder, TauriPlugin};
use tauri::{Manager, Runtime};

#[cfg(all(not(target_os = "ios"), feature = "fake-os"))]
pub use desktop::FakeOs;
pub use error::{Error, Result};
pub use events::{DeviceThermalState, EventHandler, MobileEvent};

#[cfg(not(target_os = "ios"))]
use desktop::Platform;
use events::Dispatcher;
#[cfg(target_os = "ios")]
use mobile::Platform;

/// Whether this build has the tests' stand-in for iOS ([`FakeOs`]).
pub const HAS_FAKE_OS: bool = cfg!(all(not(target_os = "ios"), feature = "fake-os"));

/// The plugin's name, as Tauri knows it (`links` in Cargo.toml is `tauri-plugin-` + this).
pub const PLUGIN_NAME: &str = "companion-mobile";

/// A folder the user picked in iOS's document picker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PickedFolder {
    pub path: PathBuf,
    /// The security-scoped bookmark iOS made for it: keep it with the grant.
    pub bookmark: Vec<u8>,
}

/// Where a bookmarked folder is now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedBookmark {
    pub path: PathBuf,
    /// iOS said the bookmark was stale and made this new one: keep it instead.
    pub refreshed: Option<Vec<u8>>,
}

/// The plugin as the app holds it.
pub struct Mobile<R: Runtime> {
    dispatcher: Dispatcher,
    platform: Platform<R>,
}

impl<R: Runtime> Mobile<R> {
    /// The app's reaction to the OS's events (set once, at start; events that came earlier are
    /// delivered to it first).
    pub fn on_event(&self, handler: impl Fn(MobileEvent) + Send + 'static) {
        self.dispatcher.set_handler(Box::new(handler));
    }

    /// Wait until every event received so far has been handled.
    pub fn flush_events(&self) {
        self.dispatcher.flush();
    }

    /// The app's work for entering the background is done: give iOS its background time back.
    pub fn end_background_task(&self, task: u64) -> Result<()> {
        self.platform.end_background_task(task)
    }

    /// Let the user pick a folder (iOS's document picker); `None` when they cancelled.
    pub fn pick_folder(&self) -> Result<Option<PickedFolder>> {
        self.platform.pick_folder()
    }

    /// Where a bookmarked folder is now, with access to it started. A bookmark the user
    /// revoked, or whose folder is gone, is [`Error::BookmarkRevoked`].
    pub fn resolve_bookmark(&self, bookmark: &[u8]) -> Result<ResolvedBookmark> {
        self.platform.resolve_bookmark(bookmark)
    }

    /// Put a reminder in the platform's Reminders (EventKit), due at `due_ms` (Unix
    /// milliseconds); asks for access the first time. Returns its identifier there.
    pub fn create_reminder(&self, text: &str, due_ms: i64) -> Result<String> {
        self.platform.create_reminder(text, due_ms)
    }

    /// The app's own folder in iCloud Drive (its ubiquity container's `Documents`), where
    /// sync writes on an iPhone; `None` when iCloud Drive is off, or on a platform without one.
    pub fn ubiquity_container(&self) -> Result<Option<PathBuf>> {
        self.platform.ubiquity_container()
    }

    /// Keep `folder` (the models) out of iCloud backup, with file protection "until first user
    /// authentication" (readable in the background once the phone was unlocked after boot).
    pub fn protect_storage(&self, folder: &std::path::Path) -> Result<()> {
        self.platform.protect_storage(folder)
    }

    /// Whether this platform has an OS side at all (iOS), or the stand-in of the tests.
    pub fn is_native(&self) -> bool {
        cfg!(target_os = "ios")
    }

    /// The stand-in for iOS (tests only).
    #[cfg(all(not(target_os = "ios"), feature = "fake-os"))]
    pub fn fake_os(&self) -> &FakeOs {
        self.platform.fake()
    }
}

/// Access to the plugin from anything that is a Tauri manager (`App`, `AppHandle`, ...).
pub trait MobileExt<R: Runtime> {
    fn mobile(&self) -> &Mobile<R>;
}

impl<R: Runtime, T: Manager<R>> MobileExt<R> for T {
    fn mobile(&self) -> &Mobile<R> {
        self.state::<Mobile<R>>().inner()
    }
}

/// The plugin, for `tauri::Builder::plugin`.
pub fn init<R: Runtime>() -> TauriPlugin<R> {
    Builder::new(PLUGIN_NAME)
        .setup(|app, api| {
            let dispatcher = Dispatcher::start()?;
            let platform = Platform::init(app, api, &dispatcher)?;
            app.manage(Mobile {
                dispatcher,
                platform,
            });
            Ok(())
        })
        .build()
}
