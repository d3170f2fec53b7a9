/* ir/interp.c — the reference interpreter.
 *
 * Runs a graph node by node with plain loops over doubles.  It is slow on
 * purpose: it is the oracle that gradient checks (finite differences in
 * f64), pass tests (the graph before and after a pass) and the code
 * generators are compared against, so each op below is written to be
 * checked against its definition (docs/interpreter.md) at a glance.
 *
 * Storage: one Tensor per value id.  Sources (input, param, state, constant,
 * iota) get theirs when the interpreter is made; param and state tensors
 * persist across runs and are replaced only by the graph's updates.  Every
 * other value gets its tensor the first time its node runs and keeps it.
 *
 * An op computes in double from its (already rounded) operands, writing into
 * zeroed result tensors; the driver then rounds each result to its dtype
 * (INTERP_F32) and truncates integer results toward zero, wrapping them into
 * their dtype (both modes: wrap_int, docs/interpreter.md).
 *
 * The file is longer than a pass because it is a column of the op table:
 * one short function per op (or family of ops), kept together so that they
 * can be read side by side with their definitions.
 */
#include "ir.h"
#include "philox.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct Interp {
    Graph     *g;
    InterpMode mode;
    int        nvals;   /* entries in val and stamp (grows with g->nvalues) */
    Tensor    *val;     /* [nvals], by value id; data NULL until computed */
    uint64_t  *stamp;   /* [nvals]: the run that last computed the value */
    uint64_t   run;     /* calls of interp_run_phase so far */
};

typedef bool InterpFn(Interp *it, Node *n, Diag *d);

/* ===================================================================== */
/* Rounding                                                              */
/* ===================================================================== */

/* Rounds x to the nearest number of a binary floating-point format with p
 * significand bits (the implicit leading one included) and normal exponents
 * emin..emax, ties to the even significand.  Below 2^emin the grid is the
 * subnormal one (spacing 2^(emin-p+1)); a result above the largest finite
 * number is an infinity; NaN, infinities and signed zeros pass through.
 * Independent of the FPU rounding mode. */
static double round_format(double x, int p, int emin, int emax) {
    if (isnan(x) || isinf(x) || x == 0) return x;
    double ax = fabs(x);
    int e;
    frexp(ax, &e);                          /* ax = f * 2^e, f in [0.5, 1) */
    int E = e - 1 < emin ? emin : e - 1;    /* exponent of the grid ax lies on */
    double ulp = ldexp(1.0, E - (p - 1));   /* spacing of that grid */
    double q = ax / ulp;                    /* exact (power-of-two scaling), q < 2^p */
    double fl = floor(q), frac = q - fl;    /* exact for q >= 0 */
    if (frac > 0.5 || (frac == 0.5 && fmod(fl, 2.0) != 0)) fl += 1;
    double r = fl * ulp;
    double maxfinite = ldexp(2.0 - ldexp(1.0, 1 - p), emax);
    if (r > maxfinite) r = INFINITY;
    return copysign(r, x);
}

/* bfloat16: 8 significand bits, the exponent range of f32. */
static double round_bf16(double x) { return round_format(x, 8, -126, 127); }
/* IEEE binary16: 11 significand bits, normal exponents -14..15 (max 65504). */
static double round_f16(double x) { return round_format(x, 11, -14, 15); }

static double saturate_int(DType dt, double x);

/* An integer x (truncated toward zero) wrapped into dtype dt, two's
 * complement: u8 modulo 256, i32 modulo 2^32 into [-2^31, 2^31); NaN 0.
 * An i64 in a double is exact only below 2^53: it is saturated at
 * +-2^63 (the doubles of INT64_MIN and INT64_MAX), not wrapped. */
static double wrap_int(DType dt, double x) {
    if (x != x) return 0;
    if (dt == DT_i64) return saturate_int(dt, x);
    double m = ldexp(1.0, dtype_size[dt] * 8), r = fmod(trunc(x), m); /* fmod is exact */
    if (r < 0) r += m;
    if (dt != DT_u8 && r >= m / 2) r -= m;
    return r;
}

/* A float x cast to integer dtype dt: truncated toward zero, saturated at
 * the dtype's range, NaN 0 (as trn_f2i in the generated code). */
static double saturate_int(DType dt, double x) {
    if (x != x) return 0;
    /* (i64's hi rounds to 2^63, the double of INT64_MAX) */
    double lo = dt == DT_u8 ? 0 : -ldexp(1.0, dtype_size[dt] * 8 - 1), hi = dt == DT_u8 ? 255 : ldexp(1.0, dtype_size[dt] * 8 - 1) - 1;
    x = trunc(x);
    return x < lo ? lo : x > hi ? hi : x;
}

/* Integer add, sub, mul, div in 64 bits, wrapping (the result then wraps
 * into its dtype); the division's zero divisor is refused before. */
static double int_binary(Op op, double a, double b) {
    double sa = saturate_int(DT_i64, a), sb = saturate_int(DT_i64, b);
    int64_t x = sa >= 0x1p63 ? INT64_MAX : (int64_t)sa, y = sb >= 0x1p63 ? INT64_MAX : (int64_t)sb;
    uint64_t r;
    switch (op) {
    case OP_add: r = (uint64_t)x + (uint64_t)y; break;
    case OP_sub: r = (uint64_t)x - (uint64_t)y; break;
    case OP_mul: r = (uint64_t)x * (uint64_t)y; break;
    default: r = y == -1 ? 0 - (uint64_t)x : (uint64_t)(x / y); break; /* INT64_MIN / -1 wraps */
    }
    return (double)(int64_t)r;
}

/* The value x takes when stored in dtype dt under the interpreter's mode. */
static double round_to(const Interp *it, DType dt, double x) {
    if (!dtype_is_float[dt]) return wrap_int(dt, x);   /* integers: toward zero, wrapped */
    if (it->mode == INTERP_F64) return x;
    switch (dt) {
    case DT_f32: return (double)(float)x;
    case DT_bf16: return round_bf16(x);
    case DT_f16: return round_f16(x);
    default: return x;                          /* f64 */
    }
}

static void round_tensor(const Interp *it, Tensor *t) {
    if (dtype_is_float[t->ty.dt] && (it->mode == INTERP_F64 || t->ty.dt == DT_f64)) return;
    for (int64_t i = 0; i < t->n; i++) t->data[i] = round_to(it, t->ty.dt, t->data[i]);
}

/* ===================================================================== */
/* Storage                                                               */
/* ===================================================================== */

/* Grows the tables when the graph gained values since the last call. */
static void ensure_values(Interp *it) {
    int nv = it->g->nvalues;
    if (nv <= it->nvals) return;
    it->val = xrealloc(it->val, sizeof(Tensor) * (size_t)nv);
    it->stamp = xrealloc(it->stamp, sizeof(uint64_t) * (size_t)nv);
    memset(it->val + it->nvals, 0, sizeof(Tensor) * (size_t)(nv - it->nvals));
    memset(it->stamp + it->nvals, 0, sizeof(uint64_t) * (size_t)(nv - it->nvals));
    it->nvals = nv;
}

/* The tensor of v, allocated (zeroed) with v's type if it has none yet;
 * NULL when there is no memory for it (a model too large for the
 * interpreter's doubles: a user's error, which the caller reports with
 * oom_error, not a compiler bug that dies). */
static Tensor *alloc_value(Interp *it, const Value *v) {
    Tensor *t = &it->val[v->id];
    int64_t n = shape_numel(&v->ty.shape);
    if (!t->data || t->n != n) {
        free(t->data);
        t->data = (uint64_t)n <= SIZE_MAX / sizeof(double) ? calloc(n ? (size_t)n : 1, sizeof(double)) : NULL;
        t->n = 0;
        if (!t->data) return NULL;
    }
    t->ty = v->ty;
    t->n = n;
    return t;
}

/* The error for a value alloc_value found no memory for: its name (a
 * source's) or the op that computes it, its type and its size. */
static void oom_error(Diag *d, const Value *v) {
    char what[256], tb[160];
    const Node *def = v->def;
    const char *name = def && op_has(def->op, OPF_SOURCE) ? ir_source_name(def) : NULL;
    if (name) snprintf(what, sizeof what, "%s '%s'", op_name(def->op), name);
    else snprintf(what, sizeof what, "the result of %s", def ? op_name(def->op) : "a node");
    int64_t n = shape_numel(&v->ty.shape);
    error_at(d, def ? def->loc : NOLOC, "out of memory for %s (%%%d, %s): %lld elements, %.4g GiB as the interpreter's doubles", what, v->id,
             type_str(&v->ty, tb, sizeof tb), (long long)n, (double)n * sizeof(double) / (1024.0 * 1024.0 * 1024.0));
}

/* The storage of a source node, made on first use: zeros for input, param
 * and state (interp_init fills params and states), {value} for constant,
 * the index along {axis} for iota.  NULL when out of memory (alloc_value). */
