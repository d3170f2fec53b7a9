/* codegen/emit_c.c — the C backend: kernels as C11 with OpenMP over the
 * outer loops and plain inner loops the C compiler can vectorise, template
 * kernels from runtime/trainc_kernels.h, GEMMs through the BLAS, and the
 * TrnModel descriptor the runtime reads.
 *
 * Every kernel is a function named after its ops and .model line, preceded
 * by a comment giving each buffer's shape, dtype and arena offset.  Output
 * depends only on the program: same model, same bytes.
 */
#include "loops.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A kernel's code after its name (the signature's parameters and the
 * body, its buffers' variables renamed in order: canon_code), and the
 * name: a later kernel with the same code is emitted as its header and a
 * #define of its name to this one's (emit_kernel). */
typedef struct Emitted {
    char       *code;
    const char *name;
    uint64_t    hash;
} Emitted;

typedef struct Emit {
    FILE    *f;
    Program *p;
    Sched   *s;
    Diag    *d;
    bool     ok;
    Emitted *done;
    int      ndone, capdone;
} Emit;

/* ---- text helpers (loops.c has the ones emit_cuda.c shares) ---- */

/* Text safe inside a C comment. */
static void c_comment_text(FILE *f, const char *s) {
    StrBuf b = {0};
    cg_comment_text(&b, s);
    if (b.s) fputs(b.s, f);
    sb_free(&b);
}

/* The dtype argument of the runtime's kernels (tk_ld/tk_st), by its
 * TrnDType name (trainc_rt.h: TRN_F32 0, TRN_F64 1, TRN_BF16 2, TRN_F16 3). */
static const char *dt_code(DType dt) { return dt == DT_f32 ? "TRN_F32" : dt == DT_f64 ? "TRN_F64" : dt == DT_bf16 ? "TRN_BF16" : "TRN_F16"; }

static const char *storage_type(DType dt) {
    switch (dt) {
    case DT_f32: return "float";
    case DT_f64: return "double";
    case DT_bf16:
    case DT_f16: return "uint16_t";
    case DT_i32: return "int32_t";
    case DT_i64: return "int64_t";
    case DT_u8: return "uint8_t";
    default: unreachable();
    }
}

/* An integer dtype's range, as trn_f2i's last two arguments. */
static const char *int_range(DType dt) {
    switch (dt) {
    case DT_u8: return "0, 255";
    case DT_i32: return "INT32_MIN, INT32_MAX";
    case DT_i64: return "INT64_MIN, INT64_MAX";
    default: unreachable();
    }
}

/* A double as a C literal: fmt_double's digits, and INFINITY and NAN for
 * what it writes as inf and nan (a folded log(0), a clip at inf). */
static void c_double(char buf[32], double v) {
    if (isnan(v)) snprintf(buf, 32, "NAN");
    else if (isinf(v)) snprintf(buf, 32, "%s", v < 0 ? "(-INFINITY)" : "INFINITY");
    else fmt_double(buf, v);
}

static const char *compute_type(DType dt) { return dtype_is_float[dt] ? "double" : "int64_t"; }

/* Rounds a compute-type expression to dt's precision (per-op rounding). */
static const char *round_fn(DType dt) {
    switch (dt) {
    case DT_f32: return "trn_r_f32";
    case DT_bf16: return "trn_r_bf16";
    case DT_f16: return "trn_r_f16";
    default: return "";
    }
}

static void load_expr(StrBuf *b, DType dt, const char *ptr, const char *idx) {
    switch (dt) {
    case DT_f32:
    case DT_f64: sb_printf(b, "(double)%s[%s]", ptr, idx); break;
    case DT_bf16: sb_printf(b, "(double)trn_bf16_to_f32(%s[%s])", ptr, idx); break;
    case DT_f16: sb_printf(b, "(double)trn_f16_to_f32(%s[%s])", ptr, idx); break;
    default: sb_printf(b, "(int64_t)%s[%s]", ptr, idx); break;
    }
}

static void store_stmt(FILE *f, DType dt, const char *ptr, const char *idx, const char *val) {
    switch (dt) {
    case DT_f32: fprintf(f, "%s[%s] = (float)%s;\n", ptr, idx, val); break;
    case DT_f64: fprintf(f, "%s[%s] = %s;\n", ptr, idx, val); break;
    case DT_bf16: fprintf(f, "%s[%s] = trn_f32_to_bf16((float)%s);\n", ptr, idx, val); break;
    case DT_f16: fprintf(f, "%s[%s] = trn_f32_to_f16((float)%s);\n", ptr, idx, val); break;
    default: fprintf(f, "%s[%s] = (%s)%s;\n", ptr, idx, storage_type(dt), val); break;
    }
}

static void indent(FILE *f, int n) {
    for (int i = 0; i < n; i++) fputs("    ", f);
}

static void describe_buf(FILE *f, Program *p, int id, const char *role) {
    StrBuf b = {0};
    cg_describe_buf(&b, p, id, role);
    fputs(b.s, f);
    sb_free(&b);
}

static void kernel_header(Emit *e, Kernel *k) {
    FILE *f = e->f;
    fprintf(f, "/* %s: %s", k->name, cg_kind_name(k->kind));
    StrBuf ops = {0};
    cg_kernel_ops(&ops, k);
    fprintf(f, " [%s]", ops.s);
    sb_free(&ops);
    if (k->loc.file) {
        fputs("  from ", f);
        c_comment_text(f, k->loc.file);
        fprintf(f, ":%d", k->loc.line);
    }
    fputc('\n', f);
    for (int i = 0; i < k->nreads; i++) describe_buf(f, e->p, k->reads[i], "read");
    for (int i = 0; i < k->nwrites; i++) describe_buf(f, e->p, k->writes[i], "write");
    fputs(" */\n", f);
    fprintf(f, "TRN_KERNEL void %s(unsigned char *A)\n{\n", k->name);
}

/* A pointer variable to a buffer's data. */
static void buf_ptr(Emit *e, int id, const char *var, bool writable) {
    Buf *b = &e->p->bufs[id];
    fprintf(e->f, "    %s%s *%s = (%s%s *)(A + %lld);\n", writable ? "" : "const ", storage_type(b->dt), var,
            writable ? "" : "const ", storage_type(b->dt), (long long)b->offset);
}

/* ===================================================================== */
/* loop kernels (the access analysis is loops.c's)                       */
/* ===================================================================== */

/* The C spelling of a loop kernel: the analysis and where it writes. */
typedef struct Loop {
    LoopNest *N;
    Emit     *e;
} Loop;

static void idx_expr(Loop *L, int a, char *buf, size_t n) { cg_loop_idx(L->N, a, "", buf, n); }
static void vname(char *buf, size_t n, Value *v) { snprintf(buf, n, "v%d", v->id); }

/* The expression of one pointwise node (operands already named). */
static void node_expr(StrBuf *b, Node *m, char ops[][48], DType dt) {
    bool fl = dtype_is_float[dt], f64 = dt == DT_f64;
    const char *a = ops[0], *c = m->nin > 1 ? ops[1] : "", *y = m->nin > 2 ? ops[2] : "";
    switch (m->op) {
    /* transcendental functions of values stored in f32 or narrower are
     * evaluated in float (see trainc_kernels.h); f64 values in double */
    case OP_neg: sb_printf(b, fl ? "-(%s)" : "trn_ineg(%s)", a); break;
    case OP_exp: sb_printf(b, f64 ? "exp(%s)" : "trn_expf((float)%s)", a); break;
    case OP_log: sb_printf(b, f64 ? "log(%s)" : "logf((float)%s)", a); break;
    case OP_sqrt: sb_printf(b, "sqrt(%s)", a); break;
    case OP_rsqrt: sb_printf(b, "1.0 / sqrt(%s)", a); break;
    case OP_tanh: sb_printf(b, f64 ? "tanh(%s)" : "tanhf((float)%s)", a); break;
    case OP_sigmoid: sb_printf(b, f64 ? "trn_sigmoid(%s)" : "trn_sigmoidf((float)%s)", a); break;
    case OP_relu: sb_printf(b, "(%s > 0 ? %s : 0)", a, a); break;
    case OP_gelu: sb_printf(b, f64 ? "trn_gelu(%s, %d)" : "trn_geluf((float)%s, %d)", a, (int)ir_int(m, "approx", 0)); break;
    case OP_silu: sb_printf(b, f64 ? "trn_silu(%s)" : "trn_siluf((float)%s)", a); break;
    case OP_abs: sb_printf(b, fl ? "fabs(%s)" : "trn_iabs(%s)", a); break;
    case OP_sign: sb_printf(b, fl ? "trn_sign(%s)" : "(%s > 0 ? 1 : %s < 0 ? -1 : 0)", a, a); break;
    case OP_cast:
        if (fl) sb_printf(b, "(double)(%s)", a);
        else if (dtype_is_float[m->in[0]->ty.dt]) sb_printf(b, "trn_f2i(%s, %s)", a, int_range(dt)); /* saturated */
        else sb_printf(b, "(int64_t)(%s)", a);
        break;
    case OP_add: sb_printf(b, fl ? "%s + %s" : "trn_iadd(%s, %s)", a, c); break;
    case OP_sub: sb_printf(b, fl ? "%s - %s" : "trn_isub(%s, %s)", a, c); break;
    case OP_mul: sb_printf(b, fl ? "%s * %s" : "trn_imul(%s, %s)", a, c); break;
    case OP_div: sb_printf(b, fl ? "%s / %s" : "trn_idiv(%s, %s)", a, c); break;
    case OP_maximum: sb_printf(b, fl ? "trn_fmax(%s, %s)" : "(%s > %s ? %s : %s)", a, c, a, c); break;
    case OP_minimum: sb_printf(b, fl ? "trn_fmin(%s, %s)" : "(%s < %s ? %s : %s)", a, c, a, c); break;
    case OP_ge: sb_printf(b, "(%s >= %s ? 1 : 0)", a, c); break;
    case OP_tanh_grad: sb_printf(b, "%s * (1.0 - %s * %s)", a, c, c); break;
    case OP_sigmoid_grad: sb_printf(b, "%s * %s * (1.0 - %s)", a, c, c); break;
    case OP_relu_grad: sb_printf(b, "(%s > 0 ? %s : 0)", c, a); break;
    case OP_gelu_grad: sb_printf(b, f64 ? "trn_gelu_grad(%s, %s, %d)" : "trn_gelu_gradf((float)%s, (float)%s, %d)", a, c, (int)ir_int(m, "approx", 0)); break;
    case OP_silu_grad: sb_printf(b, f64 ? "trn_silu_grad(%s, %s)" : "trn_silu_gradf((float)%s, (float)%s)", a, c); break;
    case OP_swiglu: sb_printf(b, f64 ? "trn_silu(%s) * %s" : "trn_siluf((float)%s) * %s", a, c); break;
    case OP_geglu: sb_printf(b, f64 ? "trn_gelu(%s, %d) * %s" : "trn_geluf((float)%s, %d) * %s", a, (int)ir_int(m, "approx", 0), c); break;
    case OP_max_grad: sb_printf(b, "(%s == %s ? %s : 0)", c, y, a); break;
    case OP_clip_coef: {
        char mx[32];
        c_double(mx, ir_float(m, "max_norm", 1.0));
        sb_printf(b, "trn_clip_coef(%s / (%s + 1e-6))", mx, a);
        break;
    }
    default: die("node_expr: %s is not a loop op", op_name(m->op));
    }
}

