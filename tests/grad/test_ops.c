/* tests/grad/test_ops.c — a finite-difference gradient check for every
 * differentiable op, with variants (broadcasting, matmul transposes and
 * batch broadcasting, reductions over several axes, GQA attention, ...).
 * The op table is enumerated: an OPF_DIFF op without a case fails. */
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


typedef Value *CaseFn(GT *t);
typedef struct Case { Op op; const char *label; CaseFn *fn; } Case;

/* ---- pointwise unary ---- */

static Value *unary(GT *t, Op op, FillKind f, double lo, double hi) { return gt_op1(t, op, PF(t, "x", f, lo, hi, 3, 4)); }
static Value *c_neg(GT *t) { return unary(t, OP_neg, FILL_UNIFORM, -1, 1); }
static Value *c_exp(GT *t) { return unary(t, OP_exp, FILL_UNIFORM, -1, 1); }
static Value *c_log(GT *t) { return unary(t, OP_log, FILL_UNIFORM, 0.5, 2); }
static Value *c_sqrt(GT *t) { return unary(t, OP_sqrt, FILL_UNIFORM, 0.5, 2); }
static Value *c_rsqrt(GT *t) { return unary(t, OP_rsqrt, FILL_UNIFORM, 0.5, 2); }
static Value *c_tanh(GT *t) { return unary(t, OP_tanh, FILL_UNIFORM, -2, 2); }
static Value *c_sigmoid(GT *t) { return unary(t, OP_sigmoid, FILL_UNIFORM, -3, 3); }
static Value *c_relu(GT *t) { return unary(t, OP_relu, FILL_AWAY, 0.1, 1.5); }
static Value *c_silu(GT *t) { return unary(t, OP_silu, FILL_UNIFORM, -3, 3); }
static Value *c_abs(GT *t) { return unary(t, OP_abs, FILL_AWAY, 0.1, 1.5); }

static Value *gelu(GT *t, int approx) {
    Value *x = PF(t, "x", FILL_UNIFORM, -3, 3, 3, 4);
    Node *n = gt_node(t, OP_gelu, 1, &x);
    ir_set_int(t->g, n, "approx", approx);
    return gt_emit(t, n);
}
static Value *c_gelu_erf(GT *t) { return gelu(t, 0); }
static Value *c_gelu_tanh(GT *t) { return gelu(t, 1); }

static Value *cast(GT *t, const char *dt) {
    Value *x = P(t, "x", 3, 4);
    Node *n = gt_node(t, OP_cast, 1, &x);
    ir_set_str(t->g, n, "dtype", dt);
    return gt_emit(t, n); /* gt_loss_linear casts back to f32 */
}
static Value *c_cast_bf16(GT *t) { return cast(t, "bf16"); }
static Value *c_cast_f64(GT *t) { return cast(t, "f64"); }

/* ---- pointwise binary, with broadcasting ---- */

typedef struct BinShapes { int ra; int64_t a[4]; int rb; int64_t b[4]; } BinShapes;
static const BinShapes bin_shapes[] = {
    {2, {3, 4}, 2, {3, 4}},        /* same shape */
    {2, {3, 4}, 1, {4}},           /* b broadcast over rows */
    {2, {3, 1}, 2, {1, 4}},        /* both broadcast */
    {3, {2, 3, 4}, 2, {3, 1}},     /* b: leading axis and a size-1 axis */
    {0, {0}, 2, {3, 4}},           /* a scalar */
};
static int bin_variant;

static Value *binary(GT *t, Op op, FillKind fb, double lo, double hi) {
    const BinShapes *s = &bin_shapes[bin_variant];
    Value *a = gt_param_fill(t, "a", DT_f32, s->ra, s->a, FILL_UNIFORM, -1, 1);
    Value *b = gt_param_fill(t, "b", DT_f32, s->rb, s->b, fb, lo, hi);
    return gt_op2(t, op, a, b);
}
static Value *c_add(GT *t) { return binary(t, OP_add, FILL_UNIFORM, -1, 1); }
static Value *c_sub(GT *t) { return binary(t, OP_sub, FILL_UNIFORM, -1, 1); }
static Value *c_mul(GT *t) { return binary(t, OP_mul, FILL_UNIFORM, -1, 1); }
static Value *c_div(GT *t) { return binary(t, OP_div, FILL_AWAY, 0.5, 2); }
static Value *c_maximum(GT *t) { return binary(t, OP_maximum, FILL_UNIFORM, -1, 1); }
static Value *c_minimum(GT *t) { return binary(t, OP_minimum, FILL_UNIFORM, -1, 1); }

