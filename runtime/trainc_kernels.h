/* runtime/trainc_kernels.h — the hand-written prelude of generated C code.
 *
 * Included by every C file trainc generates: dtype conversions (bf16/f16
 * emulated with round-to-nearest-even, exactly as the interpreter does),
 * the scalar functions of the pointwise ops, and the template kernels that
 * generic fusion cannot make fast (norms, softmax, attention, cross-entropy,
 * embedding, RoPE, optimizer updates, GEMM).  Generated code calls them with
 * compile-time constant sizes, so the C compiler specialises each call.
 *
 * Numerics follow the reference interpreter (docs/interpreter.md): values
 * are computed in double and rounded to their dtype after every op;
 * reductions accumulate in double.  Matrix products go through the BLAS in
 * the storage precision.  Shapes are written next to every argument.
 */
#ifndef TRAINC_KERNELS_H
#define TRAINC_KERNELS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "philox.h"

#ifdef TRN_HAVE_BLAS
#include <cblas.h>
#endif

#if defined(__GNUC__) || defined(__clang__)
#define TRN_INLINE static inline __attribute__((always_inline))
#else
#define TRN_INLINE static inline
#endif

/* The scratch memory of a template kernel (a few rows or one block; the
 * arena holds every tensor).  Kernels cannot return an error: out of
 * memory here ends the process with a message rather than a crash. */
static inline void *tk_scratch(void *p, size_t bytes) {
    if (!p) {
        fprintf(stderr, "trainc: out of memory in a kernel's scratch (%zu bytes)\n", bytes);
        abort();
    }
    return p;
}
static inline void *tk_alloc(size_t bytes) { return tk_scratch(malloc(bytes), bytes); }
/* n zeroed elements of size bytes each */
static inline void *tk_zalloc(size_t n, size_t size) { return tk_scratch(calloc(n, size), n * size); }

/* A generated kernel function.  GCC's noipa: its callers (the schedule's
 * run function) use nothing the optimiser learns from its body.  GCC 12.2
 * at -O1 and above rewrote the addresses of a kernel whose loop reads
 * transposed (A + off + 4 (i + 8 j)) as integer arithmetic on A, then took
 * the function for one without side effects and deleted its call: a
 * transposed operand never written, the loss flat (tests/e2e/fuzz/).
 * Clang has no noipa and no such deletion. */
#if defined(__GNUC__) && !defined(__clang__)
#define TRN_KERNEL static __attribute__((noipa))
#else
#define TRN_KERNEL static
#endif

/* ---- dtype conversions ---- */

TRN_INLINE float trn_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
TRN_INLINE uint32_t trn_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* f32 -> bf16 bits, round to nearest even; NaN stays NaN. */
TRN_INLINE uint16_t trn_f32_to_bf16(float f) {
    uint32_t u = trn_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
TRN_INLINE float trn_bf16_to_f32(uint16_t h) { return trn_bits_f32((uint32_t)h << 16); }

/* f32 -> f16 bits, round to nearest even, with subnormals and overflow to inf. */
TRN_INLINE uint16_t trn_f32_to_f16(float f) {
    uint32_t u = trn_f32_bits(f), sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);             /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);            /* >= 65520: inf */
    if (a < 0x38800000u) {                                               /* subnormal or zero */
        float v = trn_bits_f32(a) * 16777216.0f;                         /* scale by 2^24: exact */
        uint32_t m = (uint32_t)lrintf(v);                                /* RNE in the current mode */
        return (uint16_t)(sign | m);
    }
    uint32_t r = a + 0x0fffu + ((a >> 13) & 1u);                        /* RNE on 13 dropped bits */
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}
TRN_INLINE float trn_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        float v = (float)m * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    if (e == 31) return trn_bits_f32(sign | 0x7f800000u | (m << 13));
    return trn_bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

/* Rounding a double to a dtype's precision (per-op rounding), directly from
 * the double (rounding through f32 first could round twice): the nearest
 * number with p significand bits and normal exponents emin..emax, ties to
 * even, subnormals below 2^emin, infinity above the largest finite number.
 * The same function as the interpreter's; trn_round_format below is its
 * fast form. */
static inline double trn_round_format_ref(double x, int p, int emin, int emax) {
    if (isnan(x) || isinf(x) || x == 0) return x;
    double ax = fabs(x);
    int e;
    frexp(ax, &e);
    int E = e - 1 < emin ? emin : e - 1;
    double ulp = ldexp(1.0, E - (p - 1));
    double q = ax / ulp, fl = floor(q), frac = q - fl;
    if (frac > 0.5 || (frac == 0.5 && fmod(fl, 2.0) != 0)) fl += 1;
    double r = fl * ulp;
    if (r > ldexp(2.0 - ldexp(1.0, 1 - p), emax)) r = INFINITY;
    return copysign(r, x);
}

/* trn_round_format_ref, bit for bit, on the double's bits where x's
 * exponent is one of the format's normal exponents (nearly every value a
 * kernel stores): the 53 - p low bits of the significand are rounded off,
 * ties to even, a carry moving into the exponent; a result past emax is
 * infinity.  Zeros, subnormals of the format, infinities and NaN take the
 * reference path.  Half of a bf16 step's time went to frexp and ldexp. */
TRN_INLINE double trn_round_format(double x, int p, int emin, int emax) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    uint64_t a = u & 0x7fffffffffffffffull;
    int e = (int)(a >> 52) - 1023, s = 53 - p;
    if (e < emin || e > emax) return trn_round_format_ref(x, p, emin, emax);
    a = (a + (1ull << (s - 1)) - 1 + ((a >> s) & 1)) & ~((1ull << s) - 1);
    if ((int)(a >> 52) - 1023 > emax) a = 0x7ff0000000000000ull;
    a |= u & 0x8000000000000000ull;
    memcpy(&x, &a, sizeof x);
    return x;
}
TRN_INLINE double trn_r_f32(double x) { return (double)(float)x; }
TRN_INLINE double trn_r_bf16(double x) { return trn_round_format(x, 8, -126, 127); }
TRN_INLINE double trn_r_f16(double x) { return trn_round_format(x, 11, -14, 15); }

/* ---- element access by dtype (TrnDType codes: 0 f32, 1 f64, 2 bf16, 3 f16) ----
 * For templates that mixed precision feeds half-precision tensors: loads
 * widen exactly; stores round from double straight to the dtype (no double
 * rounding through f32), as the interpreter does.  Called with a constant
 * dt from an always-inlined body, the switch folds away. */

TRN_INLINE double tk_ld(const void *p, int dt, int64_t i) {
    switch (dt) {
    case 0: return (double)((const float *)p)[i];
    case 1: return ((const double *)p)[i];
    case 2: return (double)trn_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return (double)trn_f16_to_f32(((const uint16_t *)p)[i]);
    }
}

TRN_INLINE void tk_st(void *p, int dt, int64_t i, double v) {
    switch (dt) {
    case 0: ((float *)p)[i] = (float)v; break;
    case 1: ((double *)p)[i] = v; break;
    case 2: ((uint16_t *)p)[i] = trn_f32_to_bf16((float)trn_r_bf16(v)); break;
    default: ((uint16_t *)p)[i] = trn_f32_to_f16((float)trn_r_f16(v)); break;
    }
}

/* A float loaded from and stored to dtype dt: f32, or a half value
 * widened exactly; stored, a float is exact in double and rounds once to
 * a half dtype, so rounding its bits stores what tk_st stores for
 * (double)v (test_mathf checks it for every 61st float). */
TRN_INLINE float tk_ld_f(const void *p, int dt, int64_t i) {
    switch (dt) {
    case 0: return ((const float *)p)[i];
    case 2: return trn_bf16_to_f32(((const uint16_t *)p)[i]);
    case 3: return trn_f16_to_f32(((const uint16_t *)p)[i]);
    default: return (float)((const double *)p)[i];
    }
}

TRN_INLINE void tk_st_y(void *p, int dt, int64_t i, float v) {
    switch (dt) {
    case 0: ((float *)p)[i] = v; break;
    case 2: ((uint16_t *)p)[i] = trn_f32_to_bf16(v); break;
    case 3: ((uint16_t *)p)[i] = trn_f32_to_f16(v); break;
    default: ((double *)p)[i] = (double)v; break;
    }
}

/* x rounded to dt's precision, kept in a double (the interpreter's
 * round_to): what a value stored in dt holds. */
TRN_INLINE double tk_round(int dt, double x) {
    switch (dt) {
    case 0: return (double)(float)x;
    case 1: return x;
    case 2: return trn_r_bf16(x);
    default: return trn_r_f16(x);
    }
}

/* ---- scalar functions of pointwise ops (double, as the interpreter) ---- */

TRN_INLINE double trn_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
TRN_INLINE double trn_silu(double x) { return x / (1.0 + exp(-x)); }
/* clip_coef: min(1, c), a NaN (the norm of a NaN gradient) kept, as
 * PyTorch's clip_grad_norm_ scales every gradient by it */
TRN_INLINE double trn_clip_coef(double c) { return c < 1.0 || c != c ? c : 1.0; }
TRN_INLINE double trn_gelu(double x, int approx) {
    if (approx) return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1.0 + erf(x * 0.7071067811865476));
}
TRN_INLINE double trn_gelu_grad(double dy, double x, int approx) {
    if (approx) {
        double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), t = tanh(u);
        double du = 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
        return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du);
    }
    double cdf = 0.5 * (1.0 + erf(x * 0.7071067811865476));
    double pdf = exp(-0.5 * x * x) * 0.3989422804014327;
    return dy * (cdf + x * pdf);
}
TRN_INLINE double trn_silu_grad(double dy, double x) {
    double s = 1.0 / (1.0 + exp(-x));
    return dy * s * (1.0 + x * (1.0 - s));
}
TRN_INLINE double trn_sign(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }
/* Integer arithmetic as the interpreter defines it (docs/interpreter.md):
 * two's complement, wrapping (computed in 64 bits without C's undefined
 * overflow; the store to i32 or u8 wraps again); a division by zero is 0
 * (the interpreter stops with an error there; nothing traps here), and
 * INT64_MIN / -1 wraps.  A float cast to an integer dtype truncates
 * toward zero and saturates at [lo, hi], NaN giving 0. */
