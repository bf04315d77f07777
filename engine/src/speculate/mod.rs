//! Speculative decoding: draft a few tokens cheaply, check them all in one batched pass of the
//! model (the prompt path), keep the longest prefix the model agrees with plus the model's own
//! next token, and roll the KV cache back over the rest. A decode step reads every weight once
//! per token; the check reads them once for the whole draft, so each agreed token saves most
//! of a step (Leviathan, Kalman, Matias, "Fast Inference from Transformers via Speculative
//! Decoding", 2023; Chen et al., "Accelerating Large Language Model Decoding with Speculative
//! Sampling", 2023).
//!
//! Never a different answer: each drafted position is decided as a decode step would decide
//! it — the sampler's own distribution (penalties, top-k, top-p, min-p, temperature), and with
//! sampling the same uniform draw, the next of the seeded generator's, that the step would
//! have taken — and the draft is kept only when that token is the drafted one ([`accept`]).
//! For a draft that proposes one token for sure this is the standard acceptance rule (kept
//! with probability `p(d)`, otherwise a token from `p` without `d`), and it is more: each
//! emitted token consumes exactly one draw, in order, as without speculation, so greedy *and*
//! seeded sampled output are the same token for token, whatever was drafted or when.
//!
//! Token for token also means bit for bit: llama.cpp's x86 kernels sum a batch's rows in
//! another order than a row alone, so the check runs every row through the one-row kernels
//! and attention ([`crate::model::Output::AllAsDecode`], [`crate::cpu::RowSums::AsOneRow`]),
//! reading each weight once for all of them. That holds on the host backend; the candle
//! backend (a GPU's generic path) and the fused GPU decoders do not speculate yet.
//!
//! The drafts come from [`lookup`]: n-grams of the session's own tokens (the prompt, the
//! history, a document, tool results), which is what summaries, quotes and regenerated replies
//! repeat (Saxena, "Prompt Lookup Decoding", 2023; llama.cpp `common/ngram-cache`); or from
//! [`mtp`]: Gemma 4's multi-token-prediction assistant, a few small blocks that read the
//! model's own hidden state and KV cache. How long drafts are and when drafting rests, for
//! both: [`control`].

mod check;
pub mod control;
pub mod lookup;
pub mod mtp;

pub use control::MAX_DRAFT;

use serde::{Deserialize, Serialize};

use crate::sampling::{Choice, pick};

/// Whether and how a generation speculates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Speculation {
    /// One token per pass.
    Off,
    /// [`Speculation::Mtp`] when an assistant is loaded beside the model, else
    /// [`Speculation::Lookup`]: what Gemma 4's assistants are made for where there is one
    /// (Google reports 1.6-2.2× decode on phones' GPUs), n-grams where there is not.
    #[default]
    Auto,
    /// Drafts from n-grams of the session's own tokens (resting where checks do not pay).
    Lookup,
    /// [`Speculation::Lookup`] that never rests for the cost of its checks, only for refused
    /// drafts: its drafting does not depend on timing (tests that need the same checks on
    /// every machine).
    #[doc(hidden)]
    #[serde(rename = "lookup-untimed")]
    LookupUntimed,
    /// Drafts from the model's Gemma 4 multi-token-prediction assistant (`mtp`): needs one
    /// loaded beside the model (`EngineConfig::assistant_path`).
    Mtp,
    /// [`Speculation::Mtp`] that never rests for the cost of its checks (tests).
    #[doc(hidden)]
    #[serde(rename = "mtp-untimed")]
    MtpUntimed,
}

impl Speculation {
    pub fn as_str(self) -> &'static str {
        match self {
            Speculation::Off => "off",
            Speculation::Auto => "auto",
            Speculation::Lookup => "lookup",
            Speculation::LookupUntimed => "lookup-untimed",
            Speculation::Mtp => "mtp",
            Speculation::MtpUntimed => "mtp-untimed",
        }
    }
}

