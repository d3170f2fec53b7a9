/* passes/optimizer.c — the parameter update, after autodiff.
 *
 * Consumes the "grad.<param>" results and appends, for g->train:
 *
 *   inputs   opt.lr : f32[] (this step's learning rate, from the schedule)
 *            opt.step : i32[] (the step number, from 1)
 *   N = grad_accum (PassOptions.accum overrides it) micro-batches:
 *     N == 1: everything stays in PH_MICRO; G = the gradient.
 *     N  > 1: state grad_acc.<p> (f32, zeros); PH_MICRO: acc' = acc + g,
 *             update acc = acc'; PH_STEP: G = acc (the sum over the N
 *             micro-batches), and update acc = constant 0 afterwards.
 *   gscale  = 1/N, or with grad_clip > 0:
 *             grad_norm = global_norm(G...) * 1/N   (norm of the mean gradient)
 *             gscale    = clip_coef(grad_norm){max_norm} * 1/N
 *             and grad_norm becomes a result.
 *   adamw:   states adamw.m.<p>, adamw.v.<p>;
 *            (w', m', v') = adamw(w, G, m, v, opt.lr, opt.step, gscale)
 *   sgd:     state sgd.buf.<p> when momentum > 0;
 *            (w', buf') = sgd(w, G, buf, opt.lr, gscale)
 *   weight decay only for params of rank >= 2 unless train.decay_all.
 *
 * Mixed precision (passes/mixed_precision.c, docs/passes.md):
 *   - a cast of a param to bf16/f16 becomes a state amp.<dt>.<p>
 *     {copy_of=<p>}: a persistent half-precision copy, refreshed after each
 *     update (cast of the new weight) and by the runtime after init and
 *     loads (it knows the copies by their names), so the weights are not
 *     re-cast in every micro-batch;
 *   - fp16 loss scaling (state amp.scale; "loss" = loss * scale, "amp.loss"
 *     the true loss): states amp.good_steps and amp.skipped;
 *       norm = global_norm(G...)            (of the scaled gradients: an
 *                                            inf/NaN anywhere makes it inf/NaN)
 *       (scale', good', skipped', skip) = loss_scale_update(scale, good, skipped, norm)
 *       gscale = 1/scale (times clip_coef(norm/scale) and 1/N as above)
 *     and every update gets the skip operand: an overflowing step changes
 *     no weight and no moment; "loss" is the true loss again.  AdamW's
 *     step operand is then opt.step - i32(amp.skipped): bias correction
 *     counts only the steps that updated.
 *   - a gradient that is a half product widened to f32 (the gradient of a
 *     weight's half copy) becomes the product summed into f32 directly,
 *     matmul {dtype=f32}: never rounded to half, no widening kernel; an f32
 *     value rounded to half and widened again is that f32 value; both also
 *     as an operand of the add that sums a tied weight's gradient.
 * States of a padded param (pad-tiles) carry its {unpadded} shape.
 *
 * The grad.* results are removed; "loss" stays.  The update of every
 * parameter carries the parameter's loc.
 */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

typedef struct Opt {
    Graph      *g;
    Diag       *d;
    int         phase;   /* of the update nodes: PH_STEP when accumulating, else PH_MICRO */
} Opt;

typedef struct ParamGrad {
    Node  *p;            /* the param */
    Value *g;            /* its gradient (grad.<name>) */
    Value *G;            /* what the update reads: g, or the accumulator */
    Node  *acc;          /* grad_acc state, N > 1 */
} ParamGrad;

static Node *opt_state(Opt *o, const char *prefix, Node *p) {
    const char *name = arena_printf(o->g->arena, "%s.%s", prefix, ir_source_name(p));
    if (ir_find_source(o->g, OP_state, name)) {
        error_at(o->d, p->loc, "optimizer: a state named '%s' already exists", name);
        return NULL;
    }
    Node *s = ir_source(o->g, OP_state, name, (Type){DT_f32, p->out[0]->ty.shape}, p->loc);
    ir_set_str(o->g, s, "init", "zeros");
    const Attr *up = ir_attr(p, "unpadded");
    if (up) ir_set_ints(o->g, s, "unpadded", up->n, up->v);
    return s;
}

