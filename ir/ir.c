/* ir/ir.c — graphs, nodes, values, attributes, outputs, uses, cloning. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

Graph *ir_graph_new(const char *name) {
    Arena *a = arena_new();
    Graph *g = arena_alloc(a, sizeof *g);
    g->arena = a;
    g->name = arena_strdup(a, name ? name : "main");
    g->ip = -1;
    train_defaults(&g->train);
    return g;
}

void ir_graph_free(Graph *g) {
    if (g) arena_free(g->arena);
}

/* ---- nodes and values ---- */

Value *ir_new_value(Graph *g, Node *def, int res) {
    Value *v = arena_alloc(g->arena, sizeof *v);
    v->id = g->nvalues++;
    v->def = def;
    v->res = res;
    return v;
}

Node *ir_new(Graph *g, Op op, int nin, Value *const *in, SrcLoc loc) {
    Node *n = arena_alloc(g->arena, sizeof *n);
    n->id = g->nextnode++;
    n->op = op;
    n->nin = nin;
    n->in = arena_alloc(g->arena, sizeof(Value *) * (size_t)(nin ? nin : 1));
    for (int i = 0; i < nin; i++) n->in[i] = in[i];
    n->nout = op_info[op].nout;
    n->out = arena_alloc(g->arena, sizeof(Value *) * (size_t)n->nout);
    for (int i = 0; i < n->nout; i++) n->out[i] = ir_new_value(g, n, i);
    n->loc = loc;
    return n;
}

static void src_put(Graph *g, Node *n);

void ir_append(Graph *g, Node *n) {
    if (g->srcidx && op_has(n->op, OPF_SOURCE)) src_put(g, n);
    if (g->nnodes == g->capnodes) {
        int cap = g->capnodes ? 2 * g->capnodes : 64;
        Node **nn = arena_alloc(g->arena, sizeof(Node *) * (size_t)cap);
        if (g->nnodes) memcpy(nn, g->nodes, sizeof(Node *) * (size_t)g->nnodes);
        g->nodes = nn;
        g->capnodes = cap;
    }
    if (g->ip < 0 || g->ip >= g->nnodes) {
        g->nodes[g->nnodes++] = n;
        if (g->ip >= 0) g->ip = g->nnodes;
        return;
    }
    memmove(g->nodes + g->ip + 1, g->nodes + g->ip, sizeof(Node *) * (size_t)(g->nnodes - g->ip));
    g->nodes[g->ip++] = n;
    g->nnodes++;
}

Node *ir_source(Graph *g, Op op, const char *name, Type ty, SrcLoc loc) {
    Node *n = ir_new(g, op, 0, NULL, loc);
    if (name) ir_set_str(g, n, "name", name);
    n->out[0]->ty = ty;
    if (name) n->out[0]->name = arena_strdup(g->arena, name);
    ir_append(g, n);
    return n;
}

Node *ir_emit(Graph *g, Node *n, Diag *d) {
    if (!ir_infer(g, n, d)) return NULL;
    ir_append(g, n);
    return n;
}

Value *ir_op1(Graph *g, Op op, Value *a, SrcLoc loc, Diag *d) {
    Node *n = ir_emit(g, ir_new(g, op, 1, &a, loc), d);
    return n ? n->out[0] : NULL;
}

Value *ir_op2(Graph *g, Op op, Value *a, Value *b, SrcLoc loc, Diag *d) {
    Value *in[2] = {a, b};
    Node *n = ir_emit(g, ir_new(g, op, 2, in, loc), d);
    return n ? n->out[0] : NULL;
}

Value *ir_const(Graph *g, double v, Type ty, SrcLoc loc) {
    Node *n = ir_new(g, OP_constant, 0, NULL, loc);
    ir_set_float(g, n, "value", v);
    n->out[0]->ty = ty;
    ir_append(g, n);
    return n->out[0];
}

/* ---- attributes ---- */

