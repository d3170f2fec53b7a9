/* tests/cuda/emu/cuda_emu.h — enough of CUDA for g++ to run the kernels
 * trainc generates (and runtime/trainc_cuda.cuh) on the CPU, so that a
 * machine without a GPU checks what they compute against the C backend
 * (tests/cuda/emu/emu_device.cpp, tests/cuda/emu/run.sh).
 *
 * A block's threads are fibers (ucontext) on one OS thread, a warp at a
 * time (below): __syncthreads and the warp collectives (__shfl_xor_sync,
 * __syncwarp, mma.sync, ldmatrix) wait, yielding, until every thread of the
 * block (of the warp) that has not returned got there, so block and warp
 * reductions, shared-memory tiles, tensor-core fragments and in-place
 * updates behave as on the GPU, deterministically.  __shared__ variables become
 * static: blocks run one after the other.  Float arithmetic is IEEE
 * single on the host (no FMA contraction at -O1 on x86-64 without -mfma);
 * expf and friends are glibc's, an ulp or so from CUDA's.  What this does
 * not show: races between blocks, the memory model, timing, resources.
 */
#ifndef TRAINC_CUDA_EMU_H
#define TRAINC_CUDA_EMU_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct emu_dim3 {
    unsigned x, y, z;
};
static emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

struct float4 {
    float x, y, z, w;
};
struct uint2 {
    unsigned x, y;
};
struct uint4 {
    unsigned x, y, z, w;
};
static inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

template <typename T> static inline T min(T a, T b) { return a < b ? a : b; }
template <typename T> static inline T max(T a, T b) { return a > b ? a : b; }

