//! Companion's log: one `tracing` subscriber, installed by the CLI and the app at start, that
//! writes a size-capped, rotating log file in the data folder (beside the database), plus a
//! panic hook that writes the panic and its backtrace there before the previous hook runs.
//!
//! The log is what a user can send us when something goes wrong, so it must never hold their
//! conversations: at the default level our crates log events, sizes, codes and paths, never the
//! text of a message, a prompt or a document (that is for `trace`, which a user turns on with
//! `COMPANION_LOG=trace` knowing what they do). Levels come from `COMPANION_LOG`, else
//! `RUST_LOG`, else [`DEFAULT_DIRECTIVES`] ([`filter`]).
//!
//! The shape follows tracing-subscriber's own `fmt` + `EnvFilter` examples; the file is
//! file-rotate's size-based rotation (tracing-appender rotates by time only, which does not cap
//! the size) — see [`file`].

pub mod error;
pub mod file;
pub mod filter;
pub mod panic;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tracing::Subscriber;

pub use error::{Error, Result};
pub use file::{KEPT_FILES, LOG_FILE_NAME, LogFile, MAX_FILE_BYTES};
pub use filter::DEFAULT_DIRECTIVES;
pub use panic::{Panic, catch_panic};

/// The log folder of the database at `database`: `logs/` beside it, in the data folder.
pub fn log_dir(database: &Path) -> PathBuf {
    database.with_file_name("logs")
}

/// An installed log: where it writes, and anything the user should hear about it.
#[derive(Debug, Clone)]
pub struct Logger {
    dir: PathBuf,
    path: PathBuf,
    notice: Option<String>,
}

impl Logger {
    /// The folder of the log files (the current one and the rotated ones).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file being written now.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Set when the level settings in the environment could not be read (the defaults are then
    /// used): a line for the user, since the log itself is where they would not look.
    pub fn notice(&self) -> Option<&str> {
        self.notice.as_deref()
    }
}

/// Install the log in `dir` as the process's subscriber, and the panic hook.
pub fn install(dir: &Path) -> Result<Logger> {
    let (logger, subscriber) = build(dir, None)?;
    tracing::subscriber::set_global_default(subscriber).map_err(|_| Error::AlreadyInstalled)?;
    panic::install_hook();
    if let Some(n) = &logger.notice {
        tracing::warn!(code = "log_filter", "{n}");
    }
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        pid = std::process::id(),
        "log started"
    );
    Ok(logger)
}

/// The same log for the calling thread only, until the guard is dropped, with `directives`
/// in place of the environment's when given: for tests, which cannot each own the process's
/// one global subscriber. No panic hook is installed.
pub fn install_for_thread(
    dir: &Path,
    directives: Option<&str>,
) -> Result<(Logger, tracing::subscriber::DefaultGuard)> {
    let (logger, subscriber) = build(dir, directives)?;
    let guard = tracing::subscriber::set_default(subscriber);
    Ok((logger, guard))
}

fn build(
    dir: &Path,
    directives: Option<&str>,
) -> Result<(Logger, impl Subscriber + Send + Sync + 'static)> {
    let file = LogFile::open(dir)?;
    let path = file.path().to_path_buf();
    let (filter, notice) = match directives {
        Some(d) => (filter::parse(d)?, None),
        None => filter::from_env(),
    };
    let subscriber = tracing_subscriber::fmt()
        .with_writer(Mutex::new(file))
        .with_ansi(false)
        .with_thread_names(true)
        .with_env_filter(filter)
        .finish();
    let logger = Logger {
        dir: dir.to_path_buf(),
        path,
        notice,
    };
    Ok((logger, subscriber))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_folder_is_beside_the_database() {
        assert_eq!(
            log_dir(Path::new("/data/companion/companion.db")),
            Path::new("/data/companion/logs")
        );
    }
}
