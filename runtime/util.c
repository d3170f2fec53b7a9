/* runtime/util.c — error messages, checked C-library calls, dtype
 * conversion and seeds, shared by the runtime's files (rt.h). */
#include "rt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const int   trn_dtype_size[7] = {4, 8, 2, 2, 4, 8, 1};
const char *trn_dtype_name[7] = {"f32", "f64", "bf16", "f16", "i32", "i64", "u8"};

/* ---- errors ---- */

int rt_fail(char *err, size_t errn, const char *fmt, ...) {
    if (err && errn) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errn, fmt, ap);
        va_end(ap);
    }
    return -1;
}

const char *rt_srcname(const char *file) {
    const char *p = strstr(file, "runtime/"), *q;
    while (p && (q = strstr(p + 1, "runtime/")) != NULL) p = q;
    if (p) return p;
    p = strrchr(file, '/');
    return p ? p + 1 : file;
}

#define AT rt_srcname(file), line

void *rt_malloc_at(size_t n, const char *file, int line, char *err, size_t errn) {
    void *p = malloc(n ? n : 1);
    if (!p) rt_fail(err, errn, "malloc(%zu) failed at %s:%d: out of memory", n, AT);
    return p;
}

void *rt_calloc_at(size_t n, size_t size, const char *file, int line, char *err, size_t errn) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) rt_fail(err, errn, "calloc(%zu, %zu) failed at %s:%d: out of memory", n, size, AT);
    return p;
}

void *rt_realloc_at(void *p, size_t n, const char *file, int line, char *err, size_t errn) {
    void *q = realloc(p, n ? n : 1);
    if (!q) rt_fail(err, errn, "realloc(%zu) failed at %s:%d: out of memory", n, AT);
    return q;
}

FILE *rt_fopen_at(const char *path, const char *mode, const char *file, int line, char *err, size_t errn) {
    FILE *f = fopen(path, mode);
    if (!f) rt_fail(err, errn, "fopen(\"%s\", \"%s\") failed at %s:%d: %s", path, mode, AT, strerror(errno));
    return f;
}

int rt_fread_at(void *dst, size_t n, FILE *f, const char *path, const char *file, int line, char *err, size_t errn) {
    size_t got = fread(dst, 1, n, f);
    if (got == n) return 0;
    if (ferror(f)) return rt_fail(err, errn, "fread(%zu bytes) from %s failed at %s:%d: %s", n, path, AT, strerror(errno));
    return rt_fail(err, errn, "fread(%zu bytes) from %s failed at %s:%d: unexpected end of file after %zu bytes", n, path, AT, got);
}

int rt_fwrite_at(const void *src, size_t n, FILE *f, const char *path, const char *file, int line, char *err, size_t errn) {
    if (n == 0 || fwrite(src, 1, n, f) == n) return 0;
    return rt_fail(err, errn, "fwrite(%zu bytes) to %s failed at %s:%d: %s", n, path, AT, strerror(errno));
}

int rt_fseek_at(FILE *f, off_t off, int whence, const char *path, const char *file, int line, char *err, size_t errn) {
    if (fseeko(f, off, whence) == 0) return 0;
    return rt_fail(err, errn, "fseeko(%s, %lld) failed at %s:%d: %s", path, (long long)off, AT, strerror(errno));
}

int rt_fsize_at(FILE *f, const char *path, uint64_t *size, const char *file, int line, char *err, size_t errn) {
    if (fseeko(f, 0, SEEK_END) != 0)
        return rt_fail(err, errn, "fseeko(%s, end) failed at %s:%d: %s", path, AT, strerror(errno));
    off_t end = ftello(f);
    if (end < 0) return rt_fail(err, errn, "ftello(%s) failed at %s:%d: %s", path, AT, strerror(errno));
    if (fseeko(f, 0, SEEK_SET) != 0)
        return rt_fail(err, errn, "fseeko(%s, 0) failed at %s:%d: %s", path, AT, strerror(errno));
    *size = (uint64_t)end;
    return 0;
}

