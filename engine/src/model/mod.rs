//! Gemma 3 forward pass. On the CPU it runs on host slices with our own kernels
//! (`host_forward`, `q8_matmul`, `kquant_matmul`, `flash_attention`) inside one compute pool;
//! on GPU devices on candle tensors and candle's quantized matmuls (`forward_step`).
//!
//! Numerics follow llama.cpp `src/models/gemma3.cpp`:
//! embedding × sqrt(n_embd) → per layer: RMSNorm → Q/K/V → QK-RMSNorm → RoPE (base 10000 on
//! sliding layers, `rope.freq_base` on global ones) → Q × 1/sqrt(head_dim) → attention with a
//! causal (and, on 5 of 6 layers, sliding-window) mask → output projection → post-attention
//! norm → residual → RMSNorm → GELU(tanh)-gated FFN → post-FFN norm → residual; final RMSNorm,
//! logits from the tied embedding, optional soft-capping.
//!
//! GGUF norm weights already include Gemma's `+1`, so RMSNorm multiplies by them as stored.
//! The token embedding stays quantized: rows are dequantized one at a time on lookup and the
//! same matrix serves as the output projection.

mod f32_gemm;
mod flash_attention;
mod host_forward;
mod kquant_matmul;
mod linear;
mod q8_matmul;
mod rope;
mod scratch;
#[cfg(target_arch = "x86_64")]
mod x86;

use candle_core::{D, DType, Device, Tensor};

use crate::error::{Error, Result};
use crate::gguf::{GemmaConfig, ModelFile};
use crate::kv_cache::KvCache;
use linear::Linear;
pub use rope::RopeTable;

/// An RMSNorm weight: a tensor for device backends, a host copy for the CPU pass.
#[derive(Debug)]
struct Norm {
    tensor: Tensor,
    host: Vec<f32>,
}

#[derive(Debug)]
struct Layer {
    attn_norm: Norm,
    q: Linear,
    k: Linear,
    v: Linear,
    q_norm: Norm,
    k_norm: Norm,
    o: Linear,
    post_attn_norm: Norm,
    ffn_norm: Norm,
    gate: Linear,
    up: Linear,
    down: Linear,
    post_ffn_norm: Norm,
    sliding: bool,
}

/// Which positions' logits a forward pass should produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Only the last position (generation).
    Last,
    /// Every position (scoring).
    All,
}

#[derive(Debug)]
pub struct Gemma3 {
    config: GemmaConfig,
    /// The token embedding, also the output projection (tied).
    embedding: Linear,
    output_norm: Norm,
    layers: Vec<Layer>,
    rope_local: RopeTable,
    rope_global: RopeTable,
    device: Device,
    embed_scale: f64,
    /// The CPU compute threads. Every forward pass runs inside this pool (`install`), so the
    /// many parallel loops of a step are forked from a worker — cheap — rather than each being
    /// injected from the engine thread and waited on through a lock, which cost ~10-15 µs per
    /// matmul (hundreds per token).
    pool: Option<rayon::ThreadPool>,
    /// A smaller pool for a hot device (`serious`: see [`crate::thermal`]); the kernels size
    /// their work by `rayon::current_num_threads()`, so they simply split it fewer ways.
    reduced_pool: Option<rayon::ThreadPool>,
    use_reduced: std::sync::atomic::AtomicBool,
}

