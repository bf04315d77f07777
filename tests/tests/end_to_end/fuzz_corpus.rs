//! The fuzz targets' committed corpora (`fuzz/corpus/TARGET/`) replayed through the very checks
//! the fuzzer runs (`fuzz/checks/`, shared by `#[path]`), on every test run: each input that
//! ever mattered to a target stays a regression test without the nightly AddressSanitizer
//! build that fuzzing itself needs (`scripts/fuzz`).

use std::path::Path;

#[path = "../../../fuzz/checks/conversation_import.rs"]
mod conversation_import;
#[path = "../../../fuzz/checks/documents.rs"]
mod documents;
#[path = "../../../fuzz/checks/gguf_header.rs"]
mod gguf_header;
#[path = "../../../fuzz/checks/picture.rs"]
mod picture;
#[path = "../../../fuzz/checks/snapshot_restore.rs"]
mod snapshot_restore;
#[path = "../../../fuzz/checks/tokenizer.rs"]
mod tokenizer;

/// Every file of `fuzz/corpus/TARGET`, in name order, through `check`.
fn replay(target: &str, check: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut inputs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "{} holds no input", dir.display());
    for input in inputs {
        let bytes = std::fs::read(&input).expect("corpus input");
        eprintln!("{target}: {}", input.display());
        check(&bytes);
    }
}

#[test]
fn gguf_header_corpus_replays() {
    replay("gguf_header", gguf_header::check);
}

#[test]
fn tokenizer_corpus_replays() {
    replay("tokenizer", tokenizer::check);
}

#[test]
fn snapshot_restore_corpus_replays() {
    replay("snapshot_restore", snapshot_restore::check);
}

#[test]
fn conversation_import_corpus_replays() {
    replay("conversation_import", conversation_import::check);
}

#[test]
fn documents_corpus_replays() {
    replay("documents", documents::check);
}

#[test]
fn picture_corpus_replays() {
    replay("picture", picture::check);
}
