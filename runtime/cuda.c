/* runtime/cuda.c — the CUDA backend (docs/cuda.md).
 *
 * The CUDA driver (libcuda.so.1) and cuBLASLt (libcublasLt.so.13) are
 * opened with dlopen when a CUDA device is first asked for: neither is a
 * load-time dependency, so an executable compiled with --target=cuda starts
 * and trains on the CPU of a machine with no GPU and no driver, and
 * `--device=cuda` there fails with a message saying why.
 *
 * One device allocation holds the whole arena (the compiler's memory plan,
 * cuBLASLt's workspace included).  The module's cubin for the device's
 * architecture is loaded (else its PTX, which the driver compiles); each
 * schedule runs on one stream, eagerly the first time and then as a CUDA
 * graph captured from its second run on.  Inputs are uploaded from pinned
 * host memory on a second stream that the compute stream waits for.
 *
 * Every driver and cuBLASLt call is checked: a failure names the call, this
 * file and line, and the kernel and .model line it was for.  Kernel faults
 * surface at the next synchronisation (a graph capture they make fail
 * synchronises: without_graphs); TRAINC_CUDA_SYNC=1 synchronises after
 * every kernel so the message names the one that failed.
 *
 * Environment: TRAINC_CUDA_DEVICE (device index, default 0),
 * TRAINC_CUDA_GRAPH=0 (no graphs), TRAINC_CUDA_SYNC=1, TRAINC_LIBCUDA and
 * TRAINC_CUBLASLT (paths of the libraries), TRAINC_CUDA_PROFILE=FILE (time
 * every kernel with events, no graphs; a JSON line per kernel into FILE
 * after every run of a schedule, the longest first, the first run of each
 * schedule left out once it has run again: write_profile),
 * TRAINC_CUDA_GELU_EPILOGUE=0 (products run without cuBLASLt's GELU
 * epilogues, the module's kernels after them), TRAINC_CUDA_BGRAD_EPILOGUE=0
 * (the same for the bias gradients), TRAINC_CUDA_BIAS_EPILOGUE=0 (the same
 * for the biases of products without a GELU).
 */
#include "rt.h"
#include "trainc_cuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef TRAINC_CUDA_LIBDIR
#define TRAINC_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

/* ---- the part of cuda.h and cublasLt.h used here (tests/cuda/test_abi.c
 * checks these numbers against the real headers) ---- */

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;

enum {
    TRN_CU_ATTR_CC_MAJOR = 75,            /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
    TRN_CU_ATTR_CC_MINOR = 76,            /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR */
    TRN_CU_ATTR_SM_COUNT = 16,            /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
    TRN_CU_FUNC_MAX_DYN_SMEM = 8,         /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
    TRN_CU_STREAM_NON_BLOCKING = 1,       /* CU_STREAM_NON_BLOCKING */
    TRN_CU_EVENT_DISABLE_TIMING = 2,      /* CU_EVENT_DISABLE_TIMING */
    TRN_CU_CAPTURE_RELAXED = 2,           /* CU_STREAM_CAPTURE_MODE_RELAXED */
    TRN_CUDA_ERROR_OUT_OF_MEMORY = 2,     /* CUDA_ERROR_OUT_OF_MEMORY */
    TRN_CUDA_ERROR_NO_DEVICE = 100,       /* CUDA_ERROR_NO_DEVICE */
    TRN_CUDA_ERROR_STUB_LIBRARY = 34,     /* CUDA_ERROR_STUB_LIBRARY */
    TRN_CU_JIT_INFO_LOG_BUFFER = 3,       /* CU_JIT_INFO_LOG_BUFFER */
    TRN_CU_JIT_INFO_LOG_SIZE = 4,         /* CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES */
    TRN_CU_JIT_ERROR_LOG_BUFFER = 5,      /* CU_JIT_ERROR_LOG_BUFFER */
    TRN_CU_JIT_ERROR_LOG_SIZE = 6,        /* CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES */
    TRN_CUDA_ERROR_ILLEGAL_ADDRESS = 700, /* CUDA_ERROR_ILLEGAL_ADDRESS */
    TRN_CUDA_ERROR_LAUNCH_TIMEOUT = 702,  /* CUDA_ERROR_LAUNCH_TIMEOUT */
    TRN_CUDA_ERROR_ASSERT = 710,          /* CUDA_ERROR_ASSERT */
    TRN_CUDA_ERROR_HW_STACK = 714,        /* CUDA_ERROR_HARDWARE_STACK_ERROR */
    TRN_CUDA_ERROR_ILLEGAL_INSTR = 715,   /* CUDA_ERROR_ILLEGAL_INSTRUCTION */
    TRN_CUDA_ERROR_MISALIGNED = 716,      /* CUDA_ERROR_MISALIGNED_ADDRESS */
    TRN_CUDA_ERROR_ADDRESS_SPACE = 717,   /* CUDA_ERROR_INVALID_ADDRESS_SPACE */
    TRN_CUDA_ERROR_INVALID_PC = 718,      /* CUDA_ERROR_INVALID_PC */
    TRN_CUDA_ERROR_LAUNCH_FAILED = 719,   /* CUDA_ERROR_LAUNCH_FAILED */
    TRN_CUDA_ERROR_TMEM_LEAK = 721,       /* CUDA_ERROR_TENSOR_MEMORY_LEAK */
};

/* The errors of a kernel that faulted as it ran, which cuda.h says of
 * each: "any further CUDA work will return the same error".  A
 * synchronisation that returns one reports a fault of work queued before
 * it, not its own (SYNC_FAULT). */
static int device_fault(CUresult r) {
    switch (r) {
    case TRN_CUDA_ERROR_ILLEGAL_ADDRESS: case TRN_CUDA_ERROR_LAUNCH_TIMEOUT: case TRN_CUDA_ERROR_ASSERT: case TRN_CUDA_ERROR_HW_STACK:
    case TRN_CUDA_ERROR_ILLEGAL_INSTR: case TRN_CUDA_ERROR_MISALIGNED: case TRN_CUDA_ERROR_ADDRESS_SPACE: case TRN_CUDA_ERROR_INVALID_PC:
    case TRN_CUDA_ERROR_LAUNCH_FAILED: case TRN_CUDA_ERROR_TMEM_LEAK: return 1;
    default: return 0;
    }
}

typedef int cublasStatus_t;
typedef struct cublasLtContext *cublasLtHandle_t;
typedef struct { uint64_t data[32]; } *cublasLtMatmulDesc_t;
typedef struct { uint64_t data[8]; } *cublasLtMatrixLayout_t;
typedef struct { uint64_t data[8]; } *cublasLtMatmulPreference_t;
typedef struct { uint64_t data[8]; } cublasLtMatmulAlgo_t;
typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t               workspaceSize;
    cublasStatus_t       state;
    float                wavesCount;
    int                  reserved[4];
} cublasLtMatmulHeuristicResult_t;

enum {
    TRN_LT_OP_N = 0, TRN_LT_OP_T = 1,                         /* cublasOperation_t */
    TRN_LT_COMPUTE_32F = 68, TRN_LT_COMPUTE_32F_FAST_TF32 = 77, TRN_LT_COMPUTE_64F = 70,
    TRN_LT_R_32F = 0, TRN_LT_R_64F = 1, TRN_LT_R_16F = 2, TRN_LT_R_16BF = 14,   /* cudaDataType */
    TRN_LT_DESC_POINTER_MODE = 2, TRN_LT_DESC_TRANSA = 3, TRN_LT_DESC_TRANSB = 4, TRN_LT_DESC_EPILOGUE = 7,
    TRN_LT_DESC_BIAS_POINTER = 8, TRN_LT_DESC_BIAS_DATA_TYPE = 26,
    TRN_LT_POINTER_MODE_DEVICE = 1,
    TRN_LT_DESC_EPILOGUE_AUX_POINTER = 11, TRN_LT_DESC_EPILOGUE_AUX_LD = 12,
    TRN_LT_EPILOGUE_DEFAULT = 1, TRN_LT_EPILOGUE_BIAS = 4, TRN_LT_EPILOGUE_GELU = 32, TRN_LT_EPILOGUE_GELU_BIAS = 36,
    TRN_LT_EPILOGUE_AUX = 128, TRN_LT_EPILOGUE_DGELU = 192, TRN_LT_EPILOGUE_BGRADA = 256, TRN_LT_EPILOGUE_BGRADB = 512,
    TRN_LT_LAYOUT_BATCH_COUNT = 5, TRN_LT_LAYOUT_BATCH_OFFSET = 6,
    TRN_LT_PREF_MAX_WORKSPACE = 1, TRN_LT_PREF_ALIGN_A = 5, TRN_LT_PREF_ALIGN_B = 6, TRN_LT_PREF_ALIGN_C = 7, TRN_LT_PREF_ALIGN_D = 8,
    TRN_LT_STATUS_EXECUTION_FAILED = 13, /* cublasStatus_t: "cuda reported execution error from the device" */
};

/* ---- the libraries, opened once per process ---- */

typedef struct Drv {
    void *so;
    CUresult (*Init)(unsigned);
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*GetErrorString)(CUresult, const char **);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*ModuleLoadDataEx)(CUmodule *, const void *, unsigned, int *, void **);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*FuncSetAttribute)(CUfunction, int, int);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemAllocHost)(void **, size_t);
    CUresult (*MemFreeHost)(void *);
    CUresult (*MemGetInfo)(size_t *, size_t *);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*StreamWaitEvent)(CUstream, CUevent, unsigned);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*EventDestroy)(CUevent);
    CUresult (*EventElapsedTime)(float *, CUevent, CUevent);   /* optional: TRAINC_CUDA_PROFILE only */
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, void **);
    CUresult (*StreamBeginCapture)(CUstream, int);
    CUresult (*StreamEndCapture)(CUstream, CUgraph *);
    CUresult (*GraphInstantiate)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*GraphLaunch)(CUgraphExec, CUstream);
    CUresult (*GraphExecDestroy)(CUgraphExec);
    CUresult (*GraphDestroy)(CUgraph);
} Drv;

typedef struct Lt {
    void *so;
    cublasStatus_t (*Create)(cublasLtHandle_t *);
    cublasStatus_t (*Destroy)(cublasLtHandle_t);
    const char *(*GetStatusName)(cublasStatus_t);
    cublasStatus_t (*MatmulDescCreate)(cublasLtMatmulDesc_t *, int, int);
    cublasStatus_t (*MatmulDescDestroy)(cublasLtMatmulDesc_t);
    cublasStatus_t (*MatmulDescSetAttribute)(cublasLtMatmulDesc_t, int, const void *, size_t);
    cublasStatus_t (*MatrixLayoutCreate)(cublasLtMatrixLayout_t *, int, uint64_t, uint64_t, int64_t);
    cublasStatus_t (*MatrixLayoutDestroy)(cublasLtMatrixLayout_t);
    cublasStatus_t (*MatrixLayoutSetAttribute)(cublasLtMatrixLayout_t, int, const void *, size_t);
    cublasStatus_t (*MatmulPreferenceCreate)(cublasLtMatmulPreference_t *);
    cublasStatus_t (*MatmulPreferenceDestroy)(cublasLtMatmulPreference_t);
    cublasStatus_t (*MatmulPreferenceSetAttribute)(cublasLtMatmulPreference_t, int, const void *, size_t);
    cublasStatus_t (*MatmulAlgoGetHeuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                             cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                                             cublasLtMatmulHeuristicResult_t *, int *);
    cublasStatus_t (*Matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *, cublasLtMatrixLayout_t, const void *,
                             cublasLtMatrixLayout_t, const void *, const void *, cublasLtMatrixLayout_t, void *, cublasLtMatrixLayout_t,
                             const cublasLtMatmulAlgo_t *, void *, size_t, CUstream);
} Lt;

