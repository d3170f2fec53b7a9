/* frontend/params.c — tensor types, parameters and model inputs.
 *
 * A parameter's name is the scope path of its activation plus its own name
 * (h.0.attn.c_attn.weight).  Parameters and inputs share one namespace:
 * duplicates are errors (with a note at the first declaration, or, for two
 * unlabelled calls of one block, a hint to use `as`), and the prefixes the
 * compiler uses for its own sources are reserved.
 */
#include "elab.h"

#include <string.h>

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

/* One activation of the chain that declared a name: the frame, then its
 * callers up to the model. */
typedef struct Link {
    int         id;
    bool        unlabelled;
    SrcLoc      call_loc;
    const char *blk, *scope;
} Link;

typedef struct Source {
    SrcLoc      loc;
    bool        is_input;
    int         frame;
    bool        unlabelled;
    SrcLoc      call_loc;
    const char *blk;
    Link       *chain;
    int         nchain;
} Source;

/* The two calls under which the declarations of a and b first part: the
 * children (*ca, *cb) of the deepest activation both are in, or false
 * where one of them is that activation (one frame declaring a name
 * twice). */
static bool parting_calls(const Source *a, const Source *b, const Link **ca, const Link **cb) {
    for (int i = 0; i < a->nchain; i++)
        for (int j = 0; j < b->nchain; j++)
            if (a->chain[i].id == b->chain[j].id) {
                if (i == 0 || j == 0) return false;
                *ca = &a->chain[i - 1], *cb = &b->chain[j - 1];
                return true;
            }
    return false;
}

/* The names of the compiler's own tensors: its sources (optimizer state,
 * mixed precision's, the sampling graph's input) and the results the
 * runtime finds by name; a parameter or input so named would be a second
 * tensor of that name in the executable's table. */
static const char *const reserved_prefixes[] = {"opt.", "rng.", "adamw.", "sgd.", "grad_acc.", "amp.", "sample.", "eval."};
static const char *const reserved_names[] = {"loss", "grad_norm", "logits"};

/* Checks that a new parameter or input name is free; records it. */
static bool claim_name(Elab *e, const char *full, SrcLoc loc, bool is_input) {
    const char *why = NULL;
    for (size_t i = 0; i < sizeof reserved_prefixes / sizeof *reserved_prefixes && !why; i++)
        if (strncmp(full, reserved_prefixes[i], strlen(reserved_prefixes[i])) == 0)
            why = arena_printf(e->a, "starts with the reserved prefix '%s' (names starting with opt. rng. adamw. sgd. grad_acc. amp. sample. eval. belong to the compiler)", reserved_prefixes[i]);
    for (size_t i = 0; i < sizeof reserved_names / sizeof *reserved_names && !why; i++)
        if (strcmp(full, reserved_names[i]) == 0) why = "is reserved (loss, grad_norm and logits name the compiler's results)";
    if (why) {
        const char *key = arena_printf(e->a, "prefix:%d:%d:%d:%d", loc.line, loc.col, e->fr->call_loc.line, e->fr->call_loc.col);
        if (elab_map_get(&e->reported, key)) return false; /* once per declaration, not per repeat */
        elab_map_put(e->a, &e->reported, key, e);
        error_at(e->d, loc, "'%s' %s", full, why); /* the call chain: Diag.on_report */
        return false;
    }
    Frame *f = e->fr;
    Source *s = arena_alloc(e->a, sizeof *s);
    *s = (Source){loc, is_input, f->id, f->unlabelled, f->call_loc, f->blk ? f->blk->name : NULL, NULL, 0};
    for (Frame *u = f; u; u = u->up) s->nchain++;
    s->chain = arena_alloc(e->a, (size_t)s->nchain * sizeof *s->chain);
    int k = 0;
    for (Frame *u = f; u; u = u->up) s->chain[k++] = (Link){u->id, u->unlabelled, u->call_loc, u->blk ? u->blk->name : NULL, u->scope};
    Source *prev = elab_map_get(&e->sources, full);
    const Link *cp = NULL, *cf = NULL;
    if (prev) {
        bool parted = !prev->is_input && !is_input && parting_calls(prev, s, &cp, &cf) && cp->blk && cf->blk;
        if (prev->is_input || is_input) {
            error_at(e->d, loc, "'%s' is already the name of a model %s", full, prev->is_input ? "input" : "parameter");
            elab_note(e, prev->loc, "declared here");
        } else if (parted && cp->unlabelled && cf->unlabelled && strcmp(cp->blk, cf->blk) == 0) {
            /* two unlabelled calls of one block in one activation (those of
             * the block declaring it, or of one calling it): at the second
             * call, the one to label (once per call, not per parameter),
             * with the call chain of that activation (e->fr for the notes) */
            const char *key = arena_printf(e->a, "twice:%d", cf->id);
            if (elab_map_get(&e->reported, key)) return false;
            elab_map_put(e->a, &e->reported, key, e);
            const char *up = (cf + 1)->scope;
            const char *where = up[0] ? arena_printf(e->a, "in scope '%s'", up) : "at the root";
            Frame *shared = f;
            for (const Link *l = s->chain; l <= cf; l++) shared = shared->up;
            e->fr = shared;
            error_at(e->d, cf->call_loc, "block '%s' is called twice %s without `as`, so both calls declare parameter '%s'", cf->blk, where,
                     full);
            elab_note(e, cp->call_loc, "the first call is here; give each call its own scope with `%s(...) as NAME`", cf->blk);
            elab_note(e, loc, "'%s' is declared here", full);
            e->fr = f;
        } else {
            error_at(e->d, loc, "duplicate parameter '%s'", full);
            elab_note(e, prev->loc, "'%s' is first declared here", full);
            if (parted) { /* two calls with one scope: say which */
                elab_note(e, cp->call_loc, "by this call of '%s'", cp->blk);
                elab_note(e, cf->call_loc, "and again by this call of '%s', which leads to the same scope '%s'; give the two calls different scopes (their `as` labels, or those of the calls and repeats they are in)", cf->blk, f->scope);
            }
        }
        return false;
    }
    elab_map_put(e->a, &e->sources, arena_strdup(e->a, full), s);
    return true;
}

