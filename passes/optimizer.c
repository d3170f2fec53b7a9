/* passes/optimizer.c — the parameter update, after autodiff.
 *
 * Consumes the "grad.<param>" results and appends, for g->train:
 *
 *   inputs   opt.lr : f32[] (this step's learning rate, from the schedule)
 *            opt.step : i32[] (the step number, from 1)
 *   N = grad_accum (PassOptions.accum overrides it) micro-batches:
 *     N == 1: everything stays in PH_MICRO; G = the gradient.
 *     N  > 1: state grad_acc.<p> (f32, zeros); PH_MICRO: acc' = acc + g,
 *             update acc = acc'; PH_STEP: G = acc (the sum over the N
 *             micro-batches), and update acc = constant 0 afterwards.
 *   gscale  = 1/N, or with grad_clip > 0:
 *             grad_norm = global_norm(G...) * 1/N   (norm of the mean gradient)
 *             gscale    = clip_coef(grad_norm){max_norm} * 1/N
 *             and grad_norm becomes a result.
 *   adamw:   states adamw.m.<p>, adamw.v.<p>;
 *            (w', m', v') = adamw(w, G, m, v, opt.lr, opt.step, gscale)
 *   sgd:     state sgd.buf.<p> when momentum > 0;
 *            (w', buf') = sgd(w, G, buf, opt.lr, gscale)
 *   weight decay only for params of rank >= 2 unless train.decay_all.
 *
 * The grad.* results are removed; "loss" stays.  The update of every
 * parameter carries the parameter's loc.
 */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

typedef struct Opt {
    Graph      *g;
    Diag       *d;
    int         phase;   /* of the update nodes: PH_STEP when accumulating, else PH_MICRO */
} Opt;

typedef struct ParamGrad {
    Node  *p;            /* the param */
    Value *g;            /* its gradient (grad.<name>) */
    Value *G;            /* what the update reads: g, or the accumulator */
    Node  *acc;          /* grad_acc state, N > 1 */
} ParamGrad;

static Node *opt_state(Opt *o, const char *prefix, Node *p) {
    const char *name = arena_printf(o->g->arena, "%s.%s", prefix, ir_source_name(p));
    if (ir_find_source(o->g, OP_state, name)) {
        error_at(o->d, p->loc, "optimizer: a state named '%s' already exists", name);
        return NULL;
    }
    Node *s = ir_source(o->g, OP_state, name, (Type){DT_f32, p->out[0]->ty.shape}, p->loc);
    ir_set_str(o->g, s, "init", "zeros");
    return s;
}

static Value *opt_input(Opt *o, const char *name, DType dt) {
    Node *n = ir_find_source(o->g, OP_input, name);
    if (n) {
        char b[160];
        if (n->out[0]->ty.dt != dt || n->out[0]->ty.shape.rank != 0) {
            error_at(o->d, n->loc, "optimizer: input '%s' must be %s[], not %s", name, dtype_name[dt], type_str(&n->out[0]->ty, b, sizeof b));
            return NULL;
        }
        return n->out[0];
    }
    return ir_source(o->g, OP_input, name, (Type){dt, {0}}, NOLOC)->out[0];
}

static Node *emit(Opt *o, Node *n, int phase) {
    n->phase = phase;
    if (!ir_emit(o->g, n, o->d)) die("optimizer: %s does not infer", op_name(n->op));
    return n;
}

static Value *op2(Opt *o, Op op, Value *a, Value *b, SrcLoc loc, int phase) {
    Value *in[2] = {a, b};
    return emit(o, ir_new(o->g, op, 2, in, loc), phase)->out[0];
}

static Value *konst(Opt *o, double v, Type ty, SrcLoc loc, int phase) {
    Value *k = ir_const(o->g, v, ty, loc);
    k->def->phase = phase;
    return k;
}

/* Whether weight decay applies to p. */
static bool decays(const Graph *g, const Node *p) { return g->train.decay_all || p->out[0]->ty.shape.rank >= 2; }

