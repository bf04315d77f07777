//! The Gemma model: weights as the architecture description asks for them (`weights`), and one
//! forward pass (`forward`) written once against the backend interface of [`crate::backend`]:
//! our own kernels ([`crate::cpu`]) on host slices for the CPU, candle tensors for GPUs (and,
//! in tests, candle on the CPU, so the GPU path's model is the tested one).
//!
//! Numerics follow llama.cpp b11434's `src/models/gemma*.cpp` (see [`crate::arch`] for what
//! differs between generations). GGUF norm weights are stored as llama.cpp multiplies them
//! (Gemma 1-3 already hold `1 + w`), so norms multiply by them as they are. The token
//! embedding stays quantized: rows are dequantized one at a time on lookup and, when the output
//! is tied, the same matrix is the output projection.

pub mod assistant;
mod forward;
mod hidden;
mod linear;
mod rope;
mod weights;

use candle_core::Device;

use crate::arch::ModelArch;
use crate::backend::{Backend, BackendKind, CandleBackend, Counting, HostBackend};
use crate::error::{Error, Result};
use crate::gguf::ModelFile;
use crate::kv_cache::{KvCache, KvStorage};

use forward::StepInput;
pub use hidden::Hidden;
pub(crate) use hidden::Repr as HiddenRepr;
pub(crate) use linear::Linear;
pub use rope::RopeTable;
pub(crate) use weights::{Norm, Weights};

/// Sampler settings the fused decode runs on the device (see [`Model::fused_sampling`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FusedSampling(
    #[cfg_attr(
        not(any(feature = "cuda", feature = "metal", feature = "metal-emulated")),
        allow(dead_code)
    )]
    crate::backend::device_sampling::DeviceSampling,
);

/// A computation written once against the backend interface, run by
/// [`Model::on_backend`] on the model's.
pub(crate) trait OnBackend {
    type Out;
    fn run<B: Backend>(self, model: &Model, b: &B) -> Self::Out;
}

/// Which positions' hidden states a forward pass should produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Only the last position (generation).
    Last,
    /// Every position (scoring).
    All,
    /// Every position, each computed as a one-token step at that position computes it, bit
    /// for bit (a speculative check, `crate::speculate`; the host backend's
    /// [`crate::cpu::RowSums::AsOneRow`]).
    AllAsDecode,
}

impl Output {
    /// How the host kernels sum the rows of this output's steps.
    fn sums(self) -> crate::cpu::RowSums {
        match self {
            Output::AllAsDecode => crate::cpu::RowSums::AsOneRow,
            Output::Last | Output::All => crate::cpu::RowSums::Batched,
        }
    }
}

/// A loaded model: immutable, shared by every session (llama.cpp's `llama_model`).
#[derive(Debug)]
pub struct Model {
    arch: ModelArch,
    weights: Weights,
    /// One table per distinct rope of the description (`ModelArch::ropes`).
    ropes: Vec<RopeTable>,
    device: Device,
    backend: BackendKind,
    /// The CPU compute threads of the host backend. Every forward pass runs inside this pool
    /// (`install`), so the many parallel loops of a step are forked from a worker — cheap —
    /// rather than each being injected from the engine thread and waited on through a lock,
    /// which cost ~10-15 µs per matmul (hundreds per token).
    pool: Option<rayon::ThreadPool>,
    /// A smaller pool for a hot device (`serious`: see [`crate::thermal`]); the kernels size
    /// their work by `rayon::current_num_threads()`, so they simply split it fewer ways.
    reduced_pool: Option<rayon::ThreadPool>,
    use_reduced: std::sync::atomic::AtomicBool,
    /// Backend operations dispatched so far (kernel launches or dispatches on a fused GPU path): see
    /// `backend::counting`.
    ops: std::sync::atomic::AtomicU64,
    /// Time per backend operation (`backend::profile`).
    profile: crate::backend::profile::OpProfile,
    /// The fused decode step on the GPU, when the model is on one and the kernels cover it
    /// (`backend::fused`: CUDA's, or Metal's when `COMPANION_METAL_FUSED=1`).
    #[cfg(any(feature = "cuda", feature = "metal", feature = "metal-emulated"))]
    fused: Option<std::sync::Mutex<crate::backend::fused::FusedDecoder>>,
}

