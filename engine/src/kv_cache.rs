//! The KV cache of one session, preallocated and written in place: no tensor is concatenated
//! per token.
//!
//! Sliding-window layers keep a ring of `window + chunk` slots: a chunk of up to `chunk` new
//! tokens can be written before attention without overwriting any key an earlier query in the
//! same chunk still needs. Attention is order-free, so the mask is computed from each slot's
//! position (llama.cpp `llama_kv_cache_iswa` keeps two caches the same way).
//!
//! Global layers keep every position (`slot == position`) and grow in pages of
//! [`PAGE_SIZE`] positions up to the session's context, so memory follows use:
//! - on the host, a layer is one `Vec<f32>` whose address space for the whole context is
//!   reserved when the session is created (`try_reserve_exact`); its length — what has been
//!   written, the only part the operating system backs with memory — grows a page at a time.
//!   The reservation means adding a page never moves existing data, and attention keeps reading
//!   a layer as one contiguous slice. With several KV heads, adding a page re-spaces the heads
//!   within the reserved block (one copy per page); with one KV head (Gemma 3 270M) it is a
//!   plain append;
//! - on a device, a tensor cannot grow in place: a page is a new, larger tensor and one copy of
//!   the old (once per page, not per token). Device layers start with one page.
//!
//! [`KvCache::allocated_bytes`] counts written pages and rings, not the reservation.
//!
//! Layout per layer: K and V as `[n_kv_head, slots, head_dim]`, so `K.t()` is a strided view
//! the matmul reads directly.

use std::ops::Range;

use candle_core::{DType, Device, Tensor};
use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::error::{Error, Result};
use crate::gguf::GemmaConfig;
use crate::kv_budget::{KvShape, PAGE_SIZE};

/// K and V of one layer: plain host memory on the CPU (read in place by
/// `model::flash_attention`), device tensors elsewhere. `slots` is the positions allocated.
#[derive(Debug)]
enum LayerCache {
    Host {
        k: Vec<f16>,
        v: Vec<f16>,
        slots: usize,
    },
    Device {
        k: Tensor,
        v: Tensor,
    },
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
    device: Device,
}

