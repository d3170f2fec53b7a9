/* passes/checkpoint.c — gradient checkpointing (train.checkpoint = blocks
 * or budget).
 *
 * After autodiff and the optimizer the backward reads the forward's
 * activations, so every one of them lives from the forward to its backward
 * use: that is the "saved activations" line of --report.  With
 * checkpoint = blocks, each repeated block keeps only what crosses its
 * boundaries, and the backward recomputes the rest from them:
 *
 *   1. the forward nodes are the ones the loss depends on;
 *   2. a forward node that reads a param (or mixed precision's copy of one)
 *      named NAME.INDEX.... (the names `repeat N as NAME` gives) belongs to
 *      repetition (NAME, INDEX); one that reads a param of no repetition
 *      (wte, ln_f) belongs to none; a node that reads no param belongs to
 *      the segment it follows, and so does one in a repetition's segment
 *      whose repetition had a segment before (a block reading an earlier
 *      block's weight, passed to it, stays in its own block).  A segment
 *      is a run of forward nodes between two changes of owner; a block is
 *      counted once however many segments it has (a read of a param of no
 *      repetition splits it).  A widening cast read in the forward only
 *      by one later segment belongs to that segment (its narrower operand
 *      crosses the boundary instead);
 *   3. in a segment of a repetition, a value that a node outside the
 *      forward reads (the backward), and that no forward node after the
 *      segment reads (those values cross the boundary and stay), is
 *      recomputed: the nodes that make it are cloned, from the segment's
 *      inputs, and the clones are placed just before the first backward
 *      node that reads any of them; the backward reads the clones;
 *   4. dce (which follows in the pipeline) keeps the forward nodes, now
 *      read by the forward only, whose values die as soon as the forward
 *      is past them.
 *
 * The clones compute exactly what the originals computed (same ops,
 * attributes and operands; dropout draws from Philox by its stream and the
 * element index), so training is bit for bit the same; the memory plan
 * sees short-lived forward values and one block's recomputed values at a
 * time.  Each clone carries {recompute=1}: cse leaves such nodes alone
 * (it would merge them back into the originals), and the mark survives
 * printing and parsing.  Runs after the optimizer, on a training graph (a
 * forward graph is an error).  A model with no repeated blocks is an
 * error: the option would change nothing.
 *
 * checkpoint_blocks = N (with blocks) recomputes the first N repeated
 * blocks only.  checkpoint = budget: the last po->ckpt_keep repeated
 * blocks keep their activations (the backward reaches them first, while
 * everything the forward saved is live) and the ones before recompute
 * theirs; the count comes from the memory plan (codegen/compile.c,
 * cg_choose_checkpoint).
 */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

/* The repetition a param name belongs to: "h.3.attn.c_attn.weight" gives
 * prefix length 1 ("h") and index 3: the first all-digit component after
 * the first.  False when the name has none. */
static bool repetition(const char *name, int *plen, long *index) {
    const char *p = strchr(name, '.');
    while (p) {
        const char *c = p + 1, *e = c;
        while (*e >= '0' && *e <= '9') e++;
        if (e > c && (*e == '.' || *e == 0) && e - c < 10) {
            *plen = (int)(p - name);
            *index = strtol(c, NULL, 10);
            return true;
        }
        p = strchr(c, '.');
    }
    return false;
}

/* The owner of a forward node: "" when it reads no param, "-" for a param
 * of no repetition, else the param name's repetition ("h.3"). */
static const char *owner(Graph *g, Node *n) {
    const char *own = "";
    for (int j = 0; j < n->nin; j++) {
        Node *s = n->in[j]->def;
        const char *name = s->op == OP_param ? ir_source_name(s) : s->op == OP_state ? ir_str(s, "copy_of", NULL) : NULL;
        if (!name) continue;
        int plen;
        long idx;
        if (!repetition(name, &plen, &idx)) {
            own = "-";
            continue;
        }
        return arena_printf(g->arena, "%.*s.%ld", plen, name, idx);
    }
    return own;
}

