/* tests/grad/test_blocks.c — gradient checks of whole blocks (MLP, causal
 * self-attention, a Llama-style transformer block with GQA, RoPE, RMSNorm
 * and SwiGLU, a tiny LM with tied embeddings), and of the hard cases of
 * autodiff: fan-out, tied and frozen params, integer inputs, zero-gradient
 * ops, unused params; plus structural checks (what is and is not emitted,
 * names, locs). */
#include "harness.h"

#include <stdlib.h>
#include <string.h>


static void check(GT *t, const char *label, int sample) {
    GTResult r = gt_check(t, label, sample);
    EXPECT(r.ok && r.worst < GT_TOL, "%s: worst %.3g, ok %d", label, r.worst, r.ok);
}

/* ---- building blocks ---- */

static Value *linear(GT *t, Value *x, Value *w, Value *b) {
    Value *y = gt_matmul(t, x, w, 0, 0);
    return b ? gt_op2(t, OP_add, y, b) : y;
}

static Value *layer_norm(GT *t, Value *x, Value *w, Value *b) {
    Value *in[3] = {x, w, b};
    return gt_emit(t, gt_node(t, OP_layer_norm, 3, in));
}

static Value *rms_norm(GT *t, Value *x, Value *w) {
    Value *in[2] = {x, w};
    return gt_emit(t, gt_node(t, OP_rms_norm, 2, in));
}

static Value *gelu(GT *t, Value *x) {
    Node *n = gt_node(t, OP_gelu, 1, &x);
    ir_set_int(t->g, n, "approx", 1);
    return gt_emit(t, n);
}

static Value *attention(GT *t, Value *q, Value *k, Value *v) {
    Value *in[3] = {q, k, v};
    Node *n = gt_node(t, OP_attention, 3, in);
    ir_set_int(t->g, n, "causal", 1);
    return gt_emit(t, n);
}

static Value *rope(GT *t, Value *x) {
    Node *n = gt_node(t, OP_rope, 1, &x);
    ir_set_float(t->g, n, "theta", 10000.0);
    return gt_emit(t, n);
}

/* [B,T,H*D] -> [B,H,T,D] */
static Value *split_heads(GT *t, Value *x, int64_t H, int64_t Dh) {
    const Shape *s = &x->ty.shape;
    Value *r = gt_reshape(t, x, 4, D(s->d[0], s->d[1], H, Dh));
    return gt_permute(t, r, 4, D(0, 2, 1, 3));
}

/* [B,H,T,D] -> [B,T,H*D] */
static Value *merge_heads(GT *t, Value *x) {
    const Shape *s = &x->ty.shape;
    Value *p = gt_permute(t, x, 4, D(0, 2, 1, 3));
    return gt_reshape(t, p, 3, D(s->d[0], s->d[2], s->d[1] * s->d[3]));
}

/* x [4,8]: x + W2 gelu(W1 ln(x) + b1) + b2 */
static Value *mlp_block(GT *t, Value *x) {
    Value *h = layer_norm(t, x, PF(t, "ln.w", FILL_UNIFORM, 0.5, 1.5, 8), P(t, "ln.b", 8));
    h = gelu(t, linear(t, h, P(t, "fc1.w", 8, 16), P(t, "fc1.b", 16)));
    return gt_op2(t, OP_add, x, linear(t, h, P(t, "fc2.w", 16, 8), P(t, "fc2.b", 8)));
}

/* GPT-2 style: x [B,T,C=8], 2 heads. */
static Value *attn_block(GT *t, Value *x) {
    Value *h = layer_norm(t, x, PF(t, "ln1.w", FILL_UNIFORM, 0.5, 1.5, 8), P(t, "ln1.b", 8));
    Value *qkv = linear(t, h, P(t, "attn.qkv.w", 8, 24), P(t, "attn.qkv.b", 24));
    Value *q = split_heads(t, gt_slice(t, qkv, 2, 0, 8), 2, 4);
    Value *k = split_heads(t, gt_slice(t, qkv, 2, 8, 16), 2, 4);
    Value *v = split_heads(t, gt_slice(t, qkv, 2, 16, 24), 2, 4);
    Value *o = merge_heads(t, attention(t, q, k, v));
    return gt_op2(t, OP_add, x, linear(t, o, P(t, "attn.proj.w", 8, 8), P(t, "attn.proj.b", 8)));
}

