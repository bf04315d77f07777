// The Metal twin of engine/cuda/decode.cu (and quants.cuh): the same fused decode step, kernel
// for kernel and line for line where the languages allow, so that a Mac or an iPhone encodes
// the same small number of dispatches per token. engine/src/backend/metal_decode/ encodes
// them (the twin of cuda_decode.rs), off unless COMPANION_METAL_FUSED=1 until run on a Mac.
// Differences from the CUDA source, all mechanical: a warp is a SIMD-group (32 lanes on Apple
// GPUs; simd_sum/simd_max/simd_shuffle_xor for the shuffles), `__shared__` is `threadgroup`,
// dp4a is four byte products (Apple GPUs have no such instruction), kernels take their
// arguments as buffers, and the attention template is instantiated by `host_name`.
//
// Never through Apple's compiler or run: the Linux machines this project is built on have no
// Metal compiler. scripts/check-metal parses and type-checks it as C++; see the README, "GPU
// builds".

#include <metal_stdlib>
using namespace metal;

#define WARP 32
#define QK_K 256

#define T_F32 0
#define T_F16 1
#define T_Q4_0 2
#define T_Q5_0 6
#define T_Q8_0 8
#define T_Q4_K 12
#define T_Q5_K 13
#define T_Q6_K 14

struct block_q4_0 { half d; uchar qs[16]; };
struct block_q5_0 { half d; uchar qh[4]; uchar qs[16]; };
struct block_q8_0 { half d; char qs[32]; };
struct block_q8_1 { half2 ds; char qs[32]; };
struct block_q4_K { half2 dm; uchar scales[12]; uchar qs[128]; };
struct block_q5_K { half2 dm; uchar scales[12]; uchar qh[32]; uchar qs[128]; };
struct block_q6_K { uchar ql[128]; uchar qh[64]; char scales[16]; half d; };

static inline int dp4a(int a, int b, int c) {
    const char4 x = as_type<char4>(a), y = as_type<char4>(b);
    return c + x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
}

// per byte: saturating a - b (CUDA __vsubss4)
static inline int vsubss4(int a, int b) {
    const char4 x = as_type<char4>(a), y = as_type<char4>(b);
    return as_type<int>(char4(clamp(int4(x) - int4(y), -128, 127)));
}

static inline int int_at_u8(device const uchar *x8, int i32) {
    device const ushort *x16 = (device const ushort *)(x8 + 4 * i32);
    return int(x16[0]) | (int(x16[1]) << 16);
}
static inline int int_at_i8(device const char *x8, int i32) { return int_at_u8((device const uchar *)x8, i32); }
static inline int int_at_i8_aligned(device const char *x8, int i32) { return *((device const int *)(x8 + 4 * i32)); }

static inline float dot_q4_0(device const void *vb, device const block_q8_1 *y, int iqs) {
    device const block_q4_0 *b = (device const block_q4_0 *)vb;
    int sumi = 0;
    for (int i = 0; i < 2; ++i) {
        const int v = int_at_u8(b->qs, iqs + i);
        sumi = dp4a((v >> 0) & 0x0F0F0F0F, int_at_i8_aligned(y->qs, iqs + i), sumi);
        sumi = dp4a((v >> 4) & 0x0F0F0F0F, int_at_i8_aligned(y->qs, iqs + i + 4), sumi);
    }
    const float2 ds = float2(y->ds);
    return float(b->d) * (sumi * ds.x - (8 * 2 / 4) * ds.y);
}

static inline float dot_q5_0(device const void *vb, device const block_q8_1 *y, int iqs) {
    device const block_q5_0 *b = (device const block_q5_0 *)vb;
    int sumi = 0;
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
    const float2 ds = float2(y->ds);
    return float(b->d) * (sumi * ds.x - (16 * 2 / 4) * ds.y);
}

static inline float dot_q8_0(device const void *vb, device const block_q8_1 *y, int iqs) {
    device const block_q8_0 *b = (device const block_q8_0 *)vb;
    int sumi = 0;
    for (int i = 0; i < 2; ++i) sumi = dp4a(int_at_i8(b->qs, iqs + i), int_at_i8_aligned(y->qs, iqs + i), sumi);
    return float(b->d) * float(y->ds.x) * sumi;
}

// The 6-bit scales and mins of sub-blocks 2j and 2j+1 of a Q4_K/Q5_K super-block, unpacked
// as two scales then two mins (ggml vec_dot_q4_K_q8_1 / vec_dot_q5_K_q8_1 share this code).
static inline void k4_scales_mins(device const uchar *packed, int j, thread ushort aux[2]) {
    device const ushort *scales = (device const ushort *)packed;
    if (j < 2) {
        aux[0] = scales[j + 0] & 0x3f3f;
        aux[1] = scales[j + 2] & 0x3f3f;
    } else {
        aux[0] = ((scales[j + 2] >> 0) & 0x0f0f) | ((scales[j - 2] & 0xc0c0) >> 2);
        aux[1] = ((scales[j + 2] >> 4) & 0x0f0f) | ((scales[j - 0] & 0xc0c0) >> 2);
    }
}