static inline unsigned __float_as_uint(float f) {
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float __uint_as_float(unsigned u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline float __int_as_float(int i) { return __uint_as_float((unsigned)i); }
static inline double __longlong_as_double(long long i) {
    double d;
    memcpy(&d, &i, 8);
    return d;
}
/* IEEE operations rounded to nearest, one at a time (the host's, with no
 * FMA contraction at -O1 on x86-64 without -mfma) */
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline float __double2float_rn(double d) { return (float)d; }
/* double -> float, rounded toward zero */
static inline float __double2float_rz(double d) {
    float f = (float)d;
    if (isfinite(d) && fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f);
    return f;
}

/* ---- the fibers of one block ---- */

#define EMU_MAXT 1024
#define EMU_STACK (128 * 1024)

static ucontext_t emu_sched, emu_ctx[EMU_MAXT];
static char *emu_stack[EMU_MAXT];
static int emu_nt, emu_cur, emu_progress;
static int emu_done[EMU_MAXT], emu_bgen[EMU_MAXT], emu_wgen[EMU_MAXT];
static uint64_t emu_wbuf[2][EMU_MAXT];
static void (*emu_entry)(void **);
static void **emu_args;

static inline void emu_yield(void) { swapcontext(&emu_ctx[emu_cur], &emu_sched); }

static int emu_cpn[EMU_MAXT];
static void emu_fiber(void) {
    emu_entry(emu_args);
    if (emu_cpn[emu_cur]) {
        fprintf(stderr, "emu: thread %d returned with %d cp.async copies never waited for\n", emu_cur, emu_cpn[emu_cur]);
        exit(2);
    }
    emu_done[emu_cur] = 1;
    emu_progress = 1;
}

static inline void __syncthreads(void) {
    int g = ++emu_bgen[emu_cur];
    emu_progress = 1;
    for (;;) {
        int all = 1;
        for (int j = 0; j < emu_nt && all; j++) all = emu_done[j] || emu_bgen[j] >= g;
        if (all) break;
        emu_yield();
    }
}

/* Every lane of the warp that has not returned gives v; each gets lane ^ o's. */
/* Waits until every lane of the calling thread's warp that has not
 * returned passed warp barrier number g (shuffles and __syncwarp count
 * together: lanes call them in one order). */
static inline void emu_warp_wait(int g) {
    int w0 = emu_cur - (emu_cur & 31);
    emu_progress = 1;
    for (;;) {
        int all = 1;
        for (int j = w0; j < w0 + 32 && j < emu_nt && all; j++) all = emu_done[j] || emu_wgen[j] > g;
        if (all) break;
        emu_yield();
    }
}

template <typename T> static inline T __shfl_xor_sync(unsigned mask, T v, int o) {
    (void)mask;
    int me = emu_cur, lane = me & 31, w0 = me - lane, g = emu_wgen[me]++;
    memcpy(&emu_wbuf[g & 1][me], &v, sizeof v);
    emu_warp_wait(g);
    T r;
    memcpy(&r, &emu_wbuf[g & 1][w0 + (lane ^ o)], sizeof r);
    return r;
}

/* Waits until every lane of the warp that has not returned got here. */
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
    (void)mask;
    emu_warp_wait(emu_wgen[emu_cur]++);
}

/* ---- mma.sync m16n8k16 and ldmatrix .x4 (the prelude's trn_mma, trn_ldsm4) ----
 * As the PTX ISA documents them, with g = lane / 4, t = lane % 4 and the
 * lower index in a register's lower 16 bits (runtime/trainc_cuda.cuh lists
 * the layouts): warp collectives, every lane's registers (or row address)
 * exchanged like a shuffle's value, then each lane computes its own part.
 * The products of two bf16 or f16 values are exact in f32; the sums run in
 * k order.  Row addresses must be 16-byte aligned, as on the GPU: a
 * violation stops the run. */
static uint32_t emu_mbuf[2][EMU_MAXT][6];

static inline float emu_b16(uint32_t reg, int hi, int f16) {
    uint32_t x = hi ? reg >> 16 : reg & 0xffffu;
    if (!f16) return __uint_as_float(x << 16);
    uint32_t sign = (x & 0x8000u) << 16, e = (x >> 10) & 0x1fu, m = x & 0x3ffu;
    if (e == 0) {
        float f = (float)m * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    return __uint_as_float(e == 31 ? sign | 0x7f800000u | (m << 13) : sign | ((e + 112) << 23) | (m << 13));
}

/* d (16 x 8 f32) += A (16 x 16) B (16 x 8), the warp's fragments */
static inline void emu_mma16816(float *d, const uint32_t *a, uint32_t b0, uint32_t b1, int f16) {
    int me = emu_cur, lane = me & 31, w0 = me - lane, gen = emu_wgen[me]++;
    uint32_t(*mb)[6] = emu_mbuf[gen & 1];
    memcpy(mb[me], a, 4 * sizeof *a);
    mb[me][4] = b0;
    mb[me][5] = b1;
    emu_warp_wait(gen);
    int g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 4; i++) {
        int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
        float s = d[i];
        for (int k = 0; k < 16; k++) {
            /* A[row][k]: lane (row % 8) * 4 + (k % 8) / 2, register (row >= 8) + 2 (k >= 8) */
            float x = emu_b16(mb[w0 + (row & 7) * 4 + ((k & 7) >> 1)][(row >= 8) + 2 * (k >= 8)], k & 1, f16);
            /* B[k][col]: lane col * 4 + (k % 8) / 2, b0 for k < 8, b1 beyond */
            float y = emu_b16(mb[w0 + col * 4 + ((k & 7) >> 1)][4 + (k >= 8)], k & 1, f16);
            s += x * y;
        }
        d[i] = s;
    }
}

/* r[i] = this lane's part of matrix i (8 x 8, 16-bit), whose rows lanes
 * 8i .. 8i+7 address; trans: the matrix transposed */
static inline void emu_ldsm4(uint32_t *r, const void *p, int trans) {
    if (((uintptr_t)p & 15) != 0) {
        fprintf(stderr, "emu: ldmatrix: row address %p not 16-byte aligned\n", p);
        exit(2);
    }
    int me = emu_cur, lane = me & 31, w0 = me - lane, gen = emu_wgen[me]++;
    emu_wbuf[gen & 1][me] = (uint64_t)(uintptr_t)p;
    emu_warp_wait(gen);
    int g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 4; i++) {
        uint32_t v[2];
        for (int j = 0; j < 2; j++) {
            int row = trans ? 2 * t + j : g, col = trans ? g : 2 * t + j;
            v[j] = ((const uint16_t *)(uintptr_t)emu_wbuf[gen & 1][w0 + 8 * i + row])[col];
        }
        r[i] = v[0] | v[1] << 16;
    }
}

/* ---- cp.async (the prelude's trn_cp16, trn_cp_commit, trn_cp_wait) ----
 * The hardware may complete a copy at any time between its issue and the
 * wait for its group (cp.async.wait_group N: all but the newest N groups).
 * Here a thread's copies in even-numbered groups happen at that wait, the
 * latest time (a kernel that reads a tile before waiting for it sees the
 * old contents), and those in odd-numbered groups at once, the earliest (a
 * kernel that loads into a tile other warps may still read, without a
 * barrier between, overwrites it under them). */
#define EMU_CPQ 256
struct EmuCp {
    void       *dst;
    const void *src; /* NULL: 16 zero bytes */
    int         group;
};
static EmuCp emu_cpq[EMU_MAXT][EMU_CPQ];
static int emu_cpgroup[EMU_MAXT];

