/* runtime/trainc_cuda.cuh — the hand-written prelude of generated CUDA C.
 *
 * Compiled by NVRTC at `trainc compile --target=cuda` time together with
 * the kernels codegen/emit_cuda.c generates; never by the host compiler.
 * It holds what every generated kernel shares: dtype conversions (bf16,
 * f16), the scalar functions of pointwise ops, warp and block reductions,
 * 16-byte vector loads, Philox (philox.h), and the template kernels for the
 * ops generic fusion cannot make fast (norms and the residual add + norms,
 * softmax, RoPE, attention, cross-entropy and the rows of linear +
 * cross-entropy, embedding, optimizer updates, loss scaling).  Generated kernels call the
 * templates with compile-time constant sizes.
 *
 * Numerics (docs/cuda.md): pointwise ops compute in float for f32 (a single
 * +, -, *, / or sqrt in float is exactly the C backend's double-then-round;
 * exp, log, tanh, erf differ by an ulp or two); reductions and the
 * statistics of norms and optimizer updates accumulate in double, as the C
 * backend does, so results agree to ~1e-6 relative.  Shapes are written
 * next to every argument.
 */
#ifndef TRAINC_CUDA_CUH
#define TRAINC_CUDA_CUH

/* NVRTC has no C library headers: the fixed-width types philox.h needs
 * (nvcc, which reproduces a --emit=cuda file, has them). */
#ifdef __CUDACC_RTC__
typedef unsigned char      uint8_t;
typedef unsigned short     uint16_t;
typedef unsigned int       uint32_t;
typedef unsigned long long uint64_t;
typedef signed char        int8_t;
typedef short              int16_t;
typedef int                int32_t;
typedef long long          int64_t;
#else
#include <stdint.h>
#endif

#include "philox.h"

#define TRN_DEV     static __device__ __forceinline__
#define TRN_MEMBER  __device__ __forceinline__      /* member functions: no storage class */
#define TRN_FULL    0xffffffffu
#define TRN_INF     __int_as_float(0x7f800000)
#define TRN_DINF    __longlong_as_double(0x7ff0000000000000ll)
/* A vector access of n bytes at p: on the GPU p must be n-byte aligned (a
 * misaligned one faults); the CPU emulation, whose vector types are plain
 * structs, checks it (emu_aligned) instead of letting it pass. */
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define TRN_ALIGNED(p, n) (p)
#else
#define TRN_ALIGNED(p, n) emu_aligned((p), (n))
#endif

/* ---- dtypes: bf16 and f16 are stored as distinct 16-bit types ---- */

struct trn_bf16 { uint16_t x; };
struct trn_f16 { uint16_t x; };

TRN_DEV float trn_f32(float v) { return v; }
TRN_DEV float trn_f32(trn_bf16 v) { return __uint_as_float((uint32_t)v.x << 16); }
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
TRN_DEV float trn_f32(trn_f16 v) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.x));
    return f;
}
#else /* the CPU emulation of tests/cuda/emu: the same conversions in C */
TRN_DEV float trn_f32(trn_f16 v) {
    uint32_t sign = (uint32_t)(v.x & 0x8000u) << 16, e = (v.x >> 10) & 0x1fu, m = v.x & 0x3ffu;
    if (e == 0) {
        float f = (float)m * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    return __uint_as_float(e == 31 ? sign | 0x7f800000u | (m << 13) : sign | ((e + 112) << 23) | (m << 13));
}
#endif
/* f32 -> bf16, round to nearest even; NaN stays NaN (as trainc_kernels.h). */
TRN_DEV trn_bf16 trn_to_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    trn_bf16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        r.x = (uint16_t)((u >> 16) | 0x40);
        return r;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    r.x = (uint16_t)(u >> 16);
    return r;
}
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
TRN_DEV trn_f16 trn_to_f16(float f) {
    trn_f16 r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.x) : "f"(f));
    return r;
}
#else
TRN_DEV trn_f16 trn_to_f16(float f) {
    uint32_t u = __float_as_uint(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    trn_f16 r;
    if (a > 0x7f800000u) r.x = (uint16_t)(sign | 0x7e00u);
    else if (a >= 0x477ff000u) r.x = (uint16_t)(sign | 0x7c00u);
    else if (a < 0x38800000u) r.x = (uint16_t)(sign | (uint32_t)lrintf(__uint_as_float(a) * 16777216.0f));
    else r.x = (uint16_t)(sign | ((a + 0x0fffu + ((a >> 13) & 1u) - 0x38000000u) >> 13));
    return r;
}
#endif
/* Stores a float into any storage type. */
TRN_DEV void trn_st(float *p, float v) { *p = v; }
TRN_DEV void trn_st(trn_bf16 *p, float v) { *p = trn_to_bf16(v); }
TRN_DEV void trn_st(trn_f16 *p, float v) { *p = trn_to_f16(v); }
/* Per-op rounding of a float to bf16 / f16 precision (loop kernels). */
TRN_DEV float trn_r_bf16(float v) { return trn_f32(trn_to_bf16(v)); }
TRN_DEV float trn_r_f16(float v) { return trn_f32(trn_to_f16(v)); }
/* A double rounded to float "to odd" (toward zero, then the last bit set
 * when that dropped anything): rounding the result once more, to bf16 or
 * f16 (nearest even), gives the double correctly rounded, with no double
 * rounding (float keeps more than two extra bits).  Templates that compute
 * in double store half results through it, as the C backend's tk_st
 * rounds from double straight to the dtype. */
TRN_DEV float trn_odd(double d) {
    float f = __double2float_rz(d);
    if ((double)f != d && d == d) f = __uint_as_float(__float_as_uint(f) | 1u);
    return f;
}
TRN_DEV void trn_st(float *p, double v) { *p = (float)v; }
TRN_DEV void trn_st(trn_bf16 *p, double v) { *p = trn_to_bf16(trn_odd(v)); }
TRN_DEV void trn_st(trn_f16 *p, double v) { *p = trn_to_f16(trn_odd(v)); }

/* ---- scalar functions of pointwise ops (float and double) ---- */

TRN_DEV float  trn_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
TRN_DEV double trn_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
TRN_DEV float  trn_silu(float x) { return x / (1.0f + expf(-x)); }
TRN_DEV double trn_silu(double x) { return x / (1.0 + exp(-x)); }
TRN_DEV double trn_clip_coef(double c) { return c < 1.0 || c != c ? c : 1.0; } /* min(1, c), NaN kept (trainc_kernels.h) */
TRN_DEV float  trn_sign(float x) { return x > 0 ? 1.0f : x < 0 ? -1.0f : 0.0f; }
TRN_DEV double trn_sign(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }
/* integer arithmetic as trainc_kernels.h's trn_iadd ... trn_f2i: wrapping,
 * a division by zero 0, a float saturated into the integer dtype */
TRN_DEV long long trn_iadd(long long a, long long b) { return (long long)((unsigned long long)a + (unsigned long long)b); }
TRN_DEV long long trn_isub(long long a, long long b) { return (long long)((unsigned long long)a - (unsigned long long)b); }
TRN_DEV long long trn_imul(long long a, long long b) { return (long long)((unsigned long long)a * (unsigned long long)b); }
TRN_DEV long long trn_ineg(long long a) { return (long long)(0ull - (unsigned long long)a); }
TRN_DEV long long trn_iabs(long long a) { return a < 0 ? trn_ineg(a) : a; }
TRN_DEV long long trn_idiv(long long a, long long b) { return b == 0 ? 0 : b == -1 ? trn_ineg(a) : a / b; }
TRN_DEV long long trn_f2i(double x, long long lo, long long hi) {
    return x != x ? 0 : x <= (double)lo ? lo : x >= (double)hi ? hi : (long long)x;
}
/* maximum and minimum as the interpreter (and PyTorch) take them: NaN if
 * either is NaN (fmaxf and fminf would return the other); trn_rmax, a max
 * reduction's step: a NaN, once met, stays (the interpreter's rule) */
TRN_DEV float  trn_fmaxf(float a, float b) { return a != a || b != b ? a + b : a > b ? a : b; }
TRN_DEV float  trn_fminf(float a, float b) { return a != a || b != b ? a + b : a < b ? a : b; }
TRN_DEV double trn_fmaxd(double a, double b) { return a != a || b != b ? a + b : a > b ? a : b; }
TRN_DEV double trn_fmind(double a, double b) { return a != a || b != b ? a + b : a < b ? a : b; }
template <typename T> TRN_DEV T trn_rmax(T acc, T v) { return v > acc || v != v ? v : acc; }
TRN_DEV float trn_gelu(float x, int approx) {
    if (approx) return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
}
TRN_DEV double trn_gelu(double x, int approx) {
    if (approx) return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1.0 + erf(x * 0.7071067811865476));
}
TRN_DEV float trn_gelu_grad(float dy, float x, int approx) {
    if (approx) {
        float u = 0.7978845608028654f * (x + 0.044715f * x * x * x), t = tanhf(u);
        float du = 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
        return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
    }
    float cdf = 0.5f * (1.0f + erff(x * 0.7071067811865476f));
    float pdf = expf(-0.5f * x * x) * 0.3989422804014327f;
    return dy * (cdf + x * pdf);
}
TRN_DEV double trn_gelu_grad(double dy, double x, int approx) {
    if (approx) {
        double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), t = tanh(u);
        double du = 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
        return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du);
    }
    double cdf = 0.5 * (1.0 + erf(x * 0.7071067811865476));
    double pdf = exp(-0.5 * x * x) * 0.3989422804014327;
    return dy * (cdf + x * pdf);
}
TRN_DEV float trn_silu_grad(float dy, float x) {
    float s = 1.0f / (1.0f + expf(-x));
    return dy * s * (1.0f + x * (1.0f - s));
}
TRN_DEV double trn_silu_grad(double dy, double x) {
    double s = 1.0 / (1.0 + exp(-x));
    return dy * s * (1.0 + x * (1.0 - s));
}

/* ---- reductions: warp (shuffles) and block (one word per warp in shared memory) ---- */

/* a sum's step: an integer sum wraps as an add does (trn_iadd), so any
 * order of a sum of integers gives the C kernel's result */
template <typename V> TRN_DEV V trn_radd(V a, V b) { return a + b; }
TRN_DEV long long trn_radd(long long a, long long b) { return trn_iadd(a, b); } /* chosen over the template */

template <typename V> TRN_DEV V trn_warp_sum(V v) {
    for (int o = 16; o > 0; o >>= 1) v = trn_radd(v, __shfl_xor_sync(TRN_FULL, v, o));
    return v;
}
TRN_DEV float trn_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(TRN_FULL, v, o));
    return v;
}
/* Sum over the threads of a group of G consecutive lanes (G = 1, 2, 4, 8, 16). */
template <int G, typename V> TRN_DEV V trn_group_sum(V v) {
#pragma unroll
    for (int o = 1; o < G; o <<= 1) v += __shfl_xor_sync(TRN_FULL, v, o);
    return v;
}
/* Block-wide sum; every thread gets the result.  Callable several times in
 * one kernel (the leading barrier protects the shared words). */
template <typename V> TRN_DEV V trn_block_sum(V v) {
    __shared__ V sh[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = trn_warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    V r = lane < nw ? sh[lane] : (V)0;
    return trn_warp_sum(r);
}
TRN_DEV float trn_block_max(float v) {
    __shared__ float sh[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = trn_warp_max(v);
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    float r = lane < nw ? sh[lane] : -TRN_INF;
    return trn_warp_max(r);
}
/* Column sums of a (32 x NY) block: thread (x, y) holds v; returns the sum
 * over y in the threads with y == 0. */
template <int NY, typename V> TRN_DEV V trn_col_sum(V v) {
    __shared__ V sh[NY][33];
    sh[threadIdx.y][threadIdx.x] = v;
    __syncthreads();
    for (int s = NY / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.y < s) sh[threadIdx.y][threadIdx.x] = trn_radd(sh[threadIdx.y][threadIdx.x], sh[threadIdx.y + s][threadIdx.x]);
        __syncthreads();
    }
    return sh[0][threadIdx.x];
}
/* trn_col_sum of each of W values, a barrier between (every thread reads
 * the shared array the next one writes). */
template <int NY, int W, typename V> TRN_DEV void trn_col_sums(V (&v)[W]) {
#pragma unroll
    for (int e = 0; e < W; e++) {
        if (e) __syncthreads();
        v[e] = trn_col_sum<NY>(v[e]);
    }
}

/* ---- 16-byte vector access ---- */

TRN_DEV float4 trn_ld4(const float *p) { return *(const float4 *)TRN_ALIGNED(p, 16); }
TRN_DEV void   trn_st4(float *p, float4 v) { *(float4 *)TRN_ALIGNED(p, 16) = v; }
/* Four bf16 / f16 values (8 bytes, 8-aligned) widened to floats. */
TRN_DEV float4 trn_ld4(const trn_bf16 *p) {
    uint2 u = *(const uint2 *)TRN_ALIGNED(p, 8);
    return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u), __uint_as_float(u.y << 16),
                       __uint_as_float(u.y & 0xffff0000u));
}
TRN_DEV float4 trn_ld4(const trn_f16 *p) {
    uint2 u = *(const uint2 *)TRN_ALIGNED(p, 8);
    trn_f16 h[4] = {{(uint16_t)u.x}, {(uint16_t)(u.x >> 16)}, {(uint16_t)u.y}, {(uint16_t)(u.y >> 16)}};
    return make_float4(trn_f32(h[0]), trn_f32(h[1]), trn_f32(h[2]), trn_f32(h[3]));
}
TRN_DEV float  trn_get(const float4 &v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }
/* W consecutive elements (W = 4 or 8, the pointer W-element aligned) as
 * floats, and back: loop kernels' vector accesses.  Half types move as one
 * 8-byte (W = 4) or 16-byte (W = 8) word; a store rounds to nearest even,
 * as trn_st does. */
template <int W> TRN_DEV void trn_ldv(const float *p, float (&a)[W]) {
#pragma unroll
    for (int i = 0; i < W; i += 4) {
        const float4 w = *(const float4 *)TRN_ALIGNED(p + i, 16);
        a[i] = w.x, a[i + 1] = w.y, a[i + 2] = w.z, a[i + 3] = w.w;
    }
}
template <int W> TRN_DEV void trn_stv(float *p, const float (&s)[W]) {
#pragma unroll
    for (int i = 0; i < W; i += 4) *(float4 *)TRN_ALIGNED(p + i, 16) = make_float4(s[i], s[i + 1], s[i + 2], s[i + 3]);
}
template <int W> TRN_DEV void trn_ldw(const void *p, uint32_t (&u)[W / 2]) {
    if constexpr (W == 8) {
        const uint4 v = *(const uint4 *)TRN_ALIGNED(p, 16);
        u[0] = v.x, u[1] = v.y, u[2] = v.z, u[3] = v.w;
    } else {
        const uint2 v = *(const uint2 *)TRN_ALIGNED(p, 8);
        u[0] = v.x, u[1] = v.y;
    }
}
/* (On the GPU as one st.global.v4 / v2: NVVM splits the plain C++ store
 * into 4-byte ones when the words come from different blocks, as they do
 * in a columns kernel's row loop.) */
template <int W> TRN_DEV void trn_stw(void *p, const uint32_t (&u)[W / 2]) {
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
    /* (st.global takes a global-window address: p converted from generic) */
    const unsigned long long g = (unsigned long long)__cvta_generic_to_global(p);
    if constexpr (W == 8)
        asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(g), "r"(u[0]), "r"(u[1]), "r"(u[2]), "r"(u[3]) : "memory");
    else asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(g), "r"(u[0]), "r"(u[1]) : "memory");
#else
    if constexpr (W == 8) *(uint4 *)TRN_ALIGNED(p, 16) = make_uint4(u[0], u[1], u[2], u[3]);
    else *(uint2 *)TRN_ALIGNED(p, 8) = make_uint2(u[0], u[1]);
