//! Prefill while the user types. Each draft is rendered as the continuation of the user's
//! turn (the conversation so far, then an open `<start_of_turn>user` holding the draft); the
//! session keeps the longest common token prefix with it, drops the rest and prefills only the
//! new tail, in small chunks. Once a draft is in, the tokens `send` will add (the end of the
//! user's turn, the start of the model's) are prefilled after it too, so that on send the whole
//! prompt is cached with its last hidden state and the first token is sampled at once
//! (`generate` reuses the cache through `Session::sync_to`); the next edit drops them again.
//!
//! Keystrokes come in bursts, so drafts never queue: the handle keeps only the latest in a
//! [`DraftSlot`] and bumps a generation counter; the engine thread takes whatever is latest
//! when it gets to it and, between chunks, abandons a draft whose generation is no longer
//! current. What it had prefilled stays cached and serves the next draft's common prefix
//! (llama.cpp's server reuses a slot's cached prefix across requests the same way).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::engine::Engine;
use crate::error::Result;
use crate::session::Session;
use crate::tokenizer::ChatMessage;

/// What one draft prefill did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DraftOutcome {
    /// Tokens of the rendered draft.
    pub tokens: usize,
    /// Tokens already cached and kept.
    pub reused: usize,
    /// Tokens prefilled now.
    pub prefilled: usize,
    /// A newer draft (or another request) made this one stale before it was fully prefilled.
    pub superseded: bool,
}

impl Engine {
    /// Bring `session` to `history` plus an open user turn holding `draft`, prefilling the new
    /// tail in chunks of [`Engine::draft_chunk`] and giving up between chunks once `stale`
    /// returns true. A draft that would not leave room for a reply is refused.
    pub fn prefill_draft(
        &self,
        session: &mut Session,
        history: &[ChatMessage],
        draft: &str,
        stale: &dyn Fn() -> bool,
    ) -> Result<DraftOutcome> {
        self.prefill_draft_in_chunks(session, history, draft, self.draft_chunk(), stale)
    }

    /// [`Self::prefill_draft`] with another chunk size: a conversation being resumed has a
    /// whole history to prefill, where small typing-sized chunks would waste throughput.
    pub fn prefill_draft_in_chunks(
        &self,
        session: &mut Session,
        history: &[ChatMessage],
        draft: &str,
        chunk: usize,
        stale: &dyn Fn() -> bool,
    ) -> Result<DraftOutcome> {
        let chunk = chunk.max(1);
        // a history with pictures reuses them where the session holds them
        // (`Session::reusable_prefix`); text alone is one part
        let parts = self
            .tokenizer()
            .encode_open_user_turn_parts(history, draft)?;
        let done = self.prefill_parts_until(session, &parts, chunk, false, stale)?;
        let ids = done.held;
        if !done.superseded {
            // Speculatively also prefill what `send` will add — the end of the user's turn and
            // the start of the model's — so that on send the prompt is entirely cached and the
            // first token is sampled at once. The next draft edit truncates these few tokens
            // away again (within the ring: no re-prefill).
            let mut sent = history.to_vec();
            sent.push(ChatMessage::user(draft.to_string()));
            let full = self.tokenizer().encode_chat_parts(&sent, true)?;
            // compared with one placeholder for both: the pictures are the same ones
            let per_image = self.tokens_per_image();
            let full_ids = crate::vision::held_ids(&full, per_image, 0);
            let draft_ids = crate::vision::held_ids(&parts, per_image, 0);
            if full_ids.len() < session.context() && full_ids.starts_with(&draft_ids) {
                self.prefill_parts_until(session, &full, chunk, false, stale)?;
            }
        }
        Ok(DraftOutcome {
            tokens: ids.len(),
            reused: done.reused,
            prefilled: done.processed,
            superseded: done.superseded,
        })
    }
}

/// A draft waiting for the engine thread.
#[derive(Debug)]
pub(crate) struct Draft {
    pub history: Vec<ChatMessage>,
    pub text: String,
    pub generation: u64,
    /// Prefill in the engine's full prefill chunks (a conversation being resumed) rather than
    /// its small draft chunks (typing).
    pub full_chunks: bool,
}

/// The latest draft, shared by the handles and the engine thread.
#[derive(Debug, Default)]
pub(crate) struct DraftSlot {
    latest: Mutex<Option<Draft>>,
    /// Bumped by every new draft and by every request that replaces the session's content.
    generation: AtomicU64,
    /// A wake-up message is in the engine's queue and has not been handled yet.
    wake_pending: AtomicBool,
}

impl DraftSlot {
    fn latest(&self) -> MutexGuard<'_, Option<Draft>> {
        // A panic elsewhere cannot leave an `Option` half-written: the value is still good.
        self.latest.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Store a newer draft. Returns whether the engine needs a wake-up message: not when one
    /// is already queued, since the engine reads the slot only when it handles it.
    pub fn put(&self, history: Vec<ChatMessage>, text: String, full_chunks: bool) -> bool {
        {
            let mut latest = self.latest();
            let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
            *latest = Some(Draft {
                history,
                text,
                generation,
                full_chunks,
            });
        }
        !self.wake_pending.swap(true, Ordering::SeqCst)
    }

    /// Drop a waiting draft and make a running one stale (a send, a reset, a restore).
    pub fn supersede(&self) {
        let mut latest = self.latest();
        self.generation.fetch_add(1, Ordering::SeqCst);
        *latest = None;
    }

    /// Engine side: the latest draft, if any. Clears the wake-up flag first, so that a draft
    /// stored after this call sends a new wake-up.
    pub fn take(&self) -> Option<Draft> {
        self.wake_pending.store(false, Ordering::SeqCst);
        self.latest().take()
    }

    pub fn is_stale(&self, generation: u64) -> bool {
        self.generation.load(Ordering::SeqCst) != generation
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_drafts_wakes_once_and_keeps_the_last() {
        let slot = DraftSlot::default();
        let wakes = (0..20)
            .filter(|i| slot.put(vec![], format!("draft {i}"), false))
            .count();
        assert_eq!(wakes, 1);
        let d = slot.take().expect("a draft");
        assert_eq!(d.text, "draft 19");
        assert!(!slot.is_stale(d.generation));
        assert!(slot.take().is_none());
        // after the engine took it, the next keystroke wakes it again and makes it stale
        assert!(slot.put(vec![], "draft 20".into(), false));
        assert!(slot.is_stale(d.generation));
    }

    #[test]
    fn supersede_drops_the_waiting_draft_and_stales_the_running_one() {
        let slot = DraftSlot::default();
        slot.put(vec![], "a".into(), false);
        let running = slot.take().expect("a draft");
        slot.put(vec![], "b".into(), false);
        slot.supersede();
        assert!(slot.is_stale(running.generation));
        assert!(slot.take().is_none());
    }
}
