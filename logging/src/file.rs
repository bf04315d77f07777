//! The log file: `companion.log` in the log folder, rotated by size into `companion.log.1` …
//! `.4` (oldest dropped), so the log never takes more than about 5 MiB whatever happens.
//! Built on file-rotate (MIT), whose `BytesSurpassed` limit cuts only between two writes, so a
//! line is never split across files. Each event is written straight to the file (no buffer in
//! between): the last lines before a crash are the ones that matter.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use file_rotate::compression::Compression;
use file_rotate::suffix::AppendCount;
use file_rotate::{ContentLimit, FileRotate};

use crate::error::{Error, Result};

pub const LOG_FILE_NAME: &str = "companion.log";
/// Size at which the current file is rotated.
pub const MAX_FILE_BYTES: usize = 1024 * 1024;
/// Rotated files kept beside the current one.
pub const KEPT_FILES: usize = 4;

pub struct LogFile {
    path: PathBuf,
    inner: FileRotate<AppendCount>,
}

impl LogFile {
    /// Open (or create) the log in `dir`, creating the folder. Checked here rather than left to
    /// file-rotate, which panics on a folder it cannot create and drops writes to a file it
    /// cannot open.
    pub fn open(dir: &Path) -> Result<Self> {
        Self::open_with(dir, MAX_FILE_BYTES, KEPT_FILES)
    }

    pub fn open_with(dir: &Path, max_bytes: usize, kept: usize) -> Result<Self> {
        let io_error = |source| Error::Io {
            path: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io_error)?;
        private(dir).map_err(io_error)?;
        let path = dir.join(LOG_FILE_NAME);
        let mut options = OpenOptions::new();
        options.read(true).create(true).append(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        options.open(&path).map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        let inner = FileRotate::new(
            &path,
            AppendCount::new(kept),
            ContentLimit::BytesSurpassed(max_bytes.max(1)),
            Compression::None,
            Some(options),
        );
        Ok(LogFile { path, inner })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The log folder is the user's own: other accounts on the machine cannot list it.
fn private(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

impl Write for LogFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size_of_dir(dir: &Path) -> (usize, u64) {
        let mut files = 0;
        let mut bytes = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            files += 1;
            bytes += e.unwrap().metadata().unwrap().len();
        }
        (files, bytes)
    }

    #[test]
    fn the_log_is_rotated_by_size_and_capped() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogFile::open_with(dir.path(), 1000, 2).unwrap();
        let line = [b'x'; 99];
        for _ in 0..200 {
            log.write_all(&line).unwrap();
            log.write_all(b"\n").unwrap();
        }
        let (files, bytes) = size_of_dir(dir.path());
        assert_eq!(files, 3, "the current file and two rotated ones");
        assert!(bytes <= 3 * 1100, "{bytes} bytes kept");
        assert!(dir.path().join("companion.log.1").exists());
        assert!(dir.path().join("companion.log.2").exists());
    }

    #[test]
    fn a_folder_that_cannot_be_made_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("logs");
        std::fs::write(&blocker, b"a file where the folder should be").unwrap();
        let err = LogFile::open(&blocker).err().expect("refused");
        assert_eq!(err.code(), "log_io");
    }
}