static inline float dot_q4_K(device const void *vb, device const block_q8_1 *y, int iqs) {
    device const block_q4_K *b = (device const block_q4_K *)vb;
    const int bq8_offset = 2 * ((iqs / 2) / 4);
    device const int *q4 = (device const int *)(b->qs + 16 * bq8_offset + 4 * ((iqs / 2) % 4));
    const int v0 = q4[0], v1 = q4[4];
    ushort aux[2];
    k4_scales_mins(b->scales, bq8_offset / 2, aux);
    thread const uchar *sc = (thread const uchar *)aux;
    thread const uchar *m = sc + 2;
    float sumf_d = 0.0f, sumf_m = 0.0f;
    for (int i = 0; i < 2; ++i) {
        device const block_q8_1 *yi = y + bq8_offset + i;
        const float d8 = float(yi->ds.x);
        device const int *q8 = (device const int *)yi->qs + ((iqs / 2) % 4);
        const int u0 = q8[0], u1 = q8[4];
        const int v0i = (v0 >> (4 * i)) & 0x0F0F0F0F;
        const int v1i = (v1 >> (4 * i)) & 0x0F0F0F0F;
        const int dot1 = dp4a(v1i, u1, dp4a(v0i, u0, 0));
        const int dot2 = dp4a(0x01010101, u1, dp4a(0x01010101, u0, 0));
        sumf_d += d8 * (dot1 * sc[i]);
        sumf_m += d8 * (dot2 * m[i]);
    }
    const float2 dm = float2(b->dm);
    return dm.x * sumf_d - dm.y * sumf_m;
}

