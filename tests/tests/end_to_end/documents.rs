//! Document summarization on the real model, through `chat::DocumentJob`: a cancelled job
//! resumed ends with exactly the chunk summaries of an uninterrupted one (greedy decoding is
//! deterministic, and stored summaries are reused by level and index); a PDF and a Chinese
//! (GB18030) text go through map and reduce; a finished document is answered from the store
//! unless forced. The 30,000-token document and the bad inputs are in cli/tests/summarize.rs,
//! where peak RSS and the one-line errors of the binary can be seen.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use chat::{DocumentJob, DocumentParams, DocumentSummary, Error, JobProgress};
use engine::{EngineConfig, EngineHandle};
use memory::Store;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/documents")
        .join(name)
}

fn engine(context: usize) -> EngineHandle {
    EngineHandle::spawn(EngineConfig {
        model_path: companion_tests::model_path(),
        context,
        warm_up: false,
        ..EngineConfig::default()
    })
    .expect("the default model loads")
}

fn run(
    engine: &EngineHandle,
    store: &Store,
    params: DocumentParams,
    path: &Path,
    cancel: &AtomicBool,
    on_progress: impl FnMut(&JobProgress),
) -> Result<DocumentSummary, Error> {
    DocumentJob {
        engine,
        store,
        params,
        cancel,
    }
    .run(path, on_progress)
}

fn params(context: usize, summary_tokens: usize) -> DocumentParams {
    DocumentParams {
        context,
        summary_tokens,
        ..DocumentParams::default()
    }
}

#[test]
fn cancel_then_resume_ends_with_the_chunk_summaries_of_an_uninterrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    // the opening of Genesis: about 900 tokens, four chunks at this context, then a level above
    let text = std::fs::read_to_string(fixture("genesis-1-32-kjv.txt")).unwrap();
    let cut = text.find("Genesis 3\n").expect("chapter 3");
    let path = dir.path().join("genesis-1-2.txt");
    std::fs::write(&path, &text[..cut]).unwrap();
    let params = params(448, 40);
    let engine = engine(448);
    let never = AtomicBool::new(false);

    let whole_store = Store::open(dir.path().join("whole.db")).unwrap().store;
    let whole = run(&engine, &whole_store, params.clone(), &path, &never, |_| {}).unwrap();
    assert!(whole.chunks >= 3, "{} chunks", whole.chunks);
    assert!(whole.levels >= 2, "{} levels", whole.levels);

    let store = Store::open(dir.path().join("resumed.db")).unwrap().store;
    let cancel = AtomicBool::new(false);
    let mut seen = Vec::new();
    let err = run(&engine, &store, params.clone(), &path, &cancel, |p| {
        seen.push(p.clone());
        if p.done == 2 {
            cancel.store(true, Ordering::Relaxed);
        }
    })
    .unwrap_err();
    assert!(matches!(err, Error::Cancelled { done: 2, .. }), "{err}");
    assert!(seen.windows(2).all(|w| w[0].done <= w[1].done));
    assert!(seen.iter().any(|p| p.remaining_seconds.is_some()));
    let doc = store.documents().unwrap().pop().expect("the job is stored");
    assert_eq!(store.chunk_summaries(doc.id).unwrap().len(), 2);
    assert!(doc.summary.is_none());

    let resumed = run(&engine, &store, params, &path, &never, |_| {}).unwrap();
    assert_eq!(resumed.reused, 2);
    assert!(!resumed.from_store);
    assert_eq!(
        store.chunk_summaries(resumed.document.id).unwrap(),
        whole_store.chunk_summaries(whole.document.id).unwrap()
    );
    assert_eq!(resumed.summary, whole.summary);
}