typedef struct Ck {
    Graph *g;
    int    nn;        /* node ids below nn existed before the pass */
    bool  *fwd;       /* by node id: the loss depends on it */
    int   *seg;       /* by node id: a forward node's segment, -1 otherwise */
    Node **clone;     /* by node id: its clone, once made */
    int    ncloned;
    double flops;     /* the clones' */
} Ck;

static int seg_of(const Ck *c, const Node *n) { return n->id < c->nn ? c->seg[n->id] : -1; }

/* The clone of forward node n (made once, at g->ip): its operands from
 * n's own segment that are not kept are clones too, made first. */
static Node *clone_node(Ck *c, Node *n, const bool *kept, Diag *d) {
    if (c->clone[n->id]) return c->clone[n->id];
    Graph *g = c->g;
    Value **in = arena_alloc(g->arena, sizeof(Value *) * (size_t)(n->nin ? n->nin : 1));
    for (int j = 0; j < n->nin; j++) {
        Value *u = n->in[j];
        bool inside = seg_of(c, u->def) == seg_of(c, n) && !kept[u->id] && !op_has(u->def->op, OPF_SOURCE);
        Node *mc = inside ? clone_node(c, u->def, kept, d) : NULL;
        if (inside && !mc) return NULL;
        in[j] = mc ? mc->out[u->res] : u;
    }
    Node *k = ir_new(g, n->op, n->nin, in, n->loc);
    k->nattr = n->nattr;
    k->attrs = arena_alloc(g->arena, sizeof(Attr) * (size_t)(n->nattr ? n->nattr : 1));
    if (n->nattr) memcpy(k->attrs, n->attrs, sizeof(Attr) * (size_t)n->nattr);
    ir_set_int(g, k, "recompute", 1); /* the mark cse keeps it by */
    k->phase = n->phase;
    if (!ir_emit(g, k, d)) return NULL;
    for (int r = 0; r < n->nout; r++)
        if (n->out[r]->name) k->out[r]->name = arena_printf(g->arena, "re.%s", n->out[r]->name);
    c->clone[n->id] = k;
    c->ncloned++;
    c->flops += (double)ir_node_flops(g, k);
    return k;
}

