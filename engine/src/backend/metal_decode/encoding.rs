//! The small interface `metal_decode` encodes its work through — Metal's own calls, named as
//! Metal names them — so that which kernel runs, which buffer sits at which index, the
//! argument structs, grid sizes and threadgroup memory lengths are written once: the real
//! device implements it (`apple`, objc2-metal), and so does the emulated one (`emulated`,
//! `backend::metal_emulated`, which runs it on Linux).

use candle_core::Tensor;

use crate::error::Result;

/// `MTLBuffer`: memory the kernels reach by binding or by address.
pub(crate) trait GpuBuffer: Clone {
    /// `gpuAddress` (on the emulated device, a host address).
    fn address(&self) -> u64;
    /// The same buffer object.
    fn same(&self, other: &Self) -> bool;
    /// `contents` (shared storage) and `length`.
    fn contents(&self) -> (*mut u8, usize);
}

/// `MTLComputePipelineState`: one kernel, ready to dispatch.
pub(crate) trait GpuPipeline: Clone {
    /// `maxTotalThreadsPerThreadgroup`.
    fn max_threads(&self) -> usize;
    /// `threadExecutionWidth`.
    fn execution_width(&self) -> usize;
}

/// `MTLComputeCommandEncoder`: bindings persist across dispatches, as Metal's do.
pub(crate) trait ComputeEncoder {
    type Buffer: GpuBuffer;
    type Pipeline: GpuPipeline;
    /// `setComputePipelineState:`.
    fn set_pipeline(&mut self, p: &Self::Pipeline);
    /// `setBuffer:offset:atIndex:`; `None` binds no buffer (a null pointer in the kernel).
    fn set_buffer(&mut self, index: usize, buffer: Option<(&Self::Buffer, usize)>);
    /// `setBytes:length:atIndex:` of one of the `repr(C)` argument structs (`kernel_args`).
    fn set_bytes<T: Copy>(&mut self, index: usize, value: &T);
    /// `setThreadgroupMemoryLength:atIndex:`.
    fn set_threadgroup_memory_length(&mut self, length: usize, index: usize);
    /// `dispatchThreadgroups:threadsPerThreadgroup:`.
    fn dispatch_threadgroups(&mut self, groups: [usize; 3], threads: [usize; 3]);
    /// `useResource:usage:` for a buffer reached through an address in an argument struct.
    fn use_resource(&mut self, buffer: &Self::Buffer, write: bool);
}

/// A Metal device as the decode step uses one: buffers, pipelines by name, the model's
/// tensors where the device sees them, and one command buffer per step.
pub(crate) trait MetalDevice {
    type Buffer: GpuBuffer;
    type Pipeline: GpuPipeline;
    type Encoder: ComputeEncoder<Buffer = Self::Buffer, Pipeline = Self::Pipeline>;
    /// For messages.
    const NAME: &'static str;

    /// A buffer of `bytes` (at least 16) in storage shared with the host.
    fn shared_buffer(&self, bytes: usize) -> Result<Self::Buffer>;
    /// The kernel `name` of decode.metal.
    fn pipeline(&self, name: &str) -> Result<Self::Pipeline>;
    /// `maxThreadgroupMemoryLength`.
    fn max_threadgroup_memory(&self) -> usize;
    /// Where a contiguous f32 or f16 tensor of the model's device starts.
    fn tensor(&self, t: &Tensor) -> Option<At<Self::Buffer>>;
    /// Wait for work the model's own queue may still run on the same memory (the prefill).
    fn before_step(&self) -> Result<()>;
    /// One command buffer: `encode` fills its compute encoder, then it is committed and
    /// waited for; its error, if it failed.
    fn run(&self, encode: impl FnOnce(&mut Self::Encoder)) -> Result<()>;
}

/// A place in a buffer: what a kernel argument or an address inside an argument struct names.
#[derive(Clone)]
pub(crate) struct At<B> {
    pub(crate) buffer: B,
    pub(crate) offset: usize,
}

impl<B: GpuBuffer> At<B> {
    pub(crate) fn address(&self) -> u64 {
        self.buffer.address() + self.offset as u64
    }
}

/// Threads for a kernel that adapts to any multiple of 32 (the norms, matvec3, the attention
/// splits, penalties): `want`, within what the pipeline allows.
pub(super) fn threads(p: &impl GpuPipeline, want: usize) -> usize {
    let max = p.max_threads().max(32);
    want.min(max) / 32 * 32
}

pub(super) fn size(width: usize, height: usize) -> [usize; 3] {
    [width, height, 1]
}

/// gate_up's block: 32 rows, a power-of-two number of SIMD-groups that divides them.
pub(super) fn gate_up_threads(p: &impl GpuPipeline) -> usize {
    let mut t = 1024;
    while t > 32 && t > p.max_threads() {
        t /= 2;
    }
    t
}

pub(super) fn set_buf<E: ComputeEncoder>(enc: &mut E, index: usize, b: &E::Buffer) {
    enc.set_buffer(index, Some((b, 0)));
}

pub(super) fn set_at<E: ComputeEncoder>(enc: &mut E, index: usize, at: &At<E::Buffer>) {
    enc.set_buffer(index, Some((&at.buffer, at.offset)));
}

pub(super) fn set_none<E: ComputeEncoder>(enc: &mut E, index: usize) {
    enc.set_buffer(index, None);
}

/// A shared buffer's contents as `i32`s.
///
/// # Safety
/// Only while the device is not using the buffer (between steps: every step waits for its
/// command buffer), and with no other slice of it alive.
// the slice is the buffer's memory, not the handle's: `&B` is only how it is named
#[allow(clippy::mut_from_ref)]
pub(super) unsafe fn shared_i32s<B: GpuBuffer>(b: &B) -> &mut [i32] {
    let (ptr, len) = b.contents();
    // SAFETY: shared storage is host-visible and 4-byte aligned (Metal aligns buffers to at
    // least 16 bytes); exclusivity is the caller's
    unsafe { std::slice::from_raw_parts_mut(ptr.cast::<i32>(), len / 4) }
}

/// As [`shared_i32s`], as `f32`s.
///
/// # Safety
/// As [`shared_i32s`].
// the slice is the buffer's memory, not the handle's: `&B` is only how it is named
#[allow(clippy::mut_from_ref)]
pub(super) unsafe fn shared_f32s<B: GpuBuffer>(b: &B) -> &mut [f32] {
    let (ptr, len) = b.contents();
    // SAFETY: as `shared_i32s`
    unsafe { std::slice::from_raw_parts_mut(ptr.cast::<f32>(), len / 4) }
}