/* x * x: one node, both operands the same value. */
static Value *c_mul_square(GT *t) {
    Value *x = P(t, "x", 3, 4);
    return gt_op2(t, OP_mul, x, x);
}

/* ---- reductions ---- */

static Value *reduce(GT *t, Op op, int na, const int64_t *axes, int keepdim) {
    Value *x = P(t, "x", 2, 3, 4);
    Node *n = gt_node(t, op, 1, &x);
    if (na >= 0) ir_set_ints(t->g, n, "axes", na, axes);
    ir_set_int(t->g, n, "keepdim", keepdim);
    return gt_emit(t, n);
}
static Value *c_sum_1(GT *t) { return reduce(t, OP_sum, 1, D(1), 0); }
static Value *c_sum_02k(GT *t) { return reduce(t, OP_sum, 2, D(0, 2), 1); }
static Value *c_sum_all(GT *t) { return reduce(t, OP_sum, -1, NULL, 0); }
static Value *c_mean_last(GT *t) { return reduce(t, OP_mean, 1, D(-1), 0); }
static Value *c_mean_01k(GT *t) { return reduce(t, OP_mean, 2, D(0, 1), 1); }
static Value *c_mean_all(GT *t) { return reduce(t, OP_mean, -1, NULL, 1); }
static Value *c_max_2(GT *t) { return reduce(t, OP_max, 1, D(2), 0); }
static Value *c_max_01k(GT *t) { return reduce(t, OP_max, 2, D(0, 1), 1); }

/* ---- shape ---- */

static Value *c_reshape(GT *t) { return gt_reshape(t, P(t, "x", 2, 3, 4), 2, D(6, 4)); }
static Value *c_permute(GT *t) { return gt_permute(t, P(t, "x", 2, 3, 4), 3, D(2, 0, 1)); }

static Value *c_broadcast(GT *t) {
    Value *x = P(t, "x", 3, 1);
    Node *n = gt_node(t, OP_broadcast, 1, &x);
    ir_set_ints(t->g, n, "shape", 3, D(2, 3, 4));
    return gt_emit(t, n);
}

static Value *c_slice(GT *t) { return gt_slice(t, P(t, "x", 2, 5, 3), 1, 1, 4); }

static Value *c_pad(GT *t) {
    Value *x = P(t, "x", 2, 3);
    Node *n = gt_node(t, OP_pad, 1, &x);
    ir_set_int(t->g, n, "axis", 0);
    ir_set_int(t->g, n, "lo", 1);
    ir_set_int(t->g, n, "hi", 2);
    return gt_emit(t, n);
}

static Value *c_concat(GT *t) {
    Value *in[3] = {P(t, "a", 2, 1, 4), P(t, "b", 2, 3, 4), P(t, "c", 2, 2, 4)};
    Node *n = gt_node(t, OP_concat, 3, in);
    ir_set_int(t->g, n, "axis", 1);
    return gt_emit(t, n);
}

/* ---- matmul: every ta/tb, batch broadcasting ---- */

static Value *matmul(GT *t, int rba, const int64_t *ba, int rbb, const int64_t *bb, int ta, int tb) {
    int64_t M = 3, K = 4, N = 5, da[6], db[6];
    for (int i = 0; i < rba; i++) da[i] = ba[i];
    for (int i = 0; i < rbb; i++) db[i] = bb[i];
    da[rba] = ta ? K : M, da[rba + 1] = ta ? M : K;
    db[rbb] = tb ? N : K, db[rbb + 1] = tb ? K : N;
    Value *a = gt_param(t, "A", rba + 2, da), *b = gt_param(t, "B", rbb + 2, db);
    return gt_matmul(t, a, b, ta, tb);
}
static Value *c_mm00(GT *t) { return matmul(t, 0, NULL, 0, NULL, 0, 0); }
static Value *c_mm01(GT *t) { return matmul(t, 0, NULL, 0, NULL, 0, 1); }
static Value *c_mm10(GT *t) { return matmul(t, 0, NULL, 0, NULL, 1, 0); }
static Value *c_mm11(GT *t) { return matmul(t, 0, NULL, 0, NULL, 1, 1); }
static Value *c_mm_bA00(GT *t) { return matmul(t, 2, D(2, 3), 0, NULL, 0, 0); }
static Value *c_mm_bA01(GT *t) { return matmul(t, 1, D(2), 0, NULL, 0, 1); }
static Value *c_mm_bA10(GT *t) { return matmul(t, 1, D(2), 0, NULL, 1, 0); }
static Value *c_mm_bA11(GT *t) { return matmul(t, 1, D(2), 0, NULL, 1, 1); }
static Value *c_mm_bB00(GT *t) { return matmul(t, 0, NULL, 1, D(2), 0, 0); }
static Value *c_mm_bB11(GT *t) { return matmul(t, 0, NULL, 1, D(2), 1, 1); }
static Value *c_mm_bAB00(GT *t) { return matmul(t, 2, D(2, 1), 1, D(3), 0, 0); }
static Value *c_mm_bAB10(GT *t) { return matmul(t, 2, D(2, 1), 2, D(1, 3), 1, 0); }
static Value *c_mm_bAB01(GT *t) { return matmul(t, 1, D(2), 2, D(3, 2), 0, 1); }
static Value *c_mm_bAB11(GT *t) { return matmul(t, 2, D(1, 2), 1, D(2), 1, 1); }

