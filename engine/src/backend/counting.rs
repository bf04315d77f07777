//! Counting what a forward pass dispatches: [`Counting`] wraps a backend and adds one to a
//! counter per operation of the interface it is asked for (a matrix product of several
//! matrices is one; an attention is one). On a GPU each is at least one kernel launch — on
//! Metal one encoder dispatch — so the count per decode token is the number that bounds how
//! fast a small model can decode when the host feeds the device op by op; `companion bench`
//! reports it (the fused CUDA decode reports its kernel launches instead).

use std::sync::atomic::{AtomicU64, Ordering};

use super::profile::{OpKey, OpProfile};
use super::{AttentionSpec, Backend};
use crate::error::Result;
use crate::kv_cache::KvCache;
use crate::model::{Hidden, Linear, Norm, RopeTable};

pub(crate) struct Counting<'a, B> {
    inner: B,
    ops: &'a AtomicU64,
    profile: &'a OpProfile,
}

impl<'a, B> Counting<'a, B> {
    pub fn new(inner: B, ops: &'a AtomicU64, profile: &'a OpProfile) -> Self {
        Counting {
            inner,
            ops,
            profile,
        }
    }

    /// Counts one operation and times `f` under `key` (`backend::profile`).
    fn one<T>(&self, key: OpKey, f: impl FnOnce() -> T) -> T {
        self.ops.fetch_add(1, Ordering::Relaxed);
        self.profile.time(key, f)
    }
}

/// A matrix product's line: its weight's format and `[n, k]` (several weights that read the
/// same input: their summed `n`).
fn weights_key(op: &'static str, ws: &[&Linear]) -> OpKey {
    let (format, k) = ws
        .first()
        .map_or(("", 0), |w| (w.format_name(), w.shape().1));
    OpKey {
        op,
        format,
        shape: (ws.iter().map(|w| w.shape().0).sum(), k),
    }
}

impl<B: Backend> Backend for Counting<'_, B> {
    type Act = B::Act;

    fn embed(&self, table: &Linear, tokens: &[u32], scale: f32) -> Result<Self::Act> {
        self.one(weights_key("embed", &[table]), || {
            self.inner.embed(table, tokens, scale)
        })
    }

    fn rms_norm(&self, x: &Self::Act, w: &Norm, eps: f32) -> Result<Self::Act> {
        self.one(OpKey::op("rms_norm"), || self.inner.rms_norm(x, w, eps))
    }

    fn rms_norm_in_place(
        &self,
        x: &mut Self::Act,
        w: Option<&Norm>,
        width: usize,
        eps: f32,
    ) -> Result<()> {
        self.one(OpKey::op("rms_norm"), || {
            self.inner.rms_norm_in_place(x, w, width, eps)
        })
    }

    fn matmul(&self, w: &Linear, x: &Self::Act) -> Result<Self::Act> {
        self.one(weights_key("matmul", &[w]), || self.inner.matmul(w, x))
    }

    fn matmul_many(&self, ws: &[&Linear], x: &Self::Act) -> Result<Vec<Self::Act>> {
        self.one(weights_key("matmul", ws), || self.inner.matmul_many(ws, x))
    }

    fn rope(&self, x: &mut Self::Act, table: &RopeTable, heads: usize, start: usize) -> Result<()> {
        self.one(OpKey::op("rope"), || {
            self.inner.rope(x, table, heads, start)
        })
    }

    fn attention(
        &self,
        q: Self::Act,
        kv: Option<(Self::Act, Self::Act)>,
        cache: &mut KvCache,
        spec: &AttentionSpec,
        start: usize,
        seq: usize,
    ) -> Result<Self::Act> {
        self.one(
            OpKey::op(if spec.sliding {
                "attention sliding"
            } else {
                "attention global"
            }),
            || self.inner.attention(q, kv, cache, spec, start, seq),
        )
    }

    fn geglu(&self, gate: Self::Act, up: &Self::Act) -> Result<Self::Act> {
        self.one(OpKey::op("geglu"), || self.inner.geglu(gate, up))
    }

    fn add(&self, x: &mut Self::Act, y: Self::Act) -> Result<()> {
        self.one(OpKey::op("add"), || self.inner.add(x, y))
    }

    fn scale(&self, x: &mut Self::Act, s: f32) -> Result<()> {
        self.one(OpKey::op("scale"), || self.inner.scale(x, s))
    }

    fn duplicate(&self, x: &Self::Act) -> Result<Self::Act> {
        self.one(OpKey::op("duplicate"), || self.inner.duplicate(x))
    }

    fn concat_columns(
        &self,
        a: Self::Act,
        a_width: usize,
        b: Self::Act,
        b_width: usize,
    ) -> Result<Self::Act> {
        self.one(OpKey::op("concat_columns"), || {
            self.inner.concat_columns(a, a_width, b, b_width)
        })
    }

    fn act_of(&self, hidden: &Hidden) -> Result<Self::Act> {
        self.one(OpKey::op("act_of"), || self.inner.act_of(hidden))
    }

    fn split_columns(&self, x: Self::Act, width: usize, parts: usize) -> Result<Vec<Self::Act>> {
        self.one(OpKey::op("split_columns"), || {
            self.inner.split_columns(x, width, parts)
        })
    }

    fn last_row(&self, x: Self::Act, width: usize) -> Result<Self::Act> {
        self.one(OpKey::op("last_row"), || self.inner.last_row(x, width))
    }

    fn concat_rows(&self, parts: Vec<Self::Act>) -> Result<Self::Act> {
        // joining the rows of one step is no work
        if parts.len() > 1 {
            return self.one(OpKey::op("concat_rows"), || self.inner.concat_rows(parts));
        }
        self.inner.concat_rows(parts)
    }

    fn release(&self, x: Self::Act) {
        self.inner.release(x)
    }

    fn hidden_of(&self, x: Self::Act, width: usize) -> Result<Hidden> {
        self.inner.hidden_of(x, width)
    }

    fn logits(&self, hidden: &Hidden) -> Result<Vec<Vec<f32>>> {
        self.one(OpKey::op("logits"), || self.inner.logits(hidden))
    }

    fn input(&self, rows: Vec<f32>, width: usize) -> Result<Self::Act> {
        self.inner.input(rows, width)
    }

    fn layer_norm(&self, x: &Self::Act, w: &Norm, b: &Norm, eps: f32) -> Result<Self::Act> {
        self.one(OpKey::op("layer_norm"), || {
            self.inner.layer_norm(x, w, b, eps)
        })
    }

    fn add_bias(&self, x: &mut Self::Act, b: &Norm) -> Result<()> {
        self.one(OpKey::op("add"), || self.inner.add_bias(x, b))
    }

    fn gelu(&self, x: &mut Self::Act) -> Result<()> {
        self.one(OpKey::op("gelu"), || self.inner.gelu(x))
    }

    fn attention_within(
        &self,
        q: Self::Act,
        k: Self::Act,
        v: Self::Act,
        heads: usize,
        head_dim: usize,
        scale: f32,
    ) -> Result<Self::Act> {
        self.one(OpKey::op("attention"), || {
            self.inner.attention_within(q, k, v, heads, head_dim, scale)
        })
    }
}
