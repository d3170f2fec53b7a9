/* frontend/elaborate.c — from the syntax tree to the forward graph.
 *
 * Elaboration runs the program at compile time: constants are evaluated
 * (with -D overrides), the model body is executed statement by statement,
 * block calls get a fresh variable scope and a parameter scope path, repeat
 * unrolls, if picks a branch.  Tensor operations become graph nodes
 * (values.c, builtins.c); every other value is computed here.  Errors are reported
 * and elaboration goes on with a poison value, so one run shows several
 * errors.  Work, recursion depth and tensor sizes are bounded so that no
 * input can exhaust the stack, time or memory.
 */
#include "elab.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers ---- */

const char *elab_join(Elab *e, const char *scope, const char *name) {
    if (!scope || !*scope) return name;
    return arena_printf(e->a, "%s.%s", scope, name);
}

void elab_note(Elab *e, SrcLoc loc, const char *fmt, ...) {
    va_list ap;   /* (not printed after an error that was not: verror_at) */
    va_start(ap, fmt);
    verror_at(e->d, loc, "note", fmt, ap);
    va_end(ap);
}

/* The calls that led here, innermost first: of a chain longer than 11,
 * the first 9 (the last of them saying how many are left out) and the
 * outermost 2.  An innermost call at `at` (an error reported at the call
 * itself) is not noted again.  Diag.on_report while elaborating (ctx the
 * Elab): every error and warning, from the elaborator, a builtin or shape
 * inference, gets the chain. */
static void note_chain(void *ctx, SrcLoc at) {
    Elab *e = ctx;
    int n = 0, k = 0;
    Frame *top = e->fr;
    if (top && top->blk && top->call_loc.file && at.file && strcmp(top->call_loc.file, at.file) == 0 && top->call_loc.line == at.line &&
        top->call_loc.col == at.col)
        top = top->up;
    for (Frame *f = top; f && f->blk; f = f->up) n++;
    for (Frame *f = top; f && f->blk; f = f->up, k++) {
        if (n > 11 && k > 8 && k < n - 2) continue;
        if (n > 11 && k == 8)
            elab_note(e, f->call_loc, "in block '%s' (scope '%s') called here, within %d calls left out", f->blk->name, f->call_scope, n - 11);
        else
            elab_note(e, f->call_loc, "in block '%s' (scope '%s') called here", f->blk->name, f->call_scope);
    }
}

