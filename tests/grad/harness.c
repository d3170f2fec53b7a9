/* tests/grad/harness.c — the gradient-check harness.
 *
 * Method.  The forward graph's params are filled by the harness (Philox,
 * keyed by the param's name, so the forward and training graphs see the
 * same values).  autodiff runs on a copy; the copy is run once by the
 * interpreter in INTERP_F64 to get every grad.* output.  The forward graph
 * is then run again per perturbed element to get the derivative of the
 * loss by the fourth-order central difference
 *
 *     f'(x) ~ (f(x-2h) - 8 f(x-h) + 8 f(x+h) - f(x+2h)) / 12h,
 *     h = 2^-13 (about 1.2e-4) times the power of two >= max(1, |x|),
 *
 * whose truncation error is O(h^4) (about 1e-16 f^(5)) and whose rounding
 * error is about 1.5 eps |L| / h (about 1e-12 |L|), both far under the
 * tolerance; h is a power of two so x +- h and x +- 2h are exact.  (A
 * two-point difference with h = 1e-6 has a rounding error of about
 * 1e-10 |L|, a thousand times more, for no gain.)  Inputs of kinked ops
 * (relu, abs) are kept away from the kink by the fill.
 *
 * Metric.  For an element with analytic gradient a and numerical n:
 *
 *     err = |a - n| / max(|a|, |n|, 1e-5 * max(1, |L|, S)),
 *
 * the relative error, except that gradients smaller than 1e-5 max(1, |L|,
 * S) are measured against that floor; S is the sum of the magnitudes of
 * the terms of gt_loss_linear's sum (0 for other losses), whose rounding
 * sets L's when the terms cancel.  The floor is what the finite
 * difference can resolve: its own error is absolute, about 1e-12 max(|L|,
 * S) (the rounding of L, amplified by 1/h), so a gradient element of 1e-6 |L|
 * (there are such: a key bias has an exactly zero gradient, a deep model's
 * early weights have tiny ones) could not be checked to a relative 1e-6
 * by any step size.  Against the floor, the difference quotient's own
 * error stays near 1e-7, while a wrong rule (a missing factor, sign,
 * transpose or broadcast reduction) still gives err near 1 on every
 * element whose gradient is not tiny.  The worst err over every checked
 * element must be < 1e-6.
 */
#include "harness.h"

#include "philox.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int gt_fails;

GT *gt_new(const char *name) {
    GT *t = xcalloc(1, sizeof *t);
    t->g = ir_graph_new(name);
    diag_init(&t->d, stderr);
    t->seed = 20240611;
    return t;
}

static GTSource *add_src(GT *t, const char *name);

GT *gt_adopt(Graph *g, double lo, double hi) {
    GT *t = xcalloc(1, sizeof *t);
    t->g = g;
    diag_init(&t->d, stderr);
    t->seed = 20240611;
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (n->op != OP_param) continue;
        GTSource *s = add_src(t, ir_source_name(n));
        s->fill = FILL_UNIFORM;
        s->lo = lo;
        s->hi = hi;
    }
    return t;
}

void gt_feed(GT *t, const char *name, int64_t n, const double *vals) {
    GTSource *s = add_src(t, name);
    s->n = n;
    s->vals = xmalloc(sizeof(double) * (size_t)(n ? n : 1));
    memcpy(s->vals, vals, sizeof(double) * (size_t)n);
}

void gt_free(GT *t) {
    if (!t) return;
    for (int i = 0; i < t->nsrc; i++) free(t->src[i].vals);
    ir_graph_free(t->g);
    diag_free(&t->d);
    free(t);
}

SrcLoc gt_loc(GT *t) { return (SrcLoc){"test.model", ++t->line, 1}; }

static GTSource *add_src(GT *t, const char *name) {
    if (t->nsrc == GT_MAX_SRC) die("harness: too many sources");
    GTSource *s = &t->src[t->nsrc++];
    memset(s, 0, sizeof *s);
    s->name = arena_strdup(t->g->arena, name);
    return s;
}

