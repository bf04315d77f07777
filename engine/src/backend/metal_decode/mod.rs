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
//! **Never run**: there is no Mac where this is built. It is type-checked for
//! `aarch64-apple-darwin` (`scripts/check-apple`), the shaders are type-checked as C++
//! (`scripts/check-metal`), and it is off unless `COMPANION_METAL_FUSED=1`. Anything it cannot
//! set up (no Metal 3, a file larger than one buffer, a shape or format the kernels lack)
//! returns `None` and the generic path runs.

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;

use candle_core::quantized::QMatMul;
use candle_core::{Device, MetalDevice, Storage, Tensor};
use memmap2::Mmap;
use objc2::Message;
use objc2::rc::{Retained, autoreleasepool};
use objc2::runtime::ProtocolObject;
use objc2_foundation::NSString;
use objc2_metal::{
    MTLBuffer, MTLCommandBuffer, MTLCommandBufferStatus, MTLCommandEncoder, MTLCommandQueue,
    MTLCompileOptions, MTLComputeCommandEncoder, MTLComputePipelineState, MTLDevice, MTLGPUFamily,
    MTLResourceOptions, MTLResourceUsage,
};

use super::decode_plan::{self, AttnBuffers, LayerCache, Places, Plan, type_id};
use super::device_sampling::{DRAWS, DeviceSampling, PENALTY_WINDOW_MAX, TOP_BLOCKS, TOPK_MAX};
use super::kernel_args::{
    AddNormArgs, EmbedArgs, GateUpArgs, JoinArgs, Mat, Mats, PenaltyArgs, SamplingArgs, TopArgs,
};
use crate::error::{Error, Result};
use crate::gguf::ModelFile;
use crate::kv_cache::KvCache;
use crate::model::{Linear, Model};

mod encoding;

use encoding::{
    At, Buf, Encoder, Pipeline, gate_up_threads, pipeline, set_at, set_buf, set_bytes, set_none,
    shared_buffer, shared_f32s, shared_i32s, size, threads,
};

static SOURCE: &str = include_str!("../../../metal/decode.metal");

fn metal_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("Metal decode: {what}: {e}"))
}

/// Where a contiguous f32 or f16 candle tensor on Metal starts.
fn tensor_at(t: &Tensor) -> Option<At> {
    let (storage, layout) = t.storage_and_layout();
    if !layout.is_contiguous() {
        return None;
    }
    let Storage::Metal(s) = &*storage else {
        return None;
    };
    let size = match t.dtype() {
        candle_core::DType::F32 => 4,
        candle_core::DType::F16 => 2,
        _ => return None,
    };
    let raw: &ProtocolObject<dyn MTLBuffer> = s.buffer().as_ref();
    Some(At {
        buffer: raw.retain(),
        offset: layout.start_offset() * size,
    })
}

/// Places on Metal: weights in the no-copy buffer over the mapped file, at their offsets in
/// it; tensors in candle's buffers.
struct MetalPlaces {
    file: Buf,
}

impl Places for MetalPlaces {
    type At = At;
    const GPU: &'static str = "Metal";

    fn weight(&self, l: &Linear) -> Option<(At, i32)> {
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

    fn tensor(&self, t: &Tensor) -> Option<At> {
        tensor_at(t)
    }
}

/// Buffers of the decode step, allocated once, in shared memory (the host writes the step's
/// parameters and reads the token).
struct Arena {
    params: Buf,
    x: Buf,
    xq: Buf,
    q: Buf,
    k: Buf,
    v: Buf,
    attn_q: Buf,
    partial: Buf,
    o: Buf,
    ffq: Buf,
    hidden: Buf,
    logits: Buf,
    cand_v: Buf,
    cand_i: Buf,
    recent: Buf,
    n_recent: Buf,
    out_token: Buf,
    draws: Buf,
}

impl Arena {
    fn all(&self) -> [&Buf; 18] {
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

struct Pipelines {
    embed_norm: Pipeline,
    matvec3: Pipeline,
    gate_up: Pipeline,
    attention_join: Pipeline,
    add_norm: Pipeline,
    penalties: Pipeline,
    top_candidates: Pipeline,
    pick: Pipeline,
}

pub(crate) struct MetalDecoder {
    candle: MetalDevice,
    queue: Retained<ProtocolObject<dyn MTLCommandQueue>>,
    pipelines: Pipelines,
    plan: Plan<At, Pipeline>,
    arena: Arena,
    /// Every buffer the kernels reach through an address, apart from the arena and the cache.
    resident: Vec<Buf>,
    /// The no-copy buffer over the mapped file, dropped before the mapping it views.
    file_buffer: Buf,
    _mapping: Arc<Mmap>,
    draws_uploaded: usize,
}

// SAFETY: Metal devices, queues, pipelines and buffers are thread-safe objects (Apple's
// "Metal Programming Guide", "Thread Safety": only command buffers and encoders are not, and
// those live within one `step`); the decoder sits behind the model's mutex besides.
unsafe impl Send for MetalDecoder {}

impl std::fmt::Debug for MetalDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetalDecoder")
            .field("layers", &self.plan.layers.len())
            .field("kernels_per_token", &self.kernels_per_token())
            .finish()
    }
}

impl MetalDecoder {
    /// Dispatches one decode step encodes.
    pub fn kernels_per_token(&self) -> usize {
        self.plan.kernels_per_token()
    }

