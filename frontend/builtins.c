/* frontend/builtins.c — the builtin functions.
 *
 * Each builtin maps onto the op table (ir/ops.h): it checks its arguments,
 * sets the op's attributes and lets ir_infer check shapes at the call's
 * location.  Numbers get computed at compile time where that makes sense
 * (sqrt(16), max(2, 3)).
 */
#include "elab.h"

#include <math.h>
#include <string.h>

/* ---- builtins ---- */

#define BUILTIN(name) static Val name(Elab *e, const Builtin *bi, Val *a, const SrcLoc *al, const bool *given, SrcLoc loc)
#define ARG_TENSOR(i, var) \
    Value *var; \
    if (!elab_want_tensor(e, a[i], al[i], arg_what(e, bi, i), &var)) return val_poison()

/* "argument 'x' of relu" */
static const char *arg_what(Elab *e, const Builtin *bi, int i) {
    char buf[128];
    const char *names[ELAB_MAX_ARGS];
    bool opt[ELAB_MAX_ARGS];
    elab_builtin_params(bi, buf, names, opt);
    return arena_printf(e->a, "argument '%s' of %s", names[i], bi->name);
}

static Val node1(Elab *e, Op op, Value *x, SrcLoc loc) { return elab_emit(e, ir_new(e->g, op, 1, &x, loc)); }

static bool tensors_allowed(Elab *e, const Builtin *bi, SrcLoc loc) {
    if (e->fr) return true;
    error_at(e->d, loc, "%s() makes a tensor, but constants and train values must be compile-time values", bi->name);
    return false;
}

static double gelu_num(double x, bool tanh_approx) {
    if (tanh_approx) return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1 + erf(x / sqrt(2.0)));
}

/* exp log sqrt rsqrt tanh sigmoid relu silu abs neg (x) */
BUILTIN(b_unary) {
    (void)given;
    if (val_is_num(&a[0])) {
        double x = a[0].k == V_INT ? (double)a[0].i : a[0].f, r = 0;
        if (a[0].k == V_INT && (bi->op == OP_abs || bi->op == OP_neg || bi->op == OP_relu)) {
            int64_t i = a[0].i;
            if (i == INT64_MIN && bi->op != OP_relu) {
                error_at(e->d, loc, "integer overflow in %s(%lld)", bi->name, (long long)i);
                return val_poison();
            }
            return val_int(bi->op == OP_neg ? -i : bi->op == OP_abs ? (i < 0 ? -i : i) : (i > 0 ? i : 0));
        }
        switch (bi->op) {
        case OP_exp: r = exp(x); break;
        case OP_log: r = x > 0 ? log(x) : NAN; break;
        case OP_sqrt: r = x >= 0 ? sqrt(x) : NAN; break;
        case OP_rsqrt: r = x > 0 ? 1 / sqrt(x) : NAN; break;
        case OP_tanh: r = tanh(x); break;
        case OP_sigmoid: r = 1 / (1 + exp(-x)); break;
        case OP_relu: r = x > 0 ? x : 0; break;
        case OP_silu: r = x / (1 + exp(-x)); break;
        case OP_abs: r = fabs(x); break;
        case OP_neg: r = -x; break;
        default: unreachable();
        }
        if (!isfinite(r)) {
            char t[32];
            fmt_double(t, x);
            error_at(e->d, loc, "%s(%s) is not a finite number", bi->name, t);
            return val_poison();
        }
        return val_float(r);
    }
    Value *x;
    if (!elab_want(e, a[0].k == V_TENSOR, a[0], al[0], arg_what(e, bi, 0), "a tensor or a number")) return val_poison();
    x = a[0].t;
    return node1(e, bi->op, x, loc);
}

/* gelu(x, approximate="none"|"tanh") */
BUILTIN(b_gelu) {
    bool approx = false;
    if (given[1]) {
        const char *s;
        if (!elab_want_str(e, a[1], al[1], "approximate", &s)) return val_poison();
        if (strcmp(s, "tanh") == 0) approx = true;
        else if (strcmp(s, "none") != 0) {
            error_at(e->d, al[1], "approximate must be \"none\" or \"tanh\", not \"%s\"", s);
            return val_poison();
        }
    }
    if (val_is_num(&a[0])) return val_float(gelu_num(a[0].k == V_INT ? (double)a[0].i : a[0].f, approx));
    ARG_TENSOR(0, x);
    Node *n = ir_new(e->g, OP_gelu, 1, &x, loc);
    ir_set_int(e->g, n, "approx", approx);
    return elab_emit(e, n);
}

