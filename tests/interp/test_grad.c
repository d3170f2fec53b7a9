/* tests/interp/test_grad.c — the interpreter's gradient ops are the exact
 * derivatives of its forward ops: for L = sum(y * dy), with y a forward op
 * and dy fixed, each *_grad result is compared with central differences of
 * L in INTERP_F64. */
#include "interp_test.h"
#include "philox.h"

/* Fills the input or param named name with uniform values in [lo, hi). */
static void fill(Interp *it, const char *name, double lo, double hi) {
    Tensor *t = interp_source(it, name);
    uint64_t stream = rng_name_stream(name);
    for (int64_t i = 0; i < t->n; i++) t->data[i] = lo + (hi - lo) * rng_uniform(7, stream, (uint64_t)i);
}

/* L = sum(y * dy), with a new input "dy" shaped like y. */
static Value *objective(Graph *g, Value *y, const char *dyname) {
    Value *dy = input(g, dyname, y->ty);
    return emit1(g, node(g, OP_sum, 1, emit1(g, node(g, OP_mul, 2, y, dy))));
}

/* Compares analytic (the gradient of L with respect to source src, as the
 * current run computed it) with central differences of L. */
static void fd_check(Interp *it, const char *what, const char *src, Value *L, const Value *grad, double tol) {
    Tensor *t = interp_source(it, src);
    int64_t n = t->n;
    double *an = malloc(sizeof(double) * (size_t)n), *fd = malloc(sizeof(double) * (size_t)n);
    if (!run_micro(it)) goto out;
    memcpy(an, val(it, grad), sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        double x0 = t->data[i], h = 1e-6 * fmax(1.0, fabs(x0)), lp, lm;
        t->data[i] = x0 + h;
        if (!run_micro(it)) goto out;
        lp = val(it, L)[0];
        t->data[i] = x0 - h;
        if (!run_micro(it)) goto out;
        lm = val(it, L)[0];
        t->data[i] = x0;
        fd[i] = (lp - lm) / (2 * h);
    }
    CHECK_NEAR(what, an, fd, n, tol);
out:
    free(an);
    free(fd);
}

/* Pointwise op f and its gradient op (dy, saved) with saved = y or x. */
static void pointwise_case(Op f, Op grad, bool saved_is_y, int approx) {
    Graph *g = ir_graph_new("t");
    Value *x = input(g, "x", ty(DT_f64, 2, 3, 4));
    Node *fn = node(g, f, 1, x);
    if (f == OP_gelu) ir_set_int(g, fn, "approx", approx);
    Value *y = emit1(g, fn);
    Value *L = objective(g, y, "dy");
    Node *gn = node(g, grad, 2, ir_find_source(g, OP_input, "dy")->out[0], saved_is_y ? y : x);
    if (grad == OP_gelu_grad) ir_set_int(g, gn, "approx", approx);
    Value *dx = emit1(g, gn);
    Interp *it = interp_new(g, INTERP_F64);
    fill(it, "x", -3, 3);
    fill(it, "dy", -1, 1);
    fd_check(it, op_name(grad), "x", L, dx, 1e-7);
    interp_free(it);
    ir_graph_free(g);
}

static void test_pointwise(void) {
    pointwise_case(OP_tanh, OP_tanh_grad, true, 0);
    pointwise_case(OP_sigmoid, OP_sigmoid_grad, true, 0);
    pointwise_case(OP_relu, OP_relu_grad, false, 0);
    pointwise_case(OP_gelu, OP_gelu_grad, false, 0);
    pointwise_case(OP_gelu, OP_gelu_grad, false, 1);
    pointwise_case(OP_silu, OP_silu_grad, false, 0);
}

static void test_softmax(void) {
    for (int axis = 0; axis <= 1; axis++) {
        Graph *g = ir_graph_new("t");
        Value *x = input(g, "x", ty(DT_f64, 2, 3, 4));
        Node *sm = node(g, OP_softmax, 1, x);
        ir_set_int(g, sm, "axis", axis);
        Value *y = emit1(g, sm);
        Value *L = objective(g, y, "dy");
        Node *gn = node(g, OP_softmax_grad, 2, ir_find_source(g, OP_input, "dy")->out[0], y);
        ir_set_int(g, gn, "axis", axis);
        Value *dx = emit1(g, gn);
        Interp *it = interp_new(g, INTERP_F64);
        fill(it, "x", -2, 2);
        fill(it, "dy", -1, 1);
        fd_check(it, "softmax_grad", "x", L, dx, 1e-7);
        interp_free(it);
        ir_graph_free(g);
    }
}

