/* tests/cuda/fake/fake_cuda.cpp — a stand-in for the CUDA driver
 * (libcuda.so.1) and cuBLASLt (libcublasLt.so.13) that runs on the CPU, so
 * that runtime/cuda.c itself — the code that talks to the real libraries —
 * is exercised without a GPU: the same dlopen, module loading, launches,
 * cuBLASLt descriptors, streams, events and graph capture.
 *
 * It is written from the libraries' documented behaviour, against their
 * real headers (the compiler checks every signature), not from what
 * runtime/cuda.c expects:
 *   - device memory is host memory; every pointer a launch or a product
 *     takes must lie in an allocation, every matrix entirely in one;
 *   - streams are lazy: work is queued and carried out only when the host
 *     waits for it (cuStreamSynchronize, cuEventSynchronize, a copy to the
 *     host, cuCtxSynchronize, cuMemFree) or when a stream it waits for must
 *     catch up, so a missing wait gives stale data instead of luck.  The
 *     "synchronous" cuMemsetD8 and cuMemcpyHtoD from pageable memory go on
 *     the legacy stream and finish later (as documented), which a
 *     CU_STREAM_NON_BLOCKING stream does not wait for;
 *   - a launch copies its arguments when it is made; a capture records the
 *     launches and products instead of running them; a graph replays what
 *     was recorded, with the argument values of capture time;
 *   - a launch is checked against the device's limits and the function's
 *     __launch_bounds__; a kernel runs as its CUDA C compiled by g++
 *     (tests/cuda/emu/cuda_emu.h: a block's threads as fibers);
 *   - cublasLtMatmul computes D = alpha op(A) op(B) + beta C (+ bias over
 *     D's rows), column-major with leading dimensions and strided batches,
 *     in double, rounded once to D's type (TF32 inputs rounded to 10
 *     mantissa bits); C is not read when beta is 0 (with
 *     FAKE_CUBLASLT_BETA0_READS_C set, it is when beta comes from the device:
 *     0 times a NaN that C held is a NaN, the worst that cuBLASLt's
 *     documentation allows there); the pointers must be as
 *     aligned as the preference told the heuristic.  The GELU epilogues
 *     (tanh form): GELU[_BIAS] D = gelu(v), GELU_AUX[_BIAS] also storing v
 *     in the aux matrix (EPILOGUE_AUX_POINTER, _LD: a multiple of 8, at
 *     least D's rows), DGELU D = v gelu'(aux); with FAKE_CUBLASLT_NO_GELU
 *     set, they are refused (NOT_SUPPORTED), as a cuBLASLt without them
 *     would; with FAKE_CUBLASLT_NO_BIAS, every epilogue with a bias (BIAS,
 *     GELU_BIAS, GELU_AUX_BIAS).  The heuristic gives one algorithm; with
 *     FAKE_CUBLASLT_BAD_FIRST, two unusable results before it (a state
 *     that is not success, a workspace larger than the preference's).
 *     FAKE_CUBLASLT_INF: D(0, 0) of every product is +inf.
 * Modules: a cubin or PTX text (FAKE_CUDA_CUBIN_FAIL: every cubin refused;
 * FAKE_CUDA_PTX_FAIL: PTX refused, CUDA_ERROR_INVALID_PTX, with ptxas's
 * messages in the error log cuModuleLoadDataEx was given, if any).
 * Timing (cuEventElapsedTime): a microsecond per operation between the
 * events, and a millisecond more for a function's first launch (lazy
 * module loading) and for a cuBLASLt handle's first product.
 * FAKE_CUDA_FAULT_AT_CAPTURE: a kernel queued before the first graph
 * capture faults (CUDA_ERROR_ILLEGAL_ADDRESS) while the host goes on, and
 * cuStreamBeginCapture is the first call to see it; the error is sticky,
 * as cuda.h says: every later call on the context returns it.
 * FAKE_CUDA_FAULT_AT_LAUNCH=N: the N-th kernel launched faults as it
 * runs: the launch returns success, every later call on the context the
 * error (a product: CUBLAS_STATUS_EXECUTION_FAILED).  FAKE_CUDA_DRIVER:
 * the version cuDriverGetVersion gives (13000, CUDA 13.0).
 * FAKE_CUDA_KILL_AT=N: the N-th cuLaunchKernel sends the process SIGTERM,
 * as a time limit's `timeout` would; when the process ends with fewer (0:
 * none is the N-th), it prints how many it made ("fake-cuda: N launches").
 * The device answers as an sm_90 with 132 SMs (FAKE_CUDA_SM=80 for sm_80).
 * Every refusal is also printed to stderr, "fake-cuda: ...".
 *
 * Built per model by tests/cuda/fake/run.sh with the model's kernels
 * (fake_kernels.cpp) into one shared library that both TRAINC_LIBCUDA and
 * TRAINC_CUBLASLT name. */
#include <cuda.h>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <deque>
#include <map>
#include <memory>
#include <vector>

extern "C" int  fake_kernel_find(const char *name, int *nargs, int *max_threads);
extern "C" void fake_kernel_run(int fn, const unsigned grid[3], const unsigned block[3], void **args);

static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fake-cuda: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

#define REFUSE(code, ...) (say(__VA_ARGS__), (code))

/* ---- memory ---- */

struct Alloc {
    size_t n;
    bool   pinned;
};
static std::map<uintptr_t, Alloc> allocs;   /* by start address */
static size_t dev_used;
/* the device's memory: 141 GiB, or FAKE_CUDA_MEM_MIB */
static size_t dev_total(void) {
    const char *e = getenv("FAKE_CUDA_MEM_MIB");
    return e && *e ? (size_t)atoll(e) << 20 : (size_t)141 << 30;
}
#define DEV_TOTAL dev_total()

/* The allocation [p, p+n) lies in, or NULL. */
static const Alloc *find(const void *p, size_t n, bool pinned) {
    uintptr_t a = (uintptr_t)p;
    auto it = allocs.upper_bound(a);
    if (it == allocs.begin()) return NULL;
    --it;
    if (it->second.pinned != pinned || a + n > it->first + it->second.n || a + n < a) return NULL;
    return &it->second;
}

/* ---- streams, events, graphs ---- */

struct Gemm;
struct CUstream_st;
enum OpKind { OP_LAUNCH, OP_MEMSET, OP_COPY, OP_WAIT, OP_GEMM };
struct Op {
    OpKind                kind;
    int                   fn = -1;
    unsigned              grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
    std::vector<void *>   args;
    unsigned char        *dst = NULL;
    std::vector<unsigned char> bytes;   /* OP_COPY from pageable memory: copied at the call */
    const unsigned char  *src = NULL;   /* OP_COPY from pinned memory: read when carried out */
    size_t                n = 0;
    unsigned char         byte = 0;
    CUstream_st          *on = NULL;    /* OP_WAIT: until that stream has done */
    uint64_t              seq = 0;      /*          this many operations */
    std::shared_ptr<Gemm> gemm;         /* shared by a graph's replays */
    uint64_t              cost = 1;     /* microseconds, for cuEventElapsedTime */
};

struct Graph {
    std::vector<Op> ops;
};

struct CUstream_st {
    bool            nonblocking = false;
    std::deque<Op>  q;
    uint64_t        queued = 0, done = 0;
    uint64_t        cost = 0;           /* of the operations queued so far (Op.cost) */
    Graph          *capture = NULL;
};

