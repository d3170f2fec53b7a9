/* passes/pad_tiles.c — pad-tiles: GEMM dimensions padded to tile multiples
 * without changing the result (docs/passes.md).  Runs on the forward graph
 * after liger-fusion and mixed-precision; the multiple is --pad-multiple,
 * train.pad_multiple, or chosen from the precision and target
 * (pm_pad_multiple).
 *
 * Vocabulary (class) dimension: a param W [V, C] (through an optional cast)
 * read as the weight of the class projection, matmul(x, W^T) [+ bias]
 * feeding cross_entropy or the "logits" result (and nothing else: a
 * softmax of the logits would count the padding), or linear_cross_entropy's
 * w, and otherwise only by embedding lookups (a tied embedding).  W
 * becomes [Vp, C] and its bias [Vp]; cross_entropy and linear_cross_entropy
 * get {classes=V}, so the padded logits never reach the softmax, the loss,
 * or a gradient; a "logits" result is sliced back to V.
 *
 * Hidden dimension of a feed-forward block: W1 [F, C] (and the gate W3 of a
 * gated unit) -> [+ b [F]] -> act -> matmul with W2 [C2, F]: F becomes Fp.
 * The activation must map 0 to 0 (relu, gelu, silu, tanh, swiglu, geglu,
 * a product), so the padded units are 0, W2's padded columns meet only
 * zeros, and every padded gradient is exactly 0.  Each of the block's
 * params is read only by blocks with the same params (one block
 * repeated), once in each; a note where one is not.
 *
 * Padded rows and columns start at zero (a padded param keeps its original
 * shape in {unpadded}: initialisation counts over it, checkpoints save and
 * load it), their gradients are exactly zero, and AdamW or SGD never moves
 * a zero weight with a zero gradient, so the optimizer leaves them at zero.
 * Each padding is reported as a note at the parameter.
 */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

typedef struct Pad {
    Graph       *g;
    Diag        *d;
    Uses        *u;
    bool         quiet;
    const Graph *like; /* PassOptions.train_graph */
} Pad;

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* v through an optional cast: the param node under it, or NULL. */
static Node *param_under(Value *v) {
    if (v->def->op == OP_cast) v = v->def->in[0];
    return v->def->op == OP_param ? v->def : NULL;
}

/* Whether param may become `to` long along axis: always, but for a graph
 * that shares its parameters with another (an eval or sampling graph with
 * the training graph's buffers, PassOptions.train_graph), only as that one
 * padded it.  A forward-only graph can pad what training cannot (a hidden
 * dimension across a residual stream, which the backward also reads):
 * lowering then found one buffer with two types. */
static bool like_ok(Pad *P, Node *param, int axis, int64_t to) {
    if (!param || !P->like) return true;
    Node *t = ir_find_source((Graph *)P->like, OP_param, ir_source_name(param));
    const Shape *o = &param->out[0]->ty.shape, *s = t ? &t->out[0]->ty.shape : NULL;
    if (!s || s->rank != o->rank || s->d[axis] != to) return false;
    for (int k = 0; k < s->rank; k++)
        if (s->d[k] < o->d[k]) return false;
    return true;
}

/* Every use of v (and of a cast of v) satisfies ok(use node, operand index). */
typedef bool UseOk(Node *user, int idx, void *ctx);
static bool uses_ok(Pad *P, Value *v, UseOk *ok, void *ctx) {
    UseList *ul = &P->u->of[v->id];
    if (P->u->nout_refs[v->id]) return false;
    for (int i = 0; i < ul->n; i++) {
        Node *m = ul->u[i].node;
        if (m->op == OP_cast && m->in[0] == v) {
            if (!uses_ok(P, m->out[0], ok, ctx)) return false;
        } else if (!ok(m, ul->u[i].idx, ctx)) {
            return false;
        }
    }
    return true;
}

/* A param that an earlier pad-tiles padded is left as it is (its
 * {unpadded} shape is the one checkpoints keep, and the runtime pads it
 * once): a note when this run's multiple would have padded it otherwise. */
static bool padded_before(Pad *P, Node *param, int axis, int mult) {
    if (!param || !ir_attr(param, "unpadded")) return false;
    int64_t n = param->out[0]->ty.shape.d[axis];
    if (round_up(n, mult) != n && !P->quiet) {
        const Attr *u = ir_attr(param, "unpadded");
        char from[48] = "";
        if (u->kind == ATTR_INTS && u->n > axis) snprintf(from, sizeof from, " (from %lld)", (long long)u->v[axis]);
        note_at(P->d, param->loc, "pad-tiles: %s is already padded to %lld%s: not padded again to a multiple of %d", ir_source_name(param),
                (long long)n, from, mult);
    }
    return true;
}