TRN_INLINE int64_t trn_iadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
TRN_INLINE int64_t trn_isub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
TRN_INLINE int64_t trn_imul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
TRN_INLINE int64_t trn_ineg(int64_t a) { return (int64_t)(0 - (uint64_t)a); }
TRN_INLINE int64_t trn_iabs(int64_t a) { return a < 0 ? trn_ineg(a) : a; }
TRN_INLINE int64_t trn_idiv(int64_t a, int64_t b) { return b == 0 ? 0 : b == -1 ? trn_ineg(a) : a / b; }
TRN_INLINE int64_t trn_f2i(double x, int64_t lo, int64_t hi) {
    return x != x ? 0 : x <= (double)lo ? lo : x >= (double)hi ? hi : (int64_t)x;
}
/* maximum and minimum as the interpreter (and PyTorch) take them: NaN if
 * either is NaN (fmax and fmin would return the other) */
TRN_INLINE double trn_fmax(double a, double b) { return a != a || b != b ? a + b : a > b ? a : b; }
TRN_INLINE double trn_fmin(double a, double b) { return a != a || b != b ? a + b : a < b ? a : b; }

/* e^x in float, inline and without a call into libm, so that a loop of
 * them vectorises (generated C is compiled with -fno-trapping-math, which
 * lets the selects below become vector blends).  x = n ln2 + r with
 * |r| <= ln2/2 (Cody and Waite's two-part ln2), e^r by Cephes' degree-7
 * polynomial, 2^n put into the exponent bits in two steps where 2^n alone
 * would not be a normal float.  Checked on every float in [-110, 90]
 * against exp in double: under 1 ulp (faithfully rounded), subnormal
 * results included; 0 below about -103.97, inf above about 88.72, NaN for
 * NaN (tests/runtime/test_mathf.c). */
TRN_INLINE float trn_expf(float x) {
    float xc = x < 89.0f ? x : 89.0f; /* NaN: 89, its result replaced below */
    xc = xc > -104.0f ? xc : -104.0f;
    /* n = round(x / ln2): x / ln2 + 150.5 > 0 truncated is its floor (no
     * (a + c) - c, which -ffast-math, --copt=-Ofast, would fold away) */
    int32_t ni = (int32_t)(xc * 1.44269504088896341f + 150.5f) - 150;
    float n = (float)ni;
    float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t hi = ni > 127, lo = ni < -126; /* n in [-150, 129] */
    int32_t bits = (ni - hi + 64 * lo + 127) << 23;
    float s;
    memcpy(&s, &bits, sizeof s);
    float y = p * s;
    y = hi ? y * 2.0f : y;
    y = lo ? y * 0x1p-64f : y; /* one rounding, into the subnormals */
    return x != x ? x : y;
}

/* Float versions, for values stored in f32 or narrower: the transcendental
 * functions are evaluated in float (trn_expf, tanhf, erff), which is several
 * times faster than double and differs from the interpreter's double
 * evaluation by at most about an ulp of the f32 result. */
TRN_INLINE float trn_sigmoidf(float x) { return 1.0f / (1.0f + trn_expf(-x)); }
/* tanh through one exp: glibc's tanhf goes through expm1f and costs several
 * times more.  Absolute error a few 1e-8; exact limits for large |x|
 * (e^2x is inf or 0 there). */
TRN_INLINE float trn_tanhf(float x) { return 1.0f - 2.0f / (trn_expf(2.0f * x) + 1.0f); }
TRN_INLINE float trn_siluf(float x) { return x / (1.0f + trn_expf(-x)); }
TRN_INLINE float trn_geluf(float x, int approx) {
    if (approx) return 0.5f * x * (1.0f + trn_tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
}
TRN_INLINE float trn_gelu_gradf(float dy, float x, int approx) {
    if (approx) {
        float u = 0.7978845608028654f * (x + 0.044715f * x * x * x), t = trn_tanhf(u);
        float du = 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
        return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
    }
    float cdf = 0.5f * (1.0f + erff(x * 0.7071067811865476f));
    float pdf = trn_expf(-0.5f * x * x) * 0.3989422804014327f;
    return dy * (cdf + x * pdf);
}
TRN_INLINE float trn_silu_gradf(float dy, float x) {
    float s = 1.0f / (1.0f + trn_expf(-x));
    return dy * s * (1.0f + x * (1.0f - s));
}

/* ---- GEMM: C[M,N] (+)= op(A)[M,K] op(B)[K,N], row-major with leading dims ---- */

static inline void tk_gemm_f32(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                               const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
#ifdef TRN_HAVE_BLAS
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, 1.0f,
                A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
#else
#pragma omp parallel for schedule(static) if (M * N * K > 65536)
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++)
                acc += (double)(ta ? A[k * lda + i] : A[i * lda + k]) * (double)(tb ? B[j * ldb + k] : B[k * ldb + j]);
            C[i * ldc + j] = beta != 0.0f ? (float)acc + C[i * ldc + j] : (float)acc; /* the product rounded, then the sum: as an add after it */
        }
#endif
}

static inline void tk_gemm_f64(int ta, int tb, int64_t M, int64_t N, int64_t K, const double *A, int64_t lda,
                               const double *B, int64_t ldb, double beta, double *C, int64_t ldc) {
#ifdef TRN_HAVE_BLAS
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, 1.0,
                A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
#else
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++) acc += (ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
            C[i * ldc + j] = beta != 0.0 ? acc + C[i * ldc + j] : acc;
        }
#endif
}

/* Half-precision GEMM (bf16 dt 2, f16 dt 3), emulated: the operands are
 * widened exactly to double, multiplied and summed in double, and each
 * result rounded once to cdt (dt, or 0: f32 for matmul {dtype=f32}), as
 * the interpreter computes a matmul; beta 1: C's value is added to that
 * rounded result and the sum rounded again, as the add the GEMM absorbed
 * (a gradient's accumulator, another product's sum) rounds it: fusing it
 * changes no bit.  The operands are widened a tile at a time (TK_GEMM_DT_MB
 * rows of A by TK_GEMM_DT_KB of its columns, those by TK_GEMM_DT_NB columns
 * of B) and C's sums kept for MB by NB elements, so that the scratch is at
 * most 28 MB whatever the product's size (the whole of A, B and C as
 * doubles would be 0.4 GB for GPT-2 small's head at 1024 rows); a sum over
 * more than KB terms is the tiles' sums added in order. */
enum { TK_GEMM_DT_MB = 512, TK_GEMM_DT_NB = 1024, TK_GEMM_DT_KB = 2048 };
static inline void tk_gemm_dt(int dt, int cdt, int ta, int tb, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda, const void *B,
                              int64_t ldb, int beta, void *C, int64_t ldc) {
    int64_t mb = M < TK_GEMM_DT_MB ? M : TK_GEMM_DT_MB, nb = N < TK_GEMM_DT_NB ? N : TK_GEMM_DT_NB, kb = K < TK_GEMM_DT_KB ? K : TK_GEMM_DT_KB;
    double *a = (double *)tk_alloc(sizeof(double) * (size_t)(mb * kb + 1)), *b = (double *)tk_alloc(sizeof(double) * (size_t)(kb * nb + 1));
    double *c = (double *)tk_alloc(sizeof(double) * (size_t)(mb * nb + 1));
    for (int64_t j0 = 0; j0 < N; j0 += nb) {
        int64_t nj = N - j0 < nb ? N - j0 : nb;
        for (int64_t i0 = 0; i0 < M; i0 += mb) {
            int64_t mi = M - i0 < mb ? M - i0 : mb;
            if (K == 0) memset(c, 0, sizeof(double) * (size_t)(mi * nj));
            for (int64_t k0 = 0; k0 < K; k0 += kb) {
                int64_t kk = K - k0 < kb ? K - k0 : kb;
                for (int64_t i = 0; i < mi; i++)
                    for (int64_t k = 0; k < kk; k++) a[i * kk + k] = tk_ld(A, dt, ta ? (k0 + k) * lda + i0 + i : (i0 + i) * lda + k0 + k);
                for (int64_t k = 0; k < kk; k++)
                    for (int64_t j = 0; j < nj; j++) b[k * nj + j] = tk_ld(B, dt, tb ? (j0 + j) * ldb + k0 + k : (k0 + k) * ldb + j0 + j);
#ifdef TRN_HAVE_BLAS
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)mi, (int)nj, (int)kk, 1.0, a, (int)kk, b, (int)nj, k0 ? 1.0 : 0.0, c,
                            (int)nj);
#else
#pragma omp parallel for schedule(static) if (mi * nj * kk > 65536)
                for (int64_t i = 0; i < mi; i++)
                    for (int64_t j = 0; j < nj; j++) { /* each sum over k in order, across the tiles */
                        double acc = k0 ? c[i * nj + j] : 0.0;
                        for (int64_t k = 0; k < kk; k++) acc += a[i * kk + k] * b[k * nj + j];
                        c[i * nj + j] = acc;
                    }
#endif
            }
            for (int64_t i = 0; i < mi; i++)
                for (int64_t j = 0; j < nj; j++) {
                    int64_t e = (i0 + i) * ldc + j0 + j;
                    double old = beta ? tk_ld(C, cdt, e) : 0.0;
                    tk_st(C, cdt, e, c[i * nj + j]);
                    if (beta) tk_st(C, cdt, e, tk_ld(C, cdt, e) + old);
                }
        }
    }
    free(a);
    free(b);
    free(c);
}

/* The bias epilogue of a half-precision GEMM: C = round(C + bias) per
 * element (the interpreter's separate add). */
static inline void tk_bias_add_dt(void *C, int64_t M, int64_t N, int64_t ldc, const void *bias /* [N] */, int dt) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) tk_st(C, dt, i * ldc + j, tk_ld(C, dt, i * ldc + j) + tk_ld(bias, dt, j));
}

/* Copies a bias row into every row of C (the bias epilogue: then beta = 1). */
static inline void tk_bias_rows_f32(float *C, int64_t M, int64_t N, int64_t ldc, const float *bias /* [N] */) {
    for (int64_t i = 0; i < M; i++) memcpy(C + i * ldc, bias, sizeof(float) * (size_t)N);
}

/* A product's GELU epilogues (tanh form), computed as the loop kernels
 * compute gelu and gelu_grad: y = gelu(x) (y may be x), and in place
 * c = gelu_grad(c, x).  n elements of dtype dt (0 f32, 2 bf16, 3 f16).
 * The loops differ only in dt: a constant in the f32 and bf16 loops, so
 * they vectorise (f16's rounding branches on subnormals: a plain loop). */
