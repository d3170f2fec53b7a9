/* tests/runtime/test_runtime.c — the runtime's unit tests, on the
 * hand-written models of bigram.c.
 *
 *   test_runtime [SCRATCH_DIR]
 *
 * Each test prints its name; a failed CHECK prints the condition and the
 * first values that differ.  Ends with "N passed, N failed". */
#include "bigram.h"
#include "check.h"
#include "philox.h"
#include "rt.h"
#include "schedule.h"
#include "tokens.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* TRN_ABI_VERSION as the checkpoints' metadata writes it */
#define STR_(x) #x
#define STR(x) STR_(x)
#define ABI_TEXT STR(TRN_ABI_VERSION)

static char scratch[1024];

/* A path in the scratch folder (rotating static buffers). */
static const char *P(const char *fmt, ...) {
    static char bufs[16][2048];
    static int k;
    char name[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    char *b = bufs[k++ % 16];
    snprintf(b, sizeof bufs[0], "%s/%s", scratch, name);
    return b;
}

/* trn_main in-process with an argv split from a format string at spaces,
 * on a backend of the caller's (trn_main's to destroy) or NULL. */
static int vrun_main(const TrnModel *m, const TrnBackend *be, const char *fmt, va_list ap) {
    char line[8192];
    vsnprintf(line, sizeof line, fmt, ap);
    char *argv[64];
    int argc = 0;
    argv[argc++] = "test_model";
    for (char *t = strtok(line, " "); t && argc < 63; t = strtok(NULL, " ")) argv[argc++] = t;
    argv[argc] = NULL;
    return trn_main(argc, argv, m, be);
}
static int run_main(const TrnModel *m, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vrun_main(m, NULL, fmt, ap);
    va_end(ap);
    return rc;
}
static int run_main_be(const TrnModel *m, const TrnBackend *be, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vrun_main(m, be, fmt, ap);
    va_end(ap);
    return rc;
}

static unsigned char *slurp(const char *path, size_t *n);

/* run_main with what trn_main prints on stderr captured in err (NUL-terminated). */
static int run_main_err(char *err, size_t errn, const TrnModel *m, const char *args) {
    const char *log = P("stderr.txt");
    fflush(stderr);
    int saved = dup(2), fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (saved < 0 || fd < 0) {
        snprintf(err, errn, "cannot capture stderr");
        return -1;
    }
    dup2(fd, 2);
    close(fd);
    int rc = run_main(m, "%s", args);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    size_t n;
    unsigned char *text = slurp(log, &n);
    snprintf(err, errn, "%s", text ? (char *)text : "");
    free(text);
    return rc;
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)len + 1);
    if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
        free(p);
        p = NULL;
    }
    if (p) p[len] = 0;
    fclose(f);
    *n = (size_t)len;
    return p;
}