impl Model {
    /// Load every tensor the description names, checking names and shapes. RoPE tables are
    /// built for `max_context` positions.
    pub fn load(
        file: &mut ModelFile,
        max_context: usize,
        device: &Device,
        backend: BackendKind,
    ) -> Result<Self> {
        let arch = ModelArch::of(file)?;
        let mut model = Self::load_described(file, arch, max_context, device, backend, true)?;
        #[cfg(any(feature = "cuda", feature = "metal", feature = "metal-emulated"))]
        if backend == BackendKind::Candle {
            model.fused =
                crate::backend::fused::FusedDecoder::new(&model, file)?.map(std::sync::Mutex::new);
        }
        #[cfg(not(any(feature = "cuda", feature = "metal", feature = "metal-emulated")))]
        let _ = &mut model;
        Ok(model)
    }

    /// The weights `arch` describes, with RoPE tables for `max_context` positions; a pool of
    /// compute threads of its own for the host backend when `own_pool` (an assistant runs in
    /// its target's, `assistant`).
    fn load_described(
        file: &mut ModelFile,
        arch: ModelArch,
        max_context: usize,
        device: &Device,
        backend: BackendKind,
        own_pool: bool,
    ) -> Result<Self> {
        let weights = Weights::load(file, &arch, device, backend)?;
        let rope_len = max_context.max(1);
        let ropes = arch
            .ropes
            .iter()
            .map(|spec| {
                let factors = spec
                    .freq_factors
                    .then_some(weights.rope_freqs.as_deref())
                    .flatten();
                RopeTable::new(spec, factors, rope_len, backend.device_tables(device))
            })
            .collect::<candle_core::Result<Vec<_>>>()?;
        let pool = if backend == BackendKind::Host && own_pool {
            // sized by RAYON_NUM_THREADS (`device::set_threads`), else the logical CPUs
            Some(compute_pool(None, "companion-compute")?)
        } else {
            None
        };
        Ok(Model {
            arch,
            weights,
            ropes,
            device: device.clone(),
            backend,
            pool,
            reduced_pool: None,
            use_reduced: std::sync::atomic::AtomicBool::new(false),
            ops: std::sync::atomic::AtomicU64::new(0),
            profile: Default::default(),
            #[cfg(any(feature = "cuda", feature = "metal", feature = "metal-emulated"))]
            fused: None,
        })
    }

    /// Run decode steps through Metal's fused decoder on the emulated device (`--device
    /// metal-emulated`; the model is candle's on the CPU device). Whether the kernels cover
    /// the model (otherwise the generic path runs).
    #[cfg(feature = "metal-emulated")]
    pub(crate) fn use_emulated_metal(&mut self, file: &ModelFile) -> Result<bool> {
        if self.backend != BackendKind::Candle || !self.device.is_cpu() {
            return Err(Error::InvalidArgument(
                "the emulated Metal device runs candle's model on the CPU device".into(),
            ));
        }
        self.fused = crate::backend::fused::FusedDecoder::emulated_metal(self, file)?
            .map(std::sync::Mutex::new);
        Ok(self.fused.is_some())
    }

