/* codegen/lower.c — from graphs to a schedule of kernels.
 *
 * Each schedule (see cg.h) is lowered from one graph and phase.  Walking the
 * nodes in order:
 *   - sources become persistent buffers (params, states, inputs), or inline
 *     expressions (constant, iota);
 *   - view ops (reshape, permute, broadcast, slice) become strided views of
 *     their operand's buffer, so nothing is copied unless a consumer needs a
 *     layout the view cannot give;
 *   - pointwise ops join the loop kernel of an operand when the iteration
 *     spaces agree and no dependency cycle results (generic fusion): a value
 *     read only inside its loop kernel is never stored;
 *   - a reduction absorbs the pointwise loop that feeds it (prologue) and the
 *     pointwise ops that consume its result (epilogue);
 *   - matmul becomes a GEMM, absorbing a following bias add as its epilogue;
 *   - every other op is a template kernel.
 * Kernels are then ordered topologically, keeping the graph's order where
 * dependencies allow, and updates of params and states are written in place
 * by their producing kernel when that is safe, or copied at the end.
 */
#include "cg.h"
#include "cuda.h"
#include "loops.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Lower {
    Program *p;
    Sched   *s;
    Graph   *g;
    Diag    *d;
    bool     fuse;
    Uses    *uses;
    bool    *in_sched;        /* by node id: node belongs to this schedule */
    bool    *done;            /* by node id: already lowered (absorbed by a GEMM) */
    int      nkern;           /* kernels created (creation order) */
    unsigned *seen;           /* by kernel id: depends_on's visit stamp */
    int      nseen;
    unsigned stamp;
    struct BgradPlan *bg;     /* by node id of a product: the bias gradient it sums (bgrad_plans) */
    Node   **bg_of;           /* by node id of such a sum and its cast: the product */
    bool    *waits;           /* by node id of a product: lowered at its gelu_grad (dgelu_waits) */
    struct LoopBudget *lb;    /* by kernel id: a loop kernel's bound on its accesses (loop_budget) */
    int      nlb;
    int     *inuse;           /* by value id: its operand slots read inside the loop kernel that computes it */
    bool     failed;          /* an error was reported (the schedule is not made) */
    int     *pos;             /* by node id: its index in the graph's order (lowering adds no node) */
} Lower;

/* A product that also computes a bias gradient: the sum it absorbs, the
 * widening cast before it (or NULL), and which operand it sums. */
typedef struct BgradPlan {
    Node     *sum, *cast;
    GemmBgrad which;
} BgradPlan;

/* ---- small helpers ---- */

const char *cg_kind_name(KernKind k) {
    static const char *const names[] = {"loop", "gemm", "template", "copy", "fill"};
    return names[k];
}

Buf *cg_buf(Program *p, int id) { return &p->bufs[id]; }

static int new_buf(Program *p, BufKind kind, Type ty, const char *name, Value *v, int sched) {
    if (p->nbufs == p->capbufs) {
        p->capbufs = p->capbufs ? 2 * p->capbufs : 256;
        p->bufs = xrealloc(p->bufs, sizeof(Buf) * (size_t)p->capbufs);
    }
    Buf *b = &p->bufs[p->nbufs];
    memset(b, 0, sizeof *b);
    b->id = p->nbufs;
    b->kind = kind;
    b->dt = ty.dt;
    b->shape = ty.shape;
    b->bytes = shape_numel(&ty.shape) * dtype_size[ty.dt];
    b->offset = -1;
    b->name = name;
    b->value = v;
    b->sched = sched;
    b->first = b->last = -1;
    b->share = -1;
    return p->nbufs++;
}

static Kernel *new_kernel(Lower *L, KernKind kind, Node *n) {
    Sched *s = L->s;
    Kernel *k = arena_alloc(L->p->arena, sizeof *k);
    k->kind = kind;
    k->id = L->nkern++;
    k->order = n ? L->pos[n->id] : 1 << 30;
    k->loc = n ? n->loc : NOLOC;
    if (s->nk == s->capk) {
        s->capk = s->capk ? 2 * s->capk : 64;
        s->k = xrealloc(s->k, sizeof(Kernel *) * (size_t)s->capk);
    }
    s->k[s->nk++] = k;
    return k;
}

static void kern_add_node(Lower *L, Kernel *k, Node *n) {
    if (k->nnodes == k->capnodes) {
        int cap = k->capnodes ? 2 * k->capnodes : 8;
        Node **nn = arena_alloc(L->p->arena, sizeof(Node *) * (size_t)cap);
        if (k->nnodes) memcpy(nn, k->nodes, sizeof(Node *) * (size_t)k->nnodes);
        k->nodes = nn;
        k->capnodes = cap;
    }
    k->nodes[k->nnodes++] = n;
}

static void kern_add_dep(Kernel *k, Kernel *dep) {
    if (!dep || dep == k) return;
    for (int i = 0; i < k->ndeps; i++)
        if (k->deps[i] == dep->id) return;
    if (k->ndeps == k->capdeps) {
        k->capdeps = k->capdeps ? 2 * k->capdeps : 8;
        k->deps = xrealloc(k->deps, sizeof(int) * (size_t)k->capdeps);
    }
    k->deps[k->ndeps++] = dep->id;
}

/* While lowering, a kernel's id is its index in the schedule. */
static Kernel *kern_by_id(Sched *s, int id) {
    if (id >= 0 && id < s->nk && s->k[id]->id == id) return s->k[id];
    for (int i = 0; i < s->nk; i++)
        if (s->k[i]->id == id) return s->k[i];
    return NULL;
}

/* Does kernel `from` depend (transitively) on kernel `on`?  Each kernel is
 * visited once per query (a stamp per kernel): without it the search is
 * exponential in the depth of a graph with many shared operands.  The
 * search is not cut at kernels made before `on`: a loop kernel may depend
 * on a newer one (it took a node reading that kernel's value), and a path
 * through it once went unseen, a node reading the older kernel's value
 * joined the newer one, and the schedule had a cycle. */
static bool depends_on_rec(Lower *L, Kernel *from, Kernel *on) {
    if (from == on) return true;
    if (L->seen[from->id] == L->stamp) return false;
    L->seen[from->id] = L->stamp;
    for (int i = 0; i < from->ndeps; i++) {
        Kernel *d = kern_by_id(L->s, from->deps[i]);
        if (d && depends_on_rec(L, d, on)) return true;
    }
    return false;
}

static bool depends_on(Lower *L, Kernel *from, Kernel *on) {
    if (L->nseen < L->nkern) {
        L->seen = xrealloc(L->seen, sizeof(unsigned) * (size_t)(2 * L->nkern));
        memset(L->seen + L->nseen, 0, sizeof(unsigned) * (size_t)(2 * L->nkern - L->nseen));
        L->nseen = 2 * L->nkern;
    }
    if (++L->stamp == 0) {
        memset(L->seen, 0, sizeof(unsigned) * (size_t)L->nseen);
        L->stamp = 1;
    }
    return depends_on_rec(L, from, on);
}

static ValInfo *VI(Lower *L, Value *v) { return &L->s->vi[v->id]; }

/* ---- materialisation ---- */

static uint32_t pslot_hash(BufKind kind, const char *s) { return (uint32_t)ir_hash(IR_HASH0 ^ (uint64_t)kind, s, strlen(s)); }

/* The slot of (kind, name) in p->pslot: its buffer's, or the empty one
 * where it goes. */
static int *pslot_find(Program *p, BufKind kind, const char *name) {
    uint32_t m = (uint32_t)p->pcap - 1, i = pslot_hash(kind, name) & m;
    for (; p->pslot[i]; i = (i + 1) & m) {
        Buf *b = &p->bufs[p->pslot[i] - 1];
        if (b->kind == kind && strcmp(b->name, name) == 0) break;
    }
    return &p->pslot[i];
}

/* The buffer of a source (one per kind and name, for every schedule):
 * found in p->pslot, made the first time. */
static int persistent_buf(Lower *L, Node *n) {
    Program *p = L->p;
    const char *name = ir_source_name(n);
    BufKind kind = n->op == OP_param ? BK_PARAM : n->op == OP_state ? BK_STATE : BK_INPUT;
    if (2 * (p->pn + 1) > p->pcap) { /* grow: the buffers again into twice the slots */
        int *old = p->pslot, ocap = p->pcap;
        p->pcap = ocap ? 2 * ocap : 256;
        p->pslot = xcalloc((size_t)p->pcap, sizeof(int));
        for (int i = 0; i < ocap; i++)
            if (old[i]) *pslot_find(p, p->bufs[old[i] - 1].kind, p->bufs[old[i] - 1].name) = old[i];
        free(old);
    }
    int *slot = pslot_find(p, kind, name);
    if (*slot) {
        Buf *b = &p->bufs[*slot - 1];
        if (!type_eq(&(Type){b->dt, b->shape}, &n->out[0]->ty)) die("source '%s' has different types in two schedules", name);
        return *slot - 1;
    }
    int id = new_buf(p, kind, n->out[0]->ty, arena_strdup(p->arena, name), n->out[0], -1);
    *slot = id + 1;
    p->pn++;
    return id;
}

static int temp_buf(Lower *L, Value *v) {
    return new_buf(L->p, BK_TEMP, v->ty, v->name, v, (int)L->s->which);
}

/* v stored whole in a temporary buffer of its own. */
static void temp_result(Lower *L, Value *v) {
    ValInfo *vi = VI(L, v);
    vi->st = VS_BUF;
    view_contig(&vi->view, temp_buf(L, v), &v->ty.shape);
}

/* Makes v available in a buffer (VS_BUF or VS_VIEW).  A value computed inside
 * a loop kernel gets stored by that kernel; an inline constant or iota gets a
 * fill/loop kernel of its own. */
static void lower_source(Lower *L, Node *n);

static void materialise(Lower *L, Value *v) {
    ValInfo *vi = VI(L, v);
    if (vi->st == VS_NONE && op_has(v->def->op, OPF_SOURCE)) lower_source(L, v->def);
    if (vi->st == VS_BUF || vi->st == VS_VIEW) return;
    if (vi->st == VS_NONE) die("materialise: value %%%d has not been lowered", v->id);
    int b = temp_buf(L, v);
    if (vi->kern) {
        /* stored by the loop kernel that computes it */
        view_contig(&vi->view, b, &v->ty.shape);
        vi->st = VS_BUF;
        return;
    }
    /* an inline source (constant or iota): a kernel of its own */
    Node *src = v->def;
    Kernel *k;
    if (src->op == OP_constant) {
        k = new_kernel(L, KK_FILL, src);
        k->fill = ir_float(src, "value", 0);
        view_contig(&k->dst, b, &v->ty.shape);
    } else {
        k = new_kernel(L, KK_LOOP, src);
        k->space = v->ty.shape;
    }
    kern_add_node(L, k, src);
    k->order = 0; /* sources have no inputs: they can run first */
    vi->kern = k;
    view_contig(&vi->view, b, &v->ty.shape);
    vi->st = VS_BUF;
}

/* The producing kernel of a buffer-backed value (NULL for persistent buffers
 * with no producer in this schedule). */
static Kernel *producer(Lower *L, Value *v) { return VI(L, v)->kern; }

/* Makes v available as a contiguous buffer; returns its view.  A non-contiguous
 * view gets a copy kernel. */
/* v's view moves to copy: later readers use the copy; so do the loop
 * kernels already made that read v, which find its view when they are
 * emitted: they run after the copy (a sum over a permuted gradient,
 * lowered before the embedding backward asked for the copy, read it
 * before it was made).  prod: v's producer; consumer: the kernel that
 * asked for the copy (NULL: none). */
static void readers_wait(Lower *L, Value *v, Kernel *copy, Kernel *prod, Kernel *consumer) {
    for (int i = 0; i < L->s->nk; i++) {
        Kernel *r = L->s->k[i];
        if (r == copy || r == consumer || r == prod) continue;
        for (int a = 0; a < r->nnodes; a++)
            for (int j = 0; j < r->nodes[a]->nin; j++)
                if (r->nodes[a]->in[j] == v) kern_add_dep(r, copy);
    }
}

static View contiguous(Lower *L, Value *v, Kernel *consumer) {
    materialise(L, v);
    ValInfo *vi = VI(L, v);
    if (vi->st == VS_BUF || view_is_contig(&vi->view)) {
        kern_add_dep(consumer, producer(L, v));
        return vi->view;
    }
    int b = temp_buf(L, v);
    Kernel *k = new_kernel(L, KK_COPY, v->def);
    k->src = vi->view;
    view_contig(&k->dst, b, &v->ty.shape);
    kern_add_dep(k, producer(L, v));
    kern_add_node(L, k, v->def);
    k->order = consumer->order;
    readers_wait(L, v, k, vi->kern, consumer);
    vi->st = VS_BUF;
    view_contig(&vi->view, b, &v->ty.shape);
    vi->kern = k;
    kern_add_dep(consumer, k);
    return vi->view;
}

/* ---- node classes ---- */

/* Ops computed element by element inside loop kernels. */
static bool is_loop_op(Op op) {
    return op_has(op, OPF_POINTWISE) || op == OP_dropout || op == OP_clip_coef || op == OP_max_grad;
}

/* ---- view ops ---- */

static bool view_eq(const View *a, const View *b) {
    if (a->buf != b->buf || a->off != b->off || a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i] || a->stride[i] != b->stride[i]) return false;
    return true;
}

/* Where operand i of concat c lies in c's result: a view of its buffer. */
static View concat_slot(Lower *L, Node *c, int i) {
    int ax = (int)ir_int(c, "axis", 0);
    int64_t at = 0;
    for (int j = 0; j < i; j++) at += c->in[j]->ty.shape.d[ax];
    View v = VI(L, c->out[0])->view;
    view_slice(&v, ax, at, at + c->in[i]->ty.shape.d[ax]);
    return v;
}

