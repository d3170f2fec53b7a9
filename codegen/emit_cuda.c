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
 *                  32 kept elements per block of 32 x 16 threads ("columns";
 *                  with few blocks, the rows split over groups whose
 *                  partials a second kernel adds in order);
 *                  accumulators in double, like the C backend's
 *   copies, fills  one thread per element (memset for zero fills)
 *   GEMMs          cuBLASLt (runtime/cuda.c), described by TrnCudaGemm
 *   templates      __global__ wrappers of runtime/trainc_cuda.cuh's
 *                  device functions, sizes as constants; bf16/f16 operands
 *                  where mixed precision gives them (attention, rope,
 *                  rope_qk, linear_cross_entropy); linear_cross_entropy as
 *                  a sequence of launches and cuBLASLt products over chunks
 *                  of rows (TRN_CK_STEPS)
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
#include "loops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NT 256                  /* threads per block of one-thread-per-element kernels */
/* Buffers one kernel may name.  A launch passes at most TRN_CUDA_MAXARGS
 * pointers: a kernel with more (a long fused backward chain) takes the
 * arena base alone and forms its pointers from it (arena_form). */
#define CU_MAXPARAM 128

/* ---- the module being built ---- */

typedef struct CuLaunch {
    int      fn;
    unsigned grid[3], block[3], smem;
    int      nargs;
    int64_t  arg[TRN_CUDA_MAXARGS];
} CuLaunch;

typedef struct CuKern {
    Kernel      *k;
    int          sched;
    int          kind;          /* TRN_CK_* */
    CuLaunch    *l;             /* launches */
    int          nl, capl;
    TrnCudaGemm *g;             /* cuBLASLt products of a TRN_CK_STEPS kernel */
    int          ng, capg;
    TrnCudaStep *step;          /* TRN_CK_STEPS: launches and products in order */
    int          nstep, capstep;
    bool         terse;         /* document only the first launch of each function */
    int64_t      ms_off, ms_bytes;
    double       flops;         /* TrnCudaKernel.flops */
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
 * __restrict__), or per distinct place in one (parts of a scratch buffer),
 * or the arena base. */
