/* passes/liger.c — liger-fusion: the fused layers of Liger Kernel as a
 * compiler pass (docs/passes.md).  Patterns of the forward graph become
 * fused ops whose forward and backward are each one kernel and keep the
 * least for the backward pass:
 *
 *   norms      RMSNorm and LayerNorm written with primitive ops
 *              (mean, sub, mul, add eps, rsqrt or 1/sqrt, * w, + b)
 *              -> rms_norm / layer_norm (only per-row statistics saved)
 *   add+norm   norm(x + r)               -> add_rms_norm / add_layer_norm
 *              (the residual sum s is a second result)
 *   rope       two rope ops (q and k)    -> rope_qk, one kernel each way;
 *              x cos + rotate_half(x) sin, twice with one table pair
 *                                        -> rope_qk(q, k, cos, sin)
 *   glu        silu(a) * b, a*sigmoid(a) * b -> swiglu(a, b);
 *              gelu(a) * b               -> geglu(a, b)  (the activation is
 *              recomputed in the backward pass, not stored)
 *   softmax+CE cross_entropy(log_softmax(x)) -> cross_entropy(x) (log_softmax
 *              as log(softmax(x)) or x - log(sum(exp(x))), max-shifted or
 *              not); cross_entropy's lowering already runs forward and
 *              backward in one kernel with the gradient in place of the logits
 *   linear+CE  cross_entropy(matmul(x, w^T)) -> linear_cross_entropy: the
 *              projection and the loss in chunks of rows, the logits never
 *              exist; the chunk comes from train.memory_budget
 *
 * train.fusion picks them: 0 none, 1 all (the default), else a sum of
 * 2 norms, 4 add+norm, 8 rope, 16 glu, 32 softmax+CE, 64 linear+CE.
 *
 * Each matcher is one sweep over the node list with fresh use lists; a
 * fused node goes where its pattern's last node was (or right after its
 * operands, if earlier), before every remaining user of the values it
 * replaces (else the match is skipped); the interior values of a pattern
 * have no other users.  The nodes a sweep leaves dead are removed after
 * it.  The cuda target gets only the rewrites into ops it already has
 * until codegen/emit_cuda.c has templates for the fused ops
 * (pm_target_has_fused_ops).  Runs before mixed-precision: after its
 * bf16/fp16 casts the pass is an error where the graph shows them
 * (pm_mixed_precision_of; pm_run refuses the order in one list).
 */
#include "ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The fusions, as train.fusion's bits (1 = all). */
enum { F_NORM = 2, F_ADD_NORM = 4, F_ROPE = 8, F_GLU = 16, F_SOFTMAX_CE = 32, F_LINEAR_CE = 64 };

typedef struct Lg {
    Graph *g;
    Diag  *d;
    Uses  *u;
    bool  *cand;          /* node id: replaced by a rewrite (removed when dead) */
    int    ncand;         /* entries in cand */
    bool   new_ops;       /* may make ops the target may lack */
    int64_t budget;       /* train.memory_budget */
} Lg;

/* ---- small queries ---- */

static Node *def_of(Value *v, Op op) { return v && v->def->op == op ? v->def : NULL; }

static bool gone(Lg *L, Node *n) { return n && n->id < L->ncand && L->cand[n->id]; }

/* cand covers every node id made so far (new entries false). */
static void grow(Lg *L) {
    int want = L->g->nextnode + 1;
    if (want <= L->ncand) return;
    L->cand = xrealloc(L->cand, sizeof(bool) * (size_t)want);
    memset(L->cand + L->ncand, 0, sizeof(bool) * (size_t)(want - L->ncand));
    L->ncand = want;
}

static void mark(Lg *L, Node *n) {
    grow(L);
    L->cand[n->id] = true;
}

static int nuses(Lg *L, Value *v) { return L->u->of[v->id].n + L->u->nout_refs[v->id]; }

/* A constant with one element: its value as written (an eps: the fused
 * norm adds it in double, a few ulp of f32 away from the f32 constant). */
static bool scalar_const(Value *v, double *val) {
    if (v->def->op != OP_constant || shape_numel(&v->ty.shape) != 1) return false;
    *val = ir_float(v->def, "value", NAN);
    return true;
}