int rt_fclose_at(FILE *f, const char *path, const char *file, int line, char *err, size_t errn) {
    if (fclose(f) == 0) return 0;
    return rt_fail(err, errn, "fclose(%s) failed at %s:%d: %s", path, AT, strerror(errno));
}

int rt_fflush_fsync_at(FILE *f, const char *path, const char *file, int line, char *err, size_t errn) {
    if (fflush(f) != 0) return rt_fail(err, errn, "fflush(%s) failed at %s:%d: %s", path, AT, strerror(errno));
    int fd = fileno(f);
    if (fd < 0) return rt_fail(err, errn, "fileno(%s) failed at %s:%d: %s", path, AT, strerror(errno));
    /* EINVAL: the file does not support syncing (a pipe, /dev/null): nothing to make durable. */
    if (fsync(fd) != 0 && errno != EINVAL)
        return rt_fail(err, errn, "fsync(%s) failed at %s:%d: %s", path, AT, strerror(errno));
    return 0;
}

int rt_rename_at(const char *from, const char *to, const char *file, int line, char *err, size_t errn) {
    if (rename(from, to) == 0) return 0;
    return rt_fail(err, errn, "rename(\"%s\", \"%s\") failed at %s:%d: %s", from, to, AT, strerror(errno));
}

FILE *rt_tmp_create_at(const char *path, char **tmp, const char *file, int line, char *err, size_t errn) {
    size_t n = strlen(path) + 48;
    char *t = rt_malloc_at(n, file, line, err, errn);
    *tmp = NULL;
    if (!t) return NULL;
    /* O_EXCL: a name that is taken (a file of the run, a link to one, a
     * folder) is never opened; the next number is tried.  A name too long
     * for the file system with the suffix (path's own is not: the caller
     * checked it) becomes a short one in path's folder, ".trainc.PID.K.tmp" */
    const char *slash = strrchr(path, '/');
    int dirn = slash ? (int)(slash - path) + 1 : 0, shortname = 0;
    int fd = -1;
    for (int k = 0; k < 100 && fd < 0; k++) {
        if (shortname) snprintf(t, n, "%.*s.trainc.%d.%d.tmp", dirn, path, (int)getpid(), k);
        else if (k == 0) snprintf(t, n, "%s.%d.tmp", path, (int)getpid());
        else snprintf(t, n, "%s.%d.%d.tmp", path, (int)getpid(), k);
        fd = open(t, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno == ENAMETOOLONG && !shortname) shortname = 1, k--;
        else if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        rt_fail(err, errn, "open(\"%s\", O_WRONLY|O_CREAT|O_EXCL) failed at %s:%d: %s", t, AT, strerror(errno));
        free(t);
        return NULL;
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        rt_fail(err, errn, "fdopen(%s) failed at %s:%d: %s", t, AT, strerror(errno));
        close(fd);
        unlink(t);
        free(t);
        return NULL;
    }
    *tmp = t;
    return f;
}

const char *rt_write_target(const char *path, char *out) {
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode)) return path;
    if (realpath(path, out)) return out;
    /* dangling: each link of the chain read in turn, a relative target
     * from the folder of the link naming it, to the first name that is no
     * link (a loop: path itself, whose save then fails) */
    char cur[RT_PATH_MAX], t[RT_PATH_MAX];
    snprintf(cur, sizeof cur, "%s", path);
    for (int hop = 0; hop < 40; hop++) {
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) {
            memcpy(out, cur, strlen(cur) + 1);
            return out;
        }
        ssize_t n = readlink(cur, t, sizeof t - 1);
        if (n <= 0) return path;
        t[n] = 0;
        const char *slash = strrchr(cur, '/');
        size_t dn = t[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1;
        if (dn + (size_t)n >= sizeof cur) return path;
        memmove(cur + dn, t, (size_t)n + 1);
    }
    return path;
}

double rt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void rt_human_bytes(char *out, size_t n, int64_t b) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int k = 0;
    while (v >= 1024 && k < 4) v /= 1024, k++;
    if (k == 0) snprintf(out, n, "%" PRId64 " B", b);
    else snprintf(out, n, "%.2f %s", v, u[k]);
}

