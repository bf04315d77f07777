//! Sync in the background (see `memory::sync`): a thread of its own, with its own connection
//! to the database, runs a round when the app starts, when this device's changes have settled
//! (debounced: no new change for one look), when another device's files in the folder changed
//! (their names, sizes and times, looked at every [`LOOK_INTERVAL`]), when the user asks, and
//! at least every [`ROUND_INTERVAL`]. The folder is the database's own setting (`companion
//! sync --folder` and the settings panel set the same one). What a round did is kept for the
//! settings panel; a round that applied anything bumps a counter the status poll carries, on
//! which the window reloads its lists.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use memory::Store;
use serde::Serialize;

/// How often the watch looks at the folder and at this device's unsent changes.
pub const LOOK_INTERVAL: Duration = Duration::from_secs(2);

/// A round at least this often, whatever the looks saw (a cloud service may deliver a file
/// with an old modification time).
pub const ROUND_INTERVAL: Duration = Duration::from_secs(60);

/// What the settings panel shows.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncView {
    pub folder: Option<String>,
    pub device: Option<String>,
    pub syncing: bool,
    pub last_round_at: Option<i64>,
    /// What the last round did, in a sentence.
    pub last_outcome: Option<String>,
    /// Why the last round could not finish, or the files it had to skip.
    pub last_error: Option<String>,
    pub unsent: usize,
    pub waiting: usize,
    /// Other devices seen in the folder.
    pub devices: usize,
}

struct Inner {
    view: Mutex<SyncView>,
    /// Rounds that changed something here.
    changes: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

enum Signal {
    Now,
    Stop,
}

pub struct SyncWatch {
    inner: Arc<Inner>,
    signal: Sender<Signal>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Whether to run a round now.
pub fn due(
    asked: bool,
    folder_changed: bool,
    unsent: usize,
    unsent_before: Option<usize>,
    since_round: Option<Duration>,
) -> bool {
    let settled = unsent > 0 && unsent_before == Some(unsent);
    asked
        || folder_changed
        || settled
        || since_round.is_none_or(|elapsed| elapsed >= ROUND_INTERVAL)
}

/// The other devices' files in the folder, as names, sizes and modification times.
fn fingerprint(folder: &Path, device: &str) -> Vec<(String, u64, Option<std::time::SystemTime>)> {
    let mut out = Vec::new();
    let root = folder.join(memory::sync::folder::ROOT);
    let Ok(devices) = std::fs::read_dir(&root) else {
        return out;
    };
    for d in devices.flatten() {
        if d.file_name().to_string_lossy() == device {
            continue;
        }
        let Ok(files) = std::fs::read_dir(d.path()) else {
            continue;
        };
        for f in files.flatten() {
            let meta = f.metadata().ok();
            out.push((
                format!(
                    "{}/{}",
                    d.file_name().to_string_lossy(),
                    f.file_name().to_string_lossy()
                ),
                meta.as_ref().map(|m| m.len()).unwrap_or(0),
                meta.and_then(|m| m.modified().ok()),
            ));
        }
    }
    out.sort();
    out
}

fn outcome_sentence(report: &memory::SyncReport) -> String {
    let mut parts = Vec::new();
    if report.wrote_records > 0 {
        parts.push(format!("sent {} change(s)", report.wrote_records));
    }
    if report.applied_records > 0 {
        parts.push(format!("received {} change(s)", report.applied_records));
    }
    let sentence = if parts.is_empty() {
        "Up to date.".to_string()
    } else {
        let mut s = parts.join(", ");
        s.replace_range(..1, &s[..1].to_uppercase());
        s + "."
    };
    if report.copied_from.is_some() {
        // a restored backup or a copied database: it now syncs as a device of its own
        format!(
            "This device's data was copied from another device; it now syncs as a device of its own. {sentence}"
        )
    } else {
        sentence
    }
}

impl SyncWatch {
    /// Start watching the database at `database`.
    pub fn start(database: PathBuf) -> std::io::Result<SyncWatch> {
        let inner = Arc::new(Inner {
            view: Mutex::default(),
            changes: AtomicU64::new(0),
        });
        let (signal, signals) = mpsc::channel();
        let thread_inner = inner.clone();
        let thread = std::thread::Builder::new()
            .name("sync".into())
            .spawn(move || run(&database, &thread_inner, &signals))?;
        Ok(SyncWatch {
            inner,
            signal,
            thread: Mutex::new(Some(thread)),
        })
    }

    pub fn view(&self) -> SyncView {
        lock(&self.inner.view).clone()
    }

    /// How many rounds changed something here (the window reloads its lists when it grows).
    pub fn changes(&self) -> u64 {
        self.inner.changes.load(Ordering::Relaxed)
    }

    /// Run a round as soon as possible (the folder was set, or the user asked).
    pub fn sync_now(&self) {
        let _ = self.signal.send(Signal::Now);
    }