typedef struct Params {
    int  n;
    int  buf[CU_MAXPARAM];      /* -1: the arena base, -2: the workspace */
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

/* (64-bit: a grid dimension past 2^32 blocks reaches launch()'s limit check
 * whole, not wrapped) */
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static int vbuf(Emit *e, Value *v) { return cg_value_buf(e->s, v); }

/* The parameter pointing at arena byte offset off in buffer b (added when new). */
static int param_at(Params *P, int b, int64_t off, bool write) {
    for (int i = 0; i < P->n; i++)
        if (P->buf[i] == b && P->off[i] == off) {
            P->write[i] |= write;
            return i;
        }
    if (P->n == CU_MAXPARAM) die("cuda: more than %d buffers in one kernel", CU_MAXPARAM);
    int i = P->n++;
    P->buf[i] = b;
    P->write[i] = write;
    P->off[i] = off;
    return i;
}
/* The parameter for buffer b (its start). */
static int param(Emit *e, Params *P, int b, bool write) { return param_at(P, b, b >= 0 ? e->p->bufs[b].offset : 0, write); }
static int param_ws(Emit *e, Params *P) { return param_at(P, -2, e->p->workspace_off, true); }
static int param_arena(Emit *e, Params *P) { return param(e, P, -1, false); }

/* The signature "(float *__restrict__ p0, const float *__restrict__ p1, ...)". */
/* Parameter i's type, "const float *", and its declaration (signature(),
 * arena_form()). */
static void param_type(Emit *e, const Params *P, int i, StrBuf *b) {
    const char *ty = P->buf[i] == -1 ? "unsigned char" : P->buf[i] == -2 ? "void" : st_type(e->p->bufs[P->buf[i]].dt);
    sb_printf(b, "%s%s *", P->write[i] || P->buf[i] < 0 ? "" : "const ", ty);
}
static void param_decl(Emit *e, const Params *P, int i, bool restrict_, StrBuf *b) {
    param_type(e, P, i, b);
    sb_printf(b, "%sp%d", restrict_ && P->buf[i] >= 0 ? "__restrict__ " : "", i);
}

static void signature(Emit *e, Params *P, StrBuf *b, bool restrict_) {
    sb_putc(b, '(');
    for (int i = 0; i < P->n; i++) {
        if (i) sb_puts(b, ", ");
        param_decl(e, P, i, restrict_, b);
    }
    sb_putc(b, ')');
}

static void kernel_doc(Emit *e, Kernel *k, StrBuf *b, const Params *P, const CuLaunch *l, int nl, bool first) {
    Program *p = e->p;
    sb_printf(b, "%s%s: %s [", first ? "/* " : " * also ", k->name, cg_kind_name(k->kind));
    cg_kernel_ops(b, k);
    sb_puts(b, "]");
    if (k->loc.file) {
        sb_puts(b, "  from ");
        cg_comment_text(b, k->loc.file);
        sb_printf(b, ":%d", k->loc.line);
    }
    sb_putc(b, '\n');
    if (first) {
        for (int i = 0; i < k->nreads; i++) cg_describe_buf(b, p, k->reads[i], "read");
        for (int i = 0; i < k->nwrites; i++) cg_describe_buf(b, p, k->writes[i], "write");
        if (P) {
            sb_puts(b, " *   arguments:");
            for (int i = 0; i < P->n; i++) {
                sb_printf(b, " p%d=%s%d", i, P->buf[i] == -1 ? "arena" : P->buf[i] == -2 ? "workspace" : "b", P->buf[i] < 0 ? 0 : P->buf[i]);
                if (P->buf[i] >= 0 && P->off[i] != p->bufs[P->buf[i]].offset)
                    sb_printf(b, "+%lld", (long long)(P->off[i] - p->bufs[P->buf[i]].offset));
            }
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

static void add_step(CuKern *r, int gemm, int index) {
    if (r->nstep == r->capstep) {
        r->capstep = r->capstep ? 2 * r->capstep : 16;
        r->step = xrealloc(r->step, sizeof(TrnCudaStep) * (size_t)r->capstep);
    }
    r->step[r->nstep++] = (TrnCudaStep){gemm, index};
}

/* Records a launch of function text (made from P) for kernel k. */
/* A function of more than TRN_CUDA_MAXARGS parameters, made to take the
 * arena base alone: its parameter list becomes (unsigned char *trn_A), and
 * each parameter pN a local pointer at its arena offset, declared as the
 * list declared it.  (Its text then names offsets: no two launches share
 * it.)  Returns the new text; frees the old. */
static char *arena_form(Emit *e, Params *P, char *text) {
    StrBuf sig = {0}, out = {0};
    bool restrict_ = true; /* the list as the function declared it: with __restrict__ or (in-place kernels) without */
    signature(e, P, &sig, restrict_);
    char *at = strstr(text, sig.s);
    if (!at) {
        free(sb_take(&sig));
        signature(e, P, &sig, restrict_ = false);
        at = strstr(text, sig.s);
    }
    char *brace = at ? strstr(at + sig.len, "{\n") : NULL;
    if (!at || !brace) die("cuda: no parameter list to replace in a kernel of %d buffers", P->n);
    sb_printf(&out, "%.*s(unsigned char *trn_A)%.*s{\n", (int)(at - text), text, (int)(brace - (at + sig.len)), at + sig.len);
    sb_printf(&out, "    /* %d buffers: more than a launch passes (%d); pointers from the arena base */\n", P->n, TRN_CUDA_MAXARGS);
    for (int i = 0; i < P->n; i++) {
        sb_puts(&out, "    ");
        param_decl(e, P, i, restrict_, &out);
        sb_puts(&out, " = (");
        param_type(e, P, i, &out);
        sb_printf(&out, ")(trn_A + %lldll);\n", (long long)P->off[i]);
    }
    sb_puts(&out, brace + 2);
    free(sig.s);
    free(text);
    return sb_take(&out);
}

static void launch_at(Emit *e, CuKern *r, const char *suffix, const Params *P, char *text, bool tmpl, int64_t gx, int64_t gy, int64_t gz,
                      unsigned bx, unsigned by) {
    bool packed = P->n > TRN_CUDA_MAXARGS;
    if (packed) text = arena_form(e, (Params *)P, text);
    if (r->nl == r->capl) {
        r->capl = r->capl ? 2 * r->capl : 4;
        r->l = xrealloc(r->l, sizeof(CuLaunch) * (size_t)r->capl);
    }
    if (r->kind == TRN_CK_STEPS) add_step(r, 0, r->nl);
    CuLaunch *l = &r->l[r->nl++];
    memset(l, 0, sizeof *l);
    /* the launch limits of every GPU since sm_30: a grid past them would be
     * refused at run time, so it is an error here, at the kernel's line
     * (the module is not made: cg_cuda_emit) */
    if (gx < 0 || gx > 0x7fffffff || gy < 0 || gy > 65535 || gz < 1 || gz > 65535) {
        if (gz > 1)
            error_at(e->d, r->k->loc, "the CUDA backend's kernel %s needs a grid of %lld x %lld x %lld blocks, past the GPU's limits (2^31-1 x 65535 x 65535)",
                     r->k->name, (long long)gx, (long long)gy, (long long)gz);
        else
            error_at(e->d, r->k->loc, "the CUDA backend's kernel %s needs a grid of %lld x %lld blocks, past the GPU's limits (2^31-1 x 65535)",
                     r->k->name, (long long)gx, (long long)gy);
        e->ok = false;
        gx = gy = gz = 1;
    }
    /* a block of more threads than the function's __launch_bounds__ (or
     * 1024) is refused at launch, after NVRTC fitted its registers to the
     * bound: said here, at compile time */
    unsigned nt = bx * (by ? by : 1);
    const char *lb = strstr(text, "__launch_bounds__(");
    if (nt < 1 || nt > 1024 || (lb && nt > (unsigned)atoi(lb + strlen("__launch_bounds__("))))
        die("cuda: kernel %s%s: a block of %u threads, past its function's __launch_bounds__ or 1024", r->k->name, suffix, nt);
    l->fn = add_fn(e, r->k, suffix, text, tmpl);
    l->grid[0] = gx ? (unsigned)gx : 1;
    l->grid[1] = gy ? (unsigned)gy : 1;
    l->grid[2] = (unsigned)gz;
    l->block[0] = bx;
    l->block[1] = by ? by : 1;
    l->block[2] = 1;
    l->nargs = packed ? 1 : P->n;
    for (int i = 0; i < l->nargs; i++) l->arg[i] = packed ? 0 : P->off[i];
    CuFn *f = &e->m->fn[l->fn];
    bool again = false;
    for (int i = 0; i < r->nl - 1 && r->terse; i++) again |= r->l[i].fn == l->fn;
    if (!again) kernel_doc(e, r->k, &f->doc, P, l, 1, f->doc.len == 0);
}

/* A launch of a grid (gx, gy), gy 0 or 1 for one dimension. */
static void launch(Emit *e, CuKern *r, const char *suffix, const Params *P, char *text, bool tmpl, int64_t gx, int64_t gy, unsigned bx,
                   unsigned by) {
    launch_at(e, r, suffix, P, text, tmpl, gx, gy, 1, bx, by);
}

/* A cuBLASLt product step of a TRN_CK_STEPS kernel. */
static void add_gemm_step(CuKern *r, const TrnCudaGemm *g) {
    if (r->ng == r->capg) {
        r->capg = r->capg ? 2 * r->capg : 8;
        r->g = xrealloc(r->g, sizeof(TrnCudaGemm) * (size_t)r->capg);
    }
    add_step(r, 1, r->ng);
    r->g[r->ng++] = *g;
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

/* The embedding backward's sorted indices in the workspace (int32, each
 * array padded to 4): first [V] at 0, end [V] at V4, pos [N] at 2 V4, key
 * [N] at 2 V4 + N4.  Returns the words in all. */
static int64_t emb_sort_layout(const Node *n, int64_t *V4, int64_t *N4) {
    *V4 = (ir_int(n, "rows", 0) + 3) / 4 * 4;
    *N4 = (shape_numel(&n->in[1]->ty.shape) + 3) / 4 * 4;
    return 2 * *V4 + 2 * *N4;
}

void cg_cuda_plan_workspace(Program *p) {
    /* cuBLASLt: 32 MiB (what it asks for on Hopper) once any product is
     * large, 4 MiB otherwise; kernel scratch (cross-entropy row losses,
     * column partials, attention's Di, the embedding backward's sorted
     * indices) shares the region: the stream runs one thing at a time */
    double big = 0; /* the largest product's M·N·K (in double: 2^48-element operands overflow int64) */
    int64_t scratch = 64 << 10;
    for (int s = 0; s < TRN_RUN__COUNT; s++)
        for (int i = 0; i < p->sched[s].nk; i++) {
            Kernel *k = p->sched[s].k[i];
            if (k->kind == KK_GEMM && (double)k->gemm.M * k->gemm.N * k->gemm.K > big) big = (double)k->gemm.M * k->gemm.N * k->gemm.K;
            if (k->kind == KK_TMPL && k->nodes[0]->op == OP_linear_cross_entropy) {
                /* its chunk products (its scratch is its own buffer in the plan) */
                const Node *n = k->nodes[0];
                int64_t N = shape_numel(&n->in[2]->ty.shape), ch = ir_int(n, "chunk", N) < N ? ir_int(n, "chunk", N) : N;
                double mnk = (double)ch * n->in[1]->ty.shape.d[0] * n->in[1]->ty.shape.d[1];
                if (mnk > big) big = mnk;
            }
            if (k->kind == KK_TMPL && k->nodes[0]->op == OP_attention_grad) {
                /* Di, from the dq kernel to the dkv kernel: a float per query row */
                int64_t rows = shape_numel(&k->nodes[0]->in[1]->ty.shape) / k->nodes[0]->in[1]->ty.shape.d[3];
                if (4 * rows > scratch) scratch = 4 * rows;
            }
            if (k->kind == KK_TMPL && k->nodes[0]->op == OP_embedding_grad) {
                int64_t V4, N4, b = 4 * emb_sort_layout(k->nodes[0], &V4, &N4);
                if (b > scratch) scratch = b;
            }
            if (k->kind == KK_TMPL && (k->nodes[0]->op == OP_cross_entropy || k->nodes[0]->op == OP_cross_entropy_grad)) {
                const Shape *ls = &k->nodes[0]->in[k->nodes[0]->op == OP_cross_entropy ? 0 : 1]->ty.shape;
                int64_t rows = shape_numel(ls) / (ls->rank ? ls->d[ls->rank - 1] : 1);
                if (256 + 8 * rows > scratch) scratch = 256 + 8 * rows;
            }
        }
    int64_t ws = big >= (double)(1 << 30) ? (int64_t)32 << 20 : (int64_t)4 << 20;
    if (scratch > ws) ws = scratch;
    ws = (ws + CG_ALIGN - 1) / CG_ALIGN * CG_ALIGN;
    p->workspace_off = (p->arena_bytes + CG_ALIGN - 1) / CG_ALIGN * CG_ALIGN;
    p->workspace_bytes = ws;
    p->arena_bytes = p->workspace_off + ws;
    p->cat_bytes[MC_WORKSPACE] += ws;
}

/* ===================================================================== */
/* loop kernels (the access analysis is loops.c's)                        */
/* ===================================================================== */

/* The CUDA spelling of a loop kernel: the analysis, the function's
 * parameters and body, and vectorisation. */
typedef struct Loop {
    LoopNest *N;
    Emit     *e;
    Params    P;
    int       vec;                /* 4 or 8: elements per thread along loop vl, 0: one */
    int       vl;                 /* the vector loop: the innermost, or a columns kernel's last kept loop */
    bool      vacc[LOOP_MAXACC];  /* access read/written as a vector (trn_ldv, trn_stv) */
    StrBuf   *b;
} Loop;

/* Index of access a over the loop indices i0.. (vector accesses: of the
 * first of the four elements). */
static void idx_expr(Loop *L, int a, char *buf, size_t n) { cg_loop_idx(L->N, a, "ll", buf, n); }

static void vname(char *buf, size_t n, Value *v) { snprintf(buf, n, "v%d", v->id); }

/* The expression of one pointwise node in compute type dt. */
static void node_expr(StrBuf *b, Node *m, char ops[][64], DType dt) {
    bool fl = is_f(dt), dbl = dt == DT_f64;
    const char *a = ops[0], *c = m->nin > 1 ? ops[1] : "", *y = m->nin > 2 ? ops[2] : "";
    const char *sfx = fl ? "f" : "";
    switch (m->op) {
    case OP_neg: sb_printf(b, fl || dbl ? "-(%s)" : "trn_ineg(%s)", a); break;
    case OP_exp: sb_printf(b, "exp%s(%s)", sfx, a); break;
    case OP_log: sb_printf(b, "log%s(%s)", sfx, a); break;
    case OP_sqrt: sb_printf(b, "sqrt%s(%s)", sfx, a); break;
    case OP_rsqrt: sb_printf(b, fl ? "(float)(1.0 / sqrt((double)(%s)))" : "1.0 / sqrt(%s)", a); break;
    case OP_tanh: sb_printf(b, "tanh%s(%s)", sfx, a); break;
    case OP_sigmoid: sb_printf(b, "trn_sigmoid(%s)", a); break;
    case OP_relu: sb_printf(b, "(%s > 0 ? %s : 0)", a, a); break;
    case OP_gelu: sb_printf(b, "trn_gelu(%s, %d)", a, (int)ir_int(m, "approx", 0)); break;
    case OP_silu: sb_printf(b, "trn_silu(%s)", a); break;
    case OP_abs: sb_printf(b, fl ? "fabsf(%s)" : dbl ? "fabs(%s)" : "trn_iabs(%s)", a); break;
    case OP_sign: sb_printf(b, fl || dbl ? "trn_sign(%s)" : "(%s > 0 ? 1 : %s < 0 ? -1 : 0)", a, a); break;
    case OP_cast:
        if (!fl && !dbl && dtype_is_float[m->in[0]->ty.dt]) /* saturated, NaN 0 */
            sb_printf(b, "trn_f2i((double)(%s), %s)", a, dt == DT_u8 ? "0ll, 255ll" : dt == DT_i32 ? "-2147483647ll - 1, 2147483647ll" : "-9223372036854775807ll - 1, 9223372036854775807ll");
        else sb_printf(b, "(%s)(%s)", cp_type(dt), a);
        break;
    case OP_add: sb_printf(b, fl || dbl ? "%s + %s" : "trn_iadd(%s, %s)", a, c); break;
    case OP_sub: sb_printf(b, fl || dbl ? "%s - %s" : "trn_isub(%s, %s)", a, c); break;
    case OP_mul: sb_printf(b, fl || dbl ? "%s * %s" : "trn_imul(%s, %s)", a, c); break;
    case OP_div: sb_printf(b, fl || dbl ? "%s / %s" : "trn_idiv(%s, %s)", a, c); break;
    case OP_maximum: sb_printf(b, fl ? "trn_fmaxf(%s, %s)" : dbl ? "trn_fmaxd(%s, %s)" : "(%s > %s ? %s : %s)", a, c, a, c); break;
    case OP_minimum: sb_printf(b, fl ? "trn_fminf(%s, %s)" : dbl ? "trn_fmind(%s, %s)" : "(%s < %s ? %s : %s)", a, c, a, c); break;
    case OP_ge: sb_printf(b, "(%s >= %s ? 1 : 0)", a, c); break;
    case OP_tanh_grad: sb_printf(b, "%s * (1.0%s - %s * %s)", a, sfx, c, c); break;
    case OP_sigmoid_grad: sb_printf(b, "%s * %s * (1.0%s - %s)", a, c, sfx, c); break;
    case OP_relu_grad: sb_printf(b, "(%s > 0 ? %s : 0)", c, a); break;
    case OP_gelu_grad: sb_printf(b, "trn_gelu_grad(%s, %s, %d)", a, c, (int)ir_int(m, "approx", 0)); break;
    case OP_silu_grad: sb_printf(b, "trn_silu_grad(%s, %s)", a, c); break;
    case OP_swiglu: sb_printf(b, "trn_silu(%s) * %s", a, c); break;
    case OP_geglu: sb_printf(b, "trn_gelu(%s, %d) * %s", a, (int)ir_int(m, "approx", 0), c); break;
    case OP_max_grad: sb_printf(b, "(%s == %s ? %s : 0)", c, y, a); break;
    case OP_clip_coef: {
        char mx[32];
        fmt_double(mx, ir_float(m, "max_norm", 1.0));
        sb_printf(b, "trn_clip_coef(%s / ((double)(%s) + 1e-6))", mx, a);
        break;
    }
    default: die("cuda node_expr: %s is not a loop op", op_name(m->op));
    }
}

/* The linear index of a virtual access (iota, dropout) at element e. */
static void virt_idx(Loop *L, int a, char *out, size_t n) {
    char idx[512];
    idx_expr(L, a, idx, sizeof idx);
    int vl = L->vl;
    if (L->vec && vl >= 0 && L->N->lst[a][vl]) snprintf(out, n, "(%s + e * %lldll)", idx, (long long)L->N->lst[a][vl]);
    else snprintf(out, n, "(%s)", idx);
}

/* Names operand j of node i: a value of this kernel, a literal, or a load. */
static void loop_operand(Loop *L, int i, int j, int depth, char out[64]) {
    Node *m = L->N->k->nodes[i];
    Value *x = m->in[j];
    LoopOperand kind = cg_loop_operand(L->N, i, j);
    if (kind == LOOP_OP_VALUE) {
        vname(out, 64, x);
        return;
    }
    if (kind == LOOP_OP_CONST) {
        lit_expr(out, 64, ir_float(x->def, "value", 0), x->ty.dt);
        return;
    }
    int a = L->N->opacc[i][j];
    StrBuf lb = {0};
    if (kind == LOOP_OP_VIRTUAL) {
        int64_t inner, size;
        cg_loop_iota(x->def, &inner, &size);
        char vi[600];
        virt_idx(L, a, vi, sizeof vi);
        sb_printf(&lb, "(%s)(%s / %lldll %% %lldll)", cp_type(x->ty.dt), vi, (long long)inner, (long long)size);
    } else if (L->vacc[a]) {
        sb_printf(&lb, "a%d[e]", a);
    } else {
        char idx[512], ptr[16];
        idx_expr(L, a, idx, sizeof idx);
        snprintf(ptr, sizeof ptr, "p%d", param(L->e, &L->P, L->N->acc[a].buf, false));
        load_expr(&lb, x->ty.dt, ptr, idx);
    }
    ind(L->b, depth);
    sb_printf(L->b, "const %s l%d_%d = %s;\n", cp_type(x->ty.dt), i, j, lb.s);
    sb_free(&lb);
    snprintf(out, 64, "l%d_%d", i, j);
}

static void emit_loop_store(Loop *L, int i, int depth, bool red_result) {
    if (L->N->resacc[i] < 0) return;
    Node *m = L->N->k->nodes[i];
    int a = L->N->resacc[i];
    char yn[32];
    vname(yn, sizeof yn, m->out[0]);
    ind(L->b, depth);
    if (L->vacc[a] && !red_result) {
        sb_printf(L->b, "s%d[e] = %s;\n", a, yn);
        return;
    }
    char idx[512], ptr[16];
    idx_expr(L, a, idx, sizeof idx);
    snprintf(ptr, sizeof ptr, "p%d", param(L->e, &L->P, L->N->acc[a].buf, true));
    store_stmt(L->b, m->out[0]->ty.dt, ptr, idx, yn);
}

static void emit_loop_node(Loop *L, int i, int depth) {
    Node *m = L->N->k->nodes[i];
    char ops[LOOP_MAXIN][64];
    for (int j = 0; j < m->nin && j < LOOP_MAXIN; j++) loop_operand(L, i, j, depth, ops[j]);
    Value *y = m->out[0];
    DType dt = y->ty.dt;
    char yn[32];
    vname(yn, sizeof yn, y);
    /* a double (dropout's quotient, an f64 or integer cast) goes to bf16 or
     * f16 through trn_odd, as the C backend rounds it: once (through a
     * float rounded to nearest, a tie could round twice, the wrong way) */
    bool half = dt == DT_bf16 || dt == DT_f16;
    bool wide = m->op == OP_dropout || (m->op == OP_cast && (m->in[0]->ty.dt == DT_f64 || !dtype_is_float[m->in[0]->ty.dt]));
    StrBuf xb = {0};
    if (m->op == OP_iota) {
        char vi[600];
        virt_idx(L, L->N->linacc[i], vi, sizeof vi);
        int64_t inner, size;
        cg_loop_iota(m, &inner, &size);
        sb_printf(&xb, "(%s / %lldll %% %lldll)", vi, (long long)inner, (long long)size);
    } else if (m->op == OP_dropout) {
        char vi[600], pl[32], inv[32];
        virt_idx(L, L->N->linacc[i], vi, sizeof vi);
        double pr = ir_float(m, "p", 0);
        fmt_double(pl, pr);
        fmt_double(inv, 1.0 - pr);
        sb_printf(&xb, "(rng_keep((uint32_t)%s, %lluull, (uint64_t)%s, (float)%s) ? (double)(%s) / %s : 0.0)", ops[1],
                  (unsigned long long)ir_int(m, "stream", 0), vi, pl, ops[0], inv);
    } else if (m->op == OP_cast && wide && half) {
        sb_printf(&xb, "(double)(%s)", ops[0]); /* rounded once, below */
    } else {
        node_expr(&xb, m, ops, dt);
    }
    ind(L->b, depth);
    if (half && wide)
        sb_printf(L->b, "const float %s = trn_r_%s(trn_odd(%s));  /* %s */\n", yn, dtype_name[dt], xb.s, op_name(m->op));
    else if (half)
        sb_printf(L->b, "const float %s = trn_r_%s((float)(%s));  /* %s */\n", yn, dtype_name[dt], xb.s, op_name(m->op));
    else if (dtype_is_float[dt])
        sb_printf(L->b, "const %s %s = (%s)(%s);  /* %s */\n", cp_type(dt), yn, cp_type(dt), xb.s, op_name(m->op));
    else
        sb_printf(L->b, "const long long %s = (long long)(%s)(%s);  /* %s */\n", yn, st_type(dt), xb.s, op_name(m->op));
    sb_free(&xb);
    emit_loop_store(L, i, depth, false);
}

/* Declares the loop indices i0.. from a linear index (kept loops, or
 * reduced loops) named `lin`. */
static void decompose(Loop *L, bool red, const char *lin, int depth, int vec) {
    int idx[IR_MAX_RANK], n = 0;
    for (int i = 0; i < L->N->nl; i++)
        if (L->N->lred[i] == red) idx[n++] = i;
    if (!n) return;
    ind(L->b, depth);
    sb_printf(L->b, "long long q_%s = %s;\n", red ? "r" : "k", lin);
    for (int j = n - 1; j >= 0; j--) {
        int i = idx[j];
        int64_t size = L->N->lsize[i];
        bool inner = j == n - 1 && vec > 1;
        char times[16] = "";
        if (inner) size /= vec, snprintf(times, sizeof times, " * %d", vec);
        ind(L->b, depth);
        if (j == 0) sb_printf(L->b, "const long long i%d = q_%s%s;\n", i, red ? "r" : "k", times);
        else {
            sb_printf(L->b, "const long long i%d = (q_%s %% %lldll)%s;\n", i, red ? "r" : "k", (long long)size, times);
            ind(L->b, depth);
            sb_printf(L->b, "q_%s /= %lldll;\n", red ? "r" : "k", (long long)size);
        }
    }
}

/* How many row groups G a columns reduction of R rows splits into when
 * gx column blocks would underfill a GPU: about 256 blocks in all, at
 * least min_rows rows a group, G partials of group_bytes each in the
 * workspace; 1: no split (loop kernels' column sums, the norms' dw). */
static int64_t row_groups(Emit *e, int64_t gx, int64_t R, int64_t min_rows, int64_t group_bytes) {
    if (gx >= 128 || R < 4096) return 1;
    int64_t G = cdiv(256, gx);
    if (G > R / min_rows) G = R / min_rows;
    if (G > e->p->workspace_bytes / group_bytes) G = e->p->workspace_bytes / group_bytes;
    return G < 2 ? 1 : G;
}

/* How a columns reduction of `cols` columns over R rows is laid out:
 * blocks of 32 threads across (*gx of them), each thread *w consecutive
 * columns with vector loads (*w: 4 or 8 asked for, 0 for none; kept only
 * in a split, whose groups then take at least 256 rows, as the blocks are
 * W times fewer), and the row groups G returned (row_groups; group_bytes
 * of partials a group).  Loop kernels' column sums, the norms' dw and the
 * products' bias gradients where cuBLASLt has none. */
static int64_t col_split(Emit *e, int64_t cols, int64_t R, int64_t group_bytes, int *w, int64_t *gx) {
    if (*w && row_groups(e, cdiv(cols / *w, 32), R, 256, group_bytes) < 2) *w = 0;
    *gx = cdiv(cols / (*w ? *w : 1), 32);
    return row_groups(e, *gx, R, *w ? 256 : 1024, group_bytes);
}

/* The vector width along loop lv: W elements a thread, 8 when a half
 * access takes part (16 bytes of half) and 4 otherwise (16 bytes of f32),
 * when every buffer access that moves along lv is f32, bf16 or f16,
 * contiguous there and starts each thread's W elements on a multiple of W
 * (its offset and its strides over the other loops multiples of W); 0:
 * none.  `pre`: only the accesses before a reduction count (a columns
 * kernel's partials leave the epilogue to the kernel after). */
static int vec_width(const LoopNest *N, int lv, bool pre) {
    for (int w = 8; w >= 4; w -= 4) {
        if (N->lsize[lv] % w) continue;
        bool ok = true, any = false, half = false;
        for (int a = 0; a < N->nacc && ok; a++) {
            const LoopAcc *ac = &N->acc[a];
            if (ac->buf < 0 || N->lst[a][lv] == 0 || (pre && ac->post)) continue;
            ok = N->lst[a][lv] == 1 && (ac->dt == DT_f32 || ac->dt == DT_bf16 || ac->dt == DT_f16) && ac->off % w == 0;
            for (int i = 0; i < N->nl && ok; i++) ok = i == lv || N->lst[a][i] % w == 0;
            half |= ac->dt != DT_f32;
            any = true;
        }
        if (ok && any && (w == 4 || half)) return w;
    }
    return 0;
}

/* Marks the accesses vec_width counted as vector accesses of width w. */
static void set_vec(Loop *L, int lv, bool pre, int w) {
    L->vec = w;
    L->vl = lv;
    for (int a = 0; a < L->N->nacc; a++)
        L->vacc[a] = w && L->N->acc[a].buf >= 0 && L->N->lst[a][lv] != 0 && !(pre && L->N->acc[a].post);
}

/* Declares and loads the vector accesses' elements (a<acc>[W]) and the
 * stores' (s<acc>[W]), then opens the loop over a thread's W elements. */
static void vec_open(Loop *L, int depth) {
    for (int a = 0; a < L->N->nacc; a++) {
        if (!L->vacc[a]) continue;
        char idx[512];
        idx_expr(L, a, idx, sizeof idx);
        ind(L->b, depth);
        if (L->N->acc[a].store) sb_printf(L->b, "float s%d[%d];\n", a, L->vec);
        else {
            int pi = param(L->e, &L->P, L->N->acc[a].buf, false);
            sb_printf(L->b, "float a%d[%d];\n", a, L->vec);
            ind(L->b, depth);
            sb_printf(L->b, "trn_ldv(p%d + %s, a%d);\n", pi, idx, a);
        }
    }
    sb_puts(L->b, "#pragma unroll\n");
    ind(L->b, depth);
    sb_printf(L->b, "for (int e = 0; e < %d; e++) {\n", L->vec);
}

/* Closes vec_open's loop and stores the stores' elements. */
static void vec_close(Loop *L, int depth) {
    ind(L->b, depth);
    sb_puts(L->b, "}\n");
    for (int a = 0; a < L->N->nacc; a++) {
        if (!L->vacc[a] || !L->N->acc[a].store) continue;
        char idx[512];
        idx_expr(L, a, idx, sizeof idx);
        int pi = param(L->e, &L->P, L->N->acc[a].buf, true);
        ind(L->b, depth);
        sb_printf(L->b, "trn_stv(p%d + %s, s%d);\n", pi, idx, a);
    }
}

static void emit_loop(Emit *e, Kernel *k, CuKern *r) {
    Loop Lc = {cg_loop_analyse(e->s, k), e, {0}, 0, -1, {0}, NULL}, *L = &Lc;

    int64_t K = 1, R = 1;
    for (int i = 0; i < L->N->nl; i++) {
        if (L->N->lred[i]) R *= L->N->lsize[i];
        else K *= L->N->lsize[i];
    }
    /* pointwise kernels: vectors along the innermost loop */
    int last = L->N->nl - 1;
    if (!k->red && last >= 0) set_vec(L, last, false, vec_width(L->N, last, false));

    StrBuf body = {0};
    L->b = &body;
    int depth = 1;
    int64_t gx;
    unsigned bx = NT, by = 1;
    bool rows = false;
    int tpr = 32, rpb = 1, ny = 16;
    int64_t G = 1, RC = 0; /* columns: row groups (a second kernel adds their partials), rows per group */
    if (!k->red) {
        int64_t units = K / (L->vec ? L->vec : 1);
        gx = cdiv(units, NT);
        sb_printf(&body, "    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (t >= %lldll) return;\n",
                  (long long)units);
        decompose(L, false, "t", depth, L->vec ? L->vec : 1);
        if (L->vec) vec_open(L, 1), depth = 2;
        for (int i = 0; i < k->nnodes; i++) emit_loop_node(L, i, depth);
        if (L->vec) vec_close(L, 1);
    } else {
        /* rows when some load reads the innermost reduced loop contiguously */
        int lastred = -1;
        for (int i = 0; i < L->N->nl; i++)
            if (L->N->lred[i]) lastred = i;
        for (int a = 0; a < L->N->nacc && lastred >= 0; a++)
            if (L->N->acc[a].buf >= 0 && !L->N->acc[a].store && L->N->lst[a][lastred] == 1) rows = true;
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
            /* Few blocks (bias and norm-weight gradients: 768 columns are
             * 24 blocks) over many rows underfill a GPU: the rows are split
             * into G groups, about 256 blocks in all, at least 1024 rows a
             * group, partials in the workspace.  Split kernels of sums read
             * W columns a thread with vector loads when they can (then at
             * least 256 rows a group, as the blocks are W times fewer).
             * A kernel with dropout inlines a Philox-4x32-10 a column: at
             * 8 columns a thread its 512 threads spill (GPT-2 small in
             * bf16: 8 to 12 bytes), at 4 they do not. */
            int lk = -1, w = 0;
            for (int i = 0; i < L->N->nl; i++)
                if (!L->N->lred[i]) lk = i;
            if (fl && ro != OP_max && lk >= 0 && R >= 4096) w = vec_width(L->N, lk, true);
            for (int i = 0; i < k->nnodes && w > 4; i++)
                if (op_has(k->nodes[i]->op, OPF_RANDOM)) w = 4;
            G = col_split(e, K, R, K * 8, &w, &gx);
            set_vec(L, lk, true, w);
            RC = cdiv(R, G);
            if (w) {
                sb_printf(&body, "    const long long kq = (long long)blockIdx.x * 32 + threadIdx.x, kk = kq * %d;\n    const bool kok = kq < %lldll;\n",
                          w, (long long)(K / w));
                sb_printf(&body, "    %s acc[%d] = {};\n    if (kok) {\n", at, w);
                decompose(L, false, "kq", 2, w);
            } else {
                sb_printf(&body, "    const long long kk = (long long)blockIdx.x * 32 + threadIdx.x;\n    const bool kok = kk < %lldll;\n",
                          (long long)K);
                sb_printf(&body, "    %s acc = %s;\n    if (kok) {\n", at, init);
                decompose(L, false, "kk", 2, 1);
            }
            if (G > 1)
                sb_printf(&body, "    for (long long r = (long long)blockIdx.y * %lldll + threadIdx.y, re = min((long long)blockIdx.y * %lldll + %lldll, %lldll); r < re; r += %d) {\n",
                          (long long)RC, (long long)RC, (long long)RC, (long long)R, ny);
            else sb_printf(&body, "    for (long long r = threadIdx.y; r < %lldll; r += %d) {\n", (long long)R, ny);
        }
        depth = 2;
        decompose(L, true, "r", depth, 1);
        if (L->vec) vec_open(L, depth), depth = 3;
        int i = 0;
        for (; i < k->nnodes && k->nodes[i] != k->red; i++) emit_loop_node(L, i, depth);
        char in0[64];
        loop_operand(L, i, 0, depth, in0);
        ind(&body, depth);
        if (ro == OP_max) sb_printf(&body, "acc = trn_rmax<%s>(acc, (%s)%s);\n", at, at, in0);
        else if (fl) sb_printf(&body, "acc%s += (%s)%s;\n", L->vec ? "[e]" : "", at, in0);
        else sb_printf(&body, "acc%s = trn_iadd(acc%s, (%s)%s);\n", L->vec ? "[e]" : "", L->vec ? "[e]" : "", at, in0); /* wraps, as an add does */
        if (L->vec) depth = 2, vec_close(L, depth);
        sb_puts(&body, "    }\n");
        if (!rows) sb_puts(&body, "    }\n");
        /* combine */
        if (rows) {
            if (tpr == 32) {
                if (ro == OP_max) sb_printf(&body, "    for (int o = 16; o > 0; o >>= 1) acc = trn_rmax<%s>(acc, __shfl_xor_sync(TRN_FULL, acc, o));\n", at);
                else sb_puts(&body, "    acc = trn_warp_sum(acc);\n");
            } else {
                if (ro == OP_max) {
                    sb_printf(&body, "    {\n        __shared__ %s sh[%d];\n        sh[tr] = acc;\n        __syncthreads();\n", at, tpr);
                    sb_printf(&body, "        for (int s = %d; s > 0; s >>= 1) {\n            if (tr < s) sh[tr] = trn_rmax<%s>(sh[tr], sh[tr + s]);\n"
                                     "            __syncthreads();\n        }\n        acc = sh[0];\n    }\n", tpr / 2, at);
                } else {
                    sb_puts(&body, "    acc = trn_block_sum(acc);\n");
                }
            }
            sb_puts(&body, "    if (tr != 0) return;\n");
        } else {
            if (ro == OP_max) {
                sb_printf(&body, "    {\n        __shared__ %s sh[%d][33];\n        sh[threadIdx.y][threadIdx.x] = acc;\n        __syncthreads();\n", at, ny);
                sb_printf(&body, "        for (int s = %d; s > 0; s >>= 1) {\n            if ((int)threadIdx.y < s) sh[threadIdx.y][threadIdx.x] = "
                                 "trn_rmax<%s>(sh[threadIdx.y][threadIdx.x], sh[threadIdx.y + s][threadIdx.x]);\n"
                                 "            __syncthreads();\n        }\n        acc = sh[0][threadIdx.x];\n    }\n", ny / 2, at);
            } else if (L->vec) {
                /* one column sum after another through the same shared array */
                sb_printf(&body, "    for (int e = 0; e < %d; e++) {\n        if (e) __syncthreads();\n        acc[e] = trn_col_sum<%d>(acc[e]);\n    }\n",
                          L->vec, ny);
            } else {
                sb_printf(&body, "    acc = trn_col_sum<%d>(acc);\n", ny);
            }
            if (G > 1) {
                /* the partials' kernel, then the one that adds them in group order and runs the epilogue */
                int pw = param_ws(e, &L->P);
                if (L->vec)
                    sb_printf(&body, "    if (threadIdx.y == 0 && kok)\n        for (int e = 0; e < %d; e++) ((%s *)p%d)[(long long)blockIdx.y * %lldll + kk + e] = acc[e];\n}\n",
                              L->vec, at, pw, (long long)K);
                else sb_printf(&body, "    if (threadIdx.y == 0 && kok) ((%s *)p%d)[(long long)blockIdx.y * %lldll + kk] = acc;\n}\n", at, pw, (long long)K);
                set_vec(L, 0, false, 0);
                StrBuf pb = {0};
                fn_head(e, &pb, &L->P, (int)(bx * by));
                sb_puts(&pb, body.s);
                sb_free(&body);
                launch(e, r, "_part", &L->P, sb_take(&pb), false, gx, G, bx, by);
                memset(&L->P, 0, sizeof L->P);
                pw = param_ws(e, &L->P);
                sb_printf(&body, "    const long long kk = (long long)blockIdx.x * %d + threadIdx.x;\n    if (kk >= %lldll) return;\n", NT, (long long)K);
                sb_printf(&body, "    %s acc = ((const %s *)p%d)[kk];\n#pragma unroll 8\n    for (int g = 1; g < %lld; g++) {\n", at, at, pw, (long long)G);
                sb_printf(&body, "        const %s w = ((const %s *)p%d)[g * %lldll + kk];\n", at, at, pw, (long long)K);
                if (ro == OP_max) sb_printf(&body, "        acc = trn_rmax<%s>(acc, w);\n    }\n", at);
                else sb_puts(&body, fl ? "        acc += w;\n    }\n" : "        acc = trn_iadd(acc, w);\n    }\n");
                gx = cdiv(K, NT);
                bx = NT;
                by = 1;
            } else {
                sb_puts(&body, "    if (threadIdx.y != 0 || !kok) return;\n");
            }
            decompose(L, false, "kk", 1, 1);
        }
        /* the reduced value and the epilogue */
        Node *m = k->red;
        DType rdt = m->out[0]->ty.dt;
        char rn[32];
        vname(rn, sizeof rn, m->out[0]);
        int64_t cnt = cg_loop_red_count(k);
        /* the double sum to bf16 or f16 through trn_odd: rounded once */
        const char *conv = rdt == DT_bf16 ? "trn_r_bf16(trn_odd" : rdt == DT_f16 ? "trn_r_f16(trn_odd" : rdt == DT_f64 ? "(double)(" : "(float)(";
        if (ro == OP_mean) sb_printf(&body, "    const %s %s = %s(acc / %lld.0));\n", cp_type(rdt), rn, conv, (long long)cnt);
        else if (dtype_is_float[rdt]) sb_printf(&body, "    const %s %s = %s(acc));\n", cp_type(rdt), rn, conv);
        else sb_printf(&body, "    const long long %s = (long long)(%s)(acc);\n", rn, st_type(rdt)); /* wraps, as a store does */
        emit_loop_store(L, i, 1, true);
        for (i++; i < k->nnodes; i++) emit_loop_node(L, i, 1);
    }
    /* the function */
    StrBuf fb = {0};
    fn_head(e, &fb, &L->P, (int)(bx * by));
    sb_puts(&fb, body.s ? body.s : "");
    sb_puts(&fb, "}\n");
    sb_free(&body);
    launch(e, r, "", &L->P, sb_take(&fb), false, gx, 1, bx, by);
    cg_loop_free(L->N);
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
    if (k->fill == 0.0 && !signbit(k->fill) && view_is_contig(&k->dst)) { /* -0.0 is not all-zero bytes */
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

static void gemm_desc(Emit *e, Kernel *k, TrnCudaGemm *g) {
    GemmInfo *gi = &k->gemm;
    Program *p = e->p;
    memset(g, 0, sizeof *g);
    int ta, tb;
    int64_t lda, ldb;
    cg_gemm_layout(&gi->a, &ta, &lda);
    cg_gemm_layout(&gi->b, &tb, &ldb);
    /* A and B in one dtype; C in it too, or f32 for half operands (matmul {dtype=f32}) */
    g->dtype = (int)p->bufs[gi->a.buf].dt;
    g->cdtype = (int)p->bufs[gi->c.buf].dt;
    g->scale = -1;
    g->ta = ta ^ gi->ta;
    g->tb = tb ^ gi->tb;
    g->M = gi->M;
    g->N = gi->N;
    g->K = gi->K;
    int es = dtype_size[g->dtype], cs = dtype_size[g->cdtype];
    g->a = p->bufs[gi->a.buf].offset + gi->a.off * es;
    g->b = p->bufs[gi->b.buf].offset + gi->b.off * es;
    g->c = p->bufs[gi->c.buf].offset + gi->c.off * cs;
    g->lda = lda;
    g->ldb = ldb;
    g->ldc = gi->N;
    g->bias = gi->bias.buf >= 0 ? p->bufs[gi->bias.buf].offset + gi->bias.off * es : -1;
    /* (lower.c leaves an f64 product's bias to a loop kernel on this target:
     * cuBLASLt documents no bias epilogue for CUBLAS_COMPUTE_64F) */
    if (g->bias >= 0 && g->dtype == DT_f64) die("cuda: kernel %s: a bias epilogue on an f64 product", k->name);
    g->accumulate = gi->accumulate;
    g->epi = gi->epi == GEPI_GELU ? TRN_GEMM_GELU : gi->epi == GEPI_DGELU ? TRN_GEMM_DGELU : TRN_GEMM_PLAIN;
    g->aux = gi->epi && gi->aux.buf >= 0 ? p->bufs[gi->aux.buf].offset + gi->aux.off * cs : -1;
    g->bgrad = gi->bgrad == GBG_A ? TRN_BGRAD_A : gi->bgrad == GBG_B ? TRN_BGRAD_B : TRN_BGRAD_NONE;
    g->dbias = gi->bgrad ? p->bufs[gi->dbias.buf].offset + gi->dbias.off * cs : -1;
    g->nbatch = gi->nbatch;
    for (int i = 0; i < gi->nbatch; i++) {
        g->batch[i] = gi->bshape[i];
        g->sa[i] = gi->bsa[i];
        g->sb[i] = gi->bsb[i];
        g->sc[i] = gi->bsc[i];
    }
}

/* A product's epilogue as a kernel of its own: the TRN_CK_GEMM kernel's
 * one launch, which the runtime runs after the product only where cuBLASLt
 * has no algorithm with the epilogue (the product then runs with none, its
 * bias included).  With a GELU: c = gelu(aux [+ bias]) (aux, when the
 * pre-activation is kept, is where the product then went, and gets the
 * bias; else c itself), or c = gelu_grad(c, aux); a bias alone: c += bias.
 * The bias is a row of N, read at column i % N: a batched product's C
 * is contiguous (only a product that is not batched accumulates into
 * another tensor's view: lower_matmul), so one loop over its M·N·batch
 * elements covers every product (a batched product has no GELU
 * epilogue).  No __restrict__: c may be aux. */
static void emit_gemm_epilogue(Emit *e, Kernel *k, CuKern *r) {
    Program *p = e->p;
    GemmInfo *gi = &k->gemm;
    int es = dtype_size[p->bufs[gi->c.buf].dt];
    Params P = {0};
    int pc = param_at(&P, gi->c.buf, p->bufs[gi->c.buf].offset + gi->c.off * es, true);
    int px = gi->aux.buf >= 0 ? param_at(&P, gi->aux.buf, p->bufs[gi->aux.buf].offset + gi->aux.off * es, gi->bias.buf >= 0) : pc;
    int pb = gi->bias.buf >= 0 ? param_at(&P, gi->bias.buf, p->bufs[gi->bias.buf].offset + gi->bias.off * es, false) : -1;
    if (gi->epi == GEPI_DGELU && pb >= 0) die("cuda: kernel %s: a GELU gradient's product with a bias", k->name);
    if (gi->nbatch && (gi->epi || gi->accumulate)) die("cuda: kernel %s: a batched product with a GELU epilogue or accumulating", k->name);
    int64_t n = gi->M * gi->N;
    for (int i = 0; i < gi->nbatch; i++) n *= gi->bshape[i];
    unsigned threads = 256;
    int64_t blocks = cdiv(n, threads);
    if (blocks > 4096) blocks = 4096;
    StrBuf b = {0};
    char bias[64] = "";
    if (pb >= 0) snprintf(bias, sizeof bias, " + trn_f32(p%d[i %% %lldll])", pb, (long long)gi->N);
    sb_printf(&b, "extern \"C\" __global__ void __launch_bounds__(%u) @FN@", threads);
    signature(e, &P, &b, false);
    sb_puts(&b, "\n{\n");
    sb_printf(&b, "    /* the %s%s epilogue of the product%s, where cuBLASLt has none */\n", gi->epi == GEPI_GELU ? "GELU" : gi->epi ? "GELU gradient" : "bias",
              gi->epi && pb >= 0 ? " and bias" : "", gi->epi ? " (tanh form)" : "");
    sb_printf(&b, "    for (long long i = blockIdx.x * %ull + threadIdx.x; i < %lldll; i += (long long)gridDim.x * %u)", threads, (long long)n, threads);
    if (gi->epi == GEPI_GELU && pb >= 0 && px != pc) /* the pre-activation stored, rounded, and read back */
        sb_printf(&b, " {\n        trn_st(p%d + i, trn_f32(p%d[i])%s);\n        trn_st(p%d + i, trn_gelu(trn_f32(p%d[i]), 1));\n    }\n", px, px, bias, pc, px);
    else if (gi->epi == GEPI_GELU) sb_printf(&b, "\n        trn_st(p%d + i, trn_gelu(trn_f32(p%d[i])%s, 1));\n", pc, px, bias);
    else if (gi->epi) sb_printf(&b, "\n        trn_st(p%d + i, trn_gelu_grad(trn_f32(p%d[i]), trn_f32(p%d[i]), 1));\n", pc, pc, px);
    else sb_printf(&b, "\n        trn_st(p%d + i, trn_f32(p%d[i])%s);\n", pc, pc, bias);
    sb_puts(&b, "}\n");
    launch(e, r, gi->epi ? "_epi" : "_bias", &P, sb_take(&b), false, blocks, 0, threads, 0);
}

/* ===================================================================== */
/* templates                                                              */
/* ===================================================================== */

/* Templates that take bf16/f16 operands (those mixed precision gives half
 * operands: docs/passes.md), as the C backend's; the others take f32. */
static bool any_float_template(Op op) {
    return op == OP_attention || op == OP_attention_grad || op == OP_rope || op == OP_rope_qk || op == OP_linear_cross_entropy;
}

static bool dtypes_ok(Emit *e, Kernel *k) {
    Node *n = k->nodes[0];
    for (int i = 0; i < n->nin; i++) {
        DType dt = n->in[i]->ty.dt;
        if (!dtype_is_float[dt] || dt == DT_f32 || (any_float_template(n->op) && (dt == DT_bf16 || dt == DT_f16))) continue;
        error_at(e->d, k->loc, "the CUDA backend's %s kernel supports %s tensors only, not %s", op_name(n->op),
                 any_float_template(n->op) ? "f32, bf16 and f16" : "f32", dtype_name[dt]);
        e->ok = false;
        return false;
    }
    return true;
}

/* "pN" for value v's buffer */
static const char *vp(Emit *e, Params *P, Value *v, bool write, char out[16]) {
    snprintf(out, 16, "p%d", param(e, P, vbuf(e, v), write));
    return out;
}

/* An attention operand: the parameter at its view's first element, and its
 * layout as TRN_ATTL(b, h, t) strides (trainc_cuda.cuh). */
static const char *avp(Emit *e, Params *P, Value *v, bool write, char out[16], char lay[64]) {
    int64_t l[3], off;
    cg_att_layout(e->s, v, l, &off);
    int b = vbuf(e, v);
    snprintf(out, 16, "p%d", param_at(P, b, e->p->bufs[b].offset + off * (int64_t)dtype_size[v->ty.dt], write));
    snprintf(lay, 64, "TRN_ATTL(%lld, %lld, %lld)", (long long)l[0], (long long)l[1], (long long)l[2]);
    return out;
}

/* A rope operand: of rope_qk (view), [B,H,T,D] as a view (avp; returns H);
 * otherwise contiguous, as [outer, 1, T, D] (returns 1). */
static int64_t rvp(Emit *e, Params *P, Value *v, bool write, bool view, char out[16], char lay[64]) {
    const Shape *s = &v->ty.shape;
    if (view && s->rank == 4) {
        avp(e, P, v, write, out, lay);
        return s->d[1];
    }
    int64_t T = s->d[s->rank - 2], D = s->d[s->rank - 1];
    vp(e, P, v, write, out);
    snprintf(lay, 64, "TRN_ATTL(%lld, 0, %lld)", (long long)(T * D), (long long)D);
    return 1;
}

/* One template launch: text = head + "    CALL;\n}\n". */
static void tmpl_launch(Emit *e, CuKern *r, const char *suffix, Params *P, const char *call, int threads, int64_t gx, int64_t gy,
                        unsigned bx, unsigned by) {
    StrBuf b = {0};
    fn_head(e, &b, P, threads);
    sb_printf(&b, "    %s;\n}\n", call);
    launch(e, r, suffix, P, sb_take(&b), true, gx, gy, bx, by);
}

/* The same, with ptxas told how many blocks should fit on a multiprocessor
 * (__launch_bounds__'s second number): without it, ptxas's own occupancy
 * target made the bf16 attention forward at D = 16 spill (64 registers, 8
 * to 24 bytes of spills). */
static void tmpl_launch_minb(Emit *e, CuKern *r, const char *suffix, Params *P, const char *call, int threads, int minb, int64_t gx,
                             int64_t gy, unsigned bx, unsigned by) {
    StrBuf b = {0};
    sb_printf(&b, "extern \"C\" __global__ void __launch_bounds__(%d, %d) @FN@", threads, minb);
    signature(e, P, &b, true);
    sb_printf(&b, "\n{\n    %s;\n}\n", call);
    launch(e, r, suffix, P, sb_take(&b), true, gx, gy, bx, by);
}

/* A product's bias gradient as kernels of their own: the TRN_CK_GEMM
 * kernel's launches, which the runtime runs after the product only where
 * cuBLASLt has no algorithm with the BGRAD epilogue.  The summed operand
 * is row-major [K, len] (lower.c): column sums as the loop kernel's that
 * the product replaced, in row groups through the workspace when the
 * columns alone would underfill the GPU (GPT-2's 768 are 24 blocks of
 * 32), added in order by a second kernel; in a split, W columns a thread
 * with vector loads when len, the leading dimension and the offset allow
 * (then at least 256 rows a group, as the blocks are W times fewer). */
static void emit_gemm_bgrad(Emit *e, Kernel *k, CuKern *r) {
    Program *p = e->p;
    GemmInfo *gi = &k->gemm;
    int64_t L;
    const View *xv = cg_bgrad_operand(gi, &L);
    int t;
    int64_t ld;
    cg_gemm_layout(xv, &t, &ld);
    DType xt = p->bufs[xv->buf].dt;
    int64_t K = gi->K;
    Params P = {0};
    int po = param_at(&P, gi->dbias.buf, p->bufs[gi->dbias.buf].offset + gi->dbias.off * 4, true);
    int px = param_at(&P, xv->buf, p->bufs[xv->buf].offset + xv->off * dtype_size[xt], false);
    int w = xt == DT_f32 ? 4 : 8;
    if (L % w || ld % w || xv->off % w) w = 0;
    int64_t gx;
    int64_t G = col_split(e, L, K, L * 8, &w, &gx);
    char pw[24] = "(double *)0", call[512];
    if (G > 1) snprintf(pw, sizeof pw, "(double *)p%d", param_ws(e, &P));
    snprintf(call, sizeof call, "tk_colsum<16, %d, %s>(p%d, p%d, %lldll, %lldll, %lldll, %lldll, %s) /* bias gradient [%lld]%s */", w ? w : 1,
             st_type(xt), po, px, (long long)K, (long long)L, (long long)ld, (long long)(G > 1 ? (K + G - 1) / G : K), pw, (long long)L,
             G > 1 ? ": row groups" : "");
    tmpl_launch(e, r, "_bgrad", &P, call, 512, gx, G, 32, 16);
    if (G > 1) {
        Params F = {0};
        int fo = param_at(&F, gi->dbias.buf, p->bufs[gi->dbias.buf].offset + gi->dbias.off * 4, true);
        int fw = param_ws(e, &F);
        snprintf(call, sizeof call, "tk_colsum_final(p%d, (const double *)p%d, %lldll, %lldll) /* bias gradient [%lld] from %lld groups */", fo, fw,
                 (long long)G, (long long)L, (long long)L, (long long)G);
        tmpl_launch(e, r, "_bgradsum", &F, call, 256, cdiv(L, 256), 1, 256, 1);
    }
}

/* The tensor-core attention forward's and dq kernel's row tiles of 16
 * queries a warp at head dimension D: --tc-attention-rows, else 2 (a block
 * of 128 rows) up to D = 64, where each K and V fragment read from shared
 * memory then serves twice the FLOPs (docs/cuda.md), and 1 beyond, where
 * the accumulators would double past what registers hold. */
static int att_tc_rows(const Program *p, int64_t D) {
    if (p->tc_attention_rows > 0) return p->tc_attention_rows;
    return D <= 64 ? 2 : 1;
}

/* An attention kernel's launch, with launch bounds' blocks per
 * multiprocessor when minb > 0, else plain (blockDim threads x 1), over gx
 * row blocks and bh (batch, head) pairs: grid (gx, gy, gz) with gy gz = bh
 * exactly (gy the largest divisor
 * of bh up to 65535 whose gz is at most 65535: the kernels' trn_att_bh()
 * = blockIdx.z * gridDim.y + blockIdx.y covers each pair once).  bh on y
 * alone stopped at 65535 (a batch of 4096 of 16 heads); a bh with no such
 * divisor (a prime past 65535) is refused by launch_at. */
static void att_launch(Emit *e, CuKern *r, const char *suffix, Params *P, const char *call, int threads, int minb, int64_t gx, int64_t bh) {
    int64_t gy = bh, gz = 1;
    for (int64_t y = bh < 65535 ? bh : 65535; bh > 65535 && y >= 1; y--)
        if (bh % y == 0) {
            gy = y, gz = bh / y;
            break;
        }
    StrBuf b = {0};
    if (minb > 0) {
        sb_printf(&b, "extern \"C\" __global__ void __launch_bounds__(%d, %d) @FN@", threads, minb);
        signature(e, P, &b, true);
        sb_printf(&b, "\n{\n    %s;\n}\n", call);
    } else {
        fn_head(e, &b, P, threads);
        sb_printf(&b, "    %s;\n}\n", call);
    }
    launch_at(e, r, suffix, P, sb_take(&b), true, gx, gy, gz, (unsigned)threads, 1);
}

/* ---- linear_cross_entropy ----
 * The kernel's scratch buffer (in the memory plan: lower.c sizes it with
 * cg_cuda_linear_ce_scratch for the cuda target) holds tk_ce_count's header
 * (the kept-row count and the products' device scales) and the row losses
 * from byte 256, then the chunk's logits [chunk, V] in x's dtype (cuBLASLt
 * accumulates in f32 and rounds once), over which tk_lce_rows writes the
 * chunk's gradient, what the dx and dw products read.  The program's C
 * form (the CPU fallback, the kernel checks' reference) uses the buffer's
 * first rows x classes floats, its chunk halved until they fit (emit_c). */
static int64_t align_up(int64_t x) { return (x + CG_ALIGN - 1) / CG_ALIGN * CG_ALIGN; }

/* the logits' byte offset in the scratch buffer */
static int64_t lce_logits_off(const Node *n) { return align_up(256 + 8 * shape_numel(&n->in[2]->ty.shape)); }

int64_t cg_cuda_linear_ce_scratch(const Node *n) {
    int64_t V = n->in[1]->ty.shape.d[0], N = shape_numel(&n->in[2]->ty.shape), chunk = ir_int(n, "chunk", N);
    if (chunk > N) chunk = N;
    return lce_logits_off(n) + (int64_t)dtype_size[n->in[0]->ty.dt] * chunk * V;
}

/* tk_lce_rows' block for rows of V logits of es bytes: the row held in
 * registers (*nv 16-byte vectors a thread, at most 7: 28 of the 64
 * registers a thread has at 1024 threads; with 8, TinyLlama's f32 rows
 * spilled) by the fewest threads from 128 to 1024 that can; else (*nv =
 * 0) streamed. */
static int lce_rows_threads(int64_t V, int es, int *nv) {
    int64_t vw = 16 / es, nvec = V / vw;
    *nv = 0;
    if (V % vw == 0)
        for (int t = 128; t <= 1024; t *= 2)
            if (nvec <= 7 * (int64_t)t) {
                *nv = (int)((nvec + t - 1) / t);
                return t;
            }
    return V >= 2048 ? 256 : V >= 256 ? 128 : 32;
}

/* The buffer of a template result, or -1 when nothing reads it (eval: dx, dw). */
static int opt_buf(Emit *e, Value *v) {
    ValInfo *vi = &e->s->vi[v->id];
    return vi->st == VS_BUF || vi->st == VS_VIEW ? vi->view.buf : -1;
}

/* vp, or a null pointer of the value's type when lowering gave it no
 * buffer (a result nothing reads, an operand the kernel does without) */
static const char *vp_opt(Emit *e, Params *P, Value *v, bool write, char out[16]) {
    if (opt_buf(e, v) >= 0) return vp(e, P, v, write, out);
    snprintf(out, 16, "(%s *)0", st_type(v->ty.dt)); /* converts to const T * too */
    return out;
}

/* tk_ce_count; per chunk of rows: logits = x_c w^T (cuBLASLt), tk_lce_rows,
 * dx_c = alpha g w and dw = alpha g^T x_c (+ dw after the first chunk);
 * tk_ce_mean.  The products run over all V rows of w (the padded
 * vocabulary: a tile multiple), the rows kernel masks the columns from
 * `classes` on. */
static void emit_linear_ce(Emit *e, Kernel *k, CuKern *r) {
    Node *n = k->nodes[0];
    Program *p = e->p;
    int64_t C = n->in[1]->ty.shape.d[1], V = n->in[1]->ty.shape.d[0], N = shape_numel(&n->in[2]->ty.shape);
    int64_t nc = ir_int(n, "classes", V), chunk = ir_int(n, "chunk", N), ig = ir_int(n, "ignore_index", -100);
    if (chunk > N) chunk = N;
    if (chunk < 1) chunk = 1;
    DType dt = n->in[0]->ty.dt;
    if (n->in[1]->ty.dt != dt) {
        error_at(e->d, k->loc, "the CUDA backend's linear_cross_entropy needs x and w of one dtype, not %s and %s", dtype_name[dt],
                 dtype_name[n->in[1]->ty.dt]);
        e->ok = false;
        return;
    }
    if (!k->scratch) die("linear_cross_entropy kernel %s without scratch", k->name);
    int sb = k->scratch - 1;
    if (p->bufs[sb].bytes < cg_cuda_linear_ce_scratch(n)) die("linear_cross_entropy kernel %s: scratch too small", k->name);
    int64_t base = p->bufs[sb].offset, es = dtype_size[dt];
    int xb = vbuf(e, n->in[0]), wb = vbuf(e, n->in[1]), tb = vbuf(e, n->in[2]), lb = vbuf(e, n->out[0]);
    /* dx: f32, or x's half dtype (the cast it absorbed: lower.c); dx and dw
     * times the scales it absorbed (fp16's loss scale), if any */
    Value *sdx, *sdw, *dx = cg_lce_result(k, 1, &sdx), *dw = cg_lce_result(k, 2, &sdw);
    int dxb = opt_buf(e, dx), dwb = opt_buf(e, dw);
    bool grad = dxb >= 0 || dwb >= 0;
    int64_t xo = p->bufs[xb].offset, wo = p->bufs[wb].offset, go = base + lce_logits_off(n); /* the logits, then the gradient in their place */
    const char *lt = st_type(dt);
    int nv, t = lce_rows_threads(V, (int)es, &nv);
    char call[1024];
    r->kind = TRN_CK_STEPS;
    r->terse = true;
    /* the kept rows and alpha = 1/count */
    Params P = {0};
    int ph = param_at(&P, sb, base, true), pt = param(e, &P, tb, false);
    if (sdx || sdw) {
        char sx[32] = "(const float *)0", sw[32] = "(const float *)0", t[16];
        if (sdx) snprintf(sx, sizeof sx, "%s", vp(e, &P, sdx, false, t));
        if (sdw) snprintf(sw, sizeof sw, "%s", vp(e, &P, sdw, false, t));
        snprintf(call, sizeof call,
                 "tk_ce_count_scaled(p%d, p%d, %lldll, %lldll, %s, %s) /* x [%lld,%lld] w [%lld,%lld], %lld rows at a time; dx, dw scaled */",
                 ph, pt, (long long)N, (long long)ig, sx, sw, (long long)N, (long long)C, (long long)V, (long long)C, (long long)chunk);
    } else
        snprintf(call, sizeof call, "tk_ce_count(p%d, p%d, %lldll, %lldll) /* x [%lld,%lld] w [%lld,%lld], %lld rows at a time */", ph, pt,
                 (long long)N, (long long)ig, (long long)N, (long long)C, (long long)V, (long long)C, (long long)chunk);
    tmpl_launch(e, r, "_count", &P, call, 1024, 1, 1, 1024, 1);
    for (int64_t r0 = 0; r0 < N; r0 += chunk) {
        int64_t rows = r0 + chunk < N ? chunk : N - r0;
        /* logits [rows, V] (x's dtype) = x_c [rows, C] . w^T */
        TrnCudaGemm g = {0};
        g.dtype = (int)dt, g.cdtype = (int)dt, g.ta = 0, g.tb = 1;
        g.M = rows, g.N = V, g.K = C;
        g.a = xo + r0 * C * es, g.b = wo, g.c = go;
        g.lda = C, g.ldb = C, g.ldc = V, g.bias = -1, g.scale = -1;
        add_gemm_step(r, &g);
        /* the rows: loss, g = softmax - onehot over the logits */
        Params Q = {0};
        char gp[48];
        int pl = param_at(&Q, sb, go, grad);
        if (grad) snprintf(gp, sizeof gp, "(%s *)p%d", lt, pl);
        else snprintf(gp, sizeof gp, "(%s *)0", lt);
        int pr = param_at(&Q, sb, base + 256 + 8 * r0, true);
        int pq = param_at(&Q, tb, p->bufs[tb].offset + 4 * r0, false);
        snprintf(call, sizeof call,
                 "tk_lce_rows<%s, %d, %d>(%s, (double *)p%d, (const %s *)p%d, p%d, %lldll, %lldll, %lldll) /* logits [%lld,%lld] from "
                 "cuBLASLt%s; then dx = g w, dw += g^T x */",
                 lt, t, nv, gp, pr, lt, pl, pq, (long long)V, (long long)nc, (long long)ig, (long long)chunk, (long long)V,
                 nv ? ", the row in registers" : "");
        tmpl_launch_minb(e, r, "_rows", &Q, call, t, 1024 / t, rows, 1, (unsigned)t, 1);
        /* dx_c [rows, C] = alpha g [rows, V] . w [V, C] (f32 accumulation, stored in dx's dtype) */
        if (dxb >= 0) {
            TrnCudaGemm d = {0};
            d.dtype = (int)dt, d.cdtype = (int)dx->ty.dt, d.ta = 0, d.tb = 0;
            d.M = rows, d.N = C, d.K = V;
            d.a = go, d.b = wo, d.c = p->bufs[dxb].offset + r0 * C * dtype_size[dx->ty.dt];
            d.lda = V, d.ldb = C, d.ldc = C, d.bias = -1, d.scale = base + (sdx || sdw ? 24 : 8), d.zero_c = 1;
            add_gemm_step(r, &d);
        }
        /* dw [V, C] = alpha g^T . x_c (+ dw: after the first chunk, and
         * from it on when dw is the gradient accumulator) */
        if (dwb >= 0) {
            TrnCudaGemm d = {0};
            d.dtype = (int)dt, d.cdtype = TRN_F32, d.ta = 1, d.tb = 0;
            d.M = V, d.N = C, d.K = rows;
            d.a = go, d.b = xo + r0 * C * es, d.c = p->bufs[dwb].offset;
            d.lda = V, d.ldb = C, d.ldc = C, d.bias = -1, d.scale = base + (r0 || k->acc_grads ? 16 : 8);
            d.zero_c = !(r0 || k->acc_grads);
            add_gemm_step(r, &d);
        }
    }
    /* the loss: the row losses in a fixed order */
    Params M = {0};
    int pm = param(e, &M, lb, true), mh = param_at(&M, sb, base, false);
    snprintf(call, sizeof call, "tk_ce_mean(p%d, p%d, %lldll)", pm, mh, (long long)N);
    tmpl_launch(e, r, "_mean", &M, call, 1024, 1, 1, 1024, 1);
}

/* ---- TrnOptSeg tables ---- */

#define OPT_E 4  /* elements a thread of a multi-tensor update */
#define NORM_E 8 /* elements a thread of a block of global_norm's sums (tk_sumsq_multi) */

/* Arena offset of value v's buffer, -1 when it has none. */
static long long opt_off(Emit *e, Value *v) {
    int b = opt_buf(e, v);
    return b < 0 ? -1 : (long long)e->p->bufs[b].offset;
}

/* Row j of kernel k's table (below), after its first block: writes the
 * row's size and its other fields into f, returns the size, and sets
 * *named to the value whose buffer (or own name) names the row. */
typedef int64_t SegRow(Emit *e, Kernel *k, int j, char *f, size_t nf, Value **named);

/* The table above a function that deals blocks out over tensors (a
 * multi-part kernel, lower.c merge_updates; global_norm's operands), a
 * TrnOptSeg row each (trainc_cuda.cuh), E elements a thread: its first
 * block, then what row() writes, the name in a comment.  Returns the
 * blocks of every row. */
static int64_t seg_table(Emit *e, Kernel *k, int nrows, int E, StrBuf *b, const char *cols, SegRow *row) {
    sb_printf(b, "static __device__ const TrnOptSeg @FN@_seg[%d] = {\n", nrows);
    sb_printf(b, "    /* first block, elements; %s */\n", cols);
    int64_t blk = 0;
    for (int j = 0; j < nrows; j++) {
        char f[256];
        Value *v = NULL;
        int64_t cnt = row(e, k, j, f, sizeof f, &v);
        sb_printf(b, "    {%lld, %s}, /* ", (long long)blk, f);
        const char *nm = e->p->bufs[vbuf(e, v)].name;
        if (!nm) nm = v->name;
        cg_comment_text(b, nm ? nm : "?");
        sb_puts(b, " */\n");
        blk += cdiv(cnt, NT * E);
    }
    sb_puts(b, "};\n");
    return blk;
}

/* A global_norm operand's row: its arena offset in the g column. */
static int64_t norm_row(Emit *e, Kernel *k, int j, char *f, size_t nf, Value **named) {
    Value *v = k->nodes[0]->in[j];
    int64_t cnt = shape_numel(&v->ty.shape);
    snprintf(f, nf, "%lld, -1, %lld, -1, -1, -1, 0, 0.0", (long long)cnt, opt_off(e, v));
    *named = v;
    return cnt;
}

static void emit_template(Emit *e, Kernel *k, CuKern *r) {
    Node *n = k->nodes[0];
    if (!dtypes_ok(e, k)) return;
    if (n->op == OP_linear_cross_entropy) {
        emit_linear_ce(e, k, r);
        return;
    }
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
        /* the indices sorted in the workspace (emb_sort_layout), then 8
         * rows a block (tk_embedding_bwd_*) */
        int64_t N = shape_numel(&n->in[1]->ty.shape), V = ir_int(n, "rows", 0), C = last, V4, N4;
        emb_sort_layout(n, &V4, &N4);
        char w[2][48];
        Params Z = {0}, S = {0}, M = {0};
        int pz = param_ws(e, &Z);
        snprintf(call, sizeof call, "tk_embedding_bwd_zero((int32_t *)p%d, (int32_t *)p%d + %lld, %lldll)", pz, pz, (long long)V4, (long long)V);
        tmpl_launch(e, r, "_zero", &Z, call, 256, cdiv(V, 256), 1, 256, 1);
        vp(e, &S, n->in[1], false, a[2]);
        int ps = param_ws(e, &S);
        snprintf(w[0], sizeof w[0], "(int32_t *)p%d + %lld", ps, (long long)(2 * V4));
        snprintf(w[1], sizeof w[1], "(int32_t *)p%d + %lld", ps, (long long)(2 * V4 + N4));
        snprintf(call, sizeof call, "tk_embedding_bwd_sort<8>(%s, %s, %s, %lldll) /* %lld indices */", w[0], w[1], a[2], (long long)N, (long long)N);
        tmpl_launch(e, r, "_sort", &S, call, 256, cdiv(N, 32), 1, 256, 1);
        int pm = param_ws(e, &M);
        snprintf(call, sizeof call, "tk_embedding_bwd_mark((int32_t *)p%d, (int32_t *)p%d + %lld, (const int32_t *)p%d + %lld, %lldll, %lldll)", pm, pm,
                 (long long)V4, pm, (long long)(2 * V4 + N4), (long long)N, (long long)V);
        tmpl_launch(e, r, "_mark", &M, call, 256, cdiv(N, 256), 1, 256, 1);
        /* a column a thread, 256 a block at most, 32 tokens at a time */
        int64_t T = C < 256 ? (C + 31) / 32 * 32 : 256;
        vp(e, &P, n->out[0], true, a[0]);
        vp(e, &P, n->in[0], false, a[1]);
        int pr = param_ws(e, &P);
        snprintf(call, sizeof call,
                 "tk_embedding_bwd_rows<32, 8, %s>(%s, %s, (const int32_t *)p%d + %lld, (const int32_t *)p%d, (const int32_t *)p%d + %lld, %lldll, "
                 "%lldll) /* dtable [%lld,%lld]%s */",
                 k->acc_grads ? "true" : "false", a[0], a[1], pr, (long long)(2 * V4), pr, pr, (long long)V4, (long long)V, (long long)C, (long long)V,
                 (long long)C, k->acc_grads ? " += (in place)" : "");
        tmpl_launch(e, r, "_rows", &P, call, (int)T, cdiv(V, 8), cdiv(C, T), (unsigned)T, 1);
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
            tmpl_launch(e, r, "", &P, call, t, outer, 1, (unsigned)t, 1);
        } else {
            if (fwd) snprintf(call, sizeof call, "%s_cols(%s, %s, %lldll, %lldll, %lldll)", fn, a[0], a[1], (long long)outer, (long long)len, (long long)inner);
            else snprintf(call, sizeof call, "%s_cols(%s, %s, %s, %lldll, %lldll, %lldll)", fn, a[0], a[1], a[2], (long long)outer, (long long)len, (long long)inner);
            tmpl_launch(e, r, "", &P, call, NT, cdiv(outer * inner, NT), 1, NT, 1);
        }
        break;
    }
    case OP_layer_norm:
    case OP_rms_norm:
    case OP_add_layer_norm:
    case OP_add_rms_norm: {
        /* results y, [s], [mean], rstd; operands x, [r], w, [b] */
        bool ln = n->op == OP_layer_norm || n->op == OP_add_layer_norm, add = n->op == OP_add_layer_norm || n->op == OP_add_rms_norm;
        char eps[32];
        fmt_double(eps, ir_float(n, "eps", ln ? 1e-5 : 1e-6));
        int64_t N = shape_numel(s0) / last;
        int o = 1, i = 0;
        Value *y = cg_stored_result(k, n->out[0]); /* f32, or the half result of the cast it absorbed */
        vp(e, &P, y, true, a[0]);
        if (add) vp(e, &P, n->out[o++], true, a[1]);
        if (ln) vp(e, &P, n->out[o++], true, a[2]);
        vp(e, &P, n->out[o++], true, a[3]);
        Value *x = cg_norm_operand(e->s, n->in[i++]), *rr = add ? cg_norm_operand(e->s, n->in[i++]) : NULL; /* f32, or half (absorbed casts) */
        vp(e, &P, x, false, a[4]);
        if (add) vp(e, &P, rr, false, a[5]);
        vp(e, &P, n->in[i++], false, a[6]);
        if (ln) vp(e, &P, n->in[i++], false, a[7]);
        snprintf(call, sizeof call, "tk_norm_rows<%lld, %s, %s, %s, %s, %s>(%s, %s, %s, %s, %s, %s, %s, %s, %lldll, %s) /* y [%lld,%lld] */",
                 (long long)last, ln ? "true" : "false", add ? "true" : "false", st_type(y->ty.dt), st_type(x->ty.dt), st_type(add ? rr->ty.dt : DT_f32), a[0], add ? a[1] : "(float *)0", ln ? a[2] : "(float *)0", a[3], a[4],
                 add ? a[5] : "(const float *)0", a[6], ln ? a[7] : "(const float *)0", (long long)N, eps, (long long)N, (long long)last);
        /* two blocks a multiprocessor (at most 128 registers) up to rows of
         * 1024: left to itself, ptxas held the bf16 rows of 256 to 40
         * registers and spilled; one beyond, where a lane's copy of the row
         * takes more (TinyLlama's 2048: about 172) */
        tmpl_launch_minb(e, r, "", &P, call, NT, last <= 1024 ? 2 : 1, cdiv(N, NT / 32), 1, NT, 1);
        break;
    }
    case OP_layer_norm_grad:
    case OP_rms_norm_grad:
    case OP_add_layer_norm_grad:
    case OP_add_rms_norm_grad: {
        /* operands dy, [ds], x (s), w, [mean], rstd; results dx, dw, [db] */
        bool ln = n->op == OP_layer_norm_grad || n->op == OP_add_layer_norm_grad;
        bool add = n->op == OP_add_layer_norm_grad || n->op == OP_add_rms_norm_grad;
        int xi = add ? 2 : 1;
        Value *dy = cg_norm_operand(e->s, n->in[0]), *x = n->in[xi], *w = n->in[xi + 1], *mean = ln ? n->in[xi + 2] : NULL, *rstd = n->in[xi + 2 + ln];
        const Shape *xs = &x->ty.shape;
        int64_t C = xs->d[xs->rank - 1], N = shape_numel(xs) / C;
        /* dx (f32, and the half copy of an absorbed cast): rows */
        char dxa[16], dxh[16];
        vp_opt(e, &P, n->out[0], true, dxa);
        if (k->cast_out) vp(e, &P, k->cast_out->out[0], true, dxh);
        else strcpy(dxh, "(float *)0");
        vp(e, &P, dy, false, a[1]);
        if (add) vp(e, &P, n->in[1], false, a[2]);
        vp(e, &P, x, false, a[3]);
        vp(e, &P, w, false, a[4]);
        if (ln) vp(e, &P, mean, false, a[5]);
        vp(e, &P, rstd, false, a[6]);
        snprintf(call, sizeof call, "tk_norm_bwd_rows<%lld, %s, %s, %s, %s>(%s, %s, %s, %s, %s, %s, %s, %s, %lldll) /* dx [%lld,%lld] */",
                 (long long)C, ln ? "true" : "false", add ? "true" : "false", st_type(dy->ty.dt),
                 st_type(k->cast_out ? k->cast_out->out[0]->ty.dt : DT_f32), dxa, dxh, a[1], add ? a[2] : "(const float *)0", a[3], a[4],
                 ln ? a[5] : "(const float *)0", a[6], (long long)N, (long long)N, (long long)C);
        /* wide rows (C > 1024, no register copy) ask ptxas for 4 blocks a
         * multiprocessor (64 registers).  Rows in registers do not: asked
         * for 2 (128 registers), GPT-2's C = 768 in fp32 spilled 8 bytes on
         * sm_90; it takes 138 in bf16 */
        if (C > 1024) tmpl_launch_minb(e, r, "_dx", &P, call, NT, 4, cdiv(N, NT / 32), 1, NT, 1);
        else tmpl_launch(e, r, "_dx", &P, call, NT, cdiv(N, NT / 32), 1, NT, 1);
        /* dw (and db): columns */
        Params Q = {0};
        char b[6][16];
        vp(e, &Q, n->out[1], true, b[0]);
        if (ln) vp(e, &Q, n->out[2], true, b[1]);
        vp(e, &Q, dy, false, b[2]);
        vp(e, &Q, x, false, b[3]);
        if (ln) vp(e, &Q, mean, false, b[4]);
        vp(e, &Q, rstd, false, b[5]);
        /* few column blocks over many rows: G row groups, about 256 blocks
         * in all, at least 1024 rows a group (as loop kernels' column sums),
         * partials in the workspace, added in order by a second kernel; in
         * a split, W columns a thread with vector loads of dy and x when C
         * allows (then at least 256 rows a group, as the loop kernels').
         * Scalar: 512 threads; vectors: 256, two blocks a multiprocessor
         * (a W = 8 thread holds 16 double sums: 115 registers on sm_90;
         * asked for two blocks of 512, ptxas spilled 28 bytes) */
        int vw = dtype_is_half(dy->ty.dt) ? 8 : 4;
        if (C % vw) vw = 0;
        int64_t gx;
        int64_t G = col_split(e, C, N, C * 16, &vw, &gx);
        int ny = vw ? 8 : 16;
        char pw[24] = "(double *)0";
        if (G > 1) snprintf(pw, sizeof pw, "(double *)p%d", param_ws(e, &Q));
        snprintf(call, sizeof call, "tk_norm_bwd_cols<%d, %d, %s>(%s, %s, %s, %s, %s, %s, %lldll, %lldll, %d, %lldll, %s) /* dw [%lld]%s */",
                 ny, vw ? vw : 1, st_type(dy->ty.dt), b[0], ln ? b[1] : "(float *)0", b[2], b[3], ln ? b[4] : "(const float *)0", b[5], (long long)N, (long long)C,
                 k->acc_grads, (long long)(G > 1 ? (N + G - 1) / G : N), pw, (long long)C, k->acc_grads ? " += (accumulators)" : "");
        /* one block per multiprocessor asked for: with __launch_bounds__(512)
         * alone, ptxas gave the bf16-dy form 32 registers and a 4-byte spill
         * on sm_90 */
        tmpl_launch_minb(e, r, "_dw", &Q, call, 32 * ny, vw ? 2 : 1, gx, G, 32, (unsigned)ny);
        if (G > 1) {
            Params F = {0};
            char f[2][16];
            vp(e, &F, n->out[1], true, f[0]);
            if (ln) vp(e, &F, n->out[2], true, f[1]);
            int fw = param_ws(e, &F);
            snprintf(call, sizeof call, "tk_norm_bwd_final(%s, %s, (const double *)p%d, %lldll, %lldll, %d) /* dw [%lld] from %lld groups */", f[0],
                     ln ? f[1] : "(float *)0", fw, (long long)G, (long long)C, k->acc_grads, (long long)C, (long long)G);
            tmpl_launch(e, r, "_dwsum", &F, call, NT, cdiv(C, NT), 1, NT, 1);
        }
        break;
    }
    case OP_rope:
    case OP_rope_qk: {
        /* q (and k) in one launch; in place when lowering gave a result its operand's buffer */
        bool qk = n->op == OP_rope_qk, tab = qk && n->nin == 4;
        char th[32], c[2][16], yk[32], xk[32];
        fmt_double(th, ir_float(n, "theta", 10000.0));
        int64_t T = s0->d[s0->rank - 2], D = last, oq = shape_numel(s0) / (T * D), ok = qk ? shape_numel(&n->in[1]->ty.shape) / (T * D) : 0;
        const char *et = st_type(n->in[0]->ty.dt);
        char lay[4][64];
        int64_t hq = rvp(e, &P, n->out[0], true, qk, a[0], lay[0]);
        rvp(e, &P, n->in[0], false, qk, a[1], lay[1]);
        int64_t hk = 1;
        if (qk) {
            hk = rvp(e, &P, n->out[1], true, qk, yk, lay[2]);
            rvp(e, &P, n->in[1], false, qk, xk, lay[3]);
        } else {
            snprintf(yk, sizeof yk, "(%s *)0", et);
            snprintf(xk, sizeof xk, "(const %s *)0", et);
            strcpy(lay[2], "TRN_ATTL(0, 0, 0)");
            strcpy(lay[3], lay[2]);
        }
        if (tab) {
            vp(e, &P, n->in[2], false, c[0]);
            vp(e, &P, n->in[3], false, c[1]);
        }
        /* a block per position and rpb rows (about 8 pairs a thread) */
        int64_t rpb = 8 * NT / (D / 2 > 0 ? D / 2 : 1);
        if (rpb < 1) rpb = 1;
        while (cdiv(oq + ok, rpb) > 65535) rpb *= 2;
        snprintf(call, sizeof call,
                 "tk_rope(%s, %s, %s, %s, %lldll, %lldll, %s, %s, %s, %s, %lldll, %lldll, %lldll, %lldll, %s, %s, %s, %d, %lldll) /* q [%lld,%lld,%lld]%s */",
                 a[0], lay[0], a[1], lay[1], (long long)hq, (long long)oq, yk, lay[2], xk, lay[3], (long long)hk, (long long)ok, (long long)T,
                 (long long)D, tab ? c[0] : "(const float *)0", tab ? c[1] : "(const float *)0", th, (int)ir_int(n, "inverse", 0), (long long)rpb,
                 (long long)oq, (long long)T, (long long)D, qk ? ", k" : "");
        tmpl_launch(e, r, "", &P, call, NT, T, cdiv(oq + ok, rpb), NT, 1);
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
        r->flops = (double)ir_node_flops(e->s->g, n); /* for the profile: the graph's count (ir/stats.c) */
        /* half q, k, v with D a multiple of 16 up to 128: the tensor-core
         * kernels (tk_attention_tc*: 4 warps, mma.sync; an --arch below
         * sm_80 sets no_tc_attention); otherwise the CUDA-core ones,
         * 4 threads a row when D % 16 == 0, with launch bounds asking ptxas
         * for 2 blocks per multiprocessor up to D = 64 (at most 128
         * registers; D = 64 needs 100-128), 1 beyond.  64 rows a block
         * (the tensor-core forward and dq: 64 att_tc_rows). */
        DType adt = n->in[qi]->ty.dt;
        if (D > 6136) { /* TrnAtt<D>::BK: its tiles past 48 KB of shared memory */
            error_at(e->d, k->loc, "the CUDA backend's attention takes a head dimension of at most 6136, not %lld", (long long)D);
            e->ok = false;
            break;
        }
        bool tc = (adt == DT_bf16 || adt == DT_f16) && D % 16 == 0 && D <= 128 && !e->p->no_tc_attention;
        int bq = 64, threads = tc ? 128 : bq * (D % 16 == 0 ? 4 : 1), minb = tc ? 0 : D <= 64 ? 2 : 1;
        const char *fn = tc ? "tk_attention_tc" : "tk_attention";
        /* template arguments: tq of the forward and dq (the tensor-core
         * kernels' row tiles of 16 a warp, the others' rows a block), ta of
         * dkv (the tensor-core one has D alone) */
        int rw = tc ? att_tc_rows(e->p, D) : 1;
        char tq[48], ta[48];
        snprintf(tq, sizeof tq, "<%lld, %d>", (long long)D, tc ? rw : bq);
        if (tc) snprintf(ta, sizeof ta, "<%lld>", (long long)D);
        else snprintf(ta, sizeof ta, "%s", tq);
        char lay[8][64];
        if (n->op == OP_attention) {
            avp(e, &P, n->out[0], true, a[0], lay[0]);
            vp(e, &P, n->out[1], true, a[1]);
            for (int i = 0; i < 3; i++) avp(e, &P, n->in[i], false, a[2 + i], lay[1 + i]);
            snprintf(call, sizeof call,
                     "%s%s(%s, %s, %s, %s, %s, %s, %s, %s, %s, %lldll, %lldll, %lldll, %lldll, (float)(%s), %d) /* o [%lld,%lld,%lld,%lld] */", fn,
                     tq, a[0], lay[0], a[1], a[2], lay[1], a[3], lay[2], a[4], lay[3], (long long)H, (long long)Hkv, (long long)T,
                     (long long)S, sc, causal, (long long)B, (long long)H, (long long)T, (long long)D);
            att_launch(e, r, "", &P, call, threads, minb, cdiv(T, bq * rw), B * H);
        } else {
            /* dq first: it leaves Di = do . o per query row in the
             * workspace (B H T floats) for dkv, which would otherwise
             * recompute it for every key block */
            avp(e, &P, n->out[0], true, a[0], lay[0]);
            for (int i = 0; i < 5; i++) avp(e, &P, n->in[i], false, a[i + 1], lay[i + 1]);
            vp(e, &P, n->in[5], false, a[6]);
            char ws[24];
            snprintf(ws, sizeof ws, "(float *)p%d", param_ws(e, &P));
            snprintf(call, sizeof call,
                     "%s_bwd_dq%s(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %lldll, %lldll, %lldll, %lldll, (float)(%s), %d) "
                     "/* dq [%lld,%lld,%lld,%lld] */",
                     fn, tq, a[0], lay[0], a[1], lay[1], a[2], lay[2], a[3], lay[3], a[4], lay[4], a[5], lay[5], a[6], ws, (long long)H,
                     (long long)Hkv, (long long)T, (long long)S, sc, causal, (long long)B, (long long)H, (long long)T, (long long)D);
            att_launch(e, r, "_dq", &P, call, threads, minb, cdiv(T, bq * rw), B * H);
            Params Q = {0};
            char b[8][32], lb[6][64];
            avp(e, &Q, n->out[1], true, b[0], lb[0]);
            avp(e, &Q, n->out[2], true, b[1], lb[1]);
            for (int i = 0; i < 4; i++) avp(e, &Q, n->in[i], false, b[i + 2], lb[i + 2]); /* dout, q, k, v (not o: Di instead) */
            vp(e, &Q, n->in[5], false, b[7]);
            snprintf(b[6], sizeof b[6], "(const float *)p%d", param_ws(e, &Q));
            snprintf(call, sizeof call,
                     "%s_bwd_dkv%s(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %lldll, %lldll, %lldll, %lldll, (float)(%s), %d) "
                     "/* dk, dv [%lld,%lld,%lld,%lld] */",
                     fn, ta, b[0], lb[0], b[1], lb[1], b[2], lb[2], b[3], lb[3], b[4], lb[4], b[5], lb[5], b[6], b[7], (long long)H,
                     (long long)Hkv, (long long)T, (long long)S, sc, causal, (long long)B, (long long)Hkv, (long long)S, (long long)D);
            att_launch(e, r, "_dkv", &Q, call, threads, minb, cdiv(S, bq), B * Hkv);
        }
        break;
    }
    case OP_cross_entropy:
    case OP_cross_entropy_grad: {
        bool fwd = n->op == OP_cross_entropy;
        const Shape *ls = &n->in[fwd ? 0 : 1]->ty.shape;
        int64_t V = ls->d[ls->rank - 1], N = shape_numel(ls) / V, ig = ir_int(n, "ignore_index", -100), nc = ir_int(n, "classes", V);
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
            snprintf(call, sizeof call,
                     "tk_ce_rows<%d>(%s, (float *)%s, (float *)0, %s, %s, %s, %lldll, %lldll, %lldll, %lldll) /* logits [%lld,%lld] */",
                     k->ce_fused ? 1 : 0, b[0], b[1], b[2], k->ce_fused ? b[3] : "(const float *)0", w, (long long)N, (long long)V, (long long)nc,
                     (long long)ig, (long long)N, (long long)V);
            tmpl_launch(e, r, "_rows", &Q, call, t, N, 1, (unsigned)t, 1);
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
                     "tk_ce_rows<2>((float *)%s, (float *)%s, %s, %s, %s, %s, %lldll, %lldll, %lldll, %lldll) /* dlogits [%lld,%lld] */", b[1],
                     b[2], b[0], b[3], b[4], w, (long long)N, (long long)V, (long long)nc, (long long)ig, (long long)N, (long long)V);
            tmpl_launch(e, r, "_rows", &Q, call, t, N, 1, (unsigned)t, 1);
        }
        break;
    }
    case OP_global_norm: {
        /* partial sums of squares, one a block of at most 1024 (a table of
         * the operands as a multi-tensor update's, their blocks dealt out
         * in turn), then one block adds them */
        int pa = param_arena(e, &P), pw = param_ws(e, &P);
        StrBuf b = {0};
        int64_t nb = seg_table(e, k, n->nin, NORM_E, &b, "-, arena offset of the operand, -, -, -, -, -", norm_row);
        unsigned grid = nb > 1024 ? 1024 : nb < 1 ? 1 : (unsigned)nb;
        fn_head(e, &b, &P, NT);
        sb_printf(&b, "    tk_sumsq_multi<%d>(p%d, @FN@_seg, %d, %lldll, (double *)p%d);\n}\n", NORM_E, pa, n->nin, (long long)nb, pw);
        launch(e, r, "_part", &P, sb_take(&b), true, grid, 1, NT, 1);
        Params Q = {0};
        vp(e, &Q, n->out[0], true, a[0]);
        int qw = param_ws(e, &Q);
        snprintf(call, sizeof call, "tk_norm_final(%s, (const double *)p%d, %u)", a[0], qw, grid);
        tmpl_launch(e, r, "_final", &Q, call, 1024, 1, 1, 1024, 1);
        break;
    }
    case OP_adamw:
    case OP_sgd: {
        bool adam = n->op == OP_adamw;
        int64_t cnt = shape_numel(s0);
        /* outputs first: the same buffer as an operand when in place; SGD
         * without momentum has neither its buffer operand nor result
         * (lower.c sgd_no_buf): null pointers */
        vp(e, &P, n->out[0], true, a[0]);
        vp_opt(e, &P, n->out[1], true, a[1]);
        if (adam) vp(e, &P, n->out[2], true, a[2]);
        vp(e, &P, n->in[0], false, a[3]);
        vp(e, &P, n->in[1], k->zero_g, a[4]); /* written too when the update resets the accumulator (lower.c) */
        vp_opt(e, &P, n->in[2], false, a[5]);
        /* skip (fp16 loss scaling): the last operand, when there is one */
        char sk[24] = "(const float *)0";
        if (n->nin > (adam ? 7 : 5)) vp(e, &P, n->in[n->nin - 1], false, sk);
        /* what the update absorbed (lower.c): the cast that makes the new
         * weight's half copy, and the reset of the accumulator g (a[4]) */
        char h[16] = "(float *)0", hc[48];
        if (k->cast_out) vp(e, &P, k->cast_out->out[0], true, h);
        snprintf(hc, sizeof hc, "%s, %s", h, k->zero_g ? a[4] : "(float *)0");
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
            snprintf(call, sizeof call, "tk_adamw(%s, %s, %s, %s, %s, %s, %s, %lldll, %s, %s, %s, %s, %s, %s, %s, %s, %s) /* [%lld] */", a[0], a[1],
                     a[2], a[3], a[4], a[5], v, (long long)cnt, lr, st, gs, b1, b2, ep, wd, sk, hc, (long long)cnt);
        } else {
            char lr[16], gs[16], mo[32], wd[32];
            vp(e, &P, n->in[3], false, lr);
            vp(e, &P, n->in[4], false, gs);
            fmt_double(mo, ir_float(n, "momentum", 0));
            fmt_double(wd, ir_float(n, "wd", 0));
            snprintf(call, sizeof call, "tk_sgd(%s, %s, %s, %s, %s, %lldll, %s, %s, %s, %s, %d, %s, %s) /* [%lld] */", a[0], a[1], a[3], a[4], a[5],
                     (long long)cnt, lr, gs, mo, wd, (int)ir_int(n, "nesterov", 0), sk, hc, (long long)cnt);
        }
        /* in place: w, m, v alias their outputs, so no __restrict__ on them */
        StrBuf b = {0};
        sb_printf(&b, "extern \"C\" __global__ void __launch_bounds__(%d) @FN@", NT);
        signature(e, &P, &b, false);
        sb_printf(&b, "\n{\n    %s;\n}\n", call);
        launch(e, r, "", &P, sb_take(&b), true, cdiv(cnt, NT), 1, NT, 1);
        break;
    }
    case OP_loss_scale_update: {
        for (int i = 0; i < 4; i++) vp(e, &P, n->out[i], true, a[i]);
        for (int i = 0; i < 4; i++) vp(e, &P, n->in[i], false, a[4 + i]);
        snprintf(call, sizeof call, "tk_loss_scale_update(%s, %s, %s, %s, %s, %s, %s, %s, %lldll)", a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7],
                 (long long)ir_int(n, "window", 1000));
        tmpl_launch(e, r, "", &P, call, 32, 1, 1, 32, 1);
        break;
    }
    default:
        error_at(e->d, k->loc, "the CUDA backend has no kernel for %s", op_name(n->op));
        e->ok = false;
    }
}

