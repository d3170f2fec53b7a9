/* passes/dce.c — dead code elimination.
 *
 * Marks backward from the outputs: a node is live when one of its results
 * is an output or an operand of a live node.  The target of an update is
 * live (the update writes it); an update to the target's own value is
 * dropped.  Inputs and params are kept even when nothing
 * uses them: they are the model's interface (checkpoint keys, fed tensors).
 * In a forward graph an unused param gets a warning at its location.  Dead
 * state, constant, iota and computing nodes are removed.
 */
#include "ir.h"

#include <stdlib.h>

bool pass_dce(Graph *g, const PassOptions *po, Diag *d) {
    /* an update of a source to its own value changes nothing: dropped (fold
     * leaves `update %acc = %acc` where a parameter's gradient is zero, its
     * accumulation `acc + 0`; lowering it made a copy that read its own
     * target, "the kernel schedule has a cycle") */
    int no = 0;
    for (int i = 0; i < g->noutputs; i++) {
        Output *o = &g->outputs[i];
        if (o->kind == OUT_UPDATE && o->target && o->value == o->target->out[0]) continue;
        g->outputs[no++] = *o;
    }
    g->noutputs = no;
    bool *live = xcalloc((size_t)g->nvalues + 1, sizeof(bool));
    bool *keep = xcalloc((size_t)g->nextnode + 1, sizeof(bool));
    for (int i = 0; i < g->noutputs; i++) {
        live[g->outputs[i].value->id] = true;
        if (g->outputs[i].kind == OUT_UPDATE && g->outputs[i].target) keep[g->outputs[i].target->id] = true;
    }
    for (int i = g->nnodes - 1; i >= 0; i--) {
        Node *n = g->nodes[i];
        bool used = false;
        for (int r = 0; r < n->nout; r++) used |= live[n->out[r]->id];
        if (used || n->op == OP_input || n->op == OP_param) keep[n->id] = true;
        if (!keep[n->id]) continue;
        for (int k = 0; k < n->nin; k++) live[n->in[k]->id] = true;
    }
    /* the eval and sampling graphs' pipelines are quiet: the training
     * pipeline's dce (before autodiff) said it once, and there the params
     * mixed precision's copies replaced are not dead */
    if (!g->is_training && !(po && po->quiet))
        for (int i = 0; i < g->nnodes; i++) {
            Node *n = g->nodes[i];
            if (n->op == OP_param && !live[n->out[0]->id])
                warning_at(d, n->loc, "parameter '%s' does not contribute to any output", ir_source_name(n) ? ir_source_name(n) : "?");
        }
    ir_filter_nodes(g, keep);
    free(live);
    free(keep);
    return true;
}