#endif
}
template <int W> TRN_DEV void trn_ldv(const trn_bf16 *p, float (&a)[W]) {
    uint32_t u[W / 2];
    trn_ldw<W>(p, u);
#pragma unroll
    for (int i = 0; i < W / 2; i++) a[2 * i] = __uint_as_float(u[i] << 16), a[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
}
template <int W> TRN_DEV void trn_ldv(const trn_f16 *p, float (&a)[W]) {
    uint32_t u[W / 2];
    trn_ldw<W>(p, u);
#pragma unroll
    for (int i = 0; i < W / 2; i++) {
        const trn_f16 lo = {(uint16_t)(u[i] & 0xffffu)}, hi = {(uint16_t)(u[i] >> 16)};
        a[2 * i] = trn_f32(lo), a[2 * i + 1] = trn_f32(hi);
    }
}
template <int W> TRN_DEV void trn_stv(trn_bf16 *p, const float (&s)[W]) {
    uint32_t u[W / 2];
#pragma unroll
    for (int i = 0; i < W / 2; i++) u[i] = (uint32_t)trn_to_bf16(s[2 * i]).x | (uint32_t)trn_to_bf16(s[2 * i + 1]).x << 16;
    trn_stw<W>(p, u);
}
template <int W> TRN_DEV void trn_stv(trn_f16 *p, const float (&s)[W]) {
    uint32_t u[W / 2];
#pragma unroll
    for (int i = 0; i < W / 2; i++) u[i] = (uint32_t)trn_to_f16(s[2 * i]).x | (uint32_t)trn_to_f16(s[2 * i + 1]).x << 16;
    trn_stw<W>(p, u);
}

/* ===================================================================== */
/* template kernels: each is called by one generated __global__ function  */
/* ===================================================================== */

/* ---- embedding: out [N,C] = table [V,C] rows idx [N]; one thread per
 * element (VEC = 4: per four, with 16-byte accesses) ---- */
template <typename T, int VEC>
TRN_DEV void tk_embedding(T *__restrict__ out, const T *__restrict__ table, const int32_t *__restrict__ idx, int64_t N, int64_t C,
                          int64_t V) {
    int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    if (i >= N * C) return;
    int64_t n = i / C, c = i - n * C;
    int64_t r = idx[n];
    bool ok = r >= 0 && r < V;
    if constexpr (VEC == 4) {
        float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
        trn_st4((float *)out + i, ok ? trn_ld4((const float *)table + r * C + c) : z);
    } else {
        if (ok) out[i] = table[r * C + c];
        else trn_st(out + i, 0.0f);
    }
}

/* ---- embedding_grad: dtable [V,C] = scatter-add of dy [N,C] at idx [N],
 * every row's terms added in the order of n, as the C backend adds them
 * (the same f32 sums, bit for bit), with no atomics: the indices are
 * sorted first, so that one block sums each row with its loads in flight
 * ahead of the adds.  Four launches over a scratch of int32 (the
 * workspace): first [V], end [V], pos [N], key [N]:
 *   _zero  first = end = 0: a row no index names sums nothing;
 *   _sort  token n's place r in the order of (idx, n): pos[r] = n,
 *          key[r] = idx[n];
 *   _mark  where each row's run of key starts and ends (first, end);
 *   _rows  row v = dy's rows pos[first[v]], ..., pos[end[v] - 1] summed
 *          in that order, zeros for an empty row.
 * (The kernel this replaced zeroed the table and had each thread go
 * through all the indices adding into its column: a chain of dependent
 * global read-modify-writes as long as the indices of its block's rows,
 * all N of them when the tokens are few, as bytes are.) ---- */
TRN_DEV void tk_embedding_bwd_zero(int32_t *__restrict__ first, int32_t *__restrict__ end, int64_t V) {
    int64_t v = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (v < V) first[v] = end[v] = 0;
}

/* r = #{j < n: idx[j] <= idx[n]} + #{j > n: idx[j] < idx[n]}, the number of
 * (idx[j], j) before (idx[n], n): a permutation of 0 .. N-1.  Block: S
 * warps and 32 tokens; warp w counts over the w-th of S slices of the
 * indices (staged 128 at a time), and the slices' counts are added.  N^2
 * compares in all (GPT-2 small's 16384 tokens: 2.7e8, about one
 * instruction each in the slices off the block's own 32). */
template <int S>
TRN_DEV void tk_embedding_bwd_sort(int32_t *__restrict__ pos, int32_t *__restrict__ key, const int32_t *__restrict__ idx, int64_t N) {
    __shared__ int32_t tile[S][128];
    __shared__ int32_t part[S][32];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    int64_t n0 = (int64_t)blockIdx.x * 32, n = n0 + lane;
    int32_t v = n < N ? idx[n] : 0;
    int64_t len = (N + S - 1) / S, a = w * len, b = min(N, a + len);
    int32_t c = 0;
    for (int64_t j0 = a; j0 < b; j0 += 128) {
        int m = (int)min((int64_t)128, b - j0);
        __syncwarp();
        for (int i = lane; i < m; i += 32) tile[w][i] = idx[j0 + i];
        __syncwarp();
        if (j0 + m <= n0) {
#pragma unroll 8
            for (int i = 0; i < m; i++) c += tile[w][i] <= v;
        } else if (j0 >= n0 + 32) {
#pragma unroll 8
            for (int i = 0; i < m; i++) c += tile[w][i] < v;
        } else {
            for (int i = 0; i < m; i++) {
                int64_t j = j0 + i;
                int32_t x = tile[w][i];
                c += j < n ? x <= v : j > n && x < v;
            }
        }
    }
    part[w][lane] = c;
    __syncthreads();
    if (w != 0 || n >= N) return;
    int32_t r = 0;
#pragma unroll
    for (int k = 0; k < S; k++) r += part[k][lane];
    pos[r] = (int32_t)n;
    key[r] = v;
}

/* the run of row v in the sorted keys: first[v] .. end[v] - 1 (indices
 * outside the table are in no row) */
TRN_DEV void tk_embedding_bwd_mark(int32_t *__restrict__ first, int32_t *__restrict__ end, const int32_t *__restrict__ key, int64_t N,
                                   int64_t V) {
    int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= N) return;
    int32_t v = key[k];
    if (v < 0 || v >= V) return;
    if (k == 0 || key[k - 1] != v) first[v] = (int32_t)k;
    if (k == N - 1 || key[k + 1] != v) end[v] = (int32_t)(k + 1);
}

/* Block (x, y): rows x R .. x R + R - 1 (their runs staged first), a
 * column c a thread (y blockDim.x + threadIdx.x).  A row's tokens U at a
 * time: the U loads, the next U positions, then the adds in token order;
 * a batch past the row's end adds +0.0f, which leaves a sum unchanged (a
 * sum from +0.0f is never -0.0f), so every row takes whole batches.  A
 * row of many tokens (tinyshakespeare's spaces are 15% of its bytes) is
 * a round trip to memory a batch, on ceil(C / blockDim.x)
 * multiprocessors.  ACC: dtable holds what the sums are added to (the
 * gradient accumulator, or the tied head's gradient: lower.c,
 * lower_embedding_grad): a row no index names is left as it is. */
template <int U, int R, bool ACC>
TRN_DEV void tk_embedding_bwd_rows(float *__restrict__ dtable, const float *__restrict__ dy, const int32_t *__restrict__ pos,
                                   const int32_t *__restrict__ first, const int32_t *__restrict__ end, int64_t V, int64_t C) {
    __shared__ int32_t run[R][2];
    int64_t v0 = (int64_t)blockIdx.x * R, c = (int64_t)blockIdx.y * blockDim.x + threadIdx.x;
    if (threadIdx.x < R) {
        int64_t v = v0 + threadIdx.x;
        int32_t e = v < V ? end[v] : 0;
        run[threadIdx.x][0] = e ? first[v] : 0;
        run[threadIdx.x][1] = e;
    }
    __syncthreads();
    if (c >= C) return;
    for (int r = 0; r < R && v0 + r < V; r++) {
        int32_t k = run[r][0], k1 = run[r][1];
        if (ACC && k1 == 0) continue;
        int32_t q[U];
#pragma unroll
        for (int u = 0; u < U; u++) q[u] = k + u < k1 ? pos[k + u] : -1;
        float acc = 0.0f;
        for (; k < k1; k += U) {
            float t[U];
#pragma unroll
            for (int u = 0; u < U; u++) t[u] = q[u] >= 0 ? dy[(int64_t)q[u] * C + c] : 0.0f;
#pragma unroll
            for (int u = 0; u < U; u++) q[u] = k + U + u < k1 ? pos[k + U + u] : -1;
#pragma unroll
            for (int u = 0; u < U; u++) acc += t[u];
        }
        float *d = dtable + (v0 + r) * C + c;
        *d = ACC ? *d + acc : acc;
    }
}

/* ---- softmax over the middle axis of [outer, n, inner] ----
 * inner == 1: one block per row (block reductions); otherwise one thread
 * per (o, i) column. */
TRN_DEV void tk_softmax_rows(float *__restrict__ y, const float *__restrict__ x, int64_t outer, int64_t n) {
    int64_t o = blockIdx.x;
    if (o >= outer) return;
    const float *xr = x + o * n;
    float *yr = y + o * n;
    float mx = -TRN_INF;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, xr[j]);
    mx = trn_block_max(mx);
    double s = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += (double)expf(xr[j] - mx);
    s = trn_block_sum(s);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) yr[j] = (float)((double)expf(xr[j] - mx) / s);
}
TRN_DEV void tk_softmax_cols(float *__restrict__ y, const float *__restrict__ x, int64_t outer, int64_t n, int64_t inner) {
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= outer * inner) return;
    int64_t o = t / inner, i = t - o * inner, base = o * n * inner + i;
    float mx = -TRN_INF;
    for (int64_t j = 0; j < n; j++) mx = fmaxf(mx, x[base + j * inner]);
    double s = 0;
    for (int64_t j = 0; j < n; j++) s += (double)expf(x[base + j * inner] - mx);
    for (int64_t j = 0; j < n; j++) y[base + j * inner] = (float)((double)expf(x[base + j * inner] - mx) / s);
}
/* dx = y (dy - sum(dy y)) */
TRN_DEV void tk_softmax_bwd_rows(float *__restrict__ dx, const float *__restrict__ dy, const float *__restrict__ y, int64_t outer,
                                 int64_t n) {
    int64_t o = blockIdx.x;
    if (o >= outer) return;
    double dot = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dot += (double)dy[o * n + j] * (double)y[o * n + j];
    dot = trn_block_sum(dot);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dx[o * n + j] = (float)((double)y[o * n + j] * ((double)dy[o * n + j] - dot));
}
TRN_DEV void tk_softmax_bwd_cols(float *__restrict__ dx, const float *__restrict__ dy, const float *__restrict__ y, int64_t outer,
                                 int64_t n, int64_t inner) {
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= outer * inner) return;
    int64_t o = t / inner, i = t - o * inner, base = o * n * inner + i;
    double dot = 0;
    for (int64_t j = 0; j < n; j++) dot += (double)dy[base + j * inner] * (double)y[base + j * inner];
    for (int64_t j = 0; j < n; j++)
        dx[base + j * inner] = (float)((double)y[base + j * inner] * ((double)dy[base + j * inner] - dot));
}

/* W consecutive elements as floats and back, W = 1 as well as 4 or 8 */
template <int W, typename E> TRN_DEV void trn_ldc(const E *__restrict__ p, float (&a)[W]) {
    if constexpr (W == 1) a[0] = trn_f32(*p);
    else trn_ldv<W>(p, a);
}
template <int W, typename E> TRN_DEV void trn_stc(E *__restrict__ p, const float (&a)[W]) {
    if constexpr (W == 1) trn_st(p, a[0]);
    else trn_stv<W>(p, a);
}

/* ---- norms over rows of [N,C]: one warp per row, the row held in
 * registers (C / 32 values per lane) up to C = 1024 and read again for
 * each pass beyond (tk_norm_rows, tk_norm_bwd_rows), statistics in double.  A lane moves
 * VW consecutive columns at a time: 8 (16 bytes of half) when C is a
 * multiple of 8 and every lane has a chunk (C >= 256), else 4 likewise,
 * else 1 (narrow rows: 8 columns a lane would leave most lanes idle).  Its
 * chunk k is columns (lane + 32 k) VW .. + VW.  Every operand is a whole
 * buffer (256-byte aligned) of rows of C elements, so each chunk is
 * VW-aligned. ---- */
template <int C> struct TrnRow {
    static constexpr int VW = C % 8 == 0 && C >= 256 ? 8 : C % 4 == 0 && C >= 128 ? 4 : 1;
    static constexpr int NQ = (C / VW + 31) / 32; /* chunks a lane */
    float v[NQ][VW];
    static TRN_MEMBER int col(int lane, int k) { return (lane + 32 * k) * VW; }
    template <typename E> TRN_MEMBER void load(const E *__restrict__ r, int lane) {
#pragma unroll
        for (int k = 0; k < NQ; k++) {
            if (col(lane, k) < C) trn_ldc<VW>(r + col(lane, k), v[k]);
            else
#pragma unroll
                for (int j = 0; j < VW; j++) v[k][j] = 0.0f;
        }
    }
};

/* layer_norm (LN) or rms_norm of rows of x [N,C] with w [C] (and b [C]):
 * y [N,C], mean [N] (LN), rstd [N].  ADD: the residual forms
 * (add_layer_norm, add_rms_norm): the row is s = x + r, rounded to f32 (what
 * the unfused add stores), and s [N,C] is a result too.  Block: 8 warps,
 * grid ceil(N / 8).  mean, b, s, r unused (may be null) where the form has
 * none.  y is f32, or (EY bf16/f16) the f32 value rounded once more: the
 * cast to half that was its only reader, absorbed (lower.c); x and r (EX,
 * ER) f32 or half values whose widening casts were absorbed, widened as
 * they are loaded. */