/* ---- multi-tensor updates ---- */

/* An accumulating add's row: the sum's buffer, then its two operands'. */
static int64_t add_row(Emit *e, Kernel *k, int j, char *f, size_t nf, Value **named) {
    Node *n = k->parts[j]->nodes[0];
    int64_t cnt = shape_numel(&n->out[0]->ty.shape);
    snprintf(f, nf, "%lld, %lld, %lld, %lld, -1, -1, 0, 0.0", (long long)cnt, opt_off(e, n->out[0]), opt_off(e, n->in[0]), opt_off(e, n->in[1]));
    *named = n->out[0];
    return cnt;
}

/* An update's row: w, g, m, v (SGD: its buffer, -1), the half copy (-1:
 * none), whether g is zeroed, the weight decay. */
static int64_t update_row(Emit *e, Kernel *k, int j, char *f, size_t nf, Value **named) {
    Kernel *q = k->parts[j];
    Node *n = q->nodes[0];
    int64_t cnt = shape_numel(&n->in[0]->ty.shape);
    char wd[32];
    fmt_double(wd, ir_float(n, "wd", 0));
    snprintf(f, nf, "%lld, %lld, %lld, %lld, %lld, %lld, %d, %s", (long long)cnt, opt_off(e, n->in[0]), opt_off(e, n->in[1]), opt_off(e, n->in[2]),
             n->op == OP_adamw ? opt_off(e, n->in[3]) : -1LL, q->cast_out ? opt_off(e, q->cast_out->out[0]) : -1LL, (int)q->zero_g, wd);
    *named = n->in[0];
    return cnt;
}

