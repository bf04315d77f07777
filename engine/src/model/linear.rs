//! A weight matrix and how it is multiplied. For the host backend: our kernels ([`crate::cpu`])
//! — `blocks` for Q5_0 and Q8_0, `kquants` for Q4_K and Q6_K, `f16` for F16 — and candle's CPU
//! `QMatMul` for other formats. For the candle backend: candle's `QMatMul` on the model's
//! device, whatever the format.

use candle_core::quantized::{GgmlDType, QMatMul};
use candle_core::{Device, Module, Tensor};

use crate::backend::BackendKind;
use crate::cpu::RowSums;
use crate::cpu::blocks::BlockMatrix;
use crate::cpu::f16::F16Matrix;
use crate::cpu::formats::{BlockFormat, KFormat};
use crate::cpu::kquants::KMatrix;
use crate::error::Result;
use crate::gguf::ModelFile;

#[derive(Debug)]
pub(crate) enum Linear {
    Blocks(BlockMatrix),
    KQuant(KMatrix),
    F16(F16Matrix),
    Candle {
        matmul: QMatMul,
        n: usize,
        k: usize,
        /// Its bytes in the model file, `(start, len)` (the fused Metal decode reads them there).
        #[cfg_attr(
            not(any(feature = "metal", feature = "metal-emulated")),
            allow(dead_code)
        )]
        file_range: Option<(usize, usize)>,
    },
}

impl Linear {
    /// Load tensor `name` of shape `[n, k]` for `backend`. `multiplied`: whether the forward
    /// pass multiplies it (then the host backend reads it into the huge-page copy where there
    /// is one, see `gguf::resident`), or only gathers rows of it (it stays mapped, paged in
    /// row by row).
    pub fn load(
        file: &mut ModelFile,
        name: &str,
        (n, k): (usize, usize),
        multiplied: bool,
        device: &Device,
        backend: BackendKind,
    ) -> Result<Self> {
        if backend == BackendKind::Host {
            let dtype = file.tensor_dtype(name);
            let mapped = |file: &mut ModelFile| {
                if multiplied {
                    file.multiplied_tensor_bytes(name, &[n, k]).map(|(_, b)| b)
                } else {
                    file.tensor_bytes(name, &[n, k]).map(|(_, b)| b)
                }
            };
            match dtype {
                Some(GgmlDType::Q5_0) | Some(GgmlDType::Q8_0) => {
                    let format = if dtype == Some(GgmlDType::Q5_0) {
                        BlockFormat::Q5_0
                    } else {
                        BlockFormat::Q8_0
                    };
                    if let Some(m) = BlockMatrix::new(format, mapped(file)?, n, k) {
                        return Ok(Linear::Blocks(m));
                    }
                }
                Some(GgmlDType::Q4K) | Some(GgmlDType::Q6K) => {
                    let format = if dtype == Some(GgmlDType::Q4K) {
                        KFormat::Q4K
                    } else {
                        KFormat::Q6K
                    };
                    if let Some(m) = KMatrix::new(format, mapped(file)?, n, k) {
                        return Ok(Linear::KQuant(m));
                    }
                }
                Some(GgmlDType::F16) => {
                    if let Some(m) = F16Matrix::new(mapped(file)?, n, k) {
                        return Ok(Linear::F16(m));
                    }
                }
                _ => {}
            }
        }
        // candle reads it onto the device (the CPU for formats our kernels lack)
        let on = if backend == BackendKind::Host {
            &Device::Cpu
        } else {
            device
        };
        let t = file.tensor(name, &[n, k], on)?;
        Ok(Linear::Candle {
            matmul: QMatMul::from_qtensor(t)?,
            n,
            k,
            file_range: file.tensor_range(name),
        })
    }

    /// A matrix the file stores transposed, `[k, n]` (Gemma 3's vision projection, which
    /// llama.cpp multiplies as `ggml_cont(ggml_transpose(w))`: the copy keeps the type, so an
    /// F16 file gives F16 rows here). Other types are multiplied in f32 through candle.
    pub fn load_transposed(
        file: &mut ModelFile,
        name: &str,
        (n, k): (usize, usize),
        device: &Device,
        backend: BackendKind,
    ) -> Result<Self> {
        let stored = file.tensor(name, &[k, n], &Device::Cpu)?;
        let f16 = stored.dtype() == GgmlDType::F16;
        let rows = stored
            .dequantize(&Device::Cpu)?
            .t()?
            .contiguous()?
            .to_dtype(candle_core::DType::F32)?;
        if f16 && backend == BackendKind::Host {
            let bytes: Vec<u8> = rows
                .flatten_all()?
                .to_vec1::<f32>()?
                .iter()
                .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
                .collect();
            if let Some(m) = F16Matrix::new(bytes, n, k) {
                return Ok(Linear::F16(m));
            }
        }
        let on = if backend == BackendKind::Host {
            &Device::Cpu
        } else {
            device
        };
        let dtype = if f16 { GgmlDType::F16 } else { GgmlDType::F32 };
        let q = candle_core::quantized::QTensor::quantize(&rows.to_device(on)?, dtype)?;
        Ok(Linear::Candle {
            matmul: QMatMul::from_qtensor(q)?,
            n,
            k,
            file_range: None,
        })
    }

