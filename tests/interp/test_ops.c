/* tests/interp/test_ops.c — every op of the reference interpreter against
 * values worked out by hand or by an independent closed form, on small
 * shapes, in INTERP_F64 (no rounding). */
#include "interp_test.h"
#include "philox.h"

#define N_(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- pointwise ---- */

/* y = op(x) for x = xs, compared with want. */
static void unary_case(Op op, int approx, const double *xs, const double *want, int n) {
    Graph *g = ir_graph_new("t");
    Value *x = input(g, "x", ty(DT_f64, 1, n));
    Node *nd = node(g, op, 1, x);
    if (op == OP_gelu) ir_set_int(g, nd, "approx", approx);
    Value *y = emit1(g, nd);
    Interp *it = interp_new(g, INTERP_F64);
    set_source(it, "x", xs);
    if (run_micro(it)) CHECK_NEAR(op_name(op), val(it, y), want, n, 1e-14);
    interp_free(it);
    ir_graph_free(g);
}

static void test_unary(void) {
    const double x[] = {-2, -0.5, 0, 0.5, 1, 3};
    unary_case(OP_neg, 0, x, (double[]){2, 0.5, 0, -0.5, -1, -3}, 6);
    unary_case(OP_abs, 0, x, (double[]){2, 0.5, 0, 0.5, 1, 3}, 6);
    unary_case(OP_sign, 0, x, (double[]){-1, -1, 0, 1, 1, 1}, 6);
    unary_case(OP_relu, 0, x, (double[]){0, 0, 0, 0.5, 1, 3}, 6);
    unary_case(OP_exp, 0, x, (double[]){0.1353352832366127, 0.6065306597126334, 1.0, 1.6487212707001282, 2.718281828459045, 20.085536923187668}, 6);
    unary_case(OP_tanh, 0, x,
               (double[]){-0.9640275800758169, -0.46211715726000974, 0.0, 0.46211715726000974, 0.7615941559557649, 0.9950547536867305}, 6);
    unary_case(OP_sigmoid, 0, x,
               (double[]){0.11920292202211755, 0.3775406687981454, 0.5, 0.6224593312018546, 0.7310585786300049, 0.9525741268224334}, 6);
    unary_case(OP_silu, 0, x,
               (double[]){-0.2384058440442351, -0.1887703343990727, 0.0, 0.3112296656009273, 0.7310585786300049, 2.8577223804673}, 6);
    /* gelu, erf form: x Phi(x); Phi(1) = 0.8413447460685429 */
    unary_case(OP_gelu, 0, x,
               (double[]){-0.04550026389635842, -0.15426876936299344, 0.0, 0.34573123063700656, 0.8413447460685429, 2.99595030590511}, 6);
    unary_case(OP_gelu, 1, x,
               (double[]){-0.04540230591222494, -0.15428599017485606, 0.0, 0.34571400982514394, 0.8411919906082768, 2.996362607918227}, 6);
    const double p[] = {0.25, 1, 4, 2.718281828459045};
    unary_case(OP_log, 0, p, (double[]){-1.3862943611198906, 0, 1.3862943611198906, 1.0}, 4);
    unary_case(OP_sqrt, 0, p, (double[]){0.5, 1, 2, 1.6487212707001282}, 4);
    unary_case(OP_rsqrt, 0, p, (double[]){2, 1, 0.5, 0.6065306597126334}, 4);
}

/* a op b with broadcasting; a, b given with their types. */
static void binary_case(Op op, Type ta, const double *a, Type tb, const double *b, const double *want) {
    Graph *g = ir_graph_new("t");
    Value *va = input(g, "a", ta), *vb = input(g, "b", tb);
    Value *y = emit1(g, node(g, op, 2, va, vb));
    Interp *it = interp_new(g, INTERP_F64);
    set_source(it, "a", a);
    set_source(it, "b", b);
    if (run_micro(it)) CHECK_NEAR(op_name(op), val(it, y), want, shape_numel(&y->ty.shape), 1e-15);
    interp_free(it);
    ir_graph_free(g);
}

static void test_binary(void) {
    Type t23 = ty(DT_f64, 2, 2, 3), t3 = ty(DT_f64, 1, 3);
    const double a[] = {1, 2, 3, 4, 5, 6}, b[] = {2, -1, 0.5};
    binary_case(OP_add, t23, a, t3, b, (double[]){3, 1, 3.5, 6, 4, 6.5});
    binary_case(OP_sub, t23, a, t3, b, (double[]){-1, 3, 2.5, 2, 6, 5.5});
    binary_case(OP_mul, t23, a, t3, b, (double[]){2, -2, 1.5, 8, -5, 3});
    binary_case(OP_div, t23, a, t3, b, (double[]){0.5, -2, 6, 2, -5, 12});
    binary_case(OP_maximum, t23, a, t3, b, (double[]){2, 2, 3, 4, 5, 6});
    binary_case(OP_minimum, t23, a, t3, b, (double[]){1, -1, 0.5, 2, -1, 0.5});
    binary_case(OP_ge, t23, a, t3, (double[]){1, 3, 3}, (double[]){1, 0, 1, 1, 1, 1});
    /* b of shape [2,1] broadcasts along the columns; a scalar everywhere */
    binary_case(OP_add, t23, a, ty(DT_f64, 2, 2, 1), (double[]){10, 20}, (double[]){11, 12, 13, 24, 25, 26});
    binary_case(OP_mul, ty(DT_f64, 0), (double[]){3}, t23, a, (double[]){3, 6, 9, 12, 15, 18});
    /* both operands broadcast: [2,1] + [3] -> [2,3] */
    binary_case(OP_add, ty(DT_f64, 2, 2, 1), (double[]){1, 2}, t3, (double[]){10, 20, 30}, (double[]){11, 21, 31, 12, 22, 32});
    /* integer division truncates toward zero */
    binary_case(OP_div, ty(DT_i32, 1, 3), (double[]){7, -7, 6}, ty(DT_i32, 1, 3), (double[]){2, 2, -4}, (double[]){3, -3, -1});
}