static inline void tk_gelu_dt(void *y, const void *x, int64_t n, int dt) {
    if (dt == 0) {
#pragma omp parallel for simd schedule(static) if (parallel : n > 32768)
        for (int64_t i = 0; i < n; i++) tk_st_y(y, 0, i, trn_geluf(tk_ld_f(x, 0, i), 1));
    } else if (dt == 2) {
#pragma omp parallel for simd schedule(static) if (parallel : n > 32768)
        for (int64_t i = 0; i < n; i++) tk_st_y(y, 2, i, trn_geluf(tk_ld_f(x, 2, i), 1));
    } else {
#pragma omp parallel for schedule(static) if (n > 32768)
        for (int64_t i = 0; i < n; i++) tk_st_y(y, dt, i, trn_geluf(tk_ld_f(x, dt, i), 1));
    }
}
static inline void tk_dgelu_dt(void *c, const void *x, int64_t n, int dt) {
    if (dt == 0) {
#pragma omp parallel for simd schedule(static) if (parallel : n > 32768)
        for (int64_t i = 0; i < n; i++) tk_st_y(c, 0, i, trn_gelu_gradf(tk_ld_f(c, 0, i), tk_ld_f(x, 0, i), 1));
    } else if (dt == 2) {
#pragma omp parallel for simd schedule(static) if (parallel : n > 32768)
        for (int64_t i = 0; i < n; i++) tk_st_y(c, 2, i, trn_gelu_gradf(tk_ld_f(c, 2, i), tk_ld_f(x, 2, i), 1));
    } else {
#pragma omp parallel for schedule(static) if (n > 32768)
        for (int64_t i = 0; i < n; i++) tk_st_y(c, dt, i, trn_gelu_gradf(tk_ld_f(c, dt, i), tk_ld_f(x, dt, i), 1));
    }
}

/* A product's bias-gradient epilogue: out[j] = sum over rows k < K of
 * x[k * ld + j], j < L, as a loop kernel's sum computes it (in double,
 * rows in order, one rounding to f32).  x of dtype dt (0 f32, 2 bf16,
 * 3 f16). */
static inline void tk_colsum_dt(float *out, const void *x, int64_t K, int64_t L, int64_t ld, int dt) {
#pragma omp parallel for schedule(static) if (K * L > 65536)
    for (int64_t cb = 0; cb < L; cb += 64) {
        const int64_t ce = cb + 64 < L ? cb + 64 : L;
        double acc[64];
        for (int64_t j = 0; j < ce - cb; j++) acc[j] = 0;
        if (dt == 0) {
            const float *xf = (const float *)x;
            for (int64_t k = 0; k < K; k++)
                for (int64_t j = cb; j < ce; j++) acc[j - cb] += (double)xf[k * ld + j];
        } else {
            for (int64_t k = 0; k < K; k++)
                for (int64_t j = cb; j < ce; j++) acc[j - cb] += tk_ld(x, dt, k * ld + j);
        }
        for (int64_t j = cb; j < ce; j++) out[j] = (float)acc[j - cb];
    }
}

/* ---- embedding ---- */

/* out [N,C] = table [V,C] rows idx [N]; an index outside [0,V) gives a zero row
 * (the runtime checks token ranges before feeding). */
static inline void tk_embedding_f32(float *out, const float *table, const int32_t *idx, int64_t N, int64_t C, int64_t V) {
#pragma omp parallel for schedule(static) if (N * C > 65536)
    for (int64_t n = 0; n < N; n++) {
        int64_t r = idx[n];
        if (r < 0 || r >= V) memset(out + n * C, 0, sizeof(float) * (size_t)C);
        else memcpy(out + n * C, table + r * C, sizeof(float) * (size_t)C);
    }
}

/* dtable [V,C] = scatter-add of dy [N,C] rows at idx [N].  Parallel over
 * column blocks so no two threads write one element; rows are added in
 * order, so the result does not depend on the thread count.  acc: dtable
 * holds what the sum is added to (lower.c, lower_embedding_grad): each
 * row some index names gets its sum, from zero in token order, added
 * once; the others are left as they are.  The rows are sorted first (a
 * stable counting sort into scratch [V + 2 + N], int32, of the memory
 * plan). */
static inline void tk_embedding_bwd_f32(float *dtable, const float *dy, const int32_t *idx, int64_t N, int64_t C, int64_t V, int acc,
                                        int32_t *scratch) {
    if (!acc) {
        memset(dtable, 0, sizeof(float) * (size_t)(V * C));
        int64_t nb = (C + 63) / 64;
#pragma omp parallel for schedule(static) if (N * C > 65536)
        for (int64_t cb = 0; cb < nb; cb++) {
            int64_t c0 = cb * 64, c1 = c0 + 64 < C ? c0 + 64 : C;
            for (int64_t n = 0; n < N; n++) {
                int64_t r = idx[n];
                if (r < 0 || r >= V) continue;
                for (int64_t c = c0; c < c1; c++) dtable[r * C + c] = (float)((double)dtable[r * C + c] + (double)dy[n * C + c]);
            }
        }
        return;
    }
    /* start[v] .. start[v + 1] - 1: row v's tokens in pos, in order */
    int32_t *start = scratch, *pos = scratch + V + 2;
    memset(start, 0, sizeof(int32_t) * (size_t)(V + 2));
    for (int64_t n = 0; n < N; n++)
        if (idx[n] >= 0 && idx[n] < V) start[idx[n] + 2]++;
    for (int64_t v = 0; v < V; v++) start[v + 2] += start[v + 1];
    for (int64_t n = 0; n < N; n++)
        if (idx[n] >= 0 && idx[n] < V) pos[start[idx[n] + 1]++] = (int32_t)n;
    /* a row's sums 256 columns at a time, over its tokens' rows of dy */
#pragma omp parallel for schedule(dynamic, 64) if (N * C > 65536)
    for (int64_t v = 0; v < V; v++) {
        if (start[v] == start[v + 1]) continue;
        for (int64_t c0 = 0; c0 < C; c0 += 256) {
            int64_t w = C - c0 < 256 ? C - c0 : 256;
            float s[256];
            for (int64_t c = 0; c < w; c++) s[c] = 0.0f;
            for (int64_t k = start[v]; k < start[v + 1]; k++) {
                const float *d = dy + (int64_t)pos[k] * C + c0;
                for (int64_t c = 0; c < w; c++) s[c] = (float)((double)s[c] + (double)d[c]);
            }
            float *o = dtable + v * C + c0;
            for (int64_t c = 0; c < w; c++) o[c] = (float)((double)o[c] + (double)s[c]);
        }
    }
}

/* ---- softmax over the middle axis of [outer, n, inner] ---- */

static inline void tk_softmax_f32(float *y, const float *x, int64_t outer, int64_t n, int64_t inner) {
#pragma omp parallel for collapse(2) schedule(static) if (outer * n * inner > 65536)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *xr = x + o * n * inner + i;
            float *yr = y + o * n * inner + i;
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < n; j++) mx = fmax(mx, (double)xr[j * inner]);
            for (int64_t j = 0; j < n; j++) sum += exp((double)xr[j * inner] - mx);
            for (int64_t j = 0; j < n; j++) yr[j * inner] = (float)(exp((double)xr[j * inner] - mx) / sum);
        }
}

/* dx = y (dy - sum(dy y)) */
static inline void tk_softmax_bwd_f32(float *dx, const float *dy, const float *y, int64_t outer, int64_t n, int64_t inner) {
#pragma omp parallel for collapse(2) schedule(static) if (outer * n * inner > 65536)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i;
            double dot = 0;
            for (int64_t j = 0; j < n; j++) dot += (double)dy[base + j * inner] * (double)y[base + j * inner];
            for (int64_t j = 0; j < n; j++) dx[base + j * inner] = (float)((double)y[base + j * inner] * ((double)dy[base + j * inner] - dot));
        }
}

/* ---- layer_norm over rows of [N,C] ----
 * The forward norms compute in f32 and double; their result y has dtype ydt
 * (tk_st's codes): f32, or bf16/f16 when the cast to half that was its only
 * reader is absorbed (lower.c): the f32 value rounded once more, as that
 * cast would (tk_st_y, above). */

/* An operand the norms take in any float dtype (the residual forms' x and
 * r, the backward's dy: a half value whose widening cast was absorbed),
 * widened exactly to f32 as it is loaded (tk_ld_f, above). */

static inline void tk_layernorm_f32(void *y, int ydt, float *mean, float *rstd, const float *x, const float *w, const float *b,
                                    int64_t N, int64_t C, double eps) {
#pragma omp parallel for schedule(static) if (N * C > 32768)
    for (int64_t n = 0; n < N; n++) {
        const float *xr = x + n * C;
        double m = 0, v = 0;
        for (int64_t c = 0; c < C; c++) m += xr[c];
        m /= (double)C;
        for (int64_t c = 0; c < C; c++) v += ((double)xr[c] - m) * ((double)xr[c] - m);
        v /= (double)C;
        double rs = 1.0 / sqrt(v + eps);
        for (int64_t c = 0; c < C; c++) tk_st_y(y, ydt, n * C + c, (float)(((double)xr[c] - m) * rs * (double)w[c] + (double)b[c]));
        mean[n] = (float)m;
        rstd[n] = (float)rs;
    }
}

/* The backward norms' results.  dx [N,C] f32, and its copy rounded to half
 * (dxh, dtype code dxhdt: the cast to half the products read, absorbed);
 * either may be NULL when nothing reads it.  dw, db [C]: with acc, added
 * to what they hold (a gradient accumulator: the add absorbed), rounded as
 * that add rounds. */
TRN_INLINE void tk_st_dx(float *dx, void *dxh, int dxhdt, int64_t i, double v) {
    float f = (float)v;
    if (dx) dx[i] = f;
    if (dxh) tk_st(dxh, dxhdt, i, (double)f);
}
TRN_INLINE void tk_st_dw(float *dw, int64_t c, double v, int acc) {
    dw[c] = acc ? (float)((double)dw[c] + (double)(float)v) : (float)v;
}

/* dx [N,C], dw [C], db [C] from dy, x, w, mean, rstd. */
static inline void tk_layernorm_bwd_f32(float *dx, void *dxh, int dxhdt, float *dw, float *db, int acc, const void *dy, int dydt,
                                        const float *x, const float *w, const float *mean, const float *rstd, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static) if (N * C > 32768)
    for (int64_t n = 0; n < N; n++) {
        const float *xr = x + n * C;
        double m = mean[n], rs = rstd[n], s1 = 0, s2 = 0;
        for (int64_t c = 0; c < C; c++) {
            double xh = ((double)xr[c] - m) * rs, g = (double)tk_ld_f(dy, dydt, n * C + c) * (double)w[c];
            s1 += g;
            s2 += g * xh;
        }
        s1 /= (double)C;
        s2 /= (double)C;
        for (int64_t c = 0; c < C; c++) {
            double xh = ((double)xr[c] - m) * rs, g = (double)tk_ld_f(dy, dydt, n * C + c) * (double)w[c];
            tk_st_dx(dx, dxh, dxhdt, n * C + c, rs * (g - s1 - xh * s2));
        }
    }
