//! The decode step on Metal as the same handful of fused kernels as on CUDA
//! (`engine/metal/decode.metal`, the line-for-line twin of `engine/cuda/decode.cu`), encoded
//! into one command buffer per token: 8 dispatches per layer and a few for the logits and the
//! sampler, where the generic candle path encodes several hundred; only the sampled token is
//! read back. The plan (which layer reads which weights and cache) is CUDA's too
//! (`decode_plan`).
//!
//! How it differs from the CUDA side, all for Metal's sake:
//! - the kernels are compiled from source when the model loads (`newLibraryWithSource`), as
//!   candle-metal-kernels does; a compile error turns this path off with the compiler's message;
//! - the weights are read in place from the mapped model file through one no-copy buffer over
//!   the whole mapping (as llama.cpp's Metal backend does with `newBufferWithBytesNoCopy`),
//!   because candle keeps its quantized tensors' buffers private; the norms, RoPE tables and
//!   the f16 KV cache are candle's buffers;
//! - pointers inside argument structs are `gpuAddress`es (Metal 3), and every buffer reached
//!   through one is made resident with `useResource`;
//! - no graphs: the command buffer is encoded again each token (a few microseconds per
//!   dispatch on the CPU).
//!
//! What is encoded (kernels, buffer indices, argument structs, grid sizes, threadgroup
//! memory) is written once, against the small interface of [`encoding`], which the real
//! device (`apple`, feature `metal`) and the emulated one (`emulated`, feature
//! `metal-emulated`: decode.metal run on the CPU by `backend::metal_emulated`) implement.
//!
//! **Never run on a Mac**: there is no Mac where this is built. The real device's glue is
//! type-checked for `aarch64-apple-darwin` (`scripts/check-apple`) and off unless
//! `COMPANION_METAL_FUSED=1`; everything above it runs on the emulated device in the tests
//! (`scripts/check-metal`). Anything it cannot set up (no Metal 3, a file larger than one
//! buffer, a shape or format the kernels lack) returns `None` and the generic path runs.

use std::sync::Arc;

use candle_core::Tensor;
use candle_core::quantized::QMatMul;
use memmap2::Mmap;

use super::decode_plan::{self, AttnBuffers, LayerCache, Places, Plan, type_id};
use super::device_sampling::{DRAWS, DeviceSampling, PENALTY_WINDOW_MAX, TOP_BLOCKS, TOPK_MAX};
use super::kernel_args::{
    AddNormArgs, EmbedArgs, GateUpArgs, JoinArgs, Mat, Mats, PenaltyArgs, SamplingArgs, TopArgs,
};
use crate::error::{Error, Result};
use crate::kv_cache::KvCache;
use crate::model::{Linear, Model};

#[cfg(feature = "metal")]
pub(crate) mod apple;
#[cfg(feature = "metal-emulated")]
pub(crate) mod emulated;
mod encoding;

pub(crate) use encoding::MetalDevice;
use encoding::{
    At, ComputeEncoder, GpuBuffer, GpuPipeline, gate_up_threads, set_at, set_buf, set_none,
    shared_f32s, shared_i32s, size, threads,
};

#[cfg_attr(not(feature = "metal"), allow(dead_code))] // the real device compiles it
static SOURCE: &str = include_str!("../../../metal/decode.metal");

fn metal_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("Metal decode: {what}: {e}"))
}

/// Whether the kernels can cover `model` on a device with `max_threadgroup_memory` bytes of
/// threadgroup memory (the rest is `decode_plan`'s to decide).
fn covers(model: &Model, max_threadgroup_memory: usize) -> bool {
    if model.weights().ple.is_some() {
        tracing::info!("the fused Metal decode does not cover per-layer embeddings");
        return false;
    }
    // embed_norm and add_norm keep the row and a reduction scratch in threadgroup memory
    if 4 * (model.arch().n_embd + 32) > max_threadgroup_memory {
        tracing::info!("the model is wider than the fused Metal decode's norm kernels");
        return false;
    }
    true
}