/* ---- neural-network ops ---- */

static Value *c_embedding(GT *t) {
    static const double idx[8] = {1, 3, 1, 6, 0, 3, 3, 1}; /* repeated rows */
    Value *tab = P(t, "table", 7, 5);
    Value *ix = gt_input(t, "idx", DT_i32, 2, D(2, 4), idx);
    return gt_op2(t, OP_embedding, tab, ix);
}

static Value *softmax(GT *t, int axis) {
    Value *x = PF(t, "x", FILL_UNIFORM, -2, 2, 2, 3, 5);
    Node *n = gt_node(t, OP_softmax, 1, &x);
    ir_set_int(t->g, n, "axis", axis);
    return gt_emit(t, n);
}
static Value *c_softmax_last(GT *t) { return softmax(t, -1); }
static Value *c_softmax_0(GT *t) { return softmax(t, 0); }

static Value *c_layer_norm(GT *t) {
    Value *in[3] = {PF(t, "x", FILL_UNIFORM, -2, 2, 2, 3, 8), PF(t, "w", FILL_UNIFORM, 0.5, 1.5, 8), P(t, "b", 8)};
    Node *n = gt_node(t, OP_layer_norm, 3, in);
    ir_set_float(t->g, n, "eps", 1e-5);
    return gt_emit(t, n);
}

static Value *c_rms_norm(GT *t) {
    Value *in[2] = {PF(t, "x", FILL_UNIFORM, -2, 2, 2, 3, 8), PF(t, "w", FILL_UNIFORM, 0.5, 1.5, 8)};
    Node *n = gt_node(t, OP_rms_norm, 2, in);
    ir_set_float(t->g, n, "eps", 1e-6);
    return gt_emit(t, n);
}

static Value *rope(GT *t, int inverse) {
    Value *x = P(t, "x", 2, 2, 5, 8);
    Node *n = gt_node(t, OP_rope, 1, &x);
    ir_set_float(t->g, n, "theta", 100.0);
    ir_set_int(t->g, n, "inverse", inverse);
    return gt_emit(t, n);
}
static Value *c_rope(GT *t) { return rope(t, 0); }
static Value *c_rope_inverse(GT *t) { return rope(t, 1); }

/* GQA: H = 4 query heads over Hkv = 2 key/value heads. */
static Value *attention(GT *t, int causal, int64_t S) {
    Value *in[3] = {PF(t, "q", FILL_UNIFORM, -1.5, 1.5, 2, 4, 5, 4), PF(t, "k", FILL_UNIFORM, -1.5, 1.5, 2, 2, S, 4),
                    P(t, "v", 2, 2, S, 4)};
    Node *n = gt_node(t, OP_attention, 3, in);
    ir_set_int(t->g, n, "causal", causal);
    return gt_emit(t, n);
}
static Value *c_attn_causal(GT *t) { return attention(t, 1, 5); }
static Value *c_attn_full(GT *t) { return attention(t, 0, 5); }
static Value *c_attn_full_s7(GT *t) { return attention(t, 0, 7); }

static Value *c_dropout(GT *t) {
    static const double seed[1] = {1234};
    Value *in[2] = {P(t, "x", 4, 8), gt_input(t, "seed", DT_i32, 0, NULL, seed)};
    Node *n = gt_node(t, OP_dropout, 2, in);
    ir_set_float(t->g, n, "p", 0.3);
    ir_set_int(t->g, n, "stream", 7);
    return gt_emit(t, n);
}

