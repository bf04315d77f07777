// The fused decode step of the Gemma forward pass on CUDA (engine/src/backend/cuda_decode.rs
// drives it). One token, eight kernels per layer instead of the 38 candle ops of the generic
// path, every buffer allocated once per session, and every value that changes from token to
// token (the position, the token, the sampler's step) read from device memory, so that the
// whole step can be captured once as a CUDA graph and replayed:
//
//   embed_norm        token row · scale → x;  rmsnorm(x) · attn_norm → q8_1          (layer 0)
//   per layer:
//   matvec3           Q, K, V from the q8_1 input (one launch, up to three matrices)
//   attention_split   QK-norm + RoPE + scale, the new K/V written to the f16 cache, scores
//                     (soft-capped) and an online softmax over a slice of the window, per
//                     KV head and split
//   attention_join    the splits combined, the output quantized to q8_1
//   matvec3           the output projection
//   add_norm          x += rmsnorm(o) · post_attention_norm;  rmsnorm(x) · ffn_norm → q8_1
//   gate_up           gelu(gate) · up, quantized to q8_1 in the same launch
//   matvec3           down
//   add_norm          x += rmsnorm(f) · post_ffw_norm [· layer scale];
//                     rmsnorm(x) · (next attn_norm | output_norm) → q8_1
//   then: matvec3 (logits), penalties, top_candidates, pick (greedy or the sampler chain; the
//   token is written where the next step's embed_norm reads it, and the position advances).
//
// Numerics follow llama.cpp b11434's CUDA backend: activations quantized to q8_1 for every
// matrix product (ggml `quantize_q8_1`, `mul_mat_vec_q`), RMSNorm in f32, GELU with tanh, the
// KV cache in f16. The Metal twin of each kernel is in engine/metal/decode.metal.

#include "quants.cuh"


struct StepParams {
    int pos;   // position of the token being processed
    int token; // the token at `pos`
    int step;  // tokens sampled so far in this generation (indexes the random draws)
    int pad;
};

// ---- helpers -------------------------------------------------------------------------------

// Sum over the block (any size up to 1024 threads, a multiple of 32); every thread gets it.
static __device__ float block_sum(float v, float *scratch) {
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const int nwarps = (blockDim.x + WARP - 1) / WARP;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float t = lane < nwarps ? scratch[lane] : 0.0f;
    t = warp_sum(t);
    return t;
}

// Quantize 32 values (one per lane of a warp) into one q8_1 block (ggml quantize_q8_1).
static __device__ __forceinline__ void quantize_lane(float xi, block_q8_1 *out, int lane) {
    const float amax = warp_max(fabsf(xi));
    const float sum = warp_sum(xi);
    const float d = amax / 127.0f;
    const int8_t q = amax == 0.0f ? 0 : (int8_t)roundf(xi / d);
    out->qs[lane] = q;
    if (lane == 0) out->ds = make_half2(__float2half(d), __float2half(sum));
}

// rmsnorm(`x`, `n` values in shared memory) · w → quantized into `out` (n/32 q8_1 blocks);
// also the f32 result into `xf` when given. The whole block takes part.
static __device__ void norm_quantize(const float *x, int n, const float *w, float eps, float *scratch,
                                     block_q8_1 *out, float *xf) {
    float ss = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += x[i] * x[i];
    ss = block_sum(ss, scratch);
    const float scale = rsqrtf(ss / n + eps);
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const int nwarps = blockDim.x / WARP;
    for (int b = warp; b < n / 32; b += nwarps) {
        const int i = 32 * b + lane;
        const float v = x[i] * scale * w[i];
        if (xf) xf[i] = v;
        quantize_lane(v, &out[b], lane);
    }
}

static __device__ __forceinline__ float gelu_tanh(float x) {
    const float c = 0.7978845608028654f; // sqrt(2/pi) (ggml GELU_COEF_A 0.044715)
    return 0.5f * x * (1.0f + tanhf(c * x * (1.0f + 0.044715f * x * x)));
}

// ---- kernels ---------------------------------------------------------------------------------