/* matmul(a, b) */
BUILTIN(b_matmul) {
    (void)given;
    ARG_TENSOR(0, x);
    ARG_TENSOR(1, y);
    Value *in[2] = {x, y};
    return elab_emit(e, ir_new(e->g, OP_matmul, 2, in, loc));
}

/* linear(x, w, b=none) = matmul(x, w, tb=1) (+ b) */
BUILTIN(b_linear) {
    ARG_TENSOR(0, x);
    ARG_TENSOR(1, w);
    Value *in[2] = {x, w};
    Node *n = ir_new(e->g, OP_matmul, 2, in, loc);
    ir_set_int(e->g, n, "tb", 1);
    Val y = elab_emit(e, n);
    if (!given[2] || a[2].k == V_NONE || y.k == V_POISON) return y;
    ARG_TENSOR(2, b);
    Value *in2[2] = {y.t, b};
    return elab_emit(e, ir_new(e->g, OP_add, 2, in2, loc));
}

/* sum|mean|max(x, axis=all, keepdim=false) */
BUILTIN(b_reduce) {
    ARG_TENSOR(0, x);
    Node *n = ir_new(e->g, bi->op, 1, &x, loc);
    if (given[1] && a[1].k != V_NONE) {
        int64_t axes[IR_MAX_RANK];
        int na = 0;
        if (a[1].k == V_INT) axes[na++] = a[1].i;
        else if (a[1].k == V_TENSOR && bi->op == OP_max) {
            error_at(e->d, al[1], "axis must be an integer or a list of integers; for the elementwise maximum of two tensors use maximum(a, b)");
            return val_poison();
        } else if (!elab_want_ints(e, a[1], al[1], "axis", IR_MAX_RANK, axes, &na, true)) return val_poison();
        ir_set_ints(e->g, n, "axes", na, axes);
    }
    if (given[2]) {
        bool k;
        if (!elab_want_bool(e, a[2], al[2], "keepdim", &k)) return val_poison();
        ir_set_int(e->g, n, "keepdim", k);
    }
    return elab_emit(e, n);
}

/* max(x, axis=all, keepdim=false) on a tensor; max(a, b) on numbers */
BUILTIN(b_max) {
    if (val_is_num(&a[0])) {
        if (!given[1] || !val_is_num(&a[1]) || given[2]) {
            error_at(e->d, loc, "max takes a tensor (max(x, axis, keepdim)) or two numbers (max(a, b))");
            return val_poison();
        }
        if (a[0].k == V_INT && a[1].k == V_INT) return val_int(a[0].i > a[1].i ? a[0].i : a[1].i);
        double x = a[0].k == V_INT ? (double)a[0].i : a[0].f, y = a[1].k == V_INT ? (double)a[1].i : a[1].f;
        return val_float(x > y ? x : y);
    }
    return b_reduce(e, bi, a, al, given, loc);
}

/* min(a, b) on numbers */
BUILTIN(b_min) {
    (void)given;
    double x, y;
    if (a[0].k == V_TENSOR || a[1].k == V_TENSOR) {
        error_at(e->d, loc, "min works on numbers; for tensors use minimum(a, b) (elementwise) or -max(-x, axis)");
        return val_poison();
    }
    if (!elab_want_num(e, a[0], al[0], "argument 'a' of min", &x) || !elab_want_num(e, a[1], al[1], "argument 'b' of min", &y))
        return val_poison();
    if (a[0].k == V_INT && a[1].k == V_INT) return val_int(a[0].i < a[1].i ? a[0].i : a[1].i);
    return val_float(x < y ? x : y);
}