/* Names operand j of node i: an expression defined in this kernel, a
 * literal, or a load emitted at this depth. */
static void loop_operand(Loop *L, int i, int j, int depth, char out[48]) {
    LoopNest *N = L->N;
    FILE *f = L->e->f;
    Node *m = N->k->nodes[i];
    Value *x = m->in[j];
    LoopOperand kind = cg_loop_operand(N, i, j);
    if (kind == LOOP_OP_VALUE) {
        vname(out, 48, x);
        return;
    }
    if (kind == LOOP_OP_CONST) {
        char lit[32];
        c_double(lit, ir_float(x->def, "value", 0));
        if (dtype_is_float[x->ty.dt] && x->ty.dt != DT_f64) snprintf(out, 48, "%s(%s)", round_fn(x->ty.dt), lit);
        else if (dtype_is_float[x->ty.dt]) snprintf(out, 48, "%s", lit);
        else snprintf(out, 48, "(int64_t)%s", lit);
        return;
    }
    int a = N->opacc[i][j];
    char idx[256];
    idx_expr(L, a, idx, sizeof idx);
    StrBuf lb = {0};
    if (kind == LOOP_OP_VIRTUAL) {
        /* iota: the coordinate along its axis */
        int64_t inner, size;
        cg_loop_iota(x->def, &inner, &size);
        sb_printf(&lb, "%s((%s) / %lld %% %lld)", dtype_is_float[x->ty.dt] ? "(double)" : "", idx, (long long)inner, (long long)size);
    } else {
        char ptr[32];
        snprintf(ptr, sizeof ptr, "b%d", N->acc[a].buf);
        load_expr(&lb, x->ty.dt, ptr, idx);
    }
    indent(f, depth);
    fprintf(f, "const %s l%d_%d = %s;\n", compute_type(x->ty.dt), i, j, lb.s);
    sb_free(&lb);
    snprintf(out, 48, "l%d_%d", i, j);
}

static void emit_loop_store(Loop *L, int i, int depth) {
    LoopNest *N = L->N;
    if (N->resacc[i] < 0) return;
    Node *m = N->k->nodes[i];
    char idx[256], ptr[32], yn[32];
    idx_expr(L, N->resacc[i], idx, sizeof idx);
    snprintf(ptr, sizeof ptr, "b%d", N->acc[N->resacc[i]].buf);
    vname(yn, sizeof yn, m->out[0]);
    indent(L->e->f, depth);
    store_stmt(L->e->f, m->out[0]->ty.dt, ptr, idx, yn);
}

/* One pointwise node of a loop kernel: operands, its value, its store. */
static void emit_loop_node(Loop *L, int i, int depth) {
    LoopNest *N = L->N;
    FILE *f = L->e->f;
    Node *m = N->k->nodes[i];
    char ops[LOOP_MAXIN][48];
    for (int j = 0; j < m->nin && j < LOOP_MAXIN; j++) loop_operand(L, i, j, depth, ops[j]);
    Value *y = m->out[0];
    DType dt = y->ty.dt;
    char yn[32];
    vname(yn, sizeof yn, y);
    StrBuf xb = {0};
    if (m->op == OP_iota) {
        char idx[256];
        idx_expr(L, N->linacc[i], idx, sizeof idx);
        int64_t inner, size;
        cg_loop_iota(m, &inner, &size);
        sb_printf(&xb, "((%s) / %lld %% %lld)", idx, (long long)inner, (long long)size);
    } else if (m->op == OP_dropout) {
        char idx[256], pl[32], inv[32];
        idx_expr(L, N->linacc[i], idx, sizeof idx);
        double pr = ir_float(m, "p", 0);
        c_double(pl, pr);
        c_double(inv, 1.0 - pr);
        sb_printf(&xb, "(rng_keep((uint32_t)%s, %lluull, (uint64_t)(%s), (float)%s) ? %s / %s : 0.0)", ops[1],
                  (unsigned long long)ir_int(m, "stream", 0), idx, pl, ops[0], inv);
    } else {
        node_expr(&xb, m, ops, dt);
    }
    indent(f, depth);
    if (dtype_is_float[dt]) fprintf(f, "const double %s = %s(%s);  /* %s */\n", yn, round_fn(dt), xb.s, op_name(m->op));
    else fprintf(f, "const int64_t %s = (int64_t)(%s)(%s);  /* %s */\n", yn, storage_type(dt), xb.s, op_name(m->op));
    sb_free(&xb);
    emit_loop_store(L, i, depth);
}