static void set_shape(Pad *P, Node *param, int axis, int64_t to, const char *what, int mult) {
    Shape old = param->out[0]->ty.shape;
    if (!ir_attr(param, "unpadded")) ir_set_ints(P->g, param, "unpadded", old.rank, old.d);
    param->out[0]->ty.shape.d[axis] = to;
    if (!P->quiet) {
        char a[160], b[160];
        note_at(P->d, param->loc, "pad-tiles: %s %s -> %s (%s, a multiple of %d)", ir_source_name(param), shape_str(&old, a, sizeof a),
                shape_str(&param->out[0]->ty.shape, b, sizeof b), what, mult);
    }
}

/* ---- vocabulary ---- */

typedef struct Head { Node *w, *bias, *mm, *other; } Head;

/* b [N] beside a product's y [..., N]: a bias of one value a column (not
 * a [1] broadcast to every column, which padded would stay in column 0) */
static bool is_bias_of(Value *b, Value *y) {
    const Shape *ys = &y->ty.shape;
    return b->ty.shape.rank == 1 && ys->rank >= 1 && b->ty.shape.d[0] == ys->d[ys->rank - 1];
}

/* The class projection under a logits value: matmul(x, W^T) with W a
 * param (through a cast), optionally + bias param [V], optionally cast.
 * False otherwise; h->other, when the logits are such a product plus
 * something that is not a bias (a LoRA adapter's product), names what
 * is added (h->w its weight). */
static bool head_of(Pad *P, Value *logits, Head *h) {
    memset(h, 0, sizeof *h);
    Value *v = logits;
    if (v->def->op == OP_cast) v = v->def->in[0];
    Node *add = v->def->op == OP_add ? v->def : NULL;
    if (add) {
        for (int k = 0; k < 2 && !h->mm; k++)
            if (add->in[k]->def->op == OP_matmul && param_under(add->in[1 - k]) && is_bias_of(add->in[1 - k], add->in[k])) {
                h->mm = add->in[k]->def;
                h->bias = param_under(add->in[1 - k]);
            }
        for (int k = 0; k < 2 && !h->mm; k++) {
            Node *mm = add->in[k]->def;
            if (mm->op == OP_matmul && !ir_int(mm, "ta", 0) && ir_int(mm, "tb", 0) && (h->w = param_under(mm->in[1]))) {
                h->other = add->in[1 - k]->def;
                return false;
            }
        }
        if (!h->mm) return false;
    } else if (v->def->op == OP_matmul) {
        h->mm = v->def;
    } else {
        return false;
    }
    if (ir_int(h->mm, "ta", 0) || !ir_int(h->mm, "tb", 0) || h->mm->in[1]->ty.shape.rank != 2) return false;
    h->w = param_under(h->mm->in[1]);
    (void)P;
    return h->w != NULL;
}

typedef struct VocabCtx { Node *w; } VocabCtx;

/* Uses a padded vocabulary param may have: an embedding table, the weight
 * of a class projection (matmul tb=1, operand 2), linear_cross_entropy's w. */
static bool vocab_use_ok(Node *m, int idx, void *ctx) {
    (void)ctx;
    if (m->op == OP_embedding) return idx == 0;
    if (m->op == OP_matmul) return idx == 1 && ir_int(m, "tb", 0) && !ir_int(m, "ta", 0);
    if (m->op == OP_linear_cross_entropy) return idx == 1;
    return false;
}

/* A bias of the class projection: only added there. */
static bool bias_use_ok(Node *m, int idx, void *ctx) {
    (void)idx;
    (void)ctx;
    return m->op == OP_add;
}

/* A class projection's bias b (through casts) read only where it is added
 * to a product of w: another add (b + 1, b + x) would read the padding. */
static bool bias_only_head(Pad *P, Value *b, Node *w) {
    UseList *ul = &P->u->of[b->id];
    if (P->u->nout_refs[b->id]) return false;
    for (int i = 0; i < ul->n; i++) {
        Node *m = ul->u[i].node;
        if (m->op == OP_cast) {
            if (!bias_only_head(P, m->out[0], w)) return false;
            continue;
        }
        Node *mm = m->op == OP_add ? m->in[1 - ul->u[i].idx]->def : NULL;
        if (!mm || mm->op != OP_matmul || param_under(mm->in[1]) != w || !is_bias_of(b, mm->out[0])) return false;
    }
    return true;
}

