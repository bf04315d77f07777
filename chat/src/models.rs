//! The model library (`companion models`, the app's model panel): importing a GGUF so that it
//! can never leave the user with a broken model, re-hashing it, switching to it with a
//! self-check that falls back to the model in use, and removing it.
//!
//! - Import checks before it keeps: the header, architecture, tensors and tokenizer through
//!   [`engine::inspect_model`]; the free disk space first; then one pass that copies through a
//!   temporary file while hashing (a 2-3 GB file is read once, with progress), compares with
//!   the sha256 the user gave, and renames into place only when everything matched. A failure
//!   at any step leaves nothing behind. The temporary file is locked while it is written, so
//!   one left by an import that was killed (the only way one can stay) is known by its lock
//!   being free and is removed by the next import, never one that another process is writing.
//! - Versions are the store's rule (memory/src/store/models.rs): same name, other sha256.
//! - A switch loads the new model in its own engine and generates a few greedy tokens with
//!   finite logits before it is recorded as in use; when that fails the model in use stays
//!   what it was, and the error says why and what stayed.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use engine::{EngineConfig, EngineHandle, GenerateParams, Prompt, SamplingParams};
use memory::{ModelRecord, NewModel, Store};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// Bytes read and hashed at a time; progress is reported after each.
const CHUNK: usize = 4 << 20;
/// Room left on the disk beyond the model itself (SQLite's journal, the app's own writes).
const SPARE_BYTES: u64 = 64 << 20;
/// The self-check's prompt and the tokens it generates from it.
const CHECK_PROMPT: &str = "The capital of France is";
const CHECK_TOKENS: usize = 4;

/// What an import did.
#[derive(Debug, Clone)]
pub struct Imported {
    pub model: ModelRecord,
    /// `false`: a file with these bytes was in the library already (nothing was copied).
    pub added: bool,
    /// The model of the same name that this one is a newer version of, if any.
    pub newer_than: Option<ModelRecord>,
    /// When the file was a Gemma 4 assistant or a vision projector: its pairing (`model` is
    /// the model it was paired with, `added` whether its file was copied in).
    pub paired: Option<crate::paired::Paired>,
}

/// Check `source`, copy it into `models_dir` and keep it in the library. `expected_sha256`: the
/// fingerprint the user was given with the file (any case); a file that does not match it is
/// not kept. `progress(done, total)` follows the copy, in bytes.
pub fn import_model(
    store: &Store,
    models_dir: &Path,
    source: &Path,
    expected_sha256: Option<&str>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Imported> {
    import_through(
        store,
        models_dir,
        source,
        expected_sha256,
        progress,
        &create_partial,
    )
}

/// Where a copy is written before it is renamed into place: a file, flushed to the disk at the
/// end. A trait so that the tests can make the disk fill up in the middle of a copy.
pub(crate) trait PartialFile: Write {
    fn sync(&mut self) -> std::io::Result<()>;
}

impl PartialFile for std::fs::File {
    fn sync(&mut self) -> std::io::Result<()> {
        self.sync_all()
    }
}

pub(crate) type CreatePartial<'a> = dyn Fn(&Path) -> std::io::Result<Box<dyn PartialFile>> + 'a;

/// The temporary file, locked (`flock`) for as long as this import holds it open. Where the
/// file system has no locks it is written unlocked, and [`sweep_stale_partials`] keeps it.
fn create_partial(path: &Path) -> std::io::Result<Box<dyn PartialFile>> {
    let file = std::fs::File::create(path)?;
    let _ = file.try_lock();
    Ok(Box::new(file))
}

fn is_partial_name(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".partial")
}

/// Remove the temporary copies in `models_dir` that no import holds any more (one that was
/// killed mid-copy): a file whose lock can be taken has no writer. Returns how many went.
pub fn sweep_stale_partials(models_dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(models_dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !is_partial_name(&name.to_string_lossy()) {
            continue;
        }
        let path = entry.path();
        let Ok(file) = std::fs::File::open(&path) else {
            continue;
        };
        // held while the file is removed, so no import can take it over in between
        if file.try_lock().is_ok() && std::fs::remove_file(&path).is_ok() {
            removed += 1;
        }
    }
    if removed > 0 {
        tracing::info!(removed, "removed the partial copies of interrupted imports");
    }
    removed
}