static void lower_view(Lower *L, Node *n) {
    Value *x = n->in[0], *y = n->out[0];
    materialise(L, x);
    ValInfo *xi = VI(L, x), *yi = VI(L, y);
    View v = xi->view;
    bool ok = true;
    switch (n->op) {
    case OP_reshape: ok = view_reshape(&v, &y->ty.shape); break;
    case OP_permute: ok = view_permute(&v, ir_attr(n, "perm")->v); break;
    case OP_broadcast: ok = view_broadcast(&v, &y->ty.shape); break;
    case OP_slice: ok = view_slice(&v, (int)ir_int(n, "axis", 0), ir_int(n, "start", 0), ir_int(n, "end", 0)); break;
    default: unreachable();
    }
    if (!ok) {
        /* not expressible as a view of x's buffer: copy x contiguous first
         * (only reshape of a strided view can fail) */
        View c = xi->view;
        int b = temp_buf(L, x);
        Kernel *k = new_kernel(L, KK_COPY, n);
        k->src = c;
        view_contig(&k->dst, b, &x->ty.shape);
        kern_add_dep(k, producer(L, x));
        kern_add_node(L, k, n);
        view_contig(&v, b, &x->ty.shape);
        if (!view_reshape(&v, &y->ty.shape)) die("reshape of a contiguous buffer failed");
        yi->kern = k;
    } else {
        yi->kern = xi->kern;
    }
    yi->st = view_is_contig(&v) && v.rank == y->ty.shape.rank ? VS_BUF : VS_VIEW;
    yi->view = v;
    if (yi->st == VS_BUF && v.off != 0) yi->st = VS_VIEW;
}

/* ---- loop kernels (generic fusion) ---- */

/* The access budget of a loop kernel.  Its access analysis (loops.c) holds
 * at most LOOP_MAXACC accesses, and the emitters size their tables by it:
 * a node that could take a kernel past that does not join it, and starts
 * a kernel of its own (a chain of 300 adds of params is two kernels).
 * What a kernel will store is not known while it grows, so the count is a
 * bound, kept as nodes join: a load for each distinct operand computed
 * elsewhere, by value and by whether the epilogue reads it (constants
 * too: one materialised is loaded); a virtual access for each iota
 * operand, iota and dropout; a store for each result that a node outside
 * the kernel, an output or an update may still read (one whose readers
 * have not all joined it). */
typedef struct LoopBudget {
    int      nacc;            /* the bound */
    int64_t *keys;            /* the loads counted: value id * 4 + post * 2 + unreduced (max_grad's view) */
    int      nkeys, capkeys;
} LoopBudget;

static LoopBudget *budget_of(Lower *L, const Kernel *k) {
    if (k->id >= L->nlb) {
        int n = 2 * k->id + 16;
        L->lb = xrealloc(L->lb, sizeof *L->lb * (size_t)n);
        memset(L->lb + L->nlb, 0, sizeof *L->lb * (size_t)(n - L->nlb));
        L->nlb = n;
    }
    return &L->lb[k->id];
}

/* The most accesses a loop kernel of this program's target may have. */
static int loop_maxacc(const Lower *L) { return strcmp(L->p->target, "cuda") == 0 ? LOOP_MAXACC_CUDA : LOOP_MAXACC; }

/* May v, computed in a loop kernel that reads it in `inside` operand slots,
 * be read elsewhere (stored)? */
static bool may_escape(Lower *L, const Value *v, int inside) {
    return inside < L->uses->of[v->id].n || L->uses->nout_refs[v->id] > 0;
}

/* The bound on loop kernel k's accesses with node n joined (n is in the
 * epilogue when k has its reduction already); commit: n joins. */
static int loop_budget(Lower *L, Kernel *k, Node *n, bool commit) {
    LoopBudget *b = budget_of(L, k);
    bool post = k->red != NULL;
    int nacc = b->nacc;
    int64_t fresh[LOOP_MAXIN];
    int nfresh = 0;
    for (int j = 0; j < n->nin; j++) {
        Value *x = n->in[j];
        ValInfo *xi = VI(L, x);
        if (xi->inl && xi->kern == k) {
            /* computed here: no load, and no store once n was its last reader */
            int c = 0;
            bool first = true;
            for (int q = 0; q < n->nin; q++)
                if (n->in[q] == x) {
                    c++;
                    first &= q >= j;
                }
            if (!first) continue;
            if (may_escape(L, x, L->inuse[x->id]) && !may_escape(L, x, L->inuse[x->id] + c)) nacc--;
            if (commit) L->inuse[x->id] += c;
            continue;
        }
        if (j >= LOOP_MAXIN) continue;
        if (x->def->op == OP_iota) { /* virtual: never merged */
            nacc++;
            continue;
        }
        int64_t key = (int64_t)x->id * 4 + post * 2 + (n->op == OP_max_grad && j != 1);
        bool seen = false;
        for (int q = 0; q < b->nkeys && !seen; q++) seen = b->keys[q] == key;
        for (int q = 0; q < nfresh && !seen; q++) seen = fresh[q] == key;
        if (seen) continue;
        fresh[nfresh++] = key;
        nacc++;
    }
    if (n->op == OP_dropout || n->op == OP_iota) nacc++;
    for (int r = 0; r < n->nout; r++) nacc += may_escape(L, n->out[r], 0);
    if (commit) {
        b->nacc = nacc;
        for (int q = 0; q < nfresh; q++) {
            if (b->nkeys == b->capkeys) {
                b->capkeys = b->capkeys ? 2 * b->capkeys : 16;
                b->keys = xrealloc(b->keys, sizeof *b->keys * (size_t)b->capkeys);
            }
            b->keys[b->nkeys++] = fresh[q];
        }
    }
    return nacc;
}

/* Can node n (a loop op, or a reduction when red) join loop kernel k? */
static bool can_join(Lower *L, Kernel *k, Node *n, bool red) {
    if (!L->fuse || k->kind != KK_LOOP) return false;
    if (k->nnodes == 1 && (k->nodes[0]->op == OP_iota)) return false;
    const Shape *space = red ? &n->in[0]->ty.shape : &n->out[0]->ty.shape;
    if (red) {
        if (k->red || !shape_eq(&k->space, space)) return false;
    } else if (k->red) {
        if (!shape_eq(&k->rspace, space)) return false;
    } else if (!shape_eq(&k->space, space)) {
        return false;
    }
    if (n->op == OP_max_grad) return false; /* reads reduced values in the reduced space */
    for (int i = 0; i < n->nin; i++) {
        ValInfo *vi = VI(L, n->in[i]);
        if (vi->inl && vi->kern == k) {
            /* computed here: must be available where n runs */
            if (k->red && !vi->post) return false;
            continue;
        }
        /* computed elsewhere: that kernel must not depend on k */
        if (vi->kern && depends_on(L, vi->kern, k)) return false;
    }
    return loop_budget(L, k, n, false) <= loop_maxacc(L);
}

/* Horizontal fusion: a pointwise node none of whose operands a loop kernel
 * computes joins the loop kernel made just before it when that one has the
 * same space, no reduction, and reads one of the node's operands (the
 * SwiGLU backward: d.gate = silu_grad(dh up, gate) and d.up = dh
 * silu(gate), two passes over dh and gate made one).  Only the last
 * kernel: joining an earlier one would compute the node earlier and keep
 * its result live longer. */
static Kernel *sibling_loop(Lower *L, Node *n, bool red) {
    Kernel *k = L->s->nk ? L->s->k[L->s->nk - 1] : NULL;
    if (red || !k || k->kind != KK_LOOP || k->red || !can_join(L, k, n, red)) return NULL;
    for (int i = 0; i < n->nin; i++) {
        ValInfo *xi = VI(L, n->in[i]);
        if (xi->st != VS_BUF && xi->st != VS_VIEW) continue;
        for (int a = 0; a < k->nnodes; a++)
            for (int b = 0; b < k->nodes[a]->nin; b++)
                if (k->nodes[a]->in[b] == n->in[i]) return k;
    }
    return NULL;
}

static void lower_loop(Lower *L, Node *n, bool red) {
    Kernel *k = NULL;
    for (int i = 0; i < n->nin && !k; i++) {
        ValInfo *vi = VI(L, n->in[i]);
        if (vi->inl && vi->kern && can_join(L, vi->kern, n, red)) k = vi->kern;
    }
    if (!k) k = sibling_loop(L, n, red);
    if (!k) {
        k = new_kernel(L, KK_LOOP, n);
        k->space = red ? n->in[0]->ty.shape : n->out[0]->ty.shape;
    }
    loop_budget(L, k, n, true); /* before k->red is set: a reduction reads its operands before it */
    if (red) {
        k->red = n;
        k->rspace = n->out[0]->ty.shape;
    }
    for (int i = 0; i < n->nin; i++) {
        Value *x = n->in[i];
        ValInfo *xi = VI(L, x);
        if (xi->st == VS_NONE && op_has(x->def->op, OPF_SOURCE)) lower_source(L, x->def);
        if (xi->inl && xi->kern == k) continue;         /* computed here */
        if (xi->st == VS_INLINE && !xi->kern) continue; /* inline constant / iota */
        materialise(L, x);
        kern_add_dep(k, xi->kern);
    }
    kern_add_node(L, k, n);
    for (int j = 0; j < n->nout; j++) {
        ValInfo *yi = VI(L, n->out[j]);
        yi->st = VS_INLINE;
        yi->kern = k;
        yi->inl = true;
        yi->post = k->red != NULL;
    }
}

/* ---- GEMM ---- */

/* An operand's layout is cg_gemm_layout's (loops.c), the function the
 * emitters read: the layout planned here (a batch folded into M at the
 * rows' stride) is the one they emit; false: the operand is copied. */

static View gemm_operand(Lower *L, Value *x, Kernel *k) {
    materialise(L, x);
    ValInfo *xi = VI(L, x);
    int t;
    int64_t ld;
    if (cg_gemm_layout(&xi->view, &t, &ld)) {
        kern_add_dep(k, producer(L, x));
        return xi->view;
    }
    return contiguous(L, x, k);
}

static Node *only_use(Lower *L, Value *v, Op op);
static void after_readers(Lower *L, Kernel *k, int buf);

/* BLAS and cuBLASLt take a product's sizes and leading dimensions as int:
 * node n's products with one of the nd sizes v (named names) past INT_MAX
 * are an error of the model, reported once. */
static void gemm_ints(Lower *L, const Node *n, int nd, const char *const *names, const int64_t *v) {
    for (int i = 0; i < nd && !L->failed; i++)
        if (v[i] > INT_MAX) {
            error_at(L->d, n->loc, "%s: a matrix product's %s is %lld, more than the 2^31 - 1 that BLAS and cuBLASLt take", op_name(n->op), names[i],
                     (long long)v[i]);
            L->failed = true;
        }
}

/* The param or state whose update is v (`update %t = v`), or NULL. */
static Node *update_target(Lower *L, const Value *v) {
    for (int o = 0; o < L->g->noutputs; o++) {
        Output *out = &L->g->outputs[o];
        if (out->kind == OUT_UPDATE && out->value == v) return out->target;
    }
    return NULL;
}

/* y's only reader when it is `add(y, o)` of y's type with another operand
 * o of that type (in *o), which the kernel computing y may absorb. */
static Node *sole_add(Lower *L, Value *y, Value **o) {
    Node *add = L->fuse ? only_use(L, y, OP_add) : NULL;
    if (!add || !type_eq(&add->out[0]->ty, &y->ty)) return NULL;
    *o = add->in[add->in[0] == y ? 1 : 0];
    return *o != y && type_eq(&(*o)->ty, &y->ty) ? add : NULL;
}

/* Gradient accumulation (passes/optimizer.c, grad_accum > 1): an f32
 * gradient y read only by `acc' = add(acc, y)`, acc a state whose update
 * is acc' and acc' read by nothing else, is summed into the state by the
 * kernel that computes it: a product (C = acc, beta = 1), a backward
 * norm's dw and db (Kernel.acc_grads).  No temporary, no add kernel.
 * Returns the add, and the state in *state. */
static Node *accumulating_add(Lower *L, Value *y, Value **state) {
    Value *sv;
    Node *add = y->ty.dt == DT_f32 ? sole_add(L, y, &sv) : NULL;
    if (!add || sv->def->op != OP_state) return NULL;
    Value *r = add->out[0];
    if (L->uses->of[r->id].n || update_target(L, r) != sv->def) return NULL;
    UseList *su = &L->uses->of[sv->id]; /* in this schedule only the add reads the state (the step's update reads it too) */
    for (int i = 0; i < su->n; i++)
        if (su->u[i].node != add && L->in_sched[su->u[i].node->id]) return NULL;
    *state = sv;
    return add;
}

/* A product summed with another value of its type that dies there
 * (`r = add(y, o)`, o read by nothing else): the sum of two products into
 * one input gradient (Llama's q, k and v projections, its gate and up
 * projections), written by the GEMM into o's buffer (C = o, beta = 1)
 * instead of into a temporary that an add kernel then reads with o.  o
 * must already be in a temporary buffer of its own, whole and contiguous.
 * (The C backend rounds the product and then the sum, as the add would;
 * cuBLASLt rounds the sum once.)  Returns the add and o. */
static Node *summing_add(Lower *L, Value *y, Value **other) {
    Value *o;
    Node *add = sole_add(L, y, &o);
    if (!add || L->uses->of[o->id].n != 1 || L->uses->nout_refs[o->id]) return NULL;
    ValInfo *oi = VI(L, o);
    if (oi->st != VS_BUF || !view_is_contig(&oi->view) || oi->view.off != 0) return NULL;
    Buf *b = &L->p->bufs[oi->view.buf];
    if (b->kind != BK_TEMP || b->dt != y->ty.dt || shape_numel(&b->shape) != shape_numel(&y->ty.shape)) return NULL;
    /* nothing but o is read from the buffer from now on: it was made for o,
     * or for values that lead only to o (views of them, and sums that
     * earlier products added into it) */
    for (Value *v = b->value; v != o;) {
        UseList *vu = &L->uses->of[v->id];
        if (vu->n != 1 || L->uses->nout_refs[v->id]) return NULL;
        Node *u = vu->u[0].node;
        bool view = u->op == OP_reshape || u->op == OP_permute;
        bool summed = u->op == OP_add && L->done[u->id] && VI(L, u->out[0])->st == VS_BUF && VI(L, u->out[0])->view.buf == oi->view.buf;
        if (!view && !summed) return NULL;
        v = u->out[0];
    }
    *other = o;
    return add;
}