struct CUevent_st {
    CUstream_st *s = NULL;
    uint64_t     seq = 0;
    uint64_t     cost = 0;              /* the stream's when recorded */
    bool         timing = true;
};
struct CUgraph_st {
    Graph g;
};
struct CUgraphExec_st {
    Graph g;
};

static CUstream_st legacy;   /* the NULL stream */
static std::vector<CUstream_st *> streams;

static CUstream_st *stream_of(CUstream s) { return s == NULL || s == CU_STREAM_LEGACY ? &legacy : (CUstream_st *)s; }

static void run_op(Op &op);

/* Carries out s's queued work until it has done `upto` operations. */
static void drain(CUstream_st *s, uint64_t upto) {
    while (s->done < upto && !s->q.empty()) {
        Op op = s->q.front();
        s->q.pop_front();
        run_op(op);
        s->done++;
    }
}

static void drain_all(void) {
    drain(&legacy, legacy.queued);
    for (CUstream_st *s : streams) drain(s, s->queued);
    drain(&legacy, legacy.queued);
}

static CUresult enqueue(CUstream s, Op op) {
    CUstream_st *st = stream_of(s);
    if (st->capture) {
        if (op.kind == OP_WAIT) return REFUSE(CUDA_ERROR_NOT_SUPPORTED, "a capturing stream waits for an event (not modelled)");
        st->capture->ops.push_back(op);
        return CUDA_SUCCESS;
    }
    /* the legacy stream and blocking streams wait for each other */
    if (st == &legacy) {
        for (CUstream_st *o : streams)
            if (!o->nonblocking && o->queued > o->done) {
                Op w;
                w.kind = OP_WAIT, w.on = o, w.seq = o->queued;
                st->q.push_back(w), st->queued++;
            }
    } else if (!st->nonblocking && legacy.queued > legacy.done) {
        Op w;
        w.kind = OP_WAIT, w.on = &legacy, w.seq = legacy.queued;
        st->q.push_back(w), st->queued++;
    }
    st->cost += op.cost;
    st->q.push_back(op);
    st->queued++;
    return CUDA_SUCCESS;
}

/* ---- modules and functions ---- */

struct CUfunc_st {
    int  fn, nargs, max_threads, max_dyn_smem;
    bool loaded;   /* launched before (its first launch loads it) */
};
struct CUmod_st {
    std::vector<unsigned char> image;
    std::vector<CUfunc_st *>   fns;
};
struct CUctx_st {
    int retained;
};
static CUctx_st ctx0;
static int sm_version(void) {
    const char *e = getenv("FAKE_CUDA_SM");
    return e && *e ? atoi(e) : 90;
}

/* ---- cuBLASLt's objects ---- */

struct cublasLtContext {
    int  live;
    bool warm;     /* a product made (the first costs more) */
};
struct Desc {
    cublasComputeType_t ct;
    cudaDataType_t      scale;
    int32_t             transa = CUBLAS_OP_N, transb = CUBLAS_OP_N, pmode = CUBLASLT_POINTER_MODE_HOST;
    uint32_t            epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    const void         *bias = NULL;
    int32_t             bias_type = -1;
    void               *aux = NULL;
    int64_t             aux_ld = 0;
};
struct Layout {
    cudaDataType_t t;
    uint64_t       rows, cols;
    int64_t        ld;
    int32_t        batch = 1;
    int64_t        stride = 0;
};
struct Pref {
    uint64_t max_ws = 0;
    uint32_t align[4] = {256, 256, 256, 256};
};
struct Gemm {
    Desc          d;
    Layout        a, b, c, dl;
    const void   *A, *B, *C;
    void         *D;
    double        alpha, beta;          /* host pointer mode: read at the call */
    const void   *palpha, *pbeta;       /* device pointer mode: read when carried out */
};

/* A descriptor attribute of type T: exactly its size. */
template <typename T> static cublasStatus_t attr(T *dst, const void *buf, size_t n, const char *what) {
    if (n != sizeof(T)) return REFUSE(CUBLAS_STATUS_INVALID_VALUE, "%s: %zu bytes, the attribute has %zu", what, n, sizeof(T));
    memcpy(dst, buf, n);
    return CUBLAS_STATUS_SUCCESS;
}

/* ================================================================== */
extern "C" {

CUresult cuGetErrorName(CUresult r, const char **s) {
    switch (r) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case CUDA_ERROR_INVALID_IMAGE: *s = "CUDA_ERROR_INVALID_IMAGE"; break;
    case CUDA_ERROR_INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; break;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: *s = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; break;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
    case CUDA_ERROR_NOT_READY: *s = "CUDA_ERROR_NOT_READY"; break;
    case CUDA_ERROR_NO_BINARY_FOR_GPU: *s = "CUDA_ERROR_NO_BINARY_FOR_GPU"; break;
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: *s = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"; break;
    case CUDA_ERROR_INVALID_PTX: *s = "CUDA_ERROR_INVALID_PTX"; break;
    default: *s = "CUDA_ERROR_UNKNOWN"; return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult r, const char **s) {
    *s = r == CUDA_SUCCESS ? "no error" : "refused by the fake driver (see its message above)";
    return CUDA_SUCCESS;
}

static bool inited;
CUresult cuInit(unsigned flags) {
    if (flags != 0) return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuInit: flags must be 0");
    inited = true;
    return CUDA_SUCCESS;
}
#define NEED_INIT() \
    if (!inited) return REFUSE(CUDA_ERROR_NOT_INITIALIZED, "%s before cuInit", __func__)

CUresult cuDriverGetVersion(int *v) {
    const char *e = getenv("FAKE_CUDA_DRIVER"); /* as cuda.h counts: 12080 is CUDA 12.8 */
    *v = e && *e ? atoi(e) : 13000;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *n) {
    NEED_INIT();
    *n = 1;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    NEED_INIT();
    if (ordinal != 0) return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuDeviceGet: no device %d", ordinal);
    *d = 0;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    NEED_INIT();
    if (d != 0 || len < 1) return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "Fake GPU (tests/cuda/fake)");
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
    NEED_INIT();
    if (d != 0) return CUDA_ERROR_INVALID_VALUE;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = sm_version() / 10; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = sm_version() % 10; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = sm_version() >= 90 ? 132 : 108; break;
    default: return REFUSE(CUDA_ERROR_NOT_SUPPORTED, "cuDeviceGetAttribute: attribute %d not modelled", (int)a);
    }
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
    NEED_INIT();
    if (d != 0) return CUDA_ERROR_INVALID_VALUE;
    ctx0.retained++;
    *c = &ctx0;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
    if (d != 0 || ctx0.retained < 1) return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuDevicePrimaryCtxRelease: not retained");
    ctx0.retained--;
    return CUDA_SUCCESS;
}

static bool current;
static CUresult sticky; /* a kernel's fault (FAKE_CUDA_FAULT_AT_CAPTURE): every call on the context returns it */
CUresult cuCtxSetCurrent(CUcontext c) {
    if (c != NULL && c != &ctx0) return CUDA_ERROR_INVALID_HANDLE;
    if (c && ctx0.retained < 1) return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuCtxSetCurrent: the primary context is not retained");
    current = c != NULL;
    return CUDA_SUCCESS;
}
#define NEED_CTX()                                                                                 \
    if (!current) return REFUSE(CUDA_ERROR_INVALID_VALUE, "%s without a current context", __func__); \
    if (sticky) return sticky

