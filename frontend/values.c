/* frontend/values.c — compile-time values and the operators.
 *
 * Arithmetic on numbers is done here at compile time (integers exactly,
 * with overflow and division by zero reported); arithmetic on tensors
 * becomes graph nodes, a number mixed with a tensor becoming a scalar
 * constant of the tensor's dtype.  Also the argument checkers shared with
 * the builtins (elab_want_*).
 */
#include "elab.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* ---- values ---- */

const char *elab_desc(const Val *v, char *buf, size_t n) {
    char t[160];
    switch (v->k) {
    case V_POISON: snprintf(buf, n, "an invalid value"); break;
    case V_NONE: snprintf(buf, n, "none"); break;
    case V_INT: snprintf(buf, n, "the integer %lld", (long long)v->i); break;
    case V_FLOAT: fmt_double(t, v->f); snprintf(buf, n, "the number %s", t); break;
    case V_BOOL: snprintf(buf, n, "%s", v->i ? "true" : "false"); break;
    case V_STR: snprintf(buf, n, "the string \"%.40s%s\"", v->s, strlen(v->s) > 40 ? "..." : ""); break;
    case V_SYM: snprintf(buf, n, "the name '%.40s'", v->s); break;
    case V_LIST: snprintf(buf, n, "a list of %d item%s", v->n, v->n == 1 ? "" : "s"); break;
    case V_TUPLE: snprintf(buf, n, "%d values", v->n); break;
    case V_TENSOR: snprintf(buf, n, "a tensor %s", type_str(&v->t->ty, t, sizeof t)); break;
    }
    return buf;
}

bool elab_check_type(Elab *e, const Type *t, SrcLoc loc) {
    int64_t numel = 1;
    for (int i = 0; i < t->shape.rank; i++) {
        if (t->shape.d[i] <= 0) {
            error_at(e->d, loc, "dimension %d is %lld; dimensions must be positive", i, (long long)t->shape.d[i]);
            return false;
        }
        if (__builtin_mul_overflow(numel, t->shape.d[i], &numel) || numel > ELAB_MAX_NUMEL) {
            char b[160];
            error_at(e->d, loc, "a tensor %s has too many elements (the limit is 2^48)", type_str(t, b, sizeof b));
            return false;
        }
    }
    return true;
}

Val elab_emit(Elab *e, Node *n) {
    if (e->g->nnodes >= 4 * ELAB_MAX_STEPS) {
        error_at(e->d, n->loc, "the graph has more than %d nodes", 4 * ELAB_MAX_STEPS);
        e->over_budget = true;
        return val_poison();
    }
    if (!ir_emit(e->g, n, e->d)) return val_poison(); /* the call chain: Diag.on_report */
    for (int i = 0; i < n->nout; i++)
        if (!elab_check_type(e, &n->out[i]->ty, n->loc)) return val_poison();
    return val_tensor(n->out[0]);
}

bool elab_want(Elab *e, bool ok, Val v, SrcLoc loc, const char *what, const char *kind) {
    if (v.k == V_POISON) return false;
    if (!ok) {
        char b[200];
        error_at(e->d, loc, "%s must be %s, not %s", what, kind, elab_desc(&v, b, sizeof b));
    }
    return ok;
}

bool elab_want_int(Elab *e, Val v, SrcLoc loc, const char *what, int64_t *out) {
    if (!elab_want(e, v.k == V_INT, v, loc, what, "an integer")) return false;
    *out = v.i;
    return true;
}

bool elab_want_num(Elab *e, Val v, SrcLoc loc, const char *what, double *out) {
    if (!elab_want(e, val_is_num(&v), v, loc, what, "a number")) return false;
    *out = v.k == V_INT ? (double)v.i : v.f;
    return true;
}

bool elab_want_bool(Elab *e, Val v, SrcLoc loc, const char *what, bool *out) {
    if (!elab_want(e, v.k == V_BOOL || v.k == V_INT, v, loc, what, "true, false or an integer")) return false;
    *out = v.i != 0;
    return true;
}

bool elab_want_tensor(Elab *e, Val v, SrcLoc loc, const char *what, Value **out) {
    if (!elab_want(e, v.k == V_TENSOR, v, loc, what, "a tensor")) return false;
    *out = v.t;
    return true;
}

bool elab_want_str(Elab *e, Val v, SrcLoc loc, const char *what, const char **out) {
    if (!elab_want(e, v.k == V_STR, v, loc, what, "a string")) return false;
    *out = v.s;
    return true;
}

bool elab_want_dtype(Elab *e, Val v, SrcLoc loc, DType *out) {
    const char *s;
    if (!elab_want_str(e, v, loc, "a dtype", &s)) return false;
    if (dtype_parse(s, out)) return true;
    Suggest sg;
    elab_suggest_init(&sg, s);
    for (int i = 0; i < DT__COUNT; i++) elab_suggest_add(&sg, dtype_name[i]);
    error_at(e->d, loc, "unknown dtype \"%s\" (one of f32 f64 bf16 f16 i32 i64 u8)%s", s, elab_suggest_hint(e, &sg));
    return false;
}

