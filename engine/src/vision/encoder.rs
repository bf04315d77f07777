//! Gemma 3's vision encoder: a SigLIP vision tower and Gemma 3's projector, written once
//! against the backend interface (`crate::backend`), as llama.cpp b11434 builds its graph
//! (`tools/mtmd/clip.cpp`, `build_inp`, `build_vit`; `tools/mtmd/models/siglip.cpp`):
//!
//! ```text
//! x = conv2d(pixels, patch_embd, stride = patch) + patch bias + position embedding   [patches, D]
//! per layer:
//!   h = layernorm(x) · ln1 + b;  q, k, v = h·W + b
//!   x = x + (attention of every patch over every patch, scale 1/√head_dim)·Wo + bo
//!   h = layernorm(x) · ln2 + b;  x = x + gelu(h·Wup + b)·Wdown + b
//! x = layernorm(x) · post_ln + b
//! tokens = avgpool(x as a side × side grid, n_merge)  → rmsnorm · soft_emb_norm → · input_projection
//! ```
//!
//! The rounding follows llama.cpp's CPU build, so that the host backend agrees with it as far
//! as its kernels allow: the convolution is ggml's im2col into f16 times the kernel rounded to
//! f16 (an F16 × F16 product), F16 weights round their input to f16, attention is ggml's flash
//! attention over K and V cast to f16, GELU reads ggml's f16 table. The convolution and the
//! pooling run on the host for every backend (they are a small part of the work: one product
//! of the patches with the kernel, one pass of sums).

use candle_core::Device;
use half::f16;

use super::description::VisionDescription;
use crate::backend::{Backend, BackendKind};
use crate::cpu::RowSums;
use crate::cpu::f16::F16Matrix;
use crate::error::{Error, Result};
use crate::gguf::ModelFile;
use crate::model::{Linear, Model, Norm, OnBackend};

/// One vision layer's weights.
#[derive(Debug)]
struct VisionLayer {
    ln1: (Norm, Norm),
    q: (Linear, Norm),
    k: (Linear, Norm),
    v: (Linear, Norm),
    out: (Linear, Norm),
    ln2: (Norm, Norm),
    up: (Linear, Norm),
    down: (Linear, Norm),
}

#[derive(Debug)]
pub(super) struct VisionWeights {
    /// The convolution's kernel `[D, 3 · patch · patch]` in (channel, row, column) order,
    /// rounded to f16 as ggml's product rounds it.
    patch_kernel: Vec<f32>,
    patch_bias: Option<Vec<f32>>,
    /// `[patches, D]`.
    position: Option<Vec<f32>>,
    layers: Vec<VisionLayer>,
    post_ln: (Norm, Norm),
    soft_emb_norm: Norm,
    input_projection: Linear,
}