static int spit(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* The step lines of a metrics file: for each, the text from "step" to
 * "tokens_per_s" (step, loss, lr, grad_norm: what must be reproduced). */
static int step_lines(const char *path, char lines[][256], int max) {
    size_t n;
    char *s = (char *)slurp(path, &n);
    if (!s) return -1;
    int k = 0;
    for (char *l = strtok(s, "\n"); l && k < max; l = strtok(NULL, "\n")) {
        char *e = strstr(l, ",\"tokens_per_s\"");
        if (!e) continue;
        snprintf(lines[k++], 256, "%.*s", (int)(e - l), l);
    }
    free(s);
    return k;
}

/* The evaluation lines of a metrics file. */
static int val_lines(const char *path, char lines[][256], int max) {
    size_t n;
    char *s = (char *)slurp(path, &n);
    if (!s) return -1;
    int k = 0;
    for (char *l = strtok(s, "\n"); l && k < max; l = strtok(NULL, "\n"))
        if (strstr(l, "\"val_loss\"")) snprintf(lines[k++], 256, "%s", l);
    free(s);
    return k;
}

static int count_substr(const char *path, const char *what) {
    size_t n;
    char *s = (char *)slurp(path, &n);
    if (!s) return -1;
    int c = 0;
    for (char *p = s; (p = strstr(p, what)) != NULL; p++) c++;
    free(s);
    return c;
}

static double json_field(const char *line, const char *key) {
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(line, k);
    if (!p) return NAN;
    char *end;
    double v = strtod(p + strlen(k), &end);
    return end == p + strlen(k) ? NAN : v; /* `null` (a NaN or an infinity written) is not 0 */
}

static TrnSession *cpu_session_threads(const TrnModel *m, int64_t seed, int threads) {
    TrnOptions o = {"cpu", threads, seed, 0};
    char err[1024];
    TrnSession *s = trn_create(m, &o, err, sizeof err);
    if (!s) fprintf(stderr, "  trn_create: %s\n", err);
    return s;
}

static TrnSession *cpu_session(const TrnModel *m, int64_t seed) { return cpu_session_threads(m, seed, 0); }

/* ===================================================================== */

static void test_dtypes(void) {
    CHECK(rt_f64_to_bf16(1.0) == 0x3F80, "%04x", rt_f64_to_bf16(1.0));
    CHECK(rt_f64_to_bf16(-2.0) == 0xC000, "%04x", rt_f64_to_bf16(-2.0));
    /* 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even (1.0) */
    CHECK(rt_f64_to_bf16(1.0 + 1.0 / 256) == 0x3F80, "%04x", rt_f64_to_bf16(1.0 + 1.0 / 256));
    CHECK(rt_f64_to_bf16(1.0 + 3.0 / 256) == 0x3F82, "%04x", rt_f64_to_bf16(1.0 + 3.0 / 256));
    /* just above the tie rounds up: double rounding through f32 would not see it */
    CHECK(rt_f64_to_bf16(1.0 + 1.0 / 256 + 1e-12) == 0x3F81, "%04x", rt_f64_to_bf16(1.0 + 1.0 / 256 + 1e-12));
    CHECK(rt_f64_to_bf16(1e39) == 0x7F80, "%04x", rt_f64_to_bf16(1e39));
    CHECK(rt_bf16_to_f64(0x3F80) == 1.0, "%g", rt_bf16_to_f64(0x3F80));
    CHECK(rt_f64_to_f16(1.0) == 0x3C00, "%04x", rt_f64_to_f16(1.0));
    CHECK(rt_f64_to_f16(65504.0) == 0x7BFF, "%04x", rt_f64_to_f16(65504.0));
    CHECK(rt_f64_to_f16(65520.0) == 0x7C00, "%04x", rt_f64_to_f16(65520.0));   /* the tie above max rounds to inf */
    CHECK(rt_f64_to_f16(ldexp(1, -24)) == 0x0001, "%04x", rt_f64_to_f16(ldexp(1, -24)));
    CHECK(rt_f64_to_f16(ldexp(1, -25)) == 0x0000, "%04x", rt_f64_to_f16(ldexp(1, -25)));   /* tie to even: 0 */
    CHECK(rt_f64_to_f16(-0.5) == 0xB800, "%04x", rt_f64_to_f16(-0.5));
    for (unsigned h = 0; h < 0x10000; h++) {   /* every finite f16 and bf16 survives a round trip */
        double v = rt_f16_to_f64((uint16_t)h);
        if (isfinite(v) && rt_f64_to_f16(v) != h) {
            CHECK(0, "f16 %04x -> %g -> %04x", h, v, rt_f64_to_f16(v));
            break;
        }
        v = rt_bf16_to_f64((uint16_t)h);
        if (isfinite(v) && rt_f64_to_bf16(v) != h) {
            CHECK(0, "bf16 %04x -> %g -> %04x", h, v, rt_f64_to_bf16(v));
            break;
        }
    }
    unsigned char b[8];
    rt_elem_set(TRN_I32, b, 0, 3e10);
    CHECK(rt_elem_get(TRN_I32, b, 0) == 2147483647.0, "%g", rt_elem_get(TRN_I32, b, 0));
    rt_elem_set(TRN_U8, b, 0, -4);
    CHECK(b[0] == 0, "%d", b[0]);
}

static void test_block_copy(void) {
    int64_t full[2] = {3, 5}, blk[2] = {2, 3};
    int src[15], dst[6], back[15];
    for (int i = 0; i < 15; i++) src[i] = i, back[i] = -1;
    rt_block_copy(dst, src, 2, full, blk, sizeof(int), 1);
    int want[6] = {0, 1, 2, 5, 6, 7};
    CHECK(memcmp(dst, want, sizeof want) == 0, "block [%d %d %d %d %d %d]", dst[0], dst[1], dst[2], dst[3], dst[4], dst[5]);
    rt_block_copy(back, dst, 2, full, blk, sizeof(int), 0);
    CHECK(back[0] == 0 && back[7] == 7 && back[3] == -1 && back[10] == -1, "back %d %d %d %d", back[0], back[7], back[3], back[10]);
}

/* The documented derivation, written again independently. */
static uint64_t sm64(uint64_t x) {
    uint64_t z = x + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void test_micro_seed(void) {
    uint64_t h = sm64(sm64(sm64(1337) ^ 5) ^ 1);
    CHECK(rt_micro_seed(1337, 5, 1) == (int32_t)(h >> 33), "%d vs %d", rt_micro_seed(1337, 5, 1), (int32_t)(h >> 33));
    CHECK(rt_micro_seed(1337, 5, 1) != rt_micro_seed(1337, 5, 0), "micro-batches share a seed");
    CHECK(rt_micro_seed(1337, 5, 0) != rt_micro_seed(1337, 6, 0), "steps share a seed");
    CHECK(rt_micro_seed(1, 5, 0) != rt_micro_seed(2, 5, 0), "seeds share a seed");
    CHECK(rt_micro_seed(99, 123456, 3) >= 0, "negative seed");
}

static void test_devices(void) {
    char err[1024];
    TrnOptions o = {"cuda", 0, -1, 0};
    TrnSession *s = trn_create(&bigram_adam, &o, err, sizeof err);
    CHECK(!s && strstr(err, "built without a CUDA module"), "cuda: %s", s ? "created" : err);
    TrnModel withcuda = bigram_adam;
    withcuda.cuda = &bigram_adam;
    s = trn_create(&withcuda, &o, err, sizeof err);
    /* no driver here (or, on a GPU machine, not a real module): a clean error */
    CHECK(!s && strstr(err, "cuda"), "cuda module: %s", s ? "created" : err);
    o.device = "auto";
    s = trn_create(&withcuda, &o, err, sizeof err);
    CHECK(s && strcmp(s->be.name, "cpu") == 0, "auto: %s", s ? s->be.name : err);
    CHECK(s && s->be.device_bytes == bigram_adam.arena_bytes, "device_bytes %lld", s ? (long long)s->be.device_bytes : -1LL);
    trn_destroy(s);
    o.device = "tpu";
    s = trn_create(&bigram_adam, &o, err, sizeof err);
    CHECK(!s && strstr(err, "unknown device 'tpu'"), "%s", s ? "created" : err);
    TrnModel nocpu = bigram_adam;
    memset(nocpu.cpu_run, 0, sizeof nocpu.cpu_run);
    o.device = "auto";
    s = trn_create(&nocpu, &o, err, sizeof err);
    CHECK(!s && strstr(err, "no CPU schedules") && strstr(err, "CUDA module"), "%s", s ? "created" : err);
    TrnModel badabi = bigram_adam;
    badabi.abi = 99;
    s = trn_create(&badabi, NULL, err, sizeof err);
    CHECK(!s && strstr(err, "ABI"), "%s", s ? "created" : err);
    CHECK(run_main(&bigram_adam, "--device=cuda --steps 0 --quiet") == 1, "trn_main --device=cuda did not fail");
    /* a backend made by the caller belongs to the session, and to trn_main
     * (LeakSanitizer checks that each is destroyed once) */
    TrnBackend be;
    CHECK(trn_cpu_backend(&bigram_tiny, &be, err, sizeof err) == 0, "%s", err);
    s = trn_create_with_backend(&bigram_tiny, be, NULL, err, sizeof err);
    CHECK(s && strcmp(trn_model(s)->name, "tiny") == 0, "%s", s ? "?" : err);
    trn_destroy(s);
    CHECK(trn_cpu_backend(&bigram_tiny, &be, err, sizeof err) == 0, "%s", err);
    s = trn_create_with_backend(&badabi, be, NULL, err, sizeof err);
    CHECK(!s && strstr(err, "ABI"), "%s", s ? "created" : err);
    /* read_part (the sampler's one row): the elements asked for, as the
     * whole tensor's read has them; a range past the tensor is an error */
    CHECK(trn_cpu_backend(&bigram_tiny, &be, err, sizeof err) == 0, "%s", err);
    {
        const TrnTensor *lt = &bigram_tiny.tensors[bigram_tiny.t_logits];
        float *full = calloc((size_t)lt->numel, sizeof *full), part[64];
        for (int64_t i = 0; i < lt->numel; i++) full[i] = (float)(i * 3 + 1);
        CHECK(lt->dtype == TRN_F32 && be.write(be.self, bigram_tiny.t_logits, full, err, sizeof err) == 0, "write: %s", err);
        int64_t first = lt->numel - 5;
        CHECK(be.read_part && be.read_part(be.self, bigram_tiny.t_logits, first, 5, part, err, sizeof err) == 0, "read_part: %s", err);
        CHECK(memcmp(part, full + first, 5 * sizeof *part) == 0, "read_part read %g..%g, not %g..%g", part[0], part[4], full[first], full[first + 4]);
        CHECK(be.read_part(be.self, bigram_tiny.t_logits, first, 6, part, err, sizeof err) != 0 && strstr(err, "are not in its"),
              "read_part past the end: %s", err);
        CHECK(be.read_part(be.self, bigram_tiny.t_logits, -1, 1, part, err, sizeof err) != 0, "read_part before the start");
        free(full);
    }
    be.destroy(be.self);
    char *argv[] = {"test_model", "--steps", "0", "--quiet", NULL}, *help[] = {"test_model", "--bogus", NULL};
    CHECK(trn_cpu_backend(&bigram_tiny, &be, err, sizeof err) == 0, "%s", err);
    CHECK(trn_main(4, argv, &bigram_tiny, &be) == 0, "trn_main with a backend");
    CHECK(trn_cpu_backend(&bigram_tiny, &be, err, sizeof err) == 0, "%s", err);
    CHECK(trn_main(2, help, &bigram_tiny, &be) == 1, "trn_main with a backend and a bad flag");
}

/* rt_parallel_ranges: every index once, whatever the split */
static int visits[1000];
static void visit(void *ctx, int64_t lo, int64_t hi) {
    (void)ctx;
    for (int64_t i = lo; i < hi; i++) __atomic_add_fetch(&visits[i], 1, __ATOMIC_RELAXED);
}
static void test_ranges(void) {
    static const int64_t ns[] = {0, 1, 7, 999, 1000};
    static const int64_t grains[] = {1, 10, 400, 5000};
    static const int threads[] = {0, 1, 3, 8, 200};
    for (int a = 0; a < 5; a++)
        for (int g = 0; g < 4; g++)
            for (int t = 0; t < 5; t++) {
                memset(visits, 0, sizeof visits);
                rt_parallel_ranges(ns[a], grains[g], threads[t], visit, NULL);
                for (int64_t i = 0; i < 1000; i++)
                    if (visits[i] != (i < ns[a])) {
                        CHECK(0, "n %lld grain %lld threads %d: index %lld visited %d times", (long long)ns[a], (long long)grains[g], threads[t],
                              (long long)i, visits[i]);
                        return;
                    }
            }
}

/* philox.h's normals: rng_normal is rng_normal4's element; each within
 * 1e-6 of the f64 Box-Muller of the same words (so ln, cos and sin are
 * right); 4M draws have a standard normal's mean, variance, P(|x| > 3)
 * and P(x < 1) within 5 standard errors. */
static void test_normals(void) {
    const int64_t n = (int64_t)1 << 22;
    const double pi = 3.14159265358979323846;
    double s1 = 0, s2 = 0, worst = 0;
    int64_t tail = 0, below1 = 0, mismatch = 0;
    for (int64_t b = 0; b < n / 4; b++) {
        float o[4];
        uint32_t w[4];
        rng_normal4(99, 7, (uint64_t)b, o);
        rng_words(99, 7, (uint64_t)b, w);
        for (int j = 0; j < 4; j++) {
            mismatch += rng_normal(99, 7, (uint64_t)(4 * b + j)) != o[j];
            uint32_t wu = w[j & 2], wt = w[(j & 2) + 1];
            double u = ((wu >> 8) + 1) * 0x1p-24, r = sqrt(-2 * log(u));
            double th = pi / 2 * ((wt >> 30) + ((wt >> 6) & 0xffffff) * 0x1p-24);
            worst = fmax(worst, fabs(o[j] - (j & 1 ? r * sin(th) : r * cos(th))));
            s1 += o[j], s2 += (double)o[j] * o[j];
            tail += fabsf(o[j]) > 3, below1 += o[j] < 1;
        }
    }
    double mean = s1 / (double)n, var = s2 / (double)n - mean * mean, pt = (double)tail / (double)n, p1 = (double)below1 / (double)n;
    double pt0 = erfc(3 / sqrt(2.0)), p10 = 0.5 * erfc(-1 / sqrt(2.0));
    fprintf(stderr, "  normals: worst |f32 - f64| %.2e; mean %.2e, variance %.5f, P(|x| > 3) %.5f (%.5f), P(x < 1) %.5f (%.5f)\n", worst, mean,
            var, pt, pt0, p1, p10);
    CHECK(mismatch == 0, "%lld of rng_normal differ from rng_normal4", (long long)mismatch);
    CHECK(worst < 1e-6, "a normal is %.3e from the f64 Box-Muller of its words", worst);
    CHECK(fabs(mean) < 5 / sqrt((double)n), "mean %.3e", mean);
    CHECK(fabs(var - 1) < 5 * sqrt(2.0 / (double)n), "variance %.6f", var);
    CHECK(fabs(pt - pt0) < 5 * sqrt(pt0 * (1 - pt0) / (double)n), "P(|x| > 3) = %.6f, want %.6f", pt, pt0);
    CHECK(fabs(p1 - p10) < 5 * sqrt(p10 * (1 - p10) / (double)n), "P(x < 1) = %.6f, want %.6f", p1, p10);
}

static void run_nothing(unsigned char *arena, int flags) {
    (void)arena;
    (void)flags;
}

/* A bf16 param starts as its f32 value rounded to bf16: what the copy of
 * an f32 master holds (mixed precision stores frozen params in bf16, and
 * their results must not change).  Uniform values have 53 random bits:
 * among 2^20 of them some round differently straight from double, so the
 * check can fail (std-0.02 normals, f32 numbers times a double, did not
 * give one in 2^20). */
static void test_init_half(void) {
    enum { NH = 1 << 20 };
    static TrnTensor th[1];
    th[0] = (TrnTensor){.name = "w", .kind = TRN_PARAM, .dtype = TRN_BF16, .rank = 1, .shape = {NH}, .numel = NH, .offset = 0,
                        .init = "uniform", .init_a = -0.5, .init_b = 0.5, .trainable = 0};
    TrnModel mh = {.abi = TRN_ABI_VERSION, .name = "half", .source = "tests/runtime/test_runtime.c", .ntensors = 1, .tensors = th,
                   .t_tokens = -1, .t_targets = -1, .t_lr = -1, .t_step = -1, .t_seed = -1, .t_loss = -1, .t_grad_norm = -1,
                   .t_eval_loss = -1, .t_logits = -1, .train = {.optimizer = "adamw", .schedule = "constant", .precision = "bf16"},
                   .arena_bytes = 2 * NH, .cpu_run = {run_nothing}};
    static uint16_t got[NH];
    TrnSession *s = cpu_session_threads(&mh, 7, 3);
    CHECK(s && trn_get(s, "w", got, sizeof got) == 0, "the bf16 model: %s", s ? trn_error(s) : "no session");
    uint64_t st = rng_name_stream("w");
    int64_t bad = -1, direct = 0;
    for (int64_t k = 0; s && k < NH; k++) {
        double v = rng_init_value("uniform", -0.5, 0.5, 7, st, (uint64_t)k);
        uint16_t want, once;
        rt_elem_set(TRN_BF16, &want, 0, (double)(float)v);
        rt_elem_set(TRN_BF16, &once, 0, v);
        direct += want != once;
        if (got[k] != want && bad < 0) bad = k;
    }
    CHECK(bad < 0, "w[%lld] = 0x%04x, its f32 value rounded to bf16 is another", (long long)bad, bad >= 0 ? got[bad] : 0);
    CHECK(direct > 0, "no element of 2^20 rounds differently from double: the check above cannot fail");
    printf("  %lld of %d elements would differ rounded straight from double\n", (long long)direct, NH);
    if (s) trn_destroy(s);
}

static void test_init(void) {
    /* initialisation split over threads (ranges starting inside rows of the
     * padded w) gives what one thread gives */
    static float w1[256 * 264], wt[256 * 264];
    for (int nt = 1; nt <= 7; nt += 2) {
        TrnSession *st = cpu_session_threads(&bigram_adam, -1, nt);
        CHECK(st && trn_get(st, "w", nt == 1 ? w1 : wt, sizeof w1) == 0, "threads %d", nt);
        if (nt > 1) CHECK(memcmp(w1, wt, sizeof w1) == 0, "init on %d threads differs from 1", nt);
        if (st) trn_destroy(st);
    }
    /* bigram_accum's w is unpadded: the whole-tensor path, Philox blocks of
     * four normals, ranges that start inside a block (65536 / 3, / 7);
     * every element rng_init_value's */
    static float a1[256 * 256];
    uint64_t sa = rng_name_stream("w");
    for (int nt = 1; nt <= 7; nt += 2) {
        TrnSession *st = cpu_session_threads(&bigram_accum, -1, nt);
        int got = st && trn_get(st, "w", a1, sizeof a1) == 0;
        CHECK(got, "bigram_accum, threads %d", nt);
        int64_t bad = -1;
        for (int64_t i = 0; got && i < 256 * 256 && bad < 0; i++) {
            float want = (float)rng_init_value("normal", 0.02, 0, 7, sa, (uint64_t)i);
            if (memcmp(&a1[i], &want, 4) != 0) bad = i;
        }
        CHECK(bad < 0, "bigram_accum on %d threads: w[%lld] = %.9g, want rng_init_value's", nt, (long long)bad, bad >= 0 ? a1[bad] : 0.0f);
        if (st) trn_destroy(st);
    }
    TrnSession *s = cpu_session(&bigram_adam, -1);
    if (!s) { CHECK(0, "no session"); return; }
    static float w[256 * 264], b[256], m[256 * 264];
    CHECK(trn_get(s, "w", w, sizeof w) == 0, "%s", trn_error(s));
    CHECK(trn_get(s, "b", b, sizeof b) == 0, "%s", trn_error(s));
    CHECK(trn_get(s, "adamw.m.w", m, sizeof m) == 0, "%s", trn_error(s));
    uint64_t sw = rng_name_stream("w"), sb = rng_name_stream("b");
    int bad = 0;
    for (int r = 0; r < 256 && !bad; r++)
        for (int c = 0; c < 264 && !bad; c++) {
            float want = c < 256 ? (float)rng_init_value("normal", 0.02, 0, 1337, sw, (uint64_t)(r * 256 + c)) : 0.0f;
            if (memcmp(&w[r * 264 + c], &want, 4) != 0) {
                CHECK(0, "w[%d,%d] = %.9g, want %.9g", r, c, w[r * 264 + c], want);
                bad = 1;
            }
        }
    for (int i = 0; i < 256; i++)
        if (b[i] != (float)rng_init_value("uniform", -0.01, 0.01, 1337, sb, (uint64_t)i) || fabsf(b[i]) > 0.01f) {
            CHECK(0, "b[%d] = %g", i, b[i]);
            break;
        }
    for (int i = 0; i < 256 * 264; i++)
        if (m[i] != 0) {
            CHECK(0, "state adamw.m.w[%d] = %g", i, m[i]);
            break;
        }
    CHECK(trn_get(s, "w", w, 12) == -1 && strstr(trn_error(s), "12 bytes given"), "%s", trn_error(s));
    CHECK(trn_set(s, "nope", w, 4) == -1 && strstr(trn_error(s), "no tensor 'nope'"), "%s", trn_error(s));
    CHECK(trn_find(s, "logits") == 14 && trn_find(s, "x") == -1, "trn_find");
    CHECK(trn_step_count(s) == 0 && isnan(trn_loss(s)), "fresh session");
    for (int64_t k = 1; k <= 30; k++)
        if (trn_lr_at(s, k) != sched_lr_at("cosine", 0.05, 0.001, 2, 30, k)) {
            CHECK(0, "lr at %lld: %g", (long long)k, trn_lr_at(s, k));
            break;
        }
    /* the schedule's rates, llm.c's (steps from 1 here, from 0 there): the
     * warm-up's last step and the next at lr, the last a step short of
     * min_lr; without warm-up, step 1 at lr (PyTorch's LinearLR) */
    const double cos5[5] = {0.005, 0.01, 0.01, 0.00775, 0.00325}, lin5[5] = {0.05, 0.042, 0.034, 0.026, 0.018};
    for (int k = 1; k <= 5; k++) {
        double c = sched_lr_at("cosine", 0.01, 0.001, 2, 5, k), l = sched_lr_at("linear", 0.05, 0.01, 0, 5, k);
        CHECK(fabs(c - cos5[k - 1]) < 1e-12 && fabs(l - lin5[k - 1]) < 1e-12, "step %d: cosine %.17g (want %g), linear %.17g (want %g)", k, c,
              cos5[k - 1], l, lin5[k - 1]);
    }
    CHECK(fabs(sched_lr_at("cosine", 0.01, 0.001, 2, 5, 9) - 0.001) < 1e-15 && fabs(sched_lr_at("linear", 0.05, 0.01, 5, 5, 6) - 0.01) < 1e-15,
          "past the schedule's end: min_lr");
    trn_destroy(s);
    s = cpu_session(&bigram_adam, 42);
    float w2[4];
    static float wall[256 * 264];
    if (s && trn_get(s, "w", wall, sizeof wall) == 0) memcpy(w2, wall, sizeof w2);
    CHECK(s && w2[0] != w[0], "the seed option changes the init");
    trn_destroy(s);
}

/* feed for the API-level step test: a fixed batch */
static int feed_fixed(void *ctx, TrnSession *s, int micro) {
    (void)ctx;
    int32_t tok[64], tgt[64];
    for (int i = 0; i < 64; i++) tok[i] = (i * 7 + micro) % 256, tgt[i] = (i * 7 + 1 + micro) % 256;
    if (trn_set(s, "tokens", tok, sizeof tok) != 0) return -1;
    return trn_set(s, "targets", tgt, sizeof tgt);
}

static void test_step_api(void) {
    TrnSession *s = cpu_session(&bigram_adam, -1);
    if (!s) { CHECK(0, "no session"); return; }
    double first = NAN, last = NAN;
    for (int k = 0; k < 10; k++) {
        CHECK(trn_step(s, feed_fixed, NULL, k < 5 ? 0.05 : -1) == 0, "%s", trn_error(s));
        if (k == 0) first = trn_loss(s);
        last = trn_loss(s);
    }
    CHECK(trn_step_count(s) == 10, "%lld", (long long)trn_step_count(s));
    CHECK(last < first - 0.5, "fixed batch: loss %g -> %g", first, last);
    CHECK(isfinite(trn_grad_norm(s)) && trn_grad_norm(s) > 0, "grad_norm %g", trn_grad_norm(s));
    float lr;
    int32_t step;
    trn_get(s, "opt.lr", &lr, 4);
    trn_get(s, "opt.step", &step, 4);
    CHECK(step == 10 && lr == (float)sched_lr_at("cosine", 0.05, 0.001, 2, 30, 10), "opt.step %d opt.lr %g", step, lr);
    double ev;
    CHECK(trn_eval(s, &ev) == 0 && isfinite(ev), "eval: %s", trn_error(s));
    CHECK(trn_set_schedule(s, "bogus", 1, 0, 0, 10) == -1 && strstr(trn_error(s), "bogus"), "%s", trn_error(s));
    trn_destroy(s);
    /* grad_accum 2: the mean over micro-batches, the update once */
    s = cpu_session(&bigram_accum, -1);
    if (!s) { CHECK(0, "no session"); return; }
    CHECK(trn_step(s, feed_fixed, NULL, -1) == 0, "%s", trn_error(s));
    double l = trn_loss(s);
    CHECK(fabs(l - log(256.0)) < 0.1, "accum loss %g", l);
    trn_destroy(s);
}

static void test_data(void) {
    const char *path = P("data.bin");
    uint16_t tok[1000];
    for (int i = 0; i < 1000; i++) tok[i] = (uint16_t)(i % 251);
    char err[1024];
    CHECK(tok_write(path, tok, 1000, err, sizeof err) == 0, "%s", err);
    /* sequential: rows of T tile the file, the order wraps */
    RtDataSpec sp = {path, 2, 8, 0, 1, "data.train", 0, 1};
    RtData *d = rt_data_open(&sp, err, sizeof err);
    if (!d) { CHECK(0, "%s", err); return; }
    int32_t a[16], t[16], x[16], y[16];
    int64_t nrows = 999 / 8;
    for (int64_t k = 0; k < 200; k++) {
        rt_data_next(d, a, t, err, sizeof err);
        for (int r = 0; r < 2; r++) {
            int64_t start = ((k * 2 + r) % nrows) * 8;
            for (int j = 0; j < 8; j++)
                if (a[r * 8 + j] != tok[start + j] || t[r * 8 + j] != tok[start + j + 1]) {
                    CHECK(0, "sequential batch %lld row %d pos %d: %d/%d, want %d/%d", (long long)k, r, j, a[r * 8 + j], t[r * 8 + j],
                          tok[start + j], tok[start + j + 1]);
                    k = 1000;
                    break;
                }
        }
    }
    CHECK(rt_data_pos(d) == 200, "pos %lld", (long long)rt_data_pos(d));
    rt_data_close(d);
    /* random: a pure function of the seed and the position */
    RtDataSpec r1 = {path, 2, 8, 1, 5, "data.train", 0, 1}, r2 = r1, r3 = r1;
    r2.prefetch = 0;
    r3.seed = 6;
    RtData *d1 = rt_data_open(&r1, err, sizeof err), *d2 = rt_data_open(&r2, err, sizeof err), *d3 = rt_data_open(&r3, err, sizeof err);
    if (!d1 || !d2 || !d3) { CHECK(0, "%s", err); return; }
    int same3 = 1;
    for (int k = 0; k < 50; k++) {
        rt_data_next(d1, a, t, err, sizeof err);
        rt_data_next(d2, x, y, err, sizeof err);
        CHECK(memcmp(a, x, sizeof a) == 0 && memcmp(t, y, sizeof t) == 0, "random batch %d differs with and without prefetch", k);
        rt_data_next(d3, x, y, err, sizeof err);
        if (memcmp(a, x, sizeof a) != 0) same3 = 0;
    }
    CHECK(!same3, "seeds 5 and 6 give the same batches");
    /* seeking: batch 7 after a seek equals batch 7 of a fresh loader */
    rt_data_seek(d1, 7);
    rt_data_next(d1, a, t, err, sizeof err);
    rt_data_batch(rt_data_tokens(d1), 1000, 2, 8, 1, 5, rng_name_stream("data.train"), 7, x, y);
    CHECK(memcmp(a, x, sizeof a) == 0 && rt_data_pos(d1) == 8, "seek");
    /* stress the prefetch thread (ThreadSanitizer build): seeks among nexts */
    uint32_t lcg = 1;
    for (int k = 0; k < 3000; k++) {
        lcg = lcg * 1664525u + 1013904223u;
        if (lcg % 7 == 0) rt_data_seek(d1, (int64_t)(lcg >> 20));
        int64_t pos = rt_data_pos(d1);
        rt_data_next(d1, a, t, err, sizeof err);
        rt_data_batch(rt_data_tokens(d1), 1000, 2, 8, 1, 5, rng_name_stream("data.train"), pos, x, y);
        if (memcmp(a, x, sizeof a) != 0 || memcmp(t, y, sizeof t) != 0) {
            CHECK(0, "prefetched batch %lld differs from the pure function", (long long)pos);
            break;
        }
    }
    rt_data_close(d1);
    rt_data_close(d2);
    rt_data_close(d3);
    /* every random row lies inside the file, targets are the next tokens */
    int64_t starts_ok = 1;
    for (int64_t k = 0; k < 500; k++) {
        rt_data_batch(tok, 1000, 2, 8, 1, 9, 3, k, a, t);
        for (int r = 0; r < 2; r++)
            for (int j = 0; j < 8; j++)
                if (t[r * 8 + j] != (a[r * 8 + j] + 1) % 251) starts_ok = 0;
    }
    CHECK(starts_ok, "random rows: targets are not the following tokens");
    /* errors */
    CHECK(tok_write(path, tok, 16, err, sizeof err) == 0, "%s", err);
    d = rt_data_open(&sp, err, sizeof err);
    CHECK(!d && strstr(err, "16 tokens") && strstr(err, "at least B*T+1 = 17"), "%s", d ? "opened" : err);
    rt_data_close(d);
    CHECK(tok_write(path, tok, 17, err, sizeof err) == 0, "%s", err);
    d = rt_data_open(&sp, err, sizeof err);
    CHECK(d != NULL, "17 tokens: %s", err);
    rt_data_close(d);
    RtDataSpec sv = sp;
    sv.vocab = 10;
    d = rt_data_open(&sv, err, sizeof err);
    CHECK(!d && strstr(err, "outside the model's vocabulary of 10"), "%s", d ? "opened" : err);
    rt_data_close(d);
    sv.path = P("does-not-exist.bin");
    d = rt_data_open(&sv, err, sizeof err);
    CHECK(!d && strstr(err, "does-not-exist.bin"), "%s", d ? "opened" : err);
}

/* ---- checkpoints ---- */

static void test_ckpt_format(void) {
    TrnSession *s = cpu_session(&bigram_adam, -1);
    if (!s) { CHECK(0, "no session"); return; }
    const char *path = P("fmt.safetensors");
    CHECK(trn_save(s, path, 0) == 0, "%s", trn_error(s));
    size_t n;
    unsigned char *f = slurp(path, &n);
    if (!f) { CHECK(0, "no file"); return; }
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)f[i] << (8 * i);
    const char *want = "{\"__metadata__\":{\"abi\":\"" ABI_TEXT "\",\"contents\":\"params\",\"format\":\"trainc\",\"model\":\"bigram\",\"seed\":\"1337\","
                       "\"step\":\"0\",\"version\":\"1\"},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[256],\"data_offsets\":[0,1024]},"
                       "\"w\":{\"dtype\":\"F32\",\"shape\":[256,256],\"data_offsets\":[1024,263168]}}";
    size_t wl = strlen(want);
    CHECK(hl % 8 == 0 && hl >= wl && hl - wl < 8, "header length %llu for %zu bytes of JSON", (unsigned long long)hl, wl);
    CHECK(n == 8 + hl + 263168, "file size %zu, want %llu", n, (unsigned long long)(8 + hl + 263168));
    CHECK(n >= 8 + wl && memcmp(f + 8, want, wl) == 0, "header:\n    %.*s\n  want\n    %s", (int)(hl < 600 ? hl : 600), f + 8, want);
    for (size_t i = 8 + wl; i < 8 + hl && i < n; i++) CHECK(f[i] == ' ', "padding byte %zu is %02x", i, f[i]);
    /* data: b, then w's leading [256, 256] block */
    static float w[256 * 264], b[256];
    trn_get(s, "w", w, sizeof w);
    trn_get(s, "b", b, sizeof b);
    const unsigned char *data = f + 8 + hl;
    CHECK(memcmp(data, b, 1024) == 0, "b's data");
    int ok = 1;
    for (int r = 0; r < 256; r++) ok &= memcmp(data + 1024 + r * 1024, w + r * 264, 1024) == 0;
    CHECK(ok, "w's data is not its [256, 256] block");
    free(f);
    /* with state: the states and the metadata a resume needs */
    CHECK(trn_step(s, feed_fixed, NULL, -1) == 0, "%s", trn_error(s));
    CHECK(trn_save(s, path, 1) == 0, "%s", trn_error(s));
    f = slurp(path, &n);
    if (!f) { CHECK(0, "no file"); return; }
    hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)f[i] << (8 * i);
    const char *want2 =
        "{\"__metadata__\":{\"abi\":\"" ABI_TEXT "\",\"contents\":\"params+state\",\"data.batch\":\"4x16\",\"data.batches\":\"random\",\"data.pos\":\"1\",\"format\":\"trainc\","
        "\"grad_accum\":\"1\",\"lr.max\":\"0.05\",\"lr.min\":\"0.001\",\"lr.schedule\":\"cosine\",\"lr.steps\":\"30\",\"lr.warmup\":\"2\","
        "\"model\":\"bigram\",\"params\":\"b,w\",\"seed\":\"1337\",\"step\":\"1\",\"version\":\"1\"},"
        "\"adamw.m.b\":{\"dtype\":\"F32\",\"shape\":[256],\"data_offsets\":[0,1024]},"
        "\"adamw.m.w\":{\"dtype\":\"F32\",\"shape\":[256,256],\"data_offsets\":[1024,263168]},"
        "\"adamw.v.b\":{\"dtype\":\"F32\",\"shape\":[256],\"data_offsets\":[263168,264192]},"
        "\"adamw.v.w\":{\"dtype\":\"F32\",\"shape\":[256,256],\"data_offsets\":[264192,526336]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[256],\"data_offsets\":[526336,527360]},"
        "\"w\":{\"dtype\":\"F32\",\"shape\":[256,256],\"data_offsets\":[527360,789504]}}";
    wl = strlen(want2);
    CHECK(hl % 8 == 0 && hl >= wl && hl - wl < 8 && memcmp(f + 8, want2, wl) == 0, "header:\n    %.*s\n  want\n    %s",
          (int)(hl < 1200 ? hl : 1200), f + 8, want2);
    CHECK(n == 8 + hl + 789504, "file size %zu", n);
    free(f);
    trn_destroy(s);
}

