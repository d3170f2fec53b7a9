/* frontend/elaborate.c — from the syntax tree to the forward graph.
 *
 * Elaboration runs the program at compile time: constants are evaluated
 * (with -D overrides), the model body is executed statement by statement,
 * block calls get a fresh variable scope and a parameter scope path, repeat
 * unrolls, if picks a branch.  Tensor operations become graph nodes
 * (builtins.c); every other value is computed here.  Errors are reported
 * and elaboration goes on with a poison value, so one run shows several
 * errors.  Work, recursion depth and tensor sizes are bounded so that no
 * input can exhaust the stack, time or memory.
 */
#include "elab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- maps ---- */

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

void *elab_map_get(const Map *m, const char *key) {
    if (!m->cap) return NULL;
    size_t mask = (size_t)m->cap - 1;
    for (size_t i = hash_str(key) & mask; m->e[i].key; i = (i + 1) & mask)
        if (strcmp(m->e[i].key, key) == 0) return m->e[i].val;
    return NULL;
}

static void map_insert(MapEnt *tab, int cap, const char *key, void *val, int *n) {
    size_t mask = (size_t)cap - 1, i = hash_str(key) & mask;
    for (; tab[i].key; i = (i + 1) & mask)
        if (strcmp(tab[i].key, key) == 0) {
            tab[i].val = val;
            return;
        }
    tab[i].key = key;
    tab[i].val = val;
    (*n)++;
}

void elab_map_put(Arena *a, Map *m, const char *key, void *val) {
    if ((m->n + 1) * 2 > m->cap) {
        int cap = m->cap ? 2 * m->cap : 16, n = 0;
        MapEnt *tab = arena_alloc(a, sizeof(MapEnt) * (size_t)cap);
        for (int i = 0; i < m->cap; i++)
            if (m->e[i].key) map_insert(tab, cap, m->e[i].key, m->e[i].val, &n);
        m->e = tab;
        m->cap = cap;
        m->n = n;
    }
    map_insert(m->e, m->cap, key, val, &m->n);
}

/* ---- suggestions ---- */

/* Optimal-string-alignment distance (a transposition costs 1). */
static int edit_distance(const char *a, const char *b) {
    int n = (int)strlen(a), m = (int)strlen(b);
    if (n > 40 || m > 40) return 1000;
    int d[41][41];
    for (int i = 0; i <= n; i++) d[i][0] = i;
    for (int j = 0; j <= m; j++) d[0][j] = j;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= m; j++) {
            int c = a[i - 1] == b[j - 1] ? 0 : 1, v = d[i - 1][j - 1] + c;
            if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v) v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[n][m];
}

void elab_suggest_init(Suggest *s, const char *name) {
    s->name = name;
    s->best = NULL;
    s->dist = 1000;
}

void elab_suggest_add(Suggest *s, const char *cand) {
    if (!cand || strcmp(cand, s->name) == 0) return;
    int dist = edit_distance(s->name, cand);
    int len = (int)strlen(s->name), limit = len <= 3 ? 1 : (len + 2) / 3;
    if (dist <= limit && dist < s->dist) {
        s->dist = dist;
        s->best = cand;
    }
}

const char *elab_suggest_hint(Elab *e, const Suggest *s) {
    return s->best ? arena_printf(e->a, "; did you mean '%s'?", s->best) : "";
}

/* ---- small helpers ---- */

const char *elab_join(Elab *e, const char *scope, const char *name) {
    if (!scope || !*scope) return name;
    return arena_printf(e->a, "%s.%s", scope, name);
}

static bool notes_allowed(Elab *e) {
    int limit = e->d->max_errors ? e->d->max_errors : 20;
    return e->d->nerrors <= limit;
}

void elab_note(Elab *e, SrcLoc loc, const char *fmt, ...) {
    if (!notes_allowed(e)) return;
    va_list ap;
    va_start(ap, fmt);
    verror_at(e->d, loc, "note", fmt, ap);
    va_end(ap);
}

