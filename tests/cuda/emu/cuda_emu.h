/* tests/cuda/emu/cuda_emu.h — enough of CUDA for g++ to run the kernels
 * trainc generates (and runtime/trainc_cuda.cuh) on the CPU, so that a
 * machine without a GPU checks what they compute against the C backend
 * (tests/cuda/emu/emu_device.cpp, tests/cuda/emu/run.sh).
 *
 * A block's threads are fibers (a stack each, emu_switch) on one OS
 * thread, a warp at a time (below): __syncthreads and the warp collectives
 * (__shfl_xor_sync, __syncwarp, mma.sync, ldmatrix) wait, yielding, until
 * every thread of the block (of the warp) that has not returned got there,
 * so block and warp reductions, shared-memory tiles, tensor-core fragments
 * and in-place updates behave as on the GPU, deterministically. __shared__
 * variables become static, filled with 0xFF bytes before each block
 * (emu_find_shared): blocks run one after the other, in one of two orders
 * (emu_order, below): run a launch in both and compare, and a block that
 * reads what another block of the launch writes, or two blocks that write
 * one element differently, show (emu_launch_orders, below). Float
 * arithmetic is IEEE single on the host (no FMA contraction at -O1 on
 * x86-64 without -mfma); expf and friends are glibc's, an ulp or so from
 * CUDA's. What this does not show: the memory model, timing, resources.
 */
#ifndef TRAINC_CUDA_EMU_H
#define TRAINC_CUDA_EMU_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <dlfcn.h>
#include <elf.h>

/* With -fsanitize=thread (tests/cuda/emu/run.sh, EMU_TSAN=1) the emulation
 * tells ThreadSanitizer what a GPU orders: each thread of a block is a
 * fiber of its own; __syncthreads (for the block) and __syncwarp (for the
 * warp) order what each thread did before it before what every other one
 * does after it; nothing else does (not a shuffle, mma.sync or ldmatrix,
 * as in CUDA's memory model).  So two threads of a block that access one
 * element, one of them writing, with no barrier between, are reported,
 * whether or not the emulation's order makes the values differ.  One block
 * is ordered after the one before it, and launches after each other and
 * the host (races between blocks: the two orders, below).  The
 * emulation's own bookkeeping is not instrumented (EMU_INTERNAL). */
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define EMU_TSAN 1
#define EMU_INTERNAL __attribute__((noinline, no_sanitize_thread))
#else
#define EMU_TSAN 0
#define EMU_INTERNAL inline
static inline void __tsan_acquire(void *) {}
static inline void __tsan_release(void *) {}
#endif

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
#if EMU_TSAN
/* the scheduler sets them for each thread it resumes: the kernels read
 * them through uninstrumented calls */
static emu_dim3 emu_threadIdx, emu_blockIdx, emu_blockDim, emu_gridDim;
EMU_INTERNAL static emu_dim3 emu_get_dim(const emu_dim3 *d) { return *d; }
#define threadIdx emu_get_dim(&emu_threadIdx)
#define blockIdx  emu_get_dim(&emu_blockIdx)
#define blockDim  emu_get_dim(&emu_blockDim)
#define gridDim   emu_get_dim(&emu_gridDim)
#define EMU_SET(d, v) (emu_##d = (v))
#else
static emu_dim3 threadIdx, blockIdx, blockDim, gridDim;
#define EMU_SET(d, v) (d = (v))
#endif

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
static inline float __fadd_rn(float a, float b) { return a + b; }
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

/* Switching between the scheduler and a thread.  glibc's swapcontext
 * makes a system call (the signal mask) at every switch, most of the
 * emulation's time; on x86-64, emu_switch below saves the callee-saved
 * registers on the stack it leaves, its stack pointer in *from, and
 * resumes the stack at `to` (about ten instructions).  Under
 * ThreadSanitizer or AddressSanitizer, which follow swapcontext, and on
 * other machines, swapcontext. */
#if !EMU_TSAN && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define EMU_FAST_SWITCH 1
extern "C" void emu_switch(void **from, void *to);
__asm__(".text\n"
        ".p2align 4\n"
        ".local emu_switch\n"
        ".type emu_switch, @function\n"
        "emu_switch:\n"
        "    pushq %rbp\n    pushq %rbx\n    pushq %r12\n    pushq %r13\n    pushq %r14\n    pushq %r15\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    popq %r15\n    popq %r14\n    popq %r13\n    popq %r12\n    popq %rbx\n    popq %rbp\n"
        "    ret\n"
        ".size emu_switch, .-emu_switch\n");