static Value *c_cross_entropy(GT *t) {
    static const double tg[6] = {2, 0, -100, 5, 5, 1}; /* one ignored row */
    Value *in[2] = {PF(t, "logits", FILL_UNIFORM, -2, 2, 2, 3, 6), gt_input(t, "targets", DT_i32, 2, D(2, 3), tg)};
    Node *n = gt_node(t, OP_cross_entropy, 2, in);
    ir_set_int(t->g, n, "ignore_index", -100);
    return gt_emit(t, n);
}

/* {classes=4} of 6 columns (pad-tiles' padding): the last two columns take
 * no part in the loss, so their gradient is 0 */
static Value *c_cross_entropy_classes(GT *t) {
    static const double tg[6] = {2, 0, -100, 3, 3, 1};
    Value *in[2] = {PF(t, "logits", FILL_UNIFORM, -2, 2, 2, 3, 6), gt_input(t, "targets", DT_i32, 2, D(2, 3), tg)};
    Node *n = gt_node(t, OP_cross_entropy, 2, in);
    ir_set_int(t->g, n, "ignore_index", -100);
    ir_set_int(t->g, n, "classes", 4);
    return gt_emit(t, n);
}

/* ---- fused ops (passes/liger.c) ---- */

static Value *glu(GT *t, Op op, int approx) {
    Value *in[2] = {PF(t, "a", FILL_UNIFORM, -3, 3, 2, 3, 4), PF(t, "b", FILL_UNIFORM, -2, 2, 2, 3, 4)};
    Node *n = gt_node(t, op, 2, in);
    if (op == OP_geglu) ir_set_int(t->g, n, "approx", approx);
    return gt_emit(t, n);
}
static Value *c_swiglu(GT *t) { return glu(t, OP_swiglu, 0); }
static Value *c_geglu_erf(GT *t) { return glu(t, OP_geglu, 0); }
static Value *c_geglu_tanh(GT *t) { return glu(t, OP_geglu, 1); }

/* y + s: the gradient flows into both results (add_*_norm_grad); `y_only`
 * differentiates y alone (the plain norm gradient at s). */
static Value *add_norm(GT *t, Op op, bool y_only) {
    bool ln = op == OP_add_layer_norm;
    Value *in[4] = {PF(t, "x", FILL_UNIFORM, -2, 2, 2, 3, 8), PF(t, "r", FILL_UNIFORM, -2, 2, 2, 3, 8),
                    PF(t, "w", FILL_UNIFORM, 0.5, 1.5, 8), ln ? P(t, "b", 8) : NULL};
    Node *n = gt_node(t, op, ln ? 4 : 3, in);
    gt_emit(t, n);
    return y_only ? n->out[0] : gt_op2(t, OP_add, n->out[0], n->out[1]);
}
static Value *c_add_layer_norm(GT *t) { return add_norm(t, OP_add_layer_norm, false); }
static Value *c_add_layer_norm_y(GT *t) { return add_norm(t, OP_add_layer_norm, true); }
static Value *c_add_rms_norm(GT *t) { return add_norm(t, OP_add_rms_norm, false); }
static Value *c_add_rms_norm_y(GT *t) { return add_norm(t, OP_add_rms_norm, true); }

/* q [2,4,5,8] and k [2,2,5,8] (grouped-query shapes); the result is both,
 * concatenated over the heads.  Tables: arbitrary values (not a rotation),
 * so the transpose is checked in general. */
static Value *rope_qk(GT *t, bool tables, int inverse) {
    Value *in[4] = {P(t, "q", 2, 4, 5, 8), P(t, "k", 2, 2, 5, 8), NULL, NULL};
    if (tables) {
        double cs[40], sn[40];
        for (int i = 0; i < 40; i++) cs[i] = cos(0.3 * i) * 1.1, sn[i] = sin(0.7 * i + 0.2);
        in[2] = gt_input(t, "cos", DT_f32, 2, D(5, 8), cs);
        in[3] = gt_input(t, "sin", DT_f32, 2, D(5, 8), sn);
    }
    Node *n = gt_node(t, OP_rope_qk, tables ? 4 : 2, in);
    ir_set_float(t->g, n, "theta", 100.0);
    ir_set_int(t->g, n, "inverse", inverse);
    gt_emit(t, n);
    Node *c = gt_node(t, OP_concat, 2, n->out);
    ir_set_int(t->g, c, "axis", 1);
    return gt_emit(t, c);
}
static Value *c_rope_qk(GT *t) { return rope_qk(t, false, 0); }
static Value *c_rope_qk_inverse(GT *t) { return rope_qk(t, false, 1); }
static Value *c_rope_qk_tables(GT *t) { return rope_qk(t, true, 0); }
static Value *c_rope_qk_tables_inverse(GT *t) { return rope_qk(t, true, 1); }

