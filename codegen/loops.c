/* codegen/loops.c — the access analysis of loop kernels and the text
 * helpers that the C emitter (emit_c.c) and the CUDA emitter (emit_cuda.c)
 * share; see loops.h.
 */
#include "loops.h"

#include <stdlib.h>
#include <string.h>

/* ===================================================================== */
/* the access analysis                                                    */
/* ===================================================================== */

static bool in_kernel(const Sched *s, const Kernel *k, const Value *v) {
    const ValInfo *vi = &s->vi[v->id];
    return vi->inl && vi->kern == k;
}

/* Strides over the space dims of view v, broadcast to opspace: the shape a
 * node sees its operand in, which is the loop space, or (post) the
 * reduction's result shape, whose dims map onto the kept space dims. */
static bool map_view(const LoopNest *L, View v, bool post, const Shape *opspace, int64_t *st, int64_t *off) {
    if (!view_broadcast(&v, opspace)) return false;
    *off = v.off;
    if (!post) {
        for (int i = 0; i < L->rank; i++) st[i] = v.stride[i];
        return true;
    }
    bool keep = ir_int(L->k->red, "keepdim", 0);
    int j = 0;
    for (int i = 0; i < L->rank; i++) {
        if (L->reduced[i]) {
            st[i] = 0;
            if (keep) j++;
        } else {
            st[i] = v.stride[j++];
        }
    }
    return true;
}

/* An access, merged with an equal earlier one (virtual ones never merge). */
static int add_acc(LoopNest *L, LoopAcc a) {
    for (int i = 0; i < L->nacc; i++) {
        LoopAcc *b = &L->acc[i];
        if (b->buf == a.buf && b->off == a.off && b->store == a.store && b->dt == a.dt && b->post == a.post &&
            memcmp(b->st, a.st, sizeof a.st) == 0 && a.buf >= 0)
            return i;
    }
    if (L->nacc == LOOP_MAXACC) die("too many accesses in one loop kernel");
    a.id = L->nacc;
    L->acc[L->nacc++] = a;
    return a.id;
}

/* The shape operand j is seen in by node m (the broadcast target). */
static Shape operand_space(const LoopNest *L, const Node *m, int j) {
    const Kernel *k = L->k;
    if (m == k->red) return k->space;
    /* max_grad's dy and y: the reduced shape with unit dims put back */
    if (m->op == OP_max_grad && j != 1) return m->in[1]->ty.shape;
    return m->out[0]->ty.shape;
}

/* For max_grad's reduced operands: a view of the reduced value with unit
 * dims at the reduced axes (so it broadcasts over them). */
static View unreduce_view(const Node *m, View v) {
    if (ir_int(m, "keepdim", 0)) return v;
    const Attr *ax = ir_attr(m, "axes");
    int rank = m->in[1]->ty.shape.rank;
    View r = v;
    r.rank = rank;
    int j = 0;
    for (int i = 0; i < rank; i++) {
        bool red = false;
        for (int a = 0; a < ax->n; a++) red |= ax->v[a] == i;
        if (red) {
            r.shape[i] = 1;
            r.stride[i] = 0;
        } else {
            r.shape[i] = v.shape[j];
            r.stride[i] = v.stride[j];
            j++;
        }
    }
    return r;
}

/* Merges space dims into loops: kept dims, then reduced dims; a size-1 dim
 * is no loop; a dim joins the previous loop of its kind when every access
 * walks the two as one. */