// The token's embedding row × `scale` into `x`, then rmsnorm(x) · `w` as q8_1 into `xq`.
// One block.
extern "C" __global__ void embed_norm(const uint8_t *table, int type, int n_embd, float scale,
                                      const float *w, float eps, const StepParams *p, float *x,
                                      block_q8_1 *xq) {
    extern __shared__ float sh[];
    float *xs = sh;               // n_embd
    float *scratch = sh + n_embd; // 32
    const uint8_t *row = table + (size_t)p->token * row_bytes(type, n_embd);
    for (int i = threadIdx.x; i < n_embd; i += blockDim.x) {
        const float v = value_at(type, row, i) * scale;
        xs[i] = v;
        x[i] = v;
    }
    __syncthreads();
    norm_quantize(xs, n_embd, w, eps, scratch, xq, nullptr);
}

// Up to three matrices times the same q8_1 vector `y` (`k` values): rows of matrix 0, then 1,
// then 2, one warp per row, four rows per block.
struct Mat {
    const uint8_t *w;
    float *out;
    int type;
    int rows;
};

extern "C" __global__ void matvec3(Mat m0, Mat m1, Mat m2, int n_mats, const block_q8_1 *y, int k) {
    const int lane = threadIdx.x % WARP;
    int row = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP;
    Mat m = m0;
    if (row >= m0.rows) {
        row -= m0.rows;
        m = m1;
        if (n_mats < 2) return;
        if (row >= m1.rows) {
            row -= m1.rows;
            m = m2;
            if (n_mats < 3 || row >= m2.rows) return;
        }
    }
    const float v = row_dot_any(m.type, m.w + (size_t)row * row_bytes(m.type, k), y, k, lane);
    if (lane == 0) m.out[row] = v;
}

// gelu(gate · y) ⊙ (up · y) for 32 rows per block (8 warps × 4 rows), quantized as the q8_1
// block `blockIdx.x` of the down projection's input (and f32 into `out` when given).
extern "C" __global__ void __launch_bounds__(1024) gate_up(const uint8_t *gate, int gate_type, const uint8_t *up, int up_type,
                                   const block_q8_1 *y, int k, block_q8_1 *outq, float *out) {
    __shared__ float vals[32];
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const int gb = (int)row_bytes(gate_type, k), ub = (int)row_bytes(up_type, k);
    // 32 rows per block over its warps: launched with 1024 threads, one row (two dots) per
    // warp — with 256 the 64 blocks of a 2048-wide FFN ran 4 rows per warp one after another
    // and the kernel was the decode step's slowest (12.7 µs on the H200)
    const int per_warp = 32 / (blockDim.x / WARP);
    for (int j = 0; j < per_warp; ++j) {
        const int r = per_warp * warp + j;
        const int row = 32 * blockIdx.x + r;
        const float g = row_dot_any(gate_type, gate + (size_t)row * gb, y, k, lane);
        const float u = row_dot_any(up_type, up + (size_t)row * ub, y, k, lane);
        if (lane == 0) vals[r] = gelu_tanh(g) * u;
    }
    __syncthreads();
    if (warp == 0) {
        const float v = vals[lane];
        if (out) out[32 * blockIdx.x + lane] = v;
        quantize_lane(v, &outq[blockIdx.x], lane);
    }
}

// What a layer's attention needs.
struct Attn {
    const float *q;      // [n_head × hd] projections (not normed, not rotated)
    const float *k;      // [n_kv × hd] new K (nullptr: a shared-KV layer, nothing to write)
    const float *v;      // [n_kv × hd] new V (== k where the layer has no V projection)
    const float *q_norm; // [hd] or nullptr
    const float *k_norm; // [hd] or nullptr
    int v_norm;          // rmsnorm V without weight (Gemma 4)
    const float *cos;    // rope table [positions × n_rot/2]
    const float *sin;
    int n_rot;
    half *k_cache;       // [n_kv, slots, hd]
    half *v_cache;
    int slots;
    int sliding;         // slot = pos % slots, keys within `window`
    int window;
    int n_head, n_kv, hd;
    float q_scale;
    float softcap;       // 0: none
    float eps;
    float *partial;      // [n_head, splits, hd + 2]: acc, max, sum
    int splits;
};

