/* passes/grad.c — the gradient rules: one function per differentiable op,
 * in the order of ops.h, gathered in the grad_fn column at the end.
 *
 * A rule gets the forward node n and the gradients dy[i] of its results
 * (NULL where none flows) and emits, for every operand that needs a
 * gradient, a contribution of exactly the operand's type.  The formulas
 * are listed in docs/autodiff.md.  Conventions:
 *   - forward values are read directly (y for tanh, mean/rstd for norms,
 *     lse for attention and cross-entropy): they are the "saved" tensors;
 *   - a binary op's operand that was broadcast gets the gradient summed
 *     back to its shape (unbroadcast: sum with keepdim, then reshape);
 *   - every emitted node carries n's loc and phase PH_MICRO.
 */
#include "grad.h"

#include <string.h>

typedef void GradFn(GradCtx *c, Node *n, Value *const *dy);

/* ---- emitting ---- */

static Node *mk(GradCtx *c, Op op, int nin, Value *const *in) {
    Node *m = ir_new(c->g, op, nin, in, c->fwd->loc);
    m->phase = PH_MICRO;
    return m;
}

/* Infers and appends m; returns result 0.  The forward node inferred, so a
 * backward node that does not is a bug in its rule. */
static Value *fin(GradCtx *c, Node *m) {
    if (!ir_emit(c->g, m, c->d)) die("gradient of %s (node %d): backward %s does not infer", op_name(c->fwd->op), c->fwd->id, op_name(m->op));
    return m->out[0];
}

static Value *un(GradCtx *c, Op op, Value *a) { return fin(c, mk(c, op, 1, &a)); }

static Value *bin(GradCtx *c, Op op, Value *a, Value *b) {
    Value *in[2] = {a, b};
    return fin(c, mk(c, op, 2, in));
}

/* A scalar constant of dtype dt (it broadcasts against anything). */
static Value *scalar(GradCtx *c, double v, DType dt) {
    Value *k = ir_const(c->g, v, (Type){dt, {0}}, c->fwd->loc);
    k->def->phase = PH_MICRO;
    return k;
}

static void copy_attr(GradCtx *c, Node *dst, const Node *src, const char *key) {
    const Attr *a = ir_attr(src, key);
    if (!a) return;
    switch (a->kind) {
    case ATTR_INT: ir_set_int(c->g, dst, key, a->i); break;
    case ATTR_FLOAT: ir_set_float(c->g, dst, key, a->f); break;
    case ATTR_STR: ir_set_str(c->g, dst, key, a->s); break;
    case ATTR_INTS: ir_set_ints(c->g, dst, key, a->n, a->v); break;
    }
}

static Value *reshape(GradCtx *c, Value *x, const Shape *s) {
    if (shape_eq(&x->ty.shape, s)) return x;
    Node *m = mk(c, OP_reshape, 1, &x);
    ir_set_ints(c->g, m, "shape", s->rank, s->d);
    return fin(c, m);
}

static Value *broadcast_to(GradCtx *c, Value *x, const Shape *s) {
    if (shape_eq(&x->ty.shape, s)) return x;
    Node *m = mk(c, OP_broadcast, 1, &x);
    ir_set_ints(c->g, m, "shape", s->rank, s->d);
    return fin(c, m);
}

/* Sums dy (of a broadcast result's shape) back to shape s: over the
 * leading axes s lacks and the axes where s has 1, with keepdim, then a
 * reshape (which drops the leading 1s). */
static Value *unbroadcast(GradCtx *c, Value *dy, const Shape *s) {
    const Shape *r = &dy->ty.shape;
    if (shape_eq(r, s)) return dy;
    int lead = r->rank - s->rank;
    if (lead < 0) die("unbroadcast: rank %d to rank %d", r->rank, s->rank);
    int64_t axes[IR_MAX_RANK];
    int na = 0;
    for (int i = 0; i < r->rank; i++)
        if (i < lead || (s->d[i - lead] == 1 && r->d[i] != 1)) axes[na++] = i;
    Value *v = dy;
    if (na) {
        /* Only leading axes: summing them away gives s's shape directly. */
        bool leading = axes[na - 1] < lead;
        Node *m = mk(c, OP_sum, 1, &dy);
        ir_set_ints(c->g, m, "axes", na, axes);
        ir_set_int(c->g, m, "keepdim", !leading);
        v = fin(c, m);
    }
    return reshape(c, v, s);
}