template <int C, bool LN, bool ADD, typename EY, typename EX, typename ER>
TRN_DEV void tk_norm_rows(EY *__restrict__ y, float *__restrict__ s, float *__restrict__ mean, float *__restrict__ rstd,
                          const EX *__restrict__ x, const ER *__restrict__ r, const float *__restrict__ w,
                          const float *__restrict__ b, int64_t N, double eps) {
    using R = TrnRow<C>;
    constexpr int VW = R::VW;
    int lane = threadIdx.x & 31;
    int64_t n = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (n >= N) return;
    if constexpr (C > 1024) {
        /* wide rows: no register copy (C / 32 values a lane spilled from C
         * = 4096, and the unrolled loops made NVRTC take minutes at C =
         * 32768); the row read again for each pass, from s where it was
         * just written.  The same sums in the same order as below. */
        double a = 0, q = 0, m = 0;
        for (int c = lane * VW; c < C; c += 32 * VW) {
            float v[VW];
            trn_ldc<VW>(x + n * C + c, v);
            if constexpr (ADD) {
                float t[VW];
                trn_ldc<VW>(r + n * C + c, t);
                for (int j = 0; j < VW; j++) v[j] += t[j];
                trn_stc<VW>(s + n * C + c, v);
            }
            for (int j = 0; j < VW; j++) {
                if constexpr (LN) a += (double)v[j];
                else q += (double)v[j] * (double)v[j];
            }
        }
        if constexpr (LN) {
            m = trn_warp_sum(a) / (double)C;
            for (int c = lane * VW; c < C; c += 32 * VW) {
                float v[VW];
                if constexpr (ADD) trn_ldc<VW>(s + n * C + c, v);
                else trn_ldc<VW>(x + n * C + c, v);
                for (int j = 0; j < VW; j++) q += ((double)v[j] - m) * ((double)v[j] - m);
            }
        }
        double rs = 1.0 / sqrt(trn_warp_sum(q) / (double)C + eps);
        for (int c = lane * VW; c < C; c += 32 * VW) {
            float v[VW], wv[VW], bv[VW], o[VW];
            if constexpr (ADD) trn_ldc<VW>(s + n * C + c, v);
            else trn_ldc<VW>(x + n * C + c, v);
            trn_ldc<VW>(w + c, wv);
            if constexpr (LN) trn_ldc<VW>(b + c, bv);
            for (int j = 0; j < VW; j++) {
                if constexpr (LN) o[j] = (float)(((double)v[j] - m) * rs * (double)wv[j] + (double)bv[j]);
                else o[j] = (float)((double)v[j] * rs * (double)wv[j]);
            }
            trn_stc<VW>(y + n * C + c, o);
        }
        if (lane == 0) {
            if constexpr (LN) mean[n] = (float)m;
            rstd[n] = (float)rs;
        }
        return;
    }
    R row;
    row.load(x + n * C, lane);
    if constexpr (ADD) {
#pragma unroll
        for (int k = 0; k < R::NQ; k++) {
            int c = R::col(lane, k);
            if (c >= C) continue;
            float t[VW];
            trn_ldc<VW>(r + n * C + c, t);
#pragma unroll
            for (int j = 0; j < VW; j++) row.v[k][j] += t[j];
            trn_stc<VW>(s + n * C + c, row.v[k]);
        }
    }
    double m = 0, q = 0;
    if constexpr (LN) {
        double a = 0;
#pragma unroll
        for (int k = 0; k < R::NQ; k++)
#pragma unroll
            for (int j = 0; j < VW; j++) a += (double)row.v[k][j];
        m = trn_warp_sum(a) / (double)C;
#pragma unroll
        for (int k = 0; k < R::NQ; k++)
            if (R::col(lane, k) < C)
#pragma unroll
                for (int j = 0; j < VW; j++) q += ((double)row.v[k][j] - m) * ((double)row.v[k][j] - m);
    } else {
#pragma unroll
        for (int k = 0; k < R::NQ; k++)
#pragma unroll
            for (int j = 0; j < VW; j++) q += (double)row.v[k][j] * (double)row.v[k][j];
    }
    double rs = 1.0 / sqrt(trn_warp_sum(q) / (double)C + eps);
#pragma unroll
    for (int k = 0; k < R::NQ; k++) {
        int c = R::col(lane, k);
        if (c >= C) continue;
        float wv[VW], bv[VW], o[VW];
        trn_ldc<VW>(w + c, wv);
        if constexpr (LN) trn_ldc<VW>(b + c, bv);
#pragma unroll
        for (int j = 0; j < VW; j++) {
            if constexpr (LN) o[j] = (float)(((double)row.v[k][j] - m) * rs * (double)wv[j] + (double)bv[j]);
            else o[j] = (float)((double)row.v[k][j] * rs * (double)wv[j]);
        }
        trn_stc<VW>(y + n * C + c, o);
    }
    if (lane == 0) {
        if constexpr (LN) mean[n] = (float)m;
        rstd[n] = (float)rs;
    }
}

/* The input gradient of those norms over rows: dx [N,C] from dy, x (the
 * residual forms: s), w, mean (LN), rstd; ADD: plus ds [N,C], the gradient
 * reaching s directly (dx = ds + the norm's input gradient).  xhat = (x -
 * mean) rstd (LN) or x rstd, g = dy w:
 *   dx = rstd (g - mean(g) - xhat mean(g xhat))   (rms: no mean(g) term).
 * dw, db come from tk_norm_bwd_cols.  Block: 8 warps, grid ceil(N / 8).
 * dy (EDY) f32, or half whose widening cast was absorbed.  dx may be NULL
 * (nothing reads the f32 value); dxh (EH half), when not NULL, gets dx
 * rounded to half: the cast the products read, absorbed.  Chunks as
 * tk_norm_rows'. */
template <int C, bool LN, bool ADD, typename EDY, typename EH>
struct TrnNormBwd {
    static constexpr int VW = TrnRow<C>::VW;
    const EDY *dr;
    const float *ds, *w;
    float *dx;
    EH *dxh;
    double m, rs, s1, s2;
    /* the sums over the row: chunk c of x */
    TRN_MEMBER void sums(int c, const float (&xv)[VW]) {
        float dv[VW], wv[VW];
        trn_ldc<VW>(dr + c, dv);
        trn_ldc<VW>(w + c, wv);
#pragma unroll
        for (int j = 0; j < VW; j++) {
            double xh = ((double)xv[j] - m) * rs, g = (double)dv[j] * (double)wv[j];
            s1 += g;
            s2 += g * xh;
        }
    }
    TRN_MEMBER void reduce(void) {
        s1 = LN ? trn_warp_sum(s1) / (double)C : 0.0;
        s2 = trn_warp_sum(s2) / (double)C;
    }
    /* dx at chunk c, row offset nc */
    TRN_MEMBER void store(int64_t nc, int c, const float (&xv)[VW]) {
        float dv[VW], wv[VW], dsv[VW], o[VW];
        trn_ldc<VW>(dr + c, dv);
        trn_ldc<VW>(w + c, wv);
        if constexpr (ADD) trn_ldc<VW>(ds + nc + c, dsv);
#pragma unroll
        for (int j = 0; j < VW; j++) {
            double xh = ((double)xv[j] - m) * rs, g = (double)dv[j] * (double)wv[j];
            double v = rs * (g - s1 - xh * s2);
            if constexpr (ADD) v += (double)dsv[j];
            o[j] = (float)v;
        }
        if (dx) trn_stc<VW>(dx + nc + c, o);
        if (dxh) trn_stc<VW>(dxh + nc + c, o);
    }
};
template <int C, bool LN, bool ADD, typename EDY, typename EH>
TRN_DEV void tk_norm_bwd_rows(float *__restrict__ dx, EH *__restrict__ dxh, const EDY *__restrict__ dy, const float *__restrict__ ds,
                              const float *__restrict__ x, const float *__restrict__ w, const float *__restrict__ mean,
                              const float *__restrict__ rstd, int64_t N) {
    using R = TrnRow<C>;
    constexpr int VW = R::VW;
    int lane = threadIdx.x & 31;
    int64_t n = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (n >= N) return;
    TrnNormBwd<C, LN, ADD, EDY, EH> B = {dy + n * C, ds, w, dx, dxh, LN ? (double)mean[n] : 0.0, (double)rstd[n], 0.0, 0.0};
    if constexpr (C > 1024) {
        /* wide rows (TinyLlama's 2048): no register copy, x and dy re-read
         * from L1 (a copy in registers spills) */
        const float *xg = x + n * C;
        float xv[VW];
        for (int c = lane * VW; c < C; c += 32 * VW) trn_ldc<VW>(xg + c, xv), B.sums(c, xv);
        B.reduce();
        for (int c = lane * VW; c < C; c += 32 * VW) trn_ldc<VW>(xg + c, xv), B.store(n * C, c, xv);
        return;
    }
    R xr;
    xr.load(x + n * C, lane);
#pragma unroll
    for (int k = 0; k < R::NQ; k++)
        if (R::col(lane, k) < C) B.sums(R::col(lane, k), xr.v[k]);
    B.reduce();
#pragma unroll
    for (int k = 0; k < R::NQ; k++)
        if (R::col(lane, k) < C) B.store(n * C, R::col(lane, k), xr.v[k]);
}

/* dw [C] = sum_rows dy xhat, db [C] = sum_rows dy (db may be NULL: rms_norm,
 * whose xhat = x rstd has no mean).  Block (32, NY): x over columns, W
 * consecutive columns a thread (W = 4 or 8: vector loads of dy and x; C
 * a multiple of W), y over rows; grid (ceil(C / (32 W)), G).  dy as
 * tk_norm_bwd_rows's.  G = 1: the sums are the results; acc: dw and db
 * are gradient accumulators, the sums added to them (rounded as the add
 * that was absorbed rounds).  G > 1 (few columns over many rows: GPT-2's
 * 768 are 24 blocks of one column a thread): block row y sums rows
 * y * rc .. of them into part [G][2][C] (doubles, the workspace) and
 * tk_norm_bwd_final adds the groups in order. */
/* dw[c], db[c] = the column's sums, or added to them (acc) */
TRN_DEV void trn_norm_dw_store(float *dw, float *db, int64_t c, double sw, double sb, int acc) {
    dw[c] = acc ? (float)((double)dw[c] + (double)(float)sw) : (float)sw;
    if (db) db[c] = acc ? (float)((double)db[c] + (double)(float)sb) : (float)sb;
}
template <int NY, int W, typename EDY>
TRN_DEV void tk_norm_bwd_cols(float *__restrict__ dw, float *__restrict__ db, const EDY *__restrict__ dy, const float *__restrict__ x,
                              const float *__restrict__ mean, const float *__restrict__ rstd, int64_t N, int64_t C, int acc,
                              int64_t rc, double *__restrict__ part) {
    int64_t c = ((int64_t)blockIdx.x * 32 + threadIdx.x) * W, n0 = (int64_t)blockIdx.y * rc, n1 = min(n0 + rc, N);
    bool ok = c < C;
    double sw[W], sb[W];
#pragma unroll
    for (int e = 0; e < W; e++) sw[e] = 0, sb[e] = 0;
    if (ok)
        for (int64_t n = n0 + threadIdx.y; n < n1; n += NY) {
            float d[W], xv[W];
            trn_ldc<W>(dy + n * C + c, d);
            trn_ldc<W>(x + n * C + c, xv);
            double m = mean ? (double)mean[n] : 0.0, r = (double)rstd[n];
#pragma unroll
            for (int e = 0; e < W; e++) {
                sw[e] += (double)d[e] * (((double)xv[e] - m) * r);
                sb[e] += (double)d[e];
            }
        }
    trn_col_sums<NY>(sw);
    __syncthreads();
    trn_col_sums<NY>(sb);
    if (!ok || threadIdx.y != 0) return;
#pragma unroll
    for (int e = 0; e < W; e++) {
        if (part) {
            part[(blockIdx.y * 2) * C + c + e] = sw[e];
            part[(blockIdx.y * 2 + 1) * C + c + e] = sb[e];
        } else {
            trn_norm_dw_store(dw, db, c + e, sw[e], sb[e], acc);
        }
    }
}
/* dw, db from tk_norm_bwd_cols' G partials: a thread per column. */
TRN_DEV void tk_norm_bwd_final(float *__restrict__ dw, float *__restrict__ db, const double *__restrict__ part, int64_t G, int64_t C,
                               int acc) {
    int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double sw = 0, sb = 0;
#pragma unroll 8
    for (int64_t g = 0; g < G; g++) sw += part[(g * 2) * C + c], sb += part[(g * 2 + 1) * C + c];
    trn_norm_dw_store(dw, db, c, sw, sb, acc);
}

/* A product's bias gradient where cuBLASLt has no epilogue for it:
 * out[j] = sum over rows k < K of x[k * ld + j], j < L.  Block (32, NY),
 * W consecutive columns a thread (W = 4 or 8: vector loads; L, ld and x's
 * offset multiples of W), grid (ceil(L / (32 W)), G), sums in double as
 * the loop kernels' column sums.  G > 1 (few columns over many rows):
 * block row y sums rows y * rc .. into part[y][L] (the workspace) and
 * tk_colsum_final adds the groups in order. */
template <int NY, int W, typename E>
TRN_DEV void tk_colsum(float *__restrict__ out, const E *__restrict__ x, int64_t K, int64_t L, int64_t ld, int64_t rc,
                       double *__restrict__ part) {
    int64_t j = ((int64_t)blockIdx.x * 32 + threadIdx.x) * W, k0 = (int64_t)blockIdx.y * rc, k1 = min(k0 + rc, K);
    double s[W];
#pragma unroll
    for (int e = 0; e < W; e++) s[e] = 0;
    if (j < L)
        for (int64_t k = k0 + threadIdx.y; k < k1; k += NY) {
            float a[W];
            trn_ldc<W>(x + k * ld + j, a);
#pragma unroll
            for (int e = 0; e < W; e++) s[e] += (double)a[e];
        }
    trn_col_sums<NY>(s);
    if (j >= L || threadIdx.y != 0) return;
#pragma unroll
    for (int e = 0; e < W; e++) {
        if (part) part[blockIdx.y * L + j + e] = s[e];
        else out[j + e] = (float)s[e];
    }
}
TRN_DEV void tk_colsum_final(float *__restrict__ out, const double *__restrict__ part, int64_t G, int64_t L) {
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= L) return;
    double s = 0;
    for (int64_t g = 0; g < G; g++) s += part[g * L + j];
    out[j] = (float)s;
}

/* The layout of an attention or rope_qk operand, as in trainc_kernels.h: element
 * (b, h, t, d) at b*L.b + h*L.h + t*L.t + d, so that q, k and v can be
 * slices of GPT-2's [B,T,3C] qkv and o a slice of [B,T,C] without a copy
 * into [B,H,T,D].  The compiler gives a view here only when its offset and
 * strides are multiples of 16 bytes (the 16-byte and 4-element loads);
 * lse (and Di) are [B,H,T] contiguous. */
struct TrnAttL {
    int64_t b, h, t;
};
#define TRN_ATTL(b, h, t) (TrnAttL{(b), (h), (t)})
TRN_DEV int64_t trn_at(const TrnAttL &L, int64_t b, int64_t h, int64_t t) { return b * L.b + h * L.h + t * L.t; }

/* ---- rope (rotate-half) over rows [outer, T, D], q and k in one launch
 * (rope_qk; the single rope is outer_k = 0).  Grid (T, row chunks): a
 * block takes position t = blockIdx.x and rows blockIdx.y * rpb .. of q's
 * rows followed by k's, a thread per (row, i < D/2); the position's factors
 * are formed once a block into shared memory (TRN_ROPE_H of them at a
 * time), as the C backend forms them once a position.  Without tables (cs
 * == NULL) the angle t * theta^(-2i/D), which reaches thousands of
 * radians, is formed and reduced in double (a float angle would be off by
 * ~1e-4); with tables cs, sn [T, D]: y = x cos + rotate_half(x) sin.
 * inverse: the transpose (the gradient).  Any float dtype E (tables TT),
 * computed in double and rounded once, as the C backend's tk_rope_qk.
 * Each of yq, q, yk, k has a layout (TrnAttL) over [outer / H, H, T, D], H
 * = hq for q and hk for k.  y may be x (in place, the same layout: a
 * thread reads its pair before writing it). ---- */
