//! `GemmaConfig`: the hyper-parameters of a Gemma model as read from GGUF metadata, with the
//! defaults llama.cpp applies (`src/models/gemma3.cpp`, `load_arch_hparams`).

use std::collections::HashMap;
use std::path::Path;

use candle_core::quantized::gguf_file::Value;
use serde::Serialize;

use super::{Meta, keys};
use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Architecture {
    Gemma3,
}

impl Architecture {
    pub const SUPPORTED: &'static str = "gemma3";

    pub fn as_str(self) -> &'static str {
        match self {
            Architecture::Gemma3 => "gemma3",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct GemmaConfig {
    pub architecture: Architecture,
    pub name: Option<String>,
    pub n_vocab: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_kv_head: usize,
    pub head_dim: usize,
    pub n_ff: usize,
    pub rms_eps: f32,
    /// RoPE base of the global (full-attention) layers.
    pub rope_base_global: f32,
    /// RoPE base of the sliding-window layers (llama.cpp: `rope_freq_base_train_swa`, 10000 for Gemma 3).
    pub rope_base_local: f32,
    /// Tokens each sliding-window layer attends to, itself included; `None` when every layer is global.
    pub sliding_window: Option<usize>,
    /// Every `swa_pattern`-th layer is global, the others slide (Gemma 3: 6).
    pub swa_pattern: usize,
    pub context_length: usize,
    pub final_logit_softcap: Option<f32>,
    /// Query scale applied before attention: 1/sqrt(head_dim), as llama.cpp for all but 27B.
    pub attention_scale: f32,
}

impl GemmaConfig {
    pub(crate) fn from_metadata(path: &Path, metadata: &HashMap<String, Value>) -> Result<Self> {
        let m = Meta { path, metadata };
        let arch = m.string(keys::ARCHITECTURE)?;
        let architecture = match arch {
            "gemma3" => Architecture::Gemma3,
            other => {
                return Err(Error::UnsupportedArchitecture {
                    path: path.to_path_buf(),
                    architecture: other.to_string(),
                    supported: Architecture::SUPPORTED,
                });
            }
        };
        let n_embd = m.usize(&keys::embedding_length(arch))?;
        let n_layer = m.usize(&keys::block_count(arch))?;
        let n_head = m.usize(&keys::head_count(arch))?;
        let n_kv_head = m.opt_usize(&keys::head_count_kv(arch))?.unwrap_or(n_head);
        let head_dim = m
            .opt_usize(&keys::key_length(arch))?
            .unwrap_or(n_embd / n_head.max(1));
        let value_dim = m.opt_usize(&keys::value_length(arch))?.unwrap_or(head_dim);
        let n_ff = m.usize(&keys::feed_forward_length(arch))?;
        let rms_eps = m.f32(&keys::rms_eps(arch))?;
        let rope_base_global = m.opt_f32(&keys::rope_freq_base(arch))?.unwrap_or(10_000.0);
        let rope_base_local = m
            .opt_f32(&keys::rope_freq_base_swa(arch))?
            .unwrap_or(10_000.0);
        let sliding_window = m.opt_usize(&keys::sliding_window(arch))?.filter(|&w| w > 0);
        let context_length = m.usize(&keys::context_length(arch))?;
        let final_logit_softcap = m
            .opt_f32(&keys::final_logit_softcapping(arch))?
            .filter(|&c| c > 0.0);
        let n_vocab = m.array(keys::TOKENS)?.len();

        let bad = |reason: String| Error::InvalidModel {
            path: path.to_path_buf(),
            reason,
        };
        if n_embd == 0
            || n_layer == 0
            || n_head == 0
            || n_kv_head == 0
            || head_dim == 0
            || n_ff == 0
        {
            return Err(bad("a model dimension in the metadata is zero".into()));
        }
        if n_head % n_kv_head != 0 {
            return Err(bad(format!(
                "head_count {n_head} is not a multiple of head_count_kv {n_kv_head}"
            )));
        }
        if value_dim != head_dim {
            return Err(bad(format!(
                "key_length {head_dim} differs from value_length {value_dim}, which Gemma never does"
            )));
        }
        if head_dim % 2 != 0 {
            return Err(bad(format!(
                "head dimension {head_dim} is odd; RoPE needs it even"
            )));
        }
        if n_vocab == 0 {
            return Err(bad("the vocabulary is empty".into()));
        }
        let name = m.get(keys::NAME).and_then(|v| v.to_string().ok()).cloned();
        Ok(GemmaConfig {
            architecture,
            name,
            n_vocab,
            n_embd,
            n_layer,
            n_head,
            n_kv_head,
            head_dim,
            n_ff,
            rms_eps,
            rope_base_global,
            rope_base_local,
            sliding_window,
            swa_pattern: 6,
            context_length,
            final_logit_softcap,
            attention_scale: 1.0 / (head_dim as f32).sqrt(),
        })
    }

    /// Whether layer `il` uses the sliding window (llama.cpp `set_swa_pattern(6)`: every sixth
    /// layer, counting from one, is global).
    pub fn is_sliding(&self, il: usize) -> bool {
        self.sliding_window.is_some() && (il + 1) % self.swa_pattern != 0
    }

    /// Number of parameters, from the tensor shapes this config implies.
    pub fn parameter_count(&self) -> u64 {
        let e = self.n_embd as u64;
        let q = (self.n_head * self.head_dim) as u64;
        let kv = (self.n_kv_head * self.head_dim) as u64;
        let per_layer = e * q
            + 2 * e * kv
            + q * e
            + 3 * e * self.n_ff as u64
            + 4 * e
            + 2 * self.head_dim as u64;
        self.n_vocab as u64 * e + e + per_layer * self.n_layer as u64
    }
}

/// llama.cpp's `llama_ftype` names for `general.file_type`.
pub fn file_type_label(ft: Option<u32>) -> &'static str {
    match ft {
        Some(0) => "F32",
        Some(1) => "F16",
        Some(2) => "Q4_0",
        Some(3) => "Q4_1",
        Some(7) => "Q8_0",
        Some(8) => "Q5_0",
        Some(9) => "Q5_1",
        Some(10) => "Q2_K",
        Some(11) => "Q3_K_S",
        Some(12) => "Q3_K_M",
        Some(13) => "Q3_K_L",
        Some(14) => "Q4_K_S",
        Some(15) => "Q4_K_M",
        Some(16) => "Q5_K_S",
        Some(17) => "Q5_K_M",
        Some(18) => "Q6_K",
        Some(32) => "BF16",
        _ => "unknown",
    }
}
