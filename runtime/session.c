/* runtime/session.c — sessions: the embedding API of trainc_rt.h.
 *
 * A session is a model descriptor, a backend holding its tensors, the train
 * seed, the step count and the learning-rate schedule.  Parameters and
 * states are initialised here on the host (Philox, philox.h) and written to
 * the backend, so every backend starts from the same bits. */
#include "rt.h"

#include "philox.h"
#include "schedule.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int rt_seterr(TrnSession *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    return -1;
}

static int valid_init(const char *init) {
    static const char *const names[] = {"zeros", "ones", "normal", "uniform", "constant"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(init, names[i]) == 0) return 1;
    return 0;
}

int rt_check_model(const TrnModel *m, char *err, size_t errn) {
    if (!m) return rt_fail(err, errn, "no model");
    if (m->abi != TRN_ABI_VERSION)
        return rt_fail(err, errn, "model '%s' was compiled for runtime ABI %d, this runtime is ABI %d: recompile it", m->name ? m->name : "?",
                       m->abi, TRN_ABI_VERSION);
    if (m->ntensors < 0 || (m->ntensors > 0 && !m->tensors)) return rt_fail(err, errn, "model: bad tensor table");
    for (int i = 0; i < m->ntensors; i++) {
        const TrnTensor *t = &m->tensors[i];
        if (!t->name || !t->name[0]) return rt_fail(err, errn, "model: tensor %d has no name", i);
        if ((unsigned)t->kind > TRN_OUTPUT) return rt_fail(err, errn, "model: tensor '%s' has a bad kind %d", t->name, (int)t->kind);
        if ((unsigned)t->dtype > TRN_U8) return rt_fail(err, errn, "model: tensor '%s' has a bad dtype %d", t->name, (int)t->dtype);
        if (t->rank < 0 || t->rank > TRN_MAX_RANK) return rt_fail(err, errn, "model: tensor '%s' has a bad rank %d", t->name, t->rank);
        int64_t n = 1;
        for (int d = 0; d < t->rank; d++) {
            if (t->shape[d] < 0 || (t->shape[d] > 0 && n > INT64_MAX / t->shape[d]))
                return rt_fail(err, errn, "model: tensor '%s' has a bad shape", t->name);
            n *= t->shape[d];
        }
        if (n != t->numel)
            return rt_fail(err, errn, "model: tensor '%s' has numel %lld but its shape holds %lld", t->name, (long long)t->numel, (long long)n);
        if (rt_nbytes(t->dtype, n) < 0) return rt_fail(err, errn, "model: tensor '%s' is too large", t->name);
        int64_t cs[TRN_MAX_RANK];
        rt_ckpt_shape(t, cs);
        for (int d = 0; d < t->rank; d++)
            if (cs[d] < 0 || cs[d] > t->shape[d])
                return rt_fail(err, errn, "model: tensor '%s' has a checkpoint shape larger than its shape", t->name);
        if (t->index_end < 0 || (t->index_end > 0 && (t->kind != TRN_INPUT || (t->dtype != TRN_I32 && t->dtype != TRN_I64 && t->dtype != TRN_U8))))
            return rt_fail(err, errn, "model: tensor '%s' has an index range but is not an integer input", t->name);
        if ((t->kind == TRN_PARAM || t->kind == TRN_STATE) && t->init && !valid_init(t->init))
            return rt_fail(err, errn, "model: tensor '%s' has an unknown init '%s'", t->name, t->init);
        if (t->offset >= 0 && (t->offset > m->arena_bytes || rt_nbytes(t->dtype, n) > m->arena_bytes - t->offset))
            return rt_fail(err, errn, "model: tensor '%s' at offset %lld (%lld bytes) lies outside the %lld-byte arena", t->name,
                           (long long)t->offset, (long long)rt_nbytes(t->dtype, n), (long long)m->arena_bytes);
        for (int j = 0; j < i; j++)
            if (strcmp(m->tensors[j].name, t->name) == 0) return rt_fail(err, errn, "model: two tensors are named '%s'", t->name);
    }
    const int idx[] = {m->t_tokens, m->t_targets, m->t_lr, m->t_step, m->t_seed, m->t_loss, m->t_grad_norm, m->t_eval_loss, m->t_logits};
    for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++)
        if (idx[i] < -1 || idx[i] >= m->ntensors) return rt_fail(err, errn, "model: a tensor index (%d) is out of range", idx[i]);
    if (m->t_tokens >= 0 && m->tensors[m->t_tokens].dtype != TRN_I32 && m->tensors[m->t_tokens].dtype != TRN_I64)
        return rt_fail(err, errn, "model: the tokens input must be i32 or i64");
    if (m->nmem < 0 || (m->nmem > 0 && !m->mem)) return rt_fail(err, errn, "model: bad memory report");
    return 0;
}

