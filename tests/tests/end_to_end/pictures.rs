//! Pictures in a saved conversation on the real default model, read through the vision
//! fixture's projector (`tests/fixtures/gemma3-vision`, random weights of the 270M's width):
//! a picture is encoded once and its rows reused on every later turn; the conversation
//! snapshots with its pictures and resumes from the snapshot exactly as the uninterrupted
//! session continues, without encoding them again; and its JSON export carries the pictures
//! into another database, where the conversation is read back (pictures encoded again from
//! their stored files) and answered. A scanned PDF (pages that are pictures, a JPEG and a
//! Flate one) is read page by page and summarized, resuming at the page where it stopped, and
//! a photo is summarized as a document.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use anyhow::Result;
use chat::{ConversationManager, ManagerConfig, Picture, Resume};
use companion_tests::model_path;
use engine::{EngineConfig, EngineHandle, GenerateParams, SamplingParams};
use memory::Store;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/gemma3-vision")
        .join(name)
}

fn engine_with_projector() -> EngineHandle {
    EngineHandle::spawn(EngineConfig {
        model_path: model_path(),
        projector_path: Some(fixture("gemma3-vision.mmproj-f16.gguf")),
        context: 2048,
        warm_up: false,
        ..EngineConfig::default()
    })
    .expect("the default model loads with the fixture's projector")
}

fn greedy(max_tokens: usize) -> GenerateParams {
    GenerateParams {
        max_tokens,
        sampling: SamplingParams {
            temperature: 0.0,
            ..SamplingParams::default()
        },
        ..GenerateParams::default()
    }
}

fn manager(engine: &EngineHandle, db: &Path) -> Result<ConversationManager> {
    Ok(ConversationManager::new(
        engine.clone(),
        Store::open(db)?.store,
        ManagerConfig::for_engine(engine),
    ))
}

#[test]
fn a_conversation_with_pictures_resumes_from_its_snapshot_and_travels_in_its_export() -> Result<()>
{
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("c.db");
    let engine = engine_with_projector();
    let per_picture = engine
        .info()
        .projector
        .expect("a projector")
        .tokens_per_image;
    let square = Picture::read(&fixture("square.png"))?;
    let wide = Picture::read(&fixture("wide.png"))?;
    let no = AtomicBool::new(false);

    let mut m = manager(&engine, &db)?;
    let id = m.create("pictures")?;
    let first = m.send_with_pictures(
        "What is in this picture?",
        &[square],
        &greedy(6),
        &no,
        &mut |_| {},
    )?;
    assert_eq!(first.user.images.len(), 1);
    assert!(first.generation.stats.prompt_tokens > per_picture);
    // the next turn adds a picture of its own; the first one's rows are reused, not encoded:
    // everything up to the reply is held already
    let second = m.send_with_pictures("And this one?", &[wide], &greedy(6), &no, &mut |_| {})?;
    assert!(
        second.generation.stats.reused_tokens >= first.generation.stats.prompt_tokens,
        "turn 2 reused {} positions; turn 1's prompt, picture included, was {}",
        second.generation.stats.reused_tokens,
        first.generation.stats.prompt_tokens
    );
    let third = m.send("Which of the two is wider?", &greedy(6), &no, &mut |_| {})?;
    assert!(
        third.generation.stats.reused_tokens >= second.generation.stats.prompt_tokens,
        "turn 3 reused {} positions; turn 2's prompt, both pictures included, was {}",
        third.generation.stats.reused_tokens,
        second.generation.stats.prompt_tokens
    );

    // the reference: one more turn on the uninterrupted session
    let key = m.snapshot_key()?;
    let snapshot = engine.snapshot()?;
    let held = engine.session_tokens()?.len();
    let next = "Describe the first picture again.";
    let live = m.send(next, &greedy(12), &no, &mut |_| {})?;
    let seq = live.user.seq;
    drop(m);

    // the app restarts: the conversation as it was before `next`, with its snapshot
    let store = Store::open(&db)?.store;
    store.truncate_messages(&id, seq)?;
    store.save_snapshot(&id, &key, held as i64, &snapshot)?;
    // its export, as it stands before `next`, for another database below
    let json = store.export_json(&id)?;
    drop(store);
    engine.reset_session()?;
    let mut m = manager(&engine, &db)?;
    assert_eq!(m.open(&id)?, Resume::Snapshot { tokens: held });
    let resumed = m.send(next, &greedy(12), &no, &mut |_| {})?;
    assert_eq!(
        resumed.generation.ids, live.generation.ids,
        "the restored session continues exactly as the uninterrupted one"
    );
    assert!(
        resumed.generation.stats.reused_tokens >= third.generation.stats.prompt_tokens,
        "resumed from the snapshot, {} of {held} positions reused (turn 3's prompt was {}): the pictures were not encoded again",
        resumed.generation.stats.reused_tokens,
        third.generation.stats.prompt_tokens
    );
    m.close()?;

    // the export carries both pictures; another database reads the conversation back
    let other_db = dir.path().join("other.db");
    let other = Store::open(&other_db)?.store;
    let imported = other.import_json(&json, true)?;
    assert_eq!(
        other
            .export_json(&imported.id)?
            .replace(imported.id.as_str(), id.as_str()),
        json
    );
    let pictures: Vec<_> = other
        .messages(&imported.id)?
        .into_iter()
        .flat_map(|message| message.images)
        .collect();
    assert_eq!(pictures.len(), 2);
    for picture in &pictures {
        Picture::decode(other.image_bytes(picture)?)?;
    }
    drop(other);
    engine.reset_session()?;
    let mut m = manager(&engine, &other_db)?;
    let how = m.open(&imported.id)?;
    assert!(
        matches!(how, Resume::Reprefill { tokens: t } if t + 8 >= held),
        "{how:?} for a conversation of {held} positions"
    );
    let again = m.send(next, &greedy(12), &no, &mut |_| {})?;
    assert_eq!(
        again.generation.stats.prompt_tokens,
        live.generation.stats.prompt_tokens
    );
    assert!(!again.generation.ids.is_empty());
    Ok(())
}

