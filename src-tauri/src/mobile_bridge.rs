//! What the app does when iOS speaks (the events of `companion_mobile`, mobile/), and the
//! app's side of the calls it makes into iOS. The logic is here, in Rust, and tested on Linux
//! with the plugin's fake OS sending the same events (tests/app/mobile.rs); the Swift side only
//! observes and asks.
//!
//! - **Background** (`didEnterBackground`, within the background time the Swift side asked
//!   for with `beginBackgroundTask`): a streaming reply is stopped and kept as partial (the
//!   user hears so on return), a document job stops (it resumes later), the open conversation
//!   is snapshotted and the database's log folded into its file; then the background task is
//!   ended. Resigning active (the app switcher, a call) snapshots without stopping anything.
//! - **Foreground**: the notice about a stopped reply, and the conversation's cache restored
//!   from its snapshot when it was let go meanwhile.
//! - **Memory warning**, or the memory the app may still allocate falling under
//!   [`engine::memory_guard::LOW_MEMORY_MARGIN`] (watched on iOS, [`LowMemoryWatch`]): the
//!   document job stops, the engine drops the draft's prefill and its scratch sessions and
//!   shrinks the context to what fits (`engine::memory_guard::relief`), and the user is told
//!   in one sentence.
//! - **Thermal state**: handed to the engine's governor at once
//!   ([`engine::thermal::ThermalGovernor::report`]), no poll in between.
//! - **Folders** granted through iOS's document picker are kept with their security-scoped
//!   bookmark and resolved at every use ([`PluginBookmarks`]); a revoked one is refused.
//! - **Reminders** the agent creates also go to the Reminders app ([`PluginReminders`]).

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use companion_mobile::{DeviceThermalState, MobileEvent, MobileExt};
use engine::thermal::ThermalState;
use tauri::{AppHandle, Manager, Runtime};

use crate::error::Result;
use crate::state::AppState;
use crate::worker::Worker;

/// How long the background work may take. iOS grants about 30 s of background time and calls
/// the expiration handler a few seconds before the end; the snapshot and the store flush take
/// well under a second for the default model.
pub const BACKGROUND_DEADLINE: Duration = Duration::from_secs(20);

/// What the user hears on return when a reply was stopped by going to the background.
pub const STOPPED_IN_BACKGROUND: &str = "Your reply was stopped when Companion went to the background; what it had written is kept. Regenerate it to go on.";

/// The handler the app gives the plugin (set up in [`crate::builder`]).
pub fn handle<R: Runtime>(app: &AppHandle<R>, event: MobileEvent) {
    let Some(state) = app.try_state::<AppState>() else {
        return;
    };
    match event {
        MobileEvent::WillResignActive => save_soon(&state),
        MobileEvent::DidEnterBackground { task } => {
            enter_background(&state);
            if let Some(task) = task
                && let Err(e) = app.mobile().end_background_task(task)
            {
                tracing::warn!(code = e.code(), error = %e, "the background task could not be ended");
            }
        }
        MobileEvent::BackgroundTimeExpiring => {
            tracing::warn!("iOS ended the background time before the work was done");
        }
        MobileEvent::WillEnterForeground => enter_foreground(&state),
        MobileEvent::MemoryWarning { available_bytes } => relieve_memory(&state, available_bytes),
        MobileEvent::ThermalStateChanged { state: thermal } => {
            if let Some(engine) = state.shared.engine() {
                engine.thermal().report(thermal_state(thermal));
            }
        }
    }
}

pub fn thermal_state(state: DeviceThermalState) -> ThermalState {
    match state {
        DeviceThermalState::Nominal => ThermalState::Nominal,
        DeviceThermalState::Fair => ThermalState::Fair,
        DeviceThermalState::Serious => ThermalState::Serious,
        DeviceThermalState::Critical => ThermalState::Critical,
    }
}

/// The app may be ended from here on without notice: queue a snapshot (after a reply in
/// progress, which goes on).
fn save_soon(state: &AppState) {
    let _ = state.worker.spawn(|w| {
        if let Err(e) = save_for_background(w) {
            tracing::warn!(code = %e.code, error = %e, "snapshot before leaving the foreground failed");
        }
    });
}

/// Snapshot the open conversation and fold the database's log into its file.
fn save_for_background(w: &mut Worker) -> Result<()> {
    let Some(manager) = w.manager.as_mut() else {
        return Ok(());
    };
    manager.save_snapshot()?;
    manager.store().checkpoint()?;
    if let Some(tools) = &w.tool_store {
        tools.checkpoint()?;
    }
    Ok(())
}

fn enter_background(state: &AppState) {
    let shared = &state.shared;
    if shared.replying.load(Ordering::Acquire) {
        shared.stopped_in_background.store(true, Ordering::Release);
        shared.reply_cancel.store(true, Ordering::Release);
    }
    // a document job is resumable: stop it here rather than be suspended in the middle
    if shared.summarizing.load(Ordering::Acquire) {
        shared.document_cancel.store(true, Ordering::Release);
    }
    // (a write waiting for the user's answer is declined with the reply: nobody is there)
    match state
        .worker
        .call_within(BACKGROUND_DEADLINE, save_for_background)
    {
        Ok(()) => tracing::info!("saved for the background"),
        Err(e) => tracing::warn!(code = %e.code, error = %e, "not all saved for the background"),
    }
}