/* Element-wise work is split over threads from this many elements a thread
 * (a value depends only on its index, so the split changes nothing). */
#define INIT_GRAIN ((int64_t)1 << 14)

typedef struct InitJob {
    const TrnTensor *t;
    const char      *init;
    uint64_t         seed, stream;
    int64_t          cs[TRN_MAX_RANK]; /* the checkpoint view's shape */
    unsigned char   *host;
} InitJob;

/* Elements lo .. hi-1 of the checkpoint view, in row-major order. */
static void init_range(void *ctx, int64_t lo, int64_t hi) {
    const InitJob *j = ctx;
    const TrnTensor *t = j->t;
    int whole = 1; /* the view is the tensor: element k is at k */
    for (int d = 0; d < t->rank; d++) whole = whole && j->cs[d] == t->shape[d];
    if (whole && t->dtype == TRN_F32) {
        float *h = (float *)j->host;
        int64_t k = lo;
        if (j->init[0] == 'n') { /* whole Philox blocks of four normals; the ends one by one, below */
            for (; k < hi && (k & 3); k++) h[k] = (float)rng_init_value(j->init, t->init_a, t->init_b, j->seed, j->stream, (uint64_t)k);
            for (; k + 4 <= hi; k += 4) {
                float o[4];
                rng_normal4(j->seed, j->stream, (uint64_t)k >> 2, o);
                for (int q = 0; q < 4; q++) h[k + q] = (float)(t->init_a * o[q]);
            }
        }
        for (; k < hi; k++) h[k] = (float)rng_init_value(j->init, t->init_a, t->init_b, j->seed, j->stream, (uint64_t)k);
        return;
    }
    int64_t idx[TRN_MAX_RANK] = {0}, rest = lo; /* idx: the index of element k */
    for (int d = t->rank - 1; d >= 0; d--) {
        idx[d] = rest % j->cs[d];
        rest /= j->cs[d];
    }
    for (int64_t k = lo; k < hi; k++) {
        int64_t off = 0;
        for (int d = 0; d < t->rank; d++) off = off * t->shape[d] + idx[d];
        double v = rng_init_value(j->init, t->init_a, t->init_b, j->seed, j->stream, (uint64_t)k);
        if (t->dtype == TRN_BF16 || t->dtype == TRN_F16) v = (double)(float)v; /* as an f32 master's copy */
        rt_elem_set(t->dtype, j->host, off, v);
        for (int d = t->rank - 1; d >= 0; d--) {
            if (++idx[d] < j->cs[d]) break;
            idx[d] = 0;
        }
    }
}

/* Fills the host copy of a param or state: element i of the checkpoint view
 * (ckpt_shape, row-major) gets rng_init_value(..., i); elements of the
 * padding outside that view are zero, so a padded and an unpadded
 * compilation start from the same weights.  On several threads. */
static void init_tensor(TrnSession *s, int ti, unsigned char *host) {
    const TrnTensor *t = &s->m->tensors[ti];
    InitJob j = {t, t->init ? t->init : "zeros", s->seed, rng_name_stream(t->name), {0}, host};
    rt_ckpt_shape(t, j.cs);
    memset(host, 0, (size_t)rt_nbytes(t->dtype, t->numel));
    if (j.init[0] == 'z') return;
    rt_parallel_ranges(rt_ckpt_numel(t), INIT_GRAIN, s->threads, init_range, &j);
}

/* The backend's own initialisation of tensor ti (its init hook: f32, the
 * checkpoint view a prefix of the tensor): 0 done, 1 not done, -1 error. */