/* A parameter initialiser: init kind and up to two float attributes. */
typedef struct Init { const char *kind; int n; const char *keys[2]; double v[2]; SrcLoc locs[2]; } Init;

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
    if (!elab_bind_args(e, x, np, names, optional, vals, locs, given)) return false;
    for (int i = 0; i < np; i++)
        if (!elab_want_num(e, vals[i], locs[i], names[i], &in->v[i])) return false;
    if (k == 2 && !(in->v[0] >= 0)) {
        error_at(e->d, locs[0], "std must not be negative");
        return false;
    }
    if (k == 3 && in->v[0] > in->v[1]) {
        char lo[32], hi[32];
        fmt_double(lo, in->v[0]);
        fmt_double(hi, in->v[1]);
        error_at(e->d, locs[0], "uniform(lo, hi) needs lo <= hi, not %s > %s", lo, hi);
        return false;
    }
    in->n = np;
    for (int i = 0; i < np; i++) in->keys[i] = names[i], in->locs[i] = locs[i];
    return true;
}

void elab_param(Elab *e, Stmt *s) {
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
    for (int i = 0; ok && i < init.n; i++) { /* the initialiser's numbers are values of the dtype */
        char of[64];
        snprintf(of, sizeof of, "a parameter of dtype %s", dtype_name[ty.dt]);
        ok = elab_num_fits(e, val_float(init.v[i]), ty.dt, of, init.locs[i]);
    }
    if (!ok) {
        elab_set_var(e, s->name, val_poison());
        return;
    }
    Node *p = ir_source(e->g, OP_param, full, ty, s->nameloc);
    ir_set_str(e->g, p, "init", init.kind);
    for (int i = 0; i < init.n; i++) ir_set_float(e->g, p, init.keys[i], init.v[i]);
    if (s->frozen) ir_set_int(e->g, p, "frozen", 1);
    if (!ir_infer(e->g, p, e->d)) {
        elab_set_var(e, s->name, val_poison());
        return;
    }
    elab_set_var(e, s->name, val_tensor(p->out[0]));
}

void elab_input(Elab *e, Formal *f) {
    Type ty;
    if (!eval_type(e, f->type, &ty) || !claim_name(e, f->name, f->loc, true)) {
        elab_set_var(e, f->name, val_poison());
        return;
    }
    Node *n = ir_source(e->g, OP_input, f->name, ty, f->loc);
    elab_set_var(e, f->name, val_tensor(n->out[0]));
}
