/* passes/fold.c — constant and shape folding.
 *
 * One sweep in list order (operands are folded before their users, so
 * chains collapse in one run):
 *   reshape(reshape(x))            -> reshape(x)
 *   broadcast(broadcast(x))        -> broadcast(x)
 *   permute(permute(x, p), q)      -> permute(x, p∘q); identity -> x
 *   reshape/broadcast to x's type  -> x;  permute to x's type -> x when it
 *                                     keeps every dimension > 1 in order
 *   cast to x's dtype              -> x
 *   cast(cast(x, W), T)            -> cast(x, T) when W holds every value of
 *                                     x's float dtype exactly (f16/bf16 -> f32
 *                                     -> f64); so a widening cast and the
 *                                     narrowing one back (mixed precision's
 *                                     pairs) leave x
 *   cast of a constant             -> a constant of the new float dtype (the
 *                                     value rounded to it, bf16 and f16 too)
 *   cast(sum(x), W), W wider       -> sum(cast(x, W)) when the sum has no
 *                                     other use: a half-precision reduction
 *                                     (a bias gradient) accumulates in W
 *   x*1, 1*x, x/1, x+0, 0+x, x-0   -> x when the result type is x's type
 *   add(pad(a), pad(b)) along one axis, a's place ending where b's begins
 *                                  -> pad(concat(a, b)); a concat operand
 *                                     that is a concat along the same axis
 *                                     gives its operands; a pad of nothing
 *                                     is its operand.  The gradient of
 *                                     slices that tile a tensor (GPT-2's
 *                                     split of qkv) is then written once,
 *                                     not summed from zero-filled copies
 *   embedding(T, iota), the iota's size n along its axis at most T's rows
 *                                  -> slice(T, 0:n), T when n is every row;
 *                                     reshaped and broadcast for an iota of
 *                                     rank > 1 (learned positions)
 *   pointwise unary/binary op on constants -> constant (f32/f64 only)
 * Folded constants are computed in double from operands rounded to their
 * dtype and rounded to the result dtype: exact for f64, and for f32 what an
 * f32 computation rounds to up to one ulp.  x+0 -> x turns -0+0 (= +0) into
 * -0, the one bit pattern it changes; so does add(pad(a), pad(b)) -> concat
 * where a or b holds -0.
 * Uses are redirected through a replacement map as the sweep goes (O(n));
 * nodes left dead by a rewrite are removed at the end (nodes that were dead
 * before are DCE's business).
 */
#include "ir.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Folder {
    Graph  *g;
    Value **repl;        /* value id -> replacement */
    int    *uses;        /* value id -> operand and output references */
    bool   *touched;     /* value id -> lost a use in this pass */
    bool   *keep;        /* node id -> still in the graph */
    bool   *upd;         /* value id -> an update's new value */
} Folder;

static bool is_const(const Value *v) { return v->def->op == OP_constant; }
static double const_value(const Value *v) { return ir_float(v->def, "value", NAN); }

static void drop_use(Folder *F, Value *v) {
    F->uses[v->id]--;
    F->touched[v->id] = true;
}

static void set_operand(Folder *F, Node *n, int k, Value *v) {
    drop_use(F, n->in[k]);
    n->in[k] = v;
    F->uses[v->id]++;
}

/* n disappears; its (single) result becomes x.  Not where n computes an
 * update's new value and x comes from another phase: an update commits in
 * its value's phase (a step-phase reshape of a micro-batch zero, folded,
 * would reset an accumulator every micro-batch). */
static void replace_by(Folder *F, Node *n, Value *x) {
    if (F->upd[n->out[0]->id]) {
        if (x->def->phase != n->phase) return;
        F->upd[x->id] = true;
    }
    F->repl[n->out[0]->id] = x;
    F->uses[x->id] += F->uses[n->out[0]->id];
    F->uses[n->out[0]->id] = 0;
    F->keep[n->id] = false;
    for (int k = 0; k < n->nin; k++) drop_use(F, n->in[k]);
}

/* ---- constant arithmetic ---- */

static bool foldable_dtype(DType dt) { return dt == DT_f32 || dt == DT_f64; }