static void over_budget(Elab *e, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void over_budget(Elab *e, SrcLoc loc, const char *fmt, ...) {
    if (e->over_budget) return;
    e->over_budget = true;
    va_list ap;
    va_start(ap, fmt);
    verror_at(e->d, loc, "error", fmt, ap);
    va_end(ap);
}

bool elab_tick(Elab *e, SrcLoc loc) {
    if (e->over_budget) return false;
    if (++e->steps > ELAB_MAX_STEPS) {
        over_budget(e, loc, "elaboration takes more than %d steps here; is a repeat count too large?", ELAB_MAX_STEPS);
        return false;
    }
    return true;
}

static bool enter(Elab *e, SrcLoc loc) {
    if (!elab_tick(e, loc)) return false;
    if (e->depth >= ELAB_MAX_DEPTH) {
        over_budget(e, loc, "the program nests more than %d levels deep here (expressions, statements and block calls)", ELAB_MAX_DEPTH);
        return false;
    }
    e->depth++;
    return true;
}

/* ---- variables ---- */

/* A frame of a few variables (most block calls) is searched; one of more
 * gets a hash map (var_ix), which a block call's frame would not repay in
 * memory. */
enum { VAR_MAP_FROM = 16 };

static Binding *find_var(Frame *f, const char *name) {
    if (f->nvars <= VAR_MAP_FROM) {
        for (int i = f->nvars - 1; i >= 0; i--)
            if (strcmp(f->vars[i].name, name) == 0) return &f->vars[i];
        return NULL;
    }
    intptr_t i = (intptr_t)elab_map_get(&f->var_ix, name);   /* index + 1 */
    return i ? &f->vars[i - 1] : NULL;
}

/* Binds name in the current frame; with hint, a tensor without a name gets
 * "scope.name" (assignments do this; block arguments do not). */
static void bind_var(Elab *e, const char *name, Val v, bool hint) {
    Frame *f = e->fr;
    if (hint && v.k == V_TENSOR && !v.t->name) v.t->name = arena_strdup(e->g->arena, elab_join(e, f->scope, name));
    Binding *b = find_var(f, name);
    if (b) {
        b->v = v;
        b->unknown = false;
        return;
    }
    if (f->nvars == f->capvars) {
        int cap = f->capvars ? 2 * f->capvars : 16;
        Binding *nb = arena_alloc(e->a, sizeof(Binding) * (size_t)cap);
        if (f->nvars) memcpy(nb, f->vars, sizeof(Binding) * (size_t)f->nvars);
        f->vars = nb;
        f->capvars = cap;
    }
    f->vars[f->nvars++] = (Binding){name, v, false};
    if (f->nvars == VAR_MAP_FROM + 1) /* the map from now on: every variable so far */
        for (int i = 0; i < f->nvars; i++) elab_map_put(e->a, &f->var_ix, f->vars[i].name, (void *)(intptr_t)(i + 1));
    else if (f->nvars > VAR_MAP_FROM + 1)
        elab_map_put(e->a, &f->var_ix, name, (void *)(intptr_t)f->nvars);
}

void elab_set_var(Elab *e, const char *name, Val v) { bind_var(e, name, v, true); }

/* ---- constants ---- */

typedef struct Const {
    Top   *decl;
    Val    v;
    int    state;             /* 0 not evaluated, 1 being evaluated, 2 done */
} Const;

static Val const_value(Elab *e, Const *c, SrcLoc use) {
    if (c->state == 2) return c->v;
    if (c->state == 1) {
        error_at(e->d, use, "constant '%s' depends on itself", c->decl->name);
        elab_note(e, c->decl->nameloc, "'%s' is defined here", c->decl->name);
        return val_poison();
    }
    c->state = 1;
    Frame *fr = e->fr;
    bool in_train = e->in_train;
    e->fr = NULL;
    e->in_train = false;
    Val v = elab_eval(e, c->decl->value);
    e->fr = fr;
    e->in_train = in_train;
    if (v.k == V_TUPLE) {
        char b[200];
        error_at(e->d, c->decl->value->loc, "a constant holds one value, not %s", elab_desc(&v, b, sizeof b));
        v = val_poison();
    }
    c->v = v;
    c->state = 2;
    return v;
}

/* Whether text is a number as the language writes one, with an optional
 * minus: digits, a point, an exponent (not strtod's "inf", "nan", hex or
 * leading blanks). */
static bool number_text(const char *t) {
    if (*t == '-') t++;
    size_t n = ir_number_len(t);
    return n && t[n] == 0;
}

/* The value of -D name=TEXT: an integer, a float, true/false, or a string. */
static Val define_value(Elab *e, const char *name, const char *text) {
    char *end;
    if (number_text(text)) {
        errno = 0;
        long long i = strtoll(text, &end, 10);
        if (!*end && errno == 0) return val_int(i);
        if (!*end) { /* digits only, out of range: as the lexer says of such a literal */
            error_at(e->d, NOLOC, "-D %s=%s: integer '%s' does not fit in 64 bits", name, text, text);
            return val_poison();
        }
        errno = 0;
        double f = strtod(text, &end);
        if (!*end && errno == ERANGE && isinf(f)) { /* as the lexer says; an underflow is 0 or subnormal there too */
            error_at(e->d, NOLOC, "-D %s=%s: number '%s' is too large", name, text, text);
            return val_poison();
        }
        if (!*end) return val_float(f);
    }
    if (strcmp(text, "true") == 0) return val_bool(true);
    if (strcmp(text, "false") == 0) return val_bool(false);
    return val_str(arena_strdup(e->a, text));
}

/* ---- names ---- */

static void suggest_names(Elab *e, Suggest *s) {
    if (e->fr)
        for (int i = 0; i < e->fr->nvars; i++)
            if (!e->fr->vars[i].unknown) elab_suggest_add(s, e->fr->vars[i].name); /* not a name that is unknown too */
    for (int i = 0; i < e->consts.cap; i++) elab_suggest_add(s, e->consts.e[i].key);
}

static Val lookup(Elab *e, Expr *x) {
    if (e->fr) {
        Binding *b = find_var(e->fr, x->s);
        if (b) return b->v;
    }
    Const *c = elab_map_get(&e->consts, x->s);
    if (c) return const_value(e, c, x->loc);
    if (e->in_train) return (Val){.k = V_SYM, .s = x->s};
    if (elab_map_get(&e->blocks, x->s)) {
        error_at(e->d, x->loc, "'%s' is a block; call it: %s(...)", x->s, x->s);
    } else if (elab_builtin(x->s)) {
        error_at(e->d, x->loc, "'%s' is a builtin function; call it: %s(...)", x->s, x->s);
    } else {
        Suggest s;
        elab_suggest_init(&s, x->s);
        suggest_names(e, &s);
        error_at(e->d, x->loc, "unknown name '%s'%s", x->s, elab_suggest_hint(e, &s));
    }
    if (e->fr) { /* report it once */
        elab_set_var(e, x->s, val_poison());
        find_var(e->fr, x->s)->unknown = true;
    }
    return val_poison();
}

/* ---- calls ---- */

/* "name(a, b, c=...)" */
static const char *signature(Elab *e, const char *name, int n, const char **names, const bool *optional) {
    StrBuf sb = {0};
    sb_printf(&sb, "%s(", name);
    for (int i = 0; i < n; i++) sb_printf(&sb, "%s%s%s", i ? ", " : "", names[i], optional[i] ? "=..." : "");
    sb_putc(&sb, ')');
    const char *s = arena_strdup(e->a, sb.s);
    sb_free(&sb);
    return s;
}

/* Evaluates the arguments of call and binds them to n parameters: vals,
 * locs and given get one slot each.  False after reporting an error or
 * when an argument is poison. */
bool elab_bind_args(Elab *e, Expr *call, int n, const char **names, const bool *optional, Val *vals, SrcLoc *locs, bool *given) {
    bool ok = true;
    int pos = 0;
    const char *sig = NULL, *kw = NULL; /* kw: the last keyword argument so far */
    for (int i = 0; i < n; i++) {
        vals[i] = val_none();
        locs[i] = call->loc;
        given[i] = false;
    }
    for (int k = 0; k < call->items.n; k++) {
        Arg *arg = call->items.v[k];
        Val v = elab_eval(e, arg->e);
        if (v.k == V_POISON) ok = false;
        int slot = -1;
        if (!arg->kw) {
            if (kw) { /* it would fill the first free slot, perhaps the keyword's */
                error_at(e->d, arg->e->loc, "a positional argument after the keyword argument '%s' (positional arguments come first)", kw);
                ok = false;
                continue;
            }
            if (pos >= n) {
                if (!sig) sig = signature(e, call->s, n, names, optional);
                error_at(e->d, arg->e->loc, "too many arguments: %s takes %d", sig, n);
                ok = false;
                break;
            }
            slot = pos++;
        } else {
            kw = arg->kw;
            for (int i = 0; i < n; i++)
                if (strcmp(names[i], arg->kw) == 0) slot = i;
            if (slot < 0) {
                Suggest s;
                elab_suggest_init(&s, arg->kw);
                for (int i = 0; i < n; i++)
                    if (!given[i]) elab_suggest_add(&s, names[i]); /* not one given already */
                if (!sig) sig = signature(e, call->s, n, names, optional);
                error_at(e->d, arg->kwloc, "unknown keyword argument '%s' for %s%s", arg->kw, sig, elab_suggest_hint(e, &s));
                ok = false;
                continue;
            }
            if (given[slot]) {
                error_at(e->d, arg->kwloc, "argument '%s' is given twice", arg->kw);
                ok = false;
                continue;
            }
        }
        given[slot] = true;
        vals[slot] = v;
        locs[slot] = arg->e->loc;
    }
    for (int i = 0; ok && i < n; i++)
        if (!given[i] && !optional[i]) {
            if (!sig) sig = signature(e, call->s, n, names, optional);
            error_at(e->d, call->loc, "missing argument '%s' in call to %s", names[i], sig);
            ok = false;
        }
    return ok;
}

static void exec_stmts(Elab *e, Vec *stmts);

/* "block 'A' calls itself (A -> B -> A)": first is the frame of the earlier A. */
static void __attribute__((noinline)) recursion_error(Elab *e, Top *blk, Expr *call, Frame *first) {
    StrBuf sb = {0};
    sb_puts(&sb, blk->name);
    for (Frame *f = e->fr; f != first; f = f->up) {
        /* prepend "NAME -> " */
        StrBuf t = {0};
        sb_printf(&t, "%s -> %s", f->blk->name, sb.s);
        sb_free(&sb);
        sb = t;
    }
    error_at(e->d, call->loc, "block '%s' calls itself (%s -> %s); blocks cannot be recursive", blk->name, blk->name, sb.s);
    sb_free(&sb);
}

static Val call_block(Elab *e, Top *blk, Expr *call, const char *label) {
    if (!e->fr) {
        error_at(e->d, call->loc, "block '%s' is called outside a model or block body; constants must be compile-time values", blk->name);
        return val_poison();
    }
    for (Frame *f = e->fr; f; f = f->up)
        if (f->blk == blk) {
            recursion_error(e, blk, call, f);
            return val_poison();
        }
    int n = blk->formals.n;
    const char **names = arena_alloc(e->a, sizeof(char *) * (size_t)(n + 1));
    bool *optional = arena_alloc(e->a, sizeof(bool) * (size_t)(n + 1));
    Val *vals = arena_alloc(e->a, sizeof(Val) * (size_t)(n + 1));
    SrcLoc *locs = arena_alloc(e->a, sizeof(SrcLoc) * (size_t)(n + 1));
    bool *given = arena_alloc(e->a, sizeof(bool) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) {
        Formal *f = blk->formals.v[i];
        names[i] = f->name;
        optional[i] = f->dflt != NULL;
    }
    if (!elab_bind_args(e, call, n, names, optional, vals, locs, given)) return val_poison();
    Frame nf = {.up = e->fr, .blk = blk, .call_loc = call->loc, .unlabelled = label == NULL, .id = ++e->nframes};
    nf.scope = elab_join(e, e->fr->scope, label ? label : blk->name);
    nf.call_scope = nf.scope;
    e->fr = &nf;
    /* the errors of the same line from another call are other errors (a
     * Diag prints an error once per place and context) */
    uint64_t ctx0 = e->d->context;
    e->d->context = (ctx0 ^ ((uint64_t)(uint32_t)call->loc.line << 32 | (uint32_t)call->loc.col)) * 1099511628211ull + 1;
    bool ok = true;
    for (int i = 0; i < n; i++) {
        Formal *f = blk->formals.v[i];
        Val v = given[i] ? vals[i] : elab_eval(e, f->dflt);
        if (v.k == V_POISON) ok = false;
        bind_var(e, f->name, v, false);
    }
    if (ok) exec_stmts(e, &blk->body);
    e->fr = nf.up;
    e->d->context = ctx0;
    /* a body that skipped an if or repeat after an error and then did not
     * return may have returned in it: its result is poison, not none */
    if (!ok || (nf.tainted && !nf.returned)) return val_poison();
    return nf.returned ? nf.ret : val_none();
}

static Val eval_call(Elab *e, Expr *call, const char *label, SrcLoc label_loc) {
    Top *blk = elab_map_get(&e->blocks, call->s);
    if (blk) return call_block(e, blk, call, label);
    const Builtin *b = elab_builtin(call->s);
    if (!b) {
        Binding *v = e->fr ? find_var(e->fr, call->s) : NULL;
        if ((v && !v->unknown) || elab_map_get(&e->consts, call->s)) { /* (a name already unknown: an unknown function too) */
            error_at(e->d, call->loc, "'%s' is a value, not a function", call->s);
            return val_poison();
        }
        const char *key = arena_printf(e->a, "function:%s", call->s); /* reported once, as an unknown name is */
        if (elab_map_get(&e->reported, key)) return val_poison();
        elab_map_put(e->a, &e->reported, key, e);
        Suggest s;
        elab_suggest_init(&s, call->s);
        for (int i = 0; i < e->blocks.cap; i++) elab_suggest_add(&s, e->blocks.e[i].key);
        for (int i = 0; i < elab_nbuiltins; i++) elab_suggest_add(&s, elab_builtins[i].name);
        error_at(e->d, call->loc, "unknown function '%s'%s", call->s, elab_suggest_hint(e, &s));
        return val_poison();
    }
    if (label) error_at(e->d, label_loc, "`as %s` names the scope of a block call, but '%s' is a builtin function", label, call->s);
    char buf[128];
    const char *names[ELAB_MAX_ARGS];
    bool optional[ELAB_MAX_ARGS], given[ELAB_MAX_ARGS];
    Val vals[ELAB_MAX_ARGS];
    SrcLoc locs[ELAB_MAX_ARGS];
    int n = elab_builtin_params(b, buf, names, optional);
    if (!elab_bind_args(e, call, n, names, optional, vals, locs, given)) return val_poison();
    return b->fn(e, b, vals, locs, given, call->loc);
}

/* ---- expressions ---- */

static Val eval_inner(Elab *e, Expr *x) {
    switch (x->kind) {
    case EX_INT: return val_int(x->i);
    case EX_FLOAT: return val_float(x->f);
    case EX_STR: return val_str(x->s);
    case EX_BOOL: return val_bool(x->i != 0);
    case EX_NONE: return val_none();
    case EX_IDENT: return lookup(e, x);
    case EX_LIST: {
        Val l = {.k = V_LIST, .n = x->items.n};
        l.items = arena_alloc(e->a, sizeof(Val) * (size_t)(l.n ? l.n : 1));
        bool ok = true;
        for (int i = 0; i < l.n; i++) {
            l.items[i] = elab_eval(e, x->items.v[i]);
            if (l.items[i].k == V_POISON) ok = false;
            if (l.items[i].k == V_TUPLE) {
                error_at(e->d, ((Expr *)x->items.v[i])->loc, "a list item must be one value, not %d values", l.items[i].n);
                ok = false;
            }
        }
        return ok ? l : val_poison();
    }
    case EX_UNARY: return elab_unary(e, x->op, elab_eval(e, x->a), x->loc);
    case EX_BINARY: {
        Val a = elab_eval(e, x->a);
        if (x->op == BOP_AND || x->op == BOP_OR) {
            bool ba, bb;
            if (!elab_want_bool(e, a, x->a->loc, "the left side of 'and'/'or'", &ba)) return val_poison();
            if (ba == (x->op == BOP_OR)) return val_bool(ba);
            if (!elab_want_bool(e, elab_eval(e, x->b), x->b->loc, "the right side of 'and'/'or'", &bb)) return val_poison();
            return val_bool(bb);
        }
        Val b = elab_eval(e, x->b);
        return elab_binary(e, x->op, a, b, x->loc);
    }
    case EX_CALL: return eval_call(e, x, NULL, x->loc);
    case EX_LABEL:
        if (x->a->kind == EX_CALL) return eval_call(e, x->a, x->s, x->loc);
        error_at(e->d, x->loc, "`as %s` names the scope of a block call, but this is not a call", x->s);
        return val_poison();
    }
    return val_poison();
}

Val elab_eval(Elab *e, Expr *x) {
    if (!enter(e, x->loc)) return val_poison();
    Val v = eval_inner(e, x);
    e->depth--;
    return v;
}

/* ---- statements ---- */

static void exec_assign(Elab *e, Stmt *s) {
    Val v = elab_eval(e, s->value);
    int n = s->targets.n;
    if (n == 1) {
        Name *t = s->targets.v[0];
        if (v.k == V_TUPLE) {
            error_at(e->d, t->loc, "the right side gives %d values; assign them to %d names (a, b = ...)", v.n, v.n);
            v = val_poison();
        }
        elab_set_var(e, t->s, v);
        return;
    }
    bool ok = v.k == V_POISON || ((v.k == V_TUPLE || v.k == V_LIST) && v.n == n);
    if (!ok) {
        char b[200];
        error_at(e->d, s->loc, "cannot unpack %s into %d names", elab_desc(&v, b, sizeof b), n);
    }
    for (int i = 0; i < n; i++) {
        Name *t = s->targets.v[i];
        elab_set_var(e, t->s, ok && v.k != V_POISON ? v.items[i] : val_poison());
    }
}

static void exec_return(Elab *e, Stmt *s) {
    Frame *f = e->fr;
    Val r = val_none();
    if (s->values.n == 1) {
        r = elab_eval(e, s->values.v[0]);
    } else if (s->values.n > 1) {
        r = (Val){.k = V_TUPLE, .n = s->values.n};
        r.items = arena_alloc(e->a, sizeof(Val) * (size_t)r.n);
        for (int i = 0; i < r.n; i++) {
            r.items[i] = elab_eval(e, s->values.v[i]);
            if (r.items[i].k == V_TUPLE) {
                error_at(e->d, ((Expr *)s->values.v[i])->loc, "a returned item must be one value, not %d values", r.items[i].n);
                r.items[i] = val_poison();
            }
            if (r.items[i].k == V_POISON) r = val_poison();
            if (r.k == V_POISON) break;
        }
    }
    f->returned = true;
    f->ret = r;
    f->ret_loc = s->values.n ? ((Expr *)s->values.v[0])->loc : s->loc;
}

/* A name an if or repeat skipped after an error would have bound: poison
 * where it is unbound, so that no later use of it is reported (a bound
 * one keeps its value, and the errors it leads to). */
static void skip_name(Elab *e, const char *name) {
    if (!find_var(e->fr, name)) elab_set_var(e, name, val_poison());
}

/* An if or repeat skipped after an error: the names its bodies assign (or
 * declare as a parameter) are not unknown later, while other unknown
 * names still are; and the frame may have returned in it (tainted). */
static void skip_bodies(Elab *e, const Stmt *s) {
    const Vec *bodies[2] = {&s->then, &s->else_};
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < bodies[b]->n; i++) {
            const Stmt *t = bodies[b]->v[i];
            if (t->kind == ST_PARAM) skip_name(e, t->name);
            if (t->kind == ST_ASSIGN)
                for (int k = 0; k < t->targets.n; k++) skip_name(e, ((Name *)t->targets.v[k])->s);
            if (t->kind == ST_IF || t->kind == ST_REPEAT) skip_bodies(e, t);
        }
    e->fr->tainted = true;
}

