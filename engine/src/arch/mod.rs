//! The architecture description: everything about a Gemma model's shape and numerics that the
//! forward pass, the KV cache, snapshots and the memory estimate need, read once from the
//! GGUF's metadata and tensor list. The model is written once against this description; an
//! architecture is data here, not a copy of the code.
//!
//! Follows llama.cpp b11434: the generic hyper-parameters of `llama_model_base::load_hparams`
//! (`src/llama-model.cpp`: scalar-or-array head counts and FFN widths, key/value lengths with
//! their `_swa` variants, rope dimensions, rope scaling) and each family's `load_arch_hparams`
//! and graph in `src/models/gemma.cpp`, `gemma2.cpp`, `gemma3.cpp`, `gemma4.cpp`:
//!
//! | | gemma | gemma2 | gemma3 | gemma4 |
//! |---|---|---|---|---|
//! | sliding window | none | every other layer (pattern 2), 4096 if unset | pattern 6 when a window is set | `sliding_window_pattern` array |
//! | query scale | 1/√head_dim | 1/√head_dim (27B: 1/√(n_embd/n_head)) | same as gemma2 | 1 (Q and K are RMS-normed) |
//! | QK norms, V norm | – | – | QK | QK, V without weight |
//! | post-norms | – | attention and FFN | same | same |
//! | soft-caps | – | attention and final | final when set | final when set |
//! | rope scaling | all layers | all layers | global layers only | global layers only, `rope_freqs` |
//!
//! Gemma 4 adds per-layer dimensions (KV heads and head size differ between sliding and global
//! layers), V = K on layers without `attn_v`, `layer_output_scale`, per-layer embeddings (PLE),
//! shared KV layers (the last `shared_kv_layers` layers attend over an earlier layer's cache and
//! store none of their own) and per-layer FFN widths.
//!
//! What a file asks for that we cannot run is refused with a sentence naming it, never guessed.
//!
//! This file holds the description's types; `read.rs` the reading every generation shares,
//! `rules.rs` what a generation decides, and `gemma.rs` … `gemma4.rs` each generation's rules.

pub mod assistant;
mod gemma;
mod gemma2;
mod gemma3;
mod gemma4;
mod limits;
mod read;
mod rules;
mod tuning;

use serde::Serialize;

use crate::error::Result;
use crate::gguf::{Header, Meta, ModelFile, keys};

pub use limits::Limits;
pub use tuning::Tuning;

/// The Gemma generation, from `general.architecture`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Gemma,
    Gemma2,
    Gemma3,
    Gemma4,
}

impl Family {
    pub const SUPPORTED: &'static str = "gemma, gemma2, gemma3 and gemma4";

    pub fn as_str(self) -> &'static str {
        match self {
            Family::Gemma => "gemma",
            Family::Gemma2 => "gemma2",
            Family::Gemma3 => "gemma3",
            Family::Gemma4 => "gemma4",
        }
    }

    /// Whether llama.cpp's graph for the generation drops the rows no output is read from
    /// right after the last layer's attention projection, so that the rest of that layer runs
    /// on the output rows only (`ggml_get_rows(…, inp_out_ids)` in `src/models/gemma.cpp`,
    /// `gemma2.cpp`, `gemma3.cpp`). Gemma 4's graph (`gemma4.cpp`) keeps every row unless
    /// multi-token prediction asks otherwise. Which rows a product sees changes its rounding
    /// (`cpu::kquants`), so the forward pass follows.
    pub fn last_layer_keeps_output_rows_only(self) -> bool {
        !matches!(self, Family::Gemma4)
    }

    /// The generation as people name it ("Gemma 3").
    pub fn display_name(self) -> &'static str {
        match self {
            Family::Gemma => "Gemma",
            Family::Gemma2 => "Gemma 2",
            Family::Gemma3 => "Gemma 3",
            Family::Gemma4 => "Gemma 4",
        }
    }

    fn from_arch(arch: &str) -> Option<Self> {
        Some(match arch {
            "gemma" => Family::Gemma,
            "gemma2" => Family::Gemma2,
            "gemma3" => Family::Gemma3,
            "gemma4" => Family::Gemma4,
            _ => return None,
        })
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a layer's keys and values come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind", content = "layer")]
pub enum KvSource {
    /// The layer projects its own K and V and stores them.
    Own,
    /// The layer attends over this earlier layer's cache and stores nothing (Gemma 4's
    /// `shared_kv_layers`).
    Shared(usize),
}

/// One RoPE table: NEOX-style rotation of the first `n_rot` of `head_dim` values
/// (llama.cpp `LLAMA_ROPE_TYPE_NEOX`), `theta = freq_scale · pos · base^(-2i/n_rot) / factor_i`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RopeSpec {
    pub base: f32,
    /// 1 / the linear scaling factor (llama.cpp `freq_scale`).
    pub freq_scale: f32,
    pub n_rot: usize,
    pub head_dim: usize,
    /// Divide each pair's frequency by `rope_freqs` (Gemma 4's proportional rope).
    pub freq_factors: bool,
}

