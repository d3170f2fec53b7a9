/* frontend/ast.h — the syntax tree of a .model file.
 *
 * The parser (parser.y) builds it; elaborate.c walks it to build the forward
 * graph.  Every node lives in one arena that is freed when loading ends, so
 * nothing here is ever freed one by one.  Lists are arrays (Vec) grown in
 * that arena.
 */
#ifndef TRAINC_AST_H
#define TRAINC_AST_H

#include "ir.h"

/* A growable array of pointers, allocated in an arena (old storage is simply
 * left behind when it grows). */
typedef struct Vec { void **v; int n, cap; } Vec;
void ast_vec_push(Arena *a, Vec *vec, void *item);

typedef enum {
    EX_INT, EX_FLOAT, EX_STR, EX_BOOL, EX_NONE, /* literals */
    EX_IDENT,                                   /* name */
    EX_LIST,                                    /* [items] */
    EX_UNARY,                                   /* op a: '-' or 'n' (not) */
    EX_BINARY,                                  /* a op b */
    EX_CALL,                                    /* name(args) */
    EX_LABEL,                                   /* a as name */
} ExprKind;

/* Binary operator codes besides the single characters + - * / % @ < >. */
enum { BOP_EQ = 256, BOP_NE, BOP_LE, BOP_GE, BOP_AND, BOP_OR };

typedef struct Expr Expr;
typedef struct Arg { const char *kw; SrcLoc kwloc; Expr *e; } Arg;   /* kw == NULL: positional */

struct Expr {
    ExprKind    kind;
    SrcLoc      loc;          /* the literal, the name, the operator or the callee */
    int64_t     i;            /* EX_INT; EX_BOOL (0/1) */
    double      f;            /* EX_FLOAT */
    const char *s;            /* EX_STR: text; EX_IDENT, EX_CALL: name; EX_LABEL: label */
    int         op;           /* EX_UNARY, EX_BINARY */
    Expr       *a, *b;        /* operands; EX_LABEL: a is the labelled expression */
    Vec         items;        /* EX_LIST: Expr*; EX_CALL: Arg* */
};

/* A tensor type as written: `[dims]` or `dtype[dims]` (dtype NULL: f32). */
typedef struct TypeExpr { const char *dtype; SrcLoc dtloc; Vec dims; SrcLoc loc; } TypeExpr;

typedef enum { ST_PARAM, ST_ASSIGN, ST_RETURN, ST_IF, ST_REPEAT } StmtKind;

typedef struct Stmt Stmt;
struct Stmt {
    StmtKind    kind;
    SrcLoc      loc;
    /* ST_PARAM */
    const char *name;
    SrcLoc      nameloc;
    TypeExpr   *type;
    Expr       *init;         /* NULL: zeros */
    bool        frozen;
    /* ST_ASSIGN: targets (names with locations) = value */
    Vec         targets;      /* Name* */
    Expr       *value;
    /* ST_RETURN */
    Vec         values;       /* Expr* (may be empty) */
    /* ST_IF: cond, then, else (else_ NULL when absent); ST_REPEAT: cond is the
     * count (an EX_LABEL names the scope), then is the body */
    Expr       *cond;
    Vec         then;         /* Stmt* */
    Vec         else_;        /* Stmt* */
    bool        has_else;
};

typedef struct Name { const char *s; SrcLoc loc; } Name;

/* A block parameter or a model input. */
typedef struct Formal {
    const char *name;
    SrcLoc      loc;
    Expr       *dflt;         /* block: default value or NULL */
    TypeExpr   *type;         /* model input: its type */
} Formal;

typedef enum { TOP_CONST, TOP_BLOCK, TOP_MODEL, TOP_TRAIN } TopKind;

typedef struct TrainItem { const char *key; SrcLoc loc; Expr *value; } TrainItem;

typedef struct Top {
    TopKind     kind;
    SrcLoc      loc;          /* the keyword */
    const char *name;         /* const, block, model */
    SrcLoc      nameloc;
    Expr       *value;        /* const */
    Vec         formals;      /* block, model: Formal* */
    Vec         body;         /* block, model: Stmt*; train: TrainItem* */
} Top;

typedef struct Program { Vec tops; } Program;   /* Top*, in source order */

/* Constructors (ast.c).  All allocate in a. */
Expr *ast_expr(Arena *a, ExprKind k, SrcLoc loc);
Expr *ast_binary(Arena *a, int op, Expr *l, Expr *r, SrcLoc loc);
Expr *ast_unary(Arena *a, int op, Expr *x, SrcLoc loc);
Stmt *ast_stmt(Arena *a, StmtKind k, SrcLoc loc);
Top  *ast_top(Arena *a, TopKind k, SrcLoc loc);
const char *ast_op_name(int op);                 /* "+", "==", "and", ... */

/* parser.y: parses text into *out (arena a); reports errors to d.  The
 * file name is used as given in every SrcLoc.  Returns false after
 * reporting errors. */
bool ast_parse(const char *file, const char *text, size_t len, Arena *a, Diag *d, Program *out);

/* elaborate.c: builds the forward graph of prog into g. */
bool elab_program(Program *prog, Graph *g, const char *file, const Define *defs, int ndefs, Arena *tmp, Diag *d);

#endif /* TRAINC_AST_H */