/* Every reader of a product of the padded weight (the logits, whose
 * padded columns are exact zeros) masks the padding or drops it: a
 * cross_entropy (which gets {classes}), a graph result (sliced back), or on
 * the way to one a cast or the add of the bias padded with the weight.
 * Anything else (a softmax, a z-loss's sum of exp) would count the padded
 * columns.  *who: the first reader that does not. */
static bool logits_ok(Pad *P, Value *v, Node *bias, Node **who) {
    UseList *ul = &P->u->of[v->id];
    for (int i = 0; i < ul->n; i++) {
        Node *m = ul->u[i].node;
        int idx = ul->u[i].idx;
        bool ok = (m->op == OP_cross_entropy && idx == 0) ||
                  ((m->op == OP_cast || (m->op == OP_add && bias && param_under(m->in[1 - idx]) == bias)) && logits_ok(P, m->out[0], bias, who));
        if (!ok) {
            if (!*who) *who = m;
            return false;
        }
    }
    return true;
}

/* The products of w (matmul by W^T, through a cast) all read as logits_ok
 * says. */
static bool products_ok(Pad *P, Value *w, Node *bias, Node **who) {
    UseList *ul = &P->u->of[w->id];
    for (int i = 0; i < ul->n; i++) {
        Node *m = ul->u[i].node;
        if (m->op == OP_cast && !products_ok(P, m->out[0], bias, who)) return false;
        if (m->op == OP_matmul && ul->u[i].idx == 1 && !logits_ok(P, m->out[0], bias, who)) return false;
    }
    return true;
}

/* Pads a class projection's weight w (and its bias) to a multiple of mult
 * rows when every use allows it; note: say why not when they do not. */
static void pad_head(Pad *P, Node *w, Node *bias, int mult, bool note) {
    if (!w || padded_before(P, w, 0, mult)) return;
    int64_t V = w->out[0]->ty.shape.d[0], Vp = round_up(V, mult);
    if (Vp == V) return;
    if (!uses_ok(P, w->out[0], vocab_use_ok, NULL)) {
        if (note && !P->quiet) note_at(P->d, w->loc, "pad-tiles: %s not padded: it has uses other than class projections and embeddings", ir_source_name(w));
        return;
    }
    if (bias && !bias_only_head(P, bias->out[0], w)) {
        if (note && !P->quiet)
            note_at(P->d, bias->loc, "pad-tiles: %s not padded: its bias %s is read by more than the add to its logits", ir_source_name(w),
                    ir_source_name(bias));
        return;
    }
    Node *who = NULL;
    if (!products_ok(P, w->out[0], bias, &who)) {
        if (note && !P->quiet)
            note_at(P->d, who->loc, "pad-tiles: %s not padded: its logits are read by %s, which would count the padded columns", ir_source_name(w),
                    op_name(who->op));
        return;
    }
    if (!like_ok(P, w, 0, Vp) || !like_ok(P, bias, 0, Vp)) return;
    set_shape(P, w, 0, Vp, "vocabulary", mult);
    if (bias) set_shape(P, bias, 0, Vp, "vocabulary", mult);
}

static void pad_vocab(Pad *P, int mult) {
    Graph *g = P->g;
    int nn = g->nnodes;
    for (int i = 0; i < nn; i++) {
        Node *n = g->nodes[i];
        Head h;
        if (n->op == OP_cross_entropy && head_of(P, n->in[0], &h)) pad_head(P, h.w, h.bias, mult, true);
        else if (n->op == OP_linear_cross_entropy) pad_head(P, param_under(n->in[1]), NULL, mult, true);
        else if (n->op == OP_cross_entropy && h.other && !P->quiet && !ir_attr(h.w, "unpadded") &&
                 round_up(h.w->out[0]->ty.shape.d[0], mult) != h.w->out[0]->ty.shape.d[0]) {
            char sh[160];
            if (h.other->op == OP_param) /* a bias of another shape: [1] */
                note_at(P->d, h.w->loc, "pad-tiles: %s not padded: its logits are its product plus %s %s, where a class projection adds at most a bias [%lld]",
                        ir_source_name(h.w), ir_source_name(h.other), shape_str(&h.other->out[0]->ty.shape, sh, sizeof sh),
                        (long long)h.w->out[0]->ty.shape.d[0]);
            else
                note_at(P->d, h.w->loc, "pad-tiles: %s not padded: its logits are its product plus a %s's result, where a class projection adds at most a bias",
                        ir_source_name(h.w), op_name(h.other->op));
        }
    }
}

