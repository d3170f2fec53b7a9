/* tools/interp_backend.c — the reference interpreter behind the runtime's
 * backend interface (see interp_backend.h).  One interpreter per graph: the
 * training graph holds the parameters and states; the eval and sampling
 * interpreters get a copy of the parameters before each run. */
#include "interp_backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct IbTensor {
    const char *name;
    TrnKind     kind;
    Node       *src[3];      /* the source node in each graph (train, eval, sample), or NULL */
    Value      *out;         /* outputs: the value */
    int         gi;          /* outputs: which graph */
} IbTensor;

struct InterpModel {
    Graph     *g[3];
    Interp    *it[3];
    TrnModel   model;
    TrnTensor *tensors;
    IbTensor  *ib;
    int        n, cap;
    Diag      *d;
};

static int find(InterpModel *m, const char *name, TrnKind kind) {
    for (int i = 0; i < m->n; i++)
        if (m->ib[i].kind == kind && strcmp(m->ib[i].name, name) == 0) return i;
    return -1;
}

static int add(InterpModel *m, const char *name, TrnKind kind, const Type *ty, Node *src) {
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 64;
        m->ib = xrealloc(m->ib, sizeof(IbTensor) * (size_t)m->cap);
        m->tensors = xrealloc(m->tensors, sizeof(TrnTensor) * (size_t)m->cap);
    }
    IbTensor *ib = &m->ib[m->n];
    memset(ib, 0, sizeof *ib);
    ib->name = name;
    ib->kind = kind;
    TrnTensor *t = &m->tensors[m->n];
    memset(t, 0, sizeof *t);
    t->name = name;
    t->kind = kind;
    t->dtype = (TrnDType)ty->dt;
    t->rank = ty->shape.rank;
    for (int i = 0; i < ty->shape.rank; i++) t->shape[i] = t->ckpt_shape[i] = ty->shape.d[i];
    t->numel = shape_numel(&ty->shape);
    t->offset = -1;
    t->init = "zeros";
    if (src) {
        const char *init = ir_str(src, "init", "zeros");
        t->init = init;
        if (strcmp(init, "normal") == 0) t->init_a = ir_float(src, "std", 1.0);
        if (strcmp(init, "uniform") == 0) t->init_a = ir_float(src, "lo", 0.0), t->init_b = ir_float(src, "hi", 1.0);
        if (strcmp(init, "constant") == 0) t->init_a = ir_float(src, "value", 0.0);
        t->trainable = src->op == OP_param && ir_is_trainable(src);
        /* pad-tiles: checkpoints and initialisation see the shape before padding */
        const Attr *up = ir_attr(src, "unpadded");
        if (up && up->kind == ATTR_INTS && up->n == t->rank)
            for (int i = 0; i < t->rank; i++) t->ckpt_shape[i] = up->v[i];
        /* an index input: the values trn_set takes (codegen/compile.c, index_inputs) */
        if (src->op == OP_input) {
            t->index_end = ir_int(src, "index_end", 0);
            t->index_ignores = ir_attr(src, "index_ignore") != NULL;
            t->index_ignore = ir_int(src, "index_ignore", 0);
        }
    }
    return m->n++;
}

/* ---- host data <-> interpreter doubles ---- */

