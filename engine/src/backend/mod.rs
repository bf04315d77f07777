//! The small interface the one forward pass (`model::forward`) is written against, and its two
//! implementations:
//! - [`HostBackend`]: our kernels on host `f32` slices, inside the model's compute pool — the
//!   CPU path;
//! - [`CandleBackend`]: candle tensors and kernels on the model's device — CUDA and Metal, and
//!   the CPU device in tests, so that the GPU path's model is one the test suite runs.
//!
//! The operations are those of llama.cpp's Gemma graphs (`src/models/gemma*.cpp`): RMSNorm,
//! matrix products over the file's quantized types, RoPE, attention over a KV layer (with an
//! optional window and soft-cap), the GELU gate, and element-wise add and scale. Each backend
//! fuses what it can inside an operation; the order of operations is the model's.

mod candle;
mod counting;
#[cfg(feature = "cuda")]
pub(crate) mod cuda_decode;
#[cfg(any(feature = "cuda", feature = "metal", feature = "metal-emulated"))]
pub(crate) mod decode_plan;
pub(crate) mod device_sampling;
#[cfg(any(feature = "cuda", feature = "metal", feature = "metal-emulated"))]
pub(crate) mod fused;
mod host;
pub(crate) mod kernel_args;
#[cfg(any(feature = "metal", feature = "metal-emulated"))]
pub(crate) mod metal_decode;
#[cfg(feature = "metal-emulated")]
pub(crate) mod metal_emulated;
pub(crate) mod profile;

use serde::{Deserialize, Serialize};

pub(crate) use self::candle::CandleBackend;
pub(crate) use counting::Counting;
pub(crate) use host::HostBackend;
pub use profile::{OpTime, ProfileSnapshot};

use crate::error::Result;
use crate::kv_cache::KvCache;
use crate::model::{Hidden, Linear, Norm, RopeTable};

/// Which implementation runs the forward pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// Our kernels on the CPU.
    Host,
    /// candle's tensors on the device (GPUs; the CPU device in tests).
    Candle,
}

impl BackendKind {
    /// The device RoPE tables must also live on (`None`: host tables only).
    pub(crate) fn device_tables(
        self,
        device: &candle_core::Device,
    ) -> Option<&candle_core::Device> {
        (self == BackendKind::Candle).then_some(device)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Host => "host",
            BackendKind::Candle => "candle",
        }
    }
}

/// The backend asked for: `Auto` is the host kernels on the CPU and candle on a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    #[default]
    Auto,
    Host,
    Candle,
}

impl BackendChoice {
    /// The backend for a device: the host kernels exist only on the CPU.
    pub fn resolve(self, device: &candle_core::Device) -> BackendKind {
        match self {
            BackendChoice::Candle => BackendKind::Candle,
            BackendChoice::Host | BackendChoice::Auto if device.is_cpu() => BackendKind::Host,
            _ => BackendKind::Candle,
        }
    }
}

impl std::str::FromStr for BackendChoice {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(BackendChoice::Auto),
            "host" => Ok(BackendChoice::Host),
            "candle" => Ok(BackendChoice::Candle),
            other => Err(format!(
                "unknown backend `{other}` (expected auto, host or candle)"
            )),
        }
    }
}

/// One layer's attention: its shape, where its KV lives and what it attends to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AttentionSpec {
    /// The cache layer (a storing layer) to write to or read from.
    pub cache_layer: usize,
    pub n_head: usize,
    pub n_kv_head: usize,
    pub head_dim: usize,
    pub sliding: bool,
    pub window: Option<usize>,
    pub softcap: Option<f32>,
    pub q_scale: f32,
    /// The cache holds the queries' own positions (`false`: only the positions before them,
    /// as for an assistant's query over its target's cache, which attends to the keys before
    /// the token it drafts from; `model::assistant`).
    pub own_position: bool,
    /// Each query sees only the positions up to its own (`false`: the step's rows also see
    /// one another's, as an image's rows do, `Model::forward_image`).
    pub causal: bool,
}

/// Activations are `[rows, width]` matrices; every operation knows the row width it needs.
pub(crate) trait Backend {
    type Act;