/* A list (or tuple) of integers, at most max of them; what the caller
 * takes besides (an integer) is said in the message: "or_int". */
bool elab_want_ints(Elab *e, Val v, SrcLoc loc, const char *what, int max, int64_t *out, int *n, bool or_int) {
    if (!elab_want(e, v.k == V_LIST || v.k == V_TUPLE, v, loc, what, or_int ? "an integer or a list of integers" : "a list of integers"))
        return false;
    if (v.n > max) {
        error_at(e->d, loc, "%s: %d entries, more than the %d allowed", what, v.n, max);
        return false;
    }
    for (int i = 0; i < v.n; i++) {
        char w[160];
        snprintf(w, sizeof w, "item %d of %s", i + 1, what);
        if (!elab_want_int(e, v.items[i], loc, w, &out[i])) return false;
    }
    *n = v.n;
    return true;
}

/* ---- operators ---- */

static Val arith_error(Elab *e, int op, Val a, Val b, SrcLoc loc) {
    char x[200], y[200];
    const char *hint = elab_const_hint(e, &a);
    if (!*hint) hint = elab_const_hint(e, &b);
    error_at(e->d, loc, "cannot apply '%s' to %s and %s%s", ast_op_name(op), elab_desc(&a, x, sizeof x), elab_desc(&b, y, sizeof y), hint);
    return val_poison();
}

static Val int_arith(Elab *e, int op, int64_t a, int64_t b, SrcLoc loc) {
    int64_t r = 0;
    bool ovf = false;
    switch (op) {
    case '+': ovf = __builtin_add_overflow(a, b, &r); break;
    case '-': ovf = __builtin_sub_overflow(a, b, &r); break;
    case '*': ovf = __builtin_mul_overflow(a, b, &r); break;
    case '/':
    case '%':
        if (b == 0) {
            error_at(e->d, loc, "division by zero");
            return val_poison();
        }
        if (a == INT64_MIN && b == -1) ovf = op == '/'; /* the remainder is 0 (C leaves a % b undefined there) */
        else r = op == '/' ? a / b : a % b;
        break;
    }
    if (ovf) {
        error_at(e->d, loc, "integer overflow in %lld %s %lld", (long long)a, ast_op_name(op), (long long)b);
        return val_poison();
    }
    return val_int(r);
}

static Val float_arith(Elab *e, int op, double a, double b, SrcLoc loc) {
    double r = 0;
    switch (op) {
    case '+': r = a + b; break;
    case '-': r = a - b; break;
    case '*': r = a * b; break;
    case '/':
    case '%':
        if (b == 0) {
            error_at(e->d, loc, "division by zero");
            return val_poison();
        }
        r = op == '/' ? a / b : fmod(a, b);
        break;
    }
    if (!isfinite(r)) {
        error_at(e->d, loc, "the result of '%s' is not a finite number", ast_op_name(op));
        return val_poison();
    }
    return val_float(r);
}

/* The largest finite value of a float dtype, and the smallest magnitude
 * that rounds (to nearest even) to infinity in it: the largest plus half
 * an ulp. */
static double float_largest(DType dt) {
    return dt == DT_f16 ? 65504.0 : dt == DT_bf16 ? ldexp(255.0, 120) : dt == DT_f32 ? ldexp((double)0xffffff, 104) : DBL_MAX;
}
static double float_overflow(DType dt) {
    return dt == DT_f16 ? 65520.0 : dt == DT_bf16 ? ldexp(511.0, 119) : dt == DT_f32 ? ldexp((double)0x1ffffff, 103) : INFINITY;
}

bool elab_num_fits(Elab *e, Val num, DType dt, const char *of, SrcLoc loc) {
    char b[160];
    if (!dtype_is_float[dt]) {
        int64_t lo = dt == DT_u8 ? 0 : dt == DT_i32 ? INT32_MIN : -((int64_t)1 << 53);
        int64_t hi = dt == DT_u8 ? 255 : dt == DT_i32 ? INT32_MAX : (int64_t)1 << 53;
        if (num.k != V_INT) {
            error_at(e->d, loc, "%s is not an integer, which %s needs", elab_desc(&num, b, sizeof b), of);
            return false;
        }
        if (num.i < lo || num.i > hi) {
            error_at(e->d, loc, "%s is out of the range of %s (%lld to %lld)", elab_desc(&num, b, sizeof b), of, (long long)lo, (long long)hi);
            return false;
        }
        return true;
    }
    double v = num.k == V_INT ? (double)num.i : num.f;
    if (!(fabs(v) < float_overflow(dt))) {
        char m[32];
        fmt_double(m, float_largest(dt));
        error_at(e->d, loc, "%s is out of the range of %s (it rounds to infinity: the largest %s is %s)", elab_desc(&num, b, sizeof b), of,
                 dtype_name[dt], m);
        return false;
    }
    return true;
}

/* A number used with a tensor: a scalar constant node of the tensor's
 * dtype, which holds the number (elab_num_fits). */
