/* codegen/memplan.c — the static memory plan.
 *
 * Persistent buffers (parameters, states, inputs) come first in the arena,
 * one after the other.  Temporaries of each schedule live from the kernel
 * that writes them to the last kernel that reads them (to the end of the
 * schedule for outputs the runtime reads); they get offsets after the
 * persistent region by greedy first fit, largest first, never overlapping
 * a buffer whose live range intersects theirs.  The schedules never run at
 * the same time, so they share the temporary region.  The arena is the
 * persistent region plus the largest temporary extent: that number, known
 * before anything runs, is what the runtime allocates.
 */
#include "cg.h"

#include <stdlib.h>
#include <string.h>

static int64_t align_up(int64_t x) { return (x + CG_ALIGN - 1) / CG_ALIGN * CG_ALIGN; }

const char *cg_memcat_name(MemCat c) {
    static const char *const names[MC__COUNT] = {"parameters", "gradients", "optimizer states", "inputs",
                                                 "activations saved for backward (at peak)", "temporaries (at peak)",
                                                 "workspace", "eval or sampling, beyond the step"};
    return names[c];
}

static void push_idx(int **a, int *n, int *cap, int v) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 8;
        *a = xrealloc(*a, sizeof(int) * (size_t)*cap);
    }
    (*a)[(*n)++] = v;
}

static void add_idx(int **a, int *n, int *cap, int v) {
    for (int i = 0; i < *n; i++)
        if ((*a)[i] == v) return;
    push_idx(a, n, cap, v);
}

static void rd(Kernel *k, int b) {
    if (b >= 0) add_idx(&k->reads, &k->nreads, &k->capreads, b);
}
static void wr(Kernel *k, int b) {
    if (b >= 0) add_idx(&k->writes, &k->nwrites, &k->capwrites, b);
}

static bool has_buf(const ValInfo *vi) { return vi->st == VS_BUF || vi->st == VS_VIEW; }

/* Which buffers kernel k reads and writes. */
static void kernel_rw(Sched *s, Kernel *k) {
    k->nreads = k->nwrites = 0;
    if (k->nparts) {
        /* a multi-tensor update: each part's own, and their union, in the
         * parts' order (marked by buffer id: a union of thousands of
         * parts' buffers is linear, not quadratic) */
        int maxb = 0;
        for (int j = 0; j < k->nparts; j++) {
            Kernel *q = k->parts[j];
            kernel_rw(s, q);
            for (int a = 0; a < q->nreads; a++) maxb = q->reads[a] > maxb ? q->reads[a] : maxb;
            for (int a = 0; a < q->nwrites; a++) maxb = q->writes[a] > maxb ? q->writes[a] : maxb;
        }
        unsigned char *in = xcalloc((size_t)maxb + 1, 1); /* 1: read, 2: written */
        for (int j = 0; j < k->nparts; j++) {
            Kernel *q = k->parts[j];
            for (int a = 0; a < q->nreads; a++)
                if (!(in[q->reads[a]] & 1)) in[q->reads[a]] |= 1, push_idx(&k->reads, &k->nreads, &k->capreads, q->reads[a]);
            for (int a = 0; a < q->nwrites; a++)
                if (!(in[q->writes[a]] & 2)) in[q->writes[a]] |= 2, push_idx(&k->writes, &k->nwrites, &k->capwrites, q->writes[a]);
        }
        free(in);
        return;
    }
    switch (k->kind) {
    case KK_LOOP:
    case KK_TMPL:
        for (int j = 0; j < k->nnodes; j++) {
            Node *n = k->nodes[j];
            for (int a = 0; a < n->nin; a++) {
                ValInfo *vi = &s->vi[n->in[a]->id];
                if (k->kind == KK_LOOP && vi->inl && vi->kern == k) continue;
                if (k->kind == KK_TMPL && vi->kern == k) continue; /* its own result, read by a cast it absorbed */
                if (has_buf(vi)) rd(k, vi->view.buf);
            }
            for (int r = 0; r < n->nout; r++) {
                ValInfo *vi = &s->vi[n->out[r]->id];
                if (has_buf(vi) && vi->kern == k) wr(k, vi->view.buf);
            }
        }
        if (k->scratch) wr(k, k->scratch - 1);
        if (k->zero_g) wr(k, s->vi[k->nodes[0]->in[1]->id].view.buf); /* the accumulator it resets */
        break;
    case KK_GEMM:
        rd(k, k->gemm.a.buf);
        rd(k, k->gemm.b.buf);
        rd(k, k->gemm.bias.buf);
        if (k->gemm.accumulate) rd(k, k->gemm.c.buf);
        if (k->gemm.epi == GEPI_DGELU) rd(k, k->gemm.aux.buf);
        wr(k, k->gemm.c.buf);
        if (k->gemm.epi == GEPI_GELU && k->gemm.aux.buf >= 0) wr(k, k->gemm.aux.buf);
        if (k->gemm.bgrad) wr(k, k->gemm.dbias.buf);
        break;
    case KK_COPY:
        rd(k, k->src.buf);
        wr(k, k->dst.buf);
        break;
    case KK_FILL: wr(k, k->dst.buf); break;
    }
}