/* maximum(a, b), minimum(a, b): elementwise, broadcasting */
BUILTIN(b_elementwise) {
    (void)given;
    for (int i = 0; i < 2; i++)
        if (a[i].k != V_TENSOR && !val_is_num(&a[i])) {
            ARG_TENSOR(i, t);
            (void)t;
        }
    Value *like = a[0].k == V_TENSOR ? a[0].t : a[1].k == V_TENSOR ? a[1].t : NULL;
    if (!like) {
        error_at(e->d, loc, "%s needs at least one tensor; for numbers use %s(a, b)", bi->name, bi->op == OP_maximum ? "max" : "min");
        return val_poison();
    }
    Value *in[2];
    for (int i = 0; i < 2; i++) {
        in[i] = a[i].k == V_TENSOR ? a[i].t : elab_scalar_for(e, a[i], like, al[i]);
        if (!in[i]) return val_poison();
    }
    return elab_emit(e, ir_new(e->g, bi->op, 2, in, loc));
}

/* int(x), float(x) on numbers and booleans */
BUILTIN(b_convert) {
    (void)given;
    double x;
    if (a[0].k == V_BOOL) return strcmp(bi->name, "int") == 0 ? val_int(a[0].i) : val_float((double)a[0].i);
    if (!elab_want_num(e, a[0], al[0], arg_what(e, bi, 0), &x)) return val_poison();
    if (strcmp(bi->name, "float") == 0) return val_float(x);
    if (a[0].k == V_INT) return a[0];
    if (!(x >= -0x1p63 && x < 0x1p63)) { /* every double in [-2^63, 2^63) truncates to an int64 */
        char xs[32];
        fmt_double(xs, x);
        error_at(e->d, al[0], "int(): %s is out of the integers' range (-2^63 .. 2^63 - 1)", xs);
        return val_poison();
    }
    return val_int((int64_t)x);
}

/* reshape(x, [dims]) with at most one -1 */
BUILTIN(b_reshape) {
    (void)given;
    ARG_TENSOR(0, x);
    int64_t dims[IR_MAX_RANK];
    int n;
    if (!elab_want_ints(e, a[1], al[1], "the shape", IR_MAX_RANK, dims, &n, false)) return val_poison();
    int64_t numel = 1;
    for (int i = 0; i < n; i++) {
        if (dims[i] == -1) continue;
        if (dims[i] <= 0 || __builtin_mul_overflow(numel, dims[i], &numel) || numel > ELAB_MAX_NUMEL) {
            error_at(e->d, al[1], "dimension %d of the shape is %lld; dimensions must be positive (or one -1) and not too large",
                     i, (long long)dims[i]);
            return val_poison();
        }
    }
    Node *nd = ir_new(e->g, OP_reshape, 1, &x, loc);
    ir_set_ints(e->g, nd, "shape", n, dims);
    return elab_emit(e, nd);
}

static bool norm_axis(Elab *e, int64_t axis, int rank, SrcLoc loc, int *out) {
    int a = ir_norm_axis(axis, rank);
    if (a < 0) {
        error_at(e->d, loc, "axis %lld is out of range for a tensor of rank %d", (long long)axis, rank);
        return false;
    }
    *out = a;
    return true;
}

/* transpose(x, a=-2, b=-1) -> permute */
BUILTIN(b_transpose) {
    ARG_TENSOR(0, x);
    int64_t ax[2] = {-2, -1};
    int n[2], r = x->ty.shape.rank;
    for (int i = 0; i < 2; i++) {
        if (given[i + 1] && !elab_want_int(e, a[i + 1], al[i + 1], i ? "axis b" : "axis a", &ax[i])) return val_poison();
        if (!norm_axis(e, ax[i], r, given[i + 1] ? al[i + 1] : loc, &n[i])) return val_poison();
    }
    if (n[0] == n[1]) return val_tensor(x); /* the same axis twice: no node */
    int64_t perm[IR_MAX_RANK];
    for (int i = 0; i < r; i++) perm[i] = i;
    perm[n[0]] = n[1];
    perm[n[1]] = n[0];
    Node *nd = ir_new(e->g, OP_permute, 1, &x, loc);
    ir_set_ints(e->g, nd, "perm", r, perm);
    return elab_emit(e, nd);
}

/* permute(x, [perm]) */
BUILTIN(b_permute) {
    (void)given;
    ARG_TENSOR(0, x);
    int64_t perm[IR_MAX_RANK];
    int n;
    if (!elab_want_ints(e, a[1], al[1], "the permutation", IR_MAX_RANK, perm, &n, false)) return val_poison();
    Node *nd = ir_new(e->g, OP_permute, 1, &x, loc);
    ir_set_ints(e->g, nd, "perm", n, perm);
    return elab_emit(e, nd);
}