static void emit_loop(Emit *e, Kernel *k) {
    Loop Lc = {cg_loop_analyse(e->s, k), e}, *L = &Lc;
    LoopNest *N = L->N;

    kernel_header(e, k);
    FILE *f = e->f;
    /* buffer pointers: one per distinct buffer */
    int bufs[LOOP_MAXACC], nb = 0;
    bool wrote[LOOP_MAXACC] = {0};
    for (int a = 0; a < N->nacc; a++) {
        if (N->acc[a].buf < 0) continue;
        int j = 0;
        while (j < nb && bufs[j] != N->acc[a].buf) j++;
        if (j == nb) bufs[nb++] = N->acc[a].buf;
        wrote[j] |= N->acc[a].store;
    }
    for (int j = 0; j < nb; j++) {
        char var[32];
        snprintf(var, sizeof var, "b%d", bufs[j]);
        buf_ptr(e, bufs[j], var, wrote[j]);
    }
    /* scalars read once (all-zero strides): dropout seeds, learning rates */
    int64_t total = shape_numel(&k->space);
    int kept = 0;
    for (int i = 0; i < N->nl; i++) kept += !N->lred[i];
    int depth = 1;
    const char *accty = NULL, *accinit = NULL;
    if (k->red) {
        bool fl = dtype_is_float[k->red->out[0]->ty.dt];
        accty = fl ? "double" : "int64_t";
        accinit = k->red->op == OP_max ? (fl ? "-INFINITY" : "INT64_MIN") : "0";
    }
    /* A column reduction (rows reduced, one run of contiguous columns kept:
     * bias gradients) runs rows outside and columns inside, a block of
     * accumulators per thread, so memory is walked in order; the sum over
     * each column still goes row by row, the order of the plain form. */
    bool colred = k->red && kept == 1 && N->nl >= 2 && !N->lred[0];
    bool unit = false;
    for (int a = 0; colred && a < N->nacc; a++) {
        if (N->acc[a].post) continue;
        colred = N->lst[a][0] == 0 || N->lst[a][0] == 1;
        unit |= N->lst[a][0] == 1;
    }
    colred = colred && unit;
    const char *racc = "acc";
    if (colred) {
        if (total >= 32768) fprintf(f, "    #pragma omp parallel for schedule(static)\n");
        fprintf(f, "    for (int64_t cb = 0; cb < %lld; cb += 64) {\n", (long long)N->lsize[0]);
        fprintf(f, "        const int64_t ce = cb + 64 < %lld ? cb + 64 : %lld;\n", (long long)N->lsize[0], (long long)N->lsize[0]);
        fprintf(f, "        %s accv[64];\n        for (int64_t c = 0; c < ce - cb; c++) accv[c] = %s;\n", accty, accinit);
        depth = 2;
        for (int i = 1; i < N->nl; i++) {
            indent(f, depth++);
            fprintf(f, "for (int64_t i%d = 0; i%d < %lld; i%d++) {\n", i, i, (long long)N->lsize[i], i);
        }
        indent(f, depth++);
        fputs("for (int64_t i0 = cb; i0 < ce; i0++) {\n", f);
        racc = "accv[i0 - cb]";
    } else {
        /* outer (kept) loops */
        bool par = total >= 32768 && kept > 0;
        if (par) {
            int c = kept;
            if (!k->red && kept > 1) c = kept - 1; /* leave the innermost loop to the vectoriser */
            if (c > 1) fprintf(f, "    #pragma omp parallel for collapse(%d) schedule(static)\n", c);
            else fprintf(f, "    #pragma omp parallel for schedule(static)\n");
        }
        for (int i = 0; i < N->nl; i++) {
            if (N->lred[i]) continue;
            indent(f, depth);
            fprintf(f, "for (int64_t i%d = 0; i%d < %lld; i%d++) {\n", i, i, (long long)N->lsize[i], i);
            depth++;
        }
        if (k->red) {
            indent(f, depth);
            fprintf(f, "%s acc = %s;\n", accty, accinit);
            for (int i = 0; i < N->nl; i++) {
                if (!N->lred[i]) continue;
                indent(f, depth);
                fprintf(f, "for (int64_t i%d = 0; i%d < %lld; i%d++) {\n", i, i, (long long)N->lsize[i], i);
                depth++;
            }
        }
    }
    /* body: prologue nodes inside every loop, the reduction's accumulation,
     * then (after the reduction loops close) the reduced value and the
     * epilogue nodes */
    int i = 0;
    for (; i < k->nnodes && k->nodes[i] != k->red; i++) emit_loop_node(L, i, depth);
    if (k->red) {
        Node *m = k->red;
        char in0[48];
        loop_operand(L, i, 0, depth, in0);
        indent(f, depth);
        if (m->op == OP_max && dtype_is_float[m->out[0]->ty.dt]) fprintf(f, "if (%s > %s || %s != %s) %s = %s;\n", in0, racc, in0, in0, racc, in0); /* a NaN stays */
        else if (m->op == OP_max) fprintf(f, "if (%s > %s) %s = %s;\n", in0, racc, racc, in0);
        else if (!dtype_is_float[m->out[0]->ty.dt]) fprintf(f, "%s = trn_iadd(%s, %s);\n", racc, racc, in0); /* wraps, as an add does */
        else fprintf(f, "%s += %s;\n", racc, in0);
        if (colred) {
            /* close the column loop and the row loops; reopen the columns */
            for (int q = 0; q < N->nl; q++) {
                depth--;
                indent(f, depth);
                fputs("}\n", f);
            }
            indent(f, depth++);
            fputs("for (int64_t i0 = cb; i0 < ce; i0++) {\n", f);
            indent(f, depth);
            fprintf(f, "const %s acc = accv[i0 - cb];\n", accty);
            racc = "acc";
        } else {
            for (int q = 0; q < N->nl; q++)
                if (N->lred[q]) {
                    depth--;
                    indent(f, depth);
                    fputs("}\n", f);
                }
        }
        DType rdt = m->out[0]->ty.dt;
        char rn[32];
        vname(rn, sizeof rn, m->out[0]);
        int64_t cnt = cg_loop_red_count(k);
        indent(f, depth);
        if (m->op == OP_mean) fprintf(f, "const double %s = %s(%s / %lld.0);\n", rn, round_fn(rdt), racc, (long long)cnt);
        else if (dtype_is_float[rdt]) fprintf(f, "const double %s = %s(%s);\n", rn, round_fn(rdt), racc);
        else fprintf(f, "const int64_t %s = (int64_t)(%s)(%s);\n", rn, storage_type(rdt), racc); /* wraps, as a store does */
        emit_loop_store(L, i, depth);
        for (i++; i < k->nnodes; i++) emit_loop_node(L, i, depth);
    }
    while (depth > 1) {
        depth--;
        indent(f, depth);
        fputs("}\n", f);
    }
    fputs("}\n\n", f);
    cg_loop_free(N);
}

/* ===================================================================== */
/* copies, fills, GEMMs, templates                                       */
/* ===================================================================== */

static void emit_copy(Emit *e, Kernel *k) {
    FILE *f = e->f;
    kernel_header(e, k);
    const Buf *sb = &e->p->bufs[k->src.buf], *db = &e->p->bufs[k->dst.buf];
    if (sb->dt != db->dt) die("copy between dtypes");
    buf_ptr(e, k->src.buf, "src", false);
    buf_ptr(e, k->dst.buf, "dst", true);
    int r = k->dst.rank;
    int64_t total = 1;
    for (int i = 0; i < r; i++) total *= k->dst.shape[i];
    if (total >= 32768 && r > 1) fprintf(f, "    #pragma omp parallel for schedule(static)\n");
    int depth = 1;
    for (int i = 0; i < r; i++) {
        indent(f, depth++);
        fprintf(f, "for (int64_t i%d = 0; i%d < %lld; i%d++) {\n", i, i, (long long)k->dst.shape[i], i);
    }
    indent(f, depth);
    fprintf(f, "dst[%lld", (long long)k->dst.off);
    for (int i = 0; i < r; i++)
        if (k->dst.stride[i]) fprintf(f, " + i%d * %lld", i, (long long)k->dst.stride[i]);
    fprintf(f, "] = src[%lld", (long long)k->src.off);
    for (int i = 0; i < r; i++)
        if (k->src.stride[i]) fprintf(f, " + i%d * %lld", i, (long long)k->src.stride[i]);
    fputs("];\n", f);
    while (depth > 1) {
        indent(f, --depth);
        fputs("}\n", f);
    }
    fputs("}\n\n", f);
}

static void emit_fill(Emit *e, Kernel *k) {
    FILE *f = e->f;
    kernel_header(e, k);
    const Buf *b = &e->p->bufs[k->dst.buf];
    int64_t n = shape_numel(&b->shape);
    if (k->fill == 0.0 && !signbit(k->fill) && view_is_contig(&k->dst)) { /* -0.0 is not all-zero bytes */
        fprintf(f, "    memset(A + %lld, 0, %lld);\n}\n\n", (long long)b->offset, (long long)b->bytes);
        return;
    }
    buf_ptr(e, k->dst.buf, "dst", true);
    char lit[32];
    c_double(lit, k->fill);
    fprintf(f, "    for (int64_t i = 0; i < %lld; i++) ", (long long)n);
    store_stmt(f, b->dt, "dst", "i", lit);
    fputs("}\n\n", f);
}