/* A multi-part kernel (lower.c merge_updates): one launch over the blocks
 * of every part; a block finds its part in the table above the function
 * (seg_table).  Each element gets what the part's own kernel would do:
 * an update's (AdamW, SGD), or a run of accumulating adds' sum. */
static void emit_multi(Emit *e, Kernel *k, CuKern *r) {
    Node *n0 = k->nodes[0];
    bool add = n0->op == OP_add, adam = n0->op == OP_adamw;
    StrBuf b = {0};
    int64_t blk = add ? seg_table(e, k, k->nparts, OPT_E, &b, "arena offsets of the sum and its two operands", add_row)
                      : seg_table(e, k, k->nparts, OPT_E, &b,
                                  adam ? "arena offsets of w, g, m, v, half copy (-1: none); g zeroed; weight decay"
                                       : "arena offsets of w, g, buf, -, half copy (-1: none); g zeroed; weight decay",
                                  update_row);
    if (blk > 2147483647) {
        error_at(e->d, k->loc, "the CUDA backend's %s of %d tensors needs %lld blocks, more than a launch has", add ? "accumulating add" : "update",
                 k->nparts, (long long)blk);
        e->ok = false;
        free(sb_take(&b));
        return;
    }
    Params P = {0};
    int pa = param_arena(e, &P);
    sb_printf(&b, "extern \"C\" __global__ void __launch_bounds__(%d) @FN@", NT);
    signature(e, &P, &b, false);
    sb_puts(&b, "\n{\n");
    if (add) {
        sb_printf(&b, "    tk_add_multi<%d>(p%d, @FN@_seg, %d);\n", OPT_E, pa, k->nparts);
    } else {
        DType hdt = DT_f32;
        for (int j = 0; j < k->nparts; j++)
            if (k->parts[j]->cast_out) hdt = k->parts[j]->cast_out->out[0]->ty.dt;
        char sk[48] = "(const float *)0";
        int nsk = adam ? 7 : 5;
        if (n0->nin > nsk) snprintf(sk, sizeof sk, "(const float *)(p%d + %lldll)", pa, opt_off(e, n0->in[nsk]));
        if (adam) {
            char b1[32], b2[32], ep[32];
            fmt_double(b1, ir_float(n0, "beta1", 0.9));
            fmt_double(b2, ir_float(n0, "beta2", 0.999));
            fmt_double(ep, ir_float(n0, "eps", 1e-8));
            sb_printf(&b,
                      "    tk_adamw_multi<%s, %d>(p%d, @FN@_seg, %d, (const float *)(p%d + %lldll), (const int32_t *)(p%d + %lldll), "
                      "(const float *)(p%d + %lldll), %s, %s, %s, %s);\n",
                      st_type(hdt), OPT_E, pa, k->nparts, pa, opt_off(e, n0->in[4]), pa, opt_off(e, n0->in[5]), pa, opt_off(e, n0->in[6]), b1,
                      b2, ep, sk);
        } else {
            char mo[32];
            fmt_double(mo, ir_float(n0, "momentum", 0));
            sb_printf(&b, "    tk_sgd_multi<%s, %d>(p%d, @FN@_seg, %d, (const float *)(p%d + %lldll), (const float *)(p%d + %lldll), %s, %d, %s);\n",
                      st_type(hdt), OPT_E, pa, k->nparts, pa, opt_off(e, n0->in[3]), pa, opt_off(e, n0->in[4]), mo,
                      (int)ir_int(n0, "nesterov", 0), sk);
        }
    }
    sb_puts(&b, "}\n");
    launch(e, r, "", &P, sb_take(&b), true, blk, 1, NT, 1);
}