static inline void emu_cp_async(void *dst, const void *src) {
    int me = emu_cur;
    if (((uintptr_t)dst & 15) != 0 || ((uintptr_t)src & 15) != 0) {
        fprintf(stderr, "emu: cp.async: %p <- %p not 16-byte aligned\n", dst, src);
        exit(2);
    }
    if (emu_cpn[me] == EMU_CPQ) {
        fprintf(stderr, "emu: cp.async: more than %d copies in flight in a thread\n", EMU_CPQ);
        exit(2);
    }
    if (emu_cpgroup[me] & 1) {
        if (src) memcpy(dst, src, 16);
        else memset(dst, 0, 16);
        return;
    }
    emu_cpq[me][emu_cpn[me]++] = EmuCp{dst, src, emu_cpgroup[me]};
}
static inline void emu_cp_commit(void) { emu_cpgroup[emu_cur]++; }
static inline void emu_cp_wait(int n) {
    int me = emu_cur, keep = 0;
    for (int i = 0; i < emu_cpn[me]; i++) {
        EmuCp c = emu_cpq[me][i];
        if (c.group < emu_cpgroup[me] - n) {
            if (c.src) memcpy(c.dst, c.src, 16);
            else memset(c.dst, 0, 16);
        } else
            emu_cpq[me][keep++] = c;
    }
    emu_cpn[me] = keep;
}

/* Runs one block of fn with the launch's blockDim: every thread a fiber. */
static void emu_run_block(void (*fn)(void **), void **args) {
    emu_nt = (int)(blockDim.x * blockDim.y * blockDim.z);
    if (emu_nt < 1 || emu_nt > EMU_MAXT) {
        fprintf(stderr, "emu: %d threads in a block\n", emu_nt);
        exit(2);
    }
    emu_entry = fn;
    emu_args = args;
    for (int i = 0; i < emu_nt; i++) {
        if (!emu_stack[i] && !(emu_stack[i] = (char *)malloc(EMU_STACK))) {
            fprintf(stderr, "emu: out of memory\n");
            exit(2);
        }
        getcontext(&emu_ctx[i]);
        emu_ctx[i].uc_stack.ss_sp = emu_stack[i];
        emu_ctx[i].uc_stack.ss_size = EMU_STACK;
        emu_ctx[i].uc_link = &emu_sched;
        makecontext(&emu_ctx[i], emu_fiber, 0);
        emu_done[i] = emu_bgen[i] = emu_wgen[i] = 0;
        emu_cpn[i] = emu_cpgroup[i] = 0;
    }
    /* A warp at a time, as far as it goes (its lanes round robin, until all
     * wait at a __syncthreads or have returned), then the next: warps drift
     * apart between barriers, as they may on the GPU, so a kernel that
     * writes shared memory another warp may still read, with no barrier
     * between, shows it.  Odd blocks take the warps in reverse order. */
    int nw = (emu_nt + 31) / 32, rev = (int)((blockIdx.x + blockIdx.y + blockIdx.z) & 1);
    for (int live = emu_nt; live > 0;) {
        int any = 0;
        for (int wi = 0; wi < nw; wi++) {
            int w = rev ? nw - 1 - wi : wi;
            do {
                emu_progress = 0;
                for (int i = 32 * w; i < 32 * w + 32 && i < emu_nt; i++) {
                    if (emu_done[i]) continue;
                    emu_cur = i;
                    threadIdx.x = (unsigned)i % blockDim.x;
                    threadIdx.y = (unsigned)i / blockDim.x % blockDim.y;
                    threadIdx.z = (unsigned)i / (blockDim.x * blockDim.y);
                    swapcontext(&emu_sched, &emu_ctx[i]);
                    if (emu_done[i]) live--;
                }
                any |= emu_progress;
            } while (emu_progress && live > 0);
        }
        if (!any && live > 0) {
            fprintf(stderr, "emu: deadlock: %d threads wait for each other\n", live);
            exit(2);
        }
    }
}

/* A launch: every block of the grid, one after the other. */
static void emu_launch(void (*fn)(void **), const unsigned grid[3], const unsigned block[3], void **args) {
    blockDim = emu_dim3{block[0], block[1], block[2]};
    gridDim = emu_dim3{grid[0], grid[1], grid[2]};
    for (unsigned z = 0; z < grid[2]; z++)
        for (unsigned y = 0; y < grid[1]; y++)
            for (unsigned x = 0; x < grid[0]; x++) {
                blockIdx = emu_dim3{x, y, z};
                emu_run_block(fn, args);
            }
}

/* A generated __global__ function, as tests/cuda/emu/dispatch.awk lists it
 * in emu_fns[]: its name, a wrapper taking the arguments as void *a[], how
 * many, its __launch_bounds__ (0: none). */
typedef struct EmuFn {
    const char *name;
    void (*fn)(void **);
    int nargs, max_threads;
} EmuFn;

#endif
