//! What the fused decode steps (`cuda_decode`, `metal_decode`) take from a model, worked out
//! once for both: per layer, where its weights and norms are, its shapes, which cache it reads
//! and which attention kernel it runs; the arena's sizes; and whether the kernels cover the
//! model at all (`None`: the generic path runs). The kernels are the same on both GPUs
//! (`engine/cuda/decode.cu`, `engine/metal/decode.metal`), so this is too; only how a place
//! in GPU memory is named differs ([`Places`]).

use std::collections::HashMap;

use candle_core::Tensor;
use candle_core::quantized::GgmlDType;

use super::kernel_args::Attn;
use crate::arch::KvSource;
use crate::error::{Error, Result};
use crate::kv_cache::KvCache;
use crate::model::{Linear, Model, Norm};

/// ggml type ids (the kernels' `T_*`).
pub(crate) fn type_id(t: GgmlDType) -> Option<i32> {
    Some(match t {
        GgmlDType::F32 => 0,
        GgmlDType::F16 => 1,
        GgmlDType::Q4_0 => 2,
        GgmlDType::Q5_0 => 6,
        GgmlDType::Q8_0 => 8,
        GgmlDType::Q4K => 12,
        GgmlDType::Q5K => 13,
        GgmlDType::Q6K => 14,
        _ => return None,
    })
}

/// Whether the mat-vec kernels multiply type `t` (the embedding table may also be f16 or f32:
/// it is only looked up by rows).
pub(crate) fn multiplied(t: i32) -> bool {
    t >= 2
}

/// How one GPU backend names a place in its memory: a device address on CUDA, a buffer and an
/// offset on Metal.
pub(crate) trait Places {
    type At: Clone;
    /// The GPU, for messages.
    const GPU: &'static str;
    /// Where matrix `l`'s blocks are, and its ggml type ([`type_id`]).
    fn weight(&self, l: &Linear) -> Option<(Self::At, i32)>;
    /// Where a contiguous f32 or f16 tensor on the device starts.
    fn tensor(&self, t: &Tensor) -> Option<Self::At>;
}

/// One layer, as the kernels take it. `A`: a place ([`Places::At`]); `K`: a kernel.
pub(crate) struct LayerPlan<A, K> {
    pub attn_norm: A,
    pub q: (A, i32),
    /// `None` for a layer that reads another layer's cache (shared KV)
    pub k: Option<(A, i32)>,
    pub v: Option<(A, i32)>,
    pub q_norm: Option<A>,
    pub k_norm: Option<A>,
    pub v_norm: bool,
    pub o: (A, i32),
    pub post_attn_norm: Option<A>,
    pub ffn_norm: A,
    pub gate: (A, i32),
    pub up: (A, i32),
    pub down: (A, i32),
    pub post_ffn_norm: Option<A>,
    pub output_scale: f32,
    pub n_head: usize,
    pub n_kv: usize,
    pub head_dim: usize,
    pub n_ff: usize,
    pub sliding: bool,
    pub q_scale: f32,
    /// The layer whose cache it reads (itself, or the shared-KV source).
    pub kv_layer: usize,
    pub rope: usize,
    /// Blocks the attention splits the cache over (then joined).
    pub splits: usize,
    /// `attention_split_g{group}_d{head_dim / 32}`
    pub attention: K,
}

/// The whole step.
pub(crate) struct Plan<A, K> {
    pub layers: Vec<LayerPlan<A, K>>,
    pub embed: (A, i32),
    pub embed_scale: f32,
    pub output: (A, i32),
    pub output_norm: A,
    /// Per rope of the description: the cos and sin tables and the rotated width.
    pub ropes: Vec<(A, A, usize)>,
    pub n_embd: usize,
    pub n_vocab: usize,
    pub eps: f32,
    pub window: usize,
    pub attn_softcap: f32,
    pub final_softcap: f32,
    /// The widest Q, K (or V), FFN and split-attention partials of any layer (the arena).
    pub max_q: usize,
    pub max_kv: usize,
    pub max_ff: usize,
    pub max_partial: usize,
}

impl<A, K> Plan<A, K> {
    /// Kernels one decode step runs: the embedding, 8 per layer, the logits, the candidates
    /// and the pick (the penalties, when on, are one more).
    pub fn kernels_per_token(&self) -> usize {
        1 + 8 * self.layers.len() + 3
    }