void elab_note_chain(Elab *e) {
    for (Frame *f = e->fr; f && f->blk; f = f->up)
        elab_note(e, f->call_loc, "in block '%s' (scope '%s') called here", f->blk->name, f->scope);
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

static Binding *find_var(Frame *f, const char *name) {
    for (int i = f->nvars - 1; i >= 0; i--)
        if (strcmp(f->vars[i].name, name) == 0) return &f->vars[i];
    return NULL;
}

/* Binds name in the current frame; a tensor without a name hint gets
 * "scope.name". */
static void set_var(Elab *e, const char *name, Val v) {
    Frame *f = e->fr;
    if (v.k == V_TENSOR && !v.t->name) v.t->name = arena_strdup(e->g->arena, elab_join(e, f->scope, name));
    Binding *b = find_var(f, name);
    if (b) {
        b->v = v;
        return;
    }
    if (f->nvars == f->capvars) {
        int cap = f->capvars ? 2 * f->capvars : 16;
        Binding *nb = arena_alloc(e->a, sizeof(Binding) * (size_t)cap);
        if (f->nvars) memcpy(nb, f->vars, sizeof(Binding) * (size_t)f->nvars);
        f->vars = nb;
        f->capvars = cap;
    }
    f->vars[f->nvars++] = (Binding){name, v};
}

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

/* The value of -D name=TEXT: an integer, a float, true/false, or a string. */
static Val define_value(Elab *e, const char *text) {
    char *end;
    if (*text) {
        errno = 0;
        long long i = strtoll(text, &end, 10);
        if (!*end && errno == 0) return val_int(i);
        errno = 0;
        double f = strtod(text, &end);
        if (!*end && errno == 0) return val_float(f);
    }
    if (strcmp(text, "true") == 0) return val_bool(true);
    if (strcmp(text, "false") == 0) return val_bool(false);
    return val_str(arena_strdup(e->a, text));
}

/* ---- names ---- */

static void suggest_names(Elab *e, Suggest *s) {
    if (e->fr)
        for (int i = 0; i < e->fr->nvars; i++) elab_suggest_add(s, e->fr->vars[i].name);
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
    if (e->fr && e->fr->tainted) return val_poison(); /* maybe assigned in a skipped branch */
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
    if (e->fr) set_var(e, x->s, val_poison()); /* report it once */
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
static bool bind_args(Elab *e, Expr *call, int n, const char **names, const bool *optional, Val *vals, SrcLoc *locs, bool *given) {
    bool ok = true;
    int pos = 0;
    const char *sig = NULL;
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
            if (pos >= n) {
                if (!sig) sig = signature(e, call->s, n, names, optional);
                error_at(e->d, arg->e->loc, "too many arguments: %s takes %d", sig, n);
                ok = false;
                break;
            }
            slot = pos++;
        } else {
            for (int i = 0; i < n; i++)
                if (strcmp(names[i], arg->kw) == 0) slot = i;
            if (slot < 0) {
                Suggest s;
                elab_suggest_init(&s, arg->kw);
                for (int i = 0; i < n; i++) elab_suggest_add(&s, names[i]);
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
    if (!bind_args(e, call, n, names, optional, vals, locs, given)) return val_poison();
    Frame nf = {.up = e->fr, .blk = blk, .call_loc = call->loc, .unlabelled = label == NULL, .id = ++e->nframes};
    nf.scope = elab_join(e, e->fr->scope, label ? label : blk->name);
    e->fr = &nf;
    bool ok = true;
    for (int i = 0; i < n; i++) {
        Formal *f = blk->formals.v[i];
        Val v = given[i] ? vals[i] : elab_eval(e, f->dflt);
        if (v.k == V_POISON) ok = false;
        set_var(e, f->name, v);
    }
    if (ok) exec_stmts(e, &blk->body);
    e->fr = nf.up;
    if (!ok) return val_poison();
    return nf.returned ? nf.ret : val_none();
}

static Val eval_call(Elab *e, Expr *call, const char *label, SrcLoc label_loc) {
    Top *blk = elab_map_get(&e->blocks, call->s);
    if (blk) return call_block(e, blk, call, label);
    const Builtin *b = elab_builtin(call->s);
    if (!b) {
        if ((e->fr && find_var(e->fr, call->s)) || elab_map_get(&e->consts, call->s)) {
            error_at(e->d, call->loc, "'%s' is a value, not a function", call->s);
            return val_poison();
        }
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
    if (!bind_args(e, call, n, names, optional, vals, locs, given)) return val_poison();
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

/* ---- types and parameters ---- */

static bool eval_type(Elab *e, TypeExpr *t, Type *out) {
    bool ok = true;
    memset(out, 0, sizeof *out);
    out->dt = DT_f32;
    if (t->dtype && !dtype_parse(t->dtype, &out->dt)) {
        Suggest s;
        elab_suggest_init(&s, t->dtype);
        for (int i = 0; i < DT__COUNT; i++) elab_suggest_add(&s, dtype_name[i]);
        error_at(e->d, t->dtloc, "unknown dtype '%s'%s", t->dtype, elab_suggest_hint(e, &s));
        ok = false;
    }
    if (t->dims.n > IR_MAX_RANK) {
        error_at(e->d, t->loc, "a tensor has at most %d dimensions, not %d", IR_MAX_RANK, t->dims.n);
        return false;
    }
    out->shape.rank = t->dims.n;
    for (int i = 0; i < t->dims.n; i++) {
        Expr *x = t->dims.v[i];
        int64_t v;
        if (!elab_want_int(e, elab_eval(e, x), x->loc, "a dimension", &v)) {
            ok = false;
            continue;
        }
        if (v <= 0) {
            error_at(e->d, x->loc, "dimension %d is %lld; dimensions must be positive", i, (long long)v);
            ok = false;
        }
        out->shape.d[i] = v;
    }
    return ok && elab_check_type(e, out, t->loc);
}

typedef struct Source {
    SrcLoc      loc;
    bool        is_input;
    int         frame;
    bool        unlabelled;
    SrcLoc      call_loc;
    const char *blk;
} Source;

static const char *const reserved_prefixes[] = {"opt.", "rng.", "adamw.", "sgd.", "grad_acc."};

/* Checks that a new parameter or input name is free; records it. */
static bool claim_name(Elab *e, const char *full, SrcLoc loc, bool is_input) {
    for (size_t i = 0; i < sizeof reserved_prefixes / sizeof *reserved_prefixes; i++)
        if (strncmp(full, reserved_prefixes[i], strlen(reserved_prefixes[i])) == 0) {
            const char *key = arena_printf(e->a, "prefix:%d:%d:%d:%d", loc.line, loc.col, e->fr->call_loc.line, e->fr->call_loc.col);
            if (elab_map_get(&e->reported, key)) return false; /* once per declaration, not per repeat */
            elab_map_put(e->a, &e->reported, key, e);
            error_at(e->d, loc, "'%s' starts with the reserved prefix '%s' (names starting with opt. rng. adamw. sgd. grad_acc. belong to the compiler)",
                     full, reserved_prefixes[i]);
            elab_note_chain(e);
            return false;
        }
    Source *prev = elab_map_get(&e->sources, full);
    Frame *f = e->fr;
    if (prev) {
        if (prev->is_input || is_input) {
            error_at(e->d, loc, "'%s' is already the name of a model %s", full, prev->is_input ? "input" : "parameter");
            elab_note(e, prev->loc, "declared here");
        } else if (f->unlabelled && prev->unlabelled && prev->frame != f->id) {
            const char *where = f->up->scope[0] ? arena_printf(e->a, "in scope '%s'", f->up->scope) : "at the root";
            error_at(e->d, loc, "block '%s' is called twice %s without `as`, so both calls declare parameter '%s'",
                     f->blk->name, where, full);
            elab_note(e, prev->call_loc, "the first call is here; give each call its own scope with `%s(...) as NAME`", f->blk->name);
        } else {
            error_at(e->d, loc, "duplicate parameter '%s'", full);
            elab_note(e, prev->loc, "'%s' is first declared here", full);
        }
        return false;
    }
    Source *s = arena_alloc(e->a, sizeof *s);
    *s = (Source){loc, is_input, f->id, f->unlabelled, f->call_loc, f->blk ? f->blk->name : NULL};
    elab_map_put(e->a, &e->sources, arena_strdup(e->a, full), s);
    return true;
}

/* A parameter initialiser: init kind and up to two float attributes. */
typedef struct Init { const char *kind; int n; const char *keys[2]; double v[2]; } Init;

/* init = zeros | ones | normal(std) | uniform(lo, hi) | constant(value) */
static bool eval_init(Elab *e, Expr *x, Init *in) {
    static const char *const kinds[] = {"zeros", "ones", "normal", "uniform", "constant"};
    static const char *const params[] = {"", "", "std", "lo, hi", "value"};
    static const char *const expected = "expected an initialiser: zeros, ones, normal(std), uniform(lo, hi) or constant(value)";
    memset(in, 0, sizeof *in);
    in->kind = "zeros";
    if (!x) return true;
    const char *name = x->kind == EX_IDENT || x->kind == EX_CALL ? x->s : NULL;
    int k = -1;
    for (int i = 0; name && i < 5; i++)
        if (strcmp(name, kinds[i]) == 0) k = i;
    if (k < 0) {
        Suggest s;
        elab_suggest_init(&s, name ? name : "");
        for (int i = 0; name && i < 5; i++) elab_suggest_add(&s, kinds[i]);
        error_at(e->d, x->loc, "%s%s", expected, elab_suggest_hint(e, &s));
        return false;
    }
    in->kind = kinds[k];
    if (x->kind == EX_IDENT) {
        if (k >= 2) {
            error_at(e->d, x->loc, "the initialiser '%s' needs arguments: %s(%s)", kinds[k], kinds[k], params[k]);
            return false;
        }
        return true;
    }
    const char *names[2] = {"std", NULL};
    bool optional[2] = {false, false}, given[2];
    Val vals[2];
    SrcLoc locs[2];
    int np = k < 2 ? 0 : k == 3 ? 2 : 1;
    if (k == 3) names[0] = "lo", names[1] = "hi";
    if (k == 4) names[0] = "value";
    if (!bind_args(e, x, np, names, optional, vals, locs, given)) return false;
    for (int i = 0; i < np; i++)
        if (!elab_want_num(e, vals[i], locs[i], names[i], &in->v[i])) return false;
    if (k == 2 && !(in->v[0] >= 0)) {
        error_at(e->d, locs[0], "std must not be negative");
        return false;
    }
    in->n = np;
    in->keys[0] = names[0];
    in->keys[1] = names[1];
    return true;
}

/* ---- statements ---- */

static void exec_param(Elab *e, Stmt *s) {
    Frame *f = e->fr;
    const char *full = elab_join(e, f->scope, s->name);
    Type ty;
    bool ok = eval_type(e, s->type, &ty);
    Init init;
    ok &= eval_init(e, s->init, &init);
    ok &= claim_name(e, full, s->nameloc, false);
    if (ok && !dtype_is_float[ty.dt]) {
        error_at(e->d, s->type->dtloc, "parameters must be floating point, not %s", dtype_name[ty.dt]);
        ok = false;
    }
    if (!ok) {
        set_var(e, s->name, val_poison());
        return;
    }
    Node *p = ir_source(e->g, OP_param, full, ty, s->nameloc);
    ir_set_str(e->g, p, "init", init.kind);
    for (int i = 0; i < init.n; i++) ir_set_float(e->g, p, init.keys[i], init.v[i]);
    if (s->frozen) ir_set_int(e->g, p, "frozen", 1);
    if (!ir_infer(e->g, p, e->d)) {
        set_var(e, s->name, val_poison());
        return;
    }
    set_var(e, s->name, val_tensor(p->out[0]));
}

static void exec_assign(Elab *e, Stmt *s) {
    Val v = elab_eval(e, s->value);
    int n = s->targets.n;
    if (n == 1) {
        Name *t = s->targets.v[0];
        if (v.k == V_TUPLE) {
            error_at(e->d, t->loc, "the right side gives %d values; assign them to %d names (a, b = ...)", v.n, v.n);
            v = val_poison();
        }
        set_var(e, t->s, v);
        return;
    }
    bool ok = v.k == V_POISON || ((v.k == V_TUPLE || v.k == V_LIST) && v.n == n);
    if (!ok) {
        char b[200];
        error_at(e->d, s->loc, "cannot unpack %s into %d names", elab_desc(&v, b, sizeof b), n);
    }
    for (int i = 0; i < n; i++) {
        Name *t = s->targets.v[i];
        set_var(e, t->s, ok && v.k != V_POISON ? v.items[i] : val_poison());
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

static void exec_if(Elab *e, Stmt *s) {
    bool c;
    if (s->cond->kind == EX_LABEL) {
        error_at(e->d, s->cond->loc, "`as` does not belong in an if condition");
        return;
    }
    if (!elab_want_bool(e, elab_eval(e, s->cond), s->cond->loc, "an if condition", &c)) {
        e->fr->tainted = true;
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
        e->fr->tainted = true;
        return;
    }
    if (n <= 0) {
        error_at(e->d, cnt->loc, "a repeat count must be positive, not %lld", (long long)n);
        e->fr->tainted = true;
        return;
    }
    Frame *f = e->fr;
    const char *saved = f->scope;
    for (int64_t i = 0; i < n && !f->returned && !e->over_budget; i++) {
        const char *seg = label ? arena_printf(e->a, "%s.%lld", label, (long long)i) : arena_printf(e->a, "%lld", (long long)i);
        f->scope = elab_join(e, saved, seg);
        exec_stmts(e, &s->then);
    }
    f->scope = saved;
}

static void exec_stmt(Elab *e, Stmt *s) {
    if (!enter(e, s->loc)) return;
    switch (s->kind) {
    case ST_PARAM: exec_param(e, s); break;
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

/* ---- the train section ---- */

/* "40GB", "512MiB", "1.5 TB" -> bytes; false if not a size. */
static bool parse_size(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0)) return false;
    while (*end == ' ') end++;
    static const struct { const char *unit; double mul; } units[] = {
        {"", 1}, {"b", 1}, {"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
        {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0},
    };
    for (size_t i = 0; i < sizeof units / sizeof *units; i++)
        if (strcasecmp(end, units[i].unit) == 0) {
            double b = v * units[i].mul;
            if (b >= 9.2e18) return false;
            *out = (int64_t)b;
            return true;
        }
    return false;
}

static void train_item(Elab *e, Graph *g, TrainItem *t, Map *seen) {
    const TrainKeyInfo *k = train_key_lookup(t->key);
    if (!k) {
        Suggest s;
        elab_suggest_init(&s, t->key);
        for (int i = 0; i < ntrain_keys; i++) elab_suggest_add(&s, train_keys[i].name);
        error_at(e->d, t->loc, "unknown train key '%s'%s", t->key, elab_suggest_hint(e, &s));
        return;
    }
    TrainItem *prev = elab_map_get(seen, t->key);
    if (prev) {
        error_at(e->d, t->loc, "train key '%s' is set twice", t->key);
        elab_note(e, prev->loc, "first set here");
        return;
    }
    elab_map_put(e->a, seen, t->key, t);
    Val v = elab_eval(e, t->value);
    if (v.k == V_POISON) return;
    char text[64], b[200], err[256];
    const char *txt = NULL;
    bool numeric = k->kind == TK_INT || k->kind == TK_FLOAT;
    switch (v.k) {
    case V_INT: if (numeric) txt = (snprintf(text, sizeof text, "%lld", (long long)v.i), text); break;
    case V_FLOAT: if (numeric) txt = (fmt_double(text, v.f), text); break;
    case V_BOOL: if (k->kind == TK_INT) txt = v.i ? "1" : "0"; break;
    case V_STR:
    case V_SYM:
        if (!numeric) txt = v.s;
        else if (strcmp(k->name, "memory_budget") == 0 && v.k == V_STR) {
            int64_t bytes;
            if (!parse_size(v.s, &bytes)) {
                error_at(e->d, t->value->loc, "'%s' is not a size (write e.g. \"40GB\", \"512MiB\" or a number of bytes)", v.s);
                return;
            }
            snprintf(text, sizeof text, "%lld", (long long)bytes);
            txt = text;
        }
        break;
    default: break;
    }
    if (!txt) {
        static const char *const kinds[] = {"an integer", "a number", "a name", "a string"};
        error_at(e->d, t->value->loc, "train key '%s' takes %s, not %s", k->name, kinds[k->kind], elab_desc(&v, b, sizeof b));
        return;
    }
    if (!train_set(&g->train, g->arena, k->name, txt, err, sizeof err)) {
        const char *hint = "";
        if (k->kind == TK_ENUM) {
            Suggest s;
            elab_suggest_init(&s, txt);
            char al[256];
            snprintf(al, sizeof al, "%s", k->allowed);
            for (char *p = strtok(al, " "); p; p = strtok(NULL, " ")) elab_suggest_add(&s, p);
            hint = elab_suggest_hint(e, &s); /* copied: s.best points into al */
        }
        error_at(e->d, t->value->loc, "%s%s", err, hint);
    }
}

/* ---- the model ---- */

static void elab_model(Elab *e, Top *m) {
    Graph *g = e->g;
    g->name = arena_strdup(g->arena, m->name);
    Frame root = {.scope = "", .id = ++e->nframes};
    e->fr = &root;
    for (int i = 0; i < m->formals.n; i++) {
        Formal *f = m->formals.v[i];
        Type ty;
        if (!eval_type(e, f->type, &ty) || !claim_name(e, f->name, f->loc, true)) {
            set_var(e, f->name, val_poison());
            continue;
        }
        Node *n = ir_source(g, OP_input, f->name, ty, f->loc);
        set_var(e, f->name, val_tensor(n->out[0]));
    }
    exec_stmts(e, &m->body);
    e->fr = NULL;
    if (e->over_budget) return;
    if (!root.returned) {
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
        c->v = define_value(e, defs[i].value ? defs[i].value : "");
        c->state = 2;
    }
    for (int i = 0; i < prog->tops.n; i++) {
        Top *t = prog->tops.v[i];
        if (t->kind == TOP_CONST) {
            Const *c = elab_map_get(&e->consts, t->name);
            if (c->decl == t) const_value(e, c, t->nameloc);
        }
    }
    if (train) {
        Map seen = {0};
        e->in_train = true;
        for (int i = 0; i < train->body.n; i++) train_item(e, g, train->body.v[i], &seen);
        e->in_train = false;
    }
    if (!model) error_at(d, (SrcLoc){file, 0, 0}, "no model: a .model file needs one `model NAME(INPUTS) { ... }`");
    else elab_model(e, model);
    return d->nerrors == errors0;
}
