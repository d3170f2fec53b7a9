/* tests/grad/test_rules.c — the gradient-rule table against the op table,
 * and the errors autodiff reports (located at the offending node). */
#include "grad.h"
#include "harness.h"

#include <stdlib.h>
#include <string.h>

/* Every OPF_DIFF op has a rule and no other op does; the results of a
 * differentiable op after its grad_diff_results() differentiable ones are
 * the non-differentiable statistics. */
static void test_table(void) {
    int ndiff = 0;
    for (int op = 0; op < OP__COUNT; op++) {
        bool diff = op_has(op, OPF_DIFF);
        ndiff += diff;
        EXPECT(grad_has_rule(op) == diff, "%s: OPF_DIFF is %d but grad_has_rule is %d", op_name(op), diff, grad_has_rule(op));
        EXPECT(!grad_nondiff_result(op, 0), "%s: result 1 must be differentiable", op_name(op));
        int nd = grad_diff_results(op);
        EXPECT(nd >= 1 && nd <= op_info[op].nout, "%s: %d differentiable results of %d", op_name(op), nd, op_info[op].nout);
        for (int r = 1; r < op_info[op].nout; r++) {
            if (diff && r >= nd) EXPECT(grad_nondiff_result(op, r), "%s: result %d should be marked non-differentiable", op_name(op), r + 1);
            if (r < nd) EXPECT(!grad_nondiff_result(op, r), "%s: result %d is differentiable", op_name(op), r + 1);
        }
        EXPECT(!(grad_is_zero(op) && diff), "%s: both zero-gradient and differentiable", op_name(op));
    }
    printf("rules: %d differentiable ops, each with a rule\n", ndiff);
}

/* Runs autodiff on t's graph, expecting failure with msg at line `line`. */
static void expect_error(GT *t, const char *what, const char *msg, int line) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    Diag d;
    diag_init(&d, f);
    PassOptions po = {0};
    bool ok = pass_autodiff(t->g, &po, &d);
    fclose(f);
    EXPECT(!ok && d.nerrors > 0, "%s: autodiff should fail", what);
    EXPECT(buf && strstr(buf, msg), "%s: expected \"%s\" in: %s", what, msg, buf ? buf : "");
    if (line > 0) {
        char loc[64];
        snprintf(loc, sizeof loc, "test.model:%d:", line);
        EXPECT(buf && strstr(buf, loc), "%s: expected the error at %s in: %s", what, loc, buf ? buf : "");
    }
    printf("error %s: %s", what, buf && *buf ? buf : "(none)\n");
    diag_free(&d);
    free(buf);
}

static void test_errors(void) {
    /* The loss depends on cross_entropy's lse. */
    {
        static const double tg[2] = {1, 2};
        GT *t = gt_new("lse");
        Value *in[2] = {gt_param(t, "logits", 2, D(2, 4)), gt_input(t, "targets", DT_i32, 1, D(2), tg)};
        Node *ce = gt_node(t, OP_cross_entropy, 2, in);
        gt_emit(t, ce);
        Value *z = gt_op1(t, OP_sum, ce->out[1]);
        gt_loss(t, gt_op2(t, OP_add, ce->out[0], z));
        expect_error(t, "lse in the loss", "not differentiable", ce->loc.line);
        gt_free(t);
    }
    /* The loss depends on layer_norm's rstd. */
    {
        GT *t = gt_new("rstd");
        Value *in[3] = {gt_param(t, "x", 2, D(2, 4)), gt_param(t, "w", 1, D(4)), gt_param(t, "b", 1, D(4))};
        Node *ln = gt_node(t, OP_layer_norm, 3, in);
        gt_emit(t, ln);
        gt_loss(t, gt_op1(t, OP_sum, gt_op2(t, OP_mul, ln->out[0], gt_reshape(t, ln->out[2], 2, D(2, 1)))));
        expect_error(t, "rstd in the loss", "not differentiable", ln->loc.line);
        gt_free(t);
    }
    /* A non-differentiable op (not zero-gradient) between a param and the loss. */
    {
        GT *t = gt_new("nograd");
        Value *x = gt_param(t, "x", 1, D(4));
        Value *y = gt_op1(t, OP_softmax, x);
        Value *in[2] = {x, y};
        Node *sg = gt_node(t, OP_softmax_grad, 2, in);
        ir_set_int(t->g, sg, "axis", 0);
        gt_loss(t, gt_op1(t, OP_sum, gt_emit(t, sg)));
        expect_error(t, "an op without a rule", "no gradient rule", sg->loc.line);
        gt_free(t);
    }
    /* No loss; a loss that is not a scalar; a graph that is already a training graph. */
    {
        GT *t = gt_new("noloss");
        ir_add_output(t->g, "out", gt_op1(t, OP_exp, gt_param(t, "x", 1, D(4))));
        expect_error(t, "no loss", "no \"loss\" result", 0);
        gt_free(t);
    }
    {
        GT *t = gt_new("vector");
        Value *y = gt_op1(t, OP_exp, gt_param(t, "x", 1, D(4)));
        gt_loss(t, y);
        expect_error(t, "non-scalar loss", "floating-point scalar", y->def->loc.line);
        gt_free(t);
    }
    {
        GT *t = gt_new("twice");
        gt_loss(t, gt_op1(t, OP_sum, gt_param(t, "x", 1, D(4))));
        PassOptions po = {0};
        EXPECT(pass_autodiff(t->g, &po, &t->d), "first autodiff should succeed");
        expect_error(t, "second autodiff", "already a training graph", 0);
        gt_free(t);
    }
}

int main(void) {
    test_table();
    test_errors();
    printf("%s\n", gt_fails ? "FAILED" : "ok");
    return gt_fails ? 1 : 0;
}
