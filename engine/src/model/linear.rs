//! A weight matrix and how it is multiplied: our block kernels (`q8_matmul`) for Q5_0 and
//! Q8_0 on CPUs with AVX2, candle's `QMatMul` for every other format and device.

use candle_core::quantized::{GgmlDType, QMatMul};
use candle_core::{Device, Module, Tensor};

use super::q8_matmul::{BlockFormat, BlockMatrix};
use crate::error::Result;
use crate::gguf::ModelFile;

#[derive(Debug)]
pub(crate) enum Linear {
    Blocks(BlockMatrix),
    Candle(QMatMul),
    /// Q6_K on x86: candle 0.11.1's single-row Q6_K path (`vec_dot_q6k_q8k`) disagrees with
    /// its own multi-row (repacked) path by up to ~0.6 in a logit on the default model — enough
    /// to flip a greedy step whose llama.cpp margin is 0.7 — while the multi-row path agrees
    /// with llama.cpp. One-row inputs are therefore sent as two identical rows.
    CandleRowPair(QMatMul),
}

impl Linear {
    /// Load tensor `name` of shape `[n, k]`.
    pub fn load(file: &mut ModelFile, name: &str, n: usize, k: usize, device: &Device) -> Result<Self> {
        let format = match file.tensor_dtype(name) {
            Some(GgmlDType::Q5_0) => Some(BlockFormat::Q5_0),
            Some(GgmlDType::Q8_0) => Some(BlockFormat::Q8_0),
            _ => None,
        };
        if let Some(format) = format.filter(|_| device.is_cpu() && simd_available()) {
            let (_, bytes) = file.tensor_bytes(name, &[n, k])?;
            if let Some(m) = BlockMatrix::new(format, bytes, n, k) {
                return Ok(Linear::Blocks(m));
            }
        }
        let dtype = file.tensor_dtype(name);
        let t = file.tensor(name, &[n, k], device)?;
        let q = QMatMul::from_qtensor(t)?;
        if dtype == Some(GgmlDType::Q6K) && device.is_cpu() && cfg!(target_arch = "x86_64") {
            return Ok(Linear::CandleRowPair(q));
        }
        Ok(Linear::Candle(q))
    }

    /// `x` `[.., k]` → `[.., n]`.
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Linear::Candle(q) => q.forward(x),
            Linear::CandleRowPair(q) => {
                let mut dims = x.dims().to_vec();
                let k = dims.pop().unwrap_or(0);
                let m: usize = dims.iter().product();
                if m != 1 {
                    return q.forward(x);
                }
                let row = x.reshape((1, k))?;
                let out = q.forward(&Tensor::cat(&[&row, &row], 0)?)?.narrow(0, 0, 1)?;
                dims.push(out.dim(1)?);
                out.reshape(dims)
            }
            Linear::Blocks(w) => {
                let mut dims = x.dims().to_vec();
                let k = dims.pop().unwrap_or(0);
                if k != w.cols() {
                    candle_core::bail!("matmul: input width {k} does not match the weight's {}", w.cols());
                }
                let m: usize = dims.iter().product();
                let xs = x.flatten_all()?.to_vec1::<f32>()?;
                let out = w.matmul(&xs, m);
                dims.push(w.rows());
                Tensor::from_vec(out, dims, x.device())
            }
        }
    }

    /// `x` `[m, k]` as a host slice → `[m, n]`: the CPU forward pass. Formats without a kernel
    /// of ours go through candle on a CPU tensor.
    pub fn matmul_host(&self, x: &[f32], m: usize) -> candle_core::Result<Vec<f32>> {
        match self {
            Linear::Blocks(w) => Ok(w.matmul(x, m)),
            Linear::Candle(_) | Linear::CandleRowPair(_) => {
                let k = x.len() / m.max(1);
                let t = Tensor::from_slice(x, (m, k), &Device::Cpu)?;
                self.forward(&t)?.flatten_all()?.to_vec1::<f32>()
            }
        }
    }

    /// Rows `ids` as a host vector `[ids.len() * k]`.
    pub fn rows_host(&self, ids: &[u32]) -> candle_core::Result<Vec<f32>> {
        match self {
            Linear::Blocks(w) => {
                let k = w.cols();
                let mut out = vec![0f32; ids.len() * k];
                for (&id, dst) in ids.iter().zip(out.chunks_exact_mut(k)) {
                    w.dequantize_row(id as usize, dst);
                }
                Ok(out)
            }
            _ => self.rows(ids, &Device::Cpu)?.flatten_all()?.to_vec1::<f32>(),
        }
    }

    /// Rows `ids` of the matrix as f32 `[ids.len(), k]`: the token embedding lookup, which
    /// never dequantizes the whole table.
    pub fn rows(&self, ids: &[u32], device: &Device) -> candle_core::Result<Tensor> {
        match self {
            Linear::Candle(q) | Linear::CandleRowPair(q) => q.embedding(&Tensor::new(ids, device)?),
            Linear::Blocks(w) => Tensor::from_vec(self.rows_host(ids)?, (ids.len(), w.cols()), device),
        }
    }
}

fn simd_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}
