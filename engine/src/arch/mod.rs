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

mod limits;
mod tuning;

use std::path::Path;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::gguf::{Meta, keys};

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

    /// Read the description from a GGUF's metadata and tensor names.
    pub(crate) fn from_gguf(meta: &Meta<'_>, has_tensor: &dyn Fn(&str) -> bool) -> Result<Self> {
        Reader {
            meta,
            has_tensor,
            path: meta.path,
        }
        .read()
    }
}

struct Reader<'a> {
    meta: &'a Meta<'a>,
    has_tensor: &'a dyn Fn(&str) -> bool,
    path: &'a Path,
}

impl Reader<'_> {
    fn invalid(&self, reason: impl Into<String>) -> Error {
        Error::InvalidModel {
            path: self.path.to_path_buf(),
            reason: reason.into(),
        }
    }

    fn unsupported(&self, what: impl Into<String>) -> Error {
        Error::UnsupportedModel {
            path: self.path.to_path_buf(),
            what: what.into(),
        }
    }

    fn read(&self) -> Result<ModelArch> {
        let m = self.meta;
        let arch = m.string(keys::ARCHITECTURE)?;
        let family = match Family::from_arch(arch) {
            Some(f) => f,
            None => return Err(self.refuse_architecture(arch)),
        };
        let key = |suffix: &str| keys::scoped(arch, suffix);
        if m.opt_usize(&key(keys::EXPERT_COUNT))?.unwrap_or(0) > 0 {
            return Err(self.unsupported(format!(
                "{arch} mixture-of-experts layers are not supported yet"
            )));
        }

        let n_layer = m.usize(&key(keys::BLOCK_COUNT))?;
        Limits::check(self.path, "block_count", n_layer, Limits::LAYERS)?;
        // a block count larger than the tensors present is refused before anything loops on it
        if !(self.has_tensor)(&keys::block(n_layer - 1, keys::part::ATTN_NORM)) {
            return Err(self.invalid(format!(
                "block_count says {n_layer} layers but tensor `{}` is missing",
                keys::block(n_layer - 1, keys::part::ATTN_NORM)
            )));
        }
        if (self.has_tensor)(&keys::block(n_layer, keys::part::ATTN_NORM)) {
            return Err(self.invalid(format!(
                "block_count says {n_layer} layers but the file has more blocks"
            )));
        }
        for il in 0..n_layer {
            if (self.has_tensor)(&keys::block(il, keys::part::FFN_GATE_INP)) {
                return Err(self.unsupported(format!(
                    "{arch} mixture-of-experts layers are not supported yet"
                )));
            }
            if (self.has_tensor)(&keys::block(il, keys::part::ATTN_QKV)) {
                return Err(self.unsupported(
                    "fused attn_qkv projections are not supported yet (re-convert the model with separate Q, K and V)",
                ));
            }
        }
        let n_embd = m.usize(&key(keys::EMBEDDING_LENGTH))?;
        Limits::check(self.path, "embedding_length", n_embd, Limits::WIDTH)?;
        let n_vocab = m.array(keys::TOKENS)?.len();
        Limits::check(self.path, "the vocabulary", n_vocab, Limits::VOCAB)?;
        let context_length = m.usize(&key(keys::CONTEXT_LENGTH))?;
        Limits::check(self.path, "context_length", context_length, Limits::CONTEXT)?;
        let rms_eps = m.f32(&key(keys::RMS_EPS))?;
        if !(0.0..1.0).contains(&rms_eps) {
            return Err(self.invalid(format!(
                "layer_norm_rms_epsilon {rms_eps} is not a small positive number"
            )));
        }

        let n_head = self.per_layer(&key(keys::HEAD_COUNT), n_layer, None)?;
        let n_kv_head = self.per_layer(&key(keys::HEAD_COUNT_KV), n_layer, Some(&n_head))?;
        let n_ff = self.per_layer(&key(keys::FEED_FORWARD_LENGTH), n_layer, None)?;
        let n_head0 = n_head[0];
        let head_full = match m.opt_usize(&key(keys::KEY_LENGTH))? {
            Some(d) => d,
            None => n_embd / n_head0.max(1),
        };
        let value_full = m.opt_usize(&key(keys::VALUE_LENGTH))?.unwrap_or(head_full);
        let head_swa = m
            .opt_usize(&key(keys::KEY_LENGTH_SWA))?
            .unwrap_or(head_full);
        let value_swa = m
            .opt_usize(&key(keys::VALUE_LENGTH_SWA))?
            .unwrap_or(head_swa);
        if value_full != head_full || value_swa != head_swa {
            return Err(
                self.unsupported("key and value heads of different sizes (Gemma never has them)")
            );
        }
        let rot_full = m
            .opt_usize(&key(keys::ROPE_DIMENSION_COUNT))?
            .unwrap_or(head_full);
        let rot_swa = m
            .opt_usize(&key(keys::ROPE_DIMENSION_COUNT_SWA))?
            .unwrap_or(rot_full);

        // sliding window and its pattern, per family
        let window_key = key(keys::SLIDING_WINDOW);
        let window = match family {
            Family::Gemma => None,
            Family::Gemma2 => Some(m.opt_usize(&window_key)?.unwrap_or(4096)),
            Family::Gemma3 => m.opt_usize(&window_key)?.filter(|&w| w > 0),
            Family::Gemma4 => Some(m.usize(&window_key)?),
        };
        if let Some(w) = window {
            Limits::check(self.path, "sliding_window", w, Limits::CONTEXT)?;
        }
        let sliding = match (family, window) {
            (_, None) | (Family::Gemma, _) => vec![false; n_layer],
            (Family::Gemma2, Some(_)) => {
                self.sliding_pattern(&key(keys::SLIDING_WINDOW_PATTERN), n_layer, 2)?
            }
            (Family::Gemma3, Some(_)) => {
                self.sliding_pattern(&key(keys::SLIDING_WINDOW_PATTERN), n_layer, 6)?
            }
            (Family::Gemma4, Some(_)) => {
                let key = key(keys::SLIDING_WINDOW_PATTERN);
                let pattern = self.bool_array(&key)?.ok_or_else(|| {
                    self.invalid(format!("required metadata key `{key}` is missing"))
                })?;
                if pattern.len() != n_layer {
                    return Err(self.invalid(format!(
                        "`{key}` has {} entries for {n_layer} layers",
                        pattern.len()
                    )));
                }
                pattern
            }
        };

        // rope: bases and linear scaling, and on which layers llama.cpp applies them
        let base_full = m.opt_f32(&key(keys::ROPE_FREQ_BASE))?.unwrap_or(10_000.0);
        let base_swa = match family {
            // gemma2 copies the global base and scale to its sliding layers
            Family::Gemma2 => m
                .opt_f32(&key(keys::ROPE_FREQ_BASE_SWA))?
                .unwrap_or(base_full),
            _ => m
                .opt_f32(&key(keys::ROPE_FREQ_BASE_SWA))?
                .unwrap_or(10_000.0),
        };
        for (name, base) in [
            ("rope.freq_base", base_full),
            ("rope.freq_base_swa", base_swa),
        ] {
            if !(base.is_finite() && base > 1.0) {
                return Err(self.invalid(format!("{name} {base} is not a usable RoPE base")));
            }
        }
        let scale_full = self.rope_freq_scale(arch)?;
        let scale_swa = match family {
            Family::Gemma2 | Family::Gemma => scale_full,
            Family::Gemma3 | Family::Gemma4 => 1.0,
        };
        let has_rope_freqs = (self.has_tensor)(keys::ROPE_FREQS);

        let shared = match family {
            Family::Gemma4 => m.opt_usize(&key(keys::SHARED_KV_LAYERS))?.unwrap_or(0),
            _ => 0,
        };
        if shared >= n_layer {
            return Err(self.invalid(format!(
                "shared_kv_layers {shared} leaves no layer with its own KV of {n_layer}"
            )));
        }
        let kv_from = n_layer - shared;
        if shared > 0 && kv_from < 2 {
            return Err(self.invalid("shared_kv_layers leaves fewer than two layers with KV"));
        }

        let per_layer_input = match family {
            Family::Gemma4 => m
                .opt_usize(&key(keys::EMBEDDING_LENGTH_PER_LAYER))?
                .filter(|&p| p > 0),
            _ => None,
        };
        if let Some(p) = per_layer_input {
            Limits::check(
                self.path,
                "embedding_length_per_layer_input",
                p,
                Limits::WIDTH,
            )?;
        }

        let q_scale_for = |head_dim: usize| -> f32 {
            match family {
                Family::Gemma4 => 1.0,
                Family::Gemma => 1.0 / (head_dim as f32).sqrt(),
                // ref: gemma_pytorch config.py, as llama.cpp: the 27B scales by n_embd/n_head
                Family::Gemma2 if n_layer == 46 => 1.0 / ((n_embd / n_head0) as f32).sqrt(),
                Family::Gemma3 if n_layer == 62 => 1.0 / ((n_embd / n_head0) as f32).sqrt(),
                _ => 1.0 / (head_dim as f32).sqrt(),
            }
        };

        let mut ropes: Vec<RopeSpec> = Vec::new();
        let mut layers = Vec::with_capacity(n_layer);
        for il in 0..n_layer {
            let swa = sliding[il];
            let (head_dim, n_rot) = match family {
                Family::Gemma4 if swa => (head_swa, rot_swa),
                _ => (head_full, rot_full),
            };
            Limits::check(self.path, "the head size", head_dim, Limits::HEAD_DIM)?;
            Limits::check(self.path, "the head count", n_head[il], Limits::HEADS)?;
            Limits::check(self.path, "the KV head count", n_kv_head[il], Limits::HEADS)?;
            Limits::check(self.path, "feed_forward_length", n_ff[il], Limits::FF)?;
            if n_kv_head[il] == 0 || n_head[il] % n_kv_head[il] != 0 {
                return Err(self.invalid(format!(
                    "layer {il}: head_count {} is not a multiple of head_count_kv {}",
                    n_head[il], n_kv_head[il]
                )));
            }
            if head_dim % 2 != 0 || n_rot % 2 != 0 || n_rot == 0 || n_rot > head_dim {
                return Err(self.invalid(format!(
                    "layer {il}: rope dimensions {n_rot} do not fit heads of {head_dim}"
                )));
            }
            let rope = RopeSpec {
                base: if swa { base_swa } else { base_full },
                freq_scale: if swa { scale_swa } else { scale_full },
                n_rot,
                head_dim,
                freq_factors: family == Family::Gemma4 && !swa && has_rope_freqs,
            };
            let rope_index = match ropes.iter().position(|r| *r == rope) {
                Some(i) => i,
                None => {
                    ropes.push(rope);
                    ropes.len() - 1
                }
            };
            let kv = if il < kv_from {
                KvSource::Own
            } else {
                // llama.cpp's reuse callback (llama-model.cpp): the last sliding and the last
                // global layer that store KV
                let src = kv_from - if swa { 2 } else { 1 };
                if sliding[src] != swa {
                    return Err(self.invalid(format!(
                        "shared layer {il} would read layer {src}, which is {} while it is {}",
                        kind(sliding[src]),
                        kind(swa)
                    )));
                }
                KvSource::Shared(src)
            };
            let has = |part: &str| (self.has_tensor)(&keys::block(il, part));
            let v_from_k = kv == KvSource::Own && !has(keys::part::ATTN_V);
            if v_from_k && family != Family::Gemma4 {
                return Err(self.invalid(format!(
                    "tensor `{}` is missing",
                    keys::block(il, keys::part::ATTN_V)
                )));
            }
            layers.push(LayerArch {
                sliding: swa,
                n_head: n_head[il],
                n_kv_head: n_kv_head[il],
                head_dim,
                n_ff: n_ff[il],
                rope: rope_index,
                q_scale: q_scale_for(head_dim),
                qk_norm: matches!(family, Family::Gemma3 | Family::Gemma4),
                v_norm: family == Family::Gemma4,
                post_norms: family != Family::Gemma,
                kv,
                v_from_k,
                output_scale: family == Family::Gemma4 && has(keys::part::LAYER_OUTPUT_SCALE),
            });
        }
        for (il, l) in layers.iter().enumerate() {
            if let KvSource::Shared(src) = l.kv {
                let s = &layers[src];
                if (s.n_kv_head, s.head_dim) != (l.n_kv_head, l.head_dim) {
                    return Err(self.invalid(format!(
                        "shared layer {il} has {}×{} KV heads but its source layer {src} stores {}×{}",
                        l.n_kv_head, l.head_dim, s.n_kv_head, s.head_dim
                    )));
                }
            }
        }

        // a cap key that is present and 0 means no cap; absent, llama.cpp's default applies
        // (`f_attn_logit_softcapping` 50 and `f_final_logit_softcapping` 30 in llama-hparams.h;
        // gemma3 resets the final one to 0 before reading it)
        let cap = |suffix: &str, default: Option<f32>| -> Result<Option<f32>> {
            Ok(match m.opt_f32(&key(suffix))? {
                Some(c) => Some(c).filter(|&c| c > 0.0 && c.is_finite()),
                None => default,
            })
        };
        let attn_softcap = match family {
            Family::Gemma2 => cap(keys::ATTN_LOGIT_SOFTCAPPING, Some(50.0))?,
            _ => None,
        };
        let final_softcap = match family {
            Family::Gemma => None,
            Family::Gemma2 | Family::Gemma4 => cap(keys::FINAL_LOGIT_SOFTCAPPING, Some(30.0))?,
            Family::Gemma3 => cap(keys::FINAL_LOGIT_SOFTCAPPING, None)?,
        };
        // gemma and gemma2 always tie (llama.cpp duplicates tok_embd); gemma3 and gemma4 use
        // output.weight when the file has one
        let tied_output = match family {
            Family::Gemma | Family::Gemma2 => true,
            _ => !(self.has_tensor)(keys::OUTPUT),
        };
        let text = |key: &str| m.get(key).and_then(|v| v.to_string().ok()).cloned();
        let name = text(keys::NAME);
        let tuning = Tuning::detect(
            text(keys::FINETUNE).as_deref(),
            &[name.as_deref(), text(keys::BASENAME).as_deref()],
            m.get(keys::CHAT_TEMPLATE).is_some(),
        );
        Ok(ModelArch {
            family,
            name,
            tuning,
            n_vocab,
            n_embd,
            rms_eps,
            context_length,
            embed_scale: (n_embd as f32).sqrt(),
            window,
            attn_softcap,
            final_softcap,
            tied_output,
            per_layer_input,
            layers,
            ropes,
        })
    }

    /// Architectures we know of but do not run get a reason, not just "unsupported".
    fn refuse_architecture(&self, arch: &str) -> Error {
        let what = match arch {
            "gemma3n" => Some("Gemma 3n models are not supported yet".to_string()),
            "gemma-embedding" | "gemma_embedding" => Some(
                "this is an embedding model (EmbeddingGemma), not a model that writes text".into(),
            ),
            "clip" | "mmproj" => Some(
                "this is a vision or audio projector (mmproj) file, not a language model; load the Gemma GGUF itself".into(),
            ),
            "t5gemma" | "t5encoder" | "t5" => {
                Some("encoder-decoder models (T5Gemma) are not supported".into())
            }
            _ => None,
        };
        match what {
            Some(what) => self.unsupported(what),
            None => Error::UnsupportedArchitecture {
                path: self.path.to_path_buf(),
                architecture: arch.to_string(),
                supported: Family::SUPPORTED,
            },
        }
    }

    /// A per-layer count given as one number or an array of `n_layer` (llama.cpp
    /// `get_key_or_arr`); absent: `default` (required when `None`).
    fn per_layer(
        &self,
        key: &str,
        n_layer: usize,
        default: Option<&[usize]>,
    ) -> Result<Vec<usize>> {
        let Some(value) = self.meta.get(key) else {
            return match default {
                Some(d) => Ok(d.to_vec()),
                None => Err(self.invalid(format!("required metadata key `{key}` is missing"))),
            };
        };
        let values: Vec<usize> = match value.to_vec() {
            Ok(items) => {
                if items.len() != n_layer {
                    return Err(self.invalid(format!(
                        "`{key}` has {} entries for {n_layer} layers",
                        items.len()
                    )));
                }
                items
                    .iter()
                    .map(|v| crate::gguf::value_to_u64(v).map(|x| x as usize))
                    .collect::<Option<_>>()
                    .ok_or_else(|| self.invalid(format!("`{key}` holds a non-integer")))?
            }
            Err(_) => {
                let x = crate::gguf::value_to_u64(value).ok_or_else(|| {
                    self.invalid(format!("metadata key `{key}` is not an unsigned integer"))
                })?;
                vec![x as usize; n_layer]
            }
        };
        if values.contains(&0) {
            return Err(self.invalid(format!("`{key}` is zero for some layer")));
        }
        Ok(values)
    }

    /// llama.cpp `load_swa_pattern`: an explicit per-layer array, else every `n`-th layer
    /// (counting from one) is global (`set_swa_pattern`: `il % n < n - 1` slides).
    fn sliding_pattern(&self, key: &str, n_layer: usize, default: usize) -> Result<Vec<bool>> {
        if let Some(pattern) = self.bool_array(key)? {
            if pattern.len() != n_layer {
                return Err(self.invalid(format!(
                    "`{key}` has {} entries for {n_layer} layers",
                    pattern.len()
                )));
            }
            return Ok(pattern);
        }
        let n = self.meta.opt_usize(key)?.unwrap_or(default);
        Ok((0..n_layer).map(|il| n == 0 || il % n < n - 1).collect())
    }

    fn bool_array(&self, key: &str) -> Result<Option<Vec<bool>>> {
        let Some(value) = self.meta.get(key) else {
            return Ok(None);
        };
        let Ok(items) = value.to_vec() else {
            return Ok(None);
        };
        items
            .iter()
            .map(|v| {
                v.to_bool()
                    .ok()
                    .or_else(|| crate::gguf::value_to_u64(v).map(|x| x != 0))
            })
            .collect::<Option<Vec<bool>>>()
            .map(Some)
            .ok_or_else(|| self.invalid(format!("`{key}` holds a non-boolean")))
    }

    /// `1 / factor` of linear rope scaling (llama.cpp `rope_freq_scale_train`); other kinds
    /// of scaling are refused.
    fn rope_freq_scale(&self, arch: &str) -> Result<f32> {
        let m = self.meta;
        let kind_key = keys::scoped(arch, keys::ROPE_SCALING_TYPE);
        let kind = match m.get(&kind_key) {
            Some(_) => m.string(&kind_key)?,
            None => "linear",
        };
        match kind {
            "none" => return Ok(1.0),
            "linear" => {}
            other => {
                return Err(self.unsupported(format!(
                    "rope scaling `{other}` is not supported yet (only none and linear)"
                )));
            }
        }
        let factor = match m.opt_f32(&keys::scoped(arch, keys::ROPE_SCALING_FACTOR))? {
            Some(f) => f,
            None => m
                .opt_f32(&keys::scoped(arch, keys::ROPE_SCALE_LINEAR))?
                .unwrap_or(0.0),
        };
        if !factor.is_finite() || factor < 0.0 {
            return Err(self.invalid(format!("rope scaling factor {factor} is not usable")));
        }
        Ok(if factor == 0.0 { 1.0 } else { 1.0 / factor })
    }
}

fn kind(sliding: bool) -> &'static str {
    if sliding { "sliding" } else { "global" }
}

#[cfg(test)]
mod tests;