fn import_through(
    store: &Store,
    models_dir: &Path,
    source: &Path,
    expected_sha256: Option<&str>,
    progress: &mut dyn FnMut(u64, u64),
    create: &CreatePartial<'_>,
) -> Result<Imported> {
    let expected = expected_sha256.map(parse_sha256).transpose()?;
    if let Some(pairing) = crate::paired::pairing_of(source) {
        return crate::paired::import_paired(
            pairing,
            store,
            models_dir,
            source,
            expected.as_deref(),
            progress,
            create,
        );
    }
    let facts = engine::inspect_model(source)?;
    let source_name = file_name(source)?;
    let name = facts.name.clone().unwrap_or_else(|| {
        Path::new(&source_name)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| source_name.clone())
    });
    let incoming = Incoming::copy(
        models_dir,
        source,
        facts.file_bytes,
        expected.as_deref(),
        progress,
        create,
    )?;
    let known = store.models()?;
    if let Some(existing) = known.iter().find(|m| m.sha256 == incoming.sha256).cloned() {
        incoming.discard();
        return Ok(Imported {
            model: existing,
            added: false,
            newer_than: None,
            paired: None,
        });
    }
    let sha256 = incoming.sha256.clone();
    let placed = incoming.place()?;
    let older = known
        .into_iter()
        .filter(|m| m.name == name)
        .max_by_key(|m| m.version);
    let kept = store.add_model(&NewModel {
        name,
        path: placed.path.display().to_string(),
        architecture: facts.architecture,
        parameters: facts.parameters,
        quantization: facts.quantization,
        file_bytes: facts.file_bytes,
        sha256,
        source: source
            .canonicalize()
            .unwrap_or_else(|_| source.to_path_buf())
            .display()
            .to_string(),
    });
    match kept {
        Ok((model, added)) => Ok(Imported {
            model,
            added,
            newer_than: older,
            paired: None,
        }),
        Err(e) => {
            placed.undo();
            Err(e.into())
        }
    }
}

/// The file name of what the user asked to import.
pub(crate) fn file_name(source: &Path) -> Result<String> {
    source
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| Error::ModelIo {
            action: "import",
            path: source.to_path_buf(),
            source: std::io::Error::other("it names a folder, not a file"),
        })
}

/// A file being imported: copied into the library's folder while it is hashed (or hashed
/// where it is, when it is in that folder already), not yet in place.
pub(crate) struct Incoming {
    pub sha256: String,
    models_dir: PathBuf,
    source: PathBuf,
    source_name: String,
    /// The temporary copy; `None` when the file is in the library's folder already.
    partial: Option<PathBuf>,
    /// The copy's handle stays open (and locked) until it is placed or discarded.
    _held: Option<Box<dyn PartialFile>>,
}

/// Where an imported file was placed, and whether the import copied it there.
pub(crate) struct Placed {
    pub path: PathBuf,
    copied: bool,
}