// rmsnorm over `hd` values of one head (in shared memory, by one warp), times `w` if given.
static __device__ void head_norm(float *x, int hd, const float *w, float eps, int lane) {
    float ss = 0.0f;
    for (int i = lane; i < hd; i += WARP) ss += x[i] * x[i];
    ss = warp_sum(ss);
    const float s = rsqrtf(ss / hd + eps);
    for (int i = lane; i < hd; i += WARP) x[i] = x[i] * s * (w ? w[i] : 1.0f);
    __syncwarp();
}

// NEOX rope over the first n_rot values at position `pos` (ggml rotate_pairs), by one warp.
static __device__ void head_rope(float *x, int n_rot, const float *cos, const float *sin, int pos, int lane) {
    const int half_rot = n_rot / 2;
    const float *c = cos + (size_t)pos * half_rot;
    const float *s = sin + (size_t)pos * half_rot;
    for (int j = lane; j < half_rot; j += WARP) {
        const float x0 = x[j], x1 = x[j + half_rot];
        x[j] = x0 * c[j] - x1 * s[j];
        x[j + half_rot] = x0 * s[j] + x1 * c[j];
    }
    __syncwarp();
}

// grid (n_kv, splits), 256 threads. Each block: one KV head, its group of `G` query heads,
// one slice of the keys the query sees; writes (acc, max, sum) per query head for
// attention_join. `PL`: values of a head per lane (head_dim / 32).
template <int G, int PL>
static __device__ void attention_split_impl(const Attn &a, const StepParams *p) {
    constexpr int HD = PL * WARP;
    __shared__ float qs[G][HD];
    __shared__ float kn[HD];
    __shared__ float vn[HD];
    __shared__ float red_m[8][G];
    __shared__ float red_l[8][G];
    __shared__ float red_acc[G][HD];
    const int g = blockIdx.x, split = blockIdx.y;
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, nwarps = blockDim.x / WARP;
    const int pos = p->pos;
    const bool has_new = a.k != nullptr;

    // the new K and V of this head, normed and rotated (every block makes its own copy)
    if (has_new && warp == 0) {
        for (int i = lane; i < HD; i += WARP) { kn[i] = a.k[g * HD + i]; vn[i] = a.v[g * HD + i]; }
        __syncwarp();
        if (a.k_norm) head_norm(kn, HD, a.k_norm, a.eps, lane);
        if (a.v_norm) head_norm(vn, HD, nullptr, a.eps, lane);
        head_rope(kn, a.n_rot, a.cos, a.sin, pos, lane);
    }
    // the queries of the group: normed, rotated and scaled, one warp each
    for (int h = warp; h < G; h += nwarps) {
        float *q = qs[h];
        const float *src = a.q + (size_t)(g * G + h) * HD;
        for (int i = lane; i < HD; i += WARP) q[i] = src[i];
        __syncwarp();
        if (a.q_norm) head_norm(q, HD, a.q_norm, a.eps, lane);
        head_rope(q, a.n_rot, a.cos, a.sin, pos, lane);
        for (int i = lane; i < HD; i += WARP) q[i] *= a.q_scale;
        __syncwarp();
    }
    __syncthreads();
    if (has_new && split == 0) {
        // the cache gets the new K and V in f16, for the steps after this one
        const int slot = a.sliding ? pos % a.slots : pos;
        for (int i = threadIdx.x; i < HD; i += blockDim.x) {
            const size_t at = ((size_t)g * a.slots + slot) * HD + i;
            a.k_cache[at] = __float2half(kn[i]);
            a.v_cache[at] = __float2half(vn[i]);
        }
    }
    // keys pos - n_keys + 1 ..= pos; this split's contiguous share
    const int n_keys = a.sliding ? min(a.window, pos + 1) : pos + 1;
    const int first = pos - n_keys + 1;
    const int per = (n_keys + a.splits - 1) / a.splits;
    const int lo = first + split * per, hi = min(first + (split + 1) * per, pos + 1);

    // per warp: an online softmax over its keys, for every query head of the group
    float m[G], l[G], acc[G][PL];
#pragma unroll
    for (int h = 0; h < G; ++h) {
        m[h] = -INFINITY;
        l[h] = 0.0f;
#pragma unroll
        for (int j = 0; j < PL; ++j) acc[h][j] = 0.0f;
    }
    for (int t = lo + warp; t < hi; t += nwarps) {
        const bool fresh = has_new && t == pos;
        const size_t base = ((size_t)g * a.slots + (a.sliding ? t % a.slots : t)) * HD;
        float kv[PL], vv[PL];
#pragma unroll
        for (int j = 0; j < PL; ++j) {
            const int i = lane + WARP * j;
            kv[j] = fresh ? kn[i] : __half2float(a.k_cache[base + i]);
            vv[j] = fresh ? vn[i] : __half2float(a.v_cache[base + i]);
        }
#pragma unroll
        for (int h = 0; h < G; ++h) {
            float s = 0.0f;
#pragma unroll
            for (int j = 0; j < PL; ++j) s += qs[h][lane + WARP * j] * kv[j];
            s = warp_sum(s);
            if (a.softcap > 0.0f) s = a.softcap * tanhf(s / a.softcap);
            const float m_new = fmaxf(m[h], s);
            const float c = expf(m[h] - m_new), e = expf(s - m_new);
            l[h] = l[h] * c + e;
#pragma unroll
            for (int j = 0; j < PL; ++j) acc[h][j] = acc[h][j] * c + e * vv[j];
            m[h] = m_new;
        }
    }
    // combine the warps of the block
    if (lane == 0) {
#pragma unroll
        for (int h = 0; h < G; ++h) red_m[warp][h] = m[h];
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < G; ++h) {
        float mb = -INFINITY;
        for (int w = 0; w < nwarps; ++w) mb = fmaxf(mb, red_m[w][h]);
        const float c = m[h] == -INFINITY ? 0.0f : expf(m[h] - mb);
        if (lane == 0) red_l[warp][h] = l[h] * c;
        for (int w = 0; w < nwarps; ++w) {
            if (w == warp) {
#pragma unroll
                for (int j = 0; j < PL; ++j) {
                    const int i = lane + WARP * j;
                    red_acc[h][i] = (w == 0 ? 0.0f : red_acc[h][i]) + acc[h][j] * c;
                }
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            float lb = 0.0f;
            for (int w = 0; w < nwarps; ++w) lb += red_l[w][h];
            float *out = a.partial + ((size_t)(g * G + h) * a.splits + split) * (HD + 2);
            out[HD] = mb;
            out[HD + 1] = lb;
        }
        __syncthreads();
    }
    // out: per query head, acc[hd] beside (max, sum)
#pragma unroll
    for (int h = 0; h < G; ++h) {
        float *out = a.partial + ((size_t)(g * G + h) * a.splits + split) * (HD + 2);
        for (int i = threadIdx.x; i < HD; i += blockDim.x) out[i] = red_acc[h][i];
    }
}

#define ATTENTION_SPLIT(G, PL)                                                                    \
    extern "C" __global__ void attention_split_g##G##_d##PL(Attn a, const StepParams *p) {      \
        attention_split_impl<G, PL>(a, p);                                                        \
    }
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