static void collapse(LoopNest *L) {
    int order[IR_MAX_RANK], no = 0;
    for (int i = 0; i < L->rank; i++)
        if (!L->reduced[i]) order[no++] = i;
    for (int i = 0; i < L->rank; i++)
        if (L->reduced[i]) order[no++] = i;
    L->nl = 0;
    for (int oi = 0; oi < no; oi++) {
        int d = order[oi];
        int64_t size = L->k->space.d[d];
        if (size == 1) continue;
        bool red = L->reduced[d];
        if (L->nl > 0 && L->lred[L->nl - 1] == red) {
            bool ok = true;
            for (int a = 0; a < L->nacc && ok; a++) ok = L->lst[a][L->nl - 1] == L->acc[a].st[d] * size;
            if (ok) {
                L->lsize[L->nl - 1] *= size;
                for (int a = 0; a < L->nacc; a++) L->lst[a][L->nl - 1] = L->acc[a].st[d];
                continue;
            }
        }
        L->lsize[L->nl] = size;
        L->lred[L->nl] = red;
        for (int a = 0; a < L->nacc; a++) L->lst[a][L->nl] = L->acc[a].st[d];
        L->nl++;
    }
}

LoopNest *cg_loop_analyse(Sched *s, Kernel *k) {
    LoopNest *L = xcalloc(1, sizeof(LoopNest));
    L->s = s;
    L->k = k;
    L->rank = k->space.rank;
    if (k->red) {
        const Attr *ax = ir_attr(k->red, "axes");
        for (int i = 0; i < ax->n; i++) L->reduced[ax->v[i]] = true;
    }
    /* accesses: loads of operands computed elsewhere, stores of stored
     * results, virtual accesses for iota and dropout's element index */
    L->opacc = xcalloc((size_t)k->nnodes, sizeof *L->opacc);
    L->resacc = xcalloc((size_t)k->nnodes, sizeof(int));
    L->linacc = xcalloc((size_t)k->nnodes, sizeof(int));
    bool past_red = false; /* a node after k's reduction is its epilogue ("post"); one pass over the nodes (a kernel may fuse thousands) */
    for (int i = 0; i < k->nnodes; i++) {
        Node *m = k->nodes[i];
        bool post = past_red;
        if (m == k->red) past_red = true;
        L->resacc[i] = L->linacc[i] = -1;
        if (m->op == OP_iota) {
            /* a materialised iota: the kernel computes it over its own shape */
            LoopAcc a = {0};
            a.buf = -1;
            View v;
            view_contig(&v, -1, &m->out[0]->ty.shape);
            for (int d = 0; d < L->rank; d++) a.st[d] = v.stride[d];
            L->linacc[i] = add_acc(L, a);
        }
        for (int j = 0; j < m->nin && j < LOOP_MAXIN; j++) {
            Value *x = m->in[j];
            L->opacc[i][j] = -1;
            if (in_kernel(s, k, x)) continue;
            ValInfo *xi = &s->vi[x->id];
            Shape osp = operand_space(L, m, j);
            LoopAcc a = {0};
            a.post = post;
            a.dt = x->ty.dt;
            if (xi->st == VS_INLINE && !xi->kern) {
                if (x->def->op == OP_constant) continue;
                /* inline iota: virtual contiguous view of its own shape */
                View v;
                view_contig(&v, -1, &x->ty.shape);
                if (!map_view(L, v, post, &osp, a.st, &a.off)) die("iota view");
                a.buf = -1;
                L->opacc[i][j] = add_acc(L, a);
                continue;
            }
            View v = xi->view;
            if (m->op == OP_max_grad && j != 1) v = unreduce_view(m, v);
            a.buf = v.buf;
            if (!map_view(L, v, post, &osp, a.st, &a.off))
                die("kernel %s: operand %d of %s does not broadcast to the loop space", k->name, j, op_name(m->op));
            L->opacc[i][j] = add_acc(L, a);
        }
        if (m->op == OP_dropout) {
            LoopAcc a = {0};
            a.buf = -1;
            a.post = post;
            View v;
            view_contig(&v, -1, &m->out[0]->ty.shape);
            Shape osp = m->out[0]->ty.shape;
            map_view(L, v, post, &osp, a.st, &a.off);
            L->linacc[i] = add_acc(L, a);
        }
        Value *y = m->out[0];
        ValInfo *yi = &s->vi[y->id];
        if ((yi->st == VS_BUF || yi->st == VS_VIEW) && yi->kern == k) {
            LoopAcc a = {0};
            a.store = true;
            a.post = post || m == k->red;
            a.dt = y->ty.dt;
            a.buf = yi->view.buf;
            Shape osp = y->ty.shape;
            if (!map_view(L, yi->view, a.post, &osp, a.st, &a.off)) die("store view");
            L->resacc[i] = add_acc(L, a);
        }
    }
    collapse(L);
    return L;
}

