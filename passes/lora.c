/* passes/lora.c — LoRA: low-rank adapters (train.lora_rank > 0).
 *
 * Every param W [out, in] that a glob of train.lora_targets matches (the
 * globs of train.freeze: fnmatch, comma-separated) gets two params,
 *
 *   A [r, in]   uniform in ±1/sqrt(in) (PEFT's kaiming_uniform(a = √5))
 *   B [out, r]  zeros
 *
 * named as PEFT names them ("h.0.attn.c_attn.weight" -> "h.0.attn.c_attn.
 * lora_A.weight"; a name without ".weight" gets ".lora_A"), and every
 * product that reads W as a linear layer's weight, y = matmul(x, W){tb=1},
 * becomes
 *
 *   y + (alpha / r) · matmul(matmul(x, A){tb=1}, B){tb=1}
 *
 * (alpha = lora_alpha, r when 0; the scale is left out when it is 1).  B is
 * zero, so the model starts as the base model, loss for loss.  Every other
 * param is frozen: the adapters are all that trains (their gradients and
 * optimizer states are all the step keeps besides the forward).  A target
 * read any other way (an embedding table, x·W without the transpose) or
 * not of rank 2 is an error at the param.
 *
 * Runs first, before liger-fusion and mixed-precision, so the adapters'
 * products are fused, cast and padded like the model's own.  The runtime
 * knows the adapters by their names (trainc_rt.h): a checkpoint without
 * them (the base model's) initialises the rest and leaves them as they
 * started.
 */
#include "ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Lora {
    int64_t r;
    double  scale;
    int     adapted, products;
} Lora;

static const char *adapter_name(Graph *g, const char *w, const char *which) {
    size_t n = strlen(w);
    if (n > 7 && strcmp(w + n - 7, ".weight") == 0) return arena_printf(g->arena, "%.*s.%s.weight", (int)(n - 7), w, which);
    return arena_printf(g->arena, "%s.%s", w, which);
}

/* One target: its adapters, and every product reading it rewritten. */
static bool adapt(Graph *g, Node *w, void *ctx, Diag *d) {
    Lora *L = ctx;
    const char *name = ir_source_name(w);
    const Type *ty = &w->out[0]->ty;
    char b[128];
    if (ty->shape.rank != 2 || !dtype_is_float[ty->dt]) {
        error_at(d, w->loc, "LoRA: target '%s' is %s; an adapter needs a float weight [out, in]", name, type_str(ty, b, sizeof b));
        return false;
    }
    int64_t out = ty->shape.d[0], in = ty->shape.d[1];
    /* a rank past the weight's smaller side adds parameters and no rank
     * (B A has rank min(out, in) at most); a huge one would make adapters
     * past the IR's sizes */
    if (L->r > (out < in ? out : in)) {
        error_at(d, train_loc(&g->train, "lora_rank"), "LoRA: lora_rank = %lld is more than target '%s' %s can use (at most min(out, in) = %lld)",
                 (long long)L->r, name, type_str(ty, b, sizeof b), (long long)(out < in ? out : in));
        note_at(d, w->loc, "'%s' is declared here", name);
        return false;
    }
    /* the products first: every use must be one */
    Uses *u = ir_uses(g);
    UseList *ul = &u->of[w->out[0]->id];
    int n = ul->n;
    Node **mm = xcalloc((size_t)(n ? n : 1), sizeof(Node *));
    bool ok = n > 0;
    if (!n) error_at(d, w->loc, "LoRA: target '%s' is not used", name);
    for (int i = 0; i < n && ok; i++) {
        Node *m = ul->u[i].node;
        if (m->op != OP_matmul || ul->u[i].idx != 1 || ir_int(m, "ta", 0) || !ir_int(m, "tb", 0)) {
            /* a cast (mixed precision's) or a fused op (liger-fusion's)
             * hides the products: the order, not the model, is wrong */
            bool late = m->op == OP_cast || (op_info[m->op].flags & OPF_FUSED);
            error_at(d, m->loc, "LoRA: '%s' is read by %s, not as a linear layer's weight (linear(x, W), a matmul {tb=1} by W)%s", name,
                     op_name(m->op), late ? ": run lora before mixed-precision and liger-fusion" : "");
            ok = false;
        }
        mm[i] = m;
    }
    ir_uses_free(u);
    if (!ok) {
        free(mm);
        return false;
    }
    const char *an = adapter_name(g, name, "lora_A"), *bn = adapter_name(g, name, "lora_B");
    for (int k = 0; k < 2 && ok; k++) {
        const char *nm = k ? bn : an;
        Node *other = ir_find_source(g, OP_param, nm);
        if (other) {
            error_at(d, other->loc, "LoRA: the adapter of '%s' would be named '%s', which another parameter is", name, nm);
            ok = false;
        }
    }
    if (!ok) {
        free(mm);
        return false;
    }
    Type ta = {ty->dt, shape_make(2, (int64_t[]){L->r, in})}, tb = {ty->dt, shape_make(2, (int64_t[]){out, L->r})};
    g->ip = ir_node_index(g, w) + 1;
    Node *A = ir_source(g, OP_param, an, ta, w->loc);
    ir_set_str(g, A, "init", "uniform");
    ir_set_float(g, A, "lo", -1.0 / sqrt((double)in));
    ir_set_float(g, A, "hi", 1.0 / sqrt((double)in));
    Node *B = ir_source(g, OP_param, bn, tb, w->loc);
    ir_set_str(g, B, "init", "zeros");
    g->ip = -1;
    for (int i = 0; i < n && ok; i++) {
        Node *m = mm[i];
        Value *y = m->out[0], *x = m->in[0];
        g->ip = ir_node_index(g, m) + 1;
        Value *xa_in[2] = {x, A->out[0]};
        Node *xa = ir_new(g, OP_matmul, 2, xa_in, m->loc);
        ir_set_int(g, xa, "ta", 0);
        ir_set_int(g, xa, "tb", 1);
        ok = ir_emit(g, xa, d) != NULL;
        Value *dl_in[2] = {ok ? xa->out[0] : NULL, B->out[0]};
        Node *dl = ok ? ir_new(g, OP_matmul, 2, dl_in, m->loc) : NULL;
        if (dl) {
            ir_set_int(g, dl, "ta", 0);
            ir_set_int(g, dl, "tb", 1);
            ok = ir_emit(g, dl, d) != NULL;
        }
        Value *delta = ok ? dl->out[0] : NULL;
        if (ok && L->scale != 1.0) {
            Value *s = ir_const(g, L->scale, (Type){y->ty.dt, {0}}, m->loc);
            delta = ir_op2(g, OP_mul, delta, s, m->loc, d);
            ok = delta != NULL;
        }
        Value *sum = ok ? ir_op2(g, OP_add, y, delta, m->loc, d) : NULL;
        g->ip = -1;
        if (!sum) {
            ok = false;
            break;
        }
        if (y->name) sum->name = y->name;
        /* every reader of y but the sum reads the sum */
        ir_replace_all_uses(g, y, sum);
        sum->def->in[0] = y;
        L->products++;
    }
    free(mm);
    L->adapted++;
    return ok;
}

