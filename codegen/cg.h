/* codegen/cg.h — the kernel IR: what lowering produces and the emitters read.
 *
 * A Program is the compiled form of a training step: one arena, a set of
 * buffers with fixed offsets in it, and five schedules (TRN_RUN_MICRO,
 * UPDATE, EVAL, SAMPLE, REFRESH: see runtime/trainc_rt.h), each a list of kernels.
 *
 *   lower.c    graph -> kernels: generic fusion of pointwise chains and
 *              reductions into loop kernels, GEMMs, template kernels, views
 *   memplan.c  liveness over each schedule -> offsets in one arena; report
 *   emit_c.c   kernels -> C11 + OpenMP + OpenBLAS (the CPU backend)
 *   loops.c    the access analysis of loop kernels both emitters share (loops.h)
 *
 * Both emitters (C and CUDA) read the same Program; only how loops are
 * parallelised and how templates are spelled differ.
 */
#ifndef TRAINC_CG_H
#define TRAINC_CG_H

#include "ir.h"
#include "trainc_rt.h"

#define CG_ALIGN 256          /* every buffer starts on a 256-byte boundary */
/* The largest arena a memory plan may have (memplan.c says so, an error,
 * past it): every sum of sizes and offsets within it stays far from
 * int64's limit, in the compiler and in the runtime. */
#define CG_MAX_ARENA ((int64_t)1 << 62)

/* ---- buffers ---- */

typedef enum {
    BK_PARAM,                 /* parameter (persistent) */
    BK_STATE,                 /* optimizer / accumulator state (persistent) */
    BK_INPUT,                 /* fed by the runtime (persistent) */
    BK_TEMP,                  /* lives within one run of one schedule */
} BufKind;

typedef enum {                /* for the memory report */
    MC_PARAM, MC_GRAD, MC_OPTSTATE, MC_INPUT, MC_ACT, MC_TEMP, MC_WORKSPACE, MC_OTHER, MC__COUNT
} MemCat;

typedef struct Buf {
    int         id;
    BufKind     kind;
    DType       dt;
    Shape       shape;
    int64_t     bytes;
    int64_t     offset;       /* in the arena; -1 until planned */
    const char *name;         /* source name for persistent buffers; a value hint otherwise */
    Value      *value;        /* the value it holds (first one, for temporaries) */
    int         sched;        /* TrnRun of a temporary; -1 for persistent */
    int         first, last;  /* live range in kernel positions of its schedule */
    int         share;        /* in-place: occupies the buffer with this id (-1: none) */
    MemCat      cat;
    bool        output;       /* read by the runtime after the run */
} Buf;

/* A strided view of a buffer: element (i0..ir-1) is at
 * buf + (off + sum ik*stride[k]) elements. */
typedef struct View {
    int     buf;              /* -1: not a buffer (inlined) */
    int64_t off;
    int     rank;
    int64_t shape[IR_MAX_RANK];
    int64_t stride[IR_MAX_RANK];
} View;

/* ---- kernels ---- */

typedef enum {
    KK_LOOP,                  /* fused pointwise chain, or a reduction with its prologue and epilogue */
    KK_GEMM,                  /* matrix product through the BLAS */
    KK_TMPL,                  /* a template kernel for one op (norms, softmax, attention, ...) */
    KK_COPY,                  /* dst view <- src view (materialises views; commits updates) */
    KK_FILL,                  /* dst buffer <- a constant */
} KernKind;

/* A product's activation epilogue (cuBLASLt's GELU_AUX[_BIAS] and DGELU):
 * GEPI_GELU: c = gelu(a·b [+ bias]), the pre-activation kept in aux;
 * GEPI_DGELU: c = gelu_grad(a·b, aux), the gradient of the activation's
 * input from the product giving the gradient of its output. */
typedef enum { GEPI_NONE, GEPI_GELU, GEPI_DGELU } GemmEpi;

/* A product's bias-gradient epilogue: the sum over k of one operand, the
 * column sums of a linear layer's output gradient dy, which the weight
 * gradient's product reads whole (dW = dy^T x, or x^T dy).  GBG_A:
 * dbias[m] = sum_k op(a)[m,k]; GBG_B: dbias[n] = sum_k op(b)[k,n].  The
 * operand's own view is row-major ([K, M] for a, [K, N] for b: the summed
 * dimension has unit stride). */
typedef enum { GBG_NONE, GBG_A, GBG_B } GemmBgrad;