/* Llama style: x [B,T,C=16], 4 query heads over 2 kv heads (GQA), RoPE,
 * RMSNorm, SwiGLU; `seed` non-NULL adds dropout after attention. */
static Value *llama_block(GT *t, Value *x, Value *seed) {
    Value *h = rms_norm(t, x, PF(t, "attn_norm.w", FILL_UNIFORM, 0.5, 1.5, 16));
    Value *q = rope(t, split_heads(t, linear(t, h, P(t, "wq", 16, 16), NULL), 4, 4));
    Value *k = rope(t, split_heads(t, linear(t, h, P(t, "wk", 16, 8), NULL), 2, 4));
    Value *v = split_heads(t, linear(t, h, P(t, "wv", 16, 8), NULL), 2, 4);
    Value *o = linear(t, merge_heads(t, attention(t, q, k, v)), P(t, "wo", 16, 16), NULL);
    if (seed) {
        Value *in[2] = {o, seed};
        Node *n = gt_node(t, OP_dropout, 2, in);
        ir_set_float(t->g, n, "p", 0.1);
        ir_set_int(t->g, n, "stream", 3);
        o = gt_emit(t, n);
    }
    Value *x2 = gt_op2(t, OP_add, x, o);
    Value *h2 = rms_norm(t, x2, PF(t, "mlp_norm.w", FILL_UNIFORM, 0.5, 1.5, 16));
    Value *gate = gt_op1(t, OP_silu, linear(t, h2, P(t, "w_gate", 16, 24), NULL));
    Value *up = linear(t, h2, P(t, "w_up", 16, 24), NULL);
    return gt_op2(t, OP_add, x2, linear(t, gt_op2(t, OP_mul, gate, up), P(t, "w_down", 24, 16), NULL));
}

/* ---- the block checks ---- */

static void test_mlp(void) {
    GT *t = gt_new("mlp");
    gt_loss_linear(t, mlp_block(t, P(t, "x", 4, 8)));
    check(t, "MLP block", 64);
    gt_free(t);
}

static void test_attn(void) {
    GT *t = gt_new("attn");
    gt_loss_linear(t, attn_block(t, P(t, "x", 2, 5, 8)));
    check(t, "causal self-attention block", 64);
    gt_free(t);
}

static void test_llama(void) {
    GT *t = gt_new("llama");
    gt_loss_linear(t, llama_block(t, P(t, "x", 2, 6, 16), NULL));
    check(t, "transformer block (GQA, RoPE, RMSNorm, SwiGLU)", 64);
    gt_free(t);
}

/* Tokens -> tied embedding -> block (with dropout) -> head = wte^T ->
 * cross-entropy.  wte gets two contributions: embedding_grad and the
 * head's matmul. */