/* m reduces exactly the last axis of its operand, with the given keepdim. */
static bool last_axis(Node *m, Op op, int keep) {
    if (!m || m->op != op) return false;
    const Attr *ax = ir_attr(m, "axes");
    int r = m->in[0]->ty.shape.rank;
    return ax && ax->kind == ATTR_INTS && ax->n == 1 && ax->v[0] == r - 1 && ir_int(m, "keepdim", 0) == keep;
}

/* v seen through a reshape that only adds or drops unit dims: the value
 * under it (for keepdim=0 spellings). */
static Value *through_reshape(Value *v) {
    Node *r = def_of(v, OP_reshape);
    return r && shape_numel(&r->in[0]->ty.shape) == shape_numel(&v->ty.shape) ? r->in[0] : v;
}

/* The index of the operand of binary node n other than v (-1 if v is
 * neither). */
static int other_operand(Node *n, Value *v) {
    if (n->in[0] == v) return 1;
    if (n->in[1] == v) return 0;
    return -1;
}

static bool is_vector(Value *v, int64_t C, DType dt) { return v->ty.shape.rank == 1 && v->ty.shape.d[0] == C && v->ty.dt == dt; }

/* ---- placing a fused node ---- */

/* Inserts m (made with ir_new, attributes set) where the pattern's last
 * node was, or else right after the last definition of its operands, when
 * that is before every user outside `pat` of the values in repl.  Returns
 * false (m not inserted) when no such place exists, or when m would read
 * a value of the pattern. */
static bool place(Lg *L, Node *m, Value *const *repl, int nrepl, Node *const *pat, int npat) {
    Graph *g = L->g;
    int lo = 0, hi = g->nnodes;
    /* m replaces the pattern: it cannot read a value the pattern computes
     * (two ropes of which one reads the other: rope(rope(x))) */
    for (int i = 0; i < m->nin; i++)
        for (int k = 0; k < npat; k++)
            if (m->in[i]->def == pat[k]) return false;
    for (int i = 0; i < m->nin; i++) {
        int p = ir_node_index(g, m->in[i]->def);
        if (p + 1 > lo) lo = p + 1;
    }
    for (int i = 0; i < g->nnodes && i < hi; i++) {
        Node *n = g->nodes[i];
        bool in_pat = false;
        for (int k = 0; k < npat; k++) in_pat |= pat[k] == n;
        if (in_pat) continue;
        for (int j = 0; j < n->nin; j++)
            for (int k = 0; k < nrepl; k++)
                if (n->in[j] == repl[k]) hi = i;
    }
    if (lo > hi) return false;
    int at = lo;
    for (int k = 0; k < npat; k++) {
        int p = ir_node_index(g, pat[k]);
        if (p > at && p <= hi) at = p;
    }
    g->ip = at;
    bool ok = ir_emit(g, m, L->d) != NULL;
    g->ip = -1;
    if (!ok) die("liger-fusion: %s does not infer", op_name(m->op));
    for (int k = 0; k < npat; k++) mark(L, pat[k]);
    return true;
}

/* Replaces every use of old by new, which inherits old's name hint. */
static void swap(Lg *L, Value *old, Value *new_) {
    if (!new_->name) new_->name = old->name;
    ir_replace_all_uses(L->g, old, new_);
}

/* A constant vector [C] (a norm's missing gain or bias), one per value. */
static Value *vconst(Lg *L, double v, int64_t C, DType dt, SrcLoc loc) {
    Graph *g = L->g;
    for (int i = 0; i < g->nnodes; i++) {
        Value *c = g->nodes[i]->out[0];
        if (g->nodes[i]->op == OP_constant && c->ty.dt == dt && c->ty.shape.rank == 1 && c->ty.shape.d[0] == C &&
            ir_float(g->nodes[i], "value", NAN) == v)
            return c;
    }
    g->ip = 0;
    Value *c = ir_const(g, v, (Type){dt, shape_make(1, &C)}, loc);
    g->ip = -1;
    return c;
}

/* ---- norms written with primitive ops ---- */

/* rstd-like r = rsqrt(mean_last(q, keepdim) + eps) (or its keepdim=0 form
 * reshaped): returns q and eps, and the chain's nodes in pat. */