typedef struct GemmInfo {
    View    a, b, c;          /* operand views (a, b as the matmul sees them, before ta/tb) */
    int     ta, tb;
    int64_t M, N, K;
    int     nbatch;           /* batch dims looped over (after folding into M) */
    int64_t bshape[IR_MAX_RANK];
    int64_t bsa[IR_MAX_RANK], bsb[IR_MAX_RANK], bsc[IR_MAX_RANK]; /* element strides per batch dim */
    int64_t lda, ldb, ldc;
    View    bias;             /* epilogue: c = a·b + bias (row vector), the add absorbed; bias.buf < 0 if none */
    bool    accumulate;       /* c += a·b: c is the f32 state the absorbed add updates (gradient accumulation) */
    GemmEpi epi;              /* the GELU (tanh form) absorbed after the product, or GEPI_NONE */
    View    aux;              /* GEPI_GELU: where the pre-activation a·b (+ bias) is also stored (a gelu_grad reads it), buf < 0: nowhere;
                               * GEPI_DGELU: the pre-activation x of gelu_grad(a·b, x) */
    GemmBgrad bgrad;          /* a bias gradient summed from an operand as it is read (cuBLASLt's BGRADB / BGRADA) */
    View    dbias;            /* where: f32 [M] (GBG_A) or [N] (GBG_B), c's dtype; buf < 0 if none */
} GemmInfo;

/* The operand a bias-gradient epilogue sums (a row-major [K, len] view),
 * and in *len the bias gradient's length (M for GBG_A, N for GBG_B). */
static inline const View *cg_bgrad_operand(const GemmInfo *gi, int64_t *len) {
    *len = gi->bgrad == GBG_A ? gi->M : gi->N;
    return gi->bgrad == GBG_A ? &gi->a : &gi->b;
}

typedef struct Kernel {
    int         id;           /* position in the schedule, after ordering */
    int         order;        /* first graph node index (priority when ordering) */
    KernKind    kind;
    char       *name;         /* k12_layer_norm_gpt2_model_L31 */
    SrcLoc      loc;
    Node      **nodes;        /* the graph nodes it computes, in order */
    int         nnodes, capnodes;
    /* KK_LOOP */
    Shape       space;        /* iteration space: the output shape, or the reduced tensor's shape */
    Node       *red;          /* the reduction node, or NULL */
    Shape       rspace;       /* the reduction's result shape */
    /* KK_GEMM */
    GemmInfo    gemm;
    /* KK_COPY / KK_FILL */
    View        src, dst;
    double      fill;
    /* dependencies (kernels of the same schedule whose results it reads) */
    int        *deps;
    int         ndeps, capdeps;
    bool        scheduled;
    /* buffers read and written (filled by memplan for liveness) */
    int        *reads, nreads, capreads;
    int        *writes, nwrites, capwrites;
    bool        ce_fused;     /* KK_TMPL cross_entropy: forward + backward in one pass */
    Node       *ce_grad;      /* the cross_entropy_grad node it absorbed */
    Node       *cast_out;     /* KK_TMPL norms, adamw, sgd: the cast to half of result 0 it absorbed (it writes the half value), or NULL */
    bool        zero_g;       /* KK_TMPL adamw, sgd: zeroes its gradient operand, an accumulator, after reading it (`update acc = 0`) */
    bool        acc_grads;    /* KK_TMPL backward norms: dw (and db) are added to the accumulators they are written into (`acc' = add(acc, g)` absorbed); embedding_grad: dtable added to the accumulator or to the other summand, in place; linear_cross_entropy: dw added to the accumulator */
    Node       *lce_mul[3];   /* KK_TMPL linear_cross_entropy: the mul of result 1 (dx), 2 (dw) by a power-of-two scale (fp16's loss scale) it absorbed, or NULL (lower.c lce_scale_mul) */
    int         scratch;      /* KK_TMPL: buffer id + 1 of its workspace (linear_cross_entropy's logits chunk; embedding_grad's sort, in place, C backend); 0: none */
    /* KK_TMPL multi-tensor update (lower.c merge_updates): the in-place
     * AdamW or SGD kernels, consecutive in the schedule, that it runs as
     * one (one CUDA launch); nodes holds all of theirs.  Each part keeps
     * its own cast_out and zero_g, and memplan gives it its reads and
     * writes.  NULL: not one. */
    struct Kernel **parts;
    int         nparts;
} Kernel;

/* How a value is available to kernels. */
typedef enum { VS_NONE, VS_BUF, VS_VIEW, VS_INLINE } ValState;
typedef struct ValInfo {
    ValState st;
    View     view;            /* VS_BUF (contiguous view of its buffer) / VS_VIEW */
    Kernel  *kern;            /* producing kernel (loop kernels: where it is computed) */
    bool     post;            /* computed after the reduction of its loop kernel (epilogue) */
    bool     inl;             /* computed inside loop kernel `kern` (even when also stored) */
    bool     grad;            /* a parameter's gradient (for the memory report) */
} ValInfo;