/// The facts of one transformer block.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LayerArch {
    pub sliding: bool,
    pub n_head: usize,
    pub n_kv_head: usize,
    /// Size of each query, key and value head (Gemma never makes K and V differ).
    pub head_dim: usize,
    pub n_ff: usize,
    /// Index into [`ModelArch::ropes`].
    pub rope: usize,
    /// Queries are multiplied by this before attention.
    pub q_scale: f32,
    /// RMS norms on Q and K heads (weights `attn_q_norm`, `attn_k_norm`).
    pub qk_norm: bool,
    /// An RMS norm without weight on V heads (Gemma 4).
    pub v_norm: bool,
    /// `post_attention_norm` and `post_ffw_norm`.
    pub post_norms: bool,
    pub kv: KvSource,
    /// No `attn_v`: V is the raw K projection (Gemma 4's global layers).
    pub v_from_k: bool,
    /// A scalar `layer_output_scale` multiplies the block's output.
    pub output_scale: bool,
}

impl LayerArch {
    pub fn q_width(&self) -> usize {
        self.n_head * self.head_dim
    }

    pub fn kv_width(&self) -> usize {
        self.n_kv_head * self.head_dim
    }

    pub fn stores_kv(&self) -> bool {
        self.kv == KvSource::Own
    }
}

/// A model's whole description.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelArch {
    pub family: Family,
    pub name: Option<String>,
    /// Base (continues text) or instruction-tuned (answers), from the file's metadata.
    pub tuning: Tuning,
    pub n_vocab: usize,
    pub n_embd: usize,
    pub rms_eps: f32,
    /// The context the model was trained for.
    pub context_length: usize,
    /// The input embedding is multiplied by this (√n_embd).
    pub embed_scale: f32,
    /// Tokens a sliding layer attends to, itself included.
    pub window: Option<usize>,
    /// `cap · tanh(score / cap)` on attention scores (Gemma 2).
    pub attn_softcap: Option<f32>,
    /// The same on the output logits.
    pub final_softcap: Option<f32>,
    /// No `output.weight`: the token embedding is also the output projection.
    pub tied_output: bool,
    /// Width of the per-layer embeddings (Gemma 4 E-series), if any.
    pub per_layer_input: Option<usize>,
    pub layers: Vec<LayerArch>,
    pub ropes: Vec<RopeSpec>,
}

impl ModelArch {
    pub fn n_layer(&self) -> usize {
        self.layers.len()
    }

    /// Layers that store K and V (all but Gemma 4's shared layers).
    pub fn storing_layers(&self) -> impl Iterator<Item = (usize, &LayerArch)> {
        self.layers
            .iter()
            .enumerate()
            .filter(|(_, l)| l.stores_kv())
    }

    /// The layer whose cache layer `il` attends over.
    pub fn kv_layer(&self, il: usize) -> usize {
        match self.layers[il].kv {
            KvSource::Own => il,
            KvSource::Shared(src) => src,
        }
    }

    /// Widest Q, KV and FFN of any layer (scratch sizing, the memory estimate).
    pub fn max_q_width(&self) -> usize {
        self.layers
            .iter()
            .map(LayerArch::q_width)
            .max()
            .unwrap_or(0)
    }
    pub fn max_kv_width(&self) -> usize {
        self.layers
            .iter()
            .map(LayerArch::kv_width)
            .max()
            .unwrap_or(0)
    }
    pub fn max_ff(&self) -> usize {
        self.layers.iter().map(|l| l.n_ff).max().unwrap_or(0)
    }
    pub fn max_head_dim(&self) -> usize {
        self.layers.iter().map(|l| l.head_dim).max().unwrap_or(0)
    }