/* ---- mixed precision ---- */

/* Every cast of a param to another float dtype becomes a state copy of it
 * (one per param and dtype); returns the copies via copies/ncopies so the
 * update can refresh them. */
typedef struct Copy { Node *p, *state; DType dt; } Copy;

const char *amp_copy_name(Graph *g, Node *p, DType dt) { return arena_printf(g->arena, "amp.%s.%s", dtype_name[dt], ir_source_name(p)); }

Node *amp_copy_new(Graph *g, Node *p, DType dt, int at) {
    g->ip = at;
    Node *st = ir_source(g, OP_state, amp_copy_name(g, p, dt), (Type){dt, p->out[0]->ty.shape}, p->loc);
    g->ip = -1;
    ir_set_str(g, st, "init", "zeros");
    ir_set_str(g, st, "copy_of", ir_source_name(p));
    const Attr *up = ir_attr(p, "unpadded");
    if (up) ir_set_ints(g, st, "unpadded", up->n, up->v);
    return st;
}

static int half_copies(Opt *o, Copy **out) {
    Graph *g = o->g;
    Copy *c = NULL;
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) {
        Node *m = g->nodes[i];
        if (m->op != OP_cast || m->phase != PH_MICRO || m->in[0]->def->op != OP_param) continue;
        DType dt = m->out[0]->ty.dt;
        if ((dt != DT_bf16 && dt != DT_f16) || dt == m->in[0]->ty.dt) continue; /* the runtime knows these names (trainc_rt.h) */
        Node *p = m->in[0]->def, *st = NULL;
        for (int k = 0; k < n && !st; k++)
            if (c[k].p == p && c[k].dt == dt) st = c[k].state;
        if (!st) {
            if (ir_find_source(g, OP_state, amp_copy_name(g, p, dt))) continue;
            st = amp_copy_new(g, p, dt, i++); /* before the cast's users; the cast moves to i + 1 */
            c = xrealloc(c, sizeof(Copy) * (size_t)(n + 1));
            c[n++] = (Copy){p, st, dt};
        }
        ir_replace_all_uses(g, m->out[0], st->out[0]);
    }
    *out = c;
    return n;
}

/* fp16 loss scaling set up by mixed-precision: "loss" is the true loss
 * again; returns the scale state (NULL when there is none). */
static Node *amp_scale(Opt *o) {
    Graph *g = o->g;
    Node *scale = ir_find_source(g, OP_state, "amp.scale");
    Value *true_loss = ir_output(g, "amp.loss");
    if (!scale || !true_loss) return NULL;
    int k = 0;
    for (int i = 0; i < g->noutputs; i++) {
        Output *out = &g->outputs[i];
        if (out->kind == OUT_RESULT && strcmp(out->name, "amp.loss") == 0) continue;
        if (out->kind == OUT_RESULT && strcmp(out->name, "loss") == 0) out->value = true_loss;
        g->outputs[k++] = *out;
    }
    g->noutputs = k;
    return scale;
}

static Value *opt_input(Opt *o, const char *name, DType dt) {
    Node *n = ir_find_source(o->g, OP_input, name);
    if (n) {
        char b[160];
        if (n->out[0]->ty.dt != dt || n->out[0]->ty.shape.rank != 0) {
            error_at(o->d, n->loc, "optimizer: input '%s' must be %s[], not %s", name, dtype_name[dt], type_str(&n->out[0]->ty, b, sizeof b));
            return NULL;
        }
        return n->out[0];
    }
    return ir_source(o->g, OP_input, name, (Type){dt, {0}}, NOLOC)->out[0];
}

static Node *emit(Opt *o, Node *n, int phase) {
    n->phase = phase;
    if (!ir_emit(o->g, n, o->d)) die("optimizer: %s does not infer", op_name(n->op));
    return n;
}

static Value *op2(Opt *o, Op op, Value *a, Value *b, SrcLoc loc, int phase) {
    Value *in[2] = {a, b};
    return emit(o, ir_new(o->g, op, 2, in, loc), phase)->out[0];
}

static Value *konst(Opt *o, double v, Type ty, SrcLoc loc, int phase) {
    Value *k = ir_const(o->g, v, ty, loc);
    k->def->phase = phase;
    return k;
}