static void exec_if(Elab *e, Stmt *s) {
    bool c;
    if (s->cond->kind == EX_LABEL) {
        error_at(e->d, s->cond->loc, "`as` does not belong in an if condition");
        skip_bodies(e, s);
        return;
    }
    if (!elab_want_bool(e, elab_eval(e, s->cond), s->cond->loc, "an if condition", &c)) {
        skip_bodies(e, s);
        return;
    }
    if (c) exec_stmts(e, &s->then);
    else if (s->has_else) exec_stmts(e, &s->else_);
}

static void exec_repeat(Elab *e, Stmt *s) {
    Expr *cnt = s->cond;
    const char *label = NULL;
    if (cnt->kind == EX_LABEL) {
        label = cnt->s;
        cnt = cnt->a;
    }
    int64_t n;
    if (!elab_want_int(e, elab_eval(e, cnt), cnt->loc, "a repeat count", &n)) {
        skip_bodies(e, s);
        return;
    }
    if (n <= 0) {
        error_at(e->d, cnt->loc, "a repeat count must be positive, not %lld", (long long)n);
        skip_bodies(e, s);
        return;
    }
    Frame *f = e->fr;
    const char *saved = f->scope;
    /* a step per pass too: an empty body counts against the budget */
    for (int64_t i = 0; i < n && !f->returned && elab_tick(e, s->loc); i++) {
        const char *seg = label ? arena_printf(e->a, "%s.%lld", label, (long long)i) : arena_printf(e->a, "%lld", (long long)i);
        f->scope = elab_join(e, saved, seg);
        exec_stmts(e, &s->then);
    }
    f->scope = saved;
}

