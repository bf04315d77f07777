//! The decode step on CUDA as a handful of fused kernels (engine/cuda/decode.cu), replayed as
//! a CUDA graph: the generic candle path issued 689 kernels, 529 allocations and 21 host
//! copies per token and copied the 1 MiB of logits back to sample on the host; this issues
//! 8 kernels per layer and a few more for the logits and the sampler, allocates nothing after
//! the session's first step, and copies back the 4-byte token.
//!
//! It is the same forward pass as `model::forward` (llama.cpp b11434's Gemma graph), written
//! again only in the fusion: each kernel is one or more of the backend interface's operations
//! back to back (see the kernel file's header). Prefill stays on the candle backend, which
//! writes the same f16 KV cache this reads and extends; the description's features the
//! kernels do not cover (Gemma 4's per-layer embeddings, weight formats other than Q4_0,
//! Q5_0, Q8_0, Q4_K, Q5_K and Q6_K, heads other than 64/128/256/512 wide or groups over 8)
//! keep the generic path, which [`CudaDecoder::new`] says by returning `None`.
//!
//! Graphs: everything that changes per token (position, token, sampler step) lives in device
//! memory, so one capture serves every step until a pointer changes — a global layer's cache
//! growing by a page (once per 256 tokens) or other sampler settings — and is then captured
//! again.

use std::sync::Arc;

use candle_core::cuda_backend::cudarc::driver::{
    CudaFunction, CudaGraph, CudaModule, CudaSlice, CudaStream, DevicePtr, DeviceRepr,
    LaunchConfig, PushKernelArg, sys,
};
use candle_core::quantized::QMatMul;
use candle_core::{Device, Storage, Tensor};

use super::decode_plan::{self, AttnBuffers, Places, Plan, type_id};
use super::device_sampling::{DRAWS, DeviceSampling, PENALTY_WINDOW_MAX, TOP_BLOCKS, TOPK_MAX};
use super::kernel_args::{Attn, CudaSampling, Mat};
use crate::error::{Error, Result};
use crate::kv_cache::KvCache;
use crate::model::{Linear, Model};

/// The kernels, machine code for sm_80/86/89/90 and PTX for newer GPUs (engine/build.rs).
static FATBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/decode.fatbin"));

fn cuda_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("CUDA decode: {what}: {e}"))
}

/// The device address of a contiguous f32 or f16 tensor's first element.
fn tensor_ptr(t: &Tensor, stream: &CudaStream) -> Option<u64> {
    let (storage, layout) = t.storage_and_layout();
    if !layout.is_contiguous() {
        return None;
    }
    let Storage::Cuda(s) = &*storage else {
        return None;
    };
    let offset = layout.start_offset();
    match t.dtype() {
        candle_core::DType::F32 => {
            let slice = s.as_cuda_slice::<f32>().ok()?;
            let (ptr, _sync) = slice.device_ptr(stream);
            Some(ptr + 4 * offset as u64)
        }
        candle_core::DType::F16 => {
            let slice = s.as_cuda_slice::<half::f16>().ok()?;
            let (ptr, _sync) = slice.device_ptr(stream);
            Some(ptr + 2 * offset as u64)
        }
        _ => None,
    }
}

/// Places on CUDA are device addresses: a quantized tensor's from candle, a tensor's from its
/// slice.
struct CudaPlaces<'a> {
    stream: &'a CudaStream,
}

impl Places for CudaPlaces<'_> {
    type At = u64;
    const GPU: &'static str = "CUDA";

    fn weight(&self, l: &Linear) -> Option<(u64, i32)> {
        let Linear::Candle {
            matmul: QMatMul::QTensor(t),
            ..
        } = l
        else {
            return None;
        };
        Some((t.device_ptr().ok()? as u64, type_id(t.dtype())?))
    }

    fn tensor(&self, t: &Tensor) -> Option<u64> {
        tensor_ptr(t, self.stream)
    }
}

// ---- the kernels' argument structs (decode.cu), field for field ------------------------------

// SAFETY: plain `repr(C)` structs of integers and floats, as the kernels declare them
unsafe impl DeviceRepr for Mat {}
unsafe impl DeviceRepr for Attn {}

unsafe impl DeviceRepr for CudaSampling {}