/// Places on Metal: weights in the no-copy buffer over the mapped file, at their offsets in
/// it; tensors in the device's buffers (candle's).
struct MetalPlaces<'a, D: MetalDevice> {
    device: &'a D,
    file: D::Buffer,
}

impl<D: MetalDevice> Places for MetalPlaces<'_, D> {
    type At = At<D::Buffer>;
    const GPU: &'static str = D::NAME;

    fn weight(&self, l: &Linear) -> Option<(Self::At, i32)> {
        let Linear::Candle {
            matmul: QMatMul::QTensor(t),
            file_range: Some((start, _)),
            ..
        } = l
        else {
            return None;
        };
        let at = At {
            buffer: self.file.clone(),
            offset: *start,
        };
        Some((at, type_id(t.dtype())?))
    }

    fn tensor(&self, t: &Tensor) -> Option<Self::At> {
        self.device.tensor(t)
    }
}

/// Buffers of the decode step, allocated once, in shared memory (the host writes the step's
/// parameters and reads the token).
struct Arena<B> {
    params: B,
    x: B,
    xq: B,
    q: B,
    k: B,
    v: B,
    attn_q: B,
    partial: B,
    o: B,
    ffq: B,
    hidden: B,
    logits: B,
    cand_v: B,
    cand_i: B,
    recent: B,
    n_recent: B,
    out_token: B,
    draws: B,
}

impl<B> Arena<B> {
    fn all(&self) -> [&B; 18] {
        [
            &self.params,
            &self.x,
            &self.xq,
            &self.q,
            &self.k,
            &self.v,
            &self.attn_q,
            &self.partial,
            &self.o,
            &self.ffq,
            &self.hidden,
            &self.logits,
            &self.cand_v,
            &self.cand_i,
            &self.recent,
            &self.n_recent,
            &self.out_token,
            &self.draws,
        ]
    }
}

struct Pipelines<P> {
    embed_norm: P,
    matvec3: P,
    gate_up: P,
    attention_join: P,
    add_norm: P,
    penalties: P,
    top_candidates: P,
    pick: P,
}

/// A place on device `D`.
type Place<D> = At<<D as MetalDevice>::Buffer>;

/// One product of a `matvec3` dispatch: the matrix and its type, the output, its rows.
type Product<'a, D> = (&'a (Place<D>, i32), &'a <D as MetalDevice>::Buffer, usize);

pub(crate) struct MetalDecoder<D: MetalDevice> {
    device: D,
    pipelines: Pipelines<D::Pipeline>,
    plan: Plan<Place<D>, D::Pipeline>,
    arena: Arena<D::Buffer>,
    /// Every buffer the kernels reach through an address, apart from the arena and the cache.
    resident: Vec<D::Buffer>,
    /// The no-copy buffer over the mapped file, dropped before the mapping it views.
    file_buffer: D::Buffer,
    _mapping: Arc<Mmap>,
    draws_uploaded: usize,
}

// SAFETY: Metal devices, queues, pipelines and buffers are thread-safe objects (Apple's
// "Metal Programming Guide", "Thread Safety": only command buffers and encoders are not, and
// those live within one `step`); the emulated device's buffers are plain memory and its
// encoders live within one `step` too; the decoder sits behind the model's mutex besides.
unsafe impl<D: MetalDevice> Send for MetalDecoder<D> {}

impl<D: MetalDevice> std::fmt::Debug for MetalDecoder<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetalDecoder")
            .field("device", &D::NAME)
            .field("layers", &self.plan.layers.len())
            .field("kernels_per_token", &self.kernels_per_token())
            .finish()
    }
}

impl<D: MetalDevice> MetalDecoder<D> {
    /// Dispatches one decode step encodes.
    pub fn kernels_per_token(&self) -> usize {
        self.plan.kernels_per_token()
    }