static bool need(GradCtx *c, const Value *v) { return c->needs[v->id]; }

/* Accumulates dx into operand i of n, summed back to its shape. */
static void give(GradCtx *c, Node *n, int i, Value *dx) { grad_accumulate(c, n->in[i], unbroadcast(c, dx, &n->in[i]->ty.shape)); }

/* ---- pointwise unary ---- */

static void grad_neg(GradCtx *c, Node *n, Value *const *dy) { give(c, n, 0, un(c, OP_neg, dy[0])); }

/* y = exp(x): dx = dy * y */
static void grad_exp(GradCtx *c, Node *n, Value *const *dy) { give(c, n, 0, bin(c, OP_mul, dy[0], n->out[0])); }

/* dx = dy / x */
static void grad_log(GradCtx *c, Node *n, Value *const *dy) { give(c, n, 0, bin(c, OP_div, dy[0], n->in[0])); }

/* y = sqrt(x): dx = (dy / y) * 0.5 */
static void grad_sqrt(GradCtx *c, Node *n, Value *const *dy) {
    Value *t = bin(c, OP_div, dy[0], n->out[0]);
    give(c, n, 0, bin(c, OP_mul, t, scalar(c, 0.5, t->ty.dt)));
}

/* y = x^-1/2: dx = -0.5 dy y / x  (= -0.5 dy y^3) */
static void grad_rsqrt(GradCtx *c, Node *n, Value *const *dy) {
    Value *t = bin(c, OP_div, bin(c, OP_mul, dy[0], n->out[0]), n->in[0]);
    give(c, n, 0, bin(c, OP_mul, t, scalar(c, -0.5, t->ty.dt)));
}

static void grad_tanh(GradCtx *c, Node *n, Value *const *dy) { give(c, n, 0, bin(c, OP_tanh_grad, dy[0], n->out[0])); }
static void grad_sigmoid(GradCtx *c, Node *n, Value *const *dy) { give(c, n, 0, bin(c, OP_sigmoid_grad, dy[0], n->out[0])); }
static void grad_relu(GradCtx *c, Node *n, Value *const *dy) { give(c, n, 0, bin(c, OP_relu_grad, dy[0], n->in[0])); }
static void grad_silu(GradCtx *c, Node *n, Value *const *dy) { give(c, n, 0, bin(c, OP_silu_grad, dy[0], n->in[0])); }

static void grad_gelu(GradCtx *c, Node *n, Value *const *dy) {
    Value *in[2] = {dy[0], n->in[0]};
    Node *m = mk(c, OP_gelu_grad, 2, in);
    copy_attr(c, m, n, "approx");
    give(c, n, 0, fin(c, m));
}

/* dx = dy * sign(x) */
static void grad_abs(GradCtx *c, Node *n, Value *const *dy) { give(c, n, 0, bin(c, OP_mul, dy[0], un(c, OP_sign, n->in[0]))); }

/* dx = cast(dy) back to x's dtype */
static void grad_cast(GradCtx *c, Node *n, Value *const *dy) {
    Node *m = mk(c, OP_cast, 1, &dy[0]);
    ir_set_str(c->g, m, "dtype", dtype_name[n->in[0]->ty.dt]);
    give(c, n, 0, fin(c, m));
}

/* ---- pointwise binary (operands broadcast) ---- */

static void grad_add(GradCtx *c, Node *n, Value *const *dy) {
    for (int i = 0; i < 2; i++)
        if (need(c, n->in[i])) give(c, n, i, dy[0]);
}