/* The add found by accumulating_add (acc, its state sv) or summing_add
 * (sum, its other summand ov), absorbed into kernel k, which writes the
 * sum in place: *view (of shape) is the state's own buffer or ov's, and
 * the add is done.  ov keeps its buffer: the kernel that computes it
 * still writes it there (a template finds its results by it; a loop
 * kernel stores only what has one), and nothing but the add reads it.
 * Returns the add. */
static Node *sum_in_place(Lower *L, Kernel *k, Node *acc, Value *sv, Node *sum, Value *ov, const Shape *shape, View *view) {
    Node *add = acc ? acc : sum;
    kern_add_node(L, k, add);
    L->done[add->id] = true;
    if (acc) {
        materialise(L, sv); /* the state's own buffer */
        view_contig(view, persistent_buf(L, sv->def), shape);
    } else {
        kern_add_dep(k, VI(L, ov)->kern);
        view_contig(view, VI(L, ov)->view.buf, shape);
        after_readers(L, k, view->buf);
    }
    return add;
}

/* A template kernel's result y summed in place (sum_in_place) by k, which
 * adds to what it writes (Kernel.acc_grads): y, and the add's result,
 * live in the state's or the other summand's buffer. */
static void tmpl_sum_in_place(Lower *L, Kernel *k, Value *y, Node *acc, Value *sv, Node *sum, Value *ov) {
    ValInfo *yi = VI(L, y);
    yi->st = VS_BUF;
    yi->kern = k;
    Node *add = sum_in_place(L, k, acc, sv, sum, ov, &y->ty.shape, &yi->view);
    *VI(L, add->out[0]) = *yi;
    k->acc_grads = true;
}

/* The dtypes cuBLASLt's GELU epilogues take: the product's operand a and
 * its result y (and r, what the epilogue applies to) all f32, bf16 or f16. */
static bool gelu_dtypes(const Node *mm, const Value *r) {
    DType dt = mm->out[0]->ty.dt;
    return (dt == DT_f32 || dt == DT_bf16 || dt == DT_f16) && mm->in[0]->ty.dt == dt && r->ty.dt == dt;
}

/* The gelu_grad(y, x) (tanh form) of this schedule, not lowered yet, that
 * alone reads product mm's result y, as the gradient of its output, with
 * x of y's type: what a DGELU epilogue takes in; NULL when there is none. */
static Node *dgelu_reader(Lower *L, Node *mm) {
    Value *y = mm->out[0];
    UseList *ul = &L->uses->of[y->id];
    if (ul->n != 1 || L->uses->nout_refs[y->id] || ul->u[0].idx != 0) return NULL;
    Node *u = ul->u[0].node;
    if (u->op != OP_gelu_grad || !L->in_sched[u->id] || L->done[u->id] || ir_int(u, "approx", 0) != 1) return NULL;
    Value *x = u->in[1];
    return x != y && type_eq(&u->out[0]->ty, &y->ty) && type_eq(&x->ty, &y->ty) ? u : NULL;
}

/* A GELU (tanh form: cuBLASLt's) that the GEMM computing r = a·b [+ bias]
 * can apply as it stores r (cuBLASLt's GELU_AUX_BIAS / DGELU epilogues):
 *   - forward: gelu(r), r read by nothing else in the forward but the
 *     gradient's gelu_grad (which then reads r from aux);
 *   - backward: gelu_grad(r, x), r (a plain product) read by nothing else:
 *     the product of the gradient of the activation's output is multiplied
 *     by the activation's derivative at x (aux) as it is stored.
 * One product (no batch), of a dtype cuBLASLt's epilogues take, its result
 * in that dtype, rows of a multiple of 8 elements (aux's leading dimension
 * must be).  Returns the gelu or gelu_grad node, gi->epi set. */
static Node *gelu_epilogue(Lower *L, Node *mm, Value *r, GemmInfo *gi) {
    Value *y = mm->out[0];
    if (!L->fuse || gi->nbatch || gi->N % 8 || !gelu_dtypes(mm, r)) return NULL;
    UseList *ul = &L->uses->of[r->id];
    Node *act = NULL;
    int nact = 0;
    for (int i = 0; i < ul->n; i++) {
        Node *u = ul->u[i].node;
        bool fwd = u->op == OP_gelu, bwd = u->op == OP_gelu_grad && ul->u[i].idx == 0 && r == y && u->in[1] != r;
        if ((fwd || bwd) && L->in_sched[u->id] && !L->done[u->id] && ir_int(u, "approx", 0) == 1 && type_eq(&u->out[0]->ty, &r->ty))
            act = u, nact++;
    }
    if (nact != 1) return NULL;
    if (act->op == OP_gelu_grad) {
        Value *x = act->in[1];
        if (dgelu_reader(L, mm) != act) return NULL;
        ValInfo *xi = VI(L, x);
        if (xi->st == VS_NONE && !op_has(x->def->op, OPF_SOURCE)) return NULL;
        gi->epi = GEPI_DGELU;
    } else {
        gi->epi = GEPI_GELU;
    }
    return act;
}

/* A product that would take its gelu_grad as a DGELU epilogue but for the
 * activation's input x, not lowered yet: gradient checkpointing recomputes
 * x after the product in graph order (the backward of a block starts with
 * the product of the gradient of its MLP's output, before the block's
 * forward is recomputed).  Such a product waits until the loop reaches its
 * gelu_grad (its only reader, so nothing needs it before) and is lowered
 * there, with the epilogue; its kernel still depends on what it reads, and
 * now on x's kernel. */
static bool dgelu_waits(Lower *L, Node *n) {
    Value *y = n->out[0];
    Node *u = L->fuse && gelu_dtypes(n, y) && y->ty.shape.d[y->ty.shape.rank - 1] % 8 == 0 ? dgelu_reader(L, n) : NULL;
    return u && VI(L, u->in[1])->st == VS_NONE && !op_has(u->in[1]->def->op, OPF_SOURCE);
}

/* ---- bias gradients (cuBLASLt's BGRADB / BGRADA epilogues) ---- */

/* The sum that is a linear layer's bias gradient, db = sum(dy) over every
 * dim but the last, for the product n that is the layer's weight gradient
 * and reads dy whole: op(a) = dy^T as [K, M] (ta) or op(b) = dy as
 * [K, N] (not tb), dy or its reshape to two dims.  The product then sums
 * dy's columns as it reads them, and a loop kernel's pass over dy goes.
 * The sum is of dy in f32, or of dy widened to f32 by a cast that nothing
 * else reads (mixed precision's); the product's result is f32 too
 * (cuBLASLt writes the bias gradient in C's type), and not TF32.  Every reader of db
 * comes after the product in graph order: the product computes db, not
 * the sum where it stood.  Fills *bp. */
static bool bgrad_plan(Lower *L, Node *n, const int *pos, BgradPlan *bp) {
    if (!L->fuse || n->nin != 2 || n->out[0]->ty.dt != DT_f32) return false;
    /* TF32 products: cuBLASLt may sum the operand as it rounds it for the
     * tensor cores; the loop kernel sums it exactly */
    if (L->p->tc.precision && strcmp(L->p->tc.precision, "tf32") == 0) return false;
    for (int i = 0; i < 2; i++) {
        if (i == 0 ? !ir_int(n, "ta", 0) : ir_int(n, "tb", 0) != 0) continue;
        Value *v = n->in[i];
        if (v->ty.shape.rank != 2) continue;
        int64_t len = v->ty.shape.d[1];
        Value *dy = v->def->op == OP_reshape ? v->def->in[0] : v;
        const Shape *ds = &dy->ty.shape;
        if (ds->rank < 2 || ds->d[ds->rank - 1] != len) continue;
        UseList *du = &L->uses->of[dy->id];
        for (int j = 0; j < du->n; j++) {
            Node *u = du->u[j].node, *cast = NULL;
            if (u->op == OP_cast && u->out[0]->ty.dt == DT_f32 && dy->ty.dt != DT_f32 && L->in_sched[u->id] && !L->done[u->id] &&
                L->uses->of[u->out[0]->id].n == 1 && !L->uses->nout_refs[u->out[0]->id]) {
                cast = u;
                u = L->uses->of[u->out[0]->id].u[0].node;
            } else if (dy->ty.dt != DT_f32) {
                continue;
            }
            if (u->op != OP_sum || !L->in_sched[u->id] || L->done[u->id] || ir_int(u, "keepdim", 0)) continue;
            const Shape *ss = &u->out[0]->ty.shape;
            const Attr *ax = ir_attr(u, "axes");
            if (ss->rank != 1 || ss->d[0] != len || u->out[0]->ty.dt != DT_f32 || !ax || ax->n != ds->rank - 1) continue;
            bool ok = true;
            for (int a = 0; a < ax->n; a++) ok &= ax->v[a] == a;
            UseList *su = &L->uses->of[u->out[0]->id];
            for (int r = 0; ok && r < su->n; r++) ok = pos[su->u[r].node->id] > pos[n->id];
            if (!ok) continue;
            bp->sum = u;
            bp->cast = cast;
            bp->which = i == 0 ? GBG_A : GBG_B;
            return true;
        }
    }
    return false;
}

/* Every product's bias gradient, planned before the schedule is lowered:
 * the sum (and its cast) are marked done, and the product takes them up
 * (lower_matmul), or lowers them after all (lower_bgrad, bgrad_recheck). */
static void bgrad_plans(Lower *L) {
    int *pos = xcalloc((size_t)L->g->nextnode + 1, sizeof(int));
    for (int i = 0; i < L->g->nnodes; i++) pos[L->g->nodes[i]->id] = i;
    for (int i = 0; i < L->g->nnodes; i++) {
        Node *n = L->g->nodes[i];
        BgradPlan bp;
        if (n->op != OP_matmul || !L->in_sched[n->id] || L->done[n->id] || !bgrad_plan(L, n, pos, &bp)) continue;
        if (!L->bg) L->bg = xcalloc((size_t)L->g->nextnode + 1, sizeof(BgradPlan));
        if (!L->bg_of) L->bg_of = xcalloc((size_t)L->g->nextnode + 1, sizeof(Node *));
        L->bg[n->id] = bp;
        L->done[bp.sum->id] = true;
        L->bg_of[bp.sum->id] = n;
        if (bp.cast) L->done[bp.cast->id] = true, L->bg_of[bp.cast->id] = n;
    }
    free(pos);
}

/* At a planned sum's place (or its cast's), before the product: a dy
 * that a loop kernel computes keeps its sum there, where the pass over dy
 * is made anyway (the MLP's erf GELU gradient and its bias gradient, one
 * loop kernel), and the product sums nothing. */
static void bgrad_recheck(Lower *L, Node *n) {
    BgradPlan *bp = &L->bg[L->bg_of[n->id]->id];
    if (!bp->sum) return; /* the product came first, or this was decided */
    Value *dy = bp->cast ? bp->cast->in[0] : bp->sum->in[0];
    ValInfo *vi = VI(L, dy);
    if (!vi->inl || !vi->kern || !can_join(L, vi->kern, bp->sum, true)) return;
    L->done[bp->sum->id] = false;
    if (bp->cast) L->done[bp->cast->id] = false;
    bp->sum = NULL;
}

/* Product k (node n) computes the bias gradient it was planned to, when
 * its operand is a row-major [K, len] view and it has no other epilogue;
 * otherwise the sum is lowered here as it would have been. */
static void lower_bgrad(Lower *L, Kernel *k, Node *n) {
    BgradPlan *bp = &L->bg[n->id];
    GemmInfo *gi = &k->gemm;
    Node *sum = bp->sum;
    bp->sum = NULL;
    gi->bgrad = bp->which;
    int t = 1;
    int64_t ld, len;
    if (gi->nbatch || gi->bias.buf >= 0 || gi->epi || !cg_gemm_layout(cg_bgrad_operand(gi, &len), &t, &ld) || t != 0) {
        gi->bgrad = GBG_NONE;
        if (bp->cast) lower_loop(L, bp->cast, false);
        lower_loop(L, sum, true);
        return;
    }
    Value *db = sum->out[0];
    view_contig(&gi->dbias, temp_buf(L, db), &db->ty.shape);
    if (bp->cast) kern_add_node(L, k, bp->cast);
    kern_add_node(L, k, sum);
    ValInfo *di = VI(L, db);
    di->st = VS_BUF;
    di->view = gi->dbias;
    di->kern = k;
}