static void *emu_sched_sp, *emu_sp[EMU_MAXT], *emu_end_sp;
#define EMU_TO_SCHED()   emu_switch(&emu_sp[emu_cur], emu_sched_sp)
#define EMU_TO_THREAD(i) emu_switch(&emu_sched_sp, emu_sp[i])
#else
#define EMU_FAST_SWITCH 0
static ucontext_t emu_sched, emu_ctx[EMU_MAXT];
#define EMU_TO_SCHED()   swapcontext(&emu_ctx[emu_cur], &emu_sched)
#define EMU_TO_THREAD(i) swapcontext(&emu_sched, &emu_ctx[i])
#endif
static char *emu_stack[EMU_MAXT];
static int emu_nt, emu_cur, emu_progress;
static int emu_done[EMU_MAXT], emu_bgen[EMU_MAXT], emu_wgen[EMU_MAXT];
static uint64_t emu_wbuf[2][EMU_MAXT];
static void (*emu_entry)(void **);
static void **emu_args;
/* The order a launch runs in.  0: blocks by increasing index; in a block,
 * the warps by increasing index in even blocks, decreasing in odd ones;
 * the lanes of a warp by increasing index.  1: each of these reversed.
 * Any two blocks, two warps of a block or two lanes of a warp that run
 * one after the other in one order run the other way round in the other. */
static int emu_order;

/* ThreadSanitizer's fibers (EMU_TSAN): the scheduler's, each thread's;
 * synchronisation objects: the end of a block, and the barriers of the
 * block and of each warp (two each: a thread may arrive at the next
 * barrier before another left this one) */
#if EMU_TSAN
static void *emu_tsched, *emu_tfib[EMU_MAXT];
#endif
static char emu_block_end, emu_bsync[2], emu_wsync[EMU_MAXT / 32][2];

EMU_INTERNAL static void emu_yield(void) {
#if EMU_TSAN
    __tsan_switch_to_fiber(emu_tsched, __tsan_switch_to_fiber_no_sync);
#endif
    EMU_TO_SCHED();
}

static int emu_cpn[EMU_MAXT];
EMU_INTERNAL static void emu_fiber(void) {
    emu_entry(emu_args);
    if (emu_cpn[emu_cur]) {
        fprintf(stderr, "emu: thread %d returned with %d cp.async copies never waited for\n", emu_cur, emu_cpn[emu_cur]);
        exit(2);
    }
    emu_done[emu_cur] = 1;
    emu_progress = 1;
    __tsan_release(&emu_block_end);
#if EMU_TSAN
    __tsan_switch_to_fiber(emu_tsched, __tsan_switch_to_fiber_no_sync); /* back through uc_link */
#endif
#if EMU_FAST_SWITCH
    emu_switch(&emu_end_sp, emu_sched_sp); /* never resumed */
    __builtin_unreachable();
#endif
}

EMU_INTERNAL static void __syncthreads(void) {
    int g = ++emu_bgen[emu_cur];
    __tsan_release(&emu_bsync[g & 1]);
    emu_progress = 1;
    for (;;) {
        int all = 1;
        for (int j = 0; j < emu_nt && all; j++) all = emu_done[j] || emu_bgen[j] >= g;
        if (all) break;
        emu_yield();
    }
    __tsan_acquire(&emu_bsync[g & 1]);
}

/* Waits until every lane of the calling thread's warp that has not
 * returned passed warp barrier number g (shuffles and __syncwarp count
 * together: lanes call them in one order). */
EMU_INTERNAL static void emu_warp_wait(int g) {
    int w0 = emu_cur - (emu_cur & 31);
    emu_progress = 1;
    for (;;) {
        int all = 1;
        for (int j = w0; j < w0 + 32 && j < emu_nt && all; j++) all = emu_done[j] || emu_wgen[j] > g;
        if (all) break;
        emu_yield();
    }
    /* every collective here names the full warp (mask 0xffffffff): a lane
     * that returned before it, or a warp of fewer than 32 threads, is
     * undefined on a GPU (it may hang or read garbage); stop the run */
    for (int j = w0; j < w0 + 32; j++)
        if (j >= emu_nt || (emu_done[j] && emu_wgen[j] <= g)) {
            fprintf(stderr, "emu: a full-warp collective (shuffle, __syncwarp, ldmatrix, mma) with lane %d of its warp %s\n", j - w0,
                    j >= emu_nt ? "missing (a block of fewer threads)" : "returned before it");
            exit(2);
        }
}

