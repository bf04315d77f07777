//! The host backend: activations are plain `Vec<f32>` rows, matrix products are our block
//! kernels (rayon, inside the model's compute pool), attention reads the f16 KV cache in place
//! (`cpu::attention`), and large buffers come from and go back to the scratch pool.
//! It computes what the forward pass did before there was a backend interface, bit for bit.

use super::{AttentionSpec, Backend};
use crate::cpu::RowSums;
use crate::cpu::attention::{Inputs as AttentionInputs, SlotPositions, Visibility, attention};
use crate::cpu::ops::{geglu, gelu_in_place, layer_norm_into, rms_norm_into, rms_norm_rows};
use crate::cpu::scratch::{overwritten as scratch_overwritten, release as release_scratch};
use crate::error::{Error, Result};
use crate::kv_cache::KvCache;
use crate::model::{Hidden, Linear, Model, Norm, RopeTable};

pub(crate) struct HostBackend<'a> {
    model: &'a Model,
    /// How the products and the attention of several rows sum each row.
    sums: RowSums,
}

impl<'a> HostBackend<'a> {
    pub fn new(model: &'a Model, sums: RowSums) -> Self {
        HostBackend { model, sums }
    }
}

fn rows_of(x: &[f32], width: usize) -> usize {
    x.len() / width.max(1)
}