impl std::str::FromStr for Speculation {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "off" => Ok(Speculation::Off),
            "auto" => Ok(Speculation::Auto),
            "lookup" => Ok(Speculation::Lookup),
            "mtp" => Ok(Speculation::Mtp),
            other => Err(format!(
                "unknown speculation `{other}` (expected auto, off, lookup or mtp)"
            )),
        }
    }
}

/// Where a generation's drafts come from, and the control of their length and rests.
#[derive(Debug, Clone)]
pub(crate) enum Drafter {
    Lookup(lookup::PromptLookup),
    /// The assistant's chain (`mtp`), from the hidden state the last token was chosen from.
    Mtp(control::DraftControl),
}

impl Drafter {
    pub fn control(&self) -> &control::DraftControl {
        match self {
            Drafter::Lookup(l) => &l.control,
            Drafter::Mtp(c) => c,
        }
    }

    pub fn control_mut(&mut self) -> &mut control::DraftControl {
        match self {
            Drafter::Lookup(l) => &mut l.control,
            Drafter::Mtp(c) => c,
        }
    }
}

/// Check drafted token `draft` against the distribution the model gives for its position:
/// the token a decode step would emit there (the argmax, or the pick of the step's uniform
/// `draw`); `Ok(())` when it is the draft, else `Err(that token)`.
pub(crate) fn accept(
    choice: &Choice,
    draft: u32,
    draw: &mut dyn FnMut() -> f32,
) -> Result<(), u32> {
    let token = match choice {
        Choice::Greedy(best) => *best,
        Choice::Weighted(cands) => pick(cands, draw()),
    };
    if token == draft { Ok(()) } else { Err(token) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_keeps_only_the_argmax() {
        let mut never = || panic!("greedy draws nothing");
        assert_eq!(accept(&Choice::Greedy(7), 7, &mut never), Ok(()));
        assert_eq!(accept(&Choice::Greedy(7), 8, &mut never), Err(7));
    }

    /// A check emits what a decode step would have with the same draw, and takes one draw.
    #[test]
    fn a_check_emits_the_step_s_token_for_the_same_draw() {
        let p = vec![(3u32, 0.5f32), (1, 0.3), (4, 0.15), (9, 0.05)];
        for u in [0.0f32, 0.2, 0.5, 0.79, 0.81, 0.96, 0.999] {
            let step = pick(&p, u);
            for draft in [3u32, 1, 4, 9, 42] {
                let mut draws = 0;
                let out = accept(&Choice::Weighted(p.clone()), draft, &mut || {
                    draws += 1;
                    u
                });
                assert_eq!(draws, 1);
                assert_eq!(out, if draft == step { Ok(()) } else { Err(step) });
            }
        }
    }

    /// The output of draft-then-accept is distributed as the model's distribution, whatever
    /// the draft: the empirical frequencies of 200,000 seeded trials are within 5 standard
    /// errors of `p` for every token, for a likely, an unlikely and an impossible draft.
    #[test]
    fn sampling_keeps_the_model_s_distribution() {
        use rand::{Rng, SeedableRng};
        let p = vec![(3u32, 0.5f32), (1, 0.3), (4, 0.15), (9, 0.05)];
        for draft in [3u32, 9, 42] {
            let mut rng = rand::rngs::StdRng::seed_from_u64(11);
            let mut draw = || rng.random::<f32>();
            let n = 200_000;
            let mut counts = std::collections::HashMap::new();
            for _ in 0..n {
                let out = match accept(&Choice::Weighted(p.clone()), draft, &mut draw) {
                    Ok(()) => draft,
                    Err(t) => t,
                };
                *counts.entry(out).or_insert(0usize) += 1;
            }
            for &(id, pr) in &p {
                let f = *counts.get(&id).unwrap_or(&0) as f64 / n as f64;
                let se = (pr as f64 * (1.0 - pr as f64) / n as f64).sqrt();
                assert!(
                    (f - pr as f64).abs() < 5.0 * se,
                    "draft {draft}: token {id} came {f}, expected {pr}"
                );
            }
            assert!(
                !counts.contains_key(&42),
                "a token outside the distribution came out"
            );
        }
    }
}