static void test_pointwise_grads(void) {
    Type t = ty(DT_f64, 1, 3);
    binary_case(OP_tanh_grad, t, (double[]){2, 1, 3}, t, (double[]){0.5, 0, -1}, (double[]){1.5, 1, 0});
    binary_case(OP_sigmoid_grad, t, (double[]){2, 1, 4}, t, (double[]){0.25, 0.5, 1}, (double[]){0.375, 0.25, 0});
    binary_case(OP_relu_grad, t, (double[]){1, 2, 3}, t, (double[]){-1, 0, 1}, (double[]){0, 0, 3});
    /* silu'(1) = s (1 + (1 - s)), s = sigmoid(1); silu'(0) = 1/2 (dy = 2) */
    binary_case(OP_silu_grad, ty(DT_f64, 1, 2), (double[]){1, 2}, ty(DT_f64, 1, 2), (double[]){1, 0}, (double[]){0.9276705118714869, 1.0});
    /* gelu_grad against central differences of the closed forms */
    for (int approx = 0; approx <= 1; approx++) {
        const double xs[] = {-2, -0.5, 0, 0.7, 3};
        double want[5], ones[5] = {1, 1, 1, 1, 1};
        for (int i = 0; i < 5; i++) {
            double h = 1e-5, x = xs[i];
            double fp, fm;
            if (approx == 0) {
                fp = 0.5 * (x + h) * (1 + erf((x + h) / sqrt(2)));
                fm = 0.5 * (x - h) * (1 + erf((x - h) / sqrt(2)));
            } else {
                double c = sqrt(2 / M_PI);
                fp = 0.5 * (x + h) * (1 + tanh(c * ((x + h) + 0.044715 * pow(x + h, 3))));
                fm = 0.5 * (x - h) * (1 + tanh(c * ((x - h) + 0.044715 * pow(x - h, 3))));
            }
            want[i] = (fp - fm) / (2 * h);
        }
        Graph *g = ir_graph_new("t");
        Value *dy = input(g, "dy", ty(DT_f64, 1, 5)), *x = input(g, "x", ty(DT_f64, 1, 5));
        Node *nd = node(g, OP_gelu_grad, 2, dy, x);
        ir_set_int(g, nd, "approx", approx);
        Value *y = emit1(g, nd);
        Interp *it = interp_new(g, INTERP_F64);
        set_source(it, "dy", ones);
        set_source(it, "x", xs);
        if (run_micro(it)) CHECK_NEAR(approx ? "gelu_grad tanh" : "gelu_grad erf", val(it, y), want, 5, 1e-9);
        interp_free(it);
        ir_graph_free(g);
    }
}

/* silu'(-1): s = sigmoid(-1) = 1 - sigmoid(1); dy=1: s (1 + (-1)(1 - s)) = s^2.
 * The literal above spells it oddly; check it plainly as well. */
static void test_silu_grad_minus_one(void) {
    double s = 1 - 0.7310585786300049;
    Type t = ty(DT_f64, 1, 1);
    binary_case(OP_silu_grad, t, (double[]){1}, t, (double[]){-1}, (double[]){s * s});
}

static void test_cast_constant_iota(void) {
    Graph *g = ir_graph_new("t");
    Value *x = input(g, "x", ty(DT_f64, 1, 4));
    Node *c = node(g, OP_cast, 1, x);
    ir_set_str(g, c, "dtype", "i32");
    Value *xi = emit1(g, c);
    Node *cb = node(g, OP_cast, 1, xi);
    ir_set_str(g, cb, "dtype", "f32");
    Value *xf = emit1(g, cb);
    Value *k = ir_const(g, 2.5, ty(DT_f64, 2, 2, 2), TLOC);
    Node *io = ir_new(g, OP_iota, 0, NULL, TLOC);
    io->out[0]->ty = ty(DT_i32, 2, 2, 3);
    ir_set_int(g, io, "axis", 1);
    emit(g, io);
    Interp *it = interp_new(g, INTERP_F64);
    set_source(it, "x", (double[]){2.7, -2.7, 0.5, -0.5});
    if (run_micro(it)) {
        CHECK_NEAR("cast to i32 truncates", val(it, xi), ((double[]){2, -2, 0, 0}), 4, 0);
        CHECK_NEAR("cast back", val(it, xf), ((double[]){2, -2, 0, 0}), 4, 0);
        CHECK_NEAR("constant", val(it, k), ((double[]){2.5, 2.5, 2.5, 2.5}), 4, 0);
        CHECK_NEAR("iota axis 1", val(it, io->out[0]), ((double[]){0, 1, 2, 0, 1, 2}), 6, 0);
    }
    interp_free(it);
    ir_graph_free(g);
}

/* ---- reductions ---- */

static Node *reduce_node(Graph *g, Op op, Value *x, int nax, const int64_t *axes, int keep) {
    Node *n = node(g, op, 1, x);
    if (nax >= 0) ir_set_ints(g, n, "axes", nax, axes);
    ir_set_int(g, n, "keepdim", keep);
    return emit(g, n);
}

