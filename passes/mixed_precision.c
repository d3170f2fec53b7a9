/* passes/mixed_precision.c — mixed-precision: what autocast and GradScaler
 * do in PyTorch, decided by the compiler (docs/passes.md).  Runs on the
 * forward graph, before autodiff; the precision is --precision or
 * train.precision.  On a graph that shows it already ran
 * (pm_mixed_precision_of) the same precision changes nothing and another
 * one is an error; bf16 and fp16 matrix products are never mixed.
 *
 * bf16 / fp16 (H below).  Every op is one of three kinds:
 *   - matrix ops (matmul, attention, linear_cross_entropy): their float
 *     operands are cast to H; they accumulate in f32 (the interpreter in
 *     double) and return H (attention's lse and the loss stay f32);
 *   - flexible ops (pointwise ops, swiglu/geglu, dropout, rope, rope_qk,
 *     shape ops): run in H when an operand is already H and every other
 *     float operand is H, a parameter or a constant (which are then cast);
 *     else in f32, with their H operands cast up;
 *   - everything else (reductions, softmax, norms, cross-entropy, the loss,
 *     embedding): f32, H operands cast up.
 * So values between two matrix ops stay H, which is where the saved
 * activations shrink; the residual stream, the statistics and the loss are
 * f32.  One cast per value and dtype (memoised); a param gets one cast
 * however often it is used, and the optimizer pass turns that cast into a
 * persistent half-precision copy refreshed after each update (parameters
 * stay f32 master weights).  Every graph result keeps its dtype (the loss,
 * a sampling graph's logits for trn_predict and --sample: converted back
 * where the rewrite left them in H; docs/passes.md).
 *
 * fp16 also scales the loss: state amp.scale (train.loss_scale) and
 *   output "loss" = loss * amp.scale   (what autodiff differentiates)
 *   output "amp.loss" = loss           (the optimizer makes it "loss" again)
 * and the optimizer pass checks, unscales and skips (see optimizer.c).
 *
 * tf32: storage stays f32; every matmul gets {tf32=1}, which lets a GPU
 * backend use TF32 tensor cores.  The CPU backend and the interpreter
 * compute such a matmul exactly as any f32 matmul.
 */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

typedef enum { K_MATRIX, K_FLEX, K_F32, K_OPAQUE } Kind;

typedef struct Mp {
    Graph *g;
    Diag  *d;
    DType  h;
    Value **memo[2];      /* value id -> its cast to H (0) / to f32 (1) */
    int    nmemo;
} Mp;

static Kind kind_of(Op op) {
    switch (op) {
    case OP_matmul:
    case OP_attention:
    case OP_linear_cross_entropy: return K_MATRIX;
    case OP_cast: return K_OPAQUE;
    case OP_dropout:
    case OP_rope:
    case OP_rope_qk:
    case OP_reshape:
    case OP_permute:
    case OP_broadcast:
    case OP_slice:
    case OP_pad:
    case OP_concat: return K_FLEX;
    default: return op_has(op, OPF_POINTWISE) ? K_FLEX : K_F32;
    }
}

/* The operands whose dtype the policy decides: the float ones, except
 * rope_qk's tables (read in any float dtype). */
static bool decided(const Node *n, int i) {
    if (!dtype_is_float[n->in[i]->ty.dt]) return false;
    if (n->op == OP_rope_qk && i >= 2) return false;
    return true;
}

static Value **memo_slot(Mp *M, Value *v, DType to) {
    int want = M->g->nvalues + 1;
    if (want > M->nmemo) {
        for (int k = 0; k < 2; k++) {
            M->memo[k] = xrealloc(M->memo[k], sizeof(Value *) * (size_t)want);
            memset(M->memo[k] + M->nmemo, 0, sizeof(Value *) * (size_t)(want - M->nmemo));
        }
        M->nmemo = want;
    }
    return &M->memo[to == DT_f32 ? 1 : 0][v->id];
}

/* v in dtype `to`, made before node `at` (NULL: at the end): a constant
 * is re-made in `to`, anything else gets a cast (one per value and dtype). */
static Value *convert(Mp *M, Value *v, DType to, Node *at) {
    if (v->ty.dt == to) return v;
    Value **slot = memo_slot(M, v, to);
    if (*slot) return *slot;
    Graph *g = M->g;
    g->ip = ir_node_index(g, at);
    if (v->def->op == OP_constant) {
        *slot = ir_const(g, ir_float(v->def, "value", 0), (Type){to, v->ty.shape}, v->def->loc);
    } else {
        Node *c = ir_new(g, OP_cast, 1, &v, v->def->op == OP_param && at ? at->loc : v->def->loc);
        ir_set_str(g, c, "dtype", dtype_name[to]);
        if (!ir_emit(g, c, M->d)) die("mixed-precision: a cast does not infer");
        *slot = c->out[0];
    }
    g->ip = -1;
    return *slot;
}

/* A value that joins H work for the price of a cast: a param or a constant. */
static bool cheap(const Value *v) { return v->def->op == OP_param || v->def->op == OP_constant; }

