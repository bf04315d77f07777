//! The fused decode step of whichever GPU the model is on: CUDA's (`cuda_decode`, on by
//! default, `COMPANION_CUDA_FUSED=0` turns it off) or Metal's (`metal_decode`, never run on a
//! Mac yet, so off unless `COMPANION_METAL_FUSED=1`), or Metal's on the emulated device
//! (`--device metal-emulated`: candle on the CPU for the rest). All run the same kernels and
//! the same device sampler chain (`device_sampling`); the model calls them through this.

#[cfg(feature = "cuda")]
use super::cuda_decode::CudaDecoder;
use super::device_sampling::DeviceSampling;
#[cfg(any(feature = "metal", feature = "metal-emulated"))]
use super::metal_decode::MetalDecoder;
use crate::error::Result;
use crate::gguf::ModelFile;
use crate::kv_cache::KvCache;
use crate::model::Model;

#[derive(Debug)]
pub(crate) enum FusedDecoder {
    #[cfg(feature = "cuda")]
    Cuda(CudaDecoder),
    #[cfg(feature = "metal")]
    Metal(MetalDecoder<super::metal_decode::apple::Apple>),
    #[cfg(feature = "metal-emulated")]
    MetalEmulated(MetalDecoder<super::metal_decode::emulated::Emulated>),
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
            #[cfg(feature = "metal")]
            candle_core::Device::Metal(_)
                if switch("COMPANION_METAL_FUSED").as_deref() == Some("1") =>
            {
                // never run on a Mac yet: a failure here (the shader compiler's, say) leaves the
                // generic path running rather than failing the load
                match super::metal_decode::apple::decoder(model, file) {
                    Ok(d) => Ok(d.map(FusedDecoder::Metal)),
                    Err(e) => {
                        tracing::warn!(error = %e, "the fused Metal decode did not start; generic path");
                        Ok(None)
                    }
                }
            }
            _ => {
                let _ = switch;
                Ok(None)
            }
        }
    }

    /// Metal's fused decoder on the emulated device, for `model` on the CPU device with the
    /// candle backend, or `None` when the kernels do not cover the model.
    #[cfg(feature = "metal-emulated")]
    pub fn emulated_metal(model: &Model, file: &ModelFile) -> Result<Option<Self>> {
        Ok(super::metal_decode::emulated::decoder(model, file)?.map(FusedDecoder::MetalEmulated))
    }

    pub fn kernels_per_token(&self) -> usize {
        match self {
            #[cfg(feature = "cuda")]
            FusedDecoder::Cuda(d) => d.kernels_per_token(),
            #[cfg(feature = "metal")]
            FusedDecoder::Metal(d) => d.kernels_per_token(),
            #[cfg(feature = "metal-emulated")]
            FusedDecoder::MetalEmulated(d) => d.kernels_per_token(),
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
            #[cfg(feature = "metal")]
            FusedDecoder::Metal(d) => d.begin(history, sampling, draws),
            #[cfg(feature = "metal-emulated")]
            FusedDecoder::MetalEmulated(d) => d.begin(history, sampling, draws),
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
            #[cfg(feature = "metal")]
            FusedDecoder::Metal(d) => d.step(cache, token, step, sampling, draws),
            #[cfg(feature = "metal-emulated")]
            FusedDecoder::MetalEmulated(d) => d.step(cache, token, step, sampling, draws),
        }
    }

    pub fn logits(&self) -> Result<Vec<f32>> {
        match self {
            #[cfg(feature = "cuda")]
            FusedDecoder::Cuda(d) => d.logits(),
            #[cfg(feature = "metal")]
            FusedDecoder::Metal(d) => d.logits(),
            #[cfg(feature = "metal-emulated")]
            FusedDecoder::MetalEmulated(d) => d.logits(),
        }
    }
}
