//! The CLI's log and its error lines. The log (crate `logging`) goes in the data folder, or
//! beside the database that `--db` names, so a run on a test database logs beside it. Every
//! failure is printed as `error [code]: message`, where `code` is the short stable code of the
//! error's type (the same codes the app shows), and the same code is written to the log, so a
//! user's pasted line leads to the log line.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

static LOG_FILE: OnceLock<PathBuf> = OnceLock::new();

/// Install the log for the database at `database`. A CLI without a log still works: the
/// problem is said once on stderr.
pub fn install(database: &Path) {
    match logging::install(&logging::log_dir(database)) {
        Ok(logger) => {
            if let Some(n) = logger.notice() {
                eprintln!("notice: {n}");
            }
            let _ = LOG_FILE.set(logger.path().to_path_buf());
        }
        Err(e) => eprintln!("notice: no log is written: {e}"),
    }
}

/// The file this process logs to, if it has a log.
pub fn log_file() -> Option<&'static Path> {
    LOG_FILE.get().map(PathBuf::as_path)
}

/// The code of the first error in the chain that has one; `cli` for the CLI's own.
pub fn error_code(e: &anyhow::Error) -> String {
    e.chain()
        .find_map(|cause| {
            if let Some(e) = cause.downcast_ref::<chat::Error>() {
                Some(e.code().to_string())
            } else if let Some(e) = cause.downcast_ref::<engine::Error>() {
                Some(e.code().to_string())
            } else if let Some(e) = cause.downcast_ref::<memory::Error>() {
                Some(e.code().to_string())
            } else if let Some(e) = cause.downcast_ref::<documents::Error>() {
                Some(e.code().to_string())
            } else {
                cause
                    .downcast_ref::<agent::Error>()
                    .map(|e| e.code().to_string())
            }
        })
        .unwrap_or_else(|| "cli".to_string())
}

/// Print `error [code]: message` and log the code. The message itself is not logged: it can
/// quote what the user typed (a path, a conversation's title).
pub fn report(code: &str, message: &str) {
    tracing::error!(code, "the command failed");
    eprintln!("error [{code}]: {message}");
}