static bool rewrite(Mp *M, Node *n) {
    Kind k = kind_of(n->op);
    if (k == K_OPAQUE) return ir_infer(M->g, n, M->d);
    bool to_h = k == K_MATRIX;
    if (k == K_FLEX) {
        bool any_h = false, all_ok = true;
        for (int i = 0; i < n->nin; i++) {
            if (!decided(n, i)) continue;
            any_h |= n->in[i]->ty.dt == M->h;
            all_ok &= n->in[i]->ty.dt == M->h || cheap(n->in[i]);
        }
        to_h = any_h && all_ok;
    }
    for (int i = 0; i < n->nin; i++) {
        if (!decided(n, i)) continue;
        DType want = to_h ? M->h : DT_f32;
        /* only f32 and H are in play; other float dtypes (f64) are left alone */
        if (n->in[i]->ty.dt != DT_f32 && n->in[i]->ty.dt != M->h) continue;
        n->in[i] = convert(M, n->in[i], want, n);
    }
    return ir_infer(M->g, n, M->d);
}

/* fp16: loss * amp.scale becomes the "loss" that autodiff differentiates;
 * the true loss is "amp.loss" until the optimizer pass swaps them back. */
static bool scale_loss(Mp *M) {
    Graph *g = M->g;
    Value *loss = ir_output(g, "loss");
    if (!loss) return true;
    if (ir_find_source(g, OP_state, "amp.scale") || ir_output(g, "amp.loss")) {
        error_at(M->d, NOLOC, "mixed-precision: the graph already has loss scaling (state amp.scale)");
        return false;
    }
    Node *s = ir_source(g, OP_state, "amp.scale", (Type){DT_f32, {0}}, NOLOC);
    ir_set_str(g, s, "init", "constant");
    ir_set_float(g, s, "value", g->train.loss_scale);
    Value *l32 = loss->ty.dt == DT_f32 ? loss : convert(M, loss, DT_f32, NULL);
    Value *scaled = ir_op2(g, OP_mul, l32, s->out[0], loss->def->loc, M->d);
    if (!scaled) return false;
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i].kind == OUT_RESULT && strcmp(g->outputs[i].name, "loss") == 0) g->outputs[i].value = scaled;
    ir_add_output(g, "amp.loss", loss);
    return true;
}

/* An eval or sampling graph's frozen f32 params stored in H where the
 * training graph (tg) stores them in H: their casts to H read them as
 * they are, any other reader through a cast to f32 (of the rounded
 * value, which is what the buffer holds). */
static bool follow_frozen_half(Mp *M, const Graph *tg) {
    Graph *g = M->g;
    Uses *u = ir_uses(g);
    for (int i = 0; i < g->nnodes; i++) { /* (the casts made on the way are no params) */
        Node *p = g->nodes[i];
        Value *v = p->out[0];
        if (p->op != OP_param || v->ty.dt != DT_f32 || u->nout_refs[v->id]) continue;
        Node *tp = ir_find_source((Graph *)tg, OP_param, ir_source_name(p));
        if (!tp || tp->out[0]->ty.dt != M->h) continue;
        UseList *ul = &u->of[v->id];
        if (ul->n == 0) continue;
        v->ty.dt = M->h;
        Value *up = NULL; /* v in f32, made before v's first reader */
        for (int k = 0; k < ul->n; k++) {
            Node *r = ul->u[k].node;
            if (r->op == OP_cast && r->out[0]->ty.dt == M->h) {
                ir_replace_all_uses(g, r->out[0], v); /* the cast: dead, for dce */
                continue;
            }
            if (!up) up = convert(M, v, DT_f32, g->nodes[ir_node_index(g, p) + 1]);
            r->in[ul->u[k].idx] = up;
        }
    }
    ir_uses_free(u);
    return true;
}

/* A frozen f32 param that only its cast to H reads (matrix products) is
 * stored in H: no f32 master, no copy, half the bytes (a LoRA model's
 * frozen base).  It starts as its f32 value rounded to H (the runtime and
 * the interpreter round half tensors' initial values through f32), which
 * is what the copy of an f32 master would hold, and a checkpoint's f32
 * values load into it rounded the same way: the results do not change.
 * Dead code is removed first (quietly: the pipeline's dce warns): the
 * eval and sampling graphs come without it, and a param read only by dead
 * products, or by a dead reader that is not a cast, must get the same
 * dtype in every graph, whose schedules share its buffer.  An eval or
 * sampling graph (PassOptions.train_graph) follows the training graph's
 * choice instead, whatever reads the param in it: the readers that fused
 * differently there (an output that graph drops) may be other ops. */