/* x [2,3,5] w [7,5]: classes=6 (the last row of w is padding), chunk 2,
 * one ignored target. */
static Value *c_linear_ce(GT *t) {
    static const double tg[6] = {2, 0, -100, 5, 5, 1};
    Value *in[3] = {PF(t, "x", FILL_UNIFORM, -1.5, 1.5, 2, 3, 5), PF(t, "w", FILL_UNIFORM, -1, 1, 7, 5),
                    gt_input(t, "targets", DT_i32, 2, D(2, 3), tg)};
    Node *n = gt_node(t, OP_linear_cross_entropy, 3, in);
    ir_set_int(t->g, n, "classes", 6);
    ir_set_int(t->g, n, "chunk", 2);
    return gt_emit(t, n);
}

static const Case cases[] = {
    {OP_neg, "neg", c_neg}, {OP_exp, "exp", c_exp}, {OP_log, "log", c_log}, {OP_sqrt, "sqrt", c_sqrt},
    {OP_rsqrt, "rsqrt", c_rsqrt}, {OP_tanh, "tanh", c_tanh}, {OP_sigmoid, "sigmoid", c_sigmoid},
    {OP_relu, "relu", c_relu}, {OP_gelu, "gelu approx=0", c_gelu_erf}, {OP_gelu, "gelu approx=1", c_gelu_tanh},
    {OP_silu, "silu", c_silu}, {OP_abs, "abs", c_abs}, {OP_cast, "cast f32->bf16", c_cast_bf16},
    {OP_cast, "cast f32->f64", c_cast_f64},

    {OP_add, "add", c_add}, {OP_sub, "sub", c_sub}, {OP_mul, "mul", c_mul}, {OP_div, "div", c_div},
    {OP_maximum, "maximum", c_maximum}, {OP_minimum, "minimum", c_minimum}, {OP_mul, "mul x*x", c_mul_square},

    {OP_sum, "sum axes=[1]", c_sum_1}, {OP_sum, "sum axes=[0,2] keepdim", c_sum_02k}, {OP_sum, "sum all", c_sum_all},
    {OP_mean, "mean axes=[-1]", c_mean_last}, {OP_mean, "mean axes=[0,1] keepdim", c_mean_01k},
    {OP_mean, "mean all keepdim", c_mean_all}, {OP_max, "max axes=[2]", c_max_2}, {OP_max, "max axes=[0,1] keepdim", c_max_01k},

    {OP_reshape, "reshape", c_reshape}, {OP_permute, "permute", c_permute}, {OP_broadcast, "broadcast", c_broadcast},
    {OP_slice, "slice", c_slice}, {OP_pad, "pad", c_pad}, {OP_concat, "concat", c_concat},

    {OP_matmul, "matmul ta=0 tb=0", c_mm00}, {OP_matmul, "matmul ta=0 tb=1", c_mm01},
    {OP_matmul, "matmul ta=1 tb=0", c_mm10}, {OP_matmul, "matmul ta=1 tb=1", c_mm11},
    {OP_matmul, "matmul [2,3,M,K]x[K,N]", c_mm_bA00}, {OP_matmul, "matmul [2,M,K]x[N,K] tb", c_mm_bA01},
    {OP_matmul, "matmul [2,K,M]x[K,N] ta", c_mm_bA10}, {OP_matmul, "matmul [2,K,M]x[N,K] ta tb", c_mm_bA11},
    {OP_matmul, "matmul [M,K]x[2,K,N]", c_mm_bB00}, {OP_matmul, "matmul [K,M]x[2,N,K] ta tb", c_mm_bB11},
    {OP_matmul, "matmul [2,1,M,K]x[3,K,N]", c_mm_bAB00}, {OP_matmul, "matmul [2,1,K,M]x[1,3,K,N] ta", c_mm_bAB10},
    {OP_matmul, "matmul [2,M,K]x[3,2,N,K] tb", c_mm_bAB01}, {OP_matmul, "matmul [1,2,K,M]x[2,N,K] ta tb", c_mm_bAB11},

    {OP_embedding, "embedding (repeated indices)", c_embedding},
    {OP_softmax, "softmax axis=-1", c_softmax_last}, {OP_softmax, "softmax axis=0", c_softmax_0},
    {OP_layer_norm, "layer_norm", c_layer_norm}, {OP_rms_norm, "rms_norm", c_rms_norm},
    {OP_rope, "rope", c_rope}, {OP_rope, "rope inverse=1", c_rope_inverse},
    {OP_attention, "attention GQA causal", c_attn_causal}, {OP_attention, "attention GQA non-causal", c_attn_full},
    {OP_attention, "attention GQA non-causal S=7", c_attn_full_s7},
    {OP_dropout, "dropout p=0.3", c_dropout},
    {OP_cross_entropy, "cross_entropy (ignored target)", c_cross_entropy},
    {OP_cross_entropy, "cross_entropy (classes < V, ignored target)", c_cross_entropy_classes},

    {OP_swiglu, "swiglu", c_swiglu}, {OP_geglu, "geglu approx=0", c_geglu_erf}, {OP_geglu, "geglu approx=1", c_geglu_tanh},
    {OP_add_layer_norm, "add_layer_norm (y and s)", c_add_layer_norm}, {OP_add_layer_norm, "add_layer_norm (y only)", c_add_layer_norm_y},
    {OP_add_rms_norm, "add_rms_norm (y and s)", c_add_rms_norm}, {OP_add_rms_norm, "add_rms_norm (y only)", c_add_rms_norm_y},
    {OP_rope_qk, "rope_qk", c_rope_qk}, {OP_rope_qk, "rope_qk inverse=1", c_rope_qk_inverse},
    {OP_rope_qk, "rope_qk tables", c_rope_qk_tables}, {OP_rope_qk, "rope_qk tables inverse=1", c_rope_qk_tables_inverse},
    {OP_linear_cross_entropy, "linear_cross_entropy (classes < V, ignored target)", c_linear_ce},
};

