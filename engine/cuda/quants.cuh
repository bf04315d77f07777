// Block formats and their dot products against q8_1 activations, as ggml's CUDA backend does
// them (llama.cpp b11434 `ggml/src/ggml-cuda/vecdotq.cuh`, `common.cuh`; the same code as
// candle-kernels' `quantized.cu`, MIT). A dot is split over the lanes of a warp: each lane
// takes `VDR` 32-bit words of a block at quant offset `iqs`, as ggml's `mul_mat_vec_q`.
#pragma once
#include <cuda_fp16.h>
#include <stdint.h>

#define WARP 32
#define QK_K 256

// GGML type ids (ggml.h `enum ggml_type`), as the GGUF file and candle name them.
#define T_F32 0
#define T_F16 1
#define T_Q4_0 2
#define T_Q5_0 6
#define T_Q8_0 8
#define T_Q4_K 12
#define T_Q5_K 13
#define T_Q6_K 14

struct block_q4_0 { half d; uint8_t qs[16]; };
struct block_q5_0 { half d; uint8_t qh[4]; uint8_t qs[16]; };
struct block_q8_0 { half d; int8_t qs[32]; };
struct block_q8_1 { half2 ds; int8_t qs[32]; };
struct block_q4_K { half2 dm; uint8_t scales[12]; uint8_t qs[128]; };
struct block_q5_K { half2 dm; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct block_q6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; half d; };

static_assert(sizeof(block_q4_0) == 18, "q4_0");
static_assert(sizeof(block_q5_0) == 22, "q5_0");
static_assert(sizeof(block_q8_0) == 34, "q8_0");
static_assert(sizeof(block_q8_1) == 36, "q8_1");
static_assert(sizeof(block_q4_K) == 144, "q4_K");
static_assert(sizeof(block_q5_K) == 176, "q5_K");
static_assert(sizeof(block_q6_K) == 210, "q6_K");

static __device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) x += __shfl_xor_sync(0xffffffff, x, m, 32);
    return x;
}

static __device__ __forceinline__ float warp_max(float x) {
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, m, 32));
    return x;
}

static __device__ __forceinline__ int dp4a(int a, int b, int c) { return __dp4a(a, b, c); }

// 2-byte aligned reads of 4 bytes (ggml `get_int_from_uint8`): blocks are not 4-byte aligned.
static __device__ __forceinline__ int int_at_u8(const uint8_t *x8, int i32) {
    const uint16_t *x16 = (const uint16_t *)(x8 + 4 * i32);
    return (int)x16[0] | ((int)x16[1] << 16);
}
static __device__ __forceinline__ int int_at_i8(const int8_t *x8, int i32) {
    return int_at_u8((const uint8_t *)x8, i32);
}
static __device__ __forceinline__ int int_at_i8_aligned(const int8_t *x8, int i32) {
    return *((const int *)(x8 + 4 * i32));
}

// ---- per-format dot of one block (or a lane's share of it) with q8_1 --------------------
// qk: values per block; qi: 32-bit words of quants per block; vdr: words per lane.

// Q4_0: qk 32, qi 4, vdr 2 (ggml vec_dot_q4_0_q8_1)
static __device__ __forceinline__ float dot_q4_0(const void *vb, const block_q8_1 *y, int iqs) {
    const block_q4_0 *b = (const block_q4_0 *)vb;
    int sumi = 0;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int v = int_at_u8(b->qs, iqs + i);
        sumi = dp4a((v >> 0) & 0x0F0F0F0F, int_at_i8_aligned(y->qs, iqs + i), sumi);
        sumi = dp4a((v >> 4) & 0x0F0F0F0F, int_at_i8_aligned(y->qs, iqs + i + 4), sumi);
    }
    const float2 ds = __half22float2(y->ds);
    // the second part subtracts 8 from each quant (ggml: 8*vdr/QI4_0 per lane's share)
    return __half2float(b->d) * (sumi * ds.x - (8 * 2 / 4) * ds.y);
}