#define TRN_ROPE_H 128
template <typename E, typename TT>
TRN_DEV void tk_rope(E *yq, TrnAttL lyq, const E *q, TrnAttL lq, int64_t hq, int64_t outer_q, E *yk, TrnAttL lyk, const E *k, TrnAttL lk,
                     int64_t hk, int64_t outer_k, int64_t T, int64_t D, const TT *__restrict__ cs, const TT *__restrict__ sn, double theta,
                     int inverse, int64_t rpb) {
    __shared__ double fs[TRN_ROPE_H][4]; /* cos of i, of i + h, sin of i, of i + h */
    int64_t h = D / 2, t = blockIdx.x, r0 = (int64_t)blockIdx.y * rpb, nr = min(rpb, outer_q + outer_k - r0);
    for (int64_t i0 = 0; i0 < h; i0 += TRN_ROPE_H) {
        int64_t nh = min((int64_t)TRN_ROPE_H, h - i0);
        if (i0) __syncthreads(); /* the previous factors are read */
        for (int64_t j = threadIdx.x; j < nh; j += blockDim.x) {
            int64_t i = i0 + j;
            if (cs) {
                fs[j][0] = trn_f32(cs[t * D + i]), fs[j][1] = trn_f32(cs[t * D + i + h]);
                fs[j][2] = trn_f32(sn[t * D + i]), fs[j][3] = trn_f32(sn[t * D + i + h]);
            } else {
                double ang = (double)t * pow(theta, -2.0 * (double)i / (double)D), s, c;
                sincos(ang, &s, &c);
                fs[j][0] = fs[j][1] = c, fs[j][2] = fs[j][3] = s;
            }
        }
        __syncthreads();
        for (int64_t e = threadIdx.x; e < nr * nh; e += blockDim.x) {
            int64_t row = r0 + e / nh, j = e % nh, i = i0 + j;
            const E *x = q;
            E *y = yq;
            TrnAttL lx = lq, ly = lyq;
            int64_t H = hq;
            if (row >= outer_q) {
                row -= outer_q;
                x = k, y = yk, lx = lk, ly = lyk, H = hk;
            }
            x += trn_at(lx, row / H, row % H, t), y += trn_at(ly, row / H, row % H, t);
            double c0 = fs[j][0], c1 = fs[j][1], s0 = fs[j][2], s1 = fs[j][3];
            double x1 = trn_f32(x[i]), x2 = trn_f32(x[i + h]);
            if (!inverse) {
                trn_st(y + i, x1 * c0 - x2 * s0);
                trn_st(y + i + h, x2 * c1 + x1 * s1);
            } else {
                trn_st(y + i, x1 * c0 + x2 * s1);
                trn_st(y + i + h, x2 * c1 - x1 * s0);
            }
        }
    }
}

/* ---- attention (flash-attention style, f32 on the CUDA cores) ----
 * q [B,H,T,D], k, v [B,Hkv,S,D] -> o [B,H,T,D], lse f32 [B,H,T]; q, k, v,
 * o of any float dtype E (bf16/f16 from mixed precision: widened to float
 * as they are loaded, results rounded once; every product and sum f32).
 * A group of TPR consecutive threads holds one query row: with D % 16 == 0,
 * TPR = 4 and each thread keeps D/4 values of q and of the output
 * accumulator as float4 chunks (chunk sub + 4 j: conflict-free shared-memory
 * reads); otherwise TPR = 1 and a thread keeps the whole row.  Key and value
 * tiles of BK rows go through shared memory; the softmax is online (running
 * maximum and sum, rescaled per tile); only lse is saved for the backward. */
template <int D> struct TrnAtt {
    static constexpr int TPR = D % 16 == 0 ? 4 : 1;          /* threads per query row */
    static constexpr int VW = D % 16 == 0 ? 4 : 1;           /* values per chunk */
    static constexpr int NE = D / TPR;                       /* values per thread */
    static constexpr int NC = NE / VW;                       /* chunks per thread */
    /* key rows per shared-memory tile (the backward's query rows too):
     * two f32 tiles of BK x D and 2 BK floats within the 48 KB of static
     * shared memory a block has, up to D = 6136 (emit_cuda.c refuses more) */
    static constexpr int BK = D <= 128 ? 32 : D <= 256 ? 16 : D <= 512 ? 8 : D <= 1024 ? 4 : D <= 2048 ? 2 : 1;
    static_assert(2 * BK * D * 4 + 2 * BK * 4 <= 48 * 1024, "attention tiles past 48 KB of shared memory");
    /* element e (< NE) of thread `sub`: its index in the row */
    static TRN_MEMBER int col(int sub, int e) { return ((e / VW) * TPR + sub) * VW + e % VW; }
};

/* Loads rows r0.. r0+nr-1 (< lim) of a [.., D] matrix of any float dtype
 * (row stride lds) into tile [nr][D] (float); zeros past lim. */
template <int D, typename E>
TRN_DEV void trn_load_tile(float *__restrict__ tile, const E *__restrict__ src, int64_t lds, int64_t r0, int nr, int64_t lim) {
    if constexpr (D % 4 == 0) {
        for (int e = threadIdx.x; e < nr * D / 4; e += blockDim.x) {
            int r = e / (D / 4), c = (e - r * (D / 4)) * 4;
            float4 v = r0 + r < lim ? trn_ld4(src + (r0 + r) * lds + c) : make_float4(0.f, 0.f, 0.f, 0.f);
            trn_st4(tile + r * D + c, v);
        }
    } else {
        for (int e = threadIdx.x; e < nr * D; e += blockDim.x) {
            int r = e / D, c = e - r * D;
            tile[e] = r0 + r < lim ? trn_f32(src[(r0 + r) * lds + c]) : 0.0f;
        }
    }
}

/* The query block a causal kernel's block takes: the last first.  Its
 * work grows with the block's index (the keys up to the diagonal), and
 * blocks start in about the order of their index, so the longest start
 * first and the short ones fill the end of the launch instead of one long
 * block running alone at its end.  The results do not change. */
TRN_DEV int64_t trn_qblock(int causal) { return causal ? (int64_t)gridDim.x - 1 - blockIdx.x : (int64_t)blockIdx.x; }
/* (batch, head) of an attention block: grid (row blocks, gy, gz), gy gz =
 * batch x heads (emit_cuda.c att_launch) */
TRN_DEV int64_t trn_att_bh() { return (int64_t)blockIdx.z * gridDim.y + blockIdx.y; }

/* block: BQ * TPR threads; grid (ceil(T / BQ), B * H as y z) */
template <int D, int BQ, typename E>
TRN_DEV void tk_attention(E *__restrict__ o, TrnAttL lo, float *__restrict__ lse, const E *__restrict__ q, TrnAttL lq, const E *__restrict__ k,
                          TrnAttL lk, const E *__restrict__ v, TrnAttL lv, int64_t H, int64_t Hkv, int64_t T, int64_t S, float scale,
                          int causal) {
    typedef TrnAtt<D> A;
    __shared__ __align__(16) float Ks[A::BK * D];
    __shared__ __align__(16) float Vs[A::BK * D];
    int64_t bh = trn_att_bh(), b = bh / H, h = bh - b * H, hk = h / (H / Hkv);
    int64_t q0 = trn_qblock(causal) * BQ;
    int sub = threadIdx.x % A::TPR;
    int64_t row = q0 + threadIdx.x / A::TPR;
    bool valid = row < T;
    int64_t rr = valid ? row : T - 1;
    const E *qr = q + trn_at(lq, b, h, rr);
    const E *kb = k + trn_at(lk, b, hk, 0), *vb = v + trn_at(lv, b, hk, 0);
    float qv[A::NE], acc[A::NE];
#pragma unroll
    for (int e = 0; e < A::NE; e++) {
        qv[e] = trn_f32(qr[A::col(sub, e)]);
        acc[e] = 0.0f;
    }
    float m = -TRN_INF, l = 0.0f;
    int64_t kend = causal ? min(S, q0 + BQ) : S;
    for (int64_t k0 = 0; k0 < kend; k0 += A::BK) {
        __syncthreads();
        trn_load_tile<D>(Ks, kb, lk.t, k0, A::BK, S);
        trn_load_tile<D>(Vs, vb, lv.t, k0, A::BK, S);
        __syncthreads();
        float s[A::BK];
        float tmax = -TRN_INF;
#pragma unroll
        for (int j = 0; j < A::BK; j++) {
            float d = 0.0f;
#pragma unroll
            for (int e = 0; e < A::NE; e++) d += qv[e] * Ks[j * D + A::col(sub, e)];
            d = trn_group_sum<A::TPR>(d) * scale;
            int64_t kj = k0 + j;
            if (kj >= S || (causal && kj > rr)) d = -TRN_INF;
            s[j] = d;
            tmax = fmaxf(tmax, d);
        }
        float mn = fmaxf(m, tmax);
        if (mn == -TRN_INF) continue; /* every key so far masked */
        float corr = expf(m - mn);
        l *= corr;
#pragma unroll
        for (int e = 0; e < A::NE; e++) acc[e] *= corr;
#pragma unroll
        for (int j = 0; j < A::BK; j++) {
            float p = expf(s[j] - mn);
            l += p;
#pragma unroll
            for (int e = 0; e < A::NE; e++) acc[e] += p * Vs[j * D + A::col(sub, e)];
        }
        m = mn;
    }
    if (!valid) return;
    E *orow = o + trn_at(lo, b, h, row);
    float inv = 1.0f / l;
#pragma unroll
    for (int e = 0; e < A::NE; e++) trn_st(orow + A::col(sub, e), acc[e] * inv);
    if (sub == 0) lse[bh * T + row] = m + logf(l);
}

/* Backward, part 1: dq.  Same layout as the forward; p recomputed from lse,
 * Di = do_i . o_i, ds = p (do_i . v_j - Di), dq_i = scale sum_j ds k_j. */
template <int D, int BQ, typename E>
TRN_DEV void tk_attention_bwd_dq(E *__restrict__ dq, TrnAttL ldq, const E *__restrict__ dout, TrnAttL ldo, const E *__restrict__ q,
                                 TrnAttL lq, const E *__restrict__ k, TrnAttL lk, const E *__restrict__ v, TrnAttL lv,
                                 const E *__restrict__ o, TrnAttL lo, const float *__restrict__ lse, float *__restrict__ dis, int64_t H,
                                 int64_t Hkv, int64_t T, int64_t S, float scale, int causal) {
    typedef TrnAtt<D> A;
    __shared__ __align__(16) float Ks[A::BK * D];
    __shared__ __align__(16) float Vs[A::BK * D];
    int64_t bh = trn_att_bh(), b = bh / H, h = bh - b * H, hk = h / (H / Hkv);
    int64_t q0 = trn_qblock(causal) * BQ;
    int sub = threadIdx.x % A::TPR;
    int64_t row = q0 + threadIdx.x / A::TPR;
    bool valid = row < T;
    int64_t rr = valid ? row : T - 1;
    const E *qr = q + trn_at(lq, b, h, rr), *dr = dout + trn_at(ldo, b, h, rr), *orow = o + trn_at(lo, b, h, rr);
    const E *kb = k + trn_at(lk, b, hk, 0), *vb = v + trn_at(lv, b, hk, 0);
    float qv[A::NE], dov[A::NE], acc[A::NE];
    float di = 0.0f;
#pragma unroll
    for (int e = 0; e < A::NE; e++) {
        int c = A::col(sub, e);
        qv[e] = trn_f32(qr[c]);
        dov[e] = trn_f32(dr[c]);
        di += dov[e] * trn_f32(orow[c]);
        acc[e] = 0.0f;
    }
    di = trn_group_sum<A::TPR>(di);
    if (valid && sub == 0) dis[bh * T + row] = di; /* for the dkv kernel */
    float L = lse[bh * T + rr];
    int64_t kend = causal ? min(S, q0 + BQ) : S;
    for (int64_t k0 = 0; k0 < kend; k0 += A::BK) {
        __syncthreads();
        trn_load_tile<D>(Ks, kb, lk.t, k0, A::BK, S);
        trn_load_tile<D>(Vs, vb, lv.t, k0, A::BK, S);
        __syncthreads();
#pragma unroll 4
        for (int j = 0; j < A::BK; j++) {
            float sd = 0.0f, dp = 0.0f;
#pragma unroll
            for (int e = 0; e < A::NE; e++) {
                int c = A::col(sub, e);
                sd += qv[e] * Ks[j * D + c];
                dp += dov[e] * Vs[j * D + c];
            }
            sd = trn_group_sum<A::TPR>(sd);
            dp = trn_group_sum<A::TPR>(dp);
            int64_t kj = k0 + j;
            float p = (kj >= S || (causal && kj > rr)) ? 0.0f : expf(sd * scale - L);
            float ds = p * (dp - di) * scale;
#pragma unroll
            for (int e = 0; e < A::NE; e++) acc[e] += ds * Ks[j * D + A::col(sub, e)];
        }
    }
    if (!valid) return;
    E *dqr = dq + trn_at(ldq, b, h, row);
#pragma unroll
    for (int e = 0; e < A::NE; e++) trn_st(dqr + A::col(sub, e), acc[e]);
}

/* Ds[r] = Di and Ls[r] = lse_i times ls (1, or log2 e for the tensor-core
 * kernels' base 2) for the query rows i = i0 + r (r < nr) of head bh; 0
 * past T (the dkv kernels).  Di = do_i . o_i is what the dq kernel,
 * launched just before, left in dis (the workspace). */
TRN_DEV void trn_att_rows(float *Ds, float *Ls, const float *__restrict__ dis, const float *__restrict__ lse, int64_t bh, int64_t T, int64_t i0,
                          int nr, float ls) {
    for (int r = threadIdx.x; r < nr; r += blockDim.x) {
        bool in = i0 + r < T;
        Ds[r] = in ? dis[bh * T + i0 + r] : 0.0f;
        Ls[r] = in ? lse[bh * T + i0 + r] * ls : 0.0f;
    }
}

/* Backward, part 2: dk, dv.  A group of TPR threads holds one key row j
 * (k_j, v_j and the dk_j, dv_j accumulators); tiles of BQ2 query rows (q,
 * do, lse, Di) go through shared memory, for every query head sharing the
 * kv head.  block: BKV * TPR threads; grid (ceil(S / BKV), B * Hkv as y z). */
template <int D, int BKV, typename E>
TRN_DEV void tk_attention_bwd_dkv(E *__restrict__ dk, TrnAttL ldk, E *__restrict__ dv, TrnAttL ldv, const E *__restrict__ dout,
                                  TrnAttL ldo, const E *__restrict__ q, TrnAttL lq, const E *__restrict__ k, TrnAttL lk,
                                  const E *__restrict__ v, TrnAttL lv, const float *__restrict__ dis, const float *__restrict__ lse,
                                  int64_t H, int64_t Hkv, int64_t T, int64_t S, float scale, int causal) {
    typedef TrnAtt<D> A;
    constexpr int BQ2 = A::BK;
    __shared__ __align__(16) float Qs[BQ2 * D];
    __shared__ __align__(16) float Os[BQ2 * D];
    __shared__ float Ls[BQ2], Ds[BQ2];
    int64_t bk = trn_att_bh(), b = bk / Hkv, hk = bk - b * Hkv, grp = H / Hkv;
    int64_t j0 = (int64_t)blockIdx.x * BKV;
    int sub = threadIdx.x % A::TPR;
    int64_t kj = j0 + threadIdx.x / A::TPR;
    bool valid = kj < S;
    int64_t jj = valid ? kj : S - 1;
    const E *kr = k + trn_at(lk, b, hk, jj), *vr = v + trn_at(lv, b, hk, jj);
    float kv[A::NE], vv[A::NE], dka[A::NE], dva[A::NE];
#pragma unroll
    for (int e = 0; e < A::NE; e++) {
        int c = A::col(sub, e);
        kv[e] = trn_f32(kr[c]);
        vv[e] = trn_f32(vr[c]);
        dka[e] = 0.0f;
        dva[e] = 0.0f;
    }
    int64_t istart = causal ? (j0 / BQ2) * BQ2 : 0;
    for (int64_t h = hk * grp; h < (hk + 1) * grp; h++) {
        int64_t bh = b * H + h;
        for (int64_t i0 = istart; i0 < T; i0 += BQ2) {
            __syncthreads();
            trn_load_tile<D>(Qs, q + trn_at(lq, b, h, 0), lq.t, i0, BQ2, T);
            trn_load_tile<D>(Os, dout + trn_at(ldo, b, h, 0), ldo.t, i0, BQ2, T);
            trn_att_rows(Ds, Ls, dis, lse, bh, T, i0, BQ2, 1.0f);
            __syncthreads();
#pragma unroll 4
            for (int r = 0; r < BQ2; r++) {
                int64_t i = i0 + r;
                float sd = 0.0f, dp = 0.0f;
#pragma unroll
                for (int e = 0; e < A::NE; e++) {
                    int c = A::col(sub, e);
                    sd += kv[e] * Qs[r * D + c];
                    dp += vv[e] * Os[r * D + c];
                }
                sd = trn_group_sum<A::TPR>(sd);
                dp = trn_group_sum<A::TPR>(dp);
                float p = (i >= T || (causal && jj > i)) ? 0.0f : expf(sd * scale - Ls[r]);
                float ds = p * (dp - Ds[r]) * scale;
#pragma unroll
                for (int e = 0; e < A::NE; e++) {
                    int c = A::col(sub, e);
                    dva[e] += p * Os[r * D + c];
                    dka[e] += ds * Qs[r * D + c];
                }
            }
        }
    }
    if (!valid) return;
#pragma unroll
    for (int e = 0; e < A::NE; e++) {
        int c = A::col(sub, e);
        trn_st(dk + trn_at(ldk, b, hk, kj) + c, dka[e]);
        trn_st(dv + trn_at(ldv, b, hk, kj) + c, dva[e]);
    }
}