static bool collect(Opt *o, ParamGrad **out, int *nout) {
    Graph *g = o->g;
    int np = 0;
    for (int i = 0; i < g->nnodes; i++) np += ir_is_trainable(g->nodes[i]);
    ParamGrad *pg = xcalloc((size_t)np + 1, sizeof *pg);
    int k = 0;
    for (int i = 0; i < g->nnodes; i++) {
        Node *p = g->nodes[i];
        if (!ir_is_trainable(p)) continue;
        const char *name = arena_printf(g->arena, "grad.%s", ir_source_name(p));
        Value *gv = ir_output(g, name);
        if (!gv) {
            error_at(o->d, p->loc, "optimizer: no gradient '%s' for trainable parameter '%s' (run autodiff first)", name, ir_source_name(p));
            free(pg);
            return false;
        }
        pg[k++] = (ParamGrad){.p = p, .g = gv, .G = gv};
    }
    *out = pg;
    *nout = k;
    return true;
}

static void drop_grad_outputs(Graph *g) {
    int k = 0;
    for (int i = 0; i < g->noutputs; i++) {
        Output *out = &g->outputs[i];
        if (out->kind == OUT_RESULT && strncmp(out->name, "grad.", 5) == 0) continue;
        g->outputs[k++] = *out;
    }
    g->noutputs = k;
}