static Tensor *source_storage(Interp *it, Node *n) {
    Tensor *t = &it->val[n->out[0]->id];
    if (t->data) return t;
    if (!(t = alloc_value(it, n->out[0]))) return NULL;
    if (n->op == OP_constant) {
        double c = round_to(it, t->ty.dt, ir_float(n, "value", 0.0));
        for (int64_t i = 0; i < t->n; i++) t->data[i] = c;
    } else if (n->op == OP_iota && t->ty.shape.rank > 0) {
        const Shape *s = &t->ty.shape;
        int ax = (int)ir_int(n, "axis", 0);
        int64_t inner = 1;
        for (int k = ax + 1; k < s->rank; k++) inner *= s->d[k];
        for (int64_t i = 0; i < t->n; i++) t->data[i] = round_to(it, t->ty.dt, (double)((i / inner) % s->d[ax]));
    }
    return t;
}

static bool is_persistent(const Node *n) { return n->op == OP_input || n->op == OP_param || n->op == OP_state; }

/* ===================================================================== */
/* Index helpers                                                         */
/* ===================================================================== */

static const Tensor *arg(Interp *it, const Node *n, int i) { return &it->val[n->in[i]->id]; }
static Tensor *res(Interp *it, const Node *n, int i) { return &it->val[n->out[i]->id]; }

/* Views shape s as [outer, s[axis], inner]. */
static void split_at(const Shape *s, int axis, int64_t *outer, int64_t *len, int64_t *inner) {
    *outer = *inner = 1;
    for (int k = 0; k < axis; k++) *outer *= s->d[k];
    for (int k = axis + 1; k < s->rank; k++) *inner *= s->d[k];
    *len = s->d[axis];
}

/* Strides of x (row-major) as seen from a numpy-broadcast result of shape
 * out: 0 along the dimensions x lacks or has as 1. */
static void bcast_strides(const Shape *x, const Shape *out, int64_t st[IR_MAX_RANK]) {
    int64_t stride = 1;
    for (int k = out->rank - 1; k >= 0; k--) {
        int kx = k - (out->rank - x->rank);
        if (kx < 0 || x->d[kx] == 1) {
            st[k] = 0;
        } else {
            st[k] = stride;
        }
        if (kx >= 0) stride *= x->d[kx];
    }
}

/* Flat index in x of the element at flat index i of the result. */
static int64_t bcast_index(int64_t i, const Shape *out, const int64_t st[IR_MAX_RANK]) {
    int64_t j = 0;
    for (int k = out->rank - 1; k >= 0; k--) {
        j += (i % out->d[k]) * st[k];
        i /= out->d[k];
    }
    return j;
}

/* The axes a reduction reduces ({axes}; every axis when absent). */
static void reduced_axes(const Node *n, int rank, bool mark[IR_MAX_RANK]) {
    const Attr *a = ir_attr(n, "axes");
    for (int k = 0; k < IR_MAX_RANK; k++) mark[k] = a == NULL && k < rank;
    if (a && a->kind == ATTR_INTS)
        for (int k = 0; k < a->n; k++) mark[a->v[k]] = true;
}

/* Flat index, in the reduced tensor, of element i of x (the same with or
 * without keepdim: kept axes have size 1). */
static int64_t reduce_index(const Shape *x, const bool mark[IR_MAX_RANK], int64_t i) {
    int64_t j = 0, stride = 1;
    for (int k = x->rank - 1; k >= 0; k--) {
        int64_t c = i % x->d[k];
        i /= x->d[k];
        if (!mark[k]) {
            j += c * stride;
            stride *= x->d[k];
        }
    }
    return j;
}

/* ===================================================================== */
/* Pointwise ops                                                         */
/* ===================================================================== */

#define SQRT_2_OVER_PI 0.79788456080286535588  /* sqrt(2/pi) */
#define INV_SQRT_2     0.70710678118654752440  /* 1/sqrt(2) */
#define INV_SQRT_2PI   0.39894228040143267794  /* 1/sqrt(2 pi) */

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

/* approx 0: 0.5 x (1 + erf(x / sqrt 2));  approx 1: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
static double gelu(double x, int approx) {
    if (approx == 0) return 0.5 * x * (1.0 + erf(x * INV_SQRT_2));
    return 0.5 * x * (1.0 + tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)));
}

/* The exact derivative of the chosen gelu form. */
static double gelu_deriv(double x, int approx) {
    if (approx == 0) return 0.5 * (1.0 + erf(x * INV_SQRT_2)) + x * INV_SQRT_2PI * exp(-0.5 * x * x);
    double t = tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044715 * x * x);
}

static double unary(Op op, double x, int approx) {
    switch (op) {
    case OP_neg: return -x;
    case OP_exp: return exp(x);
    case OP_log: return log(x);
    case OP_sqrt: return sqrt(x);
    case OP_rsqrt: return 1.0 / sqrt(x);
    case OP_tanh: return tanh(x);
    case OP_sigmoid: return sigmoid(x);
    case OP_relu: return x > 0 ? x : 0.0;
    case OP_gelu: return gelu(x, approx);
    case OP_silu: return x * sigmoid(x);
    case OP_abs: return fabs(x);
    case OP_sign: return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
    case OP_cast: return x; /* the rounding of the result to {dtype} is the conversion */
    default: unreachable();
    }
}

/* For the gradient ops a = dy and b = the saved value (y or x, see ops.h). */
static double binary(Op op, double a, double b, int approx) {
    switch (op) {
    case OP_add: return a + b;
    case OP_sub: return a - b;
    case OP_mul: return a * b;
    case OP_div: return a / b;  /* integers: truncated by the result rounding */
    case OP_maximum: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    case OP_minimum: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    case OP_ge: return a >= b ? 1.0 : 0.0;
    case OP_tanh_grad: return a * (1.0 - b * b);
    case OP_sigmoid_grad: return a * b * (1.0 - b);
    case OP_relu_grad: return b > 0 ? a : 0.0;
    case OP_gelu_grad: return a * gelu_deriv(b, approx);
    case OP_silu_grad: {
        double s = sigmoid(b);
        return a * s * (1.0 + b * (1.0 - s));
    }
    case OP_swiglu: return a * sigmoid(a) * b;
    case OP_geglu: return gelu(a, approx) * b;
    default: unreachable();
    }
}

/* y = f(x) elementwise. */
static bool run_unary(Interp *it, Node *n, Diag *d) {
    (void)d;
    const Tensor *x = arg(it, n, 0);
    Tensor *y = res(it, n, 0);
    int approx = (int)ir_int(n, "approx", 0);
    bool f2i = n->op == OP_cast && !dtype_is_float[y->ty.dt] && dtype_is_float[x->ty.dt];
    for (int64_t i = 0; i < y->n; i++) y->data[i] = f2i ? saturate_int(y->ty.dt, x->data[i]) : unary(n->op, x->data[i], approx);
    return true;
}

/* y = f(a, b) elementwise with numpy broadcasting. */
static bool run_binary(Interp *it, Node *n, Diag *d) {
    const Tensor *a = arg(it, n, 0), *b = arg(it, n, 1);
    Tensor *y = res(it, n, 0);
    const Shape *ys = &y->ty.shape;
    int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK];
    bcast_strides(&a->ty.shape, ys, sa);
    bcast_strides(&b->ty.shape, ys, sb);
    bool intdiv = n->op == OP_div && !dtype_is_float[y->ty.dt];
    bool intop = !dtype_is_float[y->ty.dt] && (n->op == OP_add || n->op == OP_sub || n->op == OP_mul || n->op == OP_div);
    int approx = (int)ir_int(n, "approx", 0);
    for (int64_t i = 0; i < y->n; i++) {
        double av = a->data[bcast_index(i, ys, sa)], bv = b->data[bcast_index(i, ys, sb)];
        if (intdiv && bv == 0) {
            error_at(d, n->loc, "div: integer division by zero (element %lld)", (long long)i);
            return false;
        }
        y->data[i] = intop ? int_binary(n->op, av, bv) : binary(n->op, av, bv, approx);
    }
    return true;
}

/* ===================================================================== */
/* Reductions                                                            */
/* ===================================================================== */

/* sum, mean, max of x over {axes}. */
static bool run_reduce(Interp *it, Node *n, Diag *d) {
    (void)d;
    const Tensor *x = arg(it, n, 0);
    Tensor *y = res(it, n, 0);
    bool mark[IR_MAX_RANK];
    reduced_axes(n, x->ty.shape.rank, mark);
    if (n->op == OP_max)
        for (int64_t j = 0; j < y->n; j++) y->data[j] = -INFINITY;
    for (int64_t i = 0; i < x->n; i++) {
        double v = x->data[i], *out = &y->data[reduce_index(&x->ty.shape, mark, i)];
        if (n->op == OP_max) {
            if (v > *out || isnan(v)) *out = v;
        } else {
            *out += v;
        }
    }
    if (n->op == OP_mean) {
        double count = (double)(x->n / y->n);
        for (int64_t j = 0; j < y->n; j++) y->data[j] /= count;
    }
    return true;
}