static int init_on_backend(TrnSession *s, int ti) {
    const TrnTensor *t = &s->m->tensors[ti];
    if (!s->be.init || t->dtype != TRN_F32) return 1;
    int64_t cs[TRN_MAX_RANK];
    rt_ckpt_shape(t, cs);
    for (int d = 1; d < t->rank; d++)
        if (cs[d] != t->shape[d]) return 1;
    TrnInitSpec sp = {t->init ? t->init : "zeros", t->init_a, t->init_b, s->seed, rng_name_stream(t->name), rt_ckpt_numel(t)};
    char e[512];
    int rc = s->be.init(s->be.self, ti, &sp, e, sizeof e);
    if (rc < 0) rt_seterr(s, "initialising '%s': %s", t->name, e);
    if (rc == 0) s->init_on_device++;
    return rc;
}

typedef struct ConvJob {
    TrnDType    from, to;
    const void *src;
    void       *dst;
} ConvJob;

static void conv_range(void *ctx, int64_t lo, int64_t hi) {
    const ConvJob *j = ctx;
    for (int64_t k = lo; k < hi; k++) rt_elem_set(j->to, j->dst, k, rt_elem_get(j->from, j->src, k));
}

const char *rt_copy_of(const TrnTensor *t) {
    static const char *const prefix[] = {"amp.bf16.", "amp.f16."};
    if (t->kind != TRN_STATE || !t->name) return NULL;
    for (int i = 0; i < 2; i++)
        if (strncmp(t->name, prefix[i], strlen(prefix[i])) == 0) return t->name + strlen(prefix[i]);
    return NULL;
}

/* The copies of param pi (all params when pi < 0), converted on the host:
 * read, converted as rt_elem_set rounds (to nearest even), written. */
static int refresh_on_host(TrnSession *s, int pi_only) {
    const TrnModel *m = s->m;
    for (int i = 0; i < m->ntensors; i++) {
        const TrnTensor *t = &m->tensors[i];
        const char *of = rt_copy_of(t);
        if (!of) continue;
        int pi = trn_find(s, of);
        if (pi < 0 || m->tensors[pi].kind != TRN_PARAM || m->tensors[pi].numel != t->numel)
            return rt_seterr(s, "model: '%s' copies '%s', which it does not match", t->name, of);
        if (pi_only >= 0 && pi != pi_only) continue;
        const TrnTensor *p = &m->tensors[pi];
        unsigned char *src = rt_malloc((size_t)rt_nbytes(p->dtype, p->numel), s->err, sizeof s->err);
        unsigned char *dst = src ? rt_malloc((size_t)rt_nbytes(t->dtype, t->numel), s->err, sizeof s->err) : NULL;
        char e[512];
        int rc = -1;
        if (dst && s->be.read(s->be.self, pi, src, e, sizeof e) != 0) rt_seterr(s, "refreshing '%s': reading '%s': %s", t->name, p->name, e);
        else if (dst) {
            ConvJob j = {p->dtype, t->dtype, src, dst};
            rt_parallel_ranges(t->numel, INIT_GRAIN, s->threads, conv_range, &j);
            if (s->be.write(s->be.self, i, dst, e, sizeof e) != 0) rt_seterr(s, "refreshing '%s': %s", t->name, e);
            else rc = 0;
        }
        free(src);
        free(dst);
        if (rc != 0) return -1;
    }
    return 0;
}

int rt_is_adapter(const TrnTensor *t) {
    static const char *const tag[] = {".lora_A", ".lora_B"};
    if (t->kind != TRN_PARAM || !t->name) return 0;
    for (int i = 0; i < 2; i++)
        for (const char *p = strstr(t->name, tag[i]); p; p = strstr(p + 1, tag[i]))
            if (p[7] == '.' || p[7] == 0) return 1;
    return 0;
}

int rt_refresh_copies(TrnSession *s, int param) {
    /* all of them: the compiled TRN_RUN_REFRESH casts them where they live
     * (on the GPU nothing crosses the bus) with the update's own kernels */
    if (param < 0 && s->m->refresh) {
        char e[1024];
        if (s->be.run(s->be.self, TRN_RUN_REFRESH, e, sizeof e) != 0)
            return rt_seterr(s, "refreshing the half-precision copies on %s: %s", s->be.name ? s->be.name : "?", e);
        s->refreshed_on_backend++;
        return 0;
    }
    return refresh_on_host(s, param);
}

