/* frontend/ast.c — syntax-tree constructors. */
#include "ast.h"

#include <string.h>

void ast_vec_push(Arena *a, Vec *vec, void *item) {
    if (vec->n == vec->cap) {
        int cap = vec->cap ? 2 * vec->cap : 4;
        void **nv = arena_alloc(a, sizeof(void *) * (size_t)cap);
        if (vec->n) memcpy(nv, vec->v, sizeof(void *) * (size_t)vec->n);
        vec->v = nv;
        vec->cap = cap;
    }
    vec->v[vec->n++] = item;
}

Expr *ast_expr(Arena *a, ExprKind k, SrcLoc loc) {
    Expr *e = arena_alloc(a, sizeof *e);
    e->kind = k;
    e->loc = loc;
    return e;
}

Expr *ast_binary(Arena *a, int op, Expr *l, Expr *r, SrcLoc loc) {
    Expr *e = ast_expr(a, EX_BINARY, loc);
    e->op = op;
    e->a = l;
    e->b = r;
    return e;
}

Expr *ast_unary(Arena *a, int op, Expr *x, SrcLoc loc) {
    Expr *e = ast_expr(a, EX_UNARY, loc);
    e->op = op;
    e->a = x;
    return e;
}

Stmt *ast_stmt(Arena *a, StmtKind k, SrcLoc loc) {
    Stmt *s = arena_alloc(a, sizeof *s);
    s->kind = k;
    s->loc = loc;
    return s;
}

Top *ast_top(Arena *a, TopKind k, SrcLoc loc) {
    Top *t = arena_alloc(a, sizeof *t);
    t->kind = k;
    t->loc = loc;
    return t;
}

const char *ast_op_name(int op) {
    switch (op) {
    case BOP_EQ: return "==";
    case BOP_NE: return "!=";
    case BOP_LE: return "<=";
    case BOP_GE: return ">=";
    case BOP_AND: return "and";
    case BOP_OR: return "or";
    case 'n': return "not";
    case '+': return "+";
    case '-': return "-";
    case '*': return "*";
    case '/': return "/";
    case '%': return "%";
    case '@': return "@";
    case '<': return "<";
    case '>': return ">";
    }
    return "?";
}