/* ===================================================================== */
/* the module                                                             */
/* ===================================================================== */

CudaModule *cg_cuda_emit(Program *p, Diag *d) {
    CudaModule *m = xcalloc(1, sizeof *m);
    m->p = p;
    StrBuf id = {0};
    sb_puts(&id, "trn_cuda_module_");
    cg_c_ident(&id, p->symbol ? p->symbol : p->name);
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
                DType dt = p->bufs[k->gemm.a.buf].dt;
                if (dt != DT_f32 && dt != DT_f64 && dt != DT_bf16 && dt != DT_f16) {
                    error_at(d, k->loc, "the CUDA backend has no matmul in %s", dtype_name[dt]);
                    e.ok = false;
                }
                r->kind = TRN_CK_GEMM;
                if (k->gemm.epi || k->gemm.bias.buf >= 0) emit_gemm_epilogue(&e, k, r);
                if (k->gemm.bgrad) emit_gemm_bgrad(&e, k, r);
                break;
            }
            case KK_TMPL:
                if (k->nparts) emit_multi(&e, k, r);
                else emit_template(&e, k, r);
                break;
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
    cg_comment_text(b, p->source);
    sb_puts(b, " -- do not edit.\n * Model ");
    cg_comment_text(b, p->name);
    sb_printf(b, ": %d CUDA functions for %d kernels; arena of %lld bytes, workspace at %lld (%lld bytes).\n */\n", m->nfn, m->nkr,
              (long long)p->arena_bytes, (long long)p->workspace_off, (long long)p->workspace_bytes);
    sb_puts(b, "#include \"trainc_cuda.cuh\"\n\n");
    sb_puts(b, "/* parameter initialisation (runtime/cuda.c): four elements a thread */\n"
               "extern \"C\" __global__ void __launch_bounds__(256) trn_init_f32(float *out, const unsigned long long *p)\n"
               "{\n    tk_init_f32(out, p);\n}\n\n");
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
    for (int i = 0; i < m->nkr; i++) {
        free(m->kr[i].l);
        free(m->kr[i].g);
        free(m->kr[i].step);
    }
    free(m->kr);
    sb_free(&m->src);
    free(m->sym);
    free(m);
}