static void lower_matmul(Lower *L, Node *n) {
    Kernel *k = new_kernel(L, KK_GEMM, n);
    kern_add_node(L, k, n);
    GemmInfo *gi = &k->gemm;
    Value *y = n->out[0];
    gi->a = gemm_operand(L, n->in[0], k);
    gi->b = gemm_operand(L, n->in[1], k);
    gi->bias.buf = -1;
    gi->aux.buf = -1;
    gi->dbias.buf = -1;

    /* shapes */
    int64_t ta = ir_int(n, "ta", 0), tb = ir_int(n, "tb", 0);
    const Shape *as = &n->in[0]->ty.shape, *bs = &n->in[1]->ty.shape, *cs = &y->ty.shape;
    gi->ta = (int)ta;
    gi->tb = (int)tb;
    gi->M = cs->d[cs->rank - 2];
    gi->N = cs->d[cs->rank - 1];
    gi->K = as->d[as->rank - 1 - ta];
    /* batch dims: broadcast a's and b's batch strides to c's batch shape
     * (c's strides, contiguous, below) */
    int nb = cs->rank - 2;
    View av = gi->a, bv = gi->b;
    for (int i = 0; i < nb; i++) {
        int ia = as->rank - 2 - nb + i, ib = bs->rank - 2 - nb + i;
        gi->bshape[i] = cs->d[i];
        gi->bsa[i] = ia >= 0 && av.shape[ia] != 1 ? av.stride[ia] : 0;
        gi->bsb[i] = ib >= 0 && bv.shape[ib] != 1 ? bv.stride[ib] : 0;
    }
    gi->nbatch = nb;
    /* fold the batch into M when b is shared across it and a's rows continue
     * through the batch dims (x [B,T,C] @ w [C,N]) */
    int at = 0;
    int64_t lda = 0;
    bool fold = nb > 0 && cg_gemm_layout(&av, &at, &lda) && !(at ^ (int)ta);
    for (int i = 0; fold && i < nb; i++) fold = gi->bsb[i] == 0;
    if (fold) {
        int64_t expect = gi->M * lda;
        for (int i = nb - 1; fold && i >= 0; i--) {
            if (gi->bshape[i] != 1 && gi->bsa[i] != expect) fold = false;
            expect *= gi->bshape[i];
        }
    }
    if (fold) {
        int64_t m = gi->M;
        for (int i = 0; i < nb; i++) m *= gi->bshape[i];
        fold = m <= INT_MAX; /* else the batch stays a loop: BLAS takes an int M */
    }
    if (fold) {
        for (int i = 0; i < nb; i++) gi->M *= gi->bshape[i];
        gi->nbatch = 0;
    }

    /* bias epilogue: y used once, by `add(y, bias)` with bias a row vector.
     * Not f64 on the cuda target: cublasLt.h documents no bias epilogue for
     * CUBLAS_COMPUTE_64F, so the add would always run as the product's
     * fallback kernel (emit_cuda.c emit_gemm_epilogue); it stays a loop
     * kernel there, fused with what follows. */
    UseList *ul = &L->uses->of[y->id];
    Value *res = y;
    bool bias_epi = L->fuse && !(y->ty.dt == DT_f64 && strcmp(L->p->target, "cuda") == 0);
    if (ul->n == 1 && L->uses->nout_refs[y->id] == 0 && bias_epi) {
        Node *add = ul->u[0].node;
        Value *bias = add->op == OP_add ? add->in[1 - ul->u[0].idx] : NULL;
        bool ready = bias && (VI(L, bias)->st != VS_NONE || op_has(bias->def->op, OPF_SOURCE));
        if (ready && L->in_sched[add->id] && type_eq(&add->out[0]->ty, &y->ty) && bias->ty.dt == y->ty.dt && n->in[0]->ty.dt == y->ty.dt) {
            const Shape *bs = &bias->ty.shape;
            int64_t N = y->ty.shape.d[y->ty.shape.rank - 1];
            bool row = bs->rank >= 1 && bs->d[bs->rank - 1] == N;
            for (int i = 0; row && i < bs->rank - 1; i++) row = bs->d[i] == 1;
            if (row) {
                materialise(L, bias);
                View bv = VI(L, bias)->view;
                if (bv.stride[bv.rank - 1] == 1 || N == 1) {
                    kern_add_dep(k, producer(L, bias));
                    gi->bias = bv;
                    kern_add_node(L, k, add);
                    L->done[add->id] = true;
                    res = add->out[0];
                }
            }
        }
    }
    /* the GELU epilogue (forward: gelu of the product; backward: the
     * product is the gradient of a gelu's output) */
    Value *pre = NULL; /* GEPI_GELU: the pre-activation, kept in aux */
    Node *act = gelu_epilogue(L, n, res, gi);
    if (act) {
        kern_add_node(L, k, act);
        L->done[act->id] = true;
        if (gi->epi == GEPI_GELU) {
            UseList *pu = &L->uses->of[res->id];
            if (pu->n > 1 || L->uses->nout_refs[res->id]) { /* read again (by gelu_grad): kept */
                pre = res;
                view_contig(&gi->aux, temp_buf(L, pre), &pre->ty.shape);
            }
        } else {
            gi->aux = contiguous(L, act->in[1], k);
        }
        res = act->out[0];
    }
    /* c += a·b (beta = 1) in place of the state the add updates, or of the
     * other summand, which dies here */
    Value *sv = NULL, *ov = NULL;
    Node *acc = res == y && gi->nbatch == 0 && y->ty.shape.rank == 2 ? accumulating_add(L, y, &sv) : NULL;
    Node *sum = res == y && gi->nbatch == 0 && !acc ? summing_add(L, y, &ov) : NULL;
    if (acc || sum) {
        gi->accumulate = true;
        res = sum_in_place(L, k, acc, sv, sum, ov, &y->ty.shape, &gi->c)->out[0];
    } else {
        view_contig(&gi->c, temp_buf(L, res), &res->ty.shape);
    }
    for (int i = 0; i < gi->nbatch; i++) gi->bsc[i] = gi->c.stride[i];
    int la, lb;
    int64_t dims[6] = {gi->M, gi->N, gi->K, 0, 0, gi->c.stride[gi->c.rank - 2]};
    cg_gemm_layout(&gi->a, &la, &dims[3]);
    cg_gemm_layout(&gi->b, &lb, &dims[4]);
    /* what BLAS and cuBLASLt take: a leading dimension at least the stored
     * row's length (a smaller one is refused, the output left as it was) */
    int64_t need_a = (la ^ gi->ta) ? gi->M : gi->K, need_b = (lb ^ gi->tb) ? gi->K : gi->N;
    if (dims[3] < (need_a > 1 ? need_a : 1) || dims[4] < (need_b > 1 ? need_b : 1))
        die("internal: %%%d's product has leading dimensions %lld and %lld for rows of %lld and %lld", y->id, (long long)dims[3],
            (long long)dims[4], (long long)need_a, (long long)need_b);
    static const char *const dnames[6] = {"M", "N", "K", "leading dimension of A", "leading dimension of B", "leading dimension of C"};
    gemm_ints(L, n, 6, dnames, dims);
    if (L->bg && L->bg[n->id].sum) lower_bgrad(L, k, n);
    VI(L, res)->st = VS_BUF;
    VI(L, res)->view = gi->c;
    VI(L, res)->kern = k;
    if (res != y) VI(L, y)->st = VS_NONE;
    if (pre) {
        ValInfo *pi = VI(L, pre);
        pi->st = VS_BUF;
        pi->view = gi->aux;
        pi->kern = k;
    }
}

/* ---- template kernels ---- */

static void lower_template(Lower *L, Node *n) {
    Kernel *k = new_kernel(L, KK_TMPL, n);
    kern_add_node(L, k, n);
    for (int i = 0; i < n->nin; i++) contiguous(L, n->in[i], k);
    for (int j = 0; j < n->nout; j++) {
        Value *y = n->out[j];
        int b = temp_buf(L, y);
        ValInfo *yi = VI(L, y);
        yi->st = VS_BUF;
        view_contig(&yi->view, b, &y->ty.shape);
        yi->kern = k;
    }
}

/* embedding_grad, dtable = the scatter-add of dy's rows, summed into what
 * its one reader adds it to, in place: the gradient accumulator
 * (accumulating_add, grad_accum > 1) or the other summand when that dies
 * at the add (summing_add: GPT-2's tied table, whose head's gradient
 * linear_cross_entropy left in a temporary).  Then only the rows some
 * index names are read and written, each row's sum (from zero, in token
 * order) added to the row once, as the add would; no zero-filled table,
 * no add kernel.  (A row no index names keeps the other summand's value,
 * where the add would give 0.0 + it: the same but for the sign of a zero.) */
static void lower_embedding_grad(Lower *L, Node *n) {
    Value *y = n->out[0], *sv = NULL, *ov = NULL;
    Node *acc = L->fuse ? accumulating_add(L, y, &sv) : NULL;
    Node *sum = L->fuse && !acc ? summing_add(L, y, &ov) : NULL;
    if (!acc && !sum) {
        lower_template(L, n);
        return;
    }
    Kernel *k = new_kernel(L, KK_TMPL, n);
    kern_add_node(L, k, n);
    for (int i = 0; i < n->nin; i++) contiguous(L, n->in[i], k);
    tmpl_sum_in_place(L, k, y, acc, sv, sum, ov);
    /* the C backend's counting sort (the CUDA kernels sort in the
     * workspace; the emulation tests run the C form of a cuda program) */
    int64_t d = ir_int(n, "rows", 0) + 2 + shape_numel(&n->in[1]->ty.shape);
    k->scratch = new_buf(L->p, BK_TEMP, (Type){DT_i32, shape_make(1, &d)}, "embedding_grad.sort", NULL, (int)L->s->which) + 1;
}

/* Cast c absorbed by kernel k, which writes c's result itself
 * (Kernel.cast_out: a norm's half y or dx, linear_cross_entropy's half
 * dx, an update's half copy of the weight). */
static void absorb_cast_out(Lower *L, Kernel *k, Node *c) {
    kern_add_node(L, k, c);
    k->cast_out = c;
    L->done[c->id] = true;
}

static bool pow2_value(double v) {
    int e;
    return isfinite(v) && v > 0 && frexp(v, &e) == 0.5;
}

/* v a scalar that is a power of two at every step: a constant, or a
 * state that starts as one (init "constant") and that nothing updates but
 * loss_scale_update, which doubles and halves it (fp16's amp.scale). */
static bool pow2_scalar(Lower *L, const Value *v) {
    Node *d = v->def;
    if (v->ty.dt != DT_f32 || v->ty.shape.rank != 0) return false;
    if (d->op == OP_constant) return pow2_value(ir_float(d, "value", 0));
    if (d->op != OP_state || strcmp(ir_str(d, "init", ""), "constant") != 0 || !pow2_value(ir_float(d, "value", 0))) return false;
    for (int o = 0; o < L->g->noutputs; o++) {
        Output *out = &L->g->outputs[o];
        if (out->kind == OUT_UPDATE && out->target == d) return out->value->def->op == OP_loss_scale_update && out->value == out->value->def->out[0];
    }
    return true;
}

/* linear_cross_entropy's gradient y (dx or dw, for dloss = 1) read only by
 * its product with a scalar that is a power of two (the fp16 loss scale:
 * dloss, in *scale): the mul the kernel absorbs, multiplying the scale into
 * its products' alpha (1/count), or NULL.  A power of two scales a binary
 * float exactly, so the bits are the mul's. */
static Node *lce_scale_mul(Lower *L, Value *y, Value **scale) {
    Node *m = L->fuse && y->ty.dt == DT_f32 ? only_use(L, y, OP_mul) : NULL;
    if (!m || L->done[m->id] || !type_eq(&m->out[0]->ty, &y->ty)) return NULL;
    *scale = m->in[m->in[0] == y ? 1 : 0];
    return *scale != y && pow2_scalar(L, *scale) ? m : NULL;
}

/* linear_cross_entropy's dx (f32, or its absorbed scale's result) read
 * only by its cast to x's half dtype (the gradient of the bf16/f16
 * activation under mixed precision): the cast the kernel absorbs, writing
 * dx as the half value (rounded once from the f32 one, as the cast rounds
 * it: cuBLASLt's dx products store it in x's dtype), or NULL.  One f32
 * [N, C] buffer and a cast kernel fewer. */
static Node *lce_dx_cast(Lower *L, Node *n, Value *dx) {
    Node *c = L->fuse && dx->ty.dt == DT_f32 && dtype_is_half(n->in[0]->ty.dt) ? only_use(L, dx, OP_cast) : NULL;
    return c && !L->done[c->id] && c->out[0]->ty.dt == n->in[0]->ty.dt ? c : NULL;
}

/* linear_cross_entropy: a template with a workspace for one chunk of
 * logits [chunk, classes] f32 in the memory plan; a gradient result nothing
 * reads (the eval schedule) gets no buffer and is not computed.  A mul of
 * dx or dw by fp16's loss scale is absorbed (lce_scale_mul: Kernel.lce_mul;
 * the kernel stores the mul's result instead), and so is dx's cast to
 * half.  Under gradient accumulation the weight's gradient (an untied
 * head's) is summed into its accumulator (accumulating_add): every chunk's
 * dw product adds to it (beta 1 from the first chunk on), no [V, C]
 * temporary, no add kernel.  (A tied table's head gradient meets the
 * embedding's first and keeps its temporary: docs/codegen.md.) */
static void lower_linear_ce(Lower *L, Node *n) {
    Kernel *k = new_kernel(L, KK_TMPL, n);
    kern_add_node(L, k, n);
    for (int i = 0; i < n->nin; i++) contiguous(L, n->in[i], k);
    Value *res[3] = {n->out[0], n->out[1], n->out[2]}; /* what the kernel stores of each result */
    for (int j = 1; j < 3; j++) {
        Value *s;
        Node *m = lce_scale_mul(L, n->out[j], &s);
        if (!m) continue;
        materialise(L, s);
        kern_add_dep(k, producer(L, s));
        kern_add_node(L, k, m);
        L->done[m->id] = true;
        k->lce_mul[j] = m;
        VI(L, n->out[j])->kern = k;
        res[j] = m->out[0];
    }
    Node *c = lce_dx_cast(L, n, res[1]);
    if (c) {
        absorb_cast_out(L, k, c);
        temp_result(L, c->out[0]);
        VI(L, c->out[0])->kern = k;
    }
    for (int j = 0; j < n->nout; j++) {
        Value *y = res[j], *sv = NULL;
        ValInfo *yi = VI(L, y);
        yi->kern = k;
        if (j > 0 && L->uses->of[y->id].n == 0 && L->uses->nout_refs[y->id] == 0) continue;
        if (j == 1 && c) continue; /* dx is stored only as its absorbed cast's half value */
        Node *acc = j == 2 ? accumulating_add(L, y, &sv) : NULL;
        if (acc) {
            tmpl_sum_in_place(L, k, y, acc, sv, NULL, NULL);
            continue;
        }
        temp_result(L, y);
    }
    int64_t rows = ir_int(n, "chunk", 1), nc = ir_int(n, "classes", n->in[1]->ty.shape.d[0]);
    /* its products: a chunk of the N rows of x [N, C] by w [V, C] */
    int64_t N = shape_numel(&n->in[2]->ty.shape);
    int64_t dims[3] = {rows < N ? rows : N, n->in[1]->ty.shape.d[0], n->in[1]->ty.shape.d[1]};
    static const char *const dnames[3] = {"M (rows a chunk)", "N (classes)", "K (the hidden size)"};
    gemm_ints(L, n, 3, dnames, dims);
    int64_t d = rows * nc;
    /* the cuda target's kernels keep their own layout there (row losses,
     * then the chunk's logits and gradient in x's dtype: half the bytes of
     * f32 logits in bf16); the program's C form takes as many rows of f32
     * logits as that holds (emit_c), at least one */
    if (strcmp(L->p->target, "cuda") == 0) {
        d = (cg_cuda_linear_ce_scratch(n) + 3) / 4;
        if (d < nc) d = nc;
    }
    k->scratch = new_buf(L->p, BK_TEMP, (Type){DT_f32, shape_make(1, &d)}, "linear_ce.logits_chunk", NULL, (int)L->s->which) + 1;
}

