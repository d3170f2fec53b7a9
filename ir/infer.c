/* ir/infer.c — shape and dtype inference: one function per op, in the
 * order of ops.h.  Each checks its operands and attributes, normalises the
 * attributes (negative axes, defaults made explicit) and sets the result
 * types.  Errors are located at the node's source. */
#include "ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef bool InferFn(Graph *g, Node *n, Diag *d);

#define TS(t, buf) type_str((t), (buf), sizeof(buf))
#define IN(i) (&n->in[(i)]->ty)
#define OUT(i) (&n->out[(i)]->ty)

static bool fail(Diag *d, Node *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail(Diag *d, Node *n, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    error_at(d, n->loc, "%s: %s", op_name(n->op), msg);
    return false;
}

int ir_norm_axis(int64_t axis, int rank) {
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return -1;
    return (int)axis;
}

static bool need_float(Diag *d, Node *n, int i) {
    char b[160];
    if (!dtype_is_float[IN(i)->dt]) return fail(d, n, "operand %d must be a floating-point tensor, not %s", i + 1, TS(IN(i), b));
    return true;
}

static bool need_int(Diag *d, Node *n, int i) {
    char b[160];
    if (dtype_is_float[IN(i)->dt]) return fail(d, n, "operand %d must be an integer tensor, not %s", i + 1, TS(IN(i), b));
    return true;
}

static bool need_scalar(Diag *d, Node *n, int i) {
    char b[160];
    if (IN(i)->shape.rank != 0) return fail(d, n, "operand %d must be a scalar, not %s", i + 1, TS(IN(i), b));
    return true;
}

static bool need_same(Diag *d, Node *n, int i, int j) {
    char a[160], b[160];
    if (!type_eq(IN(i), IN(j)))
        return fail(d, n, "operands %d and %d must have the same type: %s vs %s", i + 1, j + 1, TS(IN(i), a), TS(IN(j), b));
    return true;
}

/* Normalises a single-axis attribute `key` (default dflt) against rank. */
static bool norm_axis_attr(Graph *g, Node *n, Diag *d, const char *key, int64_t dflt, int rank) {
    int64_t ax = ir_int(n, key, dflt);
    int a = ir_norm_axis(ax, rank);
    if (a < 0) return fail(d, n, "%s %lld is out of range for a tensor of rank %d", key, (long long)ax, rank);
    ir_set_int(g, n, key, a);
    return true;
}

/* ---- attributes ---- */

/* The kinds each attribute key takes, whatever the op (ops.h): a key not
 * listed, or a value of another kind, is an error.  Read with a default
 * (ir_int, ir_float), a typo was the default and a float where an int is
 * read was truncated (causal=0.9: a non-causal attention). */
#define K(k) (1u << ATTR_##k)
#define NUM (K(INT) | K(FLOAT))
static const struct {
    const char *key;
    unsigned    kinds;
} attr_kinds[] = { /* sorted by key */
    {"approx", K(INT)}, {"axes", K(INTS)},     {"axis", K(INT)},       {"beta1", NUM},         {"beta2", NUM},
    {"causal", K(INT)}, {"chunk", K(INT)},     {"classes", K(INT)},    {"copy_of", K(STR)},    {"dtype", K(STR)},
    {"end", K(INT)},    {"eps", NUM},          {"frozen", K(INT)},     {"hi", NUM},            {"ignore_index", K(INT)},
    {"index_end", K(INT)}, {"index_ignore", K(INT)}, {"init", K(STR)}, {"inverse", K(INT)},    {"keepdim", K(INT)},
    {"lo", NUM},        {"max_norm", NUM},     {"momentum", NUM},      {"name", K(STR)},       {"nesterov", K(INT)},
    {"p", NUM},         {"perm", K(INTS)},     {"recompute", K(INT)},  {"rows", K(INT)},       {"scale", NUM},
    {"shape", K(INTS)}, {"start", K(INT)},     {"std", NUM},           {"stream", K(INT)},     {"ta", K(INT)},
    {"tb", K(INT)},     {"tf32", K(INT)},      {"theta", NUM},         {"unpadded", K(INTS)},  {"value", NUM},
    {"wd", NUM},        {"window", K(INT)},
};
#undef NUM
#undef K

static bool check_attr_kinds(Node *n, Diag *d) {
    static const char *const kind_name[] = {[ATTR_INT] = "an integer", [ATTR_FLOAT] = "a number", [ATTR_STR] = "a string",
                                            [ATTR_INTS] = "a list of integers"};
    int lo = 0, hi = (int)(sizeof attr_kinds / sizeof attr_kinds[0]) - 1;
    for (int i = 0; i < n->nattr; i++) {
        const Attr *a = &n->attrs[i];
        int k = -1;
        for (int l = lo, h = hi; l <= h && k < 0;) {
            int m = (l + h) / 2, c = strcmp(a->key, attr_kinds[m].key);
            if (c == 0) k = m;
            else if (c < 0) h = m - 1;
            else l = m + 1;
        }
        if (k < 0) return fail(d, n, "unknown attribute '%s'", a->key);
        unsigned want = attr_kinds[k].kinds;
        if (!(want & (1u << a->kind))) /* a number takes an integer too: it is named for what it wants */
            return fail(d, n, "attribute '%s' must be %s, not %s", a->key, kind_name[want & (1u << ATTR_FLOAT) ? ATTR_FLOAT : __builtin_ctz(want)],
                        kind_name[a->kind]);
    }
    return true;
}

/* ---- sources ---- */

/* A param's or state's initialiser: its numbers as the front end takes
 * them (std >= 0, lo <= hi, all finite), and the shape it is counted over
 * when pad-tiles padded it ({unpadded}: within the tensor's). */
static bool check_init(Node *n, Diag *d) {
    const char *init = ir_str(n, "init", "zeros");
    static const char *const inits[] = {"zeros", "ones", "normal", "uniform", "constant"};
    bool ok = false;
    for (size_t i = 0; i < sizeof inits / sizeof inits[0]; i++) ok |= strcmp(init, inits[i]) == 0;
    if (!ok) return fail(d, n, "unknown initialiser '%s' (expected zeros, ones, normal, uniform or constant)", init);
    if (!dtype_is_float[OUT(0)->dt] && n->op == OP_param) return fail(d, n, "parameters must be floating point");
    double std = ir_float(n, "std", 1.0), lo = ir_float(n, "lo", 0.0), hi = ir_float(n, "hi", 1.0);
    if (!(std >= 0) || isinf(std)) {
        char v[32];
        snprintf(v, sizeof v, isnan(std) ? "nan" : "%g", std); /* not "-nan" */
        return fail(d, n, "std is %s: it must be finite and not negative", v);
    }
    if (!isfinite(lo) || !isfinite(hi) || lo > hi) /* hi 1 and lo 0 where not given, as the initialisation reads them */
        return fail(d, n, "lo %g%s and hi %g%s: the uniform initialiser needs finite lo <= hi", lo, ir_attr(n, "lo") ? "" : " (not given)", hi,
                    ir_attr(n, "hi") ? "" : " (not given)");
    if (isnan(ir_float(n, "value", 0.0))) return fail(d, n, "value is nan");
    int64_t frozen = ir_int(n, "frozen", 0);
    if (frozen != 0 && frozen != 1) return fail(d, n, "frozen must be 0 or 1, not %lld", (long long)frozen);
    const Attr *up = ir_attr(n, "unpadded");
    if (up) {
        const Shape *sh = &OUT(0)->shape;
        if (up->n != sh->rank)
            return fail(d, n, "unpadded has %d dimension%s, the tensor %d", up->n, up->n == 1 ? "" : "s", sh->rank);
        for (int i = 0; i < up->n; i++)
            if (up->v[i] < 1 || up->v[i] > sh->d[i])
                return fail(d, n, "unpadded dimension %d is %lld, outside 1 .. %lld (the tensor's)", i, (long long)up->v[i], (long long)sh->d[i]);
    }
    return true;
}

static bool infer_source(Graph *g, Node *n, Diag *d) {
    (void)g;
    if (n->op != OP_constant && n->op != OP_iota && !ir_source_name(n)) return fail(d, n, "a name attribute is required");
    if ((n->op == OP_param || n->op == OP_state) && !check_init(n, d)) return false;
    if (n->op == OP_constant && !ir_attr(n, "value")) return fail(d, n, "a value attribute is required");
    if (n->op == OP_iota && OUT(0)->shape.rank > 0) return norm_axis_attr(g, n, d, "axis", 0, OUT(0)->shape.rank);
    if (n->op == OP_iota && ir_int(n, "axis", 0) != 0) /* a scalar iota is 0: an axis past it was kept as given */
        return fail(d, n, "axis %lld is out of range for a scalar", (long long)ir_int(n, "axis", 0));
    for (int i = 0; i < OUT(0)->shape.rank; i++)
        if (OUT(0)->shape.d[i] <= 0) return fail(d, n, "dimension %d is %lld; dimensions must be positive", i, (long long)OUT(0)->shape.d[i]);
    return true;
}

/* ---- pointwise ---- */

static bool infer_unary(Graph *g, Node *n, Diag *d) {
    (void)g;
    if (n->op != OP_neg && n->op != OP_abs && n->op != OP_sign && !need_float(d, n, 0)) return false;
    *OUT(0) = *IN(0);
    if (n->op == OP_gelu) {
        int64_t ap = ir_int(n, "approx", 0);
        if (ap != 0 && ap != 1) return fail(d, n, "approx must be 0 (erf) or 1 (tanh)");
        ir_set_int(g, n, "approx", ap);
    }
    return true;
}

static bool infer_cast(Graph *g, Node *n, Diag *d) {
    (void)g;
    DType dt;
    const char *s = ir_str(n, "dtype", NULL);
    if (!s || !dtype_parse(s, &dt)) return fail(d, n, "needs a dtype attribute naming a dtype, got '%s'", s ? s : "(none)");
    *OUT(0) = *IN(0);
    OUT(0)->dt = dt;
    return true;
}

static bool infer_binary(Graph *g, Node *n, Diag *d) {
    (void)g;
    char a[160], b[160];
    if (IN(0)->dt != IN(1)->dt) return fail(d, n, "operand dtypes differ: %s vs %s", TS(IN(0), a), TS(IN(1), b));
    Shape s;
    if (!shape_broadcast(&IN(0)->shape, &IN(1)->shape, &s))
        return fail(d, n, "shapes do not broadcast: %s vs %s", TS(IN(0), a), TS(IN(1), b));
    OUT(0)->dt = IN(0)->dt;
    OUT(0)->shape = s;
    return true;
}

static bool infer_pw_grad(Graph *g, Node *n, Diag *d) {
    if (!need_same(d, n, 0, 1) || !need_float(d, n, 0)) return false;
    *OUT(0) = *IN(0);
    if (n->op == OP_gelu_grad) ir_set_int(g, n, "approx", ir_int(n, "approx", 0));
    return true;
}

/* ---- reductions ---- */

/* Normalises {axes} (default: every axis) and {keepdim}; computes the
 * reduced shape of x into out. */
static bool reduce_shape(Graph *g, Node *n, Diag *d, const Shape *x, Shape *out) {
    const Attr *at = ir_attr(n, "axes");
    int64_t axes[IR_MAX_RANK];
    int na = 0;
    bool mark[IR_MAX_RANK] = {0};
    if (!at) {
        for (int i = 0; i < x->rank; i++) axes[na++] = i;
    } else {
        if (at->kind == ATTR_INT) {
            int a = ir_norm_axis(at->i, x->rank);
            if (a < 0) return fail(d, n, "axis %lld is out of range for rank %d", (long long)at->i, x->rank);
            axes[na++] = a;
        } else if (at->kind == ATTR_INTS) {
            if (at->n > x->rank) return fail(d, n, "more axes than the tensor has dimensions");
            for (int i = 0; i < at->n; i++) {
                int a = ir_norm_axis(at->v[i], x->rank);
                if (a < 0) return fail(d, n, "axis %lld is out of range for rank %d", (long long)at->v[i], x->rank);
                axes[na++] = a;
            }
        } else {
            return fail(d, n, "axes must be a list of integers");
        }
    }
    for (int i = 0; i < na; i++) {
        if (mark[axes[i]]) return fail(d, n, "axis %lld is listed twice", (long long)axes[i]);
        mark[axes[i]] = true;
    }
    na = 0;
    for (int i = 0; i < x->rank; i++)
        if (mark[i]) axes[na++] = i;
    ir_set_ints(g, n, "axes", na, axes);
    int64_t keep = ir_int(n, "keepdim", 0);
    ir_set_int(g, n, "keepdim", keep ? 1 : 0);
    Shape s = {0};
    for (int i = 0; i < x->rank; i++) {
        if (!mark[i]) s.d[s.rank++] = x->d[i];
        else if (keep) s.d[s.rank++] = 1;
    }
    *out = s;
    return true;
}

static bool infer_reduce(Graph *g, Node *n, Diag *d) {
    if (n->op != OP_sum && !need_float(d, n, 0)) return false;
    OUT(0)->dt = IN(0)->dt;
    return reduce_shape(g, n, d, &IN(0)->shape, &OUT(0)->shape);
}

static bool infer_max_grad(Graph *g, Node *n, Diag *d) {
    char a[160], b[160];
    Shape r;
    for (int i = 0; i < 3; i++)
        if (!need_float(d, n, i)) return false;
    if (!reduce_shape(g, n, d, &IN(1)->shape, &r)) return false;
    if (!shape_eq(&r, &IN(0)->shape) || !shape_eq(&r, &IN(2)->shape))
        return fail(d, n, "dy %s and y %s must have the reduced shape of x", TS(IN(0), a), TS(IN(2), b));
    *OUT(0) = *IN(1);
    return true;
}

/* ---- shape ops ---- */

static bool infer_reshape(Graph *g, Node *n, Diag *d) {
    const Attr *at = ir_attr(n, "shape");
    char a[160];
    if (!at || at->kind != ATTR_INTS) return fail(d, n, "needs a shape attribute (a list of integers)");
    if (at->n > IR_MAX_RANK) return fail(d, n, "rank %d exceeds the maximum of %d", at->n, IR_MAX_RANK);
    int64_t dims[IR_MAX_RANK], known = 1;
    int infer_at = -1;
    for (int i = 0; i < at->n; i++) {
        dims[i] = at->v[i];
        if (dims[i] == -1) {
            if (infer_at >= 0) return fail(d, n, "only one dimension may be -1");
            infer_at = i;
        } else if (dims[i] <= 0) {
            return fail(d, n, "dimension %d is %lld; dimensions must be positive", i, (long long)dims[i]);
        } else {
            if (known > INT64_MAX / dims[i]) return fail(d, n, "the shape has too many elements");
            known *= dims[i];
        }
    }
    int64_t total = shape_numel(&IN(0)->shape);
    if (infer_at >= 0) {
        if (known == 0 || total % known) return fail(d, n, "cannot infer the -1 dimension: %lld elements do not divide into %lld", (long long)total, (long long)known);
        dims[infer_at] = total / known;
        known = total;
    }
    Shape s = shape_make(at->n, dims);
    if (known != total) {
        char b[160];
        return fail(d, n, "cannot reshape %s (%lld elements) to %s (%lld elements)", TS(IN(0), a), (long long)total,
                    shape_str(&s, b, sizeof b), (long long)known);
    }
    ir_set_ints(g, n, "shape", at->n, dims);
    OUT(0)->dt = IN(0)->dt;
    OUT(0)->shape = s;
    return true;
}

static bool infer_permute(Graph *g, Node *n, Diag *d) {
    (void)g;
    const Attr *at = ir_attr(n, "perm");
    int r = IN(0)->shape.rank;
    if (!at || at->kind != ATTR_INTS) return fail(d, n, "needs a perm attribute (a list of integers)");
    if (at->n != r) return fail(d, n, "perm has %d entries but the operand has rank %d", at->n, r);
    bool seen[IR_MAX_RANK] = {0};
    int64_t p[IR_MAX_RANK];
    Shape s = {0};
    s.rank = r;
    for (int i = 0; i < r; i++) {
        int a = ir_norm_axis(at->v[i], r);
        if (a < 0 || seen[a]) return fail(d, n, "perm is not a permutation of 0..%d", r - 1);
        seen[a] = true;
        p[i] = a;
        s.d[i] = IN(0)->shape.d[a];
    }
    ir_set_ints(g, n, "perm", r, p);
    OUT(0)->dt = IN(0)->dt;
    OUT(0)->shape = s;
    return true;
}

static bool infer_broadcast(Graph *g, Node *n, Diag *d) {
    (void)g;
    const Attr *at = ir_attr(n, "shape");
    char a[160], b[160];
    if (!at || at->kind != ATTR_INTS || at->n > IR_MAX_RANK) return fail(d, n, "needs a shape attribute (a list of integers)");
    Shape s = shape_make(at->n, at->v), r;
    if (!shape_broadcast(&IN(0)->shape, &s, &r) || !shape_eq(&r, &s))
        return fail(d, n, "cannot broadcast %s to %s", TS(IN(0), a), shape_str(&s, b, sizeof b));
    OUT(0)->dt = IN(0)->dt;
    OUT(0)->shape = s;
    return true;
}

static bool infer_slice(Graph *g, Node *n, Diag *d) {
    int r = IN(0)->shape.rank;
    if (r == 0) return fail(d, n, "cannot slice a scalar");
    if (!norm_axis_attr(g, n, d, "axis", 0, r)) return false;
    int ax = (int)ir_int(n, "axis", 0);
    int64_t dim = IN(0)->shape.d[ax];
    int64_t st = ir_int(n, "start", 0), en = ir_int(n, "end", dim);
    if (st < 0) st += dim;
    if (en < 0) en += dim;
    if (st < 0 || en > dim || st >= en)
        return fail(d, n, "range %lld:%lld is empty or outside 0:%lld of axis %d", (long long)ir_int(n, "start", 0),
                    (long long)ir_int(n, "end", dim), (long long)dim, ax);
    ir_set_int(g, n, "start", st);
    ir_set_int(g, n, "end", en);
    *OUT(0) = *IN(0);
    OUT(0)->shape.d[ax] = en - st;
    return true;
}

static bool infer_pad(Graph *g, Node *n, Diag *d) {
    int r = IN(0)->shape.rank;
    if (r == 0) return fail(d, n, "cannot pad a scalar");
    if (!norm_axis_attr(g, n, d, "axis", 0, r)) return false;
    int ax = (int)ir_int(n, "axis", 0);
    static const char *const ends[] = {"lo", "hi"};
    for (int i = 0; i < 2; i++) { /* numbers for a param's uniform initialiser (attr_kinds), counts here */
        const Attr *a = ir_attr(n, ends[i]);
        if (a && a->kind != ATTR_INT) return fail(d, n, "attribute '%s' must be an integer, not a number", ends[i]);
    }
    int64_t lo = ir_int(n, "lo", 0), hi = ir_int(n, "hi", 0);
    if (lo < 0 || hi < 0) return fail(d, n, "padding must not be negative");
    if (lo > INT64_MAX / 4 || hi > INT64_MAX / 4 - lo - IN(0)->shape.d[ax]) return fail(d, n, "padding is too large");
    ir_set_int(g, n, "lo", lo);
    ir_set_int(g, n, "hi", hi);
    *OUT(0) = *IN(0);
    OUT(0)->shape.d[ax] += lo + hi;
    return true;
}

static bool infer_concat(Graph *g, Node *n, Diag *d) {
    char a[160], b[160];
    int r = IN(0)->shape.rank;
    if (r == 0) return fail(d, n, "cannot concatenate scalars");
    if (!norm_axis_attr(g, n, d, "axis", 0, r)) return false;
    int ax = (int)ir_int(n, "axis", 0);
    Type t = *IN(0);
    for (int i = 1; i < n->nin; i++) {
        bool ok = IN(i)->dt == t.dt && IN(i)->shape.rank == r;
        for (int k = 0; ok && k < r; k++) ok = k == ax || IN(i)->shape.d[k] == IN(0)->shape.d[k];
        if (!ok) return fail(d, n, "operand %d %s does not fit operand 1 %s along axis %d", i + 1, TS(IN(i), a), TS(IN(0), b), ax);
        if (t.shape.d[ax] > INT64_MAX / 2 - IN(i)->shape.d[ax]) return fail(d, n, "the result is too large");
        t.shape.d[ax] += IN(i)->shape.d[ax];
    }
    *OUT(0) = t;
    return true;
}

/* ---- matmul ---- */

static bool infer_matmul(Graph *g, Node *n, Diag *d) {
    char a[160], b[160];
    const Type *A = IN(0), *B = IN(1);
    if (!need_float(d, n, 0) || !need_float(d, n, 1)) return false;
    if (A->dt != B->dt) return fail(d, n, "operand dtypes differ: %s vs %s", TS(A, a), TS(B, b));
    if (A->shape.rank < 2 || B->shape.rank < 2) return fail(d, n, "operands must have rank >= 2: %s, %s", TS(A, a), TS(B, b));
    int64_t ta = ir_int(n, "ta", 0) ? 1 : 0, tb = ir_int(n, "tb", 0) ? 1 : 0;
    ir_set_int(g, n, "ta", ta);
    ir_set_int(g, n, "tb", tb);
    int ra = A->shape.rank, rb = B->shape.rank;
    int64_t M = A->shape.d[ra - 2 + ta], K = A->shape.d[ra - 1 - ta];
    int64_t K2 = B->shape.d[rb - 2 + tb], N = B->shape.d[rb - 1 - tb];
    if (K != K2)
        return fail(d, n, "inner dimensions do not match: %s%s has K=%lld, %s%s has K=%lld", TS(A, a), ta ? " (transposed)" : "",
                    (long long)K, TS(B, b), tb ? " (transposed)" : "", (long long)K2);
    Shape ba = shape_make(ra - 2, A->shape.d), bb = shape_make(rb - 2, B->shape.d), bs;
    if (!shape_broadcast(&ba, &bb, &bs)) return fail(d, n, "batch dimensions do not broadcast: %s vs %s", TS(A, a), TS(B, b));
    if (bs.rank + 2 > IR_MAX_RANK) return fail(d, n, "result rank too large");
    bs.d[bs.rank++] = M;
    bs.d[bs.rank++] = N;
    /* {dtype=f32}: the products of half operands summed into f32 (a weight's
     * gradient under mixed precision, passes/optimizer.c) */
    DType rt = A->dt;
    const char *ds = ir_str(n, "dtype", NULL);
    if (ds) {
        if (!dtype_parse(ds, &rt)) return fail(d, n, "dtype '%s' is not a dtype", ds);
        if (rt != A->dt && !(rt == DT_f32 && dtype_is_half(A->dt)))
            return fail(d, n, "a %s result of %s operands: only bf16/f16 operands may give an f32 result", dtype_name[rt], TS(A, a));
    }
    OUT(0)->dt = rt;
    OUT(0)->shape = bs;
    return true;
}

/* ---- neural-network ops ---- */

static bool infer_embedding(Graph *g, Node *n, Diag *d) {
    (void)g;
    char a[160];
    if (IN(0)->shape.rank != 2) return fail(d, n, "the table must be [rows, dim], not %s", TS(IN(0), a));
    if (!need_float(d, n, 0) || !need_int(d, n, 1)) return false;
    if (IN(1)->shape.rank + 1 > IR_MAX_RANK) return fail(d, n, "index rank too large");
    Shape s = IN(1)->shape;
    s.d[s.rank++] = IN(0)->shape.d[1];
    OUT(0)->dt = IN(0)->dt;
    OUT(0)->shape = s;
    return true;
}

static bool infer_embedding_grad(Graph *g, Node *n, Diag *d) {
    (void)g;
    char a[160], b[160];
    if (!need_float(d, n, 0) || !need_int(d, n, 1)) return false;
    const Shape *dy = &IN(0)->shape, *ix = &IN(1)->shape;
    bool ok = dy->rank == ix->rank + 1;
    for (int i = 0; ok && i < ix->rank; i++) ok = dy->d[i] == ix->d[i];
    if (!ok) return fail(d, n, "dy %s does not match the indices %s", TS(IN(0), a), TS(IN(1), b));
    int64_t rows = ir_int(n, "rows", 0);
    if (rows <= 0) return fail(d, n, "needs rows > 0");
    OUT(0)->dt = IN(0)->dt;
    OUT(0)->shape.rank = 2;
    OUT(0)->shape.d[0] = rows;
    OUT(0)->shape.d[1] = dy->d[dy->rank - 1];
    return true;
}

static bool infer_softmax(Graph *g, Node *n, Diag *d) {
    if (!need_float(d, n, 0)) return false;
    if (IN(0)->shape.rank == 0) return fail(d, n, "needs a tensor of rank >= 1");
    if (n->op == OP_softmax_grad && !need_same(d, n, 0, 1)) return false;
    if (!norm_axis_attr(g, n, d, "axis", -1, IN(0)->shape.rank)) return false;
    *OUT(0) = *IN(0);
    return true;
}

/* x [...,C] and per-row statistics [...] in f32. */
static Type row_stats(const Type *x) {
    Type t = {DT_f32, x->shape};
    t.shape.rank--;
    return t;
}

static bool check_gain(Diag *d, Node *n, int i, int64_t C, DType dt) {
    char a[160];
    if (IN(i)->shape.rank != 1 || IN(i)->shape.d[0] != C || IN(i)->dt != dt)
        return fail(d, n, "operand %d must be %s[%lld], not %s", i + 1, dtype_name[dt], (long long)C, TS(IN(i), a));
    return true;
}

static bool check_stats(Diag *d, Node *n, int i, const Type *x) {
    char a[160], b[160];
    Type t = row_stats(x);
    if (!type_eq(IN(i), &t)) return fail(d, n, "operand %d must be %s, not %s", i + 1, TS(&t, a), TS(IN(i), b));
    return true;
}

static bool norm_eps(Graph *g, Node *n, Diag *d, double dflt) {
    double eps = ir_float(n, "eps", dflt);
    if (!(eps >= 0)) return fail(d, n, "eps must be >= 0");
    ir_set_float(g, n, "eps", eps);
    return true;
}

static bool infer_layer_norm(Graph *g, Node *n, Diag *d) {
    if (!need_float(d, n, 0)) return false;
    if (IN(0)->shape.rank < 1) return fail(d, n, "needs a tensor of rank >= 1");
    int64_t C = IN(0)->shape.d[IN(0)->shape.rank - 1];
    if (!check_gain(d, n, 1, C, IN(1)->dt) || !check_gain(d, n, 2, C, IN(1)->dt)) return false;
    if (!norm_eps(g, n, d, 1e-5)) return false;
    *OUT(0) = *IN(0);
    *OUT(1) = *OUT(2) = row_stats(IN(0));
    return true;
}

static bool infer_layer_norm_grad(Graph *g, Node *n, Diag *d) {
    (void)g;
    if (!need_same(d, n, 0, 1) || !need_float(d, n, 0)) return false;
    if (IN(1)->shape.rank < 1) return fail(d, n, "needs a tensor of rank >= 1");
    int64_t C = IN(1)->shape.d[IN(1)->shape.rank - 1];
    if (!check_gain(d, n, 2, C, IN(2)->dt) || !check_stats(d, n, 3, IN(1)) || !check_stats(d, n, 4, IN(1))) return false;
    *OUT(0) = *IN(1);
    *OUT(1) = *OUT(2) = *IN(2);
    return true;
}

static bool infer_rms_norm(Graph *g, Node *n, Diag *d) {
    if (!need_float(d, n, 0)) return false;
    if (IN(0)->shape.rank < 1) return fail(d, n, "needs a tensor of rank >= 1");
    int64_t C = IN(0)->shape.d[IN(0)->shape.rank - 1];
    if (!check_gain(d, n, 1, C, IN(1)->dt)) return false;
    if (!norm_eps(g, n, d, 1e-6)) return false;
    *OUT(0) = *IN(0);
    *OUT(1) = row_stats(IN(0));
    return true;
}

static bool infer_rms_norm_grad(Graph *g, Node *n, Diag *d) {
    (void)g;
    if (!need_same(d, n, 0, 1) || !need_float(d, n, 0)) return false;
    if (IN(1)->shape.rank < 1) return fail(d, n, "needs a tensor of rank >= 1");
    int64_t C = IN(1)->shape.d[IN(1)->shape.rank - 1];
    if (!check_gain(d, n, 2, C, IN(2)->dt) || !check_stats(d, n, 3, IN(1))) return false;
    *OUT(0) = *IN(1);
    *OUT(1) = *IN(2);
    return true;
}

static bool infer_rope(Graph *g, Node *n, Diag *d) {
    char a[160];
    if (!need_float(d, n, 0)) return false;
    const Shape *s = &IN(0)->shape;
    if (s->rank < 2 || s->d[s->rank - 1] % 2) return fail(d, n, "needs [..., T, D] with an even D, not %s", TS(IN(0), a));
    double theta = ir_float(n, "theta", 10000.0);
    if (!(theta > 0)) return fail(d, n, "theta must be > 0");
    ir_set_float(g, n, "theta", theta);
    ir_set_int(g, n, "inverse", ir_int(n, "inverse", 0) ? 1 : 0);
    *OUT(0) = *IN(0);
    return true;
}

/* q [B,H,T,D], k and v [B,Hkv,S,D]. */
static bool check_qkv(Graph *g, Node *n, Diag *d, int q) {
    char a[160], b[160], c[160];
    const Type *Q = IN(q), *K = IN(q + 1), *V = IN(q + 2);
    for (int i = 0; i < 3; i++)
        if (!need_float(d, n, q + i)) return false;
    if (Q->shape.rank != 4 || K->shape.rank != 4 || !type_eq(K, V) || Q->dt != K->dt)
        return fail(d, n, "needs q [B,H,T,D] and k, v [B,Hkv,S,D] of one dtype; got %s, %s, %s", TS(Q, a), TS(K, b), TS(V, c));
    if (Q->shape.d[0] != K->shape.d[0] || Q->shape.d[3] != K->shape.d[3])
        return fail(d, n, "batch or head dimension differ: q %s, k %s", TS(Q, a), TS(K, b));
    if (Q->shape.d[1] % K->shape.d[1])
        return fail(d, n, "query heads (%lld) must be a multiple of key/value heads (%lld)", (long long)Q->shape.d[1],
                    (long long)K->shape.d[1]);
    int64_t causal = ir_int(n, "causal", 1) ? 1 : 0;
    if (causal && Q->shape.d[2] != K->shape.d[2])
        return fail(d, n, "causal attention needs as many keys (%lld) as queries (%lld)", (long long)K->shape.d[2], (long long)Q->shape.d[2]);
    ir_set_int(g, n, "causal", causal);
    ir_set_float(g, n, "scale", ir_float(n, "scale", 1.0 / sqrt((double)Q->shape.d[3])));
    return true;
}

static bool infer_attention(Graph *g, Node *n, Diag *d) {
    if (!check_qkv(g, n, d, 0)) return false;
    *OUT(0) = *IN(0);
    OUT(1)->dt = DT_f32;
    OUT(1)->shape = shape_make(3, IN(0)->shape.d);
    return true;
}

static bool infer_attention_grad(Graph *g, Node *n, Diag *d) {
    char a[160], b[160];
    if (!check_qkv(g, n, d, 1)) return false;
    if (!need_same(d, n, 0, 1) || !need_same(d, n, 0, 4)) return false;
    Type lse = {DT_f32, shape_make(3, IN(1)->shape.d)};
    if (!type_eq(IN(5), &lse)) return fail(d, n, "lse must be %s, not %s", TS(&lse, a), TS(IN(5), b));
    *OUT(0) = *IN(1);
    *OUT(1) = *IN(2);
    *OUT(2) = *IN(3);
    return true;
}

static bool infer_dropout(Graph *g, Node *n, Diag *d) {
    if (!need_float(d, n, 0) || !need_int(d, n, 1) || !need_scalar(d, n, 1)) return false;
    double p = ir_float(n, "p", 0.0);
    if (!(p >= 0 && p < 1)) return fail(d, n, "p must be in [0, 1), not %g", p);
    ir_set_float(g, n, "p", p);
    ir_set_int(g, n, "stream", ir_int(n, "stream", 0));
    *OUT(0) = *IN(0);
    return true;
}

/* {classes}: only the first `classes` of V columns count (pad-tiles masks
 * its padding this way).  Optional; when present 1 <= classes <= V. */
static bool check_classes(Graph *g, Node *n, Diag *d, int64_t V) {
    (void)g;
    const Attr *a = ir_attr(n, "classes");
    if (!a) return true;
    if (a->kind != ATTR_INT || a->i < 1 || a->i > V)
        return fail(d, n, "classes must be an integer in 1..%lld (the class dimension)", (long long)V);
    return true;
}

/* {ignore_index} (default -100) set on n; at most 2^53 in magnitude, as
 * every integer the interpreter holds (a double) and the generated code
 * writes as a literal (-2^63 has none) */
static bool set_ignore_index(Graph *g, Node *n, Diag *d) {
    int64_t ig = ir_int(n, "ignore_index", -100);
    if (ig < -(INT64_C(1) << 53) || ig > (INT64_C(1) << 53))
        return fail(d, n, "ignore_index is %lld: it must be in -2^53 .. 2^53", (long long)ig);
    ir_set_int(g, n, "ignore_index", ig);
    return true;
}

static bool check_ce(Graph *g, Node *n, Diag *d, int lg) {
    char a[160], b[160];
    const Type *L = IN(lg), *T = IN(lg + 1);
    if (!need_float(d, n, lg) || !need_int(d, n, lg + 1)) return false;
    bool ok = L->shape.rank == T->shape.rank + 1;
    for (int i = 0; ok && i < T->shape.rank; i++) ok = L->shape.d[i] == T->shape.d[i];
    if (!ok) return fail(d, n, "logits %s must be targets %s with one more (class) dimension", TS(L, a), TS(T, b));
    if (!set_ignore_index(g, n, d)) return false;
    return check_classes(g, n, d, L->shape.d[L->shape.rank - 1]);
}

static bool infer_cross_entropy(Graph *g, Node *n, Diag *d) {
    if (!check_ce(g, n, d, 0)) return false;
    OUT(0)->dt = DT_f32;
    OUT(0)->shape.rank = 0;
    *OUT(1) = (Type){DT_f32, IN(1)->shape};
    return true;
}

static bool infer_cross_entropy_grad(Graph *g, Node *n, Diag *d) {
    char a[160], b[160];
    if (!need_scalar(d, n, 0) || !check_ce(g, n, d, 1)) return false;
    Type lse = {DT_f32, IN(2)->shape};
    if (!type_eq(IN(3), &lse)) return fail(d, n, "lse must be %s, not %s", TS(&lse, a), TS(IN(3), b));
    /* lse summed the forward's first {classes} columns: the gradient must
     * mask the same ones, or the padding gets a softmax gradient */
    const Node *f = n->in[3]->def;
    int64_t V = IN(1)->shape.d[IN(1)->shape.rank - 1];
    if (f && f->op == OP_cross_entropy && n->in[3]->res == 1 && f->in[0] == n->in[1] && ir_int(f, "classes", V) != ir_int(n, "classes", V))
        return fail(d, n, "classes %lld, but the cross_entropy whose lse it reads has classes %lld", (long long)ir_int(n, "classes", V),
                    (long long)ir_int(f, "classes", V));
    *OUT(0) = *IN(1);
    return true;
}

/* ---- fused ops ---- */

/* add_layer_norm (x, r, w, b) / add_rms_norm (x, r, w): x and r of one type. */
static bool infer_add_norm(Graph *g, Node *n, Diag *d) {
    bool ln = n->op == OP_add_layer_norm;
    if (!need_float(d, n, 0) || !need_same(d, n, 0, 1)) return false;
    if (IN(0)->shape.rank < 1) return fail(d, n, "needs a tensor of rank >= 1");
    int64_t C = IN(0)->shape.d[IN(0)->shape.rank - 1];
    if (!need_float(d, n, 2) || !check_gain(d, n, 2, C, IN(2)->dt)) return false;
    if (ln && !check_gain(d, n, 3, C, IN(2)->dt)) return false;
    if (!norm_eps(g, n, d, ln ? 1e-5 : 1e-6)) return false;
    *OUT(0) = *OUT(1) = *IN(0);
    for (int i = 2; i < n->nout; i++) *OUT(i) = row_stats(IN(0));
    return true;
}

/* add_layer_norm_grad (dy, ds, s, w, mean, rstd) / add_rms_norm_grad (dy, ds, s, w, rstd). */
static bool infer_add_norm_grad(Graph *g, Node *n, Diag *d) {
    (void)g;
    if (!need_same(d, n, 0, 1) || !need_same(d, n, 0, 2) || !need_float(d, n, 0)) return false;
    if (IN(2)->shape.rank < 1) return fail(d, n, "needs a tensor of rank >= 1");
    int64_t C = IN(2)->shape.d[IN(2)->shape.rank - 1];
    if (!check_gain(d, n, 3, C, IN(3)->dt)) return false;
    for (int i = 4; i < n->nin; i++)
        if (!check_stats(d, n, i, IN(2))) return false;
    *OUT(0) = *IN(2);
    for (int i = 1; i < n->nout; i++) *OUT(i) = *IN(3);
    return true;
}

/* rope_qk (q [...,T,D], k [...,T,D] [, cos [T,D], sin [T,D]]). */
static bool infer_rope_qk(Graph *g, Node *n, Diag *d) {
    char a[160], b[160];
    if (n->nin == 3) return fail(d, n, "takes q and k, or q, k, cos and sin");
    for (int i = 0; i < n->nin; i++)
        if (!need_float(d, n, i)) return false;
    const Shape *q = &IN(0)->shape, *k = &IN(1)->shape;
    if (q->rank < 2 || q->d[q->rank - 1] % 2) return fail(d, n, "q must be [..., T, D] with an even D, not %s", TS(IN(0), a));
    if (k->rank < 2 || k->d[k->rank - 1] != q->d[q->rank - 1] || k->d[k->rank - 2] != q->d[q->rank - 2] || IN(1)->dt != IN(0)->dt)
        return fail(d, n, "k %s must have q's dtype, T and D (q %s)", TS(IN(1), b), TS(IN(0), a));
    if (n->nin == 4) {
        Shape td = shape_make(2, q->d + q->rank - 2);
        for (int i = 2; i < 4; i++)
            if (!shape_eq(&IN(i)->shape, &td) || IN(i)->dt != IN(2)->dt)
                return fail(d, n, "cos and sin must be [T, D] = %s of one dtype, not %s", shape_str(&td, a, sizeof a), TS(IN(i), b));
    }
    double theta = ir_float(n, "theta", 10000.0);
    if (!(theta > 0)) return fail(d, n, "theta must be > 0");
    ir_set_float(g, n, "theta", theta);
    ir_set_int(g, n, "inverse", ir_int(n, "inverse", 0) ? 1 : 0);
    *OUT(0) = *IN(0);
    *OUT(1) = *IN(1);
    return true;
}

/* swiglu / geglu (a, b): a binary pointwise op, a float. */
static bool infer_glu(Graph *g, Node *n, Diag *d) {
    if (!need_float(d, n, 0) || !infer_binary(g, n, d)) return false;
    if (n->op == OP_geglu) {
        int64_t ap = ir_int(n, "approx", 0);
        if (ap != 0 && ap != 1) return fail(d, n, "approx must be 0 (erf) or 1 (tanh)");
        ir_set_int(g, n, "approx", ap);
    }
    return true;
}

/* linear_cross_entropy (x [...,C], w [V,C], targets [...]) {ignore_index, classes, chunk}. */
static bool infer_linear_ce(Graph *g, Node *n, Diag *d) {
    char a[160], b[160];
    const Type *X = IN(0), *W = IN(1), *T = IN(2);
    if (!need_float(d, n, 0) || !need_float(d, n, 1) || !need_int(d, n, 2)) return false;
    if (X->shape.rank < 1 || W->shape.rank != 2 || W->shape.d[1] != X->shape.d[X->shape.rank - 1] || W->dt != X->dt)
        return fail(d, n, "needs x [..., C] and w [V, C] of one dtype, not %s and %s", TS(X, a), TS(W, b));
    bool ok = T->shape.rank == X->shape.rank - 1;
    for (int i = 0; ok && i < T->shape.rank; i++) ok = T->shape.d[i] == X->shape.d[i];
    if (!ok) return fail(d, n, "targets %s must be x %s without its last dimension", TS(T, a), TS(X, b));
    int64_t V = W->shape.d[0], rows = shape_numel(&T->shape);
    if (!set_ignore_index(g, n, d)) return false;
    int64_t cls = ir_int(n, "classes", V), chunk = ir_int(n, "chunk", rows);
    if (cls < 1 || cls > V) return fail(d, n, "classes must be in 1..%lld", (long long)V);
    if (chunk < 1) return fail(d, n, "chunk must be >= 1");
    ir_set_int(g, n, "classes", cls);
    ir_set_int(g, n, "chunk", chunk < rows ? chunk : rows);
    OUT(0)->dt = DT_f32;
    OUT(0)->shape.rank = 0;
    *OUT(1) = (Type){DT_f32, X->shape}; /* gradients leave in f32, whatever x and w are */
    *OUT(2) = (Type){DT_f32, W->shape};
    return true;
}

/* ---- optimizer ---- */

static bool infer_global_norm(Graph *g, Node *n, Diag *d) {
    (void)g;
    for (int i = 0; i < n->nin; i++)
        if (!need_float(d, n, i)) return false;
    *OUT(0) = (Type){DT_f32, {0}};
    return true;
}

static bool infer_clip_coef(Graph *g, Node *n, Diag *d) {
    if (!need_scalar(d, n, 0) || !need_float(d, n, 0)) return false;
    double m = ir_float(n, "max_norm", 1.0);
    if (!(m > 0)) return fail(d, n, "max_norm must be > 0");
    ir_set_float(g, n, "max_norm", m);
    *OUT(0) = (Type){DT_f32, {0}};
    return true;
}

static bool check_opt_scalars(Diag *d, Node *n, int from) {
    for (int i = from; i < n->nin; i++)
        if (!need_scalar(d, n, i)) return false;
    return true;
}

static bool infer_adamw(Graph *g, Node *n, Diag *d) {
    if (!need_float(d, n, 0) || !need_float(d, n, 1) || !need_float(d, n, 2) || !need_same(d, n, 2, 3) || !check_opt_scalars(d, n, 4) ||
        !need_float(d, n, 4) || !need_float(d, n, 6))
        return false;
    char a[160], b[160];
    if (!shape_eq(&IN(0)->shape, &IN(1)->shape) || !shape_eq(&IN(0)->shape, &IN(2)->shape))
        return fail(d, n, "w %s, g and moments %s must have one shape", TS(IN(0), a), TS(IN(2), b));
    if (!need_int(d, n, 5)) return false;
    ir_set_float(g, n, "beta1", ir_float(n, "beta1", 0.9));
    ir_set_float(g, n, "beta2", ir_float(n, "beta2", 0.999));
    ir_set_float(g, n, "eps", ir_float(n, "eps", 1e-8));
    ir_set_float(g, n, "wd", ir_float(n, "wd", 0.0));
    if (n->nin > 7 && !need_float(d, n, 7)) return false;
    *OUT(0) = *IN(0);
    *OUT(1) = *IN(2);
    *OUT(2) = *IN(3);
    return true;
}

static bool infer_sgd(Graph *g, Node *n, Diag *d) {
    char a[160], b[160];
    if (!need_float(d, n, 0) || !need_float(d, n, 1) || !need_float(d, n, 2) || !check_opt_scalars(d, n, 3) || !need_float(d, n, 3) ||
        !need_float(d, n, 4))
        return false;
    if (!shape_eq(&IN(0)->shape, &IN(1)->shape) || !shape_eq(&IN(0)->shape, &IN(2)->shape))
        return fail(d, n, "w %s, g and buf %s must have one shape", TS(IN(0), a), TS(IN(2), b));
    ir_set_float(g, n, "momentum", ir_float(n, "momentum", 0.0));
    ir_set_float(g, n, "wd", ir_float(n, "wd", 0.0));
    ir_set_int(g, n, "nesterov", ir_int(n, "nesterov", 0) ? 1 : 0);
    if (n->nin > 5 && !need_float(d, n, 5)) return false;
    *OUT(0) = *IN(0);
    *OUT(1) = *IN(2);
    return true;
}

/* (scale, good, skipped, norm) {window}: four f32 scalars in, four out. */
static bool infer_loss_scale_update(Graph *g, Node *n, Diag *d) {
    char a[160];
    for (int i = 0; i < 4; i++)
        if (IN(i)->dt != DT_f32 || IN(i)->shape.rank != 0) return fail(d, n, "operand %d must be f32[], not %s", i + 1, TS(IN(i), a));
    int64_t w = ir_int(n, "window", 1000);
    if (w < 1) return fail(d, n, "window must be >= 1");
    ir_set_int(g, n, "window", w);
    for (int i = 0; i < 4; i++) *OUT(i) = (Type){DT_f32, {0}};
    return true;
}

/* ---- the column ---- */

static InferFn *const infer_fn[OP__COUNT] = {
    [OP_input] = infer_source, [OP_param] = infer_source, [OP_state] = infer_source,
    [OP_constant] = infer_source, [OP_iota] = infer_source,

    [OP_neg] = infer_unary, [OP_exp] = infer_unary, [OP_log] = infer_unary, [OP_sqrt] = infer_unary,
    [OP_rsqrt] = infer_unary, [OP_tanh] = infer_unary, [OP_sigmoid] = infer_unary, [OP_relu] = infer_unary,
    [OP_gelu] = infer_unary, [OP_silu] = infer_unary, [OP_abs] = infer_unary, [OP_sign] = infer_unary,
    [OP_cast] = infer_cast,

    [OP_add] = infer_binary, [OP_sub] = infer_binary, [OP_mul] = infer_binary, [OP_div] = infer_binary,
    [OP_maximum] = infer_binary, [OP_minimum] = infer_binary, [OP_ge] = infer_binary,

    [OP_tanh_grad] = infer_pw_grad, [OP_sigmoid_grad] = infer_pw_grad, [OP_relu_grad] = infer_pw_grad,
    [OP_gelu_grad] = infer_pw_grad, [OP_silu_grad] = infer_pw_grad,

    [OP_sum] = infer_reduce, [OP_mean] = infer_reduce, [OP_max] = infer_reduce, [OP_max_grad] = infer_max_grad,

    [OP_reshape] = infer_reshape, [OP_permute] = infer_permute, [OP_broadcast] = infer_broadcast,
    [OP_slice] = infer_slice, [OP_pad] = infer_pad, [OP_concat] = infer_concat,

    [OP_matmul] = infer_matmul,

    [OP_embedding] = infer_embedding, [OP_embedding_grad] = infer_embedding_grad,
    [OP_softmax] = infer_softmax, [OP_softmax_grad] = infer_softmax,
    [OP_layer_norm] = infer_layer_norm, [OP_layer_norm_grad] = infer_layer_norm_grad,
    [OP_rms_norm] = infer_rms_norm, [OP_rms_norm_grad] = infer_rms_norm_grad,
    [OP_rope] = infer_rope,
    [OP_attention] = infer_attention, [OP_attention_grad] = infer_attention_grad,
    [OP_dropout] = infer_dropout,
    [OP_cross_entropy] = infer_cross_entropy, [OP_cross_entropy_grad] = infer_cross_entropy_grad,

    [OP_global_norm] = infer_global_norm, [OP_clip_coef] = infer_clip_coef,
    [OP_adamw] = infer_adamw, [OP_sgd] = infer_sgd, [OP_loss_scale_update] = infer_loss_scale_update,

    [OP_add_layer_norm] = infer_add_norm, [OP_add_rms_norm] = infer_add_norm,
    [OP_add_layer_norm_grad] = infer_add_norm_grad, [OP_add_rms_norm_grad] = infer_add_norm_grad,
    [OP_rope_qk] = infer_rope_qk, [OP_swiglu] = infer_glu, [OP_geglu] = infer_glu,
    [OP_linear_cross_entropy] = infer_linear_ce,
};

bool ir_infer(Graph *g, Node *n, Diag *d) {
    const OpInfo *oi = &op_info[n->op];
    if (n->nin < oi->min_in || (oi->max_in >= 0 && n->nin > oi->max_in)) {
        if (oi->min_in == oi->max_in)
            error_at(d, n->loc, "%s takes %d operand%s, not %d", oi->name, oi->min_in, oi->min_in == 1 ? "" : "s", n->nin);
        else
            error_at(d, n->loc, "%s takes at least %d operands, not %d", oi->name, oi->min_in, n->nin);
        return false;
    }
    for (int i = 0; i < n->nin; i++)
        if (!n->in[i]) die("ir_infer: operand %d of %s is NULL", i, oi->name);
    if (!infer_fn[n->op]) die("no shape inference for op %s", oi->name);
    if (!check_attr_kinds(n, d)) return false;
    /* an op's float parameters (attention's scale, a norm's eps, rope's
     * theta) are used in its operands' dtype by the kernels: one past
     * f32's range would be an infinity there (f16 and bf16 compute in f32) */
    static const char *const fparams[] = {"scale", "eps", "theta"};
    for (int k = 0; k < 3 && n->nin && n->in[0]->ty.dt != DT_f64 && dtype_is_float[n->in[0]->ty.dt]; k++) {
        const Attr *a = ir_attr(n, fparams[k]);
        if (a && a->kind == ATTR_FLOAT && !(fabs(a->f) < 0x1.ffffffp127)) /* below it a double rounds to FLT_MAX at most */
            return fail(d, n, "%s is %g, past the range of f32, in which the kernels use it", fparams[k], a->f);
    }
    return infer_fn[n->op](g, n, d);
}
