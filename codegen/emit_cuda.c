/* codegen/emit_cuda.c — the CUDA backend's emitter: the kernel IR as CUDA C
 * (compiled by NVRTC, codegen/nvrtc.c) and the launch tables the runtime
 * (runtime/cuda.c) replays.  It reads the same Program as emit_c.c and
 * computes the same things, op for op; only how loops are parallelised and
 * how templates are spelled differ:
 *
 *   loop kernels   pointwise: one thread per element, or per four with
 *                  16-byte loads and stores when the innermost loop allows;
 *                  with a reduction: one warp or block per kept element when
 *                  the reduced loop is the contiguous one ("rows"), else
 *                  32 kept elements per block of 32 x 16 threads ("columns");
 *                  accumulators in double, like the C backend's
 *   copies, fills  one thread per element (memset for zero fills)
 *   GEMMs          cuBLASLt (runtime/cuda.c), described by TrnCudaGemm
 *   templates      __global__ wrappers of runtime/trainc_cuda.cuh's
 *                  device functions, sizes as constants
 *
 * Kernel arguments are the buffers it touches (pointers into the arena);
 * sizes, strides and offsets within a buffer are constants.  Kernels whose
 * text is the same (the same layer norm in every layer) become one
 * function, so NVRTC compiles each shape once.  Every function is preceded
 * by a comment naming its kernels, ops, .model lines, buffers (shape,
 * dtype, arena offset) and launch configuration.  Output depends only on
 * the program.
 */
#include "cuda.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NT 256                  /* threads per block of one-thread-per-element kernels */
#define CU_MAXPARAM TRN_CUDA_MAXARGS

/* ---- the module being built ---- */

typedef struct CuLaunch {
    int      fn;
    unsigned grid[3], block[3], smem;
    int      nargs;
    int64_t  arg[CU_MAXPARAM];
} CuLaunch;

typedef struct CuKern {
    Kernel   *k;
    int       sched;
    int       kind;             /* TRN_CK_* */
    int       nl;
    CuLaunch  l[4];
    int64_t   ms_off, ms_bytes;
} CuKern;

typedef struct CuFn {
    char   *name;
    char   *text;               /* the function, "@FN@" for its name */
    StrBuf  doc;                /* the comment above it */
    bool    tmpl;
} CuFn;

struct CudaModule {
    Program *p;
    StrBuf   src;
    CuFn    *fn;
    int      nfn, capfn;
    CuKern  *kr;
    int      nkr, capkr;
    char    *sym;               /* trn_cuda_module_<id> */
};

typedef struct Emit {
    CudaModule *m;
    Program    *p;
    Sched      *s;
    Diag       *d;
    bool        ok;
} Emit;

/* Parameters of one generated function: one pointer per distinct buffer
 * (same buffer, same pointer: in-place updates stay correct under
 * __restrict__), or the arena base. */
typedef struct Params {
    int  n;
    int  buf[CU_MAXPARAM];      /* -1: the arena base / the workspace */
    int64_t off[CU_MAXPARAM];   /* argument: arena byte offset */
    bool write[CU_MAXPARAM];
    char decl[CU_MAXPARAM][64];
} Params;

/* ===================================================================== */
/* small helpers                                                          */
/* ===================================================================== */

static const char *st_type(DType dt) {
    switch (dt) {
    case DT_f32: return "float";
    case DT_f64: return "double";
    case DT_bf16: return "trn_bf16";
    case DT_f16: return "trn_f16";
    case DT_i32: return "int32_t";
    case DT_i64: return "int64_t";
    case DT_u8: return "uint8_t";
    default: unreachable();
    }
}

/* The type a value is computed in: float for f32, bf16, f16 (bf16 and f16
 * rounded after every op), double for f64, long long for integers. */
static const char *cp_type(DType dt) {
    if (dt == DT_f64) return "double";
    return dtype_is_float[dt] ? "float" : "long long";
}
static bool is_f(DType dt) { return dtype_is_float[dt] && dt != DT_f64; }

static void load_expr(StrBuf *b, DType dt, const char *ptr, const char *idx) {
    switch (dt) {
    case DT_f32:
    case DT_f64: sb_printf(b, "%s[%s]", ptr, idx); break;
    case DT_bf16:
    case DT_f16: sb_printf(b, "trn_f32(%s[%s])", ptr, idx); break;
    default: sb_printf(b, "(long long)%s[%s]", ptr, idx); break;
    }
}

static void store_stmt(StrBuf *b, DType dt, const char *ptr, const char *idx, const char *val) {
    switch (dt) {
    case DT_f32:
    case DT_f64: sb_printf(b, "%s[%s] = %s;\n", ptr, idx, val); break;
    case DT_bf16:
    case DT_f16: sb_printf(b, "trn_st(%s + (%s), %s);\n", ptr, idx, val); break;
    default: sb_printf(b, "%s[%s] = (%s)%s;\n", ptr, idx, st_type(dt), val); break;
    }
}

/* A float literal of a double in compute type dt. */
static void lit_expr(char *out, size_t n, double v, DType dt) {
    char lit[32];
    fmt_double(lit, v);
    if (isinf(v)) snprintf(lit, sizeof lit, "%sTRN_DINF", v < 0 ? "-" : "");
    else if (isnan(v)) snprintf(lit, sizeof lit, "(TRN_DINF - TRN_DINF)");
    if (dt == DT_f64) snprintf(out, n, "%s", lit);
    else if (dt == DT_bf16) snprintf(out, n, "trn_r_bf16((float)(%s))", lit);
    else if (dt == DT_f16) snprintf(out, n, "trn_r_f16((float)(%s))", lit);
    else if (dtype_is_float[dt]) snprintf(out, n, "(float)(%s)", lit);
    else snprintf(out, n, "(long long)(%s)", lit);
}

static void ind(StrBuf *b, int n) {
    for (int i = 0; i < n; i++) sb_puts(b, "    ");
}

