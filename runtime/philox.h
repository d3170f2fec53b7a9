/* runtime/philox.h — the one random-number generator of trainc.
 *
 * Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
 * 3", SC'11): a counter-based generator, so element i of any random tensor
 * is a pure function of (seed, stream, i).  This header is included by the
 * compiler (interpreter), the runtime and the generated C and CUDA code, so
 * every backend draws exactly the same numbers.
 *
 *   parameter init:  seed = model seed, stream = rng_name_stream(param name)
 *   dropout masks:   seed = per-micro-batch seed, stream = node's {stream}
 *
 * Everything is static inline and uses only integer arithmetic, except the
 * normals (f32 operations rounded one by one: the same bits on the host and
 * the device) and the host's 53-bit uniforms.
 */
#ifndef TRAINC_PHILOX_H
#define TRAINC_PHILOX_H

#ifndef __CUDACC_RTC__
#include <math.h>
#include <stdint.h>
#endif

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define RNG_FN static __host__ __device__ __forceinline__
#else
#define RNG_FN static inline
#endif

/* One Philox-4x32-10 block: counter c[4], key k[2] -> out[4]. */
RNG_FN void philox4x32_10(const uint32_t c[4], const uint32_t k[2], uint32_t out[4]) {
    uint32_t c0 = c[0], c1 = c[1], c2 = c[2], c3 = c[3], k0 = k[0], k1 = k[1];
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* The four 32-bit words for element `index` of stream `stream` under `seed`. */
RNG_FN void rng_words(uint64_t seed, uint64_t stream, uint64_t index, uint32_t out[4]) {
    uint32_t c[4] = {(uint32_t)index, (uint32_t)(index >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)};
    uint32_t k[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    philox4x32_10(c, k, out);
}

/* Uniform in [0, 1) with 24 bits: exactly representable in f32, so a
 * comparison against it gives the same answer in f32 and f64 code. */
RNG_FN float rng_uniform24(uint64_t seed, uint64_t stream, uint64_t index) {
    uint32_t w[4];
    rng_words(seed, stream, index, w);
    return (float)(w[0] >> 8) * (1.0f / 16777216.0f);
}

/* Dropout: element kept (and scaled by 1/(1-p)) when its uniform >= p. */
RNG_FN int rng_keep(uint64_t seed, uint64_t stream, uint64_t index, float p) {
    return rng_uniform24(seed, stream, index) >= p;
}

/* ---- normals: parameter initialisation, on the host and on the device ----
 *
 * Normals come four to a Philox block: element i of (seed, stream) is
 * element i & 3 of the block at counter i >> 2.  Words (w0, w1) make
 * elements 0 and 1, (w2, w3) elements 2 and 3, by Box-Muller in f32:
 *
 *   u = ((w0 >> 8) + 1) * 2^-24                          in (0, 1]
 *   r = sqrt(-2 ln u)                                     (rng_lnf below)
 *   q = w1 >> 30, f = ((w1 >> 6) & 0xffffff) * 2^-24      θ = π/2 (q + f)
 *   element 0 = r cos θ, element 1 = r sin θ
 *
 * with cos and sin of π/2 f from polynomials, then rotated by q quarter
 * turns (exact).  Every step is one IEEE f32 +, -, *, / or sqrt, rounded
 * on its own (RNG_F* below: the CUDA intrinsics on the device, plain
 * operators, never fused into an FMA, on the host), so the host and the
 * device give the same bits and a device can initialise its own
 * parameters.  ln and the polynomials are accurate to a few 1e-8, far
 * below what an initialisation can tell; |r| <= sqrt(2 ln 2^24) = 5.77. */
#if defined(__CUDA_ARCH__)
#define RNG_FADD(a, b) __fadd_rn(a, b)
#define RNG_FSUB(a, b) __fsub_rn(a, b)
#define RNG_FMUL(a, b) __fmul_rn(a, b)
#define RNG_FDIV(a, b) __fdiv_rn(a, b)
#define RNG_FSQRT(a) __fsqrt_rn(a)
#define RNG_NOFMA
#else
#define RNG_FADD(a, b) ((a) + (b))
#define RNG_FSUB(a, b) ((a) - (b))
#define RNG_FMUL(a, b) ((a) * (b))
#define RNG_FDIV(a, b) ((a) / (b))
#define RNG_FSQRT(a) sqrtf(a)
#if defined(__GNUC__) && !defined(__clang__)
#define RNG_NOFMA __attribute__((optimize("fp-contract=off")))
#else
#define RNG_NOFMA
#endif
#endif
#if defined(__clang__) && !defined(__CUDA_ARCH__)
#define RNG_NOFMA_BODY _Pragma("clang fp contract(off)")
#else
#define RNG_NOFMA_BODY
#endif

RNG_FN float rng_bits_float(uint32_t b) {
    union { uint32_t u; float f; } x;
    x.u = b;
    return x.f;
}

/* ln u for u in (0, 1], a normal f32: u = 2^e m with m in [sqrt(1/2),
 * sqrt(2)), ln m = 2 atanh(s) with s = (m - 1) / (m + 1), |s| < 0.172. */
RNG_FN RNG_NOFMA float rng_lnf(float u) {
    RNG_NOFMA_BODY
    union { float f; uint32_t u; } x;
    x.f = u;
    int e = (int)(x.u >> 23) - 127;
    float m = rng_bits_float((x.u & 0x7fffffu) | 0x3f800000u);   /* [1, 2) */
    if (m > 1.41421356f) {
        m = RNG_FMUL(m, 0.5f);
        e++;
    }
    float s = RNG_FDIV(RNG_FSUB(m, 1.0f), RNG_FADD(m, 1.0f)), z = RNG_FMUL(s, s);
    float p = RNG_FADD(0.2857142857f, RNG_FMUL(z, 0.2222222222f));   /* 2/7 + 2/9 z */
    p = RNG_FADD(0.4f, RNG_FMUL(z, p));                                 /* 2/5 + ... */
    p = RNG_FADD(0.6666666667f, RNG_FMUL(z, p));                        /* 2/3 + ... */
    p = RNG_FADD(2.0f, RNG_FMUL(z, p));                                 /* 2 + ... */
    return RNG_FADD(RNG_FMUL((float)e, 0.693147182f), RNG_FMUL(s, p));
}

/* The two normals of words (a, b): out[0] = r cos θ, out[1] = r sin θ. */
RNG_FN RNG_NOFMA void rng_box_muller(uint32_t a, uint32_t b, float out[2]) {
    RNG_NOFMA_BODY
    float u = RNG_FMUL((float)((a >> 8) + 1u), 5.9604644775390625e-8f); /* 2^-24 */
    float r = RNG_FSQRT(RNG_FMUL(-2.0f, rng_lnf(u)));
    uint32_t q = b >> 30, k = (b >> 6) & 0xffffffu;
    /* y = π/2 g in [0, π/4], g = f or 1 - f (exact) */
    int hi = k >= 0x800000u;
    float g = RNG_FMUL((float)(hi ? 0x1000000u - k : k), 5.9604644775390625e-8f);
    float y = RNG_FMUL(g, 1.57079632679f), z = RNG_FMUL(y, y);
    float sp = RNG_FSUB(8.33333333e-3f, RNG_FMUL(z, RNG_FSUB(1.98412698e-4f, RNG_FMUL(z, 2.75573192e-6f))));
    float sy = RNG_FMUL(y, RNG_FSUB(1.0f, RNG_FMUL(z, RNG_FSUB(0.166666667f, RNG_FMUL(z, sp)))));
    float cp = RNG_FSUB(4.16666667e-2f, RNG_FMUL(z, RNG_FSUB(1.38888889e-3f, RNG_FMUL(z, 2.48015873e-5f))));
    float cy = RNG_FSUB(1.0f, RNG_FMUL(z, RNG_FSUB(0.5f, RNG_FMUL(z, cp))));
    float c = hi ? sy : cy, s = hi ? cy : sy; /* cos and sin of π/2 f */
    float cq = q == 0 ? c : q == 1 ? -s : q == 2 ? -c : s, sq = q == 0 ? s : q == 1 ? c : q == 2 ? -s : -c;
    out[0] = RNG_FMUL(r, cq);
    out[1] = RNG_FMUL(r, sq);
}

/* The four normals of block `block` (elements 4 block .. 4 block + 3). */
RNG_FN void rng_normal4(uint64_t seed, uint64_t stream, uint64_t block, float out[4]) {
    uint32_t w[4];
    rng_words(seed, stream, block, w);
    rng_box_muller(w[0], w[1], out);
    rng_box_muller(w[2], w[3], out + 2);
}

/* Standard normal for element `index` (one of rng_normal4's). */
RNG_FN float rng_normal(uint64_t seed, uint64_t stream, uint64_t index) {
    uint32_t w[4];
    float o[2];
    rng_words(seed, stream, index >> 2, w);
    rng_box_muller(w[index & 2], w[(index & 2) + 1], o);
    return o[index & 1];
}

/* Uniform in [0, 1) with 53 bits (exact: an integer times 2^-53). */
RNG_FN double rng_uniform53(const uint32_t w0, const uint32_t w1) {
    uint64_t x = ((uint64_t)w0 << 21) ^ (uint64_t)(w1 >> 11);
    x &= ((uint64_t)1 << 53) - 1;
    return (double)x * (1.0 / 9007199254740992.0);
}

RNG_FN double rng_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
    uint32_t w[4];
    rng_words(seed, stream, index, w);
    return rng_uniform53(w[0], w[1]);
}

#ifndef __CUDACC_RTC__

/* The stream of a named tensor: FNV-1a of its name. */
static inline uint64_t rng_name_stream(const char *name) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The value of element `index` of a tensor initialised by `init` with
 * arguments a, b: zeros, ones, constant(a), normal(std = a), uniform(a, b),
 * in f64 operations rounded one by one (trn_init_f32 in trainc_cuda.cuh
 * computes the same on the device). */
static inline RNG_NOFMA double rng_init_value(const char *init, double a, double b, uint64_t seed, uint64_t stream, uint64_t index) {
    RNG_NOFMA_BODY
    switch (init[0]) {
    case 'z': return 0.0;
    case 'o': return 1.0;
    case 'c': return a;
    case 'n': return a * rng_normal(seed, stream, index);
    case 'u': return a + (b - a) * rng_uniform(seed, stream, index);
    }
    return 0.0;
}
#endif

#endif /* TRAINC_PHILOX_H */