static void exec_stmt(Elab *e, Stmt *s) {
    if (!enter(e, s->loc)) return;
    switch (s->kind) {
    case ST_PARAM: elab_param(e, s); break;
    case ST_ASSIGN: exec_assign(e, s); break;
    case ST_RETURN: exec_return(e, s); break;
    case ST_IF: exec_if(e, s); break;
    case ST_REPEAT: exec_repeat(e, s); break;
    }
    e->depth--;
}

static void exec_stmts(Elab *e, Vec *stmts) {
    for (int i = 0; i < stmts->n && !e->fr->returned && !e->over_budget; i++) exec_stmt(e, stmts->v[i]);
}

/* ---- the model ---- */

static void elab_model(Elab *e, Top *m) {
    Graph *g = e->g;
    g->name = arena_strdup(g->arena, m->name);
    g->loc = m->nameloc;
    Frame root = {.scope = "", .id = ++e->nframes};
    e->fr = &root;
    for (int i = 0; i < m->formals.n; i++) {
        Formal *f = m->formals.v[i];
        elab_input(e, f);
    }
    exec_stmts(e, &m->body);
    e->fr = NULL;
    if (e->over_budget) return;
    if (!root.returned) {
        if (root.tainted) return; /* the if or repeat skipped after an error may have returned */
        error_at(e->d, m->nameloc, "model '%s' does not return a loss (end it with `return LOSS`)", m->name);
        return;
    }
    Val r = root.ret;
    if (r.k == V_POISON) return;
    if (r.k != V_TENSOR || r.t->ty.shape.rank != 0 || !dtype_is_float[r.t->ty.dt]) {
        char b[200];
        error_at(e->d, root.ret_loc, "the model must return a scalar floating-point loss, not %s", elab_desc(&r, b, sizeof b));
        return;
    }
    ir_add_output(g, "loss", r.t);
}

