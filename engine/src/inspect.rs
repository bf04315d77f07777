//! What a model file is, read from its header without loading a weight: what the model
//! library checks before it keeps a file, and records. The same checks as loading runs up to
//! the weights — the bounded GGUF parser, the architecture description (a family or layout
//! we do not run is refused here, by name), every tensor's bounds, and the tokenizer — so
//! that a file the library accepts fails later only on its numbers, which the library's
//! self-check tries.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::arch::{ModelArch, Tuning};
use crate::error::{Error, Result};
use crate::gguf::{ModelFile, keys};
use crate::tokenizer::GemmaTokenizer;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelFacts {
    /// `general.name`, else `general.basename` ("Gemma 3 270m"), if the file has either.
    pub name: Option<String>,
    /// The GGUF architecture (`gemma3`).
    pub architecture: String,
    /// The generation as people name it ("Gemma 3").
    pub family: String,
    pub tuning: Tuning,
    pub parameters: u64,
    pub quantization: String,
    pub file_bytes: u64,
    /// Memory it works in beyond its file while it runs, where that is more than a model's
    /// own estimate covers: a vision projector's encoder activations; 0 otherwise.
    pub working_bytes: u64,
}

/// Check `path` as a model Companion can run, and say what it is.
pub fn inspect_model(path: &Path) -> Result<ModelFacts> {
    let file = ModelFile::open(path)?;
    // the description first: a file of another kind is refused by what it is
    let arch = &ModelArch::of(&file)?;
    GemmaTokenizer::from_gguf(&file)?;
    let basename = file
        .metadata(keys::BASENAME)
        .and_then(|v| v.to_string().ok())
        .map(|s| s.trim().to_string());
    let name = arch
        .name
        .as_deref()
        .map(str::trim)
        .map(str::to_string)
        .or(basename)
        .filter(|n| !n.is_empty());
    Ok(ModelFacts {
        name,
        architecture: arch.family.as_str().to_string(),
        family: arch.family.display_name().to_string(),
        tuning: arch.tuning,
        parameters: arch.parameter_count(),
        quantization: file.quantization_label(),
        file_bytes: file.file_size(),
        working_bytes: 0,
    })
}

/// Whether `path` is a Gemma 4 multi-token-prediction assistant (by its header's
/// `general.architecture`); `false` for anything that is not, or not a readable GGUF.
pub fn is_assistant_file(path: &Path) -> bool {
    ModelFile::open(path).is_ok_and(|f| crate::arch::assistant::is_assistant(&f))
}

/// What an assistant file is, checked against the model it would draft for (both headers
/// only): refused in one sentence when it does not fit that model.
pub fn inspect_assistant(path: &Path, model: &Path) -> Result<ModelFacts> {
    let target = ModelArch::of(&ModelFile::open(model)?)?;
    let file = ModelFile::open(path)?;
    let arch = ModelArch::assistant_of(&file, &target)?;
    Ok(ModelFacts {
        name: arch.name.clone(),
        architecture: crate::arch::assistant::ARCH.to_string(),
        family: "Gemma 4 assistant".to_string(),
        tuning: arch.tuning,
        parameters: arch.parameter_count(),
        quantization: file.quantization_label(),
        file_bytes: file.file_size(),
        working_bytes: 0,
    })
}

/// Whether `path` is a vision projector (`mmproj`: `general.architecture` `clip`); `false`
/// for anything that is not, or not a readable GGUF.
pub fn is_projector_file(path: &Path) -> bool {
    ModelFile::open(path).is_ok_and(|f| crate::vision::VisionDescription::is_projector(&f))
}

/// What a vision projector is, checked against the model it would read pictures for (both
/// headers only): refused in one sentence when its kind, its output width or the model's
/// vocabulary does not fit.
pub fn inspect_projector(path: &Path, model: &Path) -> Result<ModelFacts> {
    let model_file = ModelFile::open(model)?;
    let target = ModelArch::of(&model_file)?;
    let file = ModelFile::open(path)?;
    let d = crate::vision::VisionDescription::of(&file)?;
    let refuse = |reason: String| Error::InvalidModel {
        path: path.to_path_buf(),
        reason,
    };
    if target.family != crate::arch::Family::Gemma3 {
        return Err(refuse(format!(
            "Gemma 3's projector reads pictures for Gemma 3 models, not for {}",
            target.family.display_name()
        )));
    }
    if d.out_width != target.n_embd {
        return Err(refuse(format!(
            "it makes rows of {} values and the model reads rows of {}",
            d.out_width, target.n_embd
        )));
    }
    crate::vision::ImageMarkers::of(&GemmaTokenizer::from_gguf(&model_file)?)?;
    let name = file
        .metadata(keys::NAME)
        .and_then(|v| v.to_string().ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    Ok(ModelFacts {
        name,
        architecture: "clip".to_string(),
        family: "Gemma 3 vision projector".to_string(),
        tuning: target.tuning,
        parameters: file
            .tensor_names()
            .filter_map(|n| file.tensor_dims(n))
            .map(|dims| dims.iter().product::<usize>() as u64)
            .sum(),
        quantization: file.quantization_label(),
        file_bytes: file.file_size(),
        working_bytes: d.activation_bytes(),
    })
}