/* Whether weight decay applies to p. */
static bool decays(const Graph *g, const Node *p) { return g->train.decay_all || p->out[0]->ty.shape.rank >= 2; }

/* How many nodes and outputs read v (u: the graph's uses before any
 * gradient was rewritten; each rewrite touches only its own gradient's
 * values, so the counts of the others hold). */
static int readers(const Uses *u, const Value *v) { return u->of[v->id].n + u->nout_refs[v->id]; }

/* An f32 contribution v to a weight's gradient that is a half value
 * widened (under mixed precision the backward of the weight copy's cast
 * widens what reaches the copy), read only there: the same value without
 * its rounding to half, or v.  A half product becomes the product summed
 * into f32 itself, matmul {dtype=f32}; an f32 value rounded to half and
 * widened again (linear_cross_entropy's weight gradient, which autodiff
 * gives the copy's dtype) is the f32 value. */
static Value *unround(Opt *o, const Uses *u, Value *v) {
    Graph *g = o->g;
    Node *c = v->def;
    if (c->op != OP_cast || v->ty.dt != DT_f32) return v;
    Value *y = c->in[0];
    Node *m = y->def;
    if (!dtype_is_half(y->ty.dt) || readers(u, y) != 1) return v;
    if (m->op == OP_cast && m->in[0]->ty.dt == DT_f32) return m->in[0];
    if (m->op != OP_matmul) return v;
    ir_set_str(g, m, "dtype", "f32");
    if (!ir_infer(g, m, o->d)) die("optimizer: a product summed into f32 does not infer");
    return m->out[0];
}

/* A half sum y of the gradients of a weight that two products or more
 * read through one half copy (a layer applied twice, weights shared by
 * blocks): whether every term, read only there, is a half product, an
 * f32 value rounded to half, or such a sum. */
static bool half_sum_widens(const Uses *u, Value *y) {
    Node *a = y->def;
    if (a->op != OP_add || !dtype_is_half(y->ty.dt) || readers(u, y) != 1) return false;
    for (int i = 0; i < 2; i++) {
        Value *x = a->in[i];
        Node *m = x->def;
        if (!type_eq(&x->ty, &y->ty) || readers(u, x) != 1) return false;
        if (m->op == OP_matmul || (m->op == OP_cast && m->in[0]->ty.dt == DT_f32 && shape_eq(&m->in[0]->ty.shape, &y->ty.shape)))
            continue;
        if (!half_sum_widens(u, x)) return false;
    }
    return true;
}

/* The sum half_sum_widens() accepts, made in f32: its products summed into
 * f32 (matmul {dtype=f32}), its rounded values unrounded, its adds f32. */
static Value *widen_half_sum(Opt *o, Value *y) {
    Node *a = y->def;
    for (int i = 0; i < 2; i++) {
        Node *m = a->in[i]->def;
        if (m->op == OP_matmul) {
            ir_set_str(o->g, m, "dtype", "f32");
            if (!ir_infer(o->g, m, o->d)) die("optimizer: a product summed into f32 does not infer");
            a->in[i] = m->out[0];
        } else if (m->op == OP_cast) {
            a->in[i] = m->in[0];
        } else {
            a->in[i] = widen_half_sum(o, a->in[i]);
        }
    }
    if (!ir_infer(o->g, a, o->d)) die("optimizer: a sum made in f32 does not infer");
    return a->out[0];
}

/* A weight's gradient is never rounded to half: the gradient itself, or
 * each operand of the sum that makes it (a tied weight's), loses the
 * rounding unround() finds, and a half sum widened to f32 (a weight two
 * products read through one half copy) is made in f32 (the casts left
 * dead, for dce).  Returns the gradient. */