void cg_loop_free(LoopNest *L) {
    if (!L) return;
    free(L->opacc);
    free(L->resacc);
    free(L->linacc);
    free(L);
}

LoopOperand cg_loop_operand(const LoopNest *L, int i, int j) {
    const Value *x = L->k->nodes[i]->in[j];
    if (in_kernel(L->s, L->k, x)) return LOOP_OP_VALUE;
    const ValInfo *xi = &L->s->vi[x->id];
    if (xi->st == VS_INLINE && !xi->kern && x->def->op == OP_constant) return LOOP_OP_CONST;
    return L->acc[L->opacc[i][j]].buf < 0 ? LOOP_OP_VIRTUAL : LOOP_OP_LOAD;
}

void cg_loop_idx(const LoopNest *L, int a, const char *sfx, char *buf, size_t n) {
    size_t k = 0;
    bool any = false;
    buf[0] = 0;
    if (L->acc[a].off) {
        k = (size_t)snprintf(buf, n, "%lld%s", (long long)L->acc[a].off, sfx);
        any = true;
    }
    for (int i = 0; i < L->nl; i++) {
        int64_t s = L->lst[a][i];
        if (!s) continue;
        if (s == 1) k += (size_t)snprintf(buf + k, n - k, "%si%d", any ? " + " : "", i);
        else k += (size_t)snprintf(buf + k, n - k, "%si%d * %lld%s", any ? " + " : "", i, (long long)s, sfx);
        any = true;
    }
    if (!any) snprintf(buf, n, "0");
}

void cg_loop_iota(const Node *io, int64_t *inner, int64_t *size) {
    const Shape *s = &io->out[0]->ty.shape;
    int ax = (int)ir_int(io, "axis", 0);
    *inner = 1;
    for (int d = ax + 1; d < s->rank; d++) *inner *= s->d[d];
    *size = s->rank ? s->d[ax] : 1;
}

int64_t cg_loop_red_count(const Kernel *k) {
    int64_t r = shape_numel(&k->rspace);
    return shape_numel(&k->space) / (r ? r : 1);
}

/* ===================================================================== */
/* text helpers                                                           */
/* ===================================================================== */

void cg_c_string_n(FILE *f, const char *s, size_t n, const char *tail) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; p < (const unsigned char *)s + n; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p >= 32 && *p < 127 && *p != '?') fputc(*p, f);
        else fprintf(f, "\\%03o", *p);
    }
    fprintf(f, "%s\"", tail);
}

void cg_c_string(FILE *f, const char *s) { cg_c_string_n(f, s, strlen(s), ""); }

void cg_comment_text(StrBuf *b, const char *s) {
    for (const char *p = s; *p; p++) {
        if (p[0] == '*' && p[1] == '/') {
            sb_puts(b, "* /");
            p++;
        } else if (*p == '\n' || *p == '\r') {
            sb_putc(b, ' ');
        } else {
            sb_putc(b, *p);
        }
    }
}