#[test]
fn pictures_are_refused_in_one_line_before_anything_is_kept() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("c.db");
    // the default model alone: no projector
    let engine = companion_tests::spawn_engine(1024);
    let mut m = manager(&engine, &db)?;
    let id = m.create("no projector")?;
    let square = Picture::read(&fixture("square.png"))?;
    let e = m
        .send_with_pictures(
            "What is this?",
            &[square],
            &greedy(4),
            &AtomicBool::new(false),
            &mut |_| {},
        )
        .unwrap_err();
    assert_eq!(e.code(), "no_projector", "{e}");
    assert!(!e.to_string().contains('\n'), "{e}");
    assert!(m.store().messages(&id)?.is_empty(), "nothing was kept");

    // not a picture, and a truncated one: refused by what they are
    let e = Picture::decode(b"GIF89a not really".to_vec()).unwrap_err();
    assert_eq!(e.code(), "bad_picture");
    let png = std::fs::read(fixture("small.png"))?;
    let e = Picture::decode(png[..png.len() / 2].to_vec()).unwrap_err();
    assert_eq!(e.code(), "bad_picture", "{e}");
    Ok(())
}

#[path = "../../../documents/tests/documents/pdf_writer.rs"]
mod pdf_writer;

/// A scanned letter of two pages, as a scanner writes it: page 1 a JPEG (`DCTDecode`) of the
/// fixture's square picture, page 2 the wide one as Flate-compressed RGB; no text layer.
fn scanned_pdf() -> Result<Vec<u8>> {
    use std::io::Write;
    let square = engine::vision::RgbImage::decode(&std::fs::read(fixture("square.png"))?)?;
    let wide = engine::vision::RgbImage::decode(&std::fs::read(fixture("wide.png"))?)?;
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 90).encode(
        &square.pixels,
        square.width,
        square.height,
        image::ExtendedColorType::Rgb8,
    )?;
    let mut flate = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    flate.write_all(&wide.pixels)?;
    Ok(pdf_writer::scanned_pdf(&[
        (
            format!(
                "/Width {} /Height {} /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /DCTDecode",
                square.width, square.height
            ),
            jpeg,
        ),
        (
            format!(
                "/Width {} /Height {} /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /FlateDecode",
                wide.width, wide.height
            ),
            flate.finish()?,
        ),
    ]))
}

fn document_params() -> chat::DocumentParams {
    chat::DocumentParams {
        context: 2048,
        summary_tokens: 24,
        page_tokens: 48,
        ..chat::DocumentParams::default()
    }
}

#[test]
fn a_scanned_pdf_is_read_page_by_page_and_summarized_resuming_where_it_stopped() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("letter.pdf");
    std::fs::write(&path, scanned_pdf()?)?;
    let engine = engine_with_projector();
    let store = Store::open(dir.path().join("c.db"))?.store;

    // cancelled once the first page is read: that page is kept
    let cancel = AtomicBool::new(false);
    let stopped = chat::DocumentJob {
        engine: &engine,
        store: &store,
        params: document_params(),
        cancel: &cancel,
    }
    .run(&path, |p| {
        if p.done >= 1 {
            cancel.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
    let e = stopped.expect_err("the job was cancelled");
    assert_eq!(e.code(), "cancelled", "{e}");

    let mut reported = Vec::new();
    let done = chat::DocumentJob {
        engine: &engine,
        store: &store,
        params: document_params(),
        cancel: &AtomicBool::new(false),
    }
    .run(&path, |p| reported.push((p.done, p.total)))?;
    assert_eq!(done.pages_read, Some(2));
    assert_eq!(done.format, "pdf");
    assert!(done.reused >= 1, "the first page was read once: {done:?}");
    assert!(!done.summary.trim().is_empty());
    // progress counts the pages, then the summaries, and never goes back
    assert!(
        reported.windows(2).all(|w| w[0].0 <= w[1].0),
        "{reported:?}"
    );
    assert_eq!(
        reported.last().map(|p| p.0),
        Some(reported.last().unwrap().1)
    );

    // asked again: answered from the store, nothing read or generated
    let again = chat::DocumentJob {
        engine: &engine,
        store: &store,
        params: document_params(),
        cancel: &AtomicBool::new(false),
    }
    .run(&path, |_| {})?;
    assert!(again.from_store);
    assert_eq!(again.summary, done.summary);
    assert_eq!(again.decode.tokens, 0);
    Ok(())
}

#[test]
fn a_photo_is_summarized_as_a_document_and_needs_the_projector() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path().join("c.db"))?.store;
    let photo = fixture("wide.png");
    let engine = engine_with_projector();
    let summary = chat::DocumentJob {
        engine: &engine,
        store: &store,
        params: document_params(),
        cancel: &AtomicBool::new(false),
    }
    .run(&photo, |_| {})?;
    assert_eq!(summary.pages_read, Some(1));
    assert_eq!(summary.format, "picture");

    // the default model alone reads no pictures: said in one line, nothing summarized
    let plain = companion_tests::spawn_engine(2048);
    let e = chat::DocumentJob {
        engine: &plain,
        store: &store,
        params: document_params(),
        cancel: &AtomicBool::new(false),
    }
    .run(&photo, |_| {})
    .unwrap_err();
    assert_eq!(e.code(), "no_projector", "{e}");
    Ok(())
}