static void grad_sub(GradCtx *c, Node *n, Value *const *dy) {
    if (need(c, n->in[0])) give(c, n, 0, dy[0]);
    if (need(c, n->in[1])) give(c, n, 1, un(c, OP_neg, dy[0]));
}

/* da = dy * b, db = dy * a; x * x: dx = dy * x + dy * x (one product) */
static void grad_mul(GradCtx *c, Node *n, Value *const *dy) {
    if (n->in[0] == n->in[1]) {
        Value *t = bin(c, OP_mul, dy[0], n->in[0]);
        give(c, n, 0, bin(c, OP_add, t, t));
        return;
    }
    if (need(c, n->in[0])) give(c, n, 0, bin(c, OP_mul, dy[0], n->in[1]));
    if (need(c, n->in[1])) give(c, n, 1, bin(c, OP_mul, dy[0], n->in[0]));
}

/* y = a / b: da = dy / b, db = -(dy * y) / b */
static void grad_div(GradCtx *c, Node *n, Value *const *dy) {
    if (need(c, n->in[0])) give(c, n, 0, bin(c, OP_div, dy[0], n->in[1]));
    if (need(c, n->in[1])) give(c, n, 1, un(c, OP_neg, bin(c, OP_div, bin(c, OP_mul, dy[0], n->out[0]), n->in[1])));
}

/* maximum: mask = ge(a, b); da = dy * mask, db = dy - dy * mask (a tie goes
 * to a).  minimum: the same with mask = ge(b, a). */
static void grad_minmax(GradCtx *c, Node *n, Value *const *dy) {
    Value *a = n->in[0], *b = n->in[1];
    Value *mask = n->op == OP_maximum ? bin(c, OP_ge, a, b) : bin(c, OP_ge, b, a);
    Value *da = bin(c, OP_mul, dy[0], mask);
    if (need(c, a)) give(c, n, 0, da);
    if (need(c, b)) give(c, n, 1, bin(c, OP_sub, dy[0], da));
}

/* ---- reductions ---- */

/* dy of a reduction over n's axes, reshaped to the keepdim shape so that
 * it broadcasts against x (not needed when the reduced axes are leading:
 * broadcasting adds those). */
static Value *keepdim_shape(GradCtx *c, Node *n, Value *dy) {
    const Attr *ax = ir_attr(n, "axes");
    bool leading = !ir_int(n, "keepdim", 0);
    for (int i = 0; i < ax->n; i++) leading &= ax->v[i] == i;
    if (leading) return dy;
    Shape s = n->in[0]->ty.shape;
    for (int i = 0; i < ax->n; i++) s.d[ax->v[i]] = 1;
    return reshape(c, dy, &s);
}

/* dx = broadcast(dy) */
static void grad_sum(GradCtx *c, Node *n, Value *const *dy) {
    give(c, n, 0, broadcast_to(c, keepdim_shape(c, n, dy[0]), &n->in[0]->ty.shape));
}

/* dx = broadcast(dy / count) */
static void grad_mean(GradCtx *c, Node *n, Value *const *dy) {
    const Attr *ax = ir_attr(n, "axes");
    int64_t cnt = 1;
    for (int i = 0; i < ax->n; i++) cnt *= n->in[0]->ty.shape.d[ax->v[i]];
    Value *t = bin(c, OP_mul, dy[0], scalar(c, 1.0 / (double)cnt, dy[0]->ty.dt));
    give(c, n, 0, broadcast_to(c, keepdim_shape(c, n, t), &n->in[0]->ty.shape));
}

/* max_grad(dy, x, y) with n's axes: dy where x equals the maximum. */
static Value *max_grad(GradCtx *c, Node *n, Value *dy) {
    Value *in[3] = {dy, n->in[0], n->out[0]};
    Node *m = mk(c, OP_max_grad, 3, in);
    copy_attr(c, m, n, "axes");
    copy_attr(c, m, n, "keepdim");
    return fin(c, m);
}

