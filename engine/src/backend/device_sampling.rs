//! The sampler chain the fused decode steps run on the GPU (CUDA's `decode.cu`, Metal's
//! `decode.metal`: the `penalties`, `top_candidates` and `pick` kernels), and which settings
//! it covers; the others sample on the host.
//!
//! Plain Rust, so its rules are tested on every build; only GPU builds use it.
#![cfg_attr(
    not(any(feature = "cuda", feature = "metal", feature = "metal-emulated")),
    allow(dead_code)
)]

/// Candidates kept per block and at most in total by the device sampler (`TOPK_MAX`).
pub(crate) const TOPK_MAX: usize = 64;
/// Blocks `top_candidates` splits the vocabulary into, each keeping its best `top_k`.
pub(crate) const TOP_BLOCKS: u32 = 64;
/// Uniform draws uploaded at a time for the sampler chain.
pub(crate) const DRAWS: usize = 256;
/// Recent tokens the device keeps for the penalties: longer windows sample on the host.
pub(crate) const PENALTY_WINDOW_MAX: usize = 1024;

/// The sampler settings the device runs (`sampling::SamplingParams`, checked by
/// [`DeviceSampling::of`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct DeviceSampling {
    pub temperature: f32,
    pub top_k: usize,
    pub top_p: f32,
    pub min_p: f32,
    pub repetition_penalty: f32,
    pub presence_penalty: f32,
    pub penalty_window: usize,
}

impl DeviceSampling {
    /// The chain of `params` when the device can run it: top-k between 1 and [`TOPK_MAX`]
    /// (greedy needs none) and a penalty window of at most [`PENALTY_WINDOW_MAX`] tokens.
    pub fn of(p: &crate::sampling::SamplingParams) -> Option<Self> {
        let greedy = p.temperature <= 0.0;
        if !greedy && (p.top_k == 0 || p.top_k > TOPK_MAX) {
            return None;
        }
        if p.penalty_window > PENALTY_WINDOW_MAX {
            return None;
        }
        Some(DeviceSampling {
            temperature: p.temperature,
            top_k: if greedy { 1 } else { p.top_k },
            top_p: p.top_p,
            min_p: p.min_p,
            repetition_penalty: p.repetition_penalty,
            presence_penalty: p.presence_penalty,
            penalty_window: p.penalty_window,
        })
    }

    pub fn penalties(&self) -> bool {
        self.repetition_penalty != 1.0 || self.presence_penalty != 0.0
    }

    /// What a captured CUDA graph depends on.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub fn key(&self) -> [u32; 7] {
        [
            self.temperature.to_bits(),
            self.top_k as u32,
            self.top_p.to_bits(),
            self.min_p.to_bits(),
            self.repetition_penalty.to_bits(),
            self.presence_penalty.to_bits(),
            self.penalty_window as u32,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::{DeviceSampling, PENALTY_WINDOW_MAX, TOPK_MAX};
    use crate::sampling::SamplingParams;

    #[test]
    fn greedy_runs_on_the_device_as_one_candidate() {
        let d = DeviceSampling::of(&SamplingParams::greedy()).expect("greedy is covered");
        assert_eq!(d.top_k, 1);
    }

    #[test]
    fn sampling_runs_on_the_device_only_within_its_limits() {
        let mut p = SamplingParams::greedy();
        p.temperature = 0.8;
        p.top_k = 40;
        assert_eq!(DeviceSampling::of(&p).map(|d| d.top_k), Some(40));
        p.top_k = 0; // the whole vocabulary: more candidates than the device keeps
        assert!(DeviceSampling::of(&p).is_none());
        p.top_k = TOPK_MAX + 1;
        assert!(DeviceSampling::of(&p).is_none());
        p.top_k = TOPK_MAX;
        p.penalty_window = PENALTY_WINDOW_MAX + 1;
        assert!(DeviceSampling::of(&p).is_none());
    }

    #[test]
    fn penalties_and_the_graph_key_follow_the_settings() {
        let mut p = SamplingParams::greedy();
        p.repetition_penalty = 1.0;
        p.presence_penalty = 0.0;
        let plain = DeviceSampling::of(&p).expect("covered");
        assert!(!plain.penalties());
        p.repetition_penalty = 1.1;
        let penalized = DeviceSampling::of(&p).expect("covered");
        assert!(penalized.penalties());
        assert_ne!(plain.key(), penalized.key());
        assert_eq!(
            plain.key(),
            DeviceSampling::of(&SamplingParams {
                repetition_penalty: 1.0,
                ..p
            })
            .expect("covered")
            .key()
        );
    }
}
