//! `companion conversations` on hostile exports and on ids an older Companion let into the
//! database: no model needed. An export's id that is not a UUID is replaced on import (with a
//! notice), and `list` and `search` show any id, however odd, without panicking.

use std::path::Path;
use std::process::Output;

use crate::support::{companion_db, ok};

fn companion(db: &Path, args: &[&str]) -> Output {
    companion_db(db, "conversations", args)
}

/// An export as Companion writes it, with conversation id `id`.
fn export(id: &str) -> String {
    serde_json::json!({
        "format": "companion.conversation",
        "version": 1,
        "conversation": {
            "id": id, "title": "Lighthouse", "createdAt": 1, "updatedAt": 2,
            "model": null, "settings": {}, "pinned": false
        },
        "messages": [{
            "seq": 0, "role": "user", "text": "the lighthouse keeper", "tokenCount": null,
            "status": "complete", "createdAt": 1, "updatedAt": 1, "timings": null
        }],
        "summaries": []
    })
    .to_string()
}

#[test]
fn an_import_with_a_non_ascii_or_path_id_gets_a_new_id_and_lists_and_searches() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    for bad in ["aéééééééé-lighthouse", "../../escaped"] {
        let file = dir.path().join("export.json");
        std::fs::write(&file, export(bad)).unwrap();
        let o = companion(&db, &["import", file.to_str().unwrap()]);
        let id = ok(&o).trim().to_string();
        assert_ne!(id, bad);
        assert!(uuid_like(&id), "{id}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("imported as"),
            "the user is told"
        );
    }
    assert_eq!(ok(&companion(&db, &["list"])).lines().count(), 2);
    assert_eq!(
        ok(&companion(&db, &["search", "keeper"])).lines().count(),
        2
    );
}

#[test]
fn list_and_search_show_a_non_ascii_id_already_in_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let file = dir.path().join("export.json");
    std::fs::write(&file, export("0f6c3c1e-2d0a-4c58-9a51-3b7c1c0e7a11")).unwrap();
    ok(&companion(&db, &["import", file.to_str().unwrap()]));
    // as an older Companion could have left it: an id cut at byte 8 falls inside a character
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "PRAGMA foreign_keys = OFF;
         UPDATE conversations SET id = 'aéééééééé';
         UPDATE messages SET conversation_id = 'aéééééééé';
         UPDATE search_index SET conversation_id = 'aéééééééé';",
    )
    .unwrap();
    drop(conn);
    let list = ok(&companion(&db, &["list"]));
    assert!(list.starts_with("aééééééé  Lighthouse"), "{list}");
    let hits = ok(&companion(&db, &["search", "keeper"]));
    assert!(hits.starts_with("aééééééé  Lighthouse"), "{hits}");
}

fn uuid_like(s: &str) -> bool {
    s.len() == 36 && s.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}