/// Buffers of the decode step, allocated once.
struct Arena {
    params: CudaSlice<i32>,
    x: CudaSlice<f32>,
    xq: CudaSlice<u8>,
    q: CudaSlice<f32>,
    k: CudaSlice<f32>,
    v: CudaSlice<f32>,
    attn_q: CudaSlice<u8>,
    partial: CudaSlice<f32>,
    o: CudaSlice<f32>,
    ffq: CudaSlice<u8>,
    hidden: CudaSlice<f32>,
    logits: CudaSlice<f32>,
    cand_v: CudaSlice<f32>,
    cand_i: CudaSlice<i32>,
    recent: CudaSlice<i32>,
    n_recent: CudaSlice<i32>,
    out_token: CudaSlice<i32>,
    draws: CudaSlice<f32>,
}

fn alloc<T: DeviceRepr + candle_core::cuda_backend::cudarc::driver::ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    n: usize,
) -> Result<CudaSlice<T>> {
    stream
        .alloc_zeros::<T>(n.max(1))
        .map_err(|e| cuda_err("allocating the decode buffers", e))
}

fn ptr<T>(s: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    s.device_ptr(stream).0
}

/// The arena's device addresses, read once outside any capture: asking a `CudaSlice` for its
/// address may make the stream wait on the slice's events, which a capture must not contain.
#[derive(Clone, Copy)]
struct Ptrs {
    params: u64,
    x: u64,
    xq: u64,
    q: u64,
    k: u64,
    v: u64,
    attn_q: u64,
    partial: u64,
    o: u64,
    ffq: u64,
    hidden: u64,
    logits: u64,
    cand_v: u64,
    cand_i: u64,
    recent: u64,
    n_recent: u64,
    out_token: u64,
    draws: u64,
}

impl Arena {
    fn ptrs(&self, s: &CudaStream) -> Ptrs {
        Ptrs {
            params: ptr(&self.params, s),
            x: ptr(&self.x, s),
            xq: ptr(&self.xq, s),
            q: ptr(&self.q, s),
            k: ptr(&self.k, s),
            v: ptr(&self.v, s),
            attn_q: ptr(&self.attn_q, s),
            partial: ptr(&self.partial, s),
            o: ptr(&self.o, s),
            ffq: ptr(&self.ffq, s),
            hidden: ptr(&self.hidden, s),
            logits: ptr(&self.logits, s),
            cand_v: ptr(&self.cand_v, s),
            cand_i: ptr(&self.cand_i, s),
            recent: ptr(&self.recent, s),
            n_recent: ptr(&self.n_recent, s),
            out_token: ptr(&self.out_token, s),
            draws: ptr(&self.draws, s),
        }
    }
}

/// What one captured graph was made for.
#[derive(PartialEq)]
struct GraphKey {
    caches: Vec<u64>,
    sampling: [u32; 7],
}

struct Captured {
    key: GraphKey,
    graph: SendGraph,
}

/// cudarc's graph holds raw driver handles and is not `Send`. CUDA graphs are not internally
/// synchronized (cudarc's docs): the decoder lives behind the model's mutex, so one thread at
/// a time launches or drops it, which is what the driver asks for.
struct SendGraph(CudaGraph);
// SAFETY: see above; every use is serialized by the `Mutex<CudaDecoder>` in `Model`.
unsafe impl Send for SendGraph {}

pub(crate) struct CudaDecoder {
    stream: Arc<CudaStream>,
    _module: Arc<CudaModule>,
    embed_norm: CudaFunction,
    matvec3: CudaFunction,
    gate_up: CudaFunction,
    attention_join: CudaFunction,
    add_norm: CudaFunction,
    penalties: CudaFunction,
    top_candidates: CudaFunction,
    pick: CudaFunction,
    plan: Plan<u64, CudaFunction>,
    arena: Arena,
    p: Ptrs,
    graph: Option<Captured>,
    /// Draws uploaded so far for the current generation's sampler steps.
    draws_uploaded: usize,
}

impl std::fmt::Debug for CudaDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDecoder")
            .field("layers", &self.plan.layers.len())
            .field("kernels_per_token", &self.kernels_per_token())
            .field("captured", &self.graph.is_some())
            .finish()
    }
}

fn launch_err(e: impl std::fmt::Display) -> Error {
    cuda_err("a kernel launch failed", e)
}

