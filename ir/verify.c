/* ir/verify.c — the IR verifier.
 *
 * Checks every invariant a pass may rely on (docs/ir.md, "Invariants"):
 *   - nodes: a known op, operand and result counts from the op table, each
 *     node once in the list, attributes sorted by key and unique;
 *   - SSA: every operand is defined by a node of the graph earlier in the
 *     list; every result's def/res point back at its node; no value is
 *     defined twice;
 *   - types: well formed, and equal to what ir_infer computes again from
 *     the operands and attributes (on a scratch copy of the node);
 *   - sources: input/param/state carry a name, unique among their kind;
 *   - phases: PH_MICRO or PH_STEP, non-decreasing along the list, and a
 *     PH_STEP node reads only sources and PH_STEP values;
 *   - outputs: refer to values of the graph; result names are unique; an
 *     update targets a param or state node of the graph, at most once per
 *     phase, with a value of the target's type;
 *   - gradient accumulation: accumulators (states grad_acc.*) iff
 *     train.grad_accum > 1, where a trainable param is updated.
 * Each failure is a located error that names the node (ir_print_node).
 */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

typedef struct Verifier {
    Graph  *g;
    Diag   *d;
    int     limit;
    int    *pos;          /* node id -> index in g->nodes + 1 (0: not in the graph) */
    Node  **def_of;       /* value id -> the node in the graph that defines it */
    Graph  *scratch;      /* arena for re-inference copies */
    FILE   *inf;          /* what re-inference says, every node's after the last (one stream: opening one a node cost more than the check) */
    char   *infbuf;
    size_t  inflen;
} Verifier;

/* The node as one line of IR, or NULL once errors are no longer printed. */
static char *node_text(Verifier *V, Node *n) {
    if (V->d->nerrors >= V->limit) return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    ir_print_node(f, V->g, n);
    fclose(f);
    return buf;
}

