//! The fused decode step of whichever GPU the model is on: CUDA's (`cuda_decode`, on by
//! default, `COMPANION_CUDA_FUSED=0` turns it off), and the place a second GPU's goes. The
//! model calls it through this.

#[cfg(feature = "cuda")]
use super::cuda_decode::CudaDecoder;
use super::device_sampling::DeviceSampling;
use crate::error::Result;
use crate::gguf::ModelFile;
use crate::kv_cache::KvCache;
use crate::model::Model;

#[derive(Debug)]
pub(crate) enum FusedDecoder {
    #[cfg(feature = "cuda")]
    Cuda(CudaDecoder),
}

impl FusedDecoder {
    /// The fused decoder for `model`'s device, or `None` (the generic path) when there is
    /// none, it is turned off, or the kernels do not cover the model.
    pub fn new(model: &Model, file: &ModelFile) -> Result<Option<Self>> {
        let _ = file;
        let switch = |name: &str| std::env::var(name).ok();
        match model.device() {
            #[cfg(feature = "cuda")]
            candle_core::Device::Cuda(_)
                if switch("COMPANION_CUDA_FUSED").as_deref() != Some("0") =>
            {
                Ok(CudaDecoder::new(model)?.map(FusedDecoder::Cuda))
            }
            _ => {
                let _ = switch;
                Ok(None)
            }
        }
    }

    pub fn kernels_per_token(&self) -> usize {
        match self {
            #[cfg(feature = "cuda")]
            FusedDecoder::Cuda(d) => d.kernels_per_token,
        }
    }

    pub fn begin(
        &mut self,
        history: &[u32],
        sampling: &DeviceSampling,
        draws: &mut dyn FnMut() -> f32,
    ) -> Result<()> {
        match self {
            #[cfg(feature = "cuda")]
            FusedDecoder::Cuda(d) => d.begin(history, sampling, draws),
        }
    }

    pub fn step(
        &mut self,
        cache: &mut KvCache,
        token: u32,
        step: usize,
        sampling: &DeviceSampling,
        draws: &mut dyn FnMut() -> f32,
    ) -> Result<u32> {
        match self {
            #[cfg(feature = "cuda")]
            FusedDecoder::Cuda(d) => d.step(cache, token, step, sampling, draws),
        }
    }

    pub fn logits(&self) -> Result<Vec<f32>> {
        match self {
            #[cfg(feature = "cuda")]
            FusedDecoder::Cuda(d) => d.logits(),
        }
    }
}
