//! Reused activation buffers for the CPU forward pass.
//!
//! A 512-token prompt step allocates and frees ~20 MB of activations per layer (Q/K/V, the
//! 4 MB gate and up projections, attention and matmul outputs). glibc serves blocks that size
//! with `mmap`, or gives its heap top back to the kernel once enough is free, so every layer
//! faulted its buffers in again: zeroed pages, page-table work, `munmap` — 15-25% of prefill
//! here. llama.cpp avoids it by allocating its compute buffer once. Here the step's large
//! buffers come from, and go back to, one small process-wide pool (a few dozen lock
//! round-trips per layer; the forward pass takes them on whichever compute thread runs it).

use std::sync::Mutex;

/// Buffers under this many values are left to the allocator (its own free lists serve them).
const MIN_POOLED: usize = 16 << 10;
/// At most this many bytes are kept; beyond it released buffers are freed.
const MAX_POOLED_BYTES: usize = 48 << 20;

static POOL: Mutex<Pool> = Mutex::new(Pool::new(MAX_POOLED_BYTES));

/// `len` values for a caller that writes every one of them before reading any: a pooled
/// buffer comes back with whatever its last user left in it (zeros past that user's length), a
/// new one as zeros. Zeroing the outputs of a prompt step's matmuls, transposes and attention
/// was ~3% of a 512-token prefill here, on one thread while the other waited.
pub(crate) fn overwritten(len: usize) -> Vec<f32> {
    match pooled(len) {
        Some(mut buffer) => {
            if buffer.len() >= len {
                buffer.truncate(len);
            } else {
                buffer.resize(len, 0.0);
            }
            buffer
        }
        None => vec![0f32; len],
    }
}

/// A pooled buffer with room for `len` values, for a request large enough to pool.
fn pooled(len: usize) -> Option<Vec<f32>> {
    (len >= MIN_POOLED).then(|| pool().take(len)).flatten()
}

/// Give `buffer` back for a later [`overwritten`].
pub(crate) fn release(buffer: Vec<f32>) {
    if buffer.capacity() >= MIN_POOLED {
        pool().keep(buffer);
    }
}

/// The pool, even if a thread panicked while holding it (its buffers are still buffers).
fn pool() -> std::sync::MutexGuard<'static, Pool> {
    POOL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Free buffers, at most `max_bytes` of them.
struct Pool {
    buffers: Vec<Vec<f32>>,
    max_bytes: usize,
}

impl Pool {
    const fn new(max_bytes: usize) -> Self {
        Pool {
            buffers: Vec::new(),
            max_bytes,
        }
    }

    /// The smallest buffer that holds `len` values, if any is at most twice that: a small
    /// request (a decode step's logits) must not carry off a prompt step's large buffer, which
    /// the next prompt step would then have to fault in again.
    fn take(&mut self, len: usize) -> Option<Vec<f32>> {
        let best = self
            .buffers
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= len && b.capacity() / 2 <= len)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i)?;
        Some(self.buffers.swap_remove(best))
    }

    /// Keep `buffer` unless that would pass the byte cap (then it is freed).
    fn keep(&mut self, buffer: Vec<f32>) {
        if self.bytes() + buffer.capacity() * 4 <= self.max_bytes {
            self.buffers.push(buffer);
        }
    }

    fn bytes(&self) -> usize {
        self.buffers.iter().map(|b| b.capacity() * 4).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_gives_the_smallest_buffer_that_fits_without_waste() {
        let mut pool = Pool::new(1 << 20);
        pool.keep(Vec::with_capacity(1000));
        pool.keep(Vec::with_capacity(300));
        pool.keep(Vec::with_capacity(500));
        assert_eq!(pool.take(400).map(|b| b.capacity()), Some(500));
        assert_eq!(pool.take(1001), None);
        // 300 and 1000 are left; 1000 is more than twice what 200 needs
        assert_eq!(pool.take(200).map(|b| b.capacity()), Some(300));
        assert_eq!(pool.take(200), None);
        assert_eq!(pool.take(500).map(|b| b.capacity()), Some(1000));
    }

    #[test]
    fn keep_stays_under_the_byte_cap() {
        let mut pool = Pool::new(4000);
        pool.keep(Vec::with_capacity(600)); // 2400 bytes
        pool.keep(Vec::with_capacity(600)); // would be 4800: freed
        pool.keep(Vec::with_capacity(400)); // 4000: kept
        assert_eq!(pool.bytes(), 4000);
        assert_eq!(pool.buffers.len(), 2);
    }

    #[test]
    fn overwritten_has_the_length_asked_for_whether_reused_or_not() {
        release(vec![7.0; MIN_POOLED * 2]);
        for len in [MIN_POOLED, MIN_POOLED * 3 / 2, MIN_POOLED * 2 + 5, 10] {
            let b = overwritten(len);
            assert_eq!(b.len(), len);
            release(b);
        }
    }
}