#pragma omp parallel for schedule(static) if (N * C > 32768)
    for (int64_t c = 0; c < C; c++) {
        double sw = 0, sb = 0;
        for (int64_t n = 0; n < N; n++) {
            double xh = ((double)x[n * C + c] - (double)mean[n]) * (double)rstd[n], d = tk_ld_f(dy, dydt, n * C + c);
            sw += d * xh;
            sb += d;
        }
        tk_st_dw(dw, c, sw, acc);
        tk_st_dw(db, c, sb, acc);
    }
}

/* ---- rms_norm over rows of [N,C] ---- */

static inline void tk_rmsnorm_f32(void *y, int ydt, float *rstd, const float *x, const float *w, int64_t N, int64_t C, double eps) {
#pragma omp parallel for schedule(static) if (N * C > 32768)
    for (int64_t n = 0; n < N; n++) {
        const float *xr = x + n * C;
        double ss = 0;
        for (int64_t c = 0; c < C; c++) ss += (double)xr[c] * (double)xr[c];
        double rs = 1.0 / sqrt(ss / (double)C + eps);
        for (int64_t c = 0; c < C; c++) tk_st_y(y, ydt, n * C + c, (float)((double)xr[c] * rs * (double)w[c]));
        rstd[n] = (float)rs;
    }
}

/* dx = rstd (dy w - xhat mean(dy w xhat)), xhat = x rstd; dw = sum_rows dy xhat. */
static inline void tk_rmsnorm_bwd_f32(float *dx, void *dxh, int dxhdt, float *dw, int acc, const void *dy, int dydt, const float *x,
                                      const float *w, const float *rstd, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static) if (N * C > 32768)
    for (int64_t n = 0; n < N; n++) {
        double rs = rstd[n], s = 0;
        for (int64_t c = 0; c < C; c++) s += (double)tk_ld_f(dy, dydt, n * C + c) * (double)w[c] * (double)x[n * C + c] * rs;
        s /= (double)C;
        for (int64_t c = 0; c < C; c++) {
            double xh = (double)x[n * C + c] * rs;
            tk_st_dx(dx, dxh, dxhdt, n * C + c, rs * ((double)tk_ld_f(dy, dydt, n * C + c) * (double)w[c] - xh * s));
        }
    }
#pragma omp parallel for schedule(static) if (N * C > 32768)
    for (int64_t c = 0; c < C; c++) {
        double sw = 0;
        for (int64_t n = 0; n < N; n++) sw += (double)tk_ld_f(dy, dydt, n * C + c) * (double)x[n * C + c] * (double)rstd[n];
        tk_st_dw(dw, c, sw, acc);
    }
}

/* ---- residual add + norm (add_layer_norm, add_rms_norm) over rows of [N,C] ----
 * s = x + r (rounded to f32: what the unfused add stores), then the norm of
 * s; mean == NULL (and b == NULL): rms_norm. */
static inline void tk_add_norm_f32(void *y, int ydt, float *s, float *mean, float *rstd, const void *x, int xdt, const void *r, int rdt,
                                   const float *w, const float *b, int64_t N, int64_t C, double eps) {
#pragma omp parallel for schedule(static) if (N * C > 32768)
    for (int64_t n = 0; n < N; n++) {
        float *sr = s + n * C;
        for (int64_t c = 0; c < C; c++) sr[c] = (float)((double)tk_ld_f(x, xdt, n * C + c) + (double)tk_ld_f(r, rdt, n * C + c));
        double m = 0, v = 0;
        if (mean) {
            for (int64_t c = 0; c < C; c++) m += sr[c];
            m /= (double)C;
        }
        for (int64_t c = 0; c < C; c++) v += ((double)sr[c] - m) * ((double)sr[c] - m);
        v /= (double)C;
        double rs = 1.0 / sqrt(v + eps);
        for (int64_t c = 0; c < C; c++)
            tk_st_y(y, ydt, n * C + c, (float)(((double)sr[c] - m) * rs * (double)w[c] + (b ? (double)b[c] : 0.0)));
        if (mean) mean[n] = (float)m;
        rstd[n] = (float)rs;
    }
}

/* dx = ds + the norm's input gradient at s; dw, db (db NULL for rms). */
static inline void tk_add_norm_bwd_f32(float *dx, void *dxh, int dxhdt, float *dw, float *db, int acc, const void *dy, int dydt,
                                       const float *ds, const float *s, const float *w, const float *mean, const float *rstd, int64_t N,
                                       int64_t C) {
#pragma omp parallel for schedule(static) if (N * C > 32768)
    for (int64_t n = 0; n < N; n++) {
        const float *sr = s + n * C;
        double m = mean ? (double)mean[n] : 0.0, rs = rstd[n], s1 = 0, s2 = 0;
        for (int64_t c = 0; c < C; c++) {
            double xh = ((double)sr[c] - m) * rs, g = (double)tk_ld_f(dy, dydt, n * C + c) * (double)w[c];
            s1 += g;
            s2 += g * xh;
        }
        s1 = mean ? s1 / (double)C : 0.0;
        s2 /= (double)C;
        for (int64_t c = 0; c < C; c++) {
            double xh = ((double)sr[c] - m) * rs, g = (double)tk_ld_f(dy, dydt, n * C + c) * (double)w[c];
            tk_st_dx(dx, dxh, dxhdt, n * C + c, (double)ds[n * C + c] + rs * (g - s1 - xh * s2));
        }
    }
#pragma omp parallel for schedule(static) if (N * C > 32768)
    for (int64_t c = 0; c < C; c++) {
        double sw = 0, sb = 0;
        for (int64_t n = 0; n < N; n++) {
            double xh = ((double)s[n * C + c] - (mean ? (double)mean[n] : 0.0)) * (double)rstd[n], d = tk_ld_f(dy, dydt, n * C + c);
            sw += d * xh;
            sb += d;
        }
        tk_st_dw(dw, c, sw, acc);
        if (db) tk_st_dw(db, c, sb, acc);
    }
}

/* The layout of a [B,H,T,D] operand of rope_qk and attention: element
 * (b, h, t, d) at b*L.b + h*L.h + t*L.t + d (d contiguous). */
typedef struct TrnAttL {
    int64_t b, h, t;
} TrnAttL;
#define TRN_ATTL(b, h, t) ((TrnAttL){(b), (h), (t)})
#define TK_AT(L, bi, hi, ti) ((bi) * (L).b + (hi) * (L).h + (ti) * (L).t)

/* ---- rope over [outer, T, D], rotate-half convention ---- */

static inline void tk_rope_f32(float *y, const float *x, int64_t outer, int64_t T, int64_t D, double theta, int inverse) {
    int64_t half = D / 2;
#pragma omp parallel for collapse(2) schedule(static) if (outer * T * D > 65536)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t t = 0; t < T; t++) {
            const float *xr = x + (o * T + t) * D;
            float *yr = y + (o * T + t) * D;
            for (int64_t i = 0; i < half; i++) {
                double ang = (double)t * pow(theta, -2.0 * (double)i / (double)D);
                if (inverse) ang = -ang;
                double c = cos(ang), s = sin(ang), x1 = xr[i], x2 = xr[i + half];
                yr[i] = (float)(x1 * c - x2 * s);
                yr[i + half] = (float)(x1 * s + x2 * c);
            }
        }
}

/* rope on rows [outer, T, D] of any float dtype (the builtin rope in bf16/f16). */
static inline void tk_rope_dt(void *y, const void *x, int64_t outer, int64_t T, int64_t D, double theta, int inverse, int dt) {
    int64_t half = D / 2;
#pragma omp parallel for collapse(2) schedule(static) if (outer * T * D > 65536)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t t = 0; t < T; t++) {
            int64_t r = (o * T + t) * D;
            for (int64_t i = 0; i < half; i++) {
                double ang = (double)t * pow(theta, -2.0 * (double)i / (double)D);
                if (inverse) ang = -ang;
                double c = cos(ang), s = sin(ang), x1 = tk_ld(x, dt, r + i), x2 = tk_ld(x, dt, r + i + half);
                tk_st(y, dt, r + i, x1 * c - x2 * s);
                tk_st(y, dt, r + i + half, x1 * s + x2 * c);
            }
        }
}

/* rope_qk: q [outer_q, T, D] and k [outer_k, T, D] in one pass; per
 * position the factors are computed once for every head of both.  Without
 * tables (cs == NULL): the rotation with theta; with tables cs, sn [T, D]
 * (dtype tdt): y = x cos + rotate_half(x) sin.  inverse: the transpose.
 * Each of yq, xq, yk, xk has a layout (above) over [outer / H, H, T, D],
 * H = hq for q and hk for k.  y may be x (in place, the same layout: each
 * pair is read before it is written). */
static inline void tk_rope_qk(void *yq, TrnAttL lyq, const void *xq, TrnAttL lxq, int64_t hq, int64_t outer_q, void *yk, TrnAttL lyk,
                              const void *xk, TrnAttL lxk, int64_t hk, int64_t outer_k, int64_t T, int64_t D, const void *cs, const void *sn,
                              int tdt, double theta, int inverse, int dt) {
    int64_t h = D / 2;
#pragma omp parallel for schedule(static) if ((outer_q + outer_k) * T * D > 65536)
    for (int64_t t = 0; t < T; t++) {
        double f[4 * 256], *fa = h <= 256 ? f : (double *)tk_alloc(sizeof(double) * (size_t)(4 * h));
        for (int64_t i = 0; i < h; i++) {
            double *c = fa + 4 * i;
            if (cs) {
                c[0] = tk_ld(cs, tdt, t * D + i), c[1] = tk_ld(cs, tdt, t * D + i + h);
                c[2] = tk_ld(sn, tdt, t * D + i), c[3] = tk_ld(sn, tdt, t * D + i + h);
            } else {
                double ang = (double)t * pow(theta, -2.0 * (double)i / (double)D);
                c[0] = c[1] = cos(ang);
                c[2] = c[3] = sin(ang);
            }
        }
        for (int w = 0; w < 2; w++) {
            void *y = w ? yk : yq;
            const void *x = w ? xk : xq;
            TrnAttL ly = w ? lyk : lyq, lx = w ? lxk : lxq;
            int64_t outer = w ? outer_k : outer_q, H = w ? hk : hq;
            for (int64_t o = 0; o < outer; o++) {
                int64_t rx = TK_AT(lx, o / H, o % H, t), ry = TK_AT(ly, o / H, o % H, t);
                for (int64_t i = 0; i < h; i++) {
                    const double *c = fa + 4 * i;
                    double x1 = tk_ld(x, dt, rx + i), x2 = tk_ld(x, dt, rx + i + h);
                    if (!inverse) {
                        tk_st(y, dt, ry + i, x1 * c[0] - x2 * c[2]);
                        tk_st(y, dt, ry + i + h, x2 * c[1] + x1 * c[3]);
                    } else {
                        tk_st(y, dt, ry + i, x1 * c[0] + x2 * c[3]);
                        tk_st(y, dt, ry + i + h, x2 * c[1] - x1 * c[2]);
                    }
                }
            }
        }
        if (fa != f) free(fa);
    }
}