static void node_error(Verifier *V, Node *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void node_error(Verifier *V, Node *n, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char *text = node_text(V, n);
    if (text) error_at(V->d, n->loc, "'%s': %s", text, msg);
    else error_at(V->d, n->loc, "%s", msg);
    free(text);
}

static bool type_ok(const Type *t) {
    if ((unsigned)t->dt >= DT__COUNT || t->shape.rank < 0 || t->shape.rank > IR_MAX_RANK) return false;
    int64_t n = 1;
    for (int i = 0; i < t->shape.rank; i++) {
        if (t->shape.d[i] <= 0 || n > INT64_MAX / 64 / t->shape.d[i]) return false;
        n *= t->shape.d[i];
    }
    return true;
}

/* Is v a value defined by a node of the graph? */
static Node *defined_in_graph(Verifier *V, const Value *v) {
    if (!v || v->id < 0 || v->id >= V->g->nvalues) return NULL;
    return V->def_of[v->id];
}

/* ---- re-inference on a scratch copy ---- */

static void reinfer(Verifier *V, Node *n) {
    Graph *s = V->scratch;
    Node c = *n;
    c.loc = NOLOC;
    c.attrs = arena_alloc(s->arena, sizeof(Attr) * (size_t)(n->nattr + 1));
    if (n->nattr) memcpy(c.attrs, n->attrs, sizeof(Attr) * (size_t)n->nattr);
    c.out = arena_alloc(s->arena, sizeof(Value *) * (size_t)n->nout);
    for (int i = 0; i < n->nout; i++) {
        c.out[i] = arena_alloc(s->arena, sizeof(Value));
        *c.out[i] = *n->out[i];
        c.out[i]->def = &c;
    }
    if (!V->inf && !(V->inf = open_memstream(&V->infbuf, &V->inflen))) die("open_memstream failed");
    fflush(V->inf);
    size_t start = V->inflen;
    Diag tmp;
    diag_init(&tmp, V->inf);
    bool ok = ir_infer(s, &c, &tmp);
    if (!ok) {
        /* "trainc: error: add: shapes do not broadcast..." -> the message */
        fflush(V->inf);
        const char *m = V->infbuf + start, *pre = "trainc: error: ";
        if (strncmp(m, pre, strlen(pre)) == 0) m += strlen(pre);
        node_error(V, n, "does not pass shape inference: %.*s", (int)strcspn(m, "\n"), m);
    } else {
        for (int i = 0; i < n->nout; i++) {
            char a[200], b[200];
            if (!type_eq(&c.out[i]->ty, &n->out[i]->ty))
                node_error(V, n, "result %d has type %s, but shape inference gives %s", i + 1, type_str(&n->out[i]->ty, a, sizeof a),
                           type_str(&c.out[i]->ty, b, sizeof b));
        }
    }
}

/* ---- nodes ---- */

static void check_node(Verifier *V, Node *n, int idx, int *phase) {
    Graph *g = V->g;
    if ((unsigned)n->op >= OP__COUNT) {
        error_at(V->d, n->loc, "node %d has an invalid op (%d)", n->id, (int)n->op);
        return;
    }
    const OpInfo *oi = &op_info[n->op];
    bool sound = true;   /* operands and results fit for re-inference */
    if (n->nout != oi->nout || (n->nout && !n->out) || n->nin < 0 || (n->nin && !n->in)) {
        error_at(V->d, n->loc, "%s node %d has %d results (the op has %d) or missing operand/result arrays", oi->name, n->id, n->nout, oi->nout);
        return;
    }
    for (int i = 0; i < n->nout; i++)
        if (!n->out[i]) {
            error_at(V->d, n->loc, "%s node %d: result %d is NULL", oi->name, n->id, i + 1);
            return;
        }
    for (int i = 0; i < n->nin; i++)
        if (!n->in[i]) {
            error_at(V->d, n->loc, "%s node %d: operand %d is NULL", oi->name, n->id, i + 1);
            return;
        }
    if (n->nin < oi->min_in || (oi->max_in >= 0 && n->nin > oi->max_in)) {
        if (oi->min_in == oi->max_in)
            node_error(V, n, "%s takes %d operand%s, not %d", oi->name, oi->min_in, oi->min_in == 1 ? "" : "s", n->nin);
        else
            node_error(V, n, "%s takes at least %d operands, not %d", oi->name, oi->min_in, n->nin);
        sound = false;
    }
    if (n->phase != PH_MICRO && n->phase != PH_STEP) {
        node_error(V, n, "invalid phase %d", n->phase);
    } else {
        if (n->phase < *phase) node_error(V, n, "a micro-batch node follows step nodes (phases must not decrease along the node list)");
        *phase = n->phase;
    }
    for (int i = 0; i < n->nattr; i++) {
        const Attr *a = &n->attrs[i];
        if (!a->key || (unsigned)a->kind > ATTR_INTS || (a->kind == ATTR_STR && !a->s) || (a->kind == ATTR_INTS && a->n && !a->v)) {
            node_error(V, n, "attribute %d is malformed", i + 1);
            sound = false;
        } else if (i && n->attrs[i - 1].key && strcmp(n->attrs[i - 1].key, a->key) >= 0) {
            node_error(V, n, "attributes are not sorted by key or '%s' appears twice", a->key);
            sound = false;
        }
    }
    /* operands: defined earlier in the list, by a node still in the graph */
    for (int i = 0; i < n->nin; i++) {
        Value *v = n->in[i];
        Node *def = v->def;
        int dpos = def && def->id >= 0 && def->id < g->nextnode && V->pos[def->id] && g->nodes[V->pos[def->id] - 1] == def
                       ? V->pos[def->id] - 1
                       : -1;
        if (dpos < 0) {
            node_error(V, n, "operand %d is defined by a node that is not in the graph", i + 1);
            sound = false;
        } else if (v->res < 0 || v->res >= def->nout || def->out[v->res] != v) {
            node_error(V, n, "operand %d does not match the result list of its defining node", i + 1);
            sound = false;
        } else if (dpos >= idx) {
            node_error(V, n, "operand %d is used before its definition (defined by node %d at position %d, used at %d)", i + 1, def->id,
                       dpos, idx);
            sound = false;
        } else if (n->phase == PH_STEP && def->phase == PH_MICRO && !op_has(def->op, OPF_SOURCE)) {
            node_error(V, n, "a step node reads operand %d, a micro-batch value; only sources may cross from the micro-batch phase into the step",
                       i + 1);
        }
    }
    /* results */
    for (int i = 0; i < n->nout; i++) {
        Value *v = n->out[i];
        if (v->def != n || v->res != i) {
            node_error(V, n, "result %d does not point back at its node (def/res mismatch)", i + 1);
            sound = false;
        }
        if (v->id < 0 || v->id >= g->nvalues) {
            node_error(V, n, "result %d has an id (%d) outside the graph's values", i + 1, v->id);
            sound = false;
        } else if (V->def_of[v->id] && V->def_of[v->id] != n) {
            node_error(V, n, "result %d (value id %d) is also defined by another node", i + 1, v->id);
            sound = false;
        }
        if (!type_ok(&v->ty)) {
            node_error(V, n, "result %d has a malformed type (bad dtype, rank, or a dimension that is not positive)", i + 1);
            sound = false;
        }
    }
    for (int i = 0; i < n->nin && sound; i++)
        if (!type_ok(&n->in[i]->ty)) sound = false;
    if (sound) reinfer(V, n);
}

/* ---- source names ---- */

typedef struct NamedNode { int op; const char *name; int idx; Node *n; } NamedNode;

static int cmp_named(const void *a, const void *b) {
    const NamedNode *x = a, *y = b;
    if (x->op != y->op) return x->op - y->op;
    int c = strcmp(x->name, y->name);
    return c ? c : x->idx - y->idx;
}

static void check_source_names(Verifier *V) {
    Graph *g = V->g;
    NamedNode *v = xcalloc((size_t)g->nnodes + 1, sizeof *v);
    int k = 0;
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (!n || (unsigned)n->op >= OP__COUNT) continue;
        if (n->op != OP_input && n->op != OP_param && n->op != OP_state) continue;
        const char *s = ir_source_name(n);
        if (!s) continue;  /* reported by re-inference */
        if (!*s) {
            node_error(V, n, "%s has an empty name", op_name(n->op));
            continue;
        }
        if (n->op != OP_input && strchr(s, ',')) { /* a checkpoint lists its params' names comma-separated (docs/runtime.md) */
            node_error(V, n, "%s name '%s' has a comma", op_name(n->op), s);
            continue;
        }
        v[k++] = (NamedNode){n->op, s, i, n};
    }
    qsort(v, (size_t)k, sizeof *v, cmp_named);
    for (int i = 1; i < k; i++)
        if (v[i].op == v[i - 1].op && strcmp(v[i].name, v[i - 1].name) == 0) {
            node_error(V, v[i].n, "%s name '%s' is already used by another %s", op_name(v[i].n->op), v[i].name, op_name(v[i].n->op));
            note_at(V->d, v[i - 1].n->loc, "the other %s is here", op_name(v[i].n->op));
        }
    free(v);
}

