//! Tensor bytes that live in the memory-mapped GGUF file.
//!
//! Like llama.cpp (`llama_mmap`), the model file is mapped rather than read: loading copies
//! nothing (the pages are the OS page cache's, shared by every process using the model), and
//! only the tensors a pass touches are paged in. Weights our kernels multiply are slices of
//! the mapping; tests and other sources can hand over owned bytes instead.

use std::ops::Deref;
use std::sync::Arc;

use memmap2::Mmap;

/// Immutable weight bytes: a range of the mapped file, or an owned buffer.
#[derive(Debug, Clone)]
pub struct WeightBytes(Inner);

#[derive(Debug, Clone)]
enum Inner {
    Mapped {
        map: Arc<Mmap>,
        start: usize,
        len: usize,
    },
    Owned(Arc<[u8]>),
}

impl WeightBytes {
    pub(crate) fn mapped(map: Arc<Mmap>, start: usize, len: usize) -> Option<Self> {
        (start.checked_add(len)? <= map.len()).then_some(WeightBytes(Inner::Mapped {
            map,
            start,
            len,
        }))
    }
}

impl From<Vec<u8>> for WeightBytes {
    fn from(v: Vec<u8>) -> Self {
        WeightBytes(Inner::Owned(v.into()))
    }
}

impl Deref for WeightBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            Inner::Mapped { map, start, len } => &map[*start..*start + *len],
            Inner::Owned(v) => v,
        }
    }
}