// Q5_0: qk 32, qi 4, vdr 2 (ggml vec_dot_q5_0_q8_1)
static __device__ __forceinline__ float dot_q5_0(const void *vb, const block_q8_1 *y, int iqs) {
    const block_q5_0 *b = (const block_q5_0 *)vb;
    int sumi = 0;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int vl = int_at_u8(b->qs, iqs + i);
        const int vh = int_at_u8(b->qh, 0) >> (4 * (iqs + i));
        int vi0 = (vl >> 0) & 0x0F0F0F0F;
        vi0 |= (vh << 4) & 0x00000010;
        vi0 |= (vh << 11) & 0x00001000;
        vi0 |= (vh << 18) & 0x00100000;
        vi0 |= (vh << 25) & 0x10000000;
        sumi = dp4a(vi0, int_at_i8_aligned(y->qs, iqs + i), sumi);
        int vi1 = (vl >> 4) & 0x0F0F0F0F;
        vi1 |= (vh >> 12) & 0x00000010;
        vi1 |= (vh >> 5) & 0x00001000;
        vi1 |= (vh << 2) & 0x00100000;
        vi1 |= (vh << 9) & 0x10000000;
        sumi = dp4a(vi1, int_at_i8_aligned(y->qs, iqs + i + 4), sumi);
    }
    const float2 ds = __half22float2(y->ds);
    return __half2float(b->d) * (sumi * ds.x - (16 * 2 / 4) * ds.y);
}

// Q8_0: qk 32, qi 8, vdr 2 (ggml vec_dot_q8_0_q8_1)
static __device__ __forceinline__ float dot_q8_0(const void *vb, const block_q8_1 *y, int iqs) {
    const block_q8_0 *b = (const block_q8_0 *)vb;
    int sumi = 0;
#pragma unroll
    for (int i = 0; i < 2; ++i) sumi = dp4a(int_at_i8(b->qs, iqs + i), int_at_i8_aligned(y->qs, iqs + i), sumi);
    return __half2float(b->d) * __low2float(y->ds) * sumi;
}

// The 6-bit scales and mins of sub-blocks 2j and 2j+1 of a Q4_K/Q5_K super-block, unpacked
// as two scales then two mins (ggml vec_dot_q4_K_q8_1 / vec_dot_q5_K_q8_1 share this code).
static __device__ __forceinline__ void k4_scales_mins(const uint8_t *packed, int j, uint16_t aux[2]) {
    const uint16_t *scales = (const uint16_t *)packed;
    if (j < 2) {
        aux[0] = scales[j + 0] & 0x3f3f;
        aux[1] = scales[j + 2] & 0x3f3f;
    } else {
        aux[0] = ((scales[j + 2] >> 0) & 0x0f0f) | ((scales[j - 2] & 0xc0c0) >> 2);
        aux[1] = ((scales[j + 2] >> 4) & 0x0f0f) | ((scales[j - 0] & 0xc0c0) >> 2);
    }
}

// Q4_K: qk 256, qi 32, vdr 2 (ggml vec_dot_q4_K_q8_1); `y` is the row's first q8_1 block of
// this super-block.
static __device__ __forceinline__ float dot_q4_K(const void *vb, const block_q8_1 *y, int iqs) {
    const block_q4_K *b = (const block_q4_K *)vb;
    const int bq8_offset = 2 * ((iqs / 2) / 4);
    const int *q4 = (const int *)(b->qs + 16 * bq8_offset + 4 * ((iqs / 2) % 4));
    const int v0 = q4[0], v1 = q4[4];
    uint16_t aux[2];
    k4_scales_mins(b->scales, bq8_offset / 2, aux);
    const uint8_t *sc = (const uint8_t *)aux;
    const uint8_t *m = sc + 2;
    float sumf_d = 0.0f, sumf_m = 0.0f;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const block_q8_1 *yi = y + bq8_offset + i;
        const float d8 = __low2float(yi->ds);
        const int *q8 = (const int *)yi->qs + ((iqs / 2) % 4);
        const int u0 = q8[0], u1 = q8[4];
        const int v0i = (v0 >> (4 * i)) & 0x0F0F0F0F;
        const int v1i = (v1 >> (4 * i)) & 0x0F0F0F0F;
        const int dot1 = dp4a(v1i, u1, dp4a(v0i, u0, 0));
        const int dot2 = dp4a(0x01010101, u1, dp4a(0x01010101, u0, 0));
        sumf_d += d8 * (dot1 * sc[i]);
        sumf_m += d8 * (dot2 * m[i]);
    }
    const float2 dm = __half22float2(b->dm);
    return dm.x * sumf_d - dm.y * sumf_m;
}