impl Placed {
    /// Remove the copy again (what kept it failed).
    pub fn undo(&self) {
        if self.copied {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Incoming {
    /// Check the free space, copy and hash; a file whose sha256 is not `expected` is not kept.
    pub fn copy(
        models_dir: &Path,
        source: &Path,
        file_bytes: u64,
        expected: Option<&str>,
        progress: &mut dyn FnMut(u64, u64),
        create: &CreatePartial<'_>,
    ) -> Result<Incoming> {
        let source_name = file_name(source)?;
        std::fs::create_dir_all(models_dir).map_err(|e| io("create", models_dir, e))?;
        // an interrupted import's copy takes room this one may need
        sweep_stale_partials(models_dir);
        let free = fs4::available_space(models_dir)
            .map_err(|e| io("read the free space of", models_dir, e))?;
        let in_place = same_file(source, &models_dir.join(&source_name));
        let needed = if in_place {
            0
        } else {
            file_bytes + SPARE_BYTES
        };
        if free < needed {
            return Err(Error::NotEnoughSpace {
                needed: file_bytes,
                free,
                dir: models_dir.to_path_buf(),
            });
        }
        let partial = models_dir.join(format!(".{source_name}.{}.partial", std::process::id()));
        let copied = if in_place {
            hash_file(source, progress).map(|sha| (sha, None, None))
        } else {
            copy_and_hash(source, &partial, create, progress)
                .map(|(sha, file)| (sha, Some(partial.clone()), Some(file)))
        };
        let (sha256, partial, held) = match copied {
            Ok(done) => done,
            Err(e) => {
                let _ = std::fs::remove_file(&partial);
                return Err(e);
            }
        };
        let incoming = Incoming {
            sha256,
            models_dir: models_dir.to_path_buf(),
            source: source.to_path_buf(),
            source_name,
            partial,
            _held: held,
        };
        if let Some(expected) = expected
            && *expected != incoming.sha256
        {
            let found = incoming.sha256.clone();
            incoming.discard();
            return Err(Error::Sha256Mismatch {
                path: source.to_path_buf(),
                expected: expected.to_string(),
                found,
            });
        }
        Ok(incoming)
    }

    /// Not kept: the copy goes.
    pub fn discard(self) {
        if let Some(p) = &self.partial {
            let _ = std::fs::remove_file(p);
        }
    }

    /// Rename the copy into place, under a name no other file has.
    pub fn place(self) -> Result<Placed> {
        let (path, copied) = match &self.partial {
            None => (self.source.clone(), false),
            Some(partial) => {
                let target = free_name(&self.models_dir, &self.source_name, &self.sha256);
                if let Err(e) = std::fs::rename(partial, &target) {
                    let _ = std::fs::remove_file(partial);
                    return Err(io("store", &target, e));
                }
                sync_dir(&self.models_dir);
                (target, true)
            }
        };
        Ok(Placed {
            path: path.canonicalize().unwrap_or(path),
            copied,
        })
    }
}

/// What re-hashing a model found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub sha256: String,
    pub matches: bool,
}

/// Hash the model's file again and compare it with the sha256 recorded when it was imported.
pub fn verify_model(model: &ModelRecord, progress: &mut dyn FnMut(u64, u64)) -> Result<Verified> {
    let path = Path::new(&model.path);
    if !path.is_file() {
        return Err(Error::ModelFileMissing {
            model: model.label(),
            path: path.to_path_buf(),
        });
    }
    let sha256 = hash_file(path, progress)?;
    Ok(Verified {
        matches: sha256 == model.sha256,
        sha256,
    })
}

/// What a switch did.
#[derive(Debug, Clone)]
pub struct Switched {
    pub model: ModelRecord,
    /// The model in use before, kept unless the caller removes it.
    pub previous: Option<ModelRecord>,
    /// The self-check's greedy continuation of its prompt.
    pub check_text: String,
}

/// Switch to `model`: check it with `check` (normally [`self_check`] on an engine loaded with
/// the caller's settings) and only then record it as in use. When the check fails, the model
/// in use stays what it was and the error names it.
pub fn use_model(
    store: &Store,
    model: &ModelRecord,
    check: impl FnOnce(&Path) -> Result<String>,
) -> Result<Switched> {
    let path = Path::new(&model.path);
    if !path.is_file() {
        return Err(Error::ModelFileMissing {
            model: model.label(),
            path: path.to_path_buf(),
        });
    }
    let previous = store.model_in_use()?.filter(|p| p.id != model.id);
    let check_text = check(path).map_err(|e| Error::SelfCheckFailed {
        model: model.label(),
        reason: e.to_string(),
        kept: previous
            .as_ref()
            .map(ModelRecord::label)
            .unwrap_or_else(|| "the default model".into()),
    })?;
    let model = store.set_model_in_use(model.id)?;
    Ok(Switched {
        model,
        previous,
        check_text,
    })
}

/// Load the model `config` names in an engine of its own, and check that it works: a few
/// greedy tokens after a short prompt, and finite logits at every position of it. Returns
/// the generated text.
pub fn self_check(config: EngineConfig) -> Result<String> {
    let engine = EngineHandle::spawn(EngineConfig {
        warm_up: false,
        ..config
    })?;
    let ids = engine.tokenizer().encode(CHECK_PROMPT, true)?;
    let scored = engine.score(ids.clone())?;
    if let Some(bad) = scored
        .iter()
        .find(|p| !p.logprob.is_finite() || p.top.iter().any(|(_, l)| !l.is_finite()))
    {
        return Err(Error::ModelNotWorking(format!(
            "its output is not a number at position {} of a short prompt (damaged weights?)",
            bad.pos
        )));
    }
    let generation = engine
        .generate(
            Prompt::Ids(ids),
            GenerateParams {
                max_tokens: CHECK_TOKENS,
                sampling: SamplingParams::greedy(),
                // the check is that decoding works: an end-of-text token must not cut it short
                ignore_eos: true,
                ..GenerateParams::default()
            },
        )?
        .wait(|_| {})?;
    if generation.ids.is_empty() {
        return Err(Error::ModelNotWorking(
            "it generated nothing after a short prompt".into(),
        ));
    }
    Ok(generation.text)
}

/// Forget a model and delete its file when it is in `models_dir` (a file the library did not
/// copy stays where the user keeps it), and its paired files' likewise. The model in use is
/// refused.
pub fn remove_model(store: &Store, models_dir: &Path, model: &ModelRecord) -> Result<bool> {
    let pairings = [memory::Pairing::Assistant, memory::Pairing::Projector];
    let paired = pairings
        .iter()
        .map(|&k| Ok((k, store.paired_file(k, model.id)?)))
        .collect::<Result<Vec<_>>>()?;
    store.remove_model(model.id)?;
    for (kind, file) in &paired {
        if let Some(f) = file {
            crate::paired::remove_file_if_unused(store, *kind, models_dir, f);
        }
    }
    let path = Path::new(&model.path);
    if in_folder(path, models_dir) {
        if let Err(e) = std::fs::remove_file(path) {
            tracing::warn!(path = %path.display(), error = %e, "a removed model's file stayed");
            return Ok(false);
        }
        return Ok(true);
    }
    Ok(false)
}

/// Whether `path` is a file in `dir` (one the library copied there).
pub(crate) fn in_folder(path: &Path, dir: &Path) -> bool {
    match (path.parent().map(Path::canonicalize), dir.canonicalize()) {
        (Some(Ok(parent)), Ok(dir)) => parent == dir,
        _ => false,
    }
}

/// A sha256 the user typed: 64 hex digits, any case; lowercase out.
pub fn parse_sha256(text: &str) -> Result<String> {
    let t = text.trim().to_ascii_lowercase();
    if t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(t)
    } else {
        Err(Error::BadSha256(text.to_string()))
    }
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn io(action: &'static str, path: &Path, source: std::io::Error) -> Error {
    Error::ModelIo {
        action,
        path: path.to_path_buf(),
        source,
    }
}

fn hash_file(path: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<String> {
    hash_and_copy(path, None, progress)
}

/// Copy `source` to `partial` (made by `create`), hashing what is read, and flush it to the
/// disk; returns the sha256 and the still open copy.
fn copy_and_hash(
    source: &Path,
    partial: &Path,
    create: &CreatePartial<'_>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(String, Box<dyn PartialFile>)> {
    let mut output = create(partial).map_err(|e| io("write", partial, e))?;
    let sha = hash_and_copy(source, Some((output.as_mut(), partial)), progress)?;
    Ok((sha, output))
}

/// The sha256 of `source`, read once; with `output`, the bytes are written there too and
/// flushed to the disk.
fn hash_and_copy(
    source: &Path,
    mut output: Option<(&mut dyn PartialFile, &Path)>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<String> {
    let mut input = std::fs::File::open(source).map_err(|e| io("read", source, e))?;
    let total = input.metadata().map(|m| m.len()).unwrap_or(0);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let mut done = 0u64;
    progress(0, total);
    loop {
        let n = input.read(&mut buf).map_err(|e| io("read", source, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        if let Some((file, path)) = output.as_mut() {
            file.write_all(&buf[..n])
                .map_err(|e| io("write", path, e))?;
        }
        done += n as u64;
        progress(done, total);
    }
    if let Some((file, path)) = output {
        file.sync().map_err(|e| io("write", path, e))?;
    }
    Ok(hex(&hasher.finalize()))
}

/// `name` in `dir`, or `stem-<sha prefix>.ext` when a different file has that name already.
fn free_name(dir: &Path, name: &str, sha256: &str) -> PathBuf {
    let plain = dir.join(name);
    if !plain.exists() {
        return plain;
    }
    let p = Path::new(name);
    let stem = p
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = p
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    dir.join(format!("{stem}-{}{ext}", &sha256[..12]))
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Make a rename durable (the directory entry); best effort where directories cannot be
/// opened.
fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typed_sha256_is_checked_and_lowercased() {
        let upper = "A".repeat(64);
        assert_eq!(parse_sha256(&upper).unwrap(), "a".repeat(64));
        assert!(matches!(parse_sha256("abc"), Err(Error::BadSha256(_))));
        assert!(matches!(
            parse_sha256(&"g".repeat(64)),
            Err(Error::BadSha256(_))
        ));
    }

    #[test]
    fn a_taken_name_gets_the_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let sha = "0123456789abcdef".repeat(4);
        assert_eq!(
            free_name(dir.path(), "m.gguf", &sha),
            dir.path().join("m.gguf")
        );
        std::fs::write(dir.path().join("m.gguf"), b"x").unwrap();
        assert_eq!(
            free_name(dir.path(), "m.gguf", &sha),
            dir.path().join("m-0123456789ab.gguf")
        );
    }

    /// A partial copy on a disk that fills up after `room` bytes: what it wrote before is on
    /// the real disk (so the test can see whether it is cleaned up), then every write fails
    /// as a full disk's does (ENOSPC).
    struct FillsUp {
        file: std::fs::File,
        room: usize,
        written: std::rc::Rc<std::cell::Cell<usize>>,
    }

    impl Write for FillsUp {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(std::io::Error::from_raw_os_error(28));
            }
            let n = buf.len().min(self.room);
            let n = self.file.write(&buf[..n])?;
            self.room -= n;
            self.written.set(self.written.get() + n);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            self.file.flush()
        }
    }

    impl PartialFile for FillsUp {
        fn sync(&mut self) -> std::io::Result<()> {
            self.file.sync_all()
        }
    }

    #[test]
    fn a_disk_that_fills_up_mid_copy_leaves_nothing_behind() {
        let source = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/gemma-family/gemma1-mqa.q8_0.gguf");
        let size = std::fs::metadata(&source).unwrap().len() as usize;
        let dir = tempfile::tempdir().unwrap();
        let models = dir.path().join("models");
        let store = Store::open(dir.path().join("c.db")).unwrap().store;
        let room = size / 2;
        let written = std::rc::Rc::new(std::cell::Cell::new(0));
        let failed = import_through(
            &store,
            &models,
            &source,
            None,
            &mut |_, _| {},
            &|path: &Path| -> std::io::Result<Box<dyn PartialFile>> {
                Ok(Box::new(FillsUp {
                    file: std::fs::File::create(path)?,
                    room,
                    written: written.clone(),
                }))
            },
        )
        .unwrap_err();
        assert_eq!(failed.code(), "disk_full", "{failed}");
        assert!(failed.to_string().contains("No space left"), "{failed}");
        // the copy had begun: half of the file was on the disk when it was full
        assert_eq!(written.get(), room);
        let left: Vec<_> = std::fs::read_dir(&models)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "left behind: {left:?}");
        assert!(store.models().unwrap().is_empty());

        // the same import with room to spare keeps the model
        let kept = import_model(&store, &models, &source, None, &mut |_, _| {}).unwrap();
        assert!(kept.added);
        assert_eq!(std::fs::read_dir(&models).unwrap().count(), 1);
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut n: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    }

    #[test]
    fn a_killed_imports_copy_is_swept_but_never_one_being_written() {
        let source = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/gemma-family/gemma1-mqa.q8_0.gguf");
        let dir = tempfile::tempdir().unwrap();
        let models = dir.path().join("models");
        std::fs::create_dir_all(&models).unwrap();
        // what a killed import leaves: its copy, no process holding it
        let stale = models.join(".gemma.gguf.4242.partial");
        std::fs::write(&stale, vec![7u8; 4096]).unwrap();
        // another import (as if in another process) still writing its copy
        let busy = models.join(".other.gguf.4343.partial");
        let writing = create_partial(&busy).unwrap();
        // the user's own files stay whatever their names
        std::fs::write(models.join("notes.partial.txt"), "mine").unwrap();
        std::fs::write(models.join("visible.partial"), "mine").unwrap();

        let store = Store::open(dir.path().join("c.db")).unwrap().store;
        let kept = import_model(&store, &models, &source, None, &mut |_, _| {}).unwrap();
        assert!(kept.added);
        assert_eq!(
            names(&models),
            [
                ".other.gguf.4343.partial",
                "gemma1-mqa.q8_0.gguf",
                "notes.partial.txt",
                "visible.partial"
            ]
        );
        // once its writer is gone, it is stale too
        drop(writing);
        assert_eq!(sweep_stale_partials(&models), 1);
        assert!(!busy.exists());
        assert_eq!(sweep_stale_partials(&models), 0);
        assert_eq!(sweep_stale_partials(&dir.path().join("absent")), 0);
    }
}