static void test_tiny_lm(void) {
    static const double tok[12] = {1, 4, 4, 9, 0, 2, 7, 7, 3, 10, 1, 5};
    static const double tgt[12] = {4, 4, 9, 0, 2, -100, 7, 3, 10, 1, 5, 5};
    static const double seed[1] = {99};
    GT *t = gt_new("tiny_lm");
    Value *wte = PF(t, "wte", FILL_UNIFORM, -0.5, 0.5, 11, 16);
    Value *x = gt_op2(t, OP_embedding, wte, gt_input(t, "tokens", DT_i32, 2, D(2, 6), tok));
    x = llama_block(t, x, gt_input(t, "seed", DT_i32, 0, NULL, seed));
    Value *h = rms_norm(t, x, PF(t, "norm.w", FILL_UNIFORM, 0.5, 1.5, 16));
    Value *logits = gt_matmul(t, h, wte, 0, 1);
    Value *in[2] = {logits, gt_input(t, "targets", DT_i32, 2, D(2, 6), tgt)};
    gt_loss(t, gt_emit(t, gt_node(t, OP_cross_entropy, 2, in)));
    check(t, "tiny LM, tied embedding and head", 64);

    /* Structure: wte's gradient is the sum of the two contributions. */
    Graph *tg = ir_clone(t->g);
    PassOptions po = {0};
    EXPECT(pass_autodiff(tg, &po, &t->d), "autodiff");
    Value *dw = ir_output(tg, "grad.wte");
    EXPECT(dw && dw->def->op == OP_add, "grad.wte should be an add of the two uses, is %s", dw ? op_name(dw->def->op) : "none");
    if (dw && dw->def->op == OP_add) {
        Op a = dw->def->in[0]->def->op, b = dw->def->in[1]->def->op;
        EXPECT((a == OP_embedding_grad) != (b == OP_embedding_grad), "one contribution is embedding_grad (%s, %s)", op_name(a), op_name(b));
        EXPECT(dw->def->loc.line == wte->def->loc.line, "the accumulation carries the param's loc");
    }
    int ndrop = 0;
    for (int i = 0; i < tg->nnodes; i++) ndrop += tg->nodes[i]->op == OP_dropout;
    EXPECT(ndrop == 2, "dropout forward and backward (mask regenerated): %d dropout nodes", ndrop);
    ir_graph_free(tg);
    gt_free(t);
}

/* ---- the hard cases ---- */

static int count_op(Graph *g, int from, Op op) {
    int k = 0;
    for (int i = from; i < g->nnodes; i++) k += g->nodes[i]->op == op;
    return k;
}

/* x is used by exp, by tanh and twice by one mul: four contributions. */
static void test_fanout(void) {
    GT *t = gt_new("fanout");
    Value *x = P(t, "x", 3, 4);
    Value *y = gt_op2(t, OP_add, gt_op2(t, OP_add, gt_op1(t, OP_exp, x), gt_op2(t, OP_mul, x, x)), gt_op1(t, OP_tanh, x));
    gt_loss_linear(t, y);
    check(t, "fan-out", 64);
    Graph *tg = ir_clone(t->g);
    PassOptions po = {0};
    int nf = tg->nnodes;
    pass_autodiff(tg, &po, &t->d);
    EXPECT(count_op(tg, nf, OP_add) == 3, "three adds sum four contributions, got %d", count_op(tg, nf, OP_add));
    ir_graph_free(tg);
    gt_free(t);
}

/* max over ties of one value: x [2,1] broadcast to [2,3], and x twice in
 * a concat, reduced by max: every element of a row ties, and d max / dx
 * is 1 (the ties share dy; each taking the whole dy gave 3 and 2). */
static void test_max_ties(void) {
    GT *t = gt_new("max ties");
    Value *x = P(t, "x", 2, 1);
    Node *b = gt_node(t, OP_broadcast, 1, &x);
    ir_set_ints(t->g, b, "shape", 2, D(2, 3));
    Node *m = gt_node(t, OP_max, 1, (Value *[]){gt_emit(t, b)});
    ir_set_ints(t->g, m, "axes", 1, D(1));
    ir_set_int(t->g, m, "keepdim", 0);
    Value *w = P(t, "w", 2, 3);
    Node *c = gt_node(t, OP_concat, 2, (Value *[]){w, w});
    ir_set_int(t->g, c, "axis", 1);
    Node *m2 = gt_node(t, OP_max, 1, (Value *[]){gt_emit(t, c)});
    ir_set_ints(t->g, m2, "axes", 1, D(1));
    ir_set_int(t->g, m2, "keepdim", 1);
    gt_loss_linear(t, gt_op2(t, OP_add, gt_emit(t, m), gt_reshape(t, gt_emit(t, m2), 1, D(2))));
    check(t, "max over ties", 64);
    gt_free(t);
}

/* Frozen params and float inputs get no gradient, and nothing that only
 * leads to them is emitted. */