impl KvCache {
    pub fn new(
        config: &GemmaConfig,
        context: usize,
        chunk: usize,
        device: &Device,
    ) -> Result<Self> {
        if context == 0 || chunk == 0 {
            return Err(Error::InvalidArgument(
                "the context size and chunk size must be positive".into(),
            ));
        }
        let window = config.sliding_window.unwrap_or(context);
        let ring = KvShape::of(config, element_bytes(device)).ring(context, chunk);
        let (n_kv, d) = (config.n_kv_head, config.head_dim);
        let mut layers = Vec::with_capacity(config.n_layer);
        let mut sliding = Vec::with_capacity(config.n_layer);
        for il in 0..config.n_layer {
            let is_sliding = config.is_sliding(il);
            layers.push(if device.is_cpu() {
                let (slots, reserve) = if is_sliding {
                    (ring, ring)
                } else {
                    (0, context)
                };
                LayerCache::Host {
                    k: reserved(n_kv * reserve * d, n_kv * slots * d)?,
                    v: reserved(n_kv * reserve * d, n_kv * slots * d)?,
                    slots,
                }
            } else {
                let slots = if is_sliding {
                    ring
                } else {
                    PAGE_SIZE.min(context)
                };
                LayerCache::Device {
                    k: Tensor::zeros((n_kv, slots, d), DType::F32, device)?,
                    v: Tensor::zeros((n_kv, slots, d), DType::F32, device)?,
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
            n_kv_head: n_kv,
            head_dim: d,
            device: device.clone(),
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

    pub fn n_layer(&self) -> usize {
        self.layers.len()
    }

    pub fn n_kv_head(&self) -> usize {
        self.n_kv_head
    }

    pub fn head_dim(&self) -> usize {
        self.head_dim
    }

    pub fn is_sliding(&self, layer: usize) -> bool {
        self.sliding[layer]
    }

    /// Bytes of K and V stored per token of context, over all layers at full context: a
    /// sliding layer's ring is shared out over the context, a global layer costs a whole
    /// position per token.
    pub fn bytes_per_token(&self) -> usize {
        let per_layer = 2 * self.n_kv_head * self.head_dim * self.element_bytes();
        let total: usize = self
            .sliding
            .iter()
            .map(|&s| if s { self.ring } else { self.context })
            .sum();
        per_layer * total / self.context
    }

    /// Bytes of K and V allocated now: the rings and the global layers' pages so far.
    pub fn allocated_bytes(&self) -> usize {
        let per_slot = 2 * self.n_kv_head * self.head_dim * self.element_bytes();
        (0..self.layers.len())
            .map(|l| self.slots(l) * per_slot)
            .sum()
    }

    /// Bytes of one stored K or V value: f16 on the host, f32 on devices.
    fn element_bytes(&self) -> usize {
        element_bytes(&self.device)
    }

    /// Forget everything (the memory, pages included, stays allocated for reuse).
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

    /// Positions allocated for `layer`: the ring, or the global layer's pages so far.
    fn slots(&self, layer: usize) -> usize {
        match &self.layers[layer] {
            LayerCache::Host { slots, .. } => *slots,
            LayerCache::Device { k, .. } => k.dims().get(1).copied().unwrap_or(0),
        }
    }

    /// Grow a global layer by whole pages until it holds positions `..end`.
    fn ensure_slots(&mut self, layer: usize, end: usize) -> candle_core::Result<()> {
        let old = self.slots(layer);
        if self.sliding[layer] || end <= old {
            return Ok(());
        }
        if end > self.context {
            candle_core::bail!("position {end} is past the context of {}", self.context);
        }
        let new = end
            .div_ceil(PAGE_SIZE)
            .saturating_mul(PAGE_SIZE)
            .min(self.context);
        let (n_kv, d) = (self.n_kv_head, self.head_dim);
        match &mut self.layers[layer] {
            LayerCache::Host { k, v, slots } => {
                grow_host(k, old, new, n_kv, d);
                grow_host(v, old, new, n_kv, d);
                *slots = new;
            }
            LayerCache::Device { k, v } => {
                *k = grow_device(k, new)?;
                *v = grow_device(v, new)?;
            }
        }
        Ok(())
    }

    /// Device caches: write `k`, `v` (`[n_kv_head, seq, head_dim]`) for positions
    /// `start..start+seq` of `layer` and return the live slots to attend over. (Host caches are
    /// written by [`Self::write_host`], which the CPU forward pass uses.)
    pub(crate) fn write_and_view(
        &mut self,
        layer: usize,
        start: usize,
        k: &Tensor,
        v: &Tensor,
    ) -> candle_core::Result<(Tensor, Tensor)> {
        let seq = k.dim(1)?;
        self.ensure_slots(layer, start + seq)?;
        let used = (start + seq).min(self.slots(layer));
        let LayerCache::Device { k: kc, v: vc } = &mut self.layers[layer] else {
            candle_core::bail!("kv cache: device write on a host cache");
        };
        write_device(kc, k, start)?;
        write_device(vc, v, start)?;
        Ok((kc.narrow(1, 0, used)?, vc.narrow(1, 0, used)?))
    }

    /// Write K/V given as host slices `[n_kv_head, seq, head_dim]` for positions
    /// `start..start+seq` of `layer` (growing a global layer as needed).
    pub(crate) fn write_slices(
        &mut self,
        layer: usize,
        start: usize,
        k: &[f32],
        v: &[f32],
    ) -> candle_core::Result<()> {
        let (n_kv, d) = (self.n_kv_head, self.head_dim);
        let seq = k.len() / (n_kv * d);
        if k.len() != seq * n_kv * d || v.len() != k.len() {
            candle_core::bail!(
                "K/V slices of {} and {} values are not [{n_kv}, seq, {d}]",
                k.len(),
                v.len()
            );
        }
        self.ensure_slots(layer, start + seq)?;
        let slots = self.slots(layer);
        match &mut self.layers[layer] {
            LayerCache::Host { k: kc, v: vc, .. } => {
                scatter(kc, k, slots, start, seq, n_kv, d);
                scatter(vc, v, slots, start, seq, n_kv, d);
            }
            LayerCache::Device { k: kc, v: vc } => {
                let kt = Tensor::from_slice(k, (n_kv, seq, d), &self.device)?;
                let vt = Tensor::from_slice(v, (n_kv, seq, d), &self.device)?;
                write_device(kc, &kt, start)?;
                write_device(vc, &vt, start)?;
            }
        }
        Ok(())
    }

    /// The positions of `layer` that are still cached and that the next token may attend to:
    /// all of them on a global layer; on a sliding layer the newest run, at most `window`, of
    /// positions still in their ring slots (at least the `window - 1` the next token needs).
    pub(crate) fn live_range(&self, layer: usize) -> Range<usize> {
        if !self.sliding[layer] {
            return 0..self.len;
        }
        let mut first = self.len;
        while first > 0
            && self.len - (first - 1) <= self.window
            && self.ring_pos[(first - 1) % self.ring] == Some(first - 1)
        {
            first -= 1;
        }
        first..self.len
    }

    /// K and V of `positions` of `layer` as `[n_kv_head, count, head_dim]` host vectors.
    pub(crate) fn read_positions(
        &self,
        layer: usize,
        positions: Range<usize>,
    ) -> candle_core::Result<(Vec<f32>, Vec<f32>)> {
        let (n_kv, d) = (self.n_kv_head, self.head_dim);
        let slots = self.slots(layer);
        match &self.layers[layer] {
            LayerCache::Host { k, v, .. } => Ok((
                gather(k, slots, positions.clone(), n_kv, d),
                gather(v, slots, positions, n_kv, d),
            )),
            LayerCache::Device { k, v } => Ok((
                gather(
                    &k.flatten_all()?.to_vec1::<f32>()?,
                    slots,
                    positions.clone(),
                    n_kv,
                    d,
                ),
                gather(
                    &v.flatten_all()?.to_vec1::<f32>()?,
                    slots,
                    positions,
                    n_kv,
                    d,
                ),
            )),
        }
    }

    /// After [`Self::write_slices`] has put back every layer's live positions: the session
    /// holds `len` positions, sliding layers those from `sliding_from`.
    pub(crate) fn finish_restore(&mut self, len: usize, sliding_from: usize) {
        self.ring_pos.fill(None);
        for p in sliding_from..len {
            self.ring_pos[p % self.ring] = Some(p);
        }
        self.len = len;
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
    ) -> candle_core::Result<(&[f16], &[f16], usize, usize)> {
        let (n_kv, d) = (self.n_kv_head, self.head_dim);
        let seq = k.len() / (n_kv * d);
        self.ensure_slots(layer, start + seq)?;
        let slots = self.slots(layer);
        let used = (start + seq).min(slots);
        let LayerCache::Host { k: kc, v: vc, .. } = &mut self.layers[layer] else {
            candle_core::bail!("kv cache: host write on a device cache");
        };
        for i in 0..seq {
            let slot = (start + i) % slots;
            for h in 0..n_kv {
                let dst = (h * slots + slot) * d;
                let src = (i * n_kv + h) * d;
                store(&mut kc[dst..dst + d], &k[src..src + d]);
                store(&mut vc[dst..dst + d], &v[src..src + d]);
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

/// An empty vector with room reserved for `capacity` values, `len` of them zeroed.
fn reserved(capacity: usize, len: usize) -> Result<Vec<f16>> {
    let mut buf = Vec::new();
    buf.try_reserve_exact(capacity).map_err(|e| {
        Error::InvalidArgument(format!(
            "cannot reserve {} bytes for the KV cache: {e}",
            capacity * std::mem::size_of::<f16>()
        ))
    })?;
    buf.resize(len, f16::ZERO);
    Ok(buf)
}

/// Bytes of one stored K or V value on `device`. The host cache stores f16, as llama.cpp's
/// default KV cache type does (the values are rounded to f16 before attention either way, so
/// storing them as f16 changes no result and halves the memory).
pub(crate) fn element_bytes(device: &Device) -> usize {
    if device.is_cpu() { 2 } else { 4 }
}

/// `dst = f16(src)`, round to nearest even (ggml `GGML_FP32_TO_FP16`).
fn store(dst: &mut [f16], src: &[f32]) {
    // the slice conversion uses F16C for the whole run where the CPU has it
    dst.convert_from_f32_slice(src);
}

/// Grow a host layer `[n_kv, old, d]` to `[n_kv, new, d]`. Heads are moved from the last one
/// down, each to its new offset, so no head overwrites one not yet moved.
fn grow_host(buf: &mut Vec<f16>, old: usize, new: usize, n_kv: usize, d: usize) {
    buf.resize(n_kv * new * d, f16::ZERO);
    for h in (1..n_kv).rev() {
        buf.copy_within(h * old * d..(h + 1) * old * d, h * new * d);
    }
}

/// A device layer `[n_kv, old, d]` copied into a new `[n_kv, new, d]` one.
fn grow_device(t: &Tensor, new: usize) -> candle_core::Result<Tensor> {
    let (n_kv, _, d) = t.dims3()?;
    let bigger = Tensor::zeros((n_kv, new, d), t.dtype(), t.device())?;
    bigger.slice_set(t, 1, 0)?;
    Ok(bigger)
}

/// Write `new` (`[n_kv, seq, d]`) at positions `start..` of a device layer, wrapping around
/// the slots of a ring.
fn write_device(cache: &Tensor, new: &Tensor, start: usize) -> candle_core::Result<()> {
    let slots = cache.dim(1)?;
    let seq = new.dim(1)?;
    let first = start % slots;
    let head = seq.min(slots - first);
    cache.slice_set(&new.narrow(1, 0, head)?.contiguous()?, 1, first)?;
    if head < seq {
        cache.slice_set(&new.narrow(1, head, seq - head)?.contiguous()?, 1, 0)?;
    }
    Ok(())
}

/// Copy `src` (`[n_kv, seq, d]`) into the slots of positions `start..start+seq` of `dst`
/// (`[n_kv, slots, d]`).
fn scatter(
    dst: &mut [f16],
    src: &[f32],
    slots: usize,
    start: usize,
    seq: usize,
    n_kv: usize,
    d: usize,
) {
    for h in 0..n_kv {
        for i in 0..seq {
            let at = (h * slots + (start + i) % slots) * d;
            let from = (h * seq + i) * d;
            store(&mut dst[at..at + d], &src[from..from + d]);
        }
    }
}

/// The inverse of [`scatter`]: positions `positions` of `src` as `[n_kv, count, d]`.
fn gather<T: Copy + Into<f32>>(
    src: &[T],
    slots: usize,
    positions: Range<usize>,
    n_kv: usize,
    d: usize,
) -> Vec<f32> {
    let mut out = Vec::with_capacity(n_kv * positions.len() * d);
    for h in 0..n_kv {
        for p in positions.clone() {
            let at = (h * slots + p % slots) * d;
            out.extend(src[at..at + d].iter().map(|&x| x.into()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::Architecture;

    /// Three layers, the last global, two KV heads of 4, window 4.
    fn config() -> GemmaConfig {
        GemmaConfig {
            architecture: Architecture::Gemma3,
            name: None,
            n_vocab: 10,
            n_embd: 8,
            n_layer: 3,
            n_head: 2,
            n_kv_head: 2,
            head_dim: 4,
            n_ff: 8,
            rms_eps: 1e-6,
            rope_base_global: 10_000.0,
            rope_base_local: 10_000.0,
            sliding_window: Some(4),
            swa_pattern: 3,
            context_length: 4096,
            final_logit_softcap: None,
            attention_scale: 0.5,
        }
    }

    /// K/V values that name their head and position, `[n_kv, seq, d]`.
    fn kv(start: usize, seq: usize, salt: f32) -> Vec<f32> {
        let mut out = Vec::new();
        for h in 0..2 {
            for p in start..start + seq {
                for j in 0..4 {
                    // distinct for nearby positions and exact in f16 (the host stores f16)
                    out.push(((h * 7 + p * 3 + j) % 1000) as f32 + salt);
                }
            }
        }
        out
    }

    /// Write positions `..n` in steps of `step`, as the model does.
    fn fill(cache: &mut KvCache, n: usize, step: usize) {
        let mut p = cache.len();
        while p < n {
            let seq = step.min(n - p);
            cache.begin_step(p, seq);
            for l in 0..3 {
                cache
                    .write_slices(l, p, &kv(p, seq, 0.0), &kv(p, seq, 0.5))
                    .unwrap();
            }
            p += seq;
            cache.advance(p);
        }
    }

    #[test]
    fn global_layers_grow_by_pages_and_keep_their_data() {
        let mut cache = KvCache::new(&config(), 1000, 2, &Device::Cpu).unwrap();
        let per_slot = 2 * 2 * 4 * 2; // K and V, 2 heads of 4, f16
        let rings = 2 * 6 * per_slot;
        assert_eq!(cache.allocated_bytes(), rings, "no global page before use");
        fill(&mut cache, 3, 2);
        assert_eq!(cache.allocated_bytes(), rings + PAGE_SIZE * per_slot);
        fill(&mut cache, PAGE_SIZE + 1, 7);
        assert_eq!(cache.allocated_bytes(), rings + 2 * PAGE_SIZE * per_slot);
        // the two heads were re-spaced when the second page came: every position reads back
        let (k, v) = cache.read_positions(2, 0..PAGE_SIZE + 1).unwrap();
        assert_eq!(k, kv(0, PAGE_SIZE + 1, 0.0));
        assert_eq!(v, kv(0, PAGE_SIZE + 1, 0.5));
        // the last page stops at the context
        fill(&mut cache, 1000, 64);
        assert_eq!(cache.allocated_bytes(), rings + 1000 * per_slot);
        assert!(cache.check_room(1).is_err());
    }

    #[test]
    fn a_ring_reads_back_its_newest_window_in_position_order() {
        let mut cache = KvCache::new(&config(), 100, 2, &Device::Cpu).unwrap();
        fill(&mut cache, 11, 2);
        assert_eq!(cache.live_range(0), 7..11);
        assert_eq!(cache.live_range(2), 0..11);
        let (k, _) = cache.read_positions(0, 7..11).unwrap();
        assert_eq!(k, kv(7, 4, 0.0));
    }

    #[test]
    fn restored_positions_read_back_and_truncation_checks_the_ring() {
        let mut a = KvCache::new(&config(), 100, 2, &Device::Cpu).unwrap();
        fill(&mut a, 11, 3);
        // another chunk size: another ring size
        let mut b = KvCache::new(&config(), 100, 5, &Device::Cpu).unwrap();
        for l in 0..3 {
            let r = a.live_range(l);
            let (k, v) = a.read_positions(l, r.clone()).unwrap();
            b.write_slices(l, r.start, &k, &v).unwrap();
        }
        b.finish_restore(11, 7);
        for l in 0..3 {
            assert_eq!(b.live_range(l), a.live_range(l));
            assert_eq!(
                b.read_positions(l, a.live_range(l)).unwrap(),
                a.read_positions(l, a.live_range(l)).unwrap()
            );
        }
        // one back keeps positions 7..10, enough for the next query at 10
        assert!(b.truncate(10));
        // back to 5 would need 2..5, which the restored ring never held
        assert!(!b.truncate(5));
    }
}