void rt_fmt_double(char *out, size_t n, double x) {
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, n, "%.*g", prec, x);
        if (strtod(out, NULL) == x) return;
    }
}

/* ---- growing strings ---- */

static void buf_reserve(RtBuf *b, size_t extra) {
    if (b->oom) return;
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;   /* reported by the caller, which checks b->oom */
        return;
    }
    b->p = p;
    b->cap = cap;
}

void rt_buf_printf(RtBuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    buf_reserve(b, (size_t)n);
    if (b->oom) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void rt_buf_json_string(RtBuf *b, const char *s) {
    rt_buf_printf(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"') rt_buf_printf(b, "\\\"");
        else if (*p == '\\') rt_buf_printf(b, "\\\\");
        else if (*p < 0x20) rt_buf_printf(b, "\\u%04x", *p);
        else rt_buf_printf(b, "%c", *p);
    }
    rt_buf_printf(b, "\"");
}

void rt_buf_free(RtBuf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}

/* ---- dtypes ---- */

int rt_host_is_little_endian(void) {
    const uint16_t one = 1;
    unsigned char c;
    memcpy(&c, &one, 1);
    return c == 1;
}

int rt_dtype_is_float(TrnDType dt) { return dt == TRN_F32 || dt == TRN_F64 || dt == TRN_BF16 || dt == TRN_F16; }

int64_t rt_nbytes(TrnDType dt, int64_t numel) {
    int64_t sz = trn_dtype_size[dt];
    if (numel < 0 || numel > INT64_MAX / sz) return -1;
    return numel * sz;
}

int rt_part_in(const TrnTensor *t, int64_t first, int64_t count, char *err, size_t errn) {
    if (first >= 0 && count >= 0 && first <= t->numel && count <= t->numel - first) return 0;
    return rt_fail(err, errn, "elements %" PRId64 " to %" PRId64 " of '%s' are not in its %" PRId64, first, first + count, t->name, t->numel);
}

/* x rounded to a binary format with `mant` fraction bits, smallest normal
 * exponent emin and largest finite value maxv (round to nearest even: rint
 * under the default rounding mode).  The result is exact in that format. */
static double round_to_format(double x, int mant, int emin, double maxv) {
    if (x == 0 || isnan(x) || isinf(x)) return x;
    int e;
    frexp(x, &e);         /* |x| in [2^(e-1), 2^e) */
    e -= 1;
    if (e < emin) e = emin;
    double q = ldexp(1.0, e - mant);
    double r = rint(x / q) * q;
    if (fabs(r) > maxv) return x > 0 ? INFINITY : -INFINITY;
    return r;
}