    /// Rows `tokens` of an embedding matrix, times `scale`.
    fn embed(&self, table: &Linear, tokens: &[u32], scale: f32) -> Result<Self::Act>;
    /// `rmsnorm(x) · w` over rows of `w.len()`.
    fn rms_norm(&self, x: &Self::Act, w: &Norm, eps: f32) -> Result<Self::Act>;
    /// The same in place over rows of `width`, without a weight when `w` is `None`.
    fn rms_norm_in_place(
        &self,
        x: &mut Self::Act,
        w: Option<&Norm>,
        width: usize,
        eps: f32,
    ) -> Result<()>;
    /// `x · Wᵀ`.
    fn matmul(&self, w: &Linear, x: &Self::Act) -> Result<Self::Act>;
    /// Several matrices times the same input (one activation quantization where possible).
    fn matmul_many(&self, ws: &[&Linear], x: &Self::Act) -> Result<Vec<Self::Act>>;
    /// RoPE in place on `[rows, heads × head_dim]`, row `i` at position `start + i`.
    fn rope(&self, x: &mut Self::Act, table: &RopeTable, heads: usize, start: usize) -> Result<()>;
    /// Write `kv` (when the layer has its own) at positions `start..start + seq` of the cache
    /// layer, then attend: queries `q` `[seq, n_head × head_dim]` (not yet scaled) →
    /// `[seq, n_head × head_dim]`.
    fn attention(
        &self,
        q: Self::Act,
        kv: Option<(Self::Act, Self::Act)>,
        cache: &mut KvCache,
        spec: &AttentionSpec,
        start: usize,
        seq: usize,
    ) -> Result<Self::Act>;
    /// `gelu(gate) · up` (the tanh GELU through ggml's f16 table).
    fn geglu(&self, gate: Self::Act, up: &Self::Act) -> Result<Self::Act>;
    /// `x += y`.
    fn add(&self, x: &mut Self::Act, y: Self::Act) -> Result<()>;
    /// `x *= s`.
    fn scale(&self, x: &mut Self::Act, s: f32) -> Result<()>;
    /// A copy of `x`.
    fn duplicate(&self, x: &Self::Act) -> Result<Self::Act>;
    /// `[rows, parts × width]` → `parts` activations of `[rows, width]`.
    fn split_columns(&self, x: Self::Act, width: usize, parts: usize) -> Result<Vec<Self::Act>>;
    /// `[rows, a_width]` and `[rows, b_width]` → `[rows, a_width + b_width]`, each row `a`'s
    /// then `b`'s.
    fn concat_columns(
        &self,
        a: Self::Act,
        a_width: usize,
        b: Self::Act,
        b_width: usize,
    ) -> Result<Self::Act>;
    /// Hidden states as activations (an assistant's input, `model::assistant`).
    fn act_of(&self, hidden: &Hidden) -> Result<Self::Act>;
    /// The last of `rows` rows of `width`.
    fn last_row(&self, x: Self::Act, width: usize) -> Result<Self::Act>;
    /// Rows of several steps, in order.
    fn concat_rows(&self, parts: Vec<Self::Act>) -> Result<Self::Act>;
    /// Give a buffer back (the host backend reuses large ones).
    fn release(&self, x: Self::Act);
    /// The final activations `[rows, width]` as the hidden states the logits are read from.
    fn hidden_of(&self, x: Self::Act, width: usize) -> Result<Hidden>;
    /// Logits `[rows][n_vocab]` of hidden states, soft-capped when the model says so.
    fn logits(&self, hidden: &Hidden) -> Result<Vec<Vec<f32>>>;

    // The vision encoder's operations (`crate::vision`, llama.cpp's `tools/mtmd/clip.cpp`).

    /// Host rows `[rows, width]` as an activation.
    fn input(&self, rows: Vec<f32>, width: usize) -> Result<Self::Act>;
    /// `(x − mean) / √(var + eps) · w + b` over rows of `w.len()` (ggml_norm, then ggml_mul
    /// and ggml_add).
    fn layer_norm(&self, x: &Self::Act, w: &Norm, b: &Norm, eps: f32) -> Result<Self::Act>;
    /// `x += b` on every row.
    fn add_bias(&self, x: &mut Self::Act, b: &Norm) -> Result<()>;
    /// `gelu(x)` in place: the tanh form, through ggml's f16 table on the host.
    fn gelu(&self, x: &mut Self::Act) -> Result<()>;
    /// The rows attending to one another, every row seeing every row (a vision encoder's
    /// patches): `q`, `k`, `v` `[rows, heads × head_dim]` → `[rows, heads × head_dim]`; K and
    /// V are rounded to f16 (ggml's flash attention casts them), scores are × `scale`.
    fn attention_within(
        &self,
        q: Self::Act,
        k: Self::Act,
        v: Self::Act,
        heads: usize,
        head_dim: usize,
        scale: f32,
    ) -> Result<Self::Act>;
}
