//! Which stores are writing to the database right now, so that a reply still `streaming` is
//! marked stopped only when the store that was writing it is gone — never because it merely
//! went quiet (a long prefill, a thermal pause), and never by another process that shares the
//! database (a document job, the CLI beside the app).
//!
//! Each open [`Store`](super::Store) holds an exclusive OS advisory lock (`flock` on Unix,
//! `LockFileEx` on Windows, through std's `File::try_lock`) on its own file
//! `NAME.writers/ID.lock` beside the database for as long as it lives; its streaming rows
//! record `ID`. The kernel drops the lock when the process ends, however it ends (SIGKILL and
//! power loss included), so "the lock can be taken" means "the writer is gone", with no clock
//! involved. This is SQLite's own trick for its `-shm` file (a lock held for the life of the
//! connection tells others it is alive), applied one level up.
//!
//! `flock` locks belong to the open file, not the process: two stores in one process (the
//! app's commands and its worker) see each other as alive, as they should.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

const EXTENSION: &str = "lock";
/// A lock file is created under this suffix, locked, and only then renamed to its final
/// name, so that no other store can find it unlocked and take its owner for dead.
const PENDING: &str = ".pending";

/// This store's claim to be alive: the locked file, removed when the store is dropped.
#[derive(Debug)]
pub(crate) struct WriterLock {
    id: String,
    path: PathBuf,
    // held for its lock; closing it (drop, exit, crash) releases the lock
    _file: File,
}

impl WriterLock {
    /// Create and lock a new writer file in `dir`.
    pub(crate) fn acquire(dir: &Path) -> Result<WriterLock> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
        // another store's sweep may remove a pending file between its creation and its
        // lock; a few fresh names make that harmless
        let mut last_error = None;
        for _ in 0..8 {
            let id = uuid::Uuid::new_v4().to_string();
            let pending = dir.join(format!("{id}.{EXTENSION}{PENDING}"));
            let path = dir.join(format!("{id}.{EXTENSION}"));
            let file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&pending)
                .map_err(|e| Error::io("create", &pending, e))?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    last_error = Some(std::io::Error::from(ErrorKind::WouldBlock));
                    continue;
                }
                Err(TryLockError::Error(e)) => return Err(Error::io("lock", &pending, e)),
            }
            match std::fs::rename(&pending, &path) {
                Ok(()) => {
                    return Ok(WriterLock {
                        id,
                        path,
                        _file: file,
                    });
                }
                Err(e) if e.kind() == ErrorKind::NotFound => last_error = Some(e),
                Err(e) => return Err(Error::io("create", &path, e)),
            }
        }
        Err(Error::io(
            "lock",
            dir,
            last_error.unwrap_or_else(|| ErrorKind::Other.into()),
        ))
    }

    pub(crate) fn id(&self) -> &str {
        &self.id
    }
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        // removed while still locked: whoever opened it before sees it unlocked once we
        // close it, which is the truth by then
        if let Err(e) = std::fs::remove_file(&self.path)
            && e.kind() != ErrorKind::NotFound
        {
            tracing::debug!(path = %self.path.display(), error = %e, "cannot remove a writer lock file");
        }
    }
}

/// Whether the store with writer id `id` still holds its lock in `dir`. An id that is not
/// one of ours names no file and so no live writer. An unexpected error answers "alive": a
/// live reply must never be stopped by a mistake here.
pub(crate) fn is_alive(dir: &Path, id: &str) -> bool {
    if uuid::Uuid::try_parse(id).is_err() {
        return false;
    }
    probe(&dir.join(format!("{id}.{EXTENSION}")))
}

/// Remove the lock files of writers that are gone (a crash leaves them behind).
pub(crate) fn sweep(dir: &Path, own: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let id = name
            .strip_suffix(PENDING)
            .unwrap_or(&name)
            .strip_suffix(&format!(".{EXTENSION}"));
        if id.is_some_and(|id| id != own) {
            // probe removes the file of a writer found gone
            probe(&entry.path());
        }
    }
}

/// True when the file at `path` is locked by someone else; a file found unlocked is removed
/// (its owner is gone) while this probe holds its lock.
fn probe(path: &Path) -> bool {
    let file = match OpenOptions::new().write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return false,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot check a writer lock; assuming its writer is alive");
            return true;
        }
    };
    match file.try_lock() {
        Ok(()) => {
            let _ = std::fs::remove_file(path);
            false
        }
        Err(TryLockError::WouldBlock) => true,
        Err(TryLockError::Error(e)) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot check a writer lock; assuming its writer is alive");
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_alive_and_a_dropped_one_is_gone_and_swept() {
        let dir = tempfile::tempdir().unwrap();
        let a = WriterLock::acquire(dir.path()).unwrap();
        let b = WriterLock::acquire(dir.path()).unwrap();
        assert!(
            is_alive(dir.path(), a.id()),
            "another open file of this process"
        );
        let gone = b.id().to_string();
        // a crash leaves the file behind, unlocked: simulated by leaking none of the lock
        let leftover = dir.path().join(format!("{gone}.{EXTENSION}"));
        drop(b);
        std::fs::write(&leftover, b"").unwrap();
        std::fs::write(dir.path().join(format!("x.{EXTENSION}{PENDING}")), b"").unwrap();
        assert!(!is_alive(dir.path(), &gone));
        std::fs::write(&leftover, b"").unwrap();
        sweep(dir.path(), a.id());
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, [format!("{}.{EXTENSION}", a.id())]);
        assert!(!is_alive(dir.path(), "../../etc/passwd"));
    }
}