static int init_all(TrnSession *s) {
    const TrnModel *m = s->m;
    int64_t maxb = 0;
    int big = -1; /* the largest, which the host buffer is made for */
    for (int i = 0; i < m->ntensors; i++)
        if (m->tensors[i].kind == TRN_PARAM || m->tensors[i].kind == TRN_STATE) {
            int64_t b = rt_nbytes(m->tensors[i].dtype, m->tensors[i].numel);
            if (b > maxb) maxb = b, big = i;
        }
    unsigned char *host = malloc(maxb > 0 ? (size_t)maxb : 1);
    if (!host) {
        char hb[64];
        rt_human_bytes(hb, sizeof hb, maxb);
        return rt_seterr(s, "out of memory: the host buffer that initialises the parameters, %s for the largest, '%s'", hb, m->tensors[big].name);
    }
    for (int i = 0; i < m->ntensors; i++) {
        const TrnTensor *t = &m->tensors[i];
        if (t->kind != TRN_PARAM && t->kind != TRN_STATE) continue;
        if (rt_copy_of(t)) continue; /* below, from its param */
        int rc = init_on_backend(s, i);
        if (rc < 0) {
            free(host);
            return -1;
        }
        if (rc == 0) continue;
        init_tensor(s, i, host);
        char e[512];
        if (s->be.write(s->be.self, i, host, e, sizeof e) != 0) {
            free(host);
            return rt_seterr(s, "initialising '%s': %s", t->name, e);
        }
    }
    free(host);
    return rt_refresh_copies(s, -1);
}

/* TrnOptions' numbers: -1 when one is out of range (err says which). */
static int check_options(const TrnOptions *opt, char *err, size_t errn) {
    if (opt && opt->seed < -1) return rt_fail(err, errn, "TrnOptions.seed is %lld: -1 (the model's) or a seed >= 0", (long long)opt->seed);
    if (opt && opt->threads < 0) return rt_fail(err, errn, "TrnOptions.threads is %d: 0 (the default) or a thread count", opt->threads);
    return 0;
}

TrnSession *trn_create_with_backend(const TrnModel *m, TrnBackend be, const TrnOptions *opt, char *err, size_t errn) {
    TrnOptions dflt = {"auto", 0, -1, 0};
    if (!opt) opt = &dflt;
    if (check_options(opt, err, errn) != 0) {
        if (be.destroy) be.destroy(be.self);
        return NULL;
    }
    if (rt_check_model(m, err, errn) != 0) {
        if (be.destroy) be.destroy(be.self);
        return NULL;
    }
    if (!be.run || !be.read || !be.write) {
        if (be.destroy) be.destroy(be.self);
        rt_fail(err, errn, "backend '%s' lacks run/read/write", be.name ? be.name : "?");
        return NULL;
    }
    TrnSession *s = rt_calloc(1, sizeof *s, err, errn);
    if (!s) {
        if (be.destroy) be.destroy(be.self);
        return NULL;
    }
    s->m = m;
    s->be = be;
    s->seed = (uint64_t)(opt->seed >= 0 ? opt->seed : m->train.seed);
    s->grad_accum = m->train.grad_accum > 0 ? m->train.grad_accum : 1;
    s->loss = NAN;
    s->grad_norm = NAN;
    const char *sched = m->train.schedule ? m->train.schedule : "constant";
    if (rt_set_schedule_name(s, sched) != 0) {
        rt_fail(err, errn, "%s", s->err);
        trn_destroy(s);
        return NULL;
    }
    s->lr = m->train.lr + 0.0;
    s->min_lr = m->train.min_lr + 0.0;
    s->warmup = m->train.warmup;
    s->total = m->train.steps;
    snprintf(s->batches, sizeof s->batches, "random");
    if (opt->threads > 0) rt_set_threads(opt->threads);
    s->threads = opt->threads > 0 ? opt->threads : 0;
    double t0 = rt_now();
    int rc = init_all(s);
    s->t_init = rt_now() - t0;
    if (rc != 0) {
        rt_fail(err, errn, "%s", s->err);
        trn_destroy(s);
        return NULL;
    }
    return s;
}