static Value *sum_in_f32(Opt *o, const Uses *u, Value *gv) {
    Graph *g = o->g;
    if (gv->def->op == OP_cast && gv->ty.dt == DT_f32 && half_sum_widens(u, gv->def->in[0])) {
        Value *r = widen_half_sum(o, gv->def->in[0]);
        ir_replace_all_uses(g, gv, r);
        if (gv->name) r->name = gv->name; /* d.<param> */
        return r;
    }
    Value *r = unround(o, u, gv);
    if (r != gv) {
        ir_replace_all_uses(g, gv, r);
        if (gv->name && (!r->name || r->def->op == OP_matmul)) r->name = gv->name; /* d.<param> */
        return r;
    }
    Node *a = gv->def;
    if (a->op == OP_add && gv->ty.dt == DT_f32)
        for (int i = 0; i < 2; i++) {
            Value *x = a->in[i];
            if (readers(u, x) != 1) continue;
            Value *f = unround(o, u, x);
            if (f != x && type_eq(&f->ty, &x->ty)) a->in[i] = f;
        }
    return gv;
}

static bool collect(Opt *o, ParamGrad **out, int *nout) {
    Graph *g = o->g;
    int np = 0;
    for (int i = 0; i < g->nnodes; i++) np += ir_is_trainable(g->nodes[i]);
    ParamGrad *pg = xcalloc((size_t)np + 1, sizeof *pg);
    Uses *u = ir_uses(g);
    int k = 0;
    for (int i = 0; i < g->nnodes; i++) {
        Node *p = g->nodes[i];
        if (!ir_is_trainable(p)) continue;
        const char *name = arena_printf(g->arena, "grad.%s", ir_source_name(p));
        Value *gv = ir_output(g, name);
        if (!gv) {
            error_at(o->d, p->loc, "optimizer: no gradient '%s' for trainable parameter '%s' (run autodiff first)", name, ir_source_name(p));
            ir_uses_free(u);
            free(pg);
            return false;
        }
        gv = sum_in_f32(o, u, gv);
        pg[k++] = (ParamGrad){.p = p, .g = gv, .G = gv};
    }
    ir_uses_free(u);
    *out = pg;
    *nout = k;
    return true;
}

/* After p's update w2: each half copy of p becomes cast(w2). */
static void refresh_copies(Opt *o, const Copy *c, int n, Node *p, Value *w2) {
    for (int k = 0; k < n; k++) {
        if (c[k].p != p) continue;
        Node *cast = ir_new(o->g, OP_cast, 1, &w2, p->loc);
        ir_set_str(o->g, cast, "dtype", dtype_name[c[k].dt]);
        ir_add_update(o->g, c[k].state, emit(o, cast, o->phase)->out[0]);
    }
}

static void drop_grad_outputs(Graph *g) {
    int k = 0;
    for (int i = 0; i < g->noutputs; i++) {
        Output *out = &g->outputs[i];
        if (out->kind == OUT_RESULT && strncmp(out->name, "grad.", 5) == 0) continue;
        g->outputs[k++] = *out;
    }
    g->noutputs = k;
}