bool pass_checkpoint(Graph *g, const PassOptions *po, Diag *d) {
    const char *policy = g->train.checkpoint ? g->train.checkpoint : "none";
    int64_t count = g->train.checkpoint_blocks;
    /* a forward graph has no backward to recompute for: the pass would
     * clone nothing and say so in a note, the header keeping the policy */
    if (!g->is_training) {
        SrcLoc at = train_loc(&g->train, "checkpoint");
        error_at(d, at.file ? at : graph_loc(g), "checkpoint: graph '%s' is not a training graph; checkpointing takes one: run it after autodiff and the optimizer",
                 g->name);
        return false;
    }
    if (count != 0 && strcmp(policy, "blocks") != 0) {
        error_at(d, train_loc(&g->train, "checkpoint_blocks"), "checkpoint_blocks = %lld needs checkpoint = blocks%s", (long long)count,
                 strcmp(policy, "budget") == 0 ? " (checkpoint = budget chooses the blocks itself)" : "");
        return false;
    }
    if (strcmp(policy, "none") == 0) return true;
    bool budget = strcmp(policy, "budget") == 0;
    if (!budget && strcmp(policy, "blocks") != 0) {
        error_at(d, NOLOC, "checkpoint: policy '%s' is not implemented (none, blocks, budget)", policy);
        return false;
    }
    if (budget && !po->ckpt_chosen) {
        error_at(d, NOLOC, "checkpoint = budget: which blocks recompute is chosen from the memory plan, by trainc compile, run and "
                           "ir --train; the pass alone (trainc opt) takes none or blocks");
        return false;
    }
    int keep = budget ? po->ckpt_keep : 0;
    Value *loss = ir_output(g, "loss");
    if (!loss) {
        error_at(d, graph_loc(g), "checkpoint: the graph has no \"loss\" result (the pass runs after autodiff)");
        return false;
    }
    int nn = g->nextnode + 1;
    Ck c = {g, nn, xcalloc((size_t)nn, sizeof(bool)), xcalloc((size_t)nn, sizeof(int)), xcalloc((size_t)nn, sizeof(Node *)), 0, 0};
    /* 1. the forward: the nodes the loss depends on */
    c.fwd[loss->def->id] = true;
    for (int i = g->nnodes - 1; i >= 0; i--) {
        Node *n = g->nodes[i];
        if (!c.fwd[n->id]) continue;
        for (int j = 0; j < n->nin; j++) c.fwd[n->in[j]->def->id] = true;
    }
    /* 2. segments by owner; rep[s]: segment s is a repetition's */
    int nseg = 0, caps = 16;
    bool *rep = xcalloc((size_t)caps, sizeof(bool));
    int *last = xcalloc((size_t)caps, sizeof(int)); /* position of a segment's last node */
    const char **sown = xcalloc((size_t)caps, sizeof(char *)); /* a segment's owner */
    const char *cur = NULL;
    for (int i = 0; i < nn; i++) c.seg[i] = -1;
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (!c.fwd[n->id] || op_has(n->op, OPF_SOURCE)) continue;
        const char *own = owner(g, n);
        if (own[0] && own[0] != '-' && cur && cur[0] != '-' && strcmp(own, cur) != 0)
            for (int s = 0; s < nseg; s++)
                if (strcmp(sown[s], own) == 0) { /* in a block, an earlier block's weight: the segment it follows */
                    own = "";
                    break;
                }
        if (!cur || (own[0] && strcmp(own, cur) != 0)) {
            if (nseg == caps) {
                caps *= 2;
                rep = xrealloc(rep, sizeof(bool) * (size_t)caps);
                last = xrealloc(last, sizeof(int) * (size_t)caps);
                sown = xrealloc(sown, sizeof(char *) * (size_t)caps);
            }
            cur = own[0] ? own : "-";
            sown[nseg] = cur;
            rep[nseg++] = cur[0] != '-';
        }
        c.seg[n->id] = nseg - 1;
        last[nseg - 1] = i;
    }
    /* 2b. a widening cast read in the forward only by nodes of one later
     * segment belongs to that segment: its narrower operand crosses the
     * boundary instead of it, and that segment's clones recompute the cast
     * (mixed precision's f32 of a block's bf16 output, which the next
     * block's residual add reads: half the bytes kept from the forward to
     * the backward) */
    Uses *us = ir_uses(g);
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (c.seg[n->id] < 0 || n->op != OP_cast || us->nout_refs[n->out[0]->id] || op_has(n->in[0]->def->op, OPF_SOURCE)) continue;
        DType from = n->in[0]->ty.dt, to = n->out[0]->ty.dt;
        if (!dtype_is_float[from] || !dtype_is_float[to] || dtype_size[to] <= dtype_size[from]) continue;
        const UseList *l = &us->of[n->out[0]->id];
        int into = -1;
        for (int k = 0; k < l->n && into != -2; k++) {
            Node *m = l->u[k].node;
            if (m->id >= nn || !c.fwd[m->id]) continue; /* the backward's reads */
            int sm = c.seg[m->id];
            into = sm <= c.seg[n->id] || (into >= 0 && sm != into) ? -2 : sm;
        }
        if (into >= 0) c.seg[n->id] = into;
    }
    ir_uses_free(us);
    /* blk[s]: the block a repetition's segment is of, counted in the order
     * the blocks begin (a block that a param of no repetition splits has
     * two segments, one block) */
    int nrep = 0, *blk = xcalloc((size_t)nseg + 1, sizeof(int));
    for (int s = 0; s < nseg; s++) {
        if (!rep[s]) continue;
        int b = 0;
        while (b < s && !(rep[b] && strcmp(sown[b], sown[s]) == 0)) b++;
        blk[s] = b < s ? blk[b] : nrep++;
    }
    if (po->ckpt_nblocks) *po->ckpt_nblocks = nrep;
    bool ok = true;
    if (!nrep) {
        error_at(d, train_loc(&g->train, "checkpoint"), "checkpoint = %s: the model has no repeated blocks (parameters named NAME.INDEX..., as `repeat N as NAME` "
                           "names them) to recompute", policy);
        ok = false;
    } else if (count < 0 || count > nrep) {
        error_at(d, train_loc(&g->train, "checkpoint_blocks"), "checkpoint_blocks = %lld: the model has %d repeated blocks (0 recomputes all of them)", (long long)count, nrep);
        ok = false;
    } else if (count > 0) {
        keep = nrep - (int)count;
    }
    /* 3. kept[v]: read by a forward node of another segment, or a result */
    bool *kept = xcalloc((size_t)g->nvalues + 1, sizeof(bool));
    for (int i = 0; ok && i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (c.seg[n->id] < 0) continue;
        for (int j = 0; j < n->nin; j++) {
            Node *m = n->in[j]->def;
            if (c.seg[m->id] >= 0 && c.seg[m->id] != c.seg[n->id]) kept[n->in[j]->id] = true;
        }
    }
    for (int i = 0; i < g->noutputs; i++) kept[g->outputs[i].value->id] = true;
    Use *rd = NULL;
    int caprd = 0, segs = 0;
    bool *redone = xcalloc((size_t)nrep + 1, sizeof(bool)); /* by block: some segment recomputed */
    for (int s = 0; ok && s < nseg; s++) {
        if (!rep[s]) continue;
        /* the last `keep` blocks keep their activations: the backward
         * reaches them first, while everything the forward saved is live */
        if (blk[s] >= nrep - keep) continue;
        /* the backward's reads of segment s's recomputable values */
        int nrd = 0, first = -1;
        for (int i = 0; i < g->nnodes; i++) {
            Node *n = g->nodes[i];
            if (n->id >= nn || c.fwd[n->id]) continue; /* clones and the forward */
            for (int j = 0; j < n->nin; j++) {
                Value *u = n->in[j];
                if (seg_of(&c, u->def) != s || kept[u->id] || op_has(u->def->op, OPF_SOURCE)) continue;
                if (nrd == caprd) rd = xrealloc(rd, sizeof(Use) * (size_t)(caprd = caprd ? 2 * caprd : 64));
                rd[nrd++] = (Use){n, j};
                if (first < 0) first = i;
            }
        }
        /* (a reader amid the segment's own nodes would see clones of values
         * made after it: such a segment stays saved) */
        if (first < 0 || first <= last[s]) continue;
        /* the clones go just before the first reader, and the readers read them */
        g->ip = first;
        for (int k = 0; ok && k < nrd; k++) {
            Value *u = rd[k].node->in[rd[k].idx];
            Node *cl = clone_node(&c, u->def, kept, d);
            if (!cl) ok = false;
            else rd[k].node->in[rd[k].idx] = cl->out[u->res];
        }
        g->ip = -1;
        segs += !redone[blk[s]];
        redone[blk[s]] = true;
    }
    if (ok && !po->quiet && (segs || !budget)) { /* (budget's choice of none has its own note) */
        double all = 0; /* the micro-batch's FLOPs, the clones' included */
        for (int i = 0; i < g->nnodes; i++)
            if (g->nodes[i]->phase != PH_STEP) all += (double)ir_node_flops(g, g->nodes[i]);
        char cf[32], af[32];
        ir_format_flops(cf, sizeof cf, c.flops);
        ir_format_flops(af, sizeof af, all);
        note_at(d, NOLOC, "checkpoint: %d of %d blocks recompute their activations in the backward (%d nodes cloned, %s a micro-batch: %.1f%% of its %s)",
                segs, nrep, c.ncloned, cf, all > 0 ? 100 * c.flops / all : 0.0, af);
    }
    free(rd);
    free(kept);
    free(rep);
    free(last);
    free(sown);
    free(blk);
    free(redone);
    free(c.fwd);
    free(c.seg);
    free(c.clone);
    return ok;
}