// grid n_head, hd threads: the splits of one query head combined; the output as f32 (when
// asked) and as q8_1 for the output projection.
extern "C" __global__ void attention_join(const float *partial, int splits, int hd, float *out,
                                          block_q8_1 *outq) {
    const int h = blockIdx.x, i = threadIdx.x;
    const float *pp = partial + (size_t)h * splits * (hd + 2);
    float mb = -INFINITY;
    for (int s = 0; s < splits; ++s) mb = fmaxf(mb, pp[s * (hd + 2) + hd]);
    float l = 0.0f, acc = 0.0f;
    for (int s = 0; s < splits; ++s) {
        const float *ps = pp + s * (hd + 2);
        const float ls = ps[hd + 1];
        if (ls == 0.0f) continue;
        const float c = expf(ps[hd] - mb);
        l += ls * c;
        acc += ps[i] * c;
    }
    const float v = l > 0.0f ? acc / l : 0.0f;
    if (out) out[h * hd + i] = v;
    quantize_lane(v, &outq[(h * hd + i) / 32], i % WARP);
}

// x += rmsnorm(o) · post (post nullptr: o as it is) [then x *= scale]; then rmsnorm(x) · next
// as q8_1 (and as f32 into `hidden` when given: the final hidden state). One block.
extern "C" __global__ void add_norm(float *x, const float *o, const float *post, float eps, float scale,
                                    const float *next, int n, block_q8_1 *xq, float *hidden) {
    extern __shared__ float sh[];
    float *xs = sh;         // n
    float *scratch = sh + n;
    float ss = 0.0f;
    if (post) {
        for (int i = threadIdx.x; i < n; i += blockDim.x) ss += o[i] * o[i];
        ss = block_sum(ss, scratch);
    }
    const float s = post ? rsqrtf(ss / n + eps) : 1.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float v = x[i] + (post ? o[i] * s * post[i] : o[i]);
        v *= scale;
        x[i] = v;
        xs[i] = v;
    }
    __syncthreads();
    norm_quantize(xs, n, next, eps, scratch, xq, hidden);
}

