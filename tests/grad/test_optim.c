/* tests/grad/test_optim.c — the optimizer pass: the accumulation identity
 * (N micro-batches of b rows == one batch of N*b rows, AdamW with
 * clipping), AdamW and SGD (momentum, Nesterov, clipping) against scalar
 * formulas written out here, and the shape of the graph: state and input
 * names, phases, the grad_norm result, no state for frozen params. */
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


static void set_train(Graph *g, const char *key, const char *value) {
    char err[256];
    if (!train_set(&g->train, g->arena, key, value, err, sizeof err)) die("train_set %s=%s: %s", key, value, err);
}

/* autodiff + optimizer; verifies the result. */
static void compile(GT *t, int accum) {
    PassOptions po = {.accum = accum};
    if (!pass_autodiff(t->g, &po, &t->d) || !pass_optimizer(t->g, &po, &t->d)) die("compiling %s failed", t->g->name);
    EXPECT(gt_verify(t->g), "%s: the training graph does not verify", t->g->name);
    EXPECT(gt_dead_nodes(t->g, stdout) == 0, "%s: dead nodes", t->g->name);
}

static void set_scalar(Interp *it, const char *name, double v) {
    Tensor *x = interp_source(it, name);
    if (!x) die("no source %s", name);
    x->data[0] = v;
}

static double rel(double a, double b) { return fabs(a - b) / fmax(fmax(fabs(a), fabs(b)), 1e-300); }

/* ---- the accumulation identity ---- */

#define ROWS 8
#define CIN 6
#define V 5

typedef struct Batch { double x[ROWS * CIN]; double tgt[ROWS]; int rows; } Batch;

/* x [rows, 6] -> layer_norm -> linear 6x12 -> gelu -> linear 12x5 -> cross-entropy */
static GT *mlp_model(const char *name, int rows, const Batch *b) {
    GT *t = gt_new(name);
    Value *x = gt_input(t, "x", DT_f32, 2, D(rows, CIN), b->x);
    Value *tg = gt_input(t, "targets", DT_i32, 1, D(rows), b->tgt);
    Value *in3[3] = {x, gt_param_fill(t, "ln.w", DT_f32, 1, D(CIN), FILL_UNIFORM, 0.5, 1.5), gt_param(t, "ln.b", 1, D(CIN))};
    Value *h = gt_emit(t, gt_node(t, OP_layer_norm, 3, in3));
    h = gt_op2(t, OP_add, gt_matmul(t, h, gt_param(t, "fc1.w", 2, D(CIN, 12)), 0, 0), gt_param(t, "fc1.b", 1, D(12)));
    h = gt_op1(t, OP_gelu, h);
    h = gt_op2(t, OP_add, gt_matmul(t, h, gt_param(t, "fc2.w", 2, D(12, V)), 0, 0), gt_param(t, "fc2.b", 1, D(V)));
    Value *in2[2] = {h, tg};
    gt_loss(t, gt_emit(t, gt_node(t, OP_cross_entropy, 2, in2)));
    set_train(t->g, "optimizer", "adamw");
    set_train(t->g, "weight_decay", "0.1");
    set_train(t->g, "beta2", "0.95");
    set_train(t->g, "grad_clip", "0.05");
    return t;
}

typedef struct Feed { const Batch *b; int rows; } Feed;

static void feed_rows(void *ctx, Interp *it, int micro) {
    Feed *f = ctx;
    Tensor *x = interp_source(it, "x"), *tg = interp_source(it, "targets");
    memcpy(x->data, f->b->x + (size_t)micro * f->rows * CIN, sizeof(double) * (size_t)f->rows * CIN);
    memcpy(tg->data, f->b->tgt + (size_t)micro * f->rows, sizeof(double) * (size_t)f->rows);
}

