/* tests/cuda/emu/emu_device.cpp — trainc_cuda.h's device API (open,
 * upload, download, fill, run one kernel) on an emulated GPU: the arena is
 * host memory, launches run the generated CUDA C compiled by g++ with
 * cuda_emu.h, cuBLASLt products run as their TrnCudaGemm descriptor says
 * (in double, rounded once to C's dtype; a GELU, bias-gradient or bias
 * epilogue by the kernels the runtime falls back to, the product run
 * without it, its bias too), memsets are memsets; each
 * launch runs in both of the emulation's orders, which must agree (launch,
 * below).  With it,
 * tests/gpu/kcheck.c (its calls renamed by emu_rename.h) compares every
 * kernel of a model with the C backend's on a machine without a GPU.
 * (runtime/cuda.c itself, and whole training steps, run on the fake driver
 * of tests/cuda/fake.)
 *
 * Built by tests/cuda/emu/run.sh with
 *   -DEMU_KERNELS='"MODEL.cu"'      the generated kernels (cuda_emit ... cuda)
 *   -DEMU_DISPATCH='"MODEL.emu.h"'  a wrapper per __global__ function and the
 *                                   table emu_fns[] (made by run.sh from the
 *                                   signatures), to call one with the
 *                                   launch's argument pointers */
#include "cuda_emu.h"

#include EMU_KERNELS

#include EMU_DISPATCH

extern "C" {
#include "trainc_cuda.h"
}

struct EmuDev {
    const TrnModel      *m;
    const TrnCudaModule *cm;
    unsigned char       *arena;
    int                 *fn;      /* module function -> emu_fns index */
    double              *ad, *bd; /* a product's operands (gemm) */
    size_t               acap, bcap;
};

static int fail(char *err, size_t errn, const char *msg) {
    snprintf(err, errn, "%s", msg);
    return -1;
}

static float ld(const unsigned char *p, int dt, int64_t i) {
    switch (dt) {
    case TRN_F32: return ((const float *)p)[i];
    case TRN_BF16: return trn_f32(((const trn_bf16 *)p)[i]);
    case TRN_F16: return trn_f32(((const trn_f16 *)p)[i]);
    default: return 0;
    }
}

static double ldd(const unsigned char *p, int dt, int64_t i) { return dt == TRN_F64 ? ((const double *)p)[i] : ld(p, dt, i); }

static void st(unsigned char *p, int dt, int64_t i, double v) {
    switch (dt) {
    case TRN_F32: ((float *)p)[i] = (float)v; break;
    case TRN_F64: ((double *)p)[i] = v; break;
    case TRN_BF16: trn_st((trn_bf16 *)p + i, v); break;
    case TRN_F16: trn_st((trn_f16 *)p + i, v); break;
    }
}

/* C[M,N] = alpha op(A) op(B) + beta C (+ bias[N] unless plain), per
 * batch, as runtime/cuda.c asks cuBLASLt */