static inline float dot_q5_K(device const void *vb, device const block_q8_1 *y, int iqs) {
    device const block_q5_K *b = (device const block_q5_K *)vb;
    const int bq8_offset = 2 * ((iqs / 2) / 4);
    device const int *ql = (device const int *)(b->qs + 16 * bq8_offset + 4 * ((iqs / 2) % 4));
    device const int *qh = (device const int *)(b->qh + 4 * ((iqs / 2) % 4));
    const int vl0 = ql[0], vl1 = ql[4];
    const int vh0 = qh[0] >> bq8_offset, vh1 = qh[4] >> bq8_offset;
    ushort aux[2];
    k4_scales_mins(b->scales, bq8_offset / 2, aux);
    thread const uchar *sc = (thread const uchar *)aux;
    thread const uchar *m = sc + 2;
    float sumf_d = 0.0f, sumf_m = 0.0f;
    for (int i = 0; i < 2; ++i) {
        device const block_q8_1 *yi = y + bq8_offset + i;
        const float d8 = float(yi->ds.x);
        device const int *q8 = (device const int *)yi->qs + ((iqs / 2) % 4);
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
    const float2 dm = float2(b->dm);
    return dm.x * sumf_d - dm.y * sumf_m;
}

static inline float dot_q6_K(device const void *vb, device const block_q8_1 *y, int iqs) {
    device const block_q6_K *b = (device const block_q6_K *)vb;
    const int bq8_offset = 2 * 2 * (iqs / 16) + (iqs % 16) / 8;
    const int scale_offset = 8 * (iqs / 16) + (iqs % 16) / 4;
    const int vh_shift = 2 * ((iqs % 16) / 8);
    const int vl = int_at_u8(b->ql, iqs);
    const int vh = int_at_u8(b->qh, 8 * (iqs / 16) + iqs % 8) >> vh_shift;
    device const char *scales = b->scales + scale_offset;
    float sumf = 0.0f;
    for (int i = 0; i < 2; ++i) {
        const int u = int_at_i8_aligned(y[bq8_offset + 2 * i].qs, iqs % 8);
        const float d8 = float(y[bq8_offset + 2 * i].ds.x);
        const int sc = scales[4 * i];
        const int vil = (vl >> (4 * i)) & 0x0F0F0F0F;
        const int vih = ((vh >> (4 * i)) << 4) & 0x30303030;
        const int vi = vsubss4((vil | vih), 0x20202020);
        sumf += d8 * (dp4a(vi, u, 0) * sc);
    }
    return float(b->d) * sumf;
}

// ---- rows --------------------------------------------------------------------------------

#define ROW_DOT(NAME, QK, QI, VDR, B, DOT)                                                          \
    static inline float NAME(device const uchar *row, device const block_q8_1 *y, int k, uint lane) { \
        device const B *x = (device const B *)row;                                                  \
        const int nb = k / QK;                                                                      \
        float sum = 0.0f;                                                                           \
        for (int kbx = int(lane) / (QI / VDR); kbx < nb; kbx += VDR * WARP / QI) {                  \
            const int kby = kbx * (QK / 32);                                                        \
            const int kqs = VDR * (int(lane) % (QI / VDR));                                         \
            sum += DOT(&x[kbx], &y[kby], kqs);                                                      \
        }                                                                                           \
        return simd_sum(sum);                                                                       \
    }
ROW_DOT(row_dot_q4_0, 32, 4, 2, block_q4_0, dot_q4_0)
ROW_DOT(row_dot_q5_0, 32, 4, 2, block_q5_0, dot_q5_0)
ROW_DOT(row_dot_q8_0, 32, 8, 2, block_q8_0, dot_q8_0)
ROW_DOT(row_dot_q4_K, QK_K, 32, 2, block_q4_K, dot_q4_K)
ROW_DOT(row_dot_q5_K, QK_K, 32, 2, block_q5_K, dot_q5_K)
ROW_DOT(row_dot_q6_K, QK_K, 32, 1, block_q6_K, dot_q6_K)

static inline float row_dot_any(int type, device const uchar *row, device const block_q8_1 *y, int k, uint lane) {
    switch (type) {
    case T_Q4_0: return row_dot_q4_0(row, y, k, lane);
    case T_Q5_0: return row_dot_q5_0(row, y, k, lane);
    case T_Q8_0: return row_dot_q8_0(row, y, k, lane);
    case T_Q4_K: return row_dot_q4_K(row, y, k, lane);
    case T_Q5_K: return row_dot_q5_K(row, y, k, lane);
    case T_Q6_K: return row_dot_q6_K(row, y, k, lane);
    default: return NAN;
    }
}

static inline ulong row_bytes(int type, int k) {
    switch (type) {
    case T_F32: return ulong(k) * 4;
    case T_F16: return ulong(k) * 2;
    case T_Q4_0: return ulong(k / 32) * 18;
    case T_Q5_0: return ulong(k / 32) * 22;
    case T_Q8_0: return ulong(k / 32) * 34;
    case T_Q4_K: return ulong(k / QK_K) * 144;
    case T_Q5_K: return ulong(k / QK_K) * 176;
    case T_Q6_K: return ulong(k / QK_K) * 210;
    default: return 0;
    }
}

static float value_at(int type, device const uchar *row, int i) {
    switch (type) {
    case T_F32: return ((device const float *)row)[i];
    case T_F16: return float(((device const half *)row)[i]);
    case T_Q4_0: {
        device const block_q4_0 *b = (device const block_q4_0 *)row + i / 32;
        const int j = i % 32;
        const int q = j < 16 ? (b->qs[j] & 0xF) : (b->qs[j - 16] >> 4);
        return float(b->d) * (q - 8);
    }
    case T_Q5_0: {
        device const block_q5_0 *b = (device const block_q5_0 *)row + i / 32;
        const int j = i % 32;
        const uint qh = uint(b->qh[0]) | (uint(b->qh[1]) << 8) | (uint(b->qh[2]) << 16) | (uint(b->qh[3]) << 24);
        const int lo = j < 16 ? (b->qs[j] & 0xF) : (b->qs[j - 16] >> 4);
        const int hi = (qh >> j) & 1;
        return float(b->d) * ((lo | (hi << 4)) - 16);
    }
    case T_Q8_0: {
        device const block_q8_0 *b = (device const block_q8_0 *)row + i / 32;
        return float(b->d) * b->qs[i % 32];
    }
    case T_Q4_K: case T_Q5_K: {
        const int bi = i / QK_K, r = i % QK_K;
        device const uchar *sc12;
        device const uchar *qs;
        half2 dmh;
        if (type == T_Q4_K) {
            device const block_q4_K *b = (device const block_q4_K *)row + bi;
            sc12 = b->scales; qs = b->qs; dmh = b->dm;
        } else {
            device const block_q5_K *b = (device const block_q5_K *)row + bi;
            sc12 = b->scales; qs = b->qs; dmh = b->dm;
        }
        const int sub = r / 32, is = sub;
        uchar sc, m;
        if (is < 4) {
            sc = sc12[is] & 63; m = sc12[is + 4] & 63;
        } else {
            sc = (sc12[is + 4] & 0xF) | ((sc12[is - 4] >> 6) << 4);
            m = (sc12[is + 4] >> 4) | ((sc12[is] >> 6) << 4);
        }
        const int pair = sub / 2, l = r % 32;
        const uchar byte = qs[32 * pair + l];
        int q = (sub % 2 == 0) ? (byte & 0xF) : (byte >> 4);
        if (type == T_Q5_K) {
            device const block_q5_K *b = (device const block_q5_K *)row + bi;
            q += ((b->qh[l] >> sub) & 1) << 4;
        }
        const float2 dm = float2(dmh);
        return dm.x * sc * q - dm.y * m;
    }
    case T_Q6_K: {
        device const block_q6_K *b = (device const block_q6_K *)row + i / QK_K;
        const int r = i % QK_K;
        const int half128 = r / 128, rr = r % 128;
        const int l = rr % 32, grp = rr / 32;
        device const uchar *ql = b->ql + 64 * half128;
        device const uchar *qh = b->qh + 32 * half128;
        device const char *sc = b->scales + 8 * half128;
        int q;
        switch (grp) {
        case 0: q = int((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32; break;
        case 1: q = int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32; break;
        case 2: q = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32; break;
        default: q = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32; break;
        }
        return float(b->d) * sc[l / 16 + 2 * grp] * q;
    }
    default: return NAN;
    }
}

// ---- helpers -------------------------------------------------------------------------------

struct StepParams { int pos; int token; int step; int pad; };

static float block_sum(float v, threadgroup float *scratch, uint tid, uint ntg) {
    const uint lane = tid % WARP, warp = tid / WARP, nwarps = (ntg + WARP - 1) / WARP;
    v = simd_sum(v);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (lane == 0) scratch[warp] = v;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float t = lane < nwarps ? scratch[lane] : 0.0f;
    return simd_sum(t);
}

static inline void quantize_lane(float xi, device block_q8_1 *out, uint lane) {
    const float amax = simd_max(fabs(xi));
    const float sum = simd_sum(xi);
    const float d = amax / 127.0f;
    const char q = amax == 0.0f ? 0 : char(rint(xi / d));
    out->qs[lane] = q;
    if (lane == 0) out->ds = half2(half(d), half(sum));
}

static void norm_quantize(threadgroup const float *x, int n, device const float *w, float eps,
                          threadgroup float *scratch, device block_q8_1 *out, device float *xf,
                          uint tid, uint ntg) {
    float ss = 0.0f;
    for (int i = tid; i < n; i += ntg) ss += x[i] * x[i];
    ss = block_sum(ss, scratch, tid, ntg);
    const float scale = rsqrt(ss / n + eps);
    const uint lane = tid % WARP, warp = tid / WARP, nwarps = ntg / WARP;
    for (int b = warp; b < n / 32; b += nwarps) {
        const int i = 32 * b + lane;
        const float v = x[i] * scale * w[i];
        if (xf) xf[i] = v;
        quantize_lane(v, &out[b], lane);
    }
}

static inline float gelu_tanh(float x) {
    const float c = 0.7978845608028654f;
    return 0.5f * x * (1.0f + precise::tanh(c * x * (1.0f + 0.044715f * x * x)));
}

// ---- kernels ---------------------------------------------------------------------------------

struct EmbedArgs { int type; int n_embd; float scale; float eps; };

kernel void embed_norm(device const uchar *table [[buffer(0)]], constant EmbedArgs &a [[buffer(1)]],
                       device const float *w [[buffer(2)]], device const StepParams *p [[buffer(3)]],
                       device float *x [[buffer(4)]], device block_q8_1 *xq [[buffer(5)]],
                       threadgroup float *sh [[threadgroup(0)]],
                       uint tid [[thread_position_in_threadgroup]], uint ntg [[threads_per_threadgroup]]) {
    threadgroup float *xs = sh;
    threadgroup float *scratch = sh + a.n_embd;
    device const uchar *row = table + ulong(p->token) * row_bytes(a.type, a.n_embd);
    for (int i = tid; i < a.n_embd; i += ntg) {
        const float v = value_at(a.type, row, i) * a.scale;
        xs[i] = v;
        x[i] = v;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    norm_quantize(xs, a.n_embd, w, a.eps, scratch, xq, nullptr, tid, ntg);
}

// Pointers inside argument structs: the host writes each buffer's `gpuAddress` (Metal 3) and
// makes the buffers resident (`useResource`), as the CUDA kernels take raw device pointers.
struct Mat { device const uchar *w; device float *out; int type; int rows; };
struct Mats { Mat m[3]; int n_mats; int k; };

kernel void matvec3(constant Mats &a [[buffer(0)]], device const block_q8_1 *y [[buffer(1)]],
                    uint tgid [[threadgroup_position_in_grid]], uint tid [[thread_position_in_threadgroup]],
                    uint ntg [[threads_per_threadgroup]]) {
    const uint lane = tid % WARP;
    int row = int(tgid * (ntg / WARP) + tid / WARP);
    int which = 0;
    if (row >= a.m[0].rows) {
        row -= a.m[0].rows;
        which = 1;
        if (a.n_mats < 2) return;
        if (row >= a.m[1].rows) {
            row -= a.m[1].rows;
            which = 2;
            if (a.n_mats < 3 || row >= a.m[2].rows) return;
        }
    }
    const constant Mat &m = a.m[which];
    const float v = row_dot_any(m.type, m.w + ulong(row) * row_bytes(m.type, a.k), y, a.k, lane);
    if (lane == 0) m.out[row] = v;
}

struct GateUpArgs { int gate_type; int up_type; int k; int has_out; };

kernel void gate_up(device const uchar *gate [[buffer(0)]], device const uchar *up [[buffer(1)]],
                    constant GateUpArgs &a [[buffer(2)]], device const block_q8_1 *y [[buffer(3)]],
                    device block_q8_1 *outq [[buffer(4)]], device float *out [[buffer(5)]],
                    uint tgid [[threadgroup_position_in_grid]], uint tid [[thread_position_in_threadgroup]],
                    uint tcount [[threads_per_threadgroup]]) {
    threadgroup float vals[32];
    const uint lane = tid % WARP, warp = tid / WARP;
    const ulong gb = row_bytes(a.gate_type, a.k), ub = row_bytes(a.up_type, a.k);
    const int per_warp = 32 / (tcount / WARP);
    for (int j = 0; j < per_warp; ++j) {
        const int r = per_warp * warp + j;
        const int row = 32 * tgid + r;
        const float g = row_dot_any(a.gate_type, gate + ulong(row) * gb, y, a.k, lane);
        const float u = row_dot_any(a.up_type, up + ulong(row) * ub, y, a.k, lane);
        if (lane == 0) vals[r] = gelu_tanh(g) * u;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (warp == 0) {
        const float v = vals[lane];
        if (a.has_out) out[32 * tgid + lane] = v;
        quantize_lane(v, &outq[tgid], lane);
    }
}

struct Attn {
    device const float *q, *k, *v, *q_norm, *k_norm;
    int v_norm;
    device const float *cos, *sin;
    int n_rot;
    device half *k_cache, *v_cache;
    int slots, sliding, window, n_head, n_kv, hd;
    float q_scale, softcap, eps;
    device float *partial;
    int splits;
};

static void head_norm(threadgroup float *x, int hd, device const float *w, float eps, uint lane) {
    float ss = 0.0f;
    for (int i = lane; i < hd; i += WARP) ss += x[i] * x[i];
    ss = simd_sum(ss);
    const float s = rsqrt(ss / hd + eps);
    for (int i = lane; i < hd; i += WARP) x[i] = x[i] * s * (w ? w[i] : 1.0f);
    simdgroup_barrier(mem_flags::mem_threadgroup);
}

static void head_rope(threadgroup float *x, int n_rot, device const float *cosv, device const float *sinv, int pos, uint lane) {
    const int half_rot = n_rot / 2;
    device const float *c = cosv + ulong(pos) * half_rot;
    device const float *s = sinv + ulong(pos) * half_rot;
    for (int j = lane; j < half_rot; j += WARP) {
        const float x0 = x[j], x1 = x[j + half_rot];
        x[j] = x0 * c[j] - x1 * s[j];
        x[j + half_rot] = x0 * s[j] + x1 * c[j];
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);
}

template <int G, int PL>
kernel void attention_split(constant Attn &a [[buffer(0)]], device const StepParams *p [[buffer(1)]],
                            uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_position_in_threadgroup]],
                            uint ntg [[threads_per_threadgroup]]) {
    constexpr int HD = PL * WARP;
    threadgroup float qs[G][HD];
    threadgroup float kn[HD];
    threadgroup float vn[HD];
    threadgroup float red_m[8][G];
    threadgroup float red_l[8][G];
    threadgroup float red_acc[G][HD];
    const int g = tg.x, split = tg.y;
    const uint lane = tid % WARP, warp = tid / WARP, nwarps = ntg / WARP;
    const int pos = p->pos;
    const bool has_new = a.k != nullptr;
    device const float *aq = a.q, *ak = a.k, *av = a.v, *q_norm = a.q_norm, *k_norm = a.k_norm;
    device const float *cosv = a.cos, *sinv = a.sin;
    device half *k_cache = a.k_cache, *v_cache = a.v_cache;

    if (has_new && warp == 0) {
        for (int i = lane; i < HD; i += WARP) { kn[i] = ak[g * HD + i]; vn[i] = av[g * HD + i]; }
        simdgroup_barrier(mem_flags::mem_threadgroup);
        if (k_norm) head_norm(kn, HD, k_norm, a.eps, lane);
        if (a.v_norm) head_norm(vn, HD, nullptr, a.eps, lane);
        head_rope(kn, a.n_rot, cosv, sinv, pos, lane);
    }
    for (int h = warp; h < G; h += nwarps) {
        threadgroup float *q = qs[h];
        device const float *src = aq + ulong(g * G + h) * HD;
        for (int i = lane; i < HD; i += WARP) q[i] = src[i];
        simdgroup_barrier(mem_flags::mem_threadgroup);
        if (q_norm) head_norm(q, HD, q_norm, a.eps, lane);
        head_rope(q, a.n_rot, cosv, sinv, pos, lane);
        for (int i = lane; i < HD; i += WARP) q[i] *= a.q_scale;
        simdgroup_barrier(mem_flags::mem_threadgroup);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (has_new && split == 0) {
        const int slot = a.sliding ? pos % a.slots : pos;
        for (int i = tid; i < HD; i += ntg) {
            const ulong at = (ulong(g) * a.slots + slot) * HD + i;
            k_cache[at] = half(kn[i]);
            v_cache[at] = half(vn[i]);
        }
    }
    const int n_keys = a.sliding ? min(a.window, pos + 1) : pos + 1;
    const int first = pos - n_keys + 1;
    const int per = (n_keys + a.splits - 1) / a.splits;
    const int lo = first + split * per, hi = min(first + (split + 1) * per, pos + 1);

    float m[G], l[G], acc[G][PL];
    for (int h = 0; h < G; ++h) {
        m[h] = -INFINITY;
        l[h] = 0.0f;
        for (int j = 0; j < PL; ++j) acc[h][j] = 0.0f;
    }
    for (int t = lo + warp; t < hi; t += nwarps) {
        const bool fresh = has_new && t == pos;
        const ulong base = (ulong(g) * a.slots + (a.sliding ? t % a.slots : t)) * HD;
        float kv[PL], vv[PL];
        for (int j = 0; j < PL; ++j) {
            const int i = lane + WARP * j;
            kv[j] = fresh ? kn[i] : float(k_cache[base + i]);
            vv[j] = fresh ? vn[i] : float(v_cache[base + i]);
        }
        for (int h = 0; h < G; ++h) {
            float s = 0.0f;
            for (int j = 0; j < PL; ++j) s += qs[h][lane + WARP * j] * kv[j];
            s = simd_sum(s);
            if (a.softcap > 0.0f) s = a.softcap * precise::tanh(s / a.softcap);
            const float m_new = max(m[h], s);
            const float c = exp(m[h] - m_new), e = exp(s - m_new);
            l[h] = l[h] * c + e;
            for (int j = 0; j < PL; ++j) acc[h][j] = acc[h][j] * c + e * vv[j];
            m[h] = m_new;
        }
    }
    if (lane == 0)
        for (int h = 0; h < G; ++h) red_m[warp][h] = m[h];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int h = 0; h < G; ++h) {
        float mb = -INFINITY;
        for (uint w = 0; w < nwarps; ++w) mb = max(mb, red_m[w][h]);
        const float c = m[h] == -INFINITY ? 0.0f : exp(m[h] - mb);
        if (lane == 0) red_l[warp][h] = l[h] * c;
        for (uint w = 0; w < nwarps; ++w) {
            if (w == warp)
                for (int j = 0; j < PL; ++j) {
                    const int i = lane + WARP * j;
                    red_acc[h][i] = (w == 0 ? 0.0f : red_acc[h][i]) + acc[h][j] * c;
                }
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }
        if (tid == 0) {
            float lb = 0.0f;
            for (uint w = 0; w < nwarps; ++w) lb += red_l[w][h];
            device float *out = a.partial + (ulong(g * G + h) * a.splits + split) * (HD + 2);
            out[HD] = mb;
            out[HD + 1] = lb;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    for (int h = 0; h < G; ++h) {
        device float *out = a.partial + (ulong(g * G + h) * a.splits + split) * (HD + 2);
        for (int i = tid; i < HD; i += ntg) out[i] = red_acc[h][i];
    }
}

#define ATTENTION_SPLIT(G, PL)                                                                          \
    template [[host_name("attention_split_g" #G "_d" #PL)]] kernel void attention_split<G, PL>(        \
        constant Attn &, device const StepParams *, uint2, uint, uint);
ATTENTION_SPLIT(1, 2)
ATTENTION_SPLIT(1, 4)
ATTENTION_SPLIT(1, 8)
ATTENTION_SPLIT(1, 16)
ATTENTION_SPLIT(2, 2)
ATTENTION_SPLIT(2, 4)
ATTENTION_SPLIT(2, 8)
ATTENTION_SPLIT(2, 16)
ATTENTION_SPLIT(4, 2)
ATTENTION_SPLIT(4, 4)
ATTENTION_SPLIT(4, 8)
ATTENTION_SPLIT(4, 16)
ATTENTION_SPLIT(8, 2)
ATTENTION_SPLIT(8, 4)
ATTENTION_SPLIT(8, 8)

struct JoinArgs { int splits; int hd; int has_out; };

kernel void attention_join(device const float *partial [[buffer(0)]], constant JoinArgs &a [[buffer(1)]],
                           device float *out [[buffer(2)]], device block_q8_1 *outq [[buffer(3)]],
                           uint h [[threadgroup_position_in_grid]], uint i [[thread_position_in_threadgroup]]) {
    const int hd = a.hd;
    device const float *pp = partial + ulong(h) * a.splits * (hd + 2);
    float mb = -INFINITY;
    for (int s = 0; s < a.splits; ++s) mb = max(mb, pp[s * (hd + 2) + hd]);
    float l = 0.0f, acc = 0.0f;
    for (int s = 0; s < a.splits; ++s) {
        device const float *ps = pp + s * (hd + 2);
        const float ls = ps[hd + 1];
        if (ls == 0.0f) continue;
        const float c = exp(ps[hd] - mb);
        l += ls * c;
        acc += ps[i] * c;
    }
    const float v = l > 0.0f ? acc / l : 0.0f;
    if (a.has_out) out[h * hd + i] = v;
    quantize_lane(v, &outq[(h * hd + i) / 32], i % WARP);
}

struct AddNormArgs { float eps; float scale; int n; int has_post; int has_hidden; };

kernel void add_norm(device float *x [[buffer(0)]], device const float *o [[buffer(1)]],
                     device const float *post [[buffer(2)]], constant AddNormArgs &a [[buffer(3)]],
                     device const float *next [[buffer(4)]], device block_q8_1 *xq [[buffer(5)]],
                     device float *hidden [[buffer(6)]], threadgroup float *sh [[threadgroup(0)]],
                     uint tid [[thread_position_in_threadgroup]], uint ntg [[threads_per_threadgroup]]) {
    const int n = a.n;
    threadgroup float *xs = sh;
    threadgroup float *scratch = sh + n;
    float ss = 0.0f;
    if (a.has_post) {
        for (int i = tid; i < n; i += ntg) ss += o[i] * o[i];
        ss = block_sum(ss, scratch, tid, ntg);
    }
    const float s = a.has_post ? rsqrt(ss / n + a.eps) : 1.0f;
    for (int i = tid; i < n; i += ntg) {
        float v = x[i] + (a.has_post ? o[i] * s * post[i] : o[i]);
        v *= a.scale;
        x[i] = v;
        xs[i] = v;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    norm_quantize(xs, n, next, a.eps, scratch, xq, a.has_hidden ? hidden : nullptr, tid, ntg);
}

struct PenaltyArgs { int window; float repeat; float presence; };

kernel void penalties(device float *logits [[buffer(0)]], device const int *recent [[buffer(1)]],
                      device const int *n_recent [[buffer(2)]], constant PenaltyArgs &a [[buffer(3)]],
                      uint tid [[thread_position_in_threadgroup]], uint ntg [[threads_per_threadgroup]]) {
    const int n = min(*n_recent, a.window);
    for (int i = tid; i < n; i += ntg) {
        const int t = recent[i];
        bool first = true;
        for (int j = 0; j < i; ++j) first = first && recent[j] != t;
        if (!first) continue;
        float l = logits[t];
        l = l > 0.0f ? l / a.repeat : l * a.repeat;
        logits[t] = l - a.presence;
    }
}

#define TOPK_MAX 64

struct TopArgs { int n; int k; float softcap; };

kernel void top_candidates(device float *logits [[buffer(0)]], constant TopArgs &a [[buffer(1)]],
                           device float *cand_v [[buffer(2)]], device int *cand_i [[buffer(3)]],
                           uint tgid [[threadgroup_position_in_grid]], uint ngroups [[threadgroups_per_grid]],
                           uint tid [[thread_position_in_threadgroup]], uint ntg [[threads_per_threadgroup]]) {
    threadgroup float bv[8];
    threadgroup int bi[8];
    const int per = (a.n + int(ngroups) - 1) / int(ngroups);
    const int lo = int(tgid) * per, hi = min(a.n, lo + per);
    const uint lane = tid % WARP, warp = tid / WARP;
    if (a.softcap > 0.0f)
        for (int i = lo + tid; i < hi; i += ntg) logits[i] = a.softcap * precise::tanh(logits[i] / a.softcap);
    threadgroup_barrier(mem_flags::mem_device);
    float last_v = INFINITY;
    int last_i = -1;
    for (int r = 0; r < a.k; ++r) {
        float best = -INFINITY;
        int best_i = INT_MAX;
        for (int i = lo + tid; i < hi; i += ntg) {
            const float v = logits[i];
            const bool after = v < last_v || (v == last_v && i > last_i);
            if (after && (v > best || (v == best && i < best_i))) { best = v; best_i = i; }
        }
        for (ushort o = 16; o > 0; o >>= 1) {
            const float ov = simd_shuffle_xor(best, o);
            const int oi = simd_shuffle_xor(best_i, o);
            if (ov > best || (ov == best && oi < best_i)) { best = ov; best_i = oi; }
        }
        if (lane == 0) { bv[warp] = best; bi[warp] = best_i; }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (tid == 0) {
            for (int w = 1; w < 8; ++w)
                if (bv[w] > bv[0] || (bv[w] == bv[0] && bi[w] < bi[0])) { bv[0] = bv[w]; bi[0] = bi[w]; }
            cand_v[tgid * a.k + r] = bv[0];
            cand_i[tgid * a.k + r] = bi[0] == INT_MAX ? -1 : bi[0];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        last_v = bv[0];
        last_i = bi[0];
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
}

struct Sampling { float temperature; int top_k; float top_p; float min_p; int n_draws; int n_cand; int window; int pad; };

kernel void pick(device const float *cand_v [[buffer(0)]], device const int *cand_i [[buffer(1)]],
                 constant Sampling &s [[buffer(2)]], device const float *draws [[buffer(3)]],
                 device StepParams *p [[buffer(4)]], device int *recent [[buffer(5)]],
                 device int *n_recent [[buffer(6)]], device int *out_token [[buffer(7)]],
                 uint tid [[thread_position_in_threadgroup]], uint ntg [[threads_per_threadgroup]]) {
    threadgroup float v[TOPK_MAX];
    threadgroup int id[TOPK_MAX];
    threadgroup float wv[2];
    threadgroup int wi[2];
    threadgroup int kept;
    const int k = max(1, min(s.top_k, TOPK_MAX));
    const uint lane = tid % WARP, warp = tid / WARP;
    float last_v = INFINITY;
    int last_i = -1;
    if (tid == 0) kept = 0;
    for (int r = 0; r < k; ++r) {
        float best = -INFINITY;
        int best_i = INT_MAX;
        for (int c = tid; c < s.n_cand; c += ntg) {
            const float cv = cand_v[c];
            const int ci = cand_i[c];
            if (ci < 0) continue;
            const bool after = cv < last_v || (cv == last_v && ci > last_i);
            if (after && (cv > best || (cv == best && ci < best_i))) { best = cv; best_i = ci; }
        }
        for (ushort o = 16; o > 0; o >>= 1) {
            const float ov = simd_shuffle_xor(best, o);
            const int oi = simd_shuffle_xor(best_i, o);
            if (ov > best || (ov == best && oi < best_i)) { best = ov; best_i = oi; }
        }
        if (lane == 0) { wv[warp] = best; wi[warp] = best_i; }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (tid == 0) {
            if (wv[1] > wv[0] || (wv[1] == wv[0] && wi[1] < wi[0])) { wv[0] = wv[1]; wi[0] = wi[1]; }
            if (wi[0] != INT_MAX && isfinite(wv[0])) {
                v[r] = wv[0];
                id[r] = wi[0];
                kept = r + 1;
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (kept <= r) break;
        last_v = v[r];
        last_i = id[r];
    }
    if (tid == 0) {
        int token = kept > 0 ? id[0] : 0;
        if (s.temperature > 0.0f && kept > 1) {
            float sum = 0.0f;
            for (int r = 0; r < kept; ++r) sum += exp(v[r] - v[0]);
            int keep = kept;
            if (s.top_p < 1.0f) {
                float acc = 0.0f;
                for (int r = 0; r < kept; ++r) {
                    acc += exp(v[r] - v[0]) / sum;
                    if (acc >= s.top_p) { keep = r + 1; break; }
                }
            }
            if (s.min_p > 0.0f) {
                const float threshold = (1.0f / sum) * s.min_p;
                int n = 0;
                while (n < kept && exp(v[n] - v[0]) / sum >= threshold) ++n;
                keep = min(keep, max(n, 1));
            }
            keep = max(keep, 1);
            float z = 0.0f;
            for (int r = 0; r < keep; ++r) z += exp((v[r] - v[0]) / s.temperature);
            const float u = draws[p->step % s.n_draws];
            float acc = 0.0f;
            token = id[keep - 1];
            for (int r = 0; r < keep; ++r) {
                acc += exp((v[r] - v[0]) / s.temperature) / z;
                if (u < acc) { token = id[r]; break; }
            }
        }
        *out_token = token;
        p->token = token;
        p->pos += 1;
        p->step += 1;
        const int n = *n_recent;
        if (n < s.window) {
            recent[n] = token;
            *n_recent = n + 1;
        } else if (s.window > 0) {
            for (int i = 1; i < s.window; ++i) recent[i - 1] = recent[i];
            recent[s.window - 1] = token;
        }
    }
}
