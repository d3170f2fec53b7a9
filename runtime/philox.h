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
 * Box-Muller transform of rng_normal (host only: parameters are initialised
 * on the host and copied to the device).
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

#ifndef __CUDACC_RTC__
/* Uniform in [0, 1) with 53 bits (host). */
static inline double rng_uniform53(const uint32_t w0, const uint32_t w1) {
    uint64_t x = ((uint64_t)w0 << 21) ^ (uint64_t)(w1 >> 11);
    x &= ((uint64_t)1 << 53) - 1;
    return (double)x * (1.0 / 9007199254740992.0);
}

/* Standard normal for element `index` (host; Box-Muller on two 53-bit uniforms). */
static inline double rng_normal(uint64_t seed, uint64_t stream, uint64_t index) {
    uint32_t w[4];
    rng_words(seed, stream, index, w);
    double u1 = rng_uniform53(w[0], w[1]), u2 = rng_uniform53(w[2], w[3]);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925286766559 * u2);
}

static inline double rng_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
    uint32_t w[4];
    rng_words(seed, stream, index, w);
    return rng_uniform53(w[0], w[1]);
}

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
 * arguments a, b: zeros, ones, constant(a), normal(std = a), uniform(a, b). */
static inline double rng_init_value(const char *init, double a, double b, uint64_t seed, uint64_t stream, uint64_t index) {
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