impl VisionWeights {
    pub(super) fn load(
        file: &mut ModelFile,
        d: &VisionDescription,
        device: &Device,
        backend: BackendKind,
    ) -> Result<Self> {
        let e = d.n_embd;
        let p = d.patch_size;
        let host = |file: &mut ModelFile, name: &str, shape: &[usize]| -> Result<Vec<f32>> {
            let values = file
                .tensor(name, shape, &Device::Cpu)?
                .dequantize(&Device::Cpu)?
                .to_dtype(candle_core::DType::F32)?
                .flatten_all()?
                .to_vec1::<f32>()?;
            if values.iter().any(|v| !v.is_finite()) {
                return Err(Error::InvalidModel {
                    path: file.path().to_path_buf(),
                    reason: format!("tensor `{name}` holds a value that is not finite"),
                });
            }
            Ok(values)
        };
        let optional = |file: &mut ModelFile, name: &str, shape: &[usize]| {
            if file.has_tensor(name) {
                host(file, name, shape).map(Some)
            } else {
                Ok(None)
            }
        };
        let norm = |file: &mut ModelFile, name: &str, len: usize| {
            Norm::load(file, name, len, device, backend)
        };
        let pair = |file: &mut ModelFile, stem: &str, len: usize| -> Result<(Norm, Norm)> {
            Ok((
                norm(file, &format!("{stem}.weight"), len)?,
                norm(file, &format!("{stem}.bias"), len)?,
            ))
        };
        let linear =
            |file: &mut ModelFile, stem: &str, n: usize, k: usize| -> Result<(Linear, Norm)> {
                Ok((
                    Linear::load(
                        file,
                        &format!("{stem}.weight"),
                        (n, k),
                        true,
                        device,
                        backend,
                    )?,
                    norm(file, &format!("{stem}.bias"), n)?,
                ))
            };
        let patch_kernel = host(file, "v.patch_embd.weight", &[e, 3, p, p])?
            .into_iter()
            .map(|v| f16::from_f32(v).to_f32())
            .collect();
        let patch_bias = optional(file, "v.patch_embd.bias", &[e])?;
        let position = optional(file, "v.position_embd.weight", &[d.n_patches(), e])?;
        let mut layers = Vec::with_capacity(d.n_layer);
        for il in 0..d.n_layer {
            let b = |part: &str| format!("v.blk.{il}.{part}");
            // legacy files hold FFN up and down swapped; clip.cpp tells them apart by shape
            let (up, down) = match file.tensor_dims(&b("ffn_down.weight")) {
                Some([n, _]) if *n == d.n_ff && d.n_ff != e => ("ffn_down", "ffn_up"),
                _ => ("ffn_up", "ffn_down"),
            };
            layers.push(VisionLayer {
                ln1: pair(file, &b("ln1"), e)?,
                q: linear(file, &b("attn_q"), e, e)?,
                k: linear(file, &b("attn_k"), e, e)?,
                v: linear(file, &b("attn_v"), e, e)?,
                out: linear(file, &b("attn_out"), e, e)?,
                ln2: pair(file, &b("ln2"), e)?,
                up: linear(file, &b(up), d.n_ff, e)?,
                down: linear(file, &b(down), e, d.n_ff)?,
            });
        }
        Ok(VisionWeights {
            patch_kernel,
            patch_bias,
            position,
            layers,
            post_ln: pair(file, "v.post_ln", e)?,
            soft_emb_norm: norm(file, "mm.soft_emb_norm.weight", e)?,
            input_projection: Linear::load_transposed(
                file,
                "mm.input_projection.weight",
                (d.out_width, e),
                device,
                backend,
            )?,
        })
    }
}

/// The patches of normalized planes `[3, size, size]` as ggml's im2col lays them out, in f16:
/// `[patches, 3 · patch · patch]`, patch `y · side + x`, each in (channel, row, column) order.
fn im2col_f16(planes: &[f32], size: usize, patch: usize) -> Vec<u8> {
    let side = size / patch;
    let k = 3 * patch * patch;
    let mut out = Vec::with_capacity(side * side * k * 2);
    for py in 0..side {
        for px in 0..side {
            for c in 0..3 {
                for ky in 0..patch {
                    let row = &planes[(c * size + py * patch + ky) * size + px * patch..][..patch];
                    for &v in row {
                        out.extend_from_slice(&f16::from_f32(v).to_le_bytes());
                    }
                }
            }
        }
    }
    out
}

/// The convolution as ggml computes it (`ggml_conv_2d`: im2col in f16, then `mul_mat` with the
/// im2col as the F16 matrix and the kernel's rows as its input, rounded to f16), plus the
/// patch bias, plus the position embedding: `[patches, D]`.
fn patch_embeddings(w: &VisionWeights, d: &VisionDescription, planes: &[f32]) -> Result<Vec<f32>> {
    let (e, n) = (d.n_embd, d.n_patches());
    let k = 3 * d.patch_size * d.patch_size;
    let patches = F16Matrix::new(im2col_f16(planes, d.image_size, d.patch_size), n, k)
        .ok_or_else(|| Error::InvalidArgument("the picture's patches do not fit".into()))?;
    // [D, patches]: row c is the kernel's channel c against every patch
    let by_channel = patches.matmul_as(&w.patch_kernel, e, RowSums::Batched);
    let mut x = vec![0f32; n * e];
    for (c, row) in by_channel.chunks_exact(n).enumerate() {
        for (p, &v) in row.iter().enumerate() {
            x[p * e + c] = v;
        }
    }
    for (p, row) in x.chunks_exact_mut(e).enumerate() {
        if let Some(bias) = &w.patch_bias {
            row.iter_mut().zip(bias).for_each(|(v, b)| *v += b);
        }
        if let Some(pos) = &w.position {
            row.iter_mut()
                .zip(&pos[p * e..][..e])
                .for_each(|(v, b)| *v += b);
        }
    }
    Ok(x)
}