static int write_st(const char *path, const char *json, const void *data, size_t n);

static void test_roundtrip(void) {
    TrnSession *a = cpu_session(&bigram_adam, -1), *b = cpu_session(&bigram_adam, 99);
    if (!a || !b) { CHECK(0, "no session"); return; }
    for (int k = 0; k < 3; k++) trn_step(a, feed_fixed, NULL, -1);
    /* each step counts its micro-batches (a library's checkpoint says how
     * far its run went); a program sets data.pos from its data instead */
    CHECK(a->data_pos == 3, "data_pos after 3 steps: %lld", (long long)a->data_pos);
    a->data_pos = 17;
    snprintf(a->batches, sizeof a->batches, "sequential");
    const char *path = P("rt.safetensors");
    CHECK(trn_save(a, path, 1) == 0, "%s", trn_error(a));
    CHECK(trn_load(b, path, 0) == 0, "%s", trn_error(b));
    static const char *names[] = {"w", "b", "adamw.m.w", "adamw.v.w", "adamw.m.b", "adamw.v.b"};
    static float x[256 * 264], y[256 * 264];
    for (int i = 0; i < 6; i++) {
        int t = trn_find(a, names[i]);
        size_t bytes = (size_t)a->m->tensors[t].numel * 4;
        trn_get(a, names[i], x, bytes);
        trn_get(b, names[i], y, bytes);
        CHECK(memcmp(x, y, bytes) == 0, "'%s' differs after save/load", names[i]);
    }
    CHECK(b->step == 3 && b->seed == 1337 && b->data_pos == 17 && strcmp(b->batches, "sequential") == 0 && b->has_data_pos,
          "step %lld seed %llu pos %lld batches %s", (long long)b->step, (unsigned long long)b->seed, (long long)b->data_pos, b->batches);
    /* the next step is the same in both */
    trn_step(a, feed_fixed, NULL, -1);
    trn_step(b, feed_fixed, NULL, -1);
    CHECK(memcmp(&(float){(float)trn_loss(a)}, &(float){(float)trn_loss(b)}, 4) == 0, "next loss %.9g vs %.9g", trn_loss(a), trn_loss(b));
    CHECK(b->data_pos == 18, "data_pos after the resumed step: %lld", (long long)b->data_pos);
    /* the smallest subnormal rate is saved as 4.9406564584124654e-324,
     * which strtod reads with ERANGE: still that number */
    CHECK(trn_set_schedule(a, "constant", 5e-324, 0, 0, 30) == 0, "%s", trn_error(a));
    CHECK(trn_save(a, path, 1) == 0, "%s", trn_error(a));
    CHECK(trn_load(b, path, 0) == 0 && b->lr == 5e-324, "a subnormal lr.max: %s, lr %g", trn_error(b), b->lr);
    /* params only: a checkpoint without state cannot resume */
    CHECK(trn_save(a, path, 0) == 0, "%s", trn_error(a));
    CHECK(trn_load(b, path, 0) == -1 && strstr(trn_error(b), "--init") && strstr(trn_error(b), "saved with parameters only"), "%s", trn_error(b));
    CHECK(trn_load(b, path, 1) == 0, "%s", trn_error(b));
    /* a file without trainc's metadata (another program's): not "parameters only", whatever it holds */
    static float zeros[256 * 256 + 256];
    write_st(path, "{\"b\":{\"dtype\":\"F32\",\"shape\":[256],\"data_offsets\":[0,1024]},"
                   "\"w\":{\"dtype\":\"F32\",\"shape\":[256,256],\"data_offsets\":[1024,263168]}}",
             zeros, sizeof zeros);
    CHECK(trn_load(b, path, 0) == -1 && strstr(trn_error(b), "no metadata 'contents'") && strstr(trn_error(b), "--init"), "%s", trn_error(b));
    trn_destroy(a);
    trn_destroy(b);
}

