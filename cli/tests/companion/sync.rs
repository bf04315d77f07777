//! `companion sync` between two databases through one folder, as two devices would use it:
//! what one imports, renames and pins, the other lists and shows the same.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::{companion_db, ok};

/// `args[0]` is the command.
fn companion(db: &Path, args: &[&str]) -> Output {
    let (command, rest) = args.split_first().unwrap();
    companion_db(db, command, rest)
}

fn export() -> String {
    serde_json::json!({
        "format": "companion.conversation",
        "version": 1,
        "conversation": {
            "id": "0f6c3c1e-2d0a-4c58-9a51-3b7c1c0e7a11", "title": "Lighthouse",
            "createdAt": 1_764_000_000_000_i64, "updatedAt": 1_764_000_100_000_i64,
            "model": "gemma-3-270m", "settings": {"temperature": 0.7}, "pinned": false
        },
        "messages": [
            {"seq": 0, "role": "user", "text": "Who keeps the lighthouse?", "tokenCount": null,
             "status": "complete", "createdAt": 1_764_000_000_000_i64,
             "updatedAt": 1_764_000_000_000_i64, "timings": null},
            {"seq": 1, "role": "assistant", "text": "A keeper, every night since 1890.",
             "tokenCount": null, "status": "stopped", "createdAt": 1_764_000_001_000_i64,
             "updatedAt": 1_764_000_002_000_i64, "timings": null}
        ],
        "summaries": []
    })
    .to_string()
}

#[test]
fn two_databases_sync_through_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let (mac, phone) = (dir.path().join("mac.db"), dir.path().join("phone.db"));
    let folder = dir.path().join("iCloud Drive");
    std::fs::create_dir(&folder).unwrap();
    let f = folder.to_str().unwrap();

    // before any round there is no folder to use: said in one line
    let o = companion(&mac, &["sync"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--folder"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let o = companion(&mac, &["sync", "--folder", "/nonexistent/folder"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not exist"));

    let file = dir.path().join("export.json");
    std::fs::write(&file, export()).unwrap();
    ok(&companion(
        &mac,
        &["conversations", "import", file.to_str().unwrap()],
    ));
    ok(&companion(
        &mac,
        &["conversations", "rename", "0f6c", "The lighthouse"],
    ));
    ok(&companion(&mac, &["conversations", "pin", "0f6c"]));
    let out = ok(&companion(&mac, &["sync", "--folder", f]));
    assert!(out.contains("wrote: 3 changes"), "{out}");
    let out = ok(&companion(&phone, &["sync", "--folder", f]));
    assert!(
        out.contains("applied: 1 file from other devices, 3 changes"),
        "{out}"
    );

    let list = |db: &Path| ok(&companion(db, &["conversations", "list", "--json"]));
    let show = |db: &Path| ok(&companion(db, &["conversations", "show", "0f6c", "--json"]));
    assert_eq!(list(&mac), list(&phone));
    assert_eq!(show(&mac), show(&phone));
    assert!(list(&phone).contains("The lighthouse"));

    // the phone unpins; the folder is remembered from the last round
    ok(&companion(&phone, &["conversations", "unpin", "0f6c"]));
    ok(&companion(&phone, &["sync"]));
    ok(&companion(&mac, &["sync"]));
    assert_eq!(list(&mac), list(&phone));
    assert!(list(&mac).contains("\"pinned\": false"));

    let status: serde_json::Value =
        serde_json::from_str(&ok(&companion(&mac, &["sync", "status", "--json"]))).unwrap();
    assert_eq!(status["unsent"], 0);
    assert_eq!(status["peers"].as_array().unwrap().len(), 1);
    assert_eq!(status["folder"], f);
    // as a user types it: the database after `status`
    let o = Command::new(env!("CARGO_BIN_EXE_companion"))
        .args(["sync", "status", "--db"])
        .arg(&mac)
        .output()
        .unwrap();
    let text = ok(&o);
    assert!(text.contains("other device"), "{text}");

    // deleted on one, gone on the other
    ok(&companion(&mac, &["conversations", "delete", "0f6c"]));
    ok(&companion(&mac, &["sync"]));
    ok(&companion(&phone, &["sync"]));
    assert_eq!(list(&phone).trim(), "[]");
}

/// A database file copied to a second device (or a backup restored there) while the first
/// writes on: the copy says so in one line, takes an id of its own, and both end the same.
#[test]
fn a_copied_database_says_so_and_syncs_as_a_device_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let (mac, copy) = (dir.path().join("mac.db"), dir.path().join("copy.db"));
    let folder = dir.path().join("iCloud Drive");
    std::fs::create_dir(&folder).unwrap();
    let f = folder.to_str().unwrap();
    let file = dir.path().join("export.json");
    std::fs::write(&file, export()).unwrap();
    ok(&companion(
        &mac,
        &["conversations", "import", file.to_str().unwrap()],
    ));
    ok(&companion(&mac, &["sync", "--folder", f]));
    std::fs::copy(&mac, &copy).unwrap();

    ok(&companion(
        &mac,
        &["conversations", "rename", "0f6c", "Renamed after the copy"],
    ));
    ok(&companion(&mac, &["sync"]));
    let out = ok(&companion(&copy, &["sync", "--folder", f]));
    assert!(out.contains("this database is a copy of device"), "{out}");
    let list = |db: &Path| ok(&companion(db, &["conversations", "list", "--json"]));
    assert!(list(&copy).contains("Renamed after the copy"));

    // the next rounds are ordinary ones, and the two are two devices
    let out = ok(&companion(&copy, &["sync"]));
    assert!(!out.contains("copy of device"), "{out}");
    ok(&companion(&mac, &["sync"]));
    assert_eq!(list(&mac), list(&copy));
    let id = |db: &Path| -> String {
        let s: serde_json::Value =
            serde_json::from_str(&ok(&companion(db, &["sync", "status", "--json"]))).unwrap();
        s["device"].as_str().unwrap().to_string()
    };
    assert_ne!(id(&mac), id(&copy));
}