static void emit_gemm(Emit *e, Kernel *k) {
    FILE *f = e->f;
    GemmInfo *gi = &k->gemm;
    DType dt = e->p->bufs[gi->a.buf].dt, cdt = e->p->bufs[gi->c.buf].dt; /* cdt: dt, or f32 for half operands ({dtype=f32}) */
    if (dt != DT_f32 && dt != DT_f64 && dt != DT_bf16 && dt != DT_f16) {
        error_at(e->d, k->loc, "the C backend does not support matmul in %s", dtype_name[dt]);
        e->ok = false;
        return;
    }
    /* bf16/f16: emulated (tk_gemm_dt: double accumulation, one rounding to
     * the result's dtype), the bias added after with its own rounding, as
     * the interpreter does */
    bool half = dt == DT_bf16 || dt == DT_f16;
    const char *T = storage_type(dt), *fn = dt == DT_f32 ? "tk_gemm_f32" : dt == DT_f64 ? "tk_gemm_f64" : "tk_gemm_dt";
    kernel_header(e, k);
    buf_ptr(e, gi->a.buf, "a", false);
    buf_ptr(e, gi->b.buf, "b", false);
    /* GELU with the pre-activation kept: the product goes to aux, and
     * gelu of it to c after */
    bool pre_aux = gi->epi == GEPI_GELU && gi->aux.buf >= 0;
    buf_ptr(e, gi->c.buf, pre_aux ? "out" : "c", true);
    if (pre_aux) buf_ptr(e, gi->aux.buf, "c", true);
    else if (gi->epi == GEPI_DGELU) buf_ptr(e, gi->aux.buf, "aux", false);
    View cv = pre_aux ? gi->aux : gi->c;
    int ta, tb;
    int64_t lda, ldb;
    cg_gemm_layout(&gi->a, &ta, &lda);
    cg_gemm_layout(&gi->b, &tb, &ldb);
    ta ^= gi->ta;
    tb ^= gi->tb;
    int64_t ldc = gi->N;
    fprintf(f, "    /* C[%lld,%lld] %s= %sA%s . %sB%s%s */\n", (long long)gi->M, (long long)gi->N, gi->accumulate ? "+" : "", ta ? "(" : "", ta ? ")^T" : "",
            tb ? "(" : "", tb ? ")^T" : "", gi->bias.buf >= 0 ? " + bias" : "");
    if (gi->epi == GEPI_GELU) fprintf(f, "    /* then %s = gelu(C) (tanh)%s */\n", pre_aux ? "out" : "C", pre_aux ? ", C the pre-activation kept" : "");
    if (gi->epi == GEPI_DGELU) fprintf(f, "    /* then C = gelu_grad(C, aux) (tanh) */\n");
    int64_t blen = 0;
    const View *bx = gi->bgrad ? cg_bgrad_operand(gi, &blen) : NULL;
    if (bx) {
        fprintf(f, "    /* and dbias[%lld] = the sums over k of %s (a bias gradient) */\n", (long long)blen, bx == &gi->a ? "(A)^T" : "B");
        buf_ptr(e, gi->dbias.buf, "dbias", true);
    }
    if (gi->bias.buf >= 0) {
        buf_ptr(e, gi->bias.buf, "bias", false);
        int64_t rows = shape_numel(&e->p->bufs[cv.buf].shape) / gi->N;
        if (half) {}
        else if (dt == DT_f32) fprintf(f, "    tk_bias_rows_f32(c, %lld, %lld, %lld, bias + %lld);\n", (long long)rows, (long long)gi->N, (long long)ldc, (long long)gi->bias.off);
        else fprintf(f, "    for (int64_t r = 0; r < %lld; r++) memcpy(c + r * %lld, bias + %lld, sizeof(double) * %lld);\n", (long long)rows, (long long)ldc, (long long)gi->bias.off, (long long)gi->N);
    }
    const char *beta = (gi->bias.buf >= 0 && !half) || gi->accumulate ? "1" : "0";
    int depth = 1;
    for (int i = 0; i < gi->nbatch; i++) {
        indent(f, depth++);
        fprintf(f, "for (int64_t n%d = 0; n%d < %lld; n%d++) {\n", i, i, (long long)gi->bshape[i], i);
    }
    StrBuf ao = {0}, bo = {0}, co = {0};
    sb_printf(&ao, "%lld", (long long)gi->a.off);
    sb_printf(&bo, "%lld", (long long)gi->b.off);
    sb_printf(&co, "%lld", (long long)cv.off);
    for (int i = 0; i < gi->nbatch; i++) {
        if (gi->bsa[i]) sb_printf(&ao, " + n%d * %lld", i, (long long)gi->bsa[i]);
        if (gi->bsb[i]) sb_printf(&bo, " + n%d * %lld", i, (long long)gi->bsb[i]);
        if (gi->bsc[i]) sb_printf(&co, " + n%d * %lld", i, (long long)gi->bsc[i]);
    }
    indent(f, depth);
    if (half)
        fprintf(f, "%s(%s, %s, %d, %d, %lld, %lld, %lld, a + %s, %lld, b + %s, %lld, %s, c + %s, %lld);\n", fn, dt_code(dt), dt_code(cdt == DT_f32 ? DT_f32 : dt), ta, tb,
                (long long)gi->M, (long long)gi->N, (long long)gi->K, ao.s, (long long)lda, bo.s, (long long)ldb, beta, co.s, (long long)ldc);
    else
        fprintf(f, "%s(%d, %d, %lld, %lld, %lld, a + %s, %lld, b + %s, %lld, (%s)%s, c + %s, %lld);\n", fn, ta, tb, (long long)gi->M,
                (long long)gi->N, (long long)gi->K, ao.s, (long long)lda, bo.s, (long long)ldb, T, beta, co.s, (long long)ldc);
    sb_free(&ao);
    sb_free(&bo);
    sb_free(&co);
    while (depth > 1) {
        indent(f, --depth);
        fputs("}\n", f);
    }
    if (half && gi->bias.buf >= 0)
        fprintf(f, "    tk_bias_add_dt(c, %lld, %lld, %lld, bias + %lld, %s);\n", (long long)(shape_numel(&e->p->bufs[cv.buf].shape) / gi->N),
                (long long)gi->N, (long long)ldc, (long long)gi->bias.off, dt_code(dt));
    const char *tkdt = dt_code(dt);
    long long nel = (long long)(gi->M * gi->N);
    if (gi->epi == GEPI_GELU)
        fprintf(f, "    tk_gelu_dt(%s + %lld, c + %lld, %lld, %s);\n", pre_aux ? "out" : "c", (long long)gi->c.off, (long long)cv.off, nel, tkdt);
    else if (gi->epi == GEPI_DGELU)
        fprintf(f, "    tk_dgelu_dt(c + %lld, aux + %lld, %lld, %s);\n", (long long)gi->c.off, (long long)gi->aux.off, nel, tkdt);
    if (bx) /* the operand's view is row-major [K, len] (lower.c) */
        fprintf(f, "    tk_colsum_dt(dbias + %lld, %s + %lld, %lld, %lld, %lld, %s);\n", (long long)gi->dbias.off, bx == &gi->a ? "a" : "b",
                (long long)bx->off, (long long)gi->K, (long long)blen, (long long)(bx == &gi->a ? lda : ldb), tkdt);
    fputs("}\n\n", f);
}

/* The buffer view of operand/result values of a template. */
static int vbuf(Emit *e, Value *v) { return cg_value_buf(e->s, v); }

static bool need_f32(Emit *e, Kernel *k, Value *v) {
    if (v->ty.dt == DT_f32) return true;
    /* a kernel of the optimizer's (global_norm) has no place in the source: the tensor's */
    error_at(e->d, k->loc.line ? k->loc : v->def->loc, "the C backend's %s kernel supports f32 tensors only, not %s", op_name(k->nodes[0]->op),
             dtype_name[v->ty.dt]);
    e->ok = false;
    return false;
}

static void ptr_decl(Emit *e, const char *var, Value *v, bool writable) {
    buf_ptr(e, vbuf(e, v), var, writable);
}

/* An attention operand: a pointer at its view's first element, and its
 * layout as TRN_ATTL(b, h, t) strides. */
static void att_decl(Emit *e, const char *var, Value *v, bool writable, char lay[64]) {
    int64_t l[3], off;
    cg_att_layout(e->s, v, l, &off);
    Buf *b = &e->p->bufs[vbuf(e, v)];
    const char *c = writable ? "" : "const ", *t = storage_type(b->dt);
    fprintf(e->f, "    %s%s *%s = (%s%s *)(A + %lld) + %lld;\n", c, t, var, c, t, (long long)b->offset, (long long)off);
    snprintf(lay, 64, "TRN_ATTL(%lld, %lld, %lld)", (long long)l[0], (long long)l[1], (long long)l[2]);
}

/* A rope_qk operand: [B,H,T,D] as a view (att_decl; returns H), or any
 * other rank contiguous, as [outer, 1, T, D] (returns 1). */
static int64_t rope_decl(Emit *e, const char *var, Value *v, bool writable, char lay[64]) {
    const Shape *s = &v->ty.shape;
    if (s->rank == 4) {
        att_decl(e, var, v, writable, lay);
        return s->d[1];
    }
    int64_t T = s->d[s->rank - 2], D = s->d[s->rank - 1];
    ptr_decl(e, var, v, writable);
    snprintf(lay, 64, "TRN_ATTL(%lld, 0, %lld)", (long long)(T * D), (long long)D);
    return 1;
}


/* A norm's operand that may be half (cg_norm_operand): declared as var;
 * returns its dtype code. */
static const char *norm_in_decl(Emit *e, const char *var, Value *v) {
    v = cg_norm_operand(e->s, v);
    ptr_decl(e, var, v, false);
    return dt_code(v->ty.dt);
}

/* A forward norm's result pointer y: its own f32 buffer, or the half one of
 * the cast it absorbed (lower.c); returns its dtype code. */
static const char *norm_y_decl(Emit *e, Kernel *k) {
    Value *y = cg_stored_result(k, k->nodes[0]->out[0]);
    ptr_decl(e, "y", y, true);
    return dt_code(y->ty.dt);
}


/* Templates written for any float dtype (the ones mixed precision feeds
 * bf16/f16 tensors); the others take f32 only. */
static bool any_float_template(Op op) {
    return op == OP_attention || op == OP_attention_grad || op == OP_rope || op == OP_rope_qk || op == OP_linear_cross_entropy;
}

/* The pointer to a template's result or operand, or NULL when lowering
 * gave it no buffer (a result nothing reads; SGD's buffer without
 * momentum, lower.c sgd_no_buf). */
static void opt_ptr_decl(Emit *e, const char *var, Value *v, bool writable) {
    ValInfo *vi = &e->s->vi[v->id];
    if (vi->st != VS_BUF && vi->st != VS_VIEW)
        fprintf(e->f, "    %s%s *%s = NULL; /* not needed */\n", writable ? "" : "const ", storage_type(v->ty.dt), var);
    else buf_ptr(e, vi->view.buf, var, writable);
}

/* A backward norm's dx: its f32 buffer (NULL when only the absorbed cast
 * read it) and the half copy that cast writes (NULL without one). */
static void norm_dx_decl(Emit *e, Kernel *k) {
    opt_ptr_decl(e, "dx", k->nodes[0]->out[0], true);
    if (k->cast_out) ptr_decl(e, "dxh", k->cast_out->out[0], true);
    else fputs("    void *dxh = NULL;\n", e->f);
}
static const char *norm_dxh_dt(Kernel *k) { return k->cast_out ? dt_code(k->cast_out->out[0]->ty.dt) : "TRN_F32"; }

