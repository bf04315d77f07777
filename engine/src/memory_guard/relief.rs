//! Letting go of memory while the app runs: what the engine does when the device says memory
//! is short (iOS's memory warning, or the memory the app may still allocate falling under
//! [`LOW_MEMORY_MARGIN`]), so that the OS does not end the app for a cache we could have
//! dropped (on iOS, jetsam ends a process over its limit without asking).
//!
//! In order of what it costs the user:
//! 1. the draft's prefill (the message being typed is prefilled again at the next keystroke);
//! 2. every scratch session (a summary, a document job or an API request in flight fails with
//!    a clear error; the caller stops them first where it can);
//! 3. the context: the open conversation's KV cache is given the largest context whose *full*
//!    cache takes at most half of what is left (what the OS says is available plus what the
//!    cache holds now), so the rest of the app and the OS keep the other half; never below
//!    [`MIN_USEFUL_CONTEXT`]. The conversation is moved into the smaller cache when it fits
//!    with room for a reply, else the cache starts empty and the next turn prefills the
//!    conversation's summaries and recent turns again (L2 and L3 lose nothing).
//!
//! llama.cpp has no such step (its context is fixed once created); the order follows Apple's
//! advice for memory warnings: release caches that can be rebuilt first.

use serde::{Deserialize, Serialize};

use super::MIN_USEFUL_CONTEXT;
use crate::engine::Engine;
use crate::error::Result;
use crate::kv_cache::{KvShape, context_for_budget};
use crate::session::Session;
use crate::tokenizer::ChatMessage;

/// When the memory the app may still allocate falls under this, the app acts as on a memory
/// warning. iOS ends an app that passes its limit without warning; 256 MiB leaves room for the
/// webview and a reply's working buffers on every iPhone that runs Gemma 3 270M.
pub const LOW_MEMORY_MARGIN: u64 = 256 << 20;

/// A conversation moved into a smaller cache keeps at least this many free positions, so that
/// the reply that follows does not at once hit the end of the context.
const ROOM_FOR_A_REPLY: usize = 256;

/// What a memory warning made the engine let go of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryRelief {
    /// Tokens of the draft's prefill dropped.
    pub draft_tokens_dropped: usize,
    /// Scratch sessions closed.
    pub scratch_sessions_closed: usize,
    pub context_before: usize,
    pub context_after: usize,
    /// Bytes the open conversation's KV cache held before and holds now.
    pub kv_bytes_before: usize,
    pub kv_bytes_after: usize,
    /// Tokens of the conversation still cached (0: the next turn prefills it again).
    pub tokens_kept: usize,
    /// The memory figure the decision was made on (`None`: the OS did not say).
    pub available_bytes: Option<u64>,
}

impl MemoryRelief {
    /// The one sentence the user is told.
    pub fn sentence(&self) -> String {
        let mut s = String::from("Memory is low, so Companion let go of what it can rebuild");
        if self.context_after < self.context_before {
            s.push_str(&format!(
                ": the conversation's working memory is now {} tokens (was {}); older turns stay saved and are summarized as needed.",
                self.context_after, self.context_before
            ));
        } else {
            s.push_str(" (the typing cache and background work); the conversation is untouched.");
        }
        s
    }
}

/// The context whose full cache takes at most half of `available + held` bytes, lowered from
/// `current` in whole pages, never below [`MIN_USEFUL_CONTEXT`] (nor above `current`).
pub fn relief_context(
    shape: &KvShape,
    current: usize,
    chunk: usize,
    held: u64,
    available: Option<u64>,
) -> usize {
    let Some(available) = available else {
        return current;
    };
    let budget = available.saturating_add(held) / 2;
    let floor = MIN_USEFUL_CONTEXT.min(current);
    context_for_budget(shape, current, current, chunk, Some(budget))
        .unwrap_or(floor)
        .max(floor)
}