void cg_cuda_sched_counts(const CudaModule *m, int sched, int *kernels, int *launches, int *products) {
    *kernels = *launches = *products = 0;
    for (int i = 0; i < m->nkr; i++) {
        const CuKern *r = &m->kr[i];
        if (r->sched != sched) continue;
        ++*kernels;
        switch (r->kind) {
        case TRN_CK_GEMM: ++*products; break; /* its launches run only where cuBLASLt has no epilogue for it */
        case TRN_CK_MEMSET: ++*launches; break;
        default: *launches += r->nl, *products += r->ng; break;
        }
    }
}

const char *cg_cuda_source(const CudaModule *m) { return m->src.s; }
int cg_cuda_nfns(const CudaModule *m) { return m->nfn; }
const char *cg_cuda_fn_name(const CudaModule *m, int i) { return m->fn[i].name; }
bool cg_cuda_fn_is_template(const CudaModule *m, int i) { return m->fn[i].tmpl; }
int cg_cuda_nkernels(const CudaModule *m) { return m->nkr; }
const char *cg_cuda_module_symbol(const CudaModule *m) { return m->sym; }

/* ---- the C descriptor ---- */

/* Targets: some outside [0, classes), where a row's loss and gradient
 * are 0 (a target the graph computes is not checked: docs/interpreter.md,
 * Runtime errors). */
