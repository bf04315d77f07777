//! Gemma 4's multi-token-prediction assistant: drafts for its Gemma 4 model from the model's
//! own hidden state, through the model's own KV cache (llama.cpp b11434
//! `src/models/gemma4-assistant.cpp`; the drafting loop of `common/speculative.cpp`,
//! `common_speculative_impl_draft_mtp`, which feeds it as the reference implementations do):
//!
//! ```text
//! x = pre_projection( target.embed(token) · √n_target  ‖  h )      h: the target's hidden
//!                                                                     state after its output
//!                                                                     norm, or the last step's
//! x = the assistant's Gemma 4 blocks at the drafted token's position, Q only, attending over
//!     the target's cache of the positions before it (`arch::assistant`)
//! out = rmsnorm(x) · output_norm
//! logits = out · token_embdᵀ          h' = post_projection(out)   (the next step's h)
//! ```
//!
//! Every step of a chain sits at the same position, the one the last sampled token will take
//! (Hugging Face's `gemma4_assistant` documentation, cited by llama.cpp there): the assistant
//! writes no keys and the target's cache is not changed.
//!
//! The blocks are the model's own forward pass ([`Model::blocks`]) over the assistant's
//! description and weights; only the input and the two projections are the assistant's.

use super::forward::Blocks;
use super::{Hidden, Linear, Model, Output};
use crate::arch::ModelArch;
use crate::backend::{Backend, BackendKind, Counting, HostBackend};
use crate::error::{Error, Result};
use crate::gguf::{ModelFile, keys};
use crate::kv_cache::KvCache;

/// A loaded assistant, for the model it was loaded against.
#[derive(Debug)]
pub struct Assistant {
    /// Its blocks, output norm and tied output, as a model the forward pass runs.
    blocks: Model,
    /// `[n_embd, 2 · n_target]`: token embedding ‖ hidden state → the assistant's width.
    pre_projection: Linear,
    /// `[n_target, n_embd]`: the assistant's output → the next step's hidden state.
    post_projection: Linear,
    /// The target's width.
    n_target: usize,
}

/// One draft step: the logits over the vocabulary, and the hidden state the next step takes.
#[derive(Debug)]
pub struct DraftStep {
    pub logits: Vec<f32>,
    pub hidden: Hidden,
}

impl Assistant {
    /// Load an assistant file for `target` (on its device and backend), or say in one
    /// sentence why it does not fit that model.
    pub fn load(file: &mut ModelFile, target: &Model) -> Result<Self> {
        let arch = ModelArch::assistant_of(file, target.arch())?;
        let (n, n_target) = (arch.n_embd, target.arch().n_embd);
        let device = target.device().clone();
        let backend = target.backend();
        let blocks =
            Model::load_described(file, arch, target.max_context(), &device, backend, false)?;
        let pre_projection = Linear::load(
            file,
            keys::NEXTN_PRE_PROJECTION,
            (n, 2 * n_target),
            true,
            &device,
            backend,
        )?;
        let post_projection = Linear::load(
            file,
            keys::NEXTN_POST_PROJECTION,
            (n_target, n),
            true,
            &device,
            backend,
        )?;
        Ok(Assistant {
            blocks,
            pre_projection,
            post_projection,
            n_target,
        })
    }

    pub fn arch(&self) -> &ModelArch {
        self.blocks.arch()
    }

    /// One step: draft after `token` at position `cache.len()` (the position `token` will
    /// take; the cache holds the target's keys of the positions before it), from `hidden`,
    /// the target's hidden state of the position before or the previous step's.
    pub fn step(
        &self,
        target: &Model,
        cache: &mut KvCache,
        token: u32,
        hidden: &Hidden,
    ) -> Result<DraftStep> {
        if token as usize >= target.arch().n_vocab {
            return Err(Error::InvalidArgument(format!(
                "token id {token} is outside the vocabulary of {}",
                target.arch().n_vocab
            )));
        }
        if hidden.rows() != 1 || hidden.width() != self.n_target {
            return Err(Error::InvalidArgument(format!(
                "an assistant step takes one hidden state of {}, not {}×{}",
                self.n_target,
                hidden.rows(),
                hidden.width()
            )));
        }
        if cache.is_empty() {
            return Err(Error::InvalidArgument(
                "an assistant drafts after at least one position".into(),
            ));
        }
        if target.backend() != BackendKind::Host {
            return Err(Error::InvalidArgument(
                "the assistant drafts on the host backend only".into(),
            ));
        }
        let m = &self.blocks;
        let mut run = || {
            let b = Counting::new(HostBackend::new(m, Output::Last.sums()), &m.ops, &m.profile);
            self.run(&b, target, cache, token, hidden)
        };
        // the target's compute threads: the two never run at once
        match target.active_pool() {
            Some(pool) => pool.install(run),
            None => run(),
        }
    }

    fn run<B: Backend>(
        &self,
        b: &B,
        target: &Model,
        cache: &mut KvCache,
        token: u32,
        hidden: &Hidden,
    ) -> Result<DraftStep> {
        let (a, n_target) = (self.blocks.arch(), self.n_target);
        let t = target.arch();
        let x = b.embed(&target.weights().embedding, &[token], t.embed_scale)?;
        let h = b.act_of(hidden)?;
        let xh = b.concat_columns(x, n_target, h, n_target)?;
        let x = b.matmul(&self.pre_projection, &xh)?;
        b.release(xh);
        let run = Blocks {
            start: cache.len(),
            seq: 1,
            output: Output::Last,
            own_position: false,
            causal: true,
        };
        let x = self.blocks.blocks(b, x, None, cache, run)?;
        let out = b.rms_norm(&x, &self.blocks.weights().output_norm, a.rms_eps)?;
        b.release(x);
        let next = b.matmul(&self.post_projection, &out)?;
        let hidden = b.hidden_of(next, n_target)?;
        let out = b.hidden_of(out, a.n_embd)?;
        let logits = b
            .logits(&out)?
            .pop()
            .ok_or_else(|| Error::InvalidArgument("no logits".into()))?;
        Ok(DraftStep { logits, hidden })
    }
}
