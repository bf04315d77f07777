//! The emulated Metal device behind [`MetalDevice`] (`backend::metal_emulated`): the model is
//! candle's on the CPU device (its norms, RoPE tables and f16 KV cache are host tensors, which
//! the emulated kernels reach by host address), the weights are read in place from the mapped
//! model file, and each step's dispatches run on the CPU as they are encoded.

use std::cell::Cell;
use std::sync::Arc;

use candle_core::{CpuStorage, Device, InplaceOp1, Layout, Tensor};

use super::encoding::{At, ComputeEncoder, GpuBuffer, GpuPipeline, MetalDevice};
use super::{MetalDecoder, metal_err};
use crate::backend::metal_emulated::{self as emu, Buffer, Encoder, Pipeline};
use crate::error::Result;
use crate::gguf::ModelFile;
use crate::model::Model;

impl GpuBuffer for Buffer {
    fn address(&self) -> u64 {
        Buffer::address(self)
    }

    fn same(&self, other: &Self) -> bool {
        Buffer::same(self, other)
    }

    fn contents(&self) -> (*mut u8, usize) {
        (self.contents_ptr(), self.length())
    }
}

impl GpuPipeline for Pipeline {
    fn max_threads(&self) -> usize {
        Pipeline::max_threads(self)
    }

    fn execution_width(&self) -> usize {
        32
    }
}

impl ComputeEncoder for Encoder {
    type Buffer = Buffer;
    type Pipeline = Pipeline;

    fn set_pipeline(&mut self, p: &Pipeline) {
        Encoder::set_pipeline(self, p);
    }

    fn set_buffer(&mut self, index: usize, buffer: Option<(&Buffer, usize)>) {
        Encoder::set_buffer(self, index, buffer);
    }

    fn set_bytes<T: Copy>(&mut self, index: usize, value: &T) {
        Encoder::set_value(self, index, value);
    }

    fn set_threadgroup_memory_length(&mut self, length: usize, index: usize) {
        Encoder::set_threadgroup_memory(self, index, length);
    }

    fn dispatch_threadgroups(&mut self, groups: [usize; 3], threads: [usize; 3]) {
        Encoder::dispatch(self, groups, threads);
    }

    fn use_resource(&mut self, _buffer: &Buffer, _write: bool) {
        // every buffer is host memory, resident as it is
    }
}

/// The emulated device: a seed for the order threadgroups and threads run in, varied step by
/// step.
pub(crate) struct Emulated {
    seed: u64,
    steps: Cell<u64>,
}

/// Where a CPU tensor's storage is, through an in-place op: the one way candle hands out its
/// storage mutably, which the kernels need for the KV cache they write.
struct Locate(Cell<Option<(*mut u8, usize)>>);

impl InplaceOp1 for Locate {
    fn name(&self) -> &'static str {
        "metal-emulated-locate"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, _layout: &Layout) -> candle_core::Result<()> {
        let found = match storage {
            CpuStorage::F32(v) => Some((v.as_mut_ptr().cast::<u8>(), v.len() * 4)),
            CpuStorage::F16(v) => Some((v.as_mut_ptr().cast::<u8>(), v.len() * 2)),
            _ => None,
        };
        self.0.set(found);
        Ok(())
    }
}

impl MetalDevice for Emulated {
    type Buffer = Buffer;
    type Pipeline = Pipeline;
    type Encoder = Encoder;
    const NAME: &'static str = "emulated Metal";

    fn shared_buffer(&self, bytes: usize) -> Result<Buffer> {
        Ok(Buffer::new(bytes))
    }

    fn pipeline(&self, name: &str) -> Result<Pipeline> {
        Pipeline::new(name)
    }

    fn max_threadgroup_memory(&self) -> usize {
        emu::MAX_THREADGROUP_MEMORY
    }

    fn tensor(&self, t: &Tensor) -> Option<At<Buffer>> {
        if !t.is_contiguous() || !t.device().is_cpu() {
            return None;
        }
        let size = match t.dtype() {
            candle_core::DType::F32 => 4,
            candle_core::DType::F16 => 2,
            _ => return None,
        };
        let offset = t.layout().start_offset() * size;
        let locate = Locate(Cell::new(None));
        t.inplace_op1(&locate).ok()?;
        let (ptr, len) = locate.0.get()?;
        // SAFETY: the storage is the model's (norms, RoPE tables), which outlives its decoder,
        // or the session's KV cache, located again every step after it last grew; the vector
        // is never resized in place, and nothing else touches it while a step runs
        let buffer = unsafe { Buffer::borrowed(ptr, len) };
        Some(At { buffer, offset })
    }

    fn before_step(&self) -> Result<()> {
        Ok(())
    }

    fn run(&self, encode: impl FnOnce(&mut Encoder)) -> Result<()> {
        let step = self.steps.get() + 1;
        self.steps.set(step);
        let mut encoder = Encoder::new(self.seed ^ step.wrapping_mul(0xD1B5_4A32_D192_ED03));
        encode(&mut encoder);
        encoder
            .finish()
            .map_err(|e| metal_err("the decode step failed on the emulated device", e))
    }
}

/// The fused Metal decoder of `model` (candle on the CPU device) on the emulated device, or
/// `None` when the kernels do not cover the model.
pub(crate) fn decoder(model: &Model, file: &ModelFile) -> Result<Option<MetalDecoder<Emulated>>> {
    if !matches!(model.device(), Device::Cpu) {
        return Ok(None);
    }
    if !super::covers(model, emu::MAX_THREADGROUP_MEMORY) {
        return Ok(None);
    }
    let mapping = file.mapping();
    // SAFETY: the mapping is read-only here as in the kernels (the weights are only read), and
    // outlives the buffer (the decoder drops its `file_buffer` before its `_mapping`)
    let file_buffer = unsafe { Buffer::borrowed(mapping.as_ptr().cast_mut(), mapping.len()) };
    let seed = std::env::var("COMPANION_METAL_EMU_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED);
    let device = Emulated {
        seed,
        steps: Cell::new(0),
    };
    MetalDecoder::new(device, model, file_buffer, Arc::clone(&mapping))
}