static Val make_slice(Elab *e, Value *x, int axis, int64_t start, int64_t end, SrcLoc loc) {
    Node *nd = ir_new(e->g, OP_slice, 1, &x, loc);
    ir_set_int(e->g, nd, "axis", axis);
    ir_set_int(e->g, nd, "start", start);
    ir_set_int(e->g, nd, "end", end);
    return elab_emit(e, nd);
}

/* split(x, n | [sizes], axis=-1) -> several slices */
BUILTIN(b_split) {
    ARG_TENSOR(0, x);
    int64_t axis = -1;
    int ax;
    if (given[2] && !elab_want_int(e, a[2], al[2], "axis", &axis)) return val_poison();
    if (!norm_axis(e, axis, x->ty.shape.rank, given[2] ? al[2] : loc, &ax)) return val_poison();
    int64_t dim = x->ty.shape.d[ax], sizes[256];
    int n = 0;
    if (a[1].k == V_INT) {
        if (a[1].i > 256) {
            error_at(e->d, al[1], "split into %lld parts: at most 256 are allowed", (long long)a[1].i);
            return val_poison();
        }
        if (a[1].i <= 0 || dim % a[1].i) {
            error_at(e->d, al[1], "cannot split dimension %d (size %lld) into %lld equal parts", ax, (long long)dim, (long long)a[1].i);
            return val_poison();
        }
        n = (int)a[1].i;
        for (int i = 0; i < n; i++) sizes[i] = dim / n;
    } else {
        if (!elab_want_ints(e, a[1], al[1], "the parts", 256, sizes, &n, true)) return val_poison();
        int64_t total = 0;
        bool ok = n > 0;
        for (int i = 0; i < n && ok; i++) ok = sizes[i] > 0 && !__builtin_add_overflow(total, sizes[i], &total);
        if (!ok || total != dim) {
            error_at(e->d, al[1], "the sizes must be positive and add up to %lld (dimension %d)", (long long)dim, ax);
            return val_poison();
        }
    }
    Val t = {.k = V_TUPLE, .n = n};
    t.items = arena_alloc(e->a, sizeof(Val) * (size_t)n);
    int64_t start = 0;
    for (int i = 0; i < n; i++) {
        t.items[i] = make_slice(e, x, ax, start, start + sizes[i], loc);
        if (t.items[i].k == V_POISON) return val_poison();
        start += sizes[i];
    }
    return n == 1 ? t.items[0] : t;
}

/* concat([a, b, ...], axis=0) */
BUILTIN(b_concat) {
    Val l = a[0];
    if (!elab_want(e, l.k == V_LIST || l.k == V_TUPLE, l, al[0], "argument 'xs' of concat", "a list of tensors")) return val_poison();
    if (l.n == 0) {
        error_at(e->d, al[0], "concat needs at least one tensor");
        return val_poison();
    }
    Value **in = arena_alloc(e->a, sizeof(Value *) * (size_t)l.n);
    for (int i = 0; i < l.n; i++)
        if (!elab_want_tensor(e, l.items[i], al[0], "each item of the list given to concat", &in[i])) return val_poison();
    int64_t axis = 0;
    if (given[1] && !elab_want_int(e, a[1], al[1], "axis", &axis)) return val_poison();
    Node *nd = ir_new(e->g, OP_concat, l.n, in, loc);
    ir_set_int(e->g, nd, "axis", axis);
    return elab_emit(e, nd);
}

/* slice(x, axis, start, end) */
BUILTIN(b_slice) {
    (void)given;
    ARG_TENSOR(0, x);
    int64_t v[3];
    static const char *const what[3] = {"axis", "start", "end"};
    for (int i = 0; i < 3; i++)
        if (!elab_want_int(e, a[i + 1], al[i + 1], what[i], &v[i])) return val_poison();
    if (v[0] < -IR_MAX_RANK || v[0] >= IR_MAX_RANK) {
        error_at(e->d, al[1], "axis %lld is out of range", (long long)v[0]);
        return val_poison();
    }
    return make_slice(e, x, (int)v[0], v[1], v[2], loc);
}

