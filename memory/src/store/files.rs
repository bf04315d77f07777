//! The file operations the KV snapshot files (and the picture files, `images.rs`) need, behind
//! a small trait: the store uses the operating system's ([`OsFiles`]); a power-loss test puts a
//! file system under it that loses whatever was not synced when it "crashes"
//! (memory/tests/memory/power_loss/). The durable write is the classic one (as SQLite's own
//! journal handling and `rename(2)`-based editors do it): write a temporary file, sync it,
//! rename it over the target, sync the folder — so after a crash the name holds either the old
//! bytes or the new ones, whole, and once the call returns the new ones survive power loss.

use std::io;
use std::path::Path;

/// File operations on whole files; see the module docs.
pub trait SnapshotFiles: Send + Sync + std::fmt::Debug {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Create or truncate `path`, write `bytes`, and sync the file's data to the device.
    fn write_synced(&self, path: &Path, bytes: &[u8]) -> io::Result<()>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Make the folder's entries (files created, renamed, removed in it) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// The file's size in bytes (by default by reading it: a file system that can say it
    /// without reading overrides this).
    fn size(&self, path: &Path) -> io::Result<u64> {
        self.read(path).map(|bytes| bytes.len() as u64)
    }
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// The names of the folder's entries; a missing folder has none.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
}

/// The operating system's files.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsFiles;

impl SnapshotFiles for OsFiles {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn write_synced(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::File::create(path)?;
        f.write_all(bytes)?;
        f.sync_all()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        // a folder is opened and synced like a file on Unix; Windows cannot open one, and
        // NTFS journals its metadata, so there is nothing to do there
        #[cfg(unix)]
        std::fs::File::open(dir)?.sync_all()?;
        #[cfg(not(unix))]
        let _ = dir;
        Ok(())
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn size(&self, path: &Path) -> io::Result<u64> {
        std::fs::metadata(path).map(|m| m.len())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        match std::fs::read_dir(dir) {
            Ok(entries) => Ok(entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }
}

/// Write `bytes` durably as `dir/name` (see the module docs), creating `dir` (durably too) if
/// needed. `tmp` is the temporary name used on the way.
pub(crate) fn write_durably(
    files: &dyn SnapshotFiles,
    dir: &Path,
    name: &str,
    tmp: &str,
    bytes: &[u8],
) -> io::Result<()> {
    files.create_dir_all(dir)?;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        files.sync_dir(parent)?;
    }
    let tmp = dir.join(tmp);
    let written = files
        .write_synced(&tmp, bytes)
        .and_then(|()| files.rename(&tmp, &dir.join(name)));
    if let Err(e) = written {
        let _ = files.remove(&tmp);
        return Err(e);
    }
    files.sync_dir(dir)
}