/* max_grad(dy, x, y): dx = dy where x == y (broadcast over the reduced
 * axes), else 0; every tie gets the whole dy. */
static bool run_max_grad(Interp *it, Node *n, Diag *d) {
    (void)d;
    const Tensor *dy = arg(it, n, 0), *x = arg(it, n, 1), *y = arg(it, n, 2);
    Tensor *dx = res(it, n, 0);
    bool mark[IR_MAX_RANK];
    reduced_axes(n, x->ty.shape.rank, mark);
    for (int64_t i = 0; i < x->n; i++) {
        int64_t j = reduce_index(&x->ty.shape, mark, i);
        dx->data[i] = x->data[i] == y->data[j] ? dy->data[j] : 0.0;
    }
    return true;
}

/* ===================================================================== */
/* Shape ops                                                             */
/* ===================================================================== */

/* Row-major order is unchanged: a copy. */
static bool run_reshape(Interp *it, Node *n, Diag *d) {
    (void)d;
    memcpy(res(it, n, 0)->data, arg(it, n, 0)->data, sizeof(double) * (size_t)arg(it, n, 0)->n);
    return true;
}

/* y[i_0, ..., i_r-1] = x[j] with j[perm[k]] = i_k. */
static bool run_permute(Interp *it, Node *n, Diag *d) {
    (void)d;
    const Tensor *x = arg(it, n, 0);
    Tensor *y = res(it, n, 0);
    const Attr *perm = ir_attr(n, "perm");
    const Shape *xs = &x->ty.shape, *ys = &y->ty.shape;
    int64_t sx[IR_MAX_RANK], stride = 1;
    for (int k = xs->rank - 1; k >= 0; k--) {
        sx[k] = stride;
        stride *= xs->d[k];
    }
    for (int64_t i = 0; i < y->n; i++) {
        int64_t rest = i, src = 0;
        for (int k = ys->rank - 1; k >= 0; k--) {
            src += (rest % ys->d[k]) * sx[perm->v[k]];
            rest /= ys->d[k];
        }
        y->data[i] = x->data[src];
    }
    return true;
}

/* numpy broadcast of x to {shape}. */
static bool run_broadcast(Interp *it, Node *n, Diag *d) {
    (void)d;
    const Tensor *x = arg(it, n, 0);
    Tensor *y = res(it, n, 0);
    int64_t st[IR_MAX_RANK];
    bcast_strides(&x->ty.shape, &y->ty.shape, st);
    for (int64_t i = 0; i < y->n; i++) y->data[i] = x->data[bcast_index(i, &y->ty.shape, st)];
    return true;
}

/* y[o, k, in] = x[o, start + k, in], 0 <= k < end - start. */
static bool run_slice(Interp *it, Node *n, Diag *d) {
    (void)d;
    const Tensor *x = arg(it, n, 0);
    Tensor *y = res(it, n, 0);
    int ax = (int)ir_int(n, "axis", 0);
    int64_t start = ir_int(n, "start", 0), outer, len, inner;
    split_at(&x->ty.shape, ax, &outer, &len, &inner);
    int64_t ylen = y->ty.shape.d[ax];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < ylen; k++)
            for (int64_t in = 0; in < inner; in++)
                y->data[(o * ylen + k) * inner + in] = x->data[(o * len + start + k) * inner + in];
    return true;
}

/* y[o, k, in] = x[o, k - lo, in] where 0 <= k - lo < len, else 0. */
static bool run_pad(Interp *it, Node *n, Diag *d) {
    (void)d;
    const Tensor *x = arg(it, n, 0);
    Tensor *y = res(it, n, 0);
    int ax = (int)ir_int(n, "axis", 0);
    int64_t lo = ir_int(n, "lo", 0), outer, len, inner;
    split_at(&x->ty.shape, ax, &outer, &len, &inner);
    int64_t ylen = y->ty.shape.d[ax];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < len; k++)
            for (int64_t in = 0; in < inner; in++)
                y->data[(o * ylen + lo + k) * inner + in] = x->data[(o * len + k) * inner + in];
    return true;
}

/* The operands one after the other along {axis}. */
static bool run_concat(Interp *it, Node *n, Diag *d) {
    (void)d;
    Tensor *y = res(it, n, 0);
    int ax = (int)ir_int(n, "axis", 0);
    int64_t outer, ylen, inner, at = 0;
    split_at(&y->ty.shape, ax, &outer, &ylen, &inner);
    for (int j = 0; j < n->nin; j++) {
        const Tensor *x = arg(it, n, j);
        int64_t len = x->ty.shape.d[ax];
        for (int64_t o = 0; o < outer; o++)
            for (int64_t k = 0; k < len; k++)
                for (int64_t in = 0; in < inner; in++)
                    y->data[(o * ylen + at + k) * inner + in] = x->data[(o * len + k) * inner + in];
        at += len;
    }
    return true;
}

/* ===================================================================== */
/* matmul                                                                */
/* ===================================================================== */

/* y[..., m, n] = sum_k A[..., m, k] B[..., k, n], A = ta ? a^T : a (a stored
 * [..., K, M]), B = tb ? b^T : b (b stored [..., N, K]); the batch dims
 * broadcast; accumulated in double. */
static bool run_matmul(Interp *it, Node *n, Diag *d) {
    (void)d;
    const Tensor *a = arg(it, n, 0), *b = arg(it, n, 1);
    Tensor *y = res(it, n, 0);
    int ta = (int)ir_int(n, "ta", 0), tb = (int)ir_int(n, "tb", 0);
    int ra = a->ty.shape.rank, rb = b->ty.shape.rank, ry = y->ty.shape.rank;
    int64_t M = y->ty.shape.d[ry - 2], N = y->ty.shape.d[ry - 1];
    int64_t K = a->ty.shape.d[ta ? ra - 2 : ra - 1];
    Shape yb = shape_make(ry - 2, y->ty.shape.d), ab = shape_make(ra - 2, a->ty.shape.d), bb = shape_make(rb - 2, b->ty.shape.d);
    int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK];
    bcast_strides(&ab, &yb, sa); /* in matrices */
    bcast_strides(&bb, &yb, sb);
    int64_t nbatch = shape_numel(&yb);
    for (int64_t bi = 0; bi < nbatch; bi++) {
        const double *A = a->data + bcast_index(bi, &yb, sa) * M * K;
        const double *B = b->data + bcast_index(bi, &yb, sb) * K * N;
        double *Y = y->data + bi * M * N;
        for (int64_t m = 0; m < M; m++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                for (int64_t k = 0; k < K; k++) acc += (ta ? A[k * M + m] : A[m * K + k]) * (tb ? B[j * K + k] : B[k * N + j]);
                Y[m * N + j] = acc;
            }
    }
    return true;
}

/* ===================================================================== */
/* Neural-network ops                                                    */
/* ===================================================================== */

/* Reports an index (a double holding an integer) outside [0, hi). */
static bool check_index(Diag *d, Node *n, const char *what, double v, int64_t pos, int64_t hi) {
    if (v >= 0 && v < (double)hi) return true;
    error_at(d, n->loc, "%s: %s %.17g at position %lld is outside [0, %lld)", op_name(n->op), what, v, (long long)pos, (long long)hi);
    return false;
}

/* y[p, :] = table[idx[p], :]. */
static bool run_embedding(Interp *it, Node *n, Diag *d) {
    const Tensor *table = arg(it, n, 0), *idx = arg(it, n, 1);
    Tensor *y = res(it, n, 0);
    int64_t V = table->ty.shape.d[0], C = table->ty.shape.d[1];
    for (int64_t p = 0; p < idx->n; p++) {
        if (!check_index(d, n, "index", idx->data[p], p, V)) return false;
        int64_t r = (int64_t)idx->data[p];
        memcpy(y->data + p * C, table->data + r * C, sizeof(double) * (size_t)C);
    }
    return true;
}

/* dtable[idx[p], :] += dy[p, :] into zeros [rows, C]. */
static bool run_embedding_grad(Interp *it, Node *n, Diag *d) {
    const Tensor *dy = arg(it, n, 0), *idx = arg(it, n, 1);
    Tensor *dt = res(it, n, 0);
    int64_t V = dt->ty.shape.d[0], C = dt->ty.shape.d[1];
    for (int64_t p = 0; p < idx->n; p++) {
        if (!check_index(d, n, "index", idx->data[p], p, V)) return false;
        int64_t r = (int64_t)idx->data[p];
        for (int64_t c = 0; c < C; c++) dt->data[r * C + c] += dy->data[p * C + c];
    }
    return true;
}