static void test_layer_norm(void) {
    Graph *g = ir_graph_new("t");
    Value *x = input(g, "x", ty(DT_f32, 3, 2, 3, 5)), *w = input(g, "w", ty(DT_f32, 1, 5)), *b = input(g, "b", ty(DT_f32, 1, 5));
    Node *ln = emit(g, node(g, OP_layer_norm, 3, x, w, b));
    Value *L = objective(g, ln->out[0], "dy");
    Value *dy = ir_find_source(g, OP_input, "dy")->out[0];
    Node *lg = emit(g, node(g, OP_layer_norm_grad, 5, dy, x, w, ln->out[1], ln->out[2]));
    Interp *it = interp_new(g, INTERP_F64);
    fill(it, "x", -2, 2);
    fill(it, "w", 0.5, 1.5);
    fill(it, "b", -1, 1);
    fill(it, "dy", -1, 1);
    fd_check(it, "layer_norm_grad dx", "x", L, lg->out[0], 1e-6);
    fd_check(it, "layer_norm_grad dw", "w", L, lg->out[1], 1e-6);
    fd_check(it, "layer_norm_grad db", "b", L, lg->out[2], 1e-6);
    interp_free(it);
    ir_graph_free(g);
}

static void test_rms_norm(void) {
    Graph *g = ir_graph_new("t");
    Value *x = input(g, "x", ty(DT_f32, 2, 4, 6)), *w = input(g, "w", ty(DT_f32, 1, 6));
    Node *rn = emit(g, node(g, OP_rms_norm, 2, x, w));
    Value *L = objective(g, rn->out[0], "dy");
    Value *dy = ir_find_source(g, OP_input, "dy")->out[0];
    Node *rg = emit(g, node(g, OP_rms_norm_grad, 4, dy, x, w, rn->out[1]));
    Interp *it = interp_new(g, INTERP_F64);
    fill(it, "x", -2, 2);
    fill(it, "w", 0.5, 1.5);
    fill(it, "dy", -1, 1);
    fd_check(it, "rms_norm_grad dx", "x", L, rg->out[0], 1e-6);
    fd_check(it, "rms_norm_grad dw", "w", L, rg->out[1], 1e-6);
    interp_free(it);
    ir_graph_free(g);
}

/* The gradient of rope is inverse rope applied to dy. */
static void test_rope(void) {
    Graph *g = ir_graph_new("t");
    Value *x = input(g, "x", ty(DT_f32, 4, 1, 2, 5, 6));
    Node *r = node(g, OP_rope, 1, x);
    ir_set_float(g, r, "theta", 100.0);
    Value *L = objective(g, emit1(g, r), "dy");
    Node *inv = node(g, OP_rope, 1, ir_find_source(g, OP_input, "dy")->out[0]);
    ir_set_float(g, inv, "theta", 100.0);
    ir_set_int(g, inv, "inverse", 1);
    Value *dx = emit1(g, inv);
    Interp *it = interp_new(g, INTERP_F64);
    fill(it, "x", -2, 2);
    fill(it, "dy", -1, 1);
    fd_check(it, "inverse rope is rope's gradient", "x", L, dx, 1e-7);
    interp_free(it);
    ir_graph_free(g);
}

static void attention_case(int H, int Hkv, int T, int S, int causal) {
    Graph *g = ir_graph_new("t");
    Value *q = input(g, "q", ty(DT_f32, 4, 2, H, T, 3)), *k = input(g, "k", ty(DT_f32, 4, 2, Hkv, S, 3));
    Value *v = input(g, "v", ty(DT_f32, 4, 2, Hkv, S, 3));
    Node *at = node(g, OP_attention, 3, q, k, v);
    ir_set_int(g, at, "causal", causal);
    emit(g, at);
    Value *L = objective(g, at->out[0], "do");
    Node *ag = node(g, OP_attention_grad, 6, ir_find_source(g, OP_input, "do")->out[0], q, k, v, at->out[0], at->out[1]);
    ir_set_int(g, ag, "causal", causal);
    emit(g, ag);
    Interp *it = interp_new(g, INTERP_F64);
    fill(it, "q", -1.5, 1.5);
    fill(it, "k", -1.5, 1.5);
    fill(it, "v", -1, 1);
    fill(it, "do", -1, 1);
    char what[64];
    snprintf(what, sizeof what, "attention_grad H=%d Hkv=%d T=%d S=%d causal=%d dq", H, Hkv, T, S, causal);
    fd_check(it, what, "q", L, ag->out[0], 1e-6);
    what[strlen(what) - 1] = 'k';
    fd_check(it, what, "k", L, ag->out[1], 1e-6);
    what[strlen(what) - 1] = 'v';
    fd_check(it, what, "v", L, ag->out[2], 1e-6);
    interp_free(it);
    ir_graph_free(g);
}