TrnSession *trn_create(const TrnModel *m, const TrnOptions *opt, char *err, size_t errn) {
    const char *dev = opt && opt->device ? opt->device : "auto";
    int flags = opt && opt->poison ? TRN_FLAG_POISON : 0;
    if (check_options(opt, err, errn) != 0 || rt_check_model(m, err, errn) != 0) return NULL; /* before a backend is made */
    TrnBackend be;
    memset(&be, 0, sizeof be);
    double t0 = rt_now();
    if (strcmp(dev, "cpu") == 0) {
        char e[512];
        if (rt_cpu_backend(m, flags, &be, e, sizeof e) != 0) {
            rt_fail(err, errn, "device cpu: %s", e);
            return NULL;
        }
    } else if (strcmp(dev, "cuda") == 0) {
        char e[512];
        if (rt_cuda_backend(m, flags, &be, e, sizeof e) != 0) {
            rt_fail(err, errn, "device cuda: %s", e);
            return NULL;
        }
    } else if (strcmp(dev, "auto") == 0) {
        /* the GPU, else the CPU: without a word where there is no GPU to
         * run on (no CUDA module, driver or device), with one where a GPU
         * is there and failed (a memory plan too large for it, say) */
        char ecuda[512], ecpu[512];
        int rc = rt_cuda_backend(m, flags, &be, ecuda, sizeof ecuda);
        if (rc != 0) {
            if (rt_cpu_backend(m, flags, &be, ecpu, sizeof ecpu) != 0) {
                rt_fail(err, errn, "no device can run this model: cuda: %s; cpu: %s", ecuda, ecpu);
                return NULL;
            }
            if (rc != -2) fprintf(stderr, "trainc: warning: --device auto: the GPU failed (%s); running on the CPU\n", ecuda);
        }
    } else {
        rt_fail(err, errn, "unknown device '%s' (expected auto, cpu or cuda)", dev);
        return NULL;
    }
    double t_device = rt_now() - t0;
    char ph[sizeof ((TrnSession *)0)->dev_phases] = "";
    if (strcmp(be.name, "cuda") == 0) rt_cuda_phases(be.self, ph, sizeof ph);
    TrnSession *s = trn_create_with_backend(m, be, opt, err, errn);
    if (s) s->t_device = t_device, memcpy(s->dev_phases, ph, sizeof ph);
    return s;
}

void trn_destroy(TrnSession *s) {
    if (!s) return;
    if (s->be.destroy) s->be.destroy(s->be.self);
    free(s);
}

const char *trn_error(const TrnSession *s) { return s ? s->err : "no session"; }
const TrnModel *trn_model(const TrnSession *s) { return s ? s->m : NULL; }

const char *trn_device(const TrnSession *s) { return s ? (s->be.name ? s->be.name : "?") : NULL; }

int trn_find(const TrnSession *s, const char *name) {
    for (int i = 0; name && i < s->m->ntensors; i++)
        if (strcmp(s->m->tensors[i].name, name) == 0) return i;
    return -1;
}

/* An index input's values (TrnTensor index_end): 0 when every one is in range. */
static int check_indices(TrnSession *s, const TrnTensor *tt, const void *data) {
    for (int64_t i = 0; i < tt->numel; i++) {
        int64_t v = tt->dtype == TRN_I32 ? ((const int32_t *)data)[i] : tt->dtype == TRN_I64 ? ((const int64_t *)data)[i] : ((const uint8_t *)data)[i];
        if ((v < 0 || v >= tt->index_end) && !(tt->index_ignores && v == tt->index_ignore)) {
            char ig[48] = "";
            if (tt->index_ignores) snprintf(ig, sizeof ig, ", or %lld (ignored)", (long long)tt->index_ignore);
            return rt_seterr(s, "trn_set '%s': element %lld is %lld, outside 0 .. %lld%s: the model reads it as an index", tt->name, (long long)i,
                             (long long)v, (long long)(tt->index_end - 1), ig);
        }
    }
    return 0;
}

/* A caller's buffer for tensor tt: not NULL, and exactly the tensor's
 * bytes.  call names the API function in the message. */