    /// Backend operations dispatched so far (see `backend::counting`).
    pub fn ops(&self) -> u64 {
        self.ops.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Time per backend operation so far (`backend::profile`).
    pub fn profile(&self) -> crate::backend::ProfileSnapshot {
        self.profile.snapshot()
    }

    /// Kernels one decode step launches on a fused GPU path, when it runs.
    pub fn fused_kernels_per_token(&self) -> Option<usize> {
        #[cfg(any(feature = "cuda", feature = "metal", feature = "metal-emulated"))]
        if let Some(f) = &self.fused {
            return Some(
                f.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .kernels_per_token(),
            );
        }
        None
    }

    pub fn arch(&self) -> &ModelArch {
        &self.arch
    }

    /// Which implementation of the forward pass runs.
    pub fn backend(&self) -> BackendKind {
        self.backend
    }

    /// Compute threads of the full CPU pool (0 when candle runs the pass).
    pub fn threads(&self) -> usize {
        self.pool.as_ref().map_or(0, |p| p.current_num_threads())
    }

    /// Build the pool used under [`Self::set_reduced_threads`]: `threads` workers (no pool
    /// when that is not fewer than the full one, or without a host pool).
    pub fn with_reduced_threads(mut self, threads: usize) -> Result<Self> {
        if self.pool.is_some() && threads < self.threads() {
            self.reduced_pool = Some(compute_pool(Some(threads.max(1)), "companion-compute-low")?);
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
        if self.use_reduced.load(std::sync::atomic::Ordering::Relaxed)
            && let Some(p) = &self.reduced_pool
        {
            return Some(p);
        }
        self.pool.as_ref()
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The longest context the RoPE tables cover.
    pub fn max_context(&self) -> usize {
        self.ropes.first().map_or(0, RopeTable::len)
    }

    /// How this model's KV cache is stored: host f16 slices for our kernels, device tensors
    /// for candle.
    pub(crate) fn kv_storage(&self) -> KvStorage {
        match self.backend {
            BackendKind::Host => KvStorage::Host,
            BackendKind::Candle => KvStorage::Device(self.device.clone()),
        }
    }

    /// Run `tokens` through the model at positions `cache.len()..`, writing their K/V into
    /// `cache`, in steps of at most `cache.chunk()` tokens. Returns the final hidden states
    /// (after the output norm) of the last position or of all positions.
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache, output: Output) -> Result<Hidden> {
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
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= self.arch.n_vocab) {
            return Err(Error::InvalidArgument(format!(
                "token id {bad} is outside the vocabulary of {}",
                self.arch.n_vocab
            )));
        }
        struct Chunks<'a> {
            tokens: &'a [u32],
            cache: &'a mut KvCache,
            output: Output,
        }
        impl OnBackend for Chunks<'_> {
            type Out = Result<Hidden>;
            fn run<B: Backend>(self, model: &Model, b: &B) -> Result<Hidden> {
                model.forward_chunks(b, self.tokens, self.cache, self.output)
            }
        }
        let result = self.on_backend(
            output.sums(),
            Chunks {
                tokens,
                cache: &mut *cache,
                output,
            },
        );
        if result.is_err() {
            // A half-written step leaves the cache inconsistent; start it over.
            cache.clear();
        }
        result
    }

    /// Run an image's rows `[rows, n_embd]` (a vision projector's output, see
    /// [`crate::vision`]) through the model at positions `cache.len()..` as one step whose
    /// rows see one another, writing their K/V into `cache`. Nothing is read from them: a
    /// picture is always followed by text (its end marker).
    pub fn forward_image(&self, rows: &[f32], cache: &mut KvCache) -> Result<()> {
        let e = self.arch.n_embd;
        let n = rows.len() / e.max(1);
        if n == 0 || n * e != rows.len() {
            return Err(Error::InvalidArgument(format!(
                "{} values are not whole image rows of {e}",
                rows.len()
            )));
        }
        if n > cache.chunk() {
            return Err(Error::InvalidArgument(format!(
                "an image of {n} rows needs a prompt chunk of at least {n} (it is {})",
                cache.chunk()
            )));
        }
        cache.check_room(n)?;
        if cache.len() + n > self.max_context() {
            return Err(Error::context_full(cache.len() + n, self.max_context()));
        }
        struct ImageStep<'a> {
            rows: &'a [f32],
            cache: &'a mut KvCache,
        }
        impl OnBackend for ImageStep<'_> {
            type Out = Result<()>;
            fn run<B: Backend>(self, model: &Model, b: &B) -> Result<()> {
                let out = model.step(b, StepInput::Image(self.rows), self.cache, Output::Last)?;
                b.release(out);
                Ok(())
            }
        }
        let result = self.on_backend(
            Output::Last.sums(),
            ImageStep {
                rows,
                cache: &mut *cache,
            },
        );
        if result.is_err() {
            cache.clear();
        }
        result
    }

    /// `f` on the backend this model runs on: the host kernels inside its compute pool, or
    /// candle; every operation counted and timed (`backend::counting`).
    pub(crate) fn on_backend<F>(&self, sums: crate::cpu::RowSums, f: F) -> F::Out
    where
        F: OnBackend + Send,
        F::Out: Send,
    {
        match (self.backend, self.active_pool()) {
            (BackendKind::Host, Some(pool)) => pool.install(|| {
                f.run(
                    self,
                    &Counting::new(HostBackend::new(self, sums), &self.ops, &self.profile),
                )
            }),
            _ => f.run(
                self,
                &Counting::new(CandleBackend::new(self), &self.ops, &self.profile),
            ),
        }
    }

    /// Logits `[rows, n_vocab]` for hidden states, soft-capped when the model says so.
    pub fn logits(&self, hidden: &Hidden) -> Result<Vec<Vec<f32>>> {
        self.logits_of(hidden, Output::All)
    }

    /// [`Self::logits`] of the hidden states of a forward pass with `output`: each row as a
    /// decode step's logits for [`Output::AllAsDecode`].
    pub(crate) fn logits_of(&self, hidden: &Hidden, output: Output) -> Result<Vec<Vec<f32>>> {
        let run = || match self.backend {
            BackendKind::Host => Counting::new(
                HostBackend::new(self, output.sums()),
                &self.ops,
                &self.profile,
            )
            .logits(hidden),
            BackendKind::Candle => {
                Counting::new(CandleBackend::new(self), &self.ops, &self.profile).logits(hidden)
            }
        };
        match self.active_pool() {
            Some(pool) => pool.install(run),
            None => run(),
        }
    }

    pub(crate) fn weights(&self) -> &Weights {
        &self.weights
    }

    pub(crate) fn rope(&self, index: usize) -> &RopeTable {
        &self.ropes[index]
    }

    /// Rope table `index` (the fused GPU decoders read its device copy).
    #[cfg(any(feature = "cuda", feature = "metal", feature = "metal-emulated"))]
    pub(crate) fn rope_table(&self, index: usize) -> &RopeTable {
        &self.ropes[index]
    }

    /// Whether decode steps with `sampling` can run fused on the device (and sample there).
    pub(crate) fn fused_sampling(
        &self,
        sampling: &crate::sampling::SamplingParams,
    ) -> Option<FusedSampling> {
        #[cfg(any(feature = "cuda", feature = "metal", feature = "metal-emulated"))]
        if self.fused.is_some() {
            return crate::backend::device_sampling::DeviceSampling::of(sampling)
                .map(FusedSampling);
        }
        let _ = sampling;
        None
    }

    /// A fused generation starts: the tokens so far (the penalties look at the last ones),
    /// its sampler settings, the sampler's draws.
    pub(crate) fn fused_begin(
        &self,
        history: &[u32],
        sampling: &FusedSampling,
        draws: &mut dyn FnMut() -> f32,
    ) -> Result<()> {
        #[cfg(any(feature = "cuda", feature = "metal", feature = "metal-emulated"))]
        if let Some(f) = &self.fused {
            return f
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .begin(history, &sampling.0, draws);
        }
        let _ = (history, sampling, draws);
        Err(Error::InvalidArgument(
            "no fused decode on this device".into(),
        ))
    }

    /// The logits of the last fused decode step (soft-capped as [`Self::logits`]'s).
    pub(crate) fn fused_logits(&self) -> Result<Vec<f32>> {
        #[cfg(any(feature = "cuda", feature = "metal", feature = "metal-emulated"))]
        if let Some(f) = &self.fused {
            return f.lock().unwrap_or_else(|p| p.into_inner()).logits();
        }
        Err(Error::InvalidArgument(
            "no fused decode on this device".into(),
        ))
    }

    /// One fused decode step: `token` at `cache.len()` through the model; the next token,
    /// sampled on the device.
    pub(crate) fn fused_step(
        &self,
        cache: &mut KvCache,
        token: u32,
        step: usize,
        sampling: &FusedSampling,
        draws: &mut dyn FnMut() -> f32,
    ) -> Result<u32> {
        #[cfg(any(feature = "cuda", feature = "metal", feature = "metal-emulated"))]
        if let Some(f) = &self.fused {
            if token as usize >= self.arch.n_vocab {
                return Err(Error::InvalidArgument(format!(
                    "token id {token} is outside the vocabulary of {}",
                    self.arch.n_vocab
                )));
            }
            let result = f.lock().unwrap_or_else(|p| p.into_inner()).step(
                cache,
                token,
                step,
                &sampling.0,
                draws,
            );
            match &result {
                Ok(_) => {
                    let kernels = self.fused_kernels_per_token().unwrap_or(0) as u64;
                    self.ops
                        .fetch_add(kernels, std::sync::atomic::Ordering::Relaxed);
                }
                Err(_) => cache.clear(),
            }
            return result;
        }
        let _ = (cache, token, step, sampling, draws);
        Err(Error::InvalidArgument(
            "no fused decode on this device".into(),
        ))
    }
}

fn compute_pool(threads: Option<usize>, name: &'static str) -> Result<rayon::ThreadPool> {
    let mut builder = rayon::ThreadPoolBuilder::new().thread_name(move |i| format!("{name}-{i}"));
    if let Some(n) = threads {
        builder = builder.num_threads(n);
    }
    builder
        .build()
        .map_err(|e| Error::InvalidArgument(format!("cannot start compute threads: {e}")))
}

/// Log-softmax of one row of logits, in f32 with the sum of exponentials in f64.
pub fn log_softmax(row: &[f32]) -> Vec<f32> {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = row.iter().map(|&x| ((x - max) as f64).exp()).sum();
    let log_sum = sum.ln() as f32;
    row.iter().map(|&x| x - max - log_sum).collect()
}