/* A safetensors file written by hand (independent of the runtime's writer). */
static int write_st(const char *path, const char *json, const void *data, size_t n) {
    size_t hl = strlen(json), pad = (8 - hl % 8) % 8;
    unsigned char *buf = calloc(1, 8 + hl + pad + n + 1);
    if (!buf) return -1;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)(hl + pad) >> (8 * i));
    memcpy(buf + 8, json, hl);
    memset(buf + 8 + hl, ' ', pad);
    if (n) memcpy(buf + 8 + hl + pad, data, n);
    int rc = spit(path, buf, 8 + hl + pad + n);
    free(buf);
    return rc;
}

static void test_init_errors(void) {
    TrnSession *s = cpu_session(&bigram_adam, -1);
    if (!s) { CHECK(0, "no session"); return; }
    static unsigned char data[8 * 256 * 256 + 4096];
    const char *path = P("init.safetensors");
    /* missing w, extra zzz, and logits (an output) */
    write_st(path, "{\"b\":{\"dtype\":\"F32\",\"shape\":[256],\"data_offsets\":[0,1024]},"
                   "\"zzz\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[1024,1032]},"
                   "\"logits\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[1032,1036]}}",
             data, 1036);
    CHECK(trn_load(s, path, 1) == -1, "loaded");
    const char *e = trn_error(s);
    CHECK(strstr(e, "missing tensor 'w'") && strstr(e, "extra tensor 'zzz'") && strstr(e, "extra tensor 'logits'") && strstr(e, "3 problems") &&
              !strstr(e, "a checkpoint of model"),
          "%s", e);
    /* another model's checkpoint (its metadata says which) is named so */
    write_st(path, "{\"__metadata__\":{\"model\":\"llama\"},\"b\":{\"dtype\":\"F32\",\"shape\":[256],\"data_offsets\":[0,1024]},"
                   "\"zzz\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[1024,1032]}}",
             data, 1032);
    CHECK(trn_load(s, path, 1) == -1 && strstr(trn_error(s), "init.safetensors (a checkpoint of model 'llama') does not match model"), "%s",
          trn_error(s));
    /* mis-shaped: [256,264] is the padded shape, the checkpoint view is [256,256] */
    write_st(path, "{\"b\":{\"dtype\":\"F32\",\"shape\":[256],\"data_offsets\":[0,1024]},"
                   "\"w\":{\"dtype\":\"F32\",\"shape\":[256,264],\"data_offsets\":[1024,271360]}}",
             data, 271360);
    CHECK(trn_load(s, path, 1) == -1 && strstr(trn_error(s), "tensor 'w' has shape [256,264] in the file, the model's is [256,256]"), "%s",
          trn_error(s));
    write_st(path, "{\"b\":{\"dtype\":\"I32\",\"shape\":[256],\"data_offsets\":[0,1024]},"
                   "\"w\":{\"dtype\":\"F32\",\"shape\":[256,256],\"data_offsets\":[1024,263168]}}",
             data, 263168);
    CHECK(trn_load(s, path, 1) == -1 && strstr(trn_error(s), "tensor 'b' is I32 in the file, the model's is f32"), "%s", trn_error(s));
    /* nothing was written by the failed loads */
    static float w0[256 * 264], w1[256 * 264];
    TrnSession *fresh = cpu_session(&bigram_adam, -1);
    trn_get(fresh, "w", w0, sizeof w0);
    trn_get(s, "w", w1, sizeof w1);
    CHECK(memcmp(w0, w1, sizeof w0) == 0, "a failed --init changed w");
    trn_destroy(fresh);
    /* conversions: w as F64, b as BF16; then w as F16 */
    double *wd = (double *)(void *)data;
    for (int i = 0; i < 256 * 256; i++) wd[i] = 0.001 * (i % 1000) - 0.5 + 1e-10;
    uint16_t *bb = (uint16_t *)(void *)(data + 8 * 256 * 256);
    for (int i = 0; i < 256; i++) bb[i] = rt_f64_to_bf16(i * 0.25);
    write_st(path, "{\"b\":{\"dtype\":\"BF16\",\"shape\":[256],\"data_offsets\":[524288,524800]},"
                   "\"w\":{\"dtype\":\"F64\",\"shape\":[256,256],\"data_offsets\":[0,524288]}}",
             data, 524800);
    CHECK(trn_load(s, path, 1) == 0, "%s", trn_error(s));
    static float b[256];
    trn_get(s, "w", w1, sizeof w1);
    trn_get(s, "b", b, sizeof b);
    int ok = 1;
    for (int r = 0; r < 256; r++)
        for (int c = 0; c < 264; c++) ok &= w1[r * 264 + c] == (c < 256 ? (float)wd[r * 256 + c] : 0.0f);
    CHECK(ok, "F64 -> f32 conversion or padding");
    ok = 1;
    for (int i = 0; i < 256; i++) ok &= b[i] == (float)(i * 0.25);
    CHECK(ok, "BF16 -> f32 conversion: b[3] = %g", b[3]);
    uint16_t *wh = (uint16_t *)(void *)data;
    for (int i = 0; i < 256 * 256; i++) wh[i] = rt_f64_to_f16((i % 100) * 0.5);
    memset(data + 2 * 256 * 256, 0, 1024);
    write_st(path, "{\"w\":{\"dtype\":\"F16\",\"shape\":[256,256],\"data_offsets\":[0,131072]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[256],\"data_offsets\":[131072,132096]}}",
             data, 132096);
    CHECK(trn_load(s, path, 1) == 0, "%s", trn_error(s));
    trn_get(s, "w", w1, sizeof w1);
    CHECK(w1[264 + 5] == (float)((261 % 100) * 0.5), "F16 -> f32: %g", w1[264 + 5]);
    /* a checkpoint with state initialises the params only: its states are not extra */
    TrnSession *o = cpu_session(&bigram_adam, 3);
    trn_step(o, feed_fixed, NULL, -1);
    CHECK(trn_save(o, path, 1) == 0, "%s", trn_error(o));
    CHECK(trn_load(s, path, 1) == 0, "%s", trn_error(s));
    CHECK(trn_step_count(s) == 0, "--init changed the step");
    trn_destroy(o);
    /* ... and states this model does not have (another model's: gradient
     * accumulators grad_acc.w, grad_acc.b; the file's "params" metadata names the
     * parameters) are skipped too; the params load */
    TrnSession *ac = cpu_session(&bigram_accum, 5);
    trn_step(ac, feed_fixed, NULL, -1);
    static float wa[256 * 256], wl[256 * 264];
    trn_get(ac, "w", wa, sizeof wa);
    CHECK(trn_save(ac, path, 1) == 0, "%s", trn_error(ac));
    trn_destroy(ac);
    CHECK(trn_load(s, path, 1) == 0, "states of another model: %s", trn_error(s));
    trn_get(s, "w", wl, sizeof wl);
    CHECK(wl[264 + 7] == wa[256 + 7] && wl[255 * 264 + 255] == wa[255 * 256 + 255], "--init did not load w from the accumulating model's checkpoint");
    /* a tensor the metadata lists as a parameter, which this model lacks, is extra */
    write_st(path, "{\"__metadata__\":{\"contents\":\"params+state\",\"params\":\"b,w,zzz\"},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[256],\"data_offsets\":[0,1024]},"
                   "\"opt.q\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[1024,1032]},"
                   "\"w\":{\"dtype\":\"F32\",\"shape\":[256,256],\"data_offsets\":[1032,263176]},"
                   "\"zzz\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[263176,263184]}}",
             data, 263184);
    CHECK(trn_load(s, path, 1) == -1 && strstr(trn_error(s), "extra tensor 'zzz'") && !strstr(trn_error(s), "opt.q") &&
              strstr(trn_error(s), "1 problem"),
          "%s", trn_error(s));
    /* another model's checkpoint: the tiny model's tensors are mis-shaped */
    TrnSession *t = cpu_session(&bigram_tiny, -1);
    CHECK(trn_save(t, path, 0) == 0, "%s", trn_error(t));
    CHECK(trn_load(s, path, 1) == -1 && strstr(trn_error(s), "tensor 'w' has shape [8,8] in the file, the model's is [256,256]") &&
              strstr(trn_error(s), "tensor 'b' has shape [8]"),
          "%s", trn_error(s));
    trn_destroy(t);
    /* through the command line */
    CHECK(run_main(&bigram_adam, "--init %s --steps 0 --quiet", path) == 1, "trn_main --init with a wrong checkpoint did not fail");
    trn_destroy(s);
}