// Q5_K: qk 256, qi 32, vdr 2 (ggml vec_dot_q5_K_q8_1)
static __device__ __forceinline__ float dot_q5_K(const void *vb, const block_q8_1 *y, int iqs) {
    const block_q5_K *b = (const block_q5_K *)vb;
    const int bq8_offset = 2 * ((iqs / 2) / 4);
    const int *ql = (const int *)(b->qs + 16 * bq8_offset + 4 * ((iqs / 2) % 4));
    const int *qh = (const int *)(b->qh + 4 * ((iqs / 2) % 4));
    const int vl0 = ql[0], vl1 = ql[4];
    const int vh0 = qh[0] >> bq8_offset, vh1 = qh[4] >> bq8_offset;
    uint16_t aux[2];
    k4_scales_mins(b->scales, bq8_offset / 2, aux);
    const uint8_t *sc = (const uint8_t *)aux;
    const uint8_t *m = sc + 2;
    float sumf_d = 0.0f, sumf_m = 0.0f;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const block_q8_1 *yi = y + bq8_offset + i;
        const float d8 = __low2float(yi->ds);
        const int *q8 = (const int *)yi->qs + ((iqs / 2) % 4);
        const int u0 = q8[0], u1 = q8[4];
        const int vl0i = (vl0 >> (4 * i)) & 0x0F0F0F0F;
        const int vl1i = (vl1 >> (4 * i)) & 0x0F0F0F0F;
        const int vh0i = ((vh0 >> i) << 4) & 0x10101010;
        const int vh1i = ((vh1 >> i) << 4) & 0x10101010;
        const int dot1 = dp4a(vl1i | vh1i, u1, dp4a(vl0i | vh0i, u0, 0));
        const int dot2 = dp4a(0x01010101, u1, dp4a(0x01010101, u0, 0));
        sumf_d += d8 * (dot1 * sc[i]);
        sumf_m += d8 * (dot2 * m[i]);
    }
    const float2 dm = __half22float2(b->dm);
    return dm.x * sumf_d - dm.y * sumf_m;
}

// Q6_K: qk 256, qi 32, vdr 1 (ggml vec_dot_q6_K_q8_1)
static __device__ __forceinline__ float dot_q6_K(const void *vb, const block_q8_1 *y, int iqs) {
    const block_q6_K *b = (const block_q6_K *)vb;
    const int bq8_offset = 2 * 2 * (iqs / 16) + (iqs % 16) / 8;
    const int scale_offset = 8 * (iqs / 16) + (iqs % 16) / 4;
    const int vh_shift = 2 * ((iqs % 16) / 8);
    const int vl = int_at_u8(b->ql, iqs);
    const int vh = int_at_u8(b->qh, 8 * (iqs / 16) + iqs % 8) >> vh_shift;
    const int8_t *scales = b->scales + scale_offset;
    float sumf = 0.0f;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int u = int_at_i8_aligned(y[bq8_offset + 2 * i].qs, iqs % 8);
        const float d8 = __low2float(y[bq8_offset + 2 * i].ds);
        const int sc = scales[4 * i];
        const int vil = (vl >> (4 * i)) & 0x0F0F0F0F;
        const int vih = ((vh >> (4 * i)) << 4) & 0x30303030;
        const int vi = __vsubss4((vil | vih), 0x20202020);
        sumf += d8 * (dp4a(vi, u, 0) * sc);
    }
    return __half2float(b->d) * sumf;
}

// ---- a whole row against a q8_1 vector, by one warp (ggml mul_mat_vec_q with one warp) ---

template <int QK, int QI, int VDR, typename B, float (*DOT)(const void *, const block_q8_1 *, int)>
static __device__ __forceinline__ float row_dot(const void *row, const block_q8_1 *y, int k, int lane) {
    const B *x = (const B *)row;
    const int nb = k / QK;
    float sum = 0.0f;
    for (int kbx = lane / (QI / VDR); kbx < nb; kbx += VDR * WARP / QI) {
        const int kby = kbx * (QK / 32);
        const int kqs = VDR * (lane % (QI / VDR));
        sum += DOT(&x[kbx], &y[kby], kqs);
    }
    return warp_sum(sum);
}

// Dot of a row of type `type` (`k` values) with the q8_1 vector `y`, the warp's sum in every
// lane. Unknown types give NaN, which the host never asks for (it checks the types first).
static __device__ __forceinline__ float row_dot_any(int type, const void *row, const block_q8_1 *y, int k, int lane) {
    switch (type) {
    case T_Q4_0: return row_dot<32, 4, 2, block_q4_0, dot_q4_0>(row, y, k, lane);
    case T_Q5_0: return row_dot<32, 4, 2, block_q5_0, dot_q5_0>(row, y, k, lane);
    case T_Q8_0: return row_dot<32, 8, 2, block_q8_0, dot_q8_0>(row, y, k, lane);
    case T_Q4_K: return row_dot<QK_K, 32, 2, block_q4_K, dot_q4_K>(row, y, k, lane);
    case T_Q5_K: return row_dot<QK_K, 32, 2, block_q5_K, dot_q5_K>(row, y, k, lane);
    case T_Q6_K: return row_dot<QK_K, 32, 1, block_q6_K, dot_q6_K>(row, y, k, lane);
    default: return __int_as_float(0x7fc00000);
    }
}

