//! The real Metal device behind [`MetalDevice`] (objc2-metal): candle's device and buffers,
//! the no-copy buffer over the mapped model file, decode.metal compiled when the model loads,
//! and a command buffer per step.

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;

use candle_core::{Device, Storage, Tensor};
use objc2::Message;
use objc2::rc::{Retained, autoreleasepool};
use objc2::runtime::ProtocolObject;
use objc2_foundation::NSString;
use objc2_metal::{
    MTLBuffer, MTLCommandBuffer, MTLCommandBufferStatus, MTLCommandEncoder, MTLCommandQueue,
    MTLCompileOptions, MTLComputeCommandEncoder, MTLComputePipelineState, MTLDevice, MTLGPUFamily,
    MTLLibrary, MTLResourceOptions, MTLResourceUsage, MTLSize,
};

use super::encoding::{At, ComputeEncoder, GpuBuffer, GpuPipeline, MetalDevice};
use super::{MetalDecoder, SOURCE, metal_err};
use crate::error::Result;
use crate::gguf::ModelFile;
use crate::model::Model;

pub(crate) type Buf = Retained<ProtocolObject<dyn MTLBuffer>>;
pub(crate) type Pipeline = Retained<ProtocolObject<dyn MTLComputePipelineState>>;

impl GpuBuffer for Buf {
    fn address(&self) -> u64 {
        self.gpuAddress()
    }

    fn same(&self, other: &Self) -> bool {
        Retained::as_ptr(self) == Retained::as_ptr(other)
    }

    fn contents(&self) -> (*mut u8, usize) {
        (MTLBuffer::contents(&**self).as_ptr().cast(), self.length())
    }
}

impl GpuPipeline for Pipeline {
    fn max_threads(&self) -> usize {
        self.maxTotalThreadsPerThreadgroup()
    }

    fn execution_width(&self) -> usize {
        self.threadExecutionWidth()
    }
}

fn mtl_size([width, height, depth]: [usize; 3]) -> MTLSize {
    MTLSize {
        width,
        height,
        depth,
    }
}

/// A compute command encoder of one step's command buffer.
pub(crate) struct Encoder(Retained<ProtocolObject<dyn MTLComputeCommandEncoder>>);

impl ComputeEncoder for Encoder {
    type Buffer = Buf;
    type Pipeline = Pipeline;

    fn set_pipeline(&mut self, p: &Pipeline) {
        self.0.setComputePipelineState(p);
    }

    fn set_buffer(&mut self, index: usize, buffer: Option<(&Buf, usize)>) {
        match buffer {
            // SAFETY: the buffer is alive for the encoder's life (the decoder or the cache
            // holds it); offsets come from candle's layouts or the file's tensor table
            Some((b, offset)) => unsafe { self.0.setBuffer_offset_atIndex(Some(b), offset, index) },
            // SAFETY: the kernels test the matching `has_*` flag before touching an unset buffer
            None => unsafe { self.0.setBuffer_offset_atIndex(None, 0, index) },
        }
    }

    fn set_bytes<T: Copy>(&mut self, index: usize, value: &T) {
        let ptr = NonNull::from(value).cast::<c_void>();
        // SAFETY: Metal copies the bytes during the call (`setBytes:length:atIndex:`); `T` is
        // one of the `repr(C)` twins of decode.metal's argument structs
        unsafe {
            self.0
                .setBytes_length_atIndex(ptr, std::mem::size_of::<T>(), index)
        };
    }

    fn set_threadgroup_memory_length(&mut self, length: usize, index: usize) {
        // SAFETY: within `maxThreadgroupMemoryLength` (checked when the decoder is made)
        unsafe { self.0.setThreadgroupMemoryLength_atIndex(length, index) };
    }

    fn dispatch_threadgroups(&mut self, groups: [usize; 3], threads: [usize; 3]) {
        self.0
            .dispatchThreadgroups_threadsPerThreadgroup(mtl_size(groups), mtl_size(threads));
    }

    fn use_resource(&mut self, buffer: &Buf, write: bool) {
        let usage = if write {
            MTLResourceUsage::Read | MTLResourceUsage::Write
        } else {
            MTLResourceUsage::Read
        };
        self.0
            .useResource_usage(ProtocolObject::from_ref(&**buffer), usage);
    }
}

/// candle's Metal device, its command queue for the decode, and the compiled library.
pub(crate) struct Apple {
    candle: candle_core::MetalDevice,
    queue: Retained<ProtocolObject<dyn MTLCommandQueue>>,
    library: Retained<ProtocolObject<dyn MTLLibrary>>,
}

impl MetalDevice for Apple {
    type Buffer = Buf;
    type Pipeline = Pipeline;
    type Encoder = Encoder;
    const NAME: &'static str = "Metal";

    fn shared_buffer(&self, bytes: usize) -> Result<Buf> {
        let device: &ProtocolObject<dyn MTLDevice> = self.candle.device().as_ref();
        device
            .newBufferWithLength_options(bytes.max(16), MTLResourceOptions::StorageModeShared)
            .ok_or_else(|| metal_err("allocating the decode buffers", "out of memory"))
    }