CUresult cuCtxSynchronize(void) {
    NEED_CTX();
    drain_all();
    return CUDA_SUCCESS;
}

/* One of the JIT's logs (cuModuleLoadDataEx's options): its buffer, and
 * the option value that holds its size (IN: bytes, the terminating zero
 * included; OUT: bytes written). */
struct JitLog {
    char  *buf = NULL;
    void **size = NULL;
};

static void jit_log(JitLog &l, const char *text) {
    if (!l.buf || !l.size) return;
    size_t cap = (size_t)(uintptr_t)*l.size, n = strlen(text);
    if (!cap) return;
    if (n > cap - 1) n = cap - 1;
    memcpy(l.buf, text, n);
    l.buf[n] = 0;
    *l.size = (void *)(uintptr_t)n;
}

/* The options modelled: the error and info logs (a buffer with its size). */
static CUresult jit_options(unsigned n, CUjit_option *opt, void **val, JitLog &elog, JitLog &ilog) {
    if (n && (!opt || !val)) return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuModuleLoadDataEx: %u options without their arrays", n);
    for (unsigned i = 0; i < n; i++) {
        switch (opt[i]) {
        case CU_JIT_ERROR_LOG_BUFFER: elog.buf = (char *)val[i]; break;
        case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: elog.size = &val[i]; break;
        case CU_JIT_INFO_LOG_BUFFER: ilog.buf = (char *)val[i]; break;
        case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES: ilog.size = &val[i]; break;
        default: return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuModuleLoadDataEx: option %d not modelled", (int)opt[i]);
        }
    }
    if (!elog.buf != !elog.size || !ilog.buf != !ilog.size)
        return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuModuleLoadDataEx: a log buffer without its size, or a size without its buffer");
    return CUDA_SUCCESS;
}

/* A cubin (ELF for EM_CUDA) or PTX text. */
CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned nopt, CUjit_option *opt, void **val) {
    NEED_CTX();
    JitLog elog, ilog;
    if (CUresult r = jit_options(nopt, opt, val, elog, ilog)) return r;
    const unsigned char *p = (const unsigned char *)image;
    size_t n;
    if (p && memcmp(p, "\177ELF", 4) == 0) {
        if (getenv("FAKE_CUDA_CUBIN_FAIL")) return REFUSE(CUDA_ERROR_NO_BINARY_FOR_GPU, "cuModuleLoadDataEx: no cubin taken (FAKE_CUDA_CUBIN_FAIL)");
        if ((uintptr_t)p % 8) return REFUSE(CUDA_ERROR_INVALID_IMAGE, "cuModuleLoadDataEx: the cubin at %p is not 8-byte aligned", image);
        if (p[4] != 2) return REFUSE(CUDA_ERROR_INVALID_IMAGE, "cuModuleLoadDataEx: not a 64-bit ELF");
        uint16_t machine;
        memcpy(&machine, p + 18, 2);
        if (machine != 190) return REFUSE(CUDA_ERROR_INVALID_IMAGE, "cuModuleLoadDataEx: ELF for machine %d, not EM_CUDA", machine);
        uint64_t shoff;
        uint16_t shentsize, shnum;
        memcpy(&shoff, p + 0x28, 8);
        memcpy(&shentsize, p + 0x3a, 2);
        memcpy(&shnum, p + 0x3c, 2);
        n = (size_t)(shoff + (uint64_t)shentsize * shnum);
    } else if (p && (strstr((const char *)p, ".version") || strstr((const char *)p, ".target"))) {
        n = strlen((const char *)p) + 1;
        if (getenv("FAKE_CUDA_PTX_FAIL")) { /* what ptxas says of a symbol it cannot resolve */
            jit_log(elog, "ptxas application ptx input, line 7; error   : Unknown symbol 'trn_fake_missing' (FAKE_CUDA_PTX_FAIL)\n"
                          "ptxas fatal   : Ptx assembly aborted due to errors\n");
            return REFUSE(CUDA_ERROR_INVALID_PTX, "cuModuleLoadDataEx: the PTX refused (FAKE_CUDA_PTX_FAIL)");
        }
    } else {
        return REFUSE(CUDA_ERROR_INVALID_IMAGE, "cuModuleLoadDataEx: neither a cubin nor PTX");
    }
    CUmod_st *mod = new CUmod_st;
    mod->image.assign(p, p + n);
    *m = mod;
    return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(CUmodule *m, const void *image) { return cuModuleLoadDataEx(m, image, 0, NULL, NULL); }

CUresult cuModuleUnload(CUmodule m) {
    if (!m) return CUDA_ERROR_INVALID_HANDLE;
    drain_all();
    for (CUfunc_st *f : m->fns) delete f;
    delete m;
    return CUDA_SUCCESS;
}

/* The name must be in the image (its symbol table or a PTX .entry) and in
 * the emulation's table. */
CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
    NEED_CTX();
    if (!m) return CUDA_ERROR_INVALID_HANDLE;
    size_t ln = strlen(name);
    bool found = false;
    for (size_t i = 0; !found && i + ln < m->image.size(); i++)
        found = memcmp(&m->image[i], name, ln) == 0 && (m->image[i + ln] == 0 || m->image[i + ln] == '(');
    if (!found) return REFUSE(CUDA_ERROR_NOT_FOUND, "cuModuleGetFunction: %s is not in the module's image", name);
    int nargs, maxt, fn = fake_kernel_find(name, &nargs, &maxt);
    if (fn < 0) return REFUSE(CUDA_ERROR_NOT_FOUND, "cuModuleGetFunction: %s is not in the emulation's kernels", name);
    CUfunc_st *F = new CUfunc_st{fn, nargs, maxt, 48 * 1024, false};
    m->fns.push_back(F);
    *f = F;
    return CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    if (a != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) return REFUSE(CUDA_ERROR_NOT_SUPPORTED, "cuFuncSetAttribute: %d not modelled", (int)a);
    if (v < 0 || v > 227 * 1024) return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuFuncSetAttribute: %d bytes of shared memory", v);
    f->max_dyn_smem = v;
    return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
    NEED_CTX();
    if (n == 0) return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuMemAlloc of 0 bytes");
    if (dev_used + n > DEV_TOTAL) return CUDA_ERROR_OUT_OF_MEMORY;
    void *m = aligned_alloc(256, (n + 255) / 256 * 256);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    memset(m, 0xA5, n); /* device memory starts as garbage */
    allocs[(uintptr_t)m] = Alloc{n, false};
    dev_used += n;
    *p = (CUdeviceptr)(uintptr_t)m;
    return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
    drain_all(); /* as documented: cuMemFree synchronises */
    auto it = allocs.find((uintptr_t)p);
    if (it == allocs.end() || it->second.pinned) return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuMemFree of %#llx: not an allocation", (unsigned long long)p);
    dev_used -= it->second.n;
    allocs.erase(it);
    free((void *)(uintptr_t)p);
    return CUDA_SUCCESS;
}

CUresult cuMemAllocHost_v2(void **p, size_t n) {
    NEED_CTX();
    void *m = aligned_alloc(4096, (n + 4095) / 4096 * 4096);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    allocs[(uintptr_t)m] = Alloc{n, true};
    *p = m;
    return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void *p) {
    drain_all();
    auto it = allocs.find((uintptr_t)p);
    if (it == allocs.end() || !it->second.pinned) return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuMemFreeHost: not pinned memory");
    allocs.erase(it);
    free(p);
    return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t *fr, size_t *tot) {
    NEED_CTX();
    *tot = DEV_TOTAL;
    *fr = DEV_TOTAL - dev_used;
    return CUDA_SUCCESS;
}