    /// The format its kernels read, as ggml names it (for profiles).
    pub fn format_name(&self) -> &'static str {
        match self {
            Linear::Blocks(w) => w.format().name(),
            Linear::KQuant(w) => w.format().name(),
            Linear::F16(_) => "f16",
            Linear::Candle { .. } => "candle",
        }
    }

    /// `(n, k)`: output and input widths.
    pub fn shape(&self) -> (usize, usize) {
        match self {
            Linear::Blocks(w) => (w.rows(), w.cols()),
            Linear::KQuant(w) => (w.rows(), w.cols()),
            Linear::F16(w) => (w.rows(), w.cols()),
            Linear::Candle { n, k, .. } => (*n, *k),
        }
    }

    /// `x` `[.., k]` → `[.., n]` on tensors (the candle backend).
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Linear::Candle { matmul, .. } => matmul.forward(x),
            _ => {
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

    /// `x` `[m, k]` as a host slice → `[m, n]`: the host backend. Formats without a kernel
    /// of ours go through candle on a CPU tensor.
    pub fn matmul_host(&self, x: &[f32], m: usize) -> candle_core::Result<Vec<f32>> {
        self.matmul_host_as(x, m, RowSums::Batched)
    }

    /// [`Self::matmul_host`], each row summed as `sums` says (a format without a kernel of
    /// ours goes through candle a row at a time for [`RowSums::AsOneRow`]).
    pub fn matmul_host_as(
        &self,
        x: &[f32],
        m: usize,
        sums: RowSums,
    ) -> candle_core::Result<Vec<f32>> {
        let (_, k) = self.shape();
        if x.len() != m * k {
            candle_core::bail!("matmul: {} input values are not {m} rows of {k}", x.len());
        }
        match self {
            // every Q5_0/Q8_0 schedule gives each row its one-row result (`cpu::blocks`)
            Linear::Blocks(w) => Ok(w.matmul(x, m)),
            Linear::KQuant(w) => Ok(w.matmul_as(x, m, sums)),
            Linear::F16(w) => Ok(w.matmul_as(x, m, sums)),
            Linear::Candle { matmul, .. } => {
                let mut out = Vec::new();
                let rows = if sums == RowSums::AsOneRow {
                    1
                } else {
                    m.max(1)
                };
                for part in x.chunks(rows * k) {
                    let t = Tensor::from_slice(part, (part.len() / k, k), &Device::Cpu)?;
                    out.extend(matmul.forward(&t)?.flatten_all()?.to_vec1::<f32>()?);
                }
                Ok(out)
            }
        }
    }

    /// Several matrices times the same host input (`[m, k]` each): one quantization and one
    /// parallel loop when all are Q5_0/Q8_0 matrices of ours, else one call each.
    pub fn matmul_host_many(
        mats: &[&Linear],
        x: &[f32],
        m: usize,
        sums: RowSums,
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
            _ => mats.iter().map(|l| l.matmul_host_as(x, m, sums)).collect(),
        }
    }

    /// Rows `ids` as a host vector `[ids.len() * k]`, each dequantized on its own (the token
    /// embedding lookup never dequantizes the whole table).
    pub fn rows_host(&self, ids: &[u32]) -> candle_core::Result<Vec<f32>> {
        match self {
            Linear::Blocks(w) => Ok(gather_rows(ids, w.cols(), |r, dst| {
                w.dequantize_row(r, dst)
            })),
            Linear::KQuant(w) => Ok(gather_rows(ids, w.cols(), |r, dst| {
                w.dequantize_row(r, dst)
            })),
            Linear::F16(w) => Ok(gather_rows(ids, w.cols(), |r, dst| {
                w.dequantize_row(r, dst)
            })),
            Linear::Candle { .. } => self
                .rows(ids, &Device::Cpu)?
                .flatten_all()?
                .to_vec1::<f32>(),
        }
    }

    /// Rows `ids` of the matrix as f32 `[ids.len(), k]` on `device`.
    pub fn rows(&self, ids: &[u32], device: &Device) -> candle_core::Result<Tensor> {
        match self {
            Linear::Candle { matmul, .. } => matmul.embedding(&Tensor::new(ids, device)?),
            _ => {
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