typedef struct Sched {
    TrnRun      which;
    Graph      *g;            /* the graph it was lowered from */
    int         phase;        /* the phase of g it runs (-1: every node) */
    Kernel    **k;
    int         nk, capk;
    ValInfo    *vi;           /* indexed by value id of g */
    Value      *loss;         /* graph outputs read by the runtime */
} Sched;

typedef struct Program {
    Arena      *arena;
    const char *name;         /* model name */
    const char *symbol;       /* the C identifier in trn_model_ID, trn_cuda_module_ID (--symbol; default: name's, cg_c_ident) */
    const char *source;       /* .model path */
    const char *baked;        /* train_baked: what the step holds that no runtime flag changes (TrnTrainDefaults.baked) */
    Graph      *train;        /* training graph (phases MICRO and STEP) */
    Graph      *fwd;          /* forward graph (eval) */
    Graph      *sample;       /* forward graph pruned to the logits (NULL: not a language model) */
    Graph      *refresh;      /* amp.<dt>.P := cast(P) for every half copy (NULL: none); the Program's own */
    Sched       sched[TRN_RUN__COUNT];
    Buf        *bufs;
    int         nbufs, capbufs;
    int        *pslot;        /* lower.c persistent_buf: the param, state and input buffers by kind and name
                               * (open addressing: buffer id + 1, 0 empty; pcap a power of two) */
    int         pcap, pn;
    int64_t     persistent_bytes;
    int64_t     arena_bytes;
    int64_t     peak[TRN_RUN__COUNT];              /* bytes of temporaries at the peak of each schedule */
    int64_t     extent[TRN_RUN__COUNT];            /* the temporary region each schedule's placement needs */
    int64_t     cat_bytes[MC__COUNT];              /* the report: by category at the training step's peak; MC_OTHER:
                                                    * what eval or sampling needs beyond the step's extent */
    int64_t     vocab;
    bool        fuse;                              /* generic fusion on (--no-fuse turns it off) */
    TrainConfig tc;
    /* cuda target (codegen/cuda.h): cuBLASLt's workspace and the CUDA
     * kernels' scratch, one region at the end of the arena, counted in
     * arena_bytes and cat_bytes[MC_WORKSPACE]; 0 bytes for the CPU target */
    int64_t     workspace_off, workspace_bytes;
    const char *cuda_symbol;  /* the embedded CUDA module's symbol (cuda target), or NULL */
    const char *target;       /* "cpu" or "cuda" (CgOptions.target): --report's tile advice */
    bool        no_tc_attention; /* cuda target: no tensor-core attention (CompileOptions) */
    int         tc_attention_rows; /* cuda target: the tensor-core attention's row tiles a warp, 0: chosen (CompileOptions) */
} Program;

/* lower.c */
typedef struct CgOptions {
    bool        fuse;         /* generic fusion */
    const char *target;       /* "cpu" or "cuda" */
} CgOptions;
/* Builds the program from a training graph (after the training pipeline), the
 * forward graph (eval) and the sampling graph (may be NULL).  Reports errors
 * through d.  The graphs must stay alive as long as the program. */
Program *cg_lower(Graph *train, Graph *fwd, Graph *sample, const char *source, const CgOptions *o, Diag *d);
void     cg_free(Program *p);
Buf     *cg_buf(Program *p, int id);
const char *cg_kind_name(KernKind k);
/* Prints the schedule (--emit=kernels). */
void     cg_print_kernels(FILE *f, Program *p);

/* memplan.c */
bool     cg_plan_memory(Program *p, Diag *d);
void     cg_print_report(FILE *f, Program *p);
const char *cg_memcat_name(MemCat c);

/* emit_c.c */
/* Writes the C source of the program (kernels, schedules and the TrnModel
 * descriptor named trn_model_<name>) to f.  main: also emit main(). */
bool     cg_emit_c(FILE *f, Program *p, bool main, Diag *d);

/* util */
void     view_contig(View *v, int buf, const Shape *s);
bool     view_is_contig(const View *v);
/* Transforms a view as a view op would; false when not representable. */
bool     view_permute(View *v, const int64_t *perm);
bool     view_slice(View *v, int axis, int64_t start, int64_t end);
bool     view_broadcast(View *v, const Shape *to);
bool     view_reshape(View *v, const Shape *to);

#endif
