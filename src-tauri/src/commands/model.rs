//! The model panel: what is loaded, the models on this device (the model library's versions
//! first), importing a GGUF (picked in a native dialog, checked, hashed with progress, copied
//! into the library) and switching to another after its self-check.

use std::path::{Path, PathBuf};

use memory::ModelRecord;
use serde::Serialize;
use tauri::ipc::Channel;
use tauri::{AppHandle, Runtime, State};
use tauri_plugin_dialog::DialogExt;

use crate::error::{AppError, Result};
use crate::state::AppState;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelView {
    pub file_name: String,
    pub path: String,
    pub name: Option<String>,
    pub architecture: String,
    /// "Gemma 3", "Gemma 4", …
    pub family: String,
    /// Layers, sliding window, KV sharing and width in one line.
    pub layout: String,
    /// `base` (continues text) or `instruct` (answers).
    pub tuning: engine::Tuning,
    /// For a base model, the sentence that explains it.
    pub tuning_notice: Option<String>,
    pub parameters: u64,
    pub quantization: String,
    pub file_bytes: u64,
    pub sha256: String,
    pub context: usize,
    pub device: String,
    /// The forward pass's implementation: our CPU kernels (`host`) or candle's (`candle`).
    pub backend: String,
    pub memory_estimate_bytes: u64,
    pub kv_bytes_per_token: usize,
    pub load_seconds: f64,
    /// The Gemma 4 assistant the library pairs with the model and that drafts for it (its
    /// layout in one line), if any.
    pub assistant: Option<String>,
    /// A vision projector is loaded beside the model: messages may carry pictures.
    pub reads_pictures: bool,
    /// The projector's tower and what a picture becomes, in one line, if one is loaded.
    pub projector: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelFileView {
    pub path: String,
    pub file_name: String,
    pub bytes: u64,
    pub current: bool,
    /// In the model library: its name and version ("Gemma 3 270m", 2) and fingerprint.
    /// `None` for a file the library does not know (the fetched default model, a file put in
    /// the models directory by hand).
    pub name: Option<String>,
    pub version: Option<i64>,
    pub sha256: Option<String>,
    /// An import's answer only: the file was a Gemma 4 assistant, now paired with this model.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub paired_assistant: bool,
    /// An import's answer only: the file was a vision projector, now paired with this model.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub paired_projector: bool,
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// The loaded model, or `None` while none is.
#[tauri::command]
pub async fn model_info(state: State<'_, AppState>) -> Result<Option<ModelView>> {
    let Some(engine) = state.shared.engine() else {
        return Ok(None);
    };
    // hashing the file is the engine thread's work (it caches the answer)
    let hashing = engine.clone();
    let sha256 = tauri::async_runtime::spawn_blocking(move || hashing.model_sha256())
        .await
        .map_err(|e| {
            AppError::new(
                "model",
                format!("The model's fingerprint could not be computed ({e})."),
            )
        })??;
    let info = engine.info();
    Ok(Some(ModelView {
        file_name: file_name(&info.path),
        path: info.path.display().to_string(),
        name: info.name.clone(),
        architecture: info.architecture.clone(),
        family: info.family.clone(),
        layout: info.description.clone(),
        tuning: info.tuning,
        tuning_notice: base_model_notice(&info),
        parameters: info.parameters,
        quantization: info.quantization.clone(),
        file_bytes: info.file_bytes,
        sha256,
        context: info.context,
        device: info.device.to_string(),
        backend: info.backend.as_str().to_string(),
        // the projector's file and what its encoder works in count as loading counts them
        memory_estimate_bytes: info.memory.estimate.total_bytes
            + info
                .projector
                .as_ref()
                .map_or(0, |p| p.file_bytes + p.working_bytes),
        kv_bytes_per_token: info.kv_bytes_per_token,
        load_seconds: info.load_seconds,
        assistant: info.assistant.as_ref().map(|a| a.description.clone()),
        reads_pictures: info.projector.is_some(),
        projector: info.projector.as_ref().map(|p| {
            format!(
                "{}; {} for the file and {} while it reads a picture",
                p.description,
                engine::memory_guard::megabytes(p.file_bytes),
                engine::memory_guard::megabytes(p.working_bytes)
            )
        }),
    }))
}

/// The models of the library (by name, then version; those whose file is gone left out),
/// then the other GGUF files in the models directory, and the model in use wherever it is.
pub fn models(models_dir: &Path, current: &Path, library: &[ModelRecord]) -> Vec<ModelFileView> {
    let mut out: Vec<ModelFileView> = library
        .iter()
        .filter(|m| Path::new(&m.path).is_file())
        .map(|m| ModelFileView {
            name: Some(m.name.clone()),
            version: Some(m.version),
            sha256: Some(m.sha256.clone()),
            ..view(Path::new(&m.path), current)
        })
        .collect();
    let mut others: Vec<ModelFileView> = std::fs::read_dir(models_dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .is_some_and(|x| x.eq_ignore_ascii_case("gguf"))
                && p.is_file()
                && !out.iter().any(|m| same_file(Path::new(&m.path), p))
        })
        .map(|p| view(&p, current))
        .collect();
    others.sort_by(|a, b| a.file_name.cmp(&b.file_name));
    out.extend(others);
    if !out.iter().any(|m| m.current) && current.is_file() {
        out.push(view(current, current));
    }
    out
}

fn view(path: &Path, current: &Path) -> ModelFileView {
    ModelFileView {
        path: path.display().to_string(),
        file_name: file_name(path),
        bytes: std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
        current: same_file(path, current),
        name: None,
        version: None,
        sha256: None,
        paired_assistant: false,
        paired_projector: false,
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The library's models, or none when the database cannot be read (the files are still
/// listed from the models directory).
fn library(state: &AppState) -> Vec<ModelRecord> {
    state.with_store(|s| Ok(s.models()?)).unwrap_or_default()
}

#[tauri::command]
pub async fn list_models(state: State<'_, AppState>) -> Result<Vec<ModelFileView>> {
    Ok(models(
        &state.config.models_dir,
        &state.settings().model_path(),
        &library(&state),
    ))
}

/// How far an import is: streamed on `on_progress` while the file is hashed and copied.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportProgress {
    pub done: u64,
    pub total: u64,
}

/// A progress callback for `on_progress` that sends once per whole percent (hashing a 2-3 GB
/// file reports every 4 MiB).
fn per_percent(on_progress: &Channel<ImportProgress>) -> impl FnMut(u64, u64) + '_ {
    let mut shown = u64::MAX;
    move |done, total| {
        let percent = (done * 100).checked_div(total).unwrap_or(100);
        if percent != shown {
            shown = percent;
            let _ = on_progress.send(ImportProgress { done, total });
        }
    }
}

/// Pick a GGUF in a native dialog, check that Companion can run it, and copy it into the
/// model library, reporting progress. `None`: the user cancelled.
#[tauri::command]
pub async fn import_model<R: Runtime>(
    app: AppHandle<R>,
    state: State<'_, AppState>,
    on_progress: Channel<ImportProgress>,
) -> Result<Option<ModelFileView>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    app.dialog()
        .file()
        .add_filter("GGUF model", &["gguf"])
        .pick_file(move |picked| {
            let _ = tx.send(picked);
        });
    let Some(picked) = rx.await.ok().flatten() else {
        return Ok(None);
    };
    let source = picked.into_path().map_err(|e| {
        AppError::new(
            "import",
            format!("That file cannot be read from here ({e}); pick a file on this device."),
        )
    })?;
    let models_dir = state.config.models_dir.clone();
    let database = state.config.database.clone();
    let current = state.settings().model_path();
    let (imported, pairing) = tauri::async_runtime::spawn_blocking(move || {
        import_file(
            &source,
            &models_dir,
            &database,
            &mut per_percent(&on_progress),
        )
    })
    .await
    .map_err(|e| {
        AppError::new(
            "import",
            format!("The import stopped unexpectedly ({e}); try again."),
        )
    })??;
    Ok(Some(imported_view(&state, &imported, pairing, &current)?))
}