Value *gt_param_fill(GT *t, const char *name, DType dt, int rank, const int64_t *dims, FillKind f, double lo, double hi) {
    Node *n = ir_source(t->g, OP_param, name, (Type){dt, shape_make(rank, dims)}, gt_loc(t));
    if (f == FILL_NORMAL) {
        ir_set_str(t->g, n, "init", "normal");
        ir_set_float(t->g, n, "std", hi);
    } else {
        ir_set_str(t->g, n, "init", "uniform");
        ir_set_float(t->g, n, "lo", f == FILL_AWAY ? -hi : lo);
        ir_set_float(t->g, n, "hi", hi);
    }
    if (!ir_infer(t->g, n, &t->d)) die("harness: param %s", name);
    GTSource *s = add_src(t, name);
    s->fill = f;
    s->lo = lo;
    s->hi = hi;
    return n->out[0];
}

Value *gt_param(GT *t, const char *name, int rank, const int64_t *dims) {
    return gt_param_fill(t, name, DT_f32, rank, dims, FILL_UNIFORM, -1.0, 1.0);
}

void gt_freeze(GT *t, Value *param) { ir_set_int(t->g, param->def, "frozen", 1); }

Value *gt_input(GT *t, const char *name, DType dt, int rank, const int64_t *dims, const double *vals) {
    Node *n = ir_source(t->g, OP_input, name, (Type){dt, shape_make(rank, dims)}, gt_loc(t));
    GTSource *s = add_src(t, name);
    s->n = shape_numel(&n->out[0]->ty.shape);
    s->vals = xmalloc(sizeof(double) * (size_t)(s->n ? s->n : 1));
    memcpy(s->vals, vals, sizeof(double) * (size_t)s->n);
    return n->out[0];
}

Node *gt_node(GT *t, Op op, int nin, Value *const *in) { return ir_new(t->g, op, nin, in, gt_loc(t)); }

Value *gt_emit(GT *t, Node *n) {
    if (!ir_emit(t->g, n, &t->d)) die("harness: building %s failed", op_name(n->op));
    return n->out[0];
}

Value *gt_op1(GT *t, Op op, Value *a) { return gt_emit(t, gt_node(t, op, 1, &a)); }

Value *gt_op2(GT *t, Op op, Value *a, Value *b) {
    Value *in[2] = {a, b};
    return gt_emit(t, gt_node(t, op, 2, in));
}

Value *gt_matmul(GT *t, Value *a, Value *b, int ta, int tb) {
    Value *in[2] = {a, b};
    Node *n = gt_node(t, OP_matmul, 2, in);
    ir_set_int(t->g, n, "ta", ta);
    ir_set_int(t->g, n, "tb", tb);
    return gt_emit(t, n);
}

Value *gt_reshape(GT *t, Value *x, int rank, const int64_t *dims) {
    Node *n = gt_node(t, OP_reshape, 1, &x);
    ir_set_ints(t->g, n, "shape", rank, dims);
    return gt_emit(t, n);
}

Value *gt_permute(GT *t, Value *x, int rank, const int64_t *perm) {
    Node *n = gt_node(t, OP_permute, 1, &x);
    ir_set_ints(t->g, n, "perm", rank, perm);
    return gt_emit(t, n);
}

Value *gt_slice(GT *t, Value *x, int axis, int64_t start, int64_t end) {
    Node *n = gt_node(t, OP_slice, 1, &x);
    ir_set_int(t->g, n, "axis", axis);
    ir_set_int(t->g, n, "start", start);
    ir_set_int(t->g, n, "end", end);
    return gt_emit(t, n);
}

void gt_loss(GT *t, Value *v) {
    v->name = "loss";
    ir_add_output(t->g, "loss", v);
}

void gt_loss_linear(GT *t, Value *out) {
    if (out->ty.dt != DT_f32) {
        Node *c = gt_node(t, OP_cast, 1, &out);
        ir_set_str(t->g, c, "dtype", "f32");
        out = gt_emit(t, c);
    }
    Value *R = gt_param_fill(t, "R", DT_f32, out->ty.shape.rank, out->ty.shape.d, FILL_NORMAL, 0, 1.0);
    gt_freeze(t, R);
    Value *terms = gt_op2(t, OP_mul, out, R);
    gt_loss(t, gt_op1(t, OP_sum, terms));
    /* the scale of the sum's rounding (the metric's floor, above) */
    ir_add_output(t->g, "loss.scale", gt_op1(t, OP_sum, gt_op1(t, OP_abs, terms)));
}

/* ---- filling ---- */