static void target_range(int64_t classes, double *lo, double *hi) {
    *lo = -(double)(classes / 8) - 1;
    *hi = (double)(classes + classes / 8 + 1);
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
                if (a == 1) target_range(ir_int(n, "classes", n->in[0]->ty.shape.d[n->in[0]->ty.shape.rank - 1]), lo, hi);
                break;
            case OP_cross_entropy_grad:
                if (a == 2) target_range(ir_int(n, "classes", n->in[1]->ty.shape.d[n->in[1]->ty.shape.rank - 1]), lo, hi);
                if (a == 3) *lo = 2, *hi = 6; /* lse: above every logit */
                break;
            case OP_linear_cross_entropy:
                if (a == 2) target_range(ir_int(n, "classes", n->in[1]->ty.shape.d[0]), lo, hi);
                break;
            case OP_loss_scale_update:
                if (a == 0) *lo = 1, *hi = 65536;   /* scale */
                if (a == 1 || a == 2) *lo = 0, *hi = 8; /* counts (any float: both sides read the same) */
                if (a == 3) *lo = 0, *hi = 10;      /* a finite norm */
                break;
            case OP_adamw:
                if (a == 3) *lo = 0, *hi = 1;        /* v >= 0 */
                if (a == 5) *lo = 1, *hi = 100;      /* step >= 1 */
                if (a == 4) *lo = 0, *hi = 0.01;     /* lr */
                if (a == 7) *lo = 0, *hi = 0;        /* skip: 0, the step is taken */
                break;
            case OP_sgd:
                if (a == 3) *lo = 0, *hi = 0.01;
                if (a == 5) *lo = 0, *hi = 0;
                break;
            case OP_layer_norm_grad:
                if (a == 4) *lo = 0.5, *hi = 2;      /* rstd */
                break;
            case OP_rms_norm_grad:
                if (a == 3) *lo = 0.5, *hi = 2;
                break;
            case OP_add_layer_norm_grad:
                if (a == 5) *lo = 0.5, *hi = 2;
                break;
            case OP_add_rms_norm_grad:
                if (a == 4) *lo = 0.5, *hi = 2;
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

/* The table of the buffers kernel k reads or writes (its scratch is no
 * result: the GPU and the CPU lay it out differently); returns the count. */
static int emit_bufs(FILE *f, Program *p, const char *pre, const char *name, const int *ids, int n, Sched *s, Kernel *k, bool reads) {
    int cnt = 0;
    for (int i = 0; i < n; i++) cnt += ids[i] != k->scratch - 1;
    if (!cnt) return 0;
    fprintf(f, "static const TrnCudaBuf %s_%s[] = {", pre, name);
    for (int i = 0, j = 0; i < n; i++) {
        if (ids[i] == k->scratch - 1) continue;
        Buf *b = &p->bufs[ids[i]];
        double lo = 0, hi = 0;
        if (reads) read_range(p, s, k, ids[i], &lo, &hi);
        char l[32], h[32];
        fmt_double(l, lo);
        fmt_double(h, hi);
        fprintf(f, "%s{%lld, %lld, %d, %s, %s}", j++ ? ", " : "", (long long)b->offset, (long long)b->bytes, (int)b->dt, l, h);
    }
    fputs("};\n", f);
    return cnt;
}

/* Buffer b is a temporary of schedule s read for the last time at
 * position pos (as the C backend's schedule functions poison them). */
static bool dies_at(Program *p, Sched *s, int b, int pos) {
    Buf *bf = &p->bufs[b];
    return bf->kind == BK_TEMP && bf->sched == (int)s->which && bf->offset >= 0 && bf->last == pos && !bf->output;
}

/* The temporaries that die at kernel k: cd_<k>[], for --poison on the
 * GPU.  Returns how many. */
static int emit_dying(FILE *f, Program *p, Sched *s, Kernel *k) {
    int pos = 0, cnt = 0;
    while (pos < s->nk && s->k[pos] != k) pos++;
    for (int b = 0; b < p->nbufs; b++) cnt += dies_at(p, s, b, pos);
    if (!cnt) return 0;
    fprintf(f, "static const TrnCudaBuf cd_%s[] = {", k->name);
    for (int b = 0, j = 0; b < p->nbufs; b++)
        if (dies_at(p, s, b, pos))
            fprintf(f, "%s{%lld, %lld, %d, 0, 0}", j++ ? ", " : "", (long long)p->bufs[b].offset, (long long)p->bufs[b].bytes, (int)p->bufs[b].dt);
    fputs("};\n", f);
    return cnt;
}

/* ", {v0, v1}" for a product's batch array; {0} when it has none (ISO C
 * has no empty braces) */
static void emit_batch_array(FILE *f, const int64_t *v, int n) {
    fputs(", {", f);
    if (n == 0) fputs("0", f);
    for (int b = 0; b < n; b++) fprintf(f, "%s%lld", b ? ", " : "", (long long)v[b]);
    fputs("}", f);
}

static void emit_gemm_init(FILE *f, const TrnCudaGemm *g) {
    fprintf(f, "{%d, %d, %d, %d, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %d", g->dtype, g->cdtype, g->ta, g->tb,
            (long long)g->M, (long long)g->N, (long long)g->K, (long long)g->a, (long long)g->b, (long long)g->c, (long long)g->lda,
            (long long)g->ldb, (long long)g->ldc, (long long)g->bias, (long long)g->scale, g->nbatch);
    emit_batch_array(f, g->batch, g->nbatch);
    emit_batch_array(f, g->sa, g->nbatch);
    emit_batch_array(f, g->sb, g->nbatch);
    emit_batch_array(f, g->sc, g->nbatch);
    fprintf(f, ", %d, %d, %lld, %d, %lld, %d}", g->accumulate, g->epi, (long long)g->aux, g->bgrad, (long long)g->dbias, g->zero_c);
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
        fprintf(f, "/* %s: %zu bytes */\nstatic const _Alignas(64) unsigned char cuda_image_%d[] =\n", im->arch, im->size, i);
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
    /* per kernel: launches, products, steps, buffers */
    int *nr = xcalloc((size_t)m->nkr + 1, sizeof(int)), *nw = xcalloc((size_t)m->nkr + 1, sizeof(int)), *nd = xcalloc((size_t)m->nkr + 1, sizeof(int));
    for (int i = 0; i < m->nkr; i++) {
        CuKern *r = &m->kr[i];
        Kernel *k = r->k;
        Sched *s = &p->sched[r->sched];
        if (r->nl) {
            fprintf(f, "static const TrnCudaLaunch cl_%s[] = {\n", k->name);
            for (int j = 0; j < r->nl; j++) {
                CuLaunch *l = &r->l[j];
                fprintf(f, "    {%d, {%u, %u, %u}, {%u, %u, %u}, %u, %d, {", l->fn, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
                        l->block[2], l->smem, l->nargs);
                for (int a = 0; a < l->nargs; a++) fprintf(f, "%s%lld", a ? ", " : "", (long long)l->arg[a]);
                fprintf(f, "}}, /* %s */\n", m->fn[l->fn].name);
            }
            fputs("};\n", f);
        }
        if (r->kind == TRN_CK_GEMM) {
            TrnCudaGemm g;
            Emit e = {(CudaModule *)m, p, s, d, true};
            gemm_desc(&e, k, &g);
            fprintf(f, "static const TrnCudaGemm cg_%s[] = {", k->name);
            emit_gemm_init(f, &g);
            fputs("};\n", f);
        } else if (r->kind == TRN_CK_STEPS) {
            fprintf(f, "static const TrnCudaGemm cg_%s[] = {\n", k->name);
            for (int j = 0; j < r->ng; j++) {
                fputs("    ", f);
                emit_gemm_init(f, &r->g[j]);
                fputs(",\n", f);
            }
            fprintf(f, "};\nstatic const TrnCudaStep cs_%s[] = {", k->name);
            for (int j = 0; j < r->nstep; j++) fprintf(f, "%s{%d, %d}", j ? ", " : "", r->step[j].gemm, r->step[j].index);
            fputs("};\n", f);
        }
        nr[i] = emit_bufs(f, p, "cr", k->name, k->reads, k->nreads, s, k, true);
        nw[i] = emit_bufs(f, p, "cw", k->name, k->writes, k->nwrites, s, k, false);
        nd[i] = emit_dying(f, p, s, k);
    }
    static const char *const sname[TRN_RUN__COUNT] = {"micro", "update", "eval", "sample", "refresh"};
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
            cg_c_string(f, k->name);
            fputs(", ", f);
            cg_c_string(f, where);
            static const char *const kinds[] = {"TRN_CK_LAUNCH", "TRN_CK_GEMM", "TRN_CK_MEMSET", "TRN_CK_STEPS"};
            int ng = r->kind == TRN_CK_GEMM ? 1 : r->ng;
            fprintf(f, ", %s, %d, %s%s, %d, %s%s, %d, %s%s, %lld, %lld, %s, %d, %d, %s%s, %s%s, %d, %s%s, %.17g},\n", kinds[r->kind], r->nl,
                    r->nl ? "cl_" : "NULL", r->nl ? k->name : "", ng, ng ? "cg_" : "NULL", ng ? k->name : "", r->nstep, r->nstep ? "cs_" : "NULL",
                    r->nstep ? k->name : "", (long long)r->ms_off, (long long)r->ms_bytes, k->name, nr[i], nw[i], nr[i] ? "cr_" : "NULL",
                    nr[i] ? k->name : "", nw[i] ? "cw_" : "NULL", nw[i] ? k->name : "", nd[i], nd[i] ? "cd_" : "NULL", nd[i] ? k->name : "",
                    r->flops);
        }
        fputs("};\n", f);
    }
    free(nr);
    free(nw);
    free(nd);
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
