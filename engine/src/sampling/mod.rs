//! The sampler chain, in llama.cpp's default order (`common/sampling.cpp`): repetition and
//! presence penalties over a window of recent tokens → top-k → top-p → min-p → temperature →
//! a draw from a seeded RNG. Temperature 0 (or below) is greedy argmax on the raw logits.
//! A [`TokenConstraint`] (a grammar, see [`mask`]) masks the logits before the chain.

pub mod mask;

pub use mask::{ConstraintError, TokenConstraint, apply_mask};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SamplingParams {
    pub temperature: f32,
    pub top_k: usize,
    pub top_p: f32,
    pub min_p: f32,
    /// Multiplicative penalty for tokens seen in the last `penalty_window` tokens (1.0: off).
    pub repetition_penalty: f32,
    /// Subtracted from the logit of tokens seen in the window (0.0: off).
    pub presence_penalty: f32,
    pub penalty_window: usize,
    pub seed: u64,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.8,
            top_k: 64,
            top_p: 0.95,
            min_p: 0.05,
            repetition_penalty: 1.0,
            presence_penalty: 0.0,
            penalty_window: 64,
            seed: 42,
        }
    }
}

impl SamplingParams {
    pub fn greedy() -> Self {
        SamplingParams {
            temperature: 0.0,
            ..Default::default()
        }
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::InvalidArgument(m.to_string()));
        if !self.temperature.is_finite() {
            return bad("temperature must be a finite number");
        }
        if !(0.0..=1.0).contains(&self.top_p) {
            return bad("top-p must be between 0 and 1");
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return bad("min-p must be between 0 and 1");
        }
        if !(self.repetition_penalty.is_finite() && self.repetition_penalty > 0.0) {
            return bad("the repetition penalty must be a positive number");
        }
        if !self.presence_penalty.is_finite() {
            return bad("the presence penalty must be a finite number");
        }
        Ok(())
    }
}

pub struct Sampler {
    params: SamplingParams,
    rng: StdRng,
}

impl Sampler {
    pub fn new(params: SamplingParams) -> Result<Self> {
        params.validate()?;
        Ok(Sampler {
            rng: StdRng::seed_from_u64(params.seed),
            params,
        })
    }

    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// The next uniform draw in [0, 1) of the seeded RNG: what [`Self::sample`] draws for one
    /// token when it samples (the device sampler gets the same sequence).
    pub(crate) fn draw(&mut self) -> f32 {
        self.rng.random()
    }

    /// Choose the next token from `logits`, given the tokens so far (for penalties).
    pub fn sample(&mut self, logits: &mut [f32], history: &[u32]) -> u32 {
        match self.distribution(logits, history) {
            Choice::Greedy(id) => id,
            Choice::Weighted(cands) => {
                let r: f32 = self.rng.random();
                pick(&cands, r)
            }
        }
    }

    /// What [`Self::sample`] draws from: the chain up to the draw (penalties, top-k, top-p,
    /// min-p, temperature), without drawing. Speculative decoding checks a drafted token
    /// against it (`crate::speculate`).
    pub(crate) fn distribution(&self, logits: &mut [f32], history: &[u32]) -> Choice {
        let p = &self.params;
        apply_penalties(logits, history, p);
        if p.temperature <= 0.0 {
            return Choice::Greedy(argmax(logits));
        }
        let mut cands: Vec<(u32, f32)> = logits
            .iter()
            .enumerate()
            .filter(|(_, l)| l.is_finite())
            .map(|(i, &l)| (i as u32, l))
            .collect();
        if cands.is_empty() {
            return Choice::Greedy(argmax(logits));
        }
        // top-k (0: off)
        let k = if p.top_k == 0 {
            cands.len()
        } else {
            p.top_k.min(cands.len())
        };
        if k < cands.len() {
            cands.select_nth_unstable_by(k - 1, |a, b| b.1.total_cmp(&a.1));
            cands.truncate(k);
        }
        cands.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        // softmax over the survivors at temperature 1 for top-p / min-p, as llama.cpp does
        let probs = softmax(cands.iter().map(|c| c.1), 1.0);
        let mut keep = cands.len();
        if p.top_p < 1.0 {
            let mut acc = 0.0;
            for (i, pr) in probs.iter().enumerate() {
                acc += pr;
                if acc >= p.top_p {
                    keep = i + 1;
                    break;
                }
            }
        }
        if p.min_p > 0.0 {
            let threshold = probs[0] * p.min_p;
            keep = keep.min(
                probs
                    .iter()
                    .take_while(|&&pr| pr >= threshold)
                    .count()
                    .max(1),
            );
        }
        cands.truncate(keep.max(1));
        let probs = softmax(cands.iter().map(|c| c.1), p.temperature);
        Choice::Weighted(cands.iter().map(|c| c.0).zip(probs).collect())
    }
}