    /// The fused decoder for `model` on `device`, reading the weights from `file_buffer`
    /// (the whole mapped model file, `mapping`), or `None` when the model or the device needs
    /// what it lacks.
    fn new(
        device: D,
        model: &Model,
        file_buffer: D::Buffer,
        mapping: Arc<Mmap>,
    ) -> Result<Option<Self>> {
        if !covers(model, device.max_threadgroup_memory()) {
            return Ok(None);
        }
        let places = MetalPlaces {
            device: &device,
            file: file_buffer.clone(),
        };
        let Some(plan) = decode_plan::plan(model, &places, |name| device.pipeline(name))? else {
            return Ok(None);
        };
        // every buffer reached through an address in an argument struct, once each
        let mut resident: Vec<D::Buffer> = vec![file_buffer.clone()];
        for at in plan.tables() {
            if !resident.iter().any(|b| b.same(&at.buffer)) {
                resident.push(at.buffer.clone());
            }
        }
        let (e, vocab) = (plan.n_embd, plan.n_vocab);
        let (max_q, max_kv, max_ff, max_partial) =
            (plan.max_q, plan.max_kv, plan.max_ff, plan.max_partial);
        let q8 = |values: usize| values / 32 * 36;
        let b = |bytes: usize| device.shared_buffer(bytes);
        let arena = Arena {
            params: b(16)?,
            x: b(4 * e)?,
            xq: b(q8(e))?,
            q: b(4 * max_q)?,
            k: b(4 * max_kv)?,
            v: b(4 * max_kv)?,
            attn_q: b(q8(max_q))?,
            partial: b(4 * max_partial)?,
            o: b(4 * e)?,
            ffq: b(q8(max_ff))?,
            hidden: b(4 * e)?,
            logits: b(4 * vocab)?,
            cand_v: b(4 * TOP_BLOCKS as usize * TOPK_MAX)?,
            cand_i: b(4 * TOP_BLOCKS as usize * TOPK_MAX)?,
            recent: b(4 * PENALTY_WINDOW_MAX)?,
            n_recent: b(4)?,
            out_token: b(4)?,
            draws: b(4 * DRAWS)?,
        };
        let f = |name: &str| device.pipeline(name);
        let pipelines = Pipelines {
            embed_norm: f("embed_norm")?,
            matvec3: f("matvec3")?,
            gate_up: f("gate_up")?,
            attention_join: f("attention_join")?,
            add_norm: f("add_norm")?,
            penalties: f("penalties")?,
            top_candidates: f("top_candidates")?,
            pick: f("pick")?,
        };
        // the threads each kernel is dispatched with at the least (the others adapt to what the
        // pipeline allows), in SIMD-groups of 32
        let head_dim = plan.layers.iter().map(|l| l.head_dim).max().unwrap_or(32);
        let needs = [
            (&pipelines.top_candidates, 256),
            (&pipelines.pick, 64),
            (&pipelines.attention_join, head_dim),
            (&pipelines.embed_norm, 32),
            (&pipelines.matvec3, 32),
            (&pipelines.gate_up, 32),
            (&pipelines.add_norm, 32),
            (&pipelines.penalties, 32),
        ];
        let attention = plan.layers.iter().map(|l| (&l.attention, 32));
        for (p, need) in needs.into_iter().chain(attention) {
            if p.execution_width() != 32 || p.max_threads() < need {
                tracing::info!("a fused Metal kernel cannot run as dispatched here; generic path");
                return Ok(None);
            }
        }
        Ok(Some(MetalDecoder {
            device,
            pipelines,
            plan,
            arena,
            resident,
            file_buffer,
            _mapping: mapping,
            draws_uploaded: 0,
        }))
    }

    /// Start a generation (`CudaDecoder::begin`): the penalties' window of recent tokens and
    /// the first batch of uniform draws from the host's seeded RNG.
    pub fn begin(
        &mut self,
        history: &[u32],
        sampling: &DeviceSampling,
        draws: &mut dyn FnMut() -> f32,
    ) -> Result<()> {
        let tail = &history[history.len().saturating_sub(sampling.penalty_window)..];
        // SAFETY (here and below): the GPU is done with the arena between steps (each step
        // waits for its command buffer), and `&mut self` keeps the host's uses apart
        let recent = unsafe { shared_i32s(&self.arena.recent) };
        for (slot, &t) in recent.iter_mut().zip(tail) {
            *slot = t as i32;
        }
        let n_recent = unsafe { shared_i32s(&self.arena.n_recent) };
        n_recent[0] = tail.len().min(PENALTY_WINDOW_MAX) as i32;
        self.draws_uploaded = 0;
        self.upload_draws(draws);
        Ok(())
    }