void cg_c_ident(StrBuf *b, const char *s) {
    for (const char *p = s; *p; p++)
        sb_putc(b, (char)((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ? *p : '_'));
}

void cg_describe_buf(StrBuf *b, Program *p, int id, const char *role) {
    Buf *bf = &p->bufs[id];
    char ts[160];
    Type t = {bf->dt, bf->shape};
    static const char *const kinds[] = {"param", "state", "input", "temp"};
    if (bf->name && *bf->name) {
        sb_printf(b, " *   b%-4d %-6s %-5s %-24s offset %-10lld ", id, role, kinds[bf->kind], type_str(&t, ts, sizeof ts),
                  (long long)bf->offset);
        cg_comment_text(b, bf->name);
    } else { /* (no blanks at the line's end) */
        sb_printf(b, " *   b%-4d %-6s %-5s %-24s offset %lld", id, role, kinds[bf->kind], type_str(&t, ts, sizeof ts), (long long)bf->offset);
    }
    sb_putc(b, '\n');
}

void cg_kernel_ops(StrBuf *b, const Kernel *k) {
    if (!k->nparts) {
        for (int i = 0; i < k->nnodes; i++) sb_printf(b, "%s%s", i ? " " : "", op_name(k->nodes[i]->op));
        return;
    }
    int shown = 0;
    for (int i = 0; i < k->nnodes; i++) {
        bool dup = false;
        for (int q = 0; q < i; q++) dup |= k->nodes[q]->op == k->nodes[i]->op;
        if (dup) continue;
        int n = 0;
        for (int q = i; q < k->nnodes; q++) n += k->nodes[q]->op == k->nodes[i]->op;
        sb_printf(b, "%s%s x%d", shown++ ? ", " : "", op_name(k->nodes[i]->op), n);
    }
}

int cg_value_buf(const Sched *s, const Value *v) {
    const ValInfo *vi = &s->vi[v->id];
    if (vi->st != VS_BUF && vi->st != VS_VIEW) die("template operand %%%d has no buffer", v->id);
    return vi->view.buf;
}

Value *cg_norm_operand(const Sched *s, Value *v) {
    if (s->vi[v->id].st == VS_NONE && v->def->op == OP_cast) return v->def->in[0];
    return v;
}

Value *cg_stored_result(const Kernel *k, Value *v) { return k->cast_out && k->cast_out->in[0] == v ? k->cast_out->out[0] : v; }

Value *cg_lce_result(const Kernel *k, int j, Value **scale) {
    Value *y = k->nodes[0]->out[j];
    Node *m = k->lce_mul[j];
    *scale = m ? m->in[m->in[0] == y ? 1 : 0] : NULL;
    return cg_stored_result(k, m ? m->out[0] : y);
}

void cg_att_layout(const Sched *s, const Value *v, int64_t l[3], int64_t *off) {
    const View *w = &s->vi[v->id].view;
    cg_value_buf(s, v);
    if (w->rank != 4 || (w->stride[3] != 1 && w->shape[3] != 1)) die("attention operand %%%d: not a [B,H,T,D] view with D contiguous", v->id);
    for (int i = 0; i < 3; i++) l[i] = w->stride[i];
    /* T = 1: the rows' stride is never followed, but the products of the
     * C template take it as a leading dimension, which BLAS wants >= D */
    if (w->shape[2] == 1) l[2] = w->shape[3];
    *off = w->off;
}

bool cg_gemm_layout(const View *v, int *t, int64_t *ld) {
    int r = v->rank;
    int64_t rows = v->shape[r - 2], cols = v->shape[r - 1], sr = v->stride[r - 2], sc = v->stride[r - 1];
    /* rows sr apart, each contiguous (or one column) */
    if ((sc == 1 || cols == 1) && sr >= cols && sr > 0) {
        *t = 0, *ld = sr;
        return true;
    }
    /* columns sc apart, each contiguous (or one row): the transpose's rows */
    if ((sr == 1 || rows == 1) && sc >= rows && sc > 0) {
        *t = 1, *ld = sc;
        return true;
    }
    /* one element: its strides (a view's 0s) are never followed, and a 0
     * would be a leading dimension BLAS refuses, leaving the output as it
     * was; 1 is one it takes */
    if (rows == 1 && cols == 1) {
        *t = 0, *ld = 1;
        return true;
    }
    *t = 1, *ld = sc; /* no layout BLAS takes: gemm_operand copies such an operand, lower_matmul refuses one */
    return false;
}
