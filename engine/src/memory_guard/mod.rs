//! The memory guard: before a model is loaded, estimate what it will need ([`estimate`]),
//! compare with what the device can spare ([`available`]), and pick the largest context that
//! fits — or refuse with a clear error when not even a useful one does — so that Companion
//! never dies for lack of memory halfway through a conversation. llama.cpp likewise decides
//! `n_ctx` before allocating; we add the device check mobile needs. [`catalog`] holds the
//! common Gemma sizes for advice before a download.

pub mod available;
pub mod catalog;
pub mod estimate;
pub mod relief;

use serde::{Deserialize, Serialize};

pub use available::{SystemMemory, system_memory};
pub use estimate::{MemoryEstimate, ModelShape};
pub use relief::{LOW_MEMORY_MARGIN, MemoryRelief, relief_context};

use crate::error::{Error, Result};
use crate::kv_cache::PAGE_SIZE;

/// Below this many tokens of context a chat is not useful: a system prompt and a couple of
/// turns need it.
pub const MIN_USEFUL_CONTEXT: usize = 512;

/// The context the guard settled on, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryFit {
    pub requested: usize,
    pub context: usize,
    pub estimate: MemoryEstimate,
    pub available_bytes: Option<u64>,
    /// Set when the context was lowered to fit.
    pub notice: Option<String>,
}

pub fn megabytes(bytes: u64) -> String {
    format!("{:.0} MB", bytes as f64 / 1e6)
}

/// The largest context up to `requested` whose estimate fits in `available` (unknown: no
/// limit). Lowered contexts are whole pages. Fails with `InsufficientMemory` when even
/// [`MIN_USEFUL_CONTEXT`] (or `requested`, if smaller) does not fit.
pub fn fit_context(
    shape: &ModelShape,
    requested: usize,
    prefill_chunk: usize,
    available: Option<u64>,
) -> Result<MemoryFit> {
    let full = MemoryEstimate::new(shape, requested, prefill_chunk);
    let fits = |e: &MemoryEstimate| available.is_none_or(|a| e.total_bytes <= a);
    if fits(&full) {
        return Ok(MemoryFit {
            requested,
            context: requested,
            estimate: full,
            available_bytes: available,
            notice: None,
        });
    }
    let floor = MIN_USEFUL_CONTEXT.min(requested);
    let mut context = (requested - 1) / PAGE_SIZE * PAGE_SIZE;
    while context >= floor && context > 0 {
        let estimate = MemoryEstimate::new(shape, context, prefill_chunk);
        if fits(&estimate) {
            let a = available.unwrap_or(0);
            return Ok(MemoryFit {
                requested,
                context,
                estimate,
                available_bytes: available,
                notice: Some(format!(
                    "only {} of memory is available: the context is lowered from {requested} to {context} tokens so the model fits (it needs about {} at {requested} tokens, {} at {context})",
                    megabytes(a),
                    megabytes(full.total_bytes),
                    megabytes(estimate.total_bytes),
                )),
            });
        }
        context -= PAGE_SIZE;
    }
    let smallest = MemoryEstimate::new(shape, floor, prefill_chunk);
    Err(Error::InsufficientMemory {
        needed: smallest.total_bytes,
        available: available.unwrap_or(0),
        context: floor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> ModelShape {
        catalog::GEMMA_SIZES[0].shape()
    }

    #[test]
    fn a_request_that_fits_is_kept() {
        let fit = fit_context(&shape(), 4096, 512, Some(u64::MAX)).unwrap();
        assert_eq!((fit.context, fit.notice), (4096, None));
        assert_eq!(
            fit_context(&shape(), 4096, 512, None).unwrap().context,
            4096
        );
    }

    #[test]
    fn a_tight_budget_gets_the_largest_page_multiple_that_fits() {
        let need_2048 = MemoryEstimate::new(&shape(), 2048, 512).total_bytes;
        let fit = fit_context(&shape(), 8192, 512, Some(need_2048 + 1000)).unwrap();
        assert_eq!(fit.context, 2048);
        let notice = fit.notice.unwrap();
        assert!(notice.contains("from 8192 to 2048"), "{notice}");
    }

    #[test]
    fn too_little_memory_is_refused_with_what_is_needed() {
        let need = MemoryEstimate::new(&shape(), MIN_USEFUL_CONTEXT, 512).total_bytes;
        match fit_context(&shape(), 8192, 512, Some(need - 1)) {
            Err(e @ Error::InsufficientMemory { .. }) => {
                assert_eq!(e.code(), "insufficient_memory");
                assert!(e.to_string().contains("512 tokens"), "{e}");
            }
            other => panic!("expected InsufficientMemory, got {other:?}"),
        }
    }
}
