/* frontend/elab.h — internals shared by the elaborator's files:
 * elaborate.c (statements, scopes, calls, constants), values.c (values,
 * operators and argument checks), builtins.c (builtin functions),
 * params.c (types, parameters, inputs), train.c (the train section) and
 * names.c (name tables, suggestions).  Not a public header.
 */
#ifndef TRAINC_ELAB_H
#define TRAINC_ELAB_H

#include "ast.h"

/* A compile-time value.  Tensors are graph values; everything else is known
 * while elaborating.  V_POISON stands for a value whose computation already
 * reported an error: every use of it is silent and poisons its result. */
typedef enum { V_POISON, V_NONE, V_INT, V_FLOAT, V_BOOL, V_STR, V_SYM, V_LIST, V_TUPLE, V_TENSOR } VKind;
typedef struct Val {
    VKind       k;
    int64_t     i;            /* V_INT, V_BOOL */
    double      f;            /* V_FLOAT */
    const char *s;            /* V_STR, V_SYM (a bare name in the train section) */
    Value      *t;            /* V_TENSOR */
    struct Val *items;        /* V_LIST, V_TUPLE */
    int         n;
} Val;

static inline Val val_poison(void) { return (Val){.k = V_POISON}; }
static inline Val val_none(void) { return (Val){.k = V_NONE}; }
static inline Val val_int(int64_t i) { return (Val){.k = V_INT, .i = i}; }
static inline Val val_float(double f) { return (Val){.k = V_FLOAT, .f = f}; }
static inline Val val_bool(bool b) { return (Val){.k = V_BOOL, .i = b}; }
static inline Val val_str(const char *s) { return (Val){.k = V_STR, .s = s}; }
static inline Val val_tensor(Value *t) { return t ? (Val){.k = V_TENSOR, .t = t} : val_poison(); }
static inline bool val_is_num(const Val *v) { return v->k == V_INT || v->k == V_FLOAT; }

/* A string-keyed hash map (arena-allocated, grows by doubling); names.c. */
typedef struct MapEnt { const char *key; void *val; } MapEnt;
typedef struct Map { MapEnt *e; int n, cap; } Map;
void *elab_map_get(const Map *m, const char *key);
void  elab_map_put(Arena *a, Map *m, const char *key, void *val);

typedef struct Binding { const char *name; Val v; bool unknown; /* bound to report an unknown name once */ } Binding;

/* One activation: the model body or a block call. */
typedef struct Frame Frame;
struct Frame {
    Frame      *up;
    Top        *blk;          /* NULL for the model */
    const char *scope;        /* parameter scope path ("" at the root, "h.0.attn"), a repeat's pass in it while one runs */
    const char *call_scope;   /* the scope the call gave it (without a repeat's pass): the call chain's notes */
    SrcLoc      call_loc;     /* the call (blocks) */
    bool        unlabelled;   /* called without `as`: scope = block name */
    bool        tainted;      /* an if or repeat was skipped after an error: the frame may have returned in it (the names it assigns are poison) */
    Binding    *vars;         /* in the order they were first bound */
    int         nvars, capvars;
    Map         var_ix;       /* name -> index + 1 in vars, past VAR_MAP_FROM of them (elaborate.c) */
    int         id;           /* unique per activation */
    bool        returned;
    Val         ret;
    SrcLoc      ret_loc;
};

typedef struct Elab {
    Graph      *g;
    Diag       *d;
    Arena      *a;            /* temporary: freed when loading ends */
    const char *file;
    Map         consts;       /* name -> Const* */
    Map         blocks;       /* name -> Top* */
    Map         sources;      /* parameter or input name -> Source* */
    Map         reported;     /* errors reported once per source location */
    Frame      *fr;           /* NULL while evaluating constants or the train section */
    bool        in_train;     /* bare unknown names are symbols */
    int         depth;        /* recursion depth of the elaborator itself */
    long        steps;        /* work done, against a budget */
    bool        over_budget;
    Value      *seed;         /* rng.seed, made on the first dropout */
    int         stream;       /* next dropout stream */
    int         nframes;      /* activations so far (Frame.id) */
} Elab;

/* Limits that keep hostile input from exhausting time, memory or the stack. */
enum { ELAB_MAX_DEPTH = 400, ELAB_MAX_STEPS = 1000000 };
#define ELAB_MAX_NUMEL ((int64_t)1 << 48)