static double round_to(DType dt, double v) {
    if (dt == DT_f64 || v != v || isinf(v)) return v;
    if (fabs(v) > FLT_MAX) return fabs(v) >= 0x1.ffffffp127 ? copysign(INFINITY, v) : copysign(FLT_MAX, v);
    return (double)(float)v;
}

/* Round to nearest even with p significand bits, normal exponents from
 * emin, infinity above the largest finite value (the interpreter's rule). */
static double round_format(double x, int p, int emin, int emax) {
    if (isnan(x) || isinf(x) || x == 0) return x;
    int e;
    frexp(fabs(x), &e);
    int E = e - 1 < emin ? emin : e - 1;
    double ulp = ldexp(1.0, E - (p - 1)), q = fabs(x) / ulp, fl = floor(q), frac = q - fl;
    if (frac > 0.5 || (frac == 0.5 && fmod(fl, 2.0) != 0)) fl += 1;
    double r = fl * ulp;
    if (r > ldexp(2.0 - ldexp(1.0, 1 - p), emax)) r = INFINITY;
    return copysign(r, x);
}

/* A float value as stored in dt (any float dtype). */
static double round_any(DType dt, double v) {
    switch (dt) {
    case DT_bf16: return round_format(v, 8, -126, 127);
    case DT_f16: return round_format(v, 11, -14, 15);
    default: return round_to(dt, v);
    }
}

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

static bool eval_unary(const Node *n, double x, double *y) {
    switch (n->op) {
    case OP_neg: *y = -x; return true;
    case OP_exp: *y = exp(x); return true;
    case OP_log: *y = log(x); return true;
    case OP_sqrt: *y = sqrt(x); return true;
    case OP_rsqrt: *y = 1.0 / sqrt(x); return true;
    case OP_tanh: *y = tanh(x); return true;
    case OP_sigmoid: *y = sigmoid(x); return true;
    case OP_relu: *y = x > 0 ? x : 0.0; return true;
    case OP_gelu:
        if (ir_int(n, "approx", 0)) *y = 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
        else *y = 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
        return true;
    case OP_silu: *y = x * sigmoid(x); return true;
    case OP_abs: *y = fabs(x); return true;
    case OP_sign: *y = x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; return true; /* NaN and -0: 0, as the interpreter */
    case OP_cast: *y = x; return true;
    default: return false;
    }
}

static bool eval_binary(Op op, double a, double b, double *y) {
    switch (op) {
    case OP_add: *y = a + b; return true;
    case OP_sub: *y = a - b; return true;
    case OP_mul: *y = a * b; return true;
    case OP_div: *y = a / b; return true;
    case OP_maximum: *y = isnan(a) || isnan(b) ? NAN : a > b ? a : b; return true; /* as the interpreter */
    case OP_minimum: *y = isnan(a) || isnan(b) ? NAN : a < b ? a : b; return true;
    case OP_ge: *y = a >= b ? 1.0 : 0.0; return true;
    default: return false;
    }
}

/* A pointwise op whose operands are all constants: its constant value. */
static bool fold_constant(const Node *n, double *out) {
    if (!op_has(n->op, OPF_POINTWISE) || n->nin < 1 || n->nin > 2) return false;
    if (!foldable_dtype(n->out[0]->ty.dt)) return false;
    double v[2];
    for (int k = 0; k < n->nin; k++) {
        if (!is_const(n->in[k]) || !foldable_dtype(n->in[k]->ty.dt)) return false;
        v[k] = round_to(n->in[k]->ty.dt, const_value(n->in[k]));
    }
    double y;
    bool ok = n->nin == 1 ? eval_unary(n, v[0], &y) : eval_binary(n->op, v[0], v[1], &y);
    if (!ok) return false;
    *out = round_to(n->out[0]->ty.dt, y);
    return true;
}

/* x op c == x: which operand is x, or -1. */
static int identity_operand(const Node *n) {
    if (n->nin != 2) return -1;
    for (int k = 0; k < 2; k++) {
        Value *c = n->in[1 - k], *x = n->in[k];
        if (!is_const(c) || !type_eq(&n->out[0]->ty, &x->ty)) continue;
        double v = const_value(c);
        bool right = k == 0; /* c is the second operand */
        switch (n->op) {
        case OP_mul: if (v == 1.0) return k; break;
        case OP_add: if (v == 0.0) return k; break;
        case OP_div: if (right && v == 1.0) return k; break;
        case OP_sub: if (right && v == 0.0) return k; break;
        default: break;
        }
    }
    return -1;
}

