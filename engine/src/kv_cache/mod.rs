//! The KV cache of one session, preallocated and written in place: no tensor is concatenated
//! per token. Only layers that store K and V have a cache layer (Gemma 4's shared layers read
//! an earlier layer's), each with its own KV head count and head size.
//!
//! Sliding-window layers keep a ring of `window + chunk` slots: a chunk of up to `chunk` new
//! tokens can be written before attention without overwriting any key an earlier query in the
//! same chunk still needs. Attention is order-free, so the mask is computed from each slot's
//! position (llama.cpp `llama_kv_cache_iswa` keeps two caches the same way).
//!
//! Global layers keep every position (`slot == position`) and grow in pages of
//! [`PAGE_SIZE`] positions up to the session's context, so memory follows use:
//! - on the host, a layer is one `Vec<f16>` whose address space for the whole context is
//!   reserved when the session is created (`try_reserve_exact`); its length — what has been
//!   written, the only part the operating system backs with memory — grows a page at a time.
//!   The reservation means adding a page never moves existing data, and attention keeps reading
//!   a layer as one contiguous slice. With several KV heads, adding a page re-spaces the heads
//!   within the reserved block (one copy per page); with one KV head it is a plain append;
//! - on a device, a tensor cannot grow in place: a page is a new, larger tensor and one copy of
//!   the old (once per page, not per token). Device layers start with one page.
//!
//! Every backend stores f16, as ggml's default KV cache does (the values are rounded to f16
//! before attention either way), so a snapshot carries the same values whichever backend made
//! it. [`KvCache::allocated_bytes`] counts written pages and rings, not the reservation.
//!
//! Layout per layer: K and V as `[n_kv_head, slots, head_dim]`.
//!
//! # The contract
//!
//! What the rest of the engine may rely on, in the manner of llama.cpp's `llama-memory.h` (whose
//! comments are its contract); the model (`model/forward.rs`), the backends, sessions and
//! snapshots use the cache through these and nothing else:
//! - [`KvCache::new`] sizes it once from the description, the session's context and its
//!   largest step (`chunk`); memory is committed as positions are written ([`layout`] says how
//!   much, [`budget`] how much may be asked for).
//! - A step writes positions `len..len + seq` (`seq <= chunk`): `begin_step`, then each storing
//!   layer's K and V (`write_host` / `write_device`), read back for attention (`host_view`,
//!   `device_view`, `mask`), then `advance`. [`KvCache::check_room`] says beforehand whether
//!   the positions fit; nothing is written past the context.
//! - [`KvCache::len`] positions are live, always a prefix `0..len` of the sequence: there is one
//!   sequence per cache (a session), so llama.cpp's `seq_id`s have no counterpart.
//! - `truncate(n)` keeps positions `0..n` (llama.cpp `seq_rm(seq, n, -1)`); it returns `false`
//!   when a sliding ring no longer holds a key the next query needs (the ring had moved past
//!   it), and the caller must then clear and prefill again (`Session` does).
//!   [`KvCache::clear`] empties it.
//! - Snapshots (llama.cpp `state_seq_get_data` / `set_data`): `read_positions` gives a layer's
//!   K and V for a range of positions, in position order, whatever slots hold them;
//!   `write_slices` then `finish_restore` put them back (`snapshot.rs` clears the session
//!   first and again when a restore is refused, so nothing half-written is ever used).
//! - Every backend stores f16 ([`ELEMENT_BYTES`]), so a snapshot restores on any backend.

use std::ops::Range;

use candle_core::{DType, Device, Tensor};
use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::arch::ModelArch;
use crate::error::{Error, Result};

pub mod budget;
pub mod layout;

pub use budget::context_for_budget;
pub use layout::{ELEMENT_BYTES, KvLayerShape, KvShape, PAGE_SIZE};

/// Where the cache lives.
#[derive(Debug, Clone)]
pub enum KvStorage {
    /// Host memory, read in place by the host backend's attention.
    Host,
    /// Tensors on a device, for the candle backend.
    Device(Device),
}

