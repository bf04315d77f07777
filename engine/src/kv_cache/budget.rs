//! How large a session's cache may be under a memory budget. A session's context is decided
//! once, when it is created: the largest that the caller asked for, the model allows and — when
//! a budget is given — whose *full* cache fits the budget, so that a session never runs out of
//! memory halfway through a conversation (llama.cpp likewise sizes `n_ctx` up front and fails
//! early when it cannot).

use super::layout::{KvShape, PAGE_SIZE};
use crate::error::{Error, Result};

/// The context a session gets: `requested` lowered to `max`, then, under a budget, to the
/// largest multiple of [`PAGE_SIZE`] whose full cache fits (the requested context itself is
/// kept when it fits, page multiple or not). Fails when not even one page fits.
pub fn context_for_budget(
    shape: &KvShape,
    requested: usize,
    max: usize,
    chunk: usize,
    budget: Option<u64>,
) -> Result<usize> {
    let wanted = requested.min(max);
    if wanted < 2 {
        return Err(Error::InvalidArgument(format!(
            "a session needs a context of at least 2 tokens, not {wanted}"
        )));
    }
    let Some(budget) = budget else {
        return Ok(wanted);
    };
    if shape.full_bytes(wanted, chunk) <= budget {
        return Ok(wanted);
    }
    // full_bytes grows with the context: the answer is the last page multiple that fits.
    let mut pages = (wanted - 1) / PAGE_SIZE;
    while pages > 0 && shape.full_bytes(pages * PAGE_SIZE, chunk) > budget {
        pages -= 1;
    }
    if pages == 0 {
        let tokens = PAGE_SIZE.min(wanted);
        return Err(Error::MemoryBudgetTooSmall {
            budget,
            tokens,
            needed: shape.full_bytes(tokens, chunk),
        });
    }
    Ok(pages * PAGE_SIZE)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gemma 3 270M: 18 layers of which 3 are global, one KV head of 256, window 512 (f32
    /// values here, as the tests were written).
    fn gemma_270m() -> KvShape {
        KvShape {
            element_bytes: 4,
            ..KvShape::uniform(3, 15, 256, Some(512))
        }
    }

    #[test]
    fn full_bytes_counts_rings_once_and_globals_per_position() {
        let s = gemma_270m();
        assert_eq!(s.bytes_per_position(false), 3 * 2048);
        assert_eq!(s.bytes_per_position(true), 15 * 2048);
        // 3 × 4096 + 15 × (512 + 64) positions
        assert_eq!(s.full_bytes(4096, 64), (3 * 4096 + 15 * 576) * 2048);
        // a context shorter than the ring caps the ring
        assert_eq!(s.full_bytes(100, 64), 18 * 100 * 2048);
    }

    #[test]
    fn no_budget_keeps_the_request_up_to_the_maximum() {
        let s = gemma_270m();
        assert_eq!(context_for_budget(&s, 1000, 4096, 64, None).unwrap(), 1000);
        assert_eq!(context_for_budget(&s, 9000, 4096, 64, None).unwrap(), 4096);
    }

    #[test]
    fn a_budget_picks_the_largest_page_multiple_that_fits() {
        let s = gemma_270m();
        let ring = 15 * 576 * 2048;
        // room for exactly 1024 global positions, and a little more
        let budget = ring + 3 * 1024 * 2048 + 5000;
        assert_eq!(
            context_for_budget(&s, 4096, 4096, 64, Some(budget)).unwrap(),
            1024
        );
        // one byte less than 1024 need: down a page
        let tight = ring + 3 * 1024 * 2048 - 1;
        assert_eq!(
            context_for_budget(&s, 4096, 4096, 64, Some(tight)).unwrap(),
            768
        );
        // a request that fits is kept as it is
        assert_eq!(
            context_for_budget(&s, 1000, 4096, 64, Some(budget)).unwrap(),
            1000
        );
    }

    #[test]
    fn a_budget_below_one_page_is_an_error_saying_what_one_page_needs() {
        let s = gemma_270m();
        let needed = s.full_bytes(PAGE_SIZE, 64);
        match context_for_budget(&s, 4096, 4096, 64, Some(needed - 1)) {
            Err(Error::MemoryBudgetTooSmall {
                budget,
                tokens,
                needed: n,
            }) => {
                assert_eq!((budget, tokens, n), (needed - 1, PAGE_SIZE, needed));
            }
            other => panic!("expected MemoryBudgetTooSmall, got {other:?}"),
        }
        assert_eq!(
            context_for_budget(&s, 4096, 4096, 64, Some(needed)).unwrap(),
            PAGE_SIZE
        );
    }

    #[test]
    fn a_context_under_two_tokens_is_refused() {
        assert!(context_for_budget(&gemma_270m(), 1, 4096, 64, None).is_err());
    }
}