static int check_buffer(TrnSession *s, const char *call, const TrnTensor *tt, const void *data, size_t bytes) {
    if (!data) return rt_seterr(s, "%s '%s': the data is NULL", call, tt->name);
    size_t want = (size_t)rt_nbytes(tt->dtype, tt->numel);
    if (bytes != want)
        return rt_seterr(s, "%s '%s': %zu bytes given, the tensor (%s, %lld elements) has %zu", call, tt->name, bytes, trn_dtype_name[tt->dtype],
                         (long long)tt->numel, want);
    return 0;
}

static int xfer(TrnSession *s, const char *name, void *data, size_t bytes, int put) {
    const char *call = put ? "trn_set" : "trn_get";
    s->err[0] = 0;
    if (!name) return rt_seterr(s, "%s: the tensor name is NULL", call);
    int t = trn_find(s, name);
    if (t < 0) return rt_seterr(s, "%s: model '%s' has no tensor '%s'", call, s->m->name, name);
    const TrnTensor *tt = &s->m->tensors[t];
    if (check_buffer(s, call, tt, data, bytes) != 0) return -1;
    if (put && tt->kind == TRN_INPUT && tt->index_end > 0 && check_indices(s, tt, data) != 0) return -1;
    char e[512];
    int rc = put ? s->be.write(s->be.self, t, data, e, sizeof e) : s->be.read(s->be.self, t, data, e, sizeof e);
    if (rc != 0) return rt_seterr(s, "%s '%s': %s", call, name, e);
    return 0;
}

int trn_set(TrnSession *s, const char *name, const void *data, size_t bytes) {
    if (xfer(s, name, (void *)data, bytes, 1) != 0) return -1;
    /* a param with half-precision copies: they follow it */
    int t = trn_find(s, name);
    return s->m->tensors[t].kind == TRN_PARAM ? rt_refresh_copies(s, t) : 0;
}
int trn_get(TrnSession *s, const char *name, void *data, size_t bytes) { return xfer(s, name, data, bytes, 0); }

int rt_get_scalar(TrnSession *s, int t, double *v) {
    const TrnTensor *tt = &s->m->tensors[t];
    if (tt->numel != 1) return rt_seterr(s, "tensor '%s' is not a scalar", tt->name);
    unsigned char buf[8];
    char e[512];
    if (s->be.read(s->be.self, t, buf, e, sizeof e) != 0) return rt_seterr(s, "reading '%s': %s", tt->name, e);
    *v = rt_elem_get(tt->dtype, buf, 0);
    return 0;
}

int rt_set_scalar(TrnSession *s, int t, double v) {
    const TrnTensor *tt = &s->m->tensors[t];
    if (tt->numel != 1) return rt_seterr(s, "tensor '%s' is not a scalar", tt->name);
    unsigned char buf[8];
    rt_elem_set(tt->dtype, buf, 0, v);
    char e[512];
    if (s->be.write(s->be.self, t, buf, e, sizeof e) != 0) return rt_seterr(s, "writing '%s': %s", tt->name, e);
    return 0;
}

static int run(TrnSession *s, TrnRun which, const char *what) {
    char e[1024];
    if (s->be.run(s->be.self, which, e, sizeof e) != 0) return rt_seterr(s, "%s on %s: %s", what, s->be.name ? s->be.name : "?", e);
    return 0;
}

/* After a step that failed part way: the gradient accumulators
 * ("grad_acc.P", trainc_rt.h) zeroed, so that the micro-batches that ran
 * do not add into the next step.  What failed stays first in s->err; a
 * zeroing that fails too is said after it. */
static void clear_accumulators(TrnSession *s) {
    const TrnModel *m = s->m;
    void *zero = NULL;
    size_t have = 0;
    char e[512] = "out of memory";
    for (int i = 0; i < m->ntensors; i++) {
        const TrnTensor *t = &m->tensors[i];
        if (t->kind != TRN_STATE || strncmp(t->name, "grad_acc.", 9) != 0) continue;
        size_t n = (size_t)rt_nbytes(t->dtype, t->numel);
        if (n > have) {
            free(zero);
            zero = calloc(1, n);
            have = zero ? n : 0;
        }
        if (!zero || s->be.write(s->be.self, i, zero, e, sizeof e) != 0) {
            size_t l = strlen(s->err);
            snprintf(s->err + l, sizeof s->err - l, "; zeroing '%s' after it failed too (%s): the next step adds to what remains", t->name, e);
            break;
        }
    }
    free(zero);
}