    /// Parameters, from the shapes this description implies.
    pub fn parameter_count(&self) -> u64 {
        let e = self.n_embd as u64;
        let mut total = self.n_vocab as u64 * e + e;
        if !self.tied_output {
            total += self.n_vocab as u64 * e;
        }
        if let Some(p) = self.per_layer_input {
            let all = (p * self.n_layer()) as u64;
            total += self.n_vocab as u64 * all + e * all + p as u64;
        }
        for l in &self.layers {
            let (q, kv, ff) = (l.q_width() as u64, l.kv_width() as u64, l.n_ff as u64);
            total += e * q + q * e + 3 * e * ff + 2 * e;
            if l.stores_kv() {
                total += e * kv * if l.v_from_k { 1 } else { 2 };
            }
            if l.qk_norm {
                total += 2 * l.head_dim as u64;
            }
            if l.post_norms {
                total += 2 * e;
            }
            if let Some(p) = self.per_layer_input {
                total += 2 * e * p as u64 + e;
            }
        }
        total
    }

    /// A one-line summary: "gemma3, 18 layers (15 sliding, window 512), 640 wide, 4 heads".
    pub fn summary(&self) -> String {
        let sliding = self.layers.iter().filter(|l| l.sliding).count();
        let shared = self.layers.iter().filter(|l| !l.stores_kv()).count();
        let mut s = format!("{}, {} layers", self.family, self.n_layer());
        if let Some(w) = self.window.filter(|_| sliding > 0) {
            s += &format!(" ({sliding} sliding, window {w})");
        }
        if shared > 0 {
            s += &format!(", {shared} sharing KV");
        }
        s += &format!(", {} wide", self.n_embd);
        if self.per_layer_input.is_some() {
            s += ", per-layer embeddings";
        }
        s
    }

    /// A small description for unit tests: `sliding[il]` per layer, every layer with `n_kv`
    /// heads of `head_dim` (queries: twice as many heads), the last `shared` layers reading the
    /// last stored layer of their kind.
    #[cfg(test)]
    pub(crate) fn for_tests(
        sliding: &[bool],
        n_kv: usize,
        head_dim: usize,
        window: usize,
        shared: usize,
    ) -> Self {
        let n = sliding.len();
        let kv_from = n - shared;
        let layers = sliding
            .iter()
            .enumerate()
            .map(|(il, &s)| LayerArch {
                sliding: s,
                n_head: 2 * n_kv,
                n_kv_head: n_kv,
                head_dim,
                n_ff: 8,
                rope: 0,
                q_scale: 1.0,
                qk_norm: false,
                v_norm: false,
                post_norms: false,
                kv: if il < kv_from {
                    KvSource::Own
                } else {
                    KvSource::Shared((0..kv_from).rev().find(|&j| sliding[j] == s).unwrap_or(0))
                },
                v_from_k: false,
                output_scale: false,
            })
            .collect();
        ModelArch {
            family: Family::Gemma3,
            name: None,
            tuning: Tuning::Base,
            n_vocab: 10,
            n_embd: 8,
            rms_eps: 1e-6,
            context_length: 4096,
            embed_scale: 1.0,
            window: Some(window),
            attn_softcap: None,
            final_softcap: None,
            tied_output: true,
            per_layer_input: None,
            layers,
            ropes: vec![RopeSpec {
                base: 10_000.0,
                freq_scale: 1.0,
                n_rot: head_dim,
                head_dim,
                freq_factors: false,
            }],
        }
    }

    /// The description of an opened file. What the file asks for that Companion cannot run
    /// (another architecture, mixture-of-experts, …) is refused here, with a sentence saying so.
    pub fn of(file: &ModelFile) -> Result<Self> {
        Self::from_gguf(&file.meta(), &|name| file.has_tensor(name))
    }

    /// The checks opening and describing a model file run on its header, on bytes in memory
    /// (the fuzzer's entry point): the bounded parser, the tensors' bounds, the description.
    pub fn check_header(bytes: &[u8]) -> Result<Self> {
        let header = Header::parse(bytes)?;
        Self::from_gguf(&header.meta(), &|name| header.has_tensor(name))
    }

    /// Read the description from a GGUF's metadata and tensor names.
    pub(crate) fn from_gguf(meta: &Meta<'_>, has_tensor: &dyn Fn(&str) -> bool) -> Result<Self> {
        read::Reader {
            meta,
            has_tensor,
            path: meta.path,
            arch: meta.string(keys::ARCHITECTURE)?,
        }
        .read()
    }
}

#[cfg(test)]
mod tests;
