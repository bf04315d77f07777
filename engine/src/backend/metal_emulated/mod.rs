//! The emulated Metal device (the `metal-emulated` feature): `engine/metal/*.metal` compiled as
//! C++ by clang against an executing stand-in for `<metal_stdlib>` (`engine/metal-emulator/`,
//! built by `build.rs`), run on the CPU with a threadgroup's threads as fibers, SIMD-group
//! functions resolved over 32 lanes, barriers as meeting points (a barrier part of a group
//! never reaches is an error, not a hang), and lanes and threadgroups run in an order shuffled
//! by a seed. What the engine encodes for Metal (pipelines by name, buffers at indices, bytes,
//! threadgroup memory lengths, dispatch sizes) is encoded here the same way: [`Encoder`]
//! keeps its bindings across dispatches as a Metal compute encoder does, and checks what the
//! kernel's wrapper can (a buffer never set, a `constant T &` argument shorter than `T`,
//! threadgroup memory past 32 KiB).
//!
//! Buffers are host memory; a buffer's [`Buffer::address`] (its `gpuAddress`) is a host
//! pointer, which is what the kernels find in their argument structs.

// The decoder's side of the device (borrowed buffers, pipeline limits) is used by the engine's
// decode path only when that is built on it.
#![allow(dead_code)]

use std::ffi::{CString, c_char, c_void};
use std::sync::Arc;

use crate::error::{Error, Result};

#[cfg(test)]
mod tests;

/// Metal's buffer argument slots.
pub(crate) const SLOTS: usize = 31;

/// `maxThreadgroupMemoryLength` of the emulated device (Apple GPUs': 32 KiB; the runtime
/// refuses a dispatch past it).
pub(crate) const MAX_THREADGROUP_MEMORY: usize = 32 * 1024;

#[repr(C)]
#[derive(Clone, Copy)]
struct Binding {
    address: *const c_void,
    length: usize,
    bound: u8,
}

unsafe extern "C" {
    fn mtlemu_has_kernel(name: *const c_char) -> i32;
    fn mtlemu_max_threads() -> u32;
    fn mtlemu_dispatch(
        name: *const c_char,
        bindings: *const Binding,
        threadgroup_lengths: *const usize,
        grid: *const u32,
        threads: *const u32,
        seed: u64,
        error: *mut c_char,
        error_len: usize,
    ) -> i32;
}

fn emu_err(what: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("emulated Metal: {what}"))
}

struct Storage {
    ptr: *mut u8,
    len: usize,
    /// Our own, 16-byte aligned (Metal aligns buffers to at least 16 bytes); `None`: someone
    /// else's (the mapped model file, a host tensor's storage), kept alive by its creator.
    _memory: Option<Box<[u128]>>,
}

// SAFETY: a buffer is plain memory; as on a GPU, who writes it when is the encoder's and the
// kernels' business (a dispatch runs to completion on the calling thread).
unsafe impl Send for Storage {}
unsafe impl Sync for Storage {}

/// A buffer of the emulated device: `MTLBuffer`'s twin.
#[derive(Clone)]
pub(crate) struct Buffer(Arc<Storage>);

impl Buffer {
    /// A zeroed buffer of `bytes` (at least 16).
    pub fn new(bytes: usize) -> Buffer {
        let mut memory = vec![0u128; bytes.max(16).div_ceil(16)].into_boxed_slice();
        let ptr = memory.as_mut_ptr().cast::<u8>();
        Buffer(Arc::new(Storage {
            ptr,
            len: bytes.max(16),
            _memory: Some(memory),
        }))
    }

    /// A buffer over memory someone else owns (`newBufferWithBytesNoCopy`).
    ///
    /// # Safety
    /// `ptr..ptr + len` stays valid as long as the buffer and its clones, and nothing else
    /// accesses it while a dispatch that reaches it runs (kernels may write through it).
    pub unsafe fn borrowed(ptr: *mut u8, len: usize) -> Buffer {
        Buffer(Arc::new(Storage {
            ptr,
            len,
            _memory: None,
        }))
    }

    pub fn length(&self) -> usize {
        self.0.len
    }

