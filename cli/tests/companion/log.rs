//! The CLI's log as a user meets it: it is written beside the database (`--db`, else
//! `$COMPANION_DB`), `doctor` says where, an error line carries its code and the log the same
//! code, and at the default level the log never holds what the user typed or the model wrote.
//! The chat test runs on the real default model (`scripts/fetch-model`).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::support::stderr;

fn companion(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_companion"));
    // the default levels, whatever the developer's shell has
    c.env_remove("COMPANION_LOG").env_remove("RUST_LOG");
    c.env("COMPANION_DB", dir.join("companion.db"));
    c
}

fn log_of(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("logs").join("companion.log")).unwrap_or_default()
}

#[test]
fn doctor_prints_the_log_file_beside_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let expected = dir.path().join("logs").join("companion.log");
    let o = companion(dir.path())
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["logFile"], expected.to_str().unwrap());
    let o = companion(dir.path()).arg("doctor").output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.starts_with("log "))
        .unwrap_or_else(|| panic!("no log line in:\n{out}"));
    assert!(line.ends_with(expected.to_str().unwrap()), "{line}");
    assert!(log_of(dir.path()).contains("log started"));
}

#[test]
fn an_error_line_carries_its_code_and_the_log_has_the_same_code() {
    let dir = tempfile::tempdir().unwrap();
    // --db wins over $COMPANION_DB: the log goes beside the database named
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let o = companion(dir.path())
        .args(["conversations", "--db"])
        .arg(other.join("c.db"))
        .args(["show", "no-such-conversation"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.starts_with("error [conversation_not_found]: "), "{err}");
    let log = log_of(&other);
    let line = log
        .lines()
        .find(|l| l.contains("the command failed"))
        .unwrap_or_else(|| panic!("no error line in the log:\n{log}"));
    assert!(line.contains("ERROR"), "{line}");
    assert!(line.contains(r#"code="conversation_not_found""#), "{line}");
    assert!(!log_of(dir.path()).contains("the command failed"));
}

/// The snapshot folder cannot be made (a file is where it should be): the reply is saved, the
/// snapshot is not, and the log says so with the error's code — and holds neither the user's
/// message nor the reply.
#[test]
fn a_failed_snapshot_is_a_logged_warning_and_the_log_holds_no_message_text() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    std::fs::write(dir.path().join("c.db.snapshots"), b"not a folder").unwrap();
    let secret = "My locker code is pineapple-4417, remember it.";
    let mut child = companion(dir.path())
        .args([
            "chat",
            "--temperature",
            "0",
            "--max-tokens",
            "12",
            "--context",
            "1024",
        ])
        .arg("--db")
        .arg(&db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "{secret}").unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let reply = String::from_utf8_lossy(&o.stdout).trim().to_string();

    let log = log_of(dir.path());
    println!("the log after a failed snapshot:\n{log}");
    let warning = log
        .lines()
        .find(|l| l.contains("snapshot not saved"))
        .unwrap_or_else(|| panic!("no snapshot warning in the log:\n{log}"));
    assert!(warning.contains(" WARN "), "{warning}");
    assert!(warning.contains(r#"code="io""#), "{warning}");
    for text in ["pineapple", "locker", "remember it"] {
        assert!(!log.contains(text), "{text:?} is in the log:\n{log}");
    }
    // the reply's words (a few long ones: short ones like "the" are in any log)
    for word in reply.split_whitespace().filter(|w| w.len() >= 8) {
        assert!(
            !log.contains(word),
            "the reply's {word:?} is in the log:\n{log}"
        );
    }
}
