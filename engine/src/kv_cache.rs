//! The KV cache of one session, preallocated and written in place.
//!
//! Global layers keep every position up to the session's context (`slot == position`).
//! Sliding-window layers keep a ring of `window + chunk` slots: a chunk of up to `chunk` new
//! tokens can be written before attention without overwriting any key an earlier query in the
//! same chunk still needs. Attention is order-free, so the mask is computed from each slot's
//! position (llama.cpp `llama_kv_cache_iswa` keeps two caches the same way).
//!
//! Layout per layer: K and V as `[n_kv_head, slots, head_dim]`, so `K.t()` is a strided view
//! the matmul reads directly.

use candle_core::{DType, Device, Tensor};

use crate::error::{Error, Result};
use crate::gguf::GemmaConfig;

/// K and V of one layer: plain host memory on the CPU (read in place by
/// `model::flash_attention`), device tensors elsewhere.
#[derive(Debug)]
enum LayerCache {
    Host { k: Vec<f32>, v: Vec<f32> },
    Device { k: Tensor, v: Tensor },
}

/// A layer's live K/V for attention.
pub(crate) enum LayerView<'a> {
    Host { k: &'a [f32], v: &'a [f32], slots: usize, used: usize },
    Device { k: Tensor, v: Tensor },
}

#[derive(Debug)]
pub struct KvCache {
    layers: Vec<LayerCache>,
    sliding: Vec<bool>,
    /// Positions written so far (the session's length).
    len: usize,
    /// The position each ring slot holds (the same for every sliding layer), `None` if empty
    /// or invalidated by a truncation.
    ring_pos: Vec<Option<usize>>,
    /// Global-layer capacity: the session's context.
    context: usize,
    /// Sliding-layer ring size.
    ring: usize,
    window: usize,
    /// Largest number of tokens one forward step may write.
    chunk: usize,
    n_kv_head: usize,
    head_dim: usize,
}