static void test_reductions(void) {
    Graph *g = ir_graph_new("t");
    Value *x = input(g, "x", ty(DT_f64, 3, 2, 3, 4)); /* x[a][b][c] = 12a + 4b + c */
    Value *s = reduce_node(g, OP_sum, x, 1, (int64_t[]){1}, 0)->out[0];
    Value *m = reduce_node(g, OP_mean, x, 2, (int64_t[]){0, 2}, 1)->out[0];
    Value *mx = reduce_node(g, OP_max, x, -1, NULL, 0)->out[0];
    Value *mlast = reduce_node(g, OP_max, x, 1, (int64_t[]){-1}, 0)->out[0];
    CHECK(s->ty.shape.rank == 2 && m->ty.shape.rank == 3 && m->ty.shape.d[1] == 3 && mx->ty.shape.rank == 0);
    Interp *it = interp_new(g, INTERP_F64);
    double xs[24];
    for (int i = 0; i < 24; i++) xs[i] = i;
    set_source(it, "x", xs);
    if (run_micro(it)) {
        CHECK_NEAR("sum axis 1", val(it, s), ((double[]){12, 15, 18, 21, 48, 51, 54, 57}), 8, 0);
        CHECK_NEAR("mean axes 0,2 keepdim", val(it, m), ((double[]){7.5, 11.5, 15.5}), 3, 0);
        CHECK_VAL("max of all", val(it, mx)[0], 23, 0);
        CHECK_NEAR("max axis -1", val(it, mlast), ((double[]){3, 7, 11, 15, 19, 23}), 6, 0);
    }
    interp_free(it);
    ir_graph_free(g);

    /* max_grad: every tie gets dy */
    g = ir_graph_new("t");
    Value *x2 = input(g, "x", ty(DT_f64, 2, 2, 3)), *dy = input(g, "dy", ty(DT_f64, 1, 2));
    Value *y = reduce_node(g, OP_max, x2, 1, (int64_t[]){1}, 0)->out[0];
    Node *mg = node(g, OP_max_grad, 3, dy, x2, y);
    ir_set_ints(g, mg, "axes", 1, (int64_t[]){1});
    Value *dx = emit1(g, mg);
    it = interp_new(g, INTERP_F64);
    set_source(it, "x", (double[]){1, 3, 3, 2, 0, -1});
    set_source(it, "dy", (double[]){10, 20});
    if (run_micro(it)) {
        CHECK_NEAR("max", val(it, y), ((double[]){3, 2}), 2, 0);
        CHECK_NEAR("max_grad", val(it, dx), ((double[]){0, 10, 10, 20, 0, 0}), 6, 0);
    }
    interp_free(it);
    ir_graph_free(g);
}

/* ---- shape ops ---- */

static void test_shape_ops(void) {
    Graph *g = ir_graph_new("t");
    Value *x = input(g, "x", ty(DT_f64, 3, 2, 3, 4)); /* x[a][b][c] = 12a + 4b + c */
    Node *r = node(g, OP_reshape, 1, x);
    ir_set_ints(g, r, "shape", 2, (int64_t[]){4, -1});
    Value *xr = emit1(g, r);
    Node *p = node(g, OP_permute, 1, x);
    ir_set_ints(g, p, "perm", 3, (int64_t[]){2, 0, 1});
    Value *xp = emit1(g, p);
    Node *sl = node(g, OP_slice, 1, x);
    ir_set_int(g, sl, "axis", 2);
    ir_set_int(g, sl, "start", 1);
    ir_set_int(g, sl, "end", 3);
    Value *xs = emit1(g, sl);
    Node *pd = node(g, OP_pad, 1, x);
    ir_set_int(g, pd, "axis", 1);
    ir_set_int(g, pd, "lo", 1);
    ir_set_int(g, pd, "hi", 2);
    Value *xpad = emit1(g, pd);
    Value *b = input(g, "b", ty(DT_f64, 2, 2, 1));
    Node *bc = node(g, OP_broadcast, 1, b);
    ir_set_ints(g, bc, "shape", 3, (int64_t[]){3, 2, 2});
    Value *xb = emit1(g, bc);
    Value *c1 = input(g, "c1", ty(DT_f64, 2, 2, 1)), *c2 = input(g, "c2", ty(DT_f64, 2, 2, 2));
    Node *cc = node(g, OP_concat, 2, c1, c2);
    ir_set_int(g, cc, "axis", 1);
    Value *xc = emit1(g, cc);

    CHECK(xr->ty.shape.d[0] == 4 && xr->ty.shape.d[1] == 6);
    CHECK(xp->ty.shape.d[0] == 4 && xp->ty.shape.d[1] == 2 && xp->ty.shape.d[2] == 3);
    CHECK(xpad->ty.shape.d[1] == 6);
    Interp *it = interp_new(g, INTERP_F64);
    double xv[24];
    for (int i = 0; i < 24; i++) xv[i] = i;
    set_source(it, "x", xv);
    set_source(it, "b", (double[]){1, 2});
    set_source(it, "c1", (double[]){1, 2});
    set_source(it, "c2", (double[]){3, 4, 5, 6});
    if (run_micro(it)) {
        CHECK_NEAR("reshape", val(it, xr), xv, 24, 0);
        double want[24];
        for (int c = 0; c < 4; c++) /* y[c][a][b] = x[a][b][c] */
            for (int a = 0; a < 2; a++)
                for (int bb = 0; bb < 3; bb++) want[(c * 2 + a) * 3 + bb] = 12 * a + 4 * bb + c;
        CHECK_NEAR("permute", val(it, xp), want, 24, 0);
        double ws[12];
        for (int a = 0; a < 2; a++)
            for (int bb = 0; bb < 3; bb++)
                for (int c = 0; c < 2; c++) ws[(a * 3 + bb) * 2 + c] = 12 * a + 4 * bb + c + 1;
        CHECK_NEAR("slice", val(it, xs), ws, 12, 0);
        double wp[48] = {0};
        for (int a = 0; a < 2; a++)
            for (int bb = 0; bb < 3; bb++)
                for (int c = 0; c < 4; c++) wp[(a * 6 + bb + 1) * 4 + c] = 12 * a + 4 * bb + c;
        CHECK_NEAR("pad", val(it, xpad), wp, 48, 0);
        CHECK_NEAR("broadcast", val(it, xb), ((double[]){1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 2, 2}), 12, 0);
        CHECK_NEAR("concat", val(it, xc), ((double[]){1, 3, 4, 2, 5, 6}), 6, 0);
    }
    interp_free(it);
    ir_graph_free(g);
}

