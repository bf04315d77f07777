//! `companion summarize` as a user meets it, on the real default model: a 30,000-token
//! document summarized to completion at context 2048 within the memory the engine needs at
//! that context (peak RSS, `VmHWM`, as `--json` reports it), then answered from the database
//! without summarizing anything again (how fast that is gets printed, not asserted);
//! and the inputs it must refuse, each with its one-line error before the model is loaded.
//! The long document takes a few minutes on two cores: 17 chunks of ~1,900 tokens to prefill.

use std::path::{Path, PathBuf};

use crate::support::{companion, json};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/documents")
        .join(name)
}

#[cfg(target_os = "linux")]
#[test]
fn a_30000_token_document_is_summarized_at_context_2048_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let db = db.to_str().unwrap();
    let file = fixture("genesis-1-32-kjv.txt");
    let file = file.to_str().unwrap();
    let args = [
        "summarize",
        file,
        "--json",
        "--context",
        "2048",
        "--summary-tokens",
        "48",
        "--db",
        db,
    ];
    let out = companion(&args);
    let run = json(&out);
    let tokens = run["inputTokens"].as_u64().unwrap();
    let chunks = run["chunks"].as_u64().unwrap();
    let peak = run["peakRssBytes"].as_u64().expect("peak RSS on Linux");
    eprintln!(
        "{tokens} tokens, {chunks} chunks, {} levels, {:.1} s, {:.1} input tokens/s, peak RSS {:.1} MB",
        run["levels"],
        run["seconds"].as_f64().unwrap(),
        run["inputTokensPerSecond"].as_f64().unwrap(),
        peak as f64 / 1e6
    );
    assert!(tokens >= 30_000, "only {tokens} tokens");
    // every chunk fits the context beside instruction and summary
    assert!(chunks * 2048 >= tokens && chunks >= 16, "{chunks} chunks");
    assert!(run["levels"].as_u64().unwrap() >= 2);
    assert_eq!(run["fromStore"], false);
    assert!(!run["summary"].as_str().unwrap().trim().is_empty());
    let stored = run["chunkSummaries"].as_array().unwrap();
    assert_eq!(
        stored.iter().filter(|c| c["level"] == 0).count() as u64,
        chunks
    );
    // The bound: what the engine needs at this context (the memory guard's estimate, within
    // 15% of peak RSS by cli/tests/companion/memory.rs) plus 32 MB for the document's window, SQLite's
    // cache and the chunk being summarized. That memory does not grow with the document's
    // size is tested on a 16 MB file in tests/tests/end_to_end/document_memory.rs.
    let doctor = json(&companion(&["doctor", "--json", "--context", "2048"]));
    let estimate = doctor["model"]["estimate"]["totalBytes"].as_u64().unwrap();
    let bound = estimate * 115 / 100 + (32 << 20);
    assert!(peak <= bound, "peak RSS {peak} over {bound}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{chunks}/")) && stderr.contains(" summaries"),
        "{stderr}"
    );

    // the same content again: from the database, nothing generated (no summary row is
    // written again: the rows and the times they were made are unchanged)
    let stored_rows = || -> Vec<(i64, i64, i64)> {
        let conn = rusqlite::Connection::open(db).unwrap();
        let mut stmt = conn
            .prepare("SELECT level, idx, created_at FROM document_chunks ORDER BY level, idx")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    };
    let rows_before = stored_rows();
    let again = json(&companion(&args));
    assert_eq!(again["fromStore"], true);
    assert_eq!(again["summary"], run["summary"]);
    assert_eq!(again["chunkSummaries"], run["chunkSummaries"]);
    assert_eq!(stored_rows(), rows_before, "summaries were made again");
    eprintln!(
        "answered from the database in {:.2} s (the first run took {:.1} s)",
        again["seconds"].as_f64().unwrap_or(f64::NAN),
        run["seconds"].as_f64().unwrap_or(f64::NAN)
    );
}

/// A refused input: non-zero exit, one line `error [code]: …` naming the problem, no panic.
fn assert_refused(args: &[&str], needle: &str) {
    let o = companion(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with("error [") && lines[0].contains(needle),
        "{err}"
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn bad_inputs_get_their_messages() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let db = db.to_str().unwrap();
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, b"").unwrap();
    assert_refused(
        &["summarize", empty.to_str().unwrap(), "--db", db],
        "empty.txt is empty",
    );
    let binary = dir.path().join("a.out");
    std::fs::write(&binary, b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00").unwrap();
    assert_refused(
        &["summarize", binary.to_str().unwrap(), "--db", db],
        "looks like a binary file",
    );
    assert_refused(
        &[
            "summarize",
            fixture("scanned.pdf").to_str().unwrap(),
            "--db",
            db,
        ],
        "has no extractable text (and no page pictures to read)",
    );
    let missing = dir.path().join("missing.md");
    assert_refused(
        &["summarize", missing.to_str().unwrap(), "--db", db],
        "cannot read",
    );
    assert_refused(
        &[
            "summarize",
            fixture("report.html").to_str().unwrap(),
            "--db",
            db,
            "--context",
            "256",
        ],
        "context is too small",
    );
}
