//! Quitting never freezes the window: the reply or document job that is running is told to
//! stop, the open conversation is snapshotted, and if the worker has not answered by the
//! deadline (it may be loading a model, which cannot be interrupted) the app quits anyway.
//! Quitting mid-snapshot is safe: a snapshot file is written under a temporary name and renamed
//! into place (memory's `files.rs`), so the worst case is the previous snapshot, or none.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::shared::Shared;
use crate::worker::WorkerHandle;

/// How long quitting waits for the worker before exiting anyway.
pub const EXIT_DEADLINE: Duration = Duration::from_secs(3);

/// Cancel what runs, then snapshot and close the open conversation, waiting at most `deadline`.
pub fn close_within(worker: &WorkerHandle, shared: &Shared, deadline: Duration) -> Result<()> {
    let started = Instant::now();
    shared.reply_cancel.store(true, Ordering::Relaxed);
    shared.document_cancel.store(true, Ordering::Relaxed);
    let result = worker.call_within(deadline, |w| w.close());
    match &result {
        Ok(()) => tracing::info!(
            ms = started.elapsed().as_millis() as u64,
            "closed the conversation; quitting"
        ),
        Err(e) => tracing::warn!(code = %e.code, error = %e, "quitting without a clean close"),
    }
    result
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::settings::Settings;

    /// A worker whose model does not exist: it starts, fails to load, and runs jobs.
    fn worker(dir: &std::path::Path) -> (WorkerHandle, Arc<Shared>) {
        let shared = Arc::new(Shared::default());
        let settings = Settings {
            model_path: Some(dir.join("missing.gguf")),
            ..Settings::default()
        };
        let handle =
            WorkerHandle::start(dir.join("companion.db"), settings, shared.clone()).unwrap();
        (handle, shared)
    }

    #[test]
    fn quitting_while_the_worker_is_stuck_returns_by_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let (handle, shared) = worker(dir.path());
        // a job that ignores every flag, as a model load does
        let (_never, stuck) = std::sync::mpsc::channel::<()>();
        handle
            .spawn(move |_| {
                let _ = stuck.recv_timeout(Duration::from_secs(60));
            })
            .unwrap();
        let started = Instant::now();
        let err = close_within(&handle, &shared, Duration::from_millis(300)).unwrap_err();
        let waited = started.elapsed();
        assert_eq!(err.code, "shutdown_timeout", "{err}");
        assert!(waited < Duration::from_secs(10), "waited {waited:?}");
    }

    #[test]
    fn quitting_stops_a_streaming_reply_and_closes_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let (handle, shared) = worker(dir.path());
        // a reply: it streams until it is told to stop
        shared.reply_cancel.store(false, Ordering::Relaxed);
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        handle
            .spawn(move |w| {
                let _ = started_tx.send(());
                let until = Instant::now() + Duration::from_secs(60);
                while !w.shared.reply_cancel.load(Ordering::Relaxed) && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
            .unwrap();
        started_rx.recv().unwrap();
        close_within(&handle, &shared, Duration::from_secs(30)).unwrap();
        assert!(shared.reply_cancel.load(Ordering::Relaxed));
        assert!(shared.document_cancel.load(Ordering::Relaxed));
    }
}