    /// Every norm and rope table place (what Metal must make resident).
    #[cfg_attr(
        not(any(feature = "metal", feature = "metal-emulated")),
        allow(dead_code)
    )]
    pub fn tables(&self) -> impl Iterator<Item = &A> {
        let per_layer = self.layers.iter().flat_map(|l| {
            [Some(&l.attn_norm), Some(&l.ffn_norm)]
                .into_iter()
                .chain(
                    [&l.q_norm, &l.k_norm, &l.post_attn_norm, &l.post_ffn_norm].map(Option::as_ref),
                )
                .flatten()
        });
        let ropes = self.ropes.iter().flat_map(|(c, s, _)| [c, s]);
        std::iter::once(&self.output_norm)
            .chain(per_layer)
            .chain(ropes)
    }
}

/// The plan for `model` on `places`' device, loading each attention kernel once by name
/// (`attention`), or `None` when the model needs what the kernels lack: Gemma 4's per-layer
/// embeddings, a weight format other than Q4_0, Q5_0, Q8_0, Q4_K, Q5_K and Q6_K, a head other
/// than 64/128/256/512 wide, more than 8 query heads per KV head, or a width that is not a
/// multiple of 32.
pub(crate) fn plan<P: Places, K: Clone>(
    model: &Model,
    places: &P,
    mut attention: impl FnMut(&str) -> Result<K>,
) -> Result<Option<Plan<P::At, K>>> {
    let gpu = P::GPU;
    let arch = model.arch();
    let w = model.weights();
    if w.ple.is_some() {
        tracing::info!(
            gpu,
            "the fused decode does not cover per-layer embeddings; generic path"
        );
        return Ok(None);
    }
    let matrix = |l: &Linear| places.weight(l).filter(|&(_, t)| multiplied(t));
    let norm = |n: &Norm| places.tensor(n.tensor.as_ref()?);
    let optional = |n: &Option<Norm>| -> Option<Option<P::At>> {
        match n {
            Some(n) => norm(n).map(Some),
            None => Some(None),
        }
    };
    let (Some(embed), Some(output), Some(output_norm)) = (
        places.weight(&w.embedding),
        matrix(w.output()),
        norm(&w.output_norm),
    ) else {
        return Ok(None);
    };
    let mut ropes = Vec::new();
    for (i, spec) in arch.ropes.iter().enumerate() {
        let Some((cos, sin)) = model.rope_table(i).device_tables() else {
            return Ok(None);
        };
        let (Some(c), Some(s)) = (places.tensor(cos), places.tensor(sin)) else {
            return Ok(None);
        };
        ropes.push((c, s, spec.n_rot));
    }
    let context = model.max_context();
    let window = arch.window.unwrap_or(context);
    let mut kernels: HashMap<String, K> = HashMap::new();
    let mut layers = Vec::new();
    let (mut max_q, mut max_kv, mut max_ff, mut max_partial) = (0, 0, 0, 0);
    for (il, (spec, lw)) in arch.layers.iter().zip(&w.layers).enumerate() {
        let group = spec.n_head / spec.n_kv_head.max(1);
        let pl = spec.head_dim / 32;
        let supported = spec.head_dim.is_multiple_of(32)
            && matches!(pl, 2 | 4 | 8 | 16)
            && matches!(group, 1 | 2 | 4 | 8)
            && !(group == 8 && pl == 16)
            && spec.n_head.is_multiple_of(spec.n_kv_head.max(1))
            && spec.n_ff.is_multiple_of(32)
            && arch.n_embd.is_multiple_of(32);
        if !supported {
            tracing::info!(
                gpu,
                layer = il,
                "a layer shape the fused decode lacks; generic path"
            );
            return Ok(None);
        }
        let name = format!("attention_split_g{group}_d{pl}");
        let kernel = match kernels.get(&name) {
            Some(k) => k.clone(),
            None => {
                let k = attention(&name)?;
                kernels.insert(name, k.clone());
                k
            }
        };
        let (Some(q), Some(o), Some(gate), Some(up), Some(down)) = (
            matrix(&lw.q),
            matrix(&lw.o),
            matrix(&lw.gate),
            matrix(&lw.up),
            matrix(&lw.down),
        ) else {
            return Ok(None);
        };
        let (k, v) = (lw.k.as_ref().map(matrix), lw.v.as_ref().map(matrix));
        if matches!(k, Some(None)) || matches!(v, Some(None)) {
            return Ok(None);
        }
        let (Some(attn_norm), Some(ffn_norm)) = (norm(&lw.attn_norm), norm(&lw.ffn_norm)) else {
            return Ok(None);
        };
        let (Some(q_norm), Some(k_norm), Some(post_attn_norm), Some(post_ffn_norm)) = (
            optional(&lw.q_norm),
            optional(&lw.k_norm),
            optional(&lw.post_attn_norm),
            optional(&lw.post_ffn_norm),
        ) else {
            return Ok(None);
        };
        let own = matches!(spec.kv, KvSource::Own);
        let max_keys = if spec.sliding { window } else { context };
        let splits = max_keys.div_ceil(64).clamp(1, 64);
        max_q = max_q.max(spec.n_head * spec.head_dim);
        max_kv = max_kv.max(spec.n_kv_head * spec.head_dim);
        max_ff = max_ff.max(spec.n_ff);
        max_partial = max_partial.max(spec.n_head * splits * (spec.head_dim + 2));
        layers.push(LayerPlan {
            attn_norm,
            q,
            k: if own { k.flatten() } else { None },
            v: if own { v.flatten() } else { None },
            q_norm,
            k_norm,
            v_norm: spec.v_norm,
            o,
            post_attn_norm,
            ffn_norm,
            gate,
            up,
            down,
            post_ffn_norm,
            output_scale: lw.output_scale.unwrap_or(1.0),
            n_head: spec.n_head,
            n_kv: spec.n_kv_head,
            head_dim: spec.head_dim,
            n_ff: spec.n_ff,
            sliding: spec.sliding,
            q_scale: spec.q_scale,
            kv_layer: arch.kv_layer(il),
            rope: spec.rope,
            splits,
            attention: kernel,
        });
    }
    Ok(Some(Plan {
        layers,
        embed,
        embed_scale: arch.embed_scale,
        output,
        output_norm,
        ropes,
        n_embd: arch.n_embd,
        n_vocab: arch.n_vocab,
        eps: arch.rms_eps,
        window,
        attn_softcap: arch.attn_softcap.unwrap_or(0.0),
        final_softcap: arch.final_softcap.unwrap_or(0.0),
        max_q,
        max_kv,
        max_ff,
        max_partial,
    }))
}