/* dx = max_grad(dy / k, x, y), k the number of elements equal to the
 * maximum (sum of max_grad(1, x, y) over the axes): the k ties share dy,
 * as PyTorch's amax shares it.  Every tie taking the whole dy summed to
 * k·dy, k times the true gradient where the ties are one value used k
 * times (max of concat([w, w]), of a broadcast, of repeated tokens). */
static void grad_max(GradCtx *c, Node *n, Value *const *dy) {
    Value *ties = max_grad(c, n, broadcast_to(c, scalar(c, 1.0, dy[0]->ty.dt), &dy[0]->ty.shape));
    Node *s = mk(c, OP_sum, 1, &ties);
    copy_attr(c, s, n, "axes");
    copy_attr(c, s, n, "keepdim");
    give(c, n, 0, max_grad(c, n, bin(c, OP_div, dy[0], fin(c, s))));
}

/* ---- shape ---- */

static void grad_reshape(GradCtx *c, Node *n, Value *const *dy) { give(c, n, 0, reshape(c, dy[0], &n->in[0]->ty.shape)); }

/* dx = permute(dy) by the inverse permutation */
static void grad_permute(GradCtx *c, Node *n, Value *const *dy) {
    const Attr *p = ir_attr(n, "perm");
    int64_t inv[IR_MAX_RANK];
    for (int i = 0; i < p->n; i++) inv[p->v[i]] = i;
    Node *m = mk(c, OP_permute, 1, &dy[0]);
    ir_set_ints(c->g, m, "perm", p->n, inv);
    give(c, n, 0, fin(c, m));
}

static void grad_broadcast(GradCtx *c, Node *n, Value *const *dy) { give(c, n, 0, dy[0]); }

/* dx = pad(dy) with zeros where the slice cut */
static void grad_slice(GradCtx *c, Node *n, Value *const *dy) {
    int64_t ax = ir_int(n, "axis", 0), st = ir_int(n, "start", 0), en = ir_int(n, "end", 0);
    Node *m = mk(c, OP_pad, 1, &dy[0]);
    ir_set_int(c->g, m, "axis", ax);
    ir_set_int(c->g, m, "lo", st);
    ir_set_int(c->g, m, "hi", n->in[0]->ty.shape.d[ax] - en);
    give(c, n, 0, fin(c, m));
}

/* dx = slice(dy) without the padding */
static void grad_pad(GradCtx *c, Node *n, Value *const *dy) {
    int64_t ax = ir_int(n, "axis", 0), lo = ir_int(n, "lo", 0);
    Node *m = mk(c, OP_slice, 1, &dy[0]);
    ir_set_int(c->g, m, "axis", ax);
    ir_set_int(c->g, m, "start", lo);
    ir_set_int(c->g, m, "end", lo + n->in[0]->ty.shape.d[ax]);
    give(c, n, 0, fin(c, m));
}

/* dx_i = slice(dy) at operand i's offset */
static void grad_concat(GradCtx *c, Node *n, Value *const *dy) {
    int64_t ax = ir_int(n, "axis", 0), off = 0;
    for (int i = 0; i < n->nin; i++) {
        int64_t len = n->in[i]->ty.shape.d[ax];
        if (need(c, n->in[i])) {
            Node *m = mk(c, OP_slice, 1, &dy[0]);
            ir_set_int(c->g, m, "axis", ax);
            ir_set_int(c->g, m, "start", off);
            ir_set_int(c->g, m, "end", off + len);
            give(c, n, i, fin(c, m));
        }
        off += len;
    }
}

/* ---- matmul ---- */

static Value *cast_to(GradCtx *c, Value *v, DType dt);

static Value *mm(GradCtx *c, Value *a, Value *b, int ta, int tb) {
    Value *in[2] = {a, b};
    Node *m = mk(c, OP_matmul, 2, in);
    ir_set_int(c->g, m, "ta", ta);
    ir_set_int(c->g, m, "tb", tb);
    copy_attr(c, m, c->fwd, "tf32"); /* mixed-precision's tf32 mark holds for the backward products too */
    return fin(c, m);
}