/* ---- warp matrix products on tensor cores (sm_80+): mma.sync and ldmatrix ----
 * trn_mma is mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: d (16 x 8,
 * f32) += a (16 x 16, 16-bit) times b (16 x 8, 16-bit); trn_ldsm4 and
 * trn_ldsm4t are ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16.  The
 * registers hold the elements as the PTX ISA lays them out ("Matrix
 * Fragments for mma.m16n8k16 with floating point type"; ldmatrix), with
 * g = lane / 4, t = lane % 4 and the lower index in the lower 16 bits:
 *   a[0] = A[g][2t, 2t+1]   a[1] = A[g+8][2t, 2t+1]
 *   a[2] = A[g][2t+8, +9]   a[3] = A[g+8][2t+8, +9]
 *   b0 = B[2t, 2t+1][g]     b1 = B[2t+8, 2t+9][g]
 *   d[0], d[1] = D[g][2t, 2t+1]   d[2], d[3] = D[g+8][2t, 2t+1]
 *   ldmatrix .x4: lanes 8i .. 8i+7 give the addresses of the 8 rows (16
 *   bytes each, 16-byte aligned) of matrix i; register i of lane l gets
 *   matrix i's row g, columns 2t, 2t+1 (with .trans: column g, rows 2t,
 *   2t+1).
 * So a product's D fragments over two adjacent 8-column tiles, packed, are
 * the A fragment of a product over those 16 columns (FlashAttention's P
 * stays in registers).  tests/cuda/emu/cuda_emu.h implements the same
 * contract on the CPU (emu_mma16816, emu_ldsm4). */
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
TRN_DEV void trn_ldsm4(uint32_t (&r)[4], const void *p) {
    unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}
TRN_DEV void trn_ldsm4t(uint32_t (&r)[4], const void *p) {
    unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}
TRN_DEV void trn_mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, trn_bf16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
TRN_DEV void trn_mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, trn_f16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
/* cp.async: 16 bytes from global to shared memory without a register
 * round trip, zeros when !valid (nothing is read then); the copies issued
 * since the last commit form a group, and trn_cp_wait<N> waits until at
 * most N groups are still in flight.  Nothing else (not __syncthreads)
 * waits for them. */
TRN_DEV void trn_cp16(void *dst, const void *src, bool valid) {
    unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(src), "r"(valid ? 16 : 0));
}
TRN_DEV void trn_cp_commit(void) { asm volatile("cp.async.commit_group;" ::: "memory"); }
/* ("memory": no read of a tile the copies fill moves above the wait) */
template <int N> TRN_DEV void trn_cp_wait(void) { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
/* lo and hi rounded (nearest even) and packed: lo in the lower 16 bits */
TRN_DEV uint32_t trn_pack2(float lo, float hi, trn_bf16) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
TRN_DEV uint32_t trn_pack2(float lo, float hi, trn_f16) {
    uint32_t r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
#else /* the CPU emulation */
TRN_DEV void trn_cp16(void *dst, const void *src, bool valid) { emu_cp_async(dst, valid ? src : 0); }
TRN_DEV void trn_cp_commit(void) { emu_cp_commit(); }
template <int N> TRN_DEV void trn_cp_wait(void) { emu_cp_wait(N); }
TRN_DEV void trn_ldsm4(uint32_t (&r)[4], const void *p) { emu_ldsm4(r, p, 0); }
TRN_DEV void trn_ldsm4t(uint32_t (&r)[4], const void *p) { emu_ldsm4(r, p, 1); }
TRN_DEV void trn_mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, trn_bf16) { emu_mma16816(d, a, b0, b1, 0); }
TRN_DEV void trn_mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, trn_f16) { emu_mma16816(d, a, b0, b1, 1); }
TRN_DEV uint32_t trn_pack2(float lo, float hi, trn_bf16) { return (uint32_t)trn_to_bf16(lo).x | (uint32_t)trn_to_bf16(hi).x << 16; }
TRN_DEV uint32_t trn_pack2(float lo, float hi, trn_f16) { return (uint32_t)trn_to_f16(lo).x | (uint32_t)trn_to_f16(hi).x << 16; }
#endif

/* ---- attention on tensor cores (bf16/f16, D % 16 == 0, D <= 128; sm_80+) ----
 * The same contract as tk_attention and its backward (above), for half
 * q, k, v, FlashAttention-2 style: the products are mma.sync on fragments
 * in registers (above); only the tiles of K, V (Q, dO in dkv) go through
 * shared memory, read with ldmatrix.  A block is 4 warps; each warp owns
 * 16 rows (queries; keys in the dkv kernel), and lane l holds rows g and
 * g + 8 of its warp's score fragments, columns 2t, 2t+1 of every 8-column
 * tile: a row's maximum and sum are the 4 lanes of a quad (two shuffles).
 * Tiles are halved beyond D = 64 (registers: --emit=cuda's report, as
 * docs/cuda.md lists them; no spills), and double-buffered: cp.async loads
 * the next tiles while the warps compute on these.
 *   forward  one pass over key tiles of 64: S = Q K^T in registers, the
 *            online softmax per row, P = exp(s - m) rounded to the half type
 *            (FlashAttention's P) and used as the A fragments of o += P V,
 *            the f32 accumulators rescaled in registers when a row's maximum
 *            grows; o / l rounded once, lse saved;
 *   dq       per key tile of 32: S and dP = dO V^T, dS = P (dP - Di) scale
 *            rounded to the half type, dq += dS K; Di = dO . O per row goes
 *            to the workspace for dkv;
 *   dkv      per query tile of 32, for every head of the group: S^T = K Q^T,
 *            dP^T = V dO^T, then dv += P^T dO and dk += dS^T Q.
 * Differences from the CUDA-core kernels: P and dS are rounded to the half
 * type before their products (about 2^-9 relative for bf16), and the f32
 * sums run in the tensor cores' order. */
template <int D> struct TrnAttTc {
    static constexpr int W = 4;       /* warps per block */
    static constexpr int BR = 16 * W; /* rows per block, 16 a warp */
    static constexpr int BCF = D <= 64 ? 64 : 32; /* key rows per tile, forward */
    static constexpr int BCB = D <= 64 ? 32 : 16; /* rows per tile, backward */
    static constexpr int LDH = D + 8; /* row stride of tiles (elements): 16-byte aligned rows, ldmatrix without bank conflicts */
    static constexpr int KD = D / 16; /* 16-wide slices of a head (A fragments) */
    static constexpr int ND = D / 8;  /* 8-wide column tiles of a head (accumulators) */
    static_assert(D % 16 == 0 && D <= 128, "tensor-core attention: D a multiple of 16, at most 128");
};

/* Rows r0 .. r0+nr-1 (< lim) of a [.., D] matrix of 16-bit E (row stride
 * lds elements) into tile (row stride ld elements), the bits unchanged;
 * zeros past lim.  16-byte copies when src and its rows are 16-byte aligned
 * (a buffer's start always is; a view may not be). */
template <typename E> TRN_DEV bool trn_rows16(const E *src, int64_t lds) {
    return ((unsigned long long)src & 15) == 0 && ((lds * (int64_t)sizeof(E)) & 15) == 0;
}
template <int D, typename E>
TRN_DEV void trn_load_tile16(E *__restrict__ tile, int ld, const E *__restrict__ src, int64_t lds, int64_t r0, int nr, int64_t lim) {
    if (trn_rows16(src, lds)) {
        constexpr int V = D / 8;
        for (int e = threadIdx.x; e < nr * V; e += blockDim.x) {
            int r = e / V, c = (e - r * V) * 8;
            uint4 v = make_uint4(0u, 0u, 0u, 0u);
            if (r0 + r < lim) v = *(const uint4 *)TRN_ALIGNED(src + (r0 + r) * lds + c, 16);
            *(uint4 *)TRN_ALIGNED(tile + r * ld + c, 16) = v;
        }
    } else {
        for (int e = threadIdx.x; e < nr * D; e += blockDim.x) {
            int r = e / D, c = e - r * D;
            E z;
            z.x = 0;
            tile[r * ld + c] = r0 + r < lim ? src[(r0 + r) * lds + c] : z;
        }
    }
}

/* trn_load_tile16 with cp.async (the caller commits and waits) when src is
 * 16-byte aligned; otherwise the same plain loads and stores. */
template <int D, typename E>
TRN_DEV void trn_load_tile16_async(E *__restrict__ tile, int ld, const E *__restrict__ src, int64_t lds, int64_t r0, int nr, int64_t lim) {
    if (trn_rows16(src, lds)) {
        constexpr int V = D / 8;
        for (int e = threadIdx.x; e < nr * V; e += blockDim.x) {
            int r = e / V, c = (e - r * V) * 8;
            bool in = r0 + r < lim;
            trn_cp16(tile + r * ld + c, in ? src + (r0 + r) * lds + c : src, in);
        }
    } else
        trn_load_tile16<D>(tile, ld, src, lds, r0, nr, lim);
}

/* a = the A fragments of the 16 rows at tile (row stride LDH), all D
 * columns: a[kk] holds columns 16 kk .. 16 kk + 15. */
template <int D, typename E>
TRN_DEV void trn_frag_rows(uint32_t (&a)[D / 16][4], const E *tile, int lane) {
    typedef TrnAttTc<D> A;
#pragma unroll
    for (int kk = 0; kk < A::KD; kk++) trn_ldsm4(a[kk], tile + (lane & 15) * A::LDH + kk * 16 + (lane >> 4) * 8);
}

/* For each of RW row tiles: d[i][n] += a[i][kk] times b0, b1 and d[i][n+1]
 * += a[i][kk] times b2, b3 (two 8-column B fragments loaded together). */
template <int RW, int N, int K, typename E>
TRN_DEV void trn_mma2_rw(float (&d)[RW][N][4], int n, const uint32_t (&a)[RW][K][4], int kk, const uint32_t (&b)[4], E) {
#pragma unroll
    for (int i = 0; i < RW; i++) {
        trn_mma(d[i][n], a[i][kk], b[0], b[1], E());
        trn_mma(d[i][n + 1], a[i][kk], b[2], b[3], E());
    }
}

/* s (16 x NC: s[n] is columns 8n .. 8n+7) = a (16 x D) times the NC rows
 * of tile (row stride LDH) transposed; for each of RW row tiles (s[i] of
 * a[i]), every B fragment loaded once for all of them. */
template <int D, int NC, int RW, typename E>
TRN_DEV void trn_mma_abt_rw(float (&s)[RW][NC / 8][4], const uint32_t (&a)[RW][D / 16][4], const E *tile, int lane) {
    typedef TrnAttTc<D> A;
#pragma unroll
    for (int i = 0; i < RW; i++)
#pragma unroll
        for (int n = 0; n < NC / 8; n++) s[i][n][0] = s[i][n][1] = s[i][n][2] = s[i][n][3] = 0.0f;
#pragma unroll
    for (int n = 0; n < NC / 8; n += 2) {
#pragma unroll
        for (int kk = 0; kk < A::KD; kk++) {
            uint32_t b[4]; /* B = rows 8n .. 8n+15 of the tile, transposed: b0, b1 of tile n, then of tile n + 1 */
            trn_ldsm4(b, tile + (n * 8 + (lane >> 4) * 8 + (lane & 7)) * A::LDH + kk * 16 + ((lane >> 3) & 1) * 8);
            trn_mma2_rw(s, n, a, kk, b, E());
        }
    }
}
template <int D, int NC, typename E>
TRN_DEV void trn_mma_abt(float (&s)[NC / 8][4], const uint32_t (&a)[D / 16][4], const E *tile, int lane) {
    trn_mma_abt_rw<D, NC, 1>(reinterpret_cast<float(&)[1][NC / 8][4]>(s), reinterpret_cast<const uint32_t(&)[1][D / 16][4]>(a), tile, lane);
}

/* o (16 x D f32 fragments) += p (16 x NC, A fragments: p[kk] is columns
 * 16 kk .. 16 kk + 15) times tile [NC, D] (row stride LDH); for each of RW
 * row tiles (o[i] += p[i] times the tile). */
template <int D, int NC, int RW, typename E>
TRN_DEV void trn_mma_ab_rw(float (&o)[RW][D / 8][4], const uint32_t (&p)[RW][NC / 16][4], const E *tile, int lane) {
    typedef TrnAttTc<D> A;
#pragma unroll
    for (int kk = 0; kk < NC / 16; kk++) {
#pragma unroll
        for (int c = 0; c < A::ND; c += 2) {
            uint32_t b[4]; /* rows 16 kk .. 16 kk + 15, columns 8c .. 8c + 15 of the tile, transposed on loading */
            trn_ldsm4t(b, tile + (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * A::LDH + c * 8 + (lane >> 4) * 8);
            trn_mma2_rw(o, c, p, kk, b, E());
        }
    }
}
template <int D, int NC, typename E>
TRN_DEV void trn_mma_ab(float (&o)[D / 8][4], const uint32_t (&p)[NC / 16][4], const E *tile, int lane) {
    trn_mma_ab_rw<D, NC, 1>(reinterpret_cast<float(&)[1][D / 8][4]>(o), reinterpret_cast<const uint32_t(&)[1][NC / 16][4]>(p), tile, lane);
}

/* The f32 fragments s (16 x NC) rounded to E, as the A fragments of a
 * product over those NC columns. */
template <int NC, typename E>
TRN_DEV void trn_frag_pack(uint32_t (&p)[NC / 16][4], const float (&s)[NC / 8][4]) {
#pragma unroll
    for (int kk = 0; kk < NC / 16; kk++) {
        p[kk][0] = trn_pack2(s[2 * kk][0], s[2 * kk][1], E());
        p[kk][1] = trn_pack2(s[2 * kk][2], s[2 * kk][3], E());
        p[kk][2] = trn_pack2(s[2 * kk + 1][0], s[2 * kk + 1][1], E());
        p[kk][3] = trn_pack2(s[2 * kk + 1][2], s[2 * kk + 1][3], E());
    }
}

/* Rows row0 .. row0+15 (< lim) of dst [.., D] (row stride lds) = o (16 x D
 * f32 fragments), row g times f0 and row g + 8 times f1, rounded once to E:
 * a 4-byte store per pair of columns when dst and its rows allow it. */
template <int D, typename E>
TRN_DEV void trn_frag_store(E *dst, int64_t lds, int64_t row0, int64_t lim, const float (&o)[D / 8][4], float f0, float f1, int lane) {
    typedef TrnAttTc<D> A;
    int g = lane >> 2, t = lane & 3;
    bool w4 = ((unsigned long long)dst & 3) == 0 && (lds & 1) == 0;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int64_t row = row0 + g + 8 * h;
        float f = h ? f1 : f0;
        if (row >= lim) continue;
#pragma unroll
        for (int c = 0; c < A::ND; c++) {
            E *p = dst + row * lds + c * 8 + 2 * t;
            if (w4) *(uint32_t *)p = trn_pack2(o[c][2 * h] * f, o[c][2 * h + 1] * f, E());
            else {
                trn_st(p, o[c][2 * h] * f);
                trn_st(p + 1, o[c][2 * h + 1] * f);
            }
        }
    }
}