    fn pipeline(&self, name: &str) -> Result<Pipeline> {
        let device: &ProtocolObject<dyn MTLDevice> = self.candle.device().as_ref();
        let function = self
            .library
            .newFunctionWithName(&NSString::from_str(name))
            .ok_or_else(|| metal_err(&format!("kernel {name}"), "not in the library"))?;
        device
            .newComputePipelineStateWithFunction_error(&function)
            .map_err(|e| metal_err(&format!("kernel {name}"), e.localizedDescription()))
    }

    fn max_threadgroup_memory(&self) -> usize {
        let device: &ProtocolObject<dyn MTLDevice> = self.candle.device().as_ref();
        device.maxThreadgroupMemoryLength()
    }

    fn tensor(&self, t: &Tensor) -> Option<At<Buf>> {
        let (storage, layout) = t.storage_and_layout();
        if !layout.is_contiguous() {
            return None;
        }
        let Storage::Metal(s) = &*storage else {
            return None;
        };
        let size = match t.dtype() {
            candle_core::DType::F32 => 4,
            candle_core::DType::F16 => 2,
            _ => return None,
        };
        let raw: &ProtocolObject<dyn MTLBuffer> = s.buffer().as_ref();
        Some(At {
            buffer: raw.retain(),
            offset: layout.start_offset() * size,
        })
    }

    fn before_step(&self) -> Result<()> {
        // candle's queue may still be writing the cache (the prefill): ours runs after it
        self.candle
            .flush_and_wait_current()
            .map_err(|e| metal_err("waiting for the prefill", e))
    }

    fn run(&self, encode: impl FnOnce(&mut Encoder)) -> Result<()> {
        // the command buffer and encoder come autoreleased: drain them every step, since the
        // engine thread has no pool of its own
        autoreleasepool(|_| {
            let command = self
                .queue
                .commandBuffer()
                .ok_or_else(|| metal_err("a command buffer", "none available"))?;
            let encoder = command
                .computeCommandEncoder()
                .ok_or_else(|| metal_err("a compute encoder", "none available"))?;
            let mut encoder = Encoder(encoder);
            encode(&mut encoder);
            encoder.0.endEncoding();
            command.commit();
            command.waitUntilCompleted();
            if command.status() != MTLCommandBufferStatus::Completed {
                let why = command.error().map_or_else(
                    || "no error given".to_string(),
                    |e| e.localizedDescription().to_string(),
                );
                return Err(metal_err("the decode step failed on the GPU", why));
            }
            Ok(())
        })
    }
}

/// The fused decoder for `model` on its Metal device, reading the weights from `file`'s
/// mapping, or `None` when the model or the GPU needs what it lacks.
pub(crate) fn decoder(model: &Model, file: &ModelFile) -> Result<Option<MetalDecoder<Apple>>> {
    let Device::Metal(candle) = model.device() else {
        return Ok(None);
    };
    let device: &ProtocolObject<dyn MTLDevice> = candle.device().as_ref();
    // Apple7 (M1, A14 and later): Apple GPUs, whose SIMD-groups are 32 wide as the kernels
    // assume (AMD and Intel Macs with Metal 3 need not be); Metal 3 for `gpuAddress`
    if !device.supportsFamily(MTLGPUFamily::Apple7) || !device.supportsFamily(MTLGPUFamily::Metal3)
    {
        tracing::info!("the fused Metal decode needs an Apple GPU with Metal 3; generic path");
        return Ok(None);
    }
    if !super::covers(model, device.maxThreadgroupMemoryLength()) {
        return Ok(None);
    }

    // the whole mapped file as one buffer, rounded up to whole pages (the mapping is)
    let mapping = file.mapping();
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    let length = mapping.len().next_multiple_of(page);
    if length > device.maxBufferLength() {
        tracing::info!("the model file is larger than one Metal buffer; generic path");
        return Ok(None);
    }
    let Some(start) = NonNull::new(mapping.as_ptr() as *mut c_void) else {
        return Ok(None);
    };
    // SAFETY: the mapping is page-aligned, spans `length` bytes of whole pages, is
    // read-only here as in the kernels, and outlives the buffer (the decoder drops its
    // `file_buffer` before its `_mapping`); no deallocator, since the mapping owns the memory.
    let file_buffer = unsafe {
        device.newBufferWithBytesNoCopy_length_options_deallocator(
            start,
            length,
            MTLResourceOptions::StorageModeShared,
            None,
        )
    }
    .ok_or_else(|| metal_err("mapping the model file", "newBufferWithBytesNoCopy failed"))?;

    // Fast math (Metal's default) may assume no infinities, but the kernels use -INFINITY
    // as "no key yet" (attention_split, whose splits start empty in the first steps) and
    // `isfinite`; CUDA's --use_fast_math makes no such assumption. `mathMode` would say
    // "relaxed" but needs macOS 15 / iOS 18.
    let options = MTLCompileOptions::new();
    #[allow(deprecated)] // `mathMode`, its replacement, needs macOS 15 / iOS 18 (above)
    options.setFastMathEnabled(false);
    let library = device
        .newLibraryWithSource_options_error(&NSString::from_str(SOURCE), Some(&options))
        .map_err(|e| metal_err("compiling decode.metal", e.localizedDescription()))?;
    let queue = device
        .newCommandQueue()
        .ok_or_else(|| metal_err("a command queue", "none available"))?;
    let apple = Apple {
        candle: candle.clone(),
        queue,
        library,
    };
    MetalDecoder::new(apple, model, file_buffer, Arc::clone(&mapping))
}