/* ---- attention ----
 * The kernels take each of q, k, v, o and the gradients as a view (element
 * (b, h, t, d) at b*sb + h*sh + t*st + d): heads that are slices of a
 * wider row are read and written where they lie instead of being copied to
 * [B,H,T,D] and back.  GPT-2 reads q, k, v out of qkv [B,T,3C] and the
 * incoming gradient out of [B,T,C], stores o as [B,T,H,D] (what the output
 * projection reads), and writes dq, dk, dv into their slots of the qkv
 * gradient.  A view qualifies when D is contiguous and its offset and
 * strides are multiples of 16 bytes (the GPU's vector loads); otherwise it
 * is copied contiguous, as any template operand is. */
static bool att_view_ok(const View *v, DType dt) {
    int64_t a = 16 / dtype_size[dt];
    if (v->rank != 4 || (v->stride[3] != 1 && v->shape[3] != 1) || v->off % a) return false;
    for (int i = 0; i < 3; i++)
        if (v->stride[i] % a || v->stride[i] < 0) return false;
    return true;
}

static void att_operand(Lower *L, Value *x, Kernel *k) {
    materialise(L, x);
    if (L->fuse && att_view_ok(&VI(L, x)->view, x->ty.dt)) kern_add_dep(k, producer(L, x));
    else contiguous(L, x, k);
}

/* The one node reading v, if it is op in this schedule and nothing else
 * (no output) refers to v. */
static Node *only_use(Lower *L, Value *v, Op op) {
    UseList *ul = &L->uses->of[v->id];
    if (ul->n != 1 || L->uses->nout_refs[v->id] || ul->u[0].node->op != op || !L->in_sched[ul->u[0].node->id]) return NULL;
    return ul->u[0].node;
}

static bool swaps_h_t(const Node *p) {
    const Attr *a = ir_attr(p, "perm");
    return a && a->n == 4 && a->v[0] == 0 && a->v[1] == 2 && a->v[2] == 1 && a->v[3] == 3;
}

/* Where an attention result y [B,H,T,D] is written: in *w, and true, when
 * a layout other than its own buffer's serves its readers better. */
static bool att_result_view(Lower *L, Kernel *k, Value *y, View *w) {
    if (!L->fuse) return false;
    UseList *ul = &L->uses->of[y->id];
    Node *p = only_use(L, y, OP_permute), *r = p ? only_use(L, p->out[0], OP_reshape) : NULL;
    Node *c = r ? only_use(L, r->out[0], OP_concat) : NULL;
    if (c && swaps_h_t(p)) {
        /* y -> [B,T,H,D] -> [B,T,C] -> a slot of a concat: written into the slot */
        ValInfo *ci = VI(L, c->out[0]);
        if (ci->st == VS_NONE) {
            temp_result(L, c->out[0]);
            ci->kern = NULL;
        }
        int idx = L->uses->of[r->out[0]->id].u[0].idx;
        View v = concat_slot(L, c, idx);
        if (!view_reshape(&v, &p->out[0]->ty.shape) || !view_permute(&v, ir_attr(p, "perm")->v) || !att_view_ok(&v, y->ty.dt)) return false;
        kern_add_dep(k, ci->kern);
        ci->kern = k; /* the copies into the concat's result run after it */
        *w = v;
        return true;
    }
    /* read as [B,T,H,D] (the forward's o, reshaped to [B,T,C] for the
     * output projection): stored that way */
    for (int i = 0; i < ul->n; i++) {
        Node *q = ul->u[i].node;
        if (q->op != OP_permute || !swaps_h_t(q) || !L->in_sched[q->id]) continue;
        View v;
        Type st = {y->ty.dt, q->out[0]->ty.shape}; /* (the buffer's shape: the layout it is stored in) */
        view_contig(&v, new_buf(L->p, BK_TEMP, st, y->name, y, (int)L->s->which), &st.shape);
        view_permute(&v, ir_attr(q, "perm")->v);
        if (!att_view_ok(&v, y->ty.dt)) return false;
        *w = v;
        return true;
    }
    return false;
}

static void lower_attention(Lower *L, Node *n) {
    Kernel *k = new_kernel(L, KK_TMPL, n);
    kern_add_node(L, k, n);
    int lse = n->op == OP_attention ? -1 : 5; /* the operand that is lse: contiguous */
    for (int i = 0; i < n->nin; i++) {
        if (i == lse) contiguous(L, n->in[i], k);
        else att_operand(L, n->in[i], k);
    }
    for (int j = 0; j < n->nout; j++) {
        Value *y = n->out[j];
        ValInfo *yi = VI(L, y);
        bool lse_out = n->op == OP_attention && j == 1;
        if (!lse_out && att_result_view(L, k, y, &yi->view)) {
            yi->st = view_is_contig(&yi->view) ? VS_BUF : VS_VIEW;
        } else {
            temp_result(L, y);
        }
        yi->kern = k;
    }
}

/* ---- norms ----
 * A norm's result read only by a cast to half precision (the next
 * product's operand under mixed precision) is written as the half value by
 * the norm: rounded once from the f32 result, as the cast rounds it, so
 * nothing changes but a kernel and an f32 [N,C] buffer fewer.  And a
 * half value widened to f32 only for a norm (a product's output going into
 * the residual add, a product's input gradient going into the backward) is
 * read as it is. */
/* Cast n (half to f32) is read only by a norm, at an operand the norm
 * kernels take in any float dtype (the residual forms' x and r, the
 * backward's dy): the norm reads the half value and widens it, exactly, as
 * it loads it; n is never computed (cg_norm_operand). */
static bool widening_for_norm(Lower *L, Node *n) {
    if (!L->fuse || !dtype_is_half(n->in[0]->ty.dt) || n->out[0]->ty.dt != DT_f32) return false;
    UseList *ul = &L->uses->of[n->out[0]->id];
    if (ul->n != 1 || L->uses->nout_refs[n->out[0]->id] || !L->in_sched[ul->u[0].node->id]) return false;
    Node *u = ul->u[0].node;
    int i = ul->u[0].idx;
    switch (u->op) {
    case OP_add_layer_norm:
    case OP_add_rms_norm: return i < 2;
    case OP_layer_norm_grad:
    case OP_rms_norm_grad:
    case OP_add_layer_norm_grad:
    case OP_add_rms_norm_grad: return i == 0;
    default: return false;
    }
}

/* A backward norm's dx (f32) is read by the next block's norm as its
 * residual gradient and, cast to half, by the products that take it
 * further back: the cast to half among its readers, which the template
 * absorbs (writing both), or NULL. */
static Node *half_cast_reader(Lower *L, Node *n) {
    UseList *ul = &L->uses->of[n->out[0]->id];
    for (int i = 0; i < ul->n; i++) {
        Node *c = ul->u[i].node;
        if (c->op == OP_cast && L->in_sched[c->id] && !L->done[c->id] && c->phase == n->phase && dtype_is_half(c->out[0]->ty.dt)) return c;
    }
    return NULL;
}

static void lower_norm(Lower *L, Node *n) {
    bool fwd = n->op == OP_layer_norm || n->op == OP_rms_norm || n->op == OP_add_layer_norm || n->op == OP_add_rms_norm;
    Value *y = n->out[0];
    Node *c = !L->fuse || y->ty.dt != DT_f32 ? NULL : fwd ? only_use(L, y, OP_cast) : half_cast_reader(L, n);
    if (c && !dtype_is_half(c->out[0]->ty.dt)) c = NULL;
    /* the f32 result is stored too when anything else reads it */
    bool keep_y = !c || L->uses->of[y->id].n > 1 || L->uses->nout_refs[y->id];
    Kernel *k = new_kernel(L, KK_TMPL, n);
    kern_add_node(L, k, n);
    for (int i = 0; i < n->nin; i++) {
        Value *x = n->in[i];
        if (VI(L, x)->st == VS_NONE && x->def->op == OP_cast && L->done[x->def->id]) {
            kern_add_node(L, k, x->def); /* its widening cast, absorbed */
            x = x->def->in[0];
        }
        contiguous(L, x, k);
    }
    if (c) absorb_cast_out(L, k, c);
    /* a backward norm's dw and db (results 1 and 2) summed into their
     * gradient accumulators in place, when every one of them can be */
    Node *acc[2] = {NULL, NULL};
    Value *st[2] = {NULL, NULL};
    int nw = fwd ? 0 : n->nout - 1;
    bool accumulate = nw > 0;
    for (int j = 0; j < nw && accumulate; j++) accumulate = (acc[j] = accumulating_add(L, n->out[1 + j], &st[j])) != NULL;
    for (int j = c ? -1 : 0; j < n->nout; j++) {
        Value *v = j < 0 ? c->out[0] : n->out[j];
        if (j == 0 && !keep_y) continue; /* y itself is not stored when only its absorbed cast reads it */
        ValInfo *vi = VI(L, v);
        vi->st = VS_BUF;
        vi->kern = k;
        if (j < 1 || !accumulate) {
            view_contig(&vi->view, temp_buf(L, v), &v->ty.shape);
            continue;
        }
        Node *a = acc[j - 1];
        materialise(L, st[j - 1]); /* the accumulator's own buffer */
        view_contig(&vi->view, persistent_buf(L, st[j - 1]->def), &v->ty.shape);
        kern_add_node(L, k, a);
        L->done[a->id] = true;
        ValInfo *ri = VI(L, a->out[0]);
        *ri = *vi;
        after_readers(L, k, vi->view.buf);
    }
    k->acc_grads = accumulate;
}

/* rope_qk: q and k [B,H,T,D] are read as views, as attention's operands
 * (Llama's heads where its projections left them, [B,T,H,D]).  A result
 * that a permute to [B,T,H,D] reads (the gradient going back to its
 * projection) is stored that way; otherwise q and k are rotated in place
 * when their buffer holds nothing else that is read (a buffer made for the
 * operand, or for a value that only views lead to it: buf_only_for);
 * otherwise the result gets a buffer of its own. */
static bool buf_only_for(Lower *L, Value *x, const View *xv) {
    Buf *b = &L->p->bufs[xv->buf];
    if (b->kind != BK_TEMP) return false;
    Value *v = b->value;
    while (v && v != x) {
        UseList *ul = &L->uses->of[v->id];
        if (ul->n != 1 || L->uses->nout_refs[v->id]) return false;
        Node *u = ul->u[0].node;
        if ((u->op != OP_reshape && u->op != OP_permute) || !L->in_sched[u->id]) return false;
        v = u->out[0];
    }
    return v == x;
}

static bool sole_reader(Lower *L, Value *x, const View *xv) {
    return buf_only_for(L, x, xv) && L->uses->of[x->id].n == 1 && !L->uses->nout_refs[x->id];
}

static void lower_rope_qk(Lower *L, Node *n) {
    Kernel *k = new_kernel(L, KK_TMPL, n);
    kern_add_node(L, k, n);
    bool view = n->in[0]->ty.shape.rank == 4 && n->in[1]->ty.shape.rank == 4;
    for (int i = 0; i < n->nin; i++) {
        if (i < 2 && view) att_operand(L, n->in[i], k);
        else contiguous(L, n->in[i], k);
    }
    for (int j = 0; j < 2; j++) {
        Value *x = n->in[j], *y = n->out[j];
        ValInfo *yi = VI(L, y), *xi = VI(L, x);
        yi->kern = k;
        if (view && att_result_view(L, k, y, &yi->view)) {
            yi->st = view_is_contig(&yi->view) ? VS_BUF : VS_VIEW;
            continue;
        }
        bool own = (xi->st == VS_BUF || xi->st == VS_VIEW) && sole_reader(L, x, &xi->view) && (j == 0 || n->in[1] != n->in[0]);
        if (own) {
            yi->view = xi->view;
            yi->st = xi->st;
        } else {
            temp_result(L, y);
        }
    }
}

/* cross_entropy and its gradient in one pass, the gradient written in place
 * of the logits: when the logits are read by nothing else and dloss is
 * ready before the forward. */
static bool try_fuse_ce(Lower *L, Node *n) {
    if (!L->fuse) return false;
    Value *logits = n->in[0];
    UseList *ul = &L->uses->of[logits->id];
    if (ul->n != 2 || L->uses->nout_refs[logits->id]) return false;
    Node *gr = NULL;
    for (int i = 0; i < 2; i++)
        if (ul->u[i].node != n) gr = ul->u[i].node;
    if (!gr || gr->op != OP_cross_entropy_grad || !L->in_sched[gr->id]) return false;
    if (gr->in[1] != logits || gr->in[2] != n->in[1] || gr->in[3] != n->out[1]) return false;
    if (ir_int(gr, "ignore_index", -100) != ir_int(n, "ignore_index", -100)) return false;
    /* dloss must be a source (constant or state) so it is known before the forward */
    Node *dl = gr->in[0]->def;
    if (!op_has(dl->op, OPF_SOURCE)) return false;
    /* the logits buffer must be a temporary this schedule produces, holding
     * nothing read after the gradient overwrites it: the logits' own, or a
     * value's that only views lead to them (z, whose reshape the logits
     * are, read by something else too, keeps its buffer; a view that is
     * not contiguous is copied first, into a buffer of the logits' own) */
    ValInfo *li = VI(L, logits);
    if (!li->kern) return false;
    if ((li->st == VS_BUF || li->st == VS_VIEW) && L->p->bufs[li->view.buf].kind != BK_TEMP) return false;
    if ((li->st == VS_BUF || (li->st == VS_VIEW && view_is_contig(&li->view))) && !buf_only_for(L, logits, &li->view)) return false;
    Kernel *k = new_kernel(L, KK_TMPL, n);
    kern_add_node(L, k, n);
    kern_add_node(L, k, gr);
    k->ce_fused = true;
    k->ce_grad = gr;
    View lv = contiguous(L, logits, k);
    contiguous(L, n->in[1], k);
    materialise(L, gr->in[0]);
    kern_add_dep(k, producer(L, gr->in[0]));
    for (int j = 0; j < 2; j++) {
        Value *y = n->out[j];
        ValInfo *yi = VI(L, y);
        temp_result(L, y);
        yi->kern = k;
    }
    /* dlogits shares the logits buffer */
    ValInfo *gi = VI(L, gr->out[0]);
    gi->st = VS_BUF;
    gi->view = lv;
    gi->kern = k;
    L->done[gr->id] = true;
    return true;
}

