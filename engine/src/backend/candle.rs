//! The candle backend: activations are `[rows, width]` f32 tensors on the model's device,
//! matrix products are candle's quantized matmuls, attention is tensor ops over the KV cache's
//! device tensors with an additive mask. It rounds where the host backend (and ggml) round:
//! K and V are stored as f16, and GELU reads f16 in and writes f16 out, like ggml's table.

use candle_core::{D, DType, Device, Tensor};

use super::{AttentionSpec, Backend};
use crate::error::Result;
use crate::kv_cache::KvCache;
use crate::model::{Hidden, Linear, Model, Norm, RopeTable};

pub(crate) struct CandleBackend<'a> {
    model: &'a Model,
    /// Attention masks of this forward pass by (sliding, window, start, seq, causal): every layer of
    /// a kind reads the same one (the cache claims a step's positions before its layers run,
    /// `KvCache::begin_step`), so it is built and uploaded once per pass, not once per layer —
    /// a 512-token prompt's mask is 1 MiB, and building it per layer cost more than the
    /// prefill's GPU work.
    masks: std::cell::RefCell<Vec<(MaskKey, Tensor)>>,
}

type MaskKey = (bool, Option<usize>, usize, usize, bool);

impl<'a> CandleBackend<'a> {
    pub fn new(model: &'a Model) -> Self {
        CandleBackend {
            model,
            masks: std::cell::RefCell::new(Vec::new()),
        }
    }

    /// The additive mask for queries `start..start+seq` over the cache's used slots.
    fn mask(
        &self,
        cache: &KvCache,
        sliding: bool,
        window: Option<usize>,
        start: usize,
        seq: usize,
        causal: bool,
    ) -> Result<Tensor> {
        let key = (sliding, window, start, seq, causal);
        if let Some((_, m)) = self.masks.borrow().iter().find(|(k, _)| *k == key) {
            return Ok(m.clone());
        }
        let m = cache.mask(sliding, window, start, seq, causal, self.device())?;
        self.masks.borrow_mut().push((key, m.clone()));
        Ok(m)
    }

    fn device(&self) -> &Device {
        self.model.device()
    }

    fn weight<'n>(&self, w: &'n Norm) -> Result<std::borrow::Cow<'n, Tensor>> {
        Ok(match &w.tensor {
            Some(t) => std::borrow::Cow::Borrowed(t),
            None => std::borrow::Cow::Owned(Tensor::from_slice(&w.host, w.len(), self.device())?),
        })
    }
}

/// `x` rounded through f16, as ggml's f16 KV cache and GELU table round.
fn round_f16(x: &Tensor) -> candle_core::Result<Tensor> {
    x.to_dtype(DType::F16)?.to_dtype(DType::F32)
}