/* y = exp(x - max) / sum exp(x - max) along {axis}. */
static bool run_softmax(Interp *it, Node *n, Diag *d) {
    (void)d;
    const Tensor *x = arg(it, n, 0);
    Tensor *y = res(it, n, 0);
    int64_t outer, len, inner;
    split_at(&x->ty.shape, ir_norm_axis(ir_int(n, "axis", -1), x->ty.shape.rank), &outer, &len, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            const double *xr = x->data + o * len * inner + in;
            double *yr = y->data + o * len * inner + in;
            double m = -INFINITY, s = 0;
            for (int64_t k = 0; k < len; k++) m = xr[k * inner] > m ? xr[k * inner] : m;
            for (int64_t k = 0; k < len; k++) s += yr[k * inner] = exp(xr[k * inner] - m);
            for (int64_t k = 0; k < len; k++) yr[k * inner] /= s;
        }
    return true;
}

/* dx = y * (dy - sum(dy * y)) along {axis}. */
static bool run_softmax_grad(Interp *it, Node *n, Diag *d) {
    (void)d;
    const Tensor *dy = arg(it, n, 0), *y = arg(it, n, 1);
    Tensor *dx = res(it, n, 0);
    int64_t outer, len, inner;
    split_at(&y->ty.shape, ir_norm_axis(ir_int(n, "axis", -1), y->ty.shape.rank), &outer, &len, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * len * inner + in;
            double dot = 0;
            for (int64_t k = 0; k < len; k++) dot += dy->data[base + k * inner] * y->data[base + k * inner];
            for (int64_t k = 0; k < len; k++)
                dx->data[base + k * inner] = y->data[base + k * inner] * (dy->data[base + k * inner] - dot);
        }
    return true;
}

/* Per row of the last axis (C): mean, var = mean((x - mean)^2) (biased),
 * rstd = 1/sqrt(var + eps), y = (x - mean) rstd w + b.  Results y, mean, rstd. */
static bool run_layer_norm(Interp *it, Node *n, Diag *d) {
    (void)d;
    const Tensor *x = arg(it, n, 0), *w = arg(it, n, 1), *b = arg(it, n, 2);
    Tensor *y = res(it, n, 0), *mean = res(it, n, 1), *rstd = res(it, n, 2);
    double eps = ir_float(n, "eps", 1e-5);
    int64_t C = w->n, rows = x->n / C;
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x->data + r * C;
        double mu = 0, var = 0;
        for (int64_t c = 0; c < C; c++) mu += xr[c];
        mu /= (double)C;
        for (int64_t c = 0; c < C; c++) var += (xr[c] - mu) * (xr[c] - mu);
        var /= (double)C;
        double rs = 1.0 / sqrt(var + eps);
        for (int64_t c = 0; c < C; c++) y->data[r * C + c] = (xr[c] - mu) * rs * w->data[c] + b->data[c];
        mean->data[r] = mu;
        rstd->data[r] = rs;
    }
    return true;
}

/* xhat = (x - mean) rstd, dxhat = dy w,
 * dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)),
 * dw = sum over rows of dy xhat, db = sum over rows of dy. */
static bool run_layer_norm_grad(Interp *it, Node *n, Diag *d) {
    (void)d;
    const Tensor *dy = arg(it, n, 0), *x = arg(it, n, 1), *w = arg(it, n, 2), *mean = arg(it, n, 3), *rstd = arg(it, n, 4);
    Tensor *dx = res(it, n, 0), *dw = res(it, n, 1), *db = res(it, n, 2);
    int64_t C = w->n, rows = x->n / C;
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x->data + r * C, *dyr = dy->data + r * C;
        double mu = mean->data[r], rs = rstd->data[r], m1 = 0, m2 = 0;
        for (int64_t c = 0; c < C; c++) {
            double xhat = (xr[c] - mu) * rs, dxhat = dyr[c] * w->data[c];
            m1 += dxhat;
            m2 += dxhat * xhat;
            dw->data[c] += dyr[c] * xhat;
            db->data[c] += dyr[c];
        }
        m1 /= (double)C;
        m2 /= (double)C;
        for (int64_t c = 0; c < C; c++) {
            double xhat = (xr[c] - mu) * rs, dxhat = dyr[c] * w->data[c];
            dx->data[r * C + c] = rs * (dxhat - m1 - xhat * m2);
        }
    }
    return true;
}

/* rstd = 1/sqrt(mean(x^2) + eps), y = x rstd w.  Results y, rstd. */
static bool run_rms_norm(Interp *it, Node *n, Diag *d) {
    (void)d;
    const Tensor *x = arg(it, n, 0), *w = arg(it, n, 1);
    Tensor *y = res(it, n, 0), *rstd = res(it, n, 1);
    double eps = ir_float(n, "eps", 1e-6);
    int64_t C = w->n, rows = x->n / C;
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x->data + r * C;
        double ms = 0;
        for (int64_t c = 0; c < C; c++) ms += xr[c] * xr[c];
        double rs = 1.0 / sqrt(ms / (double)C + eps);
        for (int64_t c = 0; c < C; c++) y->data[r * C + c] = xr[c] * rs * w->data[c];
        rstd->data[r] = rs;
    }
    return true;
}

/* xhat = x rstd, dxhat = dy w, dx = rstd (dxhat - xhat mean(dxhat xhat)),
 * dw = sum over rows of dy xhat. */
static bool run_rms_norm_grad(Interp *it, Node *n, Diag *d) {
    (void)d;
    const Tensor *dy = arg(it, n, 0), *x = arg(it, n, 1), *w = arg(it, n, 2), *rstd = arg(it, n, 3);
    Tensor *dx = res(it, n, 0), *dw = res(it, n, 1);
    int64_t C = w->n, rows = x->n / C;
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x->data + r * C, *dyr = dy->data + r * C;
        double rs = rstd->data[r], m2 = 0;
        for (int64_t c = 0; c < C; c++) {
            double xhat = xr[c] * rs;
            m2 += dyr[c] * w->data[c] * xhat;
            dw->data[c] += dyr[c] * xhat;
        }
        m2 /= (double)C;
        for (int64_t c = 0; c < C; c++) dx->data[r * C + c] = rs * (dyr[c] * w->data[c] - xr[c] * rs * m2);
    }
    return true;
}

/* Rotate-half RoPE on rows x[..., t, :] of length D: for i < D/2,
 * angle = t theta^(-2i/D) (negated when inverse), x1 = x[i], x2 = x[i + D/2],
 * y[i] = x1 cos - x2 sin, y[i + D/2] = x1 sin + x2 cos. */
static bool run_rope(Interp *it, Node *n, Diag *d) {
    (void)d;
    const Tensor *x = arg(it, n, 0);
    Tensor *y = res(it, n, 0);
    const Shape *s = &x->ty.shape;
    int64_t T = s->d[s->rank - 2], D = s->d[s->rank - 1], half = D / 2, rows = x->n / D;
    double theta = ir_float(n, "theta", 10000.0), sign = ir_int(n, "inverse", 0) ? -1.0 : 1.0;
    for (int64_t r = 0; r < rows; r++) {
        int64_t t = r % T;
        const double *xr = x->data + r * D;
        double *yr = y->data + r * D;
        for (int64_t i = 0; i < half; i++) {
            double angle = sign * (double)t * pow(theta, -2.0 * (double)i / (double)D);
            double c = cos(angle), sn = sin(angle), x1 = xr[i], x2 = xr[i + half];
            yr[i] = x1 * c - x2 * sn;
            yr[i + half] = x1 * sn + x2 * c;
        }
    }
    return true;
}

/* The shapes of attention: q [B,H,T,D], k and v [B,Hkv,S,D]. */
typedef struct AttnDims { int64_t B, H, Hkv, T, S, D; int causal; double scale; } AttnDims;

static AttnDims attn_dims(const Node *n, const Tensor *q, const Tensor *k) {
    AttnDims a = {q->ty.shape.d[0], q->ty.shape.d[1], k->ty.shape.d[1], q->ty.shape.d[2], k->ty.shape.d[2], q->ty.shape.d[3],
                  (int)ir_int(n, "causal", 1), 0};
    a.scale = ir_float(n, "scale", 1.0 / sqrt((double)a.D));
    return a;
}

/* Keys a query row i attends to: j < S, and j <= i when causal. */
static int64_t attn_keys(const AttnDims *a, int64_t i) { return a->causal ? i + 1 : a->S; }

/* Query head h reads kv head h / (H/Hkv).  s_ij = scale q_i . k_j over the
 * allowed j; p = softmax_j(s); o_i = sum_j p_ij v_j; lse_i = log sum_j exp(s_ij). */
