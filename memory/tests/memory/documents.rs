//! The document store: one row per (content, model, settings), chunk summaries kept as they
//! come and listed for a resumed job, a finished summary found again, a reset starting over.

use anyhow::Result;
use memory::{ChunkSummary, DocumentKey, Store};

fn key(sha: &str, settings: &str) -> DocumentKey {
    DocumentKey {
        sha256: sha.into(),
        model: "model-sha".into(),
        settings: settings.into(),
    }
}

fn chunk(level: usize, idx: usize, text: &str) -> ChunkSummary {
    ChunkSummary {
        level,
        idx,
        input_tokens: 100 + idx,
        summary: text.into(),
    }
}

#[test]
fn a_job_is_found_by_content_model_and_settings_and_resumes_from_its_chunks() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("c.db");
    let k = key("abc", r#"{"context":2048}"#);
    let id = {
        let store = Store::open(&db)?.store;
        let doc = store.open_document(&k, "/a/report.txt", 1234)?;
        assert_eq!((doc.byte_count, doc.summary.clone()), (1234, None));
        store.set_document_chunk_count(doc.id, 3)?;
        store.put_chunk_summary(doc.id, &chunk(0, 1, "second"))?;
        store.put_chunk_summary(doc.id, &chunk(0, 0, "first"))?;
        assert!(store.finished_document(&k)?.is_none());
        doc.id
    };
    // a new process (the crash case) finds the same job and what it had done
    let store = Store::open(&db)?.store;
    let again = store.open_document(&k, "/b/renamed.txt", 1234)?;
    assert_eq!(again.id, id);
    assert_eq!(again.path, "/b/renamed.txt");
    assert_eq!(again.chunk_count, Some(3));
    assert_eq!(
        store.chunk_summaries(id)?,
        [chunk(0, 0, "first"), chunk(0, 1, "second")]
    );
    // other settings or other content are other jobs
    assert_ne!(store.open_document(&key("abc", "{}"), "/a", 1)?.id, id);
    assert_ne!(
        store
            .open_document(&key("abd", r#"{"context":2048}"#), "/a", 1)?
            .id,
        id
    );

    // one summary at a time, for a job that never holds a whole level
    assert_eq!(store.chunk_summary(id, 0, 1)?, Some(chunk(0, 1, "second")));
    assert_eq!(store.chunk_summary(id, 0, 2)?, None);
    assert_eq!(store.chunk_summary(id, 1, 0)?, None);

    store.put_chunk_summary(id, &chunk(1, 0, "all"))?;
    // two levels; the level-0 chunks held 100 + 101 tokens; three summaries in all
    let totals = store.document_totals(id)?;
    assert_eq!(
        (totals.levels, totals.input_tokens, totals.summaries),
        (2, 201, 3)
    );
    store.finish_document(id, "all")?;
    let done = store.finished_document(&k)?.expect("finished");
    assert_eq!(done.summary.as_deref(), Some("all"));
    assert_eq!(store.documents()?.len(), 3);

    store.reset_document(id)?;
    assert_eq!(
        store.document_totals(id)?,
        memory::DocumentTotals::default()
    );
    assert!(store.finished_document(&k)?.is_none());
    assert!(store.chunk_summaries(id)?.is_empty());
    assert_eq!(store.find_document(&k)?.map(|d| d.chunk_count), Some(None));
    Ok(())
}

#[test]
fn storing_a_chunk_twice_replaces_it_and_unknown_documents_are_errors() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path().join("c.db"))?.store;
    let doc = store.open_document(&key("x", "{}"), "/x", 1)?;
    store.put_chunk_summary(doc.id, &chunk(0, 0, "old"))?;
    store.put_chunk_summary(doc.id, &chunk(0, 0, "new"))?;
    assert_eq!(store.chunk_summaries(doc.id)?, [chunk(0, 0, "new")]);
    assert!(store.finish_document(memory::DocumentId(999), "s").is_err());
    assert!(
        store
            .set_document_chunk_count(memory::DocumentId(999), 1)
            .is_err()
    );
    Ok(())
}