static void test_accumulation(void) {
    Batch b[2];
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < ROWS * CIN; i++) b[s].x[i] = sin(1.7 * i + 0.3 * s) + 0.25 * cos(0.37 * i * (s + 1));
        for (int i = 0; i < ROWS; i++) b[s].tgt[i] = (i * 3 + s) % V;
    }
    const int N = 4, r = ROWS / N;
    GT *ta = mlp_model("micro", r, &b[0]), *tb = mlp_model("batch", ROWS, &b[0]);
    compile(ta, N);
    compile(tb, 1);
    Interp *ia = interp_new(ta->g, INTERP_F64), *ib = interp_new(tb->g, INTERP_F64);
    interp_init(ia, 7);
    interp_init(ib, 7);
    gt_fill(ta, ia);
    gt_fill(tb, ib);
    double worst = 0;
    for (int step = 1; step <= 2; step++) {
        double lr = step == 1 ? 0.02 : 0.01;
        set_scalar(ia, "opt.lr", lr), set_scalar(ib, "opt.lr", lr);
        set_scalar(ia, "opt.step", step), set_scalar(ib, "opt.step", step);
        Feed fa = {&b[step - 1], r}, fb = {&b[step - 1], ROWS};
        double la = interp_step(ia, N, feed_rows, &fa, &ta->d), lb = interp_step(ib, 1, feed_rows, &fb, &tb->d);
        double na = interp_result(ia, "grad_norm"), nb = interp_result(ib, "grad_norm");
        EXPECT(rel(la, lb) < 1e-12, "step %d: mean loss %.17g vs %.17g", step, la, lb);
        EXPECT(rel(na, nb) < 1e-12, "step %d: grad_norm %.17g vs %.17g", step, na, nb);
        EXPECT(nb > 0.05, "step %d: clipping is active (grad_norm %.3g > 0.05)", step, nb);
        for (int i = 0; i < tb->g->nnodes; i++) {
            Node *p = tb->g->nodes[i];
            if (p->op != OP_param && p->op != OP_state) continue;
            Tensor *xa = interp_source(ia, ir_source_name(p)), *xb = interp_source(ib, ir_source_name(p));
            EXPECT(xa && xb && xa->n == xb->n, "%s in both graphs", ir_source_name(p));
            for (int64_t k = 0; xa && xb && k < xb->n; k++) {
                double e = rel(xa->data[k], xb->data[k]);
                if (e > worst) worst = e;
                if (!(e < 1e-12)) {
                    EXPECT(0, "step %d: %s[%lld] = %.17g after %d micro-batches, %.17g after one batch", step, ir_source_name(p),
                           (long long)k, xa->data[k], N, xb->data[k]);
                    break;
                }
            }
        }
        /* The accumulators are reset after the update. */
        for (int i = 0; i < ta->g->nnodes; i++) {
            Node *s = ta->g->nodes[i];
            const char *nm = s->op == OP_state ? ir_source_name(s) : NULL;
            if (!nm || strncmp(nm, "grad_acc.", 9) != 0) continue;
            Tensor *acc = interp_source(ia, nm);
            for (int64_t k = 0; k < acc->n; k++) EXPECT(acc->data[k] == 0, "%s not reset", nm);
        }
    }
    printf("accumulation: 4 micro-batches of %d rows vs one batch of %d rows, 2 AdamW steps with clipping: worst rel diff %.1e\n", r,
           ROWS, worst);
    interp_free(ia);
    interp_free(ib);
    gt_free(ta);
    gt_free(tb);
}

/* ---- AdamW and SGD against scalar formulas ---- */

/* loss = sum(W * X) + sum(b * b * Y): dW = X, db = 2 b Y. */
static GT *quad_model(const char *name, const double *X, const double *Y) {
    GT *t = gt_new(name);
    Value *W = gt_param(t, "W", 2, D(2, 3)), *b = gt_param(t, "b", 1, D(3));
    Value *x = gt_input(t, "X", DT_f32, 2, D(2, 3), X), *y = gt_input(t, "Y", DT_f32, 1, D(3), Y);
    Value *l1 = gt_op1(t, OP_sum, gt_op2(t, OP_mul, W, x));
    Value *l2 = gt_op1(t, OP_sum, gt_op2(t, OP_mul, gt_op2(t, OP_mul, b, b), y));
    gt_loss(t, gt_op2(t, OP_add, l1, l2));
    return t;
}