impl Backend for CandleBackend<'_> {
    type Act = Tensor;

    fn embed(&self, table: &Linear, tokens: &[u32], scale: f32) -> Result<Tensor> {
        Ok((table.rows(tokens, self.device())? * scale as f64)?)
    }

    fn rms_norm(&self, x: &Tensor, w: &Norm, eps: f32) -> Result<Tensor> {
        Ok(candle_nn::ops::rms_norm(x, self.weight(w)?.as_ref(), eps)?)
    }

    fn rms_norm_in_place(
        &self,
        x: &mut Tensor,
        w: Option<&Norm>,
        width: usize,
        eps: f32,
    ) -> Result<()> {
        let dims = x.dims().to_vec();
        let rows = x.elem_count() / width;
        let flat = x.reshape((rows, width))?;
        let alpha = match w {
            Some(w) => self.weight(w)?.into_owned(),
            None => Tensor::ones(width, DType::F32, self.device())?,
        };
        *x = candle_nn::ops::rms_norm(&flat, &alpha, eps)?.reshape(dims)?;
        Ok(())
    }

    fn matmul(&self, w: &Linear, x: &Tensor) -> Result<Tensor> {
        Ok(w.forward(x)?)
    }

    fn matmul_many(&self, ws: &[&Linear], x: &Tensor) -> Result<Vec<Tensor>> {
        ws.iter().map(|w| Ok(w.forward(x)?)).collect()
    }

    fn rope(&self, x: &mut Tensor, table: &RopeTable, heads: usize, start: usize) -> Result<()> {
        let (rows, width) = x.dims2()?;
        let d = width / heads;
        // [rows, heads, d] → [1, heads, rows, d]
        let t = x.reshape((rows, heads, d))?.transpose(0, 1)?.unsqueeze(0)?;
        let t = table.apply(&t, start)?.squeeze(0)?.transpose(0, 1)?;
        *x = t.contiguous()?.reshape((rows, width))?;
        Ok(())
    }

    fn attention(
        &self,
        q: Tensor,
        kv: Option<(Tensor, Tensor)>,
        cache: &mut KvCache,
        spec: &AttentionSpec,
        start: usize,
        seq: usize,
    ) -> Result<Tensor> {
        let (n_head, n_kv, d) = (spec.n_head, spec.n_kv_head, spec.head_dim);
        if !spec.own_position {
            // an assistant's drafting runs where speculation does: on the host backend
            return Err(crate::error::Error::InvalidArgument(
                "the candle backend attends over the queries' own positions only".into(),
            ));
        }
        // [seq, heads·d] → [heads, seq, d]
        let q =
            (q.reshape((seq, n_head, d))?.transpose(0, 1)?.contiguous()? * spec.q_scale as f64)?;
        if let Some((k, v)) = kv {
            let k = k.reshape((seq, n_kv, d))?.transpose(0, 1)?.contiguous()?;
            let v = v.reshape((seq, n_kv, d))?.transpose(0, 1)?.contiguous()?;
            cache.write_device(spec.cache_layer, start, &k, &v)?;
        }
        let (keys, values) = cache.device_view(spec.cache_layer, start + seq)?;
        let mask = self.mask(
            cache,
            spec.sliding,
            spec.window.filter(|_| spec.sliding),
            start,
            seq,
            spec.causal,
        )?;
        let used = keys.dim(1)?;
        let group = n_head / n_kv;
        // query head h reads KV head h / group, as ggml's broadcast in `mul_mat` does
        let q = q.reshape((n_kv, group * seq, d))?;
        let mut scores = q.matmul(&keys.t()?)?;
        if let Some(cap) = spec.softcap {
            scores = ((scores * (1.0 / cap) as f64)?.tanh()? * cap as f64)?;
        }
        let scores = scores
            .reshape((n_kv, group, seq, used))?
            .broadcast_add(&mask)?;
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        let probs = probs.reshape((n_kv, group * seq, used))?;
        let out = probs.matmul(&values)?.reshape((n_head, seq, d))?;
        Ok(out
            .transpose(0, 1)?
            .contiguous()?
            .reshape((seq, n_head * d))?)
    }

    fn geglu(&self, gate: Tensor, up: &Tensor) -> Result<Tensor> {
        // ggml's table: f16 in, GELU in f32, f16 out
        let g = round_f16(&round_f16(&gate)?.gelu()?)?;
        Ok((g * up)?)
    }

    fn add(&self, x: &mut Tensor, y: Tensor) -> Result<()> {
        *x = (&*x + y)?;
        Ok(())
    }

    fn scale(&self, x: &mut Tensor, s: f32) -> Result<()> {
        *x = (&*x * s as f64)?;
        Ok(())
    }

    fn duplicate(&self, x: &Tensor) -> Result<Tensor> {
        // tensors are never changed in place here: sharing the storage is a copy
        Ok(x.clone())
    }

    fn concat_columns(&self, a: Tensor, _: usize, b: Tensor, _: usize) -> Result<Tensor> {
        Ok(Tensor::cat(&[a, b], D::Minus1)?)
    }

    fn act_of(&self, hidden: &Hidden) -> Result<Tensor> {
        Ok(match hidden.repr() {
            crate::model::HiddenRepr::Device(t) => t.clone(),
            crate::model::HiddenRepr::Host(v) => {
                Tensor::from_slice(v, (hidden.rows(), hidden.width()), self.device())?
            }
        })
    }

    fn split_columns(&self, x: Tensor, width: usize, parts: usize) -> Result<Vec<Tensor>> {
        (0..parts)
            .map(|p| Ok(x.narrow(D::Minus1, p * width, width)?.contiguous()?))
            .collect()
    }

    fn last_row(&self, x: Tensor, _width: usize) -> Result<Tensor> {
        let rows = x.dim(0)?;
        Ok(x.narrow(0, rows - 1, 1)?)
    }

    fn concat_rows(&self, mut parts: Vec<Tensor>) -> Result<Tensor> {
        if parts.len() == 1
            && let Some(p) = parts.pop()
        {
            return Ok(p);
        }
        Ok(Tensor::cat(&parts, 0)?)
    }

    fn release(&self, _x: Tensor) {}

    fn hidden_of(&self, x: Tensor, width: usize) -> Result<Hidden> {
        let rows = x.dim(0)?;
        Ok(Hidden::device(x, rows, width))
    }

    fn logits(&self, hidden: &Hidden) -> Result<Vec<Vec<f32>>> {
        let h = match hidden.repr() {
            crate::model::HiddenRepr::Device(t) => t.clone(),
            crate::model::HiddenRepr::Host(v) => {
                Tensor::from_slice(v, (hidden.rows(), hidden.width()), self.device())?
            }
        };
        let mut logits = self.model.weights().output().forward(&h)?;
        if let Some(cap) = self.model.arch().final_softcap {
            logits = ((logits * (1.0 / cap) as f64)?.tanh()? * cap as f64)?;
        }
        Ok(logits.to_dtype(DType::F32)?.to_vec2::<f32>()?)
    }

    fn input(&self, rows: Vec<f32>, width: usize) -> Result<Tensor> {
        let n = rows.len() / width.max(1);
        Ok(Tensor::from_vec(rows, (n, width), self.device())?)
    }

    fn layer_norm(&self, x: &Tensor, w: &Norm, b: &Norm, eps: f32) -> Result<Tensor> {
        Ok(candle_nn::ops::layer_norm(
            x,
            self.weight(w)?.as_ref(),
            self.weight(b)?.as_ref(),
            eps,
        )?)
    }

    fn add_bias(&self, x: &mut Tensor, b: &Norm) -> Result<()> {
        *x = x.broadcast_add(self.weight(b)?.as_ref())?;
        Ok(())
    }

    fn gelu(&self, x: &mut Tensor) -> Result<()> {
        // candle's `gelu` is the tanh form
        *x = x.gelu()?;
        Ok(())
    }

    fn attention_within(
        &self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        heads: usize,
        head_dim: usize,
        scale: f32,
    ) -> Result<Tensor> {
        let rows = q.dim(0)?;
        // [rows, heads·d] → [heads, rows, d]
        let split = |t: Tensor| -> candle_core::Result<Tensor> {
            t.reshape((rows, heads, head_dim))?
                .transpose(0, 1)?
                .contiguous()
        };
        let (q, k, v) = (split(q)?, round_f16(&split(k)?)?, round_f16(&split(v)?)?);
        let scores = (q.matmul(&k.t()?)? * scale as f64)?;
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        Ok(probs
            .matmul(&v)?
            .transpose(0, 1)?
            .contiguous()?
            .reshape((rows, heads * head_dim))?)
    }
}