/* Every lane of the warp that has not returned gives v; each gets lane ^ o's. */
template <typename T> EMU_INTERNAL static T __shfl_xor_sync(unsigned mask, T v, int o) {
    (void)mask;
    int me = emu_cur, lane = me & 31, w0 = me - lane, g = emu_wgen[me]++;
    memcpy(&emu_wbuf[g & 1][me], &v, sizeof v);
    emu_warp_wait(g);
    T r;
    memcpy(&r, &emu_wbuf[g & 1][w0 + (lane ^ o)], sizeof r);
    return r;
}

/* Waits until every lane of the warp that has not returned got here. */
EMU_INTERNAL static void __syncwarp(unsigned mask = 0xffffffffu) {
    (void)mask;
    char *w = emu_wsync[emu_cur >> 5];
    int g = emu_wgen[emu_cur]++;
    __tsan_release(&w[g & 1]);
    emu_warp_wait(g);
    __tsan_acquire(&w[g & 1]);
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
EMU_INTERNAL static void emu_mma16816(float *d, const uint32_t *a, uint32_t b0, uint32_t b1, int f16) {
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

/* Accesses of memory the emulation makes for a thread (ldmatrix's reads,
 * cp.async's copies): instrumented under EMU_TSAN, as the thread's own. */
#if EMU_TSAN
#define EMU_ACCESS __attribute__((noinline))
#else
#define EMU_ACCESS inline
#endif
EMU_ACCESS static uint32_t emu_rd16(const void *p, int i) { return ((const uint16_t *)p)[i]; }
EMU_ACCESS static void emu_copy16(void *dst, const void *src) {
    uint64_t *d = (uint64_t *)dst;
    const uint64_t *s = (const uint64_t *)src;
    d[0] = s ? s[0] : 0;
    d[1] = s ? s[1] : 0;
}

/* p, checked for the alignment a GPU's vector access of n bytes needs
 * (trainc_cuda.cuh TRN_ALIGNED: it faults there; here the vector types are
 * plain structs and a misaligned access would pass). */
template <typename T> static T *emu_aligned(T *p, int n) {
    if (((uintptr_t)p & (uintptr_t)(n - 1)) != 0) {
        fprintf(stderr, "emu: %d-byte vector access at %p, not %d-byte aligned\n", n, (const void *)p, n);
        exit(2);
    }
    return p;
}

/* r[i] = this lane's part of matrix i (8 x 8, 16-bit), whose rows lanes
 * 8i .. 8i+7 address; trans: the matrix transposed */
EMU_INTERNAL static void emu_ldsm4(uint32_t *r, const void *p, int trans) {
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
            v[j] = emu_rd16((const void *)(uintptr_t)emu_wbuf[gen & 1][w0 + 8 * i + row], col);
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

EMU_INTERNAL static void emu_cp_async(void *dst, const void *src) {
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
        emu_copy16(dst, src);
        return;
    }
    emu_cpq[me][emu_cpn[me]++] = EmuCp{dst, src, emu_cpgroup[me]};
}
EMU_INTERNAL static void emu_cp_commit(void) { emu_cpgroup[emu_cur]++; }
EMU_INTERNAL static void emu_cp_wait(int n) {
    int me = emu_cur, keep = 0;
    for (int i = 0; i < emu_cpn[me]; i++) {
        EmuCp c = emu_cpq[me][i];
        if (c.group < emu_cpgroup[me] - n)
            emu_copy16(c.dst, c.src);
        else
            emu_cpq[me][keep++] = c;
    }
    emu_cpn[me] = keep;
}

/* ---- shared memory: undefined when a block starts ----
 * On the GPU a block's __shared__ variables hold whatever was there; here
 * they are static and would hold what the block before left (often the
 * very values a kernel that reads before it writes wants).  So before each
 * block they are filled with 0xFF bytes (a NaN in every float type, -1 in
 * the integers).  They are found in the symbol table of the object the
 * emulation is linked into (an executable, or the fake driver's library):
 * the function-local statics of C++ (mangled _ZZ...) in writable memory,
 * which are the kernels' __shared__ variables (the emulation's own state is
 * at file scope, and a function-local static of a function named emu_* or
 * of main is left alone; the C backend is C).  TRAINC_EMU_NO_FILL=1: no
 * fill (tests/cuda/emu/controls.sh shows what it finds). */
struct EmuRange {
    char  *p;
    size_t n;
};
static EmuRange *emu_sh;
static int emu_nsh = -1;

static void emu_find_shared(void) {
    emu_nsh = 0;
    const char *nofill = getenv("TRAINC_EMU_NO_FILL");
    if (nofill && *nofill && strcmp(nofill, "0") != 0) return;
    Dl_info dl;
    if (!dladdr((void *)&emu_nsh, &dl)) return;
    FILE *f = fopen(dl.dli_fname && *dl.dli_fname ? dl.dli_fname : "/proc/self/exe", "rb"); /* the program's name is "" */
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *img = len > 0 ? (char *)malloc((size_t)len) : NULL;
    size_t got = img ? fread(img, 1, (size_t)len, f) : 0;
    fclose(f);
    if (!img || got != (size_t)len || len < (long)sizeof(Elf64_Ehdr)) {
        free(img);
        return;
    }
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
    uintptr_t base = eh->e_type == ET_EXEC ? 0 : (uintptr_t)dl.dli_fbase; /* symbols' values: absolute, or from the load address */
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
    int cap = 0, tables = 0;
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB) continue;
        tables++;
        const Elf64_Sym *sym = (const Elf64_Sym *)(img + sh[i].sh_offset);
        const char *str = img + sh[sh[i].sh_link].sh_offset;
        for (size_t j = 0; j < sh[i].sh_size / sizeof *sym; j++) {
            const Elf64_Sym *y = &sym[j];
            if (ELF64_ST_TYPE(y->st_info) != STT_OBJECT || y->st_size == 0 || y->st_shndx == SHN_UNDEF || y->st_shndx >= eh->e_shnum) continue;
            const char *nm = str + y->st_name;
            if (strncmp(nm, "_ZZ", 3) != 0 || (sh[y->st_shndx].sh_flags & (SHF_WRITE | SHF_ALLOC)) != (SHF_WRITE | SHF_ALLOC)) continue;
            char *nm1; /* the enclosing function: its name's length, the name */
            long nlen = strtol(nm + 3 + (nm[3] == 'L'), &nm1, 10);
            if ((nlen > 4 && strncmp(nm1, "emu_", 4) == 0) || (nlen == 4 && strncmp(nm1, "main", 4) == 0)) continue;
            if (emu_nsh == cap && !(emu_sh = (EmuRange *)realloc(emu_sh, sizeof *emu_sh * (size_t)(cap = cap ? 2 * cap : 64)))) exit(2);
            emu_sh[emu_nsh++] = EmuRange{(char *)(base + y->st_value), (size_t)y->st_size};
        }
    }
    if (!tables) /* stripped: the fill is lost, not silently */
        fprintf(stderr, "emu: %s has no symbol table: shared memory is not filled before each block\n", dl.dli_fname);
    free(img);
}