/* ---- hidden dimension of feed-forward blocks ---- */

typedef struct Ffn { Node *w1, *b1, *w3, *b3, *w2; int64_t F; } Ffn;

static bool single(Pad *P, Value *v) { return P->u->of[v->id].n == 1 && !P->u->nout_refs[v->id]; }

/* u = matmul(x, W^T) [+ b], maybe cast: fills w and b, or false. */
static bool up_proj(Pad *P, Value *u, Node **w, Node **b) {
    if (u->def->op == OP_cast && single(P, u->def->in[0])) u = u->def->in[0];
    *b = NULL;
    if (u->def->op == OP_add) {
        Node *a = u->def;
        for (int k = 0; k < 2; k++)
            if (a->in[k]->def->op == OP_matmul && param_under(a->in[1 - k]) && is_bias_of(a->in[1 - k], a->in[k]) && single(P, a->in[k])) {
                *b = param_under(a->in[1 - k]);
                u = a->in[k];
            }
        if (!*b) return false;
    }
    Node *mm = u->def;
    if (mm->op != OP_matmul || ir_int(mm, "ta", 0) || !ir_int(mm, "tb", 0)) return false;
    *w = param_under(mm->in[1]);
    return *w != NULL && (*w)->out[0]->ty.shape.rank == 2;
}

static bool only_matmul_weight(Node *m, int idx, void *ctx) {
    (void)ctx;
    return m->op == OP_matmul && idx == 1 && ir_int(m, "tb", 0) && !ir_int(m, "ta", 0);
}

/* The readers of v, through casts (a cast counts as its readers). */
static int nreaders(Pad *P, Value *v) {
    UseList *ul = &P->u->of[v->id];
    int n = P->u->nout_refs[v->id];
    for (int i = 0; i < ul->n; i++) {
        Node *m = ul->u[i].node;
        n += m->op == OP_cast && m->in[0] == v ? nreaders(P, m->out[0]) : 1;
    }
    return n;
}

/* The feed-forward block whose down projection is mm2, into f: its form
 * only (which params, whether the activation keeps zeros); ffn_params_ok
 * says whether its params may be padded. */
static bool ffn_of(Pad *P, Node *mm2, Ffn *f) {
    memset(f, 0, sizeof *f);
    if (ir_int(mm2, "ta", 0) || !ir_int(mm2, "tb", 0) || !(f->w2 = param_under(mm2->in[1]))) return false;
    if (f->w2->out[0]->ty.shape.rank != 2) return false;
    Value *h = mm2->in[0];
    if (h->def->op == OP_cast && single(P, h)) h = h->def->in[0];
    if (!single(P, h)) return false;
    Node *act = h->def;
    switch (act->op) {
    case OP_relu:
    case OP_gelu:
    case OP_silu:
    case OP_tanh:
        if (!single(P, act->in[0]) || !up_proj(P, act->in[0], &f->w1, &f->b1)) return false;
        break;
    case OP_swiglu:
    case OP_geglu:
    case OP_mul:
        if (act->in[0] == act->in[1] || !single(P, act->in[0]) || !single(P, act->in[1])) return false;
        if (!up_proj(P, act->in[0], &f->w1, &f->b1) || !up_proj(P, act->in[1], &f->w3, &f->b3)) return false;
        break;
    default: return false;
    }
    f->F = f->w2->out[0]->ty.shape.d[1];
    Node *ws[2] = {f->w1, f->w3};
    for (int k = 0; k < 2; k++)
        if (ws[k] && ws[k]->out[0]->ty.shape.d[0] != f->F) return false;
    return f->w1 != f->w3 && f->w1 != f->w2;
}

static bool same_params(const Ffn *a, const Ffn *b) {
    return a->w1 == b->w1 && a->b1 == b->b1 && a->w3 == b->w3 && a->b3 == b->b3 && a->w2 == b->w2;
}

