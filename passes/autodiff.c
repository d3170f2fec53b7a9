/* passes/autodiff.c — reverse-mode automatic differentiation.
 *
 * Turns a forward graph with a scalar "loss" result into the joint graph
 * that computes the loss and the gradient of every trainable parameter,
 * exposed as results "grad.<param name>" in parameter order.
 *
 *   1. needs_grad: a value needs a gradient when it depends on a trainable
 *      parameter (forward sweep) and the loss depends on it (backward
 *      sweep), both through ops that pass gradients (not sign or ge,
 *      not integer values).  Nothing else gets backward work.
 *   2. The seed d.loss = constant 1.0 of the loss's type.
 *   3. The forward nodes are visited in reverse; a node with a gradient on
 *      any result is differentiated by its rule (grad.c), which adds
 *      contributions to its operands' gradients (summed on fan-out).  The
 *      backward nodes are appended after the forward ones, so every
 *      forward value a rule reads is already defined.
 *
 * See docs/autodiff.md for the rules and the conventions.
 */
#include "grad.h"

#include <stdlib.h>
#include <string.h>

/* A value can carry a gradient only if it is floating point. */
static bool is_float(const Value *v) { return dtype_is_float[v->ty.dt]; }

/* Whether gradients pass from n's results to its operands (when they are
 * needed, a missing rule is reported later, at the node). */
static bool passes_grad(const Node *n) { return !op_has(n->op, OPF_SOURCE) && !grad_is_zero(n->op); }

/* needs[v] = v depends on a trainable param && loss depends on v. */
static bool *compute_needs(Graph *g, Value *loss) {
    bool *fwd = xcalloc((size_t)g->nvalues + 1, 1), *bwd = xcalloc((size_t)g->nvalues + 1, 1);
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        bool any = ir_is_trainable(n);
        for (int j = 0; j < n->nin && !any && passes_grad(n); j++) any = fwd[n->in[j]->id];
        if (any)
            for (int j = 0; j < n->nout; j++) fwd[n->out[j]->id] = is_float(n->out[j]);
    }
    bwd[loss->id] = true;
    for (int i = g->nnodes - 1; i >= 0; i--) {
        Node *n = g->nodes[i];
        bool any = false;
        for (int j = 0; j < n->nout; j++) any |= bwd[n->out[j]->id];
        if (any && passes_grad(n))
            for (int j = 0; j < n->nin; j++) bwd[n->in[j]->id] |= is_float(n->in[j]);
    }
    for (int v = 0; v < g->nvalues; v++) fwd[v] = fwd[v] && bwd[v];
    free(bwd);
    return fwd;
}

/* Gives a gradient value the hint "d.<name>" once it is complete. */
static void name_grad(Graph *g, Value *v, Value *dv) {
    if (dv && !dv->name && v->name) dv->name = arena_printf(g->arena, "d.%s", v->name);
}

static const char *value_label(Graph *g, const Value *v) {
    return v->name ? arena_printf(g->arena, "'%s'", v->name) : arena_printf(g->arena, "%%%d", v->id);
}

static bool check_loss(Graph *g, Value *loss, Diag *d) {
    char b[160];
    if (!loss) {
        error_at(d, graph_loc(g), "autodiff: graph '%s' has no \"loss\" result to differentiate", g->name);
        return false;
    }
    if (loss->ty.shape.rank != 0 || !is_float(loss)) {
        error_at(d, loss->def->loc, "autodiff: the loss must be a floating-point scalar, not %s", type_str(&loss->ty, b, sizeof b));
        return false;
    }
    return true;
}

/* Differentiates node n given the gradients of its results; false after
 * reporting a user error. */
static bool backward_node(GradCtx *c, Node *n) {
    Value *dy[8] = {0};
    bool any = false;
    if (n->nout > 8) die("autodiff: %s has %d results", op_name(n->op), n->nout);
    for (int j = 0; j < n->nout; j++) {
        dy[j] = c->grad[n->out[j]->id];
        any |= dy[j] != NULL;
    }
    if (!any) return true;
    for (int j = 0; j < n->nout; j++) {
        const char *role = grad_nondiff_result(n->op, j);
        if (dy[j] && role) {
            error_at(c->d, n->loc, "autodiff: the loss depends on the %s result of %s (%s), which is not differentiable", role,
                     op_name(n->op), value_label(c->g, n->out[j]));
            return false;
        }
        name_grad(c->g, n->out[j], dy[j]);
    }
    if (!grad_has_rule(n->op)) {
        error_at(c->d, n->loc, "autodiff: %s has no gradient rule, but the loss depends on a trainable parameter through it",
                 op_name(n->op));
        return false;
    }
    grad_node(c, n, dy);
    return true;
}

bool pass_autodiff(Graph *g, const PassOptions *po, Diag *d) {
    (void)po;
    if (g->is_training) {
        error_at(d, graph_loc(g), "autodiff: graph '%s' is already a training graph", g->name);
        return false;
    }
    if (!pm_need_forward(g, "autodiff", d)) return false;
    Value *loss = ir_output(g, "loss");
    if (!check_loss(g, loss, d)) return false;
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i].kind == OUT_RESULT && strncmp(g->outputs[i].name, "grad.", 5) == 0) {
            error_at(d, graph_loc(g), "autodiff: the forward graph already has a result named '%s'", g->outputs[i].name);
            return false;
        }

    bool *needs = compute_needs(g, loss);
    GradCtx c = {.g = g, .d = d, .needs = needs, .grad = xcalloc((size_t)g->nvalues + 1, sizeof(Value *)), .fwd = loss->def};
    g->ip = -1;
    if (needs[loss->id]) c.grad[loss->id] = ir_const(g, 1.0, loss->ty, loss->def->loc);

    bool ok = true;
    int nfwd = g->nnodes; /* backward nodes are appended after these */
    for (int i = nfwd - 1; i >= 0 && ok; i--) {
        Node *n = g->nodes[i];
        if (op_has(n->op, OPF_SOURCE)) continue;
        ok = backward_node(&c, n);
    }
    if (ok) {
        for (int i = 0; i < nfwd; i++) {
            Node *p = g->nodes[i];
            if (!ir_is_trainable(p)) continue;
            Value *w = p->out[0], *dw = c.grad[w->id];
            if (!dw) /* the loss does not depend on it */
                dw = ir_const(g, 0.0, w->ty, p->loc);
            name_grad(g, w, dw);
            ir_add_output(g, arena_printf(g->arena, "grad.%s", ir_source_name(p)), dw);
        }
        g->is_training = true;
    }
    free(c.grad);
    free(needs);
    return ok;
}