impl CudaDecoder {
    /// Kernels one decode step launches.
    pub fn kernels_per_token(&self) -> usize {
        self.plan.kernels_per_token()
    }

    /// The fused decoder for `model` on its CUDA device, or `None` when the model needs what
    /// the kernels lack (the generic path then runs).
    pub fn new(model: &Model) -> Result<Option<Self>> {
        let Device::Cuda(device) = model.device() else {
            return Ok(None);
        };
        let stream = device.cuda_stream();
        // before loading the kernels, so that a model they cannot run never needs them
        if model.weights().ple.is_some() {
            tracing::info!("the fused CUDA decode does not cover per-layer embeddings");
            return Ok(None);
        }
        let module = stream
            .context()
            .load_module(candle_core::cuda_backend::cudarc::nvrtc::Ptx::from_binary(
                FATBIN.to_vec(),
            ))
            .map_err(|e| cuda_err("loading the kernels", e))?;
        let f = |name: &str| {
            module
                .load_function(name)
                .map_err(|e| cuda_err(&format!("kernel {name}"), e))
        };
        let places = CudaPlaces { stream: &stream };
        let Some(plan) = decode_plan::plan(model, &places, |name| f(name))? else {
            return Ok(None);
        };
        let (e, vocab) = (plan.n_embd, plan.n_vocab);
        let (max_q, max_kv, max_ff, max_partial) =
            (plan.max_q, plan.max_kv, plan.max_ff, plan.max_partial);
        let q8 = |values: usize| values / 32 * 36;
        let arena = Arena {
            params: alloc(&stream, 4)?,
            x: alloc(&stream, e)?,
            xq: alloc(&stream, q8(e))?,
            q: alloc(&stream, max_q)?,
            k: alloc(&stream, max_kv)?,
            v: alloc(&stream, max_kv)?,
            attn_q: alloc(&stream, q8(max_q))?,
            partial: alloc(&stream, max_partial)?,
            o: alloc(&stream, e)?,
            ffq: alloc(&stream, q8(max_ff))?,
            hidden: alloc(&stream, e)?,
            logits: alloc(&stream, vocab)?,
            cand_v: alloc(&stream, TOP_BLOCKS as usize * TOPK_MAX)?,
            cand_i: alloc(&stream, TOP_BLOCKS as usize * TOPK_MAX)?,
            recent: alloc(&stream, PENALTY_WINDOW_MAX)?,
            n_recent: alloc(&stream, 1)?,
            out_token: alloc(&stream, 1)?,
            draws: alloc(&stream, DRAWS)?,
        };
        let p = arena.ptrs(&stream);
        stream
            .synchronize()
            .map_err(|e| cuda_err("preparing the decode buffers", e))?;
        Ok(Some(CudaDecoder {
            embed_norm: f("embed_norm")?,
            matvec3: f("matvec3")?,
            gate_up: f("gate_up")?,
            attention_join: f("attention_join")?,
            add_norm: f("add_norm")?,
            penalties: f("penalties")?,
            top_candidates: f("top_candidates")?,
            pick: f("pick")?,
            _module: module,
            stream,
            plan,
            arena,
            p,
            graph: None,
            draws_uploaded: 0,
        }))
    }

    /// Start a generation: the tokens so far, of which the last `penalty_window` are the
    /// window the penalties look at (oldest first, as the host sampler's), and the first
    /// batch of uniform draws from the host's seeded RNG.
    pub fn begin(
        &mut self,
        history: &[u32],
        sampling: &DeviceSampling,
        draws: &mut dyn FnMut() -> f32,
    ) -> Result<()> {
        let s = &self.stream;
        let tail: Vec<i32> = history[history.len().saturating_sub(sampling.penalty_window)..]
            .iter()
            .map(|&t| t as i32)
            .collect();
        let n = [tail.len() as i32];
        if !tail.is_empty() {
            s.memcpy_htod(&tail, &mut self.arena.recent.slice_mut(..tail.len()))
                .map_err(|e| cuda_err("uploading the recent tokens", e))?;
        }
        s.memcpy_htod(&n, &mut self.arena.n_recent)
            .map_err(|e| cuda_err("uploading the recent tokens", e))?;
        self.draws_uploaded = 0;
        self.upload_draws(draws)?;
        Ok(())
    }