static Value *match_rstd(Lg *L, Value *r, double *eps, Node **pat, int *np) {
    Value *v = through_reshape(r);
    if (v != r) {
        if (nuses(L, v) != 1) return NULL;
        pat[(*np)++] = r->def;
    }
    Node *rs = def_of(v, OP_rsqrt), *add = rs ? def_of(rs->in[0], OP_add) : NULL;
    if (!add || nuses(L, rs->in[0]) != 1) return NULL;
    int k = scalar_const(add->in[1], eps) ? 0 : scalar_const(add->in[0], eps) ? 1 : -1;
    if (k < 0 || !(*eps >= 0)) return NULL; /* the fused norms take eps >= 0 (a negative or NaN eps stays as written) */
    Value *mv = through_reshape(add->in[k]);
    if (mv != add->in[k]) {
        if (nuses(L, add->in[k]) != 1) return NULL;
        pat[(*np)++] = add->in[k]->def;
    }
    Node *mean = mv->def;
    bool keep = mean->op == OP_mean && ir_int(mean, "keepdim", 0);
    if (!last_axis(mean, OP_mean, keep ? 1 : 0) || nuses(L, mv) != 1) return NULL;
    pat[(*np)++] = rs;
    pat[(*np)++] = add;
    pat[(*np)++] = mean;
    return mean->in[0];
}

/* A mul (x * r or r * x) or x / sqrt(...): the normalised value xn from x
 * and r = rsqrt(...); for the division the sqrt's operand plays rsqrt's. */
static bool split_normalise(Node *n, Value **x, Value **r, bool *divided) {
    *divided = false;
    if (n->op == OP_div && def_of(n->in[1], OP_sqrt)) {
        *x = n->in[0];
        *r = n->in[1];
        *divided = true;
        return true;
    }
    if (n->op != OP_mul) return false;
    for (int k = 0; k < 2; k++)
        if (def_of(through_reshape(n->in[1 - k]), OP_rsqrt)) {
            *x = n->in[k];
            *r = n->in[1 - k];
            return true;
        }
    return false;
}

/* x / sqrt(m + eps): rewrite the sqrt as if it were an rsqrt for matching. */
static Value *match_rstd_any(Lg *L, Value *r, bool divided, double *eps, Node **pat, int *np) {
    if (!divided) return match_rstd(L, r, eps, pat, np);
    Node *sq = r->def, *add = def_of(sq->in[0], OP_add);
    if (!add || nuses(L, r) != 1 || nuses(L, sq->in[0]) != 1) return NULL;
    int k = scalar_const(add->in[1], eps) ? 0 : scalar_const(add->in[0], eps) ? 1 : -1;
    if (k < 0 || !(*eps >= 0)) return NULL; /* the fused norms take eps >= 0 (a negative or NaN eps stays as written) */
    Node *mean = add->in[k]->def;
    if (!last_axis(mean, OP_mean, 1) || nuses(L, add->in[k]) != 1) return NULL;
    pat[(*np)++] = sq;
    pat[(*np)++] = add;
    pat[(*np)++] = mean;
    return mean->in[0];
}

/* After xn (the normalised rows): an optional * w [C] and + b [C]. */
static Value *affine(Lg *L, Value *xn, Value **w, Value **b, Node **pat, int *np, bool want_bias) {
    int64_t C = xn->ty.shape.d[xn->ty.shape.rank - 1];
    Value *y = xn;
    if (nuses(L, y) == 1 && !L->u->nout_refs[y->id]) {
        Node *m = L->u->of[y->id].u[0].node;
        int k = m->op == OP_mul ? other_operand(m, y) : -1;
        if (k >= 0 && is_vector(m->in[k], C, xn->ty.dt) && m->in[k] != y) {
            *w = m->in[k];
            pat[(*np)++] = m;
            y = m->out[0];
        }
    }
    if (want_bias && *w && nuses(L, y) == 1 && !L->u->nout_refs[y->id]) {
        Node *a = L->u->of[y->id].u[0].node;
        int k = a->op == OP_add ? other_operand(a, y) : -1;
        if (k >= 0 && is_vector(a->in[k], C, xn->ty.dt)) {
            *b = a->in[k];
            pat[(*np)++] = a;
            y = a->out[0];
        }
    }
    return y;
}