    /// Its `gpuAddress`: on this device, where it is in host memory.
    pub fn address(&self) -> u64 {
        self.0.ptr as u64
    }

    /// `contents`: where its bytes are (for slices, see [`Buffer::bytes`]).
    pub fn contents_ptr(&self) -> *mut u8 {
        self.0.ptr
    }

    pub fn same(&self, other: &Buffer) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Its contents as bytes.
    ///
    /// # Safety
    /// Only while no dispatch runs and no other slice of it is alive (as `contents()`).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn bytes(&self) -> &mut [u8] {
        // SAFETY: the storage is `len` bytes, alive while `self`; exclusivity is the caller's
        unsafe { std::slice::from_raw_parts_mut(self.0.ptr, self.0.len) }
    }

    /// As [`Buffer::bytes`], as `f32`s.
    ///
    /// # Safety
    /// As [`Buffer::bytes`].
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn f32s(&self) -> &mut [f32] {
        // SAFETY: as `bytes`; owned buffers are 16-byte aligned, borrowed ones are tensors'
        // storage (4-byte aligned)
        unsafe { std::slice::from_raw_parts_mut(self.0.ptr.cast::<f32>(), self.0.len / 4) }
    }

    /// As [`Buffer::bytes`], as `i32`s.
    ///
    /// # Safety
    /// As [`Buffer::bytes`].
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn i32s(&self) -> &mut [i32] {
        // SAFETY: as `f32s`
        unsafe { std::slice::from_raw_parts_mut(self.0.ptr.cast::<i32>(), self.0.len / 4) }
    }
}

/// A kernel of the emulated device by its host name (`MTLComputePipelineState`'s twin).
#[derive(Clone, Debug)]
pub(crate) struct Pipeline {
    name: Arc<CString>,
}

impl Pipeline {
    pub fn new(name: &str) -> Result<Pipeline> {
        let c = CString::new(name).map_err(emu_err)?;
        // SAFETY: a NUL-terminated string; the table is static
        if unsafe { mtlemu_has_kernel(c.as_ptr()) } == 0 {
            return Err(emu_err(format!("kernel {name}: not in the library")));
        }
        Ok(Pipeline { name: Arc::new(c) })
    }

    pub fn name(&self) -> &str {
        self.name.to_str().unwrap_or("?")
    }

    /// `maxTotalThreadsPerThreadgroup`.
    pub fn max_threads(&self) -> usize {
        // SAFETY: no arguments
        unsafe { mtlemu_max_threads() as usize }
    }
}

/// A compute command encoder of the emulated device: bindings kept across dispatches as
/// Metal's are; each dispatch runs at once. The first error is kept, and later dispatches are
/// skipped ([`Encoder::finish`] returns it), as a command buffer that failed.
pub(crate) struct Encoder {
    pipeline: Option<Pipeline>,
    bindings: [Binding; SLOTS],
    /// The bytes of `set_bytes`, owned here until they are replaced.
    bytes: Vec<Option<Box<[u128]>>>,
    /// Buffers bound, kept alive while bound.
    held: Vec<Option<Buffer>>,
    threadgroup: [usize; SLOTS],
    seed: u64,
    dispatches: u64,
    error: Option<String>,
}

impl Encoder {
    /// `seed` shuffles the order threadgroups and their threads run in (dispatch by dispatch).
    pub fn new(seed: u64) -> Encoder {
        Encoder {
            pipeline: None,
            bindings: [Binding {
                address: std::ptr::null(),
                length: 0,
                bound: 0,
            }; SLOTS],
            bytes: vec![None; SLOTS],
            held: vec![None; SLOTS],
            threadgroup: [0; SLOTS],
            seed,
            dispatches: 0,
            error: None,
        }
    }

    pub fn set_pipeline(&mut self, p: &Pipeline) {
        self.pipeline = Some(p.clone());
    }