bool pass_optimizer(Graph *g, const PassOptions *po, Diag *d) {
    const TrainConfig *tc = &g->train;
    if (!g->is_training) {
        error_at(d, NOLOC, "optimizer: graph '%s' has no gradients (run autodiff first)", g->name);
        return false;
    }
    int64_t N = po && po->accum > 0 ? po->accum : tc->grad_accum;
    if (N < 1) {
        error_at(d, NOLOC, "optimizer: grad_accum must be >= 1, not %lld", (long long)N);
        return false;
    }
    bool adamw = strcmp(tc->optimizer, "adamw") == 0;
    if (!adamw && strcmp(tc->optimizer, "sgd") != 0) {
        error_at(d, NOLOC, "optimizer: unknown optimizer '%s' (expected adamw or sgd)", tc->optimizer);
        return false;
    }
    if (ir_output(g, "grad_norm")) {
        error_at(d, NOLOC, "optimizer: the graph already has a result named 'grad_norm'");
        return false;
    }
    Opt o = {.g = g, .d = d, .phase = N > 1 ? PH_STEP : PH_MICRO};
    ParamGrad *pg;
    int np;
    if (!collect(&o, &pg, &np)) return false;
    g->ip = -1;

    /* Sources: the runtime scalars and the states, read from PH_MICRO on. */
    Value *lr = opt_input(&o, "opt.lr", DT_f32), *step = opt_input(&o, "opt.step", DT_i32);
    bool ok = lr && step;
    Node **m = xcalloc((size_t)np + 1, sizeof(Node *)), **v = xcalloc((size_t)np + 1, sizeof(Node *));
    for (int i = 0; i < np && ok; i++) {
        if (N > 1) ok &= (pg[i].acc = opt_state(&o, "grad_acc", pg[i].p)) != NULL;
        if (adamw) {
            ok &= (m[i] = opt_state(&o, "adamw.m", pg[i].p)) != NULL;
            ok &= (v[i] = opt_state(&o, "adamw.v", pg[i].p)) != NULL;
        } else if (tc->momentum > 0) {
            ok &= (m[i] = opt_state(&o, "sgd.buf", pg[i].p)) != NULL;
        }
    }
    if (!ok) goto done;

    /* PH_MICRO: accumulate. */
    for (int i = 0; i < np && N > 1; i++) {
        SrcLoc loc = pg[i].p->loc;
        Value *gi = pg[i].g;
        if (gi->ty.dt != DT_f32) {
            Node *c = ir_new(g, OP_cast, 1, &gi, loc);
            ir_set_str(g, c, "dtype", "f32");
            gi = emit(&o, c, PH_MICRO)->out[0];
        }
        Value *acc1 = op2(&o, OP_add, pg[i].acc->out[0], gi, loc, PH_MICRO);
        ir_add_update(g, pg[i].acc, acc1);
        pg[i].G = pg[i].acc->out[0]; /* read in PH_STEP: holds the sum */
    }

    /* The gradient scale: 1/N, times the clipping coefficient. */
    Type f32s = {DT_f32, {0}};
    Value *inv_n = N > 1 ? konst(&o, 1.0 / (double)N, f32s, NOLOC, o.phase) : NULL, *gscale;
    if (tc->grad_clip > 0) {
        Value **gs = xcalloc((size_t)np + 1, sizeof(Value *));
        for (int i = 0; i < np; i++) gs[i] = pg[i].G;
        Value *norm;
        if (np > 0) {
            norm = emit(&o, ir_new(g, OP_global_norm, np, gs, NOLOC), o.phase)->out[0];
        } else {
            norm = konst(&o, 0.0, f32s, NOLOC, o.phase);
        }
        free(gs);
        if (N > 1) norm = op2(&o, OP_mul, norm, inv_n, NOLOC, o.phase);
        norm->name = "grad_norm";
        Node *cc = ir_new(g, OP_clip_coef, 1, &norm, NOLOC);
        ir_set_float(g, cc, "max_norm", tc->grad_clip);
        gscale = emit(&o, cc, o.phase)->out[0];
        if (N > 1) gscale = op2(&o, OP_mul, gscale, inv_n, NOLOC, o.phase);
        ir_add_output(g, "grad_norm", norm);
    } else {
        gscale = N > 1 ? inv_n : konst(&o, 1.0, f32s, NOLOC, o.phase);
    }
    gscale->name = "gscale";

    /* The update rule. */
    for (int i = 0; i < np; i++) {
        Node *p = pg[i].p;
        double wd = decays(g, p) ? tc->weight_decay : 0.0;
        if (adamw) {
            Value *in[7] = {p->out[0], pg[i].G, m[i]->out[0], v[i]->out[0], lr, step, gscale};
            Node *u = ir_new(g, OP_adamw, 7, in, p->loc);
            ir_set_float(g, u, "beta1", tc->beta1);
            ir_set_float(g, u, "beta2", tc->beta2);
            ir_set_float(g, u, "eps", tc->eps);
            ir_set_float(g, u, "wd", wd);
            emit(&o, u, o.phase);
            ir_add_update(g, p, u->out[0]);
            ir_add_update(g, m[i], u->out[1]);
            ir_add_update(g, v[i], u->out[2]);
        } else {
            /* Without momentum the buffer is never read: a zero constant stands in. */
            Value *buf = m[i] ? m[i]->out[0] : konst(&o, 0.0, (Type){DT_f32, p->out[0]->ty.shape}, p->loc, o.phase);
            Value *in[5] = {p->out[0], pg[i].G, buf, lr, gscale};
            Node *u = ir_new(g, OP_sgd, 5, in, p->loc);
            ir_set_float(g, u, "momentum", tc->momentum);
            ir_set_float(g, u, "wd", wd);
            ir_set_int(g, u, "nesterov", tc->nesterov ? 1 : 0);
            emit(&o, u, o.phase);
            ir_add_update(g, p, u->out[0]);
            if (m[i]) ir_add_update(g, m[i], u->out[1]);
        }
    }

    /* PH_STEP: reset the accumulators for the next step. */
    for (int i = 0; i < np && N > 1; i++)
        ir_add_update(g, pg[i].acc, konst(&o, 0.0, pg[i].acc->out[0]->ty, pg[i].p->loc, PH_STEP));

    drop_grad_outputs(g);
done:
    free(m);
    free(v);
    free(pg);
    return ok;
}
