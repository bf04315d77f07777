//! Files the library pairs with a model: Gemma 4's multi-token-prediction assistants and
//! vision projectors (`mmproj`). `companion models import` (and the app's model panel) takes
//! such a file as it takes a model, checks it against the library's models by their headers
//! (an assistant: generation, width, vocabulary, the heads and window of the layers it reads,
//! `engine::inspect_assistant`; a projector: its kind, its output width against the model's,
//! the picture tokens of the model's vocabulary, `engine::inspect_projector`), pairs it with
//! the model in use when it fits that one, else with the newest model it fits, and refuses it
//! in one sentence when it fits none. A model loaded from the library loads its paired files
//! beside it; they go with their model.

use std::path::{Path, PathBuf};

use memory::{ModelRecord, PairedFile, Pairing, Store};

use crate::error::{Error, Result};
use crate::models::{CreatePartial, Imported, Incoming};

/// A file kept in the library for a model, and the one of its kind it replaced.
#[derive(Debug, Clone)]
pub struct Paired {
    pub kind: Pairing,
    pub file: PairedFile,
    pub replaced: Option<PairedFile>,
}

/// What the library says of each kind.
struct Kind {
    /// The generation it is for (`ModelRecord::architecture`).
    architecture: &'static str,
    /// "Gemma 4 assistant", "Gemma 3 vision projector".
    what: &'static str,
    /// The model generation's name.
    generation: &'static str,
    /// What it does for its model, for "import the model it … first".
    role: &'static str,
    inspect: fn(&Path, &Path) -> engine::Result<engine::ModelFacts>,
}

fn kind(pairing: Pairing) -> Kind {
    match pairing {
        Pairing::Assistant => Kind {
            architecture: "gemma4",
            what: "Gemma 4 assistant",
            generation: "Gemma 4",
            role: "drafts for",
            inspect: engine::inspect_assistant,
        },
        Pairing::Projector => Kind {
            architecture: "gemma3",
            what: "Gemma 3 vision projector",
            generation: "Gemma 3",
            role: "reads pictures for",
            inspect: engine::inspect_projector,
        },
    }
}

/// Which kind of paired file `source` is, if any (by its header).
pub(crate) fn pairing_of(source: &Path) -> Option<Pairing> {
    if engine::is_assistant_file(source) {
        Some(Pairing::Assistant)
    } else if engine::is_projector_file(source) {
        Some(Pairing::Projector)
    } else {
        None
    }
}

/// The library's models a file of `k` may be for: the model in use first, then the newest.
fn candidates(store: &Store, k: &Kind) -> Result<Vec<ModelRecord>> {
    let in_use = store.model_in_use()?;
    let mut models: Vec<ModelRecord> = store
        .models()?
        .into_iter()
        .filter(|m| m.architecture == k.architecture)
        .collect();
    models.sort_by_key(|m| {
        (
            in_use.as_ref().is_none_or(|u| u.id != m.id),
            std::cmp::Reverse(m.added_at),
        )
    });
    Ok(models)
}

pub(crate) fn import_paired(
    pairing: Pairing,
    store: &Store,
    models_dir: &Path,
    source: &Path,
    expected: Option<&str>,
    progress: &mut dyn FnMut(u64, u64),
    create: &CreatePartial<'_>,
) -> Result<Imported> {
    let k = kind(pairing);
    let models = candidates(store, &k)?;
    let mut first_reason = None;
    let mut fit = None;
    for m in models {
        match (k.inspect)(source, Path::new(&m.path)) {
            Ok(facts) => {
                fit = Some((m, facts));
                break;
            }
            Err(e) => {
                first_reason.get_or_insert_with(|| format!("{}: {e}", m.label()));
            }
        }
    }
    let Some((model, facts)) = fit else {
        return Err(Error::PairedFitsNoModel(
            pairing,
            match first_reason {
                None => format!(
                    "this is a {}, and no {} model is in the library: import the model it {} first",
                    k.what, k.generation, k.role
                ),
                Some(reason) => format!(
                    "this {} fits no model in the library (the first tried, {reason})",
                    k.what
                ),
            },
        ));
    };
    let incoming = Incoming::copy(
        models_dir,
        source,
        facts.file_bytes,
        expected,
        progress,
        create,
    )?;
    if let Some(same) = store
        .paired_file(pairing, model.id)?
        .filter(|a| a.sha256 == incoming.sha256)
    {
        incoming.discard();
        return Ok(Imported {
            model,
            added: false,
            newer_than: None,
            paired: Some(Paired {
                kind: pairing,
                file: same,
                replaced: None,
            }),
        });
    }
    let sha256 = incoming.sha256.clone();
    let placed = incoming.place()?;
    match store.pair_file(
        pairing,
        model.id,
        &placed.path.display().to_string(),
        &sha256,
        facts.file_bytes,
    ) {
        Ok((file, replaced)) => {
            if let Some(old) = &replaced {
                remove_file_if_unused(store, pairing, models_dir, old);
            }
            Ok(Imported {
                model,
                added: true,
                newer_than: None,
                paired: Some(Paired {
                    kind: pairing,
                    file,
                    replaced,
                }),
            })
        }
        Err(e) => {
            placed.undo();
            Err(e.into())
        }
    }
}