Value *elab_scalar_for(Elab *e, Val num, const Value *like, SrcLoc loc) {
    char b[160], t[200];
    type_str(&like->ty, t, sizeof t);
    if (!dtype_is_float[like->ty.dt] && num.k != V_INT) {
        error_at(e->d, loc, "%s cannot be combined with the integer tensor %s", elab_desc(&num, b, sizeof b), t);
        return NULL;
    }
    char of[220];
    snprintf(of, sizeof of, "the %stensor %s", dtype_is_float[like->ty.dt] ? "" : "integer ", t);
    if (!elab_num_fits(e, num, like->ty.dt, of, loc)) return NULL;
    return ir_const(e->g, num.k == V_INT ? (double)num.i : num.f, (Type){like->ty.dt, {0}}, loc);
}

static Val compare(Elab *e, int op, Val a, Val b, SrcLoc loc) {
    int c;
    if (val_is_num(&a) && val_is_num(&b)) {
        if (a.k == V_INT && b.k == V_INT) c = a.i < b.i ? -1 : a.i > b.i;
        else {
            double x = a.k == V_INT ? (double)a.i : a.f, y = b.k == V_INT ? (double)b.i : b.f;
            c = x < y ? -1 : x > y ? 1 : 0;
        }
    } else if (op == BOP_EQ || op == BOP_NE) {
        if (a.k == V_TENSOR || b.k == V_TENSOR || a.k == V_LIST || b.k == V_LIST || a.k == V_TUPLE || b.k == V_TUPLE)
            return arith_error(e, op, a, b, loc);
        bool eq;
        if ((a.k == V_STR || a.k == V_SYM) && (b.k == V_STR || b.k == V_SYM)) eq = strcmp(a.s, b.s) == 0;
        else if (a.k == V_BOOL && b.k == V_BOOL) eq = a.i == b.i;
        else eq = a.k == V_NONE && b.k == V_NONE;
        return val_bool(op == BOP_EQ ? eq : !eq);
    } else {
        return arith_error(e, op, a, b, loc);
    }
    switch (op) {
    case BOP_EQ: return val_bool(c == 0);
    case BOP_NE: return val_bool(c != 0);
    case '<': return val_bool(c < 0);
    case BOP_LE: return val_bool(c <= 0);
    case '>': return val_bool(c > 0);
    default: return val_bool(c >= 0);
    }
}

Val elab_binary(Elab *e, int op, Val a, Val b, SrcLoc loc) {
    if (a.k == V_POISON || b.k == V_POISON) return val_poison();
    if (op == BOP_EQ || op == BOP_NE || op == '<' || op == BOP_LE || op == '>' || op == BOP_GE) return compare(e, op, a, b, loc);
    if (val_is_num(&a) && val_is_num(&b)) {
        if (op == '@') return arith_error(e, op, a, b, loc);
        if (a.k == V_INT && b.k == V_INT) return int_arith(e, op, a.i, b.i, loc);
        return float_arith(e, op, a.k == V_INT ? (double)a.i : a.f, b.k == V_INT ? (double)b.i : b.f, loc);
    }
    bool ta = a.k == V_TENSOR, tb = b.k == V_TENSOR;
    if (!(ta || tb) || !(ta || val_is_num(&a)) || !(tb || val_is_num(&b))) return arith_error(e, op, a, b, loc);
    Op o;
    switch (op) {
    case '+': o = OP_add; break;
    case '-': o = OP_sub; break;
    case '*': o = OP_mul; break;
    case '/': o = OP_div; break;
    case '@':
        if (!ta || !tb) return arith_error(e, op, a, b, loc);
        o = OP_matmul;
        break;
    default:
        error_at(e->d, loc, "'%s' is not defined for tensors", ast_op_name(op));
        return val_poison();
    }
    /* an integer tensor over a number 0: known here (a float's is an infinity) */
    if (o == OP_div && ta && !tb && !dtype_is_float[a.t->ty.dt] && b.k == V_INT && b.i == 0) {
        error_at(e->d, loc, "division by zero (an integer tensor divided by 0)");
        return val_poison();
    }
    Value *in[2] = {ta ? a.t : elab_scalar_for(e, a, b.t, loc), tb ? b.t : elab_scalar_for(e, b, a.t, loc)};
    if (!in[0] || !in[1]) return val_poison();
    return elab_emit(e, ir_new(e->g, o, 2, in, loc));
}

Val elab_unary(Elab *e, int op, Val a, SrcLoc loc) {
    char b[200];
    if (a.k == V_POISON) return val_poison();
    if (op == 'n') {
        if (a.k == V_BOOL || a.k == V_INT) return val_bool(!a.i);
        error_at(e->d, loc, "'not' needs true, false or an integer, not %s", elab_desc(&a, b, sizeof b));
        return val_poison();
    }
    switch (a.k) {
    case V_INT:
        if (a.i == INT64_MIN) {
            error_at(e->d, loc, "integer overflow in -(%lld)", (long long)a.i);
            return val_poison();
        }
        return val_int(-a.i);
    case V_FLOAT: return val_float(-a.f);
    case V_TENSOR: return elab_emit(e, ir_new(e->g, OP_neg, 1, &a.t, loc));
    default:
        error_at(e->d, loc, "cannot negate %s", elab_desc(&a, b, sizeof b));
        return val_poison();
    }
}
