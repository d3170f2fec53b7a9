/* ir/stats.c — FLOP and byte counts per node, and graph statistics.
 *
 * FLOP conventions (docs/ir.md, "Statistics"): one multiply-add is 2 FLOPs.
 *   matmul            2 * M * N * K * batch
 *   attention         4 * B * H * T * S * D; causal: only the triangle
 *                     (4 * B * H * D * T*(T+1)/2)
 *   pointwise         1 per result element (transcendentals count 1 too);
 *                     cast counts 0 (a conversion, no arithmetic)
 *   reductions        1 per input element
 *   softmax           5 per element;  rope 3 per element
 *   norms             8 per element of x
 *   cross_entropy     5 per logit
 *   embedding         0 (a gather); embedding_grad 1 per element of dy (scatter-add)
 *   shape ops, sources 0
 *   backward ops      2x their forward (pointwise grads 2 per element,
 *                     attention_grad 2x attention, norm grads 16 per element,
 *                     softmax_grad 10, cross_entropy_grad 10 per logit,
 *                     max_grad 2 per element of x)
 *   optimizer         adamw, sgd 10 per parameter element; global_norm 2 per
 *                     element of its operands; clip_coef 3
 * Counts are computed in double and saturate at INT64_MAX.
 */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

static double numel(const Value *v) { return (double)shape_numel(&v->ty.shape); }

static double node_flops(const Node *n) {
    const Value *y = n->out[0];
    switch (n->op) {
    case OP_cast: return 0;
    case OP_tanh_grad:
    case OP_sigmoid_grad:
    case OP_relu_grad:
    case OP_gelu_grad:
    case OP_silu_grad: return 2 * numel(y);
    case OP_max_grad: return 2 * numel(n->in[1]);
    case OP_matmul: {
        const Shape *a = &n->in[0]->ty.shape;
        double K = (double)a->d[a->rank - 1 - (ir_int(n, "ta", 0) ? 1 : 0)];
        return 2 * numel(y) * K; /* numel(y) = batch * M * N */
    }
    case OP_attention:
    case OP_attention_grad: {
        const Shape *q = &n->in[n->op == OP_attention ? 0 : 1]->ty.shape;
        const Shape *k = &n->in[n->op == OP_attention ? 1 : 2]->ty.shape;
        double B = (double)q->d[0], H = (double)q->d[1], T = (double)q->d[2], D = (double)q->d[3], S = (double)k->d[2];
        double pairs = ir_int(n, "causal", 1) ? T * (T + 1) / 2 : T * S;
        return (n->op == OP_attention ? 4 : 8) * B * H * D * pairs;
    }
    case OP_embedding: return 0;
    case OP_embedding_grad: return numel(n->in[0]);
    case OP_softmax: return 5 * numel(y);
    case OP_softmax_grad: return 10 * numel(y);
    case OP_layer_norm:
    case OP_rms_norm: return 8 * numel(n->in[0]);
    case OP_layer_norm_grad:
    case OP_rms_norm_grad: return 16 * numel(n->in[1]);
    case OP_rope: return 3 * numel(y);
    case OP_dropout: return numel(y);
    case OP_cross_entropy: return 5 * numel(n->in[0]);
    case OP_cross_entropy_grad: return 10 * numel(n->in[1]);
    case OP_global_norm: {
        double s = 0;
        for (int i = 0; i < n->nin; i++) s += 2 * numel(n->in[i]);
        return s;
    }
    case OP_clip_coef: return 3;
    /* fused ops (passes/liger.c): their parts' counts */
    case OP_add_layer_norm:
    case OP_add_rms_norm: return 9 * numel(n->in[0]);
    case OP_add_layer_norm_grad:
    case OP_add_rms_norm_grad: return 17 * numel(n->in[2]);
    case OP_rope_qk: return 3 * (numel(n->out[0]) + numel(n->out[1]));
    case OP_swiglu:
    case OP_geglu: return 2 * numel(y);
    case OP_linear_cross_entropy: {
        /* logits (2NVC), dx and dw (4NVC), the loss (5 per logit) */
        double N = numel(n->in[2]), V = (double)ir_int(n, "classes", n->in[1]->ty.shape.d[0]), C = (double)n->in[1]->ty.shape.d[1];
        return 6 * N * V * C + 5 * N * V;
    }
    case OP_loss_scale_update: return 4;
    case OP_adamw:
    case OP_sgd: return 10 * numel(n->in[0]);
    default: break;
    }
    if (op_has(n->op, OPF_SOURCE) || op_has(n->op, OPF_VIEW)) return 0;
    if (op_has(n->op, OPF_POINTWISE)) return numel(y);
    if (op_has(n->op, OPF_REDUCE)) return numel(n->in[0]);
    if (op_has(n->op, OPF_OPT)) return 10 * (n->nin ? numel(n->in[0]) : 0);
    return 0; /* shape ops and anything without arithmetic */
}