/// Speculative decoding changes no summary: the same document summarized without it and with
/// lookup drafts (untimed, so that it drafts on every machine) gives the same summaries at
/// every level, and drafts were made and kept.
#[test]
fn speculation_leaves_every_summary_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("genesis-1-32-kjv.txt")).unwrap();
    // Genesis 1: two chunks at this context, then the level above
    let cut = text.find("Genesis 2\n").expect("chapter 2");
    let path = dir.path().join("genesis-1.txt");
    std::fs::write(&path, &text[..cut]).unwrap();
    let engine = engine(448);
    let never = AtomicBool::new(false);
    let mut summaries = Vec::new();
    for speculation in [engine::Speculation::Off, engine::Speculation::LookupUntimed] {
        let store = Store::open(dir.path().join(format!("{}.db", speculation.as_str())))
            .unwrap()
            .store;
        let params = DocumentParams {
            speculation,
            ..params(448, 40)
        };
        let done = run(&engine, &store, params, &path, &never, |_| {}).unwrap();
        if speculation != engine::Speculation::Off {
            assert!(done.decode.accepted_draft_tokens > 0, "{:?}", done.decode);
        }
        assert!(
            done.chunks >= 2 && done.levels >= 2,
            "{} chunks",
            done.chunks
        );
        summaries.push((
            done.summary,
            store.chunk_summaries(done.document.id).unwrap(),
        ));
    }
    assert_eq!(summaries[0], summaries[1]);
}

#[test]
fn a_pdf_is_summarized_once_then_answered_from_the_store_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("c.db")).unwrap().store;
    let engine = engine(1024);
    let never = AtomicBool::new(false);
    let path = fixture("lighthouse.pdf");
    let first = run(&engine, &store, params(1024, 48), &path, &never, |_| {}).unwrap();
    assert_eq!(
        (first.format, first.chunks, first.from_store),
        ("pdf", 1, false)
    );
    assert!(!first.summary.trim().is_empty());
    assert!(first.input_tokens > 150, "{} tokens", first.input_tokens);

    let mut steps = 0;
    let again = run(&engine, &store, params(1024, 48), &path, &never, |_| {
        steps += 1
    })
    .unwrap();
    assert!(again.from_store && steps == 0);
    // every stored summary counts as reused
    assert_eq!(
        again.reused,
        store.chunk_summaries(first.document.id).unwrap().len()
    );
    assert_eq!(again.summary, first.summary);
    assert_eq!(again.document.id, first.document.id);

    // other settings are another job; force redoes this one
    let forced = DocumentParams {
        force: true,
        ..params(1024, 48)
    };
    let redone = run(&engine, &store, forced, &path, &never, |_| {}).unwrap();
    assert!(!redone.from_store && redone.reused == 0);
    assert_eq!(
        redone.summary, first.summary,
        "greedy decoding is deterministic"
    );
    let other = run(&engine, &store, params(1024, 32), &path, &never, |_| {}).unwrap();
    assert_ne!(other.document.id, first.document.id);
}

#[test]
fn a_chinese_gb18030_text_is_chunked_at_its_full_stops_and_summarized() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("c.db")).unwrap().store;
    let engine = engine(320);
    let never = AtomicBool::new(false);
    let done = run(
        &engine,
        &store,
        params(320, 32),
        &fixture("longjing-gb18030.txt"),
        &never,
        |_| {},
    )
    .unwrap();
    assert_eq!(done.encoding, Some("GBK"));
    assert!(done.chunks >= 2, "{} chunks", done.chunks);
    assert!(done.levels >= 2);
    let cjk = |s: &str| {
        s.chars()
            .filter(|c| ('\u{4e00}'..='\u{9fff}').contains(c))
            .count()
    };
    assert!(cjk(&done.summary) > 0, "{}", done.summary);
    for c in &store.chunk_summaries(done.document.id).unwrap() {
        assert!(!c.summary.trim().is_empty());
    }
}

#[test]
fn a_context_too_small_to_converge_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("c.db")).unwrap().store;
    let engine = engine(256);
    let never = AtomicBool::new(false);
    let err = run(
        &engine,
        &store,
        params(256, 128),
        &fixture("lighthouse.pdf"),
        &never,
        |_| {},
    )
    .unwrap_err();
    assert!(matches!(err, Error::ContextTooSmall { .. }), "{err}");
    assert!(store.documents().unwrap().is_empty());
}
