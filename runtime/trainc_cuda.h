/* runtime/trainc_cuda.h — what a compiled CUDA module looks like: the
 * contract between the code `trainc compile --target=cuda` generates and
 * the CUDA backend (runtime/cuda.c).  TrnModel.cuda points at one
 * TrnCudaModule.  Plain C, no CUDA header: the generated code and the
 * runtime build and run where no CUDA is installed.
 *
 * A schedule is a list of kernels (the kernel IR's, one per C-backend
 * kernel, in the same order), each carried out on the GPU by a few
 * launches of compiled functions, one cuBLASLt matrix product, one memset,
 * or a sequence of launches and products (linear_cross_entropy's chunks).  Every kernel also names the C function that computes the same
 * thing on the CPU, and the buffers it reads and writes, so that a test can
 * run one kernel on both and compare (tests/gpu/kcheck.c).
 */
#ifndef TRAINC_CUDA_H
#define TRAINC_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "trainc_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TRN_CUDA_ABI 6
#define TRN_CUDA_MAXARGS 16

/* A compiled image: cubin for one architecture, or PTX (JIT-compiled by the driver). */
typedef struct TrnCudaImage {
    const char          *arch;      /* "sm_90", "compute_80" */
    int                  sm;        /* 90 */
    int                  ptx;       /* 1: PTX text (NUL-terminated) */
    const unsigned char *data;
    size_t               size;
} TrnCudaImage;

/* One launch: function fns[fn] with grid x block threads and smem bytes of
 * dynamic shared memory; argument i is the device pointer arena + arg[i]. */
typedef struct TrnCudaLaunch {
    int      fn;
    unsigned grid[3], block[3];
    unsigned smem;
    int      nargs;
    int64_t  arg[TRN_CUDA_MAXARGS];
} TrnCudaLaunch;

/* A matrix product C[M,N] = alpha op(A)[M,K] op(B)[K,N] (+ bias[N]) +
 * beta C, row-major with leading dimensions, as the C backend's tk_gemm
 * computes it; the runtime maps it onto cuBLASLt's column-major matmul.
 * Offsets in bytes (arena), strides and leading dimensions in elements. */
typedef struct TrnCudaGemm {
    int     dtype;              /* TrnDType of A and B */
    int     cdtype;             /* TrnDType of C: dtype, or f32 for bf16/f16 inputs summed into f32 */
    int     ta, tb;             /* op = transpose */
    int64_t M, N, K;
    int64_t a, b, c;            /* byte offsets */
    int64_t lda, ldb, ldc;
    int64_t bias;               /* byte offset of the bias row, -1: none */
    int64_t scale;              /* byte offset of floats {alpha, beta} on the device, -1: alpha 1, beta 0 */
    int     nbatch;             /* batch dims (strided), 0: one product */
    int64_t batch[TRN_MAX_RANK];
    int64_t sa[TRN_MAX_RANK], sb[TRN_MAX_RANK], sc[TRN_MAX_RANK];
    int     accumulate;         /* 1: C += op(A) op(B) (beta 1: gradient accumulation into a state); scale < 0 */
    int     epi;                /* TRN_GEMM_GELU: C = gelu(op(A) op(B) + bias) (tanh form); TRN_GEMM_DGELU: C = gelu_grad(op(A) op(B), aux) */
    int64_t aux;                /* byte offset of the pre-activation [M,N] (ldc): gelu writes it there too (-1: not kept), dgelu reads it */
    int     bgrad;              /* TRN_BGRAD_A: dbias[M] = sum_k op(A)[m,k]; TRN_BGRAD_B: dbias[N] = sum_k op(B)[k,n] (epi is plain) */
    int64_t dbias;              /* byte offset of that bias gradient (C's dtype), -1: none */
    int     zero_c;             /* 1: C's M rows (ldc = N) are zeroed before the product: scale >= 0 and the beta
                                   there is 0, and cuBLASLt does not document that it leaves C unread when beta,
                                   read on the device, is 0 (0 times a NaN that C held is a NaN) */
} TrnCudaGemm;

/* A product's epilogue (cuBLASLt's GELU[_AUX][_BIAS] and DGELU).  Where
 * cuBLASLt has no algorithm for it, the runtime runs the product without
 * it (into aux when gelu keeps the pre-activation) and then the kernel's
 * one launch, which applies it (c = gelu(aux or c); c = gelu_grad(c, aux)). */
enum { TRN_GEMM_PLAIN, TRN_GEMM_GELU, TRN_GEMM_DGELU };

/* A product's bias-gradient epilogue (cuBLASLt's BGRADB for our A, BGRADA
 * for our B: its operands are ours swapped).  The summed operand is
 * row-major [K, len] (not transposed as stored: op(A) = A^T, op(B) = B).
 * Where cuBLASLt has no algorithm for it, the runtime runs the product
 * without it and then all the kernel's launches, which sum the columns
 * (through the workspace when they split the rows into groups). */