static void fuse_norm(Lg *L, Node *n) {
    Value *x, *r;
    bool divided;
    if (!split_normalise(n, &x, &r, &divided) || x->ty.shape.rank < 1 || !dtype_is_float[x->ty.dt]) return;
    if (nuses(L, r) != 1) return;
    Node *pat[16];
    int np = 0;
    double eps;
    Value *q = match_rstd_any(L, r, divided, &eps, pat, &np);
    if (!q) return;
    /* r one value a row, [..., 1] beside x [..., C], and n of x's shape:
     * a keepdim=0 r unreshaped ([R] beside [R, C]) scales the columns, and
     * an eps of higher rank broadcasts n to another shape */
    Shape rows = x->ty.shape;
    rows.d[rows.rank - 1] = 1;
    if (!shape_eq(&r->ty.shape, &rows) || !shape_eq(&n->out[0]->ty.shape, &x->ty.shape)) return;
    pat[np++] = n;
    Value *w = NULL, *b = NULL, *ins[3];
    Node *sub = def_of(x, OP_sub), *sq = q->def;
    bool ln = false;
    if (sq->op != OP_mul || sq->in[0] != sq->in[1] || sq->in[0] != x || nuses(L, q) != 1) return;
    /* layer norm: x = xin - mean_last(xin, keepdim) with x used by the square and here only */
    if (sub && last_axis(def_of(sub->in[1], OP_mean), OP_mean, 1) && sub->in[1]->def->in[0] == sub->in[0] && nuses(L, sub->in[1]) == 1) {
        UseList *ul = &L->u->of[x->id];
        bool ok = !L->u->nout_refs[x->id];
        for (int i = 0; i < ul->n; i++) ok &= ul->u[i].node == sq || ul->u[i].node == n;
        if (ok) {
            ln = true;
            pat[np++] = sub;
            pat[np++] = sub->in[1]->def;
        }
    }
    pat[np++] = sq;
    for (int i = 0; i < np; i++)
        if (gone(L, pat[i])) return;
    Value *xin = ln ? sub->in[0] : x;
    Value *y = affine(L, n->out[0], &w, &b, pat, &np, ln);
    int64_t C = xin->ty.shape.d[xin->ty.shape.rank - 1];
    if (!w) w = vconst(L, 1.0, C, xin->ty.dt, n->loc);
    if (ln && !b) b = vconst(L, 0.0, C, xin->ty.dt, n->loc);
    ins[0] = xin, ins[1] = w, ins[2] = b;
    Node *m = ir_new(L->g, ln ? OP_layer_norm : OP_rms_norm, ln ? 3 : 2, ins, n->loc);
    ir_set_float(L->g, m, "eps", eps);
    if (!place(L, m, &y, 1, pat, np)) return;
    swap(L, y, m->out[0]);
}

/* ---- cross_entropy(log_softmax(x)) -> cross_entropy(x) ---- */

/* z = log(softmax(x, last)) or z = y - log(sum_last(exp(y), keepdim)) with
 * y = x or y = x - max_last(x, keepdim): every spelling is x minus a
 * per-row constant, which cross_entropy does not see. */
static Value *strip_log_softmax(Lg *L, Value *z, Node **pat, int *np) {
    Node *lg = def_of(z, OP_log);
    if (lg) {
        Node *sm = def_of(lg->in[0], OP_softmax);
        if (!sm || nuses(L, lg->in[0]) != 1 || ir_int(sm, "axis", -1) != z->ty.shape.rank - 1) return NULL;
        pat[(*np)++] = lg;
        pat[(*np)++] = sm;
        return sm->in[0];
    }
    Node *sub = def_of(z, OP_sub);
    Node *lse = sub ? def_of(sub->in[1], OP_log) : NULL;
    Node *sum = lse ? lse->in[0]->def : NULL, *ex = sum && last_axis(sum, OP_sum, 1) ? def_of(sum->in[0], OP_exp) : NULL;
    if (!ex || ex->in[0] != sub->in[0] || nuses(L, sub->in[1]) != 1 || nuses(L, lse->in[0]) != 1 || nuses(L, sum->in[0]) != 1) return NULL;
    pat[(*np)++] = sub;
    pat[(*np)++] = lse;
    pat[(*np)++] = sum;
    pat[(*np)++] = ex;
    Value *y = sub->in[0];
    Node *shift = def_of(y, OP_sub);
    if (shift && last_axis(def_of(shift->in[1], OP_max), OP_max, 1) && shift->in[1]->def->in[0] == shift->in[0] && nuses(L, y) == 2 &&
        nuses(L, shift->in[1]) == 1) {
        pat[(*np)++] = shift;
        pat[(*np)++] = shift->in[1]->def;
        return shift->in[0];
    }
    return y;
}