// Repetition and presence penalties on the logits of the distinct tokens of the recent
// window (llama.cpp `llama_sampler_penalties_apply`). One block of 64 threads.
extern "C" __global__ void penalties(float *logits, const int *recent, const int *n_recent, int window,
                                     float repeat, float presence) {
    const int n = min(*n_recent, window);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int t = recent[i];
        bool first = true;
        for (int j = 0; j < i; ++j) first = first && recent[j] != t;
        if (!first) continue;
        float l = logits[t];
        l = l > 0.0f ? l / repeat : l * repeat;
        logits[t] = l - presence;
    }
}

#define TOPK_MAX 64

// Each block: the best `k` (value, id) of its slice of the logits (soft-capped when `softcap`
// > 0), best first, ties to the lower id. 256 threads.
extern "C" __global__ void top_candidates(float *logits, int n, int k, float softcap, float *cand_v,
                                          int *cand_i) {
    __shared__ float bv[8];
    __shared__ int bi[8];
    const int per = (n + gridDim.x - 1) / gridDim.x;
    const int lo = blockIdx.x * per, hi = min(n, lo + per);
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    if (softcap > 0.0f)
        for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) logits[i] = softcap * tanhf(logits[i] / softcap);
    __syncthreads();
    float last_v = INFINITY;
    int last_i = -1;
    for (int r = 0; r < k; ++r) {
        // the best strictly after (last_v, last_i) in (value desc, id asc) order
        float best = -INFINITY;
        int best_i = INT_MAX;
        for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) {
            const float v = logits[i];
            const bool after = v < last_v || (v == last_v && i > last_i);
            if (after && (v > best || (v == best && i < best_i))) { best = v; best_i = i; }
        }
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffff, best, o);
            const int oi = __shfl_xor_sync(0xffffffff, best_i, o);
            if (ov > best || (ov == best && oi < best_i)) { best = ov; best_i = oi; }
        }
        if (lane == 0) { bv[warp] = best; bi[warp] = best_i; }
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int w = 1; w < 8; ++w)
                if (bv[w] > bv[0] || (bv[w] == bv[0] && bi[w] < bi[0])) { bv[0] = bv[w]; bi[0] = bi[w]; }
            cand_v[blockIdx.x * k + r] = bv[0];
            cand_i[blockIdx.x * k + r] = bi[0] == INT_MAX ? -1 : bi[0];
        }
        __syncthreads();
        last_v = bv[0];
        last_i = bi[0];
        __syncthreads();
    }
}

struct Sampling {
    float temperature; // <= 0: greedy
    int top_k;         // the candidates kept (1..TOPK_MAX)
    float top_p;
    float min_p;
    const float *draws; // one uniform [0, 1) per step, made by the host's seeded RNG
    int n_draws;
};

