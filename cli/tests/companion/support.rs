//! Helpers the modules share: running the binary and reading what it printed.

use std::path::Path;
use std::process::{Command, Output};

/// `companion ARGS…`, run to completion.
pub fn companion(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_companion"))
        .args(args)
        .output()
        .expect("the binary runs")
}

/// `companion COMMAND --db DB ARGS…`, run to completion.
pub fn companion_db(db: &Path, command: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_companion"))
        .arg(command)
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .expect("the binary runs")
}

/// The stdout of a command that must have succeeded.
pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The one JSON object a command that must have succeeded printed.
pub fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("one JSON object")
}

/// A user-facing failure: non-zero exit, one line starting with `error [code]:`, no panic text.
pub fn assert_clean_failure(o: &Output, needle: &str) {
    let err = stderr(o);
    assert!(!o.status.success(), "expected failure, got success: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {err}");
    assert!(lines[0].starts_with("error ["), "{err}");
    assert!(err.contains(needle), "expected {needle:?} in: {err}");
}