static void collect_rw(Sched *s) {
    for (int i = 0; i < s->nk; i++) kernel_rw(s, s->k[i]);
}

/* Gradients, for the report: the g operand of the optimizer ops, the
 * operands of global_norm and of accumulator adds. */
static void mark_grads(Sched *s) {
    Graph *g = s->g;
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (n->op == OP_adamw || n->op == OP_sgd) s->vi[n->in[1]->id].grad = true;
        if (n->op == OP_global_norm)
            for (int j = 0; j < n->nin; j++) s->vi[n->in[j]->id].grad = true;
        if (n->op == OP_add)
            for (int j = 0; j < 2; j++) {
                Node *src = n->in[j]->def;
                const char *nm = src->op == OP_state ? ir_source_name(src) : NULL;
                if (nm && strncmp(nm, "grad_acc.", 9) == 0) s->vi[n->in[1 - j]->id].grad = true;
            }
    }
    for (int i = 0; i < g->noutputs; i++)
        if (strncmp(g->outputs[i].name, "grad.", 5) == 0) s->vi[g->outputs[i].value->id].grad = true;
    /* the parts a gradient is the sum of (a tied weight's: fused linear +
     * cross-entropy's dw, then the embedding's added to it) are gradients */
    for (int i = g->nnodes - 1; i >= 0; i--) {
        Node *n = g->nodes[i];
        if (n->op == OP_add && s->vi[n->out[0]->id].grad)
            for (int j = 0; j < 2; j++) s->vi[n->in[j]->id].grad = true;
    }
}

typedef struct Placed { int64_t off, end; int first, last; } Placed;

static int cmp_size(const void *a, const void *b, void *ctx) {
    const Buf *bufs = ctx;
    const Buf *x = &bufs[*(const int *)a], *y = &bufs[*(const int *)b];
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return x->id - y->id;
}

/* Greedy first fit: largest buffers first; each goes to the lowest offset
 * that overlaps no placed buffer whose live range intersects its own: one
 * sweep of the placed buffers, kept in order of offset.  -1 when a buffer
 * would end past room bytes (*over: its id). */
static int64_t place(Program *p, int *ids, int n, int64_t room, int *over) {
    qsort_r(ids, (size_t)n, sizeof(int), cmp_size, p->bufs);
    Placed *pl = xmalloc(sizeof(Placed) * (size_t)(n ? n : 1));
    int np = 0;
    int64_t extent = 0;
    for (int i = 0; i < n; i++) {
        Buf *b = &p->bufs[ids[i]];
        int64_t size = align_up(b->bytes);
        int64_t off = 0;
        int at = 0; /* where the new one goes in pl */
        for (int j = 0; j < np && pl[j].off < off + size; j++) {
            bool live = !(pl[j].last < b->first || b->last < pl[j].first);
            if (live && pl[j].end > off) off = pl[j].end;
        }
        if (size > room - off) { /* off <= room: every placed buffer ends within it */
            *over = ids[i];
            free(pl);
            return -1;
        }
        while (at < np && pl[at].off <= off) at++;
        memmove(&pl[at + 1], &pl[at], sizeof *pl * (size_t)(np - at));
        pl[at] = (Placed){off, off + size, b->first, b->last};
        np++;
        b->offset = p->persistent_bytes + off;
        if (off + size > extent) extent = off + size;
    }
    free(pl);
    return extent;
}

static int cmp_first(const void *a, const void *b, void *ctx) {
    const Buf *bufs = ctx;
    const Buf *x = &bufs[*(const int *)a], *y = &bufs[*(const int *)b];
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return x->id - y->id;
}

/* The plan's invariant, checked: no two temporaries of a schedule that are
 * live at the same time overlap in memory.  A sweep in order of first use:
 * each buffer is compared with those still live when it starts. */