impl Engine {
    /// Let go of memory (see the module docs): `main` is the open conversation's session,
    /// `history` its committed messages (what the draft's prefill is cut back to),
    /// `available` what the device says may still be allocated (`None`: ask the OS).
    pub(crate) fn relieve(
        &mut self,
        main: &mut Session,
        history: &[ChatMessage],
        available: Option<u64>,
        scratch_sessions_closed: usize,
    ) -> Result<MemoryRelief> {
        let before = main.len();
        let committed = self.tokenizer().encode_open_user_turn_parts(history, "")?;
        let keep = main.reusable_prefix(&committed, self.tokens_per_image());
        if keep < main.len() {
            main.truncate(self.model(), keep)?;
        }
        let draft_tokens_dropped = before - main.len();

        let available = available
            .or_else(|| super::system_memory(self.config().available_memory_bytes).available_bytes);
        let kv_bytes_before = main.kv_allocated_bytes();
        let context_before = main.context();
        let chunk = self.session_config().prefill_chunk;
        let context_after = relief_context(
            &KvShape::of(self.arch()),
            context_before,
            chunk,
            kv_bytes_before as u64,
            available,
        );
        if context_after < context_before {
            let kept = if main.len() + ROOM_FOR_A_REPLY <= context_after {
                Some(self.snapshot(main)?)
            } else {
                None
            };
            self.set_context(context_after);
            // the old cache goes before the new one is made: the two never coexist
            main.clear();
            *main = self.new_session()?;
            if let Some(bytes) = kept {
                self.restore(main, &bytes)?;
            }
            tracing::info!(
                from = context_before,
                to = context_after,
                kept = main.len(),
                "memory is low: the context was lowered"
            );
        }
        Ok(MemoryRelief {
            draft_tokens_dropped,
            scratch_sessions_closed,
            context_before,
            context_after: main.context(),
            kv_bytes_before,
            kv_bytes_after: main.kv_allocated_bytes(),
            tokens_kept: main.len(),
            available_bytes: available,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv_cache::PAGE_SIZE;

    /// Gemma 3 270M's cache: 3 global and 15 sliding layers of one 256-wide KV head, f16.
    fn shape() -> KvShape {
        KvShape::uniform(3, 15, 256, Some(512))
    }

    #[test]
    fn the_context_takes_at_most_half_of_what_is_left() {
        let s = shape();
        let chunk = 512;
        // plenty: nothing changes
        assert_eq!(relief_context(&s, 4096, chunk, 0, Some(1 << 40)), 4096);
        // unknown: nothing changes
        assert_eq!(relief_context(&s, 4096, chunk, 0, None), 4096);
        // the largest page multiple whose full cache is at most half of available + held
        let held = s.full_bytes(1024, chunk);
        let available = s.full_bytes(2048, chunk) * 2 - held + 1;
        let c = relief_context(&s, 4096, chunk, held, Some(available));
        assert_eq!(c, 2048);
        assert!(s.full_bytes(c, chunk) <= (available + held) / 2);
        assert!(s.full_bytes(c + PAGE_SIZE, chunk) > (available + held) / 2);
        // nothing left: the floor, and never above the current context
        assert_eq!(
            relief_context(&s, 4096, chunk, 0, Some(0)),
            MIN_USEFUL_CONTEXT
        );
        assert_eq!(relief_context(&s, 300, chunk, 0, Some(0)), 300);
    }

    #[test]
    fn the_sentence_says_what_changed() {
        let mut r = MemoryRelief {
            draft_tokens_dropped: 3,
            scratch_sessions_closed: 0,
            context_before: 4096,
            context_after: 1024,
            kv_bytes_before: 0,
            kv_bytes_after: 0,
            tokens_kept: 0,
            available_bytes: Some(1),
        };
        assert!(
            r.sentence().contains("now 1024 tokens (was 4096)"),
            "{}",
            r.sentence()
        );
        r.context_after = 4096;
        assert!(r.sentence().contains("untouched"), "{}", r.sentence());
    }
}