/* The block's rows r0 .. r0+RW*BR-1 (< lim) of a [.., D] matrix of 16-bit
 * E, the warp's RW tiles of 16 of them as A fragments, through the staging
 * tile (RW*BR rows); the block waits after loading it and after reading
 * it, so the staging (and what shares its memory) is free again on
 * return. */
template <int D, int RW, typename E>
TRN_DEV void trn_tc_stage_rw(uint32_t (&a)[RW][D / 16][4], E *stage, const E *__restrict__ src, int64_t lds, int64_t r0, int64_t lim, int warp,
                             int lane) {
    typedef TrnAttTc<D> A;
    trn_load_tile16<D>(stage, A::LDH, src, lds, r0, RW * A::BR, lim);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < RW; i++) trn_frag_rows<D>(a[i], stage + (warp * RW + i) * 16 * A::LDH, lane);
    __syncthreads();
}
template <int D, typename E>
TRN_DEV void trn_tc_stage(uint32_t (&a)[D / 16][4], E *stage, const E *__restrict__ src, int64_t lds, int64_t r0, int64_t lim, int warp,
                          int lane) {
    trn_tc_stage_rw<D, 1>(reinterpret_cast<uint32_t(&)[1][D / 16][4]>(a), stage, src, lds, r0, lim, warp, lane);
}

/* Key rows k0 .. k0+BC-1 (< S) of K and V (row strides lks, lvs) into
 * stage (K's tile, then V's; cp.async: the caller commits and waits). */
template <int D, int BC, typename E>
TRN_DEV void trn_tc_load_kv(E *stage, const E *__restrict__ kb, int64_t lks, const E *__restrict__ vb, int64_t lvs, int64_t k0, int64_t S) {
    typedef TrnAttTc<D> A;
    trn_load_tile16_async<D>(stage, A::LDH, kb, lks, k0, BC, S);
    trn_load_tile16_async<D>(stage + BC * A::LDH, A::LDH, vb, lvs, k0, BC, S);
}

/* The tensor-core kernels' softmax works in base 2: a score s scaled by
 * scale log2(e) and exp2 of it is exp(s scale), one multiply-add and one
 * ex2 where expf takes several instructions (the loop over a tile's scores
 * is as much of the kernels' work as their products).  trn_tile: the
 * masked and the unmasked form of a tile's loop as two copies, the mask
 * tested only in tiles that cross the causal diagonal or the end of the
 * keys (or queries). */
#define TRN_LOG2E 1.4426950408889634f
#define TRN_LN2   0.6931471805599453f
template <typename F> TRN_DEV void trn_tile(bool edge, F f) {
    if (edge) f(true); /* inlined: each call a copy with its constant */
    else f(false);
}

/* The forward's and dq's loop over a key tile's scores, RW row tiles of
 * BC / 8 column tiles: f(i, n, e, out) for score e of column tile n of row
 * tile i, out whether it is masked (its key past S, or above the lane's
 * row rr[i][e / 2] in a causal kernel); the mask tested only where edge
 * says the tile reaches either (trn_tile's two copies). */
template <int RW, int BC, typename F>
TRN_DEV void trn_tile_scores(bool edge, int64_t k0, int64_t S, int causal, const int64_t (&rr)[RW][2], int t, F f) {
    trn_tile(edge, [&](bool ed) {
#pragma unroll
        for (int i = 0; i < RW; i++)
#pragma unroll
            for (int n = 0; n < BC / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int kj = (int)k0 + n * 8 + 2 * t + (e & 1);
                    f(i, n, e, ed && (kj >= (int)S || (causal && kj > (int)rr[i][e >> 1])));
                }
    });
}

/* The maximum (MAX) or the sum of v over the 4 lanes of a quad (a row). */
template <bool MAX> TRN_DEV float trn_quad(float v) {
#pragma unroll
    for (int x = 1; x < 4; x <<= 1) {
        float w = __shfl_xor_sync(TRN_FULL, v, x);
        v = MAX ? fmaxf(v, w) : v + w;
    }
    return v;
}

/* block: 128 threads; grid (ceil(T / (64 RW)), B * H as y z).  Each warp holds
 * RW row tiles of 16 queries (the block 64 RW rows): every K and V
 * fragment read from shared memory serves RW tiles' products, RW times the
 * FLOPs a byte of the one-tile form, for RW times its accumulators. */
template <int D, int RW, typename E>
TRN_DEV void tk_attention_tc(E *__restrict__ o, TrnAttL lo, float *__restrict__ lse, const E *__restrict__ q, TrnAttL lq,
                             const E *__restrict__ k, TrnAttL lk, const E *__restrict__ v, TrnAttL lv, int64_t H, int64_t Hkv, int64_t T,
                             int64_t S, float scale, int causal) {
    typedef TrnAttTc<D> A;
    constexpr int BC = A::BCF, KV = BC * A::LDH, BR = A::BR * RW, WR = 16 * RW;
    /* two stages of K and V tiles (the next pair loads while this one is
     * used); the Q staging tile before them */
    __shared__ __align__(16) E sm[4 * KV > BR * A::LDH ? 4 * KV : BR * A::LDH];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int64_t bh = trn_att_bh(), b = bh / H, h = bh - b * H, hk = h / (H / Hkv);
    int64_t q0 = trn_qblock(causal) * BR, w0 = q0 + warp * WR; /* the block's and the warp's first rows */
    int64_t rr[RW][2]; /* the lane's rows (clamped) */
#pragma unroll
    for (int i = 0; i < RW; i++) rr[i][0] = min(w0 + 16 * i + g, T - 1), rr[i][1] = min(w0 + 16 * i + g + 8, T - 1);
    const E *kb = k + trn_at(lk, b, hk, 0), *vb = v + trn_at(lv, b, hk, 0);
    uint32_t qa[RW][A::KD][4];
    trn_tc_stage_rw<D, RW>(qa, sm, q + trn_at(lq, b, h, 0), lq.t, q0, T, warp, lane);
    float of[RW][A::ND][4];
#pragma unroll
    for (int i = 0; i < RW; i++)
#pragma unroll
        for (int c = 0; c < A::ND; c++) of[i][c][0] = of[i][c][1] = of[i][c][2] = of[i][c][3] = 0.0f;
    float m[RW][2], l[RW][2], sl2 = scale * TRN_LOG2E;
#pragma unroll
    for (int i = 0; i < RW; i++) m[i][0] = m[i][1] = -TRN_INF, l[i][0] = l[i][1] = 0.0f;
    int64_t kend = causal ? min(S, q0 + BR) : S;
    int nt = (int)((kend + BC - 1) / BC);
    if (nt > 0) trn_tc_load_kv<D, BC>(sm, kb, lk.t, vb, lv.t, 0, S);
    trn_cp_commit();
    for (int it = 0; it < nt; it++) {
        int64_t k0 = (int64_t)it * BC;
        E *Ks = sm + (it & 1) * 2 * KV, *Vs = Ks + KV;
        if (it + 1 < nt) /* the next tiles, into the other stage */
            trn_tc_load_kv<D, BC>(sm + ((it + 1) & 1) * 2 * KV, kb, lk.t, vb, lv.t, k0 + BC, S);
        trn_cp_commit();
        trn_cp_wait<1>(); /* this iteration's tiles have landed */
        __syncthreads();
        /* a warp whose rows all lie above the tile's first key (causal)
         * has nothing to add from it: every score would be masked */
        if (!causal || k0 <= w0 + WR - 1) {
            float s[RW][BC / 8][4];
            trn_mma_abt_rw<D, BC, RW>(s, qa, Ks, lane);
            /* the scores in base 2 (m too), masked (-inf) past the keys and
             * above the diagonal: only a tile that reaches either for one
             * of the warp's rows has any */
            float mx[RW][2];
#pragma unroll
            for (int i = 0; i < RW; i++) mx[i][0] = mx[i][1] = -TRN_INF;
            trn_tile_scores<RW, BC>(k0 + BC > S || (causal && k0 + BC - 1 > w0), k0, S, causal, rr, t, [&](int i, int n, int e, bool out) {
                s[i][n][e] = out ? -TRN_INF : s[i][n][e] * sl2;
                mx[i][e >> 1] = fmaxf(mx[i][e >> 1], s[i][n][e]);
            });
            uint32_t pa[RW][BC / 16][4];
#pragma unroll
            for (int i = 0; i < RW; i++) {
                float mn[2], mb[2], sum[2] = {0.0f, 0.0f}, alpha[2];
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    mn[r] = fmaxf(m[i][r], trn_quad<true>(mx[i][r]));
                    mb[r] = mn[r] == -TRN_INF ? 0.0f : mn[r]; /* a row with nothing yet: exp2(-inf - 0) = 0 */
                }
#pragma unroll
                for (int n = 0; n < BC / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        float p = exp2f(s[i][n][e] - mb[e >> 1]);
                        s[i][n][e] = p;
                        sum[e >> 1] += p;
                    }
                /* a row whose maximum grew rescales what it has summed */
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    alpha[r] = l[i][r] > 0.0f && mn[r] > m[i][r] ? exp2f(m[i][r] - mn[r]) : 1.0f;
                    l[i][r] = l[i][r] * alpha[r] + trn_quad<false>(sum[r]);
                    m[i][r] = mn[r];
                }
#pragma unroll
                for (int c = 0; c < A::ND; c++)
#pragma unroll
                    for (int e = 0; e < 4; e++) of[i][c][e] *= alpha[e >> 1];
                trn_frag_pack<BC, E>(pa[i], s[i]);
            }
            trn_mma_ab_rw<D, BC, RW>(of, pa, Vs, lane);
        }
        __syncthreads(); /* this stage is read: the next iteration but one loads into it */
    }
#pragma unroll
    for (int i = 0; i < RW; i++) {
        int64_t r0 = w0 + 16 * i;
        trn_frag_store<D>(o + trn_at(lo, b, h, 0), lo.t, r0, T, of[i], l[i][0] > 0.0f ? 1.0f / l[i][0] : 0.0f,
                          l[i][1] > 0.0f ? 1.0f / l[i][1] : 0.0f, lane);
#pragma unroll
        for (int r = 0; r < 2; r++)
            if (t == 0 && r0 + g + 8 * r < T) lse[bh * T + r0 + g + 8 * r] = m[i][r] * TRN_LN2 + logf(l[i][r]);
    }
}

/* Backward, part 1: dq.  block: 128 threads; grid (ceil(T / (64 RW)),
 * B * H as y z); RW row tiles of 16 queries a warp, as in the forward. */