/* ---- matmul ---- */

static void test_matmul(void) {
    /* A = [[1,2,3],[4,5,6]], B = [[7,8],[9,10],[11,12]]: AB = [[58,64],[139,154]] */
    const double A[] = {1, 2, 3, 4, 5, 6}, At[] = {1, 4, 2, 5, 3, 6};
    const double B[] = {7, 8, 9, 10, 11, 12}, Bt[] = {7, 9, 11, 8, 10, 12};
    const double AB[] = {58, 64, 139, 154};
    for (int ta = 0; ta <= 1; ta++)
        for (int tb = 0; tb <= 1; tb++) {
            Graph *g = ir_graph_new("t");
            Value *a = input(g, "a", ta ? ty(DT_f64, 2, 3, 2) : ty(DT_f64, 2, 2, 3));
            Value *b = input(g, "b", tb ? ty(DT_f64, 2, 2, 3) : ty(DT_f64, 2, 3, 2));
            Node *mm = node(g, OP_matmul, 2, a, b);
            ir_set_int(g, mm, "ta", ta);
            ir_set_int(g, mm, "tb", tb);
            Value *y = emit1(g, mm);
            Interp *it = interp_new(g, INTERP_F64);
            set_source(it, "a", ta ? At : A);
            set_source(it, "b", tb ? Bt : B);
            char what[32];
            snprintf(what, sizeof what, "matmul ta=%d tb=%d", ta, tb);
            if (run_micro(it)) CHECK_NEAR(what, val(it, y), AB, 4, 0);
            interp_free(it);
            ir_graph_free(g);
        }
    /* batch broadcasting: a [2,1,2,3] with batches c_i A (c = 1, 10),
     * b [3,3,2] with batches (j+1) B: y [2,3,2,2], y[i][j] = c_i (j+1) AB */
    Graph *g = ir_graph_new("t");
    Value *a = input(g, "a", ty(DT_f64, 4, 2, 1, 2, 3)), *b = input(g, "b", ty(DT_f64, 3, 3, 3, 2));
    Value *y = emit1(g, node(g, OP_matmul, 2, a, b));
    CHECK(y->ty.shape.rank == 4 && y->ty.shape.d[0] == 2 && y->ty.shape.d[1] == 3);
    Interp *it = interp_new(g, INTERP_F64);
    double av[12], bv[18], want[24];
    const double c[2] = {1, 10};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 6; k++) av[i * 6 + k] = c[i] * A[k];
    for (int j = 0; j < 3; j++)
        for (int k = 0; k < 6; k++) bv[j * 6 + k] = (j + 1) * B[k];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) want[(i * 3 + j) * 4 + k] = c[i] * (j + 1) * AB[k];
    set_source(it, "a", av);
    set_source(it, "b", bv);
    if (run_micro(it)) CHECK_NEAR("batched matmul", val(it, y), want, 24, 0);
    interp_free(it);
    ir_graph_free(g);
}

/* ---- neural-network ops ---- */