/* ---- attention: q [B,H,T,D], k, v [B,Hkv,S,D] -> o [B,H,T,D], lse [B,H,T] ----
 * Each of q, k, v, o (and the gradients) has its own layout (TrnAttL,
 * above), so a head can be a slice of a
 * wider row ([B,T,3C] of GPT-2's qkv, [B,T,C] of the output) and nothing
 * is copied into [B,H,T,D] first.  lse is [B,H,T] contiguous.
 * One query row at a time with an online softmax over key tiles, so no T x S
 * matrix exists beyond one tile; dot products and updates are float vector
 * loops (omp simd). */
#define TK_ATT_TILE 64
#define TK_ATT_QB 64 /* query rows a task of the BLAS and the bf16/f16 attention takes */

TRN_INLINE float tk_dot_f32(const float *a, const float *b, int64_t n) {
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

TRN_INLINE void tk_axpy_f32(float *y, float a, const float *x, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

/* zeroes the S rows of D of one (batch, kv head)'s dk and dv, which the
 * query heads sharing it then add into */
TRN_INLINE void tk_att_zero_kv(float *dkb, TrnAttL ldk, float *dvb, TrnAttL ldv, int64_t S, int64_t D) {
    for (int64_t j = 0; j < S; j++) {
        memset(dkb + j * ldk.t, 0, sizeof(float) * (size_t)D);
        memset(dvb + j * ldv.t, 0, sizeof(float) * (size_t)D);
    }
}

#ifdef TRN_HAVE_BLAS
/* With a BLAS, the f32 attention works a block of TK_ATT_QB query rows
 * against a chunk of TK_ATT_KB keys at a time, the products of the block
 * as single-threaded SGEMMs (the loops around them are OpenMP's): scores
 * S = scale·Q Kᵀ, then an online softmax along the block's rows as above,
 * then O += P V.  The same algorithm as the loops below; the sums are the
 * BLAS's, so the last bits differ from the loops'.  Neither depends on the
 * thread count. */
#define TK_ATT_KB 128

/* the keys row i of a chunk from j0 (nj keys) sees: all but those after i
 * when causal; 0 or fewer: none */
TRN_INLINE int64_t tk_att_seen(int causal, int64_t i, int64_t j0, int64_t nj) {
    if (!causal) return nj;
    int64_t c = i + 1 - j0;
    return c < 0 ? 0 : c < nj ? c : nj;
}

static inline void tk_attention_blas_f32(float *o, TrnAttL lo, float *lse, const float *q, TrnAttL lq, const float *k, TrnAttL lk,
                                         const float *v, TrnAttL lv, int64_t B, int64_t H, int64_t Hkv, int64_t T, int64_t S, int64_t D,
                                         double scale, int causal) {
    int64_t grp = H / Hkv, nqb = (T + TK_ATT_QB - 1) / TK_ATT_QB;
    float sc = (float)scale;
#pragma omp parallel for collapse(3) schedule(dynamic, 1) if (B * H * T * S * D > 65536)
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t qb = 0; qb < nqb; qb++) {
                int64_t i0 = qb * TK_ATT_QB, ni = T - i0 < TK_ATT_QB ? T - i0 : TK_ATT_QB;
                int64_t kend = causal ? (i0 + ni < S ? i0 + ni : S) : S;
                float *buf = (float *)tk_alloc(sizeof(float) * (size_t)(TK_ATT_QB * TK_ATT_KB + TK_ATT_QB * D + 2 * TK_ATT_QB));
                float *sb = buf, *ac = sb + TK_ATT_QB * TK_ATT_KB, *mx = ac + TK_ATT_QB * D, *l = mx + TK_ATT_QB;
                const float *qp = q + TK_AT(lq, b, h, i0), *kb = k + TK_AT(lk, b, h / grp, 0), *vb = v + TK_AT(lv, b, h / grp, 0);
                for (int64_t r = 0; r < ni; r++) mx[r] = -INFINITY, l[r] = 0;
                memset(ac, 0, sizeof(float) * (size_t)(ni * D));
                for (int64_t j0 = 0; j0 < kend; j0 += TK_ATT_KB) {
                    int64_t nj = kend - j0 < TK_ATT_KB ? kend - j0 : TK_ATT_KB;
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)ni, (int)nj, (int)D, sc, qp, (int)lq.t, kb + j0 * lk.t,
                                (int)lk.t, 0.0f, sb, (int)nj);
                    for (int64_t r = 0; r < ni; r++) {
                        float *sr = sb + r * nj, tmx = -INFINITY;
                        int64_t c = tk_att_seen(causal, i0 + r, j0, nj);
                        for (int64_t j = 0; j < c; j++) tmx = sr[j] > tmx ? sr[j] : tmx;
                        float nmx = mx[r] > tmx ? mx[r] : tmx, corr = trn_expf(mx[r] - nmx), sum = 0;
#pragma omp simd
                        for (int64_t j = 0; j < c; j++) sr[j] = trn_expf(sr[j] - nmx);
                        for (int64_t j = c; j < nj; j++) sr[j] = 0;
                        for (int64_t j = 0; j < c; j++) sum += sr[j];
                        l[r] = l[r] * corr + sum;
                        mx[r] = nmx;
#pragma omp simd
                        for (int64_t d = 0; d < D; d++) ac[r * D + d] *= corr;
                    }
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)ni, (int)D, (int)nj, 1.0f, sb, (int)nj, vb + j0 * lv.t,
                                (int)lv.t, 1.0f, ac, (int)D);
                }
                for (int64_t r = 0; r < ni; r++) {
                    float *orow = o + TK_AT(lo, b, h, i0 + r), inv = 1.0f / l[r];
                    for (int64_t d = 0; d < D; d++) orow[d] = ac[r * D + d] * inv;
                    lse[(b * H + h) * T + i0 + r] = mx[r] + logf(l[r]);
                }
                free(buf);
            }
}

/* dq, dk, dv: per (b, kv head) as the loops below, a query block against a
 * key chunk at a time: P = exp(scale·Q Kᵀ − lse), dP = dO Vᵀ,
 * dS = P ∘ (dP − rowsum(dO ∘ O))·scale, then dQ += dS K, dK += dSᵀ Q,
 * dV += Pᵀ dO. */
static inline void tk_attention_bwd_blas_f32(float *dq, TrnAttL ldq, float *dk, TrnAttL ldk, float *dv, TrnAttL ldv, const float *dout,
                                             TrnAttL ldo, const float *q, TrnAttL lq, const float *k, TrnAttL lk, const float *v,
                                             TrnAttL lv, const float *o, TrnAttL lo, const float *lse, int64_t B, int64_t H, int64_t Hkv,
                                             int64_t T, int64_t S, int64_t D, double scale, int causal) {
    int64_t grp = H / Hkv;
    float sc = (float)scale;
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if (B * H * T * S * D > 65536)
    for (int64_t b = 0; b < B; b++)
        for (int64_t hk = 0; hk < Hkv; hk++) {
            const float *kb = k + TK_AT(lk, b, hk, 0), *vb = v + TK_AT(lv, b, hk, 0);
            float *dkb = dk + TK_AT(ldk, b, hk, 0), *dvb = dv + TK_AT(ldv, b, hk, 0);
            float *buf = (float *)tk_alloc(sizeof(float) * (size_t)(2 * TK_ATT_QB * TK_ATT_KB + 2 * TK_ATT_QB));
            float *pb = buf, *db = pb + TK_ATT_QB * TK_ATT_KB, *Di = db + TK_ATT_QB * TK_ATT_KB, *L = Di + TK_ATT_QB;
            tk_att_zero_kv(dkb, ldk, dvb, ldv, S, D);
            for (int64_t h = hk * grp; h < (hk + 1) * grp; h++)
                for (int64_t i0 = 0; i0 < T; i0 += TK_ATT_QB) {
                    int64_t ni = T - i0 < TK_ATT_QB ? T - i0 : TK_ATT_QB;
                    int64_t kend = causal ? (i0 + ni < S ? i0 + ni : S) : S;
                    const float *qp = q + TK_AT(lq, b, h, i0), *dop = dout + TK_AT(ldo, b, h, i0);
                    float *dqp = dq + TK_AT(ldq, b, h, i0);
                    for (int64_t r = 0; r < ni; r++) {
                        Di[r] = tk_dot_f32(dop + r * ldo.t, o + TK_AT(lo, b, h, i0 + r), D);
                        L[r] = lse[(b * H + h) * T + i0 + r];
                        memset(dqp + r * ldq.t, 0, sizeof(float) * (size_t)D);
                    }
                    for (int64_t j0 = 0; j0 < kend; j0 += TK_ATT_KB) {
                        int64_t nj = kend - j0 < TK_ATT_KB ? kend - j0 : TK_ATT_KB;
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)ni, (int)nj, (int)D, sc, qp, (int)lq.t, kb + j0 * lk.t,
                                    (int)lk.t, 0.0f, pb, (int)nj);
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)ni, (int)nj, (int)D, 1.0f, dop, (int)ldo.t,
                                    vb + j0 * lv.t, (int)lv.t, 0.0f, db, (int)nj);
                        for (int64_t r = 0; r < ni; r++) {
                            float *pr = pb + r * nj, *dr = db + r * nj, Lr = L[r], Dr = Di[r];
                            int64_t c = tk_att_seen(causal, i0 + r, j0, nj);
#pragma omp simd
                            for (int64_t j = 0; j < c; j++) {
                                float p = trn_expf(pr[j] - Lr);
                                pr[j] = p;
                                dr[j] = p * (dr[j] - Dr) * sc;
                            }
                            for (int64_t j = c; j < nj; j++) pr[j] = dr[j] = 0;
                        }
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)ni, (int)D, (int)nj, 1.0f, db, (int)nj, kb + j0 * lk.t,
                                    (int)lk.t, 1.0f, dqp, (int)ldq.t);
                        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nj, (int)D, (int)ni, 1.0f, db, (int)nj, qp, (int)lq.t, 1.0f,
                                    dkb + j0 * ldk.t, (int)ldk.t);
                        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nj, (int)D, (int)ni, 1.0f, pb, (int)nj, dop, (int)ldo.t,
                                    1.0f, dvb + j0 * ldv.t, (int)ldv.t);
                    }
                }
            free(buf);
        }
}
#endif