/* x [..., R, C] viewed as [prod(...) * R, C]. */
static Value *flatten_rows(GradCtx *c, Value *x) {
    const Shape *s = &x->ty.shape;
    int64_t d[2] = {shape_numel(s) / s->d[s->rank - 1], s->d[s->rank - 1]};
    Shape f = shape_make(2, d);
    return reshape(c, x, &f);
}

/* C = op_a(A) op_b(B), op = transpose of the last two axes when ta/tb:
 *   dop_a(A) = dC op_b(B)^T,  dop_b(B) = op_a(A)^T dC,
 * expressed with the ta/tb flags for each of the four combinations:
 *   dA: ta=0,tb=0: dC B^T        dB: ta=0,tb=0: A^T dC
 *       ta=0,tb=1: dC B              ta=1,tb=0: A dC
 *       ta=1,tb=0: B dC^T            ta=0,tb=1: dC^T A
 *       ta=1,tb=1: B^T dC^T          ta=1,tb=1: dC^T A^T
 * Batch dimensions the operand was broadcast over are summed away.  When B
 * is a rank-2 weight shared by a batched A (not transposed), the batch is
 * folded into the rows instead (reshapes are views), which gives dB in one
 * matmul with no [batch, K, N] temporary. */
static void grad_matmul(GradCtx *c, Node *n, Value *const *dy) {
    Value *A = n->in[0], *B = n->in[1], *dC = dy[0];
    if (dC->ty.dt != A->ty.dt) dC = cast_to(c, dC, A->ty.dt); /* {dtype=f32} of half operands: the products stay half */
    int ta = (int)ir_int(n, "ta", 0), tb = (int)ir_int(n, "tb", 0);
    if (need(c, A)) {
        Value *dA = !ta ? (tb ? mm(c, dC, B, 0, 0) : mm(c, dC, B, 0, 1)) : (tb ? mm(c, B, dC, 1, 1) : mm(c, B, dC, 0, 1));
        give(c, n, 0, dA);
    }
    if (need(c, B)) {
        Value *dB;
        if (B->ty.shape.rank == 2 && A->ty.shape.rank > 2 && !ta) {
            Value *A2 = flatten_rows(c, A), *dC2 = flatten_rows(c, dC);
            dB = tb ? mm(c, dC2, A2, 1, 0) : mm(c, A2, dC2, 1, 0);
        } else {
            dB = !tb ? (ta ? mm(c, A, dC, 0, 0) : mm(c, A, dC, 1, 0)) : (ta ? mm(c, dC, A, 1, 1) : mm(c, dC, A, 1, 0));
        }
        give(c, n, 1, dB);
    }
}

/* ---- neural-network ops ---- */

/* dtable = embedding_grad(dy, idx){rows}: scatter-add of dy rows */
static void grad_embedding(GradCtx *c, Node *n, Value *const *dy) {
    Value *in[2] = {dy[0], n->in[1]};
    Node *m = mk(c, OP_embedding_grad, 2, in);
    ir_set_int(c->g, m, "rows", n->in[0]->ty.shape.d[0]);
    give(c, n, 0, fin(c, m));
}

static void grad_softmax(GradCtx *c, Node *n, Value *const *dy) {
    Value *in[2] = {dy[0], n->out[0]};
    Node *m = mk(c, OP_softmax_grad, 2, in);
    copy_attr(c, m, n, "axis");
    give(c, n, 0, fin(c, m));
}

/* (dx, dw, db) = layer_norm_grad(dy, x, w, mean, rstd) */
static void grad_layer_norm(GradCtx *c, Node *n, Value *const *dy) {
    Value *in[5] = {dy[0], n->in[0], n->in[1], n->out[1], n->out[2]};
    Node *m = mk(c, OP_layer_norm_grad, 5, in);
    fin(c, m);
    for (int i = 0; i < 3; i++)
        if (need(c, n->in[i])) give(c, n, i, m->out[i]);
}