static void fuse_softmax_ce(Lg *L, Node *ce) {
    Node *pat[8];
    int np = 0;
    Value *z = ce->in[0];
    /* the log-sum-exp result changes (that of x, not of log_softmax(x),
     * which is 0): nothing may read it */
    if (nuses(L, z) != 1 || nuses(L, ce->out[1]) != 0) return;
    Value *x = strip_log_softmax(L, z, pat, &np);
    if (!x || !type_eq(&x->ty, &z->ty)) return;
    for (int i = 0; i < np; i++)
        if (gone(L, pat[i])) return;
    ce->in[0] = x;
    for (int i = 0; i < np; i++) mark(L, pat[i]);
}

/* ---- rope ---- */

/* x cos + rotate_half(x) sin, rotate_half(x) = concat(-x[..., h:], x[..., :h]):
 * returns x and the tables (reshaped to [T, D] when they carry leading unit
 * dims), or NULL. */
static Value *match_rope_tables(Lg *L, Node *add, Value **cs, Value **sn, Node **pat, int *np) {
    if (add->op != OP_add) return NULL;
    const Shape *ys = &add->out[0]->ty.shape;
    if (ys->rank < 2 || ys->d[ys->rank - 1] % 2) return NULL;
    int64_t D = ys->d[ys->rank - 1], h = D / 2;
    for (int k = 0; k < 2; k++) {
        Node *m1 = def_of(add->in[k], OP_mul), *m2 = def_of(add->in[1 - k], OP_mul);
        if (!m1 || !m2 || nuses(L, add->in[0]) != 1 || nuses(L, add->in[1]) != 1) continue;
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++) {
                Node *cat = def_of(m2->in[b], OP_concat);
                Value *x = m1->in[a];
                if (!cat || cat->nin != 2 || ir_int(cat, "axis", 0) != ys->rank - 1 || nuses(L, m2->in[b]) != 1) continue;
                Node *ng = def_of(cat->in[0], OP_neg), *s2 = ng ? def_of(ng->in[0], OP_slice) : NULL, *s1 = def_of(cat->in[1], OP_slice);
                if (!s2 || !s1 || s1->in[0] != x || s2->in[0] != x || !type_eq(&x->ty, &add->out[0]->ty)) continue;
                if (ir_int(s1, "axis", 0) != ys->rank - 1 || ir_int(s1, "start", -1) != 0 || ir_int(s1, "end", -1) != h) continue;
                if (ir_int(s2, "axis", 0) != ys->rank - 1 || ir_int(s2, "start", -1) != h || ir_int(s2, "end", -1) != D) continue;
                if (nuses(L, cat->in[0]) != 1 || nuses(L, ng->in[0]) != 1 || nuses(L, cat->in[1]) != 1) continue;
                Value *tc = m1->in[1 - a], *ts = m2->in[1 - b];
                Value *t2[2] = {tc, ts};
                bool ok = true;
                for (int i = 0; i < 2 && ok; i++) {
                    const Shape *s = &t2[i]->ty.shape;
                    ok = s->rank >= 2 && s->d[s->rank - 1] == D && s->d[s->rank - 2] == ys->d[ys->rank - 2];
                    for (int j = 0; ok && j < s->rank - 2; j++) ok = s->d[j] == 1;
                    /* constants of the model: they take no gradient */
                    Node *src = t2[i]->def;
                    ok = ok && op_has(src->op, OPF_SOURCE) && !ir_is_trainable(src);
                }
                if (!ok) continue;
                Node *p[7] = {add, m1, m2, cat, ng, s2, s1};
                for (int i = 0; i < 7; i++) pat[(*np)++] = p[i];
                *cs = tc;
                *sn = ts;
                return x;
            }
    }
    return NULL;
}

static Value *as_td(Lg *L, Value *t, SrcLoc loc) {
    const Shape *s = &t->ty.shape;
    if (s->rank == 2) return t;
    Node *r = ir_new(L->g, OP_reshape, 1, &t, loc);
    ir_set_ints(L->g, r, "shape", 2, s->d + s->rank - 2);
    L->g->ip = ir_node_index(L->g, t->def) + 1;
    if (!ir_emit(L->g, r, L->d)) die("liger-fusion: a table reshape does not infer");
    L->g->ip = -1;
    mark(L, r); /* removed again if the rope it was made for is not fused */
    return r->out[0];
}