/// What an import answers, once the file is in the library: the model it is (or, for a file
/// paired with a model, that model). A Gemma 4 assistant or a vision projector paired with the
/// model in use loads now: the engine reloads with it (the conversation reopened), as it
/// would at the model's next load.
pub fn imported_view(
    state: &AppState,
    imported: &ModelRecord,
    pairing: Option<memory::Pairing>,
    current: &Path,
) -> Result<ModelFileView> {
    let view = ModelFileView {
        name: Some(imported.name.clone()),
        version: Some(imported.version),
        sha256: Some(imported.sha256.clone()),
        paired_assistant: pairing == Some(memory::Pairing::Assistant),
        paired_projector: pairing == Some(memory::Pairing::Projector),
        ..view(Path::new(&imported.path), current)
    };
    if let Some(pairing) = pairing
        && view.current
    {
        state.shared.loading(match pairing {
            memory::Pairing::Assistant => "Loading the model's assistant",
            memory::Pairing::Projector => "Loading the model's vision projector",
        });
        state
            .shared
            .reply_cancel
            .store(true, std::sync::atomic::Ordering::Relaxed);
        state.worker.spawn(|w| w.reload())?;
    }
    Ok(view)
}

/// Check `source` as a Gemma GGUF and keep it in the library of `database`, copied into
/// `models_dir` (chat::models: through a temporary file, hashed, nothing left on failure).
/// A Gemma 4 assistant or a vision projector (`mmproj`) is paired with the model it fits, as
/// `companion models import` pairs it (chat::paired): that model's record, and the pairing.
pub fn import_file(
    source: &Path,
    models_dir: &Path,
    database: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(ModelRecord, Option<memory::Pairing>)> {
    let store = memory::Store::open(database)?.store;
    let imported = chat::models::import_model(&store, models_dir, source, None, progress).map_err(
        |e| match e {
            chat::Error::Engine(e) => AppError::new(
                e.code(),
                format!(
                    "{} Pick a Gemma GGUF file.",
                    crate::error::sentence(&e.to_string())
                ),
            ),
            e => e.into(),
        },
    )?;
    Ok((imported.model, imported.paired.map(|p| p.kind)))
}

/// The library's record of the model at `path`; a file the library does not know is refused
/// (`what` says what was asked of it).
fn library_record(state: &AppState, path: &Path, what: &str) -> Result<ModelRecord> {
    library(state)
        .into_iter()
        .find(|m| same_file(Path::new(&m.path), path))
        .ok_or_else(|| {
            AppError::new(
                "unknown_model",
                format!("Only a model of the library can be {what}; import the file first."),
            )
        })
}

/// What `remove_model` did with the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Removed {
    /// `true`: the library's copy was deleted; `false`: the library forgot the model and its
    /// file stays where the user keeps it (the library did not copy it).
    pub file_deleted: bool,
}

