/* passes/grad.h — the gradient rules (grad.c), as used by the autodiff pass
 * (autodiff.c) and by the tests.  Private to passes/: nothing else should
 * need it.
 *
 * A rule differentiates one forward node: given the gradients dy[i] of its
 * results (NULL for a result nothing depends on), it emits the backward
 * nodes and adds one contribution to the gradient of every operand that
 * needs one (grad_accumulate).  Rules read forward values directly: those
 * are SSA values, which is how they are "saved" for the backward pass.
 */
#ifndef TRAINC_GRAD_H
#define TRAINC_GRAD_H

#include "ir.h"

typedef struct GradCtx {
    Graph      *g;
    Diag       *d;
    const bool *needs;   /* by value id: the loss depends on it and it depends on a trainable param */
    Value     **grad;    /* by value id: the gradient accumulated so far; NULL = none yet */
    Node       *fwd;     /* the forward node being differentiated; its loc goes on what is emitted */
} GradCtx;

/* Whether op has a gradient rule (exactly the OPF_DIFF ops). */
bool grad_has_rule(Op op);
/* Whether op's gradient is zero wherever it is defined (sign, ge): no
 * gradient flows through it and none is an error. */
bool grad_is_zero(Op op);
/* The role of result res of op if it is not differentiable (layer_norm's
 * "mean" and "rstd", rms_norm's "rstd", the "lse" of attention and
 * cross_entropy), else NULL.  Backward ops may read such a result, but the
 * loss must not depend on it. */
const char *grad_nondiff_result(Op op, int res);
/* How many leading results of op are differentiable: 1 for most ops; 2
 * for the fused ops that return two tensors (add_layer_norm's y and s,
 * rope_qk's q' and k').  The results after them are statistics. */
int grad_diff_results(Op op);

/* Emits the backward nodes of n (n->op must have a rule) from dy[0..nout-1]
 * (at least one differentiable result has a gradient)
 * and accumulates the operands' gradients into c->grad.  Every emitted
 * node gets n's loc and phase PH_MICRO. */
void grad_node(GradCtx *c, Node *n, Value *const *dy);
/* Adds dv (of v's type) to the gradient of v: the first contribution is
 * kept as is, later ones are summed (fan-out). */
void grad_accumulate(GradCtx *c, Value *v, Value *dv);

#endif /* TRAINC_GRAD_H */