typedef struct RopeM { Node *root; Value *x, *cs, *sn; Node *pat[8]; int np; } RopeM;

/* Pairs rope ops (builtin: equal theta and inverse; tables: equal tables)
 * of one dtype, T and D, in graph order, into rope_qk. */
static void fuse_ropes(Lg *L) {
    Graph *g = L->g;
    RopeM *rm = xcalloc((size_t)g->nnodes + 1, sizeof(RopeM));
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) {
        Node *nd = g->nodes[i];
        RopeM r = {.root = nd};
        if (nd->op == OP_rope) {
            r.x = nd->in[0];
            r.pat[r.np++] = nd;
        } else if (!(r.x = match_rope_tables(L, nd, &r.cs, &r.sn, r.pat, &r.np))) {
            continue;
        }
        rm[n++] = r;
    }
    for (int i = 0; i < n; i++) {
        RopeM *a = &rm[i];
        if (gone(L, a->root)) continue;
        for (int j = i + 1; j < n; j++) {
            RopeM *b = &rm[j];
            if (gone(L, b->root) || (a->cs == NULL) != (b->cs == NULL) || a->cs != b->cs || a->sn != b->sn) continue;
            const Shape *qa = &a->x->ty.shape, *kb = &b->x->ty.shape;
            if (a->x->ty.dt != b->x->ty.dt || qa->d[qa->rank - 1] != kb->d[kb->rank - 1] || qa->d[qa->rank - 2] != kb->d[kb->rank - 2]) continue;
            if (!a->cs && (ir_float(a->root, "theta", 0) != ir_float(b->root, "theta", 0) ||
                           ir_int(a->root, "inverse", 0) != ir_int(b->root, "inverse", 0)))
                continue;
            Value *in[4] = {a->x, b->x, a->cs ? as_td(L, a->cs, a->root->loc) : NULL, a->sn ? as_td(L, a->sn, a->root->loc) : NULL};
            Node *m = ir_new(g, OP_rope_qk, a->cs ? 4 : 2, in, a->root->loc);
            if (!a->cs) {
                ir_set_float(g, m, "theta", ir_float(a->root, "theta", 10000.0));
                ir_set_int(g, m, "inverse", ir_int(a->root, "inverse", 0));
            }
            Node *pat[16];
            int np = 0;
            for (int k = 0; k < a->np; k++) pat[np++] = a->pat[k];
            for (int k = 0; k < b->np; k++) pat[np++] = b->pat[k];
            Value *repl[2] = {a->root->out[0], b->root->out[0]};
            if (!place(L, m, repl, 2, pat, np)) continue;
            swap(L, repl[0], m->out[0]);
            swap(L, repl[1], m->out[1]);
            break;
        }
    }
    free(rm);
}

/* ---- gated linear units ---- */

static void fuse_glu(Lg *L, Node *n) {
    if (n->op != OP_mul) return;
    for (int k = 0; k < 2; k++) {
        Value *act = n->in[k], *b = n->in[1 - k];
        Node *an = act->def, *pat[3] = {n, an, NULL};
        int np = 2;
        Value *a = NULL;
        Op op = OP_swiglu;
        if (an->op == OP_silu || an->op == OP_gelu) {
            a = an->in[0];
            op = an->op == OP_silu ? OP_swiglu : OP_geglu;
        } else if (an->op == OP_mul) {
            /* a * sigmoid(a) */
            for (int j = 0; j < 2 && !a; j++) {
                Node *sg = def_of(an->in[1 - j], OP_sigmoid);
                if (sg && sg->in[0] == an->in[j] && nuses(L, an->in[1 - j]) == 1) {
                    a = an->in[j];
                    pat[np++] = sg;
                }
            }
        }
        if (!a || nuses(L, act) != 1 || act == b || !type_eq(&a->ty, &n->out[0]->ty) || !type_eq(&b->ty, &a->ty)) continue;
        if (!dtype_is_float[a->ty.dt] || gone(L, an)) continue;
        Value *in[2] = {a, b};
        Node *m = ir_new(L->g, op, 2, in, n->loc);
        if (op == OP_geglu) ir_set_int(L->g, m, "approx", ir_int(an, "approx", 0));
        if (!place(L, m, &n->out[0], 1, pat, np)) continue;
        swap(L, n->out[0], m->out[0]);
        return;
    }
}