static void test_frozen(void) {
    static const double xin[32] = {0.3, -1.2, 0.5, 0.9, -0.1, 0.7, -0.8, 0.2, 1.1, -0.4, 0.6, -0.9, 0.05, 0.4, -0.6, 0.8,
                                   -0.3, 1.2, -0.5, -0.9, 0.1, -0.7, 0.8, -0.2, -1.1, 0.4, -0.6, 0.9, -0.05, -0.4, 0.6, -0.8};
    /* x input, fc1 frozen: only fc2 trains, so one backward matmul (dW2),
     * no gelu_grad, no layer_norm_grad. */
    GT *t = gt_new("frozen");
    Value *x = gt_input(t, "x", DT_f32, 2, D(4, 8), xin);
    Value *w1 = P(t, "fc1.w", 8, 16), *b1 = P(t, "fc1.b", 16), *w2 = P(t, "fc2.w", 16, 8), *b2 = P(t, "fc2.b", 8);
    gt_freeze(t, w1);
    gt_freeze(t, b1);
    Value *h = gelu(t, linear(t, x, w1, b1));
    gt_loss_linear(t, linear(t, h, w2, b2));
    check(t, "frozen params (fc1 frozen, input x)", 64);
    Graph *tg = ir_clone(t->g);
    PassOptions po = {0};
    int nf = tg->nnodes;
    pass_autodiff(tg, &po, &t->d);
    EXPECT(!ir_output(tg, "grad.fc1.w") && !ir_output(tg, "grad.fc1.b") && !ir_output(tg, "grad.R"), "no gradient for frozen params");
    EXPECT(ir_output(tg, "grad.fc2.w") && ir_output(tg, "grad.fc2.b"), "gradients for trainable params");
    EXPECT(count_op(tg, nf, OP_matmul) == 1, "one backward matmul, got %d", count_op(tg, nf, OP_matmul));
    EXPECT(count_op(tg, nf, OP_gelu_grad) == 0, "no gelu_grad");
    ir_graph_free(tg);
    gt_free(t);

    /* Only fc1.b trains: the gradient flows through fc2 and gelu to it, but
     * no gradient for the weights or the input is formed. */
    t = gt_new("frozen2");
    x = gt_input(t, "x", DT_f32, 2, D(4, 8), xin);
    w1 = P(t, "fc1.w", 8, 16), b1 = P(t, "fc1.b", 16), w2 = P(t, "fc2.w", 16, 8), b2 = P(t, "fc2.b", 8);
    gt_freeze(t, w1);
    gt_freeze(t, w2);
    gt_freeze(t, b2);
    gt_loss_linear(t, linear(t, gelu(t, linear(t, x, w1, b1)), w2, b2));
    check(t, "frozen params (only fc1.b trains)", 64);
    tg = ir_clone(t->g);
    nf = tg->nnodes;
    pass_autodiff(tg, &po, &t->d);
    EXPECT(count_op(tg, nf, OP_matmul) == 1, "one backward matmul (dh), got %d", count_op(tg, nf, OP_matmul));
    EXPECT(count_op(tg, nf, OP_gelu_grad) == 1, "one gelu_grad");
    ir_graph_free(tg);
    gt_free(t);

    /* A frozen embedding table: no embedding_grad. */
    static const double tok[4] = {0, 2, 2, 1};
    t = gt_new("frozen_emb");
    Value *wte = P(t, "wte", 3, 4);
    gt_freeze(t, wte);
    Value *e = gt_op2(t, OP_embedding, wte, gt_input(t, "tokens", DT_i32, 1, D(4), tok));
    gt_loss_linear(t, gt_op1(t, OP_tanh, linear(t, e, P(t, "w", 4, 4), NULL)));
    check(t, "frozen embedding", 64);
    tg = ir_clone(t->g);
    nf = tg->nnodes;
    pass_autodiff(tg, &po, &t->d);
    EXPECT(count_op(tg, nf, OP_embedding_grad) == 0, "no embedding_grad for a frozen table");
    EXPECT(count_op(tg, nf, OP_matmul) == 1, "only dW, got %d matmuls", count_op(tg, nf, OP_matmul));
    ir_graph_free(tg);
    gt_free(t);
}

/* sign and ge pass no gradient: sum(sign(x) * x + ge(x, y) * y) has
 * gradient sign(x) for x and ge(x, y) for y. */