/// The distribution a token is drawn from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Choice {
    /// Temperature 0: this token, always.
    Greedy(u32),
    /// Tokens with their probabilities (summing to 1), most likely first.
    Weighted(Vec<(u32, f32)>),
}

/// The token at the uniform draw `r` of the cumulative distribution.
pub(crate) fn pick(cands: &[(u32, f32)], r: f32) -> u32 {
    let mut acc = 0.0;
    for &(id, pr) in cands {
        acc += pr;
        if r < acc {
            return id;
        }
    }
    cands.last().map(|c| c.0).unwrap_or(0)
}

fn apply_penalties(logits: &mut [f32], history: &[u32], p: &SamplingParams) {
    if p.repetition_penalty == 1.0 && p.presence_penalty == 0.0 {
        return;
    }
    let window = &history[history.len().saturating_sub(p.penalty_window)..];
    let mut seen = std::collections::HashSet::with_capacity(window.len());
    for &t in window {
        if !seen.insert(t) {
            continue;
        }
        let Some(l) = logits.get_mut(t as usize) else {
            continue;
        };
        // llama.cpp `llama_sampler_penalties_apply`: divide positive logits, multiply negative
        if *l > 0.0 {
            *l /= p.repetition_penalty;
        } else {
            *l *= p.repetition_penalty;
        }
        *l -= p.presence_penalty;
    }
}

pub fn argmax(xs: &[f32]) -> u32 {
    let mut best = 0usize;
    for (i, &x) in xs.iter().enumerate() {
        if x > xs[best] {
            best = i;
        }
    }
    best as u32
}

fn softmax(logits: impl Iterator<Item = f32> + Clone, temperature: f32) -> Vec<f32> {
    let max = logits.clone().fold(f32::NEG_INFINITY, f32::max);
    let exps: Vec<f32> = logits.map(|l| ((l - max) / temperature).exp()).collect();
    let sum: f32 = exps.iter().sum();
    exps.into_iter().map(|e| e / sum).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logits() -> Vec<f32> {
        vec![1.0, 3.0, 2.0, 0.5, 2.9, -1.0]
    }

    #[test]
    fn temperature_zero_is_argmax() {
        let mut s = Sampler::new(SamplingParams::greedy()).unwrap();
        assert_eq!(s.sample(&mut logits(), &[]), 1);
    }

    #[test]
    fn same_seed_same_tokens_and_different_seed_differs() {
        let params = SamplingParams {
            temperature: 1.5,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            ..Default::default()
        };
        let draw = |seed| {
            let mut s = Sampler::new(SamplingParams {
                seed,
                ..params.clone()
            })
            .unwrap();
            (0..64)
                .map(|_| s.sample(&mut logits(), &[]))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
    }

    #[test]
    fn top_k_one_is_greedy() {
        let mut s = Sampler::new(SamplingParams {
            temperature: 2.0,
            top_k: 1,
            ..Default::default()
        })
        .unwrap();
        for _ in 0..20 {
            assert_eq!(s.sample(&mut logits(), &[]), 1);
        }
    }

    #[test]
    fn top_p_keeps_only_the_nucleus() {
        // probabilities ~ [0.5, 0.5, ~0, ...]: top-p 0.5 keeps only the first
        let mut s = Sampler::new(SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 0.4,
            min_p: 0.0,
            ..Default::default()
        })
        .unwrap();
        for _ in 0..20 {
            let mut l = vec![10.0, 9.99, -10.0, -10.0];
            assert_eq!(s.sample(&mut l, &[]), 0);
        }
    }

    #[test]
    fn min_p_drops_unlikely_tokens() {
        let mut s = Sampler::new(SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.5,
            ..Default::default()
        })
        .unwrap();
        for _ in 0..50 {
            // token 1 has prob e^-3 relative to token 0: below half of the top
            let mut l = vec![5.0, 2.0];
            assert_eq!(s.sample(&mut l, &[]), 0);
        }
    }

    #[test]
    fn repetition_penalty_can_change_the_choice() {
        let mut s = Sampler::new(SamplingParams {
            temperature: 0.0,
            repetition_penalty: 2.0,
            ..Default::default()
        })
        .unwrap();
        // token 1 (3.0) halves to 1.5 after being seen; token 4 (2.9) wins
        assert_eq!(s.sample(&mut logits(), &[1]), 4);
    }

    #[test]
    fn invalid_params_are_refused() {
        assert!(
            Sampler::new(SamplingParams {
                top_p: 1.5,
                ..Default::default()
            })
            .is_err()
        );
        assert!(
            Sampler::new(SamplingParams {
                temperature: f32::NAN,
                ..Default::default()
            })
            .is_err()
        );
    }
}