template <int D, int RW, typename E>
TRN_DEV void tk_attention_tc_bwd_dq(E *__restrict__ dq, TrnAttL ldq, const E *__restrict__ dout, TrnAttL ldo, const E *__restrict__ q,
                                    TrnAttL lq, const E *__restrict__ k, TrnAttL lk, const E *__restrict__ v, TrnAttL lv,
                                    const E *__restrict__ o, TrnAttL lo, const float *__restrict__ lse, float *__restrict__ dis, int64_t H,
                                    int64_t Hkv, int64_t T, int64_t S, float scale, int causal) {
    typedef TrnAttTc<D> A;
    constexpr int BC = A::BCB, KV = BC * A::LDH, BR = A::BR * RW, WR = 16 * RW, ST = BR * A::LDH;
    /* two stages of K and V tiles; the Q / dO staging tile before them */
    __shared__ __align__(16) E sm[ST > 4 * KV ? ST : 4 * KV];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int64_t bh = trn_att_bh(), b = bh / H, h = bh - b * H, hk = h / (H / Hkv);
    int64_t q0 = trn_qblock(causal) * BR, w0 = q0 + warp * WR;
    int64_t rr[RW][2]; /* the lane's rows (clamped) */
#pragma unroll
    for (int i = 0; i < RW; i++) rr[i][0] = min(w0 + 16 * i + g, T - 1), rr[i][1] = min(w0 + 16 * i + g + 8, T - 1);
    const E *kb = k + trn_at(lk, b, hk, 0), *vb = v + trn_at(lv, b, hk, 0);
    uint32_t qa[RW][A::KD][4], da[RW][A::KD][4];
    trn_tc_stage_rw<D, RW>(qa, sm, q + trn_at(lq, b, h, 0), lq.t, q0, T, warp, lane);
    trn_tc_stage_rw<D, RW>(da, sm, dout + trn_at(ldo, b, h, 0), ldo.t, q0, T, warp, lane);
    /* Di = do . o of the lane's rows (a quad each), L2 their lse in base 2 */
    float di[RW][2], L2[RW][2], sl2 = scale * TRN_LOG2E;
#pragma unroll
    for (int i = 0; i < RW; i++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float x = 0.0f;
            for (int c = t; c < D; c += 4) x += trn_f32(dout[trn_at(ldo, b, h, rr[i][r]) + c]) * trn_f32(o[trn_at(lo, b, h, rr[i][r]) + c]);
            di[i][r] = trn_quad<false>(x);
            L2[i][r] = lse[bh * T + rr[i][r]] * TRN_LOG2E;
            int64_t row = w0 + 16 * i + g + 8 * r;
            if (t == 0 && row < T) dis[bh * T + row] = di[i][r]; /* for the dkv kernel */
        }
    float acc[RW][A::ND][4];
#pragma unroll
    for (int i = 0; i < RW; i++)
#pragma unroll
        for (int c = 0; c < A::ND; c++) acc[i][c][0] = acc[i][c][1] = acc[i][c][2] = acc[i][c][3] = 0.0f;
    int64_t kend = causal ? min(S, q0 + BR) : S;
    int nt = (int)((kend + BC - 1) / BC);
    if (nt > 0) trn_tc_load_kv<D, BC>(sm, kb, lk.t, vb, lv.t, 0, S);
    trn_cp_commit();
    for (int it = 0; it < nt; it++) {
        int64_t k0 = (int64_t)it * BC;
        E *Ks = sm + (it & 1) * 2 * KV, *Vs = Ks + KV;
        if (it + 1 < nt) trn_tc_load_kv<D, BC>(sm + ((it + 1) & 1) * 2 * KV, kb, lk.t, vb, lv.t, k0 + BC, S);
        trn_cp_commit();
        trn_cp_wait<1>();
        __syncthreads();
        /* a tile wholly above the warp's rows (causal): P = 0 there */
        if (!causal || k0 <= w0 + WR - 1) {
            float s[RW][BC / 8][4], dp[RW][BC / 8][4];
            trn_mma_abt_rw<D, BC, RW>(s, qa, Ks, lane);
            trn_mma_abt_rw<D, BC, RW>(dp, da, Vs, lane);
            /* P = exp2(s scale log2 e - lse log2 e), 0 where masked (only
             * in a tile past the keys or across the diagonal for one of
             * the warp's rows) */
            trn_tile_scores<RW, BC>(k0 + BC > S || (causal && k0 + BC - 1 > w0), k0, S, causal, rr, t, [&](int i, int n, int e, bool out) {
                float p = out ? 0.0f : exp2f(s[i][n][e] * sl2 - L2[i][e >> 1]);
                s[i][n][e] = p * (dp[i][n][e] - di[i][e >> 1]) * scale;
            });
            uint32_t dsa[RW][BC / 16][4];
#pragma unroll
            for (int i = 0; i < RW; i++) trn_frag_pack<BC, E>(dsa[i], s[i]);
            trn_mma_ab_rw<D, BC, RW>(acc, dsa, Ks, lane);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < RW; i++) trn_frag_store<D>(dq + trn_at(ldq, b, h, 0), ldq.t, w0 + 16 * i, T, acc[i], 1.0f, 1.0f, lane);
}

/* Query rows i0 .. i0+BC-1 (< T) of head bh (of H a batch row): q and dO
 * into stage (their tiles, cp.async), Di and lse into Ds, Ls (plain
 * stores). */
template <int D, int BC, typename E>
TRN_DEV void trn_tc_load_qdo(E *stage, float *Ls, float *Ds, const E *__restrict__ q, TrnAttL lq, const E *__restrict__ dout, TrnAttL ldo,
                             const float *__restrict__ dis, const float *__restrict__ lse, int64_t bh, int64_t H, int64_t T, int64_t i0) {
    typedef TrnAttTc<D> A;
    int64_t b = bh / H, h = bh - b * H;
    trn_load_tile16_async<D>(stage, A::LDH, q + trn_at(lq, b, h, 0), lq.t, i0, BC, T);
    trn_load_tile16_async<D>(stage + BC * A::LDH, A::LDH, dout + trn_at(ldo, b, h, 0), ldo.t, i0, BC, T);
    trn_att_rows(Ds, Ls, dis, lse, bh, T, i0, BC, TRN_LOG2E); /* lse in base 2 */
}

/* Backward, part 2: dk, dv.  block: 128 threads; grid (ceil(S / 64), B * Hkv as y z) */
template <int D, typename E>
TRN_DEV void tk_attention_tc_bwd_dkv(E *__restrict__ dk, TrnAttL ldk, E *__restrict__ dv, TrnAttL ldv, const E *__restrict__ dout,
                                     TrnAttL ldo, const E *__restrict__ q, TrnAttL lq, const E *__restrict__ k, TrnAttL lk,
                                     const E *__restrict__ v, TrnAttL lv, const float *__restrict__ dis, const float *__restrict__ lse,
                                     int64_t H, int64_t Hkv, int64_t T, int64_t S, float scale, int causal) {
    typedef TrnAttTc<D> A;
    constexpr int BC = A::BCB, QT = BC * A::LDH, ST = A::BR * A::LDH;
    /* two stages of Q and dO tiles and of their rows' lse and Di; the K / V
     * staging tile before them */
    __shared__ __align__(16) E sm[ST > 4 * QT ? ST : 4 * QT];
    __shared__ float Ls[2][BC], Ds[2][BC];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int64_t bk = trn_att_bh(), b = bk / Hkv, hk = bk - b * Hkv, grp = H / Hkv;
    int64_t j0 = (int64_t)blockIdx.x * A::BR, w0 = j0 + warp * 16;
    int64_t kr[2] = {w0 + g, w0 + g + 8}, jj[2] = {min(kr[0], S - 1), min(kr[1], S - 1)}; /* the lane's key rows */
    const float sl2 = scale * TRN_LOG2E;
    uint32_t ka[A::KD][4], va[A::KD][4];
    trn_tc_stage<D>(ka, sm, k + trn_at(lk, b, hk, 0), lk.t, j0, S, warp, lane);
    trn_tc_stage<D>(va, sm, v + trn_at(lv, b, hk, 0), lv.t, j0, S, warp, lane);
    float dka[A::ND][4], dva[A::ND][4];
#pragma unroll
    for (int c = 0; c < A::ND; c++)
#pragma unroll
        for (int e = 0; e < 4; e++) dka[c][e] = dva[c][e] = 0.0f;
    /* the tiles: query rows istart, istart + BC, .. < T of every head of
     * the group in turn; tile it in stage it % 2.  (bn, in): the next tile
     * to load; i0: the rows of this iteration's. */
    int64_t istart = causal ? (j0 / BC) * BC : 0, bn = b * H + hk * grp, in = istart, i0 = istart;
    int ntq = (int)((T - istart + BC - 1) / BC), nt = ntq * (int)grp;
    if (nt > 0) trn_tc_load_qdo<D, BC>(sm, Ls[0], Ds[0], q, lq, dout, ldo, dis, lse, bn, H, T, in);
    trn_cp_commit();
    for (int it = 0; it < nt; it++, i0 = i0 + BC < T ? i0 + BC : istart) {
        int cur = it & 1;
        if (in + BC < T) in += BC;
        else in = istart, bn++;
        if (it + 1 < nt) /* the next tile, into the other stage */
            trn_tc_load_qdo<D, BC>(sm + (cur ^ 1) * 2 * QT, Ls[cur ^ 1], Ds[cur ^ 1], q, lq, dout, ldo, dis, lse, bn, H, T, in);
        trn_cp_commit();
        trn_cp_wait<1>(); /* this iteration's tile has landed */
        __syncthreads();
        const E *Qs = sm + cur * 2 * QT, *Os = Qs + QT;
        const float *Lc = Ls[cur], *Dc = Ds[cur];
        float st[BC / 8][4], dpt[BC / 8][4];
        trn_mma_abt<D, BC>(st, ka, Qs, lane);
        trn_mma_abt<D, BC>(dpt, va, Os, lane);
        /* the masked (0) elements: only in a tile past the queries, a
         * block past the keys, or queries above one of the block's keys */
        trn_tile(i0 + BC > T || j0 + A::BR > S || (causal && min(j0 + A::BR - 1, S - 1) > i0), [&](bool edge) {
#pragma unroll
            for (int n = 0; n < BC / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int c = n * 8 + 2 * t + (e & 1), i = (int)i0 + c;
                    bool out = edge && (i >= (int)T || kr[e >> 1] >= S || (causal && (int)jj[e >> 1] > i));
                    float p = out ? 0.0f : exp2f(st[n][e] * sl2 - Lc[c]); /* Lc: lse in base 2 */
                    st[n][e] = p;
                    dpt[n][e] = p * (dpt[n][e] - Dc[c]) * scale;
                }
        });
        uint32_t pa[BC / 16][4], dsa[BC / 16][4];
        trn_frag_pack<BC, E>(pa, st);
        trn_frag_pack<BC, E>(dsa, dpt);
        trn_mma_ab<D, BC>(dva, pa, Os, lane);
        trn_mma_ab<D, BC>(dka, dsa, Qs, lane);
        __syncthreads(); /* this stage is read: the next iteration but one loads into it */
    }
    trn_frag_store<D>(dk + trn_at(ldk, b, hk, 0), ldk.t, w0, S, dka, 1.0f, 1.0f, lane);
    trn_frag_store<D>(dv + trn_at(ldv, b, hk, 0), ldv.t, w0, S, dva, 1.0f, 1.0f, lane);
}

/* ---- cross-entropy over rows of logits [N,V] with targets [N] ----
 * Three launches: tk_ce_count (one block: the kept rows, into scratch),
 * a row kernel (one block per row: lse, the row's loss in scratch, and for
 * the fused and backward forms the gradient), tk_ce_mean (one block: the
 * mean of the row losses in a fixed order).  scratch: int64 count at 0,
 * the float pairs {1/count, 0} at byte 8 and {1/count, 1} at byte 16
 * (linear_cross_entropy's cuBLASLt scales; tk_ce_count_scaled: those of
 * dw, and dx's {s/count, 0} at byte 24), double row losses from byte 256. */
#define TRN_CE_ROWS(scratch) ((double *)((unsigned char *)(scratch) + 256))

TRN_DEV void tk_ce_count(void *scratch, const int32_t *__restrict__ tg, int64_t N, int64_t ignore) {
    long long c = 0;
    for (int64_t n = threadIdx.x; n < N; n += blockDim.x) c += tg[n] != ignore;
    c = trn_block_sum(c);
    if (threadIdx.x == 0) {
        *(long long *)scratch = c;
        float *ab = (float *)((unsigned char *)scratch + 8), inv = c ? (float)(1.0 / (double)c) : 0.0f;
        ab[0] = inv, ab[1] = 0.0f, ab[2] = inv, ab[3] = 1.0f;
    }
}

/* tk_ce_count for a linear_cross_entropy that absorbed the muls of dx and
 * dw by scales (fp16's loss scale: lower.c lce_scale_mul), sdx[0] and
 * sdw[0] (a null pointer: 1), each a power of two, so that the products'
 * alpha, s/count, scales as exactly as the mul after them would. */
TRN_DEV void tk_ce_count_scaled(void *scratch, const int32_t *__restrict__ tg, int64_t N, int64_t ignore, const float *sdx,
                                const float *sdw) {
    tk_ce_count(scratch, tg, N, ignore);
    if (threadIdx.x == 0) { /* the thread that wrote the pairs */
        float *ab = (float *)((unsigned char *)scratch + 8), inv = ab[0], sw = sdw ? sdw[0] : 1.0f;
        ab[0] = inv * sw, ab[2] = inv * sw;
        ab[4] = inv * (sdx ? sdx[0] : 1.0f), ab[5] = 0.0f;
    }
}

/* mode 0: forward (lse, row loss); 1: forward and backward fused, dlogits
 * written over the logits; 2: backward only (dlogits from lse).  Rows are
 * V long, of which the first nc count (pad-tiles' {classes}): the others
 * take no part in the softmax and get a zero gradient; so does a row
 * whose target is ignored or outside [0, nc), whose loss is 0. */
template <int MODE>
TRN_DEV void tk_ce_rows(float *__restrict__ lse, float *logits, float *dlogits, const int32_t *__restrict__ tg,
                        const float *__restrict__ dloss, void *scratch, int64_t N, int64_t V, int64_t nc, int64_t ignore) {
    int64_t n = blockIdx.x;
    if (n >= N) return;
    float *r = logits + n * V;
    int64_t t = tg[n];
    bool out = t == ignore || t < 0 || t >= nc;
    double l;
    if (MODE != 2) {
        float mx = -TRN_INF;
        for (int64_t j = threadIdx.x; j < nc; j += blockDim.x) mx = fmaxf(mx, r[j]);
        mx = trn_block_max(mx);
        double s = 0;
        for (int64_t j = threadIdx.x; j < nc; j += blockDim.x) s += (double)expf(r[j] - mx);
        s = trn_block_sum(s);
        l = (double)mx + log(s);
        if (threadIdx.x == 0) {
            lse[n] = (float)l;
            TRN_CE_ROWS(scratch)[n] = out ? 0.0 : l - (double)r[t];
        }
        __syncthreads(); /* r[t] read before the fused form overwrites it */
    } else {
        l = lse[n];
    }
    if (MODE == 0) return;
    long long cnt = *(const long long *)scratch;
    double sc = cnt ? (double)*dloss / (double)cnt : 0.0;
    float *d = (MODE == 1 ? logits : dlogits) + n * V;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x)
        d[j] = out || j >= nc ? 0.0f : (float)(sc * ((double)expf((float)((double)r[j] - l)) - (j == t ? 1.0 : 0.0)));
}

TRN_DEV void tk_ce_mean(float *__restrict__ loss, const void *scratch, int64_t N) {
    double s = 0;
    for (int64_t n = threadIdx.x; n < N; n += blockDim.x) s += TRN_CE_ROWS(scratch)[n];
    s = trn_block_sum(s);
    long long cnt = *(const long long *)scratch;
    if (threadIdx.x == 0) *loss = (float)(cnt ? s / (double)cnt : 0.0);
}

/* ---- linear_cross_entropy: cross_entropy(x w^T) and its gradients for
 * dloss = 1, `chunk` rows of x at a time, so that only one chunk's logits
 * exist.  emit_cuda.c strings together (in the kernel's scratch buffer of
 * the memory plan: the tk_ce_* header and row losses, then the chunk's
 * logits [rows, V] in x's dtype, over which the rows kernel writes g):
 *   tk_ce_count                        kept rows, alpha = 1/count
 *   per chunk   logits = x_c w^T       cuBLASLt, f32 accumulation, out in
 *                                      x's dtype, over all V rows of w
 *                                      (padding included: a tile multiple)
 *               tk_lce_rows            each row's loss, g = softmax - onehot
 *                                      in x's dtype, in place of the logits
 *               dx_c = alpha g w       cuBLASLt (alpha from the device)
 *               dw = alpha g^T x_c + (first chunk ? 0 : dw)
 *   tk_ce_mean                         the loss: row losses in a fixed order
 * The logits and g are rounded to x's dtype, as the unfused graph's matmul
 * result and the cast of its gradient are under mixed precision (the
 * interpreter and the C backend round at the same places); g is unscaled
 * (in [-1, 1]: no f16 underflow of 1/count-sized values), and alpha scales
 * in f32. ---- */

/* Element e (a constant after unrolling) of a 16-byte vector of L values. */
template <typename L> TRN_DEV float trn_vec_elem(const uint4 &v, int e) {
    constexpr int per = 4 / (int)sizeof(L); /* elements a 32-bit word */
    const int q = e / per;
    const uint32_t w = q == 0 ? v.x : q == 1 ? v.y : q == 2 ? v.z : v.w;
    if constexpr (sizeof(L) == 4) {
        return __uint_as_float(w);
    } else {
        L h;
        h.x = (uint16_t)(e % 2 ? w >> 16 : w & 0xffffu);
        return trn_f32(h);
    }
}

/* One row per block: lg [V] the row's logits in x's dtype L (the first nc
 * count), t its target; rowloss = lse - lg[t] (0 for a row that does not
 * count), and, when g is not null (it is lg: in place), g = softmax -
 * onehot over the first nc (0 past them and in a row that does not count),
 * rounded to L.  lg[t] is read before any barrier, so before any thread
 * writes over it.
 * NV > 0: the row in registers.  The row is V / VW 16-byte vectors (VW =
 * 16 / sizeof(L)); thread i holds vectors i, i + NT, ... (NV of them, as
 * loaded), so the logits are read from memory once and g written once: the
 * maximum, the sum of exp, then g, each a pass over the registers (for
 * GPT-2's 50304 bf16 logits, 7 vectors a thread of 1024).
 * NV == 0 (a row too long for that, or not whole vectors): the row streams
 * from memory twice, an online maximum and sum, then g. */
template <typename L, int NT, int NV>
TRN_DEV void tk_lce_rows(L *g, double *__restrict__ rowloss, const L *lg, const int32_t *__restrict__ tg, int64_t V, int64_t nc,
                         int64_t ignore) {
    int64_t n = blockIdx.x;
    lg += n * V;
    if (g) g += n * V;
    int64_t t = tg[n];
    if (t == ignore || t < 0 || t >= nc) {
        if (threadIdx.x == 0) rowloss[n] = 0.0;
        if (g)
            for (int64_t j = threadIdx.x; j < V; j += blockDim.x) trn_st(g + j, 0.0f);
        return;
    }
    float lt = trn_f32(lg[t]);
    if constexpr (NV > 0) {
        /* column indices in 32 bits (a row of V < 2^31): at 1024 threads a
         * thread has 64 registers, and 4 NV of them hold the row */
        constexpr int VW = 16 / (int)sizeof(L);
        const int nvec = (int)(V / VW), ncls = (int)nc, tt = (int)t, tid = (int)threadIdx.x;
        uint4 r[NV];
#pragma unroll
        for (int k = 0; k < NV; k++) {
            int q = k * NT + tid;
            r[k] = q < nvec ? *(const uint4 *)TRN_ALIGNED(lg + q * VW, 16) : make_uint4(0u, 0u, 0u, 0u);
        }
        float m = -TRN_INF;
#pragma unroll
        for (int k = 0; k < NV; k++)
#pragma unroll
            for (int e = 0; e < VW; e++)
                if ((k * NT + tid) * VW + e < ncls) m = fmaxf(m, trn_vec_elem<L>(r[k], e));
        /* exp in base 2, as the attention kernels: exp(v - mx) = exp2((v -
         * mx) log2 e), a subtraction, a multiply and an ex2 where expf
         * takes about fifteen instructions: this loop and g's are most of
         * the kernel's issue slots.  (As a multiply-add, v log2 e - mx
         * log2 e, ptxas spilled this loop at 64 registers.) */
        const float mx = trn_block_max(m);
        float s = 0.0f; /* at most NV * VW terms of at most 1 */
#pragma unroll
        for (int k = 0; k < NV; k++)
#pragma unroll
            for (int e = 0; e < VW; e++)
                if ((k * NT + tid) * VW + e < ncls) s += exp2f((trn_vec_elem<L>(r[k], e) - mx) * TRN_LOG2E);
        const double l = (double)mx + log(trn_block_sum((double)s));
        if (tid == 0) rowloss[n] = l - (double)lt;
        if (!g) return;
        const float lf = (float)l;
#pragma unroll
        for (int k = 0; k < NV; k++) {
            int q = k * NT + tid;
            if (q >= nvec) continue;
            float d[VW];
#pragma unroll
            for (int e = 0; e < VW; e++) {
                int c = q * VW + e;
                d[e] = c < ncls ? exp2f((trn_vec_elem<L>(r[k], e) - lf) * TRN_LOG2E) - (c == tt ? 1.0f : 0.0f) : 0.0f;
            }
            trn_stv<VW>(g + q * VW, d);
        }
    } else {
        float m = -TRN_INF;
        double s = 0;
        for (int64_t j = threadIdx.x; j < nc; j += blockDim.x) {
            float v = trn_f32(lg[j]);
            if (v > m) {
                s = s * (double)expf(m - v) + 1.0;
                m = v;
            } else {
                s += (double)expf(v - m);
            }
        }
        float mx = trn_block_max(m);
        s = trn_block_sum(m == -TRN_INF ? 0.0 : s * (double)expf(m - mx));
        double l = (double)mx + log(s);
        if (threadIdx.x == 0) rowloss[n] = l - (double)lt;
        if (!g) return;
        for (int64_t j = threadIdx.x; j < V; j += blockDim.x)
            trn_st(g + j, j < nc ? (float)((double)expf((float)((double)trn_f32(lg[j]) - l)) - (j == t ? 1.0 : 0.0)) : 0.0f);
    }
}