static void test_zero_grad_ops(void) {
    GT *t = gt_new("zero");
    Value *x = PF(t, "x", FILL_AWAY, 0.2, 1, 3, 4), *y = PF(t, "y", FILL_UNIFORM, -1, 1, 3, 4);
    Value *a = gt_op2(t, OP_mul, gt_op1(t, OP_sign, x), x);
    Value *b = gt_op2(t, OP_mul, gt_op2(t, OP_ge, x, y), y);
    gt_loss_linear(t, gt_op2(t, OP_add, a, b));
    check(t, "zero-gradient ops (sign, ge)", 64);
    gt_free(t);
}

/* An unused trainable param gets a zero gradient; a loss that depends on
 * no param gets no seed and no backward node at all. */
static void test_unused(void) {
    static const double xin[4] = {1, 2, 3, 4};
    GT *t = gt_new("unused");
    Value *x = P(t, "x", 4);
    P(t, "unused", 2, 3);
    gt_loss_linear(t, gt_op1(t, OP_exp, x));
    check(t, "unused param", 64);
    gt_free(t);

    t = gt_new("constant_loss");
    P(t, "w", 4);
    gt_loss(t, gt_op1(t, OP_sum, gt_input(t, "x", DT_f32, 1, D(4), xin)));
    Graph *tg = ir_clone(t->g);
    PassOptions po = {0};
    int nf = tg->nnodes;
    EXPECT(pass_autodiff(tg, &po, &t->d), "autodiff");
    EXPECT(tg->nnodes == nf + 1, "only the zero gradient is added, got %d nodes", tg->nnodes - nf);
    Value *gw = ir_output(tg, "grad.w");
    EXPECT(gw && gw->def->op == OP_constant && ir_float(gw->def, "value", 1) == 0, "grad.w is a zero constant");
    ir_graph_free(tg);
    gt_free(t);
}

/* Names: d.<value name>; grad.<param> in parameter order. */
static void test_names(void) {
    GT *t = gt_new("names");
    Value *b = P(t, "b", 4), *a = P(t, "a", 3, 4);
    Value *h = gt_op1(t, OP_tanh, gt_op2(t, OP_add, a, b));
    h->name = "h";
    gt_loss_linear(t, h);
    Graph *tg = ir_clone(t->g);
    PassOptions po = {0};
    pass_autodiff(tg, &po, &t->d);
    int k = 0;
    const char *order[2] = {"grad.b", "grad.a"};
    for (int i = 0; i < tg->noutputs; i++)
        if (strncmp(tg->outputs[i].name, "grad.", 5) == 0) {
            EXPECT(k < 2 && strcmp(tg->outputs[i].name, order[k]) == 0, "output %d is %s", k, tg->outputs[i].name);
            k++;
        }
    Value *ga = ir_output(tg, "grad.a"), *gb = ir_output(tg, "grad.b");
    EXPECT(ga && ga->name && strcmp(ga->name, "d.a") == 0, "grad.a is named %s", ga && ga->name ? ga->name : "(null)");
    EXPECT(gb && gb->name && strcmp(gb->name, "d.b") == 0, "grad.b is named %s", gb && gb->name ? gb->name : "(null)");
    bool dh = false, dloss = false;
    for (int i = 0; i < tg->nnodes; i++)
        for (int j = 0; j < tg->nodes[i]->nout; j++) {
            const char *nm = tg->nodes[i]->out[j]->name;
            dh |= nm && strcmp(nm, "d.h") == 0 && tg->nodes[i]->op == OP_mul; /* dy * R */
            dloss |= nm && strcmp(nm, "d.loss") == 0 && tg->nodes[i]->op == OP_constant;
        }
    EXPECT(dh, "the gradient of h is named d.h");
    EXPECT(dloss, "the seed is named d.loss");
    ir_graph_free(tg);
    gt_free(t);
}

int main(void) {
    test_mlp();
    test_attn();
    test_llama();
    test_tiny_lm();
    test_fanout();
    test_max_ties();
    test_frozen();
    test_zero_grad_ops();
    test_unused();
    test_names();
    printf("%s\n", gt_fails ? "FAILED" : "ok");
    return gt_fails ? 1 : 0;
}