static bool run_attention(Interp *it, Node *n, Diag *d) {
    (void)d;
    const Tensor *q = arg(it, n, 0), *k = arg(it, n, 1), *v = arg(it, n, 2);
    Tensor *o = res(it, n, 0), *lse = res(it, n, 1);
    AttnDims a = attn_dims(n, q, k);
    double *s = xmalloc(sizeof(double) * (size_t)a.S);
    for (int64_t b = 0; b < a.B; b++)
        for (int64_t h = 0; h < a.H; h++) {
            int64_t hk = h / (a.H / a.Hkv);
            const double *K = k->data + (b * a.Hkv + hk) * a.S * a.D, *V = v->data + (b * a.Hkv + hk) * a.S * a.D;
            for (int64_t i = 0; i < a.T; i++) {
                const double *qi = q->data + ((b * a.H + h) * a.T + i) * a.D;
                double *oi = o->data + ((b * a.H + h) * a.T + i) * a.D;
                int64_t nk = attn_keys(&a, i);
                double m = -INFINITY, l = 0;
                for (int64_t j = 0; j < nk; j++) {
                    double dot = 0;
                    for (int64_t e = 0; e < a.D; e++) dot += qi[e] * K[j * a.D + e];
                    s[j] = a.scale * dot;
                    m = s[j] > m ? s[j] : m;
                }
                for (int64_t j = 0; j < nk; j++) l += s[j] = exp(s[j] - m);
                for (int64_t j = 0; j < nk; j++)
                    for (int64_t e = 0; e < a.D; e++) oi[e] += s[j] / l * V[j * a.D + e];
                lse->data[(b * a.H + h) * a.T + i] = m + log(l);
            }
        }
    free(s);
    return true;
}

/* p_ij = exp(scale q_i . k_j - lse_i) over the allowed j; D_i = do_i . o_i;
 * ds_ij = p_ij (do_i . v_j - D_i); dq_i = scale sum_j ds_ij k_j;
 * dk_j = scale sum_i ds_ij q_i and dv_j = sum_i p_ij do_i, both summed over
 * the query heads that share the kv head. */
static bool run_attention_grad(Interp *it, Node *n, Diag *d) {
    (void)d;
    const Tensor *dout = arg(it, n, 0), *q = arg(it, n, 1), *k = arg(it, n, 2), *v = arg(it, n, 3), *o = arg(it, n, 4),
                 *lse = arg(it, n, 5);
    Tensor *dq = res(it, n, 0), *dk = res(it, n, 1), *dv = res(it, n, 2);
    AttnDims a = attn_dims(n, q, k);
    for (int64_t b = 0; b < a.B; b++)
        for (int64_t h = 0; h < a.H; h++) {
            int64_t hk = h / (a.H / a.Hkv), kvoff = (b * a.Hkv + hk) * a.S * a.D;
            const double *K = k->data + kvoff, *V = v->data + kvoff;
            double *dK = dk->data + kvoff, *dV = dv->data + kvoff;
            for (int64_t i = 0; i < a.T; i++) {
                int64_t row = (b * a.H + h) * a.T + i;
                const double *qi = q->data + row * a.D, *doi = dout->data + row * a.D, *oi = o->data + row * a.D;
                double *dqi = dq->data + row * a.D, Di = 0;
                for (int64_t e = 0; e < a.D; e++) Di += doi[e] * oi[e];
                for (int64_t j = 0; j < attn_keys(&a, i); j++) {
                    double dot = 0, dp = 0;
                    for (int64_t e = 0; e < a.D; e++) {
                        dot += qi[e] * K[j * a.D + e];
                        dp += doi[e] * V[j * a.D + e];
                    }
                    double p = exp(a.scale * dot - lse->data[row]), ds = p * (dp - Di);
                    for (int64_t e = 0; e < a.D; e++) {
                        dqi[e] += a.scale * ds * K[j * a.D + e];
                        dK[j * a.D + e] += a.scale * ds * qi[e];
                        dV[j * a.D + e] += p * doi[e];
                    }
                }
            }
        }
    return true;
}

/* y_i = rng_keep((uint32_t)seed, stream, i, p) ? x_i / (1 - p) : 0, with i
 * the flat row-major index. */
static bool run_dropout(Interp *it, Node *n, Diag *d) {
    const Tensor *x = arg(it, n, 0), *seed = arg(it, n, 1);
    Tensor *y = res(it, n, 0);
    double p = ir_float(n, "p", 0.0), sv = seed->data[0];
    if (!(sv >= -2147483648.0 && sv <= 4294967295.0)) {
        error_at(d, n->loc, "dropout: seed %.17g is not a 32-bit integer", sv);
        return false;
    }
    uint32_t s = (uint32_t)(int64_t)sv;
    uint64_t stream = (uint64_t)ir_int(n, "stream", 0);
    for (int64_t i = 0; i < x->n; i++) y->data[i] = rng_keep(s, stream, (uint64_t)i, (float)p) ? x->data[i] / (1.0 - p) : 0.0;
    return true;
}

/* Counts the kept rows (target != ignore_index) and checks every kept
 * target is in [0, V). */
static bool ce_count(Diag *d, Node *n, const Tensor *targets, int64_t V, int64_t *count) {
    double ignore = (double)ir_int(n, "ignore_index", -100);
    *count = 0;
    for (int64_t r = 0; r < targets->n; r++) {
        if (targets->data[r] == ignore) continue;
        if (!check_index(d, n, "target", targets->data[r], r, V)) return false;
        (*count)++;
    }
    return true;
}

/* Per row r: lse_r = log sum exp(logits_r) (max subtracted), loss_r = lse_r -
 * logits_r[t_r]; loss = sum of loss_r over kept rows / their count (0 if
 * none).  Results loss, lse (every row).  Only the first {classes} (default
 * V) columns of a row count: pad-tiles' padding is invisible. */
static bool run_cross_entropy(Interp *it, Node *n, Diag *d) {
    const Tensor *logits = arg(it, n, 0), *targets = arg(it, n, 1);
    Tensor *loss = res(it, n, 0), *lse = res(it, n, 1);
    int64_t V = logits->ty.shape.d[logits->ty.shape.rank - 1], count, nc = ir_int(n, "classes", V);
    double ignore = (double)ir_int(n, "ignore_index", -100), total = 0;
    if (!ce_count(d, n, targets, nc, &count)) return false;
    for (int64_t r = 0; r < targets->n; r++) {
        const double *l = logits->data + r * V;
        double m = -INFINITY, s = 0;
        for (int64_t c = 0; c < nc; c++) m = l[c] > m ? l[c] : m;
        for (int64_t c = 0; c < nc; c++) s += exp(l[c] - m);
        lse->data[r] = m + log(s);
        if (targets->data[r] != ignore) total += lse->data[r] - l[(int64_t)targets->data[r]];
    }
    loss->data[0] = count ? total / (double)count : 0.0;
    return true;
}

/* dlogits_r = dloss / count (exp(logits_r - lse_r) - onehot(t_r)) for kept
 * rows, 0 for ignored rows and for columns from {classes} on. */
static bool run_cross_entropy_grad(Interp *it, Node *n, Diag *d) {
    const Tensor *dloss = arg(it, n, 0), *logits = arg(it, n, 1), *targets = arg(it, n, 2), *lse = arg(it, n, 3);
    Tensor *dl = res(it, n, 0);
    int64_t V = logits->ty.shape.d[logits->ty.shape.rank - 1], count, nc = ir_int(n, "classes", V);
    double ignore = (double)ir_int(n, "ignore_index", -100);
    if (!ce_count(d, n, targets, nc, &count)) return false;
    for (int64_t r = 0; r < targets->n; r++) {
        if (targets->data[r] == ignore) continue;
        int64_t t = (int64_t)targets->data[r];
        double scale = dloss->data[0] / (double)count;
        for (int64_t c = 0; c < nc; c++)
            dl->data[r * V + c] = scale * (exp(logits->data[r * V + c] - lse->data[r]) - (c == t ? 1.0 : 0.0));
    }
    return true;
}

/* ===================================================================== */
/* Fused ops (passes/liger.c)                                            */
/* ===================================================================== */

/* s = x + r (rounded to its dtype: the value the unfused add stores), then
 * layer_norm or rms_norm of s into (y, [mean,] rstd). */
static bool run_add_norm(Interp *it, Node *n, Diag *d) {
    (void)d;
    bool ln = n->op == OP_add_layer_norm;
    const Tensor *x = arg(it, n, 0), *r = arg(it, n, 1), *w = arg(it, n, 2), *b = ln ? arg(it, n, 3) : NULL;
    Tensor *y = res(it, n, 0), *s = res(it, n, 1), *mean = ln ? res(it, n, 2) : NULL, *rstd = res(it, n, ln ? 3 : 2);
    double eps = ir_float(n, "eps", ln ? 1e-5 : 1e-6);
    int64_t C = w->n, rows = x->n / C;
    for (int64_t i = 0; i < x->n; i++) s->data[i] = round_to(it, s->ty.dt, x->data[i] + r->data[i]);
    for (int64_t row = 0; row < rows; row++) {
        const double *sr = s->data + row * C;
        double mu = 0, var = 0;
        if (ln) {
            for (int64_t c = 0; c < C; c++) mu += sr[c];
            mu /= (double)C;
        }
        for (int64_t c = 0; c < C; c++) var += (sr[c] - mu) * (sr[c] - mu);
        var /= (double)C;
        double rs = 1.0 / sqrt(var + eps);
        for (int64_t c = 0; c < C; c++) y->data[row * C + c] = (sr[c] - mu) * rs * w->data[c] + (ln ? b->data[c] : 0.0);
        if (ln) mean->data[row] = mu;
        rstd->data[row] = rs;
    }
    return true;
}