/* Does a cast from `from` to `to` keep every value exactly? */
static bool widens_exactly(DType from, DType to) {
    if (from == to) return true;
    switch (from) {
    case DT_f16:
    case DT_bf16: return to == DT_f32 || to == DT_f64;
    case DT_f32: return to == DT_f64;
    default: return false;
    }
}

/* A permutation of a shape that leaves memory order alone: the dimensions
 * larger than 1 stay in order. */
static bool perm_keeps_layout(const Attr *p, const Shape *in) {
    int64_t last = -1;
    for (int i = 0; i < p->n; i++) {
        if (in->d[p->v[i]] == 1) continue;
        if (p->v[i] < last) return false;
        last = p->v[i];
    }
    return true;
}

/* ---- the sweep ---- */

/* Node idx becomes a constant of value v with its result's type, name and
 * phase (in its place in the node list); its uses move to the constant. */
static void replace_by_constant(Folder *F, int idx, double v) {
    Graph *g = F->g;
    Node *n = g->nodes[idx];
    Value *y = n->out[0];
    Node *c = ir_new(g, OP_constant, 0, NULL, n->loc);
    ir_set_float(g, c, "value", v);
    c->out[0]->ty = y->ty;
    c->out[0]->name = y->name;
    c->phase = n->phase;
    F->keep[c->id] = true;
    g->nodes[idx] = c;
    replace_by(F, n, c->out[0]);
}

static void fold_node(Folder *F, int idx) {
    Graph *g = F->g;
    Node *n = g->nodes[idx];
    if (n->nout != 1 || op_has(n->op, OPF_SOURCE)) return;
    Value *y = n->out[0];
    switch (n->op) {
    case OP_cast: {
        Value *x = n->in[0];
        if (x->def->op == OP_cast && dtype_is_float[x->def->in[0]->ty.dt] && widens_exactly(x->def->in[0]->ty.dt, x->ty.dt))
            set_operand(F, n, 0, x->def->in[0]);
        if (n->in[0]->ty.dt == y->ty.dt) {
            replace_by(F, n, n->in[0]);
            return;
        }
        if (is_const(n->in[0]) && dtype_is_float[n->in[0]->ty.dt] && dtype_is_float[y->ty.dt]) {
            replace_by_constant(F, idx, round_any(y->ty.dt, round_any(n->in[0]->ty.dt, const_value(n->in[0]))));
            return;
        }
        break;
    }
    case OP_reshape:
    case OP_broadcast:
        if (n->in[0]->def->op == n->op) set_operand(F, n, 0, n->in[0]->def->in[0]);
        if (type_eq(&n->in[0]->ty, &y->ty)) {
            replace_by(F, n, n->in[0]);
            return;
        }
        break;
    case OP_permute: {
        const Attr *q = ir_attr(n, "perm");
        if (!q || q->kind != ATTR_INTS) break;
        Node *inner = n->in[0]->def;
        const Attr *p = ir_attr(inner, "perm");
        if (inner->op == OP_permute && p && p->kind == ATTR_INTS && p->n == q->n && q->n <= IR_MAX_RANK) {
            int64_t c[IR_MAX_RANK];
            for (int i = 0; i < q->n; i++) c[i] = p->v[q->v[i]];
            set_operand(F, n, 0, inner->in[0]);
            ir_set_ints(g, n, "perm", q->n, c);
            q = ir_attr(n, "perm");
        }
        if (type_eq(&n->in[0]->ty, &y->ty) && perm_keeps_layout(q, &n->in[0]->ty.shape)) {
            replace_by(F, n, n->in[0]);
            return;
        }
        break;
    }
    default: break;
    }
    double v;
    if (fold_constant(n, &v)) {
        replace_by_constant(F, idx, v);
        return;
    }
    int k = identity_operand(n);
    if (k >= 0) replace_by(F, n, n->in[k]);
}