static const double QX[6] = {0.5, -1.0, 2.0, 0.25, -0.75, 1.5}, QY[3] = {1.0, -2.0, 0.5};

/* Hand reference: W then b, 9 scalars; grads written out. */
static void quad_grads(const double *w, double *g) {
    for (int i = 0; i < 6; i++) g[i] = QX[i];
    for (int i = 0; i < 3; i++) g[6 + i] = 2 * w[6 + i] * QY[i];
}

static void read_wb(GT *t, Interp *it, double *w) {
    (void)t;
    memcpy(w, interp_source(it, "W")->data, 6 * sizeof(double));
    memcpy(w + 6, interp_source(it, "b")->data, 3 * sizeof(double));
}

static void test_adamw(void) {
    GT *t = quad_model("adamw", QX, QY);
    set_train(t->g, "optimizer", "adamw");
    set_train(t->g, "beta1", "0.8");
    set_train(t->g, "beta2", "0.9");
    set_train(t->g, "eps", "1e-6");
    set_train(t->g, "weight_decay", "0.1");
    compile(t, 0);
    Interp *it = interp_new(t->g, INTERP_F64);
    interp_init(it, 3);
    gt_fill(t, it);
    double w[9], m[9] = {0}, v[9] = {0}, g[9], got[9];
    read_wb(t, it, w);
    const double b1 = 0.8, b2 = 0.9, eps = 1e-6, wd = 0.1, lrs[2] = {0.1, 0.05};
    double worst = 0;
    for (int step = 1; step <= 2; step++) {
        quad_grads(w, g);
        for (int i = 0; i < 9; i++) {
            double dec = i < 6 ? wd : 0.0; /* W decays, the bias does not */
            m[i] = b1 * m[i] + (1 - b1) * g[i];
            v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
            double mhat = m[i] / (1 - pow(b1, step)), vhat = v[i] / (1 - pow(b2, step));
            w[i] = w[i] - lrs[step - 1] * (mhat / (sqrt(vhat) + eps) + dec * w[i]);
        }
        set_scalar(it, "opt.lr", lrs[step - 1]);
        set_scalar(it, "opt.step", step);
        interp_step(it, 1, NULL, NULL, &t->d);
        read_wb(t, it, got);
        for (int i = 0; i < 9; i++) {
            worst = fmax(worst, rel(got[i], w[i]));
            EXPECT(rel(got[i], w[i]) < 1e-12, "adamw step %d: %s[%d] = %.17g, expected %.17g", step, i < 6 ? "W" : "b", i < 6 ? i : i - 6,
                   got[i], w[i]);
        }
        for (int i = 0; i < 9; i++) {
            const char *mn = i < 6 ? "adamw.m.W" : "adamw.m.b", *vn = i < 6 ? "adamw.v.W" : "adamw.v.b";
            int k = i < 6 ? i : i - 6;
            EXPECT(rel(interp_source(it, mn)->data[k], m[i]) < 1e-12, "adamw step %d: %s[%d]", step, mn, k);
            EXPECT(rel(interp_source(it, vn)->data[k], v[i]) < 1e-12, "adamw step %d: %s[%d]", step, vn, k);
        }
    }
    printf("adamw: two steps against the scalar reference: worst rel diff %.1e\n", worst);
    interp_free(it);
    gt_free(t);
}