impl Gemma3 {
    /// Load every tensor, checking names and shapes against the config. RoPE tables are built
    /// for `max_context` positions.
    pub fn load(file: &mut ModelFile, max_context: usize, device: &Device) -> Result<Self> {
        let c = file.config().clone();
        let e = c.n_embd;
        let q_dim = c.n_head * c.head_dim;
        let kv_dim = c.n_kv_head * c.head_dim;

        let embedding = Linear::load(file, "token_embd.weight", c.n_vocab, e, device)?;
        if file.has_tensor("output.weight") {
            return Err(Error::InvalidModel {
                path: file.path().to_path_buf(),
                reason: "it has a separate output.weight; Gemma ties the output to the embedding"
                    .into(),
            });
        }
        let output_norm = norm(file, "output_norm.weight", e, device)?;

        let mut layers = Vec::with_capacity(c.n_layer);
        for il in 0..c.n_layer {
            let p = |s: &str| format!("blk.{il}.{s}.weight");
            let mm = |file: &mut ModelFile, name: &str, shape: &[usize]| -> Result<Linear> {
                Linear::load(file, &p(name), shape[0], shape[1], device)
            };
            layers.push(Layer {
                attn_norm: norm(file, &p("attn_norm"), e, device)?,
                q: mm(file, "attn_q", &[q_dim, e])?,
                k: mm(file, "attn_k", &[kv_dim, e])?,
                v: mm(file, "attn_v", &[kv_dim, e])?,
                q_norm: norm(file, &p("attn_q_norm"), c.head_dim, device)?,
                k_norm: norm(file, &p("attn_k_norm"), c.head_dim, device)?,
                o: mm(file, "attn_output", &[e, q_dim])?,
                post_attn_norm: norm(file, &p("post_attention_norm"), e, device)?,
                ffn_norm: norm(file, &p("ffn_norm"), e, device)?,
                gate: mm(file, "ffn_gate", &[c.n_ff, e])?,
                up: mm(file, "ffn_up", &[c.n_ff, e])?,
                down: mm(file, "ffn_down", &[e, c.n_ff])?,
                post_ffn_norm: norm(file, &p("post_ffw_norm"), e, device)?,
                sliding: c.is_sliding(il),
            });
        }
        let rope_len = max_context.max(1);
        let pool = if device.is_cpu() {
            // sized by RAYON_NUM_THREADS (`device::set_threads`), else the logical CPUs
            Some(
                rayon::ThreadPoolBuilder::new()
                    .thread_name(|i| format!("companion-compute-{i}"))
                    .build()
                    .map_err(|e| {
                        Error::InvalidArgument(format!("cannot start compute threads: {e}"))
                    })?,
            )
        } else {
            None
        };
        Ok(Gemma3 {
            pool,
            reduced_pool: None,
            use_reduced: std::sync::atomic::AtomicBool::new(false),
            rope_local: RopeTable::new(c.rope_base_local, c.head_dim, rope_len, device)?,
            rope_global: RopeTable::new(c.rope_base_global, c.head_dim, rope_len, device)?,
            embed_scale: (e as f64).sqrt(),
            config: c,
            embedding,
            output_norm,
            layers,
            device: device.clone(),
        })
    }

    pub fn config(&self) -> &GemmaConfig {
        &self.config
    }

    /// Compute threads of the full CPU pool (0 on GPU devices).
    pub fn threads(&self) -> usize {
        self.pool.as_ref().map_or(0, |p| p.current_num_threads())
    }