/* The norm's gradients (as layer_norm_grad / rms_norm_grad, at s) with ds
 * added to dx: the residual sum's gradient from its other users. */
static bool run_add_norm_grad(Interp *it, Node *n, Diag *d) {
    (void)d;
    bool ln = n->op == OP_add_layer_norm_grad;
    const Tensor *dy = arg(it, n, 0), *ds = arg(it, n, 1), *s = arg(it, n, 2), *w = arg(it, n, 3);
    const Tensor *mean = ln ? arg(it, n, 4) : NULL, *rstd = arg(it, n, ln ? 5 : 4);
    Tensor *dx = res(it, n, 0), *dw = res(it, n, 1), *db = ln ? res(it, n, 2) : NULL;
    int64_t C = w->n, rows = s->n / C;
    for (int64_t r = 0; r < rows; r++) {
        const double *sr = s->data + r * C, *dyr = dy->data + r * C;
        double mu = ln ? mean->data[r] : 0.0, rs = rstd->data[r], m1 = 0, m2 = 0;
        for (int64_t c = 0; c < C; c++) {
            double xhat = (sr[c] - mu) * rs, dxhat = dyr[c] * w->data[c];
            m1 += dxhat;
            m2 += dxhat * xhat;
            dw->data[c] += dyr[c] * xhat;
            if (ln) db->data[c] += dyr[c];
        }
        m1 = ln ? m1 / (double)C : 0.0;
        m2 /= (double)C;
        for (int64_t c = 0; c < C; c++) {
            double xhat = (sr[c] - mu) * rs, dxhat = dyr[c] * w->data[c];
            dx->data[r * C + c] = ds->data[r * C + c] + rs * (dxhat - m1 - xhat * m2);
        }
    }
    return true;
}

/* One tensor of rope_qk: rows x[..., t, :] of length D, h = D/2.  Without
 * tables: cos_i = cos(t theta^(-2i/D)), sin_i = sin(...) for both halves
 * (the rotation of run_rope).  With tables: cos[t, :], sin[t, :].
 *   forward  y[i] = x[i] cos[i] - x[i+h] sin[i],   y[i+h] = x[i+h] cos[i+h] + x[i] sin[i+h]
 *   inverse  y[i] = x[i] cos[i] + x[i+h] sin[i+h], y[i+h] = x[i+h] cos[i+h] - x[i] sin[i]
 * (inverse is the transpose of forward: its gradient, and for the rotation
 * its inverse). */
static void rope_rows(const Tensor *x, Tensor *y, const Tensor *cs, const Tensor *sn, double theta, bool inverse) {
    const Shape *s = &x->ty.shape;
    int64_t T = s->d[s->rank - 2], D = s->d[s->rank - 1], h = D / 2, rows = x->n / D;
    for (int64_t r = 0; r < rows; r++) {
        int64_t t = r % T;
        const double *xr = x->data + r * D;
        double *yr = y->data + r * D;
        for (int64_t i = 0; i < h; i++) {
            double c1, s1, c2, s2;
            if (cs) {
                c1 = cs->data[t * D + i], c2 = cs->data[t * D + i + h];
                s1 = sn->data[t * D + i], s2 = sn->data[t * D + i + h];
            } else {
                double angle = (double)t * pow(theta, -2.0 * (double)i / (double)D);
                c1 = c2 = cos(angle);
                s1 = s2 = sin(angle);
            }
            double x1 = xr[i], x2 = xr[i + h];
            if (!inverse) {
                yr[i] = x1 * c1 - x2 * s1;
                yr[i + h] = x2 * c2 + x1 * s2;
            } else {
                yr[i] = x1 * c1 + x2 * s2;
                yr[i + h] = x2 * c2 - x1 * s1;
            }
        }
    }
}

static bool run_rope_qk(Interp *it, Node *n, Diag *d) {
    (void)d;
    const Tensor *cs = n->nin == 4 ? arg(it, n, 2) : NULL, *sn = n->nin == 4 ? arg(it, n, 3) : NULL;
    double theta = ir_float(n, "theta", 10000.0);
    bool inverse = ir_int(n, "inverse", 0) != 0;
    for (int j = 0; j < 2; j++) rope_rows(arg(it, n, j), res(it, n, j), cs, sn, theta, inverse);
    return true;
}

/* logits_rc = x_r . w_c for c < {classes} (the rows of w from there on are
 * padding and are never read); per kept row (target != ignore_index) the
 * cross-entropy as in run_cross_entropy; loss = their mean (0 if none).
 * With dl_rc = (softmax_rc - [c == t_r]) / count: dx_r = sum_c dl_rc w_c,
 * dw_c = sum_r dl_rc x_r (rows of w from {classes} on: 0; ignored rows of
 * x: 0).  The logits and softmax_rc - [c == t_r] are rounded to x's dtype
 * (not in the fp64 mode), the rest is exact in double; {chunk} changes
 * nothing here. */
static bool run_linear_ce(Interp *it, Node *n, Diag *d) {
    const Tensor *x = arg(it, n, 0), *w = arg(it, n, 1), *targets = arg(it, n, 2);
    Tensor *loss = res(it, n, 0), *dx = res(it, n, 1), *dw = res(it, n, 2);
    int64_t C = w->ty.shape.d[1], V = w->ty.shape.d[0], nc = ir_int(n, "classes", V), count;
    double ignore = (double)ir_int(n, "ignore_index", -100), total = 0;
    if (!ce_count(d, n, targets, nc, &count)) return false;
    /* the logits and g = softmax - onehot take x's dtype, as the unfused
     * matmul's result and the cast of its gradient do under mixed precision;
     * the 1/count scale comes after */
    DType dt = x->ty.dt;
    double *l = xmalloc(sizeof(double) * (size_t)nc);
    for (int64_t r = 0; r < targets->n; r++) {
        if (targets->data[r] == ignore) continue;
        const double *xr = x->data + r * C;
        double m = -INFINITY, s = 0;
        for (int64_t c = 0; c < nc; c++) {
            double acc = 0;
            for (int64_t k = 0; k < C; k++) acc += xr[k] * w->data[c * C + k];
            l[c] = round_to(it, dt, acc);
            m = l[c] > m ? l[c] : m;
        }
        for (int64_t c = 0; c < nc; c++) s += exp(l[c] - m);
        double lse = m + log(s);
        int64_t t = (int64_t)targets->data[r];
        total += lse - l[t];
        for (int64_t c = 0; c < nc; c++) {
            double g = round_to(it, dt, exp(l[c] - lse) - (c == t ? 1.0 : 0.0)) / (double)count;
            for (int64_t k = 0; k < C; k++) {
                dx->data[r * C + k] += g * w->data[c * C + k];
                dw->data[c * C + k] += g * xr[k];
            }
        }
    }
    free(l);
    loss->data[0] = count ? total / (double)count : 0.0;
    return true;
}

/* ===================================================================== */
/* Optimizer ops                                                         */
/* ===================================================================== */

/* sqrt of the sum of squares of every element of every operand. */
static bool run_global_norm(Interp *it, Node *n, Diag *d) {
    (void)d;
    double s = 0;
    for (int j = 0; j < n->nin; j++) {
        const Tensor *g = arg(it, n, j);
        for (int64_t i = 0; i < g->n; i++) s += g->data[i] * g->data[i];
    }
    res(it, n, 0)->data[0] = sqrt(s);
    return true;
}

/* min(1, max_norm / (norm + 1e-6)); a NaN norm gives NaN (PyTorch's
 * clip_grad_norm_ scales every gradient by it). */
static bool run_clip_coef(Interp *it, Node *n, Diag *d) {
    (void)d;
    double c = ir_float(n, "max_norm", 1.0) / (arg(it, n, 0)->data[0] + 1e-6);
    res(it, n, 0)->data[0] = c < 1.0 || isnan(c) ? c : 1.0;
    return true;
}

/* g' = g gscale; m' = b1 m + (1-b1) g'; v' = b2 v + (1-b2) g'^2;
 * mhat = m'/(1-b1^t); vhat = v'/(1-b2^t); w' = w - lr (mhat/(sqrt(vhat)+eps) + wd w). */