    fn upload_draws(&mut self, draws: &mut dyn FnMut() -> f32) {
        let slots = unsafe { shared_f32s(&self.arena.draws) };
        for d in slots.iter_mut().take(DRAWS) {
            *d = draws();
        }
        self.draws_uploaded += DRAWS;
    }

    /// Run `token` at position `cache.len()` through the model and sample the next token on
    /// the GPU (`CudaDecoder::step`).
    pub fn step(
        &mut self,
        cache: &mut KvCache,
        token: u32,
        step: usize,
        sampling: &DeviceSampling,
        draws: &mut dyn FnMut() -> f32,
    ) -> Result<u32> {
        let pos = cache.len();
        cache.check_room(1)?;
        if sampling.temperature > 0.0 && step >= self.draws_uploaded {
            self.upload_draws(draws);
        }
        let places = MetalPlaces {
            device: &self.device,
            file: self.file_buffer.clone(),
        };
        let caches = decode_plan::layer_caches(&self.plan, &places, cache, pos)?;
        self.device.before_step()?;
        let params = unsafe { shared_i32s(&self.arena.params) };
        params[..4].copy_from_slice(&[pos as i32, token as i32, step as i32, 0]);

        self.device.run(|enc| {
            self.make_resident(enc, &caches);
            self.encode_step(enc, &caches, sampling);
        })?;
        let out = unsafe { shared_i32s(&self.arena.out_token) }[0];
        cache.begin_step(pos, 1);
        cache.advance(pos + 1);
        u32::try_from(out).map_err(|_| metal_err("the sampled token", out))
    }

    /// The logits of the last step (soft-capped by `top_candidates`, as the CUDA ones).
    pub fn logits(&self) -> Result<Vec<f32>> {
        // SAFETY: as in `begin`; the model's mutex keeps this apart from a step
        Ok(unsafe { shared_f32s(&self.arena.logits) }[..self.plan.n_vocab].to_vec())
    }

    fn make_resident(&self, enc: &mut D::Encoder, caches: &[LayerCache<Place<D>>]) {
        for b in &self.resident {
            enc.use_resource(b, false);
        }
        for b in self.arena.all() {
            enc.use_resource(b, true);
        }
        for (k, v, _) in caches {
            enc.use_resource(&k.buffer, true);
            enc.use_resource(&v.buffer, true);
        }
    }