static int64_t saturate(double v) { return v >= 9.2e18 ? INT64_MAX : (int64_t)v; }

int64_t ir_node_flops(Graph *g, Node *n) {
    (void)g;
    return saturate(node_flops(n));
}

static double value_bytes(const Value *v) { return numel(v) * dtype_size[v->ty.dt]; }

int64_t ir_node_bytes(Graph *g, Node *n) {
    (void)g;
    double b = 0;
    for (int i = 0; i < n->nin; i++) {
        bool seen = false; /* an operand read twice (x * x) is read once */
        for (int j = 0; j < i && !seen; j++) seen = n->in[j] == n->in[i];
        if (!seen) b += value_bytes(n->in[i]);
    }
    if (!op_has(n->op, OPF_SOURCE))
        for (int i = 0; i < n->nout; i++) b += value_bytes(n->out[i]);
    return saturate(b);
}

/* Forward nodes: in a forward graph every PH_MICRO node; in a training graph
 * (autodiff has run) the PH_MICRO nodes that the "loss" output depends on
 * (without one: every PH_MICRO result output), which leaves out the backward
 * pass and the optimizer (grad_norm depends on every gradient). */
static bool *forward_set(Graph *g) {
    bool *fwd = xcalloc((size_t)g->nextnode + 1, sizeof(bool));
    if (!g->is_training) {
        for (int i = 0; i < g->nnodes; i++) fwd[g->nodes[i]->id] = g->nodes[i]->phase == PH_MICRO;
        return fwd;
    }
    bool *live = xcalloc((size_t)g->nvalues + 1, sizeof(bool));
    Value *loss = ir_output(g, "loss");
    if (loss && loss->def->phase == PH_MICRO) live[loss->id] = true;
    for (int i = 0; i < g->noutputs && !loss; i++)
        if (g->outputs[i].kind == OUT_RESULT && g->outputs[i].value->def->phase == PH_MICRO) live[g->outputs[i].value->id] = true;
    for (int i = g->nnodes - 1; i >= 0; i--) {
        Node *n = g->nodes[i];
        bool any = false;
        for (int r = 0; r < n->nout; r++) any |= live[n->out[r]->id];
        if (!any || n->phase != PH_MICRO) continue;
        fwd[n->id] = true;
        for (int k = 0; k < n->nin; k++) live[n->in[k]->id] = true;
    }
    free(live);
    return fwd;
}

void ir_stats(Graph *g, GraphStats *s) {
    memset(s, 0, sizeof *s);
    bool *fwd = forward_set(g);
    double flops = 0, fwd_flops = 0, params = 0, bytes = 0, trainable = 0; /* in double, saturated: no overflow */
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        double f = node_flops(n);
        s->nodes++;
        flops += f;
        if (fwd[n->id]) fwd_flops += f;
        if (n->op == OP_param) {
            double k = numel(n->out[0]);
            params += k;
            bytes += k * dtype_size[n->out[0]->ty.dt];
            if (ir_is_trainable(n)) trainable += k;
        }
    }
    s->flops = saturate(flops);
    s->fwd_flops = saturate(fwd_flops);
    s->params = saturate(params);
    s->param_bytes = saturate(bytes);
    s->trainable_params = saturate(trainable);
    free(fwd);
}

/* ---- printing ---- */

/* Op families, in the order they are printed. */
enum { FAM_SOURCE, FAM_POINTWISE, FAM_REDUCE, FAM_SHAPE, FAM_MATMUL, FAM_NORM, FAM_ATTENTION, FAM_NN, FAM_OPT, FAM_OTHER, FAM__COUNT };
static const char *const fam_name[FAM__COUNT] = {"source", "pointwise", "reduction", "shape", "matmul", "norm", "attention", "nn", "optimizer", "other"};