static void comment_text(StrBuf *b, const char *s) {
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

static unsigned cdiv(int64_t a, int64_t b) { return (unsigned)((a + b - 1) / b); }

static int vbuf(Emit *e, Value *v) {
    ValInfo *vi = &e->s->vi[v->id];
    if (vi->st != VS_BUF && vi->st != VS_VIEW) die("cuda: operand %%%d has no buffer", v->id);
    return vi->view.buf;
}

/* The parameter for buffer b (added when new). */
static int param(Emit *e, Params *P, int b, bool write) {
    for (int i = 0; i < P->n; i++)
        if (P->buf[i] == b) {
            P->write[i] |= write;
            return i;
        }
    if (P->n == CU_MAXPARAM) die("cuda: more than %d buffers in one kernel", CU_MAXPARAM);
    int i = P->n++;
    P->buf[i] = b;
    P->write[i] = write;
    P->off[i] = b >= 0 ? e->p->bufs[b].offset : 0;
    return i;
}
static int param_ws(Emit *e, Params *P) {
    int i = param(e, P, -2, true);
    P->off[i] = e->p->workspace_off;
    return i;
}
static int param_arena(Emit *e, Params *P) { return param(e, P, -1, false); }

/* The signature "(float *__restrict__ p0, const float *__restrict__ p1, ...)". */
static void signature(Emit *e, Params *P, StrBuf *b, bool restrict_) {
    sb_putc(b, '(');
    for (int i = 0; i < P->n; i++) {
        const char *ty = P->buf[i] == -1 ? "unsigned char" : P->buf[i] == -2 ? "void" : st_type(e->p->bufs[P->buf[i]].dt);
        sb_printf(b, "%s%s%s *%sp%d", i ? ", " : "", P->write[i] || P->buf[i] < 0 ? "" : "const ", ty,
                  restrict_ && P->buf[i] >= 0 ? "__restrict__ " : "", i);
    }
    sb_putc(b, ')');
}

/* Describes buffer id in a comment line. */
static void describe_buf(StrBuf *b, Program *p, int id, const char *role) {
    Buf *bf = &p->bufs[id];
    char ts[160];
    Type t = {bf->dt, bf->shape};
    static const char *const kinds[] = {"param", "state", "input", "temp"};
    sb_printf(b, " *   b%-4d %-6s %-5s %-24s offset %-10lld ", id, role, kinds[bf->kind], type_str(&t, ts, sizeof ts),
              (long long)bf->offset);
    if (bf->name) comment_text(b, bf->name);
    sb_putc(b, '\n');
}

static void kernel_doc(Emit *e, Kernel *k, StrBuf *b, const Params *P, const CuLaunch *l, int nl, bool first) {
    Program *p = e->p;
    sb_printf(b, "%s%s: %s [", first ? "/* " : " * also ", k->name, cg_kind_name(k->kind));
    for (int i = 0; i < k->nnodes; i++) sb_printf(b, "%s%s", i ? " " : "", op_name(k->nodes[i]->op));
    sb_puts(b, "]");
    if (k->loc.file) {
        sb_puts(b, "  from ");
        comment_text(b, k->loc.file);
        sb_printf(b, ":%d", k->loc.line);
    }
    sb_putc(b, '\n');
    if (first) {
        for (int i = 0; i < k->nreads; i++) describe_buf(b, p, k->reads[i], "read");
        for (int i = 0; i < k->nwrites; i++) describe_buf(b, p, k->writes[i], "write");
        if (P) {
            sb_puts(b, " *   arguments:");
            for (int i = 0; i < P->n; i++)
                sb_printf(b, " p%d=%s%d", i, P->buf[i] == -1 ? "arena" : P->buf[i] == -2 ? "workspace" : "b", P->buf[i] < 0 ? 0 : P->buf[i]);
            sb_putc(b, '\n');
        }
    }
    for (int i = 0; i < nl; i++)
        sb_printf(b, " *   launch: grid (%u,%u,%u) x block (%u,%u,%u), %u B dynamic shared memory\n", l[i].grid[0], l[i].grid[1],
                  l[i].grid[2], l[i].block[0], l[i].block[1], l[i].block[2], l[i].smem);
}

/* Adds a function (text with "@FN@" for its name): an identical earlier
 * one is reused.  Returns its index. */
static int add_fn(Emit *e, Kernel *k, const char *suffix, char *text, bool tmpl) {
    CudaModule *m = e->m;
    for (int i = 0; i < m->nfn; i++)
        if (strcmp(m->fn[i].text, text) == 0) {
            free(text);
            return i;
        }
    if (m->nfn == m->capfn) {
        m->capfn = m->capfn ? 2 * m->capfn : 64;
        m->fn = xrealloc(m->fn, sizeof(CuFn) * (size_t)m->capfn);
    }
    CuFn *f = &m->fn[m->nfn];
    memset(f, 0, sizeof *f);
    StrBuf nm = {0};
    sb_printf(&nm, "%s%s", k->name, suffix);
    f->name = sb_take(&nm);
    f->text = text;
    f->tmpl = tmpl;
    return m->nfn++;
}

static CuKern *new_kr(Emit *e, Kernel *k, int kind) {
    CudaModule *m = e->m;
    if (m->nkr == m->capkr) {
        m->capkr = m->capkr ? 2 * m->capkr : 256;
        m->kr = xrealloc(m->kr, sizeof(CuKern) * (size_t)m->capkr);
    }
    CuKern *r = &m->kr[m->nkr++];
    memset(r, 0, sizeof *r);
    r->k = k;
    r->sched = (int)e->s->which;
    r->kind = kind;
    return r;
}

/* Records a launch of function text (made from P) for kernel k. */
static void launch(Emit *e, CuKern *r, const char *suffix, const Params *P, char *text, bool tmpl, unsigned gx, unsigned gy,
                   unsigned bx, unsigned by) {
    if (r->nl == 4) die("cuda: too many launches for one kernel");
    CuLaunch *l = &r->l[r->nl++];
    memset(l, 0, sizeof *l);
    l->fn = add_fn(e, r->k, suffix, text, tmpl);
    l->grid[0] = gx ? gx : 1;
    l->grid[1] = gy ? gy : 1;
    l->grid[2] = 1;
    l->block[0] = bx;
    l->block[1] = by ? by : 1;
    l->block[2] = 1;
    l->nargs = P->n;
    for (int i = 0; i < P->n; i++) l->arg[i] = P->off[i];
    CuFn *f = &e->m->fn[l->fn];
    kernel_doc(e, r->k, &f->doc, P, l, 1, f->doc.len == 0);
}

/* "extern "C" __global__ void __launch_bounds__(n) @FN@(params) {\n" */
static void fn_head(Emit *e, StrBuf *b, const Params *P, int threads) {
    sb_printf(b, "extern \"C\" __global__ void __launch_bounds__(%d) @FN@", threads);
    signature(e, (Params *)P, b, true);
    sb_puts(b, "\n{\n");
}

/* ===================================================================== */
/* the workspace                                                          */
/* ===================================================================== */

void cg_cuda_plan_workspace(Program *p) {
    /* cuBLASLt: 32 MiB (what it asks for on Hopper) once any product is
     * large, 4 MiB otherwise; kernel scratch (cross-entropy row losses,
     * norm partials) shares the region: the stream runs one thing at a time */
    int64_t big = 0, scratch = 64 << 10;
    for (int s = 0; s < TRN_RUN__COUNT; s++)
        for (int i = 0; i < p->sched[s].nk; i++) {
            Kernel *k = p->sched[s].k[i];
            if (k->kind == KK_GEMM && k->gemm.M * k->gemm.N * k->gemm.K > big) big = k->gemm.M * k->gemm.N * k->gemm.K;
            if (k->kind == KK_TMPL && (k->nodes[0]->op == OP_cross_entropy || k->nodes[0]->op == OP_cross_entropy_grad)) {
                const Shape *ls = &k->nodes[0]->in[k->nodes[0]->op == OP_cross_entropy ? 0 : 1]->ty.shape;
                int64_t rows = shape_numel(ls) / (ls->rank ? ls->d[ls->rank - 1] : 1);
                if (256 + 8 * rows > scratch) scratch = 256 + 8 * rows;
            }
        }
    int64_t ws = big >= ((int64_t)1 << 30) ? (int64_t)32 << 20 : (int64_t)4 << 20;
    if (scratch > ws) ws = scratch;
    ws = (ws + CG_ALIGN - 1) / CG_ALIGN * CG_ALIGN;
    p->workspace_off = (p->arena_bytes + CG_ALIGN - 1) / CG_ALIGN * CG_ALIGN;
    p->workspace_bytes = ws;
    p->arena_bytes = p->workspace_off + ws;
    p->cat_bytes[MC_WORKSPACE] += ws;
}

/* ===================================================================== */
/* loop kernels (the access analysis is emit_c.c's)                       */
/* ===================================================================== */

#define MAXACC 256

typedef struct Acc {
    int     buf;              /* -1: virtual (iota / linear index) */
    int64_t off;
    int64_t st[IR_MAX_RANK];
    DType   dt;
    bool    store;
    bool    post;
    int     id;
} Acc;

typedef struct Loop {
    Emit   *e;
    Kernel *k;
    int     rank;
    bool    reduced[IR_MAX_RANK];
    Acc     acc[MAXACC];
    int     nacc;
    int     nl;
    int64_t lsize[IR_MAX_RANK];
    bool    lred[IR_MAX_RANK];
    int64_t lst[MAXACC][IR_MAX_RANK];
    /* code generation */
    Params  P;
    int     vec;                /* 4: four elements per thread (innermost loop) */
    bool    vacc[MAXACC];       /* access read/written as float4 */
    StrBuf *b;
} Loop;

static bool in_kernel(Sched *s, Kernel *k, Value *v) {
    ValInfo *vi = &s->vi[v->id];
    return vi->inl && vi->kern == k;
}

static bool map_view(Loop *L, View v, bool post, const Shape *opspace, int64_t *st, int64_t *off) {
    Kernel *k = L->k;
    if (!view_broadcast(&v, opspace)) return false;
    *off = v.off;
    if (!post) {
        for (int i = 0; i < L->rank; i++) st[i] = v.stride[i];
        return true;
    }
    bool keep = ir_int(k->red, "keepdim", 0);
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

static int add_acc(Loop *L, Acc a) {
    for (int i = 0; i < L->nacc; i++) {
        Acc *b = &L->acc[i];
        if (b->buf == a.buf && b->off == a.off && b->store == a.store && b->dt == a.dt && b->post == a.post &&
            memcmp(b->st, a.st, sizeof a.st) == 0 && a.buf >= 0)
            return i;
    }
    if (L->nacc == MAXACC) die("too many accesses in one loop kernel");
    a.id = L->nacc;
    L->acc[L->nacc++] = a;
    return a.id;
}

static Shape operand_space(Loop *L, Node *m, int j) {
    Kernel *k = L->k;
    if (m == k->red) return k->space;
    if (m->op == OP_max_grad && j != 1) return m->in[1]->ty.shape;
    return m->out[0]->ty.shape;
}

static View unreduce_view(Node *m, View v) {
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

static bool node_post(Loop *L, Node *m) {
    Kernel *k = L->k;
    if (!k->red || m == k->red) return false;
    for (int i = 0; i < k->nnodes; i++) {
        if (k->nodes[i] == m) return false;
        if (k->nodes[i] == k->red) return true;
    }
    return false;
}

static void collapse(Loop *L) {
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

/* Index of access a over the loop indices i0.. (vector accesses: of the
 * first of the four elements). */
static void idx_expr(Loop *L, int a, char *buf, size_t n) {
    size_t k = 0;
    bool any = false;
    buf[0] = 0;
    if (L->acc[a].off) {
        k = (size_t)snprintf(buf, n, "%lldll", (long long)L->acc[a].off);
        any = true;
    }
    for (int i = 0; i < L->nl; i++) {
        int64_t s = L->lst[a][i];
        if (!s) continue;
        if (s == 1) k += (size_t)snprintf(buf + k, n - k, "%si%d", any ? " + " : "", i);
        else k += (size_t)snprintf(buf + k, n - k, "%si%d * %lldll", any ? " + " : "", i, (long long)s);
        any = true;
    }
    if (!any) snprintf(buf, n, "0");
}

static void vname(char *buf, size_t n, Value *v) { snprintf(buf, n, "v%d", v->id); }

/* The expression of one pointwise node in compute type dt. */
static void node_expr(StrBuf *b, Node *m, char ops[][64], DType dt) {
    bool fl = is_f(dt), dbl = dt == DT_f64;
    const char *a = ops[0], *c = m->nin > 1 ? ops[1] : "", *y = m->nin > 2 ? ops[2] : "";
    const char *sfx = fl ? "f" : "";
    switch (m->op) {
    case OP_neg: sb_printf(b, "-(%s)", a); break;
    case OP_exp: sb_printf(b, "exp%s(%s)", sfx, a); break;
    case OP_log: sb_printf(b, "log%s(%s)", sfx, a); break;
    case OP_sqrt: sb_printf(b, "sqrt%s(%s)", sfx, a); break;
    case OP_rsqrt: sb_printf(b, fl ? "(float)(1.0 / sqrt((double)(%s)))" : "1.0 / sqrt(%s)", a); break;
    case OP_tanh: sb_printf(b, "tanh%s(%s)", sfx, a); break;
    case OP_sigmoid: sb_printf(b, "trn_sigmoid(%s)", a); break;
    case OP_relu: sb_printf(b, "(%s > 0 ? %s : 0)", a, a); break;
    case OP_gelu: sb_printf(b, "trn_gelu(%s, %d)", a, (int)ir_int(m, "approx", 0)); break;
    case OP_silu: sb_printf(b, "trn_silu(%s)", a); break;
    case OP_abs: sb_printf(b, fl ? "fabsf(%s)" : dbl ? "fabs(%s)" : "llabs(%s)", a); break;
    case OP_sign: sb_printf(b, fl || dbl ? "trn_sign(%s)" : "(%s > 0 ? 1 : %s < 0 ? -1 : 0)", a, a); break;
    case OP_cast: sb_printf(b, "(%s)(%s)", cp_type(dt), a); break;
    case OP_add: sb_printf(b, "%s + %s", a, c); break;
    case OP_sub: sb_printf(b, "%s - %s", a, c); break;
    case OP_mul: sb_printf(b, "%s * %s", a, c); break;
    case OP_div: sb_printf(b, "%s / %s", a, c); break;
    case OP_maximum: sb_printf(b, fl ? "fmaxf(%s, %s)" : dbl ? "fmax(%s, %s)" : "(%s > %s ? %s : %s)", a, c, a, c); break;
    case OP_minimum: sb_printf(b, fl ? "fminf(%s, %s)" : dbl ? "fmin(%s, %s)" : "(%s < %s ? %s : %s)", a, c, a, c); break;
    case OP_ge: sb_printf(b, "(%s >= %s ? 1 : 0)", a, c); break;
    case OP_tanh_grad: sb_printf(b, "%s * (1.0%s - %s * %s)", a, sfx, c, c); break;
    case OP_sigmoid_grad: sb_printf(b, "%s * %s * (1.0%s - %s)", a, c, sfx, c); break;
    case OP_relu_grad: sb_printf(b, "(%s > 0 ? %s : 0)", c, a); break;
    case OP_gelu_grad: sb_printf(b, "trn_gelu_grad(%s, %s, %d)", a, c, (int)ir_int(m, "approx", 0)); break;
    case OP_silu_grad: sb_printf(b, "trn_silu_grad(%s, %s)", a, c); break;
    case OP_max_grad: sb_printf(b, "(%s == %s ? %s : 0)", c, y, a); break;
    case OP_clip_coef: {
        char mx[32];
        fmt_double(mx, ir_float(m, "max_norm", 1.0));
        sb_printf(b, "fmin(1.0, %s / ((double)(%s) + 1e-6))", mx, a);
        break;
    }
    default: die("cuda node_expr: %s is not a loop op", op_name(m->op));
    }
}

typedef struct LoopCtx {
    Loop *L;
    int (*opacc)[8];
    int *resacc;
    int *linacc;
} LoopCtx;

/* The linear index of a virtual access (iota, dropout) at element e. */
static void virt_idx(Loop *L, int a, char *out, size_t n) {
    char idx[512];
    idx_expr(L, a, idx, sizeof idx);
    int last = L->nl - 1;
    if (L->vec && last >= 0 && L->lst[a][last]) snprintf(out, n, "(%s + e * %lldll)", idx, (long long)L->lst[a][last]);
    else snprintf(out, n, "(%s)", idx);
}

/* Names operand j of node i: a value of this kernel, a literal, or a load. */
static void loop_operand(LoopCtx *c, int i, int j, int depth, char out[64]) {
    Loop *L = c->L;
    Kernel *k = L->k;
    Sched *s = L->e->s;
    Node *m = k->nodes[i];
    Value *x = m->in[j];
    if (in_kernel(s, k, x)) {
        vname(out, 64, x);
        return;
    }
    ValInfo *xi = &s->vi[x->id];
    if (xi->st == VS_INLINE && !xi->kern && x->def->op == OP_constant) {
        lit_expr(out, 64, ir_float(x->def, "value", 0), x->ty.dt);
        return;
    }
    int a = c->opacc[i][j];
    StrBuf lb = {0};
    if (L->acc[a].buf < 0) {
        Node *io = x->def;
        int ax = (int)ir_int(io, "axis", 0);
        int64_t inner = 1;
        for (int d = ax + 1; d < x->ty.shape.rank; d++) inner *= x->ty.shape.d[d];
        char vi[600];
        virt_idx(L, a, vi, sizeof vi);
        sb_printf(&lb, "(%s)(%s / %lldll %% %lldll)", cp_type(x->ty.dt), vi, (long long)inner,
                  (long long)(x->ty.shape.rank ? x->ty.shape.d[ax] : 1));
    } else if (L->vacc[a]) {
        sb_printf(&lb, "a%d[e]", a);
    } else {
        char idx[512], ptr[16];
        idx_expr(L, a, idx, sizeof idx);
        snprintf(ptr, sizeof ptr, "p%d", param(L->e, &L->P, L->acc[a].buf, false));
        load_expr(&lb, x->ty.dt, ptr, idx);
    }
    ind(L->b, depth);
    sb_printf(L->b, "const %s l%d_%d = %s;\n", cp_type(x->ty.dt), i, j, lb.s);
    sb_free(&lb);
    snprintf(out, 64, "l%d_%d", i, j);
}

static void emit_loop_store(LoopCtx *c, int i, int depth, bool red_result) {
    Loop *L = c->L;
    if (c->resacc[i] < 0) return;
    Node *m = L->k->nodes[i];
    int a = c->resacc[i];
    char yn[32];
    vname(yn, sizeof yn, m->out[0]);
    ind(L->b, depth);
    if (L->vacc[a] && !red_result) {
        sb_printf(L->b, "s%d[e] = %s;\n", a, yn);
        return;
    }
    char idx[512], ptr[16];
    idx_expr(L, a, idx, sizeof idx);
    snprintf(ptr, sizeof ptr, "p%d", param(L->e, &L->P, L->acc[a].buf, true));
    store_stmt(L->b, m->out[0]->ty.dt, ptr, idx, yn);
}

static void emit_loop_node(LoopCtx *c, int i, int depth) {
    Loop *L = c->L;
    Node *m = L->k->nodes[i];
    char ops[8][64];
    for (int j = 0; j < m->nin && j < 8; j++) loop_operand(c, i, j, depth, ops[j]);
    Value *y = m->out[0];
    DType dt = y->ty.dt;
    char yn[32];
    vname(yn, sizeof yn, y);
    StrBuf xb = {0};
    if (m->op == OP_iota) {
        char vi[600];
        virt_idx(L, c->linacc[i], vi, sizeof vi);
        int ax = (int)ir_int(m, "axis", 0);
        int64_t inner = 1;
        for (int d = ax + 1; d < y->ty.shape.rank; d++) inner *= y->ty.shape.d[d];
        sb_printf(&xb, "(%s / %lldll %% %lldll)", vi, (long long)inner, (long long)(y->ty.shape.rank ? y->ty.shape.d[ax] : 1));
    } else if (m->op == OP_dropout) {
        char vi[600], pl[32], inv[32];
        virt_idx(L, c->linacc[i], vi, sizeof vi);
        double pr = ir_float(m, "p", 0);
        fmt_double(pl, pr);
        fmt_double(inv, 1.0 - pr);
        sb_printf(&xb, "(rng_keep((uint32_t)%s, %lluull, (uint64_t)%s, (float)%s) ? (double)(%s) / %s : 0.0)", ops[1],
                  (unsigned long long)ir_int(m, "stream", 0), vi, pl, ops[0], inv);
    } else {
        node_expr(&xb, m, ops, dt);
    }
    ind(L->b, depth);
    if (dt == DT_bf16 || dt == DT_f16)
        sb_printf(L->b, "const float %s = trn_r_%s((float)(%s));  /* %s */\n", yn, dtype_name[dt], xb.s, op_name(m->op));
    else if (dtype_is_float[dt])
        sb_printf(L->b, "const %s %s = (%s)(%s);  /* %s */\n", cp_type(dt), yn, cp_type(dt), xb.s, op_name(m->op));
    else
        sb_printf(L->b, "const long long %s = (long long)(%s)(%s);  /* %s */\n", yn, st_type(dt), xb.s, op_name(m->op));
    sb_free(&xb);
    emit_loop_store(c, i, depth, false);
}

/* Declares the loop indices i0.. from a linear index (kept loops, or
 * reduced loops) named `lin`. */
static void decompose(Loop *L, bool red, const char *lin, int depth, int vec) {
    int idx[IR_MAX_RANK], n = 0;
    for (int i = 0; i < L->nl; i++)
        if (L->lred[i] == red) idx[n++] = i;
    if (!n) return;
    ind(L->b, depth);
    sb_printf(L->b, "long long q_%s = %s;\n", red ? "r" : "k", lin);
    for (int j = n - 1; j >= 0; j--) {
        int i = idx[j];
        int64_t size = L->lsize[i];
        bool inner = j == n - 1 && vec > 1;
        if (inner) size /= vec;
        ind(L->b, depth);
        if (j == 0) sb_printf(L->b, "const long long i%d = q_%s%s;\n", i, red ? "r" : "k", inner ? " * 4" : "");
        else {
            sb_printf(L->b, "const long long i%d = (q_%s %% %lldll)%s;\n", i, red ? "r" : "k", (long long)size, inner ? " * 4" : "");
            ind(L->b, depth);
            sb_printf(L->b, "q_%s /= %lldll;\n", red ? "r" : "k", (long long)size);
        }
    }
}

static void emit_loop(Emit *e, Kernel *k, CuKern *r) {
    Sched *s = e->s;
    Loop *L = xcalloc(1, sizeof(Loop));
    L->e = e;
    L->k = k;
    L->rank = k->space.rank;
    if (k->red) {
        const Attr *ax = ir_attr(k->red, "axes");
        for (int i = 0; i < ax->n; i++) L->reduced[ax->v[i]] = true;
    }
    int (*opacc)[8] = xcalloc((size_t)k->nnodes, sizeof *opacc);
    int *resacc = xcalloc((size_t)k->nnodes, sizeof(int));
    int *linacc = xcalloc((size_t)k->nnodes, sizeof(int));
    for (int i = 0; i < k->nnodes; i++) {
        Node *m = k->nodes[i];
        bool post = node_post(L, m);
        resacc[i] = linacc[i] = -1;
        if (m->op == OP_iota) {
            Acc a = {0};
            a.buf = -1;
            View v;
            view_contig(&v, -1, &m->out[0]->ty.shape);
            for (int d = 0; d < L->rank; d++) a.st[d] = v.stride[d];
            linacc[i] = add_acc(L, a);
        }
        for (int j = 0; j < m->nin && j < 8; j++) {
            Value *x = m->in[j];
            opacc[i][j] = -1;
            if (in_kernel(s, k, x)) continue;
            ValInfo *xi = &s->vi[x->id];
            Shape osp = operand_space(L, m, j);
            Acc a = {0};
            a.post = post;
            a.dt = x->ty.dt;
            if (xi->st == VS_INLINE && !xi->kern) {
                if (x->def->op == OP_constant) continue;
                View v;
                view_contig(&v, -1, &x->ty.shape);
                if (!map_view(L, v, post, &osp, a.st, &a.off)) die("iota view");
                a.buf = -1;
                opacc[i][j] = add_acc(L, a);
                continue;
            }
            View v = xi->view;
            if (m->op == OP_max_grad && j != 1) v = unreduce_view(m, v);
            a.buf = v.buf;
            if (!map_view(L, v, post, &osp, a.st, &a.off))
                die("kernel %s: operand %d of %s does not broadcast to the loop space", k->name, j, op_name(m->op));
            opacc[i][j] = add_acc(L, a);
        }
        if (m->op == OP_dropout) {
            Acc a = {0};
            a.buf = -1;
            a.post = post;
            View v;
            view_contig(&v, -1, &m->out[0]->ty.shape);
            Shape osp = m->out[0]->ty.shape;
            map_view(L, v, post, &osp, a.st, &a.off);
            linacc[i] = add_acc(L, a);
        }
        Value *y = m->out[0];
        ValInfo *yi = &s->vi[y->id];
        if ((yi->st == VS_BUF || yi->st == VS_VIEW) && yi->kern == k) {
            Acc a = {0};
            a.store = true;
            a.post = post || m == k->red;
            a.dt = y->ty.dt;
            a.buf = yi->view.buf;
            Shape osp = y->ty.shape;
            if (!map_view(L, yi->view, a.post, &osp, a.st, &a.off)) die("store view");
            resacc[i] = add_acc(L, a);
        }
    }
    collapse(L);

    int64_t K = 1, R = 1;
    for (int i = 0; i < L->nl; i++) {
        if (L->lred[i]) R *= L->lsize[i];
        else K *= L->lsize[i];
    }
    /* 16-byte vectors: no reduction; the innermost loop a multiple of 4;
     * every buffer access f32 with stride 0 or 1 there and 4-aligned */
    int last = L->nl - 1;
    if (!k->red && last >= 0 && L->lsize[last] % 4 == 0) {
        bool ok = true, any = false;
        for (int a = 0; a < L->nacc && ok; a++) {
            Acc *ac = &L->acc[a];
            if (ac->buf < 0) continue;
            int64_t st = L->lst[a][last];
            if (st == 0) continue;
            if (st != 1 || ac->dt != DT_f32 || ac->off % 4) ok = false;
            for (int i = 0; i < last && ok; i++) ok = L->lst[a][i] % 4 == 0;
            if (ok) L->vacc[a] = any = true;
        }
        if (ok && any) L->vec = 4;
        else memset(L->vacc, 0, sizeof L->vacc);
    }

    StrBuf body = {0};
    L->b = &body;
    LoopCtx c = {L, opacc, resacc, linacc};
    int depth = 1;
    unsigned gx, bx = NT, by = 1;
    bool rows = false;
    int tpr = 32, rpb = 1, ny = 16;
    if (!k->red) {
        int64_t units = K / (L->vec ? 4 : 1);
        gx = cdiv(units, NT);
        sb_printf(&body, "    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (t >= %lldll) return;\n",
                  (long long)units);
        decompose(L, false, "t", depth, L->vec ? 4 : 1);
        if (L->vec) {
            for (int a = 0; a < L->nacc; a++) {
                if (!L->vacc[a]) continue;
                char idx[512];
                idx_expr(L, a, idx, sizeof idx);
                if (L->acc[a].store) sb_printf(&body, "    float s%d[4];\n", a);
                else {
                    int pi = param(e, &L->P, L->acc[a].buf, false);
                    sb_printf(&body, "    float a%d[4];\n    {\n        const float4 w = trn_ld4(p%d + %s);\n", a, pi, idx);
                    sb_printf(&body, "        a%d[0] = w.x; a%d[1] = w.y; a%d[2] = w.z; a%d[3] = w.w;\n    }\n", a, a, a, a);
                }
            }
            sb_puts(&body, "#pragma unroll\n    for (int e = 0; e < 4; e++) {\n");
            depth = 2;
        }
        for (int i = 0; i < k->nnodes; i++) emit_loop_node(&c, i, depth);
        if (L->vec) {
            sb_puts(&body, "    }\n");
            for (int a = 0; a < L->nacc; a++) {
                if (!L->vacc[a] || !L->acc[a].store) continue;
                char idx[512];
                idx_expr(L, a, idx, sizeof idx);
                int pi = param(e, &L->P, L->acc[a].buf, true);
                sb_printf(&body, "    trn_st4(p%d + %s, make_float4(s%d[0], s%d[1], s%d[2], s%d[3]));\n", pi, idx, a, a, a, a);
            }
        }
    } else {
        /* rows when some load reads the innermost reduced loop contiguously */
        int lastred = -1;
        for (int i = 0; i < L->nl; i++)
            if (L->lred[i]) lastred = i;
        for (int a = 0; a < L->nacc && lastred >= 0; a++)
            if (L->acc[a].buf >= 0 && !L->acc[a].store && L->lst[a][lastred] == 1) rows = true;
        if (K == 1) rows = true;
        Op ro = k->red->op;
        bool fl = dtype_is_float[k->red->out[0]->ty.dt];
        const char *at = fl ? "double" : "long long";
        const char *init = ro == OP_max ? (fl ? "-TRN_DINF" : "(-9223372036854775807ll - 1)") : "0";
        if (rows) {
            tpr = R >= 4096 ? 256 : R >= 1024 ? 128 : 32;
            rpb = tpr == 32 ? 8 : 1;
            bx = (unsigned)(tpr * rpb);
            gx = cdiv(K, rpb);
            if (tpr == 32)
                sb_printf(&body, "    const long long kk = (long long)blockIdx.x * %d + (threadIdx.x >> 5);\n    const int tr = threadIdx.x & 31;\n"
                                 "    if (kk >= %lldll) return;\n", rpb, (long long)K);
            else
                sb_printf(&body, "    const long long kk = blockIdx.x;\n    const int tr = threadIdx.x;\n");
            decompose(L, false, "kk", 1, 1);
            sb_printf(&body, "    %s acc = %s;\n    for (long long r = tr; r < %lldll; r += %d) {\n", at, init, (long long)R, tpr);
        } else {
            bx = 32;
            by = (unsigned)ny;
            gx = cdiv(K, 32);
            sb_printf(&body, "    const long long kk = (long long)blockIdx.x * 32 + threadIdx.x;\n    const bool kok = kk < %lldll;\n",
                      (long long)K);
            sb_printf(&body, "    %s acc = %s;\n    if (kok) {\n", at, init);
            decompose(L, false, "kk", 2, 1);
            sb_printf(&body, "    for (long long r = threadIdx.y; r < %lldll; r += %d) {\n", (long long)R, ny);
        }
        depth = 2;
        decompose(L, true, "r", depth, 1);
        int i = 0;
        for (; i < k->nnodes && k->nodes[i] != k->red; i++) emit_loop_node(&c, i, depth);
        char in0[64];
        loop_operand(&c, i, 0, depth, in0);
        ind(&body, depth);
        if (ro == OP_max) sb_printf(&body, "if ((%s)%s > acc) acc = %s;\n", at, in0, in0);
        else sb_printf(&body, "acc += (%s)%s;\n", at, in0);
        sb_puts(&body, "    }\n");
        if (!rows) sb_puts(&body, "    }\n");
        /* combine */
        if (rows) {
            if (tpr == 32) {
                if (ro == OP_max && fl) sb_puts(&body, "    for (int o = 16; o > 0; o >>= 1) acc = fmax(acc, __shfl_xor_sync(TRN_FULL, acc, o));\n");
                else if (ro == OP_max) sb_puts(&body, "    for (int o = 16; o > 0; o >>= 1) { long long w = __shfl_xor_sync(TRN_FULL, acc, o); if (w > acc) acc = w; }\n");
                else sb_puts(&body, "    acc = trn_warp_sum(acc);\n");
            } else {
                if (ro == OP_max) {
                    sb_printf(&body, "    {\n        __shared__ %s sh[%d];\n        sh[tr] = acc;\n        __syncthreads();\n", at, tpr);
                    sb_printf(&body, "        for (int s = %d; s > 0; s >>= 1) {\n            if (tr < s && sh[tr + s] > sh[tr]) sh[tr] = sh[tr + s];\n"
                                     "            __syncthreads();\n        }\n        acc = sh[0];\n    }\n", tpr / 2);
                } else {
                    sb_puts(&body, "    acc = trn_block_sum(acc);\n");
                }
            }
            sb_puts(&body, "    if (tr != 0) return;\n");
        } else {
            if (ro == OP_max) {
                sb_printf(&body, "    {\n        __shared__ %s sh[%d][33];\n        sh[threadIdx.y][threadIdx.x] = acc;\n        __syncthreads();\n", at, ny);
                sb_printf(&body, "        for (int s = %d; s > 0; s >>= 1) {\n            if ((int)threadIdx.y < s && sh[threadIdx.y + s][threadIdx.x] > "
                                 "sh[threadIdx.y][threadIdx.x]) sh[threadIdx.y][threadIdx.x] = sh[threadIdx.y + s][threadIdx.x];\n"
                                 "            __syncthreads();\n        }\n        acc = sh[0][threadIdx.x];\n    }\n", ny / 2);
            } else {
                sb_printf(&body, "    acc = trn_col_sum<%d>(acc);\n", ny);
            }
            sb_puts(&body, "    if (threadIdx.y != 0 || !kok) return;\n");
            decompose(L, false, "kk", 1, 1);
        }
        /* the reduced value and the epilogue */
        Node *m = k->red;
        DType rdt = m->out[0]->ty.dt;
        char rn[32];
        vname(rn, sizeof rn, m->out[0]);
        int64_t cnt = shape_numel(&k->space) / (shape_numel(&k->rspace) ? shape_numel(&k->rspace) : 1);
        const char *conv = rdt == DT_bf16 ? "trn_r_bf16" : rdt == DT_f16 ? "trn_r_f16" : "";
        if (ro == OP_mean) sb_printf(&body, "    const %s %s = %s((%s)(acc / %lld.0));\n", cp_type(rdt), rn, conv, cp_type(rdt), (long long)cnt);
        else sb_printf(&body, "    const %s %s = %s((%s)(acc));\n", cp_type(rdt), rn, conv, cp_type(rdt));
        emit_loop_store(&c, i, 1, true);
        for (i++; i < k->nnodes; i++) emit_loop_node(&c, i, 1);
    }
    /* the function */
    StrBuf fb = {0};
    fn_head(e, &fb, &L->P, (int)(bx * by));
    sb_puts(&fb, body.s ? body.s : "");
    sb_puts(&fb, "}\n");
    sb_free(&body);
    launch(e, r, "", &L->P, sb_take(&fb), false, gx, 1, bx, by);
    free(opacc);
    free(resacc);
    free(linacc);
    free(L);
}

/* ===================================================================== */
/* copies and fills                                                       */
/* ===================================================================== */

static void emit_copy(Emit *e, Kernel *k, CuKern *r) {
    const Buf *sb = &e->p->bufs[k->src.buf], *db = &e->p->bufs[k->dst.buf];
    if (sb->dt != db->dt) die("copy between dtypes");
    Params P = {0};
    int ps = param(e, &P, k->src.buf, false), pd = param(e, &P, k->dst.buf, true);
    /* collapse dims where both views allow */
    int n = 0;
    int64_t sz[IR_MAX_RANK], ss[IR_MAX_RANK], ds[IR_MAX_RANK];
    for (int i = 0; i < k->dst.rank; i++) {
        if (k->dst.shape[i] == 1) continue;
        if (n && ss[n - 1] == k->src.stride[i] * k->dst.shape[i] && ds[n - 1] == k->dst.stride[i] * k->dst.shape[i]) {
            sz[n - 1] *= k->dst.shape[i];
            ss[n - 1] = k->src.stride[i];
            ds[n - 1] = k->dst.stride[i];
            continue;
        }
        sz[n] = k->dst.shape[i];
        ss[n] = k->src.stride[i];
        ds[n] = k->dst.stride[i];
        n++;
    }
    int64_t total = 1;
    for (int i = 0; i < n; i++) total *= sz[i];
    int vec = 1;
    if (n && sb->dt == DT_f32 && ss[n - 1] == 1 && ds[n - 1] == 1 && sz[n - 1] % 4 == 0 && k->src.off % 4 == 0 && k->dst.off % 4 == 0) {
        vec = 4;
        for (int i = 0; i < n - 1; i++)
            if (ss[i] % 4 || ds[i] % 4) vec = 1;
    }
    StrBuf b = {0};
    fn_head(e, &b, &P, NT);
    int64_t units = total / vec;
    sb_printf(&b, "    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (t >= %lldll) return;\n", (long long)units);
    StrBuf si = {0}, di = {0};
    sb_printf(&si, "%lldll", (long long)k->src.off);
    sb_printf(&di, "%lldll", (long long)k->dst.off);
    for (int i = n - 1; i >= 0; i--) {
        int64_t size = sz[i] / (i == n - 1 ? vec : 1);
        if (i) sb_printf(&b, "    const long long i%d = (t %% %lldll)%s;\n    t /= %lldll;\n", i, (long long)size, i == n - 1 && vec > 1 ? " * 4" : "",
                         (long long)size);
        else sb_printf(&b, "    const long long i%d = t%s;\n", i, i == n - 1 && vec > 1 ? " * 4" : "");
        if (ss[i]) sb_printf(&si, " + i%d * %lldll", i, (long long)ss[i]);
        if (ds[i]) sb_printf(&di, " + i%d * %lldll", i, (long long)ds[i]);
    }
    if (vec == 4) sb_printf(&b, "    trn_st4(p%d + %s, trn_ld4(p%d + %s));\n}\n", pd, di.s, ps, si.s);
    else sb_printf(&b, "    p%d[%s] = p%d[%s];\n}\n", pd, di.s, ps, si.s);
    sb_free(&si);
    sb_free(&di);
    launch(e, r, "", &P, sb_take(&b), false, cdiv(units, NT), 1, NT, 1);
}

static void emit_fill(Emit *e, Kernel *k, CuKern *r) {
    const Buf *b = &e->p->bufs[k->dst.buf];
    int64_t n = shape_numel(&b->shape);
    if (k->fill == 0.0 && view_is_contig(&k->dst)) {
        r->kind = TRN_CK_MEMSET;
        r->ms_off = b->offset;
        r->ms_bytes = b->bytes;
        return;
    }
    Params P = {0};
    int pd = param(e, &P, k->dst.buf, true);
    char lit[96];
    lit_expr(lit, sizeof lit, k->fill, b->dt);
    StrBuf s = {0};
    fn_head(e, &s, &P, NT);
    sb_printf(&s, "    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= %lldll) return;\n    ", (long long)n);
    store_stmt(&s, b->dt, "p0", "i", lit);
    sb_puts(&s, "}\n");
    (void)pd;
    launch(e, r, "", &P, sb_take(&s), false, cdiv(n, NT), 1, NT, 1);
}

/* ===================================================================== */
/* GEMMs: a descriptor (the same transposes and leading dims as emit_c's)   */
/* ===================================================================== */

static void gemm_layout(const View *v, int *t, int64_t *ld) {
    int r = v->rank;
    if ((v->stride[r - 1] == 1 || v->shape[r - 1] == 1) && v->stride[r - 2] >= v->shape[r - 1] && v->stride[r - 2] > 0) *t = 0, *ld = v->stride[r - 2];
    else *t = 1, *ld = v->stride[r - 1];
}

static void gemm_desc(Emit *e, Kernel *k, TrnCudaGemm *g) {
    GemmInfo *gi = &k->gemm;
    Program *p = e->p;
    memset(g, 0, sizeof *g);
    int ta, tb;
    int64_t lda, ldb;
    gemm_layout(&gi->a, &ta, &lda);
    gemm_layout(&gi->b, &tb, &ldb);
    g->dtype = (int)p->bufs[gi->c.buf].dt;
    g->ta = ta ^ gi->ta;
    g->tb = tb ^ gi->tb;
    g->M = gi->M;
    g->N = gi->N;
    g->K = gi->K;
    int es = dtype_size[p->bufs[gi->c.buf].dt];
    g->a = p->bufs[gi->a.buf].offset + gi->a.off * es;
    g->b = p->bufs[gi->b.buf].offset + gi->b.off * es;
    g->c = p->bufs[gi->c.buf].offset + gi->c.off * es;
    g->lda = lda;
    g->ldb = ldb;
    g->ldc = gi->N;
    g->bias = gi->bias.buf >= 0 ? p->bufs[gi->bias.buf].offset + gi->bias.off * es : -1;
    g->nbatch = gi->nbatch;
    for (int i = 0; i < gi->nbatch; i++) {
        g->batch[i] = gi->bshape[i];
        g->sa[i] = gi->bsa[i];
        g->sb[i] = gi->bsb[i];
        g->sc[i] = gi->bsc[i];
    }
}

/* ===================================================================== */
/* templates                                                              */
/* ===================================================================== */

static bool need_f32(Emit *e, Kernel *k, Value *v) {
    if (v->ty.dt == DT_f32) return true;
    error_at(e->d, k->loc, "the CUDA backend's %s kernel supports f32 tensors only, not %s", op_name(k->nodes[0]->op), dtype_name[v->ty.dt]);
    e->ok = false;
    return false;
}

/* "pN" for value v's buffer */
static const char *vp(Emit *e, Params *P, Value *v, bool write, char out[16]) {
    snprintf(out, 16, "p%d", param(e, P, vbuf(e, v), write));
    return out;
}

/* One template launch: text = head + "    CALL;\n}\n". */
static void tmpl_launch(Emit *e, CuKern *r, const char *suffix, Params *P, const char *call, int threads, unsigned gx, unsigned gy,
                        unsigned bx, unsigned by) {
    StrBuf b = {0};
    fn_head(e, &b, P, threads);
    sb_printf(&b, "    %s;\n}\n", call);
    launch(e, r, suffix, P, sb_take(&b), true, gx, gy, bx, by);
}

static void emit_template(Emit *e, Kernel *k, CuKern *r) {
    Node *n = k->nodes[0];
    for (int i = 0; i < n->nin; i++)
        if (dtype_is_float[n->in[i]->ty.dt] && !need_f32(e, k, n->in[i])) return;
    const Shape *s0 = &n->in[0]->ty.shape;
    int64_t last = s0->rank ? s0->d[s0->rank - 1] : 1;
    char a[8][16], call[1024];
    Params P = {0};
    switch (n->op) {
    case OP_embedding: {
        int64_t N = shape_numel(&n->in[1]->ty.shape), C = s0->d[1], V = s0->d[0];
        int vec = C % 4 == 0 ? 4 : 1;
        vp(e, &P, n->out[0], true, a[0]);
        vp(e, &P, n->in[0], false, a[1]);
        vp(e, &P, n->in[1], false, a[2]);
        snprintf(call, sizeof call, "tk_embedding<float, %d>(%s, %s, %s, %lldll, %lldll, %lldll) /* out [%lld,%lld] */", vec, a[0], a[1], a[2],
                 (long long)N, (long long)C, (long long)V, (long long)N, (long long)C);
        tmpl_launch(e, r, "", &P, call, NT, cdiv(N * C / vec, NT), 1, NT, 1);
        break;
    }
    case OP_embedding_grad: {
        int64_t N = shape_numel(&n->in[1]->ty.shape), V = ir_int(n, "rows", 0);
        vp(e, &P, n->out[0], true, a[0]);
        vp(e, &P, n->in[0], false, a[1]);
        vp(e, &P, n->in[1], false, a[2]);
        snprintf(call, sizeof call, "tk_embedding_bwd(%s, %s, %s, %lldll, %lldll, %lldll) /* dtable [%lld,%lld] */", a[0], a[1], a[2],
                 (long long)N, (long long)last, (long long)V, (long long)V, (long long)last);
        tmpl_launch(e, r, "", &P, call, 128, cdiv(last, 128), 1, 128, 1);
        break;
    }
    case OP_softmax:
    case OP_softmax_grad: {
        int ax = (int)ir_int(n, "axis", 0);
        int64_t outer = 1, inner = 1, len = s0->d[ax];
        for (int i = 0; i < ax; i++) outer *= s0->d[i];
        for (int i = ax + 1; i < s0->rank; i++) inner *= s0->d[i];
        bool fwd = n->op == OP_softmax;
        vp(e, &P, n->out[0], true, a[0]);
        vp(e, &P, n->in[0], false, a[1]);
        if (!fwd) vp(e, &P, n->in[1], false, a[2]);
        const char *fn = fwd ? "tk_softmax" : "tk_softmax_bwd";
        if (inner == 1) {
            int t = len >= 2048 ? 256 : len >= 256 ? 128 : 32;
            if (fwd) snprintf(call, sizeof call, "%s_rows(%s, %s, %lldll, %lldll)", fn, a[0], a[1], (long long)outer, (long long)len);
            else snprintf(call, sizeof call, "%s_rows(%s, %s, %s, %lldll, %lldll)", fn, a[0], a[1], a[2], (long long)outer, (long long)len);
            tmpl_launch(e, r, "", &P, call, t, (unsigned)outer, 1, (unsigned)t, 1);
        } else {
            if (fwd) snprintf(call, sizeof call, "%s_cols(%s, %s, %lldll, %lldll, %lldll)", fn, a[0], a[1], (long long)outer, (long long)len, (long long)inner);
            else snprintf(call, sizeof call, "%s_cols(%s, %s, %s, %lldll, %lldll, %lldll)", fn, a[0], a[1], a[2], (long long)outer, (long long)len, (long long)inner);
            tmpl_launch(e, r, "", &P, call, NT, cdiv(outer * inner, NT), 1, NT, 1);
        }
        break;
    }
    case OP_layer_norm:
    case OP_rms_norm: {
        bool ln = n->op == OP_layer_norm;
        char eps[32];
        fmt_double(eps, ir_float(n, "eps", ln ? 1e-5 : 1e-6));
        int64_t N = shape_numel(s0) / last;
        vp(e, &P, n->out[0], true, a[0]);
        vp(e, &P, n->out[1], true, a[1]);
        if (ln) vp(e, &P, n->out[2], true, a[2]);
        vp(e, &P, n->in[0], false, a[3]);
        vp(e, &P, n->in[1], false, a[4]);
        if (ln) vp(e, &P, n->in[2], false, a[5]);
        if (ln)
            snprintf(call, sizeof call, "tk_layernorm<%lld>(%s, %s, %s, %s, %s, %s, %lldll, %s) /* y [%lld,%lld] */", (long long)last, a[0], a[1],
                     a[2], a[3], a[4], a[5], (long long)N, eps, (long long)N, (long long)last);
        else
            snprintf(call, sizeof call, "tk_rmsnorm<%lld>(%s, %s, %s, %s, %lldll, %s) /* y [%lld,%lld] */", (long long)last, a[0], a[1], a[3],
                     a[4], (long long)N, eps, (long long)N, (long long)last);
        tmpl_launch(e, r, "", &P, call, NT, cdiv(N, NT / 32), 1, NT, 1);
        break;
    }
    case OP_layer_norm_grad:
    case OP_rms_norm_grad: {
        bool ln = n->op == OP_layer_norm_grad;
        const Shape *xs = &n->in[1]->ty.shape;
        int64_t C = xs->d[xs->rank - 1], N = shape_numel(xs) / C;
        /* dx: rows */
        vp(e, &P, n->out[0], true, a[0]);
        vp(e, &P, n->in[0], false, a[1]);
        vp(e, &P, n->in[1], false, a[2]);
        vp(e, &P, n->in[2], false, a[3]);
        vp(e, &P, n->in[3], false, a[4]);
        if (ln) vp(e, &P, n->in[4], false, a[5]);
        if (ln)
            snprintf(call, sizeof call, "tk_layernorm_bwd_rows<%lld>(%s, %s, %s, %s, %s, %s, %lldll) /* dx [%lld,%lld] */", (long long)C, a[0],
                     a[1], a[2], a[3], a[4], a[5], (long long)N, (long long)N, (long long)C);
        else
            snprintf(call, sizeof call, "tk_rmsnorm_bwd_rows<%lld>(%s, %s, %s, %s, %s, %lldll) /* dx [%lld,%lld] */", (long long)C, a[0], a[1],
                     a[2], a[3], a[4], (long long)N, (long long)N, (long long)C);
        tmpl_launch(e, r, "_dx", &P, call, NT, cdiv(N, NT / 32), 1, NT, 1);
        /* dw (and db): columns */
        Params Q = {0};
        char b[6][16];
        vp(e, &Q, n->out[1], true, b[0]);
        if (ln) vp(e, &Q, n->out[2], true, b[1]);
        vp(e, &Q, n->in[0], false, b[2]);
        vp(e, &Q, n->in[1], false, b[3]);
        if (ln) vp(e, &Q, n->in[3], false, b[4]);
        vp(e, &Q, n->in[ln ? 4 : 3], false, b[5]);
        snprintf(call, sizeof call, "tk_norm_bwd_cols<16>(%s, %s, %s, %s, %s, %s, %lldll, %lldll) /* dw [%lld] */", b[0], ln ? b[1] : "(float *)0",
                 b[2], b[3], ln ? b[4] : "(const float *)0", b[5], (long long)N, (long long)C, (long long)C);
        tmpl_launch(e, r, "_dw", &Q, call, 512, cdiv(C, 32), 1, 32, 16);
        break;
    }
    case OP_rope: {
        char th[32];
        fmt_double(th, ir_float(n, "theta", 10000.0));
        int64_t T = s0->d[s0->rank - 2], D = last, outer = shape_numel(s0) / (T * D);
        vp(e, &P, n->out[0], true, a[0]);
        vp(e, &P, n->in[0], false, a[1]);
        snprintf(call, sizeof call, "tk_rope(%s, %s, %lldll, %lldll, %lldll, %s, %d) /* y [%lld,%lld,%lld] */", a[0], a[1], (long long)outer,
                 (long long)T, (long long)D, th, (int)ir_int(n, "inverse", 0), (long long)outer, (long long)T, (long long)D);
        tmpl_launch(e, r, "", &P, call, NT, cdiv(outer * T * (D / 2), NT), 1, NT, 1);
        break;
    }
    case OP_attention:
    case OP_attention_grad: {
        int qi = n->op == OP_attention ? 0 : 1;
        const Shape *qs = &n->in[qi]->ty.shape, *ks = &n->in[qi + 1]->ty.shape;
        int64_t B = qs->d[0], H = qs->d[1], Hkv = ks->d[1], T = qs->d[2], S = ks->d[2], D = qs->d[3];
        char sc[48];
        fmt_double(sc, ir_float(n, "scale", 1.0));
        int causal = (int)ir_int(n, "causal", 1);
        int tpr = D % 16 == 0 ? 4 : 1, bq = 64;
        unsigned threads = (unsigned)(bq * tpr);
        if (n->op == OP_attention) {
            vp(e, &P, n->out[0], true, a[0]);
            vp(e, &P, n->out[1], true, a[1]);
            vp(e, &P, n->in[0], false, a[2]);
            vp(e, &P, n->in[1], false, a[3]);
            vp(e, &P, n->in[2], false, a[4]);
            snprintf(call, sizeof call,
                     "tk_attention<%lld, %d>(%s, %s, %s, %s, %s, %lldll, %lldll, %lldll, %lldll, (float)(%s), %d) /* o [%lld,%lld,%lld,%lld] */",
                     (long long)D, bq, a[0], a[1], a[2], a[3], a[4], (long long)H, (long long)Hkv, (long long)T, (long long)S, sc, causal,
                     (long long)B, (long long)H, (long long)T, (long long)D);
            tmpl_launch(e, r, "", &P, call, (int)threads, cdiv(T, bq), (unsigned)(B * H), threads, 1);
        } else {
            vp(e, &P, n->out[0], true, a[0]);
            for (int i = 0; i < 6; i++) vp(e, &P, n->in[i], false, a[i + 1]);
            snprintf(call, sizeof call,
                     "tk_attention_bwd_dq<%lld, %d>(%s, %s, %s, %s, %s, %s, %s, %lldll, %lldll, %lldll, %lldll, (float)(%s), %d) /* dq [%lld,%lld,%lld,%lld] */",
                     (long long)D, bq, a[0], a[1], a[2], a[3], a[4], a[5], a[6], (long long)H, (long long)Hkv, (long long)T, (long long)S, sc,
                     causal, (long long)B, (long long)H, (long long)T, (long long)D);
            tmpl_launch(e, r, "_dq", &P, call, (int)threads, cdiv(T, bq), (unsigned)(B * H), threads, 1);
            Params Q = {0};
            char b[8][16];
            vp(e, &Q, n->out[1], true, b[0]);
            vp(e, &Q, n->out[2], true, b[1]);
            for (int i = 0; i < 6; i++) vp(e, &Q, n->in[i], false, b[i + 2]);
            snprintf(call, sizeof call,
                     "tk_attention_bwd_dkv<%lld, %d>(%s, %s, %s, %s, %s, %s, %s, %s, %lldll, %lldll, %lldll, %lldll, (float)(%s), %d) /* dk, dv [%lld,%lld,%lld,%lld] */",
                     (long long)D, bq, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], (long long)H, (long long)Hkv, (long long)T, (long long)S,
                     sc, causal, (long long)B, (long long)Hkv, (long long)S, (long long)D);
            tmpl_launch(e, r, "_dkv", &Q, call, (int)threads, cdiv(S, bq), (unsigned)(B * Hkv), threads, 1);
        }
        break;
    }
    case OP_cross_entropy:
    case OP_cross_entropy_grad: {
        bool fwd = n->op == OP_cross_entropy;
        const Shape *ls = &n->in[fwd ? 0 : 1]->ty.shape;
        int64_t V = ls->d[ls->rank - 1], N = shape_numel(ls) / V, ig = ir_int(n, "ignore_index", -100);
        Value *tg = n->in[fwd ? 1 : 2];
        int t = V >= 2048 ? 256 : V >= 256 ? 128 : 32;
        /* the count of kept rows */
        char w[16];
        snprintf(w, sizeof w, "p%d", param_ws(e, &P));
        vp(e, &P, tg, false, a[0]);
        snprintf(call, sizeof call, "tk_ce_count(%s, %s, %lldll, %lldll)", w, a[0], (long long)N, (long long)ig);
        tmpl_launch(e, r, "_count", &P, call, 1024, 1, 1, 1024, 1);
        Params Q = {0};
        char b[8][16];
        if (fwd) {
            vp(e, &Q, n->out[1], true, b[0]);
            vp(e, &Q, n->in[0], k->ce_fused, b[1]);
            vp(e, &Q, tg, false, b[2]);
            if (k->ce_fused) vp(e, &Q, k->ce_grad->in[0], false, b[3]);
            snprintf(w, sizeof w, "p%d", param_ws(e, &Q));
            snprintf(call, sizeof call, "tk_ce_rows<%d>(%s, (float *)%s, (float *)0, %s, %s, %s, %lldll, %lldll, %lldll) /* logits [%lld,%lld] */",
                     k->ce_fused ? 1 : 0, b[0], b[1], b[2], k->ce_fused ? b[3] : "(const float *)0", w, (long long)N, (long long)V, (long long)ig,
                     (long long)N, (long long)V);
            tmpl_launch(e, r, "_rows", &Q, call, t, (unsigned)N, 1, (unsigned)t, 1);
            Params M = {0};
            vp(e, &M, n->out[0], true, b[4]);
            snprintf(w, sizeof w, "p%d", param_ws(e, &M));
            snprintf(call, sizeof call, "tk_ce_mean(%s, %s, %lldll)", b[4], w, (long long)N);
            tmpl_launch(e, r, "_mean", &M, call, 1024, 1, 1, 1024, 1);
        } else {
            vp(e, &Q, n->out[0], true, b[0]);
            vp(e, &Q, n->in[3], false, b[1]);
            vp(e, &Q, n->in[1], false, b[2]);
            vp(e, &Q, tg, false, b[3]);
            vp(e, &Q, n->in[0], false, b[4]);
            snprintf(w, sizeof w, "p%d", param_ws(e, &Q));
            snprintf(call, sizeof call,
                     "tk_ce_rows<2>((float *)%s, (float *)%s, %s, %s, %s, %s, %lldll, %lldll, %lldll) /* dlogits [%lld,%lld] */", b[1], b[2],
                     b[0], b[3], b[4], w, (long long)N, (long long)V, (long long)ig, (long long)N, (long long)V);
            tmpl_launch(e, r, "_rows", &Q, call, t, (unsigned)N, 1, (unsigned)t, 1);
        }
        break;
    }
    case OP_global_norm: {
        /* partial sums of squares per block (fixed split), then one block adds them */
        int pa = param_arena(e, &P), pw = param_ws(e, &P);
        int64_t total = 0;
        for (int i = 0; i < n->nin; i++) total += shape_numel(&n->in[i]->ty.shape);
        unsigned nb = cdiv(total, NT * 8);
        if (nb > 1024) nb = 1024;
        if (nb < 1) nb = 1;
        StrBuf b = {0};
        fn_head(e, &b, &P, NT);
        sb_puts(&b, "    double s = 0;\n");
        for (int i = 0; i < n->nin; i++)
            sb_printf(&b, "    s += trn_sumsq((const float *)(p%d + %lldll), %lldll);\n", pa, (long long)e->p->bufs[vbuf(e, n->in[i])].offset,
                      (long long)shape_numel(&n->in[i]->ty.shape));
        sb_printf(&b, "    s = trn_block_sum(s);\n    if (threadIdx.x == 0) ((double *)p%d)[blockIdx.x] = s;\n}\n", pw);
        launch(e, r, "_part", &P, sb_take(&b), true, nb, 1, NT, 1);
        Params Q = {0};
        vp(e, &Q, n->out[0], true, a[0]);
        int qw = param_ws(e, &Q);
        snprintf(call, sizeof call, "tk_norm_final(%s, (const double *)p%d, %u)", a[0], qw, nb);
        tmpl_launch(e, r, "_final", &Q, call, 1024, 1, 1, 1024, 1);
        break;
    }
    case OP_adamw:
    case OP_sgd: {
        bool adam = n->op == OP_adamw;
        int64_t cnt = shape_numel(s0);
        /* outputs first: the same buffer as an operand when in place */
        vp(e, &P, n->out[0], true, a[0]);
        vp(e, &P, n->out[1], true, a[1]);
        if (adam) vp(e, &P, n->out[2], true, a[2]);
        vp(e, &P, n->in[0], false, a[3]);
        vp(e, &P, n->in[1], false, a[4]);
        vp(e, &P, n->in[2], false, a[5]);
        if (adam) {
            char v[16], lr[16], st[16], gs[16], b1[32], b2[32], ep[32], wd[32];
            vp(e, &P, n->in[3], false, v);
            vp(e, &P, n->in[4], false, lr);
            vp(e, &P, n->in[5], false, st);
            vp(e, &P, n->in[6], false, gs);
            fmt_double(b1, ir_float(n, "beta1", 0.9));
            fmt_double(b2, ir_float(n, "beta2", 0.999));
            fmt_double(ep, ir_float(n, "eps", 1e-8));
            fmt_double(wd, ir_float(n, "wd", 0));
            snprintf(call, sizeof call, "tk_adamw(%s, %s, %s, %s, %s, %s, %s, %lldll, %s, %s, %s, %s, %s, %s, %s) /* [%lld] */", a[0], a[1], a[2],
                     a[3], a[4], a[5], v, (long long)cnt, lr, st, gs, b1, b2, ep, wd, (long long)cnt);
        } else {
            char lr[16], gs[16], mo[32], wd[32];
            vp(e, &P, n->in[3], false, lr);
            vp(e, &P, n->in[4], false, gs);
            fmt_double(mo, ir_float(n, "momentum", 0));
            fmt_double(wd, ir_float(n, "wd", 0));
            snprintf(call, sizeof call, "tk_sgd(%s, %s, %s, %s, %s, %lldll, %s, %s, %s, %s, %d) /* [%lld] */", a[0], a[1], a[3], a[4], a[5],
                     (long long)cnt, lr, gs, mo, wd, (int)ir_int(n, "nesterov", 0), (long long)cnt);
        }
        /* in place: w, m, v alias their outputs, so no __restrict__ on them */
        StrBuf b = {0};
        sb_printf(&b, "extern \"C\" __global__ void __launch_bounds__(%d) @FN@", NT);
        signature(e, &P, &b, false);
        sb_printf(&b, "\n{\n    %s;\n}\n", call);
        launch(e, r, "", &P, sb_take(&b), true, cdiv(cnt, NT), 1, NT, 1);
        break;
    }
    default:
        error_at(e->d, k->loc, "the CUDA backend has no kernel for %s", op_name(n->op));
        e->ok = false;
    }
}

/* ===================================================================== */
/* the module                                                             */
/* ===================================================================== */

CudaModule *cg_cuda_emit(Program *p, Diag *d) {
    CudaModule *m = xcalloc(1, sizeof *m);
    m->p = p;
    StrBuf id = {0};
    sb_puts(&id, "trn_cuda_module_");
    for (const char *c = p->name; *c; c++)
        sb_putc(&id, (char)((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ? *c : '_'));
    m->sym = sb_take(&id);
    if (p->workspace_bytes <= 0) die("cg_cuda_emit: no workspace planned (cg_cuda_plan_workspace)");
    Emit e = {m, p, NULL, d, true};
    for (int s = 0; s < TRN_RUN__COUNT; s++) {
        Sched *sc = &p->sched[s];
        if (!sc->g) continue;
        e.s = sc;
        for (int i = 0; i < sc->nk; i++) {
            Kernel *k = sc->k[i];
            CuKern *r = new_kr(&e, k, TRN_CK_LAUNCH);
            switch (k->kind) {
            case KK_LOOP: emit_loop(&e, k, r); break;
            case KK_COPY: emit_copy(&e, k, r); break;
            case KK_FILL: emit_fill(&e, k, r); break;
            case KK_GEMM: {
                DType dt = p->bufs[k->gemm.c.buf].dt;
                if (dt != DT_f32 && dt != DT_f64 && dt != DT_bf16 && dt != DT_f16) {
                    error_at(d, k->loc, "the CUDA backend has no matmul in %s", dtype_name[dt]);
                    e.ok = false;
                }
                r->kind = TRN_CK_GEMM;
                break;
            }
            case KK_TMPL: emit_template(&e, k, r); break;
            }
        }
    }
    if (!e.ok) {
        cg_cuda_free(m);
        return NULL;
    }
    /* the source: prelude include, then every function after its comment */
    StrBuf *b = &m->src;
    sb_puts(b, "/* Generated by trainc from ");
    comment_text(b, p->source);
    sb_puts(b, " -- do not edit.\n * Model ");
    comment_text(b, p->name);
    sb_printf(b, ": %d CUDA functions for %d kernels; arena of %lld bytes, workspace at %lld (%lld bytes).\n */\n", m->nfn, m->nkr,
              (long long)p->arena_bytes, (long long)p->workspace_off, (long long)p->workspace_bytes);
    sb_puts(b, "#include \"trainc_cuda.cuh\"\n\n");
    for (int i = 0; i < m->nfn; i++) {
        CuFn *f = &m->fn[i];
        sb_puts(b, f->doc.s);
        sb_puts(b, " */\n");
        const char *t = f->text, *at;
        while ((at = strstr(t, "@FN@"))) {
            sb_printf(b, "%.*s%s", (int)(at - t), t, f->name);
            t = at + 4;
        }
        sb_puts(b, t);
        sb_putc(b, '\n');
    }
    return m;
}

void cg_cuda_free(CudaModule *m) {
    if (!m) return;
    for (int i = 0; i < m->nfn; i++) {
        free(m->fn[i].name);
        free(m->fn[i].text);
        sb_free(&m->fn[i].doc);
    }
    free(m->fn);
    free(m->kr);
    sb_free(&m->src);
    free(m->sym);
    free(m);
}

const char *cg_cuda_source(const CudaModule *m) { return m->src.s; }
int cg_cuda_nfns(const CudaModule *m) { return m->nfn; }
const char *cg_cuda_fn_name(const CudaModule *m, int i) { return m->fn[i].name; }
bool cg_cuda_fn_is_template(const CudaModule *m, int i) { return m->fn[i].tmpl; }
int cg_cuda_nkernels(const CudaModule *m) { return m->nkr; }
const char *cg_cuda_module_symbol(const CudaModule *m) { return m->sym; }

/* ---- the C descriptor ---- */

static void c_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p >= 32 && *p < 127 && *p != '?') fputc(*p, f);
        else fprintf(f, "\\%03o", *p);
    }
    fputc('"', f);
}

/* The range test data for a buffer read by kernel k should come from. */
static void read_range(Program *p, Sched *s, Kernel *k, int buf, double *lo, double *hi) {
    Buf *b = &p->bufs[buf];
    *lo = -1;
    *hi = 1;
    if (!dtype_is_float[b->dt]) *lo = 0, *hi = 8;
    for (int j = 0; j < k->nnodes; j++) {
        Node *n = k->nodes[j];
        for (int a = 0; a < n->nin; a++) {
            ValInfo *vi = &s->vi[n->in[a]->id];
            if (!(vi->st == VS_BUF || vi->st == VS_VIEW) || vi->view.buf != buf) continue;
            switch (n->op) {
            case OP_embedding:
                if (a == 1) *lo = 0, *hi = (double)n->in[0]->ty.shape.d[0];
                break;
            case OP_embedding_grad:
                if (a == 1) *lo = 0, *hi = (double)ir_int(n, "rows", 1);
                break;
            case OP_cross_entropy:
                if (a == 1) *lo = 0, *hi = (double)n->in[0]->ty.shape.d[n->in[0]->ty.shape.rank - 1];
                break;
            case OP_cross_entropy_grad:
                if (a == 2) *lo = 0, *hi = (double)n->in[1]->ty.shape.d[n->in[1]->ty.shape.rank - 1];
                if (a == 3) *lo = 2, *hi = 6; /* lse: above every logit */
                break;
            case OP_adamw:
                if (a == 3) *lo = 0, *hi = 1;        /* v >= 0 */
                if (a == 5) *lo = 1, *hi = 100;      /* step >= 1 */
                if (a == 4) *lo = 0, *hi = 0.01;     /* lr */
                break;
            case OP_sgd:
                if (a == 3) *lo = 0, *hi = 0.01;
                break;
            case OP_layer_norm_grad:
                if (a == 4) *lo = 0.5, *hi = 2;      /* rstd */
                break;
            case OP_rms_norm_grad:
                if (a == 3) *lo = 0.5, *hi = 2;
                break;
            case OP_attention_grad:
                if (a == 5) *lo = 2, *hi = 4;        /* lse */
                break;
            case OP_dropout:
                if (a == 1) *lo = 0, *hi = 1 << 30;  /* seed */
                break;
            case OP_log:
            case OP_sqrt:
            case OP_rsqrt:
            case OP_div:
                if (dtype_is_float[b->dt]) *lo = 0.5, *hi = 2;
                break;
            default: break;
            }
        }
    }
}

static void emit_bufs(FILE *f, Program *p, const char *pre, const char *name, const int *ids, int n, Sched *s, Kernel *k, bool reads) {
    if (!n) return;
    fprintf(f, "static const TrnCudaBuf %s_%s[] = {", pre, name);
    for (int i = 0; i < n; i++) {
        Buf *b = &p->bufs[ids[i]];
        double lo = 0, hi = 0;
        if (reads) read_range(p, s, k, ids[i], &lo, &hi);
        char l[32], h[32];
        fmt_double(l, lo);
        fmt_double(h, hi);
        fprintf(f, "%s{%lld, %lld, %d, %s, %s}", i ? ", " : "", (long long)b->offset, (long long)b->bytes, (int)b->dt, l, h);
    }
    fputs("};\n", f);
}

bool cg_cuda_emit_host(FILE *f, const CudaModule *m, const CudaBuild *cb, Diag *d) {
    Program *p = m->p;
    (void)d;
    fputs("\n/* ===================================================================== */\n"
          "/* the CUDA module (runtime/trainc_cuda.h): images compiled by NVRTC,     */\n"
          "/* launch tables, cuBLASLt products; see the .cu from --emit=cuda         */\n"
          "/* ===================================================================== */\n\n"
          "#include \"trainc_cuda.h\"\n\n",
          f);
    for (int i = 0; i < cb->n; i++) {
        const CudaImage *im = &cb->img[i];
        fprintf(f, "/* %s: %zu bytes */\nstatic const unsigned char cuda_image_%d[] =\n", im->arch, im->size, i);
        for (size_t o = 0; o < im->size; o += 40) {
            fputs("    \"", f);
            for (size_t j = o; j < o + 40 && j < im->size; j++) fprintf(f, "\\x%02x", im->data[j]);
            fputs("\"\n", f);
        }
        fputs(";\n", f);
    }
    fputs("static const TrnCudaImage cuda_images[] = {\n", f);
    for (int i = 0; i < cb->n; i++)
        fprintf(f, "    {\"%s\", %d, %d, cuda_image_%d, %zu},\n", cb->img[i].arch, cb->img[i].sm, cb->img[i].ptx, i, cb->img[i].size);
    fputs("};\n\nstatic const char *const cuda_fns[] = {\n", f);
    for (int i = 0; i < m->nfn; i++) fprintf(f, "    \"%s\",\n", m->fn[i].name);
    fputs("};\n\n", f);
    /* per kernel: launches, GEMM, buffers */
    for (int i = 0; i < m->nkr; i++) {
        CuKern *r = &m->kr[i];
        Kernel *k = r->k;
        Sched *s = &p->sched[r->sched];
        if (r->kind == TRN_CK_LAUNCH) {
            fprintf(f, "static const TrnCudaLaunch cl_%s[] = {\n", k->name);
            for (int j = 0; j < r->nl; j++) {
                CuLaunch *l = &r->l[j];
                fprintf(f, "    {%d, {%u, %u, %u}, {%u, %u, %u}, %u, %d, {", l->fn, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
                        l->block[2], l->smem, l->nargs);
                for (int a = 0; a < l->nargs; a++) fprintf(f, "%s%lld", a ? ", " : "", (long long)l->arg[a]);
                fprintf(f, "}}, /* %s */\n", m->fn[l->fn].name);
            }
            fputs("};\n", f);
        } else if (r->kind == TRN_CK_GEMM) {
            TrnCudaGemm g;
            Emit e = {(CudaModule *)m, p, s, d, true};
            gemm_desc(&e, k, &g);
            fprintf(f, "static const TrnCudaGemm cg_%s = {%d, %d, %d, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %d, {", k->name,
                    g.dtype, g.ta, g.tb, (long long)g.M, (long long)g.N, (long long)g.K, (long long)g.a, (long long)g.b, (long long)g.c,
                    (long long)g.lda, (long long)g.ldb, (long long)g.ldc, (long long)g.bias, g.nbatch);
            for (int b = 0; b < g.nbatch; b++) fprintf(f, "%s%lld", b ? ", " : "", (long long)g.batch[b]);
            fputs("}, {", f);
            for (int b = 0; b < g.nbatch; b++) fprintf(f, "%s%lld", b ? ", " : "", (long long)g.sa[b]);
            fputs("}, {", f);
            for (int b = 0; b < g.nbatch; b++) fprintf(f, "%s%lld", b ? ", " : "", (long long)g.sb[b]);
            fputs("}, {", f);
            for (int b = 0; b < g.nbatch; b++) fprintf(f, "%s%lld", b ? ", " : "", (long long)g.sc[b]);
            fputs("}};\n", f);
        }
        emit_bufs(f, p, "cr", k->name, k->reads, k->nreads, s, k, true);
        emit_bufs(f, p, "cw", k->name, k->writes, k->nwrites, s, k, false);
    }
    static const char *const sname[] = {"micro", "update", "eval", "sample"};
    for (int s = 0; s < TRN_RUN__COUNT; s++) {
        int cnt = 0;
        for (int i = 0; i < m->nkr; i++) cnt += m->kr[i].sched == s;
        if (!cnt) continue;
        fprintf(f, "\nstatic const TrnCudaKernel cuda_%s[] = {\n", sname[s]);
        for (int i = 0; i < m->nkr; i++) {
            CuKern *r = &m->kr[i];
            if (r->sched != s) continue;
            Kernel *k = r->k;
            char where[256] = "";
            if (k->loc.file) {
                const char *base = strrchr(k->loc.file, '/');
                snprintf(where, sizeof where, "%s:%d", base ? base + 1 : k->loc.file, k->loc.line);
            }
            fputs("    {", f);
            c_str(f, k->name);
            fputs(", ", f);
            c_str(f, where);
            static const char *const kinds[] = {"TRN_CK_LAUNCH", "TRN_CK_GEMM", "TRN_CK_MEMSET"};
            fprintf(f, ", %s, %d, %s%s, %s%s, %lld, %lld, %s, %d, %d, %s%s, %s%s},\n", kinds[r->kind], r->nl, r->kind == TRN_CK_LAUNCH ? "cl_" : "NULL",
                    r->kind == TRN_CK_LAUNCH ? k->name : "", r->kind == TRN_CK_GEMM ? "&cg_" : "NULL", r->kind == TRN_CK_GEMM ? k->name : "",
                    (long long)r->ms_off, (long long)r->ms_bytes, k->name, k->nreads, k->nwrites, k->nreads ? "cr_" : "NULL",
                    k->nreads ? k->name : "", k->nwrites ? "cw_" : "NULL", k->nwrites ? k->name : "");
        }
        fputs("};\n", f);
    }
    fprintf(f, "\nconst TrnCudaModule %s = {\n    .abi = TRN_CUDA_ABI,\n    .hash = \"\",\n    .nimages = %d,\n    .images = cuda_images,\n", m->sym,
            cb->n);
    fprintf(f, "    .nfns = %d,\n    .fns = cuda_fns,\n    .nkern = {", m->nfn);
    for (int s = 0; s < TRN_RUN__COUNT; s++) {
        int cnt = 0;
        for (int i = 0; i < m->nkr; i++) cnt += m->kr[i].sched == s;
        fprintf(f, "%s%d", s ? ", " : "", cnt);
    }
    fputs("},\n    .kern = {", f);
    for (int s = 0; s < TRN_RUN__COUNT; s++) {
        int cnt = 0;
        for (int i = 0; i < m->nkr; i++) cnt += m->kr[i].sched == s;
        fprintf(f, "%s%s%s", s ? ", " : "", cnt ? "cuda_" : "NULL", cnt ? sname[s] : "");
    }
    fprintf(f, "},\n    .workspace_off = %lld,\n    .workspace_bytes = %lld,\n    .tf32 = %d,\n};\n", (long long)p->workspace_off,
            (long long)p->workspace_bytes, p->tc.precision && strcmp(p->tc.precision, "tf32") == 0);
    return true;
}