static void gemm(EmuDev *g, const TrnCudaGemm *m, bool plain) {
    int es = m->dtype == TRN_F32 ? 4 : m->dtype == TRN_F64 ? 8 : 2, ces = m->cdtype == TRN_F32 ? 4 : m->cdtype == TRN_F64 ? 8 : 2;
    double alpha = 1, beta = m->accumulate ? 1 : 0;
    if (m->scale >= 0) {
        alpha = ((const float *)(g->arena + m->scale))[0];
        beta = ((const float *)(g->arena + m->scale))[1];
    }
    int64_t nb = 1;
    for (int i = 0; i < m->nbatch; i++) nb *= m->batch[i];
    for (int64_t b = 0; b < nb; b++) {
        int64_t ea = 0, eb = 0, ec = 0, rem = b;
        for (int i = m->nbatch - 1; i >= 0; i--) {
            int64_t ix = rem % m->batch[i];
            rem /= m->batch[i];
            ea += ix * m->sa[i], eb += ix * m->sb[i], ec += ix * m->sc[i];
        }
        const unsigned char *A = g->arena + m->a + ea * es, *B = g->arena + m->b + eb * es;
        /* an epilogue: the product alone (into the pre-activation when a
         * GELU keeps it), then the kernel's launch, as runtime/cuda.c does
         * where cuBLASLt has no algorithm with it (tests/cuda/fake
         * emulates cuBLASLt's own) */
        unsigned char *C = g->arena + (plain && m->epi == TRN_GEMM_GELU && m->aux >= 0 ? m->aux : m->c) + ec * ces;
        /* op(A)'s rows and op(B)'s columns as doubles, k contiguous in
         * both (the same sums in the same order as reading them in place,
         * without a cache miss an element where an operand is strided) */
        size_t an = (size_t)(m->M * m->K), bn = (size_t)(m->N * m->K);
        if (an > g->acap && !(g->ad = (double *)realloc(g->ad, sizeof(double) * (g->acap = an)))) exit(2);
        if (bn > g->bcap && !(g->bd = (double *)realloc(g->bd, sizeof(double) * (g->bcap = bn)))) exit(2);
        for (int64_t i = 0; i < m->M; i++)
            for (int64_t k = 0; k < m->K; k++) g->ad[i * m->K + k] = ldd(A, m->dtype, m->ta ? k * m->lda + i : i * m->lda + k);
        for (int64_t j = 0; j < m->N; j++)
            for (int64_t k = 0; k < m->K; k++) g->bd[j * m->K + k] = ldd(B, m->dtype, m->tb ? j * m->ldb + k : k * m->ldb + j);
        for (int64_t i = 0; i < m->M; i++)
            for (int64_t j = 0; j < m->N; j++) {
                const double *ar = g->ad + i * m->K, *bc = g->bd + j * m->K;
                double acc = 0;
                for (int64_t k = 0; k < m->K; k++) acc += ar[k] * bc[k];
                double c = 0;
                if (beta != 0) c = m->cdtype == TRN_F64 ? ((const double *)C)[i * m->ldc + j] : ld(C, m->cdtype, i * m->ldc + j);
                double v = alpha * acc + beta * c;
                if (m->bias >= 0 && !plain)
                    v += m->cdtype == TRN_F64 ? ((const double *)(g->arena + m->bias))[j] : ld(g->arena + m->bias, m->cdtype, j);
                st(C, m->cdtype, i * m->ldc + j, v);
            }
    }
}

/* One launch, in both of the emulation's orders (emu_launch_orders):
 * results that differ fail the kernel. */
static int launch(EmuDev *g, const TrnCudaKernel *k, const TrnCudaLaunch *l, char *err, size_t errn) {
    void *args[TRN_CUDA_MAXARGS];
    for (int a = 0; a < l->nargs; a++) args[a] = g->arena + l->arg[a];
    const EmuFn *f = &emu_fns[g->fn[l->fn]];
    unsigned threads = l->block[0] * l->block[1] * l->block[2];
    if (f->max_threads > 0 && threads > (unsigned)f->max_threads) { /* the GPU refuses the launch */
        snprintf(err, errn, "%s: %u threads a block, __launch_bounds__ says at most %d", f->name, threads, f->max_threads);
        return -1;
    }
    size_t at, ndiff = emu_launch_orders(f->fn, l->grid, l->block, args, g->arena, (size_t)g->m->arena_bytes, &at);
    if (!ndiff) return 0;
    char where[160] = "outside the kernel's outputs";
    for (int w = 0; w < k->nwrites; w++)
        if ((int64_t)at >= k->writes[w].off && (int64_t)at < k->writes[w].off + k->writes[w].bytes)
            snprintf(where, sizeof where, "byte %lld of output %d (%lld bytes at %lld)", (long long)at - (long long)k->writes[w].off, w,
                     (long long)k->writes[w].bytes, (long long)k->writes[w].off);
    snprintf(err, errn, "%s (grid %u x %u x %u, block %u x %u x %u): " EMU_ORDERS_DIFFER ": %zu bytes differ, the first at arena offset %zu, %s",
             f->name, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2], ndiff, at, where);
    return -1;
}