static double fill_value(const GTSource *s, uint64_t seed, uint64_t i) {
    uint64_t stream = rng_name_stream(s->name);
    double u = rng_uniform(seed, stream, i);
    switch (s->fill) {
    case FILL_UNIFORM: return s->lo + (s->hi - s->lo) * u;
    case FILL_AWAY: {
        double mag = s->lo + (s->hi - s->lo) * u;
        return rng_uniform(seed, stream ^ 0x5bd1e995u, i) < 0.5 ? -mag : mag;
    }
    case FILL_NORMAL: return s->hi * rng_normal(seed, stream, i);
    }
    return 0;
}

void gt_fill(GT *t, Interp *it) {
    for (int i = 0; i < t->nsrc; i++) {
        GTSource *s = &t->src[i];
        Tensor *x = interp_source(it, s->name);
        if (!x) continue; /* not in this graph */
        if (s->vals && s->n != x->n) die("harness: %lld values for %s, which has %lld", (long long)s->n, s->name, (long long)x->n);
        for (int64_t k = 0; k < x->n; k++) x->data[k] = s->vals ? s->vals[k] : fill_value(s, t->seed, (uint64_t)k);
    }
}

/* ---- structural checks ---- */

int gt_dead_nodes(Graph *g, FILE *report) {
    Uses *u = ir_uses(g);
    int dead = 0;
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (op_has(n->op, OPF_SOURCE)) continue;
        bool used = false;
        for (int j = 0; j < n->nout; j++) used |= u->of[n->out[j]->id].n > 0 || u->nout_refs[n->out[j]->id] > 0;
        if (!used) {
            dead++;
            if (report) fprintf(report, "  dead node: %s (node %d, line %d)\n", op_name(n->op), n->id, n->loc.line);
        }
    }
    ir_uses_free(u);
    return dead;
}

bool gt_verify(Graph *g) {
#ifdef TRAINC_HAVE_VERIFY
    Diag d;
    diag_init(&d, stderr);
    bool ok = ir_verify(g, &d);
    diag_free(&d);
    return ok;
#else
    (void)g;
    return true;
#endif
}

/* Every backward node has the loc of a forward node and phase PH_MICRO;
 * one grad.* per trainable param, in parameter order, of its type. */
static bool check_structure(Graph *fwd, Graph *tg, const char *label) {
    bool ok = true;
    int nf = fwd->nnodes;
    for (int i = nf; i < tg->nnodes; i++) {
        Node *n = tg->nodes[i];
        if (n->loc.line <= 0 || !n->loc.file) {
            fprintf(stderr, "%s: backward %s (node %d) has no source location\n", label, op_name(n->op), n->id);
            ok = false;
        }
        if (n->phase != PH_MICRO) {
            fprintf(stderr, "%s: backward %s (node %d) is not in PH_MICRO\n", label, op_name(n->op), n->id);
            ok = false;
        }
    }
    int k = 0;
    for (int i = 0; i < tg->noutputs; i++)
        if (strncmp(tg->outputs[i].name, "grad.", 5) == 0) k++;
    int want = 0;
    for (int i = 0; i < nf; i++) {
        Node *p = fwd->nodes[i];
        if (!ir_is_trainable(p)) continue;
        want++;
        char name[256];
        snprintf(name, sizeof name, "grad.%s", ir_source_name(p));
        Value *gv = ir_output(tg, name);
        if (!gv || !type_eq(&gv->ty, &p->out[0]->ty)) {
            fprintf(stderr, "%s: %s is missing or has the wrong type\n", label, name);
            ok = false;
        }
    }
    if (k != want) {
        fprintf(stderr, "%s: %d grad.* outputs for %d trainable params\n", label, k, want);
        ok = false;
    }
    if (!tg->is_training) {
        fprintf(stderr, "%s: is_training not set\n", label);
        ok = false;
    }
    if (gt_dead_nodes(tg, stderr)) {
        fprintf(stderr, "%s: autodiff left dead nodes\n", label);
        ok = false;
    }
    return ok;
}

/* ---- the check ---- */

static double eval_loss(Interp *it, Diag *d) {
    if (!interp_run_phase(it, PH_MICRO, d)) die("harness: the forward graph does not run");
    return interp_result(it, "loss");
}

/* k distinct indices out of n (all when n <= k), seeded. */
static int64_t pick(int64_t n, int k, int64_t *idx, uint64_t seed, const char *name) {
    if (n <= k) {
        for (int64_t i = 0; i < n; i++) idx[i] = i;
        return n;
    }
    int64_t *all = xmalloc(sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) all[i] = i;
    uint64_t stream = rng_name_stream(name) ^ 0xfeedu;
    for (int i = 0; i < k; i++) {
        int64_t j = i + (int64_t)(rng_uniform(seed, stream, (uint64_t)i) * (double)(n - i));
        if (j >= n) j = n - 1;
        int64_t tmp = all[i];
        all[i] = all[j];
        all[j] = tmp;
        idx[i] = all[i];
    }
    free(all);
    return k;
}