static void check_plan(Program *p, int *ids, int n) {
    qsort_r(ids, (size_t)n, sizeof(int), cmp_first, p->bufs);
    int *act = xmalloc(sizeof(int) * (size_t)(n ? n : 1));
    int na = 0;
    for (int i = 0; i < n; i++) {
        Buf *a = &p->bufs[ids[i]];
        if (a->offset + a->bytes > p->arena_bytes) die("buffer b%d ends past the arena", a->id);
        int m = 0;
        for (int j = 0; j < na; j++) {
            Buf *b = &p->bufs[act[j]];
            if (b->last < a->first) continue; /* dead before a starts, and for every later buffer */
            act[m++] = act[j];
            if (a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes)
                die("memory plan: b%d and b%d are live together and overlap", b->id, a->id);
        }
        na = m;
        act[na++] = ids[i];
    }
    free(act);
}

/* The error of a plan past CG_MAX_ARENA: buffer b is the first that does
 * not fit after `before` bytes (persistent buffers: those before it;
 * temporaries: the persistent region); at its value's source (a param's
 * declaration), where it has one. */
static bool too_big(Diag *d, const Buf *b, int64_t before) {
    static const char *const kinds[] = {"param", "state", "input", "temporary"};
    SrcLoc loc = b->value && b->value->def ? b->value->def->loc : NOLOC;
    char ts[160];
    Type t = {b->dt, b->shape};
    bool named = b->name && *b->name;
    error_at(d, loc, "the memory plan exceeds 2^62 bytes: %s %s %s%s%s(%s) does not fit after %s%lld bytes", b->kind == BK_TEMP ? "a" : "the",
             kinds[b->kind], named ? "'" : "", named ? b->name : "", named ? "' " : "", type_str(&t, ts, sizeof ts),
             b->kind == BK_TEMP ? "the other temporaries of its schedule and the persistent " : "", (long long)before);
    return false;
}

bool cg_plan_memory(Program *p, Diag *d) {
    /* persistent region: params, then states, then inputs */
    int64_t off = 0;
    for (int kind = BK_PARAM; kind <= BK_INPUT; kind++)
        for (int i = 0; i < p->nbufs; i++) {
            Buf *b = &p->bufs[i];
            if ((int)b->kind != kind) continue;
            if (align_up(b->bytes) > CG_MAX_ARENA - off) return too_big(d, b, off);
            b->offset = off;
            off += align_up(b->bytes);
            b->cat = kind == BK_PARAM ? MC_PARAM : kind == BK_INPUT ? MC_INPUT
                   : strncmp(b->name, "grad_acc.", 9) == 0 ? MC_GRAD : MC_OPTSTATE;
            p->cat_bytes[b->cat] += b->bytes;
        }
    p->persistent_bytes = off;

    /* the report's categories are those of the training step: at the peak
     * of TRN_RUN_MICRO (or of TRN_RUN_UPDATE when that is higher) */
    int64_t max_extent = 0;
    int peak_sched = -1, peak_pos = -1;
    int64_t peak_live = -1;
    for (int si = 0; si < TRN_RUN__COUNT; si++) {
        Sched *s = &p->sched[si];
        if (!s->g) continue;
        collect_rw(s);
        mark_grads(s);
        int *ids = xmalloc(sizeof(int) * (size_t)(p->nbufs ? p->nbufs : 1));
        int n = 0;
        for (int i = 0; i < s->nk; i++) {
            Kernel *k = s->k[i];
            for (int j = 0; j < k->nwrites; j++) {
                Buf *b = &p->bufs[k->writes[j]];
                if (b->kind != BK_TEMP) continue;
                if (b->first < 0 || i < b->first) b->first = i;
                if (b->last < i) b->last = i;
            }
            for (int j = 0; j < k->nreads; j++) {
                Buf *b = &p->bufs[k->reads[j]];
                if (b->kind != BK_TEMP) continue;
                if (b->first < 0) {
                    error_at(d, k->loc, "internal: kernel %s reads buffer b%d before anything writes it", k->name, b->id);
                    free(ids);
                    return false;
                }
                if (b->last < i) b->last = i;
            }
        }
        for (int i = 0; i < p->nbufs; i++) {
            Buf *b = &p->bufs[i];
            if (b->kind != BK_TEMP || b->sched != si) continue;
            if (b->first < 0) {
                b->offset = -1; /* never written: a value nothing materialised */
                continue;
            }
            if (b->output) b->last = s->nk;
            ids[n++] = i;
        }
        int over = -1;
        int64_t extent = place(p, ids, n, CG_MAX_ARENA - p->persistent_bytes, &over);
        if (extent < 0) {
            free(ids);
            return too_big(d, &p->bufs[over], p->persistent_bytes);
        }
        p->extent[si] = extent;
        if (extent > max_extent) max_extent = extent;
        /* live bytes at each position: the peak of this schedule */
        int64_t *delta = xcalloc((size_t)s->nk + 2, sizeof(int64_t));
        for (int i = 0; i < n; i++) {
            Buf *b = &p->bufs[ids[i]];
            delta[b->first] += b->bytes;
            delta[b->last + 1] -= b->bytes;
        }
        int64_t live = 0;
        for (int pos = 0; pos <= s->nk; pos++) {
            live += delta[pos];
            if (live > p->peak[si]) p->peak[si] = live;
            if ((si == TRN_RUN_MICRO || si == TRN_RUN_UPDATE) && live > peak_live) {
                peak_live = live;
                peak_sched = si;
                peak_pos = pos;
            }
        }
        free(delta);
        free(ids);
    }
    p->arena_bytes = p->persistent_bytes + max_extent;
    int64_t step_extent = p->extent[TRN_RUN_MICRO] > p->extent[TRN_RUN_UPDATE] ? p->extent[TRN_RUN_MICRO] : p->extent[TRN_RUN_UPDATE];
    p->cat_bytes[MC_OTHER] = max_extent - step_extent; /* eval, sampling or refresh needs more than the step */

    /* the report's categories at the peak */
    if (peak_sched >= 0) {
        Sched *s = &p->sched[peak_sched];
        int loss_pos = -1;
        Value *loss = ir_output(s->g, "loss");
        for (int i = 0; i < s->nk && loss; i++)
            for (int j = 0; j < s->k[i]->nnodes; j++)
                for (int r = 0; r < s->k[i]->nodes[j]->nout; r++)
                    if (s->k[i]->nodes[j]->out[r] == loss) loss_pos = i;
        for (int i = 0; i < p->nbufs; i++) {
            Buf *b = &p->bufs[i];
            if (b->kind != BK_TEMP || b->sched != peak_sched || b->offset < 0) continue;
            if (!(b->first <= peak_pos && peak_pos <= b->last)) continue;
            ValInfo *vi = b->value ? &s->vi[b->value->id] : NULL;
            if (vi && vi->grad) b->cat = MC_GRAD;
            else if (b->first <= loss_pos && b->last > loss_pos) b->cat = MC_ACT; /* made by the forward pass, read after the loss */
            else b->cat = MC_TEMP;
            p->cat_bytes[b->cat] += b->bytes;
        }
    }

    for (int si = 0; si < TRN_RUN__COUNT; si++) {
        int *ids = xmalloc(sizeof(int) * (size_t)(p->nbufs ? p->nbufs : 1));
        int n = 0;
        for (int i = 0; i < p->nbufs; i++)
            if (p->bufs[i].kind == BK_TEMP && p->bufs[i].offset >= 0 && p->bufs[i].sched == si) ids[n++] = i;
        check_plan(p, ids, n);
        free(ids);
    }
    return true;
}