static void test_sgd(bool nesterov, double momentum) {
    GT *t = quad_model("sgd", QX, QY);
    set_train(t->g, "optimizer", "sgd");
    char mom[32];
    snprintf(mom, sizeof mom, "%g", momentum);
    set_train(t->g, "momentum", mom);
    set_train(t->g, "nesterov", nesterov ? "1" : "0");
    set_train(t->g, "weight_decay", "0.01");
    set_train(t->g, "grad_clip", "2.5");
    compile(t, 0);
    EXPECT((ir_find_source(t->g, OP_state, "sgd.buf.W") != NULL) == (momentum > 0), "sgd.buf.W exists iff momentum > 0");
    Interp *it = interp_new(t->g, INTERP_F64);
    interp_init(it, 5);
    gt_fill(t, it);
    double w[9], buf[9] = {0}, g[9], got[9];
    read_wb(t, it, w);
    const double wd = 0.01, lrs[2] = {0.2, 0.1};
    double worst = 0;
    for (int step = 1; step <= 2; step++) {
        quad_grads(w, g);
        double norm = 0;
        for (int i = 0; i < 9; i++) norm += g[i] * g[i];
        norm = sqrt(norm);
        double coef = fmin(1.0, 2.5 / (norm + 1e-6));
        for (int i = 0; i < 9; i++) {
            double gi = g[i] * coef + (i < 6 ? wd : 0.0) * w[i], upd = gi;
            if (momentum > 0) {
                buf[i] = momentum * buf[i] + gi;
                upd = nesterov ? gi + momentum * buf[i] : buf[i];
            }
            w[i] -= lrs[step - 1] * upd;
        }
        set_scalar(it, "opt.lr", lrs[step - 1]);
        set_scalar(it, "opt.step", step);
        interp_step(it, 1, NULL, NULL, &t->d);
        EXPECT(rel(interp_result(it, "grad_norm"), norm) < 1e-12, "sgd step %d: grad_norm %.17g, expected %.17g", step,
               interp_result(it, "grad_norm"), norm);
        EXPECT(coef < 1, "sgd step %d: clipping is active (norm %.3g)", step, norm);
        read_wb(t, it, got);
        for (int i = 0; i < 9; i++) {
            worst = fmax(worst, rel(got[i], w[i]));
            EXPECT(rel(got[i], w[i]) < 1e-12, "sgd step %d: %s[%d] = %.17g, expected %.17g", step, i < 6 ? "W" : "b", i < 6 ? i : i - 6,
                   got[i], w[i]);
        }
    }
    printf("sgd momentum=%g nesterov=%d with clipping: two steps against the scalar reference: worst rel diff %.1e\n", momentum,
           nesterov, worst);
    interp_free(it);
    gt_free(t);
}

/* ---- the shape of the graph ---- */

static bool has_update(Graph *g, const char *target, int phase) {
    for (int i = 0; i < g->noutputs; i++) {
        Output *o = &g->outputs[i];
        if (o->kind == OUT_UPDATE && strcmp(o->name, target) == 0 && o->value->def->phase == phase) return true;
    }
    return false;
}