// One block of 64 threads: the best `k` of all blocks' candidates, then the chain of
// `sampling::Sampler` (top-p and min-p on the softmax at temperature 1, the draw at the
// temperature) or the argmax; the token goes where the next step reads it, the position and
// the step advance, and the token joins the recent window.
extern "C" __global__ void pick(const float *cand_v, const int *cand_i, int n_cand, Sampling s, StepParams *p,
                                int *recent, int *n_recent, int window, int *out_token) {
    __shared__ float v[TOPK_MAX];
    __shared__ int id[TOPK_MAX];
    __shared__ float wv[2];
    __shared__ int wi[2];
    __shared__ int kept;
    const int k = max(1, min(s.top_k, TOPK_MAX));
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    // merge: the best `k` of every block's candidates, by repeated selection (64 threads)
    float last_v = INFINITY;
    int last_i = -1;
    if (threadIdx.x == 0) kept = 0;
    for (int r = 0; r < k; ++r) {
        float best = -INFINITY;
        int best_i = INT_MAX;
        for (int c = threadIdx.x; c < n_cand; c += blockDim.x) {
            const float cv = cand_v[c];
            const int ci = cand_i[c];
            if (ci < 0) continue;
            const bool after = cv < last_v || (cv == last_v && ci > last_i);
            if (after && (cv > best || (cv == best && ci < best_i))) { best = cv; best_i = ci; }
        }
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffff, best, o);
            const int oi = __shfl_xor_sync(0xffffffff, best_i, o);
            if (ov > best || (ov == best && oi < best_i)) { best = ov; best_i = oi; }
        }
        if (lane == 0) { wv[warp] = best; wi[warp] = best_i; }
        __syncthreads();
        if (threadIdx.x == 0) {
            if (wv[1] > wv[0] || (wv[1] == wv[0] && wi[1] < wi[0])) { wv[0] = wv[1]; wi[0] = wi[1]; }
            if (wi[0] != INT_MAX && isfinite(wv[0])) {
                v[r] = wv[0];
                id[r] = wi[0];
                kept = r + 1;
            }
        }
        __syncthreads();
        if (kept <= r) break; // nothing more (every thread sees the same `kept`)
        last_v = v[r];
        last_i = id[r];
    }
    if (threadIdx.x == 0) {
        int token = kept > 0 ? id[0] : 0;
        if (s.temperature > 0.0f && kept > 1) {
            // softmax at temperature 1 for top-p and min-p
            float sum = 0.0f;
            for (int r = 0; r < kept; ++r) sum += expf(v[r] - v[0]);
            int keep = kept;
            if (s.top_p < 1.0f) {
                float acc = 0.0f;
                for (int r = 0; r < kept; ++r) {
                    acc += expf(v[r] - v[0]) / sum;
                    if (acc >= s.top_p) { keep = r + 1; break; }
                }
            }
            if (s.min_p > 0.0f) {
                const float threshold = (1.0f / sum) * s.min_p;
                int n = 0;
                while (n < kept && expf(v[n] - v[0]) / sum >= threshold) ++n;
                keep = min(keep, max(n, 1));
            }
            keep = max(keep, 1);
            float z = 0.0f;
            for (int r = 0; r < keep; ++r) z += expf((v[r] - v[0]) / s.temperature);
            const float u = s.draws[p->step % s.n_draws];
            float acc = 0.0f;
            token = id[keep - 1];
            for (int r = 0; r < keep; ++r) {
                acc += expf((v[r] - v[0]) / s.temperature) / z;
                if (u < acc) { token = id[r]; break; }
            }
        }
        *out_token = token;
        p->token = token;
        p->pos += 1;
        p->step += 1;
        // the recent window, oldest first
        const int n = *n_recent;
        if (n < window) {
            recent[n] = token;
            *n_recent = n + 1;
        } else if (window > 0) {
            for (int i = 1; i < window; ++i) recent[i - 1] = recent[i];
            recent[window - 1] = token;
        }
    }
}