fn enter_foreground(state: &AppState) {
    if state
        .shared
        .stopped_in_background
        .swap(false, Ordering::AcqRel)
    {
        state.shared.notice(STOPPED_IN_BACKGROUND.into());
    }
    // the cache may have been let go meanwhile (a memory warning): bring it back
    let _ = state.worker.spawn(|w| {
        let Some(manager) = w.manager.as_mut() else {
            return;
        };
        let Some(open) = manager.open_conversation().cloned() else {
            return;
        };
        let empty = manager
            .engine()
            .session_tokens()
            .map(|t| t.is_empty())
            .unwrap_or(false);
        if empty && let Err(e) = manager.open(&open) {
            tracing::warn!(code = e.code(), error = %e, "the conversation could not be restored");
        }
    });
}

/// Let go of what can be rebuilt and tell the user in one sentence. Runs on the worker, after
/// a reply in progress (which keeps its memory until it ends).
pub fn relieve_memory(state: &AppState, available: Option<u64>) {
    if state.shared.summarizing.load(Ordering::Acquire) {
        state.shared.document_cancel.store(true, Ordering::Release);
    }
    let shared = state.shared.clone();
    let _ = state.worker.spawn(move |w| {
        let Some(manager) = w.manager.as_mut() else {
            return;
        };
        match manager.relieve_memory(available) {
            Ok(relief) => {
                tracing::info!(
                    context_before = relief.context_before,
                    context_after = relief.context_after,
                    draft_tokens = relief.draft_tokens_dropped,
                    scratch = relief.scratch_sessions_closed,
                    kv_before = relief.kv_bytes_before,
                    kv_after = relief.kv_bytes_after,
                    "memory relieved"
                );
                shared.notice(relief.sentence());
            }
            Err(e) => tracing::warn!(code = e.code(), error = %e, "memory could not be relieved"),
        }
    });
}

/// The memory the app may still allocate, watched between iOS's warnings: under the margin
/// once, it is a warning; it must rise above twice the margin before it counts again.
#[derive(Debug, Default)]
pub struct LowMemoryWatch {
    low: bool,
}

impl LowMemoryWatch {
    /// A new reading: `true` when the app should act as on a memory warning.
    pub fn check(&mut self, available: u64) -> bool {
        let margin = engine::memory_guard::LOW_MEMORY_MARGIN;
        if self.low {
            if available > 2 * margin {
                self.low = false;
            }
            false
        } else if available < margin {
            self.low = true;
            true
        } else {
            false
        }
    }
}

/// On iOS, read `os_proc_available_memory` every few seconds (it is cheap) and act before
/// jetsam does.
#[cfg(target_os = "ios")]
pub fn watch_available_memory<R: Runtime>(app: AppHandle<R>) {
    let spawned = std::thread::Builder::new()
        .name("companion-memory-watch".into())
        .spawn(move || {
            let mut watch = LowMemoryWatch::default();
            loop {
                std::thread::sleep(Duration::from_secs(3));
                let memory = engine::memory_guard::system_memory(None);
                if let Some(available) = memory.available_bytes
                    && watch.check(available)
                    && let Some(state) = app.try_state::<AppState>()
                {
                    relieve_memory(&state, Some(available));
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "the memory watch could not start");
    }
}

/// Bookmarked folders resolved by iOS through the plugin.
pub struct PluginBookmarks<R: Runtime>(pub AppHandle<R>);

impl<R: Runtime> chat::tools::BookmarkResolver for PluginBookmarks<R> {
    fn resolve(&self, bookmark: &[u8]) -> std::result::Result<(PathBuf, Option<Vec<u8>>), String> {
        self.0
            .mobile()
            .resolve_bookmark(bookmark)
            .map(|r| (r.path, r.refreshed))
            .map_err(|e| e.to_string())
    }
}

/// The Reminders app, through the plugin.
pub struct PluginReminders<R: Runtime>(pub AppHandle<R>);

impl<R: Runtime> chat::tools::PlatformReminders for PluginReminders<R> {
    fn create(&self, text: &str, due_at: i64) -> std::result::Result<String, String> {
        self.0
            .mobile()
            .create_reminder(text, due_at)
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn low_memory_counts_once_until_memory_comes_back() {
        let margin = engine::memory_guard::LOW_MEMORY_MARGIN;
        let mut w = LowMemoryWatch::default();
        assert!(!w.check(4 * margin));
        assert!(w.check(margin - 1), "under the margin: act");
        assert!(!w.check(margin / 2), "still low: once is enough");
        assert!(!w.check(margin + 1), "not yet back");
        assert!(!w.check(2 * margin + 1), "back: armed again");
        assert!(w.check(margin - 1));
    }

    #[test]
    fn the_four_levels_map_to_the_engine_s() {
        assert_eq!(
            thermal_state(DeviceThermalState::Nominal),
            ThermalState::Nominal
        );
        assert_eq!(thermal_state(DeviceThermalState::Fair), ThermalState::Fair);
        assert_eq!(
            thermal_state(DeviceThermalState::Serious),
            ThermalState::Serious
        );
        assert_eq!(
            thermal_state(DeviceThermalState::Critical),
            ThermalState::Critical
        );
    }
}