#[derive(Debug)]
enum LayerData {
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
struct CacheLayer {
    /// The model layer this cache layer belongs to.
    layer: usize,
    sliding: bool,
    n_kv_head: usize,
    head_dim: usize,
    data: LayerData,
}

/// What the host attention reads of one layer: its K and V (`[n_kv, slots, d]`), how many
/// slots are allocated and live, and which position each ring slot holds.
pub(crate) struct HostView<'a> {
    pub k: &'a [f16],
    pub v: &'a [f16],
    pub slots: usize,
    pub used: usize,
    /// The layer's size in slots once the whole context is written (the ring, or the context).
    pub capacity: usize,
    pub ring_positions: &'a [Option<usize>],
}

#[derive(Debug)]
pub struct KvCache {
    layers: Vec<CacheLayer>,
    /// Model layer → cache layer (`None` for layers that store nothing).
    index: Vec<Option<usize>>,
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
    storage: KvStorage,
}

impl KvCache {
    pub fn new(arch: &ModelArch, context: usize, chunk: usize, storage: KvStorage) -> Result<Self> {
        if context == 0 || chunk == 0 {
            return Err(Error::InvalidArgument(
                "the context size and chunk size must be positive".into(),
            ));
        }
        let window = arch.window.unwrap_or(context);
        let ring = KvShape::of(arch).ring(context, chunk);
        let mut layers = Vec::new();
        let mut index = vec![None; arch.n_layer()];
        for (il, l) in arch.storing_layers() {
            let (n_kv, d) = (l.n_kv_head, l.head_dim);
            let data = match &storage {
                KvStorage::Host => {
                    let (slots, reserve) = if l.sliding {
                        (ring, ring)
                    } else {
                        (0, context)
                    };
                    let values = |n: usize| n_kv.checked_mul(n).and_then(|x| x.checked_mul(d));
                    let (Some(cap), Some(len)) = (values(reserve), values(slots)) else {
                        return Err(Error::InvalidArgument("the KV cache size overflows".into()));
                    };
                    LayerData::Host {
                        k: reserved(cap, len)?,
                        v: reserved(cap, len)?,
                        slots,
                    }
                }
                KvStorage::Device(device) => {
                    let slots = if l.sliding {
                        ring
                    } else {
                        PAGE_SIZE.min(context)
                    };
                    LayerData::Device {
                        k: Tensor::zeros((n_kv, slots, d), DType::F16, device)?,
                        v: Tensor::zeros((n_kv, slots, d), DType::F16, device)?,
                    }
                }
            };
            index[il] = Some(layers.len());
            layers.push(CacheLayer {
                layer: il,
                sliding: l.sliding,
                n_kv_head: n_kv,
                head_dim: d,
                data,
            });
        }
        Ok(KvCache {
            layers,
            index,
            len: 0,
            ring_pos: vec![None; ring],
            context,
            ring,
            window,
            chunk,
            storage,
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

    /// Cache layers (the model layers that store K and V).
    pub fn n_layer(&self) -> usize {
        self.layers.len()
    }

    /// The cache layer of model layer `layer`, if it stores K and V.
    pub fn storage_index(&self, layer: usize) -> Option<usize> {
        self.index.get(layer).copied().flatten()
    }

    /// Cache layer `i`: its model layer, whether it slides, its KV heads and head size.
    pub fn layer_shape(&self, i: usize) -> (usize, bool, usize, usize) {
        let l = &self.layers[i];
        (l.layer, l.sliding, l.n_kv_head, l.head_dim)
    }

    pub fn is_sliding(&self, i: usize) -> bool {
        self.layers[i].sliding
    }

    /// Bytes of K and V stored per token of context, over all layers at full context: a
    /// sliding layer's ring is shared out over the context, a global layer costs a whole
    /// position per token.
    pub fn bytes_per_token(&self) -> usize {
        let total: usize = self
            .layers
            .iter()
            .map(|l| {
                let positions = if l.sliding { self.ring } else { self.context };
                2 * l.n_kv_head * l.head_dim * ELEMENT_BYTES * positions
            })
            .sum();
        total / self.context
    }

    /// Bytes of K and V allocated now: the rings and the global layers' pages so far.
    pub fn allocated_bytes(&self) -> usize {
        (0..self.layers.len())
            .map(|i| {
                let l = &self.layers[i];
                self.slots(i) * 2 * l.n_kv_head * l.head_dim * ELEMENT_BYTES
            })
            .sum()
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

    /// Positions allocated for cache layer `i`: the ring, or the global layer's pages so far.
    fn slots(&self, i: usize) -> usize {
        match &self.layers[i].data {
            LayerData::Host { slots, .. } => *slots,
            LayerData::Device { k, .. } => k.dims().get(1).copied().unwrap_or(0),
        }
    }

    /// Grow a global layer by whole pages until it holds positions `..end`.
    fn ensure_slots(&mut self, i: usize, end: usize) -> candle_core::Result<()> {
        let old = self.slots(i);
        if self.layers[i].sliding || end <= old {
            return Ok(());
        }
        if end > self.context {
            candle_core::bail!("position {end} is past the context of {}", self.context);
        }
        let new = end
            .div_ceil(PAGE_SIZE)
            .saturating_mul(PAGE_SIZE)
            .min(self.context);
        let layer = &mut self.layers[i];
        let (n_kv, d) = (layer.n_kv_head, layer.head_dim);
        match &mut layer.data {
            LayerData::Host { k, v, slots } => {
                grow_host(k, old, new, n_kv, d);
                grow_host(v, old, new, n_kv, d);
                *slots = new;
            }
            LayerData::Device { k, v } => {
                *k = grow_device(k, new)?;
                *v = grow_device(v, new)?;
            }
        }
        Ok(())
    }

    /// Device caches: grow cache layer `i` until it holds positions `..end` (a global layer
    /// by whole pages; a sliding ring never grows), for a writer outside this module.
    #[cfg(any(feature = "cuda", feature = "metal", feature = "metal-emulated"))]
    pub(crate) fn ensure_device_slots(&mut self, i: usize, end: usize) -> candle_core::Result<()> {
        self.ensure_slots(i, end)
    }

    /// Device caches: cache layer `i`'s K and V tensors (`[n_kv_head, slots, head_dim]`, f16)
    /// and its slots.
    #[cfg(any(feature = "cuda", feature = "metal", feature = "metal-emulated"))]
    pub(crate) fn device_layer(&self, i: usize) -> Option<(&Tensor, &Tensor, usize)> {
        match &self.layers.get(i)?.data {
            LayerData::Device { k, v } => Some((k, v, self.slots(i))),
            LayerData::Host { .. } => None,
        }
    }

    /// Device caches: write `k`, `v` (`[n_kv_head, seq, head_dim]`, f32) for positions
    /// `start..start+seq` of cache layer `i`, rounded to f16.
    pub(crate) fn write_device(
        &mut self,
        i: usize,
        start: usize,
        k: &Tensor,
        v: &Tensor,
    ) -> candle_core::Result<()> {
        let seq = k.dim(1)?;
        self.ensure_slots(i, start + seq)?;
        let LayerData::Device { k: kc, v: vc } = &mut self.layers[i].data else {
            candle_core::bail!("kv cache: device write on a host cache");
        };
        write_device(kc, &k.to_dtype(DType::F16)?, start)?;
        write_device(vc, &v.to_dtype(DType::F16)?, start)?;
        Ok(())
    }

    /// Device caches: K and V of the slots live for queries up to position `end` of cache
    /// layer `i`, as f32 `[n_kv_head, used, head_dim]`.
    pub(crate) fn device_view(
        &self,
        i: usize,
        end: usize,
    ) -> candle_core::Result<(Tensor, Tensor)> {
        let used = end.min(self.slots(i));
        let LayerData::Device { k, v } = &self.layers[i].data else {
            candle_core::bail!("kv cache: device view of a host cache");
        };
        Ok((
            k.narrow(1, 0, used)?.to_dtype(DType::F32)?,
            v.narrow(1, 0, used)?.to_dtype(DType::F32)?,
        ))
    }

    /// Write K/V given as host slices `[n_kv_head, seq, head_dim]` for positions
    /// `start..start+seq` of cache layer `i` (growing a global layer as needed).
    pub(crate) fn write_slices(
        &mut self,
        i: usize,
        start: usize,
        k: &[f32],
        v: &[f32],
    ) -> candle_core::Result<()> {
        let (n_kv, d) = (self.layers[i].n_kv_head, self.layers[i].head_dim);
        let seq = k.len() / (n_kv * d);
        if k.len() != seq * n_kv * d || v.len() != k.len() {
            candle_core::bail!(
                "K/V slices of {} and {} values are not [{n_kv}, seq, {d}]",
                k.len(),
                v.len()
            );
        }
        self.ensure_slots(i, start + seq)?;
        let slots = self.slots(i);
        match &mut self.layers[i].data {
            LayerData::Host { k: kc, v: vc, .. } => {
                scatter(kc, k, slots, start, seq, n_kv, d);
                scatter(vc, v, slots, start, seq, n_kv, d);
            }
            LayerData::Device { k: kc, v: vc } => {
                let device = kc.device().clone();
                let kt = Tensor::from_slice(k, (n_kv, seq, d), &device)?.to_dtype(DType::F16)?;
                let vt = Tensor::from_slice(v, (n_kv, seq, d), &device)?.to_dtype(DType::F16)?;
                write_device(kc, &kt, start)?;
                write_device(vc, &vt, start)?;
            }
        }
        Ok(())
    }

    /// The positions of cache layer `i` that are still cached and that the next token may
    /// attend to: all of them on a global layer; on a sliding layer the newest run, at most
    /// `window`, of positions still in their ring slots (at least the `window - 1` the next
    /// token needs).
    pub(crate) fn live_range(&self, i: usize) -> Range<usize> {
        if !self.layers[i].sliding {
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

    /// K and V of `positions` of cache layer `i` as `[n_kv_head, count, head_dim]` host
    /// vectors.
    pub(crate) fn read_positions(
        &self,
        i: usize,
        positions: Range<usize>,
    ) -> candle_core::Result<(Vec<f32>, Vec<f32>)> {
        let (n_kv, d) = (self.layers[i].n_kv_head, self.layers[i].head_dim);
        let slots = self.slots(i);
        match &self.layers[i].data {
            LayerData::Host { k, v, .. } => Ok((
                gather(k, slots, positions.clone(), n_kv, d),
                gather(v, slots, positions, n_kv, d),
            )),
            LayerData::Device { k, v } => {
                let host = |t: &Tensor| -> candle_core::Result<Vec<f16>> {
                    t.flatten_all()?.to_vec1::<f16>()
                };
                Ok((
                    gather(&host(k)?, slots, positions.clone(), n_kv, d),
                    gather(&host(v)?, slots, positions, n_kv, d),
                ))
            }
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

    /// Host caches: write K/V given as `[seq, n_kv_head, head_dim]` rows (the layout the
    /// projections produce) for positions `start..start+seq` of cache layer `i`.
    pub(crate) fn write_host(
        &mut self,
        i: usize,
        start: usize,
        k: &[f32],
        v: &[f32],
    ) -> candle_core::Result<()> {
        let (n_kv, d) = (self.layers[i].n_kv_head, self.layers[i].head_dim);
        let seq = k.len() / (n_kv * d);
        if k.len() != seq * n_kv * d || v.len() != k.len() {
            candle_core::bail!("K/V rows of {} and {} values", k.len(), v.len());
        }
        self.ensure_slots(i, start + seq)?;
        let slots = self.slots(i);
        let LayerData::Host { k: kc, v: vc, .. } = &mut self.layers[i].data else {
            candle_core::bail!("kv cache: host write on a device cache");
        };
        for s in 0..seq {
            let slot = (start + s) % slots;
            for h in 0..n_kv {
                let dst = (h * slots + slot) * d;
                let src = (s * n_kv + h) * d;
                store(&mut kc[dst..dst + d], &k[src..src + d]);
                store(&mut vc[dst..dst + d], &v[src..src + d]);
            }
        }
        Ok(())
    }

    /// Host caches: what attention reads for queries up to position `end` of cache layer `i`.
    pub(crate) fn host_view(&self, i: usize, end: usize) -> candle_core::Result<HostView<'_>> {
        let slots = self.slots(i);
        let LayerData::Host { k, v, .. } = &self.layers[i].data else {
            candle_core::bail!("kv cache: host view of a device cache");
        };
        let capacity = if self.layers[i].sliding {
            self.ring
        } else {
            self.context
        };
        Ok(HostView {
            k,
            v,
            slots,
            used: end.min(slots),
            capacity,
            ring_positions: &self.ring_pos,
        })
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
        if !self.layers.iter().any(|l| l.sliding) {
            return true;
        }
        let needed_from = (n + 1).saturating_sub(self.window);
        (needed_from..n).all(|p| self.ring_pos[p % self.ring] == Some(p))
    }

    /// Additive attention mask `[seq, used]` for queries at `start..start+seq` against the
    /// live slots of a layer kind: 0 where the key is visible, -inf elsewhere. A key is visible
    /// when it is not in the future and, within a `window`, fewer than `window` positions back
    /// (llama.cpp `is_masked_swa`, `LLAMA_SWA_TYPE_STANDARD`).
    pub(crate) fn mask(
        &self,
        sliding: bool,
        window: Option<usize>,
        start: usize,
        seq: usize,
        causal: bool,
        device: &Device,
    ) -> candle_core::Result<Tensor> {
        let end = start + seq;
        let used = if sliding { end.min(self.ring) } else { end };
        let mut m = vec![f32::NEG_INFINITY; seq * used];
        // row by row, so each query's row is written in order
        for (qi, row) in m.chunks_exact_mut(used.max(1)).enumerate().take(seq) {
            let q = start + qi;
            for (s, cell) in row.iter_mut().enumerate() {
                let p = if sliding { self.ring_pos[s] } else { Some(s) };
                if p.is_some_and(|p| {
                    (p <= q || !causal) && window.is_none_or(|w| q.saturating_sub(p) < w)
                }) {
                    *cell = 0.0;
                }
            }
        }
        Tensor::from_vec(m, (seq, used), device)
    }

    /// Whether this cache lives on a device (the candle backend).
    pub fn on_device(&self) -> bool {
        matches!(self.storage, KvStorage::Device(_))
    }
}

/// An empty vector with room reserved for `capacity` values, `len` of them zeroed.
fn reserved(capacity: usize, len: usize) -> Result<Vec<f16>> {
    let mut buf = Vec::new();
    buf.try_reserve_exact(capacity).map_err(|e| {
        Error::InvalidArgument(format!(
            "cannot reserve {} bytes for the KV cache: {e}",
            capacity.saturating_mul(ELEMENT_BYTES)
        ))
    })?;
    buf.resize(len, f16::ZERO);
    Ok(buf)
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
fn gather(src: &[f16], slots: usize, positions: Range<usize>, n_kv: usize, d: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(n_kv * positions.len() * d);
    for h in 0..n_kv {
        for p in positions.clone() {
            let at = (h * slots + p % slots) * d;
            out.extend(src[at..at + d].iter().map(|&x| x.to_f32()));
        }
    }
    out
}

#[cfg(test)]
mod tests;
