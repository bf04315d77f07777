//! A weight matrix and how it is multiplied. On the CPU: our kernels — `q8_matmul` for Q5_0
//! and Q8_0, `kquant_matmul` for Q4_K and Q6_K (each with an AVX2 path and a portable one);
//! candle's `QMatMul` for other formats and for GPU devices.

use candle_core::quantized::{GgmlDType, QMatMul};
use candle_core::{Device, Module, Tensor};

use super::kquant_matmul::{KFormat, KMatrix};
use super::q8_matmul::{BlockFormat, BlockMatrix};
use crate::error::Result;
use crate::gguf::ModelFile;

#[derive(Debug)]
pub(crate) enum Linear {
    Blocks(BlockMatrix),
    KQuant(KMatrix),
    Candle(QMatMul),
}

impl Linear {
    /// Load tensor `name` of shape `[n, k]`.
    pub fn load(
        file: &mut ModelFile,
        name: &str,
        n: usize,
        k: usize,
        device: &Device,
    ) -> Result<Self> {
        if device.is_cpu() {
            let dtype = file.tensor_dtype(name);
            let block = match dtype {
                Some(GgmlDType::Q5_0) => Some(BlockFormat::Q5_0),
                Some(GgmlDType::Q8_0) => Some(BlockFormat::Q8_0),
                _ => None,
            };
            let kquant = match dtype {
                Some(GgmlDType::Q4K) => Some(KFormat::Q4K),
                Some(GgmlDType::Q6K) => Some(KFormat::Q6K),
                _ => None,
            };
            if let Some(format) = block {
                let (_, bytes) = file.tensor_bytes(name, &[n, k])?;
                if let Some(m) = BlockMatrix::new(format, bytes, n, k) {
                    return Ok(Linear::Blocks(m));
                }
            } else if let Some(format) = kquant {
                let (_, bytes) = file.tensor_bytes(name, &[n, k])?;
                if let Some(m) = KMatrix::new(format, bytes, n, k) {
                    return Ok(Linear::KQuant(m));
                }
            }
        }
        let t = file.tensor(name, &[n, k], device)?;
        Ok(Linear::Candle(QMatMul::from_qtensor(t)?))
    }

    /// `x` `[.., k]` → `[.., n]`.
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Linear::Candle(q) => q.forward(x),
            Linear::Blocks(_) | Linear::KQuant(_) => {
                let mut dims = x.dims().to_vec();
                let k = dims.pop().unwrap_or(0);
                let (rows, cols) = self.shape();
                if k != cols {
                    candle_core::bail!(
                        "matmul: input width {k} does not match the weight's {cols}"
                    );
                }
                let m: usize = dims.iter().product();
                let xs = x.flatten_all()?.to_vec1::<f32>()?;
                let out = self.matmul_host(&xs, m)?;
                dims.push(rows);
                Tensor::from_vec(out, dims, x.device())
            }
        }
    }

    /// `(n, k)` for our own kernels' matrices.
    fn shape(&self) -> (usize, usize) {
        match self {
            Linear::Blocks(w) => (w.rows(), w.cols()),
            Linear::KQuant(w) => (w.rows(), w.cols()),
            Linear::Candle(_) => (0, 0),
        }
    }

    /// `x` `[m, k]` as a host slice → `[m, n]`: the CPU forward pass. Formats without a kernel
    /// of ours go through candle on a CPU tensor.
    pub fn matmul_host(&self, x: &[f32], m: usize) -> candle_core::Result<Vec<f32>> {
        match self {
            Linear::Blocks(w) => Ok(w.matmul(x, m)),
            Linear::KQuant(w) => Ok(w.matmul(x, m)),
            Linear::Candle(_) => {
                let k = x.len() / m.max(1);
                let t = Tensor::from_slice(x, (m, k), &Device::Cpu)?;
                self.forward(&t)?.flatten_all()?.to_vec1::<f32>()
            }
        }
    }

    /// Several matrices times the same host input (`[m, k]` each): one quantization and one
    /// parallel loop when all are Q5_0/Q8_0 matrices of ours, else one call each.
    pub fn matmul_host_many(
        mats: &[&Linear],
        x: &[f32],
        m: usize,
    ) -> candle_core::Result<Vec<Vec<f32>>> {
        let blocks: Option<Vec<&BlockMatrix>> = mats
            .iter()
            .map(|l| match l {
                Linear::Blocks(w) => Some(w),
                _ => None,
            })
            .collect();
        match blocks {
            Some(b) if b.windows(2).all(|p| p[0].cols() == p[1].cols()) => {
                Ok(BlockMatrix::matmul_many(&b, x, m))
            }
            _ => mats.iter().map(|l| l.matmul_host(x, m)).collect(),
        }
    }

    /// Rows `ids` as a host vector `[ids.len() * k]`.
    pub fn rows_host(&self, ids: &[u32]) -> candle_core::Result<Vec<f32>> {
        match self {
            Linear::Blocks(w) => Ok(gather_rows(ids, w.cols(), |r, dst| {
                w.dequantize_row(r, dst)
            })),
            Linear::KQuant(w) => Ok(gather_rows(ids, w.cols(), |r, dst| {
                w.dequantize_row(r, dst)
            })),
            Linear::Candle(_) => self
                .rows(ids, &Device::Cpu)?
                .flatten_all()?
                .to_vec1::<f32>(),
        }
    }

    /// Rows `ids` of the matrix as f32 `[ids.len(), k]`: the token embedding lookup, which
    /// never dequantizes the whole table.
    pub fn rows(&self, ids: &[u32], device: &Device) -> candle_core::Result<Tensor> {
        match self {
            Linear::Candle(q) => q.embedding(&Tensor::new(ids, device)?),
            Linear::Blocks(_) | Linear::KQuant(_) => {
                let (_, k) = self.shape();
                Tensor::from_vec(self.rows_host(ids)?, (ids.len(), k), device)
            }
        }
    }
}

/// Rows `ids` of a `k`-wide matrix, each dequantized by `row(id, dst)`.
fn gather_rows(ids: &[u32], k: usize, row: impl Fn(usize, &mut [f32])) -> Vec<f32> {
    let mut out = vec![0f32; ids.len() * k];
    for (&id, dst) in ids.iter().zip(out.chunks_exact_mut(k)) {
        row(id as usize, dst);
    }
    out
}