/// The file of `pairing` paired with the model at `model_path` in the library, when there is
/// one and it is still there.
pub fn paired_for(store: &Store, pairing: Pairing, model_path: &Path) -> Result<Option<PathBuf>> {
    let wanted = model_path
        .canonicalize()
        .unwrap_or_else(|_| model_path.to_path_buf());
    let Some(model) = store.models()?.into_iter().find(|m| {
        let p = Path::new(&m.path);
        p.canonicalize().unwrap_or_else(|_| p.to_path_buf()) == wanted
    }) else {
        return Ok(None);
    };
    Ok(store
        .paired_file(pairing, model.id)?
        .map(|a| PathBuf::from(a.path))
        .filter(|p| p.is_file()))
}

/// Delete a paired file that the library copied (in `models_dir`) once no pairing names it
/// any more.
pub(crate) fn remove_file_if_unused(
    store: &Store,
    pairing: Pairing,
    models_dir: &Path,
    gone: &PairedFile,
) {
    let still_used = store
        .paired_files(pairing)
        .map(|all| all.iter().any(|a| a.path == gone.path))
        .unwrap_or(true);
    let path = Path::new(&gone.path);
    if !still_used
        && crate::models::in_folder(path, models_dir)
        && let Err(e) = std::fs::remove_file(path)
    {
        tracing::warn!(path = %path.display(), error = %e, "an unpaired file stayed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::{import_model, remove_model};

    fn fixture(path: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures")
            .join(path)
    }

    #[test]
    fn an_assistant_pairs_with_the_model_it_fits_and_goes_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let models = dir.path().join("models");
        let store = Store::open(dir.path().join("c.db")).unwrap().store;
        let assistant = fixture("gemma4-assistant/gemma4-dense.assistant.q8_0.gguf");
        let other = fixture("gemma4-assistant/gemma4-ple-shared.assistant.q8_0.gguf");
        let none = |e: Error| e.to_string();

        // no Gemma 4 model in the library yet (a Gemma 3 one is)
        import_model(
            &store,
            &models,
            &fixture("gemma-family/gemma3-gqa.q8_0.gguf"),
            None,
            &mut |_, _| {},
        )
        .unwrap();
        let e = none(import_model(&store, &models, &assistant, None, &mut |_, _| {}).unwrap_err());
        assert!(e.contains("no Gemma 4 model is in the library"), "{e}");

        let dense = import_model(
            &store,
            &models,
            &fixture("gemma-family/gemma4-dense.q8_0.gguf"),
            None,
            &mut |_, _| {},
        )
        .unwrap()
        .model;
        // the E-series fixture's assistant reads heads this model's layers do not hold
        let e = none(import_model(&store, &models, &other, None, &mut |_, _| {}).unwrap_err());
        assert!(
            e.contains("fits no model in the library") && e.contains("KV heads"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        assert_eq!(
            std::fs::read_dir(&models).unwrap().count(),
            2,
            "nothing kept"
        );

        let imported = import_model(&store, &models, &assistant, None, &mut |_, _| {}).unwrap();
        assert_eq!(imported.model.id, dense.id);
        assert!(imported.added);
        let paired = imported.paired.unwrap().file;
        assert_eq!(
            paired_for(&store, Pairing::Assistant, Path::new(&dense.path)).unwrap(),
            Some(PathBuf::from(&paired.path))
        );
        // again: the same file, nothing copied
        let again = import_model(&store, &models, &assistant, None, &mut |_, _| {}).unwrap();
        assert!(!again.added);
        assert_eq!(std::fs::read_dir(&models).unwrap().count(), 3);

        // the model goes, and its assistant's file with it
        store
            .set_model_in_use(
                store
                    .models()
                    .unwrap()
                    .iter()
                    .find(|m| m.id != dense.id)
                    .unwrap()
                    .id,
            )
            .unwrap();
        assert!(remove_model(&store, &models, &dense).unwrap());
        assert!(!Path::new(&paired.path).exists());
        assert!(store.assistants().unwrap().is_empty());
        assert_eq!(std::fs::read_dir(&models).unwrap().count(), 1);
    }
}