extern "C" {

EmuDev *emu_cuda_open(const TrnModel *m, int flags, char *err, size_t errn) {
    if (!m || !m->cuda) {
        fail(err, errn, "no CUDA module");
        return NULL;
    }
    const TrnCudaModule *cm = (const TrnCudaModule *)m->cuda;
    if (cm->abi != TRN_CUDA_ABI) {
        fail(err, errn, "the CUDA module's ABI differs");
        return NULL;
    }
    EmuDev *g = (EmuDev *)calloc(1, sizeof *g);
    g->m = m;
    g->cm = cm;
    g->arena = (unsigned char *)malloc((size_t)m->arena_bytes + 1);
    g->fn = (int *)calloc((size_t)g->cm->nfns + 1, sizeof(int));
    if (!g->arena || !g->fn) {
        fail(err, errn, "out of memory");
        return NULL;
    }
    memset(g->arena, flags & TRN_FLAG_POISON ? 0xff : 0, (size_t)m->arena_bytes);
    int nemu = (int)(sizeof emu_fns / sizeof emu_fns[0]);
    for (int i = 0; i < g->cm->nfns; i++) {
        g->fn[i] = -1;
        for (int j = 0; j < nemu; j++)
            if (strcmp(emu_fns[j].name, g->cm->fns[i]) == 0) g->fn[i] = j;
        if (g->fn[i] < 0) {
            snprintf(err, errn, "the emulation lacks function %s", g->cm->fns[i]);
            return NULL;
        }
    }
    return g;
}

void emu_cuda_close(EmuDev *g) {
    if (!g) return;
    free(g->arena);
    free(g->fn);
    free(g->ad);
    free(g->bd);
    free(g);
}

static int range(EmuDev *g, int64_t off, size_t n, char *err, size_t errn) {
    if (off < 0 || (uint64_t)off + n > (uint64_t)g->m->arena_bytes) return fail(err, errn, "outside the arena");
    return 0;
}

int emu_cuda_upload(EmuDev *g, int64_t off, const void *src, size_t n, char *err, size_t errn) {
    if (range(g, off, n, err, errn)) return -1;
    memcpy(g->arena + off, src, n);
    return 0;
}

int emu_cuda_download(EmuDev *g, int64_t off, void *dst, size_t n, char *err, size_t errn) {
    if (range(g, off, n, err, errn)) return -1;
    memcpy(dst, g->arena + off, n);
    return 0;
}

int emu_cuda_fill(EmuDev *g, int64_t off, unsigned char byte, size_t n, char *err, size_t errn) {
    if (range(g, off, n, err, errn)) return -1;
    memset(g->arena + off, byte, n);
    return 0;
}

int emu_cuda_run_kernel(EmuDev *g, int which, int i, char *err, size_t errn) {
    if (which < 0 || which >= TRN_RUN__COUNT || i < 0 || i >= g->cm->nkern[which]) return fail(err, errn, "no such kernel");
    const TrnCudaKernel *k = &g->cm->kern[which][i];
    switch (k->kind) {
    case TRN_CK_MEMSET: memset(g->arena + k->ms_off, 0, (size_t)k->ms_bytes); break;
    case TRN_CK_GEMM: {
        const TrnCudaGemm *m = &k->gemm[0];
        bool epi = m->epi != TRN_GEMM_PLAIN || m->bgrad != TRN_BGRAD_NONE;
        if (epi && k->nlaunch < 1) return fail(err, errn, "a product with an epilogue and no kernel for it");
        /* (a bias alone: the kernel after too, where the module has one) */
        bool plain = k->nlaunch > 0 && (epi || m->bias >= 0);
        gemm(g, m, plain);
        for (int l = 0; plain && l < k->nlaunch; l++)
            if (launch(g, k, &k->launch[l], err, errn)) return -1;
        break;
    }
    case TRN_CK_STEPS:
        for (int s = 0; s < k->nstep; s++) {
            if (k->step[s].gemm) gemm(g, &k->gemm[k->step[s].index], false);
            else if (launch(g, k, &k->launch[k->step[s].index], err, errn)) return -1;
        }
        break;
    default:
        for (int l = 0; l < k->nlaunch; l++)
            if (launch(g, k, &k->launch[l], err, errn)) return -1;
    }
    return 0;
}

const char *emu_cuda_describe(EmuDev *g) {
    (void)g;
    return "the CPU emulation of tests/cuda/emu";
}

}