static void emit_template(Emit *e, Kernel *k) {
    FILE *f = e->f;
    Node *n = k->nodes[0];
    for (int i = 0; i < n->nin; i++) {
        DType dt = n->in[i]->ty.dt;
        if (!dtype_is_float[dt] || (any_float_template(n->op) && dt != DT_f64)) continue;
        if (!need_f32(e, k, n->in[i])) return;
    }
    kernel_header(e, k);
    const Shape *s0 = &n->in[0]->ty.shape;
    int64_t last = s0->rank ? s0->d[s0->rank - 1] : 1;
    switch (n->op) {
    case OP_embedding: {
        ptr_decl(e, "table", n->in[0], false);
        ptr_decl(e, "idx", n->in[1], false);
        ptr_decl(e, "out", n->out[0], true);
        fprintf(f, "    tk_embedding_f32(out, table, idx, %lld, %lld, %lld); /* out [%lld,%lld] */\n",
                (long long)shape_numel(&n->in[1]->ty.shape), (long long)s0->d[1], (long long)s0->d[0],
                (long long)shape_numel(&n->in[1]->ty.shape), (long long)s0->d[1]);
        break;
    }
    case OP_embedding_grad: {
        ptr_decl(e, "dy", n->in[0], false);
        ptr_decl(e, "idx", n->in[1], false);
        ptr_decl(e, "dtable", n->out[0], true);
        if (k->acc_grads) {
            if (!k->scratch) die("embedding_grad kernel %s without scratch", k->name);
            buf_ptr(e, k->scratch - 1, "scratch", true);
        }
        fprintf(f, "    tk_embedding_bwd_f32(dtable, dy, idx, %lld, %lld, %lld, %d, %s);%s\n", (long long)shape_numel(&n->in[1]->ty.shape),
                (long long)last, (long long)ir_int(n, "rows", 0), k->acc_grads, k->acc_grads ? "scratch" : "NULL",
                k->acc_grads ? " /* dtable += (in place) */" : "");
        break;
    }
    case OP_softmax:
    case OP_softmax_grad: {
        int ax = (int)ir_int(n, "axis", 0);
        int64_t outer = 1, inner = 1;
        for (int i = 0; i < ax; i++) outer *= s0->d[i];
        for (int i = ax + 1; i < s0->rank; i++) inner *= s0->d[i];
        if (n->op == OP_softmax) {
            ptr_decl(e, "x", n->in[0], false);
            ptr_decl(e, "y", n->out[0], true);
            fprintf(f, "    tk_softmax_f32(y, x, %lld, %lld, %lld);\n", (long long)outer, (long long)s0->d[ax], (long long)inner);
        } else {
            ptr_decl(e, "dy", n->in[0], false);
            ptr_decl(e, "y", n->in[1], false);
            ptr_decl(e, "dx", n->out[0], true);
            fprintf(f, "    tk_softmax_bwd_f32(dx, dy, y, %lld, %lld, %lld);\n", (long long)outer, (long long)s0->d[ax], (long long)inner);
        }
        break;
    }
    case OP_layer_norm: {
        char eps[32];
        c_double(eps, ir_float(n, "eps", 1e-5));
        ptr_decl(e, "x", n->in[0], false);
        ptr_decl(e, "w", n->in[1], false);
        ptr_decl(e, "b", n->in[2], false);
        const char *ydt = norm_y_decl(e, k);
        ptr_decl(e, "mean", n->out[1], true);
        ptr_decl(e, "rstd", n->out[2], true);
        fprintf(f, "    tk_layernorm_f32(y, %s, mean, rstd, x, w, b, %lld, %lld, %s);\n", ydt, (long long)(shape_numel(s0) / last), (long long)last,
                eps);
        break;
    }
    case OP_layer_norm_grad: {
        const Shape *xs = &n->in[1]->ty.shape;
        int64_t C = xs->d[xs->rank - 1];
        const char *dydt = norm_in_decl(e, "dy", n->in[0]);
        ptr_decl(e, "x", n->in[1], false);
        ptr_decl(e, "w", n->in[2], false);
        ptr_decl(e, "mean", n->in[3], false);
        ptr_decl(e, "rstd", n->in[4], false);
        norm_dx_decl(e, k);
        ptr_decl(e, "dw", n->out[1], true);
        ptr_decl(e, "db", n->out[2], true);
        fprintf(f, "    tk_layernorm_bwd_f32(dx, dxh, %s, dw, db, %d, dy, %s, x, w, mean, rstd, %lld, %lld);\n", norm_dxh_dt(k), k->acc_grads,
                dydt, (long long)(shape_numel(xs) / C), (long long)C);
        break;
    }
    case OP_rms_norm: {
        char eps[32];
        c_double(eps, ir_float(n, "eps", 1e-6));
        ptr_decl(e, "x", n->in[0], false);
        ptr_decl(e, "w", n->in[1], false);
        const char *ydt = norm_y_decl(e, k);
        ptr_decl(e, "rstd", n->out[1], true);
        fprintf(f, "    tk_rmsnorm_f32(y, %s, rstd, x, w, %lld, %lld, %s);\n", ydt, (long long)(shape_numel(s0) / last), (long long)last, eps);
        break;
    }
    case OP_rms_norm_grad: {
        const Shape *xs = &n->in[1]->ty.shape;
        int64_t C = xs->d[xs->rank - 1];
        const char *dydt = norm_in_decl(e, "dy", n->in[0]);
        ptr_decl(e, "x", n->in[1], false);
        ptr_decl(e, "w", n->in[2], false);
        ptr_decl(e, "rstd", n->in[3], false);
        norm_dx_decl(e, k);
        ptr_decl(e, "dw", n->out[1], true);
        fprintf(f, "    tk_rmsnorm_bwd_f32(dx, dxh, %s, dw, %d, dy, %s, x, w, rstd, %lld, %lld);\n", norm_dxh_dt(k), k->acc_grads, dydt,
                (long long)(shape_numel(xs) / C), (long long)C);
        break;
    }
    case OP_rope: {
        char th[32];
        c_double(th, ir_float(n, "theta", 10000.0));
        int64_t T = s0->d[s0->rank - 2], D = last;
        ptr_decl(e, "x", n->in[0], false);
        ptr_decl(e, "y", n->out[0], true);
        if (n->in[0]->ty.dt == DT_f32)
            fprintf(f, "    tk_rope_f32(y, x, %lld, %lld, %lld, %s, %d);\n", (long long)(shape_numel(s0) / (T * D)), (long long)T,
                    (long long)D, th, (int)ir_int(n, "inverse", 0));
        else
            fprintf(f, "    tk_rope_dt(y, x, %lld, %lld, %lld, %s, %d, %s);\n", (long long)(shape_numel(s0) / (T * D)), (long long)T,
                    (long long)D, th, (int)ir_int(n, "inverse", 0), dt_code(n->in[0]->ty.dt));
        break;
    }
    case OP_rope_qk: {
        /* q and k in one pass; in place when their buffers die here (lower.c) */
        char th[32];
        c_double(th, ir_float(n, "theta", 10000.0));
        const Shape *ks = &n->in[1]->ty.shape;
        int64_t T = s0->d[s0->rank - 2], D = last;
        char lay[4][64];
        int64_t hq = rope_decl(e, "q", n->in[0], false, lay[0]), hk = rope_decl(e, "k", n->in[1], false, lay[1]);
        rope_decl(e, "yq", n->out[0], true, lay[2]);
        rope_decl(e, "yk", n->out[1], true, lay[3]);
        bool tab = n->nin == 4;
        if (tab) {
            ptr_decl(e, "cs", n->in[2], false);
            ptr_decl(e, "sn", n->in[3], false);
        }
        fprintf(f,
                "    tk_rope_qk(yq, %s, q, %s, %lld, %lld, yk, %s, k, %s, %lld, %lld, %lld, %lld, %s, %s, %s, %s, %d, %s); /* q [%lld,%lld,%lld], "
                "k [%lld,%lld,%lld] */\n",
                lay[2], lay[0], (long long)hq, (long long)(shape_numel(s0) / (T * D)), lay[3], lay[1], (long long)hk,
                (long long)(shape_numel(ks) / (T * D)), (long long)T, (long long)D, tab ? "cs" : "NULL", tab ? "sn" : "NULL",
                tab ? dt_code(n->in[2]->ty.dt) : "TRN_F32", th, (int)ir_int(n, "inverse", 0), dt_code(n->in[0]->ty.dt),
                (long long)(shape_numel(s0) / (T * D)), (long long)T, (long long)D, (long long)(shape_numel(ks) / (T * D)), (long long)T,
                (long long)D);
        break;
    }
    case OP_attention:
    case OP_attention_grad: {
        int q = n->op == OP_attention ? 0 : 1;
        const Shape *qs = &n->in[q]->ty.shape, *ks = &n->in[q + 1]->ty.shape;
        char sc[32];
        c_double(sc, ir_float(n, "scale", 1.0));
        /* q, k, v, o and the gradients: a pointer at the view's first
         * element and its layout (trainc_kernels.h) */
        char lay[8][64];
        if (n->op == OP_attention) {
            att_decl(e, "q", n->in[0], false, lay[0]);
            att_decl(e, "k", n->in[1], false, lay[1]);
            att_decl(e, "v", n->in[2], false, lay[2]);
            att_decl(e, "o", n->out[0], true, lay[3]);
            ptr_decl(e, "lse", n->out[1], true);
            bool h = n->in[0]->ty.dt != DT_f32;
            fprintf(f, "    tk_attention_%s(o, %s, lse, q, %s, k, %s, v, %s, %lld, %lld, %lld, %lld, %lld, %lld, %s, %d", h ? "dt" : "f32",
                    lay[3], lay[0], lay[1], lay[2], (long long)qs->d[0], (long long)qs->d[1], (long long)ks->d[1], (long long)qs->d[2],
                    (long long)ks->d[2], (long long)qs->d[3], sc, (int)ir_int(n, "causal", 1));
            if (h) fprintf(f, ", %s", dt_code(n->in[0]->ty.dt));
            fputs(");\n", f);
        } else {
            static const char *const in[] = {"dout", "q", "k", "v", "o"}, *const out[] = {"dq", "dk", "dv"};
            for (int i = 0; i < 5; i++) att_decl(e, in[i], n->in[i], false, lay[i]);
            ptr_decl(e, "lse", n->in[5], false);
            for (int i = 0; i < 3; i++) att_decl(e, out[i], n->out[i], true, lay[5 + i]);
            bool h = n->in[1]->ty.dt != DT_f32;
            fprintf(f,
                    "    tk_attention_bwd_%s(dq, %s, dk, %s, dv, %s, dout, %s, q, %s, k, %s, v, %s, o, %s, lse, %lld, %lld, %lld, %lld, %lld, "
                    "%lld, %s, %d",
                    h ? "dt" : "f32", lay[5], lay[6], lay[7], lay[0], lay[1], lay[2], lay[3], lay[4], (long long)qs->d[0],
                    (long long)qs->d[1], (long long)ks->d[1], (long long)qs->d[2], (long long)ks->d[2], (long long)qs->d[3], sc,
                    (int)ir_int(n, "causal", 1));
            if (h) fprintf(f, ", %s", dt_code(n->in[1]->ty.dt));
            fputs(");\n", f);
        }
        break;
    }
    case OP_cross_entropy: {
        int64_t V = last, N = shape_numel(s0) / V, ig = ir_int(n, "ignore_index", -100), nc = ir_int(n, "classes", V);
        ptr_decl(e, "targets", n->in[1], false);
        ptr_decl(e, "loss", n->out[0], true);
        ptr_decl(e, "lse", n->out[1], true);
        if (k->ce_fused) {
            ptr_decl(e, "logits", n->in[0], true);
            ptr_decl(e, "dloss", k->ce_grad->in[0], false);
            fprintf(f, "    /* forward and backward in one pass: logits [%lld,%lld] become dlogits */\n", (long long)N, (long long)V);
            fprintf(f, "    tk_cross_entropy_fused_f32(loss, lse, logits, targets, dloss, %lld, %lld, %lld, %lld);\n", (long long)N, (long long)V,
                    (long long)nc, (long long)ig);
        } else {
            ptr_decl(e, "logits", n->in[0], false);
            fprintf(f, "    tk_cross_entropy_f32(loss, lse, logits, targets, %lld, %lld, %lld, %lld);\n", (long long)N, (long long)V, (long long)nc,
                    (long long)ig);
        }
        break;
    }
    case OP_cross_entropy_grad: {
        const Shape *ls = &n->in[1]->ty.shape;
        int64_t V = ls->d[ls->rank - 1], N = shape_numel(ls) / V;
        ptr_decl(e, "dloss", n->in[0], false);
        ptr_decl(e, "logits", n->in[1], false);
        ptr_decl(e, "targets", n->in[2], false);
        ptr_decl(e, "lse", n->in[3], false);
        ptr_decl(e, "dlogits", n->out[0], true);
        fprintf(f, "    tk_cross_entropy_bwd_f32(dlogits, dloss, logits, targets, lse, %lld, %lld, %lld, %lld);\n", (long long)N, (long long)V,
                (long long)ir_int(n, "classes", V), (long long)ir_int(n, "ignore_index", -100));
        break;
    }
    case OP_linear_cross_entropy: {
        const Shape *ws = &n->in[1]->ty.shape;
        int64_t C = ws->d[1], V = ws->d[0], N = shape_numel(&n->in[2]->ty.shape);
        ptr_decl(e, "x", n->in[0], false);
        ptr_decl(e, "w", n->in[1], false);
        ptr_decl(e, "targets", n->in[2], false);
        ptr_decl(e, "loss", n->out[0], true);
        /* dx: f32, or the half value of the cast it absorbed; each times the scale it absorbed (fp16's loss scale) */
        Value *sdx, *sdw, *dx = cg_lce_result(k, 1, &sdx), *dw = cg_lce_result(k, 2, &sdw);
        opt_ptr_decl(e, "dx", dx, true);
        opt_ptr_decl(e, "dw", dw, true);
        if (sdx || sdw) { /* tk_linear_ce_scaled: a null scale is 1 */
            if (sdx) ptr_decl(e, "sdx", sdx, false);
            else fputs("    const float *sdx = NULL;\n", f);
            if (sdw) ptr_decl(e, "sdw", sdw, false);
            else fputs("    const float *sdw = NULL;\n", f);
        }
        if (!k->scratch) die("linear_cross_entropy kernel %s without scratch", k->name);
        buf_ptr(e, k->scratch - 1, "scratch", true);
        /* the op's chunk of rows, halved until its f32 logits fit in the
         * scratch (the cuda target sizes it for its own kernels, whose
         * logits are in x's dtype: its C form takes half the rows in bf16,
         * each of the kernels' chunks two of its own) */
        const Buf *sb = &e->p->bufs[k->scratch - 1];
        int64_t nc = ir_int(n, "classes", V), chunk = ir_int(n, "chunk", N);
        int64_t fit = shape_numel(&sb->shape) * dtype_size[sb->dt] / 4 / nc;
        if (fit < 1) die("linear_cross_entropy kernel %s: scratch holds no row", k->name);
        while (chunk > fit) chunk = (chunk + 1) / 2; /* ends: fit >= 1 */
        fprintf(f, "    /* x [%lld,%lld] w [%lld,%lld]: %lld rows at a time, the logits never exist */\n", (long long)N, (long long)C, (long long)V,
                (long long)C, (long long)chunk);
        fprintf(f, "    tk_linear_ce%s(loss, dx, %s, dw, %d, x, w, targets, %lld, %lld, %lld, %lld, %lld, %lld, scratch, %s%s);%s\n",
                sdx || sdw ? "_scaled" : "", dt_code(dx->ty.dt), k->acc_grads, (long long)N, (long long)C, (long long)V,
                (long long)nc, (long long)chunk, (long long)ir_int(n, "ignore_index", -100),
                dt_code(n->in[0]->ty.dt), sdx || sdw ? ", sdx, sdw" : "", k->acc_grads ? " /* dw += (the accumulator) */" : "");
        break;
    }
    case OP_add_layer_norm:
    case OP_add_rms_norm: {
        bool ln = n->op == OP_add_layer_norm;
        char eps[32];
        c_double(eps, ir_float(n, "eps", ln ? 1e-5 : 1e-6));
        const char *xdt = norm_in_decl(e, "x", n->in[0]), *rdt = norm_in_decl(e, "r", n->in[1]);
        ptr_decl(e, "w", n->in[2], false);
        if (ln) ptr_decl(e, "b", n->in[3], false);
        const char *ydt = norm_y_decl(e, k);
        ptr_decl(e, "s", n->out[1], true);
        if (ln) ptr_decl(e, "mean", n->out[2], true);
        ptr_decl(e, "rstd", n->out[ln ? 3 : 2], true);
        fprintf(f, "    tk_add_norm_f32(y, %s, s, %s, rstd, x, %s, r, %s, w, %s, %lld, %lld, %s); /* s = x + r [%lld,%lld] */\n", ydt,
                ln ? "mean" : "NULL", xdt, rdt, ln ? "b" : "NULL", (long long)(shape_numel(s0) / last), (long long)last, eps, (long long)(shape_numel(s0) / last), (long long)last);
        break;
    }
    case OP_add_layer_norm_grad:
    case OP_add_rms_norm_grad: {
        bool ln = n->op == OP_add_layer_norm_grad;
        const Shape *xs = &n->in[2]->ty.shape;
        int64_t C = xs->d[xs->rank - 1];
        const char *dydt = norm_in_decl(e, "dy", n->in[0]);
        ptr_decl(e, "ds", n->in[1], false);
        ptr_decl(e, "s", n->in[2], false);
        ptr_decl(e, "w", n->in[3], false);
        if (ln) ptr_decl(e, "mean", n->in[4], false);
        ptr_decl(e, "rstd", n->in[ln ? 5 : 4], false);
        norm_dx_decl(e, k);
        ptr_decl(e, "dw", n->out[1], true);
        if (ln) ptr_decl(e, "db", n->out[2], true);
        fprintf(f, "    tk_add_norm_bwd_f32(dx, dxh, %s, dw, %s, %d, dy, %s, ds, s, w, %s, rstd, %lld, %lld);\n", norm_dxh_dt(k), ln ? "db" : "NULL",
                k->acc_grads, dydt, ln ? "mean" : "NULL", (long long)(shape_numel(xs) / C), (long long)C);
        break;
    }
    case OP_loss_scale_update: {
        static const char *const in[4] = {"scale", "good", "skipped", "norm"}, *out[4] = {"scale2", "good2", "skipped2", "skip"};
        for (int i = 0; i < 4; i++) ptr_decl(e, in[i], n->in[i], false);
        for (int i = 0; i < 4; i++) ptr_decl(e, out[i], n->out[i], true);
        fprintf(f, "    tk_loss_scale_update(scale2, good2, skipped2, skip, scale, good, skipped, norm, %lld);\n", (long long)ir_int(n, "window", 1000));
        break;
    }
    case OP_global_norm: {
        fputs("    double acc = 0;\n", f);
        for (int i = 0; i < n->nin; i++)
            fprintf(f, "    tk_sumsq_f32(&acc, (const float *)(A + %lld), %lld);\n", (long long)e->p->bufs[vbuf(e, n->in[i])].offset,
                    (long long)shape_numel(&n->in[i]->ty.shape));
        ptr_decl(e, "out", n->out[0], true);
        fputs("    out[0] = (float)sqrt(acc);\n", f);
        break;
    }
    case OP_adamw:
    case OP_sgd: {
        bool adam = n->op == OP_adamw;
        ptr_decl(e, "w", n->in[0], false);
        ptr_decl(e, "g", n->in[1], false);
        opt_ptr_decl(e, adam ? "m" : "buf", n->in[2], false);
        if (adam) ptr_decl(e, "v", n->in[3], false);
        int lr = adam ? 4 : 3;
        ptr_decl(e, "lr", n->in[lr], false);
        if (adam) ptr_decl(e, "step", n->in[5], false);
        ptr_decl(e, "gscale", n->in[adam ? 6 : 4], false);
        bool skip = n->nin > (adam ? 7 : 5);
        if (skip) ptr_decl(e, "skip", n->in[adam ? 7 : 5], false);
        ptr_decl(e, "wo", n->out[0], true);
        opt_ptr_decl(e, adam ? "mo" : "bo", n->out[1], true);
        if (adam) ptr_decl(e, "vo", n->out[2], true);
        int64_t cnt = shape_numel(s0);
        /* what the update absorbed (lower.c): the cast that makes the new
         * weight's half copy h, and the reset of the accumulator g (gz) */
        Value *hv = k->cast_out ? k->cast_out->out[0] : NULL;
        if (hv) ptr_decl(e, "h", hv, true);
        if (k->zero_g) ptr_decl(e, "gz", n->in[1], true);
        char hc[48];
        snprintf(hc, sizeof hc, "%s, %s, %s", hv ? "h" : "NULL", hv ? dt_code(hv->ty.dt) : "TRN_F32", k->zero_g ? "gz" : "NULL");
        if (adam) {
            char b1[32], b2[32], ep[32], wd[32];
            c_double(b1, ir_float(n, "beta1", 0.9));
            c_double(b2, ir_float(n, "beta2", 0.999));
            c_double(ep, ir_float(n, "eps", 1e-8));
            c_double(wd, ir_float(n, "wd", 0));
            fprintf(f, "    tk_adamw_f32(wo, mo, vo, w, g, m, v, %lld, lr[0], step[0], gscale[0], %s, %s, %s, %s, %s, %s);\n", (long long)cnt, b1, b2, ep, wd,
                    skip ? "skip" : "NULL", hc);
        } else {
            char mo[32], wd[32];
            c_double(mo, ir_float(n, "momentum", 0));
            c_double(wd, ir_float(n, "wd", 0));
            fprintf(f, "    tk_sgd_f32(wo, bo, w, g, buf, %lld, lr[0], gscale[0], %s, %s, %d, %s, %s);\n", (long long)cnt, mo, wd,
                    (int)ir_int(n, "nesterov", 0), skip ? "skip" : "NULL", hc);
        }
        break;
    }
    default:
        error_at(e->d, k->loc, "the C backend has no kernel for %s", op_name(n->op));
        e->ok = false;
    }
    fputs("}\n\n", f);
}

