//! The model panel: what is loaded, the models on this device, importing a GGUF (picked in a
//! native dialog, checked, copied into the models directory) and switching to another.

use std::path::{Path, PathBuf};

use serde::Serialize;
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
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelFileView {
    pub path: String,
    pub file_name: String,
    pub bytes: u64,
    pub current: bool,
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
        tuning_notice: info.tuning_notice.clone(),
        parameters: info.parameters,
        quantization: info.quantization.clone(),
        file_bytes: info.file_bytes,
        sha256,
        context: info.context,
        device: info.device.to_string(),
        backend: info.backend.as_str().to_string(),
        memory_estimate_bytes: info.memory.estimate.total_bytes,
        kv_bytes_per_token: info.kv_bytes_per_token,
        load_seconds: info.load_seconds,
    }))
}

/// The GGUF files in the models directory, and the model in use wherever it is.
pub fn models(models_dir: &Path, current: &Path) -> Vec<ModelFileView> {
    let mut out: Vec<ModelFileView> = std::fs::read_dir(models_dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .is_some_and(|x| x.eq_ignore_ascii_case("gguf"))
                && p.is_file()
        })
        .map(|p| view(&p, current))
        .collect();
    if !out.iter().any(|m| m.current) && current.is_file() {
        out.push(view(current, current));
    }
    out.sort_by(|a, b| a.file_name.cmp(&b.file_name));
    out
}

fn view(path: &Path, current: &Path) -> ModelFileView {
    ModelFileView {
        path: path.display().to_string(),
        file_name: file_name(path),
        bytes: std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
        current: same_file(path, current),
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[tauri::command]
pub async fn list_models(state: State<'_, AppState>) -> Result<Vec<ModelFileView>> {
    Ok(models(
        &state.config.models_dir,
        &state.settings().model_path(),
    ))
}

/// Pick a GGUF in a native dialog, check that Companion can run it, and copy it into the
/// models directory. `None`: the user cancelled.
#[tauri::command]
pub async fn import_model<R: Runtime>(
    app: AppHandle<R>,
    state: State<'_, AppState>,
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
    let current = state.settings().model_path();
    let imported = tauri::async_runtime::spawn_blocking(move || import_file(&source, &models_dir))
        .await
        .map_err(|e| {
            AppError::new(
                "import",
                format!("The import stopped unexpectedly ({e}); try again."),
            )
        })??;
    Ok(Some(view(&imported, &current)))
}

/// Check `source` as a Gemma GGUF and copy it into `models_dir` (through a temporary file, so
/// a full disk never leaves half a model under a model's name).
pub fn import_file(source: &Path, models_dir: &Path) -> Result<PathBuf> {
    engine::gguf::ModelFile::open(source).map_err(|e| {
        AppError::new(
            e.code(),
            format!(
                "{} Pick a Gemma GGUF file.",
                crate::error::sentence(&e.to_string())
            ),
        )
    })?;
    let name = source
        .file_name()
        .ok_or_else(|| AppError::new("import", "Pick a file, not a folder."))?;
    let target = models_dir.join(name);
    if same_file(source, &target) {
        return Ok(target);
    }
    let size = std::fs::metadata(source).map(|m| m.len()).unwrap_or(0);
    if std::fs::metadata(&target).is_ok_and(|m| m.len() == size) {
        return Ok(target);
    }
    let fail = |what: &str, e: std::io::Error| {
        AppError::new(
            "import",
            format!(
                "The model could not be {what} ({e}); check the free disk space and try again."
            ),
        )
    };
    std::fs::create_dir_all(models_dir).map_err(|e| fail("stored", e))?;
    let partial = models_dir.join(format!(".{}.partial", name.to_string_lossy()));
    let copied = std::fs::copy(source, &partial).and_then(|_| {
        std::fs::File::open(&partial)?.sync_all()?;
        std::fs::rename(&partial, &target)
    });
    if let Err(e) = copied {
        let _ = std::fs::remove_file(&partial);
        return Err(fail("copied", e));
    }
    Ok(target)
}

/// Use the model at `path` (one that `list_models` gives); the engine reloads.
#[tauri::command]
pub async fn switch_model<R: Runtime>(
    app: AppHandle<R>,
    state: State<'_, AppState>,
    path: String,
) -> Result<()> {
    let path = PathBuf::from(path);
    let settings = state.settings();
    let known = models(&state.config.models_dir, &settings.model_path());
    if !known.iter().any(|m| same_file(Path::new(&m.path), &path)) {
        return Err(AppError::new(
            "unknown_model",
            "That model is not in the models directory; import it first.",
        ));
    }
    let mut next = settings;
    next.model_path = Some(path);
    super::settings::apply(&app, &state, next)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_not_a_model_is_refused_and_nothing_is_copied() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("notes.gguf");
        std::fs::write(&bad, b"not a gguf at all").unwrap();
        let models = dir.path().join("models");
        let e = import_file(&bad, &models).unwrap_err();
        assert!(
            e.message.ends_with("Pick a Gemma GGUF file."),
            "{}",
            e.message
        );
        assert!(!models.exists());
        assert_eq!(
            super::models(&models, &bad).len(),
            1,
            "the current model is listed"
        );
    }
}