/* Whether the params of block f (one of the n blocks all) may be padded:
 * each is read only by blocks with the same params, once in each (a
 * second product of W1 would see the padded units; a W2 that another
 * block with its own W1 reads would be padded for one and not the other;
 * blocks sharing all their params, one block repeated, pad together).
 * NULL when they may, else the first param that may not. */
static Node *ffn_params_ok(Pad *P, const Ffn *f, const Ffn *all, int n) {
    int same = 0;
    for (int j = 0; j < n; j++) same += same_params(f, &all[j]);
    Node *ps[5] = {f->w2, f->w1, f->b1, f->w3, f->b3};
    for (int k = 0; k < 5; k++) {
        if (!ps[k]) continue;
        bool bias = k == 2 || k == 4;
        if (nreaders(P, ps[k]->out[0]) != same || !uses_ok(P, ps[k]->out[0], bias ? bias_use_ok : only_matmul_weight, NULL)) return ps[k];
    }
    return NULL;
}

static void pad_hidden(Pad *P, int mult) {
    Graph *g = P->g;
    /* every block first: what reads a param is known before any is padded */
    Ffn *all = xcalloc((size_t)g->nnodes + 1, sizeof *all);
    int n = 0;
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->op == OP_matmul && ffn_of(P, g->nodes[i], &all[n])) n++;
    Node *said = NULL; /* the last param a note named: blocks sharing it are said once */
    for (int i = 0; i < n; i++) {
        Ffn f = all[i];
        Node *shared = ffn_params_ok(P, &f, all, n);
        if (shared) {
            if (shared != said && round_up(f.F, mult) != f.F && !P->quiet)
                note_at(P->d, shared->loc, "pad-tiles: the hidden dimension (%lld) of the feed-forward block of %s is not padded: %s has readers outside it",
                        (long long)f.F, ir_source_name(f.w2), ir_source_name(shared));
            said = shared;
            continue;
        }
        f.F = f.w2->out[0]->ty.shape.d[1]; /* a block sharing the params of one padded before it: padded now */
        int64_t Fp = round_up(f.F, mult);
        if (Fp == f.F || padded_before(P, f.w2, 1, mult) || padded_before(P, f.w1, 0, mult)) continue;
        Node *rows[4] = {f.w1, f.b1, f.w3, f.b3};
        bool like = like_ok(P, f.w2, 1, Fp);
        for (int k = 0; k < 4; k++) like = like && like_ok(P, rows[k], 0, Fp);
        if (!like) continue;
        for (int k = 0; k < 4; k++)
            if (rows[k]) set_shape(P, rows[k], 0, Fp, "hidden", mult);
        set_shape(P, f.w2, 1, Fp, "hidden", mult);
    }
    free(all);
}

/* ---- after the shapes changed ---- */

/* Re-types every node; a padded "logits" result is sliced back to its
 * width. */
static bool retype(Pad *P, const Type *out_ty) {
    Graph *g = P->g;
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (op_has(n->op, OPF_SOURCE)) continue;
        if (!ir_infer(g, n, P->d)) return false;
    }
    for (int i = 0; i < g->noutputs; i++) {
        Output *o = &g->outputs[i];
        if (o->kind != OUT_RESULT || shape_eq(&o->value->ty.shape, &out_ty[i].shape)) continue;
        Value *v = o->value;
        int ax = v->ty.shape.rank - 1;
        if (v->ty.shape.rank != out_ty[i].shape.rank || ax < 0) die("pad-tiles: result '%s' changed rank", o->name);
        Node *s = ir_new(g, OP_slice, 1, &v, v->def->loc);
        ir_set_int(g, s, "axis", ax);
        ir_set_int(g, s, "start", 0);
        ir_set_int(g, s, "end", out_ty[i].shape.d[ax]);
        if (!ir_emit(g, s, P->d)) return false;
        s->phase = v->def->phase;
        o->value = s->out[0];
    }
    return true;
}

/* The class count of every cross-entropy whose logits came from a padded
 * projection: the width those logits had before padding. */
static void set_classes(Pad *P, const int64_t *width) {
    Graph *g = P->g;
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (n->op == OP_cross_entropy && width[n->id] > 0) {
            int64_t V = n->in[0]->ty.shape.d[n->in[0]->ty.shape.rank - 1];
            if (width[n->id] < V) ir_set_int(g, n, "classes", width[n->id]);
        } else if (n->op == OP_linear_cross_entropy && width[n->id] > 0 && width[n->id] < n->in[1]->ty.shape.d[0]) {
            ir_set_int(g, n, "classes", width[n->id]);
        }
    }
}