/* Synchronous copies: to the device, from pinned memory, done now; from
 * pageable memory, staged now and written later on the legacy stream. */
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    NEED_CTX();
    if (!find((void *)(uintptr_t)dst, n, false)) return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuMemcpyHtoD: %zu bytes at %#llx are not device memory", n, (unsigned long long)dst);
    if (legacy.capture) return REFUSE(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuMemcpyHtoD while the legacy stream captures");
    Op op;
    op.kind = OP_COPY, op.dst = (unsigned char *)(uintptr_t)dst, op.n = n;
    if (find(src, n, true)) {
        drain(&legacy, legacy.queued);
        memcpy(op.dst, src, n);
        return CUDA_SUCCESS;
    }
    op.bytes.assign((const unsigned char *)src, (const unsigned char *)src + n);
    return enqueue(NULL, op);
}

/* To the host: the legacy stream's earlier work first, then the copy. */
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    NEED_CTX();
    if (!find((void *)(uintptr_t)src, n, false)) return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuMemcpyDtoH: %zu bytes at %#llx are not device memory", n, (unsigned long long)src);
    drain(&legacy, legacy.queued);
    for (CUstream_st *s : streams)
        if (!s->nonblocking) drain(s, s->queued);
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
    NEED_CTX();
    if (!find((void *)(uintptr_t)dst, n, false)) return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuMemcpyHtoDAsync: %zu bytes at %#llx are not device memory", n, (unsigned long long)dst);
    Op op;
    op.kind = OP_COPY, op.dst = (unsigned char *)(uintptr_t)dst, op.n = n;
    if (find(src, n, true)) op.src = (const unsigned char *)src; /* read when the copy happens */
    else op.bytes.assign((const unsigned char *)src, (const unsigned char *)src + n);
    return enqueue(s, op);
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
    NEED_CTX();
    if (!find((void *)(uintptr_t)dst, n, false)) return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuMemsetD8: %zu bytes at %#llx are not device memory", n, (unsigned long long)dst);
    Op op;
    op.kind = OP_MEMSET, op.dst = (unsigned char *)(uintptr_t)dst, op.n = n, op.byte = v;
    return enqueue(s, op);
}

/* "Asynchronous with respect to the host" for device memory: the legacy stream. */
CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
    if (legacy.capture) return REFUSE(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuMemsetD8 while the legacy stream captures");
    return cuMemsetD8Async(dst, v, n, NULL);
}

CUresult cuStreamCreate(CUstream *s, unsigned flags) {
    NEED_CTX();
    if (flags & ~(unsigned)CU_STREAM_NON_BLOCKING) return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuStreamCreate: flags %#x", flags);
    CUstream_st *st = new CUstream_st;
    st->nonblocking = flags & CU_STREAM_NON_BLOCKING;
    streams.push_back(st);
    *s = st;
    return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream s) {
    if (!s || s == CU_STREAM_LEGACY) return CUDA_ERROR_INVALID_HANDLE;
    if (s->capture) return REFUSE(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuStreamDestroy of a capturing stream");
    drain(s, s->queued); /* its work completes (documented) */
    for (size_t i = 0; i < streams.size(); i++)
        if (streams[i] == s) streams.erase(streams.begin() + (long)i);
    delete s;
    return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream s) {
    NEED_CTX();
    CUstream_st *st = stream_of(s);
    if (st->capture) return REFUSE(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuStreamSynchronize of a capturing stream");
    drain(st, st->queued);
    return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent *e, unsigned flags) {
    NEED_CTX();
    if (flags & ~(unsigned)(CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC)) return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuEventCreate: flags %#x", flags);
    *e = new CUevent_st;
    (*e)->timing = !(flags & CU_EVENT_DISABLE_TIMING);
    return CUDA_SUCCESS;
}

/* Both recorded on one stream and completed; the "time" is the cost of the
 * operations between them (Op.cost: deterministic). */
CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) {
    NEED_CTX();
    if (!a || !b) return CUDA_ERROR_INVALID_HANDLE;
    if (!a->timing || !b->timing) return REFUSE(CUDA_ERROR_INVALID_HANDLE, "cuEventElapsedTime: an event created with CU_EVENT_DISABLE_TIMING");
    if (!a->s || !b->s) return REFUSE(CUDA_ERROR_INVALID_HANDLE, "cuEventElapsedTime: an event never recorded");
    if (a->s->done < a->seq || b->s->done < b->seq) return REFUSE(CUDA_ERROR_NOT_READY, "cuEventElapsedTime: an event not completed");
    if (a->s != b->s) return REFUSE(CUDA_ERROR_NOT_SUPPORTED, "cuEventElapsedTime: events of two streams (not modelled)");
    *ms = (float)(((double)b->cost - (double)a->cost) * 1e-3);
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent e) {
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    delete e;
    return CUDA_SUCCESS;
}

/* The event completes when the stream has done what is queued on it now. */
CUresult cuEventRecord(CUevent e, CUstream s) {
    NEED_CTX();
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    CUstream_st *st = stream_of(s);
    if (st->capture) return REFUSE(CUDA_ERROR_NOT_SUPPORTED, "cuEventRecord in a capture (not modelled)");
    e->s = st;
    e->seq = st->queued;
    e->cost = st->cost;
    return CUDA_SUCCESS;
}

CUresult cuEventSynchronize(CUevent e) {
    NEED_CTX();
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    if (e->s) drain(e->s, e->seq); /* never recorded: complete */
    return CUDA_SUCCESS;
}

CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
    NEED_CTX();
    if (!e || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (!e->s) return CUDA_SUCCESS;
    Op w;
    w.kind = OP_WAIT, w.on = e->s, w.seq = e->seq;
    return enqueue(s, w);
}

static long n_launch; /* counted with FAKE_CUDA_KILL_AT set */
static long n_queued; /* launches queued, for FAKE_CUDA_FAULT_AT_LAUNCH */
static struct LaunchCount {
    ~LaunchCount() {
        if (getenv("FAKE_CUDA_KILL_AT")) fprintf(stderr, "fake-cuda: %ld launches\n", n_launch);
    }
} launch_count;

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem, CUstream s,
                        void **params, void **extra) {
    NEED_CTX();
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    if (extra) return REFUSE(CUDA_ERROR_NOT_SUPPORTED, "cuLaunchKernel: `extra` not modelled");
    if (const char *k = getenv("FAKE_CUDA_KILL_AT"))
        if (++n_launch == atol(k)) raise(SIGTERM);
    unsigned long long threads = (unsigned long long)bx * by * bz;
    if (!gx || !gy || !gz || !bx || !by || !bz || gx > 0x7fffffffu || gy > 65535 || gz > 65535 || bx > 1024 || by > 1024 || bz > 64 || threads > 1024)
        return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuLaunchKernel: grid %u x %u x %u, block %u x %u x %u", gx, gy, gz, bx, by, bz);
    if (f->max_threads > 0 && threads > (unsigned long long)f->max_threads)
        return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuLaunchKernel: %llu threads a block, __launch_bounds__ says at most %d", threads, f->max_threads);
    if (smem > (unsigned)f->max_dyn_smem) return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuLaunchKernel: %u bytes of dynamic shared memory, %d allowed", smem, f->max_dyn_smem);
    if (smem) return REFUSE(CUDA_ERROR_NOT_SUPPORTED, "cuLaunchKernel: dynamic shared memory not modelled");
    if (f->nargs > 0 && !params) return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuLaunchKernel: no parameters");
    Op op;
    op.kind = OP_LAUNCH, op.fn = f->fn;
    op.cost = f->loaded ? 1 : 1001; /* lazy loading: a function loads at its first launch */
    f->loaded = true;
    op.grid[0] = gx, op.grid[1] = gy, op.grid[2] = gz, op.block[0] = bx, op.block[1] = by, op.block[2] = bz;
    for (int i = 0; i < f->nargs; i++) {
        void *p;
        memcpy(&p, params[i], sizeof p); /* every parameter of a generated kernel is a pointer */
        if (!find(p, 1, false)) return REFUSE(CUDA_ERROR_INVALID_VALUE, "cuLaunchKernel: argument %d (%p) is not device memory", i, p);
        op.args.push_back(p);
    }
    CUresult q = enqueue(s, op);
    if (const char *fa = getenv("FAKE_CUDA_FAULT_AT_LAUNCH")) /* this launch faults on the device: the host hears of it at its next call */
        if (q == CUDA_SUCCESS && ++n_queued == atol(fa)) {
            say("launch %ld (function %d) faults on the device (FAKE_CUDA_FAULT_AT_LAUNCH)", n_queued, f->fn);
            sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
        }
    return q;
}

CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
    NEED_CTX();
    if (getenv("FAKE_CUDA_FAULT_AT_CAPTURE"))
        return sticky = REFUSE(CUDA_ERROR_ILLEGAL_ADDRESS, "cuStreamBeginCapture: a kernel queued before faulted (FAKE_CUDA_FAULT_AT_CAPTURE)");
    CUstream_st *st = stream_of(s);
    if (st == &legacy) return REFUSE(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuStreamBeginCapture of the legacy stream");
    if (st->capture) return REFUSE(CUDA_ERROR_ILLEGAL_STATE, "cuStreamBeginCapture: already capturing");
    (void)mode;
    st->capture = new Graph;
    return CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream s, CUgraph *g) {
    CUstream_st *st = stream_of(s);
    if (!st->capture) return REFUSE(CUDA_ERROR_ILLEGAL_STATE, "cuStreamEndCapture: not capturing");
    if (getenv("FAKE_CUDA_CAPTURE_FAIL")) { /* as when something captured is not capturable: the capture is dropped */
        delete st->capture;
        st->capture = NULL;
        *g = NULL;
        return REFUSE(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "cuStreamEndCapture: the capture was invalidated (FAKE_CUDA_CAPTURE_FAIL)");
    }
    CUgraph_st *gr = new CUgraph_st;
    gr->g = *st->capture;
    delete st->capture;
    st->capture = NULL;
    *g = gr;
    return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long flags) {
    if (!g || flags) return CUDA_ERROR_INVALID_VALUE;
    CUgraphExec_st *x = new CUgraphExec_st;
    x->g = g->g;
    *e = x;
    return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec e, CUstream s) {
    NEED_CTX();
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    if (stream_of(s)->capture) return REFUSE(CUDA_ERROR_NOT_SUPPORTED, "cuGraphLaunch into a capture (not modelled)");
    for (const Op &op : e->g.ops) {
        CUresult r = enqueue(s, op);
        if (r) return r;
    }
    return CUDA_SUCCESS;
}

CUresult cuGraphExecDestroy(CUgraphExec e) {
    drain_all();
    delete e;
    return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph g) {
    delete g;
    return CUDA_SUCCESS;
}

/* ================= cuBLASLt ================= */

static int type_size(cudaDataType_t t) {
    switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_64F: return 8;
    case CUDA_R_16F: case CUDA_R_16BF: return 2;
    default: return 0;
    }
}