static void test_structure(void) {
    static const double Y[4] = {1, 2, 3, 4};
    for (int variant = 0; variant < 3; variant++) {
        /* 0: adamw, accumulation 4 via PassOptions, clipping; 1: adamw,
         * no accumulation, decay_all; 2: sgd without momentum. */
        GT *t = gt_new("shape");
        Value *W = gt_param(t, "W", 2, D(4, 4)), *b = gt_param(t, "b", 1, D(4)), *F = gt_param(t, "F", 1, D(4));
        gt_freeze(t, F);
        Value *y = gt_op2(t, OP_add, gt_matmul(t, gt_reshape(t, gt_input(t, "y", DT_f32, 1, D(4), Y), 2, D(1, 4)), W, 0, 0), b);
        gt_loss(t, gt_op1(t, OP_sum, gt_op1(t, OP_tanh, gt_op2(t, OP_mul, y, F))));
        set_train(t->g, "weight_decay", "0.1");
        if (variant == 0) set_train(t->g, "grad_clip", "1");
        if (variant == 1) set_train(t->g, "decay_all", "1");
        if (variant == 2) set_train(t->g, "optimizer", "sgd");
        compile(t, variant == 0 ? 4 : 0);
        Graph *g = t->g;
        int N = variant == 0 ? 4 : 1, up = N > 1 ? PH_STEP : PH_MICRO;

        Node *lr = ir_find_source(g, OP_input, "opt.lr"), *st = ir_find_source(g, OP_input, "opt.step");
        EXPECT(lr && lr->out[0]->ty.dt == DT_f32 && lr->out[0]->ty.shape.rank == 0, "input opt.lr : f32[]");
        EXPECT(st && st->out[0]->ty.dt == DT_i32 && st->out[0]->ty.shape.rank == 0, "input opt.step : i32[]");
        EXPECT(ir_output(g, "loss"), "loss kept");
        for (int i = 0; i < g->noutputs; i++) EXPECT(strncmp(g->outputs[i].name, "grad.", 5) != 0, "%s removed", g->outputs[i].name);
        EXPECT((ir_output(g, "grad_norm") != NULL) == (variant == 0), "grad_norm iff clipping");

        const char *adam[] = {"adamw.m.W", "adamw.v.W", "adamw.m.b", "adamw.v.b"};
        for (int i = 0; i < 4; i++) {
            Node *s = ir_find_source(g, OP_state, adam[i]);
            EXPECT((s != NULL) == (variant != 2), "state %s", adam[i]);
            if (s) {
                EXPECT(strcmp(ir_str(s, "init", ""), "zeros") == 0 && s->out[0]->ty.dt == DT_f32, "%s: zeros, f32", adam[i]);
                EXPECT(has_update(g, adam[i], up), "%s updated in phase %d", adam[i], up);
            }
        }
        EXPECT(!ir_find_source(g, OP_state, "sgd.buf.W"), "no sgd.buf without momentum");
        for (int i = 0; i < 2; i++) {
            const char *acc = i ? "grad_acc.b" : "grad_acc.W";
            Node *s = ir_find_source(g, OP_state, acc);
            EXPECT((s != NULL) == (N > 1), "state %s iff accumulating", acc);
            if (s) EXPECT(has_update(g, acc, PH_MICRO) && has_update(g, acc, PH_STEP), "%s accumulated and reset", acc);
        }
        EXPECT(has_update(g, "W", up) && has_update(g, "b", up), "params updated in phase %d", up);
        /* The frozen param: no state, no update. */
        for (int i = 0; i < g->nnodes; i++) {
            const char *nm = g->nodes[i]->op == OP_state ? ir_source_name(g->nodes[i]) : NULL;
            EXPECT(!nm || !strstr(nm, ".F"), "frozen F has state %s", nm);
        }
        for (int i = 0; i < g->noutputs; i++) EXPECT(strcmp(g->outputs[i].name, "F") != 0, "frozen F is updated");
        /* Weight decay: rank >= 2 only, unless decay_all; phases in order. */
        int last = PH_MICRO;
        for (int i = 0; i < g->nnodes; i++) {
            Node *n = g->nodes[i];
            EXPECT(n->phase >= last, "node %d (%s) in phase %d after phase %d", n->id, op_name(n->op), n->phase, last);
            last = n->phase;
            if (n->op != OP_adamw && n->op != OP_sgd) continue;
            EXPECT(n->phase == up, "%s in phase %d", op_name(n->op), up);
            bool matrix = n->in[0]->ty.shape.rank >= 2;
            double want = matrix || variant == 1 ? 0.1 : 0.0;
            EXPECT(ir_float(n, "wd", -1) == want, "%s of %s: wd %g, expected %g", op_name(n->op), n->in[0]->name, ir_float(n, "wd", -1),
                   want);
            EXPECT(n->loc.line == n->in[0]->def->loc.line, "the update carries the param's loc");
        }
        gt_free(t);
    }
    printf("structure: states, inputs, outputs, phases and weight decay as specified\n");
}

/* The optimizer needs autodiff first. */
static void test_errors(void) {
    GT *t = gt_new("noad");
    gt_loss(t, gt_op1(t, OP_sum, gt_param(t, "x", 1, D(4))));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    Diag d;
    diag_init(&d, f);
    PassOptions po = {0};
    bool ok = pass_optimizer(t->g, &po, &d);
    fclose(f);
    EXPECT(!ok && buf && strstr(buf, "run autodiff first"), "optimizer without autodiff: %s", buf ? buf : "");
    diag_free(&d);
    free(buf);
    gt_free(t);
}

int main(void) {
    test_accumulation();
    test_adamw();
    test_sgd(true, 0.9);
    test_sgd(false, 0.9);
    test_sgd(false, 0.0);
    test_structure();
    test_errors();
    printf("%s\n", gt_fails ? "FAILED" : "ok");
    return gt_fails ? 1 : 0;
}