static GTResult run_case(const Case *c, const char *label) {
    GT *t = gt_new(op_name(c->op));
    gt_loss_linear(t, c->fn(t));
    GTResult r = gt_check(t, label, 64);
    gt_free(t);
    return r;
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : NULL;
    int fails = 0;
    double worst[OP__COUNT] = {0};
    int64_t count[OP__COUNT] = {0};
    bool seen[OP__COUNT] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const Case *c = &cases[i];
        if (only && strcmp(only, op_name(c->op)) != 0) continue;
        int nv = c->fn == c_add || c->fn == c_sub || c->fn == c_mul || c->fn == c_div || c->fn == c_maximum || c->fn == c_minimum
                     ? (int)(sizeof bin_shapes / sizeof bin_shapes[0])
                     : 1;
        for (int v = 0; v < nv; v++) {
            bin_variant = v;
            char label[200];
            if (nv > 1) {
                const BinShapes *s = &bin_shapes[v];
                char a[64], b[64];
                Shape sa = shape_make(s->ra, s->a), sb = shape_make(s->rb, s->b);
                snprintf(label, sizeof label, "  case %s %s %s", c->label, shape_str(&sa, a, sizeof a), shape_str(&sb, b, sizeof b));
            } else {
                snprintf(label, sizeof label, "  case %s", c->label);
            }
            GTResult r = run_case(c, label);
            if (!r.ok || !(r.worst < GT_TOL)) {
                printf("FAIL: %s\n", label + 2);
                fails++;
            }
            if (r.worst > worst[c->op] || r.worst != r.worst) worst[c->op] = r.worst;
            count[c->op] += r.nchecked;
            seen[c->op] = true;
        }
    }
    printf("\n");
    for (int op = 0; op < OP__COUNT; op++) {
        if (!op_has(op, OPF_DIFF)) continue;
        if (!seen[op]) {
            if (only) continue;
            printf("FAIL: differentiable op %s has no gradient check\n", op_name(op));
            fails++;
            continue;
        }
        printf("gradcheck %s: worst rel err %.1e (%lld elements)\n", op_name(op), worst[op], (long long)count[op]);
    }
    printf("%s\n", fails ? "FAILED" : "all gradient checks passed");
    return fails ? 1 : 0;
}
