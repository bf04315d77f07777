//! A document far larger than a summarization job may hold is read as a stream: the job's
//! memory does not grow with the file. Its own test binary (so its own process), because it
//! measures this process's peak RSS (`VmHWM`, reset through `/proc/self/clear_refs`).
//!
//! Peaks are compared with peaks: the big document's against a small one's, each measured from
//! a reset. The RSS at a single moment is no baseline, because the engine's thread may still be
//! giving buffers back to the kernel when a job returns (the resident size then differs by
//! ~18 MB from one run to the next while the peaks stay the same).

#![cfg(target_os = "linux")]

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use chat::{DocumentJob, DocumentParams, Error};
use engine::{EngineConfig, EngineHandle};
use memory::Store;

/// Kilobytes on the `/proc/self/status` line starting with `key`.
fn status_kb(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with(key)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Start `VmHWM` again from the present resident size.
fn reset_peak() {
    std::fs::write("/proc/self/clear_refs", "5").expect("the peak RSS can be reset");
}

#[test]
fn a_document_of_many_megabytes_is_summarized_in_memory_that_does_not_grow_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let genesis = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/documents/genesis-1-32-kjv.txt"),
    )
    .unwrap();
    // 16 MB of text, about 4.2 million tokens: written in pieces, never held whole here
    let path = dir.path().join("big.txt");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    for copy in 0..127 {
        writeln!(file, "Copy {copy}.\n\n{genesis}\n").unwrap();
    }
    file.into_inner().unwrap().sync_all().unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size > 16_000_000, "{size} bytes");

    let engine = EngineHandle::spawn(EngineConfig {
        model_path: companion_tests::model_path(),
        context: 1024,
        warm_up: false,
        ..EngineConfig::default()
    })
    .unwrap();
    let store = Store::open(dir.path().join("c.db")).unwrap().store;
    let cancel = AtomicBool::new(false);
    let job = DocumentJob {
        engine: &engine,
        store: &store,
        params: DocumentParams {
            context: 1024,
            summary_tokens: 32,
            // what this test watches is the document's size; a speculative check's logits come
            // and go with what is drafted (the memory guard counts them: cli/tests/companion/
            // memory.rs measures that)
            speculation: engine::Speculation::Off,
            ..DocumentParams::default()
        },
        cancel: &cancel,
    };
    // a small document first, so that the session's KV cache and the forward pass's buffers
    // exist; then another of the same size, whose peak is what one chunk's summary costs
    let warm_up = dir.path().join("warm-up.txt");
    std::fs::write(&warm_up, &genesis[..4000]).unwrap();
    job.run(&warm_up, |_| {}).unwrap();
    let small = dir.path().join("small.txt");
    std::fs::write(&small, &genesis[4000..8000]).unwrap();
    reset_peak();
    job.run(&small, |_| {}).unwrap();
    let small_peak = status_kb("VmHWM:");
    reset_peak();

    let mut total = 0;
    // the whole file is read once to count its chunks, then the first chunk is summarized
    let err = job
        .run(&path, |p| {
            total = p.total;
            if p.done == 1 {
                cancel.store(true, Ordering::Relaxed);
            }
        })
        .unwrap_err();
    assert!(matches!(err, Error::Cancelled { done: 1, .. }), "{err}");
    let grew_mb = status_kb("VmHWM:").saturating_sub(small_peak) as f64 / 1024.0;
    eprintln!(
        "{:.1} MB file, {total} summaries planned, peak RSS {grew_mb:.1} MB above a 4 kB document's",
        size as f64 / 1e6
    );
    assert!(total > 5000, "{total} summaries planned");
    // holding the file's bytes, or its text, even once would add 16 MB; the chunking window,
    // the tokenizer's cache and SQLite's pages stay well under half of that
    assert!(
        grew_mb < 8.0,
        "peak RSS {grew_mb:.1} MB above a 4 kB document's for a {size}-byte file"
    );
    let doc = store
        .documents()
        .unwrap()
        .into_iter()
        .find(|d| d.byte_count == size)
        .unwrap();
    assert_eq!(store.chunk_summaries(doc.id).unwrap().len(), 1);
}