static void test_embedding(void) {
    Graph *g = ir_graph_new("t");
    Value *tab = input(g, "table", ty(DT_f64, 2, 4, 2)), *idx = input(g, "idx", ty(DT_i32, 2, 2, 3));
    Value *y = emit1(g, node(g, OP_embedding, 2, tab, idx));
    Value *dy = input(g, "dy", ty(DT_f64, 3, 2, 3, 2));
    Node *eg = node(g, OP_embedding_grad, 2, dy, idx);
    ir_set_int(g, eg, "rows", 4);
    Value *dt = emit1(g, eg);
    Interp *it = interp_new(g, INTERP_F64);
    set_source(it, "table", (double[]){0, 1, 10, 11, 20, 21, 30, 31});
    set_source(it, "idx", (double[]){3, 0, 3, 1, 1, 2});
    set_source(it, "dy", (double[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
    if (run_micro(it)) {
        CHECK_NEAR("embedding", val(it, y), ((double[]){30, 31, 0, 1, 30, 31, 10, 11, 10, 11, 20, 21}), 12, 0);
        /* row 0 <- dy[1]; row 1 <- dy[3] + dy[4]; row 2 <- dy[5]; row 3 <- dy[0] + dy[2] */
        CHECK_NEAR("embedding_grad", val(it, dt), ((double[]){3, 4, 16, 18, 11, 12, 6, 8}), 8, 0);
    }
    interp_free(it);
    ir_graph_free(g);
}

static void test_softmax(void) {
    Graph *g = ir_graph_new("t");
    Value *x = input(g, "x", ty(DT_f64, 1, 3));
    Node *sm = node(g, OP_softmax, 1, x);
    Value *y = emit1(g, sm);
    Value *dy = input(g, "dy", ty(DT_f64, 1, 3));
    Value *dx = emit1(g, node(g, OP_softmax_grad, 2, dy, y));
    Value *x2 = input(g, "x2", ty(DT_f64, 2, 3, 2));
    Node *sm0 = node(g, OP_softmax, 1, x2);
    ir_set_int(g, sm0, "axis", 0);
    Value *y2 = emit1(g, sm0);
    Interp *it = interp_new(g, INTERP_F64);
    set_source(it, "x", (double[]){1, 2, 3});
    set_source(it, "dy", (double[]){1, 0, 0});
    set_source(it, "x2", (double[]){1, 0, 2, 0, 3, 0});
    const double p0 = 0.09003057317038046, p1 = 0.24472847105479767, p2 = 0.6652409557748219;
    if (run_micro(it)) {
        CHECK_NEAR("softmax [1,2,3]", val(it, y), ((double[]){p0, p1, p2}), 3, 1e-15);
        /* y (dy - y.dy) with dy = e0 */
        CHECK_NEAR("softmax_grad", val(it, dx), ((double[]){p0 * (1 - p0), -p1 * p0, -p2 * p0}), 3, 1e-15);
        CHECK_NEAR("softmax axis 0", val(it, y2), ((double[]){p0, 1.0 / 3, p1, 1.0 / 3, p2, 1.0 / 3}), 6, 1e-15);
    }
    interp_free(it);
    ir_graph_free(g);
}

static void test_norms(void) {
    Graph *g = ir_graph_new("t");
    Value *x = input(g, "x", ty(DT_f64, 2, 2, 4)), *w = input(g, "w", ty(DT_f64, 1, 4)), *b = input(g, "b", ty(DT_f64, 1, 4));
    Node *ln = node(g, OP_layer_norm, 3, x, w, b);
    ir_set_float(g, ln, "eps", 0.0);
    emit(g, ln);
    Node *rn = node(g, OP_rms_norm, 2, x, w);
    ir_set_float(g, rn, "eps", 0.0);
    emit(g, rn);
    Value *dy = input(g, "dy", ty(DT_f64, 2, 2, 4));
    Node *lg = emit(g, node(g, OP_layer_norm_grad, 5, dy, x, w, ln->out[1], ln->out[2]));
    Interp *it = interp_new(g, INTERP_F64);
    /* row 0 = [1,2,3,4]: mean 2.5, var 1.25; row 1 = [2,2,2,6]: mean 3, var 3 */
    set_source(it, "x", (double[]){1, 2, 3, 4, 2, 2, 2, 6});
    set_source(it, "w", (double[]){1, 1, 2, 2});
    set_source(it, "b", (double[]){0, 0.5, 0, -1});
    set_source(it, "dy", (double[]){1, 1, 1, 1, 1, 1, 1, 1});
    if (run_micro(it)) {
        double r0 = 1 / sqrt(1.25), r1 = 1 / sqrt(3.0);
        double xh[8] = {-1.5 * r0, -0.5 * r0, 0.5 * r0, 1.5 * r0, -r1, -r1, -r1, 3 * r1};
        CHECK_NEAR("layer_norm y", val(it, ln->out[0]),
                   ((double[]){xh[0], xh[1] + 0.5, 2 * xh[2], 2 * xh[3] - 1, xh[4], xh[5] + 0.5, 2 * xh[6], 2 * xh[7] - 1}), 8, 1e-15);
        CHECK_NEAR("layer_norm mean", val(it, ln->out[1]), ((double[]){2.5, 3}), 2, 0);
        CHECK_NEAR("layer_norm rstd", val(it, ln->out[2]), ((double[]){r0, r1}), 2, 1e-15);
        /* rms: row 0 mean(x^2) = 7.5, row 1 = 12 */
        double q0 = 1 / sqrt(7.5), q1 = 1 / sqrt(12.0);
        CHECK_NEAR("rms_norm y", val(it, rn->out[0]), ((double[]){q0, 2 * q0, 6 * q0, 8 * q0, 2 * q1, 2 * q1, 4 * q1, 12 * q1}), 8, 1e-15);
        CHECK_NEAR("rms_norm rstd", val(it, rn->out[1]), ((double[]){q0, q1}), 2, 1e-15);
        /* dy = 1: db = rows = 2, dw = sum of xhat over rows */
        CHECK_NEAR("layer_norm_grad db", val(it, lg->out[2]), ((double[]){2, 2, 2, 2}), 4, 0);
        CHECK_NEAR("layer_norm_grad dw", val(it, lg->out[1]), ((double[]){xh[0] + xh[4], xh[1] + xh[5], xh[2] + xh[6], xh[3] + xh[7]}), 4, 1e-15);
    }
    interp_free(it);
    ir_graph_free(g);
}

static void test_rope(void) {
    Graph *g = ir_graph_new("t");
    Value *x = input(g, "x", ty(DT_f64, 3, 2, 3, 4)); /* [B=2, T=3, D=4] */
    Value *y = emit1(g, node(g, OP_rope, 1, x));
    Node *inv = node(g, OP_rope, 1, y);
    ir_set_int(g, inv, "inverse", 1);
    Value *back = emit1(g, inv);
    Interp *it = interp_new(g, INTERP_F64);
    double xv[24], want[24];
    for (int i = 0; i < 24; i++) xv[i] = i + 1;
    /* theta = 10000, D = 4: frequencies 1 (pair 0,2) and 0.01 (pair 1,3) */
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < 3; t++) {
            const double *r = xv + (b * 3 + t) * 4;
            double *w = want + (b * 3 + t) * 4;
            w[0] = r[0] * cos(t) - r[2] * sin(t);
            w[2] = r[0] * sin(t) + r[2] * cos(t);
            w[1] = r[1] * cos(0.01 * t) - r[3] * sin(0.01 * t);
            w[3] = r[1] * sin(0.01 * t) + r[3] * cos(0.01 * t);
        }
    set_source(it, "x", xv);
    if (run_micro(it)) {
        CHECK_NEAR("rope", val(it, y), want, 24, 1e-14);
        CHECK_NEAR("inverse rope undoes rope", val(it, back), xv, 24, 1e-14);
    }
    interp_free(it);
    ir_graph_free(g);
}

/* The textbook definition, written independently of the interpreter: the
 * score matrix with masked entries at -inf, then exp and normalise. */
static void ref_attention(const double *q, const double *k, const double *v, int B, int H, int Hkv, int T, int S, int Dh, int causal,
                          double scale, double *o, double *lse) {
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            int hk = h / (H / Hkv);
            for (int i = 0; i < T; i++) {
                double sc[16], mx = -INFINITY, z = 0;
                for (int j = 0; j < S; j++) {
                    double dot = 0;
                    for (int e = 0; e < Dh; e++) dot += q[((b * H + h) * T + i) * Dh + e] * k[((b * Hkv + hk) * S + j) * Dh + e];
                    sc[j] = causal && j > i ? -INFINITY : scale * dot;
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int j = 0; j < S; j++) z += exp(sc[j] - mx);
                lse[(b * H + h) * T + i] = mx + log(z);
                for (int e = 0; e < Dh; e++) {
                    double acc = 0;
                    for (int j = 0; j < S; j++) acc += exp(sc[j] - mx) / z * v[((b * Hkv + hk) * S + j) * Dh + e];
                    o[((b * H + h) * T + i) * Dh + e] = acc;
                }
            }
        }
}

static void attention_case(int B, int H, int Hkv, int T, int S, int Dh, int causal) {
    Graph *g = ir_graph_new("t");
    Value *q = input(g, "q", ty(DT_f32, 4, B, H, T, Dh)), *k = input(g, "k", ty(DT_f32, 4, B, Hkv, S, Dh));
    Value *v = input(g, "v", ty(DT_f32, 4, B, Hkv, S, Dh));
    Node *at = node(g, OP_attention, 3, q, k, v);
    ir_set_int(g, at, "causal", causal);
    emit(g, at);
    Interp *it = interp_new(g, INTERP_F64);
    int nq = B * H * T * Dh, nk = B * Hkv * S * Dh;
    double *qv = malloc(sizeof(double) * nq), *kv = malloc(sizeof(double) * nk), *vv = malloc(sizeof(double) * nk);
    double *o = malloc(sizeof(double) * nq), *lse = malloc(sizeof(double) * B * H * T);
    for (int i = 0; i < nq; i++) qv[i] = sin(0.7 * i + 0.1);
    for (int i = 0; i < nk; i++) kv[i] = cos(1.3 * i), vv[i] = sin(0.37 * i) * 2;
    set_source(it, "q", qv);
    set_source(it, "k", kv);
    set_source(it, "v", vv);
    ref_attention(qv, kv, vv, B, H, Hkv, T, S, Dh, causal, 1 / sqrt(Dh), o, lse);
    char what[64];
    snprintf(what, sizeof what, "attention H=%d Hkv=%d T=%d S=%d causal=%d", H, Hkv, T, S, causal);
    if (run_micro(it)) {
        CHECK_NEAR(what, val(it, at->out[0]), o, nq, 1e-13);
        CHECK_NEAR("attention lse", val(it, at->out[1]), lse, B * H * T, 1e-13);
    }
    free(qv), free(kv), free(vv), free(o), free(lse);
    interp_free(it);
    ir_graph_free(g);
}

static void test_attention(void) {
    /* T = 3, D = 1, q = 1, k = [0,1,2], v = [10,20,30], scale 1, causal:
     * o_0 = 10, o_1 = (10 + 20e)/(1 + e), o_2 = (10 + 20e + 30e^2)/(1 + e + e^2) */
    Graph *g = ir_graph_new("t");
    Value *q = input(g, "q", ty(DT_f32, 4, 1, 1, 3, 1)), *k = input(g, "k", ty(DT_f32, 4, 1, 1, 3, 1));
    Value *v = input(g, "v", ty(DT_f32, 4, 1, 1, 3, 1));
    Node *at = node(g, OP_attention, 3, q, k, v);
    ir_set_int(g, at, "causal", 1);
    ir_set_float(g, at, "scale", 1.0);
    emit(g, at);
    Interp *it = interp_new(g, INTERP_F64);
    set_source(it, "q", (double[]){1, 1, 1});
    set_source(it, "k", (double[]){0, 1, 2});
    set_source(it, "v", (double[]){10, 20, 30});
    double e = exp(1.0);
    if (run_micro(it)) {
        CHECK_NEAR("causal attention T=3", val(it, at->out[0]), ((double[]){10, (10 + 20 * e) / (1 + e), (10 + 20 * e + 30 * e * e) / (1 + e + e * e)}), 3,
                   1e-15);
        CHECK_NEAR("causal lse", val(it, at->out[1]), ((double[]){0, log(1 + e), log(1 + e + e * e)}), 3, 1e-15);
    }
    interp_free(it);
    ir_graph_free(g);

    attention_case(2, 2, 2, 3, 3, 4, 1);
    attention_case(1, 4, 2, 5, 5, 2, 1); /* GQA: heads 0,1 read kv 0; heads 2,3 read kv 1 */
    attention_case(1, 4, 2, 3, 4, 2, 0); /* not causal, more keys than queries */
    attention_case(1, 4, 1, 4, 4, 3, 1); /* multi-query */
}

static void test_dropout(void) {
    enum { N = 100000 };
    Graph *g = ir_graph_new("t");
    Value *x = input(g, "x", ty(DT_f32, 1, N)), *seed = input(g, "seed", ty(DT_i32, 0));
    Node *dn = node(g, OP_dropout, 2, x, seed);
    ir_set_float(g, dn, "p", 0.25);
    ir_set_int(g, dn, "stream", 7);
    Value *y = emit1(g, dn);
    Interp *it = interp_new(g, INTERP_F64);
    double *ones = malloc(sizeof(double) * N), *first = malloc(sizeof(double) * N);
    for (int i = 0; i < N; i++) ones[i] = 1;
    set_source(it, "x", ones);
    set_source(it, "seed", (double[]){1234});
    if (run_micro(it)) {
        const double *yv = val(it, y);
        int kept = 0, bad = 0;
        for (int i = 0; i < N; i++) {
            kept += yv[i] != 0;
            bad += yv[i] != 0 && yv[i] != 1 / 0.75;
            bad += (yv[i] != 0) != rng_keep(1234u, 7, (uint64_t)i, 0.25f);
        }
        CHECK(bad == 0);
        CHECK(fabs(kept / (double)N - 0.75) < 0.01);
        memcpy(first, yv, sizeof(double) * N);
    }
    if (run_micro(it)) CHECK(memcmp(first, val(it, y), sizeof(double) * N) == 0); /* same seed, same mask */
    set_source(it, "seed", (double[]){1235});
    if (run_micro(it)) {
        int differ = 0;
        for (int i = 0; i < N; i++) differ += first[i] != val(it, y)[i];
        CHECK(differ > N / 4); /* another seed: an unrelated mask (expected 3/8 differ) */
    }
    free(ones);
    free(first);
    interp_free(it);
    ir_graph_free(g);
}

static void test_cross_entropy(void) {
    Graph *g = ir_graph_new("t");
    Value *lg = input(g, "logits", ty(DT_f32, 2, 3, 3)), *tg = input(g, "targets", ty(DT_i32, 1, 3));
    Node *ce = emit(g, node(g, OP_cross_entropy, 2, lg, tg));
    Value *dl = input(g, "dloss", ty(DT_f32, 0));
    Value *dlogits = emit1(g, node(g, OP_cross_entropy_grad, 4, dl, lg, tg, ce->out[1]));
    Interp *it = interp_new(g, INTERP_F64);
    const double L[] = {1, 2, 3, 1, 1, 1, 0, 0, 5};
    set_source(it, "logits", L);
    set_source(it, "targets", (double[]){0, -100, 2});
    set_source(it, "dloss", (double[]){1});
    double e = exp(1.0);
    double lse0 = log(e + e * e + e * e * e), lse1 = 1 + log(3.0), lse2 = log(2 + exp(5.0));
    if (run_micro(it)) {
        CHECK_NEAR("ce lse", val(it, ce->out[1]), ((double[]){lse0, lse1, lse2}), 3, 1e-15);
        CHECK_VAL("ce loss (row 1 ignored)", val(it, ce->out[0])[0], ((lse0 - 1) + (lse2 - 5)) / 2, 1e-15);
        double want[9];
        for (int c = 0; c < 3; c++) {
            want[c] = (exp(L[c] - lse0) - (c == 0)) / 2;
            want[3 + c] = 0;
            want[6 + c] = (exp(L[6 + c] - lse2) - (c == 2)) / 2;
        }
        CHECK_NEAR("cross_entropy_grad", val(it, dlogits), want, 9, 1e-15);
    }
    /* every row ignored: loss 0, gradient 0 */
    set_source(it, "targets", (double[]){-100, -100, -100});
    if (run_micro(it)) {
        CHECK_VAL("ce loss, all ignored", val(it, ce->out[0])[0], 0, 0);
        CHECK_NEAR("ce grad, all ignored", val(it, dlogits), ((double[9]){0}), 9, 0);
    }
    interp_free(it);
    ir_graph_free(g);

    /* ignore_index may name a real class: here class 0 */
    g = ir_graph_new("t");
    lg = input(g, "logits", ty(DT_f32, 2, 3, 3));
    tg = input(g, "targets", ty(DT_i32, 1, 3));
    Node *ce1 = node(g, OP_cross_entropy, 2, lg, tg);
    ir_set_int(g, ce1, "ignore_index", 0);
    emit(g, ce1);
    it = interp_new(g, INTERP_F64);
    set_source(it, "logits", L);
    set_source(it, "targets", (double[]){0, 1, 2});
    if (run_micro(it)) CHECK_VAL("ce loss, ignore_index 0", val(it, ce1->out[0])[0], ((lse1 - 1) + (lse2 - 5)) / 2, 1e-15);
    interp_free(it);
    ir_graph_free(g);
}

/* ---- optimizer ops ---- */

static void test_norm_and_clip(void) {
    Graph *g = ir_graph_new("t");
    Value *a = input(g, "a", ty(DT_f32, 1, 2)), *b = input(g, "b", ty(DT_f32, 2, 1, 1));
    Value *gn = emit1(g, node(g, OP_global_norm, 2, a, b));
    Node *cc = node(g, OP_clip_coef, 1, gn);
    ir_set_float(g, cc, "max_norm", 1.0);
    Value *c = emit1(g, cc);
    Node *cc2 = node(g, OP_clip_coef, 1, gn);
    ir_set_float(g, cc2, "max_norm", 100.0);
    Value *c2 = emit1(g, cc2);
    Interp *it = interp_new(g, INTERP_F64);
    set_source(it, "a", (double[]){3, 4});
    set_source(it, "b", (double[]){12});
    if (run_micro(it)) {
        CHECK_VAL("global_norm", val(it, gn)[0], 13, 0);
        CHECK_VAL("clip_coef", val(it, c)[0], 1 / (13 + 1e-6), 1e-15);
        CHECK_VAL("clip_coef no clip", val(it, c2)[0], 1, 0);
    }
    /* a NaN norm: NaN, not 1 (every gradient it scales is NaN, as PyTorch's clip_grad_norm_ makes them) */
    set_source(it, "b", (double[]){NAN});
    if (run_micro(it)) CHECK(isnan(val(it, c)[0]) && isnan(val(it, c2)[0]));
    interp_free(it);
    ir_graph_free(g);
}

static Node *param(Graph *g, const char *name, Type t) { return ir_source(g, OP_param, name, t, TLOC); }
static Node *state(Graph *g, const char *name, Type t) { return ir_source(g, OP_state, name, t, TLOC); }

static void test_adamw(void) {
    Graph *g = ir_graph_new("t");
    Node *w = param(g, "w", ty(DT_f32, 1, 2)), *m = state(g, "m", ty(DT_f32, 1, 2)), *v = state(g, "v", ty(DT_f32, 1, 2));
    Value *gr = input(g, "g", ty(DT_f32, 1, 2)), *lr = input(g, "lr", ty(DT_f32, 0)), *step = input(g, "step", ty(DT_i32, 0));
    Value *gs = input(g, "gscale", ty(DT_f32, 0));
    Node *ad = node(g, OP_adamw, 7, w->out[0], gr, m->out[0], v->out[0], lr, step, gs);
    ir_set_float(g, ad, "wd", 0.01);
    emit(g, ad);
    ir_add_update(g, w, ad->out[0]);
    ir_add_update(g, m, ad->out[1]);
    ir_add_update(g, v, ad->out[2]);
    Interp *it = interp_new(g, INTERP_F64);
    set_source(it, "w", (double[]){1, -0.5});
    set_source(it, "g", (double[]){0.5, 0.25});
    set_source(it, "lr", (double[]){0.1});
    set_source(it, "gscale", (double[]){2});
    /* by hand, g' = [1, 0.5], beta1 0.9, beta2 0.999, eps 1e-8:
     * step 1: m = 0.1 g', v = 0.001 g'^2, mhat = g', vhat = g'^2,
     *         w = w - 0.1 (1/(1 + 1e-8 / |g'|) + 0.01 w) */
    set_source(it, "step", (double[]){1});
    if (run_micro(it)) {
        CHECK_NEAR("adamw step 1 w", interp_source(it, "w")->data, ((double[]){0.899000001, -0.599499998}), 2, 1e-15);
        CHECK_NEAR("adamw step 1 m", interp_source(it, "m")->data, ((double[]){0.1, 0.05}), 2, 1e-15);
        CHECK_NEAR("adamw step 1 v", interp_source(it, "v")->data, ((double[]){0.001, 0.00025}), 2, 1e-15);
    }
    /* step 2: m = 0.19 g', v = 0.001999 g'^2, mhat = g', vhat = g'^2 again */
    set_source(it, "step", (double[]){2});
    if (run_micro(it)) {
        CHECK_NEAR("adamw step 2 w", interp_source(it, "w")->data, ((double[]){0.7981010019990007, -0.6989004960019993}), 2, 1e-15);
        CHECK_NEAR("adamw step 2 m", interp_source(it, "m")->data, ((double[]){0.19, 0.095}), 2, 1e-15);
        CHECK_NEAR("adamw step 2 v", interp_source(it, "v")->data, ((double[]){0.001999, 0.00049975}), 2, 1e-15);
    }
    interp_free(it);
    ir_graph_free(g);
}

static void sgd_case(double momentum, int nesterov, const double *w1, const double *w2, const double *buf1, const double *buf2) {
    Graph *g = ir_graph_new("t");
    Node *w = param(g, "w", ty(DT_f32, 1, 1)), *buf = state(g, "buf", ty(DT_f32, 1, 1));
    Value *gr = input(g, "g", ty(DT_f32, 1, 1)), *lr = input(g, "lr", ty(DT_f32, 0)), *gs = input(g, "gscale", ty(DT_f32, 0));
    Node *sg = node(g, OP_sgd, 5, w->out[0], gr, buf->out[0], lr, gs);
    ir_set_float(g, sg, "momentum", momentum);
    ir_set_float(g, sg, "wd", 0.1);
    ir_set_int(g, sg, "nesterov", nesterov);
    emit(g, sg);
    ir_add_update(g, w, sg->out[0]);
    ir_add_update(g, buf, sg->out[1]);
    Interp *it = interp_new(g, INTERP_F64);
    set_source(it, "w", (double[]){1});
    set_source(it, "buf", (double[]){momentum == 0 ? 7 : 0});
    set_source(it, "g", (double[]){0.5});
    set_source(it, "lr", (double[]){0.1});
    set_source(it, "gscale", (double[]){1});
    char what[64];
    snprintf(what, sizeof what, "sgd momentum=%g nesterov=%d", momentum, nesterov);
    if (run_micro(it)) {
        CHECK_NEAR(what, interp_source(it, "w")->data, w1, 1, 1e-15);
        CHECK_NEAR(what, interp_source(it, "buf")->data, buf1, 1, 1e-15);
    }
    if (run_micro(it)) {
        CHECK_NEAR(what, interp_source(it, "w")->data, w2, 1, 1e-15);
        CHECK_NEAR(what, interp_source(it, "buf")->data, buf2, 1, 1e-15);
    }
    interp_free(it);
    ir_graph_free(g);
}

static void test_sgd(void) {
    /* w = 1, g = 0.5, lr 0.1, wd 0.1.  Plain: g' = 0.6, w = 0.94; g' = 0.594, w = 0.8806; buf stays 7. */
    sgd_case(0, 0, (double[]){0.94}, (double[]){0.8806}, (double[]){7}, (double[]){7});
    /* momentum 0.9: buf = 0.6, w = 0.94; g' = 0.594, buf = 0.54 + 0.594 = 1.134, w = 0.94 - 0.1134 */
    sgd_case(0.9, 0, (double[]){0.94}, (double[]){0.8266}, (double[]){0.6}, (double[]){1.134});
    /* nesterov: upd = 0.6 + 0.9*0.6 = 1.14, w = 0.886; g' = 0.5886, buf = 0.54 + 0.5886 = 1.1286,
     * upd = 0.5886 + 0.9*1.1286 = 1.60434, w = 0.886 - 0.160434 */
    sgd_case(0.9, 1, (double[]){0.886}, (double[]){0.725566}, (double[]){0.6}, (double[]){1.1286});
}

int main(void) {
    diag_init(&D, stderr);
    test_unary();
    test_binary();
    test_pointwise_grads();
    test_silu_grad_minus_one();
    test_cast_constant_iota();
    test_reductions();
    test_shape_ops();
    test_matmul();
    test_embedding();
    test_softmax();
    test_norms();
    test_rope();
    test_attention();
    test_dropout();
    test_cross_entropy();
    test_norm_and_clip();
    test_adamw();
    test_sgd();
    CHECK(D.nerrors == 0);
    diag_free(&D);
    return finish("interp_ops");
}