int trn_step(TrnSession *s, TrnFeed feed, void *ctx, double lr) {
    const TrnModel *m = s->m;
    int64_t step = s->step + 1;
    s->err[0] = 0;
    if (isnan(lr) || isinf(lr)) return rt_seterr(s, "trn_step: learning rate %g (a negative one takes the schedule's)", lr);
    if (!feed && s->grad_accum > 1)
        return rt_seterr(s, "trn_step: no feed, and the model takes %lld micro-batches a step", (long long)s->grad_accum);
    double lr_now = lr >= 0 ? lr : trn_lr_at(s, step);
    /* Set before the first micro-batch: with grad_accum == 1 the update runs inside TRN_RUN_MICRO. */
    if (m->t_lr >= 0 && rt_set_scalar(s, m->t_lr, lr_now) != 0) return -1;
    if (m->t_step >= 0 && rt_set_scalar(s, m->t_step, (double)step) != 0) return -1;
    double sum = 0;
    for (int64_t micro = 0; micro < s->grad_accum; micro++) {
        if (feed && feed(ctx, s, (int)micro) != 0) {
            if (!s->err[0]) rt_seterr(s, "step %lld: feeding micro-batch %lld failed", (long long)step, (long long)micro);
            goto fail;
        }
        if (m->t_seed >= 0 && rt_set_scalar(s, m->t_seed, rt_micro_seed(s->seed, step, micro)) != 0) goto fail;
        if (run(s, TRN_RUN_MICRO, "the micro-batch schedule") != 0) goto fail;
        if (s->grad_accum == 1) { /* the update ran in it: the step is taken, whatever follows */
            s->step = step;
            s->data_pos++;
            s->loss = s->grad_norm = NAN; /* until read: not the step before's */
        }
        double l = NAN;
        if (m->t_loss >= 0 && rt_get_scalar(s, m->t_loss, &l) != 0) goto fail;
        sum += l;
    }
    if (run(s, TRN_RUN_UPDATE, "the update schedule") != 0) return -1;
    if (s->grad_accum > 1) {
        s->step = step;
        s->data_pos += s->grad_accum;
    }
    s->loss = m->t_loss >= 0 ? sum / (double)s->grad_accum : NAN;
    s->grad_norm = NAN;
    if (m->t_grad_norm >= 0 && rt_get_scalar(s, m->t_grad_norm, &s->grad_norm) != 0) return -1;
    return 0;
fail:
    /* before the update: what the micro-batches that ran accumulated is
     * dropped (with grad_accum 1 there is none, or the update ran) */
    if (s->grad_accum > 1) clear_accumulators(s);
    return -1;
}

double  trn_loss(const TrnSession *s) { return s->loss; }
double  trn_grad_norm(const TrnSession *s) { return s->grad_norm; }
int64_t trn_step_count(const TrnSession *s) { return s->step; }

double trn_lr_at(const TrnSession *s, int64_t step) {
    return sched_lr_at(s->schedule, s->lr, s->min_lr, s->warmup, s->total, step);
}

int rt_set_schedule_name(TrnSession *s, const char *schedule) {
    if (strcmp(schedule, "constant") != 0 && strcmp(schedule, "cosine") != 0 && strcmp(schedule, "linear") != 0)
        return rt_seterr(s, "unknown learning-rate schedule '%s' (expected constant, cosine or linear)", schedule);
    snprintf(s->schedule, sizeof s->schedule, "%s", schedule);
    return 0;
}

int trn_set_schedule(TrnSession *s, const char *schedule, double lr, double min_lr, int64_t warmup, int64_t total) {
    s->err[0] = 0;
    if (!(lr >= 0) || !(min_lr >= 0) || isinf(lr) || isinf(min_lr) || warmup < 0 || total < 0)
        return rt_seterr(s, "bad learning-rate schedule: lr %g, min_lr %g, warmup %lld, steps %lld", lr, min_lr, (long long)warmup,
                         (long long)total);
    if (total > TRN_MAX_STEPS) /* as --steps and a checkpoint's lr.steps */
        return rt_seterr(s, "bad learning-rate schedule: steps %lld, past 2^53", (long long)total);
    if (schedule && rt_set_schedule_name(s, schedule) != 0) return -1;
    s->lr = lr + 0.0;   /* -0.0 is 0: a checkpoint's lr.max and lr.min are unsigned */
    s->min_lr = min_lr + 0.0;
    s->warmup = warmup;
    s->total = total;
    return 0;
}