/* embedding(table, idx) */
/* Indices (embedding's, cross_entropy's targets) of another integer type
 * are read through a cast to i32: the kernels index with i32 (the runtime
 * checks the values fit before a step; docs/runtime.md). */
static Value *index_i32(Elab *e, Value *idx, SrcLoc loc) {
    if (dtype_is_float[idx->ty.dt] || idx->ty.dt == DT_i32) return idx; /* a float: the op's type error */
    Node *nd = ir_new(e->g, OP_cast, 1, &idx, loc);
    ir_set_str(e->g, nd, "dtype", dtype_name[DT_i32]);
    return elab_emit(e, nd).t;
}

BUILTIN(b_embedding) {
    (void)given;
    ARG_TENSOR(0, table);
    ARG_TENSOR(1, idx);
    idx = index_i32(e, idx, loc);
    if (!idx) return val_poison();
    Value *in[2] = {table, idx};
    return elab_emit(e, ir_new(e->g, OP_embedding, 2, in, loc));
}

/* softmax(x, axis=-1) */
BUILTIN(b_softmax) {
    ARG_TENSOR(0, x);
    int64_t axis = -1;
    if (given[1] && !elab_want_int(e, a[1], al[1], "axis", &axis)) return val_poison();
    Node *nd = ir_new(e->g, OP_softmax, 1, &x, loc);
    ir_set_int(e->g, nd, "axis", axis);
    return elab_emit(e, nd);
}

/* layer_norm(x, w, b, eps=1e-5), rms_norm(x, w, eps=1e-6): result 0 */
BUILTIN(b_norm) {
    int nin = bi->op == OP_layer_norm ? 3 : 2;
    Value *in[3];
    for (int i = 0; i < nin; i++)
        if (!elab_want_tensor(e, a[i], al[i], arg_what(e, bi, i), &in[i])) return val_poison();
    Node *nd = ir_new(e->g, bi->op, nin, in, loc);
    if (given[nin]) {
        double eps;
        if (!elab_want_num(e, a[nin], al[nin], "eps", &eps)) return val_poison();
        ir_set_float(e->g, nd, "eps", eps);
    }
    return elab_emit(e, nd);
}

/* rope(x, theta=10000.0) */
BUILTIN(b_rope) {
    ARG_TENSOR(0, x);
    double theta = 10000.0;
    if (given[1] && !elab_want_num(e, a[1], al[1], "theta", &theta)) return val_poison();
    Node *nd = ir_new(e->g, OP_rope, 1, &x, loc);
    ir_set_float(e->g, nd, "theta", theta);
    return elab_emit(e, nd);
}

/* attention(q, k, v, causal=true, scale=1/sqrt(D)): result 0 */
BUILTIN(b_attention) {
    ARG_TENSOR(0, q);
    ARG_TENSOR(1, k);
    ARG_TENSOR(2, v);
    Value *in[3] = {q, k, v};
    Node *nd = ir_new(e->g, OP_attention, 3, in, loc);
    bool causal = true;
    if (given[3] && !elab_want_bool(e, a[3], al[3], "causal", &causal)) return val_poison();
    ir_set_int(e->g, nd, "causal", causal);
    if (given[4] && a[4].k != V_NONE) {
        double s;
        if (!elab_want_num(e, a[4], al[4], "scale", &s)) return val_poison();
        ir_set_float(e->g, nd, "scale", s);
    }
    return elab_emit(e, nd);
}

/* dropout(x, p): x itself when p == 0 */
BUILTIN(b_dropout) {
    (void)given;
    ARG_TENSOR(0, x);
    double p;
    if (!elab_want_num(e, a[1], al[1], "p", &p)) return val_poison();
    if (p == 0) return a[0];
    if (!(p > 0 && p < 1)) {
        char t[32];
        fmt_double(t, p);
        error_at(e->d, al[1], "dropout probability must be in [0, 1), not %s", t);
        return val_poison();
    }
    if (!e->seed) e->seed = ir_source(e->g, OP_input, "rng.seed", (Type){DT_i32, {0}}, loc)->out[0];
    Value *in[2] = {x, e->seed};
    Node *nd = ir_new(e->g, OP_dropout, 2, in, loc);
    ir_set_float(e->g, nd, "p", p);
    ir_set_int(e->g, nd, "stream", e->stream++);
    return elab_emit(e, nd);
}