bool pass_pad_tiles(Graph *g, const PassOptions *po, Diag *d) {
    if (g->is_training) {
        error_at(d, graph_loc(g), "pad-tiles: graph '%s' is already a training graph (run it before autodiff)", g->name);
        return false;
    }
    int mv = pm_pad_multiple(g, po, true), mh = pm_pad_multiple(g, po, false);
    if (mv <= 1 && mh <= 1) return true;
    if (!pm_target_has_fused_ops(po)) {
        error_at(d, NOLOC, "pad-tiles: the %s target cannot mask padded logits yet (docs/passes.md); compile for the cpu target to see the padded plan",
                 po->target);
        return false;
    }
    Pad P = {.g = g, .d = d, .quiet = po && po->quiet, .like = po ? po->train_graph : NULL};
    /* what the cross-entropies see before: their class counts */
    int64_t *width = xcalloc((size_t)g->nextnode + 1, sizeof(int64_t));
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (n->op == OP_cross_entropy) width[n->id] = ir_int(n, "classes", n->in[0]->ty.shape.d[n->in[0]->ty.shape.rank - 1]);
        if (n->op == OP_linear_cross_entropy) width[n->id] = ir_int(n, "classes", n->in[1]->ty.shape.d[0]);
    }
    Type *out_ty = xcalloc((size_t)g->noutputs + 1, sizeof(Type));
    for (int i = 0; i < g->noutputs; i++) out_ty[i] = g->outputs[i].value->ty;
    P.u = ir_uses(g);
    if (mv > 1) pad_vocab(&P, mv);
    /* the logits result of a sampling graph: the same projection as the loss's */
    Value *lg = ir_output(g, "logits");
    Head h;
    if (mv > 1 && lg && head_of(&P, lg, &h)) pad_head(&P, h.w, h.bias, mv, false);
    if (mh > 1) pad_hidden(&P, mh);
    ir_uses_free(P.u);
    bool ok = retype(&P, out_ty);
    if (ok) set_classes(&P, width);
    free(width);
    free(out_ty);
    return ok && d->nerrors == 0;
}

/* ---- --report's tile advice ----
 * A second export of this file (the STYLE's one entry point per pass):
 * the tile rule lives here, and the memory report (codegen/memplan.c)
 * prints the advice for the compiled training graph. */

static void advise(FILE *f, const char *what, int64_t v, int m, bool *header) {
    if (v % m == 0) return;
    if (!*header) fprintf(f, "tile advice (GEMM dimensions are fastest as multiples of %d):\n", m), *header = true;
    int64_t lo = v / m * m, hi = lo + m;
    fprintf(f, "  %s = %lld is not a multiple of %d: nearest good values %lld and %lld\n", what, (long long)v, m, (long long)lo, (long long)hi);
}

void pad_tiles_advice(FILE *f, Graph *g, const PassOptions *po) {
    int m = pm_pad_multiple(g, po, false);
    if (m <= 1) m = 8; /* what tensor cores want, even where this target does not pad */
    bool header = false;
    Node *tok = ir_find_source(g, OP_input, "tokens");
    if (tok && tok->out[0]->ty.shape.rank == 2) {
        const Shape *s = &tok->out[0]->ty.shape;
        char what[96];
        snprintf(what, sizeof what, "batch x sequence (%lld x %lld)", (long long)s->d[0], (long long)s->d[1]);
        advise(f, what, s->d[0] * s->d[1], m, &header);
    }
    /* the dimensions of every weight a matmul reads (each value once) */
    int64_t seen[64];
    int ns = 0;
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (n->op != OP_matmul && n->op != OP_linear_cross_entropy) continue;
        Node *w = param_under(n->in[1]);
        if (!w || w->out[0]->ty.shape.rank != 2) continue;
        for (int k = 0; k < 2; k++) {
            int64_t v = w->out[0]->ty.shape.d[k];
            bool dup = false;
            for (int j = 0; j < ns; j++) dup |= seen[j] == v;
            if (dup || ns == 64) continue;
            seen[ns++] = v;
            char what[200];
            snprintf(what, sizeof what, "dimension %d of %s", k, ir_source_name(w));
            advise(f, what, v, m, &header);
        }
    }
    if (!header) fprintf(f, "tile advice: every GEMM dimension is a multiple of %d\n", m);
}
