/* ir/ir.h — the whole data model of trainc in one header.
 *
 * Read this file first.  It holds every IR type (dtypes, shapes, values,
 * nodes, graphs, the training configuration) and the prototypes of every
 * module, grouped under a comment naming the file that implements them.
 *
 * The graph IR is SSA: every Value is defined once, by one Node (a node may
 * define several values: layer_norm gives y, mean and rstd).  A Graph is a
 * list of nodes in a valid execution order, plus its outputs.  Shapes and
 * dtypes are static.  Memory: every graph owns one Arena; nothing in it is
 * freed one by one.
 */
#ifndef TRAINC_IR_H
#define TRAINC_IR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ===================================================================== */
/* util.c — arena, growable buffers, files, diagnostics, fatal errors     */
/* ===================================================================== */

typedef struct Arena Arena;
Arena *arena_new(void);
void   arena_free(Arena *a);                       /* frees everything at once */
void  *arena_alloc(Arena *a, size_t n);            /* zeroed, 16-byte aligned */
char  *arena_strdup(Arena *a, const char *s);
char  *arena_strndup(Arena *a, const char *s, size_t n);
char  *arena_printf(Arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
size_t arena_used(const Arena *a);

/* Checked libc allocation: dies (naming the call site) when out of memory. */
void *xmalloc_(size_t n, const char *file, int line);
void *xcalloc_(size_t n, size_t sz, const char *file, int line);
void *xrealloc_(void *p, size_t n, const char *file, int line);
#define xmalloc(n)     xmalloc_((n), __FILE__, __LINE__)
#define xcalloc(n, s)  xcalloc_((n), (s), __FILE__, __LINE__)
#define xrealloc(p, n) xrealloc_((p), (n), __FILE__, __LINE__)

/* Compiler bugs (never for bad user input): message with file and line, abort. */
_Noreturn void die_(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define die(...)      die_(__FILE__, __LINE__, __VA_ARGS__)
#define unreachable() die_(__FILE__, __LINE__, "unreachable")

/* A growable byte buffer (heap), for building text. */
typedef struct StrBuf { char *s; size_t len, cap; } StrBuf;
void  sb_putc(StrBuf *b, char c);
void  sb_puts(StrBuf *b, const char *s);
void  sb_printf(StrBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void  sb_vprintf(StrBuf *b, const char *fmt, va_list ap);
void  sb_free(StrBuf *b);
char *sb_take(StrBuf *b);                          /* returns s (heap, NUL-terminated), resets b */

/* Reads a whole file into a NUL-terminated heap buffer; NULL (errno set) on
 * failure.  read_file_max stops past max bytes (NULL, errno EFBIG): a
 * source that never ends (/dev/zero) is an error, not all of memory. */
char *read_file(const char *path, size_t *len);
char *read_file_max(const char *path, size_t max, size_t *len);
/* The same from an open stream, read from where it is (standard input). */
char *read_stream_max(FILE *f, size_t max, size_t *len);
#define SOURCE_MAX ((size_t)1 << 30) /* the most bytes a .model or .ir file may hold */

/* Suggestions by edit distance (optimal string alignment): feed the
 * candidates; best is the closest within a third of the name's length
 * (1 for names of 3 or fewer), NULL when none is. */
typedef struct Suggest { const char *name; const char *best; int dist; } Suggest;
void suggest_init(Suggest *s, const char *name);
void suggest_add(Suggest *s, const char *cand);

/* FNV-1a of n bytes, going on from h (IR_HASH0 to start): the hash of
 * every table of names (the parser's, the printer's, the elaborator's, the
 * graph's sources, lowering's buffers), of cse's nodes and of the Diag's
 * repeats. */
#define IR_HASH0 1469598103934665603ull
uint64_t ir_hash(uint64_t h, const void *p, size_t n);
uint64_t ir_hash_str(const char *s);               /* ir_hash(IR_HASH0, s, strlen(s)) */

/* A file written whole or not at all (the driver's -o, compile's files):
 * out_open opens a regular file (or a new one) as DEST.PID.tmp beside it,
 * and out_close renames that over DEST once it is written, so that a
 * failed write (a full disk) leaves DEST as it was.  A symbolic link's
 * DEST is the file it names (the link stays a link); the temporary takes
 * DEST's mode.  A file with other hard links is written to the temporary
 * too, then copied into DEST (so that the links see the new text): a
 * failed write leaves DEST as it was, and a copy that fails keeps the
 * temporary (kept), the whole new text, since DEST may be cut short.
 * Written where it is: anything not a regular file (/dev/null, a pipe),
 * and a file in a folder that takes no new file.  out_open: NULL (errno
 * set) when it cannot be opened; out_close(w, ok): ok false (a write that
 * failed) removes the temporary; false (errno set) on failure. */
typedef struct OutWrite {
    FILE *f;
    char  tmp[4200];     /* "" where the file is written in place */
    char  dest[4200];
    char  mode[4];
    bool  copy;          /* DEST has other hard links: the temporary copied into it */
    bool  kept;          /* out_close: the copy failed, the new text is in tmp */
} OutWrite;
FILE *out_open(OutWrite *w, const char *path, const char *mode);
bool  out_close(OutWrite *w, bool ok);
/* Files this process is writing and would leave half made if a signal
 * ended it (out_open's temporary, compile's NAME.PID.tmp and the NAME.c it
 * removes): tmp_guard (the driver's main) installs handlers for SIGINT,
 * SIGTERM and SIGHUP (unless ignored) that remove every file tracked, then
 * end the process as the signal would.  At most 8 at once; a path past
 * that, or longer than 4199 bytes, is not tracked. */
void tmp_track(const char *path);
void tmp_untrack(const char *path);
void tmp_guard(void);
/* The child running now (the C compiler, writing NAME.PID.tmp), or 0: the
 * leader of its own process group, to which the handler passes the signal
 * (the compiler and its cc1, as, ld), waiting for the child first, so that
 * none writes a file after the handler removed it. */
void tmp_child(int pid);

/* Formats a double so that strtod gives back exactly the same value, as
 * briefly as possible ("0.02", "1e-05", "65536").  Deterministic. */
void fmt_double(char buf[32], double v);

/* Where a node or an error comes from: a .model or .ir file position. */
typedef struct SrcLoc { const char *file; int line, col; } SrcLoc;
#define NOLOC ((SrcLoc){0, 0, 0})

/* Diagnostics.  User errors go through error_at: "file:line:col: error: msg",
 * then the source line and a caret under the column (when the source text was
 * registered with diag_add_source).  Errors are counted; callers check
 * d->nerrors.  Output goes to d->out (stderr by default). */
typedef struct SrcFile { const char *name; const char *text; size_t len; struct SrcFile *next; } SrcFile;
typedef struct Diag {
    FILE    *out;
    int      nerrors, nwarnings;
    int      max_errors;          /* stop reporting after this many (0 = 20) */
    SrcFile *files;
    /* an error or warning already printed (same place, same message, same
     * context: a block called in a loop) is counted but not printed again,
     * and does not count towards max_errors; the notes after an error that
     * is not printed (a repeat, or past max_errors) are not either, up to
     * the next error or warning or diag_unmute */
    uint64_t context;             /* the caller's (the elaborator's: the chain of block calls) */
    uint64_t seen[32];            /* hashes of the first 32 printed */
    int      nseen, nrepeats;     /* nrepeats: errors not printed as repeats */
    bool     muted, stopped;      /* stopped: max_errors reached */
    /* quiet: a note of no error or warning (a pass's summary) is not
     * printed (trainc run --quiet); attached: the last error or warning
     * printed is the notes' (until diag_unmute) */
    bool     quiet, attached;
    /* called after an error or warning is printed (not a repeat), to add
     * its caller's notes (the elaborator's: the block calls that led to
     * it, whichever code reported it) */
    void   (*on_report)(void *ctx, SrcLoc at);
    void    *on_report_ctx;
} Diag;
void diag_init(Diag *d, FILE *out);
void diag_free(Diag *d);
void diag_add_source(Diag *d, const char *name, const char *text, size_t len); /* copies name and text */
void error_at(Diag *d, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void warning_at(Diag *d, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void note_at(Diag *d, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void verror_at(Diag *d, SrcLoc loc, const char *kind, const char *fmt, va_list ap);
/* Notes print again: where a caller starts what is not the last error's
 * (a pass, whose summary note is of no error). */
static inline void diag_unmute(Diag *d) { d->muted = d->attached = false; }

/* ===================================================================== */
/* types.c — dtypes and shapes                                           */
/* ===================================================================== */

/* DTYPE(name, bytes, is_float) */
#define DTYPES(X) \
    X(f32, 4, 1) \
    X(f64, 8, 1) \
    X(bf16, 2, 1) \
    X(f16, 2, 1) \
    X(i32, 4, 0) \
    X(i64, 8, 0) \
    X(u8, 1, 0)

typedef enum {
#define X(n, b, f) DT_##n,
    DTYPES(X)
#undef X
    DT__COUNT
} DType;

extern const char *const dtype_name[DT__COUNT];
extern const int         dtype_size[DT__COUNT];
extern const bool        dtype_is_float[DT__COUNT];
bool dtype_parse(const char *s, DType *out);
/* bf16 or f16: mixed precision's half dtypes. */
static inline bool dtype_is_half(DType dt) { return dt == DT_bf16 || dt == DT_f16; }

#define IR_MAX_RANK 8
typedef struct Shape { int rank; int64_t d[IR_MAX_RANK]; } Shape;
typedef struct Type  { DType dt; Shape shape; } Type;

int64_t shape_numel(const Shape *s);               /* 1 for rank 0 */
bool    shape_eq(const Shape *a, const Shape *b);
bool    type_eq(const Type *a, const Type *b);
/* numpy broadcasting of a and b into out; false if incompatible. */
bool    shape_broadcast(const Shape *a, const Shape *b, Shape *out);
/* "f32[4,256,768]"; "f32[]" for a scalar.  Writes into buf (>= 160 bytes). */
char   *type_str(const Type *t, char *buf, size_t n);
char   *shape_str(const Shape *s, char *buf, size_t n); /* "[4,256,768]" */
Shape   shape_make(int rank, const int64_t *d);

/* ===================================================================== */
/* The op table (ops.h)                                                  */
/* ===================================================================== */

enum {
    OPF_SOURCE    = 1 << 0,  /* no operands: input, param, state, constant, iota */
    OPF_POINTWISE = 1 << 1,  /* elementwise, numpy broadcasting */
    OPF_REDUCE    = 1 << 2,  /* reduction over {axes} */
    OPF_DIFF      = 1 << 3,  /* has a gradient rule (passes/grad.c) */
    OPF_COMMUTE   = 1 << 4,  /* binary and commutative (CSE canonicalises operand order) */
    OPF_VIEW      = 1 << 5,  /* reinterprets memory without moving it */
    OPF_RANDOM    = 1 << 6,  /* depends on the RNG (never merged by CSE unless attrs equal) */
    OPF_OPT       = 1 << 7,  /* optimizer op */
    OPF_FUSED     = 1 << 8,  /* made by liger-fusion from plainer ops (passes/liger.c), never by the frontend */
};

typedef enum {
#define OP(name, mi, ma, no, fl) OP_##name,
#include "ops.h"
#undef OP
    OP__COUNT
} Op;

typedef struct OpInfo {
    const char *name;
    int         min_in, max_in;   /* max_in == -1: variadic */
    int         nout;
    unsigned    flags;
} OpInfo;
extern const OpInfo op_info[OP__COUNT];
bool op_lookup(const char *name, Op *out);
#define op_name(op) (op_info[(op)].name)
#define op_has(op, f) ((op_info[(op)].flags & (f)) != 0)

/* ===================================================================== */
/* The graph (ir.c)                                                      */
/* ===================================================================== */

typedef enum { ATTR_INT, ATTR_FLOAT, ATTR_STR, ATTR_INTS } AttrKind;
typedef struct Attr {
    const char *key;
    AttrKind    kind;
    int64_t     i;                /* ATTR_INT */
    double      f;                /* ATTR_FLOAT */
    const char *s;                /* ATTR_STR */
    int         n;                /* ATTR_INTS: count */
    int64_t    *v;                /* ATTR_INTS: values */
} Attr;

typedef struct Node Node;

typedef struct Value {
    int         id;               /* dense index, unique in the graph */
    Type        ty;
    Node       *def;              /* the node that defines it */
    int         res;              /* which result of def */
    const char *name;             /* hint for printing ("x", "h.0.attn.q"); may be NULL */
} Value;

/* Phases of a training step: PH_MICRO nodes run once per micro-batch
 * (grad_accum times), then PH_STEP nodes run once.  A forward graph and a
 * graph without accumulation have only PH_MICRO nodes. */
enum { PH_MICRO = 0, PH_STEP = 1 };

struct Node {
    int      id;                  /* unique in the graph, in creation order */
    Op       op;
    int      nin;
    Value  **in;
    int      nout;
    Value  **out;
    int      nattr;
    Attr    *attrs;               /* sorted by key */
    SrcLoc   loc;                 /* .model location it came from */
    int      phase;               /* PH_MICRO or PH_STEP */
};

/* Graph outputs.  OUT_RESULT: a named result of a step ("loss").
 * OUT_UPDATE: the new value of a param or state source node (target), which
 * replaces it once the phase that computes the value has finished. */
typedef enum { OUT_RESULT, OUT_UPDATE } OutKind;
typedef struct Output {
    OutKind     kind;
    const char *name;             /* OUT_RESULT: result name; OUT_UPDATE: target's name */
    Value      *value;
    Node       *target;           /* OUT_UPDATE only: a param or state node */
} Output;

/* The training configuration: the `train` section of a .model file, carried
 * by the graph (printed as `train {...}` in the IR text).
 * TRAIN_KEY(name, kind, default, allowed values for enums) */
typedef enum { TK_INT, TK_FLOAT, TK_ENUM, TK_STR } TrainKeyKind;
#define TRAIN_KEYS(X) \
    X(optimizer,        TK_ENUM,  "adamw",    "sgd adamw") \
    X(lr,               TK_FLOAT, "0.0003",   NULL) \
    X(beta1,            TK_FLOAT, "0.9",      NULL) \
    X(beta2,            TK_FLOAT, "0.999",    NULL) \
    X(eps,              TK_FLOAT, "1e-08",    NULL) \
    X(weight_decay,     TK_FLOAT, "0",        NULL) \
    X(decay_all,        TK_INT,   "0",        NULL)  /* decay biases and norm gains too */ \
    X(momentum,         TK_FLOAT, "0",        NULL) \
    X(nesterov,         TK_INT,   "0",        NULL) \
    X(schedule,         TK_ENUM,  "constant", "constant cosine linear") \
    X(warmup,           TK_INT,   "0",        NULL) \
    X(min_lr,           TK_FLOAT, "0",        NULL) \
    X(steps,            TK_INT,   "1000",     NULL) \
    X(grad_clip,        TK_FLOAT, "0",        NULL)  /* global-norm clipping; 0 = off */ \
    X(grad_accum,       TK_INT,   "1",        NULL) \
    X(precision,        TK_ENUM,  "fp32",     "fp32 tf32 bf16 fp16") \
    X(loss_scale,       TK_FLOAT, "65536",    NULL)  /* fp16: initial dynamic loss scale */ \
    X(loss_scale_window,TK_INT,   "1000",     NULL)  /* fp16: clean steps before the scale doubles */ \
    X(fusion,           TK_INT,   "1",        NULL)  /* liger-fusion: 0 off, 1 all, else a sum of fusions (docs/passes.md) */ \
    X(pad_tiles,        TK_INT,   "1",        NULL)  /* pad-tiles pass */ \
    X(pad_multiple,     TK_INT,   "0",        NULL)  /* 0 = chosen from dtype and target */ \
    X(checkpoint,       TK_ENUM,  "none",     "none blocks all budget") \
    X(checkpoint_blocks,TK_INT,   "0",        NULL)  /* checkpoint = blocks: how many repeated blocks, the first ones, recompute; 0 = all */ \
    X(memory_budget,    TK_INT,   "0",        NULL)  /* bytes; 0 = none */ \
    X(zero,             TK_INT,   "0",        NULL)  /* ZeRO stage 0..3 */ \
    X(lora_rank,        TK_INT,   "0",        NULL)  /* 0 = no LoRA */ \
    X(lora_alpha,       TK_FLOAT, "0",        NULL) \
    X(lora_targets,     TK_STR,   "",         NULL)  /* comma-separated parameter globs */ \
    X(freeze,           TK_STR,   "",         NULL)  /* comma-separated parameter globs */ \
    X(seed,             TK_INT,   "1337",     NULL) \
    X(eval_every,       TK_INT,   "0",        NULL) \
    X(eval_steps,       TK_INT,   "10",       NULL) \
    X(save_every,       TK_INT,   "0",        NULL) \
    X(sample_logits,    TK_ENUM,  "position", "position all")  /* the sampling graph's logits: one position per sequence, or all */

#define TK_FIELD_TK_INT   int64_t
#define TK_FIELD_TK_FLOAT double
#define TK_FIELD_TK_ENUM  const char *
#define TK_FIELD_TK_STR   const char *
enum {
#define X(name, kind, def, allowed) TKI_##name,
    TRAIN_KEYS(X)
#undef X
    TRAIN_NKEYS
};
typedef struct TrainConfig {
#define X(name, kind, def, allowed) TK_FIELD_##kind name;
    TRAIN_KEYS(X)
#undef X
    SrcLoc at[TRAIN_NKEYS];       /* each key's value in a .model's train section or an .ir file's train line (NOLOC: a default, -D on an .ir file, --set) */
} TrainConfig;

typedef struct TrainKeyInfo {
    const char  *name;
    TrainKeyKind kind;
    const char  *def;             /* default, as text */
    const char  *allowed;         /* enums: space-separated values */
    size_t       offset;          /* offsetof(TrainConfig, name) */
} TrainKeyInfo;
extern const TrainKeyInfo train_keys[];
extern const int          ntrain_keys;
void train_defaults(TrainConfig *tc);
const TrainKeyInfo *train_key_lookup(const char *name);
/* Sets key from text ("0.1", "adamw"); false with a message in err (>= 200 bytes)
 * for an unknown key or a bad value.  Strings are copied into a. */
bool train_set(TrainConfig *tc, Arena *a, const char *key, const char *value, char *err, size_t errn);
/* Where key was set (TrainConfig.at): the location a pass's error about
 * the key's value points at. */
SrcLoc train_loc(const TrainConfig *tc, const char *key);
/* Where an error about the whole graph points: `training` in an .ir
 * header that has it, else the graph's name (NOLOC for a graph built in
 * code). */
#define graph_loc(g) ((g)->training_loc.file ? (g)->training_loc : (g)->loc)
bool train_is_default(const TrainConfig *tc, const TrainKeyInfo *k);
bool train_value_eq(const TrainConfig *a, const TrainConfig *b, const TrainKeyInfo *k);   /* key k has one value in a and b */
/* "40GB", "512MiB", "1.5 TB", "123" -> bytes; false if not a size, with
 * *why (when why is not NULL) saying why for a number and unit that are
 * one but make no size ("0.5B", "0.0001KB"), else NULL. */
bool train_parse_size(const char *s, int64_t *bytes, const char **why);
/* The length of the number the language writes at the start of s (digits,
 * a point and fraction, an exponent with digits; no sign, blank or hex:
 * not strtod's "inf" or "0x10"); 0 if s does not start with one. */
size_t ir_number_len(const char *s);
void train_copy_strings(TrainConfig *tc, Arena *a);   /* re-homes enum/string values and the file names of at[] into a */

typedef struct Graph {
    Arena       *arena;
    const char  *name;            /* "gpt2" */
    Node       **nodes;           /* execution order */
    int          nnodes, capnodes;
    int          ip;              /* insertion point for ir_append; -1 = at the end */
    Output      *outputs;
    int          noutputs, capoutputs;
    int          nvalues;         /* values ever created (ids < nvalues) */
    int          nextnode;        /* node ids ever created */
    TrainConfig  train;
    bool         is_training;     /* autodiff has run */
    SrcLoc       training_loc;    /* an .ir file's: where its header says `training` */
    SrcLoc       loc;             /* the graph's name: `@name` in an .ir file, the model's in a .model */
    struct SrcIndex *srcidx;      /* ir_find_source's index of sources by op and name: made on
                                   * its first call, kept by ir_append, dropped by ir_filter_nodes */
} Graph;

Graph *ir_graph_new(const char *name);
void   ir_graph_free(Graph *g);

/* Building.  A node is made with ir_new, given attributes, typed with
 * ir_infer (shape and dtype inference from the op table; errors are
 * reported at the node's loc) and placed with ir_append.  ir_emit does the
 * last two.  Source nodes get their type from ir_source. */
Node  *ir_new(Graph *g, Op op, int nin, Value *const *in, SrcLoc loc);
Node  *ir_source(Graph *g, Op op, const char *name, Type ty, SrcLoc loc); /* input/param/state; appended */
void   ir_append(Graph *g, Node *n);                /* at g->ip (then ip advances) or at the end */
Node  *ir_emit(Graph *g, Node *n, Diag *d);         /* ir_infer + ir_append; NULL on error */
/* One-result helpers: build, infer, append; NULL on error. */
Value *ir_op1(Graph *g, Op op, Value *a, SrcLoc loc, Diag *d);
Value *ir_op2(Graph *g, Op op, Value *a, Value *b, SrcLoc loc, Diag *d);
Value *ir_const(Graph *g, double v, Type ty, SrcLoc loc);  /* constant node, appended */
Value *ir_new_value(Graph *g, Node *def, int res);

/* Attributes (kept sorted by key; setting an existing key replaces it). */
void        ir_set_int(Graph *g, Node *n, const char *key, int64_t v);
void        ir_set_float(Graph *g, Node *n, const char *key, double v);
void        ir_set_str(Graph *g, Node *n, const char *key, const char *v);
void        ir_set_ints(Graph *g, Node *n, const char *key, int cnt, const int64_t *v);
const Attr *ir_attr(const Node *n, const char *key);                /* NULL if absent */
int64_t     ir_int(const Node *n, const char *key, int64_t dflt);
double      ir_float(const Node *n, const char *key, double dflt);  /* accepts ATTR_INT too */
const char *ir_str(const Node *n, const char *key, const char *dflt);
bool        attr_eq(const Attr *a, const Attr *b);

/* Source-node conveniences. */
const char *ir_source_name(const Node *n);           /* attr "name" */
bool        ir_is_trainable(const Node *n);          /* param without frozen=1 */
Node       *ir_find_source(Graph *g, Op op, const char *name);

/* Outputs. */
void        ir_add_output(Graph *g, const char *name, Value *v);
void        ir_add_update(Graph *g, Node *target, Value *v);
Value      *ir_output(Graph *g, const char *name);   /* OUT_RESULT by name */

/* Uses.  ir_uses computes, for every value id, the list of (node, operand
 * index) that read it; output references are not counted.  Free with free(). */
typedef struct Use { Node *node; int idx; } Use;
typedef struct UseList { int n; Use *u; } UseList;
typedef struct Uses { int nvalues; UseList *of; Use *pool; int *nout_refs; } Uses;
Uses  *ir_uses(Graph *g);                           /* of[v->id] */
void   ir_uses_free(Uses *u);
/* Replaces every operand and output reference to old by new. */
void   ir_replace_all_uses(Graph *g, Value *old, Value *new_);
/* Drops nodes for which keep[node->id] is false (keep is sized g->nextnode). */
void   ir_filter_nodes(Graph *g, const bool *keep);
int    ir_node_index(Graph *g, const Node *n);      /* position in g->nodes, -1 if absent */

/* Deep copy of a graph into a fresh arena (passes that need the original). */
Graph *ir_clone(Graph *g);

/* ===================================================================== */
/* infer.c — shape and dtype inference, one function per op               */
/* ===================================================================== */

/* Sets n->out[i]->ty from the operands and attributes; normalises
 * attributes (negative axes become non-negative, axes sorted).  Reports a
 * located error and returns false when the operands do not fit the op. */
bool ir_infer(Graph *g, Node *n, Diag *d);
int  ir_norm_axis(int64_t axis, int rank);          /* -1 -> rank-1; -1 (invalid) if out of range */

/* ===================================================================== */
/* verify.c — the IR verifier                                            */
/* ===================================================================== */

/* Checks every invariant: operand counts, SSA (defined before use, defined
 * once, each value's def/res agree), types equal re-inference, attributes
 * present and in range, phases ordered, outputs well formed, source names
 * unique.  Names the node and its source line on failure. */
bool ir_verify(Graph *g, Diag *d);

/* ===================================================================== */
/* print.c / parse.c — the IR text format (docs/ir.md)                    */
/* ===================================================================== */

typedef struct PrintOptions { bool locs; } PrintOptions;   /* locs: trailing "# file:line:col" */
void  ir_print(FILE *f, Graph *g, const PrintOptions *po);
char *ir_print_str(Graph *g, const PrintOptions *po);        /* heap */
void  ir_print_node(FILE *f, Graph *g, Node *n);             /* one line, for messages */
void  ir_put_train_value(StrBuf *b, const TrainConfig *tc, const TrainKeyInfo *k);   /* as the train line writes it */
/* Parses IR text; errors at file:line:col of the text.  NULL on error. */
Graph *ir_parse(const char *name, const char *text, Diag *d);
/* Graphviz. */
void  ir_print_dot(FILE *f, Graph *g);

/* ===================================================================== */
/* stats.c — counts                                                      */
/* ===================================================================== */

typedef struct GraphStats {
    int     nodes;
    int64_t params, param_bytes;          /* every param element */
    int64_t trainable_params;
    int64_t fwd_flops;                    /* forward nodes (phase MICRO, not grads) */
    int64_t flops;                        /* every node */
} GraphStats;
int64_t ir_node_flops(Graph *g, Node *n);
int64_t ir_node_bytes(Graph *g, Node *n);   /* bytes read + written */
void    ir_stats(Graph *g, GraphStats *s);
void    ir_print_stats(FILE *f, Graph *g);
void    ir_format_flops(char *buf, size_t n, double flops);   /* "439.10 MFLOP" */

/* ===================================================================== */
/* rng.c — counter-based RNG (Philox-4x32-10), shared with the runtime    */
/* ===================================================================== */
/* See runtime/philox.h: the same header is compiled into the compiler, the
 * runtime and the generated code, so every backend draws the same numbers. */

/* ===================================================================== */
/* interp.c — the reference interpreter                                  */
/* ===================================================================== */

/* Tensors are held as doubles whatever their dtype.  In INTERP_F32 every
 * result is rounded to its dtype (f32, bf16, f16 with round-to-nearest-even);
 * in INTERP_F64 floating values are not rounded at all (f32, bf16 and f16
 * are computed as f64), which is what finite differences need. */
typedef enum { INTERP_F64, INTERP_F32 } InterpMode;
typedef struct Tensor { Type ty; int64_t n; double *data; } Tensor;
typedef struct Interp Interp;

Interp *interp_new(Graph *g, InterpMode mode);
void    interp_free(Interp *it);
/* Initialises every param and state from its initialiser with seed
 * (padded params: see docs/interpreter.md), then the copies below. */
void    interp_init(Interp *it, uint64_t seed);
/* Sets every state with {copy_of=P} to param P rounded to the state's dtype
 * (the half-precision weight copies of mixed-precision): after init and
 * after anything writes the params other than the graph's own updates. */
void    interp_refresh_copies(Interp *it);
/* The current value of a param/state (by its name) or input; NULL if none,
 * or if there was no memory for it (a run reports that, naming it). */
Tensor *interp_source(Interp *it, const char *name);
/* The value computed for v by the last run of its phase (NULL if not computed). */
Tensor *interp_value(Interp *it, const Value *v);
/* Runs every node of a phase, then commits that phase's updates. */
bool    interp_run_phase(Interp *it, int phase, Diag *d);
/* A whole training step: runs PH_MICRO nodes once per micro-batch, calling
 * feed(ctx, micro) before each to set inputs, then PH_STEP nodes.  Returns
 * the mean of the "loss" output over micro-batches (NAN if none). */
double  interp_step(Interp *it, int accum, void (*feed)(void *ctx, Interp *it, int micro), void *ctx, Diag *d);
/* Scalar output by name after a run. */
double  interp_result(Interp *it, const char *name);
/* Whether the interpreter implements op (the op-table completeness test). */
bool    interp_supports(Op op);

/* ===================================================================== */
/* passes/ — one file per pass; pm.c is the pass manager                  */
/* ===================================================================== */

typedef struct PassOptions {
    const char *precision;        /* overrides train.precision when set */
    int         pad_multiple;     /* overrides train.pad_multiple when > 0 */
    const char *target;           /* "cpu" or "cuda" */
    int         accum;            /* overrides train.grad_accum when > 0 */
    bool        quiet;            /* passes print no notes (pad-tiles' report of what it padded) */
    bool        forward_only;     /* an eval or sampling graph: never trained (mixed-precision scales no loss) */
    const Graph *train_graph;     /* an eval or sampling graph's training graph, whose buffers it shares: pad-tiles pads a param only to its type there, mixed precision stores a frozen param in half only where it does */
    /* checkpoint = budget (codegen/compile.c chooses from the memory plan):
     * the last ckpt_keep repeated blocks keep their activations, the ones
     * before them recompute theirs; ckpt_chosen says the choice is made
     * (the pass refuses the policy without it) */
    int          ckpt_keep;
    bool         ckpt_chosen;
    int         *ckpt_nblocks;    /* when set, checkpoint writes the number of repeated blocks here */
} PassOptions;

typedef bool (*PassFn)(Graph *g, const PassOptions *po, Diag *d);
typedef struct PassInfo { const char *name; PassFn fn; const char *help; } PassInfo;
extern const PassInfo pass_list[];
extern const int      npass_list;
const PassInfo *pass_lookup(const char *name);

typedef struct PMOptions {
    const char **print_after;  int nprint_after;
    const char **print_before; int nprint_before;
    bool         print_after_all;
    bool         time_passes;
    bool         verify_each;     /* verify after every pass (on in tests and debug builds) */
    PrintOptions print;
    FILE        *dump;            /* where dumps go (stderr by default) */
    bool        *ran;             /* when set, ran[i] = true once pass_list[i] has run (npass_list entries) */
} PMOptions;
/* Runs the named passes in order; dumps "*** IR Dump After NAME ***" as asked. */
bool pm_run(Graph *g, const char *const *names, int n, const PassOptions *po, const PMOptions *pm, Diag *d);
/* The standard training pipeline for g->train, as a list of pass names:
 * [lora] [freeze] [liger-fusion] [mixed-precision] [pad-tiles] fold cse
 * dce autodiff optimizer fold cse dce [checkpoint dce], the bracketed ones
 * where the train section (or po) turns them on.  g NULL: the passes that are always there (no
 * forward passes, no second fold). */
int  pm_training_pipeline(const Graph *g, const PassOptions *po, const char **names, int max);
/* Its forward passes and the cleanups after them (for the eval and
 * sampling graphs of a compilation). */
int  pm_forward_pipeline(const Graph *g, const PassOptions *po, const char **names, int max);
/* po->precision, else g->train.precision ("fp32" when g is NULL). */
const char *pm_precision(const Graph *g, const PassOptions *po);
/* The padding multiple pad-tiles uses (pad_tiles.c): po->pad_multiple or
 * train.pad_multiple when set, else chosen from the precision and the
 * target: 1 (no padding) for fp32/tf32 on the CPU, 8 for bf16/fp16, and
 * for the vocabulary (vocab) 64 on the cuda target. */
int  pm_pad_multiple(const Graph *g, const PassOptions *po, bool vocab);
/* Whether po's target runs the ops the passes make (false for the cuda
 * target until codegen/emit_cuda.c has their templates: docs/passes.md). */
bool pm_target_has_fused_ops(const PassOptions *po);
/* The mixed precision a forward graph shows it already has ("fp16",
 * "tf32"), or NULL: not run, or bf16, which leaves no mark of its own (pm.c). */
const char *pm_mixed_precision_of(const Graph *g);
/* False, with an error naming `pass`, when g has step nodes or updates:
 * autodiff and mixed-precision take a forward graph (pm.c). */
bool pm_need_forward(Graph *g, const char *pass, Diag *d);

bool pass_verify(Graph *g, const PassOptions *po, Diag *d);     /* verify.c */
bool pass_dce(Graph *g, const PassOptions *po, Diag *d);        /* dce.c */
bool pass_cse(Graph *g, const PassOptions *po, Diag *d);        /* cse.c */
bool pass_fold(Graph *g, const PassOptions *po, Diag *d);       /* fold.c: constant and shape folding */
bool pass_autodiff(Graph *g, const PassOptions *po, Diag *d);   /* autodiff.c */
bool pass_optimizer(Graph *g, const PassOptions *po, Diag *d);  /* optimizer.c */
/* optimizer.c: mixed precision's persistent copy of param p in half dtype
 * dt, the state amp.<dt>.<p> {copy_of=<p>} (the runtime knows copies by
 * these names): its name, and a new one put in g before node index at. */
const char *amp_copy_name(Graph *g, Node *p, DType dt);
Node       *amp_copy_new(Graph *g, Node *p, DType dt, int at);
bool pass_liger_fusion(Graph *g, const PassOptions *po, Diag *d);    /* liger.c */
bool pass_mixed_precision(Graph *g, const PassOptions *po, Diag *d); /* mixed_precision.c */
bool pass_pad_tiles(Graph *g, const PassOptions *po, Diag *d);       /* pad_tiles.c */
bool pass_freeze(Graph *g, const PassOptions *po, Diag *d);          /* freeze.c: train.freeze */
bool pass_checkpoint(Graph *g, const PassOptions *po, Diag *d);      /* checkpoint.c: train.checkpoint */
bool pass_lora(Graph *g, const PassOptions *po, Diag *d);            /* lora.c: train.lora_rank, lora_targets */
/* freeze.c: calls fn for every param that one of the comma-separated
 * fnmatch globs of `list` matches; a glob that matches none is an error
 * ("train.KEY: 'GLOB' matches no parameter ..."). */
bool pm_match_params(Graph *g, const char *key, const char *list, bool (*fn)(Graph *, Node *, void *, Diag *), void *ctx, Diag *d);
/* pad_tiles.c: --report's tile advice: GEMM dimensions (batch x sequence
 * rows, hidden sizes) that are not tile multiples, with the nearest good
 * values. */
void pad_tiles_advice(FILE *f, Graph *g, const PassOptions *po);

/* ===================================================================== */
/* frontend/ — the .model language                                       */
/* ===================================================================== */

typedef struct Define { const char *name; const char *value; } Define;  /* -D name=value */
/* The settings a compiled training step holds that no runtime flag
 * changes: the optimizer's constants, LoRA's, what is frozen ("key=value",
 * values as the train line writes them), then each -D ("-D name=value"),
 * one a line.  Checkpoints record it (TrnTrainDefaults.baked); loading
 * one into a step compiled with others says which differ.  malloc'd. */
char *train_baked(const TrainConfig *tc, const Define *defs, int ndefs);
/* Reads, parses and elaborates a .model file into a forward graph.
 * Registers the source with d for carets.  NULL after reporting errors. */
Graph *fe_load_file(const char *path, const Define *defs, int ndefs, Diag *d);
Graph *fe_load_string(const char *name, const char *text, const Define *defs, int ndefs, Diag *d);

#endif /* TRAINC_IR_H */
