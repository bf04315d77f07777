// Kernels that break Metal's rules on purpose, for the emulator's own tests
// (engine/src/backend/metal_emulated/tests.rs): compiled only into the emulated device, never
// into the engine's Metal library.
#include <metal_stdlib>
using namespace metal;

// A barrier only lane 0 of each SIMD-group reaches: a divergence error, not a hang.
kernel void emu_barrier_under_condition(device float *out [[buffer(0)]],
                                        uint tid [[thread_position_in_threadgroup]]) {
    threadgroup float shared[64];
    shared[tid] = float(tid);
    if (tid % 32 == 0) threadgroup_barrier(mem_flags::mem_threadgroup);
    out[tid] = shared[63 - tid];
}

// Reads another thread's threadgroup slot without a barrier: what it reads depends on the
// order threads run in, which the seed shuffles.
kernel void emu_race_without_barrier(device float *out [[buffer(0)]],
                                     uint tid [[thread_position_in_threadgroup]]) {
    threadgroup float shared[64];
    shared[tid] = float(tid);
    out[tid] = shared[63 - tid];
}

// The same with the barrier: the same result in any order.
kernel void emu_with_barrier(device float *out [[buffer(0)]],
                             uint tid [[thread_position_in_threadgroup]],
                             uint lane [[thread_index_in_simdgroup]]) {
    threadgroup float shared[64];
    shared[tid] = float(tid);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[tid] = shared[63 - tid] + simd_shuffle_xor(float(lane), 1) * 0.0f + simd_prefix_exclusive_sum(1.0f) * 1000.0f;
}