/* ---- rewrites after the sweep (they add nodes) ---- */

/* The node list as it is, for a rewrite that inserts nodes as it goes. */
static Node **snapshot(const Graph *g) {
    Node **snap = xmalloc(sizeof(Node *) * (size_t)(g->nnodes ? g->nnodes : 1));
    if (g->nnodes) memcpy(snap, g->nodes, sizeof(Node *) * (size_t)g->nnodes);
    return snap;
}

/* Removes the nodes marked (by id, below nb) that nothing reads any more,
 * users before operands, so that a marked operand only removed nodes read
 * goes too; frees marked. */
static void drop_marked(Graph *g, int nb, bool *marked) {
    Uses *u = ir_uses(g);
    int *uses = xcalloc((size_t)g->nvalues + 1, sizeof(int));
    for (int v = 0; v <= u->nvalues; v++) uses[v] = u->of[v].n + u->nout_refs[v];
    bool *keep = xmalloc(sizeof(bool) * (size_t)(g->nextnode + 1));
    for (int i = 0; i < g->nextnode + 1; i++) keep[i] = true;
    for (int i = g->nnodes - 1; i >= 0; i--) {
        Node *n = g->nodes[i];
        if (n->id >= nb || !marked[n->id] || uses[n->out[0]->id]) continue;
        keep[n->id] = false;
        for (int k = 0; k < n->nin; k++) uses[n->in[k]->id]--;
    }
    ir_filter_nodes(g, keep);
    free(keep);
    free(uses);
    free(marked);
    ir_uses_free(u);
}

/* cast(sum(x) or mean(x), W) with W wider than the reduction's dtype and
 * the reduction read only by that cast: the reduction of cast(x, W).  Run
 * after the sweep (it adds a node). */
static void widen_reductions(Graph *g, Diag *d) {
    Uses *u = ir_uses(g);
    int nn = g->nnodes, nb = g->nextnode + 1; /* node ids of the snapshot */
    Node **snap = snapshot(g);
    bool *bypassed = xcalloc((size_t)nb, sizeof(bool));
    for (int i = 0; i < nn; i++) {
        Node *c = snap[i];
        if (c->op != OP_cast) continue;
        Node *r = c->in[0]->def;
        DType from = c->in[0]->ty.dt, to = c->out[0]->ty.dt;
        if ((r->op != OP_sum && r->op != OP_mean) || !dtype_is_float[from] || from == to || !widens_exactly(from, to)) continue;
        if (u->of[r->out[0]->id].n != 1 || u->nout_refs[r->out[0]->id]) continue;
        Value *x = r->in[0];
        Node *w = ir_new(g, OP_cast, 1, &x, r->loc);
        ir_set_str(g, w, "dtype", dtype_name[to]);
        w->phase = r->phase;
        g->ip = ir_node_index(g, r);
        if (!ir_emit(g, w, d)) die("fold: a widening cast does not infer");
        g->ip = -1;
        r->in[0] = w->out[0];
        if (!ir_infer(g, r, d)) die("fold: a widened reduction does not infer");
        if (!r->out[0]->name) r->out[0]->name = c->out[0]->name;
        ir_replace_all_uses(g, c->out[0], r->out[0]);
        bypassed[c->id] = true;
    }
    free(snap);
    ir_uses_free(u);
    drop_marked(g, nb, bypassed); /* the casts just bypassed */
}

/* add(pad(a), pad(b)) -> pad(concat(a, b)) (see the top).  Run after the
 * sweep (it adds nodes); an add whose operand an earlier merge made is
 * merged again, so a chain of adds collapses into one concat. */
static Node *pad_of(Value *v) { return v->def->op == OP_pad ? v->def : NULL; }