/* The temporary files of path's saves left in its folder (PATH.*.tmp). */
static int tmp_files_of(const char *path) {
    char dir[2048];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) return -1;
    *slash = 0;
    const char *base = slash + 1;
    size_t bn = strlen(base);
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t k = strlen(e->d_name);
        if (k > bn + 5 && strncmp(e->d_name, base, bn) == 0 && e->d_name[bn] == '.' && strcmp(e->d_name + k - 4, ".tmp") == 0) n++;
    }
    closedir(d);
    return n;
}

/* trn_save writes a new file beside PATH and renames it over PATH: a
 * failure leaves PATH as it was and no temporary file behind.  The new
 * file is made with O_EXCL under PATH.PID.tmp, so that no existing file
 * is ever opened for writing (the fixed PATH.tmp truncated and renamed
 * whatever was there: a --metrics file, a --data file). */
static void test_atomic_save(void) {
    TrnSession *s = cpu_session(&bigram_tiny, -1);
    if (!s) { CHECK(0, "no session"); return; }
    const char *path = P("atomic.safetensors");
    char tmp[2][2048], dir2[2048], other[2048];
    snprintf(tmp[0], sizeof tmp[0], "%s.%d.tmp", path, (int)getpid());
    snprintf(tmp[1], sizeof tmp[1], "%s.%d.1.tmp", path, (int)getpid());
    snprintf(dir2, sizeof dir2, "%s.%d.2.tmp", path, (int)getpid());
    snprintf(other, sizeof other, "%s", P("other.txt"));
    CHECK(trn_save(s, path, 1) == 0, "%s", trn_error(s));
    size_t n0, n1, nk;
    unsigned char *before = slurp(path, &n0);
    trn_step(s, NULL, NULL, -1);   /* change the state */
    /* 1: the names taken, by a file, a link to another file, a folder, and
     * the old fixed name: none is opened, the save takes the next name */
    spit(tmp[0], "keep", 4);
    spit(other, "other", 5);
    spit(P("atomic.safetensors.tmp"), "data", 4);
    CHECK(symlink(other, tmp[1]) == 0, "symlink: %s", strerror(errno));
    CHECK(mkdir(dir2, 0755) == 0, "mkdir: %s", strerror(errno));
    CHECK(trn_save(s, path, 1) == 0, "with the temporary names taken: %s", trn_error(s));
    unsigned char *k0 = slurp(tmp[0], &nk), *k1 = slurp(other, &n1), *k2 = slurp(P("atomic.safetensors.tmp"), &n1);
    CHECK(k0 && memcmp(k0, "keep", 4) == 0 && k1 && memcmp(k1, "other", 5) == 0 && k2 && memcmp(k2, "data", 4) == 0,
          "a file at a temporary name was written");
    free(k0), free(k1), free(k2);
    struct stat st;
    CHECK(lstat(tmp[1], &st) == 0 && S_ISLNK(st.st_mode) && stat(dir2, &st) == 0 && S_ISDIR(st.st_mode), "a link or folder was replaced");
    CHECK(tmp_files_of(path) == 3, "%d PATH.*.tmp names in the folder (3 made here)", tmp_files_of(path));
    unsigned char *after = slurp(path, &n1);
    CHECK(after && !(n0 == n1 && memcmp(before, after, n0) == 0) && trn_load(s, path, 0) == 0, "not saved: %s", trn_error(s));
    free(after);
    unlink(tmp[0]), unlink(tmp[1]), rmdir(dir2), unlink(P("atomic.safetensors.tmp"));
    free(before);
    before = slurp(path, &n0);
    trn_step(s, NULL, NULL, -1);
    /* 2: writing fails half way: a file-size limit, SIGXFSZ ignored (as
     * trn_main does) so that the write fails with EFBIG */
    struct rlimit old;
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    if (getrlimit(RLIMIT_FSIZE, &old) == 0) {
        struct rlimit lim = old;
        lim.rlim_cur = (rlim_t)(n0 / 2);
        CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0, "setrlimit: %s", strerror(errno));
        int rc = trn_save(s, path, 1);
        setrlimit(RLIMIT_FSIZE, &old);
        CHECK(rc == -1 && strstr(trn_error(s), "File too large") && strstr(trn_error(s), "cannot save ") && strstr(trn_error(s), path),
              "%s", rc ? trn_error(s) : "saved");
        after = slurp(path, &n1);
        CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0, "the old checkpoint changed");
        free(after);
        CHECK(tmp_files_of(path) == 0, "a temporary file left behind");
    }
    signal(SIGXFSZ, old_handler);
    /* 3: a folder without write permission (not for root, who may write anywhere) */
    if (geteuid() != 0) {
        const char *dir = P("ro");
        mkdir(dir, 0755);
        char p2[2048];
        snprintf(p2, sizeof p2, "%s/ck.safetensors", dir);
        CHECK(trn_save(s, p2, 1) == 0, "%s", trn_error(s));
        unsigned char *b2 = slurp(p2, &n0);
        chmod(dir, 0555);
        trn_step(s, NULL, NULL, -1);
        CHECK(trn_save(s, p2, 1) == -1, "saved into a read-only folder");
        after = slurp(p2, &n1);
        CHECK(b2 && after && n0 == n1 && memcmp(b2, after, n0) == 0, "the old checkpoint changed");
        chmod(dir, 0755);
        free(b2);
        free(after);
    }
    /* 4: a missing folder */
    CHECK(trn_save(s, P("no/such/dir/x.safetensors"), 0) == -1 && strstr(trn_error(s), "No such file") && strstr(trn_error(s), "O_EXCL"),
          "%s", trn_error(s));
    free(before);
    trn_destroy(s);
}

/* Every truncation and many one-byte corruptions of a checkpoint: errors, never crashes. */
static void test_corrupt(void) {
    TrnSession *s = cpu_session(&bigram_tiny, -1);
    if (!s) { CHECK(0, "no session"); return; }
    const char *good = P("good.safetensors"), *bad = P("bad.safetensors");
    trn_step(s, NULL, NULL, -1);
    CHECK(trn_save(s, good, 1) == 0, "%s", trn_error(s));
    size_t n;
    unsigned char *f = slurp(good, &n);
    if (!f) { CHECK(0, "no file"); return; }
    CHECK(trn_load(s, good, 0) == 0, "%s", trn_error(s));
    /* in memory (fmemopen), the same loader as trn_load: thousands of files in a second */
    int bad_ok = 0;
    for (size_t len = 1; len < n; len++) {
        FILE *m = fmemopen(f, len, "rb");
        if (m && rt_load_stream(s, m, "truncated", 0) == 0) bad_ok++;
        if (m) fclose(m);
    }
    spit(bad, f, 0);
    bad_ok += trn_load(s, bad, 0) == 0;
    spit(bad, f, n / 2);
    bad_ok += trn_load(s, bad, 0) == 0;
    CHECK(bad_ok == 0, "%d truncated files loaded", bad_ok);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)f[i] << (8 * i);
    /* every byte of the length and the header replaced by each of these:
     * most give errors; some are harmless (a letter of the model's name, a
     * digit of the seed) and load */
    const unsigned char subst[] = {'x', '"', '{', '}', '[', ']', '0', '9', ',', ':', '\\', ' ', 0, 0xff, 0xc3, '-', '.', 'e'};
    unsigned char *g = malloc(n);
    for (size_t i = 0; i < 8 + hl; i++)
        for (size_t k = 0; k < sizeof subst; k++) {
            memcpy(g, f, n);
            if (g[i] == subst[k]) continue;
            g[i] = subst[k];
            FILE *m = fmemopen(g, n, "rb");
            if (m) {
                if (rt_load_stream(s, m, "corrupted", i & 1) != 0) CHECK(trn_error(s)[0] != 0, "an error without a message");
                fclose(m);
            }
        }
    /* specific messages */
    memcpy(g, f, n);
    g[8] = '[';
    spit(bad, g, n);
    CHECK(trn_load(s, bad, 0) == -1 && strstr(trn_error(s), "safetensors header: byte 0"), "%s", trn_error(s));
    memcpy(g, f, n);
    g[7] = 0x7f;   /* a header length larger than the file */
    spit(bad, g, n);
    CHECK(trn_load(s, bad, 0) == -1 && strstr(trn_error(s), "exceeds"), "%s", trn_error(s));
    write_st(bad, "{\"w\":{\"dtype\":\"F32\",\"shape\":[8,8],\"data_offsets\":[0,256]},\"b\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[256,300]}}",
             g, 288);
    CHECK(trn_load(s, bad, 1) == -1 && strstr(trn_error(s), "outside the 288-byte data section"), "%s", trn_error(s));
    write_st(bad, "{\"w\":{\"dtype\":\"F32\",\"shape\":[8,8],\"data_offsets\":[0,256]},\"b\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[256,280]}}",
             g, 288);
    CHECK(trn_load(s, bad, 1) == -1 && strstr(trn_error(s), "has 24 bytes of data"), "%s", trn_error(s));
    write_st(bad, "{\"w\":{\"dtype\":\"F32\",\"shape\":[8,8],\"data_offsets\":[0,256]},\"w\":{\"dtype\":\"F32\",\"shape\":[8,8],\"data_offsets\":[0,256]}}",
             g, 256);
    CHECK(trn_load(s, bad, 1) == -1 && strstr(trn_error(s), "appears twice"), "%s", trn_error(s));
    /* the tensors fill the data section: bytes after the last, or between
     * two, are refused (a file with more appended loaded) */
    memcpy(g, f, n);
    unsigned char *h = malloc(n + 8);
    memcpy(h, f, n);
    memset(h + n, 0, 8);
    spit(bad, h, n + 8);
    free(h);
    CHECK(trn_load(s, bad, 0) == -1 && strstr(trn_error(s), "8 bytes after the last tensor's data"), "%s", trn_error(s));
    write_st(bad, "{\"w\":{\"dtype\":\"F32\",\"shape\":[8,8],\"data_offsets\":[0,256]},\"b\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[264,296]}}",
             g, 296);
    CHECK(trn_load(s, bad, 1) == -1 && strstr(trn_error(s), "bytes [256, 264) of the data section belong to no tensor (before 'b')"), "%s",
          trn_error(s));
    write_st(bad, "{}", g, 8);
    CHECK(trn_load(s, bad, 1) == -1 && strstr(trn_error(s), "no tensor, and 8 bytes of data after it"), "%s", trn_error(s));
    /* b's bytes are the last 32 of w's; a tensor with no bytes overlaps nothing */
    write_st(bad, "{\"w\":{\"dtype\":\"F32\",\"shape\":[8,8],\"data_offsets\":[0,256]},\"b\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[224,256]},"
                  "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]}}",
             g, 256);
    CHECK(trn_load(s, bad, 1) == -1 && strstr(trn_error(s), "tensors 'w' [0, 256] and 'b' [224, 256] overlap"), "%s", trn_error(s));
    write_st(bad, "{\"w\":{\"dtype\":\"F32\",\"shape\":[8,8],\"data_offsets\":[0,256]}} x", g, 256);
    CHECK(trn_load(s, bad, 1) == -1 && strstr(trn_error(s), "text after the header"), "%s", trn_error(s));
    CHECK(trn_load(s, P("nonexistent.safetensors"), 1) == -1 && strstr(trn_error(s), "No such file"), "%s", trn_error(s));
    free(g);
    free(f);
    trn_destroy(s);
}