static double rd_elem(TrnDType dt, const void *p, int64_t i) {
    switch (dt) {
    case TRN_F32: return ((const float *)p)[i];
    case TRN_F64: return ((const double *)p)[i];
    case TRN_I32: return ((const int32_t *)p)[i];
    case TRN_I64: return (double)((const int64_t *)p)[i];
    case TRN_U8: return ((const uint8_t *)p)[i];
    case TRN_BF16: {
        uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case TRN_F16: {
        uint16_t h = ((const uint16_t *)p)[i];
        int e = (h >> 10) & 31, mnt = h & 1023;
        double v = e == 0 ? ldexp(mnt, -24) : e == 31 ? (mnt ? NAN : INFINITY) : ldexp(mnt + 1024, e - 25);
        return h & 0x8000 ? -v : v;
    }
    }
    return 0;
}

static void wr_elem(TrnDType dt, void *p, int64_t i, double v) {
    switch (dt) {
    case TRN_F32: ((float *)p)[i] = (float)v; break;
    case TRN_F64: ((double *)p)[i] = v; break;
    case TRN_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case TRN_I64: ((int64_t *)p)[i] = v >= 0x1p63 ? INT64_MAX : v <= -0x1p63 ? INT64_MIN : (int64_t)v; break; /* the interpreter saturates at +-2^63 */
    case TRN_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case TRN_BF16: {
        /* values held by the interpreter are already bf16-exact in f32 mode */
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        u += 0x7fffu + ((u >> 16) & 1u);
        ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
        break;
    }
    case TRN_F16: {
        float f = (float)v;
        double a = fabs(f);
        uint16_t s = f < 0 ? 0x8000 : 0, h;
        if (a != a) h = 0x7e00;
        else if (a >= 65520.0) h = 0x7c00;
        else if (a < ldexp(1, -14)) h = (uint16_t)llrint(a * ldexp(1, 24));
        else {
            int e;
            double fr = frexp(a, &e); /* a = fr * 2^e, fr in [0.5,1) */
            long mnt = lrint(fr * 2048.0);
            if (mnt == 2048) mnt = 1024, e++;
            h = (uint16_t)(((e + 14) << 10) | (mnt - 1024));
        }
        ((uint16_t *)p)[i] = s | h;
        break;
    }
    }
}

/* ---- the backend ---- */

static void sync_params(InterpModel *m, int gi) {
    for (int i = 0; i < m->n; i++) {
        IbTensor *ib = &m->ib[i];
        if ((ib->kind != TRN_PARAM && ib->kind != TRN_STATE) || !ib->src[gi] || !ib->src[0]) continue;
        Tensor *from = interp_source(m->it[0], ib->name), *to = interp_source(m->it[gi], ib->name);
        if (from && to) memcpy(to->data, from->data, sizeof(double) * (size_t)to->n);
    }
}

static int ib_run(void *self, TrnRun which, char *err, size_t errn) {
    InterpModel *m = self;
    /* every half-precision copy from its param, rounded as the graph's cast
     * rounds it: in f64 mode not at all, as the update's cast does not (a
     * conversion on the host would round the first step's copies to bf16
     * and the later ones not); the other graphs get them by sync_params */
    if (which == TRN_RUN_REFRESH) {
        if (m->it[0]) interp_refresh_copies(m->it[0]);
        return 0;
    }
    if ((unsigned)which > TRN_RUN_REFRESH) return snprintf(err, errn, "the interpreter has no schedule %d", (int)which), -1;
    int gi = which == TRN_RUN_EVAL ? 1 : which == TRN_RUN_SAMPLE ? 2 : 0;
    if (!m->it[gi]) return 0;
    if (gi) sync_params(m, gi);
    int phase = which == TRN_RUN_UPDATE ? PH_STEP : PH_MICRO;
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    Diag d;
    diag_init(&d, mf);
    d.files = m->d ? m->d->files : NULL;
    bool ok = interp_run_phase(m->it[gi], phase, &d);
    d.files = NULL;
    fclose(mf);
    if (!ok) snprintf(err, errn, "interpreter: %s", buf && *buf ? buf : "failed");
    free(buf);
    return ok ? 0 : -1;
}

static Tensor *storage(InterpModel *m, int i, int gi) {
    IbTensor *ib = &m->ib[i];
    if (ib->kind == TRN_OUTPUT) return ib->gi == gi ? interp_value(m->it[gi], ib->out) : NULL;
    return ib->src[gi] ? interp_source(m->it[gi], ib->name) : NULL;
}

static int ib_read(void *self, int i, void *dst, char *err, size_t errn) {
    InterpModel *m = self;
    if (i < 0 || i >= m->n) return snprintf(err, errn, "no tensor %d", i), -1;
    Tensor *t = NULL;
    for (int gi = 0; gi < 3 && !t; gi++)
        if (m->it[gi]) t = storage(m, i, gi);
    if (!t) return snprintf(err, errn, "tensor '%s' has no value yet", m->ib[i].name), -1;
    for (int64_t k = 0; k < t->n; k++) wr_elem(m->tensors[i].dtype, dst, k, t->data[k]);
    return 0;
}

static int ib_write(void *self, int i, const void *src, char *err, size_t errn) {
    InterpModel *m = self;
    if (i < 0 || i >= m->n) return snprintf(err, errn, "no tensor %d", i), -1;
    bool any = false;
    for (int gi = 0; gi < 3; gi++) {
        if (!m->it[gi]) continue;
        Tensor *t = storage(m, i, gi);
        if (!t) {
            /* a source of this graph with no storage: there was no memory for it (interp_source) */
            if (m->ib[i].kind != TRN_OUTPUT && m->ib[i].src[gi])
                return snprintf(err, errn, "tensor '%s': out of memory for the interpreter's %lld doubles", m->ib[i].name,
                                (long long)m->tensors[i].numel), -1;
            continue;
        }
        for (int64_t k = 0; k < t->n; k++) t->data[k] = rd_elem(m->tensors[i].dtype, src, k);
        any = true;
    }
    if (!any) return snprintf(err, errn, "tensor '%s' cannot be written", m->ib[i].name), -1;
    return 0;
}

static void ib_destroy(void *self) { (void)self; }

InterpModel *ib_new(Graph *train, Graph *eval, Graph *sample, InterpMode mode, const char *source, const char *baked, Diag *d) {
    InterpModel *m = xcalloc(1, sizeof *m);
    m->g[0] = train;
    m->g[1] = eval;
    m->g[2] = sample;
    m->d = d;
    /* sources: params, then states, then inputs, in graph order */
    static const Op ops[3] = {OP_param, OP_state, OP_input};
    static const TrnKind kinds[3] = {TRN_PARAM, TRN_STATE, TRN_INPUT};
    for (int k = 0; k < 3; k++)
        for (int gi = 0; gi < 3; gi++) {
            Graph *g = m->g[gi];
            if (!g) continue;
            for (int i = 0; i < g->nnodes; i++) {
                Node *n = g->nodes[i];
                if (n->op != ops[k]) continue;
                const char *name = ir_source_name(n);
                int t = find(m, name, kinds[k]);
                if (t < 0) t = add(m, name, kinds[k], &n->out[0]->ty, n);
                m->ib[t].src[gi] = n;
            }
        }
    struct { const char *name; int gi; const char *gname; } outs[] = {
        {"loss", 0, "loss"}, {"grad_norm", 0, "grad_norm"}, {"eval.loss", 1, "loss"}, {"logits", 2, "logits"}};
    int oidx[4] = {-1, -1, -1, -1};
    for (int i = 0; i < 4; i++) {
        Graph *g = m->g[outs[i].gi];
        Value *v = g ? ir_output(g, outs[i].gname) : NULL;
        if (!v) continue;
        int t = add(m, outs[i].name, TRN_OUTPUT, &v->ty, NULL);
        m->ib[t].out = v;
        m->ib[t].gi = outs[i].gi;
        oidx[i] = t;
    }
    for (int gi = 0; gi < 3; gi++)
        if (m->g[gi]) m->it[gi] = interp_new(m->g[gi], mode);

    TrnModel *md = &m->model;
    md->abi = TRN_ABI_VERSION;
    md->name = train->name;
    md->source = source;
    md->ntensors = m->n;
    md->tensors = m->tensors;
    md->t_tokens = find(m, "tokens", TRN_INPUT);
    md->t_targets = find(m, "targets", TRN_INPUT);
    md->t_lr = find(m, "opt.lr", TRN_INPUT);
    md->t_step = find(m, "opt.step", TRN_INPUT);
    md->t_seed = find(m, "rng.seed", TRN_INPUT);
    md->t_loss = oidx[0];
    md->t_grad_norm = oidx[1];
    md->t_eval_loss = oidx[2];
    md->t_logits = oidx[3];
    md->refresh = 1; /* TRN_RUN_REFRESH: interp_refresh_copies */
    if (oidx[3] >= 0) md->vocab = m->tensors[oidx[3]].shape[m->tensors[oidx[3]].rank - 1];
    const TrainConfig *tc = &train->train;
    md->train = (TrnTrainDefaults){tc->optimizer, tc->schedule, tc->lr, tc->min_lr, tc->grad_clip, tc->loss_scale,
                                   tc->warmup, tc->steps, tc->grad_accum, tc->seed, tc->eval_every, tc->eval_steps,
                                   tc->save_every, tc->loss_scale_window, tc->precision, baked};
    return m;
}

const TrnModel *ib_model(InterpModel *m) { return &m->model; }

TrnBackend ib_backend(InterpModel *m) {
    TrnBackend b = {.name = "interp", .self = m, .run = ib_run, .read = ib_read, .write = ib_write, .destroy = ib_destroy};
    return b;
}

void ib_free(InterpModel *m) {
    if (!m) return;
    for (int i = 0; i < 3; i++) interp_free(m->it[i]);
    free(m->ib);
    free(m->tensors);
    free(m);
}