/* cross_entropy(logits, targets, ignore_index=-100): result 0, the mean loss */
BUILTIN(b_cross_entropy) {
    ARG_TENSOR(0, logits);
    ARG_TENSOR(1, targets);
    DType tdt = targets->ty.dt;
    targets = index_i32(e, targets, loc);
    if (!targets) return val_poison();
    Value *in[2] = {logits, targets};
    Node *nd = ir_new(e->g, OP_cross_entropy, 2, in, loc);
    int64_t ig = -100;
    if (given[2] && !elab_want_int(e, a[2], al[2], "ignore_index", &ig)) return val_poison();
    if (ig < -(INT64_C(1) << 53) || ig > (INT64_C(1) << 53)) { /* as the IR checks it, but at the argument */
        error_at(e->d, al[2], "ignore_index is %lld: it must be in -2^53 .. 2^53", (long long)ig);
        return val_poison();
    }
    /* i64 targets are read as i32 (wrapped): an ignore_index past i32 would
     * match none of them, and a target equal to it would wrap to a class */
    if (tdt == DT_i64 && (ig < INT32_MIN || ig > INT32_MAX)) {
        error_at(e->d, al[2], "ignore_index %lld does not fit in i32, and the i64 targets are read as i32: take one in -2^31 .. 2^31 - 1",
                 (long long)ig);
        return val_poison();
    }
    ir_set_int(e->g, nd, "ignore_index", ig);
    return elab_emit(e, nd);
}

/* cast(x, "bf16") */
BUILTIN(b_cast) {
    (void)given;
    ARG_TENSOR(0, x);
    DType dt;
    if (!elab_want_dtype(e, a[1], al[1], &dt)) return val_poison();
    Node *nd = ir_new(e->g, OP_cast, 1, &x, loc);
    ir_set_str(e->g, nd, "dtype", dtype_name[dt]);
    return elab_emit(e, nd);
}

/* arange(n) -> iota i32[n] */
BUILTIN(b_arange) {
    (void)given;
    int64_t n;
    if (!elab_want_int(e, a[0], al[0], "argument 'n' of arange", &n) || !tensors_allowed(e, bi, loc)) return val_poison();
    if (n < 1) {
        error_at(e->d, al[0], "arange(%lld): n must be positive (a tensor has no empty dimension)", (long long)n);
        return val_poison();
    }
    if (n > (int64_t)INT32_MAX + 1) { /* its values are i32s */
        error_at(e->d, al[0], "arange(%lld): the values 0 to n - 1 are i32, so n is at most 2147483648", (long long)n);
        return val_poison();
    }
    Type t = {DT_i32, {1, {n}}};
    if (!elab_check_type(e, &t, al[0])) return val_poison();
    Node *nd = ir_source(e->g, OP_iota, NULL, t, loc);
    ir_set_int(e->g, nd, "axis", 0);
    return val_tensor(nd->out[0]);
}

/* zeros(shape, dtype="f32"), ones(shape, dtype), full(shape, value, dtype) */
BUILTIN(b_fill) {
    bool full = strcmp(bi->name, "full") == 0;
    Type t = {DT_f32, {0}};
    int64_t dims[IR_MAX_RANK];
    int n = 0;
    if (a[0].k == V_INT) dims[n++] = a[0].i;
    else if (!elab_want_ints(e, a[0], al[0], "the shape", IR_MAX_RANK, dims, &n, true)) return val_poison();
    t.shape = shape_make(n, dims);
    double v = strcmp(bi->name, "ones") == 0 ? 1.0 : 0.0;
    if (full && !elab_want_num(e, a[1], al[1], "value", &v)) return val_poison();
    int dt = full ? 2 : 1;
    if (given[dt] && !elab_want_dtype(e, a[dt], al[dt], &t.dt)) return val_poison();
    if (full) { /* the value is one the dtype holds (an integral number an integer: 0.0 is 0) */
        char of[64];
        Val num = a[1];
        if (!dtype_is_float[t.dt] && num.k == V_FLOAT && num.f == floor(num.f) && fabs(num.f) <= 9007199254740992.0) num = val_int((int64_t)num.f);
        snprintf(of, sizeof of, "dtype %s", dtype_name[t.dt]);
        if (!elab_num_fits(e, num, t.dt, of, al[1])) return val_poison();
    }
    if (!elab_check_type(e, &t, al[0]) || !tensors_allowed(e, bi, loc)) return val_poison();
    return val_tensor(ir_const(e->g, v, t, loc));
}