/* Writes to path the checkpoint f (n bytes, header hl bytes) with the
 * value of metadata key replaced by value.  0 when done. */
static int with_meta(const unsigned char *f, size_t n, uint64_t hl, const char *key, const char *value, const char *path) {
    char json[8192], k[64], out[8400];
    if (hl >= sizeof json) return -1;
    memcpy(json, f + 8, (size_t)hl);
    size_t hn = (size_t)hl;
    json[hn] = 0;
    while (hn > 0 && json[hn - 1] == ' ') json[--hn] = 0;   /* the padding: write_st pads again */
    snprintf(k, sizeof k, "\"%s\":\"", key);
    char *at = strstr(json, k), *end = at ? strchr(at + strlen(k), '"') : NULL;
    if (!end) return -1;
    snprintf(out, sizeof out, "%.*s%s%s", (int)(at + strlen(k) - json), json, value, end);
    return write_st(path, out, f + 8 + hl, n - 8 - (size_t)hl);
}

/* Writes to path the checkpoint f (n bytes, header hl bytes) without
 * metadata key.  0 when done. */
static int without_meta(const unsigned char *f, size_t n, uint64_t hl, const char *key, const char *path) {
    char json[8192], k[64], out[8400];
    if (hl >= sizeof json) return -1;
    memcpy(json, f + 8, (size_t)hl);
    size_t hn = (size_t)hl;
    json[hn] = 0;
    while (hn > 0 && json[hn - 1] == ' ') json[--hn] = 0;
    snprintf(k, sizeof k, "\"%s\":\"", key);
    char *at = strstr(json, k), *end = at ? strchr(at + strlen(k), '"') : NULL;
    if (!end) return -1;
    end++;                               /* after the value's closing quote */
    if (*end == ',') end++;              /* "key":"v", ... */
    else if (at[-1] == ',') at--;        /* ..., "key":"v" (the last) */
    snprintf(out, sizeof out, "%.*s%s", (int)(at - json), json, end);
    return write_st(path, out, f + 8 + hl, n - 8 - (size_t)hl);
}

/* Metadata a reader does not understand, or values a run cannot use, are
 * errors naming the key (lr.max -1 was reported as 'lr.steps'; inf, and
 * the format, version and abi of other writers, were accepted). */
static void test_ckpt_meta(void) {
    TrnSession *s = cpu_session(&bigram_tiny, -1);
    if (!s) { CHECK(0, "no session"); return; }
    const char *good = P("meta.safetensors"), *bad = P("meta_bad.safetensors");
    trn_step(s, NULL, NULL, -1);
    CHECK(trn_save(s, good, 1) == 0, "%s", trn_error(s));
    size_t n;
    unsigned char *f = slurp(good, &n);
    if (!f) { CHECK(0, "no file"); trn_destroy(s); return; }
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)f[i] << (8 * i);
    static const struct { const char *key, *value; int params_only; const char *want; } cases[] = {
        {"lr.max", "-1", 0, "meta_bad.safetensors: metadata 'lr.max' is '-1' (expected a finite non-negative number)"},
        {"lr.max", "inf", 0, "metadata 'lr.max' is 'inf' (expected a finite non-negative number)"},
        {"lr.min", "-0.5", 0, "metadata 'lr.min' is '-0.5'"},
        {"lr.warmup", "-5", 0, "metadata 'lr.warmup' is '-5' (expected a non-negative integer)"},
        {"seed", "abc", 0, "metadata 'seed' is 'abc' (expected a non-negative integer below 2^63)"},
        {"version", "2", 0, "metadata 'version' is '2': this runtime reads trainc checkpoints of version 1"},
        {"format", "pytorch", 0, "metadata 'format' is 'pytorch' (expected trainc; pt for a PyTorch file of parameters)"},
        {"format", "pt", 0, "is a PyTorch file (metadata 'format' is 'pt'): it can initialise a run (--init) but not resume one"},
        {"abi", "999", 0, "metadata 'abi' is '999': a newer runtime than this one"},
        {"abi", "x", 0, "metadata 'abi' is 'x' (expected a runtime ABI version, a positive integer)"},
        {"abi", "1", 0, NULL},       /* an older runtime's checkpoint resumes */
        /* the numbers as the flags take them: no hex, space or sign */
        {"lr.max", "0x1p-10", 0, "metadata 'lr.max' is '0x1p-10' (expected a finite non-negative number)"},
        {"lr.max", " 0.001", 0, "metadata 'lr.max' is ' 0.001' (expected a finite non-negative number)"},
        {"lr.min", "-0", 0, "metadata 'lr.min' is '-0' (expected a finite non-negative number)"},
        {"lr.max", "0.001", 0, NULL},
        {"step", "-0", 0, "metadata 'step' is '-0' (expected a non-negative integer below 2^63)"},
        /* a seed as --seed takes it (one past 2^63 resumed, and --seed could not start the run again) */
        {"seed", "18446744073709551615", 0, "metadata 'seed' is '18446744073709551615' (expected a non-negative integer below 2^63)"},
        {"seed", "9223372036854775807", 0, NULL},
        {"lr.steps", "+5", 0, "metadata 'lr.steps' is '+5' (expected a non-negative integer)"},
        {"grad_accum", "0", 0, "metadata 'grad_accum' is '0' (expected a positive integer)"},
        /* counts past 2^53: data.pos + 1 overflowed at INT64_MAX, and the step loop wrapped */
        {"data.pos", "9223372036854775807", 0, "metadata 'data.pos' is '9223372036854775807' (expected an integer at most 2^53)"},
        {"step", "9007199254740993", 0, "metadata 'step' is '9007199254740993' (expected an integer at most 2^53)"},
        {"lr.steps", "9223372036854775807", 0, "metadata 'lr.steps' is '9223372036854775807' (expected an integer at most 2^53)"},
        {"data.pos", "9007199254740992", 0, NULL},
        /* data.pos counts micro-batches of the saving run's shape */
        {"data.batch", "2x16", 0, "was saved by a run with micro-batches of 2x16 tokens (batch x sequence); this model's are 2x4"},
        {"data.batch", "2x4", 0, NULL},
        {"data.batch", "2x16", 1, NULL},
        /* --init takes the parameters of any safetensors file, whatever wrote it */
        {"format", "pt", 1, NULL},   /* tools/hf_to_trainc.py writes "pt" */
        {"format", "tf", 1, NULL},
        {"version", "2", 1, NULL},
        {"abi", "x", 1, NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (with_meta(f, n, hl, cases[c].key, cases[c].value, bad) != 0) {
            CHECK(0, "cannot set metadata '%s'", cases[c].key);
            continue;
        }
        int rc = trn_load(s, bad, cases[c].params_only);
        if (cases[c].want)
            CHECK(rc == -1 && strstr(trn_error(s), cases[c].want), "%s=%s: %s", cases[c].key, cases[c].value, rc ? trn_error(s) : "loaded");
        else
            CHECK(rc == 0, "%s=%s: %s", cases[c].key, cases[c].value, trn_error(s));
    }
    /* every resume key is required: a missing one is an error, not the
     * model's default (lr.schedule and data.batches were) */
    static const char *const keys[] = {"step", "seed", "data.pos", "data.batches", "grad_accum", "lr.schedule", "lr.max", "lr.min",
                                       "lr.warmup", "lr.steps"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char want[128];
        snprintf(want, sizeof want, "meta_bad.safetensors: metadata '%s' is missing", keys[i]);
        if (without_meta(f, n, hl, keys[i], bad) != 0) {
            CHECK(0, "cannot remove metadata '%s'", keys[i]);
            continue;
        }
        int rc = trn_load(s, bad, 0);
        CHECK(rc == -1 && strstr(trn_error(s), want), "without %s: %s", keys[i], rc ? trn_error(s) : "resumed");
        CHECK(trn_load(s, bad, 1) == 0, "--init without %s: %s", keys[i], trn_error(s));   /* --init reads none of them */
    }
    /* through the command line, as --lr inf is */
    char data[2048], args[4096], err[4096];
    snprintf(data, sizeof data, "%s", P("meta.bin"));
    CHECK(bigram_write_text_tokens(data, 2000, 1) == 0, "tokens");
    CHECK(with_meta(f, n, hl, "lr.max", "inf", bad) == 0, "lr.max");
    snprintf(args, sizeof args, "--data %s --resume %s --steps 3 --quiet", data, bad);
    CHECK(run_main_err(err, sizeof err, &bigram_tiny, args) == 1 && strstr(err, "error: --resume: ") &&
              strstr(err, "metadata 'lr.max' is 'inf'"),
          "%s", err);
    free(f);
    trn_destroy(s);
}

/* A model input trn_main does not set ('mask' here) is refused before the
 * first step, named: it held zeros (NaN under --poison) at every step. */
static void test_unset_input(void) {
    static TrnTensor t[64];
    TrnModel m = bigram_tiny;
    if (m.ntensors + 1 > (int)(sizeof t / sizeof t[0])) { CHECK(0, "too many tensors"); return; }
    memcpy(t, m.tensors, sizeof *t * (size_t)m.ntensors);
    t[m.ntensors] = (TrnTensor){.name = "mask", .kind = TRN_INPUT, .dtype = TRN_F32, .rank = 2, .shape = {2, 4}, .numel = 8, .offset = 0,
                                .ckpt_shape = {2, 4}};
    m.tensors = t;
    m.ntensors++;
    char data[2048], args[4096], err[4096];
    snprintf(data, sizeof data, "%s", P("unset.bin"));
    uint16_t tok[2000];
    for (int i = 0; i < 2000; i++) tok[i] = (uint16_t)(i * 7 % 8);   /* the tiny model's vocabulary is 8 */
    CHECK(tok_write(data, tok, 2000, err, sizeof err) == 0, "%s", err);
    remove(P("unset.jsonl"));
    snprintf(args, sizeof args, "--data %s --steps 2 --metrics %s", data, P("unset.jsonl"));
    CHECK(run_main_err(err, sizeof err, &m, args) == 1 &&
              strstr(err, "error: model 'tiny' has an input 'mask' (f32[2,4]) that this program does not set") &&
              strstr(err, "only the embedding API (docs/runtime.md)") && !strstr(err, "step 1"),
          "%s", err);
    CHECK(access(P("unset.jsonl"), F_OK) != 0, "--metrics was written");
    snprintf(args, sizeof args, "--data %s --steps 0 --sample 4 --quiet", data);
    CHECK(run_main_err(err, sizeof err, &m, args) == 1 && strstr(err, "input 'mask'"), "--sample: %s", err);
    /* nothing runs the model: its checkpoint can be made */
    snprintf(args, sizeof args, "--steps 0 --save %s --quiet", P("unset.st"));
    CHECK(run_main_err(err, sizeof err, &m, args) == 0, "%s", err);
}