/* (dx, dw) = rms_norm_grad(dy, x, w, rstd) */
static void grad_rms_norm(GradCtx *c, Node *n, Value *const *dy) {
    Value *in[4] = {dy[0], n->in[0], n->in[1], n->out[1]};
    Node *m = mk(c, OP_rms_norm_grad, 4, in);
    fin(c, m);
    for (int i = 0; i < 2; i++)
        if (need(c, n->in[i])) give(c, n, i, m->out[i]);
}

/* A rotation: its gradient is the inverse rotation. */
static void grad_rope(GradCtx *c, Node *n, Value *const *dy) {
    Node *m = mk(c, OP_rope, 1, &dy[0]);
    copy_attr(c, m, n, "theta");
    ir_set_int(c->g, m, "inverse", !ir_int(n, "inverse", 0));
    give(c, n, 0, fin(c, m));
}

/* (dq, dk, dv) = attention_grad(do, q, k, v, o, lse){causal, scale} */
static void grad_attention(GradCtx *c, Node *n, Value *const *dy) {
    Value *in[6] = {dy[0], n->in[0], n->in[1], n->in[2], n->out[0], n->out[1]};
    Node *m = mk(c, OP_attention_grad, 6, in);
    copy_attr(c, m, n, "causal");
    copy_attr(c, m, n, "scale");
    fin(c, m);
    for (int i = 0; i < 3; i++)
        if (need(c, n->in[i])) give(c, n, i, m->out[i]);
}

/* The mask is a function of (seed, stream, index): the same dropout
 * applied to dy regenerates it, so nothing is stored. */
static void grad_dropout(GradCtx *c, Node *n, Value *const *dy) {
    Value *in[2] = {dy[0], n->in[1]};
    Node *m = mk(c, OP_dropout, 2, in);
    copy_attr(c, m, n, "p");
    copy_attr(c, m, n, "stream");
    give(c, n, 0, fin(c, m));
}

/* dlogits = cross_entropy_grad(dloss, logits, targets, lse){ignore_index,
 * classes}: the columns from {classes} on (pad-tiles' padding) get no
 * gradient, as they had no part in the loss. */
static void grad_cross_entropy(GradCtx *c, Node *n, Value *const *dy) {
    Value *in[4] = {dy[0], n->in[0], n->in[1], n->out[1]};
    Node *m = mk(c, OP_cross_entropy_grad, 4, in);
    copy_attr(c, m, n, "ignore_index");
    copy_attr(c, m, n, "classes");
    give(c, n, 0, fin(c, m));
}

/* ---- fused ops (passes/liger.c) ---- */

/* y = silu(a) b: da = silu_grad(dy b, a), db = dy silu(a).  silu(a) is
 * recomputed here from a, which the rule reads anyway: the forward pass
 * stores nothing for it. */
static void grad_swiglu(GradCtx *c, Node *n, Value *const *dy) {
    Value *a = n->in[0], *b = n->in[1];
    if (need(c, a)) give(c, n, 0, bin(c, OP_silu_grad, bin(c, OP_mul, dy[0], b), a));
    if (need(c, b)) give(c, n, 1, bin(c, OP_mul, dy[0], un(c, OP_silu, a)));
}

/* y = gelu(a) b: da = gelu_grad(dy b, a), db = dy gelu(a) (recomputed). */
static void grad_geglu(GradCtx *c, Node *n, Value *const *dy) {
    Value *a = n->in[0], *b = n->in[1];
    if (need(c, a)) {
        Value *in[2] = {bin(c, OP_mul, dy[0], b), a};
        Node *m = mk(c, OP_gelu_grad, 2, in);
        copy_attr(c, m, n, "approx");
        give(c, n, 0, fin(c, m));
    }
    if (need(c, b)) {
        Node *m = mk(c, OP_gelu, 1, &n->in[0]);
        copy_attr(c, m, n, "approx");
        give(c, n, 1, bin(c, OP_mul, dy[0], fin(c, m)));
    }
}

/* (y, s, [mean,] rstd) = add_*_norm(x, r, w[, b]).  With gradients of both
 * y and s: add_*_norm_grad(dy, ds, s, w, [mean,] rstd), whose dx is the
 * total gradient of s; with dy only: the plain norm gradient at s; with ds
 * only: ds.  x and r (the two addends) both get dx. */
