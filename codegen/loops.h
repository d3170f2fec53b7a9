/* codegen/loops.h — what the C and the CUDA emitters share (DESIGN.md: they
 * share the lowering and differ only in how loops are parallelised).
 *
 *   the access analysis of a loop kernel   which buffers a fused loop
 *       reads and writes, at which element strides over its iteration
 *       space, and the loops that remain after collapsing dimensions that
 *       every access walks contiguously (kept dimensions first, then the
 *       reduced ones);
 *   helpers for generated text              comments, string literals,
 *       identifiers, buffer descriptions, GEMM operand layouts.
 *
 * Each emitter keeps only its own spelling: expressions, loads and stores,
 * how the loops become threads (OpenMP and plain loops in emit_c.c, one
 * thread per element or a warp or block per reduced row in emit_cuda.c)
 * and vectorisation.
 */
#ifndef TRAINC_LOOPS_H
#define TRAINC_LOOPS_H

#include "cg.h"

#define LOOP_MAXACC 256       /* distinct accesses in one loop kernel (lower.c's fuser keeps to it) */
/* The cuda target's loop kernels take each buffer they access as a
 * parameter, 128 at most with the workspace among them (emit_cuda.c's
 * CU_MAXPARAM): the fuser keeps their accesses to this many. */
#define LOOP_MAXACC_CUDA 120
#define LOOP_MAXIN  8         /* operands of one node that get an access */

/* One access of a loop kernel: a load or a store of a buffer through a
 * strided view, or a virtual one (the coordinates of an iota, the element
 * index of dropout's random stream). */
typedef struct LoopAcc {
    int     buf;              /* -1: virtual (iota / linear index) */
    int64_t off;
    int64_t st[IR_MAX_RANK];  /* element strides over the space dims */
    DType   dt;
    bool    store;
    bool    post;             /* indexed by kept dims only (after the reduction) */
    int     id;               /* its index in LoopNest.acc */
} LoopAcc;

/* The analysis of one KK_LOOP kernel. */
typedef struct LoopNest {
    Sched   *s;
    Kernel  *k;
    int      rank;                        /* of the iteration space */
    bool     reduced[IR_MAX_RANK];        /* space dims the reduction sums over */
    LoopAcc  acc[LOOP_MAXACC];
    int      nacc;
    /* the loops after collapsing: kept loops first, then reduced ones */
    int      nl;
    int64_t  lsize[IR_MAX_RANK];
    bool     lred[IR_MAX_RANK];
    int64_t  lst[LOOP_MAXACC][IR_MAX_RANK]; /* [access][loop]: element stride */
    /* per node of the kernel (k->nodes[i]) */
    int    (*opacc)[LOOP_MAXIN];          /* [i][j]: the access loading operand j, -1: none */
    int     *resacc;                      /* [i]: the access storing its result, -1: not stored */
    int     *linacc;                      /* [i]: iota's / dropout's virtual access, -1: none */
} LoopNest;

/* How operand j of node i of a loop kernel is had. */
typedef enum {
    LOOP_OP_VALUE,            /* computed earlier in the same kernel (a variable) */
    LOOP_OP_CONST,            /* an inline constant (a literal) */
    LOOP_OP_VIRTUAL,          /* an inline iota: its coordinate (opacc: the virtual access) */
    LOOP_OP_LOAD,             /* a load through access opacc[i][j] */
} LoopOperand;

/* Analyses loop kernel k of schedule s (dies on a view that does not map
 * onto the loop space: a lowering bug). */
LoopNest   *cg_loop_analyse(Sched *s, Kernel *k);
void        cg_loop_free(LoopNest *L);
LoopOperand cg_loop_operand(const LoopNest *L, int i, int j);
/* The index of access a over the loop indices i0, i1, ...: "off + i0 * s0
 * + i1 ..." with every literal followed by lit_suffix ("" in C, "ll" in
 * CUDA); "0" when it is constant zero. */
void        cg_loop_idx(const LoopNest *L, int a, const char *lit_suffix, char *buf, size_t n);
/* Of an iota node: its coordinate is (linear index / inner) % size. */
void        cg_loop_iota(const Node *io, int64_t *inner, int64_t *size);
/* How many values the reduction of k combines into each result. */
int64_t     cg_loop_red_count(const Kernel *k);

/* ---- text helpers ---- */

/* A C string literal for any text (.model names never reach generated code unescaped). */
void cg_c_string(FILE *f, const char *s);
void cg_c_string_n(FILE *f, const char *s, size_t n, const char *tail);   /* the first n bytes, then tail ("\\n") inside the quotes */
/* Text safe inside a C comment. */
void cg_comment_text(StrBuf *b, const char *s);
/* [A-Za-z0-9_] of s, others as '_'. */
void cg_c_ident(StrBuf *b, const char *s);
/* A comment line " *   b12   read   temp  f32[4,64]   offset 1024  name". */
void cg_describe_buf(StrBuf *b, Program *p, int id, const char *role);
/* A kernel's ops for a comment: "layer_norm add"; a multi-tensor
 * update's counted: "adamw x26, cast x18". */
void cg_kernel_ops(StrBuf *b, const Kernel *k);
/* The buffer of a value held in one (VS_BUF or VS_VIEW); dies otherwise. */
int  cg_value_buf(const Sched *s, const Value *v);
/* A GEMM operand's last two dims as a BLAS sees them: *t = 1 when only a
 * transposed read has a unit stride, *ld its leading dimension (at least
 * the stored rows' length, and 1).  False when the view has no such
 * layout (a copy must be made). */
bool cg_gemm_layout(const View *v, int *t, int64_t *ld);
/* A norm template's operand: v, or the half value its absorbed widening
 * cast reads (lower.c: the cast is never computed). */
Value *cg_norm_operand(const Sched *s, Value *v);
/* What template kernel k stores for its result v: the half value of the
 * cast of v it absorbed (Kernel.cast_out: a forward norm's y,
 * linear_cross_entropy's dx), else v itself. */
Value *cg_stored_result(const Kernel *k, Value *v);
/* What linear_cross_entropy's kernel k stores for result j (1: dx, 2: dw):
 * the result of the mul by a scale it absorbed (Kernel.lce_mul), then
 * cg_stored_result; and in *scale that scale (f32[]), or NULL. */
Value *cg_lce_result(const Kernel *k, int j, Value **scale);
/* An attention operand's layout: the element strides of b, h and t of its
 * [B,H,T,D] view (D contiguous), and its element offset in its buffer. */
void cg_att_layout(const Sched *s, const Value *v, int64_t l[3], int64_t *off);

#endif