/* --sample reads its row of logits with the backend's read_part (row 0,
 * position len-1 of the bigram's [B, T, V]); without read_part, from the
 * whole tensor: the same text, token for token.  A trained bigram's next
 * byte depends on the last one, so a read of the wrong row shows. */
/* A checkpoint records what its step was compiled with (TrnTrainDefaults
 * .baked, metadata "compiled"); a load into a step compiled with other
 * settings says which differ (trn_load_note): all of them on a resume,
 * an --init's LoRA keys alone, and only where both say. */
static void test_load_note(void) {
    TrnModel a = bigram_adam, b = bigram_adam, none = bigram_adam;
    a.train.baked = "beta2=0.95\nlora_alpha=16.0\n-D dropout=0.1\n";
    b.train.baked = "beta2=0.99\nlora_alpha=32.0\n";
    none.train.baked = NULL;
    TrnSession *sa = cpu_session(&a, -1), *sb = cpu_session(&b, -1), *sn = cpu_session(&none, -1);
    if (!sa || !sb || !sn) { CHECK(0, "no session"); return; }
    const char *path = P("note.safetensors");
    CHECK(trn_save(sa, path, 1) == 0, "%s", trn_error(sa));
    CHECK(trn_load(sb, path, 0) == 0 && strcmp(trn_load_note(sb), "beta2 is 0.95 in the checkpoint, 0.99 here; lora_alpha is 16.0 in the "
                                                                 "checkpoint, 32.0 here; -D dropout=0.1 only in the checkpoint") == 0,
          "resume: '%s' %s", trn_load_note(sb), trn_error(sb));
    CHECK(trn_load(sa, path, 0) == 0 && strcmp(trn_load_note(sa), "") == 0, "the same settings: '%s'", trn_load_note(sa));
    CHECK(trn_load(sn, path, 0) == 0 && strcmp(trn_load_note(sn), "") == 0, "a step that does not say: '%s'", trn_load_note(sn));
    /* --init of a file with no LoRA adapters (a base model's): no note */
    CHECK(trn_load(sb, path, 1) == 0 && strcmp(trn_load_note(sb), "") == 0, "init: '%s'", trn_load_note(sb));
    /* a file that does not say (saved by a step that does not) */
    CHECK(trn_save(sn, path, 1) == 0 && trn_load(sb, path, 0) == 0 && strcmp(trn_load_note(sb), "") == 0, "a file that does not say: '%s'",
          trn_load_note(sb));
    /* more differences than the note holds: as many as fit, then "; ..." */
    static char la[4096], lb[4096];
    for (int i = 0, na = 0, nb = 0; i < 40; i++) {
        na += snprintf(la + na, sizeof la - (size_t)na, "key%02d=%040d\n", i, i);
        nb += snprintf(lb + nb, sizeof lb - (size_t)nb, "key%02d=%040d\n", i, i + 1);
    }
    TrnModel la_m = bigram_adam, lb_m = bigram_adam;
    la_m.train.baked = la;
    lb_m.train.baked = lb;
    TrnSession *xa = cpu_session(&la_m, -1), *xb = cpu_session(&lb_m, -1);
    const char *n = "";
    if (xa && xb && trn_save(xa, path, 1) == 0 && trn_load(xb, path, 0) == 0) n = trn_load_note(xb);
    size_t nl = strlen(n);
    CHECK(nl > 400 && nl < 512 && strncmp(n, "key00 is ", 9) == 0 && strcmp(n + nl - 5, "; ...") == 0, "a long note: '%s'", n);
    if (xa) trn_destroy(xa);
    if (xb) trn_destroy(xb);
    /* another model's run, whose tensors fit: a resume says so (trn_load_model); --init does not */
    TrnModel other = a;
    other.name = "other";
    TrnSession *so = cpu_session(&other, -1);
    CHECK(so && trn_save(sa, path, 1) == 0 && trn_load(so, path, 0) == 0 && strcmp(trn_load_model(so), "bigram") == 0 &&
              strcmp(trn_load_note(so), "") == 0,
          "another model's: '%s', '%s'", so ? trn_load_model(so) : "", so ? trn_load_note(so) : "");
    CHECK(so && trn_load(so, path, 1) == 0 && strcmp(trn_load_model(so), "") == 0, "another model's, --init: '%s'", so ? trn_load_model(so) : "");
    CHECK(trn_load(sa, path, 0) == 0 && strcmp(trn_load_model(sa), "") == 0, "the same model's: '%s'", trn_load_model(sa));
    if (so) trn_destroy(so);
    trn_destroy(sa);
    trn_destroy(sb);
    trn_destroy(sn);
}

/* --resume takes each tensor in the dtype the run saved it (a narrower
 * one would not give the uninterrupted run's bits); --init converts.  A
 * bf16 param saved, its header's "BF16" made "F16" (the same size). */
static void test_resume_dtype(void) {
    static TrnTensor th[1];
    th[0] = (TrnTensor){.name = "w", .kind = TRN_PARAM, .dtype = TRN_BF16, .rank = 1, .shape = {64}, .numel = 64, .offset = 0,
                        .init = "uniform", .init_a = -0.5, .init_b = 0.5, .trainable = 0};
    TrnModel mh = {.abi = TRN_ABI_VERSION, .name = "half", .source = "tests/runtime/test_runtime.c", .ntensors = 1, .tensors = th,
                   .t_tokens = -1, .t_targets = -1, .t_lr = -1, .t_step = -1, .t_seed = -1, .t_loss = -1, .t_grad_norm = -1,
                   .t_eval_loss = -1, .t_logits = -1, .train = {.optimizer = "adamw", .schedule = "constant", .precision = "bf16"},
                   .arena_bytes = 128, .cpu_run = {run_nothing}};
    TrnSession *s = cpu_session(&mh, 3);
    const char *path = P("dtype.safetensors");
    if (!s || trn_save(s, path, 1) != 0) { CHECK(0, "save: %s", s ? trn_error(s) : "no session"); return; }
    size_t n;
    unsigned char *f = slurp(path, &n);
    char *bf = f ? memmem(f, n, "\"BF16\"", 6) : NULL;
    CHECK(bf != NULL, "no BF16 in the header");
    if (bf) memcpy(bf, "\"F16\" ", 6);
    FILE *o = f ? fopen(path, "wb") : NULL;
    CHECK(o && fwrite(f, 1, n, o) == n && fclose(o) == 0, "rewriting %s", path);
    free(f);
    CHECK(trn_load(s, path, 0) == -1 && strstr(trn_error(s), "tensor 'w' is F16 in the file, the model's is bf16 (a run resumes from the tensors it saved"),
          "resume from F16 into bf16: %s", trn_error(s));
    CHECK(trn_load(s, path, 1) == 0, "--init from F16 into bf16: %s", trn_error(s));
    trn_destroy(s);
}

/* A checkpoint holding NaNs or infinities loads, and trn_load_nonfinite
 * names the first tensor holding some, with how many, and counts the
 * others (a run that diverged; a broken conversion). */
static void test_load_nonfinite(void) {
    TrnSession *s = cpu_session(&bigram_tiny, -1), *t = cpu_session(&bigram_tiny, -1);
    if (!s || !t) { CHECK(0, "no session"); return; }
    const char *path = P("nonfinite.safetensors");
    float w[64], b[8];
    CHECK(trn_save(s, path, 0) == 0 && trn_load(t, path, 1) == 0 && strcmp(trn_load_nonfinite(t), "") == 0, "finite: '%s' %s",
          trn_load_nonfinite(t), trn_error(t));
    CHECK(trn_get(s, "w", w, sizeof w) == 0 && trn_get(s, "b", b, sizeof b) == 0, "%s", trn_error(s));
    w[3] = NAN;
    w[10] = INFINITY;
    CHECK(trn_set(s, "w", w, sizeof w) == 0 && trn_save(s, path, 0) == 0, "%s", trn_error(s));
    CHECK(trn_load(t, path, 1) == 0 && strcmp(trn_load_nonfinite(t), "'w' holds 2 NaNs or infinities of 64 values") == 0, "w: '%s' %s",
          trn_load_nonfinite(t), trn_error(t));
    b[7] = -INFINITY;
    CHECK(trn_set(s, "b", b, sizeof b) == 0 && trn_save(s, path, 1) == 0, "%s", trn_error(s));
    CHECK(trn_load(t, path, 0) == 0 && strcmp(trn_load_nonfinite(t), "'w' holds 2 NaNs or infinities of 64 values, and 1 more tensor holds some") == 0,
          "w and b: '%s' %s", trn_load_nonfinite(t), trn_error(t));
    float got[64];
    CHECK(trn_get(t, "w", got, sizeof got) == 0 && isnan(got[3]) && isinf(got[10]) && got[0] == w[0], "loaded as they are");
    w[3] = 0;
    w[10] = 0;
    CHECK(trn_set(s, "w", w, sizeof w) == 0 && trn_save(s, path, 0) == 0, "%s", trn_error(s));
    CHECK(trn_load(t, path, 1) == 0 && strcmp(trn_load_nonfinite(t), "'b' holds 1 NaN or infinity of 8 values") == 0, "b: '%s' %s",
          trn_load_nonfinite(t), trn_error(t));
    /* a failed load says nothing of the file */
    CHECK(trn_load(t, P("no-such.safetensors"), 1) != 0 && strcmp(trn_load_nonfinite(t), "") == 0, "failed: '%s'", trn_load_nonfinite(t));
    trn_destroy(s);
    trn_destroy(t);
}

/* rt_draw_token, the sampler's draw: over a grid of uniforms each token
 * is drawn in proportion to its softmax weight (1:2:4 at temperature 1,
 * their square roots at 2), top_k keeps the k largest (ties to the lower
 * index), temperature 0 and top_k 1 the largest, and NaN or +inf logits
 * draw nothing. */
static int64_t draw(const double *l0, int64_t V, double temp, int64_t k, double u) {
    double l[8], scratch[8];
    memcpy(l, l0, (size_t)V * sizeof *l);
    return rt_draw_token(l, V, temp, k, u, scratch);
}

static void test_draw_token(void) {
    const double l[4] = {0, log(2.0), log(4.0), -INFINITY};
    int64_t n[4] = {0}, nk[4] = {0}, nt[4] = {0};
    for (int i = 0; i < 7000; i++) {
        double u = (i + 0.5) / 7000;
        n[draw(l, 4, 1, 0, u)]++;
        nk[draw(l, 4, 1, 2, u)]++;
        nt[draw(l, 4, 2, 0, u)]++;
    }
    CHECK(n[0] == 1000 && n[1] == 2000 && n[2] == 4000 && n[3] == 0, "temperature 1: %ld %ld %ld %ld", (long)n[0], (long)n[1], (long)n[2],
          (long)n[3]);
    CHECK(nk[0] == 0 && nk[1] == 2333 && nk[2] == 4667 && nk[3] == 0, "top-k 2: %ld %ld %ld %ld", (long)nk[0], (long)nk[1], (long)nk[2],
          (long)nk[3]);
    double z = 1 + sqrt(2.0) + 2;   /* at temperature 2: weights 1 : sqrt 2 : 2 */
    CHECK(labs((long)nt[0] - lround(7000 / z)) <= 1 && labs((long)nt[1] - lround(7000 * sqrt(2.0) / z)) <= 1 && nt[3] == 0,
          "temperature 2: %ld %ld %ld %ld", (long)nt[0], (long)nt[1], (long)nt[2], (long)nt[3]);
    CHECK(draw(l, 4, 0, 0, 0.01) == 2 && draw(l, 4, 1, 1, 0.01) == 2 && draw(l, 4, 1e-300, 0, 0.01) == 2, "the largest");
    const double tie[4] = {1, 3, 3, 3};
    CHECK(draw(tie, 4, 0, 0, 0.99) == 1 && draw(tie, 4, 1, 1, 0.99) == 1, "the largest, ties to the lower index");
    CHECK(draw(tie, 4, 1, 2, 0.99) == 2 && draw(tie, 4, 1, 2, 0.01) == 1 && draw(tie, 4, 1, 3, 0.99) == 3, "top-k among ties");
    CHECK(draw(tie, 4, 1, 9, 0.99) == 3 && draw(tie, 4, 1, 9, 0.2) == 1, "top-k past V: every token");
    const double nan1[3] = {0, NAN, 1}, inf1[3] = {0, INFINITY, 1}, ninf[2] = {-INFINITY, -INFINITY};
    CHECK(draw(nan1, 3, 1, 0, 0.5) == -1 && draw(inf1, 3, 0, 0, 0.5) == -1 && draw(ninf, 2, 1, 0, 0.5) == -1, "nothing to draw from");
}