/// Gemma 3's average pooling (`ggml_pool_2d`, AVG): the `[patches, D]` grid of `side × side`
/// patches in `n_merge × n_merge` pools, each channel summed in f32 row by row of the pool,
/// then divided by its size; tokens in row-major order of the pools.
fn pooled(x: &[f32], side: usize, n_merge: usize, e: usize) -> Vec<f32> {
    let out_side = side / n_merge;
    let mut out = vec![0f32; out_side * out_side * e];
    let count = (n_merge * n_merge) as f32;
    for py in 0..out_side {
        for px in 0..out_side {
            let dst = &mut out[(py * out_side + px) * e..][..e];
            for (c, o) in dst.iter_mut().enumerate() {
                let mut sum = 0f32;
                for ky in 0..n_merge {
                    for kx in 0..n_merge {
                        sum += x[((py * n_merge + ky) * side + px * n_merge + kx) * e + c];
                    }
                }
                *o = sum / count;
            }
        }
    }
    out
}

/// The encoder's pass over one picture's normalized planes: `[tokens, out_width]`.
pub(super) struct Encode<'a> {
    pub weights: &'a VisionWeights,
    pub description: &'a VisionDescription,
    pub planes: &'a [f32],
}

impl OnBackend for Encode<'_> {
    type Out = Result<Vec<f32>>;

    fn run<B: Backend>(self, _model: &Model, b: &B) -> Result<Vec<f32>> {
        let (w, d) = (self.weights, self.description);
        let (e, eps) = (d.n_embd, d.eps);
        let mut x = b.input(patch_embeddings(w, d, self.planes)?, e)?;
        let scale = 1.0 / (d.head_dim as f32).sqrt();
        for layer in &w.layers {
            let h = b.layer_norm(&x, &layer.ln1.0, &layer.ln1.1, eps)?;
            let mut qkv = b.matmul_many(&[&layer.q.0, &layer.k.0, &layer.v.0], &h)?;
            b.release(h);
            for (t, bias) in qkv.iter_mut().zip([&layer.q.1, &layer.k.1, &layer.v.1]) {
                b.add_bias(t, bias)?;
            }
            let mut qkv = qkv.into_iter();
            let (Some(q), Some(k), Some(v)) = (qkv.next(), qkv.next(), qkv.next()) else {
                return Err(Error::InvalidArgument(
                    "attention projections missing".into(),
                ));
            };
            let a = b.attention_within(q, k, v, d.n_head, d.head_dim, scale)?;
            let mut o = b.matmul(&layer.out.0, &a)?;
            b.release(a);
            b.add_bias(&mut o, &layer.out.1)?;
            b.add(&mut x, o)?;
            let h = b.layer_norm(&x, &layer.ln2.0, &layer.ln2.1, eps)?;
            let mut f = b.matmul(&layer.up.0, &h)?;
            b.release(h);
            b.add_bias(&mut f, &layer.up.1)?;
            b.gelu(&mut f)?;
            let mut g = b.matmul(&layer.down.0, &f)?;
            b.release(f);
            b.add_bias(&mut g, &layer.down.1)?;
            b.add(&mut x, g)?;
        }
        let x = b.layer_norm(&x, &w.post_ln.0, &w.post_ln.1, eps)?;
        let x = b.hidden_of(x, e)?.to_vec()?;
        let tokens = pooled(&x, d.patches_per_side(), d.n_merge, e);
        let t = b.input(tokens, e)?;
        let t_normed = b.rms_norm(&t, &w.soft_emb_norm, eps)?;
        b.release(t);
        let out = b.matmul(&w.input_projection, &t_normed)?;
        b.release(t_normed);
        b.hidden_of(out, d.out_width)?.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn im2col_orders_patches_row_major_and_values_by_channel_row_column() {
        // a 4 × 4 picture of 2 × 2 patches: value = c·100 + y·10 + x
        let planes: Vec<f32> = (0..3)
            .flat_map(|c| {
                (0..4).flat_map(move |y| (0..4).map(move |x| (c * 100 + y * 10 + x) as f32))
            })
            .collect();
        let bytes = im2col_f16(&planes, 4, 2);
        let vals: Vec<f32> = bytes
            .chunks_exact(2)
            .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect();
        // patch 1 is (y 0, x 1): channel 0 rows 0-1, columns 2-3, then channel 1 …
        assert_eq!(
            &vals[12..20],
            &[2.0, 3.0, 12.0, 13.0, 102.0, 103.0, 112.0, 113.0]
        );
    }

    #[test]
    fn pooling_averages_each_block_of_the_grid() {
        // a 4 × 4 grid of one channel, pooled 2 × 2
        let x: Vec<f32> = (0..16).map(|i| i as f32).collect();
        assert_eq!(pooled(&x, 4, 2, 1), vec![2.5, 4.5, 10.5, 12.5]);
    }
}