/* pad and concat become a fill and strided copies. */
static void lower_pad_concat(Lower *L, Node *n) {
    Value *y = n->out[0];
    ValInfo *yi = VI(L, y);
    Kernel *last = NULL;
    if (yi->st == VS_NONE) {
        temp_result(L, y);
    } else {
        last = yi->kern; /* operands written into their slots already (att_result_view) */
    }
    int axis = (int)ir_int(n, "axis", 0);
    if (n->op == OP_pad) {
        Kernel *f = new_kernel(L, KK_FILL, n);
        kern_add_node(L, f, n);
        f->fill = 0.0;
        f->dst = yi->view;
        last = f;
    }
    int64_t at = n->op == OP_pad ? ir_int(n, "lo", 0) : 0;
    for (int i = 0; i < n->nin; i++) {
        Value *x = n->in[i];
        materialise(L, x);
        ValInfo *xi = VI(L, x);
        if (n->op == OP_concat && xi->view.buf == yi->view.buf) {
            View slot = concat_slot(L, n, i);
            if (view_eq(&slot, &xi->view)) {
                at += x->ty.shape.d[axis];
                continue;
            }
        }
        Kernel *k = new_kernel(L, KK_COPY, n);
        kern_add_node(L, k, n);
        k->src = VI(L, x)->view;
        k->dst = yi->view;
        view_slice(&k->dst, axis, at, at + x->ty.shape.d[axis]);
        at += x->ty.shape.d[axis];
        kern_add_dep(k, producer(L, x));
        kern_add_dep(k, last);
        last = k;
    }
    yi->kern = last;
}

/* ---- updates and outputs ---- */

static bool pointwise_inplace_ok(Lower *L, Kernel *k, Value *target_val) {
    /* every load of the target inside k reads the element it writes */
    for (int i = 0; i < k->nnodes; i++) {
        Node *m = k->nodes[i];
        for (int j = 0; j < m->nin; j++) {
            if (m->in[j] != target_val) continue;
            if (!shape_eq(&m->in[j]->ty.shape, &k->space) || k->red) return false;
        }
    }
    return true;
}

/* A reduction kernel's epilogue that updates a state elementwise (the
 * bias gradient's `acc' = acc + sum(dy)` under gradient accumulation): the
 * target is read only in the epilogue, over the reduced shape, at the
 * element the kernel writes, so the result may be stored in place. */
static bool epilogue_inplace_ok(Lower *L, Kernel *k, Value *v, Value *target_val, int tb) {
    if (!k->red || !shape_eq(&v->ty.shape, &k->rspace)) return false;
    bool after = false;
    for (int i = 0; i < k->nnodes; i++) {
        Node *m = k->nodes[i];
        for (int j = 0; j < m->nin; j++) {
            Value *x = m->in[j];
            ValInfo *xi = VI(L, x);
            if (x == target_val ? !after || !shape_eq(&x->ty.shape, &k->rspace)
                                : (xi->st == VS_BUF || xi->st == VS_VIEW) && xi->view.buf == tb) /* another view of it */
                return false;
        }
        if (m == k->red) after = true;
    }
    return v->def != k->red && after;
}

/* In-place writes that must wait for the readers of what they overwrite
 * (after_readers_all): kernel k writes buffer buf, found when the schedule
 * held nk kernels. */
typedef struct {
    Kernel *k;
    int buf, nk;
} InPlace;

typedef struct {
    InPlace *w;
    int n, cap;
} InPlaces;

static void inplace_add(InPlaces *l, Kernel *k, int buf, int nk) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->w = xrealloc(l->w, sizeof *l->w * (size_t)l->cap);
    }
    l->w[l->n++] = (InPlace){k, buf, nk};
}

/* Each write k of buf runs after every other kernel (of the first nk) that
 * reads buf (write-after-read); a reader of a value k itself makes runs
 * after k.  A copy reads its source view only and a fill nothing, whatever
 * the operands of the node they commit (an update's copy of an SGD result
 * holds the SGD node, which reads the gradient accumulator that the SGD
 * kernel itself zeroes).  One pass over the schedule for all the writes:
 * lower_updates gathers those of a schedule's updates (one pass per update
 * was 27 passes a layer for a Llama); a buffer is updated once a phase
 * (ir/verify.c), so the readers of its values are the same at the end as
 * when each write was found. */
static void after_readers_all(Lower *L, const InPlaces *l) {
    const InPlace *w = l->w;
    int n = l->n;
    if (!n) return;
    Sched *s = L->s;
    int nb = L->p->nbufs;
    int *first = xcalloc((size_t)nb + 1, sizeof(int)), *at = xmalloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) first[w[i].buf + 1]++;
    for (int b = 0; b < nb; b++) first[b + 1] += first[b];
    int *fill = xmalloc(sizeof(int) * (size_t)nb);
    memcpy(fill, first, sizeof(int) * (size_t)nb);
    for (int i = 0; i < n; i++) at[fill[w[i].buf]++] = i;
    for (int j = 0; j < s->nk; j++) {
        Kernel *r = s->k[j];
        if (r->kind == KK_FILL) continue;
        if (r->kind == KK_COPY) {
            for (int e = first[r->src.buf]; e < first[r->src.buf + 1]; e++)
                if (j < w[at[e]].nk) kern_add_dep(w[at[e]].k, r);
            continue;
        }
        for (int a = 0; a < r->nnodes; a++)
            for (int b = 0; b < r->nodes[a]->nin; b++) {
                ValInfo *xi = VI(L, r->nodes[a]->in[b]);
                if (xi->st != VS_BUF && xi->st != VS_VIEW) continue;
                for (int e = first[xi->view.buf]; e < first[xi->view.buf + 1]; e++) {
                    const InPlace *p = &w[at[e]];
                    if (j < p->nk && xi->kern != p->k) kern_add_dep(p->k, r);
                }
            }
    }
    free(first);
    free(at);
    free(fill);
}

/* after_readers_all for one write, found now. */
static void after_readers(Lower *L, Kernel *k, int buf) {
    InPlace w = {k, buf, L->s->nk};
    after_readers_all(L, &(InPlaces){&w, 1, 1});
}

/* The in-place AdamW/SGD kernel of this schedule whose gradient operand is
 * all of buffer buf (an accumulator), if any. */
static Kernel *opt_reading(Lower *L, int buf) {
    if (!L->fuse) return NULL;
    for (int j = 0; j < L->s->nk; j++) {
        Kernel *k = L->s->k[j];
        if (k->kind != KK_TMPL || (k->nodes[0]->op != OP_adamw && k->nodes[0]->op != OP_sgd)) continue;
        Value *gv = k->nodes[0]->in[1];
        ValInfo *gi = VI(L, gv);
        if (gi->st == VS_BUF && gi->view.buf == buf && view_is_contig(&gi->view) && gi->view.off == 0 &&
            shape_numel(&gv->ty.shape) == shape_numel(&L->p->bufs[buf].shape) && VI(L, k->nodes[0]->out[0])->view.buf != buf)
            return k;
    }
    return NULL;
}

static void lower_updates(Lower *L) {
    Graph *g = L->g;
    Sched *s = L->s;
    InPlaces w = {0};
    for (int i = 0; i < g->noutputs; i++) {
        Output *o = &g->outputs[i];
        if (o->kind != OUT_UPDATE) continue;
        Value *v = o->value;
        /* the phase an update belongs to: its value's, or the last phase for a source value */
        int ph = v->def->phase;
        if (op_has(v->def->op, OPF_SOURCE)) {
            ph = PH_MICRO;
            for (int j = 0; j < g->nnodes; j++)
                if (g->nodes[j]->phase == PH_STEP) ph = PH_STEP;
        }
        if (s->phase >= 0 && ph != s->phase) continue;
        if (VI(L, v)->st == VS_NONE && op_has(v->def->op, OPF_SOURCE)) lower_source(L, v->def);
        int tb = persistent_buf(L, o->target);
        ValInfo *vi = VI(L, v);
        Kernel *k = vi->kern;
        UseList *ul = &L->uses->of[v->id];
        /* v already in the target's buffer: its kernel wrote it in place
         * (AdamW, SGD, an accumulating product or norm) */
        bool inplace = vi->st == VS_BUF && k && vi->view.buf == tb;
        if (vi->st == VS_INLINE && k && k->kind == KK_LOOP && ul->n == 0 && pointwise_inplace_ok(L, k, o->target->out[0]))
            inplace = true;
        if (vi->st == VS_INLINE && k && k->kind == KK_LOOP && ul->n == 0 && L->fuse && epilogue_inplace_ok(L, k, v, o->target->out[0], tb)) inplace = true;
        if (inplace) {
            vi->st = VS_BUF;
            view_contig(&vi->view, tb, &v->ty.shape);
            inplace_add(&w, k, tb, s->nk);
            continue;
        }
        /* the reset of a gradient accumulator after the step's update read it
         * (`update grad_acc.p = 0`): that update zeroes it as it reads it */
        Kernel *z = v->def->op == OP_constant && ir_float(v->def, "value", 1) == 0 ? opt_reading(L, tb) : NULL;
        if (z) {
            z->zero_g = true;
            inplace_add(&w, z, tb, s->nk);
            continue;
        }
        /* otherwise: a fill or a copy after everything else */
        Kernel *c;
        if (v->def->op == OP_constant) {
            c = new_kernel(L, KK_FILL, v->def);
            c->fill = ir_float(v->def, "value", 0);
        } else {
            materialise(L, v);
            c = new_kernel(L, KK_COPY, v->def);
            c->src = VI(L, v)->view;
            kern_add_dep(c, VI(L, v)->kern);
        }
        kern_add_node(L, c, v->def);
        view_contig(&c->dst, tb, &v->ty.shape);
        c->order = 1 << 29;
        inplace_add(&w, c, tb, s->nk);
    }
    after_readers_all(L, &w);
    free(w.w);
}

/* SGD without momentum (passes/optimizer.c gives it a zero buffer operand
 * and a buffer result nothing reads): the kernel reads and writes no
 * buffer for them (null pointers), so the zeros are never filled and the
 * update is in place. */
static bool sgd_no_buf(Lower *L, Node *n) {
    return L->fuse && n->op == OP_sgd && ir_float(n, "momentum", 0) == 0 && L->uses->of[n->out[1]->id].n == 0 && !update_target(L, n->out[1]);
}

/* The adamw/sgd template writes its results in place of w, m, v: the
 * results need no buffer of their own when every one of them updates its
 * operand.  Decided before lowering the node.  Later nodes may read the
 * results (mixed precision's cast of the new weight): they read the
 * updated buffers, after the template. */
static bool opt_inplace(Lower *L, Node *n) {
    int pairs[3][2] = {{0, 0}, {1, 2}, {2, 3}}; /* result, operand */
    int np = n->op == OP_adamw ? 3 : sgd_no_buf(L, n) ? 1 : 2;
    for (int i = 0; i < np; i++)
        if (update_target(L, n->out[pairs[i][0]]) != n->in[pairs[i][1]]->def) return false;
    return true;
}

/* Mixed precision's persistent half copy of a param is the cast of its new
 * weight (passes/optimizer.c).  When that cast is the only node reading the
 * new weight, the update writes it too, rounding its f32 result once as
 * the cast does: a kernel and a read of the weight fewer a parameter. */
static Node *opt_half_copy(Lower *L, Node *n) {
    if (!L->fuse) return NULL;
    UseList *ul = &L->uses->of[n->out[0]->id];
    if (ul->n != 1) return NULL;
    Node *c = ul->u[0].node;
    if (c->op != OP_cast || !L->in_sched[c->id] || c->phase != n->phase || !dtype_is_half(c->out[0]->ty.dt)) return NULL;
    return c;
}

static void lower_opt(Lower *L, Node *n) {
    if (!opt_inplace(L, n)) {
        lower_template(L, n);
        return;
    }
    Kernel *k = new_kernel(L, KK_TMPL, n);
    kern_add_node(L, k, n);
    bool nobuf = sgd_no_buf(L, n);
    for (int i = 0; i < n->nin; i++)
        if (!(nobuf && i == 2)) contiguous(L, n->in[i], k);
    int operand[3] = {0, 2, 3}; /* of each result: the state it updates */
    for (int j = 0; j < (nobuf ? 1 : n->nout); j++) {
        Value *y = n->out[j];
        ValInfo *yi = VI(L, y);
        yi->kern = k;
        yi->st = VS_BUF; /* the target's buffer (lower_updates keeps it there) */
        view_contig(&yi->view, persistent_buf(L, n->in[operand[j]]->def), &y->ty.shape);
    }
    Node *c = opt_half_copy(L, n);
    if (c) {
        absorb_cast_out(L, k, c); /* the half copy of the new weight: written by the update itself */
        Value *h = c->out[0];
        ValInfo *hi = VI(L, h);
        hi->kern = k;
        hi->st = VS_BUF;
        Node *target = update_target(L, h); /* the copy's state: written in place */
        view_contig(&hi->view, target ? persistent_buf(L, target) : temp_buf(L, h), &h->ty.shape);
    }
}

/* ---- ordering ---- */

/* The ready kernels as a binary heap, the least (order, id) on top: the
 * kernel order_kernels takes next. */
static bool kern_first(const Kernel *a, const Kernel *b) { return a->order < b->order || (a->order == b->order && a->id < b->id); }