static Drv drv;
static Lt lt;
static pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;
static char drv_err[1024], lt_err[1024];
static int  drv_absent;  /* libcuda did not load (not: too old) */
static int drv_tried, lt_tried;

static void *open_first(const char *const *names, int n, char *tried, size_t tn) {
    tried[0] = 0;
    for (int i = 0; i < n; i++) {
        if (!names[i] || !*names[i]) continue;
        void *so = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (so) return so;
        size_t len = strlen(tried);
        snprintf(tried + len, tn - len, "%s%s", len ? ", " : "", names[i]);
    }
    return NULL;
}

#define LOAD(lib, field, sym)                                                                              \
    do {                                                                                                   \
        *(void **)(&lib.field) = dlsym(lib.so, sym);                                                       \
        if (!lib.field) {                                                                                  \
            snprintf(msg, sizeof msg, "%s lacks %s", libname, sym);                                        \
            goto fail;                                                                                     \
        }                                                                                                  \
    } while (0)

/* Opens libcuda.so.1; 0 or -1 with drv_err set. */
static int open_driver(void) {
    pthread_mutex_lock(&lib_lock);
    if (drv_tried) {
        pthread_mutex_unlock(&lib_lock);
        return drv.so ? 0 : -1;
    }
    drv_tried = 1;
    const char *names[] = {getenv("TRAINC_LIBCUDA"), "libcuda.so.1", "libcuda.so"};
    char tried[512], msg[512];
    const char *libname = "libcuda.so.1";
    drv.so = open_first(names, 3, tried, sizeof tried);
    if (!drv.so) {
        snprintf(drv_err, sizeof drv_err, "no CUDA driver on this machine (dlopen of %s failed: %s)", tried, dlerror());
        drv_absent = 1;
        pthread_mutex_unlock(&lib_lock);
        return -1;
    }
    LOAD(drv, Init, "cuInit");
    LOAD(drv, GetErrorName, "cuGetErrorName");
    LOAD(drv, GetErrorString, "cuGetErrorString");
    LOAD(drv, DriverGetVersion, "cuDriverGetVersion");
    LOAD(drv, DeviceGetCount, "cuDeviceGetCount");
    LOAD(drv, DeviceGet, "cuDeviceGet");
    LOAD(drv, DeviceGetName, "cuDeviceGetName");
    LOAD(drv, DeviceGetAttribute, "cuDeviceGetAttribute");
    LOAD(drv, DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    LOAD(drv, DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    LOAD(drv, CtxSetCurrent, "cuCtxSetCurrent");
    LOAD(drv, ModuleLoadDataEx, "cuModuleLoadDataEx");
    LOAD(drv, ModuleUnload, "cuModuleUnload");
    LOAD(drv, ModuleGetFunction, "cuModuleGetFunction");
    LOAD(drv, FuncSetAttribute, "cuFuncSetAttribute");
    LOAD(drv, MemAlloc, "cuMemAlloc_v2");
    LOAD(drv, MemFree, "cuMemFree_v2");
    LOAD(drv, MemAllocHost, "cuMemAllocHost_v2");
    LOAD(drv, MemFreeHost, "cuMemFreeHost");
    LOAD(drv, MemGetInfo, "cuMemGetInfo_v2");
    LOAD(drv, MemcpyDtoH, "cuMemcpyDtoH_v2");
    LOAD(drv, MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    LOAD(drv, MemsetD8Async, "cuMemsetD8Async");
    LOAD(drv, StreamCreate, "cuStreamCreate");
    LOAD(drv, StreamDestroy, "cuStreamDestroy_v2");
    LOAD(drv, StreamSynchronize, "cuStreamSynchronize");
    LOAD(drv, StreamWaitEvent, "cuStreamWaitEvent");
    LOAD(drv, EventCreate, "cuEventCreate");
    LOAD(drv, EventRecord, "cuEventRecord");
    LOAD(drv, EventSynchronize, "cuEventSynchronize");
    LOAD(drv, EventDestroy, "cuEventDestroy_v2");
    *(void **)(&drv.EventElapsedTime) = dlsym(drv.so, "cuEventElapsedTime_v2");
    if (!drv.EventElapsedTime) *(void **)(&drv.EventElapsedTime) = dlsym(drv.so, "cuEventElapsedTime");
    LOAD(drv, LaunchKernel, "cuLaunchKernel");
    LOAD(drv, StreamBeginCapture, "cuStreamBeginCapture_v2");
    LOAD(drv, StreamEndCapture, "cuStreamEndCapture");
    LOAD(drv, GraphInstantiate, "cuGraphInstantiateWithFlags");
    LOAD(drv, GraphLaunch, "cuGraphLaunch");
    LOAD(drv, GraphExecDestroy, "cuGraphExecDestroy");
    LOAD(drv, GraphDestroy, "cuGraphDestroy");
    pthread_mutex_unlock(&lib_lock);
    return 0;
fail:
    snprintf(drv_err, sizeof drv_err, "the CUDA driver is too old: %.480s", msg);
    dlclose(drv.so);
    drv.so = NULL;
    pthread_mutex_unlock(&lib_lock);
    return -1;
}

/* Opens cuBLASLt (only when the model has GEMMs); 0 or -1 with lt_err set. */
static int open_cublaslt(void) {
    pthread_mutex_lock(&lib_lock);
    if (lt_tried) {
        pthread_mutex_unlock(&lib_lock);
        return lt.so ? 0 : -1;
    }
    lt_tried = 1;
    const char *names[] = {getenv("TRAINC_CUBLASLT"), "libcublasLt.so.13", TRAINC_CUDA_LIBDIR "/libcublasLt.so.13",
                           "/usr/local/cuda/lib64/libcublasLt.so.13", "/usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13"};
    char tried[1024], msg[512];
    const char *libname = "libcublasLt.so.13";
    lt.so = open_first(names, 5, tried, sizeof tried);
    if (!lt.so) {
        snprintf(lt_err, sizeof lt_err, "cuBLASLt not found (dlopen of %s failed: %s); set TRAINC_CUBLASLT to its path", tried, dlerror());
        pthread_mutex_unlock(&lib_lock);
        return -1;
    }
    LOAD(lt, Create, "cublasLtCreate");
    LOAD(lt, Destroy, "cublasLtDestroy");
    LOAD(lt, GetStatusName, "cublasLtGetStatusName");
    LOAD(lt, MatmulDescCreate, "cublasLtMatmulDescCreate");
    LOAD(lt, MatmulDescDestroy, "cublasLtMatmulDescDestroy");
    LOAD(lt, MatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute");
    LOAD(lt, MatrixLayoutCreate, "cublasLtMatrixLayoutCreate");
    LOAD(lt, MatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy");
    LOAD(lt, MatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute");
    LOAD(lt, MatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate");
    LOAD(lt, MatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy");
    LOAD(lt, MatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
    LOAD(lt, MatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
    LOAD(lt, Matmul, "cublasLtMatmul");
    pthread_mutex_unlock(&lib_lock);
    return 0;
fail:
    snprintf(lt_err, sizeof lt_err, "%s", msg);
    dlclose(lt.so);
    lt.so = NULL;
    pthread_mutex_unlock(&lib_lock);
    return -1;
}
#undef LOAD

/* ---- checked calls: "cuX(what) failed at runtime/cuda.c:LINE: NAME: text [kernel k12 at gpt2.model:31]" ---- */

/* What a call that returns a fault of the device (device_fault) says
 * besides: the fault is sticky, so the call that returns it is not the
 * one that faulted, but one after it (a synchronisation, or any call: a
 * launch, a product, a copy). */
#define SYNC_FAULT "a kernel or copy queued before this point faulted on the device; TRAINC_CUDA_SYNC=1 names the kernel"

static int cu_fail(CUresult r, const char *call, const char *what, const char *where, int line, char *err, size_t errn) {
    const char *name = "?", *text = "?";
    if (drv.GetErrorName) drv.GetErrorName(r, &name);
    if (drv.GetErrorString) drv.GetErrorString(r, &text);
    char w[2600];
    snprintf(w, sizeof w, "%s", where ? where : "");
    if (device_fault(r) && !strstr(w, SYNC_FAULT)) {
        size_t n = strlen(w);
        snprintf(w + n, sizeof w - n, "%s%s", n ? "; " : "", SYNC_FAULT);
    }
    return rt_fail(err, errn, "%s(%s) failed at %s:%d: %s: %s%s%s%s", call, what ? what : "", rt_srcname(__FILE__), line, name ? name : "?",
                   text ? text : "?", *w ? " [" : "", w, *w ? "]" : "");
}
#define CU(call, args, what, where)                                                                   \
    do {                                                                                              \
        CUresult r_ = drv.call args;                                                                  \
        if (r_ != 0) return cu_fail(r_, "cu" #call, (what), (where), __LINE__, err, errn);            \
    } while (0)

static int lt_fail(cublasStatus_t s, const char *call, const char *what, int line, char *err, size_t errn) {
    return rt_fail(err, errn, "%s(%s) failed at %s:%d: %s", call, what ? what : "", rt_srcname(__FILE__), line,
                   lt.GetStatusName ? lt.GetStatusName(s) : "?");
}
#define LT(call, args, what)                                                                          \
    do {                                                                                              \
        cublasStatus_t s_ = lt.call args;                                                             \
        if (s_ != 0) return lt_fail(s_, "cublasLt" #call, (what), __LINE__, err, errn);              \
    } while (0)

/* ---- the device ---- */

typedef struct GemmRt {
    const TrnCudaGemm     *m;
    cublasLtMatmulDesc_t   desc;
    cublasLtMatrixLayout_t la, lb, lc;   /* cuBLASLt's A (our B), B (our A), C = D */
    int                    borrowed;     /* desc, layouts and algo are an earlier GemmRt's */
    cublasLtMatmulAlgo_t   algo;
    int                    nouter;       /* products issued (outer batch dims looped) */
    int64_t                oa, ob, oc;   /* element strides between them */
    int64_t                oshape[TRN_MAX_RANK], osa[TRN_MAX_RANK], osb[TRN_MAX_RANK], osc[TRN_MAX_RANK];
    int                    nob;
    int                    esize, cesize; /* bytes per element of A and B, of C */
    int                    plain;        /* the product without its GELU or bias-gradient epilogue (no algorithm has it): the kernel's launches apply it */
} GemmRt;

typedef struct KernRt {
    CUdeviceptr *argv;                   /* per launch: TRN_CUDA_MAXARGS values */
    void       **argp;                   /* pointers to them */
    GemmRt      *gemm;                   /* one per product */
    int          ngemm;
} KernRt;

struct TrnCudaDev {
    const TrnModel      *m;
    const TrnCudaModule *cm;
    CUdevice             dev;
    CUcontext            ctx;
    CUmodule             mod;
    CUfunction          *fn;
    unsigned            *fn_dyn;         /* per function: the dynamic shared memory it has been allowed (0: the default) */
    CUdeviceptr          arena;
    CUstream             st, up;
    CUevent              upev, done;
    unsigned char       *pinned;         /* staging for input uploads, one slot per input */
    CUfunction           init_fn;        /* trn_init_f32 (NULL: initialisation on the host) */
    CUdeviceptr          initp;          /* its parameters, 8 words per tensor */
    unsigned long long  *initw;          /* their host copy (read by asynchronous copies) */
    int64_t             *slot;           /* per tensor: offset in pinned, -1 none */
    cublasLtHandle_t     lt;
    KernRt              *kr[TRN_RUN__COUNT];
    CUgraphExec          graph[TRN_RUN__COUNT];
    int                  runs[TRN_RUN__COUNT];
    int                  use_graphs, sync_each;
    int                  poison;            /* TRN_FLAG_POISON: dead temporaries filled with 0xFF */
    const char          *prof_path;      /* TRAINC_CUDA_PROFILE */
    int                  prof_how;       /* how it is written: PROF_* (write_profile) */
    CUevent             *pev[TRN_RUN__COUNT];   /* per schedule: nkern + 1 timing events */
    double              *pms[TRN_RUN__COUNT];   /* per kernel: milliseconds summed over the runs after the first */
    double              *pms0[TRN_RUN__COUNT];  /* per kernel: milliseconds of the first run (write_profile) */
    const TrnCudaImage  *img;
    char                 desc[256];
    size_t               desc_base;         /* desc's length before the epilogues' counts (describe_epilogues) */
    int                  capturing;         /* a graph capture is enqueuing (capture) */
    int                  nepi, nepi_plain;  /* products with a GELU epilogue; those run without it, and a kernel after */
    int                  nbg, nbg_plain;    /* the same for bias-gradient epilogues */
    int                  nbias, nbias_plain; /* the same for bias epilogues without a GELU (one with is a GELU one) */
    int                  plain_gelu;        /* TRAINC_CUDA_GELU_EPILOGUE=0: every GELU one so */
    int                  plain_bgrad;       /* TRAINC_CUDA_BGRAD_EPILOGUE=0: every bias-gradient one so */
    int                  plain_bias;        /* TRAINC_CUDA_BIAS_EPILOGUE=0: every bias one so */
    int                  no_beta0_fill;     /* TRAINC_CUDA_BETA0_FILL=0: a product whose beta on the device is 0 leaves C as it was (TrnCudaGemm.zero_c) */
    double               t_driver, t_module, t_arena, t_gemm; /* the opening's phases, seconds (rt_cuda_phases) */
};

static int select_image(TrnCudaDev *g, int major, int minor, char *err, size_t errn) {
    const TrnCudaModule *cm = g->cm;
    int dsm = major * 10 + minor;
    const TrnCudaImage *best = NULL;
    for (int i = 0; i < cm->nimages; i++) {
        const TrnCudaImage *im = &cm->images[i];
        if (!im->ptx && im->sm / 10 == major && im->sm <= dsm && (!best || im->sm > best->sm)) best = im;
    }
    for (int i = 0; i < cm->nimages && !best; i++) {
        const TrnCudaImage *im = &cm->images[i];
        if (im->ptx && im->sm <= dsm) best = im;
    }
    if (!best) {
        char have[256] = "";
        for (int i = 0; i < cm->nimages; i++) {
            size_t l = strlen(have);
            snprintf(have + l, sizeof have - l, "%s%s", i ? ", " : "", cm->images[i].arch);
        }
        return rt_fail(err, errn, "the module has no code for this GPU (sm_%d; compiled for %s): recompile with --arch=sm_%d", dsm, have, dsm);
    }
    g->img = best;
    return 0;
}

static const char *kwhere(const TrnCudaKernel *k, char *buf, size_t n) {
    snprintf(buf, n, "kernel %s%s%s", k->name, k->where && *k->where ? " from " : "", k->where ? k->where : "");
    return buf;
}

/* The alignment (bytes, at most 256) of every address an operand takes:
 * its offset and, over batches, its offset plus multiples of its strides.
 * cuBLASLt's heuristic assumes 256 unless told (the arena itself is
 * 256-aligned), and an algorithm chosen for more than the operands have
 * may fail or fault. */
static uint32_t align_of(int64_t off, const int64_t *strides, int n, int esize) {
    uint64_t bits = (uint64_t)off | 256;
    for (int i = 0; i < n; i++) bits |= (uint64_t)(strides[i] * esize);
    return (uint32_t)(bits & (~bits + 1));
}

/* The shape of a product: everything but where its operands are (the same
 * alignment included). */
static int same_shape(const TrnCudaGemm *a, const TrnCudaGemm *b) {
    return a->dtype == b->dtype && a->cdtype == b->cdtype && a->ta == b->ta && a->tb == b->tb && a->M == b->M && a->N == b->N && a->K == b->K &&
           a->lda == b->lda && a->ldb == b->ldb && a->ldc == b->ldc && a->bias < 0 && b->bias < 0 && (a->scale < 0) == (b->scale < 0) &&
           a->nbatch == 0 && b->nbatch == 0 && !a->epi && !b->epi && !a->bgrad && !b->bgrad && align_of(a->a, NULL, 0, 1) == align_of(b->a, NULL, 0, 1) &&
           align_of(a->b, NULL, 0, 1) == align_of(b->b, NULL, 0, 1) && align_of(a->c, NULL, 0, 1) == align_of(b->c, NULL, 0, 1);
}

static int lt_type(int dtype, int *esize) {
    switch (dtype) {
    case TRN_F32: *esize = 4; return TRN_LT_R_32F;
    case TRN_F64: *esize = 8; return TRN_LT_R_64F;
    case TRN_BF16: *esize = 2; return TRN_LT_R_16BF;
    case TRN_F16: *esize = 2; return TRN_LT_R_16F;
    default: return -1;
    }
}

/* The epilogue cuBLASLt applies: the bias, then the GELU (keeping the
 * pre-activation in aux when it is read again) or the GELU's gradient;
 * or a bias gradient (BGRADA sums cuBLASLt's A, our B); none when
 * r->plain (the kernel's launch after the product does it all). */
static uint32_t epilogue_of(const TrnCudaGemm *m, const GemmRt *r) {
    if (r->plain) return TRN_LT_EPILOGUE_DEFAULT;
    uint32_t e = m->bias >= 0 ? TRN_LT_EPILOGUE_BIAS : TRN_LT_EPILOGUE_DEFAULT;
    if (m->bgrad) return m->bgrad == TRN_BGRAD_A ? TRN_LT_EPILOGUE_BGRADB : TRN_LT_EPILOGUE_BGRADA;
    if (m->epi == TRN_GEMM_PLAIN) return e;
    if (m->epi == TRN_GEMM_DGELU) return TRN_LT_EPILOGUE_DGELU;
    e = m->bias >= 0 ? TRN_LT_EPILOGUE_GELU_BIAS : TRN_LT_EPILOGUE_GELU;
    return m->aux >= 0 ? e | TRN_LT_EPILOGUE_AUX : e;
}

/* Where the product goes: C, or (run plain) the pre-activation a GELU keeps. */
static int64_t product_dst(const TrnCudaGemm *m, const GemmRt *r) {
    return r->plain && m->epi == TRN_GEMM_GELU && m->aux >= 0 ? m->aux : m->c;
}

static void release_gemm(GemmRt *r) {
    if (r->desc) lt.MatmulDescDestroy(r->desc);
    if (r->la) lt.MatrixLayoutDestroy(r->la);
    if (r->lb) lt.MatrixLayoutDestroy(r->lb);
    if (r->lc) lt.MatrixLayoutDestroy(r->lc);
    r->desc = NULL, r->la = r->lb = r->lc = NULL;
}

static int plan_gemm(TrnCudaDev *g, const TrnCudaKernel *k, const TrnCudaGemm *m, GemmRt *r, char *err, size_t errn);

/* The device's description after desc_base: how many GELU, bias-gradient
 * and bias epilogues run in cuBLASLt, how many as kernels (bias ones only
 * when some do: nearly every product of a model has a bias). */
static void describe_epilogues(TrnCudaDev *g) {
    size_t l = g->desc_base;
    g->desc[l] = 0;
    if (g->nepi) l += (size_t)snprintf(g->desc + l, sizeof g->desc - l, ", GELU epilogues: %d in cuBLASLt, %d as kernels", g->nepi - g->nepi_plain, g->nepi_plain);
    if (l < sizeof g->desc && g->nbg)
        l += (size_t)snprintf(g->desc + l, sizeof g->desc - l, ", bias gradients: %d in cuBLASLt, %d as kernels", g->nbg - g->nbg_plain, g->nbg_plain);
    if (l < sizeof g->desc && g->nbias_plain)
        snprintf(g->desc + l, sizeof g->desc - l, ", bias epilogues: %d in cuBLASLt, %d as kernels", g->nbias - g->nbias_plain, g->nbias_plain);
}

/* plan_gemm, its finding no algorithm an error. */
static int plan_found(TrnCudaDev *g, const TrnCudaKernel *k, const TrnCudaGemm *m, GemmRt *r, char *err, size_t errn) {
    int rc = plan_gemm(g, k, m, r, err, errn);
    if (rc > 0) {
        char w[256];
        return rt_fail(err, errn, "cublasLtMatmulAlgoGetHeuristic(%s) found no algorithm for M=%lld N=%lld K=%lld ta=%d tb=%d%s", kwhere(k, w, sizeof w),
                       (long long)m->M, (long long)m->N, (long long)m->K, m->ta, m->tb, r->plain ? " (without its epilogue)" : "");
    }
    return rc;
}

/* A product with a GELU, bias-gradient or bias epilogue planned plain,
 * the kernel's launches doing the epilogue after it (enqueue), and
 * counted so in the device's description. */
static int plan_plain(TrnCudaDev *g, const TrnCudaKernel *k, const TrnCudaGemm *m, GemmRt *r, char *err, size_t errn) {
    r->plain = 1;
    if (m->bgrad) g->nbg_plain++;
    else if (m->epi != TRN_GEMM_PLAIN) g->nepi_plain++;
    else g->nbias_plain++;
    return plan_found(g, k, m, r, err, errn);
}

/* A product's descriptor, layouts and algorithm.  A GELU, bias-gradient
 * or bias epilogue that cuBLASLt has no algorithm for (the heuristic says
 * so) is left to the kernel's launches, the product run plain. */
static int prepare_gemm(TrnCudaDev *g, const TrnCudaKernel *k, const TrnCudaGemm *m, GemmRt *r, char *err, size_t errn) {
    if (m->bgrad != TRN_BGRAD_NONE) {
        if ((m->bgrad != TRN_BGRAD_A && m->bgrad != TRN_BGRAD_B) || m->dbias < 0 || m->epi != TRN_GEMM_PLAIN || m->bias >= 0 || m->nbatch)
            return rt_fail(err, errn, "module: kernel %s has a bias gradient %d it cannot have", k->name, m->bgrad);
        g->nbg++;
    }
    if (m->zero_c && (m->scale < 0 || m->ldc != m->N || m->nbatch || m->epi != TRN_GEMM_PLAIN || m->bgrad != TRN_BGRAD_NONE))
        return rt_fail(err, errn, "module: kernel %s zeroes a product's C that is not one range, or whose beta is not on the device", k->name);
    if (m->scale >= 0 && m->dtype == TRN_F64) /* cuBLASLt would read {alpha, beta} as doubles */
        return rt_fail(err, errn, "module: kernel %s has an f64 product whose alpha and beta are floats on the device", k->name);
    if (m->epi != TRN_GEMM_PLAIN) {
        if (m->epi != TRN_GEMM_GELU && m->epi != TRN_GEMM_DGELU) return rt_fail(err, errn, "module: kernel %s has epilogue %d", k->name, m->epi);
        if (m->epi == TRN_GEMM_DGELU && m->aux < 0) return rt_fail(err, errn, "module: kernel %s has a GELU gradient without its input", k->name);
        g->nepi++;
    }
    if (m->bias >= 0 && m->epi == TRN_GEMM_PLAIN) g->nbias++;
    if (m->epi != TRN_GEMM_PLAIN || m->bgrad != TRN_BGRAD_NONE || m->bias >= 0) {
        const char *what = m->bgrad ? "bias gradient" : m->epi != TRN_GEMM_PLAIN ? "GELU epilogue" : "bias epilogue";
        if (!(m->bgrad ? g->plain_bgrad : m->epi != TRN_GEMM_PLAIN ? g->plain_gelu : g->plain_bias)) {
            int rc = plan_gemm(g, k, m, r, err, errn);
            if (rc <= 0) return rc;
            release_gemm(r);
        }
        if (k->nlaunch < 1 || k->kind != TRN_CK_GEMM) /* (a kernel of steps: its launches are its own steps) */
            return rt_fail(err, errn, "kernel %s: its %s is not in cuBLASLt, and the module has no kernel for it", k->name, what);
        return plan_plain(g, k, m, r, err, errn);
    }
    return plan_found(g, k, m, r, err, errn);
}

/* A GEMM descriptor: row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
 * 1: the heuristic found no algorithm (or refused the problem, for a
 * product with its GELU epilogue). */
static int plan_gemm(TrnCudaDev *g, const TrnCudaKernel *k, const TrnCudaGemm *m, GemmRt *r, char *err, size_t errn) {
    char w[256];
    kwhere(k, w, sizeof w);
    r->m = m;
    int dt, ct, st, cdt, ces;
    dt = lt_type(m->dtype, &r->esize);
    cdt = lt_type(m->cdtype, &ces);
    if (dt < 0 || cdt < 0 || (m->cdtype != m->dtype && m->cdtype != TRN_F32) || (m->dtype == TRN_F64) != (m->cdtype == TRN_F64))
        return rt_fail(err, errn, "%s: no GEMM of dtype %d into dtype %d", w, m->dtype, m->cdtype);
    if (m->dtype == TRN_F64) st = TRN_LT_R_64F, ct = TRN_LT_COMPUTE_64F;
    else if (m->dtype == TRN_F32) st = TRN_LT_R_32F, ct = g->cm->tf32 ? TRN_LT_COMPUTE_32F_FAST_TF32 : TRN_LT_COMPUTE_32F;
    else st = TRN_LT_R_32F, ct = TRN_LT_COMPUTE_32F;
    r->cesize = ces;
    LT(MatmulDescCreate, (&r->desc, ct, st), w);
    int32_t opa = m->tb ? TRN_LT_OP_T : TRN_LT_OP_N, opb = m->ta ? TRN_LT_OP_T : TRN_LT_OP_N;
    LT(MatmulDescSetAttribute, (r->desc, TRN_LT_DESC_TRANSA, &opa, sizeof opa), w);
    LT(MatmulDescSetAttribute, (r->desc, TRN_LT_DESC_TRANSB, &opb, sizeof opb), w);
    if (m->scale >= 0) {
        int32_t pm = TRN_LT_POINTER_MODE_DEVICE;
        LT(MatmulDescSetAttribute, (r->desc, TRN_LT_DESC_POINTER_MODE, &pm, sizeof pm), w);
    }
    uint32_t epi = epilogue_of(m, r);
    if (epi != TRN_LT_EPILOGUE_DEFAULT) LT(MatmulDescSetAttribute, (r->desc, TRN_LT_DESC_EPILOGUE, &epi, sizeof epi), w);
    if (m->bias >= 0 && !r->plain) {
        CUdeviceptr bp = g->arena + (CUdeviceptr)m->bias;
        const void *bptr = (const void *)(uintptr_t)bp;
        int32_t bdt = cdt;
        LT(MatmulDescSetAttribute, (r->desc, TRN_LT_DESC_BIAS_POINTER, &bptr, sizeof bptr), w);
        LT(MatmulDescSetAttribute, (r->desc, TRN_LT_DESC_BIAS_DATA_TYPE, &bdt, sizeof bdt), w);
    }
    if (epi == TRN_LT_EPILOGUE_BGRADA || epi == TRN_LT_EPILOGUE_BGRADB) { /* written in C's type (cuBLASLt's default for a bias gradient) */
        void *dptr = (void *)(uintptr_t)(g->arena + (CUdeviceptr)m->dbias);
        LT(MatmulDescSetAttribute, (r->desc, TRN_LT_DESC_BIAS_POINTER, &dptr, sizeof dptr), w);
    }
    if (epi & TRN_LT_EPILOGUE_AUX) { /* the pre-activation: [M,N] row-major is cuBLASLt's N x M, leading dimension ldc (a multiple of 8) */
        const void *aptr = (const void *)(uintptr_t)(g->arena + (CUdeviceptr)m->aux);
        int64_t ald = m->ldc;
        LT(MatmulDescSetAttribute, (r->desc, TRN_LT_DESC_EPILOGUE_AUX_POINTER, &aptr, sizeof aptr), w);
        LT(MatmulDescSetAttribute, (r->desc, TRN_LT_DESC_EPILOGUE_AUX_LD, &ald, sizeof ald), w);
    }
    /* cuBLASLt's A is our B (N x K col-major when not transposed), its B is our A */
    uint64_t arows = m->tb ? (uint64_t)m->K : (uint64_t)m->N, acols = m->tb ? (uint64_t)m->N : (uint64_t)m->K;
    uint64_t brows = m->ta ? (uint64_t)m->M : (uint64_t)m->K, bcols = m->ta ? (uint64_t)m->K : (uint64_t)m->M;
    LT(MatrixLayoutCreate, (&r->la, dt, arows, acols, m->ldb), w);
    LT(MatrixLayoutCreate, (&r->lb, dt, brows, bcols, m->lda), w);
    LT(MatrixLayoutCreate, (&r->lc, cdt, (uint64_t)m->N, (uint64_t)m->M, m->ldc), w);
    /* batch: the innermost batch dim strided in cuBLASLt; outer ones looped */
    r->nouter = 1;
    if (m->nbatch > 0) {
        int in = m->nbatch - 1;
        int32_t cnt = (int32_t)m->batch[in];
        int64_t sa = m->sb[in], sb = m->sa[in], sc = m->sc[in];
        for (int q = 0; q < 3; q++) {
            cublasLtMatrixLayout_t l = q == 0 ? r->la : q == 1 ? r->lb : r->lc;
            int64_t s = q == 0 ? sa : q == 1 ? sb : sc;
            LT(MatrixLayoutSetAttribute, (l, TRN_LT_LAYOUT_BATCH_COUNT, &cnt, sizeof cnt), w);
            LT(MatrixLayoutSetAttribute, (l, TRN_LT_LAYOUT_BATCH_OFFSET, &s, sizeof s), w);
        }
        r->nob = in;
        for (int i = 0; i < in; i++) {
            r->oshape[i] = m->batch[i];
            r->osa[i] = m->sa[i];
            r->osb[i] = m->sb[i];
            r->osc[i] = m->sc[i];
            r->nouter *= (int)m->batch[i];
        }
    }
    /* the algorithm: cuBLASLt's heuristic, once per descriptor */
    cublasLtMatmulPreference_t pref;
    LT(MatmulPreferenceCreate, (&pref), w);
    uint64_t wsb = (uint64_t)g->cm->workspace_bytes;
    uint32_t al[3] = {align_of(m->b, m->sb, m->nbatch, r->esize), align_of(m->a, m->sa, m->nbatch, r->esize),
                      align_of(product_dst(m, r), m->sc, m->nbatch, r->cesize)};
    const struct { int attr; const void *v; size_t n; } pa[5] = {
        {TRN_LT_PREF_MAX_WORKSPACE, &wsb, sizeof wsb}, {TRN_LT_PREF_ALIGN_A, &al[0], sizeof al[0]}, {TRN_LT_PREF_ALIGN_B, &al[1], sizeof al[1]},
        {TRN_LT_PREF_ALIGN_C, &al[2], sizeof al[2]}, {TRN_LT_PREF_ALIGN_D, &al[2], sizeof al[2]}};
    for (int i = 0; i < 5; i++) {
        cublasStatus_t ps = lt.MatmulPreferenceSetAttribute(pref, pa[i].attr, pa[i].v, pa[i].n);
        if (ps != 0) {
            lt.MatmulPreferenceDestroy(pref);
            return lt_fail(ps, "cublasLtMatmulPreferenceSetAttribute", w, __LINE__, err, errn);
        }
    }
    /* the fastest of its results whose state is success (the others'
     * fields are not valid) and whose workspace fits */
    cublasLtMatmulHeuristicResult_t res[8];
    int nres = 0, pick = -1;
    memset(res, 0, sizeof res);
    cublasStatus_t s = lt.MatmulAlgoGetHeuristic(g->lt, r->desc, r->la, r->lb, r->lc, r->lc, pref, 8, res, &nres);
    lt.MatmulPreferenceDestroy(pref);
    int fused = (m->epi != TRN_GEMM_PLAIN || m->bgrad != TRN_BGRAD_NONE || m->bias >= 0) && !r->plain;
    if (s != 0 && !fused) return lt_fail(s, "cublasLtMatmulAlgoGetHeuristic", w, __LINE__, err, errn);
    for (int i = 0; s == 0 && i < nres && i < 8 && pick < 0; i++)
        if (res[i].state == 0 && res[i].workspaceSize <= wsb) pick = i;
    if (pick < 0) return 1;
    r->algo = res[pick].algo;
    return 0;
}

/* cublasLtMatmul refused (status s) a product with a GELU or bias-gradient
 * epilogue that the heuristic had offered an algorithm for (cuBLASLt
 * does not promise that one runs): outside a capture, when the kernel
 * has the launches that do the epilogue, the product is planned plain
 * from now on, as prepare_gemm plans it where the heuristic has nothing,
 * and that is said once.  0: run it again; 1: the refusal stands; -1:
 * the plain plan failed (err says why). */
static int plain_after_refusal(TrnCudaDev *g, const TrnCudaKernel *k, GemmRt *r, cublasStatus_t s, const char *w, char *err, size_t errn) {
    const TrnCudaGemm *m = r->m;
    if (r->plain || g->capturing || k->kind != TRN_CK_GEMM || k->nlaunch < 1 || (m->epi == TRN_GEMM_PLAIN && m->bgrad == TRN_BGRAD_NONE && m->bias < 0))
        return 1;
    const char *what = m->bgrad ? "bias-gradient" : m->epi != TRN_GEMM_PLAIN ? "GELU" : "bias";
    fprintf(stderr, "trainc: warning: cublasLtMatmul(%s) refused its %s epilogue (%s): the product runs plain, the epilogue as the kernel's launches\n",
            w, what, lt.GetStatusName ? lt.GetStatusName(s) : "?");
    release_gemm(r);
    if (plan_plain(g, k, m, r, err, errn) != 0) return -1;
    describe_epilogues(g);
    return 0;
}

static int run_gemm(TrnCudaDev *g, const TrnCudaKernel *k, GemmRt *r, char *err, size_t errn) {
    const TrnCudaGemm *m = r->m;
    char w[256];
    kwhere(k, w, sizeof w);
    static const float a32 = 1.0f, b32[2] = {0.0f, 1.0f};
    static const double a64 = 1.0, b64[2] = {0.0, 1.0};
    const void *alpha = m->dtype == TRN_F64 ? (const void *)&a64 : (const void *)&a32;
    const void *beta = m->dtype == TRN_F64 ? (const void *)&b64[m->accumulate != 0] : (const void *)&b32[m->accumulate != 0];
    if (m->scale >= 0) { /* device pointer mode: {alpha, beta} in the arena */
        alpha = (const void *)(uintptr_t)(g->arena + (CUdeviceptr)m->scale);
        beta = (const void *)(uintptr_t)(g->arena + (CUdeviceptr)m->scale + 4);
    }
    void *ws = (void *)(uintptr_t)(g->arena + (CUdeviceptr)g->cm->workspace_off);
    for (int o = 0; o < r->nouter; o++) {
        int64_t ea = 0, eb = 0, ec = 0, rem = o;
        for (int i = r->nob - 1; i >= 0; i--) {
            int64_t ix = rem % r->oshape[i];
            rem /= r->oshape[i];
            ea += ix * r->osa[i];
            eb += ix * r->osb[i];
            ec += ix * r->osc[i];
        }
        const void *A = (const void *)(uintptr_t)(g->arena + (CUdeviceptr)(m->a + ea * r->esize));
        const void *B = (const void *)(uintptr_t)(g->arena + (CUdeviceptr)(m->b + eb * r->esize));
        void *C = (void *)(uintptr_t)(g->arena + (CUdeviceptr)(product_dst(m, r) + ec * r->cesize));
        /* beta, read on the device, is 0: C zeroed first, so that the
         * result does not depend on what the arena held there (emit_cuda.c
         * sets zero_c only where ldc = N: one range) */
        if (m->zero_c && !g->no_beta0_fill)
            CU(MemsetD8Async, ((CUdeviceptr)(uintptr_t)C, 0, (size_t)(m->M * m->N * r->cesize), g->st), k->name, w);
        cublasStatus_t s = lt.Matmul(g->lt, r->desc, alpha, B, r->la, A, r->lb, beta, C, r->lc, C, r->lc, &r->algo, ws, (size_t)g->cm->workspace_bytes, g->st);
        if (s == TRN_LT_STATUS_EXECUTION_FAILED && !g->capturing) { /* its launch failed: a fault of work queued before (sticky) is not a refusal */
            CUresult q = drv.StreamSynchronize(g->st);
            if (device_fault(q)) return cu_fail(q, "cublasLtMatmul", w, "", __LINE__, err, errn);
        }
        if (s != 0) {
            int rc = o == 0 ? plain_after_refusal(g, k, r, s, w, err, errn) : 1;
            if (rc == 0) return run_gemm(g, k, r, err, errn);
            return rc < 0 ? -1 : lt_fail(s, "cublasLtMatmul", w, __LINE__, err, errn);
        }
    }
    return 0;
}

static int launch_one(TrnCudaDev *g, const TrnCudaKernel *k, KernRt *kr, int l, char *err, size_t errn) {
    const TrnCudaLaunch *L = &k->launch[l];
    char w[256];
    CU(LaunchKernel,
       (g->fn[L->fn], L->grid[0], L->grid[1], L->grid[2], L->block[0], L->block[1], L->block[2], L->smem, g->st,
        kr->argp + (size_t)l * TRN_CUDA_MAXARGS, NULL),
       g->cm->fns[L->fn], kwhere(k, w, sizeof w));
    return 0;
}

/* Enqueues kernel i of schedule `which` on the compute stream. */
static int enqueue(TrnCudaDev *g, int which, int i, char *err, size_t errn) {
    const TrnCudaKernel *k = &g->cm->kern[which][i];
    KernRt *kr = &g->kr[which][i];
    char w[256];
    switch (k->kind) {
    case TRN_CK_MEMSET:
        CU(MemsetD8Async, (g->arena + (CUdeviceptr)k->ms_off, 0, (size_t)k->ms_bytes, g->st), k->name, k->where);
        break;
    case TRN_CK_GEMM:
        if (run_gemm(g, k, &kr->gemm[0], err, errn) != 0) return -1;
        for (int l = 0; kr->gemm[0].plain && l < k->nlaunch; l++) /* the epilogue cuBLASLt had no algorithm for */
            if (launch_one(g, k, kr, l, err, errn) != 0) return -1;
        break;
    case TRN_CK_STEPS:
        for (int i = 0; i < k->nstep; i++) {
            const TrnCudaStep *st = &k->step[i];
            if (st->gemm) {
                if (run_gemm(g, k, &kr->gemm[st->index], err, errn) != 0) return -1;
            } else if (launch_one(g, k, kr, st->index, err, errn) != 0) {
                return -1;
            }
        }
        break;
    default:
        for (int l = 0; l < k->nlaunch; l++)
            if (launch_one(g, k, kr, l, err, errn) != 0) return -1;
    }
    /* --poison: the temporaries it read for the last time, filled with NaN
     * bytes, as the C backend's schedules do (a stale read shows) */
    for (int d = 0; g->poison && d < k->ndie; d++)
        CU(MemsetD8Async, (g->arena + (CUdeviceptr)k->die[d].off, 0xFF, (size_t)k->die[d].bytes, g->st), k->name, "poison");
    if (g->sync_each) CU(StreamSynchronize, (g->st), "after the kernel", kwhere(k, w, sizeof w));
    return 0;
}

static int prepare(TrnCudaDev *g, char *err, size_t errn) {
    const TrnCudaModule *cm = g->cm;
    int need_lt = 0;
    for (int s = 0; s < TRN_RUN__COUNT; s++)
        for (int i = 0; i < cm->nkern[s]; i++) need_lt |= cm->kern[s][i].ngemm > 0;
    if (need_lt) {
        if (open_cublaslt() != 0) return rt_fail(err, errn, "%s", lt_err);
        LT(Create, (&g->lt), "");
    }
    for (int s = 0; s < TRN_RUN__COUNT; s++) {
        int n = cm->nkern[s];
        if (!n) continue;
        g->kr[s] = rt_calloc((size_t)n, sizeof(KernRt), err, errn);
        if (!g->kr[s]) return -1;
        for (int i = 0; i < n; i++) {
            const TrnCudaKernel *k = &cm->kern[s][i];
            KernRt *kr = &g->kr[s][i];
            if (k->kind == TRN_CK_GEMM || k->kind == TRN_CK_STEPS) {
                int ng = k->kind == TRN_CK_GEMM ? 1 : k->ngemm;
                if (ng < 1 || !k->gemm) return rt_fail(err, errn, "module: kernel %s has no product", k->name);
                kr->gemm = rt_calloc((size_t)ng, sizeof(GemmRt), err, errn);
                if (!kr->gemm) return -1;
                kr->ngemm = ng;
                for (int j = 0; j < ng; j++) {
                    /* chunks repeat one shape: the first one's descriptor, layouts and algorithm serve */
                    int same = -1;
                    for (int q = 0; q < j && same < 0; q++)
                        if (same_shape(&k->gemm[q], &k->gemm[j])) same = q;
                    if (same >= 0) {
                        kr->gemm[j] = kr->gemm[same];
                        kr->gemm[j].m = &k->gemm[j];
                        kr->gemm[j].borrowed = 1;
                    } else if (prepare_gemm(g, k, &k->gemm[j], &kr->gemm[j], err, errn) != 0) {
                        return -1;
                    }
                }
                for (int j = 0; j < k->nstep; j++)
                    if (k->step[j].index < 0 || k->step[j].index >= (k->step[j].gemm ? ng : k->nlaunch))
                        return rt_fail(err, errn, "module: kernel %s has a step out of range", k->name);
            }
            if (k->nlaunch > 0) {
                size_t na = (size_t)k->nlaunch * TRN_CUDA_MAXARGS;
                kr->argv = rt_calloc(na, sizeof(CUdeviceptr), err, errn);
                kr->argp = rt_calloc(na, sizeof(void *), err, errn);
                if (!kr->argv || !kr->argp) return -1;
                for (int l = 0; l < k->nlaunch; l++) {
                    const TrnCudaLaunch *L = &k->launch[l];
                    if (L->fn < 0 || L->fn >= cm->nfns) return rt_fail(err, errn, "module: kernel %s launches function %d of %d", k->name, L->fn, cm->nfns);
                    for (int a = 0; a < L->nargs; a++) {
                        if (L->arg[a] < 0 || L->arg[a] > g->m->arena_bytes)
                            return rt_fail(err, errn, "module: kernel %s has an argument outside the arena", k->name);
                        kr->argv[l * TRN_CUDA_MAXARGS + a] = g->arena + (CUdeviceptr)L->arg[a];
                        kr->argp[l * TRN_CUDA_MAXARGS + a] = &kr->argv[l * TRN_CUDA_MAXARGS + a];
                    }
                    /* dynamic shared memory: the function allowed the most
                     * that any of its launches asks for (past the default, 48
                     * KiB less its static, that needs the attribute; the
                     * driver checks static + dynamic against the opt-in limit) */
                    if (L->smem > g->fn_dyn[L->fn]) {
                        CU(FuncSetAttribute, (g->fn[L->fn], TRN_CU_FUNC_MAX_DYN_SMEM, (int)L->smem), cm->fns[L->fn], k->where);
                        g->fn_dyn[L->fn] = L->smem;
                    }
                }
            }
        }
    }
    return 0;
}

/* How TRAINC_CUDA_PROFILE's file is written (write_profile, below). */
enum { PROF_RENAME, PROF_INPLACE, PROF_AT_CLOSE };

static int profile_how(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0 || S_ISREG(st.st_mode)) return PROF_RENAME;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? PROF_INPLACE : PROF_AT_CLOSE;
}

static void write_profile(TrnCudaDev *g, int closing);

void trn_cuda_close(TrnCudaDev *g) {
    if (!g) return;
    if (g->ctx) {
        drv.CtxSetCurrent(g->ctx);
        if (g->st) drv.StreamSynchronize(g->st);
        /* an upload the compute stream was not made to wait for (its
         * event's record or wait failed) may still read the pinned slots */
        if (g->up) drv.StreamSynchronize(g->up);
        write_profile(g, 1); /* a pipe's profile, once (the others are written as they go) */
        for (int s = 0; s < TRN_RUN__COUNT; s++) {
            for (int i = 0; g->pev[s] && i <= g->cm->nkern[s]; i++)
                if (g->pev[s][i]) drv.EventDestroy(g->pev[s][i]);
            free(g->pev[s]);
            free(g->pms[s]);
            free(g->pms0[s]);
        }
        for (int s = 0; s < TRN_RUN__COUNT; s++) {
            if (g->graph[s]) drv.GraphExecDestroy(g->graph[s]);
            if (!g->kr[s]) continue;
            for (int i = 0; i < g->cm->nkern[s]; i++) {
                KernRt *kr = &g->kr[s][i];
                free(kr->argv);
                free(kr->argp);
                for (int j = 0; j < kr->ngemm; j++) {
                    GemmRt *r = &kr->gemm[j];
                    if (r->borrowed) continue;
                    release_gemm(r);
                }
                free(kr->gemm);
            }
            free(g->kr[s]);
        }
        if (g->lt) lt.Destroy(g->lt);
        if (g->pinned) drv.MemFreeHost(g->pinned);
        if (g->upev) drv.EventDestroy(g->upev);
        if (g->done) drv.EventDestroy(g->done);
        if (g->st) drv.StreamDestroy(g->st);
        if (g->up) drv.StreamDestroy(g->up);
        if (g->arena) drv.MemFree(g->arena);
        if (g->initp) drv.MemFree(g->initp);
        if (g->mod) drv.ModuleUnload(g->mod);
        drv.DevicePrimaryCtxRelease(g->dev);
    }
    free(g->fn);
    free(g->fn_dyn);
    free(g->slot);
    free(g->initw);
    free(g);
}

/* The driver's JIT log on one line: its lines joined by "; ", runs of
 * blanks as one space, cut with "..." where out (n >= 4) is full. */
static void one_line(char *out, size_t n, const char *log) {
    size_t o = 0;
    const char *sep = "";
    out[0] = 0;
    for (const char *p = log; *p; p++) {
        if (*p == '\n' || *p == '\r') {
            if (o) sep = "; ";
        } else if (*p == ' ' || *p == '\t') {
            if (o && !*sep) sep = " ";
        } else if (o + strlen(sep) + 1 + 4 > n) {
            snprintf(out + o, n - o, "...");
            return;
        } else {
            o += (size_t)snprintf(out + o, n - o, "%s%c", sep, *p);
            sep = "";
        }
    }
}

/* One image into g->mod through cuModuleLoadDataEx, whose logs say why the
 * driver's JIT refused PTX (cuModuleLoadData says only "invalid PTX"):
 * the log, on one line, into log. */
static CUresult load_image(TrnCudaDev *g, const TrnCudaImage *im, char *log, size_t logn) {
    char elog[4096] = "", ilog[4096] = "";
    int opt[4] = {TRN_CU_JIT_ERROR_LOG_BUFFER, TRN_CU_JIT_ERROR_LOG_SIZE, TRN_CU_JIT_INFO_LOG_BUFFER, TRN_CU_JIT_INFO_LOG_SIZE};
    void *val[4] = {elog, (void *)(uintptr_t)sizeof elog, ilog, (void *)(uintptr_t)sizeof ilog}; /* sizes by value, as cuda.h says */
    CUresult r = drv.ModuleLoadDataEx(&g->mod, im->data, 4, opt, val);
    elog[sizeof elog - 1] = ilog[sizeof ilog - 1] = 0;
    one_line(log, logn, elog[0] ? elog : ilog);
    return r;
}

/* The module: the image select_image chose; a cubin the driver refuses (a
 * driver that cannot take it, a damaged image) is followed by the PTX,
 * compiled by the driver now (slower to start), said.  dsm: the device's
 * sm, 10 major + minor. */
static int load_module(TrnCudaDev *g, int dsm, char *err, size_t errn) {
    const TrnCudaModule *cm = g->cm;
    char log[1024];
    CUresult lr = load_image(g, g->img, log, sizeof log);
    const TrnCudaImage *px = NULL;
    for (int i = 0; i < cm->nimages && lr != 0 && !g->img->ptx && !px; i++)
        if (cm->images[i].ptx && cm->images[i].sm <= dsm) px = &cm->images[i];
    if (px) {
        const char *name = "?";
        if (drv.GetErrorName) drv.GetErrorName(lr, &name);
        fprintf(stderr, "trainc: warning: the %s cubin did not load (%s%s%s); compiling the %s PTX instead\n", g->img->arch, name ? name : "?",
                log[0] ? ": " : "", log, px->arch);
        g->img = px;
        lr = load_image(g, g->img, log, sizeof log);
    }
    if (lr != 0) {
        /* images NVRTC 13 made (PTX ISA 9 and on) on a driver older than
         * CUDA 13: that may be why, and nothing else would say so */
        int dv = 0, isa = 0;
        char w[1300], old[200] = "";
        for (int i = 0; i < cm->nimages && !isa; i++) /* ".version M.m" at the start of a line, within the image */
            for (size_t at = 0; cm->images[i].ptx && !isa && at + 10 < cm->images[i].size; at++) {
                const char *p = (const char *)cm->images[i].data + at;
                if ((at == 0 || p[-1] == '\n') && memcmp(p, ".version ", 9) == 0) isa = atoi(p + 9);
            }
        if (isa >= 9 && drv.DriverGetVersion(&dv) == 0 && dv > 0 && dv < 13000)
            snprintf(old, sizeof old, "the driver supports CUDA %d.%d, and CUDA 13's NVRTC compiled the images: a CUDA 13 driver (r580 or later) takes them; ",
                     dv / 1000, dv % 1000 / 10);
        snprintf(w, sizeof w, "%s%s%s", old, log[0] ? "the driver's log: " : "", log);
        return cu_fail(lr, "cuModuleLoadDataEx", g->img->arch, w, __LINE__, err, errn);
    }
    return 0;
}

static int open_dev(TrnCudaDev *g, int flags, char *err, size_t errn) {
    const TrnModel *m = g->m;
    const TrnCudaModule *cm = g->cm;
    double t = rt_now();
    /* no device at all: -2 (--device auto then takes the CPU without a word) */
    CUresult ir = drv.Init(0);
    if (ir == TRN_CUDA_ERROR_NO_DEVICE) return rt_fail(err, errn, "no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE)"), -2;
    if (ir == TRN_CUDA_ERROR_STUB_LIBRARY) /* the toolkit's stubs/libcuda.so: no driver */
        return rt_fail(err, errn, "no CUDA driver on this machine (cuInit: CUDA_ERROR_STUB_LIBRARY: the libcuda found is the toolkit's stub)"), -2;
    if (ir != 0) return cu_fail(ir, "cuInit", "0", "", __LINE__, err, errn);
    int n = 0;
    CU(DeviceGetCount, (&n), "", "");
    if (n < 1) return rt_fail(err, errn, "no CUDA device (the driver sees none)"), -2;
    const char *e = getenv("TRAINC_CUDA_DEVICE");
    int idx = e && *e ? atoi(e) : 0;
    if (idx < 0 || idx >= n) return rt_fail(err, errn, "TRAINC_CUDA_DEVICE=%d: there are %d device(s)", idx, n);
    CU(DeviceGet, (&g->dev, idx), "", "");
    char name[128] = "?";
    int major = 0, minor = 0, sms = 0;
    CU(DeviceGetName, (name, sizeof name, g->dev), "", "");
    CU(DeviceGetAttribute, (&major, TRN_CU_ATTR_CC_MAJOR, g->dev), "compute capability", "");
    CU(DeviceGetAttribute, (&minor, TRN_CU_ATTR_CC_MINOR, g->dev), "compute capability", "");
    CU(DeviceGetAttribute, (&sms, TRN_CU_ATTR_SM_COUNT, g->dev), "multiprocessors", "");
    if (select_image(g, major, minor, err, errn) != 0) return -1;
    CU(DevicePrimaryCtxRetain, (&g->ctx, g->dev), "", "");
    CU(CtxSetCurrent, (g->ctx), "", "");
    g->t_driver += rt_now() - t, t = rt_now();
    if (load_module(g, major * 10 + minor, err, errn) != 0) return -1;
    g->fn = rt_calloc((size_t)(cm->nfns ? cm->nfns : 1), sizeof(CUfunction), err, errn);
    g->fn_dyn = rt_calloc((size_t)(cm->nfns ? cm->nfns : 1), sizeof(unsigned), err, errn);
    if (!g->fn || !g->fn_dyn) return -1;
    for (int i = 0; i < cm->nfns; i++) CU(ModuleGetFunction, (&g->fn[i], g->mod, cm->fns[i]), cm->fns[i], "");
    if (drv.ModuleGetFunction(&g->init_fn, g->mod, "trn_init_f32") != 0) g->init_fn = NULL; /* a module made before it */
    g->t_module = rt_now() - t, t = rt_now();
    size_t bytes = (size_t)(m->arena_bytes > 0 ? m->arena_bytes : 1);
    CUresult ar = drv.MemAlloc(&g->arena, bytes);
    if (ar == TRN_CUDA_ERROR_OUT_OF_MEMORY) { /* what the plan needs, and what the device has */
        size_t fr = 0, tot = 0;
        char hb[32], hf[32], ht[32];
        if (drv.MemGetInfo(&fr, &tot) != 0) fr = tot = 0;
        rt_human_bytes(hb, sizeof hb, (int64_t)bytes);
        rt_human_bytes(hf, sizeof hf, (int64_t)fr);
        rt_human_bytes(ht, sizeof ht, (int64_t)tot);
        return rt_fail(err, errn,
                       "the memory plan does not fit on %s: its arena is %zu bytes (%s), the device has %s free of %s; a smaller "
                       "batch with grad_accum, checkpoint = blocks or memory_budget make the arena smaller (docs/passes.md; "
                       "`trainc compile --report` gives it)",
                       name, bytes, hb, hf, ht);
    }
    if (ar != 0) return cu_fail(ar, "cuMemAlloc", "the arena", "", __LINE__, err, errn);
    if (g->init_fn) {
        g->initw = rt_calloc((size_t)(m->ntensors ? m->ntensors : 1) * 8, sizeof *g->initw, err, errn);
        if (!g->initw) return -1;
        CU(MemAlloc, (&g->initp, (size_t)(m->ntensors ? m->ntensors : 1) * 64), "initialisation parameters", "");
    }
    CU(StreamCreate, (&g->st, TRN_CU_STREAM_NON_BLOCKING), "compute", "");
    CU(StreamCreate, (&g->up, TRN_CU_STREAM_NON_BLOCKING), "upload", "");
    CU(MemsetD8Async, (g->arena, flags & TRN_FLAG_POISON ? 0xFF : 0, bytes, g->st), "the arena", "");
    g->poison = (flags & TRN_FLAG_POISON) != 0;
    CU(EventCreate, (&g->upev, TRN_CU_EVENT_DISABLE_TIMING), "", "");
    CU(EventCreate, (&g->done, TRN_CU_EVENT_DISABLE_TIMING), "", "");
    /* pinned staging: one slot per input tensor */
    g->slot = rt_calloc((size_t)(m->ntensors ? m->ntensors : 1), sizeof(int64_t), err, errn);
    if (!g->slot) return -1;
    int64_t tot = 0;
    for (int i = 0; i < m->ntensors; i++) {
        const TrnTensor *t = &m->tensors[i];
        g->slot[i] = -1;
        if (t->kind != TRN_INPUT) continue;
        g->slot[i] = tot;
        tot += (rt_nbytes(t->dtype, t->numel) + 255) / 256 * 256;
    }
    if (tot > 0 && drv.MemAllocHost((void **)&g->pinned, (size_t)tot) != 0) g->pinned = NULL; /* then synchronous copies */
    const char *ge = getenv("TRAINC_CUDA_GRAPH"), *se = getenv("TRAINC_CUDA_SYNC");
    g->use_graphs = !(ge && strcmp(ge, "0") == 0);
    g->sync_each = se && strcmp(se, "1") == 0;
    if (g->sync_each) g->use_graphs = 0;
    const char *xe = getenv("TRAINC_CUDA_GELU_EPILOGUE");
    g->plain_gelu = xe && strcmp(xe, "0") == 0;
    const char *be = getenv("TRAINC_CUDA_BGRAD_EPILOGUE");
    g->plain_bgrad = be && strcmp(be, "0") == 0;
    const char *ae = getenv("TRAINC_CUDA_BIAS_EPILOGUE");
    g->plain_bias = ae && strcmp(ae, "0") == 0;
    const char *fe = getenv("TRAINC_CUDA_BETA0_FILL");
    g->no_beta0_fill = fe && strcmp(fe, "0") == 0;
    const char *pe = getenv("TRAINC_CUDA_PROFILE");
    if (pe && *pe) {
        if (!drv.EventElapsedTime) return rt_fail(err, errn, "TRAINC_CUDA_PROFILE: the driver lacks cuEventElapsedTime");
        g->prof_path = pe;
        g->prof_how = profile_how(pe);
        g->use_graphs = 0;
        for (int s = 0; s < TRN_RUN__COUNT; s++) {
            int n = cm->nkern[s];
            g->pev[s] = rt_calloc((size_t)n + 1, sizeof(CUevent), err, errn);
            g->pms[s] = rt_calloc((size_t)n + 1, sizeof(double), err, errn);
            g->pms0[s] = rt_calloc((size_t)n + 1, sizeof(double), err, errn);
            if (!g->pev[s] || !g->pms[s] || !g->pms0[s]) return -1;
            for (int i = 0; i <= n; i++) CU(EventCreate, (&g->pev[s][i], 0), "profile", "");
        }
    }
    int dv = 0;
    drv.DriverGetVersion(&dv);
    snprintf(g->desc, sizeof g->desc, "%s (sm_%d%d, %d SMs), driver %d.%d, %s image", name, major, minor, sms, dv / 1000, dv % 1000 / 10,
             g->img->arch);
    g->t_arena = rt_now() - t, t = rt_now();
    if (prepare(g, err, errn) != 0) return -1;
    g->t_gemm = rt_now() - t;
    g->desc_base = strlen(g->desc);
    describe_epilogues(g);
    return 0;
}

/* trn_cuda_open; *absent = 1 when it failed because there is nothing to
 * run on: no CUDA module, no driver, no device (not a device that failed) */
static TrnCudaDev *cuda_open(const TrnModel *m, int flags, int *absent, char *err, size_t errn) {
    *absent = 1;
    if (!m || !m->cuda) {
        rt_fail(err, errn, "this executable was built without a CUDA module (compile it with --target=cuda)");
        return NULL;
    }
    const TrnCudaModule *cm = m->cuda;
    double t0 = rt_now();
    if (open_driver() != 0) {
        *absent = drv_absent;
        rt_fail(err, errn, "%s", drv_err);
        return NULL;
    }
    *absent = 0;
    if (cm->abi != TRN_CUDA_ABI) {
        rt_fail(err, errn, "the CUDA module has ABI %d, this runtime %d: recompile the model", cm->abi, TRN_CUDA_ABI);
        return NULL;
    }
    TrnCudaDev *g = rt_calloc(1, sizeof *g, err, errn);
    if (!g) return NULL;
    g->m = m;
    g->cm = cm;
    g->t_driver = rt_now() - t0; /* the library loaded (once a process); open_dev adds the rest */
    int rc = open_dev(g, flags, err, errn);
    if (rc != 0) {
        *absent = rc == -2;
        trn_cuda_close(g);
        return NULL;
    }
    return g;
}

TrnCudaDev *trn_cuda_open(const TrnModel *m, int flags, char *err, size_t errn) {
    int absent;
    return cuda_open(m, flags, &absent, err, errn);
}

const char *trn_cuda_describe(TrnCudaDev *g) { return g->desc; }

void rt_cuda_phases(void *self, char *out, size_t n) {
    const TrnCudaDev *g = self;
    snprintf(out, n, "\"cuda_driver\":%.3f,\"cuda_module\":%.3f,\"cuda_arena\":%.3f,\"cuda_gemm\":%.3f", g->t_driver, g->t_module, g->t_arena,
             g->t_gemm);
}

static int check_range(TrnCudaDev *g, int64_t off, size_t n, char *err, size_t errn) {
    if (off < 0 || (uint64_t)off + n > (uint64_t)g->m->arena_bytes)
        return rt_fail(err, errn, "%zu bytes at offset %lld lie outside the %lld-byte arena", n, (long long)off, (long long)g->m->arena_bytes);
    return 0;
}

/* A failed synchronisation of the compute stream: a kernel or copy that
 * faulted on the device is one queued before it (cu_fail says so); any
 * other error is the call's own. */
int trn_cuda_sync(TrnCudaDev *g, char *err, size_t errn) {
    CU(CtxSetCurrent, (g->ctx), "", "");
    CUresult r = drv.StreamSynchronize(g->st);
    if (r != 0) return cu_fail(r, "cuStreamSynchronize", "compute stream", "", __LINE__, err, errn);
    return 0;
}

/* Uploads, fills and the arena's first fill go on the compute stream, in
 * order with the kernels.  (cuMemcpyHtoD from pageable memory and cuMemsetD8
 * run on the legacy stream and may finish after they return, and the
 * compute stream, being non-blocking, would not wait for them.) */
int trn_cuda_upload(TrnCudaDev *g, int64_t off, const void *src, size_t n, char *err, size_t errn) {
    if (check_range(g, off, n, err, errn) != 0) return -1;
    if (!n) return 0;
    CU(CtxSetCurrent, (g->ctx), "", "");
    CU(MemcpyHtoDAsync, (g->arena + (CUdeviceptr)off, src, n, g->st), "upload", "");
    return trn_cuda_sync(g, err, errn); /* src is the caller's again */
}

int trn_cuda_download(TrnCudaDev *g, int64_t off, void *dst, size_t n, char *err, size_t errn) {
    if (check_range(g, off, n, err, errn) != 0 || trn_cuda_sync(g, err, errn) != 0) return -1;
    if (n) CU(MemcpyDtoH, (dst, g->arena + (CUdeviceptr)off, n), "download", "");
    return 0;
}

int trn_cuda_fill(TrnCudaDev *g, int64_t off, unsigned char byte, size_t n, char *err, size_t errn) {
    if (check_range(g, off, n, err, errn) != 0) return -1;
    if (!n) return 0;
    CU(CtxSetCurrent, (g->ctx), "", "");
    CU(MemsetD8Async, (g->arena + (CUdeviceptr)off, byte, n, g->st), "fill", "");
    return 0;
}

int trn_cuda_run_kernel(TrnCudaDev *g, int which, int i, char *err, size_t errn) {
    if (which < 0 || which >= TRN_RUN__COUNT || i < 0 || i >= g->cm->nkern[which]) return rt_fail(err, errn, "no kernel %d in schedule %d", i, which);
    CU(CtxSetCurrent, (g->ctx), "", "");
    if (enqueue(g, which, i, err, errn) != 0) return -1;
    char w[256];
    CU(StreamSynchronize, (g->st), "after the kernel", kwhere(&g->cm->kern[which][i], w, sizeof w));
    return 0;
}

/* The second run of a schedule: captured once as a graph (g->graph[which]).
 * Nothing the capture enqueued runs; the stream is out of capture mode
 * whatever failed. */
static int capture(TrnCudaDev *g, int which, char *err, size_t errn) {
    CUgraph gr = NULL;
    CU(StreamBeginCapture, (g->st, TRN_CU_CAPTURE_RELAXED), "", "graph capture");
    int rc = 0;
    g->capturing = 1;
    for (int i = 0; i < g->cm->nkern[which] && rc == 0; i++) rc = enqueue(g, which, i, err, errn);
    g->capturing = 0;
    CUresult r = drv.StreamEndCapture(g->st, &gr);
    if (rc != 0) {
        if (gr) drv.GraphDestroy(gr);
        return -1;
    }
    if (r != 0) return cu_fail(r, "cuStreamEndCapture", "", "graph capture", __LINE__, err, errn);
    r = drv.GraphInstantiate(&g->graph[which], gr, 0);
    drv.GraphDestroy(gr);
    if (r != 0) {
        g->graph[which] = NULL;
        return cu_fail(r, "cuGraphInstantiateWithFlags", "", "graph capture", __LINE__, err, errn);
    }
    return 0;
}

/* After a failed graph capture (err says how): the schedule ran eagerly
 * once, so its kernels and products work, and it goes on without graphs
 * (slower launches, the same results), said.  Unless the capture failed
 * because a kernel or copy queued before it faulted: that error is sticky
 * (every later call returns it), and the eager run would fail at an
 * unrelated call.  So the compute stream is synchronised first, and its
 * error, if any, is the one returned. */
static int without_graphs(TrnCudaDev *g, char *err, size_t errn) {
    char cap[2048], w[2200];
    snprintf(cap, sizeof cap, "%s", err);
    CUresult r = drv.StreamSynchronize(g->st);
    if (r != 0) {
        snprintf(w, sizeof w, "%s%sthe graph capture before it failed: %s", device_fault(r) ? SYNC_FAULT : "", device_fault(r) ? "; " : "", cap);
        return cu_fail(r, "cuStreamSynchronize", "compute stream", w, __LINE__, err, errn);
    }
    fprintf(stderr, "trainc: warning: CUDA graph capture failed (%s); running without graphs\n", cap);
    g->use_graphs = 0;
    if (errn) err[0] = 0;
    return 0;
}

int trn_cuda_run(TrnCudaDev *g, int which, char *err, size_t errn) {
    if ((unsigned)which >= TRN_RUN__COUNT) return rt_fail(err, errn, "unknown schedule %d", which);
    int n = g->cm->nkern[which];
    if (!n) return 0;
    CU(CtxSetCurrent, (g->ctx), "", "");
    if (g->use_graphs && g->runs[which] >= 1 && !g->graph[which] && capture(g, which, err, errn) != 0 && without_graphs(g, err, errn) != 0)
        return -1;
    if (g->graph[which]) {
        CU(GraphLaunch, (g->graph[which], g->st), "", "schedule");
    } else if (g->prof_path) {
        /* an event before and after every kernel; waits for the schedule */
        CUevent *ev = g->pev[which];
        CU(EventRecord, (ev[0], g->st), "", "profile");
        for (int i = 0; i < n; i++) {
            if (enqueue(g, which, i, err, errn) != 0) return -1;
            CU(EventRecord, (ev[i + 1], g->st), "", "profile");
        }
        CU(EventSynchronize, (ev[n]), "", "profile");
        double *sum = g->runs[which] ? g->pms[which] : g->pms0[which]; /* the first run kept apart (write_profile) */
        for (int i = 0; i < n; i++) {
            float ms = 0;
            CU(EventElapsedTime, (&ms, ev[i], ev[i + 1]), g->cm->kern[which][i].name, "profile");
            sum[i] += ms;
        }
    } else {
        for (int i = 0; i < n; i++)
            if (enqueue(g, which, i, err, errn) != 0) return -1;
    }
    g->runs[which]++;
    write_profile(g, 0); /* TRAINC_CUDA_PROFILE: the runs so far */
    return 0;
}

void trn_cuda_kernel_work(const TrnCudaKernel *k, double *flops, double *bytes) {
    double fl = k->flops, by = 0;
    for (int j = 0; (k->kind == TRN_CK_GEMM || k->kind == TRN_CK_STEPS) && j < (k->kind == TRN_CK_GEMM ? 1 : k->ngemm); j++) {
        const TrnCudaGemm *m = &k->gemm[j];
        double nb = 1;
        for (int b = 0; b < m->nbatch; b++) nb *= (double)m->batch[b];
        fl += 2.0 * (double)m->M * (double)m->N * (double)m->K * nb;
    }
    for (int r = 0; r < k->nreads; r++) by += (double)k->reads[r].bytes;
    for (int w = 0; w < k->nwrites; w++) by += (double)k->writes[w].bytes;
    if (k->kind == TRN_CK_MEMSET) by = (double)k->ms_bytes;
    *flops = fl, *bytes = by;
}

/* TRAINC_CUDA_PROFILE: a JSON line per kernel that ran, the longest total
 * first: schedule, kernel, where, kind, cold, calls (the runs of its
 * schedule counted), ms (summed over them), flops and bytes (of one call:
 * trn_cuda_kernel_work).  The first run of each schedule is left out: in
 * it each function's first launch loads it (lazy module loading) and
 * cuBLASLt makes its first calls, which a step of training does not pay
 * again.  A schedule that ran once only (the refresh, a one-step run) has
 * that run counted, and says so: cold is true.  Written
 * after every profiled run of a schedule, so that a run stopped at any point
 * (a time limit's SIGTERM or SIGKILL) leaves the whole profile of the runs
 * before: a regular file (or none yet) into a new file beside it
 * (rt_tmp_create: FILE.PID.tmp, no existing file opened), renamed over
 * FILE; a symbolic link to one, or a file in a folder that takes no new
 * file, rewritten in place; anything else (a pipe, /dev/stdout) once, when the
 * device closes. */
typedef struct { double ms; int s, i; } ProfRow;

static int prof_cmp(const void *a, const void *b) {
    const ProfRow *x = a, *y = b;
    if (x->ms != y->ms) return x->ms < y->ms ? 1 : -1;
    return x->s != y->s ? x->s - y->s : x->i - y->i; /* ties in schedule order */
}

static void write_profile(TrnCudaDev *g, int closing) {
    static const char *sched[TRN_RUN__COUNT] = {"micro", "update", "eval", "sample", "refresh"}, *kind[] = {"launch", "gemm", "memset", "steps"};
    if (!g->prof_path || (g->prof_how == PROF_AT_CLOSE) != closing) return;
    char e[RT_ERRN] = "";
    int n = 0;
    for (int s = 0; s < TRN_RUN__COUNT; s++)
        if (g->runs[s]) n += g->cm->nkern[s];
    ProfRow *row = rt_malloc((size_t)(n ? n : 1) * sizeof *row, e, sizeof e);
    char *tmp = NULL;
    FILE *f = NULL;
    if (row && g->prof_how == PROF_RENAME) {
        char e2[RT_ERRN];
        if (!(f = rt_tmp_create(g->prof_path, &tmp, e2, sizeof e2))) g->prof_how = PROF_INPLACE; /* a folder that takes no new file */
    }
    if (row && !f) f = rt_fopen(g->prof_path, "w", e, sizeof e);
    if (f) {
        n = 0;
        for (int s = 0; s < TRN_RUN__COUNT; s++)
            for (int i = 0; g->runs[s] && i < g->cm->nkern[s]; i++) row[n++] = (ProfRow){g->runs[s] > 1 ? g->pms[s][i] : g->pms0[s][i], s, i};
        qsort(row, (size_t)n, sizeof *row, prof_cmp);
        for (int r = 0; r < n; r++) {
            const TrnCudaKernel *k = &g->cm->kern[row[r].s][row[r].i];
            int runs = g->runs[row[r].s];
            double fl, by;
            trn_cuda_kernel_work(k, &fl, &by);
            fprintf(f, "{\"schedule\":\"%s\",\"kernel\":\"%s\",\"where\":\"%s\",\"kind\":\"%s\",\"cold\":%s,\"calls\":%d,\"ms\":%.6f,\"flops\":%.0f,\"bytes\":%.0f}\n",
                    sched[row[r].s], k->name, k->where ? k->where : "", (unsigned)k->kind < 4 ? kind[k->kind] : "?", runs > 1 ? "false" : "true",
                    runs > 1 ? runs - 1 : runs, row[r].ms, fl, by);
        }
        const char *wrote = g->prof_how == PROF_RENAME ? tmp : g->prof_path;
        if (rt_fclose(f, wrote, e, sizeof e) == 0 && g->prof_how == PROF_RENAME) rt_rename(tmp, g->prof_path, e, sizeof e);
        if (e[0] && g->prof_how == PROF_RENAME) remove(tmp);
    }
    if (e[0]) {
        fprintf(stderr, "trainc: TRAINC_CUDA_PROFILE: %s\n", e);
        g->prof_path = NULL; /* said once; the run goes on */
    }
    free(row), free(tmp);
}

/* ---- the backend ---- */

static int be_run(void *self, TrnRun which, char *err, size_t errn) { return trn_cuda_run(self, (int)which, err, errn); }

static int be_place(TrnCudaDev *g, int tensor, size_t *n, char *err, size_t errn) {
    if (tensor < 0 || tensor >= g->m->ntensors) return rt_fail(err, errn, "no tensor %d", tensor);
    const TrnTensor *t = &g->m->tensors[tensor];
    if (t->offset < 0) return rt_fail(err, errn, "tensor '%s' has no place in the arena", t->name);
    *n = (size_t)rt_nbytes(t->dtype, t->numel);
    return 0;
}

static int be_read(void *self, int tensor, void *dst, char *err, size_t errn) {
    TrnCudaDev *g = self;
    size_t n;
    if (be_place(g, tensor, &n, err, errn) != 0) return -1;
    return trn_cuda_download(g, g->m->tensors[tensor].offset, dst, n, err, errn);
}

static int be_read_part(void *self, int tensor, int64_t first, int64_t count, void *dst, char *err, size_t errn) {
    TrnCudaDev *g = self;
    size_t n;
    if (be_place(g, tensor, &n, err, errn) != 0) return -1;
    const TrnTensor *t = &g->m->tensors[tensor];
    if (rt_part_in(t, first, count, err, errn) != 0) return -1;
    return trn_cuda_download(g, t->offset + rt_nbytes(t->dtype, first), dst, (size_t)rt_nbytes(t->dtype, count), err, errn);
}

static int be_write(void *self, int tensor, const void *src, char *err, size_t errn) {
    TrnCudaDev *g = self;
    size_t n;
    if (be_place(g, tensor, &n, err, errn) != 0) return -1;
    int64_t off = g->m->tensors[tensor].offset;
    if (!g->pinned || g->slot[tensor] < 0 || n == 0) return trn_cuda_upload(g, off, src, n, err, errn);
    /* an input: staged in pinned memory, copied on the upload stream after
     * the kernels already queued, and waited for by the compute stream */
    CU(CtxSetCurrent, (g->ctx), "", "");
    CU(EventSynchronize, (g->upev), "the previous upload", "");
    memcpy(g->pinned + g->slot[tensor], src, n);
    CU(EventRecord, (g->done, g->st), "", "");
    CU(StreamWaitEvent, (g->up, g->done, 0), "", "");
    CU(MemcpyHtoDAsync, (g->arena + (CUdeviceptr)off, g->pinned + g->slot[tensor], n, g->up), g->m->tensors[tensor].name, "");
    CU(EventRecord, (g->upev, g->up), "", "");
    CU(StreamWaitEvent, (g->st, g->upev, 0), "", "");
    return 0;
}

/* Initialisation on the device (trn_init_f32 of the module): zeros, then
 * the spec's values over the first n elements, queued on the compute
 * stream (nothing goes up but eight words). */
static int be_init(void *self, int tensor, const TrnInitSpec *sp, char *err, size_t errn) {
    TrnCudaDev *g = self;
    size_t n;
    if (!g->init_fn) return 1;
    if (be_place(g, tensor, &n, err, errn) != 0) return -1;
    const TrnTensor *t = &g->m->tensors[tensor];
    char k = sp->init[0];
    if (t->dtype != TRN_F32 || sp->n < 0 || (size_t)sp->n * 4 > n || !k || !strchr("zocnu", k)) return 1;
    CUdeviceptr out = g->arena + (CUdeviceptr)t->offset;
    CU(CtxSetCurrent, (g->ctx), "", "");
    CU(MemsetD8Async, (out, 0, n, g->st), t->name, "initialisation");
    if (k == 'z' || sp->n == 0) return 0;
    unsigned long long *w = g->initw + (size_t)tensor * 8;
    w[0] = (unsigned long long)sp->n, w[1] = (unsigned long long)(unsigned char)k, w[4] = sp->seed, w[5] = sp->stream;
    memcpy(&w[2], &sp->a, 8);
    memcpy(&w[3], &sp->b, 8);
    CUdeviceptr pw = g->initp + (CUdeviceptr)tensor * 64;
    CU(MemcpyHtoDAsync, (pw, w, 64, g->st), t->name, "initialisation");
    unsigned blocks = (unsigned)((sp->n + 1023) / 1024); /* 256 threads of 4 elements */
    void *args[2] = {&out, &pw};
    CU(LaunchKernel, (g->init_fn, blocks, 1, 1, 256, 1, 1, 0, g->st, args, NULL), "trn_init_f32", t->name);
    return 0;
}

static void be_destroy(void *self) { trn_cuda_close(self); }

int trn_cuda_backend(const TrnModel *m, TrnBackend *out, char *err, size_t errn) { return rt_cuda_backend(m, 0, out, err, errn); }

int rt_cuda_backend(const TrnModel *m, int flags, TrnBackend *out, char *err, size_t errn) {
    if (rt_check_model(m, err, errn) != 0) return -1;
    int absent;
    TrnCudaDev *g = cuda_open(m, flags, &absent, err, errn);
    if (!g) return absent ? -2 : -1;
    memset(out, 0, sizeof *out);
    out->name = "cuda";
    out->self = g;
    out->run = be_run;
    out->read = be_read;
    out->read_part = be_read_part;
    out->write = be_write;
    out->destroy = be_destroy;
    out->device_bytes = m->arena_bytes;
    out->init = be_init;
    return 0;
}