/* ---- outputs ---- */

static int cmp_str(const void *a, const void *b) {
    const char *const *x = a, *const *y = b;
    return strcmp(*x, *y);
}

static void check_outputs(Verifier *V) {
    Graph *g = V->g;
    unsigned char *updated = xcalloc((size_t)g->nextnode + 1, 1);
    const char **names = xcalloc((size_t)g->noutputs + 1, sizeof(char *));
    int nnames = 0;
    for (int i = 0; i < g->noutputs; i++) {
        Output *o = &g->outputs[i];
        const char *what = o->kind == OUT_RESULT ? "output" : "update of";
        const char *nm = o->name ? o->name : "?";
        Node *def = defined_in_graph(V, o->value);
        if (!def || o->value->res < 0 || o->value->res >= def->nout || def->out[o->value->res] != o->value) {
            error_at(V->d, NOLOC, "%s '%s' refers to a value that is not defined in the graph", what, nm);
            continue;
        }
        if (o->kind == OUT_RESULT) {
            if (!o->name) error_at(V->d, def->loc, "an output has no name");
            else names[nnames++] = o->name;
            continue;
        }
        if (o->kind != OUT_UPDATE) {
            error_at(V->d, def->loc, "output %d has an invalid kind", i);
            continue;
        }
        Node *t = o->target;
        bool in_graph = t && t->id >= 0 && t->id < g->nextnode && V->pos[t->id] && g->nodes[V->pos[t->id] - 1] == t;
        if (!in_graph) {
            error_at(V->d, def->loc, "update of '%s': the target is not a node of the graph", nm);
            continue;
        }
        if (t->op != OP_param && t->op != OP_state) {
            node_error(V, t, "is the target of an update but is not a param or state");
            continue;
        }
        /* once per phase: a gradient accumulator is updated after every
         * micro-batch and reset by the step */
        unsigned bit = def->phase == PH_STEP ? 2u : 1u;
        if (updated[t->id] & bit)
            node_error(V, t, "is updated twice in the %s phase (update of '%s')", def->phase == PH_STEP ? "step" : "micro-batch", nm);
        updated[t->id] |= bit;
        char a[200], b[200];
        if (!type_eq(&o->value->ty, &t->out[0]->ty))
            node_error(V, t, "the update of '%s' gives a value of type %s, but the %s is %s", nm, type_str(&o->value->ty, a, sizeof a),
                       op_name(t->op), type_str(&t->out[0]->ty, b, sizeof b));
    }
    qsort(names, (size_t)nnames, sizeof *names, cmp_str);
    for (int i = 1; i < nnames; i++)
        if (strcmp(names[i], names[i - 1]) == 0 && (i == 1 || strcmp(names[i], names[i - 2]) != 0))
            error_at(V->d, NOLOC, "output name '%s' is used more than once", names[i]);
    free(names);
    free(updated);
}