static void grad_add_norm(GradCtx *c, Node *n, Value *const *dy) {
    bool ln = n->op == OP_add_layer_norm;
    Value *s = n->out[1], *w = n->in[2], *dx = dy[1];
    Node *m = NULL;
    if (dy[0] && dy[1]) {
        Value *in[6] = {dy[0], dy[1], s, w, n->out[2], ln ? n->out[3] : NULL};
        m = mk(c, ln ? OP_add_layer_norm_grad : OP_add_rms_norm_grad, ln ? 6 : 5, in);
    } else if (dy[0]) {
        Value *in[5] = {dy[0], s, w, n->out[2], ln ? n->out[3] : NULL};
        m = mk(c, ln ? OP_layer_norm_grad : OP_rms_norm_grad, ln ? 5 : 4, in);
    }
    if (m) {
        fin(c, m);
        dx = m->out[0];
        if (need(c, w)) give(c, n, 2, m->out[1]);
        if (ln && need(c, n->in[3])) give(c, n, 3, m->out[2]);
    }
    for (int i = 0; i < 2; i++)
        if (need(c, n->in[i])) give(c, n, i, dx);
}

/* rope_qk is linear: its gradient is rope_qk with the other `inverse`
 * (the transpose), on (dq', dk'); a missing one is zeros.  The tables are
 * constants of the model (liger-fusion only makes table ropes of sources
 * that need no gradient). */
static void grad_rope_qk(GradCtx *c, Node *n, Value *const *dy) {
    Value *in[4] = {dy[0], dy[1], n->nin == 4 ? n->in[2] : NULL, n->nin == 4 ? n->in[3] : NULL};
    for (int i = 0; i < 2; i++)
        if (!in[i]) {
            in[i] = ir_const(c->g, 0.0, n->out[i]->ty, c->fwd->loc);
            in[i]->def->phase = PH_MICRO;
        }
    for (int i = 2; i < n->nin; i++)
        if (need(c, n->in[i])) die("rope_qk (node %d): a gradient for its cos/sin tables is not supported", n->id);
    Node *m = mk(c, OP_rope_qk, n->nin, in);
    copy_attr(c, m, n, "theta");
    ir_set_int(c->g, m, "inverse", !ir_int(n, "inverse", 0));
    fin(c, m);
    for (int i = 0; i < 2; i++)
        if (need(c, n->in[i])) give(c, n, i, m->out[i]);
}

static Value *cast_to(GradCtx *c, Value *v, DType dt) {
    if (v->ty.dt == dt) return v;
    Node *m = mk(c, OP_cast, 1, &v);
    ir_set_str(c->g, m, "dtype", dtype_name[dt]);
    return fin(c, m);
}

/* The forward computed dx and dw (f32) for dloss = 1: scale them by dloss
 * (nothing to do for the seed 1; the fp16 loss scale otherwise), in f32,
 * then give them the operands' dtype. */
static void grad_linear_ce(GradCtx *c, Node *n, Value *const *dy) {
    Value *dl = dy[0];
    bool one = dl->def->op == OP_constant && ir_float(dl->def, "value", 0) == 1.0;
    for (int i = 0; i < 2; i++) {
        if (!need(c, n->in[i])) continue;
        Value *g = n->out[1 + i];
        if (!one) g = bin(c, OP_mul, g, cast_to(c, dl, g->ty.dt));
        give(c, n, i, cast_to(c, g, n->in[i]->ty.dt));
    }
}

/* ---- the column ---- */

