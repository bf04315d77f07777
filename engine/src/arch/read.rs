//! The shared reading of a description: what every generation reads alike (llama.cpp
//! `llama_model_base::load_hparams`: scalar-or-array head counts and FFN widths, key and value
//! lengths with their `_swa` variants, rope dimensions, bases and linear scaling), the checks
//! that refuse a damaged or hostile file before anything is sized from it, and the per-layer
//! assembly. Where the generations differ it asks their rules (`rules.rs`).

use std::path::Path;

use super::rules::{self, Dims};
use super::{Family, KvSource, LayerArch, Limits, ModelArch, RopeSpec, Tuning};
use crate::error::{Error, Result};
use crate::gguf::{Meta, keys};

pub(crate) struct Reader<'a> {
    pub meta: &'a Meta<'a>,
    pub has_tensor: &'a dyn Fn(&str) -> bool,
    pub path: &'a Path,
    /// `general.architecture`: the prefix of the model's own keys.
    pub arch: &'a str,
}

impl Reader<'_> {
    pub fn invalid(&self, reason: impl Into<String>) -> Error {
        Error::InvalidModel {
            path: self.path.to_path_buf(),
            reason: reason.into(),
        }
    }

    pub fn unsupported(&self, what: impl Into<String>) -> Error {
        Error::UnsupportedModel {
            path: self.path.to_path_buf(),
            what: what.into(),
        }
    }

    /// The model's own key `ARCH.suffix`.
    pub fn key(&self, suffix: &str) -> String {
        keys::scoped(self.arch, suffix)
    }

    pub fn usize(&self, suffix: &str) -> Result<usize> {
        self.meta.usize(&self.key(suffix))
    }

    pub fn opt_usize(&self, suffix: &str) -> Result<Option<usize>> {
        self.meta.opt_usize(&self.key(suffix))
    }

    pub fn opt_f32(&self, suffix: &str) -> Result<Option<f32>> {
        self.meta.opt_f32(&self.key(suffix))
    }

    pub fn has_tensor(&self, name: &str) -> bool {
        (self.has_tensor)(name)
    }

    pub fn read(&self) -> Result<ModelArch> {
        match Family::from_arch(self.arch) {
            Some(family) => self.read_as(family),
            None => Err(self.refuse_architecture(self.arch)),
        }
    }

    /// The description under `family`'s rules, whatever `general.architecture` names (a Gemma
    /// 4 assistant's blocks are Gemma 4's, `arch::assistant`).
    pub fn read_as(&self, family: Family) -> Result<ModelArch> {
        let m = self.meta;
        let arch = self.arch;
        let rules = rules::of(family);
        if self.opt_usize(keys::EXPERT_COUNT)?.unwrap_or(0) > 0 {
            return Err(self.unsupported(format!(
                "{arch} mixture-of-experts layers are not supported yet"
            )));
        }

        let n_layer = self.usize(keys::BLOCK_COUNT)?;
        Limits::check(self.path, "block_count", n_layer, Limits::LAYERS)?;
        // a block count larger than the tensors present is refused before anything loops on it
        if !self.has_tensor(&keys::block(n_layer - 1, keys::part::ATTN_NORM)) {
            return Err(self.invalid(format!(
                "block_count says {n_layer} layers but tensor `{}` is missing",
                keys::block(n_layer - 1, keys::part::ATTN_NORM)
            )));
        }
        if self.has_tensor(&keys::block(n_layer, keys::part::ATTN_NORM)) {
            return Err(self.invalid(format!(
                "block_count says {n_layer} layers but the file has more blocks"
            )));
        }
        for il in 0..n_layer {
            if self.has_tensor(&keys::block(il, keys::part::FFN_GATE_INP)) {
                return Err(self.unsupported(format!(
                    "{arch} mixture-of-experts layers are not supported yet"
                )));
            }
            if self.has_tensor(&keys::block(il, keys::part::ATTN_QKV)) {
                return Err(self.unsupported(
                    "fused attn_qkv projections are not supported yet (re-convert the model with separate Q, K and V)",
                ));
            }
        }
        let n_embd = self.usize(keys::EMBEDDING_LENGTH)?;
        Limits::check(self.path, "embedding_length", n_embd, Limits::WIDTH)?;
        let n_vocab = m.array(keys::TOKENS)?.len();
        Limits::check(self.path, "the vocabulary", n_vocab, Limits::VOCAB)?;
        let context_length = self.usize(keys::CONTEXT_LENGTH)?;
        Limits::check(self.path, "context_length", context_length, Limits::CONTEXT)?;
        let rms_eps = self.meta.f32(&self.key(keys::RMS_EPS))?;
        if !(0.0..1.0).contains(&rms_eps) {
            return Err(self.invalid(format!(
                "layer_norm_rms_epsilon {rms_eps} is not a small positive number"
            )));
        }

        let n_head = self.per_layer(&self.key(keys::HEAD_COUNT), n_layer, None)?;
        let n_kv_head = self.per_layer(&self.key(keys::HEAD_COUNT_KV), n_layer, Some(&n_head))?;
        let n_ff = self.per_layer(&self.key(keys::FEED_FORWARD_LENGTH), n_layer, None)?;
        let dims = Dims {
            n_layer,
            n_embd,
            n_head0: n_head[0],
        };
        let head_full = match self.opt_usize(keys::KEY_LENGTH)? {
            Some(d) => d,
            None => n_embd / dims.n_head0.max(1),
        };
        let value_full = self.opt_usize(keys::VALUE_LENGTH)?.unwrap_or(head_full);
        let head_swa = self.opt_usize(keys::KEY_LENGTH_SWA)?.unwrap_or(head_full);
        let value_swa = self.opt_usize(keys::VALUE_LENGTH_SWA)?.unwrap_or(head_swa);
        if value_full != head_full || value_swa != head_swa {
            return Err(
                self.unsupported("key and value heads of different sizes (Gemma never has them)")
            );
        }
        let rot_full = self
            .opt_usize(keys::ROPE_DIMENSION_COUNT)?
            .unwrap_or(head_full);
        let rot_swa = self
            .opt_usize(keys::ROPE_DIMENSION_COUNT_SWA)?
            .unwrap_or(rot_full);

        let window = rules.window(self)?;
        if let Some(w) = window {
            Limits::check(self.path, "sliding_window", w, Limits::CONTEXT)?;
        }
        let sliding = match window {
            None => vec![false; n_layer],
            Some(_) => rules.sliding(self, n_layer)?,
        };

        let base_full = self.opt_f32(keys::ROPE_FREQ_BASE)?.unwrap_or(10_000.0);
        let scale_full = self.rope_freq_scale()?;
        let (base_swa, scale_swa) = rules.rope_swa(self, base_full, scale_full)?;
        for (name, base) in [
            ("rope.freq_base", base_full),
            ("rope.freq_base_swa", base_swa),
        ] {
            if !(base.is_finite() && base > 1.0) {
                return Err(self.invalid(format!("{name} {base} is not a usable RoPE base")));
            }
        }
        let has_rope_freqs = self.has_tensor(keys::ROPE_FREQS);

        let shared = rules.shared_kv_layers(self)?;
        if shared >= n_layer {
            return Err(self.invalid(format!(
                "shared_kv_layers {shared} leaves no layer with its own KV of {n_layer}"
            )));
        }
        let kv_from = n_layer - shared;
        if shared > 0 && kv_from < 2 {
            return Err(self.invalid("shared_kv_layers leaves fewer than two layers with KV"));
        }

        let per_layer_input = rules.per_layer_input(self)?;
        if let Some(p) = per_layer_input {
            Limits::check(
                self.path,
                "embedding_length_per_layer_input",
                p,
                Limits::WIDTH,
            )?;
        }

        let blocks = rules.blocks();
        let mut ropes: Vec<RopeSpec> = Vec::new();
        let mut layers = Vec::with_capacity(n_layer);
        for il in 0..n_layer {
            let swa = sliding[il];
            let (head_dim, n_rot) = if blocks.own_swa_heads && swa {
                (head_swa, rot_swa)
            } else {
                (head_full, rot_full)
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
                freq_factors: blocks.rope_freqs_on_global && !swa && has_rope_freqs,
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
            let has = |part: &str| self.has_tensor(&keys::block(il, part));
            let v_from_k = kv == KvSource::Own && !has(keys::part::ATTN_V);
            if v_from_k && !blocks.v_from_k {
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
                q_scale: rules.q_scale(head_dim, &dims),
                qk_norm: blocks.qk_norm,
                v_norm: blocks.v_norm,
                post_norms: blocks.post_norms,
                kv,
                v_from_k,
                output_scale: blocks.output_scale && has(keys::part::LAYER_OUTPUT_SCALE),
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

        let (attn_softcap, final_softcap) = rules.softcaps(self)?;
        let tied_output = rules.tied_output(self);
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

    /// A soft-cap key: present and 0 means no cap; absent, llama.cpp's `default` applies
    /// (`f_attn_logit_softcapping` 50 and `f_final_logit_softcapping` 30 in llama-hparams.h).
    pub fn softcap(&self, suffix: &str, default: Option<f32>) -> Result<Option<f32>> {
        Ok(match self.opt_f32(suffix)? {
            Some(c) => Some(c).filter(|&c| c > 0.0 && c.is_finite()),
            None => default,
        })
    }

    /// Architectures we know of but do not run get a reason, not just "unsupported".
    fn refuse_architecture(&self, arch: &str) -> Error {
        let what = match arch {
            "gemma3n" => Some("Gemma 3n models are not supported yet".to_string()),
            "gemma-embedding" | "gemma_embedding" => Some(
                "this is an embedding model (EmbeddingGemma), not a model that writes text".into(),
            ),
            super::assistant::ARCH => Some(
                "this is a Gemma 4 multi-token-prediction assistant, which drafts for its Gemma 4 \
                 model: load that model and give this file as its assistant (--assistant)"
                    .into(),
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
    pub fn per_layer(
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

    /// llama.cpp `load_swa_pattern`: an explicit per-layer array (`sliding_window_pattern`),
    /// else every `n`-th layer (counting from one) is global (`set_swa_pattern`: `il % n < n - 1`
    /// slides), `n` being the file's number or `default`.
    pub fn sliding_pattern(&self, n_layer: usize, default: usize) -> Result<Vec<bool>> {
        let key = &self.key(keys::SLIDING_WINDOW_PATTERN);
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

    pub fn bool_array(&self, key: &str) -> Result<Option<Vec<bool>>> {
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
    fn rope_freq_scale(&self) -> Result<f32> {
        let m = self.meta;
        let kind_key = self.key(keys::ROPE_SCALING_TYPE);
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
        let factor = match self.opt_f32(keys::ROPE_SCALING_FACTOR)? {
            Some(f) => f,
            None => self.opt_f32(keys::ROPE_SCALE_LINEAR)?.unwrap_or(0.0),
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