    pub fn stop(&self) {
        let _ = self.signal.send(Signal::Stop);
        if let Some(thread) = lock(&self.thread).take() {
            let _ = thread.join();
        }
    }
}

fn run(database: &Path, inner: &Inner, signals: &mpsc::Receiver<Signal>) {
    let mut store: Option<Store> = None;
    let mut last_round: Option<(PathBuf, Instant)> = None;
    let mut last_seen = Vec::new();
    let mut unsent_before = None;
    let mut asked = true;
    loop {
        if store.is_none() {
            match Store::open(database) {
                Ok(opened) => store = Some(opened.store),
                Err(e) => {
                    tracing::warn!(code = e.code(), error = %e, "sync: the database cannot be opened")
                }
            }
        }
        if let Some(store) = &store {
            look(
                store,
                inner,
                &mut last_round,
                &mut last_seen,
                &mut unsent_before,
                asked,
            );
        }
        asked = match signals.recv_timeout(LOOK_INTERVAL) {
            Ok(Signal::Now) => true,
            Ok(Signal::Stop) | Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => false,
        };
    }
}

fn look(
    store: &Store,
    inner: &Inner,
    last_round: &mut Option<(PathBuf, Instant)>,
    last_seen: &mut Vec<(String, u64, Option<std::time::SystemTime>)>,
    unsent_before: &mut Option<usize>,
    asked: bool,
) {
    // not syncing: nothing to count (the status reads every unsent change)
    match store.sync_folder() {
        Ok(Some(_)) => {}
        Ok(None) => {
            let mut view = lock(&inner.view);
            view.folder = None;
            view.syncing = false;
            *last_round = None;
            return;
        }
        Err(e) => {
            tracing::warn!(code = e.code(), error = %e, "sync: the folder setting is unreadable");
            return;
        }
    }
    let status = match store.sync_status() {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(code = e.code(), error = %e, "sync: status unreadable");
            return;
        }
    };
    {
        let mut view = lock(&inner.view);
        view.folder = status.folder.clone();
        view.device = Some(status.device.clone());
        view.unsent = status.unsent;
        view.waiting = status.waiting;
        view.devices = status.peers.len();
        view.last_round_at = status.last_round_at;
        if view.last_error.is_none() && view.last_outcome.is_none() {
            view.last_error = status.last_error.clone();
        }
    }
    let Some(folder) = status.folder.map(PathBuf::from) else {
        *last_round = None;
        return;
    };
    let seen = fingerprint(&folder, &status.device);
    let same_folder = last_round.as_ref().filter(|(f, _)| *f == folder);
    let run_now = due(
        asked,
        same_folder.is_some() && seen != *last_seen,
        status.unsent,
        *unsent_before,
        same_folder.map(|(_, at)| at.elapsed()),
    );
    *unsent_before = Some(status.unsent);
    if !run_now {
        return;
    }
    lock(&inner.view).syncing = true;
    let result = store.sync_round(&folder);
    // a round can give this device a new id (a copied database): its own directory is then
    // another, and the old one is another device's
    let device = match &result {
        Ok(report) => report.device.clone(),
        Err(_) => status.device.clone(),
    };
    let mut view = lock(&inner.view);
    view.syncing = false;
    view.last_round_at = Some(memory::types::now_ms());
    match result {
        Ok(report) => {
            if report.applied_records > 0 {
                inner.changes.fetch_add(1, Ordering::Relaxed);
            }
            view.last_outcome = Some(outcome_sentence(&report));
            view.last_error = (!report.notices.is_empty()).then(|| {
                report
                    .notices
                    .iter()
                    .map(|n| format!("{}: {}", n.file, n.message))
                    .collect::<Vec<_>>()
                    .join(" ")
            });
            tracing::info!(
                sent = report.wrote_records,
                received = report.applied_records,
                skipped = report.notices.len(),
                "sync round"
            );
        }
        Err(e) => {
            tracing::warn!(code = e.code(), error = %e, "sync round failed");
            view.last_outcome = None;
            view.last_error = Some(e.to_string());
        }
    }
    drop(view);
    *last_seen = fingerprint(&folder, &device);
    *last_round = Some((folder, Instant::now()));
    *unsent_before = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_waits_for_changes_to_settle() {
        let recent = Some(Duration::from_secs(1));
        assert!(!due(false, false, 0, Some(0), recent));
        // a change seen for the first time: wait a look for more
        assert!(!due(false, false, 3, Some(1), recent));
        assert!(due(false, false, 3, Some(3), recent));
        assert!(due(false, true, 0, Some(0), recent), "the folder changed");
        assert!(due(true, false, 0, Some(0), recent), "asked");
        assert!(
            due(false, false, 0, Some(0), None),
            "never synced with this folder"
        );
        assert!(due(false, false, 0, Some(0), Some(ROUND_INTERVAL)));
    }

    #[test]
    fn the_outcome_is_one_sentence() {
        let mut r = memory::SyncReport::default();
        assert_eq!(outcome_sentence(&r), "Up to date.");
        r.wrote_records = 2;
        r.applied_records = 5;
        assert_eq!(
            outcome_sentence(&r),
            "Sent 2 change(s), received 5 change(s)."
        );
        r.copied_from = Some("0123456789abcdef".into());
        assert!(
            outcome_sentence(&r).starts_with("This device's data was copied from another device")
        );
        assert!(outcome_sentence(&r).ends_with("Sent 2 change(s), received 5 change(s)."));
    }
}