    /// Build the pool used under [`Self::set_reduced_threads`]: `threads` workers (no pool
    /// when that is not fewer than the full one, or on GPU devices).
    pub fn with_reduced_threads(mut self, threads: usize) -> Result<Self> {
        if self.pool.is_some() && threads < self.threads() {
            self.reduced_pool = Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads.max(1))
                    .thread_name(|i| format!("companion-compute-low-{i}"))
                    .build()
                    .map_err(|e| {
                        Error::InvalidArgument(format!("cannot start compute threads: {e}"))
                    })?,
            );
        }
        Ok(self)
    }

    /// Run later forward passes on the reduced pool (when there is one) or the full one.
    pub fn set_reduced_threads(&self, on: bool) {
        self.use_reduced
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Threads the next forward pass will use.
    pub fn active_threads(&self) -> usize {
        self.active_pool().map_or(0, |p| p.current_num_threads())
    }

    fn active_pool(&self) -> Option<&rayon::ThreadPool> {
        if self.use_reduced.load(std::sync::atomic::Ordering::Relaxed) {
            if let Some(p) = &self.reduced_pool {
                return Some(p);
            }
        }
        self.pool.as_ref()
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The longest context the RoPE tables cover.
    pub fn max_context(&self) -> usize {
        self.rope_global.len()
    }

    /// Run `tokens` through the model at positions `cache.len()..`, writing their K/V into
    /// `cache`, in steps of at most `cache.chunk()` tokens. Returns the final hidden states
    /// (after the output norm) of the last position or of all positions, `[n, n_embd]`.
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache, output: Output) -> Result<Tensor> {
        if tokens.is_empty() {
            return Err(Error::InvalidArgument("no tokens to process".into()));
        }
        cache.check_room(tokens.len())?;
        if cache.len() + tokens.len() > self.max_context() {
            return Err(Error::context_full(
                cache.len() + tokens.len(),
                self.max_context(),
            ));
        }
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= self.config.n_vocab) {
            return Err(Error::InvalidArgument(format!(
                "token id {bad} is outside the vocabulary of {}",
                self.config.n_vocab
            )));
        }
        let mut outs = Vec::new();
        if let Some(pool) = self.active_pool() {
            let rows = pool.install(|| self.forward_host(tokens, cache, output))?;
            let n = rows.len() / self.config.n_embd;
            return Ok(Tensor::from_vec(
                rows,
                (n, self.config.n_embd),
                &self.device,
            )?);
        }
        for chunk in tokens.chunks(cache.chunk()) {
            let h = match self.forward_step(chunk, cache) {
                Ok(h) => h,
                Err(e) => {
                    // A half-written step leaves the cache inconsistent; start it over.
                    cache.clear();
                    return Err(e);
                }
            };
            match output {
                Output::All => outs.push(h),
                Output::Last => {
                    let n = h.dim(0)?;
                    outs = vec![h.narrow(0, n - 1, 1)?];
                }
            }
        }
        let h = if outs.len() == 1 {
            outs.pop().expect("one output")
        } else {
            Tensor::cat(&outs, 0)?
        };
        Ok(h)
    }

    /// One step on a GPU device with candle's tensor ops (the CPU runs `forward_step_host`).
    fn forward_step(&self, tokens: &[u32], cache: &mut KvCache) -> Result<Tensor> {
        let c = &self.config;
        let seq = tokens.len();
        let start = cache.len();
        let mut x = (self.embedding.rows(tokens, &self.device)? * self.embed_scale)?;

        cache.begin_step(start, seq);
        // attention with tensor ops and an additive mask built from the slots' positions
        let mask_local = cache.mask(true, start, seq, &self.device)?;
        let mask_global = cache.mask(false, start, seq, &self.device)?;

        for (il, layer) in self.layers.iter().enumerate() {
            let _span = tracing::trace_span!("block", il).entered();
            let h = candle_nn::ops::rms_norm(&x, &layer.attn_norm.tensor, c.rms_eps)?;
            let q = layer.q.forward(&h)?.reshape((seq, c.n_head, c.head_dim))?;
            let k = layer
                .k
                .forward(&h)?
                .reshape((seq, c.n_kv_head, c.head_dim))?;
            let v = layer
                .v
                .forward(&h)?
                .reshape((seq, c.n_kv_head, c.head_dim))?;
            let q = candle_nn::ops::rms_norm(&q, &layer.q_norm.tensor, c.rms_eps)?;
            let k = candle_nn::ops::rms_norm(&k, &layer.k_norm.tensor, c.rms_eps)?;
            // [heads, seq, d]
            let q = q.transpose(0, 1)?.unsqueeze(0)?;
            let k = k.transpose(0, 1)?.unsqueeze(0)?;
            let v = v.transpose(0, 1)?.contiguous()?;
            let rope = if layer.sliding {
                &self.rope_local
            } else {
                &self.rope_global
            };
            let q = (rope.apply(&q, start)?.squeeze(0)? * c.attention_scale as f64)?;
            let k = rope.apply(&k, start)?.squeeze(0)?;

            let k = k.to_dtype(DType::F16)?.to_dtype(DType::F32)?;
            let v = v.to_dtype(DType::F16)?.to_dtype(DType::F32)?;
            let (keys, values) = cache.write_and_view(il, start, &k, &v)?;
            let mask = if layer.sliding {
                &mask_local
            } else {
                &mask_global
            };
            let attn = attention(&q, &keys, &values, mask, c.n_kv_head)?;
            // [n_head, seq, d] -> [seq, n_head * d]
            let attn = attn
                .transpose(0, 1)?
                .contiguous()?
                .reshape((seq, c.n_head * c.head_dim))?;
            let attn = layer.o.forward(&attn)?;
            let attn = candle_nn::ops::rms_norm(&attn, &layer.post_attn_norm.tensor, c.rms_eps)?;
            let x_attn = (attn + &x)?;

            let h = candle_nn::ops::rms_norm(&x_attn, &layer.ffn_norm.tensor, c.rms_eps)?;
            // GELU(tanh) in f32. ggml's CPU build rounds through an f16 table here
            // (`ggml_vec_geglu_f32` with GGML_GELU_FP16); against the reference log-probs
            // (made by llama.cpp on another machine) neither is consistently closer.
            let gate = layer.gate.forward(&h)?.gelu()?;
            let up = layer.up.forward(&h)?;
            let ffn = layer.down.forward(&(gate * up)?)?;
            let ffn = candle_nn::ops::rms_norm(&ffn, &layer.post_ffn_norm.tensor, c.rms_eps)?;
            x = (ffn + x_attn)?;
        }
        cache.advance(start + seq);
        Ok(candle_nn::ops::rms_norm(
            &x,
            &self.output_norm.tensor,
            c.rms_eps,
        )?)
    }

    /// The CPU path: steps of at most `cache.chunk()` tokens on host slices.
    fn forward_host(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        output: Output,
    ) -> Result<Vec<f32>> {
        let mut rows = Vec::new();
        for chunk in tokens.chunks(cache.chunk()) {
            match self.forward_step_host(chunk, cache, output) {
                Ok(h) if output == Output::All => rows.extend_from_slice(&h),
                Ok(h) => rows = h,
                Err(e) => {
                    // A half-written step leaves the cache inconsistent; start it over.
                    cache.clear();
                    return Err(e);
                }
            }
        }
        Ok(rows)
    }

    /// Logits `[n, n_vocab]` for hidden states `[n, n_embd]`, soft-capped when the model says so.
    pub fn logits(&self, hidden: &Tensor) -> Result<Tensor> {
        let logits = match self.active_pool() {
            Some(pool) => pool.install(|| self.embedding.forward(hidden))?,
            None => self.embedding.forward(hidden)?,
        };
        let logits = match self.config.final_logit_softcap {
            Some(cap) => ((logits / cap as f64)?.tanh()? * cap as f64)?,
            None => logits,
        };
        Ok(logits.to_dtype(DType::F32)?)
    }
}