    /// The fused decoder for `model` on its Metal device, reading the weights from `file`'s
    /// mapping, or `None` when the model or the GPU needs what it lacks.
    pub fn new(model: &Model, file: &ModelFile) -> Result<Option<Self>> {
        let Device::Metal(candle) = model.device() else {
            return Ok(None);
        };
        let device: &ProtocolObject<dyn MTLDevice> = candle.device().as_ref();
        // Apple7 (M1, A14 and later): Apple GPUs, whose SIMD-groups are 32 wide as the kernels
        // assume (AMD and Intel Macs with Metal 3 need not be); Metal 3 for `gpuAddress`
        if !device.supportsFamily(MTLGPUFamily::Apple7)
            || !device.supportsFamily(MTLGPUFamily::Metal3)
        {
            tracing::info!("the fused Metal decode needs an Apple GPU with Metal 3; generic path");
            return Ok(None);
        }
        if model.weights().ple.is_some() {
            tracing::info!("the fused Metal decode does not cover per-layer embeddings");
            return Ok(None);
        }
        // embed_norm and add_norm keep the row and a reduction scratch in threadgroup memory
        if 4 * (model.arch().n_embd + 32) > device.maxThreadgroupMemoryLength() {
            tracing::info!("the model is wider than the fused Metal decode's norm kernels");
            return Ok(None);
        }

        // the whole mapped file as one buffer, rounded up to whole pages (the mapping is)
        let mapping = file.mapping();
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let length = mapping.len().next_multiple_of(page);
        if length > device.maxBufferLength() {
            tracing::info!("the model file is larger than one Metal buffer; generic path");
            return Ok(None);
        }
        let Some(start) = NonNull::new(mapping.as_ptr() as *mut c_void) else {
            return Ok(None);
        };
        // SAFETY: the mapping is page-aligned, spans `length` bytes of whole pages, is
        // read-only here as in the kernels, and outlives the buffer (`_mapping` is dropped
        // after `file_buffer`); no deallocator, since the mapping owns the memory.
        let file_buffer = unsafe {
            device.newBufferWithBytesNoCopy_length_options_deallocator(
                start,
                length,
                MTLResourceOptions::StorageModeShared,
                None,
            )
        }
        .ok_or_else(|| metal_err("mapping the model file", "newBufferWithBytesNoCopy failed"))?;

        // Fast math (Metal's default) may assume no infinities, but the kernels use -INFINITY
        // as "no key yet" (attention_split, whose splits start empty in the first steps) and
        // `isfinite`; CUDA's --use_fast_math makes no such assumption. `mathMode` would say
        // "relaxed" but needs macOS 15 / iOS 18.
        let options = MTLCompileOptions::new();
        #[allow(deprecated)]
        options.setFastMathEnabled(false);
        let library = device
            .newLibraryWithSource_options_error(&NSString::from_str(SOURCE), Some(&options))
            .map_err(|e| metal_err("compiling decode.metal", e.localizedDescription()))?;
        let f = |name: &str| pipeline(device, &library, name);

        let places = MetalPlaces {
            file: file_buffer.clone(),
        };
        let Some(plan) = decode_plan::plan(model, &places, |name| f(name))? else {
            return Ok(None);
        };
        // every buffer reached through an address in an argument struct, once each
        let mut resident: Vec<Buf> = vec![file_buffer.clone()];
        for at in plan.tables() {
            if !resident
                .iter()
                .any(|b| Retained::as_ptr(b) == Retained::as_ptr(&at.buffer))
            {
                resident.push(at.buffer.clone());
            }
        }
        let (e, vocab) = (plan.n_embd, plan.n_vocab);
        let (max_q, max_kv, max_ff, max_partial) =
            (plan.max_q, plan.max_kv, plan.max_ff, plan.max_partial);
        let q8 = |values: usize| values / 32 * 36;
        let b = |bytes: usize| shared_buffer(device, bytes);
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
        let queue = device
            .newCommandQueue()
            .ok_or_else(|| metal_err("a command queue", "none available"))?;
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
            if p.threadExecutionWidth() != 32 || p.maxTotalThreadsPerThreadgroup() < need {
                tracing::info!("a fused Metal kernel cannot run as dispatched here; generic path");
                return Ok(None);
            }
        }
        Ok(Some(MetalDecoder {
            candle: candle.clone(),
            queue,
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
            file: self.file_buffer.clone(),
        };
        let caches = decode_plan::layer_caches(&self.plan, &places, cache, pos)?;
        // candle's queue may still be writing the cache (the prefill): ours runs after it
        self.candle
            .flush_and_wait_current()
            .map_err(|e| metal_err("waiting for the prefill", e))?;
        let params = unsafe { shared_i32s(&self.arena.params) };
        params[..4].copy_from_slice(&[pos as i32, token as i32, step as i32, 0]);

        // the command buffer and encoder come autoreleased: drain them every step, since the
        // engine thread has no pool of its own
        autoreleasepool(|_| {
            let command = self
                .queue
                .commandBuffer()
                .ok_or_else(|| metal_err("a command buffer", "none available"))?;
            let encoder = command
                .computeCommandEncoder()
                .ok_or_else(|| metal_err("a compute encoder", "none available"))?;
            self.make_resident(&encoder, &caches);
            self.encode_step(&encoder, &caches, sampling);
            encoder.endEncoding();
            command.commit();
            command.waitUntilCompleted();
            if command.status() != MTLCommandBufferStatus::Completed {
                let why = command.error().map_or_else(
                    || "no error given".to_string(),
                    |e| e.localizedDescription().to_string(),
                );
                return Err(metal_err("the decode step failed on the GPU", why));
            }
            Ok(())
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

    fn make_resident(&self, encoder: &Encoder, caches: &[LayerCache<At>]) {
        let rw = MTLResourceUsage::Read | MTLResourceUsage::Write;
        for b in &self.resident {
            encoder.useResource_usage(ProtocolObject::from_ref(&**b), MTLResourceUsage::Read);
        }
        for b in self.arena.all() {
            encoder.useResource_usage(ProtocolObject::from_ref(&**b), rw);
        }
        for (k, v, _) in caches {
            encoder.useResource_usage(ProtocolObject::from_ref(&*k.buffer), rw);
            encoder.useResource_usage(ProtocolObject::from_ref(&*v.buffer), rw);
        }
    }

    /// Every dispatch of one step, in `CudaDecoder::launch_step`'s order. A serial compute
    /// encoder (the default) runs each dispatch after the previous one's writes.
    fn encode_step(&self, enc: &Encoder, caches: &[LayerCache<At>], sampling: &DeviceSampling) {
        let a = &self.arena;
        let e = self.plan.n_embd;
        let norm_shared = 4 * (e + 32);
        let buffers = AttnBuffers {
            q: a.q.gpuAddress(),
            k: a.k.gpuAddress(),
            v: a.v.gpuAddress(),
            partial: a.partial.gpuAddress(),
        };
        let first_norm = self
            .plan
            .layers
            .first()
            .map_or(&self.plan.output_norm, |l| &l.attn_norm);

        // embedding row × scale, then the first layer's input norm
        let p = &self.pipelines.embed_norm;
        enc.setComputePipelineState(p);
        set_at(enc, 0, &self.plan.embed.0);
        set_bytes(
            enc,
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
        unsafe { enc.setThreadgroupMemoryLength_atIndex(norm_shared, 0) };
        enc.dispatchThreadgroups_threadsPerThreadgroup(
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
            enc.setComputePipelineState(&l.attention);
            set_bytes(enc, 0, &attn);
            set_buf(enc, 1, &a.params);
            enc.dispatchThreadgroups_threadsPerThreadgroup(
                size(l.n_kv, l.splits),
                size(threads(&l.attention, 256), 1),
            );
            let p = &self.pipelines.attention_join;
            enc.setComputePipelineState(p);
            set_buf(enc, 0, &a.partial);
            set_bytes(
                enc,
                1,
                &JoinArgs {
                    splits: l.splits as i32,
                    hd: l.head_dim as i32,
                    has_out: 0,
                },
            );
            set_none(enc, 2);
            set_buf(enc, 3, &a.attn_q);
            enc.dispatchThreadgroups_threadsPerThreadgroup(size(l.n_head, 1), size(l.head_dim, 1));

            // the output projection, then x += post-norm(o); the FFN's input norm
            self.matvec(enc, &[(&l.o, &a.o, e)], &a.attn_q, l.n_head * l.head_dim);
            self.add_norm(enc, l.post_attn_norm.as_ref(), 1.0, &l.ffn_norm, false);

            // gelu(gate) ⊙ up, quantized; down; x += post-norm(f) [× scale]; the next norm
            let p = &self.pipelines.gate_up;
            enc.setComputePipelineState(p);
            set_at(enc, 0, &l.gate.0);
            set_at(enc, 1, &l.up.0);
            set_bytes(
                enc,
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
            enc.dispatchThreadgroups_threadsPerThreadgroup(
                size(l.n_ff / 32, 1),
                size(gate_up_threads(p), 1),
            );
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
            enc.setComputePipelineState(p);
            set_buf(enc, 0, &a.logits);
            set_buf(enc, 1, &a.recent);
            set_buf(enc, 2, &a.n_recent);
            set_bytes(
                enc,
                3,
                &PenaltyArgs {
                    window,
                    repeat: sampling.repetition_penalty,
                    presence: sampling.presence_penalty,
                },
            );
            enc.dispatchThreadgroups_threadsPerThreadgroup(size(1, 1), size(threads(p, 64), 1));
        }
        let top_k = sampling.top_k.clamp(1, TOPK_MAX) as i32;
        let p = &self.pipelines.top_candidates;
        enc.setComputePipelineState(p);
        set_buf(enc, 0, &a.logits);
        set_bytes(
            enc,
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
        enc.dispatchThreadgroups_threadsPerThreadgroup(size(TOP_BLOCKS as usize, 1), size(256, 1));
        let p = &self.pipelines.pick;
        enc.setComputePipelineState(p);
        set_buf(enc, 0, &a.cand_v);
        set_buf(enc, 1, &a.cand_i);
        set_bytes(
            enc,
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
        enc.dispatchThreadgroups_threadsPerThreadgroup(size(1, 1), size(64, 1));
    }

    /// Up to three matrices times the q8_1 vector `y` (`k` values), a SIMD-group per row.
    fn matvec(&self, enc: &Encoder, mats: &[(&(At, i32), &Buf, usize)], y: &Buf, k: usize) {
        let mut args = Mats {
            n_mats: mats.len() as i32,
            k: k as i32,
            ..Mats::default()
        };
        for (slot, ((w, ty), out, rows)) in args.m.iter_mut().zip(mats) {
            *slot = Mat {
                w: w.address(),
                out: out.gpuAddress(),
                ty: *ty,
                rows: *rows as i32,
            };
        }
        let rows: usize = mats.iter().map(|m| m.2).sum();
        let p = &self.pipelines.matvec3;
        // a row per SIMD-group, 4 to a threadgroup where the pipeline allows
        let t = threads(p, 128);
        enc.setComputePipelineState(p);
        set_bytes(enc, 0, &args);
        set_buf(enc, 1, y);
        enc.dispatchThreadgroups_threadsPerThreadgroup(size(rows.div_ceil(t / 32), 1), size(t, 1));
    }

    /// x += post-norm(o) × scale, then the next norm quantized into xq (and, for the last
    /// layer, the normed hidden state kept).
    fn add_norm(&self, enc: &Encoder, post: Option<&At>, scale: f32, next: &At, hidden: bool) {
        let a = &self.arena;
        let e = self.plan.n_embd;
        let p = &self.pipelines.add_norm;
        enc.setComputePipelineState(p);
        set_buf(enc, 0, &a.x);
        set_buf(enc, 1, &a.o);
        match post {
            Some(at) => set_at(enc, 2, at),
            None => set_none(enc, 2),
        }
        set_bytes(
            enc,
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
        unsafe { enc.setThreadgroupMemoryLength_atIndex(4 * (e + 32), 0) };
        enc.dispatchThreadgroups_threadsPerThreadgroup(
            size(1, 1),
            size(threads(p, e.next_multiple_of(32).clamp(32, 1024)), 1),
        );
    }
}