/// Remove a model of the library (chat::models::remove_model). The model in use is refused:
/// switch to another first.
#[tauri::command]
pub async fn remove_model(state: State<'_, AppState>, path: String) -> Result<Removed> {
    let path = PathBuf::from(path);
    let record = library_record(&state, &path, "removed")?;
    if same_file(&path, &state.settings().model_path()) {
        return Err(AppError::new(
            "model_in_use",
            format!(
                "{} is the model in use; switch to another before removing it.",
                record.label()
            ),
        ));
    }
    let models_dir = state.config.models_dir.clone();
    let file_deleted =
        state.with_store(|s| Ok(chat::models::remove_model(s, &models_dir, &record)?))?;
    Ok(Removed { file_deleted })
}

/// What `verify_model` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    pub label: String,
    /// The file's bytes still hash to the sha256 recorded when it was imported.
    pub matches: bool,
    pub expected: String,
    pub found: String,
}

/// Hash a model of the library again (progress on `on_progress`) and compare it with the
/// sha256 recorded at import: a file damaged on the disk since then is found here.
#[tauri::command]
pub async fn verify_model(
    state: State<'_, AppState>,
    path: String,
    on_progress: Channel<ImportProgress>,
) -> Result<Verification> {
    let record = library_record(&state, Path::new(&path), "verified")?;
    tauri::async_runtime::spawn_blocking(move || {
        let verified = chat::models::verify_model(&record, &mut per_percent(&on_progress))?;
        Ok(Verification {
            label: record.label(),
            matches: verified.matches,
            expected: record.sha256.clone(),
            found: verified.sha256,
        })
    })
    .await
    .map_err(|e| {
        AppError::new(
            "verify",
            format!("The check stopped unexpectedly ({e}); try again."),
        )
    })?
}