static bool store_frozen_half(Mp *M, const PassOptions *po) {
    Graph *g = M->g;
    if (po && po->train_graph) return follow_frozen_half(M, po->train_graph);
    PassOptions quiet = po ? *po : (PassOptions){0};
    quiet.quiet = true;
    if (!pass_dce(g, &quiet, M->d)) return false;
    Uses *u = ir_uses(g);
    for (int i = 0; i < g->nnodes; i++) {
        Node *p = g->nodes[i];
        Value *v = p->out[0];
        if (p->op != OP_param || ir_is_trainable(p) || v->ty.dt != DT_f32 || u->nout_refs[v->id]) continue;
        UseList *ul = &u->of[v->id];
        bool casts = ul->n > 0;
        for (int k = 0; k < ul->n && casts; k++) casts = ul->u[k].node->op == OP_cast && ul->u[k].node->out[0]->ty.dt == M->h;
        if (!casts) continue;
        v->ty.dt = M->h;
        for (int k = 0; k < ul->n; k++) ir_replace_all_uses(g, ul->u[k].node->out[0], v); /* the casts: dead, for dce */
    }
    ir_uses_free(u);
    return true;
}

bool pass_mixed_precision(Graph *g, const PassOptions *po, Diag *d) {
    const char *prec = pm_precision(g, po);
    if (g->is_training) {
        error_at(d, graph_loc(g), "mixed-precision: graph '%s' is already a training graph (run it before autodiff)", g->name);
        return false;
    }
    if (!pm_need_forward(g, "mixed-precision", d)) return false;
    /* a second run: the same precision changes nothing; another one would
     * leave the first one's casts (or marks) beside its own, and the
     * header naming only the second */
    const char *done = pm_mixed_precision_of(g);
    if (done && strcmp(done, prec) != 0) {
        /* (prec is --precision's: the header's is done) */
        error_at(d, graph_loc(g), "mixed-precision: graph '%s' already has %s mixed precision; it cannot take %s as well (run mixed-precision once, with one precision)",
                 g->name, done, prec);
        return false;
    }
    if (done) return true;
    /* the other half type's matrix products (an earlier bf16 run, which
     * leaves no other sign, or the model's own casts): one graph does not
     * mix bf16 and fp16 */
    DType other = strcmp(prec, "bf16") == 0 ? DT_f16 : strcmp(prec, "fp16") == 0 ? DT_bf16 : DT__COUNT;
    for (int i = 0; other != DT__COUNT && i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (n->op != OP_matmul && n->op != OP_attention && n->op != OP_linear_cross_entropy) continue;
        for (int j = 0; j < n->nin; j++)
            if (n->in[j]->ty.dt == other) {
                error_at(d, n->loc, "mixed-precision: graph '%s' already has %s matrix products (an earlier mixed-precision run, or the model's casts); %s would mix the two",
                         g->name, dtype_name[other], prec);
                return false;
            }
    }
    DType h;
    if (strcmp(prec, "fp32") == 0) return true;
    if (strcmp(prec, "tf32") == 0) {
        for (int i = 0; i < g->nnodes; i++)
            if (g->nodes[i]->op == OP_matmul && g->nodes[i]->in[0]->ty.dt == DT_f32) ir_set_int(g, g->nodes[i], "tf32", 1);
        g->train.precision = "tf32";
        return true;
    } else if (strcmp(prec, "bf16") == 0) {
        h = DT_bf16;
    } else if (strcmp(prec, "fp16") == 0) {
        h = DT_f16;
        if (!pm_target_has_fused_ops(po)) {
            error_at(d, po && po->precision ? NOLOC : train_loc(&g->train, "precision"),
                     "mixed-precision: fp16 loss scaling is not available on the %s target yet (docs/passes.md)", po->target);
            return false;
        }
    } else {
        error_at(d, NOLOC, "mixed-precision: unknown precision '%s' (expected fp32, tf32, bf16 or fp16)", prec);
        return false;
    }
    Mp M = {.g = g, .d = d, .h = h};
    /* the original result types: a result the runtime reads back (the
     * loss, a sampling graph's logits for trn_predict) keeps its dtype
     * whatever the precision */
    Type *out_ty = xcalloc((size_t)g->noutputs + 1, sizeof(Type));
    for (int i = 0; i < g->noutputs; i++) out_ty[i] = g->outputs[i].value->ty;
    int nn = g->nnodes;
    Node **snap = xmalloc(sizeof(Node *) * (size_t)(nn ? nn : 1));
    if (nn) memcpy(snap, g->nodes, sizeof(Node *) * (size_t)nn);
    bool ok = true;
    for (int i = 0; i < nn && ok; i++)
        if (!op_has(snap[i]->op, OPF_SOURCE)) ok = rewrite(&M, snap[i]);
    free(snap);
    for (int i = 0; i < g->noutputs && ok; i++) {
        Output *o = &g->outputs[i];
        if (o->kind == OUT_RESULT && o->value->ty.dt != out_ty[i].dt)
            o->value = convert(&M, o->value, out_ty[i].dt, NULL);
    }
    free(out_ty);
    if (ok) ok = store_frozen_half(&M, po);
    g->train.precision = h == DT_bf16 ? "bf16" : "fp16";
    if (ok && h == DT_f16 && !(po && po->forward_only)) ok = scale_loss(&M);
    free(M.memo[0]);
    free(M.memo[1]);
    return ok && d->nerrors == 0;
}