static Attr *attr_slot(Graph *g, Node *n, const char *key) {
    int i = 0;
    while (i < n->nattr && strcmp(n->attrs[i].key, key) < 0) i++;
    if (i < n->nattr && strcmp(n->attrs[i].key, key) == 0) {
        memset(&n->attrs[i], 0, sizeof(Attr));
        n->attrs[i].key = arena_strdup(g->arena, key);
        return &n->attrs[i];
    }
    Attr *na = arena_alloc(g->arena, sizeof(Attr) * (size_t)(n->nattr + 1));
    if (i) memcpy(na, n->attrs, sizeof(Attr) * (size_t)i);
    if (n->nattr > i) memcpy(na + i + 1, n->attrs + i, sizeof(Attr) * (size_t)(n->nattr - i));
    n->attrs = na;
    n->nattr++;
    memset(&na[i], 0, sizeof(Attr));
    na[i].key = arena_strdup(g->arena, key);
    return &na[i];
}

void ir_set_int(Graph *g, Node *n, const char *key, int64_t v) {
    Attr *a = attr_slot(g, n, key);
    a->kind = ATTR_INT;
    a->i = v;
}

void ir_set_float(Graph *g, Node *n, const char *key, double v) {
    Attr *a = attr_slot(g, n, key);
    a->kind = ATTR_FLOAT;
    a->f = v;
}

void ir_set_str(Graph *g, Node *n, const char *key, const char *v) {
    Attr *a = attr_slot(g, n, key);
    a->kind = ATTR_STR;
    a->s = arena_strdup(g->arena, v);
}

void ir_set_ints(Graph *g, Node *n, const char *key, int cnt, const int64_t *v) {
    int64_t *copy = arena_alloc(g->arena, sizeof(int64_t) * (size_t)(cnt ? cnt : 1));
    if (cnt) memcpy(copy, v, sizeof(int64_t) * (size_t)cnt);
    Attr *a = attr_slot(g, n, key);
    a->kind = ATTR_INTS;
    a->n = cnt;
    a->v = copy;
}

const Attr *ir_attr(const Node *n, const char *key) {
    for (int i = 0; i < n->nattr; i++)
        if (strcmp(n->attrs[i].key, key) == 0) return &n->attrs[i];
    return NULL;
}

int64_t ir_int(const Node *n, const char *key, int64_t dflt) {
    const Attr *a = ir_attr(n, key);
    if (!a) return dflt;
    if (a->kind == ATTR_INT) return a->i;
    if (a->kind == ATTR_FLOAT) /* clamped: converting an out-of-range double is undefined */
        return a->f != a->f ? 0 : a->f >= 9.2e18 ? INT64_MAX : a->f <= -9.2e18 ? INT64_MIN : (int64_t)a->f;
    return dflt;
}

double ir_float(const Node *n, const char *key, double dflt) {
    const Attr *a = ir_attr(n, key);
    if (!a) return dflt;
    if (a->kind == ATTR_FLOAT) return a->f;
    if (a->kind == ATTR_INT) return (double)a->i;
    return dflt;
}

const char *ir_str(const Node *n, const char *key, const char *dflt) {
    const Attr *a = ir_attr(n, key);
    return a && a->kind == ATTR_STR ? a->s : dflt;
}

bool attr_eq(const Attr *a, const Attr *b) {
    if (strcmp(a->key, b->key) != 0 || a->kind != b->kind) return false;
    switch (a->kind) {
    case ATTR_INT: return a->i == b->i;
    case ATTR_FLOAT: return a->f == b->f || (a->f != a->f && b->f != b->f);
    case ATTR_STR: return strcmp(a->s, b->s) == 0;
    case ATTR_INTS:
        if (a->n != b->n) return false;
        for (int i = 0; i < a->n; i++)
            if (a->v[i] != b->v[i]) return false;
        return true;
    }
    return false;
}

/* ---- sources ---- */

const char *ir_source_name(const Node *n) { return ir_str(n, "name", NULL); }

bool ir_is_trainable(const Node *n) { return n->op == OP_param && !ir_int(n, "frozen", 0); }

/* ---- the sources by op and name (ir_find_source) ----
 * An open-addressing table in the graph's arena, made from the nodes on
 * the first lookup and grown as ir_append adds sources: a pass that looks
 * up a name per parameter (the optimizer's states) is linear, not
 * quadratic, in the number of parameters.  ir_filter_nodes drops it (it
 * removes nodes); nothing else removes a source or renames one (a source's
 * name is set before it is appended). */