static void ready_push(Kernel **h, int *n, Kernel *k) {
    int i = (*n)++;
    while (i > 0 && kern_first(k, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = k;
}

static Kernel *ready_pop(Kernel **h, int *n) {
    Kernel *top = h[0], *last = h[--*n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && kern_first(h[c + 1], h[c])) c++;
        if (!kern_first(h[c], last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) h[i] = last;
    return top;
}

/* The schedule in dependency order, the least (order, id) of the ready
 * kernels first (a heap; each kernel's dependents found through a table
 * by id, not by scanning the schedule: linear in kernels and
 * dependencies, a 96-layer model's thousands of kernels included).
 * False where some kernel never becomes ready (a cycle). */
static bool order_kernels(Lower *L) {
    Sched *s = L->s;
    int n = s->nk;
    int maxid = L->nkern;
    int *indeg = xcalloc((size_t)maxid + 1, sizeof(int));
    Kernel **byid = xcalloc((size_t)maxid + 1, sizeof(Kernel *));
    for (int i = 0; i < n; i++) byid[s->k[i]->id] = s->k[i];
    for (int i = 0; i < n; i++) indeg[s->k[i]->id] = s->k[i]->ndeps;
    /* dependents by id: those of id d at first[d] .. first[d + 1] - 1 of dep */
    int *first = xcalloc((size_t)maxid + 2, sizeof(int)), ne = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < s->k[i]->ndeps; j++) {
            int d = s->k[i]->deps[j];
            if (d >= 0 && d <= maxid) first[d + 1]++, ne++;
        }
    for (int d = 0; d <= maxid; d++) first[d + 1] += first[d];
    Kernel **dep = xmalloc(sizeof(Kernel *) * (size_t)(ne ? ne : 1));
    int *fill = xmalloc(sizeof(int) * (size_t)(maxid + 1));
    memcpy(fill, first, sizeof(int) * (size_t)(maxid + 1));
    for (int i = 0; i < n; i++)
        for (int j = 0; j < s->k[i]->ndeps; j++) {
            int d = s->k[i]->deps[j];
            if (d >= 0 && d <= maxid) dep[fill[d]++] = s->k[i];
        }
    free(fill);
    Kernel **ready = xmalloc(sizeof(Kernel *) * (size_t)(n ? n : 1));
    int nready = 0;
    for (int i = 0; i < n; i++)
        if (!s->k[i]->scheduled && !indeg[s->k[i]->id]) ready_push(ready, &nready, s->k[i]);
    Kernel **out = xmalloc(sizeof(Kernel *) * (size_t)(n ? n : 1));
    int nout = 0;
    while (nready > 0) {
        Kernel *best = ready_pop(ready, &nready);
        best->scheduled = true;
        out[nout++] = best;
        for (int e = first[best->id]; e < first[best->id + 1]; e++) {
            Kernel *k = dep[e];
            if (--indeg[k->id] == 0 && !k->scheduled) ready_push(ready, &nready, k);
        }
    }
    free(ready);
    free(dep);
    free(first);
    if (nout < n) {
        free(indeg);
        free(byid);
        free(out);
        return false;
    }
    /* deps refer to old ids: translate */
    int *newid = xcalloc((size_t)maxid + 1, sizeof(int));
    for (int i = 0; i < maxid + 1; i++) newid[i] = -1;
    for (int i = 0; i < n; i++)
        if (byid[out[i]->id] == out[i]) newid[out[i]->id] = i;
    if (n > 0) memcpy(s->k, out, sizeof(Kernel *) * (size_t)n); /* an empty schedule has no array (eval of a loss that is a param) */
    for (int i = 0; i < n; i++) s->k[i]->id = i;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < s->k[i]->ndeps; j++) s->k[i]->deps[j] = newid[s->k[i]->deps[j]];
    free(newid);
    free(indeg);
    free(byid);
    free(out);
    return true;
}

/* ---- multi-tensor updates ----
 *
 * The optimizer's updates come last in their schedule, one small kernel
 * per parameter (GPT-2 small: 148 of them, a third of the step's
 * launches, most of them a few blocks of work).  A run of consecutive
 * in-place AdamW (or SGD) kernels becomes one kernel that updates every
 * tensor of the run: on the GPU one launch over all of their blocks, each
 * block finding its tensor in a table (emit_cuda.c); in C the parts one
 * after the other.  Nothing is computed differently: each element gets the
 * same operations as in its own kernel.
 *
 * So does a run of the accumulating adds that gradient accumulation
 * leaves as loop kernels of their own (acc' = add(acc, g), in place): the
 * bias gradients that a weight gradient's product sums, which cuBLASLt's
 * epilogue writes and cannot add to, and a tied table's head gradient
 * (GPT-2 small at grad_accum > 1: 49 kernels at the end of each
 * micro-batch, 48 of them biases of 768 to 3,072 elements). */

/* A whole buffer of f32 values for an add's operand or result. */
static bool add_whole(Lower *L, Value *v, const Value *y) {
    ValInfo *vi = VI(L, v);
    if (vi->st != VS_BUF || vi->view.off != 0 || !view_is_contig(&vi->view) || !type_eq(&v->ty, &y->ty)) return false;
    return shape_numel(&L->p->bufs[vi->view.buf].shape) == shape_numel(&y->ty.shape);
}

/* An accumulating add that can be part of one: a loop kernel of one f32
 * add, no broadcast, whole buffers, the sum written over an operand. */
static bool add_part(Lower *L, Kernel *k) {
    if (k->kind != KK_LOOP || k->parts || k->red || k->nnodes != 1 || k->nodes[0]->op != OP_add) return false;
    Node *n = k->nodes[0];
    Value *y = n->out[0];
    if (y->ty.dt != DT_f32 || VI(L, y)->kern != k || !add_whole(L, y, y) || !add_whole(L, n->in[0], y) || !add_whole(L, n->in[1], y))
        return false;
    int b = VI(L, y)->view.buf;
    return b == VI(L, n->in[0])->view.buf || b == VI(L, n->in[1])->view.buf;
}

/* An update that can be part of one: AdamW or SGD in place (lower_opt),
 * f32 operands (what the templates take). */
static bool opt_part(Lower *L, Kernel *k) {
    if (k->kind != KK_TMPL || k->parts) return false;
    Node *n = k->nodes[0];
    if (n->op != OP_adamw && n->op != OP_sgd) return false;
    for (int i = 0; i < n->nin; i++)
        if (dtype_is_float[n->in[i]->ty.dt] && n->in[i]->ty.dt != DT_f32) return false;
    ValInfo *wo = VI(L, n->out[0]), *w = VI(L, n->in[0]);
    return wo->kern == k && wo->st == VS_BUF && w->st == VS_BUF && wo->view.buf == w->view.buf;
}

/* The dtype of the half copy update kernel k writes (DT_f32: none). */
static DType opt_half(const Kernel *k) { return k->cast_out ? k->cast_out->out[0]->ty.dt : DT_f32; }

/* Can update b join the run begun by a (kernels a->id .. b->id - 1)?  It
 * waits for none of them (on the GPU the run's blocks run in any order;
 * for an accumulating add that is all); the same rule and
 * hyperparameters (weight decay apart: each tensor has its own), the same
 * scalar operands (learning rate, step, gradient scale, fp16's skip), and
 * half copies of one dtype (*hdt: the run's so far, DT_f32 for none). */
static bool opt_joins(Lower *L, Kernel *a, Kernel *b, DType *hdt) {
    bool add = a->kind == KK_LOOP;
    if (add ? !add_part(L, b) : !opt_part(L, b)) return false;
    for (int d = 0; d < b->ndeps; d++)
        if (b->deps[d] >= a->id) return false;
    if (add) return true;
    Node *x = a->nodes[0], *y = b->nodes[0];
    if (x->op != y->op || x->nin != y->nin) return false;
    bool adam = x->op == OP_adamw;
    for (int i = adam ? 4 : 3; i < x->nin; i++)
        if (x->in[i] != y->in[i]) return false;
    if (adam) {
        if (ir_float(x, "beta1", 0.9) != ir_float(y, "beta1", 0.9) || ir_float(x, "beta2", 0.999) != ir_float(y, "beta2", 0.999) ||
            ir_float(x, "eps", 1e-8) != ir_float(y, "eps", 1e-8))
            return false;
    } else if (ir_float(x, "momentum", 0) != ir_float(y, "momentum", 0) || ir_int(x, "nesterov", 0) != ir_int(y, "nesterov", 0))
        return false;
    DType d = opt_half(b);
    if (d != DT_f32) {
        if (*hdt != DT_f32 && *hdt != d) return false;
        *hdt = d;
    }
    return true;
}

/* After ordering: each run of two or more joinable updates becomes one
 * kernel in their place.  The parts leave the schedule (ids become
 * positions again); values keep their producing part (memplan gives each
 * part its reads and writes, the whole their union). */
static void merge_updates(Lower *L) {
    Sched *s = L->s;
    int n = s->nk, m = 0;
    if (!L->fuse || n == 0) return;
    int *newid = xmalloc(sizeof(int) * (size_t)n);
    Kernel **out = xmalloc(sizeof(Kernel *) * (size_t)n);
    for (int i = 0; i < n;) {
        int j = i + 1;
        DType hdt = opt_half(s->k[i]);
        if (opt_part(L, s->k[i]) || add_part(L, s->k[i]))
            while (j < n && opt_joins(L, s->k[i], s->k[j], &hdt)) j++;
        if (j - i < 2) {
            newid[i] = m;
            out[m++] = s->k[i++];
            continue;
        }
        Kernel *u = arena_alloc(L->p->arena, sizeof *u);
        u->kind = KK_TMPL;
        u->order = s->k[i]->order;
        u->loc = s->k[i]->loc;
        u->nparts = j - i;
        u->parts = arena_alloc(L->p->arena, sizeof(Kernel *) * (size_t)u->nparts);
        for (int q = i; q < j; q++) {
            Kernel *k = s->k[q];
            u->parts[q - i] = k;
            for (int a = 0; a < k->nnodes; a++) kern_add_node(L, u, k->nodes[a]);
            newid[q] = m;
        }
        /* what the parts waited for, by old id (translated below) */
        for (int q = i; q < j; q++)
            for (int d = 0; d < s->k[q]->ndeps; d++) {
                int dep = s->k[q]->deps[d];
                if (dep < i || dep >= j) kern_add_dep(u, s->k[dep]);
            }
        out[m++] = u;
        i = j;
    }
    if (m < n) {
        for (int i = 0; i < m; i++) {
            Kernel *k = out[i];
            int nd = 0;
            for (int d = 0; d < k->ndeps; d++) {
                int t = newid[k->deps[d]], dup = 0;
                for (int e = 0; e < nd; e++) dup |= k->deps[e] == t;
                if (!dup && t != i) k->deps[nd++] = t;
            }
            k->ndeps = nd;
        }
        for (int i = 0; i < m; i++) out[i]->id = i;
        memcpy(s->k, out, sizeof(Kernel *) * (size_t)m);
        s->nk = m;
    }
    free(out);
    free(newid);
}

/* A kernel's name: PREFIX, its ops (four at most), its .model line (the
 * first node with a location, also its loc); a multi-tensor update's:
 * PREFIX, its ops, _xN (N tensors).  k12_layer_norm_add_gpt2_model_L31,
 * k50_adamw_cast_x26. */
static char *kernel_name(Lower *L, Kernel *k, const char *prefix) {
    StrBuf b = {0};
    sb_puts(&b, prefix);
    /* the first four distinct ops (compared with those shown: a fused
     * kernel may hold tens of thousands of nodes of two ops) */
    Op shown[4];
    int nshown = 0;
    for (int j = 0; j < k->nnodes && nshown < 4; j++) {
        Op op = k->nodes[j]->op;
        bool dup = false;
        for (int q = 0; q < nshown; q++) dup |= shown[q] == op;
        if (dup) continue;
        sb_printf(&b, "_%s", op_name(op));
        shown[nshown++] = op;
    }
    if (k->kind == KK_COPY) sb_puts(&b, "_copy");
    if (k->kind == KK_FILL) sb_puts(&b, "_fill");
    SrcLoc loc = NOLOC;
    for (int j = 0; j < k->nnodes && !loc.file; j++) loc = k->nodes[j]->loc;
    if (loc.file) k->loc = loc;
    if (k->nparts) sb_printf(&b, "_x%d", k->nparts);
    else if (loc.file) {
        const char *base = strrchr(loc.file, '/');
        base = base ? base + 1 : loc.file;
        sb_putc(&b, '_');
        for (const char *c = base; *c; c++) sb_putc(&b, (char)((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ? *c : '_'));
        sb_printf(&b, "_L%d", loc.line);
    }
    char *name = arena_strdup(L->p->arena, b.s);
    sb_free(&b);
    return name;
}

/* k12_layer_norm_add_gpt2_model_L31; a multi-tensor update's parts:
 * k50_3_adamw_cast_gpt2_model_L30 (part 3 of k50). */
static void name_kernels(Lower *L) {
    Sched *s = L->s;
    static const char *const prefix[TRN_RUN__COUNT] = {"k", "u", "e", "s", "r"};
    for (int i = 0; i < s->nk; i++) {
        Kernel *k = s->k[i];
        char pre[32];
        snprintf(pre, sizeof pre, "%s%d", prefix[s->which], i);
        k->name = kernel_name(L, k, pre);
        for (int j = 0; j < k->nparts; j++) {
            snprintf(pre, sizeof pre, "%s%d_%d", prefix[s->which], i, j);
            k->parts[j]->name = kernel_name(L, k->parts[j], pre);
        }
    }
}

/* ---- one schedule ---- */

static void lower_source(Lower *L, Node *n) {
    ValInfo *yi = VI(L, n->out[0]);
    if (n->op == OP_constant || n->op == OP_iota) {
        yi->st = VS_INLINE;
        yi->kern = NULL;
        return;
    }
    yi->st = VS_BUF;
    view_contig(&yi->view, persistent_buf(L, n), &n->out[0]->ty.shape);
}

static bool lower_sched(Program *p, TrnRun which, Graph *g, int phase, Diag *d, bool fuse) {
    Sched *s = &p->sched[which];
    s->which = which;
    s->g = g;
    s->phase = phase;
    if (!g) return true;
    Lower L = {p, s, g, d, fuse, ir_uses(g), NULL, NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL, 0, NULL, false, NULL};
    L.inuse = xcalloc((size_t)g->nvalues + 1, sizeof(int));
    L.in_sched = xcalloc((size_t)g->nextnode + 1, sizeof(bool));
    L.done = xcalloc((size_t)g->nextnode + 1, sizeof(bool));
    L.pos = xcalloc((size_t)g->nextnode + 1, sizeof(int));
    for (int i = 0; i < g->nnodes; i++) L.pos[g->nodes[i]->id] = i;
    s->vi = arena_alloc(p->arena, sizeof(ValInfo) * (size_t)(g->nvalues + 1));
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        L.in_sched[n->id] = phase < 0 || n->phase == phase || op_has(n->op, OPF_SOURCE);
    }
    bgrad_plans(&L);
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (L.bg_of && L.bg_of[n->id]) bgrad_recheck(&L, n);
        if (n->op == OP_gelu_grad && L.waits && L.waits[n->in[0]->def->id]) {
            L.waits[n->in[0]->def->id] = false;
            lower_matmul(&L, n->in[0]->def);
        }
        if (!L.in_sched[n->id] || L.done[n->id]) continue;
        ValInfo *yi = VI(&L, n->out[0]);
        switch (n->op) {
        case OP_param:
        case OP_state:
        case OP_input:
        case OP_constant:
        case OP_iota:
            if (yi->st == VS_NONE) lower_source(&L, n);
            break;
        case OP_reshape:
        case OP_permute:
        case OP_broadcast:
        case OP_slice: lower_view(&L, n); break;
        case OP_matmul:
            if (dgelu_waits(&L, n)) {
                if (!L.waits) L.waits = xcalloc((size_t)g->nextnode + 1, sizeof(bool));
                L.waits[n->id] = true;
            } else {
                lower_matmul(&L, n);
            }
            break;
        case OP_pad:
        case OP_concat: lower_pad_concat(&L, n); break;
        case OP_sum:
        case OP_mean:
        case OP_max: lower_loop(&L, n, true); break;
        case OP_cross_entropy:
            if (!try_fuse_ce(&L, n)) lower_template(&L, n);
            break;
        case OP_linear_cross_entropy: lower_linear_ce(&L, n); break;
        case OP_rope_qk: lower_rope_qk(&L, n); break;
        case OP_attention:
        case OP_attention_grad: lower_attention(&L, n); break;
        case OP_layer_norm:
        case OP_rms_norm:
        case OP_add_layer_norm:
        case OP_add_rms_norm:
        case OP_layer_norm_grad:
        case OP_rms_norm_grad:
        case OP_add_layer_norm_grad:
        case OP_add_rms_norm_grad: lower_norm(&L, n); break;
        case OP_cast:
            if (widening_for_norm(&L, n)) L.done[n->id] = true;
            else lower_loop(&L, n, false);
            break;
        case OP_adamw:
        case OP_sgd: lower_opt(&L, n); break;
        case OP_embedding_grad: lower_embedding_grad(&L, n); break;
        default:
            if (is_loop_op(n->op)) lower_loop(&L, n, false);
            else lower_template(&L, n);
        }
    }
    /* outputs the runtime reads */
    for (int i = 0; i < g->noutputs; i++) {
        Output *o = &g->outputs[i];
        if (o->kind != OUT_RESULT) continue;
        if (!L.in_sched[o->value->def->id]) continue;
        if (phase >= 0 && o->value->def->phase != phase) continue;
        materialise(&L, o->value);
        ValInfo *vi = VI(&L, o->value);
        /* the runtime reads an output as its whole buffer: a view that is
         * not one (strided, or a slice of a larger buffer) is copied */
        if (!view_is_contig(&vi->view) || vi->view.off != 0 || shape_numel(&p->bufs[vi->view.buf].shape) != shape_numel(&o->value->ty.shape)) {
            Kernel *k = new_kernel(&L, KK_COPY, o->value->def);
            int b = temp_buf(&L, o->value);
            k->src = vi->view;
            view_contig(&k->dst, b, &o->value->ty.shape);
            kern_add_dep(k, vi->kern);
            readers_wait(&L, o->value, k, vi->kern, NULL);
            vi->kern = k;
            view_contig(&vi->view, b, &o->value->ty.shape);
            vi->st = VS_BUF;
        }
        p->bufs[vi->view.buf].output = true;
    }
    lower_updates(&L);
    bool ok = !L.failed && order_kernels(&L);
    if (!ok && !L.failed) error_at(d, NOLOC, "internal: the kernel schedule has a cycle");
    else if (ok) merge_updates(&L);
    name_kernels(&L);
    /* the loop kernels' access analysis, as the emitters make it: every
     * --emit checks what emitting C or CUDA would (loop_budget keeps each
     * kernel within LOOP_MAXACC accesses) */
    for (int i = 0; ok && i < s->nk; i++) {
        if (s->k[i]->kind != KK_LOOP) continue;
        LoopNest *N = cg_loop_analyse(s, s->k[i]);
        if (N->nacc > loop_maxacc(&L)) die("loop kernel %s has %d accesses, more than %d", s->k[i]->name, N->nacc, loop_maxacc(&L));
        cg_loop_free(N);
    }
    ir_uses_free(L.uses);
    for (int i = 0; i < L.nlb; i++) free(L.lb[i].keys);
    free(L.lb);
    free(L.inuse);
    free(L.in_sched);
    free(L.done);
    free(L.pos);
    free(L.bg);
    free(L.bg_of);
    free(L.waits);
    free(L.seen);
    return ok;
}