    /// `setBuffer:offset:atIndex:`; `None` sets no buffer (a null pointer in the kernel).
    pub fn set_buffer(&mut self, index: usize, buffer: Option<(&Buffer, usize)>) {
        self.bytes[index] = None;
        self.bindings[index] = match buffer {
            Some((b, offset)) => Binding {
                // SAFETY (of later uses): within the buffer, checked here
                address: b.0.ptr.wrapping_add(offset) as *const c_void,
                length: b.0.len.saturating_sub(offset),
                bound: 1,
            },
            None => Binding {
                address: std::ptr::null(),
                length: 0,
                bound: 1,
            },
        };
        if let Some((b, offset)) = buffer
            && offset > b.0.len
        {
            self.fail(format!(
                "buffer {index}: offset {offset} past the end ({})",
                b.0.len
            ));
        }
        self.held[index] = buffer.map(|(b, _)| b.clone());
    }

    /// `setBytes:length:atIndex:` (Metal copies them during the call, so does this).
    pub fn set_bytes(&mut self, index: usize, bytes: &[u8]) {
        let mut copy = vec![0u128; bytes.len().max(1).div_ceil(16)].into_boxed_slice();
        // SAFETY: `copy` holds at least `bytes.len()` bytes; they do not overlap
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                copy.as_mut_ptr().cast::<u8>(),
                bytes.len(),
            )
        };
        self.bindings[index] = Binding {
            address: copy.as_ptr().cast(),
            length: bytes.len(),
            bound: 1,
        };
        self.bytes[index] = Some(copy);
        self.held[index] = None;
    }

    /// `setBytes:length:atIndex:` of one value (an argument struct, padding included: the
    /// copy is of its bytes as they are, as Metal's).
    pub fn set_value<T: Copy>(&mut self, index: usize, value: &T) {
        let length = std::mem::size_of::<T>();
        let mut copy = vec![0u128; length.max(1).div_ceil(16)].into_boxed_slice();
        // SAFETY: `copy` holds at least `length` bytes; an untyped copy of `*value`
        unsafe {
            std::ptr::copy_nonoverlapping(
                (value as *const T).cast::<u8>(),
                copy.as_mut_ptr().cast::<u8>(),
                length,
            )
        };
        self.bindings[index] = Binding {
            address: copy.as_ptr().cast(),
            length,
            bound: 1,
        };
        self.bytes[index] = Some(copy);
        self.held[index] = None;
    }

    /// `setThreadgroupMemoryLength:atIndex:`.
    pub fn set_threadgroup_memory(&mut self, index: usize, length: usize) {
        self.threadgroup[index] = length;
    }

    /// `dispatchThreadgroups:threadsPerThreadgroup:`, run now.
    pub fn dispatch(&mut self, groups: [usize; 3], threads: [usize; 3]) {
        if self.error.is_some() {
            return;
        }
        let Some(p) = self.pipeline.clone() else {
            return self.fail("a dispatch with no pipeline set".into());
        };
        let to32 = |v: [usize; 3]| v.map(|x| u32::try_from(x).unwrap_or(u32::MAX));
        let (grid, tg) = (to32(groups), to32(threads));
        let mut message = vec![0u8; 2048];
        self.dispatches += 1;
        let seed = self
            .seed
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(self.dispatches);
        // SAFETY: the bindings point into buffers or bytes this encoder holds; the kernel's
        // wrapper checks what it can (set, long enough for a reference); the rest is the
        // kernels' contract, as on a GPU
        let rc = unsafe {
            mtlemu_dispatch(
                p.name.as_ptr(),
                self.bindings.as_ptr(),
                self.threadgroup.as_ptr(),
                grid.as_ptr(),
                tg.as_ptr(),
                seed,
                message.as_mut_ptr().cast(),
                message.len(),
            )
        };
        if rc != 0 {
            let end = message
                .iter()
                .position(|&b| b == 0)
                .unwrap_or(message.len());
            let why = String::from_utf8_lossy(&message[..end]).into_owned();
            self.fail(format!(
                "dispatch {} ({}, {groups:?} x {threads:?}): {why}",
                self.dispatches,
                p.name()
            ));
        }
    }

    fn fail(&mut self, why: String) {
        if self.error.is_none() {
            self.error = Some(why);
        }
    }

    /// `endEncoding` and the command buffer's status: the first error, if any.
    pub fn finish(&mut self) -> Result<()> {
        match self.error.take() {
            Some(e) => Err(emu_err(e)),
            None => Ok(()),
        }
    }
}