/// Use the model at `path` (one that `list_models` gives): it is loaded in an engine of its
/// own and checked first (chat::models::self_check); only then does the app switch to it and
/// the engine reload. When the check fails the model in use stays, and the error says why.
#[tauri::command]
pub async fn switch_model<R: Runtime>(
    app: AppHandle<R>,
    state: State<'_, AppState>,
    path: String,
) -> Result<()> {
    let path = PathBuf::from(path);
    let settings = state.settings();
    let library = library(&state);
    let known = models(&state.config.models_dir, &settings.model_path(), &library);
    let Some(target) = known
        .iter()
        .find(|m| same_file(Path::new(&m.path), &path))
        .cloned()
    else {
        return Err(AppError::new(
            "unknown_model",
            "That model is not in the models directory; import it first.",
        ));
    };
    let label = |m: &ModelFileView| match (&m.name, m.version) {
        (Some(name), Some(v)) => format!("{name} v{v}"),
        _ => m.file_name.clone(),
    };
    let kept = known
        .iter()
        .find(|m| m.current)
        .map(label)
        .unwrap_or_else(|| "the model in use".into());
    let config = engine::EngineConfig {
        model_path: path.clone(),
        device: settings.device,
        // the check reads a few tokens
        context: 256,
        ..engine::EngineConfig::default()
    };
    let checked = tauri::async_runtime::spawn_blocking(move || chat::models::self_check(config))
        .await
        .map_err(|e| AppError::new("self_check_failed", format!("The check stopped ({e}).")))?;
    if let Err(e) = checked {
        return Err(AppError::new(
            "self_check_failed",
            crate::error::sentence(&format!(
                "{} failed its self-check, so {kept} stays in use: {e}",
                label(&target)
            )),
        ));
    }
    if let Some(record) = library
        .iter()
        .find(|m| same_file(Path::new(&m.path), &path))
    {
        let id = record.id;
        state.with_store(|s| Ok(s.set_model_in_use(id).map(|_| ())?))?;
    }
    let mut next = settings;
    next.model_path = Some(path);
    super::settings::apply(&app, &state, next)?;
    Ok(())
}

/// The engine's base-model notice, with where a user of the app gets another model.
pub(crate) fn base_model_notice(info: &engine::ModelInfo) -> Option<String> {
    let notice = info.tuning_notice.as_deref()?;
    Some(format!("{notice} Import one in the model panel."))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/gemma-family")
            .join(name)
    }

    #[test]
    fn a_file_that_is_not_a_model_is_refused_and_nothing_is_copied() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("notes.gguf");
        std::fs::write(&bad, b"not a gguf at all").unwrap();
        let models = dir.path().join("models");
        let e = import_file(&bad, &models, &dir.path().join("c.db"), &mut |_, _| {}).unwrap_err();
        assert!(
            e.message.ends_with("Pick a Gemma GGUF file."),
            "{}",
            e.message
        );
        assert!(!models.exists());
        assert_eq!(
            super::models(&models, &bad, &[]).len(),
            1,
            "the current model is listed"
        );
    }

    #[test]
    fn two_versions_of_a_model_are_listed_with_the_model_in_use() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("c.db");
        let models_dir = dir.path().join("models");
        let mut last = (0, 0);
        let v1 = import_file(
            &fixture("gemma3-gqa.q4_k_m.gguf"),
            &models_dir,
            &db,
            &mut |d, t| last = (d, t),
        )
        .unwrap()
        .0;
        assert_eq!(last.0, last.1, "progress reaches the end");
        let v2 = import_file(
            &fixture("gemma3-gqa.q8_0.gguf"),
            &models_dir,
            &db,
            &mut |_, _| {},
        )
        .unwrap()
        .0;
        assert_eq!((v1.version, v2.version), (1, 2));
        // a file the library does not know, and the model in use outside the directory
        std::fs::copy(
            fixture("gemma1-mqa.q8_0.gguf"),
            models_dir.join("by-hand.gguf"),
        )
        .unwrap();
        let elsewhere = fixture("gemma2-softcap.q8_0.gguf");
        let library = memory::Store::open(&db).unwrap().store.models().unwrap();
        let list = super::models(&models_dir, &elsewhere, &library);
        let rows: Vec<(Option<i64>, &str, bool)> = list
            .iter()
            .map(|m| (m.version, m.file_name.as_str(), m.current))
            .collect();
        assert_eq!(
            rows,
            [
                (Some(1), "gemma3-gqa.q4_k_m.gguf", false),
                (Some(2), "gemma3-gqa.q8_0.gguf", false),
                (None, "by-hand.gguf", false),
                (None, "gemma2-softcap.q8_0.gguf", true),
            ]
        );
        assert_eq!(list[1].name.as_deref(), Some("synthetic gemma3-gqa"));
        assert_eq!(list[1].sha256.as_deref(), Some(v2.sha256.as_str()));
    }
}