    fn upload_draws(&mut self, draws: &mut dyn FnMut() -> f32) -> Result<()> {
        let batch: Vec<f32> = (0..DRAWS).map(|_| draws()).collect();
        self.stream
            .memcpy_htod(&batch, &mut self.arena.draws)
            .map_err(|e| cuda_err("uploading the sampler's draws", e))?;
        self.draws_uploaded += DRAWS;
        Ok(())
    }

    /// Run `token` at position `cache.len()` through the model and sample the next token on
    /// the device. `step`: tokens this generation sampled on the device so far.
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
        // the draws of steps `step..` must be on the device (indexed by step % DRAWS)
        if sampling.temperature > 0.0 && step >= self.draws_uploaded {
            self.upload_draws(draws)?;
        }
        // global layers grow a page ahead of the write; the caches' addresses key the graph
        let places = CudaPlaces {
            stream: &self.stream,
        };
        let caches = decode_plan::layer_caches(&self.plan, &places, cache, pos)?
            .into_iter()
            .flat_map(|(k, v, slots)| [k, v, slots as u64])
            .collect();
        let params = [pos as i32, token as i32, step as i32, 0];
        self.stream
            .memcpy_htod(&params, &mut self.arena.params)
            .map_err(|e| cuda_err("uploading the step", e))?;
        let key = GraphKey {
            caches,
            sampling: sampling.key(),
        };
        if self.graph.as_ref().is_none_or(|g| g.key != key) {
            self.graph = None;
            self.capture(&key, sampling)?;
        }
        let graph = self.graph.as_ref().expect("captured above");
        graph
            .graph
            .0
            .launch()
            .map_err(|e| cuda_err("replaying the decode graph", e))?;
        let mut out = [0i32];
        self.stream
            .memcpy_dtoh(&self.arena.out_token, &mut out)
            .map_err(|e| cuda_err("reading the token", e))?;
        cache.begin_step(pos, 1);
        cache.advance(pos + 1);
        u32::try_from(out[0]).map_err(|_| cuda_err("the sampled token", out[0]))
    }

    /// The logits of the last step (for callers that want them, e.g. scoring).
    pub fn logits(&self) -> Result<Vec<f32>> {
        self.stream
            .clone_dtoh(&self.arena.logits)
            .map_err(|e| cuda_err("reading the logits", e))
    }

    fn capture(&mut self, key: &GraphKey, sampling: &DeviceSampling) -> Result<()> {
        self.stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(|e| cuda_err("starting the graph capture", e))?;
        let launched = self.launch_step(&key.caches, sampling);
        let captured = self.stream.end_capture(
            sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,
        );
        launched?;
        let graph = captured
            .map_err(|e| cuda_err("ending the graph capture", e))?
            .ok_or_else(|| cuda_err("the graph capture", "captured nothing"))?;
        self.graph = Some(Captured {
            key: GraphKey {
                caches: key.caches.clone(),
                sampling: key.sampling,
            },
            graph: SendGraph(graph),
        });
        Ok(())
    }

    /// Every kernel of one step, in order, on the stream (captured by [`Self::capture`]).
    fn launch_step(&self, caches: &[u64], sampling: &DeviceSampling) -> Result<()> {
        let s = &self.stream;
        let p = self.p;
        let (params, x, xq) = (p.params, p.x, p.xq);
        let (q, k, v) = (p.q, p.k, p.v);
        let (attn_q, partial, o) = (p.attn_q, p.partial, p.o);
        let (ffq, hidden, logits) = (p.ffq, p.hidden, p.logits);
        let buffers = AttnBuffers { q, k, v, partial };
        let e = self.plan.n_embd as i32;
        let shared_e = (4 * (self.plan.n_embd + 32)) as u32;
        let null = 0u64;
        let norm_threads = (self.plan.n_embd.next_multiple_of(32)).clamp(32, 1024) as u32;

        // embedding row × scale, then the first layer's input norm
        let first_norm = self
            .plan
            .layers
            .first()
            .map_or(self.plan.output_norm, |l| l.attn_norm);
        unsafe {
            s.launch_builder(&self.embed_norm)
                .arg(&self.plan.embed.0)
                .arg(&self.plan.embed.1)
                .arg(&e)
                .arg(&self.plan.embed_scale)
                .arg(&first_norm)
                .arg(&self.plan.eps)
                .arg(&params)
                .arg(&x)
                .arg(&xq)
                .launch(LaunchConfig {
                    grid_dim: (1, 1, 1),
                    block_dim: (norm_threads, 1, 1),
                    shared_mem_bytes: shared_e,
                })
        }
        .map_err(launch_err)?;

        for (il, l) in self.plan.layers.iter().enumerate() {
            // Q, K, V
            let mut mats = [Mat::default(); 3];
            mats[0] = Mat {
                w: l.q.0,
                out: q,
                ty: l.q.1,
                rows: (l.n_head * l.head_dim) as i32,
            };
            let mut n = 1;
            if let Some(kw) = l.k {
                mats[1] = Mat {
                    w: kw.0,
                    out: k,
                    ty: kw.1,
                    rows: (l.n_kv * l.head_dim) as i32,
                };
                n = 2;
                if let Some(vw) = l.v {
                    mats[2] = Mat {
                        w: vw.0,
                        out: v,
                        ty: vw.1,
                        rows: (l.n_kv * l.head_dim) as i32,
                    };
                    n = 3;
                }
            }
            self.matvec(&mats[..n], xq, self.plan.n_embd)?;

            // attention: QK-norm, RoPE, the new K/V into the cache, the splits, then joined
            let layer_cache = (
                caches[3 * il],
                caches[3 * il + 1],
                caches[3 * il + 2] as usize,
            );
            let attn = self.plan.attn(l, layer_cache, &buffers, |&a| a);
            unsafe {
                s.launch_builder(&l.attention)
                    .arg(&attn)
                    .arg(&params)
                    .launch(LaunchConfig {
                        grid_dim: (l.n_kv as u32, l.splits as u32, 1),
                        block_dim: (256, 1, 1),
                        shared_mem_bytes: 0,
                    })
            }
            .map_err(launch_err)?;
            let splits = l.splits as i32;
            let hd = l.head_dim as i32;
            unsafe {
                s.launch_builder(&self.attention_join)
                    .arg(&partial)
                    .arg(&splits)
                    .arg(&hd)
                    .arg(&null)
                    .arg(&attn_q)
                    .launch(LaunchConfig {
                        grid_dim: (l.n_head as u32, 1, 1),
                        block_dim: (l.head_dim as u32, 1, 1),
                        shared_mem_bytes: 0,
                    })
            }
            .map_err(launch_err)?;

            // the output projection, then x += post-norm(o); the FFN's input norm
            self.matvec(
                &[Mat {
                    w: l.o.0,
                    out: o,
                    ty: l.o.1,
                    rows: e,
                }],
                attn_q,
                l.n_head * l.head_dim,
            )?;
            self.add_norm_launch(
                x,
                o,
                l.post_attn_norm.unwrap_or(0),
                1.0,
                l.ffn_norm,
                xq,
                null,
            )?;

            // gelu(gate) ⊙ up, quantized; down; x += post-norm(f) [× scale]; the next norm
            let k_in = e;
            unsafe {
                s.launch_builder(&self.gate_up)
                    .arg(&l.gate.0)
                    .arg(&l.gate.1)
                    .arg(&l.up.0)
                    .arg(&l.up.1)
                    .arg(&xq)
                    .arg(&k_in)
                    .arg(&ffq)
                    .arg(&null)
                    .launch(LaunchConfig {
                        grid_dim: ((l.n_ff / 32) as u32, 1, 1),
                        block_dim: (1024, 1, 1),
                        shared_mem_bytes: 0,
                    })
            }
            .map_err(launch_err)?;
            self.matvec(
                &[Mat {
                    w: l.down.0,
                    out: o,
                    ty: l.down.1,
                    rows: e,
                }],
                ffq,
                l.n_ff,
            )?;
            let last = il + 1 == self.plan.layers.len();
            let next = if last {
                self.plan.output_norm
            } else {
                self.plan.layers[il + 1].attn_norm
            };
            self.add_norm_launch(
                x,
                o,
                l.post_ffn_norm.unwrap_or(0),
                l.output_scale,
                next,
                xq,
                if last { hidden } else { null },
            )?;
        }

        // logits, penalties, the candidates, the pick
        self.matvec(
            &[Mat {
                w: self.plan.output.0,
                out: logits,
                ty: self.plan.output.1,
                rows: self.plan.n_vocab as i32,
            }],
            xq,
            self.plan.n_embd,
        )?;
        let (recent, n_recent) = (p.recent, p.n_recent);
        let window = sampling.penalty_window as i32;
        if sampling.penalties() {
            unsafe {
                s.launch_builder(&self.penalties)
                    .arg(&logits)
                    .arg(&recent)
                    .arg(&n_recent)
                    .arg(&window)
                    .arg(&sampling.repetition_penalty)
                    .arg(&sampling.presence_penalty)
                    .launch(LaunchConfig {
                        grid_dim: (1, 1, 1),
                        block_dim: (64, 1, 1),
                        shared_mem_bytes: 0,
                    })
            }
            .map_err(launch_err)?;
        }
        let (cand_v, cand_i) = (p.cand_v, p.cand_i);
        let n_vocab = self.plan.n_vocab as i32;
        let top_k = sampling.top_k.clamp(1, TOPK_MAX) as i32;
        unsafe {
            s.launch_builder(&self.top_candidates)
                .arg(&logits)
                .arg(&n_vocab)
                .arg(&top_k)
                .arg(&self.plan.final_softcap)
                .arg(&cand_v)
                .arg(&cand_i)
                .launch(LaunchConfig {
                    grid_dim: (TOP_BLOCKS, 1, 1),
                    block_dim: (256, 1, 1),
                    shared_mem_bytes: 0,
                })
        }
        .map_err(launch_err)?;
        let chain = CudaSampling {
            temperature: sampling.temperature,
            top_k,
            top_p: sampling.top_p,
            min_p: sampling.min_p,
            draws: p.draws,
            n_draws: DRAWS as i32,
        };
        let n_cand = TOP_BLOCKS as i32 * top_k;
        let out_token = p.out_token;
        unsafe {
            s.launch_builder(&self.pick)
                .arg(&cand_v)
                .arg(&cand_i)
                .arg(&n_cand)
                .arg(&chain)
                .arg(&params)
                .arg(&recent)
                .arg(&n_recent)
                .arg(&window)
                .arg(&out_token)
                .launch(LaunchConfig {
                    grid_dim: (1, 1, 1),
                    block_dim: (64, 1, 1),
                    shared_mem_bytes: 0,
                })
        }
        .map_err(launch_err)?;
        Ok(())
    }

    /// Up to three matrices times the q8_1 vector at `y` (`k` values), a warp per row.
    fn matvec(&self, mats: &[Mat], y: u64, k: usize) -> Result<()> {
        let mut m = [Mat::default(); 3];
        m[..mats.len()].copy_from_slice(mats);
        let rows: i32 = mats.iter().map(|m| m.rows).sum();
        let n = mats.len() as i32;
        let k = k as i32;
        unsafe {
            self.stream
                .launch_builder(&self.matvec3)
                .arg(&m[0])
                .arg(&m[1])
                .arg(&m[2])
                .arg(&n)
                .arg(&y)
                .arg(&k)
                .launch(LaunchConfig {
                    grid_dim: ((rows as u32).div_ceil(4), 1, 1),
                    block_dim: (128, 1, 1),
                    shared_mem_bytes: 0,
                })
        }
        .map_err(launch_err)?;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn add_norm_launch(
        &self,
        x: u64,
        o: u64,
        post: u64,
        scale: f32,
        next: u64,
        xq: u64,
        hidden: u64,
    ) -> Result<()> {
        let n = self.plan.n_embd as i32;
        let threads = (self.plan.n_embd.next_multiple_of(32)).clamp(32, 1024) as u32;
        unsafe {
            self.stream
                .launch_builder(&self.add_norm)
                .arg(&x)
                .arg(&o)
                .arg(&post)
                .arg(&self.plan.eps)
                .arg(&scale)
                .arg(&next)
                .arg(&n)
                .arg(&xq)
                .arg(&hidden)
                .launch(LaunchConfig {
                    grid_dim: (1, 1, 1),
                    block_dim: (threads, 1, 1),
                    shared_mem_bytes: (4 * (self.plan.n_embd + 32)) as u32,
                })
        }
        .map_err(launch_err)?;
        Ok(())
    }
}
