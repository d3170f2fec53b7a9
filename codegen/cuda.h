/* codegen/cuda.h — the CUDA backend of the compiler (docs/cuda.md).
 *
 *   emit_cuda.c   kernel IR -> CUDA C (one __global__ function per loop,
 *                 copy, fill and template kernel, identical ones shared) and
 *                 the launch tables: grid, block, shared memory and the
 *                 arena offsets of each launch's pointer arguments; GEMMs
 *                 as cuBLASLt descriptors
 *   nvrtc.c       CUDA C -> cubin per architecture and PTX, with NVRTC
 *                 opened by dlopen, cached by a hash of source and options;
 *                 the per-kernel resource report
 *
 * compile.c puts them together: the generated C of the CPU backend, plus
 * the images and tables as a TrnCudaModule (runtime/trainc_cuda.h) that
 * the TrnModel's `cuda` field points at.
 */
#ifndef TRAINC_CODEGEN_CUDA_H
#define TRAINC_CODEGEN_CUDA_H

#include "cg.h"
#include "trainc_cuda.h"

/* ---- emit_cuda.c ---- */

typedef struct CudaModule CudaModule;

/* Reserves the workspace region (cuBLASLt's workspace and kernel scratch)
 * at the end of p's arena: sets p->workspace_off / workspace_bytes, grows
 * arena_bytes and the report's workspace line. */
void        cg_cuda_plan_workspace(Program *p);
/* The bytes of the scratch buffer a linear_cross_entropy kernel needs on
 * the GPU (lower.c gives its kernel that much for the cuda target). */
int64_t     cg_cuda_linear_ce_scratch(const Node *n);
/* Generates the CUDA C of every kernel of every schedule of p.  NULL after
 * reporting (at the kernel's .model line) a kernel it cannot generate. */
CudaModule *cg_cuda_emit(Program *p, Diag *d);
void        cg_cuda_free(CudaModule *m);
const char *cg_cuda_source(const CudaModule *m);          /* the .cu text */
int         cg_cuda_nfns(const CudaModule *m);             /* __global__ functions */
const char *cg_cuda_fn_name(const CudaModule *m, int i);
bool        cg_cuda_fn_is_template(const CudaModule *m, int i);
int         cg_cuda_nkernels(const CudaModule *m);         /* kernels of the program (every schedule) */
/* Schedule `sched`'s kernels, the launches and cuBLASLt products a run of
 * it makes (a memset counts as a launch; a product's epilogue kernels,
 * run only where cuBLASLt has no epilogue for it, do not count). */
void        cg_cuda_sched_counts(const CudaModule *m, int sched, int *kernels, int *launches, int *products);

/* ---- nvrtc.c ---- */

typedef struct CudaImage {
    char           arch[24];    /* "sm_90", or "compute_80" for PTX */
    int            sm;          /* 90 */
    bool           ptx;
    unsigned char *data;
    size_t         size;
    char          *log;         /* NVRTC's log (ptxas -v: registers, spills) */
    bool           cached;      /* came from the cache */
} CudaImage;

typedef struct CudaBuild {
    int       n;
    CudaImage img[8];
    double    seconds;          /* wall time of the compilation (cache hits included) */
    char      cache[4200];      /* "cache DIR", "no cache: WHY" (the -v line) */
} CudaBuild;

/* One row of the resource report. */
typedef struct CudaRes {
    char name[160], arch[16];
    int  regs, smem, stack, spill_st, spill_ld;
} CudaRes;

/* The NVRTC library: NULL with a message in err when it cannot be opened
 * (TRAINC_NVRTC names it; else the toolkit CMake found, /usr/local/cuda). */
void *cg_nvrtc_open(char *err, size_t errn);
/* Compiles src (with the prelude headers from cg_runtime_dir()) to a cubin
 * for each architecture of archs ("sm_80,sm_90") and PTX for the lowest.
 * Uses the cache unless TRAINC_NO_CACHE is set to something other than "" or "0". */
bool cg_nvrtc_build(const char *src, const char *archs, CudaBuild *out, Diag *d);
/* Whether this NVRTC compiles for every architecture of archs (the checks
 * cg_nvrtc_build makes first; an error in d when not).  NVRTC open. */
bool cg_nvrtc_check_archs(const char *archs, Diag *d);
void cg_cuda_build_free(CudaBuild *b);
/* Parses the ptxas lines of every image's log; returns the row count (*rows malloc'd). */
int  cg_cuda_resources(const CudaBuild *b, CudaRes **rows);
/* Writes the report (one line per kernel and architecture). */
void cg_cuda_print_report(FILE *f, const CudaModule *m, const CudaBuild *b);
/* The cache folder ($TRAINC_CACHE_DIR, $XDG_CACHE_HOME/trainc, ~/.cache/trainc, /tmp/trainc-cache-UID). */
const char *cg_cuda_cache_dir(void);

/* The C descriptor (trainc_cuda.h's TrnCudaModule named trn_cuda_module_<id>)
 * with the images embedded; appended to the C backend's output. */
bool cg_cuda_emit_host(FILE *f, const CudaModule *m, const CudaBuild *b, Diag *d);
const char *cg_cuda_module_symbol(const CudaModule *m);

#endif