/* ---- residual add + norm ---- */

static void fuse_add_norm(Lg *L, Node *n) {
    bool ln = n->op == OP_layer_norm;
    if ((!ln && n->op != OP_rms_norm) || gone(L, n)) return;
    Node *add = def_of(n->in[0], OP_add);
    if (!add || gone(L, add) || add->in[0] == add->in[1]) return;
    Value *s = add->out[0];
    if (!type_eq(&add->in[0]->ty, &s->ty) || !type_eq(&add->in[1]->ty, &s->ty)) return;
    /* the norm's statistics must be free to move with it (they are results of the fused op too) */
    Value *in[4] = {add->in[0], add->in[1], n->in[1], ln ? n->in[2] : NULL};
    Node *m = ir_new(L->g, ln ? OP_add_layer_norm : OP_add_rms_norm, ln ? 4 : 3, in, n->loc);
    ir_set_float(L->g, m, "eps", ir_float(n, "eps", ln ? 1e-5 : 1e-6));
    Value *repl[4] = {s, n->out[0], n->out[1], ln ? n->out[2] : NULL};
    Node *pat[2] = {add, n};
    if (!place(L, m, repl, ln ? 4 : 3, pat, 2)) return;
    swap(L, s, m->out[1]);
    swap(L, n->out[0], m->out[0]);
    for (int i = 1; i < n->nout; i++) swap(L, n->out[i], m->out[i + 1]);
}

/* ---- linear + cross-entropy ---- */

/* Rows per chunk.  Liger Kernel's rule: chunks of about as many logits as
 * x has elements (N / ceil(V / C) rows, rounded up to a power of two), but
 * at least LCE_MIN_ROWS when the f32 dw is over LCE_BIG_DW bytes: each
 * chunk's dw product reads and writes all of dw (8 V C bytes) for 2 chunk
 * V C flops, chunk / 4 flops a byte, which must pass what a GPU needs to
 * stay compute-bound (about 200 on an H100 or H200).  GPT-2 small at 16 x
 * 1024 rows: 256-row chunks moved 19.8 GB a step through dw, 2048-row ones
 * move 2.5 GB, for about 0.5 GB more scratch (the chunk's logits and
 * gradient).  Under train.memory_budget at most budget/16 bytes of f32
 * logits, rounded down to a multiple of 64 rows (the tensor cores' tile)
 * where that leaves any. */
#define LCE_MIN_ROWS 2048
#define LCE_BIG_DW   ((int64_t)16 << 20)
static int64_t lce_chunk(Lg *L, int64_t N, int64_t V, int64_t C) {
    int64_t inc = (V + C - 1) / C, want = (N + inc - 1) / inc, chunk = 1;
    if (4 * V * C > LCE_BIG_DW && want < LCE_MIN_ROWS) want = LCE_MIN_ROWS;
    while (chunk < want) chunk *= 2;
    if (L->budget > 0) {
        int64_t cap = L->budget / 16 / (4 * V);
        if (cap >= 64) cap -= cap % 64;
        if (cap < 1) cap = 1;
        if (chunk > cap) chunk = cap;
    }
    return chunk < N ? chunk : N;
}

static void fuse_linear_ce(Lg *L, Node *ce) {
    Value *logits = ce->in[0];
    Node *mm = def_of(logits, OP_matmul);
    if (!mm || gone(L, mm) || nuses(L, logits) != 1 || nuses(L, ce->out[1]) != 0) return;
    Value *x = mm->in[0], *w = mm->in[1];
    if (ir_int(mm, "ta", 0) || !ir_int(mm, "tb", 0) || w->ty.shape.rank != 2) return;
    const Shape *xs = &x->ty.shape, *ts = &ce->in[1]->ty.shape;
    bool ok = xs->rank == ts->rank + 1;
    for (int i = 0; ok && i < ts->rank; i++) ok = xs->d[i] == ts->d[i];
    if (!ok) return;
    int64_t V = w->ty.shape.d[0], C = w->ty.shape.d[1], N = shape_numel(ts);
    Value *in[3] = {x, w, ce->in[1]};
    Node *m = ir_new(L->g, OP_linear_cross_entropy, 3, in, ce->loc);
    ir_set_int(L->g, m, "ignore_index", ir_int(ce, "ignore_index", -100));
    ir_set_int(L->g, m, "classes", ir_int(ce, "classes", V));
    ir_set_int(L->g, m, "chunk", lce_chunk(L, N, V, C));
    Node *pat[2] = {mm, ce};
    if (!place(L, m, &ce->out[0], 1, pat, 2)) return;
    swap(L, ce->out[0], m->out[0]);
}