/* elaborate.c */
Val  elab_eval(Elab *e, Expr *x);
bool elab_tick(Elab *e, SrcLoc loc);                  /* counts work; false (after one error) when over budget */
void elab_note(Elab *e, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *elab_join(Elab *e, const char *scope, const char *name);   /* "scope.name" or "name" */

/* Suggestions by edit distance (Suggest, ir.h): feed candidates, then read the hint. */
#define elab_suggest_init suggest_init
#define elab_suggest_add suggest_add
const char *elab_suggest_hint(Elab *e, const Suggest *s);  /* "; did you mean 'x'?" or "" */
/* For a bare name of the train section (V_SYM) where a number was wanted,
 * "; did you mean 'x'?" naming a constant close to it; else "". */
const char *elab_const_hint(Elab *e, const Val *v);

void elab_set_var(Elab *e, const char *name, Val v);  /* binds in the current frame; names an unnamed tensor */
/* Evaluates the arguments of a call and binds them to n parameters (one
 * slot each in vals, locs, given); false after an error or a poison argument. */
bool elab_bind_args(Elab *e, Expr *call, int n, const char **names, const bool *optional, Val *vals, SrcLoc *locs, bool *given);

/* params.c */
void elab_param(Elab *e, Stmt *s);                   /* `param NAME: TYPE = INIT` */
void elab_input(Elab *e, Formal *f);                 /* a model input */

/* train.c: applies the train section to g->train */
void elab_train(Elab *e, Top *train);

/* values.c */
const char *elab_desc(const Val *v, char *buf, size_t n);  /* "an integer", "a tensor f32[4,8]", ... */
Val  elab_emit(Elab *e, Node *n);                          /* ir_emit; result 0, or poison */
bool elab_check_type(Elab *e, const Type *t, SrcLoc loc);  /* positive dims, not too many elements */
Val  elab_binary(Elab *e, int op, Val a, Val b, SrcLoc loc);
Val  elab_unary(Elab *e, int op, Val a, SrcLoc loc);
/* Whether the number num is a value of dtype dt, with an error at loc if
 * not (of names where it goes: "dtype u8", "the tensor f16[4]"): an
 * integer dtype takes an integer it holds (u8 0..255, i32 32 bits; i64 up
 * to 2^53, which a constant's double holds exactly), a float dtype a
 * number that does not round to infinity in it (f16 65504; bf16 and f32
 * about 3.4e38).  One that rounds to 0 is taken, as a literal that small is. */
bool elab_num_fits(Elab *e, Val num, DType dt, const char *of, SrcLoc loc);
/* A number used with a tensor: a scalar constant node of like's dtype (NULL after an error). */
Value *elab_scalar_for(Elab *e, Val num, const Value *like, SrcLoc loc);
/* Argument checks: false (after reporting, unless v is poison) when v is not
 * what is wanted; `what` names it in the message ("argument 'x' of relu"). */
bool elab_want(Elab *e, bool ok, Val v, SrcLoc loc, const char *what, const char *kind);
bool elab_want_int(Elab *e, Val v, SrcLoc loc, const char *what, int64_t *out);
bool elab_want_num(Elab *e, Val v, SrcLoc loc, const char *what, double *out);
bool elab_want_bool(Elab *e, Val v, SrcLoc loc, const char *what, bool *out);  /* true/false or an integer */
bool elab_want_tensor(Elab *e, Val v, SrcLoc loc, const char *what, Value **out);
bool elab_want_str(Elab *e, Val v, SrcLoc loc, const char *what, const char **out);
bool elab_want_ints(Elab *e, Val v, SrcLoc loc, const char *what, int max, int64_t *out, int *n, bool or_int);  /* a list */
bool elab_want_dtype(Elab *e, Val v, SrcLoc loc, DType *out);

/* builtins.c */

/* A builtin function: its parameters ("x, axis?, keepdim?": '?' marks an
 * optional one) and its implementation, which gets one slot per parameter
 * (V_NONE with given[i] false when omitted). */
#define ELAB_MAX_ARGS 8
typedef struct Builtin Builtin;
typedef Val BuiltinFn(Elab *e, const Builtin *b, Val *a, const SrcLoc *al, const bool *given, SrcLoc loc);
struct Builtin { const char *name; const char *params; BuiltinFn *fn; Op op; };
const Builtin *elab_builtin(const char *name);
extern const Builtin elab_builtins[];
extern const int     elab_nbuiltins;
/* Splits b->params into names (pointing into buf) and optional flags; returns the count. */
int elab_builtin_params(const Builtin *b, char buf[128], const char **names, bool *optional);

#endif /* TRAINC_ELAB_H */