static inline void tk_attention_f32(float *o, TrnAttL lo, float *lse, const float *q, TrnAttL lq, const float *k, TrnAttL lk,
                                    const float *v, TrnAttL lv, int64_t B, int64_t H, int64_t Hkv, int64_t T, int64_t S, int64_t D,
                                    double scale, int causal) {
#ifdef TRN_HAVE_BLAS
    tk_attention_blas_f32(o, lo, lse, q, lq, k, lk, v, lv, B, H, Hkv, T, S, D, scale, causal);
    return;
#endif
    int64_t grp = H / Hkv;
    float sc = (float)scale;
#pragma omp parallel for collapse(3) schedule(dynamic, 8) if (B * H * T * S * D > 65536)
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < T; i++) {
                const float *qr = q + TK_AT(lq, b, h, i);
                const float *kb = k + TK_AT(lk, b, h / grp, 0), *vb = v + TK_AT(lv, b, h / grp, 0);
                float acc[512], s[TK_ATT_TILE], mx = -INFINITY, l = 0;
                float *ac = D <= 512 ? acc : (float *)tk_alloc(sizeof(float) * (size_t)D);
                for (int64_t d = 0; d < D; d++) ac[d] = 0;
                int64_t jend = causal ? i + 1 : S;
                for (int64_t j0 = 0; j0 < jend; j0 += TK_ATT_TILE) {
                    int64_t j1 = j0 + TK_ATT_TILE < jend ? j0 + TK_ATT_TILE : jend;
                    float tmx = -INFINITY;
                    for (int64_t j = j0; j < j1; j++) {
                        s[j - j0] = tk_dot_f32(qr, kb + j * lk.t, D) * sc;
                        tmx = s[j - j0] > tmx ? s[j - j0] : tmx;
                    }
                    float nmx = mx > tmx ? mx : tmx, corr = trn_expf(mx - nmx);
                    l *= corr;
#pragma omp simd
                    for (int64_t d = 0; d < D; d++) ac[d] *= corr;
#pragma omp simd
                    for (int64_t j = 0; j < j1 - j0; j++) s[j] = trn_expf(s[j] - nmx);
                    for (int64_t j = j0; j < j1; j++) {
                        l += s[j - j0];
                        tk_axpy_f32(ac, s[j - j0], vb + j * lv.t, D);
                    }
                    mx = nmx;
                }
                float *orow = o + TK_AT(lo, b, h, i), inv = 1.0f / l;
                for (int64_t d = 0; d < D; d++) orow[d] = ac[d] * inv;
                lse[(b * H + h) * T + i] = mx + logf(l);
                if (ac != acc) free(ac);
            }
}

/* dq, dk, dv from do, q, k, v, o, lse (probabilities recomputed from lse).
 * Parallel over (b, kv head): the query heads sharing a kv head add into
 * its dk, dv in order, so the result does not depend on the thread count. */
static inline void tk_attention_bwd_f32(float *dq, TrnAttL ldq, float *dk, TrnAttL ldk, float *dv, TrnAttL ldv, const float *dout,
                                        TrnAttL ldo, const float *q, TrnAttL lq, const float *k, TrnAttL lk, const float *v, TrnAttL lv,
                                        const float *o, TrnAttL lo, const float *lse, int64_t B, int64_t H, int64_t Hkv, int64_t T,
                                        int64_t S, int64_t D, double scale, int causal) {
#ifdef TRN_HAVE_BLAS
    tk_attention_bwd_blas_f32(dq, ldq, dk, ldk, dv, ldv, dout, ldo, q, lq, k, lk, v, lv, o, lo, lse, B, H, Hkv, T, S, D, scale, causal);
    return;
#endif
    int64_t grp = H / Hkv;
    float sc = (float)scale;
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if (B * H * T * S * D > 65536)
    for (int64_t b = 0; b < B; b++)
        for (int64_t hk = 0; hk < Hkv; hk++) {
            const float *kb = k + TK_AT(lk, b, hk, 0), *vb = v + TK_AT(lv, b, hk, 0);
            float *dkb = dk + TK_AT(ldk, b, hk, 0), *dvb = dv + TK_AT(ldv, b, hk, 0);
            tk_att_zero_kv(dkb, ldk, dvb, ldv, S, D);
            for (int64_t h = hk * grp; h < (hk + 1) * grp; h++)
                for (int64_t i = 0; i < T; i++) {
                    int64_t row = (b * H + h) * T + i;
                    const float *qr = q + TK_AT(lq, b, h, i), *dor = dout + TK_AT(ldo, b, h, i);
                    float *dqr = dq + TK_AT(ldq, b, h, i);
                    float Di = tk_dot_f32(dor, o + TK_AT(lo, b, h, i), D), L = lse[row];
                    for (int64_t d = 0; d < D; d++) dqr[d] = 0;
                    int64_t jend = causal ? i + 1 : S;
                    for (int64_t j0 = 0; j0 < jend; j0 += TK_ATT_TILE) {
                        int64_t nj = j0 + TK_ATT_TILE < jend ? TK_ATT_TILE : jend - j0;
                        float p[TK_ATT_TILE], ds[TK_ATT_TILE];
                        for (int64_t j = 0; j < nj; j++) p[j] = tk_dot_f32(qr, kb + (j0 + j) * lk.t, D) * sc - L;
#pragma omp simd
                        for (int64_t j = 0; j < nj; j++) p[j] = trn_expf(p[j]);
                        for (int64_t j = 0; j < nj; j++) ds[j] = p[j] * (tk_dot_f32(dor, vb + (j0 + j) * lv.t, D) - Di) * sc;
                        for (int64_t j = 0; j < nj; j++) {
                            tk_axpy_f32(dqr, ds[j], kb + (j0 + j) * lk.t, D);
                            tk_axpy_f32(dkb + (j0 + j) * ldk.t, ds[j], qr, D);
                            tk_axpy_f32(dvb + (j0 + j) * ldv.t, p[j], dor, D);
                        }
                    }
                }
        }
}

/* ---- attention in bf16/f16 (mixed precision): the same algorithm as the
 * f32 kernels above, in double, with q, k, v, o of dtype dt (2 bf16, 3 f16)
 * loaded and stored through tk_ld/tk_st; lse f32.  The rows of k and v a
 * block of query rows reads (of q and dout, a row) are widened to double
 * once, so the inner loops read doubles; the sums are taken in the same
 * order as one element at a time. */
TRN_INLINE void tk_att_widen(double *dst, const void *x, int dt, int64_t base, int64_t stride, int64_t rows, int64_t D) {
    for (int64_t j = 0; j < rows; j++)
        for (int64_t d = 0; d < D; d++) dst[j * D + d] = tk_ld(x, dt, base + j * stride + d);
}

TRN_INLINE void tk_attention_g(void *o, TrnAttL lo, float *lse, const void *q, TrnAttL lq, const void *k, TrnAttL lk, const void *v,
                               TrnAttL lv, int64_t B, int64_t H, int64_t Hkv, int64_t T, int64_t S, int64_t D, double scale, int causal,
                               int dt) {
    int64_t grp = H / Hkv, nqb = (T + TK_ATT_QB - 1) / TK_ATT_QB;
#pragma omp parallel for collapse(3) schedule(dynamic, 1) if (B * H * T * S * D > 65536)
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t qb = 0; qb < nqb; qb++) {
                int64_t i0 = qb * TK_ATT_QB, i1 = i0 + TK_ATT_QB < T ? i0 + TK_ATT_QB : T;
                int64_t ns = causal && i1 < S ? i1 : S; /* the keys these rows see */
                double *kd = (double *)tk_alloc(sizeof(double) * (size_t)(2 * ns * D + 2 * D)), *vd = kd + ns * D;
                double *qd = vd + ns * D, *ac = qd + D, s[TK_ATT_TILE];
                tk_att_widen(kd, k, dt, TK_AT(lk, b, h / grp, 0), lk.t, ns, D);
                tk_att_widen(vd, v, dt, TK_AT(lv, b, h / grp, 0), lv.t, ns, D);
                for (int64_t i = i0; i < i1; i++) {
                    double mx = -INFINITY, l = 0;
                    tk_att_widen(qd, q, dt, TK_AT(lq, b, h, i), 0, 1, D);
                    for (int64_t d = 0; d < D; d++) ac[d] = 0;
                    int64_t jend = causal && i + 1 < ns ? i + 1 : ns;
                    for (int64_t j0 = 0; j0 < jend; j0 += TK_ATT_TILE) {
                        int64_t j1 = j0 + TK_ATT_TILE < jend ? j0 + TK_ATT_TILE : jend;
                        double tmx = -INFINITY;
                        for (int64_t j = j0; j < j1; j++) {
                            double dot = 0;
                            for (int64_t d = 0; d < D; d++) dot += qd[d] * kd[j * D + d];
                            s[j - j0] = dot * scale;
                            tmx = fmax(tmx, s[j - j0]);
                        }
                        double nmx = fmax(mx, tmx), corr = exp(mx - nmx);
                        l *= corr;
                        for (int64_t d = 0; d < D; d++) ac[d] *= corr;
                        for (int64_t j = j0; j < j1; j++) {
                            double p = exp(s[j - j0] - nmx);
                            l += p;
                            for (int64_t d = 0; d < D; d++) ac[d] += p * vd[j * D + d];
                        }
                        mx = nmx;
                    }
                    int64_t orow = TK_AT(lo, b, h, i);
                    for (int64_t d = 0; d < D; d++) tk_st(o, dt, orow + d, ac[d] / l);
                    lse[(b * H + h) * T + i] = (float)(mx + log(l));
                }
                free(kd);
            }
}

static inline void tk_attention_dt(void *o, TrnAttL lo, float *lse, const void *q, TrnAttL lq, const void *k, TrnAttL lk, const void *v,
                                   TrnAttL lv, int64_t B, int64_t H, int64_t Hkv, int64_t T, int64_t S, int64_t D, double scale, int causal,
                                   int dt) {
    if (dt == 2) tk_attention_g(o, lo, lse, q, lq, k, lk, v, lv, B, H, Hkv, T, S, D, scale, causal, 2);
    else tk_attention_g(o, lo, lse, q, lq, k, lk, v, lv, B, H, Hkv, T, S, D, scale, causal, 3);
}