/* ---- the pass ---- */

/* Removes the replaced nodes nothing reads any more (repeatedly: a chain
 * dies from its end), and unused constants. */
static void remove_dead(Lg *L) {
    Graph *g = L->g;
    for (bool again = true; again;) {
        again = false;
        Uses *u = ir_uses(g);
        bool *keep = xmalloc(sizeof(bool) * (size_t)(g->nextnode + 1));
        for (int i = 0; i < g->nextnode + 1; i++) keep[i] = true;
        for (int i = 0; i < g->nnodes; i++) {
            Node *n = g->nodes[i];
            if (!gone(L, n) && n->op != OP_constant) continue; /* and constants the rewrites left unused */
            bool used = false;
            for (int r = 0; r < n->nout; r++) used |= u->of[n->out[r]->id].n > 0 || u->nout_refs[n->out[r]->id] > 0;
            if (!used) keep[n->id] = false, again = true;
        }
        ir_filter_nodes(g, keep);
        free(keep);
        ir_uses_free(u);
    }
}

typedef void NodeRule(Lg *L, Node *n);

/* One sweep of rule over a snapshot of the node list, with fresh uses. */
static void sweep(Lg *L, NodeRule *rule, Op only) {
    Graph *g = L->g;
    int nn = g->nnodes;
    Node **snap = xmalloc(sizeof(Node *) * (size_t)(nn ? nn : 1));
    if (nn) memcpy(snap, g->nodes, sizeof(Node *) * (size_t)nn);
    L->u = ir_uses(g);
    grow(L);
    for (int i = 0; i < nn; i++)
        if ((only == OP__COUNT || snap[i]->op == only) && !gone(L, snap[i])) rule(L, snap[i]);
    ir_uses_free(L->u);
    L->u = NULL;
    free(snap);
    remove_dead(L);
}

static void rule_norm(Lg *L, Node *n) {
    if (n->op == OP_mul || n->op == OP_div) fuse_norm(L, n);
}

bool pass_liger_fusion(Graph *g, const PassOptions *po, Diag *d) {
    if (g->is_training) {
        error_at(d, graph_loc(g), "liger-fusion: graph '%s' is already a training graph (run it before autodiff)", g->name);
        return false;
    }
    int64_t on = g->train.fusion == 1 ? ~(int64_t)0 : g->train.fusion;
    /* the patterns are matched as the model wrote them: mixed precision's
     * casts between their ops (a product's H result widened for the
     * cross-entropy, a norm's operands) hide them, and the fused ops would
     * quietly not be made */
    const char *mp = on ? pm_mixed_precision_of(g) : NULL;
    if (mp && strcmp(mp, "fp16") == 0) {   /* (within one list of passes, pm_run says so first) */
        error_at(d, graph_loc(g), "liger-fusion: graph '%s' already has %s mixed precision, whose casts hide the patterns: run liger-fusion before mixed-precision",
                 g->name, mp);
        return false;
    }
    Lg L = {.g = g, .d = d, .budget = g->train.memory_budget};
    L.new_ops = pm_target_has_fused_ops(po);
    grow(&L);
    if (on & F_NORM) sweep(&L, rule_norm, OP__COUNT);
    if (on & F_SOFTMAX_CE) sweep(&L, fuse_softmax_ce, OP_cross_entropy);
    if (L.new_ops) {
        if (on & F_GLU) sweep(&L, fuse_glu, OP_mul);
        if (on & F_ROPE) {
            L.u = ir_uses(g);
            grow(&L);
            fuse_ropes(&L);
            ir_uses_free(L.u);
            L.u = NULL;
            remove_dead(&L);
        }
        if (on & F_ADD_NORM) sweep(&L, fuse_add_norm, OP__COUNT);
        if (on & F_LINEAR_CE) sweep(&L, fuse_linear_ce, OP_cross_entropy);
    }
    remove_dead(&L);
    free(L.cand);
    return d->nerrors == 0;
}