static void human(char *buf, size_t n, int64_t bytes) {
    if (bytes >= (int64_t)1 << 30) snprintf(buf, n, "%.2f GiB", (double)bytes / (1 << 30));
    else if (bytes >= 1 << 20) snprintf(buf, n, "%.2f MiB", (double)bytes / (1 << 20));
    else if (bytes >= 1 << 10) snprintf(buf, n, "%.2f KiB", (double)bytes / (1 << 10));
    else snprintf(buf, n, "%lld B", (long long)bytes);
}

void cg_print_report(FILE *f, Program *p) {
    char h[64];
    fprintf(f, "memory plan for %s (one arena, allocated once):\n", p->name);
    int64_t sum = 0;
    for (int c = 0; c < MC__COUNT; c++) {
        human(h, sizeof h, p->cat_bytes[c]);
        fprintf(f, "  %-42s %16lld  %12s\n", cg_memcat_name((MemCat)c), (long long)p->cat_bytes[c], h);
        sum += p->cat_bytes[c];
    }
    human(h, sizeof h, p->arena_bytes - sum);
    fprintf(f, "  %-42s %16lld  %12s\n", "alignment, fragmentation", (long long)(p->arena_bytes - sum), h);
    human(h, sizeof h, p->arena_bytes);
    fprintf(f, "  %-42s %16lld  %12s\n", "total (arena)", (long long)p->arena_bytes, h);
    static const char *const sname[TRN_RUN__COUNT] = {"step", "update", "eval", "sampling", "refresh"};
    fputs("temporaries at each schedule's peak:", f);
    for (int i = 0, first = 1; i < TRN_RUN__COUNT; i++) {
        if (!p->sched[i].g || p->sched[i].nk == 0) continue;
        if (i == TRN_RUN_REFRESH && p->peak[i] == 0) continue; /* casts in place, as expected */
        human(h, sizeof h, p->peak[i]);
        fprintf(f, "%s %s %s", first ? "" : ",", sname[i], h);
        first = 0;
    }
    fputc('\n', f);
    PassOptions po = {0};
    po.target = p->target;
    pad_tiles_advice(f, p->train, &po);
}
