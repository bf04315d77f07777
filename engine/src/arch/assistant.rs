//! Gemma 4's multi-token-prediction assistant ("gemma4-assistant"): a few Gemma 4 blocks that
//! draft tokens for their Gemma 4 model from its hidden state, as llama.cpp b11434 reads one
//! (`src/models/gemma4-assistant.cpp`, `load_arch_hparams` and `load_arch_tensors`):
//!
//! - its blocks are Gemma 4's (the same keys under the `gemma4-assistant.` prefix, the same
//!   norms, rope and `layer_output_scale`), but have only a query projection: each attends
//!   over its target's KV cache, a sliding layer over the target's layer `n_layer - 2` and a
//!   global one over `n_layer - 1` (llama-model.cpp, the assistant's `share` callback), which
//!   in a model with shared-KV layers is itself an earlier layer's cache;
//! - `embedding_length_out` is the target's width, and must differ from the assistant's own
//!   (the loader refuses it otherwise); the vocabulary is the target's;
//! - no final soft-cap, and the output is tied to its own `token_embd`.
//!
//! The description is a [`ModelArch`] whose layers read [`KvSource::Shared`] with the index of
//! the *target's* storing layer, so the one forward pass runs its blocks over the target's
//! cache (`model::assistant`).

use super::read::Reader;
use super::{Family, KvSource, ModelArch};
use crate::error::Result;
use crate::gguf::{Meta, ModelFile, keys};

/// `general.architecture` of an assistant.
pub const ARCH: &str = "gemma4-assistant";

impl ModelArch {
    /// The description of an assistant file for `target`, or a sentence saying why it cannot
    /// draft for that model.
    pub fn assistant_of(file: &ModelFile, target: &ModelArch) -> Result<Self> {
        Self::assistant_from_gguf(&file.meta(), &|name| file.has_tensor(name), target)
    }

    pub(crate) fn assistant_from_gguf(
        meta: &Meta<'_>,
        has_tensor: &dyn Fn(&str) -> bool,
        target: &ModelArch,
    ) -> Result<Self> {
        let arch = meta.string(keys::ARCHITECTURE)?;
        let r = Reader {
            meta,
            has_tensor,
            path: meta.path,
            arch,
        };
        if arch != ARCH {
            return Err(r.invalid(format!(
                "this is not a Gemma 4 assistant (its architecture is `{arch}`, not `{ARCH}`)"
            )));
        }
        if target.family != Family::Gemma4 {
            return Err(r.invalid(format!(
                "a Gemma 4 assistant drafts for Gemma 4 models, not for this {} model",
                target.family.display_name()
            )));
        }
        let mut a = r.read_as(Family::Gemma4)?;
        let out = r.usize(keys::EMBEDDING_LENGTH_OUT)?;
        if out != target.n_embd {
            return Err(r.invalid(format!(
                "this assistant is for a model {out} wide; the model is {} wide",
                target.n_embd
            )));
        }
        if a.n_embd == out {
            // llama.cpp: "requires embedding_length_out to carry the target hidden size"
            return Err(r.invalid(
                "embedding_length_out equals the assistant's own width (llama.cpp refuses it too)",
            ));
        }
        if a.n_vocab != target.n_vocab {
            return Err(r.invalid(format!(
                "this assistant's vocabulary has {} tokens; the model's has {}",
                a.n_vocab, target.n_vocab
            )));
        }
        if !a.tied_output {
            return Err(r.invalid(
                "an assistant's output is its token embedding (`output.weight` present)",
            ));
        }
        if a.per_layer_input.is_some() {
            return Err(r.invalid("an assistant has no per-layer embeddings"));
        }
        let n = target.n_layer();
        if n < 2 || !target.layers[n - 2].sliding || target.layers[n - 1].sliding {
            return Err(r.invalid(
                "the model's last two layers are not a sliding and a global one, which an \
                 assistant reads",
            ));
        }
        for (il, l) in a.layers.iter_mut().enumerate() {
            let read = if l.sliding { n - 2 } else { n - 1 };
            let src = target.kv_layer(read);
            let t = &target.layers[src];
            if (l.n_kv_head, l.head_dim) != (t.n_kv_head, t.head_dim) {
                return Err(r.invalid(format!(
                    "assistant layer {il} has {}×{} KV heads, but the model's layer {read} holds {}×{}",
                    l.n_kv_head, l.head_dim, t.n_kv_head, t.head_dim
                )));
            }
            if l.sliding && a.window != target.window {
                return Err(r.invalid(format!(
                    "the assistant's window {:?} is not the model's {:?}",
                    a.window, target.window
                )));
            }
            l.kv = KvSource::Shared(src);
            l.v_from_k = false;
            l.v_norm = false;
        }
        for name in [keys::NEXTN_PRE_PROJECTION, keys::NEXTN_POST_PROJECTION] {
            if !has_tensor(name) {
                return Err(r.invalid(format!("tensor `{name}` is missing")));
            }
        }
        // llama.cpp's assistant graph: no final soft-cap, and its own embedding is never read
        // as an input (the target's is)
        a.final_softcap = None;
        a.embed_scale = 1.0;
        Ok(a)
    }
}

/// Whether an opened file is an assistant (by `general.architecture`).
pub fn is_assistant(file: &ModelFile) -> bool {
    file.meta()
        .string(keys::ARCHITECTURE)
        .is_ok_and(|a| a == ARCH)
}