// Bytes of one row of `k` values.
static __device__ __forceinline__ size_t row_bytes(int type, int k) {
    switch (type) {
    case T_F32: return (size_t)k * 4;
    case T_F16: return (size_t)k * 2;
    case T_Q4_0: return (size_t)(k / 32) * sizeof(block_q4_0);
    case T_Q5_0: return (size_t)(k / 32) * sizeof(block_q5_0);
    case T_Q8_0: return (size_t)(k / 32) * sizeof(block_q8_0);
    case T_Q4_K: return (size_t)(k / QK_K) * sizeof(block_q4_K);
    case T_Q5_K: return (size_t)(k / QK_K) * sizeof(block_q5_K);
    case T_Q6_K: return (size_t)(k / QK_K) * sizeof(block_q6_K);
    default: return 0;
    }
}

// Value `i` of a row (dequantized), for embedding lookups (ggml dequantize_* kernels).
static __device__ float value_at(int type, const void *row, int i) {
    switch (type) {
    case T_F32: return ((const float *)row)[i];
    case T_F16: return __half2float(((const half *)row)[i]);
    case T_Q4_0: {
        const block_q4_0 *b = (const block_q4_0 *)row + i / 32;
        const int j = i % 32;
        const int q = j < 16 ? (b->qs[j] & 0xF) : (b->qs[j - 16] >> 4);
        return __half2float(b->d) * (q - 8);
    }
    case T_Q5_0: {
        const block_q5_0 *b = (const block_q5_0 *)row + i / 32;
        const int j = i % 32;
        uint32_t qh;
        memcpy(&qh, b->qh, 4);
        const int lo = j < 16 ? (b->qs[j] & 0xF) : (b->qs[j - 16] >> 4);
        const int hi = (qh >> j) & 1;
        return __half2float(b->d) * ((lo | (hi << 4)) - 16);
    }
    case T_Q8_0: {
        const block_q8_0 *b = (const block_q8_0 *)row + i / 32;
        return __half2float(b->d) * b->qs[i % 32];
    }
    case T_Q4_K: case T_Q5_K: {
        // ggml dequantize_row_q4_K / q5_K: 8 sub-blocks of 32 with 6-bit scales and mins
        const int bi = i / QK_K, r = i % QK_K;
        const uint8_t *sc12;
        const uint8_t *qs;
        half2 dmh;
        if (type == T_Q4_K) {
            const block_q4_K *b = (const block_q4_K *)row + bi;
            sc12 = b->scales; qs = b->qs; dmh = b->dm;
        } else {
            const block_q5_K *b = (const block_q5_K *)row + bi;
            sc12 = b->scales; qs = b->qs; dmh = b->dm;
        }
        const int sub = r / 32;          // 0..7
        const int is = sub;
        uint8_t sc, m;
        if (is < 4) {
            sc = sc12[is] & 63; m = sc12[is + 4] & 63;
        } else {
            sc = (sc12[is + 4] & 0xF) | ((sc12[is - 4] >> 6) << 4);
            m = (sc12[is + 4] >> 4) | ((sc12[is] >> 6) << 4);
        }
        const int pair = sub / 2, l = r % 32;
        const uint8_t byte = qs[32 * pair + l];
        int q = (sub % 2 == 0) ? (byte & 0xF) : (byte >> 4);
        if (type == T_Q5_K) {
            const block_q5_K *b = (const block_q5_K *)row + bi;
            q += ((b->qh[l] >> sub) & 1) << 4;
        }
        const float2 dm = __half22float2(dmh);
        return dm.x * sc * q - dm.y * m;
    }
    case T_Q6_K: {
        // ggml dequantize_row_q6_K
        const block_q6_K *b = (const block_q6_K *)row + i / QK_K;
        const int r = i % QK_K;
        const int half128 = r / 128, rr = r % 128;
        const int l = rr % 32, grp = rr / 32; // grp 0..3 → q1..q4
        const uint8_t *ql = b->ql + 64 * half128;
        const uint8_t *qh = b->qh + 32 * half128;
        const int8_t *sc = b->scales + 8 * half128;
        int q;
        switch (grp) {
        case 0: q = (int)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32; break;
        case 1: q = (int)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32; break;
        case 2: q = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32; break;
        default: q = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32; break;
        }
        const int is = l / 16;
        return __half2float(b->d) * sc[is + 2 * grp] * q;
    }
    default: return __int_as_float(0x7fc00000);
    }
}