static void merge_pads(Graph *g, Diag *d) {
    int nn = g->nnodes;
    Node **snap = snapshot(g);
    int nb = g->nextnode + 1 + 2 * nn; /* node ids, with the two a merge adds */
    bool *merged = xcalloc((size_t)nb, sizeof(bool)); /* the adds and what only they may have read */
    for (int i = 0; i < nn; i++) {
        Node *n = snap[i];
        Node *p[2];
        if (n->op != OP_add || !(p[0] = pad_of(n->in[0])) || !(p[1] = pad_of(n->in[1]))) continue;
        int ax = (int)ir_int(p[0], "axis", 0);
        if (ir_int(p[1], "axis", 0) != ax || !type_eq(&p[0]->out[0]->ty, &n->out[0]->ty) ||
            !type_eq(&p[1]->out[0]->ty, &n->out[0]->ty))
            continue;
        int64_t lo[2], end[2];
        for (int k = 0; k < 2; k++) {
            lo[k] = ir_int(p[k], "lo", 0);
            end[k] = lo[k] + p[k]->in[0]->ty.shape.d[ax];
        }
        int f = end[0] == lo[1] ? 0 : end[1] == lo[0] ? 1 : -1; /* the pad placed first */
        if (f < 0) continue;
        Node *first = p[f], *second = p[1 - f];
        Node *half[2] = {first->in[0]->def, second->in[0]->def};
        bool flat[2];
        int nops = 0;
        for (int k = 0; k < 2; k++) {
            flat[k] = half[k]->op == OP_concat && ir_int(half[k], "axis", 0) == ax;
            nops += flat[k] ? half[k]->nin : 1;
        }
        Value **ops = xmalloc(sizeof(Value *) * (size_t)nops);
        nops = 0;
        for (int k = 0; k < 2; k++) {
            Value *x = (k ? second : first)->in[0];
            for (int j = 0; j < (flat[k] ? half[k]->nin : 1); j++) ops[nops++] = flat[k] ? half[k]->in[j] : x;
        }
        g->ip = ir_node_index(g, n);
        Node *cat = ir_new(g, OP_concat, nops, ops, n->loc);
        free(ops);
        ir_set_int(g, cat, "axis", ax);
        cat->phase = n->phase;
        if (!ir_emit(g, cat, d)) die("fold: a merged concat does not infer");
        Value *res = cat->out[0];
        int64_t plo = ir_int(first, "lo", 0), phi = ir_int(second, "hi", 0);
        if (plo || phi) {
            Node *pad = ir_new(g, OP_pad, 1, &res, n->loc);
            ir_set_int(g, pad, "axis", ax);
            ir_set_int(g, pad, "lo", plo);
            ir_set_int(g, pad, "hi", phi);
            pad->phase = n->phase;
            if (!ir_emit(g, pad, d)) die("fold: a merged pad does not infer");
            res = pad->out[0];
        }
        g->ip = -1;
        res->name = n->out[0]->name;
        ir_replace_all_uses(g, n->out[0], res);
        merged[n->id] = merged[first->id] = merged[second->id] = true;
        for (int k = 0; k < 2; k++)
            if (flat[k]) merged[half[k]->id] = true;
    }
    free(snap);
    drop_marked(g, nb, merged); /* the adds merged, and the pads and concats only they read */
}

/* A gather of a table's first rows in order: embedding(T, iota) with the
 * iota's size n along its axis at most T's rows (an integer iota, so its
 * values are 0 .. n-1 exactly) reads rows 0 .. n-1 of T, each where the
 * iota's coordinate says: slice(T, 0:n) (T itself when n is every row),
 * and for an iota of rank > 1, reshaped to put those rows on the iota's
 * axis and broadcast over its other dims.  GPT-2's learned positions
 * (embedding(wpe, arange(seq))) become wpe, read in place; their gradient
 * is then the batch sum autodiff makes for the broadcast, with no scatter.
 * Run after the sweep (it adds nodes). */