impl Backend for HostBackend<'_> {
    type Act = Vec<f32>;

    fn embed(&self, table: &Linear, tokens: &[u32], scale: f32) -> Result<Vec<f32>> {
        let mut x = table.rows_host(tokens)?;
        for v in x.iter_mut() {
            *v *= scale;
        }
        Ok(x)
    }

    fn rms_norm(&self, x: &Vec<f32>, w: &Norm, eps: f32) -> Result<Vec<f32>> {
        let mut out = scratch_overwritten(x.len());
        rms_norm_into(x, &w.host, eps, &mut out);
        Ok(out)
    }

    fn rms_norm_in_place(
        &self,
        x: &mut Vec<f32>,
        w: Option<&Norm>,
        width: usize,
        eps: f32,
    ) -> Result<()> {
        rms_norm_rows(x, w.map(|n| n.host.as_slice()), width, eps);
        Ok(())
    }

    fn matmul(&self, w: &Linear, x: &Vec<f32>) -> Result<Vec<f32>> {
        let (_, k) = w.shape();
        Ok(w.matmul_host_as(x, rows_of(x, k), self.sums)?)
    }

    fn matmul_many(&self, ws: &[&Linear], x: &Vec<f32>) -> Result<Vec<Vec<f32>>> {
        let k = ws.first().map_or(1, |w| w.shape().1);
        Ok(Linear::matmul_host_many(ws, x, rows_of(x, k), self.sums)?)
    }

    fn rope(&self, x: &mut Vec<f32>, table: &RopeTable, heads: usize, start: usize) -> Result<()> {
        table.apply_host(x, heads, start);
        Ok(())
    }

    fn attention(
        &self,
        q: Vec<f32>,
        kv: Option<(Vec<f32>, Vec<f32>)>,
        cache: &mut KvCache,
        spec: &AttentionSpec,
        start: usize,
        seq: usize,
    ) -> Result<Vec<f32>> {
        let (n_head, d) = (spec.n_head, spec.head_dim);
        // attention wants Q as [n_head, seq, d], scaled
        let mut qt = scratch_overwritten(q.len());
        for i in 0..seq {
            for hd in 0..n_head {
                let src = &q[(i * n_head + hd) * d..][..d];
                let dst = &mut qt[(hd * seq + i) * d..][..d];
                for (o, &s) in dst.iter_mut().zip(src) {
                    *o = s * spec.q_scale;
                }
            }
        }
        release_scratch(q);
        if let Some((k, v)) = kv {
            cache.write_host(spec.cache_layer, start, &k, &v)?;
            release_scratch(k);
            release_scratch(v);
        }
        // the keys the queries see end at the last one's position, or just before the first
        // (an assistant's query over its target's cache: one row, see `AttentionSpec`)
        let end = start + seq - usize::from(!spec.own_position);
        if !spec.own_position && (seq != 1 || start == 0) {
            return Err(Error::InvalidArgument(
                "a query over earlier positions only is one row after the first".into(),
            ));
        }
        let view = cache.host_view(spec.cache_layer, end)?;
        let vis = Visibility {
            slot_pos: if spec.sliding {
                SlotPositions::Ring(view.ring_positions)
            } else {
                SlotPositions::Identity
            },
            window: spec.window.filter(|_| spec.sliding),
            causal: spec.causal,
        };
        let cells = |filled: usize| {
            // llama.cpp's caches hold a multiple of 256 cells (`GGML_PAD(n_ctx, 256)`, and the
            // sliding-window cache's size likewise: llama-context.cpp, llama-kv-cache-iswa.cpp)
            crate::cpu::ggml_attention::n_kv(view.capacity.next_multiple_of(256), filled)
        };
        let all = AttentionInputs {
            q: &qt,
            k: view.k,
            v: view.v,
            slots: view.slots,
            used: view.used,
            n_head,
            n_kv: spec.n_kv_head,
            d,
            start,
            seq,
            vis: &vis,
            softcap: spec.softcap,
            kq_scale: 1.0,
            cells: cells(end),
        };
        let out = match self.sums {
            RowSums::AsOneRow if seq > 1 => {
                // each query as the decode step at its position runs it: alone, over the cells
                // that step would see (the keys after it are in the cache but not visible)
                let mut out = scratch_overwritten(seq * n_head * d);
                let mut one = vec![0f32; n_head * d];
                for i in 0..seq {
                    for h in 0..n_head {
                        one[h * d..][..d].copy_from_slice(&qt[(h * seq + i) * d..][..d]);
                    }
                    let row = attention(&AttentionInputs {
                        q: &one,
                        start: start + i,
                        seq: 1,
                        cells: cells(start + i + 1),
                        ..all
                    });
                    out[i * n_head * d..][..n_head * d].copy_from_slice(&row);
                    release_scratch(row);
                }
                out
            }
            _ => attention(&all),
        };
        release_scratch(qt);
        Ok(out)
    }

    fn geglu(&self, mut gate: Vec<f32>, up: &Vec<f32>) -> Result<Vec<f32>> {
        if gate.len() != up.len() {
            return Err(Error::InvalidArgument(format!(
                "gate of {} values against {}",
                gate.len(),
                up.len()
            )));
        }
        geglu(&mut gate, up);
        Ok(gate)
    }

    fn add(&self, x: &mut Vec<f32>, y: Vec<f32>) -> Result<()> {
        for (xv, yv) in x.iter_mut().zip(&y) {
            *xv += yv;
        }
        release_scratch(y);
        Ok(())
    }

    fn scale(&self, x: &mut Vec<f32>, s: f32) -> Result<()> {
        x.iter_mut().for_each(|v| *v *= s);
        Ok(())
    }

    fn duplicate(&self, x: &Vec<f32>) -> Result<Vec<f32>> {
        let mut out = scratch_overwritten(x.len());
        out.copy_from_slice(x);
        Ok(out)
    }

    fn concat_columns(
        &self,
        a: Vec<f32>,
        a_width: usize,
        b: Vec<f32>,
        b_width: usize,
    ) -> Result<Vec<f32>> {
        let rows = rows_of(&a, a_width);
        if rows * a_width != a.len() || rows * b_width != b.len() {
            return Err(Error::InvalidArgument(format!(
                "columns of {} and {} values as rows of {a_width} and {b_width}",
                a.len(),
                b.len()
            )));
        }
        let mut out = scratch_overwritten(rows * (a_width + b_width));
        for r in 0..rows {
            let row = &mut out[r * (a_width + b_width)..][..a_width + b_width];
            row[..a_width].copy_from_slice(&a[r * a_width..][..a_width]);
            row[a_width..].copy_from_slice(&b[r * b_width..][..b_width]);
        }
        release_scratch(a);
        release_scratch(b);
        Ok(out)
    }

    fn act_of(&self, hidden: &Hidden) -> Result<Vec<f32>> {
        hidden.to_vec()
    }

    fn split_columns(&self, x: Vec<f32>, width: usize, parts: usize) -> Result<Vec<Vec<f32>>> {
        let rows = rows_of(&x, width * parts);
        let out = (0..parts)
            .map(|p| {
                let mut part = Vec::with_capacity(rows * width);
                for r in 0..rows {
                    part.extend_from_slice(&x[(r * parts + p) * width..][..width]);
                }
                part
            })
            .collect();
        release_scratch(x);
        Ok(out)
    }

    fn last_row(&self, x: Vec<f32>, width: usize) -> Result<Vec<f32>> {
        let rows = rows_of(&x, width);
        Ok(x[(rows.max(1) - 1) * width..].to_vec())
    }

    fn concat_rows(&self, mut parts: Vec<Vec<f32>>) -> Result<Vec<f32>> {
        if parts.len() == 1 {
            return Ok(parts.pop().unwrap_or_default());
        }
        Ok(parts.concat())
    }

    fn release(&self, x: Vec<f32>) {
        release_scratch(x);
    }

    fn hidden_of(&self, x: Vec<f32>, width: usize) -> Result<Hidden> {
        Ok(Hidden::host(x, width))
    }

    fn logits(&self, hidden: &Hidden) -> Result<Vec<Vec<f32>>> {
        let h = hidden.to_vec()?;
        let rows = hidden.rows();
        let weights = self.model.weights();
        let mut logits = weights.output().matmul_host_as(&h, rows, self.sums)?;
        let n_vocab = self.model.arch().n_vocab;
        let cap = self.model.arch().final_softcap;
        // rows taken off the end, the buffer shrunk behind each: a 262k vocabulary's rows are a
        // megabyte each, and a speculative check's several would otherwise be held twice
        let mut out = Vec::with_capacity(rows);
        for r in (0..rows).rev() {
            let mut row = logits.split_off(r * n_vocab);
            logits.shrink_to_fit();
            if let Some(cap) = cap {
                soft_cap(&mut row, cap);
            }
            out.push(row);
        }
        out.reverse();
        Ok(out)
    }

    fn input(&self, rows: Vec<f32>, _width: usize) -> Result<Vec<f32>> {
        Ok(rows)
    }

    fn layer_norm(&self, x: &Vec<f32>, w: &Norm, b: &Norm, eps: f32) -> Result<Vec<f32>> {
        if w.len() == 0 || w.len() != b.len() || !x.len().is_multiple_of(w.len()) {
            return Err(Error::InvalidArgument(format!(
                "a layer norm of {} and {} values over {} values",
                w.len(),
                b.len(),
                x.len()
            )));
        }
        let mut out = scratch_overwritten(x.len());
        layer_norm_into(x, &w.host, &b.host, eps, &mut out);
        Ok(out)
    }

    fn add_bias(&self, x: &mut Vec<f32>, b: &Norm) -> Result<()> {
        use rayon::prelude::*;
        x.par_chunks_mut(b.len().max(1)).for_each(|row| {
            for (v, &bv) in row.iter_mut().zip(&b.host) {
                *v += bv;
            }
        });
        Ok(())
    }

    fn gelu(&self, x: &mut Vec<f32>) -> Result<()> {
        gelu_in_place(x);
        Ok(())
    }

    fn attention_within(
        &self,
        q: Vec<f32>,
        k: Vec<f32>,
        v: Vec<f32>,
        heads: usize,
        head_dim: usize,
        scale: f32,
    ) -> Result<Vec<f32>> {
        let d = head_dim;
        let width = heads * d;
        let rows = rows_of(&q, width);
        if rows * width != q.len() || k.len() != q.len() || v.len() != q.len() {
            return Err(Error::InvalidArgument(format!(
                "attention over {}, {} and {} values as rows of {heads} heads of {d}",
                q.len(),
                k.len(),
                v.len()
            )));
        }
        // [rows, heads, d] → [heads, rows, d]; K and V as f16, as ggml's flash attention
        // casts them (`clip.cpp`, `build_attn`)
        use half::slice::HalfFloatSliceExt;
        use rayon::prelude::*;
        let mut qt = scratch_overwritten(q.len());
        let mut kt = vec![half::f16::ZERO; k.len()];
        let mut vt = vec![half::f16::ZERO; v.len()];
        qt.par_chunks_mut(rows * d)
            .zip(kt.par_chunks_mut(rows * d))
            .zip(vt.par_chunks_mut(rows * d))
            .enumerate()
            .for_each(|(h, ((qh, kh), vh))| {
                for r in 0..rows {
                    let src = (r * heads + h) * d;
                    qh[r * d..][..d].copy_from_slice(&q[src..src + d]);
                    kh[r * d..][..d].convert_from_f32_slice(&k[src..src + d]);
                    vh[r * d..][..d].convert_from_f32_slice(&v[src..src + d]);
                }
            });
        release_scratch(q);
        let vis = Visibility {
            slot_pos: SlotPositions::Identity,
            window: None,
            causal: false,
        };
        let out = attention(&AttentionInputs {
            q: &qt,
            k: &kt,
            v: &vt,
            slots: rows,
            used: rows,
            n_head: heads,
            n_kv: heads,
            d,
            start: 0,
            seq: rows,
            vis: &vis,
            softcap: None,
            kq_scale: scale,
            cells: rows,
        });
        release_scratch(qt);
        Ok(out)
    }
}

/// llama.cpp's final soft-cap: `scale(1/cap)`, `tanh`, `scale(cap)`.
pub(crate) fn soft_cap(row: &mut [f32], cap: f32) {
    let inv = 1.0 / cap;
    for v in row.iter_mut() {
        *v = (*v * inv).tanh() * cap;
    }
}
