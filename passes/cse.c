/* passes/cse.c — common subexpression elimination.
 *
 * One sweep over the node list with a hash table of the nodes kept so far.
 * A node is replaced by an earlier one with the same op, the same operands
 * (as a set of two for OPF_COMMUTE ops: a+b and b+a merge), identical
 * attributes (floats compared bit for bit, so 0.0 and -0.0 stay apart) and
 * the same result types, and the same phase: a step node must not come to
 * read a micro-batch value, and a constant's phase is when an update to it
 * commits (the optimizer's step-phase zero that resets an accumulator,
 * merged into a micro-batch zero, reset it every micro-batch).  Sources are
 * never merged except constant and iota, which are pure.  OPF_RANDOM nodes
 * (dropout) merge only with equal attributes, stream included, which the
 * rule above already demands: two such nodes draw the same numbers.  Nodes marked
 * {recompute=1} (gradient checkpointing's clones, passes/checkpoint.c) are
 * neither merged nor merged into: they exist to compute again what an
 * earlier node computed.  Uses are redirected through a replacement map as
 * the sweep goes, so the pass is O(n).
 */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static bool commutes(const Node *n) { return op_has(n->op, OPF_COMMUTE) && n->nin == 2; }

static uint64_t node_hash(const Node *n) {
    uint64_t h = mix(1469598103934665603ull, (uint64_t)n->op);
    h = mix(h, (uint64_t)n->phase);
    if (commutes(n)) {
        uint64_t a = (uint64_t)n->in[0]->id, b = (uint64_t)n->in[1]->id;
        h = mix(mix(h, a < b ? a : b), a < b ? b : a);
    } else {
        for (int i = 0; i < n->nin; i++) h = mix(h, (uint64_t)n->in[i]->id);
    }
    for (int i = 0; i < n->nattr; i++) {
        const Attr *a = &n->attrs[i];
        h = ir_hash(h, a->key, strlen(a->key));
        h = mix(h, (uint64_t)a->kind);
        switch (a->kind) {
        case ATTR_INT: h = mix(h, (uint64_t)a->i); break;
        case ATTR_FLOAT: h = ir_hash(h, &a->f, sizeof a->f); break;
        case ATTR_STR: h = ir_hash(h, a->s, strlen(a->s)); break;
        case ATTR_INTS: h = ir_hash(h, a->v, sizeof(int64_t) * (size_t)a->n); break;
        }
    }
    for (int r = 0; r < n->nout; r++) h = ir_hash(h, &n->out[r]->ty.dt, sizeof(DType)), h = ir_hash(h, n->out[r]->ty.shape.d, sizeof(int64_t) * (size_t)n->out[r]->ty.shape.rank);
    return h;
}

static bool attr_identical(const Attr *a, const Attr *b) {
    if (a->kind == ATTR_FLOAT && b->kind == ATTR_FLOAT && strcmp(a->key, b->key) == 0)
        return memcmp(&a->f, &b->f, sizeof a->f) == 0;
    return attr_eq(a, b);
}

static bool node_equal(const Node *a, const Node *b) {
    if (a->op != b->op || a->nin != b->nin || a->nout != b->nout || a->nattr != b->nattr) return false;
    if (a->phase != b->phase) return false;
    if (commutes(a)) {
        if (!((a->in[0] == b->in[0] && a->in[1] == b->in[1]) || (a->in[0] == b->in[1] && a->in[1] == b->in[0]))) return false;
    } else {
        for (int i = 0; i < a->nin; i++)
            if (a->in[i] != b->in[i]) return false;
    }
    for (int i = 0; i < a->nattr; i++)
        if (!attr_identical(&a->attrs[i], &b->attrs[i])) return false;
    for (int r = 0; r < a->nout; r++)
        if (!type_eq(&a->out[r]->ty, &b->out[r]->ty)) return false;
    return true;
}

static bool mergeable(const Node *n) {
    if (op_has(n->op, OPF_SOURCE)) return n->op == OP_constant || n->op == OP_iota;
    /* checkpoint's recomputation: merged into the original, the backward
     * would read the saved activation again */
    if (ir_int(n, "recompute", 0)) return false;
    return true;
}

bool pass_cse(Graph *g, const PassOptions *po, Diag *d) {
    (void)po;
    (void)d;
    size_t cap = 64;
    while (cap < 2 * (size_t)g->nnodes + 2) cap *= 2;
    Node **tab = xcalloc(cap, sizeof(Node *));
    Value **repl = xcalloc((size_t)g->nvalues + 1, sizeof(Value *));
    bool *keep = xcalloc((size_t)g->nextnode + 1, sizeof(bool));
    int merged = 0;
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        keep[n->id] = true;
        for (int k = 0; k < n->nin; k++)
            if (repl[n->in[k]->id]) n->in[k] = repl[n->in[k]->id];
        if (!mergeable(n)) continue;
        size_t h = (size_t)node_hash(n) & (cap - 1);
        while (tab[h] && !node_equal(tab[h], n)) h = (h + 1) & (cap - 1);
        if (!tab[h]) {
            tab[h] = n;
            continue;
        }
        Node *m = tab[h];
        for (int r = 0; r < n->nout; r++) repl[n->out[r]->id] = m->out[r];
        keep[n->id] = false;
        merged++;
    }
    if (merged) {
        for (int i = 0; i < g->noutputs; i++)
            if (repl[g->outputs[i].value->id]) g->outputs[i].value = repl[g->outputs[i].value->id];
        ir_filter_nodes(g, keep);
    }
    free(tab);
    free(repl);
    free(keep);
    return true;
}