static void test_sample_part(void) {
    char data[2048], err[512];
    snprintf(data, sizeof data, "%s", P("sample.bin"));
    CHECK(bigram_write_text_tokens(data, 20000, 3) == 0, "tokens");
    char text[2][4096];
    for (int k = 0; k < 2; k++) {
        TrnBackend be;
        CHECK(trn_cpu_backend(&bigram_adam, &be, err, sizeof err) == 0, "%s", err);
        CHECK(be.read_part != NULL, "the cpu backend has no read_part");
        if (k) be.read_part = NULL;
        char path[2048];
        snprintf(path, sizeof path, "%s", P(k ? "sample_full.txt" : "sample_part.txt"));
        fflush(stdout);
        int saved = dup(1), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        CHECK(saved >= 0 && fd >= 0, "cannot capture stdout");
        dup2(fd, 1);
        close(fd);
        int rc = run_main_be(&bigram_adam, &be, "--data %s --steps 200 --schedule constant --sample 300 --quiet", data);
        fflush(stdout);
        dup2(saved, 1);
        close(saved);
        CHECK(rc == 0, "trn_main --sample (%s)", k ? "whole tensor" : "read_part");
        size_t n;
        unsigned char *t = slurp(path, &n);
        snprintf(text[k], sizeof text[k], "%s", t ? (char *)t : "");
        free(t);
    }
    CHECK(strlen(text[0]) == 301 && strcmp(text[0], text[1]) == 0, "read_part's sample differs from the whole tensor's:\n%s\n%s", text[0], text[1]);
}

/* ---- the command-line program ---- */

static int same_lines(char a[][256], int na, char b[][256], int nb, const char *what) {
    if (na != nb) {
        CHECK(0, "%s: %d vs %d lines", what, na, nb);
        return 0;
    }
    for (int i = 0; i < na; i++)
        if (strcmp(a[i], b[i]) != 0) {
            CHECK(0, "%s: line %d differs:\n    %s\n    %s", what, i, a[i], b[i]);
            return 0;
        }
    return 1;
}

static void test_train_cli(void) {
    char data[2048], val[2048];
    snprintf(data, sizeof data, "%s", P("train.bin"));
    snprintf(val, sizeof val, "%s", P("val.bin"));
    CHECK(bigram_write_text_tokens(data, 20000, 1) == 0, "tokens");
    CHECK(bigram_write_text_tokens(val, 3000, 2) == 0, "tokens");
    /* training lowers the loss; eval at the end */
    CHECK(run_main(&bigram_adam, "--data %s --val %s --steps 30 --metrics %s --quiet", data, val, P("m0.jsonl")) == 0, "trn_main failed");
    char l[64][256];
    int k = step_lines(P("m0.jsonl"), l, 64);
    CHECK(k == 30, "%d step lines", k);
    if (k == 30) {
        double first = json_field(l[0], "loss"), last = json_field(l[29], "loss");
        CHECK(first > 5.3 && isfinite(last) && last < first - 1.0, "loss %g -> %g", first, last);
    }
    CHECK(count_substr(P("m0.jsonl"), "\"val_loss\"") == 1, "val_loss lines: %d", count_substr(P("m0.jsonl"), "\"val_loss\""));
    /* --poison: same losses (no buffer is read before it is written) */
    CHECK(run_main(&bigram_adam, "--data %s --steps 5 --metrics %s --quiet", data, P("mn.jsonl")) == 0, "run failed");
    CHECK(run_main(&bigram_adam, "--data %s --steps 5 --metrics %s --quiet --poison", data, P("mp.jsonl")) == 0, "poison run failed");
    char ln[8][256], lp[8][256];
    int nn = step_lines(P("mn.jsonl"), ln, 8);
    CHECK(nn == 5, "--poison: %d step lines without it", nn);
    same_lines(ln, nn, lp, step_lines(P("mp.jsonl"), lp, 8), "--poison");
    /* eval every 5 steps (bigram_accum's default) and at the end */
    CHECK(run_main(&bigram_accum, "--data %s --val %s --steps 12 --metrics %s --quiet", data, val, P("ma.jsonl")) == 0, "accum run failed");
    CHECK(count_substr(P("ma.jsonl"), "\"val_loss\"") == 3, "val_loss lines: %d", count_substr(P("ma.jsonl"), "\"val_loss\""));
    CHECK(count_substr(P("ma.jsonl"), "{\"step\":10,\"val_loss\":") == 1, "no eval at step 10");
    /* errors are exit status 1 */
    CHECK(run_main(&bigram_adam, "--steps 3 --quiet") == 1, "training without --data");
    CHECK(run_main(&bigram_adam, "--data %s --steps 3 --schedule bogus", data) == 1, "bad --schedule");
    CHECK(run_main(&bigram_adam, "--data %s --steps -3", data) == 1, "negative --steps");
    CHECK(run_main(&bigram_adam, "--frobnicate") == 1, "unknown flag");
    CHECK(run_main(&bigram_adam, "--save-every 3 --data %s", data) == 1, "--save-every without --save");
}

static void test_resume(void) {
    char data[2048], val[2048];
    snprintf(data, sizeof data, "%s", P("train.bin"));
    snprintf(val, sizeof val, "%s", P("val.bin"));
    CHECK(bigram_write_text_tokens(data, 20000, 1) == 0 && bigram_write_text_tokens(val, 3000, 2) == 0, "tokens");
    char a[64][256], b[64][256];
    /* AdamW with dropout, random batches: the uninterrupted run saves at 10 and 20 */
    CHECK(run_main(&bigram_adam, "--data %s --steps 20 --save %s --save-every 10 --metrics %s --quiet", data, P("ra_{step}.st"),
                   P("ra.jsonl")) == 0,
          "run 1");
    CHECK(run_main(&bigram_adam, "--data %s --resume %s --save %s --metrics %s --quiet", data, P("ra_10.st"), P("rb_{step}.st"),
                   P("rb.jsonl")) == 0,
          "resumed run");
    int na = step_lines(P("ra.jsonl"), a, 64), nb = step_lines(P("rb.jsonl"), b, 64);
    CHECK(na == 20 && nb == 10, "%d and %d step lines", na, nb);
    if (na == 20) same_lines(a + 10, 10, b, nb, "resumed AdamW run");
    size_t n1, n2;
    unsigned char *c1 = slurp(P("ra_20.st"), &n1), *c2 = slurp(P("rb_20.st"), &n2);
    CHECK(c1 && c2 && n1 == n2 && memcmp(c1, c2, n1) == 0, "the final checkpoints differ");
    free(c1);
    free(c2);
    /* a wrong seed on resume is ignored: the checkpoint's seed decides */
    CHECK(run_main(&bigram_adam, "--data %s --resume %s --seed 5 --metrics %s --quiet", data, P("ra_10.st"), P("rc.jsonl")) == 0, "run 3");
    nb = step_lines(P("rc.jsonl"), b, 64);
    if (na == 20) same_lines(a + 10, 10, b, nb, "resumed with --seed");
    /* grad_accum 2, SGD, sequential batches, evaluation */
    CHECK(run_main(&bigram_accum, "--data %s --val %s --batches sequential --steps 12 --save %s --save-every 4 --metrics %s --quiet", data,
                   val, P("sa_{step}.st"), P("sa.jsonl")) == 0,
          "accum run 1");
    CHECK(run_main(&bigram_accum, "--data %s --val %s --resume %s --metrics %s --quiet", data, val, P("sa_4.st"), P("sb.jsonl")) == 0,
          "accum resumed");
    na = step_lines(P("sa.jsonl"), a, 64);
    nb = step_lines(P("sb.jsonl"), b, 64);
    CHECK(na == 12 && nb == 8, "%d and %d step lines", na, nb);
    if (na == 12) same_lines(a + 4, 8, b, nb, "resumed accumulating run");
    na = val_lines(P("sa.jsonl"), a, 64);
    nb = val_lines(P("sb.jsonl"), b, 64);
    CHECK(na == 3 && nb == 3, "%d and %d val_loss lines (steps 5, 10, 12)", na, nb);
    same_lines(a, na, b, nb, "evaluations after resume");
    /* --init from a checkpoint, zero steps, save: the same parameters */
    CHECK(run_main(&bigram_adam, "--init %s --steps 0 --save %s --quiet", P("ra_20.st"), P("init.st")) == 0, "init run");
    TrnSession *x = cpu_session(&bigram_adam, -1), *y = cpu_session(&bigram_adam, -1);
    CHECK(trn_load(x, P("ra_20.st"), 0) == 0 && trn_load(y, P("init.st"), 1) == 0, "%s %s", trn_error(x), trn_error(y));
    static float wx[256 * 264], wy[256 * 264];
    trn_get(x, "w", wx, sizeof wx);
    trn_get(y, "w", wy, sizeof wy);
    CHECK(memcmp(wx, wy, sizeof wx) == 0, "--init did not load w");
    trn_destroy(x);
    trn_destroy(y);
    /* --init and --resume together */
    CHECK(run_main(&bigram_adam, "--init %s --resume %s --quiet", P("ra_20.st"), P("ra_20.st")) == 1, "--init with --resume");
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void mkdir_p(const char *path) {
    char p[1024];
    snprintf(p, sizeof p, "%s", path);
    for (char *q = p + 1; *q; q++)
        if (*q == '/') {
            *q = 0;
            mkdir(p, 0755);
            *q = '/';
        }
    mkdir(p, 0755);
}

int main(int argc, char **argv) {
    if (argc > 1) snprintf(scratch, sizeof scratch, "%s", argv[1]);
    else snprintf(scratch, sizeof scratch, "/tmp/trainc-rt-test-%d", (int)getpid());
    nftw(scratch, rm_entry, 16, FTW_DEPTH | FTW_PHYS);   /* a fresh folder each run */
    mkdir_p(scratch);
    struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {
        {"dtypes", test_dtypes},
        {"block_copy", test_block_copy},
        {"micro_seed", test_micro_seed},
        {"devices", test_devices},
        {"ranges", test_ranges},
        {"normals", test_normals},
        {"init", test_init},
        {"init_half", test_init_half},
        {"step_api", test_step_api},
        {"data", test_data},
        {"ckpt_format", test_ckpt_format},
        {"roundtrip", test_roundtrip},
        {"init_errors", test_init_errors},
        {"atomic_save", test_atomic_save},
        {"corrupt", test_corrupt},
        {"ckpt_meta", test_ckpt_meta},
        {"train_cli", test_train_cli},
        {"resume", test_resume},
        {"unset_input", test_unset_input},
        {"draw_token", test_draw_token},
        {"sample_part", test_sample_part},
        {"load_note", test_load_note},
        {"resume_dtype", test_resume_dtype},
        {"load_nonfinite", test_load_nonfinite},
    };
    int pass = 0, fail = 0;
    const char *only = getenv("RT_TEST");
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (only && strcmp(only, tests[i].name) != 0) continue;
        failed = 0;
        fprintf(stderr, "test %s\n", tests[i].name);
        tests[i].fn();
        if (failed) fail++;
        else pass++;
        fprintf(stderr, "  %s\n", failed ? "FAILED" : "ok");
    }
    printf("%d passed, %d failed\n", pass, fail);
    if (!fail) nftw(scratch, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return fail ? 1 : 0;
}
