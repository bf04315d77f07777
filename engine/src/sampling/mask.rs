//! Token masks from outside the engine: a [`TokenConstraint`] says, before each decode step,
//! which tokens may come next, and hears which one was chosen. The engine knows no grammar:
//! chat's tool-call grammar (llguidance, as llama.cpp's `common/llguidance.cpp` uses it)
//! implements this trait, and the engine only masks logits with what it is given. The mask is
//! applied before the sampler chain, so penalties, top-k/p and temperature work among the
//! allowed tokens only — llama.cpp's order for its grammar sampler.

use std::fmt;

/// A constraint on the tokens of one generation.
pub trait TokenConstraint: Send {
    /// The tokens allowed next, as a bit set: token `t` is allowed when bit `t % 32` of
    /// word `t / 32` is set (llguidance's `SimpleVob` layout). Tokens past the end are not.
    fn allowed(&mut self) -> Result<&[u32], ConstraintError>;

    /// `token` was chosen (it was allowed). `Ok(true)`: the constrained text is complete, and
    /// generation stops after this token.
    fn accept(&mut self, token: u32) -> Result<bool, ConstraintError>;
}

/// The constraint could not go on (its grammar is broken, or nothing is allowed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConstraintError(pub String);

impl fmt::Display for ConstraintError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConstraintError {}

/// Set every logit whose token `allowed` does not contain to −∞. Returns how many tokens
/// remain allowed (0: none, which the caller must treat as an error).
pub fn apply_mask(logits: &mut [f32], allowed: &[u32]) -> usize {
    let mut kept = 0;
    for (word_index, chunk) in logits.chunks_mut(32).enumerate() {
        let word = allowed.get(word_index).copied().unwrap_or(0);
        if word == u32::MAX {
            kept += chunk.len();
            continue;
        }
        for (bit, logit) in chunk.iter_mut().enumerate() {
            if word & (1 << bit) == 0 {
                *logit = f32::NEG_INFINITY;
            } else {
                kept += 1;
            }
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_tokens_become_impossible() {
        let mut logits = vec![1.0f32; 70];
        // allow tokens 3, 33 and 64
        let allowed = [1 << 3, 1 << 1, 1];
        assert_eq!(apply_mask(&mut logits, &allowed), 3);
        for (i, l) in logits.iter().enumerate() {
            assert_eq!(l.is_finite(), [3, 33, 64].contains(&i), "token {i}");
        }
    }

    #[test]
    fn a_short_mask_allows_nothing_past_its_end() {
        let mut logits = vec![0.5f32; 40];
        assert_eq!(apply_mask(&mut logits, &[u32::MAX]), 32);
        assert!(logits[32..].iter().all(|l| *l == f32::NEG_INFINITY));
    }
}