int trn_eval(TrnSession *s, double *loss) {
    s->err[0] = 0;
    if (!loss) return rt_seterr(s, "trn_eval: the loss pointer is NULL");
    if (s->m->t_eval_loss < 0) return rt_seterr(s, "model '%s' has no eval.loss output", s->m->name);
    if (run(s, TRN_RUN_EVAL, "the eval schedule") != 0) return -1;
    return rt_get_scalar(s, s->m->t_eval_loss, loss);
}

/* A language model's sampling graph computes the logits of one position
 * per sequence: row b*T + pos[b] of the head's input (the input
 * "sample.rows", codegen/compile.c make_sample).  pos NULL: T-1 in every
 * row.  0 also when the model has no such input. */
int rt_set_sample_rows(TrnSession *s, const int64_t *pos) {
    const TrnModel *m = s->m;
    int ri = trn_find(s, "sample.rows");
    if (ri < 0) {
        if (pos && (m->t_tokens < 0 || m->tensors[m->t_tokens].rank != 2))
            return rt_seterr(s, "trn_predict_at: model '%s' has no tokens [B, T], so its logits have no positions: use trn_predict", m->name);
        if (pos) return rt_seterr(s, "trn_predict_at: model '%s' computes the logits of every position: use trn_predict", m->name);
        return 0;
    }
    const TrnTensor *rt = &m->tensors[ri], *tk = m->t_tokens >= 0 ? &m->tensors[m->t_tokens] : NULL;
    if (rt->kind != TRN_INPUT || rt->dtype != TRN_I32 || rt->rank != 1 || !tk || tk->rank != 2 || tk->shape[0] != rt->shape[0])
        return rt_seterr(s, "model: 'sample.rows' must be i32 [B] beside tokens [B, T]");
    int64_t B = tk->shape[0], T = tk->shape[1];
    if (B * T > INT32_MAX) return rt_seterr(s, "model: %lld x %lld rows do not fit 'sample.rows' (i32)", (long long)B, (long long)T);
    int32_t *rows = rt_malloc((size_t)B * sizeof *rows, s->err, sizeof s->err);
    if (!rows) return -1;
    for (int64_t b = 0; b < B; b++) {
        int64_t p = pos ? pos[b] : T - 1;
        if (p < 0 || p >= T) {
            free(rows);
            return rt_seterr(s, "position %lld of sequence %lld is outside 0 .. %lld", (long long)p, (long long)b, (long long)(T - 1));
        }
        rows[b] = (int32_t)(b * T + p);
    }
    char e[512];
    int rc = s->be.write(s->be.self, ri, rows, e, sizeof e);
    free(rows);
    return rc != 0 ? rt_seterr(s, "writing 'sample.rows': %s", e) : 0;
}

/* trn_predict(_at), named so in its messages; the result's buffer is
 * checked before anything runs */
static int predict(TrnSession *s, const char *call, const int64_t *pos, void *logits, size_t bytes) {
    s->err[0] = 0;
    const TrnModel *m = s->m;
    if (m->t_logits < 0) return rt_seterr(s, "%s: model '%s' has no logits output", call, m->name);
    if (check_buffer(s, call, &m->tensors[m->t_logits], logits, bytes) != 0) return -1;
    if (rt_set_sample_rows(s, pos) != 0) return -1;
    if (run(s, TRN_RUN_SAMPLE, "the sampling schedule") != 0) return -1;
    return trn_get(s, "logits", logits, bytes);
}

int trn_predict_at(TrnSession *s, const int64_t *pos, void *logits, size_t bytes) { return predict(s, "trn_predict_at", pos, logits, bytes); }
int trn_predict(TrnSession *s, void *logits, size_t bytes) { return predict(s, "trn_predict", NULL, logits, bytes); }