/* ---- optimizer ---- */

/* The partials of gridDim.x blocks (scratch, doubles) -> out = sqrt(sum); one block. */
TRN_DEV void tk_norm_final(float *__restrict__ out, const double *__restrict__ part, int nparts) {
    double s = 0;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) s += part[i];
    s = trn_block_sum(s);
    if (threadIdx.x == 0) *out = (float)sqrt(s);
}

/* Element i of AdamW (tk_adamw, tk_adamw_multi): double, as the C
 * backend; w, m, v may alias wo, mo, vo.  skip: an fp16 overflow, every
 * result equals its operand.  h (null: none): the new weight in half
 * precision, when the update absorbed the cast that makes mixed
 * precision's copy (lower.c), rounded once from the f32 result as the cast
 * rounds it.  gz (null: none) is g, a gradient accumulator, zeroed once
 * read, when the update absorbed the accumulator's reset.  bc1, bc2: the
 * bias corrections 1 - b1^step, 1 - b2^step. */
template <typename H>
TRN_DEV void trn_adamw_at(int64_t i, float *wo, float *mo, float *vo, const float *w, const float *g, const float *m, const float *v,
                          double lr, double gscale, double bc1, double bc2, double b1, double b2, double eps, double wd, bool skip,
                          H *__restrict__ h, float *gz) {
    if (skip) {
        float w0 = w[i];
        wo[i] = w0, mo[i] = m[i], vo[i] = v[i];
        if (h) trn_st(h + i, w0);
        if (gz) gz[i] = 0.0f;
        return;
    }
    double gi = (double)g[i] * gscale;
    double mi = b1 * (double)m[i] + (1.0 - b1) * gi;
    double vi = b2 * (double)v[i] + (1.0 - b2) * gi * gi;
    double wi = (double)w[i];
    wi = wi - lr * ((mi / bc1) / (sqrt(vi / bc2) + eps) + wd * wi);
    float w1 = (float)wi;
    wo[i] = w1;
    mo[i] = (float)mi;
    vo[i] = (float)vi;
    if (h) trn_st(h + i, w1);
    if (gz) gz[i] = 0.0f;
}

/* The bias corrections once a block, not once an element: a double pow is
 * a few hundred instructions, more than the element's own work.  Every
 * thread of the block calls it. */
TRN_DEV void trn_adamw_bc(const int32_t *__restrict__ stepp, double b1, double b2, double *bc1, double *bc2) {
    __shared__ double bc[2];
    if (threadIdx.x == 0) {
        double step = (double)*stepp;
        bc[0] = 1.0 - pow(b1, step), bc[1] = 1.0 - pow(b2, step);
    }
    __syncthreads();
    *bc1 = bc[0], *bc2 = bc[1];
}

/* AdamW on n elements, in place (w, m, v may alias the outputs), one a
 * thread; skip (null: none) != 0: an fp16 overflow; h, gz: trn_adamw_at. */
template <typename H>
TRN_DEV void tk_adamw(float *wo, float *mo, float *vo, const float *w, const float *g, const float *m, const float *v,
                      int64_t n, const float *__restrict__ lrp, const int32_t *__restrict__ stepp, const float *__restrict__ gsp,
                      double b1, double b2, double eps, double wd, const float *__restrict__ skip, H *__restrict__ h, float *gz) {
    double bc1, bc2;
    trn_adamw_bc(stepp, b1, b2, &bc1, &bc2);
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    trn_adamw_at(i, wo, mo, vo, w, g, m, v, (double)*lrp, (double)*gsp, bc1, bc2, b1, b2, eps, wd, skip && *skip != 0.0f, h, gz);
}

/* Element i of SGD with momentum (and Nesterov): tk_sgd, tk_sgd_multi; buf
 * and bo null without momentum; skip, h, gz as trn_adamw_at's. */
template <typename H>
TRN_DEV void trn_sgd_at(int64_t i, float *wo, float *bo, const float *w, const float *g, const float *buf, double lr, double gscale,
                        double momentum, double wd, int nesterov, bool skip, H *__restrict__ h, float *gz) {
    if (skip) {
        float w0 = w[i];
        wo[i] = w0;
        if (bo) bo[i] = buf[i];
        if (h) trn_st(h + i, w0);
        if (gz) gz[i] = 0.0f;
        return;
    }
    double wi = (double)w[i], gi = (double)g[i] * gscale + wd * wi, upd = gi, bi = buf ? (double)buf[i] : 0.0;
    if (momentum != 0.0) {
        bi = momentum * bi + gi;
        upd = nesterov ? gi + momentum * bi : bi;
    }
    float w1 = (float)(wi - lr * upd);
    wo[i] = w1;
    if (bo) bo[i] = (float)bi;
    if (h) trn_st(h + i, w1);
    if (gz) gz[i] = 0.0f;
}

/* SGD on n elements, in place, one a thread; h and gz as adamw's. */
template <typename H>
TRN_DEV void tk_sgd(float *wo, float *bo, const float *w, const float *g, const float *buf, int64_t n,
                    const float *__restrict__ lrp, const float *__restrict__ gsp, double momentum, double wd, int nesterov,
                    const float *__restrict__ skip, H *__restrict__ h, float *gz) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    trn_sgd_at(i, wo, bo, w, g, buf, (double)*lrp, (double)*gsp, momentum, wd, nesterov, skip && *skip != 0.0f, h, gz);
}

/* One tensor of a multi-tensor update (lower.c merge_updates), a row of
 * the table the generated kernel holds: where its blocks begin, its size,
 * and its buffers as byte offsets in the arena (-1: none).  A run of
 * accumulating adds (tk_add_multi) has the sum in w and its operands in g
 * and m. */
typedef struct TrnOptSeg {
    long long blk;              /* its first block */
    long long n;                /* elements */
    long long w, g, m, v, h;    /* weight, gradient, first and second state (SGD: its buffer, no v), half copy */
    int       zero_g;           /* g is an accumulator, zeroed once read */
    double    wd;               /* its weight decay */
} TrnOptSeg;

/* The row of block b: the last whose first block is not after it. */
TRN_DEV const TrnOptSeg *trn_opt_seg_at(const TrnOptSeg *__restrict__ t, int ns, long long b) {
    int lo = 0, hi = ns - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (t[mid].blk <= b) lo = mid;
        else hi = mid - 1;
    }
    return t + lo;
}

/* The row of this block; every thread of a block finds the same one. */
TRN_DEV const TrnOptSeg *trn_opt_seg(const TrnOptSeg *__restrict__ t, int ns) { return trn_opt_seg_at(t, ns, blockIdx.x); }

/* The pointer at arena offset off, or null for -1. */
template <typename T>
TRN_DEV T *trn_opt_ptr(unsigned char *A, long long off) { return off < 0 ? (T *)0 : (T *)(A + off); }

/* The elements of this block's tensor (tk_adamw_multi, tk_sgd_multi): a
 * block does E elements a thread of one tensor (E * blockDim.x, the last
 * block of a tensor fewer), f(i, w, g, m, v, h, gz, wd) for each. */
template <typename H, int E, typename F>
TRN_DEV void trn_opt_multi(unsigned char *A, const TrnOptSeg *__restrict__ t, int ns, F f) {
    const TrnOptSeg *s = trn_opt_seg(t, ns);
    float *w = trn_opt_ptr<float>(A, s->w), *g = trn_opt_ptr<float>(A, s->g), *m = trn_opt_ptr<float>(A, s->m),
          *v = trn_opt_ptr<float>(A, s->v);
    H *h = trn_opt_ptr<H>(A, s->h);
    float *gz = s->zero_g ? g : (float *)0;
    int64_t n = s->n, i0 = ((long long)blockIdx.x - s->blk) * E * (int64_t)blockDim.x + threadIdx.x;
#pragma unroll
    for (int e = 0; e < E; e++) {
        int64_t i = i0 + (int64_t)e * blockDim.x;
        if (i < n) f(i, w, g, m, v, h, gz, s->wd);
    }
}

/* AdamW over the ns tensors of table t, in place, in one launch; each
 * element what tk_adamw does to it. */
template <typename H, int E>
TRN_DEV void tk_adamw_multi(unsigned char *A, const TrnOptSeg *__restrict__ t, int ns, const float *__restrict__ lrp,
                            const int32_t *__restrict__ stepp, const float *__restrict__ gsp, double b1, double b2, double eps,
                            const float *__restrict__ skip) {
    double bc1, bc2;
    trn_adamw_bc(stepp, b1, b2, &bc1, &bc2);
    double lr = *lrp, gscale = *gsp;
    bool sk = skip && *skip != 0.0f;
    trn_opt_multi<H, E>(A, t, ns, [&](int64_t i, float *w, float *g, float *m, float *v, H *h, float *gz, double wd) {
        trn_adamw_at(i, w, m, v, w, g, m, v, lr, gscale, bc1, bc2, b1, b2, eps, wd, sk, h, gz);
    });
}

/* SGD over the ns tensors of table t (m: the momentum buffer), as
 * tk_adamw_multi. */
template <typename H, int E>
TRN_DEV void tk_sgd_multi(unsigned char *A, const TrnOptSeg *__restrict__ t, int ns, const float *__restrict__ lrp,
                          const float *__restrict__ gsp, double momentum, int nesterov, const float *__restrict__ skip) {
    double lr = *lrp, gscale = *gsp;
    bool sk = skip && *skip != 0.0f;
    trn_opt_multi<H, E>(A, t, ns, [&](int64_t i, float *w, float *g, float *m, float *, H *h, float *gz, double wd) {
        trn_sgd_at(i, w, m, w, g, m, lr, gscale, momentum, wd, nesterov, sk, h, gz);
    });
}

/* The accumulating adds of a run (lower.c merge_updates: gradient
 * accumulation's, f32), in one launch: w = g + m, each element rounded
 * once, as the loop kernel of each would. */
template <int E>
TRN_DEV void tk_add_multi(unsigned char *A, const TrnOptSeg *__restrict__ t, int ns) {
    trn_opt_multi<float, E>(A, t, ns, [&](int64_t i, float *w, float *g, float *m, float *, float *, float *, double) {
        w[i] = __fadd_rn(g[i], m[i]);
    });
}

/* global_norm's partial sums of squares (double), one a block into
 * part[blockIdx.x]: the nb blocks of the ns tensors of table t (the g
 * column, f32; E * blockDim.x elements of one tensor a block), block b
 * of them by launched block b % gridDim.x, in order.  The launch is at
 * most 1024 blocks (tk_norm_final adds the partials), the source one
 * loop whatever the number of tensors. */
template <int E>
TRN_DEV void tk_sumsq_multi(const unsigned char *A, const TrnOptSeg *__restrict__ t, int ns, long long nb, double *__restrict__ part) {
    double s = 0;
    const TrnOptSeg *r = trn_opt_seg_at(t, ns, blockIdx.x), *end = t + ns;
    for (long long b = blockIdx.x; b < nb; b += gridDim.x) {
        while (r + 1 < end && r[1].blk <= b) r++; /* b only grows: the row from the last one on */
        const float *x = (const float *)(A + r->g);
        int64_t i0 = (b - r->blk) * E * (int64_t)blockDim.x + threadIdx.x;
#pragma unroll
        for (int e = 0; e < E; e++) {
            int64_t i = i0 + (int64_t)e * blockDim.x;
            if (i < r->n) s += (double)x[i] * (double)x[i];
        }
    }
    s = trn_block_sum(s);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

/* fp16 dynamic loss scaling (loss_scale_update), four f32 scalars; one
 * thread: an overflow (norm not finite) halves the scale and sets skip; a
 * clean step counts, and `window` of them double the scale (at most 2^40). */
TRN_DEV void tk_loss_scale_update(float *scale2, float *good2, float *skipped2, float *skip, const float *scale, const float *good,
                                  const float *skipped, const float *norm, int64_t window) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    double s = scale[0], gd = good[0], sk = skipped[0];
    float flag = 0.0f;
    if (isfinite(norm[0])) {
        gd += 1;
        if (gd >= (double)window) s = fmin(s * 2.0, 1099511627776.0), gd = 0;
    } else {
        s *= 0.5, gd = 0, sk += 1, flag = 1.0f;
    }
    scale2[0] = (float)s, good2[0] = (float)gd, skipped2[0] = (float)sk, skip[0] = flag;
}

/* Parameter initialisation on the device (runtime/cuda.c, for the
 * session's initialisation): element k < n of out becomes
 * rng_init_value(kind, a, b, seed, stream, k) of philox.h rounded to f32,
 * the host's bits (every operation rounded on its own, in the host's
 * order).  p (device memory): n, kind ('n', 'u', 'c', 'o'), the bits of a
 * and b (f64), seed, stream.  A thread makes four elements (one Philox
 * block of normals).  Each module has it as trn_init_f32 (codegen). */
TRN_DEV void tk_init_f32(float *out, const unsigned long long *p) {
    long long n = (long long)p[0], blk = (long long)blockIdx.x * blockDim.x + threadIdx.x, k0 = blk * 4;
    int kind = (int)p[1];
    double a = __longlong_as_double((long long)p[2]), b = __longlong_as_double((long long)p[3]);
    if (k0 >= n) return;
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (kind == 'n') {
        float o[4];
        rng_normal4(p[4], p[5], (uint64_t)blk, o);
        for (int q = 0; q < 4; q++) v[q] = __double2float_rn(__dmul_rn(a, (double)o[q]));
    } else if (kind == 'u') {
        for (int q = 0; q < 4; q++)
            v[q] = __double2float_rn(__dadd_rn(a, __dmul_rn(__dsub_rn(b, a), rng_uniform(p[4], p[5], (uint64_t)(k0 + q)))));
    } else if (kind == 'c' || kind == 'o') {
        for (int q = 0; q < 4; q++) v[q] = kind == 'o' ? 1.0f : __double2float_rn(a);
    }
    for (int q = 0; q < 4 && k0 + q < n; q++) out[k0 + q] = v[q];
}

#endif /* TRAINC_CUDA_CUH */