/// Where one layer's cache is: its K and V (`[n_kv_head, slots, head_dim]`, f16) and its
/// slots.
pub(crate) type LayerCache<A> = (A, A, usize);

/// Per layer of `plan`, the cache it reads, grown to hold position `pos`.
pub(crate) fn layer_caches<P: Places, K>(
    plan: &Plan<P::At, K>,
    places: &P,
    cache: &mut KvCache,
    pos: usize,
) -> Result<Vec<LayerCache<P::At>>> {
    let err = |what: &str, e: &dyn std::fmt::Display| {
        Error::InvalidArgument(format!("{} decode: {what}: {e}", P::GPU))
    };
    let mut caches = Vec::with_capacity(plan.layers.len());
    for l in &plan.layers {
        let i = cache
            .storage_index(l.kv_layer)
            .ok_or_else(|| Error::InvalidArgument(format!("layer {} stores no KV", l.kv_layer)))?;
        cache
            .ensure_device_slots(i, pos + 1)
            .map_err(|e| err("growing the KV cache", &e))?;
        let (k, v, slots) = cache
            .device_layer(i)
            .ok_or_else(|| err("the KV cache", &"not on the device"))?;
        let (Some(k), Some(v)) = (places.tensor(k), places.tensor(v)) else {
            return Err(err(
                "the KV cache",
                &"not a contiguous f16 tensor on the GPU",
            ));
        };
        caches.push((k, v, slots));
    }
    Ok(caches)
}

/// The arena's buffers the attention reads and writes: the step's Q, K and V and the
/// partials of its splits.
pub(crate) struct AttnBuffers {
    pub q: u64,
    pub k: u64,
    pub v: u64,
    pub partial: u64,
}

impl<A, K> Plan<A, K> {
    /// The attention arguments of layer `l` over its cache `(k, v, slots)`; `address`: a
    /// place's device address.
    pub fn attn(
        &self,
        l: &LayerPlan<A, K>,
        (k_cache, v_cache, slots): (u64, u64, usize),
        b: &AttnBuffers,
        address: impl Fn(&A) -> u64,
    ) -> Attn {
        let rope = &self.ropes[l.rope];
        Attn {
            q: b.q,
            // no new K/V: the layer reads another's cache; V from K when the file has no V
            k: if l.k.is_some() { b.k } else { 0 },
            v: if l.v.is_some() { b.v } else { b.k },
            q_norm: l.q_norm.as_ref().map_or(0, &address),
            k_norm: l.k_norm.as_ref().map_or(0, &address),
            v_norm: l.v_norm as i32,
            cos: address(&rope.0),
            sin: address(&rope.1),
            n_rot: rope.2 as i32,
            k_cache,
            v_cache,
            slots: slots as i32,
            sliding: l.sliding as i32,
            window: self.window as i32,
            n_head: l.n_head as i32,
            n_kv: l.n_kv as i32,
            hd: l.head_dim as i32,
            q_scale: l.q_scale,
            softcap: self.attn_softcap,
            eps: self.eps,
            partial: b.partial,
            splits: l.splits as i32,
        }
    }
}