uint16_t rt_f64_to_bf16(double x) {
    if (isnan(x)) return signbit(x) ? 0xFFC0 : 0x7FC0;
    float f = (float)round_to_format(x, 7, -126, ldexp(255.0 / 128.0, 127)); /* exact in f32 */
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

double rt_bf16_to_f64(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t rt_f64_to_f16(double x) {
    if (isnan(x)) return signbit(x) ? 0xFE00 : 0x7E00;
    double r = round_to_format(x, 10, -14, 65504.0);
    uint16_t sign = signbit(r) ? 0x8000 : 0;
    double a = fabs(r);
    if (isinf(a)) return sign | 0x7C00;
    if (a == 0) return sign;
    int e;
    frexp(a, &e);
    e -= 1;
    if (e < -14) return sign | (uint16_t)(a * 16777216.0);   /* subnormal: a / 2^-24 */
    uint16_t mant = (uint16_t)(ldexp(a, 10 - e) - 1024.0);
    return sign | (uint16_t)((e + 15) << 10) | mant;
}

double rt_f16_to_f64(uint16_t h) {
    int sign = h >> 15, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
    double v;
    if (exp == 0) v = ldexp((double)mant, -24);
    else if (exp == 31) v = mant ? NAN : INFINITY;
    else v = ldexp((double)(mant + 1024), exp - 25);
    return sign ? -v : v;
}

static double clamp_round(double v, double lo, double hi) {
    if (isnan(v)) return 0;
    v = rint(v);
    return v < lo ? lo : v > hi ? hi : v;
}

double rt_elem_get(TrnDType dt, const void *base, int64_t i) {
    const unsigned char *p = (const unsigned char *)base + (size_t)i * (size_t)trn_dtype_size[dt];
    switch (dt) {
    case TRN_F32: { float v; memcpy(&v, p, 4); return v; }
    case TRN_F64: { double v; memcpy(&v, p, 8); return v; }
    case TRN_BF16: { uint16_t v; memcpy(&v, p, 2); return rt_bf16_to_f64(v); }
    case TRN_F16: { uint16_t v; memcpy(&v, p, 2); return rt_f16_to_f64(v); }
    case TRN_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case TRN_I64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case TRN_U8: return *p;
    }
    return 0;
}

void rt_elem_set(TrnDType dt, void *base, int64_t i, double v) {
    unsigned char *p = (unsigned char *)base + (size_t)i * (size_t)trn_dtype_size[dt];
    switch (dt) {
    case TRN_F32: { float x = (float)v; memcpy(p, &x, 4); break; }
    case TRN_F64: memcpy(p, &v, 8); break;
    case TRN_BF16: { uint16_t x = rt_f64_to_bf16(v); memcpy(p, &x, 2); break; }
    case TRN_F16: { uint16_t x = rt_f64_to_f16(v); memcpy(p, &x, 2); break; }
    case TRN_I32: { int32_t x = (int32_t)clamp_round(v, -2147483648.0, 2147483647.0); memcpy(p, &x, 4); break; }
    case TRN_I64: {
        /* 2^63 is the first double above INT64_MAX */
        double c = clamp_round(v, -9223372036854775808.0, 9223372036854775807.0);
        int64_t x = c >= 9223372036854775807.0 ? INT64_MAX : (int64_t)c;
        memcpy(p, &x, 8);
        break;
    }
    case TRN_U8: *p = (unsigned char)clamp_round(v, 0, 255); break;
    }
}

void rt_ckpt_shape(const TrnTensor *t, int64_t out[TRN_MAX_RANK]) {
    int zero = 1;
    for (int d = 0; d < t->rank; d++)
        if (t->ckpt_shape[d] != 0) zero = 0;
    for (int d = 0; d < TRN_MAX_RANK; d++) out[d] = d < t->rank ? (zero && t->numel > 0 ? t->shape[d] : t->ckpt_shape[d]) : 0;
}

int64_t rt_ckpt_numel(const TrnTensor *t) {
    int64_t cs[TRN_MAX_RANK], n = 1;
    rt_ckpt_shape(t, cs);
    for (int d = 0; d < t->rank; d++) n *= cs[d];
    return n;
}

void rt_block_copy(void *dst, const void *src, int rank, const int64_t *full, const int64_t *blk, size_t esize, int to_block) {
    if (rank == 0) {
        memcpy(dst, src, esize);
        return;
    }
    for (int d = 0; d < rank; d++)
        if (blk[d] == 0) return;
    /* Walk the block's rows (every index but the last); each row is a
     * contiguous run of blk[rank-1] elements in both layouts. */
    int64_t idx[TRN_MAX_RANK] = {0};
    size_t run = (size_t)blk[rank - 1] * esize;
    int64_t brow = 0;
    for (;;) {
        int64_t off = 0;
        for (int d = 0; d < rank; d++) off = off * full[d] + (d < rank - 1 ? idx[d] : 0);
        unsigned char *fp = (unsigned char *)(to_block ? src : dst) + (size_t)off * esize;
        unsigned char *bp = (unsigned char *)(to_block ? dst : src) + (size_t)brow * run;
        if (to_block) memcpy(bp, fp, run);
        else memcpy(fp, bp, run);
        brow++;
        int d = rank - 2;
        while (d >= 0 && ++idx[d] == blk[d]) idx[d--] = 0;
        if (d < 0) break;
    }
}

/* ---- seeds ---- */

uint64_t rt_splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

int32_t rt_micro_seed(uint64_t seed, int64_t step, int64_t micro) {
    uint64_t h = rt_splitmix64(rt_splitmix64(rt_splitmix64(seed) ^ (uint64_t)step) ^ (uint64_t)micro);
    return (int32_t)(h >> 33);
}

/* ---- sampling ---- */

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

int64_t rt_draw_token(double *l, int64_t V, double temperature, int64_t top_k, double u, double *scratch) {
    double mx = -INFINITY;
    int64_t arg = -1;
    for (int64_t v = 0; v < V; v++) {
        if (isnan(l[v]) || l[v] == INFINITY) return -1;
        if (l[v] > mx) mx = l[v], arg = v;
    }
    if (arg < 0 || temperature == 0 || top_k == 1) return arg;
    if (top_k > 0 && top_k < V) { /* the k-th largest, and how many equal to it are kept */
        memcpy(scratch, l, (size_t)V * sizeof *scratch);
        qsort(scratch, (size_t)V, sizeof *scratch, cmp_desc);
        double kth = scratch[top_k - 1];
        int64_t ties = top_k;
        for (int64_t v = 0; v < V; v++) ties -= l[v] > kth;
        for (int64_t v = 0; v < V; v++)
            if (l[v] < kth || (l[v] == kth && ties-- <= 0)) l[v] = -INFINITY;
    }
    double z = 0;
    int64_t last = arg;
    for (int64_t v = 0; v < V; v++) {
        z += (l[v] = exp((l[v] - mx) / temperature));
        if (l[v] > 0) last = v;
    }
    double target = u * z, c = 0;
    for (int64_t v = 0; v < V; v++) {
        c += l[v];
        if (target < c) return v;
    }
    return last; /* the running sum rounded below u * z: the last token that can be drawn */
}

/* ---- OpenMP ---- */

/* Weak: resolves to libgomp's (OpenBLAS's) function when the executable
 * links OpenMP (OpenBLAS), stays NULL otherwise, so the runtime needs
 * neither itself.  OpenBLAS gets the same count: its own worker threads
 * spinning beside OpenMP's would oversubscribe the cores. */
#if defined(__GNUC__) || defined(__clang__)
extern void omp_set_num_threads(int n) __attribute__((weak));
extern void openblas_set_num_threads(int n) __attribute__((weak));
void rt_set_threads(int n) {
    if (n > 0 && omp_set_num_threads) omp_set_num_threads(n);
    if (n > 0 && openblas_set_num_threads) openblas_set_num_threads(n);
}
#else
void rt_set_threads(int n) { (void)n; }
#endif

/* ---- ranges on threads ---- */

typedef struct RangeJob {
    RtRangeFn fn;
    void     *ctx;
    int64_t   lo, hi;
} RangeJob;

static void *range_main(void *arg) {
    RangeJob *j = arg;
    j->fn(j->ctx, j->lo, j->hi);
    return NULL;
}

void rt_parallel_ranges(int64_t n, int64_t grain, int threads, RtRangeFn fn, void *ctx) {
    enum { MAXT = 64 };
    if (n <= 0) return;
    if (threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        threads = c > 0 ? (int)c : 1;
    }
    if (threads > MAXT) threads = MAXT;
    if (grain < 1) grain = 1;
    int64_t nt = n / grain;
    if (nt > threads) nt = threads;
    if (nt <= 1) {
        fn(ctx, 0, n);
        return;
    }
    RangeJob job[MAXT];
    pthread_t tid[MAXT];
    int started[MAXT] = {0};
    for (int64_t i = 0; i < nt; i++) job[i] = (RangeJob){fn, ctx, n * i / nt, n * (i + 1) / nt};
    /* range 0 runs here, after the others have started */
    for (int64_t i = 1; i < nt; i++) started[i] = pthread_create(&tid[i], NULL, range_main, &job[i]) == 0;
    range_main(&job[0]);
    for (int64_t i = 1; i < nt; i++) {
        if (started[i]) pthread_join(tid[i], NULL);
        else range_main(&job[i]);
    }
}