bool pass_lora(Graph *g, const PassOptions *po, Diag *d) {
    Lora L = {g->train.lora_rank, 1.0, 0, 0};
    const char *targets = g->train.lora_targets ? g->train.lora_targets : "";
    if (L.r <= 0) {
        if (L.r < 0) error_at(d, train_loc(&g->train, "lora_rank"), "LoRA: lora_rank = %lld; a rank is positive (0: no LoRA)", (long long)L.r);
        else if (targets[0] || g->train.lora_alpha != 0)
            error_at(d, train_loc(&g->train, targets[0] ? "lora_targets" : "lora_alpha"), "LoRA: lora_targets or lora_alpha is set but lora_rank is 0 (set lora_rank to adapt the targets)");
        return L.r == 0 && !targets[0] && g->train.lora_alpha == 0;
    }
    if (g->is_training) {
        error_at(d, graph_loc(g), "LoRA: graph '%s' is already a training graph; LoRA adapts a forward graph", g->name);
        return false;
    }
    if (!targets[0]) {
        error_at(d, train_loc(&g->train, "lora_rank"), "LoRA: lora_rank = %lld needs lora_targets, the globs of the weights to adapt (e.g. \"*.attn.c_attn.weight\")",
                 (long long)L.r);
        return false;
    }
    double alpha = g->train.lora_alpha != 0 ? g->train.lora_alpha : (double)L.r;
    L.scale = alpha / (double)L.r;
    /* the base model's params, before the adapters exist */
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->op == OP_param) ir_set_int(g, g->nodes[i], "frozen", 1);
    if (!pm_match_params(g, "lora_targets", targets, adapt, &L, d)) return false;
    if (!po->quiet)
        note_at(d, NOLOC, "LoRA: %d weight%s adapted (rank %lld, scale %g), %d product%s; every other parameter frozen", L.adapted,
                L.adapted == 1 ? "" : "s", (long long)L.r, L.scale, L.products, L.products == 1 ? "" : "s");
    return true;
}