GTResult gt_check(GT *t, const char *label, int sample) {
    GTResult r = {0, 0, false};
    Graph *fwd = t->g;
    if (!ir_output(fwd, "loss")) die("harness: %s has no loss", label);
    if (!gt_verify(fwd)) {
        fprintf(stderr, "%s: the forward graph does not verify\n", label);
        return r;
    }
    Graph *tg = ir_clone(fwd);
    PassOptions po = {0};
    if (!pass_autodiff(tg, &po, &t->d)) {
        fprintf(stderr, "%s: autodiff failed\n", label);
        ir_graph_free(tg);
        return r;
    }
    bool ok = gt_verify(tg) && check_structure(fwd, tg, label);

    Interp *ia = interp_new(tg, INTERP_F64), *ib = interp_new(fwd, INTERP_F64);
    interp_init(ia, 1);
    interp_init(ib, 1);
    gt_fill(t, ia);
    gt_fill(t, ib);
    if (!interp_run_phase(ia, PH_MICRO, &t->d)) die("harness: %s: the training graph does not run", label);
    double L0 = eval_loss(ib, &t->d), L1 = interp_result(ia, "loss");
    if (!(fabs(L0 - L1) <= 1e-12 * fmax(1.0, fabs(L0)))) {
        fprintf(stderr, "%s: the training graph's loss %.17g differs from the forward graph's %.17g\n", label, L1, L0);
        ok = false;
    }

    double S0 = ir_output(fwd, "loss.scale") ? interp_result(ib, "loss.scale") : 0;
    double worst = 0, floor_abs = 1e-5 * fmax(1.0, fmax(fabs(L0), S0));
    int64_t nchecked = 0;
    for (int i = 0; i < fwd->nnodes; i++) {
        Node *p = fwd->nodes[i];
        if (!ir_is_trainable(p)) continue;
        const char *name = ir_source_name(p);
        char gname[256];
        snprintf(gname, sizeof gname, "grad.%s", name);
        Value *gv = ir_output(tg, gname);
        Tensor *ga = gv ? interp_value(ia, gv) : NULL;
        Tensor *x = interp_source(ib, name);
        if (!ga || !x) {
            fprintf(stderr, "%s: no value for %s\n", label, gname);
            ok = false;
            continue;
        }
        int64_t *idx = xmalloc(sizeof(int64_t) * (size_t)(x->n < sample ? x->n : sample));
        int64_t k = pick(x->n, sample, idx, t->seed, name);
        double *num = xmalloc(sizeof(double) * (size_t)k);
        for (int64_t e = 0; e < k; e++) {
            double x0 = x->data[idx[e]];
            double h = ldexp(1.0, -13);
            while (h * 8192.0 < fabs(x0)) h *= 2;
            double f[4], off[4] = {-2 * h, -h, h, 2 * h};
            for (int s = 0; s < 4; s++) {
                x->data[idx[e]] = x0 + off[s];
                f[s] = eval_loss(ib, &t->d);
            }
            x->data[idx[e]] = x0;
            num[e] = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h);
        }
        for (int64_t e = 0; e < k; e++) {
            double a = ga->data[idx[e]], nm = num[e];
            double err = fabs(a - nm) / fmax(fmax(fabs(a), fabs(nm)), floor_abs);
            if (!(err <= worst)) {
                if (err != err) err = INFINITY;
                worst = err;
            }
            if (getenv("GT_VERBOSE") && err > atof(getenv("GT_VERBOSE")))
                fprintf(stderr, "  %s[%lld]: analytic %.17g numeric %.17g err %.3g\n", name, (long long)idx[e], a, nm, err);
        }
        nchecked += k;
        free(num);
        free(idx);
    }
    interp_free(ia);
    interp_free(ib);
    ir_graph_free(tg);
    printf("gradcheck %s: worst rel err %.1e (%lld elements)\n", label, worst, (long long)nchecked);
    fflush(stdout);
    r.worst = worst;
    r.nchecked = nchecked;
    r.ok = ok && nchecked > 0;
    return r;
}