enum { TRN_BGRAD_NONE, TRN_BGRAD_A, TRN_BGRAD_B };

/* A buffer a kernel reads or writes (for the single-kernel checks): bytes
 * at an arena offset, its dtype, and the range random test data for it
 * should come from (integers: [lo, hi)). */
typedef struct TrnCudaBuf {
    int64_t off, bytes;
    int     dtype;
    double  lo, hi;
} TrnCudaBuf;

enum { TRN_CK_LAUNCH, TRN_CK_GEMM, TRN_CK_MEMSET, TRN_CK_STEPS };

/* One step of a TRN_CK_STEPS kernel: launch[index], or gemm[index]. */
typedef struct TrnCudaStep {
    int gemm;
    int index;
} TrnCudaStep;

typedef struct TrnCudaKernel {
    const char          *name;      /* the kernel IR's name: k12_layer_norm_gpt2_model_L31 */
    const char          *where;     /* "gpt2.model:31" (or "") */
    int                  kind;      /* TRN_CK_* */
    int                  nlaunch;
    const TrnCudaLaunch *launch;    /* TRN_CK_LAUNCH: run in order; TRN_CK_GEMM: its epilogue alone (TrnCudaGemm.epi, .bgrad), in order */
    int                  ngemm;
    const TrnCudaGemm   *gemm;      /* TRN_CK_GEMM: one */
    int                  nstep;
    const TrnCudaStep   *step;      /* TRN_CK_STEPS: launches and products in this order */
    int64_t              ms_off, ms_bytes;  /* TRN_CK_MEMSET: zero bytes at ms_off */
    void               (*cpu)(unsigned char *arena);   /* the C backend's kernel */
    int                  nreads, nwrites;
    const TrnCudaBuf    *reads, *writes;    /* writes: the results (a template's scratch is not listed) */
    int                  ndie;
    const TrnCudaBuf    *die;       /* temporaries read for the last time here: filled with 0xFF after it under TRN_FLAG_POISON */
    double               flops;     /* of one call, beyond its products' 2MNK: attention's 4 B H D per (query, key) pair
                                       (causal: the pairs at or below the diagonal), its backward twice that (what it
                                       recomputes not counted: the graph's count, ir/stats.c); 0 elsewhere (TRAINC_CUDA_PROFILE) */
} TrnCudaKernel;

typedef struct TrnCudaModule {
    int                  abi;               /* TRN_CUDA_ABI */
    const char          *hash;              /* of the CUDA source and options */
    int                  nimages;
    const TrnCudaImage  *images;
    int                  nfns;
    const char *const   *fns;               /* __global__ function names */
    int                  nkern[TRN_RUN__COUNT];
    const TrnCudaKernel *kern[TRN_RUN__COUNT];
    int64_t              workspace_off, workspace_bytes;  /* cuBLASLt workspace and kernel scratch */
    int                  tf32;              /* f32 GEMMs on TF32 tensor cores (train.precision = tf32) */
} TrnCudaModule;

/* ---- the device, one kernel at a time (runtime/cuda.c; for tests) ----
 * trn_cuda_backend() is built on these.  Every function returns 0, or -1
 * with a message naming the failed call in err. */
typedef struct TrnCudaDev TrnCudaDev;
TrnCudaDev *trn_cuda_open(const TrnModel *m, int flags, char *err, size_t errn);
void        trn_cuda_close(TrnCudaDev *g);
int         trn_cuda_upload(TrnCudaDev *g, int64_t off, const void *src, size_t n, char *err, size_t errn);
int         trn_cuda_download(TrnCudaDev *g, int64_t off, void *dst, size_t n, char *err, size_t errn);
int         trn_cuda_fill(TrnCudaDev *g, int64_t off, unsigned char byte, size_t n, char *err, size_t errn);
/* Runs kernel i of schedule `which` and waits for it. */
int         trn_cuda_run_kernel(TrnCudaDev *g, int which, int i, char *err, size_t errn);
/* Runs a whole schedule (graph-captured after its first run unless
 * TRAINC_CUDA_GRAPH=0; run eagerly where the capture fails, unless the
 * compute stream's synchronisation after it fails too: that error). */
int         trn_cuda_run(TrnCudaDev *g, int which, char *err, size_t errn);
/* Waits for the compute stream; a kernel's or copy's fault on the device
 * is said to be one of the work queued before (docs/cuda.md). */
int         trn_cuda_sync(TrnCudaDev *g, char *err, size_t errn);
/* A call of kernel k: its FLOPs (its products' 2MNK and TrnCudaKernel.flops)
 * and the bytes of the buffers it reads and writes (TRAINC_CUDA_PROFILE,
 * bench/roofline.c). */
void        trn_cuda_kernel_work(const TrnCudaKernel *k, double *flops, double *bytes);
/* Device name, compute capability, driver, image used, and how many products' epilogues run in cuBLASLt. */
const char *trn_cuda_describe(TrnCudaDev *g);

#ifdef __cplusplus
}
#endif
#endif /* TRAINC_CUDA_H */