struct SrcIndex {
    int    cap, n;   /* cap a power of two, n <= cap / 2 */
    Node **slot;
};

static uint32_t src_hash(Op op, const char *s) { return (uint32_t)ir_hash(IR_HASH0 ^ (uint64_t)op, s, strlen(s)); }

static void src_grow(Graph *g, int cap) {
    struct SrcIndex *x = g->srcidx, old = *x;
    x->cap = cap;
    x->n = 0;
    x->slot = arena_alloc(g->arena, sizeof(Node *) * (size_t)cap);
    memset(x->slot, 0, sizeof(Node *) * (size_t)cap);
    for (int i = 0; i < old.cap; i++)
        if (old.slot[i]) src_put(g, old.slot[i]);
}

/* n (a source with a name) into the index, unless one of its op and name
 * is there: the first in the nodes' order is the one found. */
static void src_put(Graph *g, Node *n) {
    struct SrcIndex *x = g->srcidx;
    const char *name = ir_source_name(n);
    if (!name) return;
    if (2 * (x->n + 1) > x->cap) src_grow(g, 2 * x->cap);
    uint32_t m = (uint32_t)x->cap - 1, i = src_hash(n->op, name) & m;
    for (; x->slot[i]; i = (i + 1) & m)
        if (x->slot[i]->op == n->op && strcmp(ir_source_name(x->slot[i]), name) == 0) return;
    x->slot[i] = n;
    x->n++;
}

Node *ir_find_source(Graph *g, Op op, const char *name) {
    if (!g->srcidx) {
        g->srcidx = arena_alloc(g->arena, sizeof *g->srcidx);
        *g->srcidx = (struct SrcIndex){0, 0, NULL};
        src_grow(g, 64);
        for (int i = 0; i < g->nnodes; i++)
            if (op_has(g->nodes[i]->op, OPF_SOURCE)) src_put(g, g->nodes[i]);
    }
    struct SrcIndex *x = g->srcidx;
    uint32_t m = (uint32_t)x->cap - 1, i = src_hash(op, name) & m;
    for (; x->slot[i]; i = (i + 1) & m)
        if (x->slot[i]->op == op && strcmp(ir_source_name(x->slot[i]), name) == 0) return x->slot[i];
    return NULL;
}

/* ---- outputs ---- */

static Output *new_output(Graph *g) {
    if (g->noutputs == g->capoutputs) {
        int cap = g->capoutputs ? 2 * g->capoutputs : 16;
        Output *o = arena_alloc(g->arena, sizeof(Output) * (size_t)cap);
        if (g->noutputs) memcpy(o, g->outputs, sizeof(Output) * (size_t)g->noutputs);
        g->outputs = o;
        g->capoutputs = cap;
    }
    Output *o = &g->outputs[g->noutputs++];
    memset(o, 0, sizeof *o);
    return o;
}

void ir_add_output(Graph *g, const char *name, Value *v) {
    Output *o = new_output(g);
    o->kind = OUT_RESULT;
    o->name = arena_strdup(g->arena, name);
    o->value = v;
}

void ir_add_update(Graph *g, Node *target, Value *v) {
    Output *o = new_output(g);
    o->kind = OUT_UPDATE;
    o->name = arena_strdup(g->arena, ir_source_name(target));
    o->target = target;
    o->value = v;
}

Value *ir_output(Graph *g, const char *name) {
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i].kind == OUT_RESULT && strcmp(g->outputs[i].name, name) == 0) return g->outputs[i].value;
    return NULL;
}

/* ---- uses ---- */