impl KvCache {
    pub fn new(config: &GemmaConfig, context: usize, chunk: usize, device: &Device) -> Result<Self> {
        if context == 0 || chunk == 0 {
            return Err(Error::InvalidArgument(
                "the context size and chunk size must be positive".into(),
            ));
        }
        let window = config.sliding_window.unwrap_or(context);
        let ring = (window + chunk).min(context);
        let mut layers = Vec::with_capacity(config.n_layer);
        let mut sliding = Vec::with_capacity(config.n_layer);
        for il in 0..config.n_layer {
            let is_sliding = config.is_sliding(il);
            let slots = if is_sliding { ring } else { context };
            let shape = (config.n_kv_head, slots, config.head_dim);
            layers.push(if device.is_cpu() {
                let n = config.n_kv_head * slots * config.head_dim;
                LayerCache::Host {
                    k: vec![0.0; n],
                    v: vec![0.0; n],
                }
            } else {
                LayerCache::Device {
                    k: Tensor::zeros(shape, DType::F32, device)?,
                    v: Tensor::zeros(shape, DType::F32, device)?,
                }
            });
            sliding.push(is_sliding);
        }
        Ok(KvCache {
            layers,
            sliding,
            len: 0,
            ring_pos: vec![None; ring],
            context,
            ring,
            window,
            chunk,
            n_kv_head: config.n_kv_head,
            head_dim: config.head_dim,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn context(&self) -> usize {
        self.context
    }

    pub fn chunk(&self) -> usize {
        self.chunk
    }

    pub fn window(&self) -> usize {
        self.window
    }

    pub fn is_sliding(&self, layer: usize) -> bool {
        self.sliding[layer]
    }

    /// Bytes of K and V stored per token of context, over all layers at full context.
    pub fn bytes_per_token(&self) -> usize {
        let per_layer = 2 * self.n_kv_head * self.head_dim * 4;
        let total: usize = self
            .sliding
            .iter()
            .map(|&s| if s { self.ring } else { self.context })
            .sum();
        per_layer * total / self.context
    }

    /// Total bytes allocated for K and V.
    pub fn allocated_bytes(&self) -> usize {
        self.layers
            .iter()
            .map(|l| match l {
                LayerCache::Host { k, .. } => 2 * k.len() * 4,
                LayerCache::Device { k, .. } => 2 * k.elem_count() * 4,
            })
            .sum()
    }

    /// Forget everything (the memory stays allocated).
    pub fn clear(&mut self) {
        self.len = 0;
        self.ring_pos.fill(None);
    }

    /// Make room check for `n` more tokens.
    pub fn check_room(&self, n: usize) -> Result<()> {
        if self.len + n > self.context {
            return Err(Error::context_full(self.len + n, self.context));
        }
        Ok(())
    }

    fn slots(&self, layer: usize) -> usize {
        if self.sliding[layer] { self.ring } else { self.context }
    }

    /// Write `k`, `v` (`[n_kv_head, seq, head_dim]`) for positions `start..start+seq` of `layer`,
    /// and return a view of the live slots to attend over.
    pub(crate) fn write_and_view(
        &mut self,
        layer: usize,
        start: usize,
        k: &Tensor,
        v: &Tensor,
    ) -> candle_core::Result<LayerView<'_>> {
        let seq = k.dim(1)?;
        let slots = self.slots(layer);
        let used = (start + seq).min(slots);
        let (n_kv, d) = (self.n_kv_head, self.head_dim);
        match &mut self.layers[layer] {
            LayerCache::Host { k: kc, v: vc } => {
                let kn = k.flatten_all()?.to_vec1::<f32>()?;
                let vn = v.flatten_all()?.to_vec1::<f32>()?;
                for h in 0..n_kv {
                    for i in 0..seq {
                        let slot = (start + i) % slots;
                        let dst = (h * slots + slot) * d;
                        let src = (h * seq + i) * d;
                        kc[dst..dst + d].copy_from_slice(&kn[src..src + d]);
                        vc[dst..dst + d].copy_from_slice(&vn[src..src + d]);
                    }
                }
                Ok(LayerView::Host {
                    k: kc,
                    v: vc,
                    slots,
                    used,
                })
            }
            LayerCache::Device { k: kc, v: vc } => {
                let first = start % slots;
                let head = seq.min(slots - first);
                kc.slice_set(&k.narrow(1, 0, head)?.contiguous()?, 1, first)?;
                vc.slice_set(&v.narrow(1, 0, head)?.contiguous()?, 1, first)?;
                if head < seq {
                    let rest = seq - head;
                    kc.slice_set(&k.narrow(1, head, rest)?.contiguous()?, 1, 0)?;
                    vc.slice_set(&v.narrow(1, head, rest)?.contiguous()?, 1, 0)?;
                }
                Ok(LayerView::Device {
                    k: kc.narrow(1, 0, used)?,
                    v: vc.narrow(1, 0, used)?,
                })
            }
        }
    }

    /// Host variant of [`Self::write_and_view`] for the CPU forward pass: `k`, `v` are
    /// `[seq, n_kv_head, head_dim]` host rows (the layout the projections produce). Returns the
    /// live K/V slices, `slots` and `used`.
    pub(crate) fn write_host(
        &mut self,
        layer: usize,
        start: usize,
        k: &[f32],
        v: &[f32],
    ) -> candle_core::Result<(&[f32], &[f32], usize, usize)> {
        let (n_kv, d) = (self.n_kv_head, self.head_dim);
        let seq = k.len() / (n_kv * d);
        let slots = self.slots(layer);
        let used = (start + seq).min(slots);
        let LayerCache::Host { k: kc, v: vc } = &mut self.layers[layer] else {
            candle_core::bail!("kv cache: host write on a device cache");
        };
        for i in 0..seq {
            let slot = (start + i) % slots;
            for h in 0..n_kv {
                let dst = (h * slots + slot) * d;
                let src = (i * n_kv + h) * d;
                kc[dst..dst + d].copy_from_slice(&k[src..src + d]);
                vc[dst..dst + d].copy_from_slice(&v[src..src + d]);
            }
        }
        Ok((kc, vc, slots, used))
    }

    /// The position each ring slot holds (sliding layers).
    pub(crate) fn ring_positions(&self) -> &[Option<usize>] {
        &self.ring_pos
    }

    /// Claim positions `start..start+seq` before the layers write them, so that masks see the
    /// slots as they will be.
    pub(crate) fn begin_step(&mut self, start: usize, seq: usize) {
        for p in start..start + seq {
            self.ring_pos[p % self.ring] = Some(p);
        }
    }

    /// Record that positions up to `new_len` are written (after all layers have been).
    pub(crate) fn advance(&mut self, new_len: usize) {
        self.len = new_len;
    }

    /// Roll back to the first `n` positions. Global layers keep their prefix; a sliding ring
    /// keeps it only if every key the next query needs (positions `n+1-window .. n`) is still
    /// in its slot. Returns `false` when the ring has lost part of that window: the caller must
    /// then clear and re-prefill (the session does this).
    pub(crate) fn truncate(&mut self, n: usize) -> bool {
        if n >= self.len {
            return true;
        }
        for slot in self.ring_pos.iter_mut() {
            if slot.is_some_and(|p| p >= n) {
                *slot = None;
            }
        }
        self.len = n;
        if !self.sliding.iter().any(|&s| s) {
            return true;
        }
        let needed_from = (n + 1).saturating_sub(self.window);
        (needed_from..n).all(|p| self.ring_pos[p % self.ring] == Some(p))
    }

    /// Additive attention mask `[seq, used]` for queries at `start..start+seq` against the
    /// live slots of a layer kind: 0 where the key is visible, -inf elsewhere. A key is visible
    /// when it is not in the future and, on sliding layers, fewer than `window` positions back
    /// (llama.cpp `is_masked_swa`, `LLAMA_SWA_TYPE_STANDARD`).
    pub(crate) fn mask(
        &self,
        sliding: bool,
        start: usize,
        seq: usize,
        device: &Device,
    ) -> candle_core::Result<Tensor> {
        let end = start + seq;
        let used = if sliding { end.min(self.ring) } else { end };
        let mut m = vec![f32::NEG_INFINITY; seq * used];
        for s in 0..used {
            let p = if sliding { self.ring_pos[s] } else { Some(s) };
            let Some(p) = p else { continue };
            for qi in 0..seq {
                let q = start + qi;
                if p <= q && (!sliding || q - p < self.window) {
                    m[qi * used + s] = 0.0;
                }
            }
        }
        Tensor::from_vec(m, (seq, used), device)
    }
}