const char *cublasLtGetStatusName(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
    *h = new cublasLtContext{1, false};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
    if (!h || !h->live) return CUBLAS_STATUS_NOT_INITIALIZED;
    drain_all();
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t ct, cudaDataType_t scale) {
    bool ok = (ct == CUBLAS_COMPUTE_32F || ct == CUBLAS_COMPUTE_32F_FAST_TF32) ? scale == CUDA_R_32F : ct == CUBLAS_COMPUTE_64F ? scale == CUDA_R_64F : false;
    if (!ok) return REFUSE(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmulDescCreate: compute type %d with scale type %d not modelled", (int)ct, (int)scale);
    Desc *x = new Desc;
    x->ct = ct, x->scale = scale;
    *d = (cublasLtMatmulDesc_t)(void *)x;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
    delete (Desc *)(void *)d;
    return CUBLAS_STATUS_SUCCESS;
}


cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t dd, cublasLtMatmulDescAttributes_t a, const void *buf, size_t n) {
    Desc *d = (Desc *)(void *)dd;
    cublasStatus_t s;
    switch (a) {
    case CUBLASLT_MATMUL_DESC_TRANSA: s = attr(&d->transa, buf, n, "TRANSA"); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: s = attr(&d->transb, buf, n, "TRANSB"); break;
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: s = attr(&d->pmode, buf, n, "POINTER_MODE"); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: s = attr(&d->epilogue, buf, n, "EPILOGUE"); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: s = attr(&d->bias, buf, n, "BIAS_POINTER"); break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: s = attr(&d->bias_type, buf, n, "BIAS_DATA_TYPE"); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: s = attr(&d->aux, buf, n, "EPILOGUE_AUX_POINTER"); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: s = attr(&d->aux_ld, buf, n, "EPILOGUE_AUX_LD"); break;
    default: return REFUSE(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmulDescSetAttribute: attribute %d not modelled", (int)a);
    }
    if (s) return s;
    if ((d->transa != CUBLAS_OP_N && d->transa != CUBLAS_OP_T) || (d->transb != CUBLAS_OP_N && d->transb != CUBLAS_OP_T))
        return REFUSE(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescSetAttribute: transpose %d/%d", d->transa, d->transb);
    if (d->pmode != CUBLASLT_POINTER_MODE_HOST && d->pmode != CUBLASLT_POINTER_MODE_DEVICE)
        return REFUSE(CUBLAS_STATUS_NOT_SUPPORTED, "pointer mode %d not modelled", d->pmode);
    switch (d->epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT: case CUBLASLT_EPILOGUE_BIAS: case CUBLASLT_EPILOGUE_GELU: case CUBLASLT_EPILOGUE_GELU_BIAS:
    case CUBLASLT_EPILOGUE_GELU_AUX: case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: case CUBLASLT_EPILOGUE_DGELU:
    case CUBLASLT_EPILOGUE_BGRADA: case CUBLASLT_EPILOGUE_BGRADB: break;
    default: return REFUSE(CUBLAS_STATUS_NOT_SUPPORTED, "epilogue %u not modelled", d->epilogue);
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType t, uint64_t rows, uint64_t cols, int64_t ld) {
    if (!type_size(t)) return REFUSE(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatrixLayoutCreate: type %d not modelled", (int)t);
    /* column-major: a column is ld elements apart, ld >= rows */
    if (ld < (int64_t)(rows ? rows : 1)) return REFUSE(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutCreate: ld %lld < rows %llu", (long long)ld, (unsigned long long)rows);
    Layout *x = new Layout;
    x->t = t, x->rows = rows, x->cols = cols, x->ld = ld;
    *l = (cublasLtMatrixLayout_t)(void *)x;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
    delete (Layout *)(void *)l;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t ll, cublasLtMatrixLayoutAttribute_t a, const void *buf, size_t n) {
    Layout *l = (Layout *)(void *)ll;
    switch (a) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return attr(&l->batch, buf, n, "BATCH_COUNT");
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return attr(&l->stride, buf, n, "STRIDED_BATCH_OFFSET");
    default: return REFUSE(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatrixLayoutSetAttribute: attribute %d not modelled", (int)a);
    }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
    *p = (cublasLtMatmulPreference_t)(void *)new Pref;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    delete (Pref *)(void *)p;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pp, cublasLtMatmulPreferenceAttributes_t a, const void *buf, size_t n) {
    Pref *p = (Pref *)(void *)pp;
    switch (a) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return attr(&p->max_ws, buf, n, "MAX_WORKSPACE_BYTES");
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return attr(&p->align[0], buf, n, "MIN_ALIGNMENT_A_BYTES");
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return attr(&p->align[1], buf, n, "MIN_ALIGNMENT_B_BYTES");
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return attr(&p->align[2], buf, n, "MIN_ALIGNMENT_C_BYTES");
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return attr(&p->align[3], buf, n, "MIN_ALIGNMENT_D_BYTES");
    default: return REFUSE(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmulPreferenceSetAttribute: attribute %d not modelled", (int)a);
    }
}

/* The epilogues with an aux matrix (of those modelled): GELU_AUX[_BIAS]
 * write it, DGELU reads it. */
static bool has_aux(const Desc *d) { return (d->epilogue & 128) != 0; }

/* The bias-gradient epilogues: the sums over k of op(A) (BGRADA, one per
 * row of D) or of op(B) (BGRADB, one per column of D), into the bias
 * pointer, in D's type (cuBLASLt's default for them). */
static bool is_bgrad(const Desc *d) { return d->epilogue == CUBLASLT_EPILOGUE_BGRADA || d->epilogue == CUBLASLT_EPILOGUE_BGRADB; }

/* GELU, tanh form, and its derivative. */
static double gelu(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static double gelu_deriv(double x) {
    double t = tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
}

/* The problem the descriptor and layouts describe, checked: m x k times
 * k x n into m x n, types the compute type takes, one batch count. */
static cublasStatus_t check_problem(const Desc *d, const Layout *a, const Layout *b, const Layout *c, const Layout *dl) {
    uint64_t m = d->transa == CUBLAS_OP_N ? a->rows : a->cols, k = d->transa == CUBLAS_OP_N ? a->cols : a->rows;
    uint64_t kb = d->transb == CUBLAS_OP_N ? b->rows : b->cols, n = d->transb == CUBLAS_OP_N ? b->cols : b->rows;
    if (k != kb || c->rows != m || c->cols != n || dl->rows != m || dl->cols != n || c->ld != dl->ld)
        return REFUSE(CUBLAS_STATUS_INVALID_VALUE, "matmul: op(A) %llux%llu, op(B) %llux%llu, C %llux%llu (ld %lld), D %llux%llu (ld %lld) do not fit",
                      (unsigned long long)m, (unsigned long long)k, (unsigned long long)kb, (unsigned long long)n, (unsigned long long)c->rows,
                      (unsigned long long)c->cols, (long long)c->ld, (unsigned long long)dl->rows, (unsigned long long)dl->cols, (long long)dl->ld);
    if (a->t != b->t || c->t != dl->t) return REFUSE(CUBLAS_STATUS_NOT_SUPPORTED, "matmul: A, B types %d, %d; C, D types %d, %d", a->t, b->t, c->t, dl->t);
    bool ok;
    if (d->ct == CUBLAS_COMPUTE_64F) ok = a->t == CUDA_R_64F && c->t == CUDA_R_64F;
    else if (d->ct == CUBLAS_COMPUTE_32F_FAST_TF32) ok = a->t == CUDA_R_32F && c->t == CUDA_R_32F;
    else ok = a->t == CUDA_R_32F ? c->t == CUDA_R_32F : (a->t == CUDA_R_16BF || a->t == CUDA_R_16F) && (c->t == a->t || c->t == CUDA_R_32F);
    if (!ok) return REFUSE(CUBLAS_STATUS_NOT_SUPPORTED, "matmul: compute type %d with A/B type %d and C/D type %d", (int)d->ct, (int)a->t, (int)c->t);
    if (a->batch != dl->batch || b->batch != dl->batch || c->batch != dl->batch)
        return REFUSE(CUBLAS_STATUS_INVALID_VALUE, "matmul: batch counts %d, %d, %d, %d", a->batch, b->batch, c->batch, dl->batch);
    if (d->epilogue & CUBLASLT_EPILOGUE_BIAS) {
        if (!d->bias) return REFUSE(CUBLAS_STATUS_INVALID_VALUE, "matmul: bias epilogue without a bias pointer");
        int bt = d->bias_type == -1 ? (int)dl->t : d->bias_type;
        if (bt != (int)dl->t) return REFUSE(CUBLAS_STATUS_NOT_SUPPORTED, "matmul: bias of type %d for D of type %d", bt, (int)dl->t);
    }
    if (has_aux(d)) {
        /* the GELU input matrix: D's shape, leading dimension a multiple of
         * 8 and at least D's rows; D's type; no batches modelled */
        if (!d->aux) return REFUSE(CUBLAS_STATUS_INVALID_VALUE, "matmul: epilogue %u without an aux pointer", d->epilogue);
        if (d->aux_ld % 8 || d->aux_ld < (int64_t)dl->rows)
            return REFUSE(CUBLAS_STATUS_INVALID_VALUE, "matmul: aux leading dimension %lld (D has %llu rows; a multiple of 8 needed)", (long long)d->aux_ld,
                          (unsigned long long)dl->rows);
        if (dl->batch != 1) return REFUSE(CUBLAS_STATUS_NOT_SUPPORTED, "matmul: aux with batches not modelled");
    }
    if (is_bgrad(d)) {
        if (!d->bias) return REFUSE(CUBLAS_STATUS_INVALID_VALUE, "matmul: bias-gradient epilogue without a bias pointer");
        int bt = d->bias_type == -1 ? (int)dl->t : d->bias_type;
        if (bt != (int)dl->t) return REFUSE(CUBLAS_STATUS_NOT_SUPPORTED, "matmul: bias gradient of type %d for D of type %d", bt, (int)dl->t);
        if (dl->batch != 1) return REFUSE(CUBLAS_STATUS_NOT_SUPPORTED, "matmul: a bias gradient with batches not modelled");
        if (getenv("FAKE_CUBLASLT_NO_BGRAD")) return REFUSE(CUBLAS_STATUS_NOT_SUPPORTED, "matmul: no bias-gradient epilogues (FAKE_CUBLASLT_NO_BGRAD)");
    }
    if ((d->epilogue & (CUBLASLT_EPILOGUE_GELU | CUBLASLT_EPILOGUE_DGELU)) && getenv("FAKE_CUBLASLT_NO_GELU"))
        return REFUSE(CUBLAS_STATUS_NOT_SUPPORTED, "matmul: no GELU epilogues (FAKE_CUBLASLT_NO_GELU)");
    if ((d->epilogue & CUBLASLT_EPILOGUE_BIAS) && getenv("FAKE_CUBLASLT_NO_BIAS"))
        return REFUSE(CUBLAS_STATUS_NOT_SUPPORTED, "matmul: no bias epilogues (FAKE_CUBLASLT_NO_BIAS)");
    return CUBLAS_STATUS_SUCCESS;
}

static const uint64_t ALGO_MAGIC = 0x66616b65616c676full;

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t dd, cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
                                              cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D, cublasLtMatmulPreference_t pp, int req,
                                              cublasLtMatmulHeuristicResult_t *res, int *nres) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (req < 1) return CUBLAS_STATUS_INVALID_VALUE;
    Desc *d = (Desc *)(void *)dd;
    cublasStatus_t s = check_problem(d, (Layout *)(void *)A, (Layout *)(void *)B, (Layout *)(void *)C, (Layout *)(void *)D);
    *nres = 0;
    if (s) return s;
    Pref *p = (Pref *)(void *)pp;
    for (int i = 0; i < 4; i++)
        if (!p->align[i] || (p->align[i] & (p->align[i] - 1)))
            return REFUSE(CUBLAS_STATUS_INVALID_VALUE, "heuristic: alignment %u is not a power of two", p->align[i]);
    /* FAKE_CUBLASLT_BAD_FIRST: two results before the good one, whose
     * fields are garbage that cublasLtMatmul refuses: one whose state says
     * so, one that asks for more workspace than the preference allows */
    int bad = getenv("FAKE_CUBLASLT_BAD_FIRST") && req >= 3 ? 2 : 0;
    for (int i = 0; i < bad; i++) {
        memset(&res[i], 0xA5, sizeof res[i]);
        if (i == 0) res[i].state = CUBLAS_STATUS_NOT_SUPPORTED;
        else res[i].state = CUBLAS_STATUS_SUCCESS, res[i].workspaceSize = p->max_ws + 1;
    }
    memset(&res[bad], 0, sizeof res[bad]);
    uint64_t tag[6] = {ALGO_MAGIC, p->align[0], p->align[1], p->align[2], p->align[3], p->max_ws < 4096 ? p->max_ws : 4096};
    memcpy(res[bad].algo.data, tag, sizeof tag);
    res[bad].workspaceSize = (size_t)tag[5];
    res[bad].state = CUBLAS_STATUS_SUCCESS;
    res[bad].wavesCount = 1.0f;
    *nres = bad + 1;
    return CUBLAS_STATUS_SUCCESS;
}

/* Bytes from a matrix's start to past its last element. */
static size_t span(const Layout *l) {
    if (!l->rows || !l->cols) return 0;
    uint64_t last = (uint64_t)(l->batch - 1) * (uint64_t)l->stride + (l->cols - 1) * (uint64_t)l->ld + l->rows;
    return (size_t)last * (size_t)type_size(l->t);
}

static double load(const void *p, cudaDataType_t t, uint64_t i) {
    switch (t) {
    case CUDA_R_32F: return ((const float *)p)[i];
    case CUDA_R_64F: return ((const double *)p)[i];
    case CUDA_R_16F: return __half2float(((const __half *)p)[i]);
    case CUDA_R_16BF: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    default: return NAN;
    }
}

static void store(void *p, cudaDataType_t t, uint64_t i, double v) {
    switch (t) {
    case CUDA_R_32F: ((float *)p)[i] = (float)v; break;
    case CUDA_R_64F: ((double *)p)[i] = v; break;
    case CUDA_R_16F: ((__half *)p)[i] = __float2half_rn((float)v); break;
    case CUDA_R_16BF: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn((float)v); break;
    default: break;
    }
}

/* TF32: 10 mantissa bits, rounded to nearest (ties away, as cvt.rna). */
static double tf32(double v) {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & ~0x1fffu;
    memcpy(&f, &u, 4);
    return f;
}

/* run_gemm's operands (at file scope: the emulation fills function-local
 * statics as shared memory before each block) */
static std::vector<double> gemm_a, gemm_b;

static void run_gemm(const Gemm *g) {
    const Desc *d = &g->d;
    double alpha = g->alpha, beta = g->beta;
    if (d->pmode == CUBLASLT_POINTER_MODE_DEVICE) {
        alpha = d->scale == CUDA_R_64F ? *(const double *)g->palpha : *(const float *)g->palpha;
        beta = d->scale == CUDA_R_64F ? *(const double *)g->pbeta : *(const float *)g->pbeta;
    }
    bool reads_c = d->pmode == CUBLASLT_POINTER_MODE_DEVICE && getenv("FAKE_CUBLASLT_BETA0_READS_C");
    bool ta = d->transa == CUBLAS_OP_T, tb = d->transb == CUBLAS_OP_T, t32 = d->ct == CUBLAS_COMPUTE_32F_FAST_TF32;
    uint64_t m = g->dl.rows, n = g->dl.cols, k = ta ? g->a.rows : g->a.cols;
    int ea = type_size(g->a.t), ec = type_size(g->c.t);
    /* op(A)[i][p] and op(B)[p][j] */
    auto opa = [&](const void *A, uint64_t i, uint64_t p) { return load(A, g->a.t, ta ? p + i * (uint64_t)g->a.ld : i + p * (uint64_t)g->a.ld); };
    auto opb = [&](const void *B, uint64_t p, uint64_t j) { return load(B, g->b.t, tb ? j + p * (uint64_t)g->b.ld : p + j * (uint64_t)g->b.ld); };
    for (int32_t bt = 0; bt < g->dl.batch; bt++) {
        const char *A = (const char *)g->A + (size_t)(bt * g->a.stride) * ea, *B = (const char *)g->B + (size_t)(bt * g->b.stride) * ea;
        const char *C = (const char *)g->C + (size_t)(bt * g->c.stride) * ec;
        char *D = (char *)g->D + (size_t)(bt * g->dl.stride) * ec;
        /* op(A)'s rows and op(B)'s columns as doubles (TF32 applied), p
         * contiguous in both: the same sums in the same order as loading
         * them element by element, without a cache miss each where an
         * operand is strided */
        gemm_a.resize(m * k), gemm_b.resize(n * k);
        for (uint64_t i = 0; i < m; i++)
            for (uint64_t p = 0; p < k; p++) gemm_a[i * k + p] = t32 ? tf32(opa(A, i, p)) : opa(A, i, p);
        for (uint64_t j = 0; j < n; j++)
            for (uint64_t p = 0; p < k; p++) gemm_b[j * k + p] = t32 ? tf32(opb(B, p, j)) : opb(B, p, j);
        for (uint64_t j = 0; j < n; j++)
            for (uint64_t i = 0; i < m; i++) {
                const double *x = &gemm_a[i * k], *y = &gemm_b[j * k];
                double acc = 0;
                for (uint64_t p = 0; p < k; p++) acc += x[p] * y[p];
                double v = alpha * acc;
                if (beta != 0 || reads_c) v += beta * load(C, g->c.t, i + j * (uint64_t)g->c.ld);
                if (d->epilogue & CUBLASLT_EPILOGUE_BIAS) v += load(d->bias, g->dl.t, i);
                uint64_t ax = i + j * (uint64_t)d->aux_ld;
                if (d->epilogue == CUBLASLT_EPILOGUE_DGELU) v *= gelu_deriv(load(d->aux, g->dl.t, ax));
                else if (d->epilogue & CUBLASLT_EPILOGUE_GELU) {
                    if (has_aux(d)) store(d->aux, g->dl.t, ax, v);
                    v = gelu(v);
                }
                /* FAKE_CUBLASLT_INF: every product's D(0, 0) infinite (an
                 * overflow that the CPU does not have: kcheck's control) */
                if (i == 0 && j == 0 && bt == 0 && getenv("FAKE_CUBLASLT_INF")) v = INFINITY;
                store(D, g->dl.t, i + j * (uint64_t)g->dl.ld, v);
            }
    }
    /* the bias gradients (no batches: check_problem) */
    bool bga = d->epilogue == CUBLASLT_EPILOGUE_BGRADA;
    for (uint64_t r = 0; is_bgrad(d) && r < (bga ? m : n); r++) {
        double sum = 0;
        for (uint64_t p = 0; p < k; p++) sum += bga ? opa(g->A, r, p) : opb(g->B, p, r);
        store((void *)d->bias, g->dl.t, r, sum);
    }
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t dd, const void *alpha, const void *A, cublasLtMatrixLayout_t Ad,
                              const void *B, cublasLtMatrixLayout_t Bd, const void *beta, const void *C, cublasLtMatrixLayout_t Cd, void *D,
                              cublasLtMatrixLayout_t Dd, const cublasLtMatmulAlgo_t *algo, void *ws, size_t wsn, cudaStream_t s) {
    if (!h || !h->live) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (sticky) return CUBLAS_STATUS_EXECUTION_FAILED;
    std::shared_ptr<Gemm> gp = std::make_shared<Gemm>();
    Gemm *g = gp.get();
    g->d = *(Desc *)(void *)dd;
    g->a = *(Layout *)(void *)Ad, g->b = *(Layout *)(void *)Bd, g->c = *(Layout *)(void *)Cd, g->dl = *(Layout *)(void *)Dd;
    g->A = A, g->B = B, g->C = C, g->D = D;
    cublasStatus_t st = check_problem(&g->d, &g->a, &g->b, &g->c, &g->dl);
    if (st) return st;
    if (!algo) return REFUSE(CUBLAS_STATUS_NOT_SUPPORTED, "matmul without an algorithm (not modelled)");
    /* FAKE_CUBLASLT_EPI_RUN_REFUSE: the heuristic offers algorithms for
     * the GELU, bias-gradient and bias epilogues, the matmul refuses them
     * (the heuristic's success "doesn't fully guarantee algo will run",
     * cublasLt.h) */
    if (((g->d.epilogue & (CUBLASLT_EPILOGUE_GELU | CUBLASLT_EPILOGUE_DGELU | CUBLASLT_EPILOGUE_BIAS)) || is_bgrad(&g->d)) &&
        getenv("FAKE_CUBLASLT_EPI_RUN_REFUSE"))
        return REFUSE(CUBLAS_STATUS_NOT_SUPPORTED, "matmul: epilogue %u offered by the heuristic, refused (FAKE_CUBLASLT_EPI_RUN_REFUSE)", g->d.epilogue);
    uint64_t tag[6];
    memcpy(tag, algo->data, sizeof tag);
    if (tag[0] != ALGO_MAGIC) return REFUSE(CUBLAS_STATUS_INVALID_VALUE, "matmul: the algorithm is not one the heuristic gave");
    const void *ptr[4] = {A, B, C, D};
    const Layout *lay[4] = {&g->a, &g->b, &g->c, &g->dl};
    for (int i = 0; i < 4; i++) {
        if (span(lay[i]) && !find(ptr[i], span(lay[i]), false))
            return REFUSE(CUBLAS_STATUS_INVALID_VALUE, "matmul: %c (%zu bytes at %p) is not inside one device allocation", "ABCD"[i], span(lay[i]), ptr[i]);
        uint64_t al = tag[1 + i];
        uint64_t bits = (uintptr_t)ptr[i] | (uint64_t)lay[i]->stride * (uint64_t)type_size(lay[i]->t) * (lay[i]->batch > 1);
        if (bits & (al - 1))
            return REFUSE(CUBLAS_STATUS_INVALID_VALUE, "matmul: %c at %p (batch stride %lld) is less aligned than the %llu bytes the heuristic was told", "ABCD"[i],
                                    ptr[i], (long long)lay[i]->stride, (unsigned long long)al);
    }
    if (wsn < tag[5]) return REFUSE(CUBLAS_STATUS_INVALID_VALUE, "matmul: %zu bytes of workspace, the algorithm needs %llu", wsn, (unsigned long long)tag[5]);
    if (wsn && !find(ws, wsn, false)) return REFUSE(CUBLAS_STATUS_INVALID_VALUE, "matmul: the workspace is not device memory");
    if ((g->d.epilogue & CUBLASLT_EPILOGUE_BIAS) && !find(g->d.bias, g->dl.rows * (size_t)type_size(g->dl.t), false))
        return REFUSE(CUBLAS_STATUS_INVALID_VALUE, "matmul: the bias (%llu rows) is not device memory", (unsigned long long)g->dl.rows);
    if (is_bgrad(&g->d) &&
        !find(g->d.bias, (g->d.epilogue == CUBLASLT_EPILOGUE_BGRADA ? g->dl.rows : g->dl.cols) * (size_t)type_size(g->dl.t), false))
        return REFUSE(CUBLAS_STATUS_INVALID_VALUE, "matmul: the bias gradient is not device memory");
    if (has_aux(&g->d) && g->dl.cols &&
        !find(g->d.aux, ((g->dl.cols - 1) * (size_t)g->d.aux_ld + g->dl.rows) * (size_t)type_size(g->dl.t), false))
        return REFUSE(CUBLAS_STATUS_INVALID_VALUE, "matmul: the aux matrix (%llu x %llu, ld %lld) is not inside one device allocation",
                      (unsigned long long)g->dl.rows, (unsigned long long)g->dl.cols, (long long)g->d.aux_ld);
    size_t ss = g->d.scale == CUDA_R_64F ? 8 : 4;
    bool on_dev = find(alpha, ss, false) && find(beta, ss, false);
    if (g->d.pmode == CUBLASLT_POINTER_MODE_DEVICE) {
        if (!on_dev) return REFUSE(CUBLAS_STATUS_INVALID_VALUE, "matmul: device pointer mode, alpha/beta not in device memory");
        g->palpha = alpha, g->pbeta = beta;
    } else {
        if (find(alpha, ss, false) || find(beta, ss, false))
            return REFUSE(CUBLAS_STATUS_INVALID_VALUE, "matmul: host pointer mode, alpha/beta in device memory");
        g->alpha = ss == 8 ? *(const double *)alpha : *(const float *)alpha;
        g->beta = ss == 8 ? *(const double *)beta : *(const float *)beta;
    }
    Op op;
    op.kind = OP_GEMM, op.gemm = gp;
    op.cost = h->warm ? 1 : 1001; /* the handle's first product: cuBLASLt's own start */
    h->warm = true;
    return enqueue((CUstream)s, op) == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

} /* extern "C" */

static void run_op(Op &op) {
    switch (op.kind) {
    case OP_LAUNCH: fake_kernel_run(op.fn, op.grid, op.block, op.args.data()); break;
    case OP_MEMSET: memset(op.dst, op.byte, op.n); break;
    case OP_COPY: memcpy(op.dst, op.src ? op.src : op.bytes.data(), op.n); break;
    case OP_WAIT: drain(op.on, op.seq); break;
    case OP_GEMM: run_gemm(op.gemm.get()); break;
    }
}