    /// Every dispatch of one step, in `CudaDecoder::launch_step`'s order. A serial compute
    /// encoder (the default) runs each dispatch after the previous one's writes.
    fn encode_step(
        &self,
        enc: &mut D::Encoder,
        caches: &[LayerCache<Place<D>>],
        sampling: &DeviceSampling,
    ) {
        let a = &self.arena;
        let e = self.plan.n_embd;
        let norm_shared = 4 * (e + 32);
        let buffers = AttnBuffers {
            q: a.q.address(),
            k: a.k.address(),
            v: a.v.address(),
            partial: a.partial.address(),
        };
        let first_norm = self
            .plan
            .layers
            .first()
            .map_or(&self.plan.output_norm, |l| &l.attn_norm);

        // embedding row × scale, then the first layer's input norm
        let p = &self.pipelines.embed_norm;
        enc.set_pipeline(p);
        set_at(enc, 0, &self.plan.embed.0);
        enc.set_bytes(
            1,
            &EmbedArgs {
                ty: self.plan.embed.1,
                n_embd: e as i32,
                scale: self.plan.embed_scale,
                eps: self.plan.eps,
            },
        );
        set_at(enc, 2, first_norm);
        set_buf(enc, 3, &a.params);
        set_buf(enc, 4, &a.x);
        set_buf(enc, 5, &a.xq);
        enc.set_threadgroup_memory_length(norm_shared, 0);
        enc.dispatch_threadgroups(
            size(1, 1),
            size(threads(p, e.next_multiple_of(32).clamp(32, 1024)), 1),
        );

        for (il, l) in self.plan.layers.iter().enumerate() {
            // Q, K, V
            let mut mats = vec![(&l.q, &a.q, l.n_head * l.head_dim)];
            if let Some(k) = &l.k {
                mats.push((k, &a.k, l.n_kv * l.head_dim));
                if let Some(v) = &l.v {
                    mats.push((v, &a.v, l.n_kv * l.head_dim));
                }
            }
            self.matvec(enc, &mats, &a.xq, e);

            // attention: QK-norm, RoPE, the new K/V into the cache, the splits, then joined
            let (kc, vc, slots) = &caches[il];
            let attn = self.plan.attn(
                l,
                (kc.address(), vc.address(), *slots),
                &buffers,
                At::address,
            );
            enc.set_pipeline(&l.attention);
            enc.set_bytes(0, &attn);
            set_buf(enc, 1, &a.params);
            enc.dispatch_threadgroups(size(l.n_kv, l.splits), size(threads(&l.attention, 256), 1));
            let p = &self.pipelines.attention_join;
            enc.set_pipeline(p);
            set_buf(enc, 0, &a.partial);
            enc.set_bytes(
                1,
                &JoinArgs {
                    splits: l.splits as i32,
                    hd: l.head_dim as i32,
                    has_out: 0,
                },
            );
            set_none(enc, 2);
            set_buf(enc, 3, &a.attn_q);
            enc.dispatch_threadgroups(size(l.n_head, 1), size(l.head_dim, 1));

            // the output projection, then x += post-norm(o); the FFN's input norm
            self.matvec(enc, &[(&l.o, &a.o, e)], &a.attn_q, l.n_head * l.head_dim);
            self.add_norm(enc, l.post_attn_norm.as_ref(), 1.0, &l.ffn_norm, false);

            // gelu(gate) ⊙ up, quantized; down; x += post-norm(f) [× scale]; the next norm
            let p = &self.pipelines.gate_up;
            enc.set_pipeline(p);
            set_at(enc, 0, &l.gate.0);
            set_at(enc, 1, &l.up.0);
            enc.set_bytes(
                2,
                &GateUpArgs {
                    gate_type: l.gate.1,
                    up_type: l.up.1,
                    k: e as i32,
                    has_out: 0,
                },
            );
            set_buf(enc, 3, &a.xq);
            set_buf(enc, 4, &a.ffq);
            set_none(enc, 5);
            enc.dispatch_threadgroups(size(l.n_ff / 32, 1), size(gate_up_threads(p), 1));
            self.matvec(enc, &[(&l.down, &a.o, e)], &a.ffq, l.n_ff);
            let last = il + 1 == self.plan.layers.len();
            let next = if last {
                &self.plan.output_norm
            } else {
                &self.plan.layers[il + 1].attn_norm
            };
            self.add_norm(enc, l.post_ffn_norm.as_ref(), l.output_scale, next, last);
        }

        // logits, penalties, the candidates, the pick
        self.matvec(
            enc,
            &[(&self.plan.output, &a.logits, self.plan.n_vocab)],
            &a.xq,
            e,
        );
        let window = sampling.penalty_window as i32;
        if sampling.penalties() {
            let p = &self.pipelines.penalties;
            enc.set_pipeline(p);
            set_buf(enc, 0, &a.logits);
            set_buf(enc, 1, &a.recent);
            set_buf(enc, 2, &a.n_recent);
            enc.set_bytes(
                3,
                &PenaltyArgs {
                    window,
                    repeat: sampling.repetition_penalty,
                    presence: sampling.presence_penalty,
                },
            );
            enc.dispatch_threadgroups(size(1, 1), size(threads(p, 64), 1));
        }
        let top_k = sampling.top_k.clamp(1, TOPK_MAX) as i32;
        let p = &self.pipelines.top_candidates;
        enc.set_pipeline(p);
        set_buf(enc, 0, &a.logits);
        enc.set_bytes(
            1,
            &TopArgs {
                n: self.plan.n_vocab as i32,
                k: top_k,
                softcap: self.plan.final_softcap,
            },
        );
        set_buf(enc, 2, &a.cand_v);
        set_buf(enc, 3, &a.cand_i);
        // 8 SIMD-groups: top_candidates reduces across exactly 8 (`bv[8]`)
        enc.dispatch_threadgroups(size(TOP_BLOCKS as usize, 1), size(256, 1));
        let p = &self.pipelines.pick;
        enc.set_pipeline(p);
        set_buf(enc, 0, &a.cand_v);
        set_buf(enc, 1, &a.cand_i);
        enc.set_bytes(
            2,
            &SamplingArgs {
                temperature: sampling.temperature,
                top_k,
                top_p: sampling.top_p,
                min_p: sampling.min_p,
                n_draws: DRAWS as i32,
                n_cand: TOP_BLOCKS as i32 * top_k,
                window,
                pad: 0,
            },
        );
        set_buf(enc, 3, &a.draws);
        set_buf(enc, 4, &a.params);
        set_buf(enc, 5, &a.recent);
        set_buf(enc, 6, &a.n_recent);
        set_buf(enc, 7, &a.out_token);
        // two SIMD-groups: pick reduces across exactly two (`wv[2]`)
        enc.dispatch_threadgroups(size(1, 1), size(64, 1));
    }