/* dim(x, axis) -> an integer */
BUILTIN(b_dim) {
    (void)given;
    ARG_TENSOR(0, x);
    int64_t axis;
    int ax;
    if (!elab_want_int(e, a[1], al[1], "axis", &axis) || !norm_axis(e, axis, x->ty.shape.rank, al[1], &ax)) return val_poison();
    return val_int(x->ty.shape.d[ax]);
}

const Builtin elab_builtins[] = {
    {"exp", "x", b_unary, OP_exp},
    {"log", "x", b_unary, OP_log},
    {"sqrt", "x", b_unary, OP_sqrt},
    {"rsqrt", "x", b_unary, OP_rsqrt},
    {"tanh", "x", b_unary, OP_tanh},
    {"sigmoid", "x", b_unary, OP_sigmoid},
    {"relu", "x", b_unary, OP_relu},
    {"silu", "x", b_unary, OP_silu},
    {"abs", "x", b_unary, OP_abs},
    {"neg", "x", b_unary, OP_neg},
    {"gelu", "x, approximate?", b_gelu, OP_gelu},
    {"matmul", "a, b", b_matmul, OP_matmul},
    {"linear", "x, w, b?", b_linear, OP_matmul},
    {"sum", "x, axis?, keepdim?", b_reduce, OP_sum},
    {"mean", "x, axis?, keepdim?", b_reduce, OP_mean},
    {"max", "x, axis?, keepdim?", b_max, OP_max},
    {"min", "a, b", b_min, OP_minimum},
    {"maximum", "a, b", b_elementwise, OP_maximum},
    {"minimum", "a, b", b_elementwise, OP_minimum},
    {"int", "x", b_convert, OP_cast},
    {"float", "x", b_convert, OP_cast},
    {"reshape", "x, shape", b_reshape, OP_reshape},
    {"transpose", "x, a?, b?", b_transpose, OP_permute},
    {"permute", "x, perm", b_permute, OP_permute},
    {"split", "x, parts, axis?", b_split, OP_slice},
    {"concat", "xs, axis?", b_concat, OP_concat},
    {"slice", "x, axis, start, end", b_slice, OP_slice},
    {"embedding", "table, idx", b_embedding, OP_embedding},
    {"softmax", "x, axis?", b_softmax, OP_softmax},
    {"layer_norm", "x, w, b, eps?", b_norm, OP_layer_norm},
    {"rms_norm", "x, w, eps?", b_norm, OP_rms_norm},
    {"rope", "x, theta?", b_rope, OP_rope},
    {"attention", "q, k, v, causal?, scale?", b_attention, OP_attention},
    {"dropout", "x, p", b_dropout, OP_dropout},
    {"cross_entropy", "logits, targets, ignore_index?", b_cross_entropy, OP_cross_entropy},
    {"cast", "x, dtype", b_cast, OP_cast},
    {"arange", "n", b_arange, OP_iota},
    {"zeros", "shape, dtype?", b_fill, OP_constant},
    {"ones", "shape, dtype?", b_fill, OP_constant},
    {"full", "shape, value, dtype?", b_fill, OP_constant},
    {"dim", "x, axis", b_dim, OP_constant},
};
const int elab_nbuiltins = (int)(sizeof elab_builtins / sizeof elab_builtins[0]);

const Builtin *elab_builtin(const char *name) {
    for (int i = 0; i < elab_nbuiltins; i++)
        if (strcmp(elab_builtins[i].name, name) == 0) return &elab_builtins[i];
    return NULL;
}

int elab_builtin_params(const Builtin *b, char buf[128], const char **names, bool *optional) {
    snprintf(buf, 128, "%s", b->params);
    int n = 0;
    for (char *p = buf; *p && n < ELAB_MAX_ARGS;) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        char *s = p;
        while (*p && *p != ',') p++;
        char *end = p;
        if (*p) p++;
        *end = 0;
        size_t len = strlen(s);
        optional[n] = len > 0 && s[len - 1] == '?';
        if (optional[n]) s[len - 1] = 0;
        names[n++] = s;
    }
    return n;
}