/* ===================================================================== */
/* schedules and the descriptor                                          */
/* ===================================================================== */

/* A multi-tensor update or run of accumulating adds (lower.c
 * merge_updates): each part its own function, as if alone; the kernel
 * calls them in order. */
static void emit_multi(Emit *e, Kernel *k) {
    for (int j = 0; j < k->nparts; j++) {
        if (k->parts[j]->kind == KK_LOOP) emit_loop(e, k->parts[j]);
        else emit_template(e, k->parts[j]);
    }
    kernel_header(e, k);
    for (int j = 0; j < k->nparts; j++) fprintf(e->f, "    %s(A);\n", k->parts[j]->name);
    fputs("}\n\n", e->f);
}

static const char *const run_fn[TRN_RUN__COUNT] = {"run_micro", "run_update", "run_eval", "run_sample", "run_refresh"};

/* code with each buffer's variable (bN: buf_ptr's names, which loop
 * kernels use) renamed to b#K, K its order of first use, so that two
 * kernels of two schedules that differ only in their buffers' numbers
 * (the same offsets) compare equal. */
static char *canon_code(const char *code) {
    StrBuf b = {0};
    long *ids = NULL;
    int n = 0, cap = 0;
    for (const char *q = code; *q;) {
        bool start = q == code || !(isalnum((unsigned char)q[-1]) || q[-1] == '_');
        if (start && q[0] == 'b' && isdigit((unsigned char)q[1])) {
            const char *r = q + 1;
            long id = 0;
            while (isdigit((unsigned char)*r) && id < 100000000) id = id * 10 + (*r++ - '0');
            if (!(isalnum((unsigned char)*r) || *r == '_')) {
                int k = 0;
                while (k < n && ids[k] != id) k++;
                if (k == n) {
                    if (n == cap) ids = xrealloc(ids, sizeof *ids * (size_t)(cap = cap ? 2 * cap : 32));
                    ids[n++] = id;
                }
                sb_printf(&b, "b#%d", k);
                q = r;
                continue;
            }
        }
        sb_putc(&b, *q++);
    }
    free(ids);
    return b.s ? b.s : strdup("");
}