bool pass_optimizer(Graph *g, const PassOptions *po, Diag *d) {
    const TrainConfig *tc = &g->train;
    if (!g->is_training) {
        error_at(d, graph_loc(g), "optimizer: graph '%s' has no gradients (run autodiff first)", g->name);
        return false;
    }
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i].kind == OUT_UPDATE) {
            error_at(d, g->outputs[i].target->loc, "optimizer: graph '%s' already updates '%s' (the optimizer has run)", g->name,
                     g->outputs[i].name);
            return false;
        }
    int64_t N = po && po->accum > 0 ? po->accum : tc->grad_accum;
    if (N < 1) {
        error_at(d, train_loc(&g->train, "grad_accum"), "optimizer: grad_accum must be >= 1, not %lld", (long long)N);
        return false;
    }
    bool adamw = strcmp(tc->optimizer, "adamw") == 0;
    if (!adamw && strcmp(tc->optimizer, "sgd") != 0) {
        error_at(d, NOLOC, "optimizer: unknown optimizer '%s' (expected adamw or sgd)", tc->optimizer);
        return false;
    }
    if (!adamw && tc->nesterov && !(tc->momentum > 0)) { /* (plain SGD; torch.optim.SGD refuses it too) */
        error_at(d, train_loc(&g->train, "nesterov"), "optimizer: nesterov = 1 needs momentum > 0 (Nesterov momentum without momentum is plain SGD)");
        return false;
    }
    if (ir_output(g, "grad_norm")) {
        error_at(d, graph_loc(g), "optimizer: the graph already has a result named 'grad_norm'");
        return false;
    }
    /* the header says what the graph is built for (PassOptions.accum
     * overrides the key): the runtime runs that many micro-batches, and
     * the verifier checks the accumulators against it */
    g->train.grad_accum = N;
    Opt o = {.g = g, .d = d, .phase = N > 1 ? PH_STEP : PH_MICRO};
    ParamGrad *pg;
    int np;
    if (!collect(&o, &pg, &np)) return false;
    if (np == 0 && !(po && po->quiet))
        note_at(d, g->training_loc, "optimizer: graph '%s' has no trainable parameter (all frozen?): its steps change nothing", g->name);
    g->ip = -1;
    Copy *copies = NULL;
    int ncopies = half_copies(&o, &copies);
    Node *scale = amp_scale(&o), *good = NULL, *skipped = NULL;
    if (scale) {
        good = ir_source(g, OP_state, "amp.good_steps", (Type){DT_f32, {0}}, NOLOC);
        skipped = ir_source(g, OP_state, "amp.skipped", (Type){DT_f32, {0}}, NOLOC);
        ir_set_str(g, good, "init", "zeros");
        ir_set_str(g, skipped, "init", "zeros");
    }

    /* Sources: the runtime scalars and the states, read from PH_MICRO on. */
    Value *lr = opt_input(&o, "opt.lr", DT_f32), *step = opt_input(&o, "opt.step", DT_i32);
    bool ok = lr && step;
    Node **m = xcalloc((size_t)np + 1, sizeof(Node *)), **v = xcalloc((size_t)np + 1, sizeof(Node *));
    for (int i = 0; i < np && ok; i++) {
        if (N > 1) ok &= (pg[i].acc = opt_state(&o, "grad_acc", pg[i].p)) != NULL;
        if (adamw) {
            ok &= (m[i] = opt_state(&o, "adamw.m", pg[i].p)) != NULL;
            ok &= (v[i] = opt_state(&o, "adamw.v", pg[i].p)) != NULL;
        } else if (tc->momentum > 0) {
            ok &= (m[i] = opt_state(&o, "sgd.buf", pg[i].p)) != NULL;
        }
    }
    if (!ok) goto done;

    /* PH_MICRO: accumulate. */
    for (int i = 0; i < np && N > 1; i++) {
        SrcLoc loc = pg[i].p->loc;
        Value *gi = pg[i].g;
        if (gi->ty.dt != DT_f32) {
            Node *c = ir_new(g, OP_cast, 1, &gi, loc);
            ir_set_str(g, c, "dtype", "f32");
            gi = emit(&o, c, PH_MICRO)->out[0];
        }
        Value *acc1 = op2(&o, OP_add, pg[i].acc->out[0], gi, loc, PH_MICRO);
        ir_add_update(g, pg[i].acc, acc1);
        pg[i].G = pg[i].acc->out[0]; /* read in PH_STEP: holds the sum */
    }

    /* The gradient scale: 1/N, times the clipping coefficient (and with
     * loss scaling 1/scale, the norm then being that of the scaled
     * gradients: it is also the overflow check). */
    Type f32s = {DT_f32, {0}};
    Value *inv_n = N > 1 ? konst(&o, 1.0 / (double)N, f32s, NOLOC, o.phase) : NULL, *gscale, *skip = NULL, *inv_s = NULL;
    Value *norm = NULL;
    if (tc->grad_clip > 0 || scale) {
        Value **gs = xcalloc((size_t)np + 1, sizeof(Value *));
        for (int i = 0; i < np; i++) gs[i] = pg[i].G;
        if (np > 0) {
            norm = emit(&o, ir_new(g, OP_global_norm, np, gs, NOLOC), o.phase)->out[0];
        } else {
            norm = konst(&o, 0.0, f32s, NOLOC, o.phase);
        }
        free(gs);
    }
    if (scale) {
        Value *in[4] = {scale->out[0], good->out[0], skipped->out[0], norm};
        Node *ls = ir_new(g, OP_loss_scale_update, 4, in, NOLOC);
        ir_set_int(g, ls, "window", tc->loss_scale_window);
        emit(&o, ls, o.phase);
        ir_add_update(g, scale, ls->out[0]);
        ir_add_update(g, good, ls->out[1]);
        ir_add_update(g, skipped, ls->out[2]);
        skip = ls->out[3];
        skip->name = "amp.skip";
        inv_s = op2(&o, OP_div, konst(&o, 1.0, f32s, NOLOC, o.phase), scale->out[0], NOLOC, o.phase);
        norm = op2(&o, OP_mul, norm, inv_s, NOLOC, o.phase);
    }
    if (tc->grad_clip > 0) {
        if (N > 1) norm = op2(&o, OP_mul, norm, inv_n, NOLOC, o.phase);
        norm->name = "grad_norm";
        Node *cc = ir_new(g, OP_clip_coef, 1, &norm, NOLOC);
        ir_set_float(g, cc, "max_norm", tc->grad_clip);
        gscale = emit(&o, cc, o.phase)->out[0];
        if (N > 1) gscale = op2(&o, OP_mul, gscale, inv_n, NOLOC, o.phase);
        ir_add_output(g, "grad_norm", norm);
    } else {
        gscale = N > 1 ? inv_n : konst(&o, 1.0, f32s, NOLOC, o.phase);
    }
    if (inv_s) gscale = op2(&o, OP_mul, gscale, inv_s, NOLOC, o.phase);
    gscale->name = "gscale";

    /* AdamW's bias correction counts the steps that updated (as PyTorch's
     * Adam under GradScaler, whose step() does not run on overflow):
     * step - skipped, with the count from before this step: if this step
     * updates, the two counts agree; if it is skipped nothing moves; and
     * it is at least 1 (step 1 skipped would give 0 with the new count). */
    if (adamw && skipped) {
        Value *sk = skipped->out[0];
        Node *c = ir_new(g, OP_cast, 1, &sk, NOLOC);
        ir_set_str(g, c, "dtype", "i32");
        step = op2(&o, OP_sub, step, emit(&o, c, o.phase)->out[0], NOLOC, o.phase);
        step->name = "adamw.step";
    }

    /* The update rule. */
    for (int i = 0; i < np; i++) {
        Node *p = pg[i].p;
        double wd = decays(g, p) ? tc->weight_decay : 0.0;
        if (adamw) {
            Value *in[8] = {p->out[0], pg[i].G, m[i]->out[0], v[i]->out[0], lr, step, gscale, skip};
            Node *u = ir_new(g, OP_adamw, skip ? 8 : 7, in, p->loc);
            ir_set_float(g, u, "beta1", tc->beta1);
            ir_set_float(g, u, "beta2", tc->beta2);
            ir_set_float(g, u, "eps", tc->eps);
            ir_set_float(g, u, "wd", wd);
            emit(&o, u, o.phase);
            ir_add_update(g, p, u->out[0]);
            ir_add_update(g, m[i], u->out[1]);
            ir_add_update(g, v[i], u->out[2]);
            refresh_copies(&o, copies, ncopies, p, u->out[0]);
        } else {
            /* Without momentum the buffer is never read: a zero constant stands in. */
            Value *buf = m[i] ? m[i]->out[0] : konst(&o, 0.0, (Type){DT_f32, p->out[0]->ty.shape}, p->loc, o.phase);
            Value *in[6] = {p->out[0], pg[i].G, buf, lr, gscale, skip};
            Node *u = ir_new(g, OP_sgd, skip ? 6 : 5, in, p->loc);
            ir_set_float(g, u, "momentum", tc->momentum);
            ir_set_float(g, u, "wd", wd);
            ir_set_int(g, u, "nesterov", tc->nesterov ? 1 : 0);
            emit(&o, u, o.phase);
            ir_add_update(g, p, u->out[0]);
            if (m[i]) ir_add_update(g, m[i], u->out[1]);
            refresh_copies(&o, copies, ncopies, p, u->out[0]);
        }
    }

    /* PH_STEP: reset the accumulators for the next step. */
    for (int i = 0; i < np && N > 1; i++)
        ir_add_update(g, pg[i].acc, konst(&o, 0.0, pg[i].acc->out[0]->ty, pg[i].p->loc, PH_STEP));

    drop_grad_outputs(g);
done:
    free(copies);
    free(m);
    free(v);
    free(pg);
    return ok;
}