/* ---- the program ---- */

bool elab_program(Program *prog, Graph *g, const char *file, const Define *defs, int ndefs, Arena *tmp, Diag *d) {
    Elab E = {.g = g, .d = d, .a = tmp, .file = file}, *e = &E;
    int errors0 = d->nerrors;
    void (*report0)(void *, SrcLoc) = d->on_report;
    void *report_ctx0 = d->on_report_ctx;
    d->on_report = note_chain;
    d->on_report_ctx = e;
    Top *model = NULL, *train = NULL;
    for (int i = 0; i < prog->tops.n; i++) {
        Top *t = prog->tops.v[i];
        switch (t->kind) {
        case TOP_CONST: {
            Const *prev = elab_map_get(&e->consts, t->name);
            if (prev) {
                error_at(d, t->nameloc, "constant '%s' is defined twice", t->name);
                elab_note(e, prev->decl->nameloc, "first defined here");
                break;
            }
            Const *c = arena_alloc(tmp, sizeof *c);
            c->decl = t;
            elab_map_put(tmp, &e->consts, t->name, c);
            break;
        }
        case TOP_BLOCK: {
            Top *prev = elab_map_get(&e->blocks, t->name);
            if (prev) {
                error_at(d, t->nameloc, "block '%s' is defined twice", t->name);
                elab_note(e, prev->nameloc, "first defined here");
                break;
            }
            if (elab_builtin(t->name)) {
                error_at(d, t->nameloc, "'%s' is the name of a builtin function; choose another block name", t->name);
                break;
            }
            for (int j = 0; j < t->formals.n; j++)
                for (int k = 0; k < j; k++) {
                    Formal *a = t->formals.v[j], *b = t->formals.v[k];
                    if (strcmp(a->name, b->name) == 0) error_at(d, a->loc, "parameter '%s' is listed twice", a->name);
                }
            elab_map_put(tmp, &e->blocks, t->name, t);
            break;
        }
        case TOP_MODEL:
            if (model) {
                error_at(d, t->nameloc, "a file holds exactly one model; '%s' is a second one", t->name);
                elab_note(e, model->nameloc, "the first model is '%s'", model->name);
            } else {
                model = t;
            }
            break;
        case TOP_TRAIN:
            if (train) {
                error_at(d, t->loc, "a file holds at most one train section");
                elab_note(e, train->loc, "the first one is here");
            } else {
                train = t;
            }
            break;
        }
    }
    for (int i = 0; i < ndefs; i++) {
        const char *name = defs[i].name ? defs[i].name : "";
        Const *c = elab_map_get(&e->consts, name);
        if (!c) {
            Suggest s;
            elab_suggest_init(&s, name);
            for (int j = 0; j < e->consts.cap; j++) elab_suggest_add(&s, e->consts.e[j].key);
            error_at(d, NOLOC, "-D %s: %s has no constant '%s'%s", name, file, name, elab_suggest_hint(e, &s));
            continue;
        }
        c->v = define_value(e, name, defs[i].value ? defs[i].value : "");
        c->state = 2;
    }
    int after_defs = d->nerrors; /* the -D values' own errors are said above */
    for (int i = 0; i < prog->tops.n; i++) {
        Top *t = prog->tops.v[i];
        if (t->kind == TOP_CONST) {
            Const *c = elab_map_get(&e->consts, t->name);
            if (c->decl == t) const_value(e, c, t->nameloc);
        }
    }
    if (train) elab_train(e, train);
    if (!model) error_at(d, (SrcLoc){file, 0, 0}, "no model: a .model file needs one `model NAME(INPUTS) { ... }`");
    else elab_model(e, model);
    /* an error may come from a -D value, reported where the constant is
     * used: say which values the command line gave */
    if (d->nerrors != after_defs && ndefs > 0) {
        StrBuf b = {0};
        for (int i = 0; i < ndefs && b.len < 400; i++)
            if (defs[i].name && elab_map_get(&e->consts, defs[i].name))
                sb_printf(&b, "%s-D %s=%s", b.len ? ", " : "", defs[i].name, defs[i].value ? defs[i].value : "");
        if (b.len) note_at(d, NOLOC, "constants set on the command line: %s", b.s);
        sb_free(&b);
    }
    d->on_report = report0;
    d->on_report_ctx = report_ctx0;
    return d->nerrors == errors0;
}