/* Kernel k's text (its header comment and function) into f, or, when an
 * earlier kernel of any schedule has the same code (the eval and sampling
 * schedules repeat the forward's first kernels, at the same offsets), its
 * header and a #define of its name to that kernel's: one function, as
 * the CUDA module has, and none that GCC's merging of identical functions
 * could take up (TRN_KERNEL, trainc_kernels.h). */
static void emit_kernel(Emit *e, Kernel *k) {
    FILE *f = e->f;
    char *text = NULL;
    size_t len = 0;
    e->f = open_memstream(&text, &len);
    if (!e->f) die("open_memstream failed");
    switch (k->kind) {
    case KK_LOOP: emit_loop(e, k); break;
    case KK_GEMM: emit_gemm(e, k); break;
    case KK_TMPL:
        if (k->nparts) emit_multi(e, k);
        else emit_template(e, k);
        break;
    case KK_COPY: emit_copy(e, k); break;
    case KK_FILL: emit_fill(e, k); break;
    }
    if (fclose(e->f) != 0) die("open_memstream failed");
    e->f = f;
    char sig[300];
    snprintf(sig, sizeof sig, "TRN_KERNEL void %s(", k->name);
    char *fn = strstr(text, sig);
    if (!fn) { /* none: an error said why (e->ok), or a kernel with nothing to run */
        fputs(text, f);
        free(text);
        return;
    }
    char *code = canon_code(fn + strlen(sig) - 1);
    uint64_t h = ir_hash_str(code);
    for (int i = 0; i < e->ndone; i++) {
        Emitted *d = &e->done[i];
        if (d->hash != h || strcmp(d->code, code) != 0) continue;
        fwrite(text, 1, (size_t)(fn - text), f);
        fprintf(f, "#define %s %s /* the same code as %s, above */\n\n", k->name, d->name, d->name);
        free(code);
        free(text);
        return;
    }
    fputs(text, f);
    if (e->ndone == e->capdone) {
        e->capdone = e->capdone ? 2 * e->capdone : 64;
        e->done = xrealloc(e->done, sizeof *e->done * (size_t)e->capdone);
    }
    e->done[e->ndone++] = (Emitted){code, k->name, h};
    free(text);
}

static void emit_sched(Emit *e, Sched *s) {
    FILE *f = e->f;
    e->s = s;
    for (int i = 0; i < s->nk; i++) emit_kernel(e, s->k[i]);
    fprintf(f, "static void %s(unsigned char *A, int flags)\n{\n", run_fn[s->which]);
    if (!s->nk) fputs("    (void)A;\n", f);
    fputs("    (void)flags;\n", f);
    for (int i = 0; i < s->nk; i++) {
        fprintf(f, "    %s(A);\n", s->k[i]->name);
        /* buffers that die here: poisoned in checking mode */
        for (int b = 0; b < e->p->nbufs; b++) {
            Buf *bf = &e->p->bufs[b];
            if (bf->kind != BK_TEMP || bf->sched != (int)s->which || bf->offset < 0 || bf->last != i || bf->output) continue;
            fprintf(f, "    if (flags & TRN_FLAG_POISON) tk_poison(A + %lld, %lld); /* b%d dies */\n", (long long)bf->offset,
                    (long long)bf->bytes, b);
        }
    }
    fputs("}\n\n", f);
}

static Node *source_node(Program *p, Buf *b) {
    Op op = b->kind == BK_PARAM ? OP_param : b->kind == BK_STATE ? OP_state : OP_input;
    Graph *gs[3] = {p->train, p->fwd, p->sample};
    for (int i = 0; i < 3; i++) {
        if (!gs[i]) continue;
        Node *n = ir_find_source(gs[i], op, b->name);
        if (n) return n;
    }
    return NULL;
}

typedef struct OutRef { const char *name; int sched; const char *gname; } OutRef;

static int find_out_buf(Program *p, int sched, const char *name) {
    Sched *s = &p->sched[sched];
    if (!s->g) return -1;
    Value *v = ir_output(s->g, name);
    if (!v) return -1;
    if (s->phase >= 0 && v->def->phase != s->phase) return -1;
    ValInfo *vi = &s->vi[v->id];
    if (vi->st != VS_BUF && vi->st != VS_VIEW) return -1;
    return vi->view.buf;
}