/* Its gradient, as tk_attention_bwd_f32. */
TRN_INLINE void tk_attention_bwd_g(void *dq, TrnAttL ldq, void *dk, TrnAttL ldk, void *dv, TrnAttL ldv, const void *dout, TrnAttL ldo,
                                   const void *q, TrnAttL lq, const void *k, TrnAttL lk, const void *v, TrnAttL lv, const void *o,
                                   TrnAttL lo, const float *lse, int64_t B, int64_t H, int64_t Hkv, int64_t T, int64_t S, int64_t D,
                                   double scale, int causal, int dt) {
    int64_t grp = H / Hkv;
#pragma omp parallel for collapse(2) schedule(static) if (B * H * T * S * D > 65536)
    for (int64_t b = 0; b < B; b++)
        for (int64_t hk = 0; hk < Hkv; hk++) {
            /* dk, dv, k, v [S, D]; dq, q, dout [D] */
            double *dka = (double *)tk_zalloc((size_t)(4 * S * D + 3 * D), sizeof(double));
            double *dva = dka + S * D, *kd = dva + S * D, *vd = kd + S * D, *dqa = vd + S * D, *qd = dqa + D, *dod = qd + D;
            tk_att_widen(kd, k, dt, TK_AT(lk, b, hk, 0), lk.t, S, D);
            tk_att_widen(vd, v, dt, TK_AT(lv, b, hk, 0), lv.t, S, D);
            for (int64_t h = hk * grp; h < (hk + 1) * grp; h++)
                for (int64_t i = 0; i < T; i++) {
                    int64_t row = (b * H + h) * T + i, orow = TK_AT(lo, b, h, i);
                    double Di = 0, L = lse[row];
                    tk_att_widen(qd, q, dt, TK_AT(lq, b, h, i), 0, 1, D);
                    tk_att_widen(dod, dout, dt, TK_AT(ldo, b, h, i), 0, 1, D);
                    for (int64_t d = 0; d < D; d++) Di += dod[d] * tk_ld(o, dt, orow + d);
                    for (int64_t d = 0; d < D; d++) dqa[d] = 0;
                    int64_t jend = causal && i + 1 < S ? i + 1 : S;
                    for (int64_t j = 0; j < jend; j++) {
                        double dot = 0, dp = 0;
                        for (int64_t d = 0; d < D; d++) {
                            dot += qd[d] * kd[j * D + d];
                            dp += dod[d] * vd[j * D + d];
                        }
                        double p = exp(dot * scale - L), ds = p * (dp - Di);
                        for (int64_t d = 0; d < D; d++) {
                            dqa[d] += scale * ds * kd[j * D + d];
                            dka[j * D + d] += scale * ds * qd[d];
                            dva[j * D + d] += p * dod[d];
                        }
                    }
                    int64_t dqr = TK_AT(ldq, b, h, i);
                    for (int64_t d = 0; d < D; d++) tk_st(dq, dt, dqr + d, dqa[d]);
                }
            for (int64_t j = 0; j < S; j++) {
                int64_t dkr = TK_AT(ldk, b, hk, j), dvr = TK_AT(ldv, b, hk, j);
                for (int64_t d = 0; d < D; d++) {
                    tk_st(dk, dt, dkr + d, dka[j * D + d]);
                    tk_st(dv, dt, dvr + d, dva[j * D + d]);
                }
            }
            free(dka);
        }
}

static inline void tk_attention_bwd_dt(void *dq, TrnAttL ldq, void *dk, TrnAttL ldk, void *dv, TrnAttL ldv, const void *dout, TrnAttL ldo,
                                       const void *q, TrnAttL lq, const void *k, TrnAttL lk, const void *v, TrnAttL lv, const void *o,
                                       TrnAttL lo, const float *lse, int64_t B, int64_t H, int64_t Hkv, int64_t T, int64_t S, int64_t D,
                                       double scale, int causal, int dt) {
    if (dt == 2)
        tk_attention_bwd_g(dq, ldq, dk, ldk, dv, ldv, dout, ldo, q, lq, k, lk, v, lv, o, lo, lse, B, H, Hkv, T, S, D, scale, causal, 2);
    else
        tk_attention_bwd_g(dq, ldq, dk, ldk, dv, ldv, dout, ldo, q, lq, k, lk, v, lv, o, lo, lse, B, H, Hkv, T, S, D, scale, causal, 3);
}

/* ---- cross-entropy over rows of logits [N,V] with targets [N] ---- */

static inline int64_t tk_ce_count(const int32_t *tg, int64_t N, int64_t ignore) {
    int64_t c = 0;
    for (int64_t n = 0; n < N; n++) c += tg[n] != ignore;
    return c;
}

/* loss f32[] = mean over kept rows of lse - logit[target]; lse [N].  Rows
 * are V long, of which the first nc count (pad-tiles' {classes}). */
static inline void tk_cross_entropy_f32(float *loss, float *lse, const float *logits, const int32_t *tg, int64_t N, int64_t V,
                                        int64_t nc, int64_t ignore) {
    double *rl = (double *)tk_alloc(sizeof(double) * (size_t)(N ? N : 1));
#pragma omp parallel for schedule(static) if (N * V > 65536)
    for (int64_t n = 0; n < N; n++) {
        const float *r = logits + n * V;
        double mx = -INFINITY, s = 0;
        for (int64_t j = 0; j < nc; j++) mx = fmax(mx, (double)r[j]);
        for (int64_t j = 0; j < nc; j++) s += exp((double)r[j] - mx);
        double l = mx + log(s);
        lse[n] = (float)l;
        int64_t t = tg[n];
        rl[n] = (t == ignore || t < 0 || t >= nc) ? 0.0 : l - (double)r[t];
    }
    double tot = 0;
    int64_t cnt = tk_ce_count(tg, N, ignore);
    for (int64_t n = 0; n < N; n++) tot += rl[n];
    *loss = (float)(cnt ? tot / (double)cnt : 0.0);
    free(rl);
}

/* dlogits [N,V] = dloss / count (softmax - onehot) for kept rows, 0 for
 * ignored rows, rows whose target is outside [0, nc), and the columns
 * from nc on. */
static inline void tk_cross_entropy_bwd_f32(float *dl, const float *dloss, const float *logits, const int32_t *tg,
                                            const float *lse, int64_t N, int64_t V, int64_t nc, int64_t ignore) {
    int64_t cnt = tk_ce_count(tg, N, ignore);
    double sc = cnt ? (double)*dloss / (double)cnt : 0.0;
#pragma omp parallel for schedule(static) if (N * V > 65536)
    for (int64_t n = 0; n < N; n++) {
        int64_t t = tg[n];
        const float *r = logits + n * V;
        float *d = dl + n * V;
        if (t == ignore || t < 0 || t >= nc) {   /* as the forward's row loss of 0 (a computed target; inputs are checked) */
            for (int64_t j = 0; j < V; j++) d[j] = 0;
            continue;
        }
        double l = lse[n];
        for (int64_t j = 0; j < nc; j++) d[j] = (float)(sc * (exp((double)r[j] - l) - (j == t ? 1.0 : 0.0)));
        for (int64_t j = nc; j < V; j++) d[j] = 0;
    }
}

/* Forward and backward in one pass over the logits, the gradient written in
 * place of the logits: loss, lse, and logits := dlogits. */
static inline void tk_cross_entropy_fused_f32(float *loss, float *lse, float *logits /* in: logits, out: dlogits */,
                                              const int32_t *tg, const float *dloss, int64_t N, int64_t V, int64_t nc, int64_t ignore) {
    int64_t cnt = tk_ce_count(tg, N, ignore);
    double sc = cnt ? (double)*dloss / (double)cnt : 0.0;
    double *rl = (double *)tk_alloc(sizeof(double) * (size_t)(N ? N : 1));
#pragma omp parallel for schedule(static) if (N * V > 65536)
    for (int64_t n = 0; n < N; n++) {
        float *r = logits + n * V;
        double mx = -INFINITY, s = 0;
        for (int64_t j = 0; j < nc; j++) mx = fmax(mx, (double)r[j]);
        for (int64_t j = 0; j < nc; j++) s += exp((double)r[j] - mx);
        double l = mx + log(s);
        lse[n] = (float)l;
        int64_t t = tg[n];
        for (int64_t j = nc; j < V; j++) r[j] = 0;
        if (t == ignore || t < 0 || t >= nc) {
            rl[n] = 0;
            for (int64_t j = 0; j < nc; j++) r[j] = 0;
            continue;
        }
        rl[n] = l - (double)r[t];
        for (int64_t j = 0; j < nc; j++) r[j] = (float)(sc * (exp((double)r[j] - l) - (j == t ? 1.0 : 0.0)));
    }
    double tot = 0;
    for (int64_t n = 0; n < N; n++) tot += rl[n];
    *loss = (float)(cnt ? tot / (double)cnt : 0.0);
    free(rl);
}

/* ---- fused linear + cross-entropy ----
 * loss f32[], dx [N,C], dw [V,C] (f32) for x [N,C] and w [V,C] (dtype dt)
 * and targets tg [N]: logits = x w^T over the first nc rows of w, computed
 * `chunk` rows of x at a time into scratch [chunk, nc] (f32), each chunk's
 * g = softmax - onehot written in place of its logits, then dx = g w / count
 * and dw += g^T x / count; so the [N, V] logits never exist.  The logits and
 * g are rounded to dt (the interpreter's linear_cross_entropy, and what the
 * unfused matmul and the cast of its gradient do under mixed precision);
 * the 1/count scale comes after, in the products.  dx or dw may be NULL
 * (nothing needs them: the eval schedule).  Rows of w from nc on are
 * padding: dw is 0 there.  acc: dw is the gradient accumulator, added to
 * (its padded rows left as they are, 0).  dxdt: dx's dtype, f32 or (a
 * cast to half absorbed: lower.c) dt, each element rounded to f32 and
 * then to dt, as the cast rounds it.
 * tk_linear_ce_scaled: dx and dw times sdx[0] and sdw[0] (a null pointer:
 * 1), each a power of two (fp16's loss scale: the mul by it absorbed,
 * lower.c lce_scale_mul), multiplied into 1/count: a power of two scales
 * exactly, so the bits are those of the product and then the mul. */