static void test_attention(void) {
    attention_case(2, 2, 4, 4, 1);
    attention_case(4, 2, 4, 4, 1); /* GQA: dk and dv sum over the sharing query heads */
    attention_case(4, 1, 3, 5, 0);
}

static void test_cross_entropy(void) {
    Graph *g = ir_graph_new("t");
    Value *lg = input(g, "logits", ty(DT_f32, 3, 2, 3, 5)), *tg = input(g, "t", ty(DT_i32, 2, 2, 3));
    Node *ce = emit(g, node(g, OP_cross_entropy, 2, lg, tg));
    Value *dl = input(g, "dloss", ty(DT_f32, 0));
    Value *L = emit1(g, node(g, OP_mul, 2, ce->out[0], dl));
    Value *dx = emit1(g, node(g, OP_cross_entropy_grad, 4, dl, lg, tg, ce->out[1]));
    Interp *it = interp_new(g, INTERP_F64);
    fill(it, "logits", -3, 3);
    set_source(it, "t", (double[]){4, 0, -100, 2, 2, 1});
    set_source(it, "dloss", (double[]){0.7});
    fd_check(it, "cross_entropy_grad", "logits", L, dx, 1e-7);
    interp_free(it);
    ir_graph_free(g);
}

static void test_max(void) {
    Graph *g = ir_graph_new("t");
    Value *x = input(g, "x", ty(DT_f64, 3, 2, 3, 4));
    Node *mx = node(g, OP_max, 1, x);
    ir_set_ints(g, mx, "axes", 2, (int64_t[]){0, 2});
    ir_set_int(g, mx, "keepdim", 1);
    Value *y = emit1(g, mx);
    Value *L = objective(g, y, "dy");
    Node *mg = node(g, OP_max_grad, 3, ir_find_source(g, OP_input, "dy")->out[0], x, y);
    ir_set_ints(g, mg, "axes", 2, (int64_t[]){0, 2});
    ir_set_int(g, mg, "keepdim", 1);
    Value *dx = emit1(g, mg);
    Interp *it = interp_new(g, INTERP_F64);
    fill(it, "x", -1, 1); /* no ties */
    fill(it, "dy", -1, 1);
    fd_check(it, "max_grad", "x", L, dx, 1e-7);
    interp_free(it);
    ir_graph_free(g);
}

static void test_embedding(void) {
    Graph *g = ir_graph_new("t");
    Value *tab = input(g, "table", ty(DT_f32, 2, 5, 3)), *idx = input(g, "idx", ty(DT_i32, 2, 2, 4));
    Value *L = objective(g, emit1(g, node(g, OP_embedding, 2, tab, idx)), "dy");
    Node *eg = node(g, OP_embedding_grad, 2, ir_find_source(g, OP_input, "dy")->out[0], idx);
    ir_set_int(g, eg, "rows", 5);
    Value *dt = emit1(g, eg);
    Interp *it = interp_new(g, INTERP_F64);
    fill(it, "table", -1, 1);
    fill(it, "dy", -1, 1);
    set_source(it, "idx", (double[]){0, 4, 4, 1, 2, 0, 4, 2});
    fd_check(it, "embedding_grad", "table", L, dt, 1e-7);
    interp_free(it);
    ir_graph_free(g);
}

/* The gradient of dropout is the same dropout (seed, stream, p) of dy. */
static void test_dropout(void) {
    Graph *g = ir_graph_new("t");
    Value *x = input(g, "x", ty(DT_f32, 2, 4, 8)), *seed = input(g, "seed", ty(DT_i32, 0));
    Node *dn = node(g, OP_dropout, 2, x, seed);
    ir_set_float(g, dn, "p", 0.3);
    ir_set_int(g, dn, "stream", 5);
    Value *L = objective(g, emit1(g, dn), "dy");
    Node *dg = node(g, OP_dropout, 2, ir_find_source(g, OP_input, "dy")->out[0], seed);
    ir_set_float(g, dg, "p", 0.3);
    ir_set_int(g, dg, "stream", 5);
    Value *dx = emit1(g, dg);
    Interp *it = interp_new(g, INTERP_F64);
    fill(it, "x", -1, 1);
    fill(it, "dy", -1, 1);
    set_source(it, "seed", (double[]){99});
    fd_check(it, "dropout of dy", "x", L, dx, 1e-7);
    interp_free(it);
    ir_graph_free(g);
}

int main(void) {
    diag_init(&D, stderr);
    test_pointwise();
    test_softmax();
    test_layer_norm();
    test_rms_norm();
    test_rope();
    test_attention();
    test_cross_entropy();
    test_max();
    test_embedding();
    test_dropout();
    diag_free(&D);
    return finish("interp_grad");
}
