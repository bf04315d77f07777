//! "Never lose a word": `companion chat` streaming replies into its database is killed with
//! SIGKILL at 20 pseudo-random moments. After each kill the database passes
//! `PRAGMA integrity_check`, every message another process saw committed before the kill is
//! still there unchanged, a reply seen mid-stream is still there with at least the text seen,
//! and the reply being streamed at the kill had been checkpointed with text; the next open
//! finds its writer gone and marks it stopped, text kept. How long before the kill its last
//! checkpoint was is printed (run with `--nocapture`), not asserted: that is a timing, and the
//! checkpoint interval itself is the recorder's (`memory::reply`). Real model
//! (`scripts/fetch-model`).

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OpenFlags};

#[derive(Debug, Clone, PartialEq)]
struct Row {
    conversation: String,
    seq: i64,
    role: String,
    status: String,
    text: String,
    updated_at: i64,
}

fn rows(db: &std::path::Path) -> rusqlite::Result<HashMap<i64, Row>> {
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    conn.busy_timeout(Duration::from_secs(2))?;
    let mut stmt = conn
        .prepare("SELECT id, conversation_id, seq, role, status, text, updated_at FROM messages")?;
    let out = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                Row {
                    conversation: r.get(1)?,
                    seq: r.get(2)?,
                    role: r.get(3)?,
                    status: r.get(4)?,
                    text: r.get(5)?,
                    updated_at: r.get(6)?,
                },
            ))
        })?
        .collect::<rusqlite::Result<HashMap<_, _>>>()?;
    Ok(out)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn sigkill_mid_reply_loses_nothing_committed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("companion.db");
    // everything seen committed so far, by message id
    let mut seen: HashMap<i64, Row> = HashMap::new();
    let mut seed: u64 = 0x2545_F491_4F6C_DD1D;
    let mut checkpoint_lags = Vec::new();
    for round in 0..20 {
        // xorshift: a fixed sequence of kill moments between 0.6 s and 3.0 s
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = Duration::from_millis(600 + seed % 2400);
        let mut child = Command::new(env!("CARGO_BIN_EXE_companion"))
            .args(["chat", "--db", db.to_str().unwrap(), "--max-tokens", "200"])
            .args(["--seed", &round.to_string(), "--threads", "1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("companion runs");
        {
            let mut stdin = child.stdin.take().unwrap();
            for i in 0..6 {
                writeln!(
                    stdin,
                    "Round {round}, question {i}: tell me a long story about a lighthouse keeper."
                )
                .unwrap();
            }
            // stdin stays open until the kill: the chat never reaches its end
            std::mem::forget(stdin);
        }
        let start = Instant::now();
        while start.elapsed() < delay {
            if let Ok(now) = rows(&db) {
                seen.extend(now);
            }
            std::thread::sleep(Duration::from_millis(40));
        }
        child.kill().unwrap(); // SIGKILL
        let killed_at = now_ms();
        child.wait().unwrap();

        // as the kill left it, before any recovery runs
        let at_kill = rows(&db).unwrap();
        let store = memory::Store::open(&db)
            .expect("the database opens after a kill")
            .store;
        assert_eq!(store.integrity_check().unwrap(), "ok", "round {round}");
        drop(store);
        let after = rows(&db).unwrap();
        for (id, before) in &seen {
            let now = after
                .get(id)
                .unwrap_or_else(|| panic!("round {round}: message {id} ({before:?}) is gone"));
            assert_eq!(
                (&now.conversation, now.seq, &now.role),
                (&before.conversation, before.seq, &before.role),
                "round {round}"
            );
            if before.status == "streaming" {
                assert!(
                    now.text.starts_with(&before.text),
                    "round {round}: reply {id} lost text"
                );
            } else {
                assert_eq!(
                    (&now.status, &now.text),
                    (&before.status, &before.text),
                    "round {round}"
                );
            }
        }
        // the reply in flight at the kill (the newest message, if it was still streaming with
        // text): its writer is gone, so the open above stopped it, keeping every word
        if let Some((id, newest)) = at_kill.iter().max_by_key(|(id, _)| **id)
            && newest.status == "streaming"
            && !newest.text.is_empty()
        {
            checkpoint_lags.push(killed_at - newest.updated_at);
            let recovered = &after[id];
            assert_eq!(
                (recovered.status.as_str(), &recovered.text),
                ("stopped", &newest.text),
                "round {round}: the killed writer's reply"
            );
        }
        seen.extend(after);
    }
    checkpoint_lags.sort();
    eprintln!(
        "20 kills: {} messages kept; the streaming reply at the kill was checkpointed {:?} ms before it",
        seen.len(),
        checkpoint_lags
    );
    assert!(
        checkpoint_lags.len() >= 5,
        "replies were caught mid-stream, checkpointed with text: {checkpoint_lags:?}"
    );
}