static inline void tk_linear_ce_scaled(float *loss, void *dx, int dxdt, float *dw, int acc, const void *x, const void *w, const int32_t *tg,
                                       int64_t N, int64_t C, int64_t V, int64_t nc, int64_t chunk, int64_t ignore, float *scratch, int dt,
                                       const float *sdx, const float *sdw) {
    int64_t cnt = tk_ce_count(tg, N, ignore);
    double inv = cnt ? 1.0 / (double)cnt : 0.0, total = 0;
    double invx = sdx ? inv * (double)sdx[0] : inv, invw = sdw ? inv * (double)sdw[0] : inv;
    int blas = 0;
#ifdef TRN_HAVE_BLAS
    blas = dt == 0;
#endif
    /* half precision (and no BLAS): dw accumulates in double, scaled and rounded once */
    double *dwa = dw && !blas ? (double *)tk_zalloc((size_t)(nc * C + 1), sizeof(double)) : NULL;
    if (dw && blas && !acc) memset(dw, 0, sizeof(float) * (size_t)(V * C));
    for (int64_t r0 = 0; r0 < N; r0 += chunk) {
        int64_t rows = r0 + chunk < N ? chunk : N - r0;
        float *lg = scratch; /* [rows, nc] */
#ifdef TRN_HAVE_BLAS
        if (blas)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)nc, (int)C, 1.0f, (const float *)x + r0 * C, (int)C,
                        (const float *)w, (int)C, 0.0f, lg, (int)nc);
#endif
        double part = 0;
#pragma omp parallel for schedule(static) reduction(+ : part) if (rows * nc * C > 65536)
        for (int64_t i = 0; i < rows; i++) {
            float *l = lg + i * nc;
            if (!blas) { /* x's row widened once; four classes' sums at a time, each over k in order */
                double *xd = (double *)tk_alloc(sizeof(double) * (size_t)C);
                for (int64_t k = 0; k < C; k++) xd[k] = tk_ld(x, dt, (r0 + i) * C + k);
                int64_t c = 0;
                for (; c + 4 <= nc; c += 4) {
                    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
                    for (int64_t k = 0; k < C; k++) {
                        a0 += xd[k] * tk_ld(w, dt, c * C + k);
                        a1 += xd[k] * tk_ld(w, dt, (c + 1) * C + k);
                        a2 += xd[k] * tk_ld(w, dt, (c + 2) * C + k);
                        a3 += xd[k] * tk_ld(w, dt, (c + 3) * C + k);
                    }
                    l[c] = (float)tk_round(dt, a0), l[c + 1] = (float)tk_round(dt, a1);
                    l[c + 2] = (float)tk_round(dt, a2), l[c + 3] = (float)tk_round(dt, a3);
                }
                for (; c < nc; c++) {
                    double dot = 0;
                    for (int64_t k = 0; k < C; k++) dot += xd[k] * tk_ld(w, dt, c * C + k);
                    l[c] = (float)tk_round(dt, dot);
                }
                free(xd);
            }
            int64_t t = tg[r0 + i];
            if (t == ignore || t < 0 || t >= nc) {
                for (int64_t c = 0; c < nc; c++) l[c] = 0;
                continue;
            }
            double mx = -INFINITY, sum = 0;
            for (int64_t c = 0; c < nc; c++) mx = fmax(mx, (double)l[c]);
            for (int64_t c = 0; c < nc; c++) sum += exp((double)l[c] - mx);
            double lse = mx + log(sum);
            part += lse - (double)l[t];
            for (int64_t c = 0; c < nc; c++) l[c] = (float)tk_round(dt, exp((double)l[c] - lse) - (c == t ? 1.0 : 0.0));
        }
        total += part;
#ifdef TRN_HAVE_BLAS
        if (blas && dx) /* dt f32: so is dx */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)C, (int)nc, (float)invx, lg, (int)nc, (const float *)w,
                        (int)C, 0.0f, (float *)dx + r0 * C, (int)C);
        if (blas && dw)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nc, (int)C, (int)rows, (float)invw, lg, (int)nc,
                        (const float *)x + r0 * C, (int)C, 1.0f, dw, (int)C);
#endif
        if (!blas && dx) {
#pragma omp parallel for schedule(static) if (rows * nc * C > 65536)
            for (int64_t i = 0; i < rows; i++) { /* a row of sums, each over the classes in order, along w's rows */
                double *dxr = (double *)tk_zalloc((size_t)C, sizeof(double));
                for (int64_t c = 0; c < nc; c++) {
                    double g = (double)lg[i * nc + c];
                    for (int64_t k = 0; k < C; k++) dxr[k] += g * tk_ld(w, dt, c * C + k);
                }
                for (int64_t k = 0; k < C; k++) tk_st(dx, dxdt, (r0 + i) * C + k, (double)(float)(invx * dxr[k]));
                free(dxr);
            }
        }
        if (dwa) {
#pragma omp parallel for schedule(static) if (rows * nc * C > 65536)
            for (int64_t c = 0; c < nc; c++)
                for (int64_t i = 0; i < rows; i++) {
                    double g = lg[i * nc + c];
                    if (g == 0) continue;
                    for (int64_t k = 0; k < C; k++) dwa[c * C + k] += g * tk_ld(x, dt, (r0 + i) * C + k);
                }
        }
    }
    if (dwa) {
        if (acc) /* rounded, then added: as the add into the accumulator would */
            for (int64_t e = 0; e < nc * C; e++) dw[e] += (float)(invw * dwa[e]);
        else
            for (int64_t e = 0; e < V * C; e++) dw[e] = e < nc * C ? (float)(invw * dwa[e]) : 0.0f;
        free(dwa);
    }
    *loss = (float)(total * inv);
}
static inline void tk_linear_ce(float *loss, void *dx, int dxdt, float *dw, int acc, const void *x, const void *w, const int32_t *tg,
                                int64_t N, int64_t C, int64_t V, int64_t nc, int64_t chunk, int64_t ignore, float *scratch, int dt) {
    tk_linear_ce_scaled(loss, dx, dxdt, dw, acc, x, w, tg, N, C, V, nc, chunk, ignore, scratch, dt, (const float *)0, (const float *)0);
}

/* ---- optimizer ---- */

/* Sum of squares of one tensor, added to *acc (double). */
static inline void tk_sumsq_f32(double *acc, const float *x, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
    *acc += s;
}

/* A skipped step (fp16 overflow): the results are the operands. */
static inline int tk_skip_update(const float *skip, float *wo, const float *w, float *mo, const float *m, float *vo, const float *v,
                                 int64_t n) {
    if (!skip || skip[0] == 0.0f) return 0;
    if (wo != w) memcpy(wo, w, sizeof(float) * (size_t)n);
    if (mo && mo != m) memcpy(mo, m, sizeof(float) * (size_t)n);
    if (vo && vo != v) memcpy(vo, v, sizeof(float) * (size_t)n);
    return 1;
}

/* What an update writes beside its results (lower.c): the half copy h
 * (dtype hdt, tk_st's codes; NULL: none) of the new weight wo, when the
 * update absorbed the cast that makes it (wo rounded once, as that cast
 * rounds it); and zeros into gz (NULL: none), the gradient accumulator it
 * read, when it absorbed the accumulator's reset. */
static inline void tk_update_extras(void *h, int hdt, const float *wo, float *gz, int64_t n) {
    if (h) {
#pragma omp parallel for schedule(static) if (n > 65536)
        for (int64_t i = 0; i < n; i++) tk_st_y(h, hdt, i, wo[i]);
    }
    if (gz) memset(gz, 0, sizeof(float) * (size_t)n);
}

/* AdamW on n elements, in place (w, m, v may alias the outputs); skip
 * (NULL: none) != 0 changes nothing; h and gz as tk_update_extras's (gz is
 * g itself). */
static inline void tk_adamw_f32(float *wo, float *mo, float *vo, const float *w, const float *g, const float *m, const float *v,
                                int64_t n, double lr, int64_t step, double gscale, double b1, double b2, double eps, double wd,
                                const float *skip, void *h, int hdt, float *gz) {
    if (tk_skip_update(skip, wo, w, mo, m, vo, v, n)) {
        tk_update_extras(h, hdt, wo, gz, n);
        return;
    }
    double bc1 = 1.0 - pow(b1, (double)step), bc2 = 1.0 - pow(b2, (double)step);
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++) {
        double gi = (double)g[i] * gscale;
        double mi = b1 * (double)m[i] + (1.0 - b1) * gi;
        double vi = b2 * (double)v[i] + (1.0 - b2) * gi * gi;
        double wi = (double)w[i];
        wi = wi - lr * ((mi / bc1) / (sqrt(vi / bc2) + eps) + wd * wi);
        float w1 = (float)wi;
        wo[i] = w1;
        mo[i] = (float)mi;
        vo[i] = (float)vi;
        if (h) tk_st_y(h, hdt, i, w1);
        if (gz) gz[i] = 0;
    }
}

/* SGD with momentum (and Nesterov) on n elements, in place; h and gz as adamw's.
 * Without momentum buf and bo may be NULL (lower.c: no buffer is kept). */
static inline void tk_sgd_f32(float *wo, float *bo, const float *w, const float *g, const float *buf, int64_t n, double lr,
                              double gscale, double momentum, double wd, int nesterov, const float *skip, void *h, int hdt, float *gz) {
    if (tk_skip_update(skip, wo, w, bo, buf, NULL, NULL, n)) {
        tk_update_extras(h, hdt, wo, gz, n);
        return;
    }
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++) {
        double wi = (double)w[i], gi = (double)g[i] * gscale + wd * wi, upd = gi, bi = buf ? (double)buf[i] : 0.0;
        if (momentum != 0.0) {
            bi = momentum * bi + gi;
            upd = nesterov ? gi + momentum * bi : bi;
        }
        float w1 = (float)(wi - lr * upd);
        wo[i] = w1;
        if (bo) bo[i] = (float)bi;
        if (h) tk_st_y(h, hdt, i, w1);
        if (gz) gz[i] = 0;
    }
}

/* fp16 dynamic loss scaling (loss_scale_update): four f32 scalars. */
static inline void tk_loss_scale_update(float *scale2, float *good2, float *skipped2, float *skip, const float *scale, const float *good,
                                        const float *skipped, const float *norm, int64_t window) {
    double s = scale[0], gd = good[0], sk = skipped[0];
    float flag = 0;
    if (isfinite(norm[0])) {
        gd += 1;
        if (gd >= (double)window) s = fmin(s * 2.0, 0x1p40), gd = 0;
    } else {
        s *= 0.5, gd = 0, sk += 1, flag = 1;
    }
    scale2[0] = (float)s, good2[0] = (float)gd, skipped2[0] = (float)sk, skip[0] = flag;
}

/* ---- memory-plan checking: fill a dead buffer with NaN ---- */
static inline void tk_poison(unsigned char *p, int64_t bytes) { memset(p, 0xff, (size_t)bytes); }

#endif /* TRAINC_KERNELS_H */