/* Runs one block of fn with the launch's blockDim: every thread a fiber. */
EMU_INTERNAL static void emu_run_block(void (*fn)(void **), void **args) {
    emu_nt = (int)(blockDim.x * blockDim.y * blockDim.z);
    if (emu_nt < 1 || emu_nt > EMU_MAXT) {
        fprintf(stderr, "emu: %d threads in a block\n", emu_nt);
        exit(2);
    }
    emu_entry = fn;
    emu_args = args;
    if (emu_nsh < 0) emu_find_shared();
    for (int i = 0; i < emu_nsh; i++) memset(emu_sh[i].p, 0xff, emu_sh[i].n);
    for (int i = 0; i < emu_nt; i++) {
        if (!emu_stack[i] && !(emu_stack[i] = (char *)malloc(EMU_STACK))) {
            fprintf(stderr, "emu: out of memory\n");
            exit(2);
        }
#if EMU_FAST_SWITCH
        /* a stack emu_switch resumes by popping six registers and
         * returning into emu_fiber, with the stack aligned as at a call */
        void **top = (void **)(((uintptr_t)emu_stack[i] + EMU_STACK) & ~(uintptr_t)15);
        top[-1] = 0;                    /* emu_fiber's return address: it never returns */
        top[-2] = (void *)emu_fiber;
        for (int r = 3; r <= 8; r++) top[-r] = 0;
        emu_sp[i] = top - 8;
#else
        getcontext(&emu_ctx[i]);
        emu_ctx[i].uc_stack.ss_sp = emu_stack[i];
        emu_ctx[i].uc_stack.ss_size = EMU_STACK;
        emu_ctx[i].uc_link = &emu_sched;
        makecontext(&emu_ctx[i], emu_fiber, 0);
#endif
        emu_done[i] = emu_bgen[i] = emu_wgen[i] = 0;
        emu_cpn[i] = emu_cpgroup[i] = 0;
#if EMU_TSAN
        if (!emu_tfib[i]) emu_tfib[i] = __tsan_create_fiber(0);
#endif
    }
#if EMU_TSAN
    emu_tsched = __tsan_get_current_fiber();
#endif
    /* A warp at a time, as far as it goes (its lanes round robin, until all
     * wait at a __syncthreads or have returned), then the next: warps drift
     * apart between barriers, as they may on the GPU, so a kernel that
     * writes shared memory another warp may still read, with no barrier
     * between, shows it.  Odd blocks take the warps in reverse order
     * (even ones in emu_order 1). */
    int nw = (emu_nt + 31) / 32, rev = (int)((blockIdx.x + blockIdx.y + blockIdx.z) & 1) ^ emu_order;
    for (int live = emu_nt; live > 0;) {
        int any = 0;
        for (int wi = 0; wi < nw; wi++) {
            int w = rev ? nw - 1 - wi : wi, nl = min(32, emu_nt - 32 * w);
            do {
                emu_progress = 0;
                for (int li = 0; li < nl; li++) {
                    int i = 32 * w + (emu_order ? nl - 1 - li : li);
                    if (emu_done[i]) continue;
                    emu_cur = i;
                    EMU_SET(threadIdx, (emu_dim3{(unsigned)i % blockDim.x, (unsigned)i / blockDim.x % blockDim.y,
                                                 (unsigned)i / (blockDim.x * blockDim.y)}));
#if EMU_TSAN
                    /* what the scheduler did (the dims set, the blocks before
                     * this one ended) before what the thread does next */
                    __tsan_switch_to_fiber(emu_tfib[i], 0);
#endif
                    EMU_TO_THREAD(i);
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
    __tsan_acquire(&emu_block_end);
}

/* A launch: every block of the grid, one after the other, in emu_order. */
static void emu_launch(void (*fn)(void **), const unsigned grid[3], const unsigned block[3], void **args) {
    EMU_SET(blockDim, (emu_dim3{block[0], block[1], block[2]}));
    EMU_SET(gridDim, (emu_dim3{grid[0], grid[1], grid[2]}));
    uint64_t nb = (uint64_t)grid[0] * grid[1] * grid[2];
    for (uint64_t j = 0; j < nb; j++) {
        uint64_t b = emu_order ? nb - 1 - j : j;
        EMU_SET(blockIdx, (emu_dim3{(unsigned)(b % grid[0]), (unsigned)(b / grid[0] % grid[1]), (unsigned)(b / ((uint64_t)grid[0] * grid[1]))}));
        emu_run_block(fn, args);
    }
}

/* One launch from mem[0, n) (all the launch reads and writes) in both
 * orders: in emu_order 0, then from a copy of the memory as it was, in
 * emu_order 1.  Blocks have no way to wait for each other (the kernels
 * use no atomics), so a launch whose result depends on the order has a
 * block reading what another one writes, or two writing one element
 * differently: on the GPU, a race; so has a block whose threads race
 * where the order changes a value.  Returns how many bytes of mem differ
 * (0: none; mem is then the result), the first at *first.
 * TRAINC_EMU_ONE_ORDER=1: emu_order 0 only. */
static unsigned char *emu_before, *emu_once; /* at file scope, as all the emulation's state: not filled (emu_find_shared) */
static size_t emu_ocap;
#define EMU_ORDERS_DIFFER "its blocks, warps and lanes in reverse order give another result"
static size_t emu_launch_orders(void (*fn)(void **), const unsigned grid[3], const unsigned block[3], void **args, unsigned char *mem,
                                size_t n, size_t *first) {
    const char *one = getenv("TRAINC_EMU_ONE_ORDER");
    *first = 0;
    if (one && *one && strcmp(one, "0") != 0) {
        emu_launch(fn, grid, block, args);
        return 0;
    }
    if (n > emu_ocap) {
        free(emu_before), free(emu_once);
        if (!(emu_before = (unsigned char *)malloc(n)) || !(emu_once = (unsigned char *)malloc(n))) {
            fprintf(stderr, "emu: out of memory\n");
            exit(2);
        }
        emu_ocap = n;
    }
    memcpy(emu_before, mem, n);
    emu_order = 0;
    emu_launch(fn, grid, block, args);
    memcpy(emu_once, mem, n);
    memcpy(mem, emu_before, n);
    emu_order = 1;
    emu_launch(fn, grid, block, args);
    emu_order = 0;
    if (memcmp(emu_once, mem, n) == 0) return 0;
    size_t ndiff = 0;
    for (size_t i = n; i-- > 0;)
        if (emu_once[i] != mem[i]) *first = i, ndiff++;
    return ndiff;
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