static bool run_adamw(Interp *it, Node *n, Diag *d) {
    const Tensor *w = arg(it, n, 0), *g = arg(it, n, 1), *m = arg(it, n, 2), *v = arg(it, n, 3);
    double lr = arg(it, n, 4)->data[0], t = arg(it, n, 5)->data[0], gscale = arg(it, n, 6)->data[0];
    Tensor *w2 = res(it, n, 0), *m2 = res(it, n, 1), *v2 = res(it, n, 2);
    double b1 = ir_float(n, "beta1", 0.9), b2 = ir_float(n, "beta2", 0.999), eps = ir_float(n, "eps", 1e-8), wd = ir_float(n, "wd", 0.0);
    if (!(t >= 1)) {
        error_at(d, n->loc, "adamw: step is %.17g; it counts from 1", t);
        return false;
    }
    if (n->nin > 7 && arg(it, n, 7)->data[0] != 0) {
        /* a skipped step (fp16 overflow): nothing moves */
        memcpy(w2->data, w->data, sizeof(double) * (size_t)w->n);
        memcpy(m2->data, m->data, sizeof(double) * (size_t)m->n);
        memcpy(v2->data, v->data, sizeof(double) * (size_t)v->n);
        return true;
    }
    double c1 = 1.0 - pow(b1, t), c2 = 1.0 - pow(b2, t);
    for (int64_t i = 0; i < w->n; i++) {
        double gi = g->data[i] * gscale;
        double mi = b1 * m->data[i] + (1.0 - b1) * gi;
        double vi = b2 * v->data[i] + (1.0 - b2) * gi * gi;
        double mhat = mi / c1, vhat = vi / c2;
        w2->data[i] = w->data[i] - lr * (mhat / (sqrt(vhat) + eps) + wd * w->data[i]);
        m2->data[i] = mi;
        v2->data[i] = vi;
    }
    return true;
}

/* g' = g gscale + wd w; momentum 0: upd = g', buf' = buf; else
 * buf' = momentum buf + g', upd = nesterov ? g' + momentum buf' : buf';
 * w' = w - lr upd. */
static bool run_sgd(Interp *it, Node *n, Diag *d) {
    (void)d;
    const Tensor *w = arg(it, n, 0), *g = arg(it, n, 1), *buf = arg(it, n, 2);
    double lr = arg(it, n, 3)->data[0], gscale = arg(it, n, 4)->data[0];
    Tensor *w2 = res(it, n, 0), *buf2 = res(it, n, 1);
    double mom = ir_float(n, "momentum", 0.0), wd = ir_float(n, "wd", 0.0);
    int nesterov = (int)ir_int(n, "nesterov", 0);
    if (n->nin > 5 && arg(it, n, 5)->data[0] != 0) {
        memcpy(w2->data, w->data, sizeof(double) * (size_t)w->n);
        memcpy(buf2->data, buf->data, sizeof(double) * (size_t)buf->n);
        return true;
    }
    for (int64_t i = 0; i < w->n; i++) {
        double gi = g->data[i] * gscale + wd * w->data[i], upd;
        if (mom == 0) {
            upd = gi;
            buf2->data[i] = buf->data[i];
        } else {
            buf2->data[i] = mom * buf->data[i] + gi;
            upd = nesterov ? gi + mom * buf2->data[i] : buf2->data[i];
        }
        w2->data[i] = w->data[i] - lr * upd;
    }
    return true;
}

/* Dynamic loss scaling, once per step.  norm is the global norm of the
 * scaled gradients.  Finite: good' = good + 1, and when it reaches {window}
 * the scale doubles (at most 2^40) and good' = 0; skip = 0.  Not finite
 * (an overflow): the scale halves, good' = 0, skipped' = skipped + 1,
 * skip = 1 (the update is skipped). */
static bool run_loss_scale_update(Interp *it, Node *n, Diag *d) {
    (void)d;
    double scale = arg(it, n, 0)->data[0], good = arg(it, n, 1)->data[0], skipped = arg(it, n, 2)->data[0];
    double norm = arg(it, n, 3)->data[0];
    int64_t window = ir_int(n, "window", 1000);
    double skip = 0;
    if (isfinite(norm)) {
        good += 1;
        if (good >= (double)window) {
            scale = fmin(scale * 2.0, 0x1p40);
            good = 0;
        }
    } else {
        scale *= 0.5;
        good = 0;
        skipped += 1;
        skip = 1;
    }
    res(it, n, 0)->data[0] = scale;
    res(it, n, 1)->data[0] = good;
    res(it, n, 2)->data[0] = skipped;
    res(it, n, 3)->data[0] = skip;
    return true;
}

/* Sources have no work to do when their node runs: their storage is their value. */
static bool run_source(Interp *it, Node *n, Diag *d) {
    if (source_storage(it, n)) return true;
    oom_error(d, n->out[0]);
    return false;
}

/* ===================================================================== */
/* The column of the op table                                            */
/* ===================================================================== */

static InterpFn *const interp_fn[OP__COUNT] = {
    [OP_input] = run_source, [OP_param] = run_source, [OP_state] = run_source,
    [OP_constant] = run_source, [OP_iota] = run_source,

    [OP_neg] = run_unary, [OP_exp] = run_unary, [OP_log] = run_unary, [OP_sqrt] = run_unary,
    [OP_rsqrt] = run_unary, [OP_tanh] = run_unary, [OP_sigmoid] = run_unary, [OP_relu] = run_unary,
    [OP_gelu] = run_unary, [OP_silu] = run_unary, [OP_abs] = run_unary, [OP_sign] = run_unary,
    [OP_cast] = run_unary,

    [OP_add] = run_binary, [OP_sub] = run_binary, [OP_mul] = run_binary, [OP_div] = run_binary,
    [OP_maximum] = run_binary, [OP_minimum] = run_binary, [OP_ge] = run_binary,

    [OP_tanh_grad] = run_binary, [OP_sigmoid_grad] = run_binary, [OP_relu_grad] = run_binary,
    [OP_gelu_grad] = run_binary, [OP_silu_grad] = run_binary,

    [OP_sum] = run_reduce, [OP_mean] = run_reduce, [OP_max] = run_reduce, [OP_max_grad] = run_max_grad,

    [OP_reshape] = run_reshape, [OP_permute] = run_permute, [OP_broadcast] = run_broadcast,
    [OP_slice] = run_slice, [OP_pad] = run_pad, [OP_concat] = run_concat,

    [OP_matmul] = run_matmul,

    [OP_embedding] = run_embedding, [OP_embedding_grad] = run_embedding_grad,
    [OP_softmax] = run_softmax, [OP_softmax_grad] = run_softmax_grad,
    [OP_layer_norm] = run_layer_norm, [OP_layer_norm_grad] = run_layer_norm_grad,
    [OP_rms_norm] = run_rms_norm, [OP_rms_norm_grad] = run_rms_norm_grad,
    [OP_rope] = run_rope,
    [OP_attention] = run_attention, [OP_attention_grad] = run_attention_grad,
    [OP_dropout] = run_dropout,
    [OP_cross_entropy] = run_cross_entropy, [OP_cross_entropy_grad] = run_cross_entropy_grad,

    [OP_global_norm] = run_global_norm, [OP_clip_coef] = run_clip_coef,
    [OP_adamw] = run_adamw, [OP_sgd] = run_sgd, [OP_loss_scale_update] = run_loss_scale_update,

    [OP_add_layer_norm] = run_add_norm, [OP_add_rms_norm] = run_add_norm,
    [OP_add_layer_norm_grad] = run_add_norm_grad, [OP_add_rms_norm_grad] = run_add_norm_grad,
    [OP_rope_qk] = run_rope_qk, [OP_swiglu] = run_binary, [OP_geglu] = run_binary,
    [OP_linear_cross_entropy] = run_linear_ce,
};

bool interp_supports(Op op) { return (int)op >= 0 && op < OP__COUNT && interp_fn[op] != NULL; }

/* ===================================================================== */
/* Running                                                               */
/* ===================================================================== */

Interp *interp_new(Graph *g, InterpMode mode) {
    Interp *it = xcalloc(1, sizeof *it);
    it->g = g;
    it->mode = mode;
    ensure_values(it);
    /* a source there is no memory for stays NULL here (interp_source
     * returns NULL for it); a run reports it, naming it (oom_error) */
    for (int i = 0; i < g->nnodes; i++)
        if (op_has(g->nodes[i]->op, OPF_SOURCE)) source_storage(it, g->nodes[i]);
    return it;
}

void interp_free(Interp *it) {
    if (!it) return;
    for (int i = 0; i < it->nvals; i++) free(it->val[i].data);
    free(it->val);
    free(it->stamp);
    free(it);
}

/* Element i of the param or state named N is rng_init_value(init, a, b,
 * seed, rng_name_stream(N), i), a = {std} (normal, default 1), {lo}
 * (uniform, default 0) or {value} (constant, default 0), b = {hi} (default 1).
 * A tensor that pad-tiles padded ({unpadded} = its original shape) counts i
 * over the original shape, row-major, and its padding is zero: it starts
 * from the values it would have unpadded.  A state with {copy_of=P} (a
 * half-precision copy of param P, mixed-precision) is P rounded to its dtype.
 * A bf16/f16 tensor starts as the value rounded to f32, then to its dtype:
 * what the copy of an f32 master holds (mixed precision stores a frozen
 * param that only matrix ops read in the half dtype). */