/* The refresh graph (TRN_RUN_REFRESH): every half-precision copy state of
 * mixed precision (copy_of = P) updated to cast(P), the cast the update
 * makes after each step, so the runtime's refresh after initialising or
 * loading runs where the weights live and rounds as the step does.  NULL
 * when the model has no copies. */
static Graph *make_refresh(Graph *train, Diag *d) {
    Graph *g = NULL;
    for (int i = 0; i < train->nnodes; i++) {
        Node *st = train->nodes[i];
        const char *of = st->op == OP_state ? ir_str(st, "copy_of", NULL) : NULL;
        Node *p = of ? ir_find_source(train, OP_param, of) : NULL;
        if (!p) continue;
        if (!g) {
            g = ir_graph_new(train->name);
            g->train = train->train;
            train_copy_strings(&g->train, g->arena);
        }
        Node *np = ir_find_source(g, OP_param, of);
        if (!np) np = ir_source(g, OP_param, of, p->out[0]->ty, p->loc);
        Node *ns = ir_source(g, OP_state, ir_source_name(st), st->out[0]->ty, st->loc);
        Value *pv = np->out[0];
        Node *c = ir_new(g, OP_cast, 1, &pv, st->loc);
        ir_set_str(g, c, "dtype", dtype_name[st->out[0]->ty.dt]);
        if (!ir_emit(g, c, d)) {
            ir_graph_free(g);
            return NULL;
        }
        ir_add_update(g, ns, c->out[0]);
    }
    return g;
}

Program *cg_lower(Graph *train, Graph *fwd, Graph *sample, const char *source, const CgOptions *o, Diag *d) {
    Arena *a = arena_new();
    Program *p = arena_alloc(a, sizeof *p);
    p->arena = a;
    p->name = arena_strdup(a, train->name);
    p->source = arena_strdup(a, source ? source : "");
    p->train = train;
    p->fwd = fwd;
    p->sample = sample;
    p->fuse = o->fuse;
    p->target = arena_strdup(a, o->target ? o->target : "cpu");
    p->tc = train->train;
    bool accum = false;
    for (int i = 0; i < train->nnodes; i++) accum |= train->nodes[i]->phase == PH_STEP;
    bool ok = lower_sched(p, TRN_RUN_MICRO, train, PH_MICRO, d, o->fuse);
    ok = ok && lower_sched(p, TRN_RUN_UPDATE, accum ? train : NULL, PH_STEP, d, o->fuse);
    ok = ok && lower_sched(p, TRN_RUN_EVAL, fwd, -1, d, o->fuse);
    ok = ok && lower_sched(p, TRN_RUN_SAMPLE, sample, -1, d, o->fuse);
    p->refresh = ok ? make_refresh(train, d) : NULL;
    ok = ok && lower_sched(p, TRN_RUN_REFRESH, p->refresh, -1, d, o->fuse);
    if (sample) {
        Value *lg = ir_output(sample, "logits");
        if (lg) p->vocab = lg->ty.shape.d[lg->ty.shape.rank - 1];
    }
    ok = ok && cg_plan_memory(p, d);
    if (!ok) {
        cg_free(p);
        return NULL;
    }
    return p;
}

void cg_free(Program *p) {
    if (!p) return;
    for (int s = 0; s < TRN_RUN__COUNT; s++) {
        for (int i = 0; i < p->sched[s].nk; i++) {
            Kernel *k = p->sched[s].k[i];
            for (int j = 0; j < k->nparts; j++) {
                free(k->parts[j]->deps);
                free(k->parts[j]->reads);
                free(k->parts[j]->writes);
            }
            free(k->deps);
            free(k->reads);
            free(k->writes);
        }
        free(p->sched[s].k);
    }
    ir_graph_free(p->refresh);
    free(p->bufs);
    free(p->pslot);
    arena_free(p->arena);
}

/* ---- --emit=kernels ---- */

static void print_view(FILE *f, Program *p, const View *v) {
    if (v->buf < 0) {
        fputs("-", f);
        return;
    }
    fprintf(f, "b%d", v->buf);
    if (!view_is_contig(v)) {
        fprintf(f, "{off=%lld strides=[", (long long)v->off);
        for (int i = 0; i < v->rank; i++) fprintf(f, "%s%lld", i ? "," : "", (long long)v->stride[i]);
        fputs("]}", f);
    }
    (void)p;
}

void cg_print_kernels(FILE *f, Program *p) {
    static const char *const sname[] = {"micro-batch (forward, backward, accumulate)", "update (once per step)",
                                        "eval (forward loss)", "sample (forward logits)",
                                        "refresh (half-precision copies)"};
    for (int s = 0; s < TRN_RUN__COUNT; s++) {
        Sched *sc = &p->sched[s];
        if (!sc->g) continue;
        fprintf(f, "schedule %s: %d kernels\n", sname[s], sc->nk);
        for (int i = 0; i < sc->nk; i++) {
            Kernel *k = sc->k[i];
            char sh[160];
            fprintf(f, "  %-48s %-8s", k->name, cg_kind_name(k->kind));
            switch (k->kind) {
            case KK_LOOP:
                fprintf(f, " space %s", shape_str(&k->space, sh, sizeof sh));
                if (k->red) fprintf(f, " -> %s (%s)", shape_str(&k->rspace, sh, sizeof sh), op_name(k->red->op));
                break;
            case KK_GEMM:
                fprintf(f, " M=%lld N=%lld K=%lld%s%s", (long long)k->gemm.M, (long long)k->gemm.N, (long long)k->gemm.K,
                        k->gemm.ta ? " ta" : "", k->gemm.tb ? " tb" : "");
                if (k->gemm.nbatch) fprintf(f, " batch=%d", k->gemm.nbatch);
                if (k->gemm.bias.buf >= 0) fprintf(f, " +bias");
                if (k->gemm.epi) fprintf(f, k->gemm.epi == GEPI_GELU ? (k->gemm.aux.buf >= 0 ? " +gelu(aux)" : " +gelu") : " +dgelu");
                if (k->gemm.bgrad) fprintf(f, k->gemm.bgrad == GBG_A ? " +bgrad(a)" : " +bgrad(b)");
                if (k->gemm.accumulate) fprintf(f, " +=");
                if (p->bufs[k->gemm.c.buf].dt != p->bufs[k->gemm.a.buf].dt)
                    fprintf(f, " %s->%s", dtype_name[p->bufs[k->gemm.a.buf].dt], dtype_name[p->bufs[k->gemm.c.buf].dt]);
                break;
            case KK_COPY:
                fputs(" ", f);
                print_view(f, p, &k->src);
                fputs(" -> ", f);
                print_view(f, p, &k->dst);
                break;
            case KK_FILL: fprintf(f, " b%d = %g", k->dst.buf, k->fill); break;
            case KK_TMPL: {
                if (k->nparts) {
                    /* a multi-tensor update: one line per part below */
                    StrBuf ops = {0};
                    cg_kernel_ops(&ops, k);
                    fprintf(f, " %d tensors  [%s]\n", k->nparts, ops.s);
                    sb_free(&ops);
                    for (int j = 0; j < k->nparts; j++) {
                        Kernel *q = k->parts[j];
                        Value *w = q->nodes[0]->in[0];
                        fprintf(f, "    %-46s b%d %s", q->name, sc->vi[w->id].view.buf, shape_str(&w->ty.shape, sh, sizeof sh));
                        if (q->cast_out) fprintf(f, " -> b%d", sc->vi[q->cast_out->out[0]->id].view.buf);
                        if (q->zero_g) fprintf(f, " (then b%d = 0)", sc->vi[q->nodes[0]->in[1]->id].view.buf);
                        fputs("  [", f);
                        for (int a = 0; a < q->nnodes; a++) fprintf(f, "%s%s", a ? " " : "", op_name(q->nodes[a]->op));
                        fputs("]\n", f);
                    }
                    continue;
                }
                if (k->ce_fused) fputs(" (forward+backward, gradient in place)", f);
                if (k->zero_g) fprintf(f, " (then b%d = 0)", sc->vi[k->nodes[0]->in[1]->id].view.buf);
                if (k->acc_grads) fputs(" (weight gradients +=)", f);
                /* operands and results that are views of a wider buffer (attention's) */
                Node *n = k->nodes[0];
                for (int j = 0; j < n->nin + n->nout; j++) {
                    Value *v = j < n->nin ? n->in[j] : n->out[j - n->nin];
                    ValInfo *vi = &sc->vi[v->id];
                    if ((vi->st != VS_BUF && vi->st != VS_VIEW) || view_is_contig(&vi->view)) continue;
                    fputs(j < n->nin ? " " : " -> ", f);
                    print_view(f, p, &vi->view);
                }
                break;
            }
            }
            fputs("  [", f);
            for (int j = 0; j < k->nnodes; j++) fprintf(f, "%s%s", j ? " " : "", op_name(k->nodes[j]->op));
            fputs("]\n", f);
        }
    }
}