Uses *ir_uses(Graph *g) {
    Uses *u = xcalloc(1, sizeof *u);
    u->nvalues = g->nvalues;
    u->of = xcalloc((size_t)g->nvalues + 1, sizeof(UseList));
    u->nout_refs = xcalloc((size_t)g->nvalues + 1, sizeof(int));
    int total = 0;
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        for (int j = 0; j < n->nin; j++) u->of[n->in[j]->id].n++;
        total += n->nin;
    }
    u->pool = xcalloc((size_t)total + 1, sizeof(Use));
    Use *p = u->pool;
    for (int v = 0; v < g->nvalues; v++) {
        u->of[v].u = p;
        p += u->of[v].n;
        u->of[v].n = 0;
    }
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        for (int j = 0; j < n->nin; j++) {
            UseList *l = &u->of[n->in[j]->id];
            l->u[l->n++] = (Use){n, j};
        }
    }
    for (int i = 0; i < g->noutputs; i++) u->nout_refs[g->outputs[i].value->id]++;
    return u;
}

void ir_uses_free(Uses *u) {
    if (!u) return;
    free(u->of);
    free(u->pool);
    free(u->nout_refs);
    free(u);
}

void ir_replace_all_uses(Graph *g, Value *old, Value *new_) {
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        for (int j = 0; j < n->nin; j++)
            if (n->in[j] == old) n->in[j] = new_;
    }
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i].value == old) g->outputs[i].value = new_;
}

void ir_filter_nodes(Graph *g, const bool *keep) {
    g->srcidx = NULL; /* sources may go: made again when next asked */
    int k = 0;
    for (int i = 0; i < g->nnodes; i++)
        if (keep[g->nodes[i]->id]) g->nodes[k++] = g->nodes[i];
    g->nnodes = k;
    g->ip = -1;
}

int ir_node_index(Graph *g, const Node *n) {
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i] == n) return i;
    return -1;
}

/* ---- cloning ---- */

Graph *ir_clone(Graph *g) {
    Graph *c = ir_graph_new(g->name);
    Arena *a = c->arena;
    c->train = g->train;
    train_copy_strings(&c->train, a); /* its strings lived in g's arena */
    c->is_training = g->is_training;
    c->training_loc = g->training_loc;
    c->loc = g->loc;
    Value **vmap = xcalloc((size_t)g->nvalues + 1, sizeof(Value *));
    Node **nmap = xcalloc((size_t)g->nextnode + 1, sizeof(Node *));
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        Value *in[64];
        Value **inp = n->nin <= 64 ? in : xmalloc(sizeof(Value *) * (size_t)n->nin);
        for (int j = 0; j < n->nin; j++) {
            inp[j] = vmap[n->in[j]->id];
            if (!inp[j]) die("ir_clone: operand %%%d of node %d used before its definition", n->in[j]->id, n->id);
        }
        Node *m = ir_new(c, n->op, n->nin, inp, n->loc);
        if (inp != in) free(inp);
        m->phase = n->phase;
        if (n->loc.file) m->loc.file = arena_strdup(a, n->loc.file);
        m->nattr = n->nattr;
        m->attrs = arena_alloc(a, sizeof(Attr) * (size_t)(n->nattr ? n->nattr : 1));
        for (int k = 0; k < n->nattr; k++) {
            Attr at = n->attrs[k];
            at.key = arena_strdup(a, at.key);
            if (at.kind == ATTR_STR) at.s = arena_strdup(a, at.s);
            if (at.kind == ATTR_INTS) {
                int64_t *v = arena_alloc(a, sizeof(int64_t) * (size_t)(at.n ? at.n : 1));
                memcpy(v, at.v, sizeof(int64_t) * (size_t)at.n);
                at.v = v;
            }
            m->attrs[k] = at;
        }
        for (int j = 0; j < n->nout; j++) {
            m->out[j]->ty = n->out[j]->ty;
            m->out[j]->name = arena_strdup(a, n->out[j]->name);
            vmap[n->out[j]->id] = m->out[j];
        }
        nmap[n->id] = m;
        ir_append(c, m);
    }
    for (int i = 0; i < g->noutputs; i++) {
        Output *o = &g->outputs[i];
        Value *v = vmap[o->value->id];
        if (!v) die("ir_clone: output '%s' refers to a value not in the graph", o->name);
        if (o->kind == OUT_RESULT) ir_add_output(c, o->name, v);
        else ir_add_update(c, nmap[o->target->id], v);
    }
    free(vmap);
    free(nmap);
    return c;
}