static double init_round(Interp *it, DType dt, double v) {
    if ((dt == DT_bf16 || dt == DT_f16) && it->mode != INTERP_F64) v = (double)(float)v; /* f64 mode rounds nothing */
    return round_to(it, dt, v);
}

void interp_init(Interp *it, uint64_t seed) {
    Graph *g = it->g;
    ensure_values(it);
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (n->op != OP_param && n->op != OP_state) continue;
        if (n->op == OP_state && ir_attr(n, "copy_of")) continue;
        Tensor *t = source_storage(it, n);
        if (!t) continue; /* out of memory: the next run reports it */
        const char *init = ir_str(n, "init", "zeros"), *name = ir_source_name(n);
        double a = 0, b = 1;
        if (strcmp(init, "normal") == 0) a = ir_float(n, "std", 1.0);
        if (strcmp(init, "uniform") == 0) a = ir_float(n, "lo", 0.0), b = ir_float(n, "hi", 1.0);
        if (strcmp(init, "constant") == 0) a = ir_float(n, "value", 0.0);
        uint64_t stream = rng_name_stream(name ? name : "");
        const Attr *up = ir_attr(n, "unpadded");
        const Shape *s = &t->ty.shape;
        bool whole = !up || up->kind != ATTR_INTS || up->n != s->rank; /* ir_infer checks it; a graph not verified is not trusted */
        for (int d = 0; !whole && d < s->rank; d++) whole = up->v[d] < 1 || up->v[d] > s->d[d];
        if (whole) {
            for (int64_t k = 0; k < t->n; k++) t->data[k] = init_round(it, t->ty.dt, rng_init_value(init, a, b, seed, stream, (uint64_t)k));
            continue;
        }
        /* k walks the unpadded block in row-major order; idx is its index */
        int64_t cn = 1, idx[IR_MAX_RANK] = {0};
        for (int d = 0; d < s->rank; d++) cn *= up->v[d];
        memset(t->data, 0, sizeof(double) * (size_t)t->n);
        for (int64_t k = 0; k < cn; k++) {
            int64_t off = 0;
            for (int d = 0; d < s->rank; d++) off = off * s->d[d] + idx[d];
            t->data[off] = init_round(it, t->ty.dt, rng_init_value(init, a, b, seed, stream, (uint64_t)k));
            for (int d = s->rank - 1; d >= 0; d--) {
                if (++idx[d] < up->v[d]) break;
                idx[d] = 0;
            }
        }
    }
    interp_refresh_copies(it);
}

void interp_refresh_copies(Interp *it) {
    Graph *g = it->g;
    ensure_values(it);
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        const char *of = n->op == OP_state ? ir_str(n, "copy_of", NULL) : NULL;
        if (!of) continue;
        Node *p = ir_find_source(g, OP_param, of);
        if (!p) continue;
        Tensor *t = source_storage(it, n), *src = source_storage(it, p);
        if (!t || !src || src->n != t->n) continue; /* out of memory: the next run reports it */
        for (int64_t k = 0; k < t->n; k++) t->data[k] = round_to(it, t->ty.dt, src->data[k]);
    }
}

/* NULL also for a source there is no memory for (alloc_value). */
Tensor *interp_source(Interp *it, const char *name) {
    ensure_values(it);
    for (int i = 0; i < it->g->nnodes; i++) {
        Node *n = it->g->nodes[i];
        const char *s = is_persistent(n) ? ir_source_name(n) : NULL;
        if (s && strcmp(s, name) == 0) return source_storage(it, n);
    }
    return NULL;
}

Tensor *interp_value(Interp *it, const Value *v) {
    ensure_values(it);
    if (!v || v->id < 0 || v->id >= it->nvals) return NULL;
    if (v->def && op_has(v->def->op, OPF_SOURCE)) return source_storage(it, v->def);
    Tensor *t = &it->val[v->id];
    return t->data ? t : NULL;
}

/* Every operand must hold its value: a source's storage, a value of this
 * phase computed earlier in this run, or a value of another phase computed
 * by that phase's last run. */
static bool operands_ready(Interp *it, Node *n, Diag *d) {
    for (int j = 0; j < n->nin; j++) {
        const Value *v = n->in[j];
        if (op_has(v->def->op, OPF_SOURCE)) {
            if (source_storage(it, v->def)) continue;
            oom_error(d, v);
            return false;
        }
        bool ok = v->def->phase == n->phase ? it->stamp[v->id] == it->run : it->val[v->id].data != NULL;
        if (!ok) {
            error_at(d, n->loc, "%s: operand %d (%%%d, from %s) has not been computed when this node runs", op_name(n->op), j + 1, v->id,
                     op_name(v->def->op));
            return false;
        }
    }
    return true;
}

/* Replaces each target of this phase's updates by its new value.  Every new
 * value is copied out first, so an update that reads another's target sees
 * the old value. */
static bool commit_updates(Interp *it, int phase, Diag *d) {
    Graph *g = it->g;
    double **fresh = xcalloc((size_t)g->noutputs + 1, sizeof(double *));
    bool ok = true;
    for (int i = 0; ok && i < g->noutputs; i++) {
        Output *o = &g->outputs[i];
        if (o->kind != OUT_UPDATE || o->value->def->phase != phase) continue;
        const Tensor *src = interp_value(it, o->value);
        if (o->target->op != OP_param && o->target->op != OP_state) {
            error_at(d, o->target->loc, "update '%s' targets a %s node, not a param or state", o->name, op_name(o->target->op));
            ok = false;
        } else if (!src) {
            error_at(d, o->value->def->loc, "update '%s': its new value %%%d was never computed", o->name, o->value->id);
            ok = false;
        } else {
            Tensor *dst = source_storage(it, o->target);
            if (!dst) {
                oom_error(d, o->target->out[0]);
                ok = false;
            } else if (src->n != dst->n) {
                error_at(d, o->target->loc, "update '%s': %lld new elements for %lld", o->name, (long long)src->n, (long long)dst->n);
                ok = false;
            } else if (!(fresh[i] = malloc(sizeof(double) * (size_t)(src->n ? src->n : 1)))) {
                error_at(d, o->target->loc, "update '%s': out of memory for a copy of its %lld new elements", o->name, (long long)src->n);
                ok = false;
            } else {
                for (int64_t k = 0; k < src->n; k++) fresh[i][k] = round_to(it, dst->ty.dt, src->data[k]);
            }
        }
    }
    for (int i = 0; i < g->noutputs; i++) {
        if (!fresh[i]) continue;
        if (ok) {
            Tensor *dst = source_storage(it, g->outputs[i].target);
            memcpy(dst->data, fresh[i], sizeof(double) * (size_t)dst->n);
        }
        free(fresh[i]);
    }
    free(fresh);
    return ok;
}

bool interp_run_phase(Interp *it, int phase, Diag *d) {
    Graph *g = it->g;
    ensure_values(it);
    it->run++;
    /* Inputs, params and states hold what callers wrote: round them to their dtype. */
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (!is_persistent(n)) continue;
        Tensor *t = source_storage(it, n);
        if (!t) {
            oom_error(d, n->out[0]);
            return false;
        }
        round_tensor(it, t);
    }
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (n->phase != phase) continue;
        if (op_has(n->op, OPF_SOURCE)) {
            if (!run_source(it, n, d)) return false;
            continue;
        }
        if (!interp_fn[n->op]) die("interp: no interpreter function for op %s", op_name(n->op));
        if (!operands_ready(it, n, d)) return false;
        for (int k = 0; k < n->nout; k++) {
            Tensor *t = alloc_value(it, n->out[k]);
            if (!t) {
                oom_error(d, n->out[k]);
                return false;
            }
            memset(t->data, 0, sizeof(double) * (size_t)t->n);
        }
        int before = d->nerrors;
        if (!interp_fn[n->op](it, n, d)) {
            if (d->nerrors == before) error_at(d, n->loc, "%s failed", op_name(n->op));
            return false;
        }
        for (int k = 0; k < n->nout; k++) {
            round_tensor(it, res(it, n, k));
            it->stamp[n->out[k]->id] = it->run;
        }
    }
    return commit_updates(it, phase, d);
}

double interp_step(Interp *it, int accum, void (*feed)(void *ctx, Interp *it, int micro), void *ctx, Diag *d) {
    Value *loss = ir_output(it->g, "loss");
    double total = 0;
    if (accum < 1) accum = 1;
    for (int micro = 0; micro < accum; micro++) {
        if (feed) feed(ctx, it, micro);
        if (!interp_run_phase(it, PH_MICRO, d)) return NAN;
        if (loss) total += interp_result(it, "loss");
    }
    if (!interp_run_phase(it, PH_STEP, d)) return NAN;
    return loss ? total / accum : NAN;
}

double interp_result(Interp *it, const char *name) {
    Value *v = ir_output(it->g, name);
    Tensor *t = v ? interp_value(it, v) : NULL;
    return t && t->n >= 1 ? t->data[0] : NAN;
}