    /// Up to three matrices times the q8_1 vector `y` (`k` values), a SIMD-group per row.
    fn matvec(&self, enc: &mut D::Encoder, mats: &[Product<'_, D>], y: &D::Buffer, k: usize) {
        let mut args = Mats {
            n_mats: mats.len() as i32,
            k: k as i32,
            ..Mats::default()
        };
        for (slot, ((w, ty), out, rows)) in args.m.iter_mut().zip(mats) {
            *slot = Mat {
                w: w.address(),
                out: out.address(),
                ty: *ty,
                rows: *rows as i32,
            };
        }
        let rows: usize = mats.iter().map(|m| m.2).sum();
        let p = &self.pipelines.matvec3;
        // a row per SIMD-group, 4 to a threadgroup where the pipeline allows
        let t = threads(p, 128);
        enc.set_pipeline(p);
        enc.set_bytes(0, &args);
        set_buf(enc, 1, y);
        enc.dispatch_threadgroups(size(rows.div_ceil(t / 32), 1), size(t, 1));
    }

    /// x += post-norm(o) × scale, then the next norm quantized into xq (and, for the last
    /// layer, the normed hidden state kept).
    fn add_norm(
        &self,
        enc: &mut D::Encoder,
        post: Option<&Place<D>>,
        scale: f32,
        next: &Place<D>,
        hidden: bool,
    ) {
        let a = &self.arena;
        let e = self.plan.n_embd;
        let p = &self.pipelines.add_norm;
        enc.set_pipeline(p);
        set_buf(enc, 0, &a.x);
        set_buf(enc, 1, &a.o);
        match post {
            Some(at) => set_at(enc, 2, at),
            None => set_none(enc, 2),
        }
        enc.set_bytes(
            3,
            &AddNormArgs {
                eps: self.plan.eps,
                scale,
                n: e as i32,
                has_post: post.is_some() as i32,
                has_hidden: hidden as i32,
            },
        );
        set_at(enc, 4, next);
        set_buf(enc, 5, &a.xq);
        set_buf(enc, 6, &a.hidden);
        enc.set_threadgroup_memory_length(4 * (e + 32), 0);
        enc.dispatch_threadgroups(
            size(1, 1),
            size(threads(p, e.next_multiple_of(32).clamp(32, 1024)), 1),
        );
    }
}