static void fold_iota_gathers(Graph *g, Diag *d) {
    int nn = g->nnodes, nb = g->nextnode + 1; /* node ids of the snapshot */
    Node **snap = snapshot(g);
    bool *gone = xcalloc((size_t)nb, sizeof(bool));
    for (int i = 0; i < nn; i++) {
        Node *e = snap[i];
        if (e->op != OP_embedding) continue;
        Value *t = e->in[0], *ix = e->in[1];
        Node *io = ix->def;
        const Shape *s = &ix->ty.shape;
        if (io->op != OP_iota || s->rank < 1 || (ix->ty.dt != DT_i32 && ix->ty.dt != DT_i64)) continue;
        int ax = (int)ir_int(io, "axis", 0);
        int64_t n = s->d[ax], rows = t->ty.shape.d[0], C = t->ty.shape.d[1];
        if (n > rows) continue; /* out of range: the gather's own error */
        g->ip = ir_node_index(g, e);
        Value *x = t;
        if (n < rows) {
            Node *sl = ir_new(g, OP_slice, 1, &x, e->loc);
            ir_set_int(g, sl, "axis", 0);
            ir_set_int(g, sl, "start", 0);
            ir_set_int(g, sl, "end", n);
            sl->phase = e->phase;
            if (!ir_emit(g, sl, d)) die("fold: a gather's slice does not infer");
            x = sl->out[0];
        }
        if (s->rank > 1) {
            int64_t dims[IR_MAX_RANK];
            for (int k = 0; k < s->rank; k++) dims[k] = k == ax ? n : 1;
            dims[s->rank] = C;
            Node *rs = ir_new(g, OP_reshape, 1, &x, e->loc);
            ir_set_ints(g, rs, "shape", s->rank + 1, dims);
            rs->phase = e->phase;
            if (!ir_emit(g, rs, d)) die("fold: a gather's reshape does not infer");
            x = rs->out[0];
            Node *bc = ir_new(g, OP_broadcast, 1, &x, e->loc);
            ir_set_ints(g, bc, "shape", e->out[0]->ty.shape.rank, e->out[0]->ty.shape.d);
            bc->phase = e->phase;
            if (!ir_emit(g, bc, d)) die("fold: a gather's broadcast does not infer");
            x = bc->out[0];
        }
        g->ip = -1;
        if (x != t && !x->name) x->name = e->out[0]->name;
        ir_replace_all_uses(g, e->out[0], x);
        gone[e->id] = gone[io->id] = true;
    }
    free(snap);
    drop_marked(g, nb, gone); /* the gathers replaced, and the iotas only they read */
}

bool pass_fold(Graph *g, const PassOptions *po, Diag *d) {
    (void)po;
    /* folded constants add at most one node and one value per node */
    size_t nv = (size_t)g->nvalues + (size_t)g->nnodes + 1, nn = (size_t)g->nextnode + (size_t)g->nnodes + 1;
    Folder F = {g, xcalloc(nv, sizeof(Value *)), xcalloc(nv, sizeof(int)), xcalloc(nv, sizeof(bool)), xcalloc(nn, sizeof(bool)),
                xcalloc(nv, sizeof(bool))};
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i].kind == OUT_UPDATE) F.upd[g->outputs[i].value->id] = true;
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        F.keep[n->id] = true;
        for (int k = 0; k < n->nin; k++) F.uses[n->in[k]->id]++;
    }
    for (int i = 0; i < g->noutputs; i++) F.uses[g->outputs[i].value->id]++;
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        for (int k = 0; k < n->nin; k++)
            if (F.repl[n->in[k]->id]) n->in[k] = F.repl[n->in[k]->id];
        fold_node(&F, i);
    }
    for (int i = 0; i < g->noutputs; i++)
        if (F.repl[g->outputs[i].value->id]) g->outputs[i].value = F.repl[g->outputs[i].value->id];
    /* remove what the rewrites left dead, users before their operands */
    for (int i = g->nnodes - 1; i >= 0; i--) {
        Node *n = g->nodes[i];
        if (!F.keep[n->id] || n->op == OP_input || n->op == OP_param || n->op == OP_state) continue;
        bool dead = true, touched = false;
        for (int r = 0; r < n->nout; r++) {
            dead &= F.uses[n->out[r]->id] == 0;
            touched |= F.touched[n->out[r]->id];
        }
        if (!dead || !touched) continue;
        F.keep[n->id] = false;
        for (int k = 0; k < n->nin; k++) drop_use(&F, n->in[k]);
    }
    ir_filter_nodes(g, F.keep);
    free(F.repl);
    free(F.uses);
    free(F.touched);
    free(F.keep);
    free(F.upd);
    widen_reductions(g, d);
    merge_pads(g, d);
    fold_iota_gathers(g, d);
    return true;
}