static int family(Op op) {
    switch (op) {
    case OP_max_grad: return FAM_REDUCE;
    case OP_reshape: case OP_permute: case OP_broadcast: case OP_slice: case OP_pad: case OP_concat: return FAM_SHAPE;
    case OP_matmul: return FAM_MATMUL;
    case OP_layer_norm: case OP_layer_norm_grad: case OP_rms_norm: case OP_rms_norm_grad:
    case OP_add_layer_norm: case OP_add_layer_norm_grad: case OP_add_rms_norm: case OP_add_rms_norm_grad: return FAM_NORM;
    case OP_attention: case OP_attention_grad: return FAM_ATTENTION;
    case OP_embedding: case OP_embedding_grad: case OP_softmax: case OP_softmax_grad: case OP_rope: case OP_dropout:
    case OP_cross_entropy: case OP_cross_entropy_grad: case OP_rope_qk: case OP_linear_cross_entropy: return FAM_NN;
    default: break;
    }
    if (op_has(op, OPF_SOURCE)) return FAM_SOURCE;
    if (op_has(op, OPF_OPT)) return FAM_OPT;
    if (op_has(op, OPF_POINTWISE)) return FAM_POINTWISE;
    if (op_has(op, OPF_REDUCE)) return FAM_REDUCE;
    if (op_has(op, OPF_VIEW)) return FAM_SHAPE;
    return FAM_OTHER;
}

/* 124439808 -> "124,439,808" */
static void put_grouped(char *buf, size_t n, int64_t v) {
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%lld", (long long)(v < 0 ? -v : v));
    size_t len = strlen(tmp), k = 0;
    if (v < 0 && k + 1 < n) buf[k++] = '-';
    for (size_t i = 0; i < len && k + 2 < n; i++) {
        buf[k++] = tmp[i];
        if ((len - i - 1) % 3 == 0 && i + 1 < len) buf[k++] = ',';
    }
    buf[k] = 0;
}

static void put_bytes(char *buf, size_t n, double b) {
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (b >= 1024 && u < 5) b /= 1024, u++;
    if (u == 0) snprintf(buf, n, "%.0f B", b);
    else snprintf(buf, n, "%.1f %s", b, unit[u]);
}

void ir_format_flops(char *buf, size_t n, double f) {
    static const char *const unit[] = {"FLOP", "KFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP"};
    int u = 0;
    while (f >= 1000 && u < 6) f /= 1000, u++;
    if (u == 0) snprintf(buf, n, "%.0f FLOP", f);
    else snprintf(buf, n, "%.2f %s", f, unit[u]);
}

void ir_print_stats(FILE *f, Graph *g) {
    GraphStats s;
    ir_stats(g, &s);
    int fam[FAM__COUNT] = {0};
    int nvalues = 0;
    int dt_seen = -1;
    bool mixed = false;
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        fam[family(n->op)]++;
        nvalues += n->nout;
        if (n->op == OP_param) {
            if (dt_seen < 0) dt_seen = n->out[0]->ty.dt;
            else if (dt_seen != (int)n->out[0]->ty.dt) mixed = true;
        }
    }
    char a[64], b[64];
    fprintf(f, "graph @%s%s: %d nodes, %d values, %d outputs\n", g->name, g->is_training ? " (training)" : "", s.nodes, nvalues, g->noutputs);
    fprintf(f, "nodes by family:");
    const char *sep = " ";
    for (int k = 0; k < FAM__COUNT; k++)
        if (fam[k]) {
            fprintf(f, "%s%s %d", sep, fam_name[k], fam[k]);
            sep = ", ";
        }
    fprintf(f, "%s\n", *sep == ' ' ? " none" : "");
    /* a count that saturated is at least INT64_MAX: said so */
#define AT_LEAST(v) ((v) == INT64_MAX ? ">= " : "")
    put_grouped(a, sizeof a, s.params);
    put_bytes(b, sizeof b, (double)s.param_bytes);
    fprintf(f, "params: %s%s (%s%s %s)\n", AT_LEAST(s.params), a, AT_LEAST(s.param_bytes), b, dt_seen < 0 ? "f32" : mixed ? "mixed" : dtype_name[dt_seen]);
    put_grouped(a, sizeof a, s.trainable_params);
    fprintf(f, "trainable: %s%s\n", AT_LEAST(s.trainable_params), a);
    ir_format_flops(a, sizeof a, (double)s.fwd_flops);
    ir_format_flops(b, sizeof b, (double)s.flops);
    fprintf(f, "forward: %s%s\n", AT_LEAST(s.fwd_flops), a);
    fprintf(f, "total: %s%s (every node once)\n", AT_LEAST(s.flops), b);
#undef AT_LEAST
}
