//! How `metal_decode` talks to Metal: the `repr(C)` twins of decode.metal's argument structs,
//! places in buffers, pipelines, and setting a dispatch's buffers and bytes.

use std::ffi::c_void;
use std::ptr::NonNull;

use objc2::rc::Retained;
use objc2::runtime::ProtocolObject;
use objc2_foundation::NSString;
use objc2_metal::{
    MTLBuffer, MTLComputeCommandEncoder, MTLComputePipelineState, MTLDevice, MTLLibrary,
    MTLResourceOptions, MTLSize,
};

use super::metal_err;
use crate::error::Result;

pub(super) type Buf = Retained<ProtocolObject<dyn MTLBuffer>>;
pub(super) type Pipeline = Retained<ProtocolObject<dyn MTLComputePipelineState>>;
pub(super) type Encoder = ProtocolObject<dyn MTLComputeCommandEncoder>;

/// A place in a buffer: what a kernel argument or an address inside an argument struct names.
#[derive(Clone)]
pub(super) struct At {
    pub(super) buffer: Buf,
    pub(super) offset: usize,
}

impl At {
    pub(super) fn address(&self) -> u64 {
        self.buffer.gpuAddress() + self.offset as u64
    }
}

pub(super) fn pipeline(
    device: &ProtocolObject<dyn MTLDevice>,
    library: &ProtocolObject<dyn MTLLibrary>,
    name: &str,
) -> Result<Pipeline> {
    let function = library
        .newFunctionWithName(&NSString::from_str(name))
        .ok_or_else(|| metal_err(&format!("kernel {name}"), "not in the library"))?;
    device
        .newComputePipelineStateWithFunction_error(&function)
        .map_err(|e| metal_err(&format!("kernel {name}"), e.localizedDescription()))
}

pub(super) fn shared_buffer(device: &ProtocolObject<dyn MTLDevice>, bytes: usize) -> Result<Buf> {
    device
        .newBufferWithLength_options(bytes.max(16), MTLResourceOptions::StorageModeShared)
        .ok_or_else(|| metal_err("allocating the decode buffers", "out of memory"))
}

/// Threads for a kernel that adapts to any multiple of 32 (the norms, matvec3, the attention
/// splits, penalties): `want`, within what the pipeline allows.
pub(super) fn threads(p: &Pipeline, want: usize) -> usize {
    let max = p.maxTotalThreadsPerThreadgroup().max(32);
    want.min(max) / 32 * 32
}

pub(super) fn size(width: usize, height: usize) -> MTLSize {
    MTLSize {
        width,
        height,
        depth: 1,
    }
}

/// gate_up's block: 32 rows, a power-of-two number of SIMD-groups that divides them.
pub(super) fn gate_up_threads(p: &Pipeline) -> usize {
    let mut t = 1024;
    while t > 32 && t > p.maxTotalThreadsPerThreadgroup() {
        t /= 2;
    }
    t
}

pub(super) fn set_buf(enc: &Encoder, index: usize, b: &Buf) {
    // SAFETY: the buffer is alive for the encoder's life (the decoder or the cache holds it)
    unsafe { enc.setBuffer_offset_atIndex(Some(b), 0, index) };
}

pub(super) fn set_at(enc: &Encoder, index: usize, at: &At) {
    // SAFETY: as `set_buf`; offsets come from candle's layouts or the file's tensor table
    unsafe { enc.setBuffer_offset_atIndex(Some(&at.buffer), at.offset, index) };
}

pub(super) fn set_none(enc: &Encoder, index: usize) {
    // SAFETY: the kernels test the matching `has_*` flag before touching an unset buffer
    unsafe { enc.setBuffer_offset_atIndex(None, 0, index) };
}

pub(super) fn set_bytes<T: Copy>(enc: &Encoder, index: usize, value: &T) {
    let ptr = NonNull::from(value).cast::<c_void>();
    // SAFETY: Metal copies the bytes during the call (`setBytes:length:atIndex:`); `T` is one of
    // the `repr(C)` twins of decode.metal's argument structs
    unsafe { enc.setBytes_length_atIndex(ptr, std::mem::size_of::<T>(), index) };
}

/// A shared buffer's contents as `i32`s.
///
/// # Safety
/// Only while the GPU is not using the buffer (between steps: every step waits for its
/// command buffer), and with no other slice of it alive.
// the slice is the GPU buffer's memory, not the handle's: `&Buf` is only how it is named
#[allow(clippy::mut_from_ref)]
pub(super) unsafe fn shared_i32s(b: &Buf) -> &mut [i32] {
    let n = b.length() / 4;
    // SAFETY: shared storage is host-visible and 4-byte aligned (Metal aligns buffers to at
    // least 16 bytes); exclusivity is the caller's
    unsafe { std::slice::from_raw_parts_mut(b.contents().as_ptr().cast::<i32>(), n) }
}

/// As [`shared_i32s`], as `f32`s.
///
/// # Safety
/// As [`shared_i32s`].
// the slice is the GPU buffer's memory, not the handle's: `&Buf` is only how it is named
#[allow(clippy::mut_from_ref)]
pub(super) unsafe fn shared_f32s(b: &Buf) -> &mut [f32] {
    let n = b.length() / 4;
    // SAFETY: as `shared_i32s`
    unsafe { std::slice::from_raw_parts_mut(b.contents().as_ptr().cast::<f32>(), n) }
}
