//! The batched check of a draft: one forward step over the last token and the drafted ones,
//! every row computed as a decode step at its position computes it, then the acceptance rule
//! row by row, and the refused rows rolled back out of the cache.

use super::accept;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::model::{Hidden, Output};
use crate::sampling::Sampler;
use crate::session::Session;

/// What a check decided.
#[derive(Debug, Clone)]
pub(crate) struct Checked {
    /// Drafted tokens kept (their keys stay in the cache).
    pub kept: usize,
    /// The token after them: the model's own, not yet in the cache.
    pub next: u32,
    /// The hidden state `next` was chosen from (an assistant drafts from it, `mtp`).
    pub next_hidden: Hidden,
}

impl Engine {
    /// Check `draft` after `last` (the token just emitted, not yet in the cache; `history`
    /// ends with it). The cache keeps `last` and the kept drafts: a refused draft's keys are
    /// rolled back (a sliding ring holds `window + chunk` slots, so the check overwrote no key
    /// a kept position needs; see `kv_cache`).
    pub(crate) fn check_draft(
        &self,
        session: &mut Session,
        sampler: &mut Sampler,
        history: &[u32],
        last: u32,
        draft: &[u32],
    ) -> Result<Checked> {
        let before = session.tokens().len();
        let mut batch = Vec::with_capacity(draft.len() + 1);
        batch.push(last);
        batch.extend_from_slice(draft);
        let hidden = session.check(&self.model, &batch)?;
        let mut rows = self.model.logits_of(&hidden, Output::AllAsDecode)?;
        let mut seen = history.to_vec();
        let mut kept = 0;
        let mut refused = None;
        for (logits, &d) in rows.iter_mut().zip(draft) {
            let choice = sampler.distribution(logits, &seen);
            match accept(&choice, d, &mut || sampler.draw()) {
                Ok(()) => {
                    kept += 1;
                    seen.push(d);
                }
                Err(token) => {
                    refused = Some(token);
                    break;
                }
            }
        }
        let next = match refused {
            Some(token) => token,
            // every draft kept: the model's own next token comes from the last row
            None => {
                let logits = rows
                    .last_mut()
                    .ok_or_else(|| Error::InvalidArgument("no hidden state".into()))?;
                sampler.sample(logits, &seen)
            }
        };
        let next_hidden = hidden.row(kept)?;
        session.truncate(&self.model, before + 1 + kept)?;
        Ok(Checked {
            kept,
            next,
            next_hidden,
        })
    }
}