static void emit_tensor(FILE *f, Program *p, const char *name, int kind, int bufid, Node *src) {
    Buf *b = &p->bufs[bufid];
    static const char *const kinds[] = {"TRN_PARAM", "TRN_STATE", "TRN_INPUT", "TRN_OUTPUT"};
    static const char *const dts[] = {"TRN_F32", "TRN_F64", "TRN_BF16", "TRN_F16", "TRN_I32", "TRN_I64", "TRN_U8"};
    fputs("    {", f);
    cg_c_string(f, name);
    /* every field written, {0} for a scalar's shape: clean under -Wextra -pedantic */
    fprintf(f, ", %s, %s, %d, {", kinds[kind], dts[b->dt], b->shape.rank);
    if (b->shape.rank == 0) fputs("0", f);
    for (int i = 0; i < b->shape.rank; i++) fprintf(f, "%s%lld", i ? ", " : "", (long long)b->shape.d[i]);
    fprintf(f, "}, %lld, %lld, ", (long long)shape_numel(&b->shape), (long long)b->offset);
    const char *init = src ? ir_str(src, "init", "zeros") : "zeros";
    double a = 0, bb = 0;
    if (src && strcmp(init, "normal") == 0) a = ir_float(src, "std", 1.0);
    if (src && strcmp(init, "uniform") == 0) a = ir_float(src, "lo", 0), bb = ir_float(src, "hi", 1);
    if (src && strcmp(init, "constant") == 0) a = ir_float(src, "value", 0);
    char as[32], bs[32];
    c_double(as, a);
    c_double(bs, bb);
    cg_c_string(f, init);
    fprintf(f, ", %s, %s, %d, {", as, bs, src && src->op == OP_param ? ir_is_trainable(src) : 0);
    /* the checkpoint view: the shape before pad-tiles ({unpadded}) */
    const Attr *up = src ? ir_attr(src, "unpadded") : NULL;
    bool padded = up && up->kind == ATTR_INTS && up->n == b->shape.rank;
    if (b->shape.rank == 0) fputs("0", f);
    for (int i = 0; i < b->shape.rank; i++) fprintf(f, "%s%lld", i ? ", " : "", (long long)(padded ? up->v[i] : b->shape.d[i]));
    fputs("}", f);
    /* an index input: the values trn_set takes (codegen/compile.c, index_inputs); 0 0 0 for others */
    int64_t iend = src && src->op == OP_input ? ir_int(src, "index_end", 0) : 0;
    const Attr *ig = iend > 0 ? ir_attr(src, "index_ignore") : NULL;
    fprintf(f, ", %lld, %lld, %d", (long long)(iend > 0 ? iend : 0), (long long)(ig ? ir_int(src, "index_ignore", 0) : 0), ig != NULL);
    fputs("},\n", f);
}

bool cg_emit_c(FILE *f, Program *p, bool with_main, Diag *d) {
    Emit e = {.f = f, .p = p, .d = d, .ok = true};
    fputs("/* Generated by trainc from ", f);
    c_comment_text(f, p->source);
    fputs(" -- do not edit.\n", f);
    fprintf(f, " * Model %s", "");
    c_comment_text(f, p->name);
    fprintf(f, ": arena of %lld bytes (%lld persistent).\n */\n", (long long)p->arena_bytes, (long long)p->persistent_bytes);
    fputs("#include \"trainc_rt.h\"\n#include \"trainc_kernels.h\"\n\n", f);
    fputs("#include <math.h>\n#include <stdint.h>\n#include <string.h>\n\n", f);
    for (int s = 0; s < TRN_RUN__COUNT; s++)
        if (p->sched[s].g) emit_sched(&e, &p->sched[s]);
    for (int i = 0; i < e.ndone; i++) free(e.done[i].code);
    free(e.done);
    if (!e.ok) return false;

    /* the tensor table */
    fputs("static const TrnTensor tensors[] = {\n", f);
    int nt = 0;
    for (int i = 0; i < p->nbufs; i++) {
        Buf *b = &p->bufs[i];
        if (b->kind == BK_TEMP) continue;
        emit_tensor(f, p, b->name, b->kind == BK_PARAM ? 0 : b->kind == BK_STATE ? 1 : 2, i, source_node(p, b));
        nt++;
    }
    struct { const char *name; int sched; const char *gname; } outs[] = {
        {"loss", TRN_RUN_MICRO, "loss"},
        {"grad_norm", TRN_RUN_UPDATE, "grad_norm"},
        {"grad_norm", TRN_RUN_MICRO, "grad_norm"},
        {"eval.loss", TRN_RUN_EVAL, "loss"},
        {"logits", TRN_RUN_SAMPLE, "logits"},
    };
    int outidx[5];
    for (int i = 0; i < 5; i++) {
        outidx[i] = -1;
        if (i == 2 && outidx[1] >= 0) continue;
        int b = find_out_buf(p, outs[i].sched, outs[i].gname);
        if (b < 0) continue;
        emit_tensor(f, p, outs[i].name, 3, b, NULL);
        outidx[i] = nt++;
    }
    if (outidx[1] < 0) outidx[1] = outidx[2];
    fputs("};\n\n", f);

    fputs("static const TrnMemLine mem[] = {\n", f);
    int64_t sum = 0;
    for (int c = 0; c < MC__COUNT; c++) {
        fputs("    {", f);
        cg_c_string(f, cg_memcat_name((MemCat)c));
        fprintf(f, ", %lld},\n", (long long)p->cat_bytes[c]);
        sum += p->cat_bytes[c];
    }
    fprintf(f, "    {\"alignment, fragmentation\", %lld},\n};\n\n", (long long)(p->arena_bytes - sum));

    /* indices of the named tensors */
    int ti[5] = {-1, -1, -1, -1, -1};
    static const char *const named[5] = {"tokens", "targets", "opt.lr", "opt.step", "rng.seed"};
    int k = 0;
    for (int i = 0; i < p->nbufs; i++) {
        Buf *b = &p->bufs[i];
        if (b->kind == BK_TEMP) continue;
        if (b->kind == BK_INPUT)
            for (int j = 0; j < 5; j++)
                if (strcmp(b->name, named[j]) == 0) ti[j] = k;
        k++;
    }
    StrBuf id = {0};
    cg_c_ident(&id, p->symbol ? p->symbol : p->name);
    const TrainConfig *tc = &p->tc;
    if (p->cuda_symbol) fprintf(f, "extern const struct TrnCudaModule %s; /* the CUDA module, below */\n", p->cuda_symbol);
    fprintf(f, "const TrnModel trn_model_%s = {\n", id.s);
    fprintf(f, "    .abi = TRN_ABI_VERSION,\n    .name = ");
    cg_c_string(f, p->name);
    fputs(",\n    .source = ", f);
    cg_c_string(f, p->source);
    fprintf(f, ",\n    .ntensors = %d,\n    .tensors = tensors,\n", nt);
    fprintf(f, "    .t_tokens = %d, .t_targets = %d, .t_lr = %d, .t_step = %d, .t_seed = %d,\n", ti[0], ti[1], ti[2], ti[3], ti[4]);
    fprintf(f, "    .t_loss = %d, .t_grad_norm = %d, .t_eval_loss = %d, .t_logits = %d,\n", outidx[0], outidx[1], outidx[3], outidx[4]);
    fprintf(f, "    .vocab = %lld,\n    .refresh = %d,\n", (long long)p->vocab, p->sched[TRN_RUN_REFRESH].g != NULL);
    char lr[32], mlr[32], gc[32], ls[32];
    c_double(lr, tc->lr);
    c_double(mlr, tc->min_lr);
    c_double(gc, tc->grad_clip);
    c_double(ls, tc->loss_scale);
    fputs("    .train = {.optimizer = ", f);
    cg_c_string(f, tc->optimizer);
    fputs(", .schedule = ", f);
    cg_c_string(f, tc->schedule);
    fprintf(f, ", .lr = %s, .min_lr = %s, .grad_clip = %s, .loss_scale = %s,\n", lr, mlr, gc, ls);
    fprintf(f, "              .warmup = %lld, .steps = %lld, .grad_accum = %lld, .seed = %lld, .eval_every = %lld, .eval_steps = %lld,\n",
            (long long)tc->warmup, (long long)tc->steps, (long long)tc->grad_accum, (long long)tc->seed, (long long)tc->eval_every,
            (long long)tc->eval_steps);
    fprintf(f, "              .save_every = %lld, .loss_scale_window = %lld, .precision = ", (long long)tc->save_every,
            (long long)tc->loss_scale_window);
    cg_c_string(f, tc->precision);
    fputs(",\n              .baked = ", f);
    if (!p->baked) fputs("NULL", f);
    for (const char *q = p->baked; q && *q;) { /* a literal a line: "beta1=0.9\n" */
        const char *e = strchr(q, '\n');
        size_t len = e ? (size_t)(e - q) : strlen(q);
        if (q != p->baked) fputs("\n                       ", f);
        cg_c_string_n(f, q, len, e ? "\\n" : "");
        q += len + (e != NULL);
    }
    if (p->baked && !*p->baked) fputs("\"\"", f);
    fputs("},\n", f);
    fprintf(f, "    .arena_bytes = %lld,\n    .nmem = %d,\n    .mem = mem,\n", (long long)p->arena_bytes, MC__COUNT + 1);
    fputs("    .cpu_run = {", f);
    for (int s = 0; s < TRN_RUN__COUNT; s++) fprintf(f, "%s%s", s ? ", " : "", p->sched[s].g ? run_fn[s] : "NULL");
    fputs("},\n", f);
    if (p->cuda_symbol) fprintf(f, "    .cuda = &%s,\n};\n", p->cuda_symbol);
    else fputs("    .cuda = NULL,\n};\n", f);
    if (with_main) {
        fprintf(f, "\nint main(int argc, char **argv)\n{\n    return trn_main(argc, argv, &trn_model_%s, NULL);\n}\n", id.s);
    }
    sb_free(&id);
    return e.ok;
}
