/* runtime/rt.h — the runtime's private header: what its files share.
 *
 * Nothing here is part of the public contract (that is trainc_rt.h); the
 * tests include it to reach the data loader and the safetensors parser.
 *
 *   util.c         error messages, checked C-library calls, dtype conversion,
 *                  the per-micro-batch seed
 *   session.c      sessions: create, parameter init, set/get, step, eval
 *   cpu.c          the CPU backend (one arena, the compiled schedules)
 *   cuda.c         the CUDA backend (dlopen'ed driver and cuBLASLt, graphs)
 *   data.c         token-file batches and the prefetch thread
 *   safetensors.c  the safetensors header: strict parser and writer
 *   checkpoint.c   trn_save / trn_load
 *   main.c         trn_main: flags, the training loop, progress, metrics,
 *                  evaluation, sampling
 */
#ifndef TRAINC_RT_INTERNAL_H
#define TRAINC_RT_INTERNAL_H

#include "trainc_rt.h"

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* The most steps a run takes, and the largest step and data position a
 * checkpoint may hold: counts exact in a double (the schedule's), far from
 * overflowing the arithmetic on them. */
#define TRN_MAX_STEPS (INT64_C(1) << 53)

#if defined(__GNUC__) || defined(__clang__)
#define RT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define RT_PRINTF(a, b)
#endif

/* ===================================================================== */
/* util.c — errors and checked C-library calls                           */
/* ===================================================================== */

/* Formats a message into err (when err and errn are set) and returns -1. */
int rt_fail(char *err, size_t errn, const char *fmt, ...) RT_PRINTF(3, 4);
/* __FILE__ without the build's absolute prefix: "runtime/data.c". */
const char *rt_srcname(const char *file);

/* Every call into the C library's files and allocation goes through one of
 * these: on failure they write "CALL(args) failed at runtime/FILE.c:LINE:
 * reason" into err and return NULL / -1 (llm.c's fopenCheck, but returning
 * instead of exiting, since this is a library). */
void *rt_malloc_at(size_t n, const char *file, int line, char *err, size_t errn);
void *rt_calloc_at(size_t n, size_t size, const char *file, int line, char *err, size_t errn);
void *rt_realloc_at(void *p, size_t n, const char *file, int line, char *err, size_t errn);
FILE *rt_fopen_at(const char *path, const char *mode, const char *file, int line, char *err, size_t errn);
int   rt_fread_at(void *dst, size_t n, FILE *f, const char *path, const char *file, int line, char *err, size_t errn);
int   rt_fwrite_at(const void *src, size_t n, FILE *f, const char *path, const char *file, int line, char *err, size_t errn);
int   rt_fseek_at(FILE *f, off_t off, int whence, const char *path, const char *file, int line, char *err, size_t errn);
int   rt_fsize_at(FILE *f, const char *path, uint64_t *size, const char *file, int line, char *err, size_t errn);
int   rt_fclose_at(FILE *f, const char *path, const char *file, int line, char *err, size_t errn);
int   rt_fflush_fsync_at(FILE *f, const char *path, const char *file, int line, char *err, size_t errn);
int   rt_rename_at(const char *from, const char *to, const char *file, int line, char *err, size_t errn);

#define rt_malloc(n, err, errn)              rt_malloc_at((n), __FILE__, __LINE__, (err), (errn))
#define rt_calloc(n, size, err, errn)        rt_calloc_at((n), (size), __FILE__, __LINE__, (err), (errn))
#define rt_realloc(p, n, err, errn)          rt_realloc_at((p), (n), __FILE__, __LINE__, (err), (errn))
#define rt_fopen(path, mode, err, errn)      rt_fopen_at((path), (mode), __FILE__, __LINE__, (err), (errn))
#define rt_fread(dst, n, f, path, err, errn) rt_fread_at((dst), (n), (f), (path), __FILE__, __LINE__, (err), (errn))
#define rt_fwrite(src, n, f, path, err, errn) rt_fwrite_at((src), (n), (f), (path), __FILE__, __LINE__, (err), (errn))
#define rt_fseek(f, off, whence, path, err, errn) rt_fseek_at((f), (off), (whence), (path), __FILE__, __LINE__, (err), (errn))
#define rt_fsize(f, path, size, err, errn)   rt_fsize_at((f), (path), (size), __FILE__, __LINE__, (err), (errn))
#define rt_fclose(f, path, err, errn)        rt_fclose_at((f), (path), __FILE__, __LINE__, (err), (errn))
#define rt_fflush_fsync(f, path, err, errn)  rt_fflush_fsync_at((f), (path), __FILE__, __LINE__, (err), (errn))
#define rt_rename(from, to, err, errn)       rt_rename_at((from), (to), __FILE__, __LINE__, (err), (errn))

/* The shortest decimal form of x that reads back as the same double
 * (NaN and infinities as printf writes them). */
void rt_fmt_double(char *out, size_t n, double x);
void rt_human_bytes(char *out, size_t n, int64_t b);   /* "4.21 GiB", "512 B" */
double rt_now(void);                                   /* monotonic seconds */
/* Creates the file that PATH is written to before it is renamed over PATH
 * (a write stopped at any point leaves PATH whole): "PATH.PID.tmp" beside
 * it, made with O_CREAT|O_EXCL so that no existing file is ever opened for
 * writing; where that name is taken (a file, a link, a folder), the next
 * of "PATH.PID.1.tmp", "PATH.PID.2.tmp", ...  The name is malloc'd into
 * *tmp (the caller removes the file on failure and frees it). */
FILE *rt_tmp_create_at(const char *path, char **tmp, const char *file, int line, char *err, size_t errn);
#define rt_tmp_create(path, tmp, err, errn) rt_tmp_create_at((path), (tmp), __FILE__, __LINE__, (err), (errn))
/* The file a write to path replaces: a symbolic link's target (a dangling
 * chain's last name, each relative to its link's folder), else path itself.
 * out: RT_PATH_MAX bytes. */
enum { RT_PATH_MAX = 4096 };
const char *rt_write_target(const char *path, char *out);

/* A growing string (header JSON, error lists). */
typedef struct RtBuf { char *p; size_t len, cap; int oom; } RtBuf;
void rt_buf_printf(RtBuf *b, const char *fmt, ...) RT_PRINTF(2, 3);
void rt_buf_json_string(RtBuf *b, const char *s);   /* "s" with JSON escapes */
void rt_buf_free(RtBuf *b);

/* ===================================================================== */
/* util.c — dtypes                                                        */
/* ===================================================================== */

int      rt_host_is_little_endian(void);
/* Round-to-nearest-even conversions from double (overflow gives inf). */
uint16_t rt_f64_to_bf16(double x);
uint16_t rt_f64_to_f16(double x);
double   rt_bf16_to_f64(uint16_t h);
double   rt_f16_to_f64(uint16_t h);
/* Element i of a host array of dtype dt, as a double / stored from a double
 * (floating types round to nearest even; integer types round to nearest and
 * saturate, NaN gives 0). */
double rt_elem_get(TrnDType dt, const void *base, int64_t i);
void   rt_elem_set(TrnDType dt, void *base, int64_t i, double v);
int    rt_dtype_is_float(TrnDType dt);
/* numel * dtype size with an overflow check; -1 on overflow. */
int64_t rt_nbytes(TrnDType dt, int64_t numel);
/* Elements [first, first + count) of t (a backend's read_part): 0 when they
 * are in it, else -1 with the reason in err. */
int rt_part_in(const TrnTensor *t, int64_t first, int64_t count, char *err, size_t errn);

/* The param a state "amp.bf16.P" / "amp.f16.P" copies (mixed precision's
 * half-precision weights: trainc_rt.h), or NULL. */
const char *rt_copy_of(const TrnTensor *t);
/* A LoRA adapter (passes/lora.c): a param named "….lora_A…" or
 * "….lora_B…" (the component followed by '.' or the end).  trn_load of
 * params only leaves the adapters a checkpoint lacks as they are. */
int     rt_is_adapter(const TrnTensor *t);
/* Sets the copies of param `param` (every copy when param < 0) to it
 * converted to the copy's dtype: after initialising or loading (all), after
 * trn_set of a param (its own).  All of them run the model's
 * TRN_RUN_REFRESH on the backend when it has one; else, and for one param,
 * the host reads, converts and writes. */
int     rt_refresh_copies(TrnSession *s, int param);

/* The saved view of a tensor: ckpt_shape, or shape when ckpt_shape is all 0. */
void    rt_ckpt_shape(const TrnTensor *t, int64_t out[TRN_MAX_RANK]);
int64_t rt_ckpt_numel(const TrnTensor *t);
/* Copies the leading sub-block `blk` of a row-major array of shape `full`
 * (to_block = 1: full -> block; 0: block -> full, other elements untouched). */
void rt_block_copy(void *dst, const void *src, int rank, const int64_t *full, const int64_t *blk, size_t esize, int to_block);

/* ===================================================================== */
/* util.c — seeds                                                         */
/* ===================================================================== */

uint64_t rt_splitmix64(uint64_t x);
/* The rng.seed input of micro-batch `micro` (0-based) of step `step`
 * (1-based) under train seed `seed`:
 *   h = splitmix64(splitmix64(splitmix64(seed) ^ step) ^ micro)
 *   rng.seed = h >> 33         (31 bits: non-negative as an i32)
 * A pure function, so a resumed run draws the same dropout masks. */
int32_t rt_micro_seed(uint64_t seed, int64_t step, int64_t micro);

/* The token drawn from logits l[0, V) (a sampler's step; l is overwritten):
 * softmax(l / temperature) over the top_k largest logits (0: all of them;
 * among equal logits at the k-th, the lower indices), and the first token
 * whose running sum of weights passes u * their total (u uniform in
 * [0, 1)).  temperature 0, and top_k 1, give the largest logit (the lowest
 * index among equals) whatever u is.  -1 when a logit is NaN or +inf, or
 * every one is -inf: nothing to draw from.  scratch: V doubles, used when
 * 0 < top_k < V. */
int64_t rt_draw_token(double *l, int64_t V, double temperature, int64_t top_k, double u, double *scratch);

/* Sets the OpenMP thread count when the executable links OpenMP (weak symbol). */
void rt_set_threads(int n);

/* Calls fn(ctx, lo, hi) over [0, n) in contiguous ranges on up to `threads`
 * POSIX threads (0: the online CPUs, at most 64), each range at least
 * `grain` long, and returns when all are done: for work whose result does
 * not depend on how it is split (parameter initialisation, element-wise
 * conversion), never for sums.  What cannot start a thread runs on the
 * caller's. */
typedef void (*RtRangeFn)(void *ctx, int64_t lo, int64_t hi);
void rt_parallel_ranges(int64_t n, int64_t grain, int threads, RtRangeFn fn, void *ctx);

/* ===================================================================== */
/* session.c                                                              */
/* ===================================================================== */

#define RT_ERRN 4096

struct TrnSession {
    const TrnModel *m;
    TrnBackend      be;
    char            err[RT_ERRN];
    uint64_t        seed;               /* train seed: init, data order, dropout */
    int             threads;            /* host threads for initialisation (0: the online CPUs) */
    int             init_on_device;     /* tensors the backend initialised where they live (TrnBackend.init) */
    int             refreshed_on_backend; /* runs of TRN_RUN_REFRESH */
    int64_t         step;               /* steps taken */
    int64_t         grad_accum;
    double          loss, grad_norm;
    /* the learning-rate schedule */
    char            schedule[16];
    double          lr, min_lr;
    int64_t         warmup, total;
    /* the trainer's data position, saved in checkpoints with state: the
     * number of training micro-batches consumed, and the batch order */
    int64_t         data_pos;
    char            batches[16];
    int             has_data_pos;       /* set by trn_load from a checkpoint with state */
    /* the session's making, host wall seconds (the metrics' start_phases):
     * the backend's (trn_create; what the CUDA device spent on what, as
     * JSON members, in dev_phases), the parameters' initialisation */
    double          t_device, t_init;
    char            dev_phases[192];
    char            load_note[512];     /* trn_load_note */
    char            load_nonfinite[320]; /* trn_load_nonfinite */
    char            load_model[128];     /* trn_load_model */
};

int rt_seterr(TrnSession *s, const char *fmt, ...) RT_PRINTF(2, 3);
/* Checks a model descriptor (abi, indices, shapes, offsets within the arena
 * when the backend is compiled). */
int rt_check_model(const TrnModel *m, char *err, size_t errn);
/* Reads / writes a scalar tensor as a double. */
int rt_get_scalar(TrnSession *s, int t, double *v);
int rt_set_scalar(TrnSession *s, int t, double v);
int rt_set_schedule_name(TrnSession *s, const char *schedule);
/* Points the sampling graph at position pos[b] of sequence b (NULL: the
 * last) when the model's logits are one position per sequence ([B, V],
 * input "sample.rows"); nothing otherwise (trn_predict_at). */
int rt_set_sample_rows(TrnSession *s, const int64_t *pos);

/* ===================================================================== */
/* cpu.c                                                                  */
/* ===================================================================== */

/* trn_cpu_backend with run flags (TRN_FLAG_POISON: the arena starts as
 * all-ones bytes, NaN in every float type, and the schedules poison dead
 * buffers). */
int rt_cpu_backend(const TrnModel *m, int flags, TrnBackend *out, char *err, size_t errn);
int rt_cuda_backend(const TrnModel *m, int flags, TrnBackend *out, char *err, size_t errn); /* trn_cuda_backend with TRN_FLAG_*; -2: no GPU here (no CUDA module, driver or device), -1: one failed */
/* What the CUDA device's opening spent on what, host wall seconds, as JSON
 * members: "cuda_driver" (libcuda, cuInit, the context), "cuda_module"
 * (the cubin loaded, its functions), "cuda_arena" (the arena, streams,
 * pinned memory), "cuda_gemm" (cuBLASLt loaded, every product's layouts
 * and algorithm, the kernels' attributes); self is the backend's. */
void rt_cuda_phases(void *self, char *out, size_t n);

/* ===================================================================== */
/* data.c — micro-batches from llm.c token files                          */
/* ===================================================================== */

/* Micro-batch k (k = 0, 1, 2, ... over the whole run) has B rows of T+1
 * consecutive tokens: tokens = the first T, targets = the last T.  Row r is
 * row j = k*B + r of the order:
 *   sequential: starts at (j mod nrows) * T, nrows = (n - 1) / T
 *               (rows tile the file; the order wraps at the end)
 *   random:     starts at philox(seed, stream, j) mod (n - T)
 * so a batch is a pure function of (file, B, T, order, seed, k) and the
 * position to save in a checkpoint is k. */
typedef struct RtData RtData;

typedef struct RtDataSpec {
    const char *path;
    int64_t     B, T;
    int         random;
    uint64_t    seed;
    const char *stream;                 /* "data.train" / "data.val": the Philox stream name */
    int64_t     vocab;                  /* > 0: every token must be below it */
    int         prefetch;               /* 1: a background thread prepares the next batch */
} RtDataSpec;

RtData *rt_data_open(const RtDataSpec *spec, char *err, size_t errn);
void    rt_data_close(RtData *d);
/* Copies micro-batch `pos` into tokens / targets (B*T each) and advances. */
int     rt_data_next(RtData *d, int32_t *tokens, int32_t *targets, char *err, size_t errn);
void    rt_data_seek(RtData *d, int64_t pos);
int64_t rt_data_pos(RtData *d);
int64_t rt_data_ntokens(const RtData *d);
const uint16_t *rt_data_tokens(const RtData *d);
/* The pure function behind it all (no thread). */
void rt_data_batch(const uint16_t *tok, int64_t n, int64_t B, int64_t T, int random, uint64_t seed, uint64_t stream, int64_t k,
                   int32_t *tokens, int32_t *targets);

/* ===================================================================== */
/* safetensors.c — the header                                            */
/* ===================================================================== */

#define RT_ST_MAX_HEADER (100u << 20)   /* safetensors' own limit on the header */

typedef struct RtStTensor {
    char    *name;
    TrnDType dtype;
    int      rank;
    int64_t  shape[TRN_MAX_RANK];
    uint64_t begin, end;                /* byte offsets in the data section */
} RtStTensor;

typedef struct RtStMeta { char *key, *value; } RtStMeta;

typedef struct RtSt {
    int         ntensors, nmeta;
    RtStTensor *t;                      /* sorted by name */
    RtStMeta   *meta;
    int         has_meta;
} RtSt;

const char *rt_st_dtype_name(TrnDType dt);   /* "F32", ... */
/* Parses the JSON header (len bytes, not NUL-terminated) of a file whose data
 * section has data_bytes bytes.  Strict: any deviation from the format is an
 * error, never a crash.  Checks each tensor's byte size against its dtype and
 * shape, offsets within the data section, duplicate names. */
int  rt_st_parse(const char *json, size_t len, uint64_t data_bytes, RtSt *out, char *err, size_t errn);
void rt_st_free(RtSt *st);
const char *rt_st_meta(const RtSt *st, const char *key);
const RtStTensor *rt_st_find(const RtSt *st, const char *name);
/* The header for tensors t[0..n) (their offsets already set) and the
 * metadata, padded with spaces to a multiple of 8.  *out is malloc'd. */
int rt_st_header(const RtStTensor *t, int n, const RtStMeta *meta, int nmeta, char **out, size_t *len, char *err, size_t errn);

/* ===================================================================== */
/* checkpoint.c                                                           */
/* ===================================================================== */

/* trn_load from an open stream (the fuzz target feeds it memory through
 * fmemopen); label names the file in messages. */
int rt_load_stream(TrnSession *s, FILE *f, const char *label, int params_only);
/* The bytes trn_save(s, path, with_state) writes now (header and data): -1
 * when that cannot be worked out (out of memory). */
int64_t rt_ckpt_bytes(TrnSession *s, int with_state);

#endif /* TRAINC_RT_INTERNAL_H */