/* ---- gradient accumulation ----
 * The optimizer pass (passes/optimizer.c) gives every trainable param it
 * updates an accumulator, state grad_acc.<p>, when grad_accum > 1, and
 * none when it is 1; the runtime runs grad_accum micro-batches a step.  A
 * header that says otherwise (an .ir file's train line edited, or set
 * with -D after the optimizer ran) would train another way than the graph
 * was built for. */
static void check_accum(Verifier *V) {
    Graph *g = V->g;
    Node *acc = NULL, *updated = NULL;
    for (int i = 0; i < g->nnodes && !acc; i++) {
        Node *n = g->nodes[i];
        const char *name = n->op == OP_state ? ir_source_name(n) : NULL;
        if (name && strncmp(name, "grad_acc.", 9) == 0) acc = n;
    }
    for (int i = 0; i < g->noutputs && !updated; i++) {
        Output *o = &g->outputs[i];
        if (o->kind == OUT_UPDATE && o->target && o->target->op == OP_param && ir_is_trainable(o->target)) updated = o->target;
    }
    SrcLoc at = train_loc(&g->train, "grad_accum");
    if (!at.file) at = g->training_loc;
    long long n = (long long)g->train.grad_accum;
    if (acc && n <= 1) {
        error_at(V->d, at, "grad_accum is %lld, but graph '%s' accumulates gradients over micro-batches (state '%s'): the optimizer built it for grad_accum > 1",
                 n, g->name, ir_source_name(acc));
        note_at(V->d, acc->loc, "the accumulator is here");
    } else if (!acc && updated && n > 1) {
        error_at(V->d, at, "grad_accum is %lld, but graph '%s' updates '%s' with no gradient accumulator (state grad_acc.%s): the optimizer built it for grad_accum = 1",
                 n, g->name, ir_source_name(updated), ir_source_name(updated));
    }
}

bool ir_verify(Graph *g, Diag *d) {
    int errors = d->nerrors;
    Verifier V = {g, d, d->max_errors ? d->max_errors : 20, NULL, NULL, NULL, NULL, NULL, 0};
    if (!g->name) error_at(d, NOLOC, "the graph has no name");
    V.pos = xcalloc((size_t)g->nextnode + 1, sizeof(int));
    V.def_of = xcalloc((size_t)g->nvalues + 1, sizeof(Node *));
    V.scratch = ir_graph_new("verify");
    /* positions and definitions first, so that errors can say where things are */
    bool listed_ok = true;
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (!n) {
            error_at(d, NOLOC, "node %d of the list is NULL", i);
            listed_ok = false;
            continue;
        }
        if (n->id < 0 || n->id >= g->nextnode) {
            error_at(d, n->loc, "node at position %d has an id (%d) outside the graph's nodes", i, n->id);
            listed_ok = false;
            continue;
        }
        if (V.pos[n->id]) {
            error_at(d, n->loc, "node %d appears twice in the node list (positions %d and %d)", n->id, V.pos[n->id] - 1, i);
            listed_ok = false;
            continue;
        }
        V.pos[n->id] = i + 1;
        for (int r = 0; r < n->nout && n->out; r++) {
            Value *v = n->out[r];
            if (v && v->id >= 0 && v->id < g->nvalues && !V.def_of[v->id]) V.def_of[v->id] = n;
        }
    }
    if (listed_ok) {
        int phase = PH_MICRO;
        for (int i = 0; i < g->nnodes; i++) check_node(&V, g->nodes[i], i, &phase);
        check_source_names(&V);
        check_outputs(&V);
        check_accum(&V);
    }
    ir_graph_free(V.scratch);
    if (V.inf) fclose(V.inf);
    free(V.infbuf);
    free(V.pos);
    free(V.def_of);
    return d->nerrors == errors;
}

bool pass_verify(Graph *g, const PassOptions *po, Diag *d) {
    (void)po;
    return ir_verify(g, d);
}