/// Grouped-query attention. `q`: `[n_head, seq, d]` (already scaled); `keys`/`values`:
/// `[n_kv_head, used, d]`; `mask`: `[seq, used]`. Query head h reads kv head h / group, as
/// ggml's broadcast in `mul_mat` does.
fn attention(
    q: &Tensor,
    keys: &Tensor,
    values: &Tensor,
    mask: &Tensor,
    n_kv_head: usize,
) -> candle_core::Result<Tensor> {
    let (n_head, seq, d) = q.dims3()?;
    let used = keys.dim(1)?;
    let group = n_head / n_kv_head;
    let q = q.contiguous()?.reshape((n_kv_head, group * seq, d))?;
    let scores = q.matmul(&keys.t()?)?;
    let scores = scores
        .reshape((n_kv_head, group, seq, used))?
        .broadcast_add(mask)?;
    let probs = candle_nn::ops::softmax_last_dim(&scores)?;
    let probs = probs.reshape((n_kv_head, group * seq, used))?;
    let out = probs.matmul(&values.contiguous()?)?;
    out.reshape((n_head, seq, d))
}

fn norm(file: &mut ModelFile, name: &str, len: usize, device: &Device) -> Result<Norm> {
    let tensor = file
        .tensor(name, &[len], device)?
        .dequantize(device)?
        .to_dtype(DType::F32)?;
    let host = tensor.to_vec1::<f32>()?;
    Ok(Norm { tensor, host })
}

/// Log-softmax over the last dimension, in f32.
pub fn log_softmax(logits: &Tensor) -> Result<Tensor> {
    Ok(candle_nn::ops::log_softmax(logits, D::Minus1)?)
}