static GradFn *const grad_fn[OP__COUNT] = {
    [OP_neg] = grad_neg, [OP_exp] = grad_exp, [OP_log] = grad_log, [OP_sqrt] = grad_sqrt, [OP_rsqrt] = grad_rsqrt,
    [OP_tanh] = grad_tanh, [OP_sigmoid] = grad_sigmoid, [OP_relu] = grad_relu, [OP_gelu] = grad_gelu,
    [OP_silu] = grad_silu, [OP_abs] = grad_abs, [OP_cast] = grad_cast,

    [OP_add] = grad_add, [OP_sub] = grad_sub, [OP_mul] = grad_mul, [OP_div] = grad_div,
    [OP_maximum] = grad_minmax, [OP_minimum] = grad_minmax,

    [OP_sum] = grad_sum, [OP_mean] = grad_mean, [OP_max] = grad_max,

    [OP_reshape] = grad_reshape, [OP_permute] = grad_permute, [OP_broadcast] = grad_broadcast,
    [OP_slice] = grad_slice, [OP_pad] = grad_pad, [OP_concat] = grad_concat,

    [OP_matmul] = grad_matmul,

    [OP_embedding] = grad_embedding, [OP_softmax] = grad_softmax, [OP_layer_norm] = grad_layer_norm,
    [OP_rms_norm] = grad_rms_norm, [OP_rope] = grad_rope, [OP_attention] = grad_attention,
    [OP_dropout] = grad_dropout, [OP_cross_entropy] = grad_cross_entropy,

    [OP_swiglu] = grad_swiglu, [OP_geglu] = grad_geglu, [OP_add_layer_norm] = grad_add_norm,
    [OP_add_rms_norm] = grad_add_norm, [OP_rope_qk] = grad_rope_qk, [OP_linear_cross_entropy] = grad_linear_ce,
};

bool grad_has_rule(Op op) { return op < OP__COUNT && grad_fn[op] != NULL; }

bool grad_is_zero(Op op) { return op == OP_sign || op == OP_ge; }

const char *grad_nondiff_result(Op op, int res) {
    switch (op) {
    case OP_layer_norm: return res == 1 ? "mean" : res == 2 ? "rstd" : NULL;
    case OP_rms_norm: return res == 1 ? "rstd" : NULL;
    case OP_attention: return res == 1 ? "lse" : NULL;
    case OP_cross_entropy: return res == 1 ? "lse" : NULL;
    case OP_add_layer_norm: return res == 2 ? "mean" : res == 3 ? "rstd" : NULL;
    case OP_add_rms_norm: return res == 2 ? "rstd" : NULL;
    case OP_linear_cross_entropy: return res == 1 ? "dx" : res == 2 ? "dw" : NULL;
    default: return NULL;
    }
}

int grad_diff_results(Op op) {
    switch (op) {
    case OP_add_layer_norm:
    case OP_add_rms_norm:
    case OP_rope_qk: return 2;
    default: return 1;
    }
}

void grad_node(GradCtx *c, Node *n, Value *const *dy) {
    if (!grad_fn[n->op]) die("grad_node: %s has no gradient rule", op_name(n->op));
    bool any = false;
    for (int j = 0; j < grad_diff_results(n->op); j++) any |= dy[j] != NULL;
    if (!any) die("grad_node: %s without a gradient of a differentiable result", op_name(n->op));
    Node *saved = c->fwd;
    c->fwd = n;
    grad_fn[n->op](c, n, dy);
    c->fwd = saved;
}

void grad_accumulate(GradCtx *c, Value *v, Value *dv) {
    if (!type_eq(&v->ty, &dv->ty)) {
        char a[160], b[160];
        die("gradient of %%%d has type %s, not %s", v->id, type_str(&dv->ty, a, sizeof a), type_str(&v->ty, b, sizeof b));
    }
    if (!c->needs[v->id]) die("gradient for %%%d, which does not need one", v->id);
    Value *old = c->grad[v->id];
    if (!old) {
        c->grad[v->id] = dv;
        return;
    }
    /* Fan-out: sum the contributions; the add belongs to v's definition. */
    Value *in[2] = {old, dv};
    Node *m = ir_new(c->g, OP_add, 2, in, v->def->loc);
    m->phase = PH_MICRO;
    if (!ir_emit(c->g, m, c->d)) die("gradient accumulation of %%%d does not infer", v->id);
    c->grad[v->id] = m->out[0];
}
