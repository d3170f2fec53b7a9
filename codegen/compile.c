/* codegen/compile.c — `trainc compile`: from a .model file to a training
 * executable (or to a library another C program links).
 *
 *   forward graph ──training pipeline──▶ training graph ─┐
 *        ├── (dropout off) ──────────▶ eval graph ───────┼─ cg_lower ─ memory plan ─ emit C ─ cc
 *        └── pruned to the logits ───▶ sampling graph ───┘
 */
#include "cg.h"
#include "compile.h"
#include "cuda.h"
#include "loops.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef TRAINC_RUNTIME_DIR
#define TRAINC_RUNTIME_DIR "runtime"
#endif
#ifndef TRAINC_RT_LIB
#define TRAINC_RT_LIB "libtrainc_rt.a"
#endif

#ifndef TRAINC_OPENBLAS_DIR
#define TRAINC_OPENBLAS_DIR ""
#endif

const char *const cg_cflags[] = {"-std=c11", "-fopenmp", "-fno-trapping-math", "-D_GNU_SOURCE", NULL};

const char *cg_openblas_dir(void) {
    const char *e = getenv("TRAINC_OPENBLAS_DIR");
    return e ? e : TRAINC_OPENBLAS_DIR;
}

/* PREFIX, the folder above the running program's (PREFIX/bin/trainc), when
 * PREFIX/share/trainc/runtime/trainc_rt.h and
 * PREFIX/lib/trainc/libtrainc_rt.a are both files: an installed trainc
 * (cmake --install; moved whole, it still finds its runtime).  NULL when
 * they are not (a trainc in its build tree): the headers and the library
 * come from one place or the other, never one from each. */
static const char *installed_prefix(void) {
    static char prefix[4000];   /* (room for what cg_runtime_dir and cg_runtime_lib append) */
    static int  known;
    if (known) return *prefix ? prefix : NULL;
    known = 1;
    char exe[4096], a[4200], b[4200];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) return NULL;
    exe[k] = 0;
    for (int up = 0; up < 2; up++) { /* PREFIX/bin/trainc -> PREFIX */
        char *slash = strrchr(exe, '/');
        if (!slash) return NULL;
        *slash = 0;
    }
    snprintf(a, sizeof a, "%s/share/trainc/runtime/trainc_rt.h", exe);
    snprintf(b, sizeof b, "%s/lib/trainc/libtrainc_rt.a", exe);
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && S_ISREG(sa.st_mode) && stat(b, &sb) == 0 && S_ISREG(sb.st_mode) && strlen(exe) < sizeof prefix)
        snprintf(prefix, sizeof prefix, "%s", exe);
    return *prefix ? prefix : NULL;
}

/* $env when set, else PREFIX/rel of an installed trainc (in buf), else
 * `built`, the path it was built with. */
static const char *runtime_path(const char *env, const char *rel, const char *built, char *buf, size_t n) {
    const char *e = getenv(env), *p = installed_prefix();
    if (e && *e) return e;
    if (!p) return built;
    snprintf(buf, n, "%s/%s", p, rel);
    return buf;
}

/* The runtime generated code is built with: $TRAINC_RUNTIME_DIR (headers)
 * and $TRAINC_RT_LIB (the library) when set, else the installed ones
 * beside the program, else the source and build trees' it was built in. */
const char *cg_runtime_dir(void) {
    static char dir[4096];
    return runtime_path("TRAINC_RUNTIME_DIR", "share/trainc/runtime", TRAINC_RUNTIME_DIR, dir, sizeof dir);
}

const char *cg_runtime_lib(void) {
    static char lib[4096];
    return runtime_path("TRAINC_RT_LIB", "lib/trainc/libtrainc_rt.a", TRAINC_RT_LIB, lib, sizeof lib);
}

/* g after dead-code elimination; NULL (g freed) when the pass fails.
 * Quiet: the training pipeline's dce warns of an unused param once. */
static Graph *dce_or_free(Graph *g, Diag *d) {
    const char *passes[] = {"dce"};
    PassOptions po = {0};
    po.quiet = true;
    PMOptions pm = {0};
    if (!pm_run(g, passes, 1, &po, &pm, d)) {
        ir_graph_free(g);
        return NULL;
    }
    return g;
}

/* The eval graph: the forward graph with dropout switched off. */
static Graph *make_eval(Graph *fwd, Diag *d) {
    Graph *g = ir_clone(fwd);
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (n->op == OP_dropout) ir_replace_all_uses(g, n->out[0], n->in[0]);
    }
    return dce_or_free(g, d);
}

/* The head of a language model: the chain of nodes from the logits
 * [B, T, V] down to the matmul that makes them from x [..., C] with a
 * weight [C, V] or [V, C], where row r of the logits (flattened to
 * [B*T, V]) depends only on row r of x (flattened to [N, C]).  Between the
 * two: element-wise ops whose other operand is a scalar or a [V] vector
 * (bias, scale, casts, soft-capping) and reshapes that keep the last
 * dimension.  Fills chain[0 .. n-1] (chain[0] makes the logits, chain[n-1]
 * is the matmul); 0 when the logits are not of that form. */
enum { HEAD_MAX = 16 };
static int head_chain(Value *logits, Node **chain) {
    int n = 0;
    for (Value *v = logits; n < HEAD_MAX;) {
        Node *d = v->def;
        const Shape *s = &v->ty.shape;
        int64_t V = s->d[s->rank - 1];
        chain[n++] = d;
        if (d->op == OP_matmul) {
            const Shape *a = &d->in[0]->ty.shape, *b = &d->in[1]->ty.shape;
            return !ir_int(d, "ta", 0) && a->rank >= 2 && b->rank == 2 && s->rank == a->rank ? n : 0;
        }
        if (d->op == OP_reshape) {
            const Shape *a = &d->in[0]->ty.shape;
            if (a->rank < 2 || a->d[a->rank - 1] != V) return 0;
            v = d->in[0];
            continue;
        }
        if (!op_has(d->op, OPF_POINTWISE) || d->nin > 2) return 0;
        int on = -1; /* the operand on the chain: same shape as v */
        for (int i = 0; i < d->nin; i++) {
            const Shape *a = &d->in[i]->ty.shape;
            if (shape_eq(a, s) && on < 0) on = i;
            else if (!(a->rank == 0 || (a->rank == 1 && a->d[0] == V) || (a->rank == 1 && a->d[0] == 1))) return 0;
        }
        if (on < 0) return 0;
        v = d->in[on];
    }
    return 0;
}

/* The sampling graph: the eval graph computing only the logits that feed
 * the cross_entropy of the loss.  NULL when the loss is not of that form.
 *
 * For a language model (logits [B, T, V] made by a head head_chain
 * recognises, tokens [B, T]) the logits are those of one position per
 * sequence: the input
 * "sample.rows" (i32 [B], set by trn_predict_at: b*T + position) picks rows
 * of the head's input x flattened to [B*T, C], and the head runs on those B
 * rows only, giving logits [B, V].  The B*T*V logits never exist: at GPT-2
 * small with batch 16 they alone would be 3.3 GB (f32), more than the
 * training step with fused linear + cross-entropy needs for its whole
 * peak. */
static Graph *make_sample(Graph *eval, Diag *d) {
    Value *loss = ir_output(eval, "loss");
    if (!loss || loss->def->op != OP_cross_entropy) return NULL;
    Value *logits = loss->def->in[0];
    if (logits->ty.shape.rank < 2) return NULL;
    Graph *g = ir_clone(eval);
    Value *nl = ir_output(g, "loss")->def->in[0];
    g->noutputs = 0;
    Node *chain[HEAD_MAX];
    bool all = strcmp(g->train.sample_logits, "all") == 0;
    int n = nl->ty.shape.rank == 3 && !all ? head_chain(nl, chain) : 0;
    Value *x = n > 0 ? chain[n - 1]->in[0] : NULL;
    int64_t B = nl->ty.shape.d[0], C = x ? x->ty.shape.d[x->ty.shape.rank - 1] : 1;
    int64_t rows = x ? shape_numel(&x->ty.shape) / C : 0, flat[2] = {rows, C};
    /* the runtime finds T in the tokens input [B, T] */
    Node *tok = ir_find_source(g, OP_input, "tokens");
    const Shape *ts = tok ? &tok->out[0]->ty.shape : NULL;
    bool bt = ts && ts->rank == 2 && ts->d[0] == B && ts->d[1] == nl->ty.shape.d[1];
    if (x && bt && rows == B * ts->d[1]) {
        Node *mm = chain[n - 1];
        Type rt = {DT_i32, shape_make(1, &B)};
        Value *idx = ir_source(g, OP_input, "sample.rows", rt, mm->loc)->out[0];
        Node *r = ir_new(g, OP_reshape, 1, &x, mm->loc);
        ir_set_ints(g, r, "shape", 2, flat);
        Value *cur = ir_emit(g, r, d) ? r->out[0] : NULL;
        Value *ein[2] = {cur, idx};
        Node *e = cur ? ir_emit(g, ir_new(g, OP_embedding, 2, ein, mm->loc), d) : NULL;
        cur = e ? e->out[0] : NULL;
        for (int i = n - 1; cur && i >= 0; i--) {
            Node *o = chain[i];
            if (o->op == OP_reshape) continue; /* rows stay rows */
            Value *in[2];
            for (int j = 0; j < o->nin; j++) in[j] = (i == n - 1 ? j == 0 : o->in[j]->def == chain[i + 1]) ? cur : o->in[j];
            Node *c = ir_new(g, o->op, o->nin, in, o->loc);
            c->nattr = o->nattr;
            c->attrs = arena_alloc(g->arena, sizeof(Attr) * (size_t)(o->nattr ? o->nattr : 1));
            if (o->nattr) memcpy(c->attrs, o->attrs, sizeof(Attr) * (size_t)o->nattr);
            cur = ir_emit(g, c, d) ? c->out[0] : NULL;
        }
        if (!cur) {
            ir_graph_free(g);
            return NULL;
        }
        cur->name = arena_strdup(g->arena, "logits");
        nl = cur;
    }
    ir_add_output(g, "logits", nl);
    return dce_or_free(g, d);
}

static int run_cmd(char *const argv[], bool verbose) {
    if (verbose) {
        for (int i = 0; argv[i]; i++) fprintf(stderr, "%s%s", i ? " " : "", argv[i]);
        fputc('\n', stderr);
    }
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        setpgid(0, 0); /* its own group, with its children: tmp_guard's handler ends them all */
        execvp(argv[0], argv);
        fprintf(stderr, "trainc: error: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* (as the child does: whichever runs first) */
    tmp_child((int)pid); /* a signal that ends trainc ends it first (tmp_guard) */
    int st;
    pid_t w = waitpid(pid, &st, 0);
    tmp_child(0);
    if (w < 0) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A file that trainc may write at path: none there, or one that starts as
 * its new bytes do (a comment such as "/\* Generated by trainc", "# CUDA
 * resource report", the runtime's own headers): one trainc wrote, not a
 * user's source that happens to be named NAME.c or philox.h. */
static bool may_replace(const char *path, const char *bytes, size_t n, bool *existed, Diag *d) {
    FILE *old = fopen(path, "rb");
    struct stat st;
    *existed = old != NULL;
    if (!old && errno != ENOENT) {
        int e = errno;
        if (lstat(path, &st) != 0) error_at(d, NOLOC, "cannot write %s: %s", path, strerror(errno)); /* a name too long, a folder missing */
        else error_at(d, NOLOC, "%s exists and cannot be read (%s): not overwritten", path, strerror(e));
        return false;
    }
    if (old) {
        char head[24];
        size_t want = n < sizeof head ? n : sizeof head - 2, got = fread(head, 1, want, old);
        fclose(old);
        if (got != want || memcmp(head, bytes, want) != 0) {
            error_at(d, NOLOC, "%s exists and trainc did not write it: not overwritten (remove it, or choose another -o)", path);
            return false;
        }
    }
    return true;
}

/* Whether the executable may be linked over path: nothing there, an
 * empty file (mktemp's), or a regular file that is a program (ELF). */
static bool exe_may_replace(const char *path, Diag *d) {
    struct stat st;
    if (lstat(path, &st) != 0 || (S_ISREG(st.st_mode) && st.st_size == 0)) return true;
    unsigned char head[4] = {0};
    FILE *f = S_ISREG(st.st_mode) || S_ISLNK(st.st_mode) ? fopen(path, "rb") : NULL;
    size_t got = f ? fread(head, 1, 4, f) : 0;
    if (f) fclose(f);
    if (got == 4 && memcmp(head, "\x7f" "ELF", 4) == 0) return true;
    error_at(d, NOLOC, "%s exists and is not a program: not overwritten by the executable (remove it, or choose another -o)", path);
    return false;
}

/* Writes n bytes to path whole or not at all (out_open: through
 * PATH.PID.tmp and a rename, so two compiles to one -o at once do not
 * write into one another's file). */
static bool write_bytes(const char *path, const char *bytes, size_t n, Diag *d) {
    OutWrite w = {0};
    if (!out_open(&w, path, "wb")) {
        error_at(d, NOLOC, "cannot write %s: %s", path, strerror(errno));
        return false;
    }
    if (!out_close(&w, fwrite(bytes, 1, n, w.f) == n)) {
        error_at(d, NOLOC, "cannot write %s: %s", path, strerror(errno));
        if (w.kept) note_at(d, NOLOC, "%s may be cut short: the whole file is in %s", path, w.tmp);
        return false;
    }
    return true;
}

/* The files one compile writes: all of them are checked (may_replace)
 * before any is written, so that a refusal leaves nothing behind. */
typedef struct OutFile {
    char path[4096];
    char *bytes;
    size_t n;
    bool existed;     /* may_replace found one there */
} OutFile;

typedef struct OutFiles {
    OutFile f[8];
    int n;
} OutFiles;

static OutFile *out_next(OutFiles *o) {
    if (o->n == (int)(sizeof o->f / sizeof o->f[0])) die("internal: more than %d output files", o->n);
    return &o->f[o->n];
}

static void out_text(OutFiles *o, const char *path, const char *text) {
    OutFile *f = out_next(o);
    o->n++;
    snprintf(f->path, sizeof f->path, "%s", path);
    f->n = strlen(text);
    f->bytes = xmalloc(f->n + 1);
    memcpy(f->bytes, text, f->n + 1);
}

/* A copy of a file of the runtime, dir/name: false if it cannot be read. */
static bool out_copy(OutFiles *o, const char *from, const char *dir, const char *name, Diag *d) {
    OutFile *f = out_next(o);
    f->bytes = read_file(from, &f->n);
    if (!f->bytes) {
        error_at(d, NOLOC, "cannot read %s: %s", from, strerror(errno));
        return false;
    }
    o->n++; /* out_free frees its bytes, whatever follows */
    if (snprintf(f->path, sizeof f->path, "%s/%s", dir, name) >= (int)sizeof f->path) {
        error_at(d, NOLOC, "the path %s/%s is too long", dir, name);
        return false;
    }
    return true;
}

/* Every file checked, then written; a write that fails removes the files
 * this call made new before it (one it replaced is a whole newer one). */
static bool out_write(OutFiles *o, Diag *d) {
    bool ok = true;
    /* -o lib/philox --emit=lib: NAME.h would be the runtime's philox.h */
    for (int i = 0; i < o->n; i++)
        for (int k = 0; k < i; k++)
            if (strcmp(o->f[i].path, o->f[k].path) == 0) {
                error_at(d, NOLOC, "%s would be written twice (two of this compile's files have that name): choose another -o", o->f[i].path);
                return false;
            }
    for (int i = 0; i < o->n; i++) ok &= may_replace(o->f[i].path, o->f[i].bytes, o->f[i].n, &o->f[i].existed, d);
    int i = 0;
    for (; ok && i < o->n; i++) ok = write_bytes(o->f[i].path, o->f[i].bytes, o->f[i].n, d);
    if (!ok)
        for (int k = 0; k < i - 1; k++)
            if (!o->f[k].existed) remove(o->f[k].path);
    return ok;
}

static void out_free(OutFiles *o) {
    for (int i = 0; i < o->n; i++) free(o->f[i].bytes);
    o->n = 0;
}

/* The folder of the output prefix out. */
static void out_dir(char *dir, size_t n, const char *out) {
    snprintf(dir, n, "%s", out);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, n, ".");
}

bool cg_apply_sets(Graph *g, const char *const *sets, Diag *d) {
    for (int i = 0; sets && sets[i]; i++) {
        const char *eq = strchr(sets[i], '=');
        char key[128], err[256];
        if (!eq || eq == sets[i]) {
            error_at(d, NOLOC, "--set takes KEY=VALUE, not '%s'", sets[i]);
            return false;
        }
        if ((size_t)(eq - sets[i]) >= sizeof key) { /* no key is that long */
            error_at(d, NOLOC, "--set %s: unknown train key '%.*s'", sets[i], (int)(eq - sets[i]), sets[i]);
            return false;
        }
        memcpy(key, sets[i], (size_t)(eq - sets[i]));
        key[eq - sets[i]] = 0;
        if (!train_set(&g->train, g->arena, key, eq + 1, err, sizeof err)) { /* (its location: NOLOC, the command line) */
            error_at(d, NOLOC, "--set %s: %s", sets[i], err);
            return false;
        }
    }
    return true;
}

/* The eval and sampling graphs read mixed precision's persistent half
 * copies of the weights (the training graph's states amp.<dt>.<param>
 * {copy_of}, current after initialisation, every update, load and
 * trn_set) instead of casting every weight at every batch: the same
 * values, rounded as the casts round them.  Then nothing but the copies
 * is read in half precision, and a product's bias add can join it. */
static int read_half_copies(Graph *train, Graph *g) {
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) {
        Node *c = g->nodes[i];
        if (c->op != OP_cast || c->in[0]->def->op != OP_param) continue;
        Node *p = c->in[0]->def;
        DType dt = c->out[0]->ty.dt;
        const char *name = amp_copy_name(g, p, dt);
        Node *ts = ir_find_source(train, OP_state, name);
        const char *of = ts ? ir_str(ts, "copy_of", NULL) : NULL;
        if (!of || strcmp(of, ir_source_name(p)) != 0 || !type_eq(&ts->out[0]->ty, &c->out[0]->ty)) continue;
        Node *st = ir_find_source(g, OP_state, name);
        if (!st) st = amp_copy_new(g, p, dt, i++); /* before the cast, which moves to i + 1 */
        ir_replace_all_uses(g, c->out[0], st->out[0]); /* the cast: dead */
        n++;
    }
    return n;
}

/* Parameters pad-tiles padded in the training graph but not in g.  A
 * sampling graph whose logits are more than the head's product (a model
 * that spells out log-softmax before its cross-entropy samples from the
 * log-probabilities) keeps its head unpadded: padded logits could not be
 * masked there.  Every schedule reads one buffer per parameter, so g's
 * parameter takes the padded shape and a slice per padded dimension gives
 * its uses the unpadded rows (a view: nothing is copied). */
static bool share_padding(Graph *train, Graph *g, Diag *d) {
    for (int i = 0; i < g->nnodes; i++) {
        Node *p = g->nodes[i];
        if (p->op != OP_param) continue;
        Node *tp = ir_find_source(train, OP_param, ir_source_name(p));
        Value *v = p->out[0];
        const Type *tt = tp ? &tp->out[0]->ty : NULL;
        const Type gt = v->ty; /* the unpadded type, kept for the slices */
        if (!tt || type_eq(tt, &gt) || tt->dt != gt.dt || tt->shape.rank != gt.shape.rank) continue;
        bool larger = true;
        for (int k = 0; k < gt.shape.rank; k++) larger = larger && tt->shape.d[k] >= gt.shape.d[k];
        if (!larger) continue; /* not padding: lowering reports the two types */
        /* the slices read v while it still has the unpadded type (each is
         * then the identity), the uses move to the last, and v grows */
        g->ip = i + 1;
        Value *cur = v;
        for (int k = 0; k < gt.shape.rank; k++) {
            if (tt->shape.d[k] == gt.shape.d[k]) continue;
            Node *sl = ir_new(g, OP_slice, 1, &cur, p->loc);
            ir_set_int(g, sl, "axis", k);
            ir_set_int(g, sl, "start", 0);
            ir_set_int(g, sl, "end", gt.shape.d[k]);
            if (!ir_emit(g, sl, d)) {
                g->ip = -1;
                return false;
            }
            cur = sl->out[0];
        }
        g->ip = -1;
        Node *first = g->nodes[i + 1];
        ir_replace_all_uses(g, v, cur);
        first->in[0] = v;
        v->ty = *tt;
        const Attr *up = ir_attr(tp, "unpadded");
        if (up) ir_set_ints(g, p, "unpadded", up->n, up->v);
    }
    return true;
}

/* The arena of o's program with the last `keep` repeated blocks keeping
 * their activations (checkpoint = budget's trial); -1 when it cannot be
 * built (then the build is repeated with d, to show why). */
static int64_t trial_arena(const CompileOptions *o, int keep, int *nblocks, int64_t *state, Diag *d) {
    CompileOptions t = *o;
    t.report = t.stats = false;
    t.po.quiet = t.po.ckpt_chosen = true;
    t.po.ckpt_keep = keep;
    t.po.ckpt_nblocks = nblocks;
    t.pm = (PMOptions){.verify_each = o->pm.verify_each}; /* no dumps */
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    Diag td;
    diag_init(&td, mf ? mf : stderr);
    Graph *train, *eval, *sample;
    Program *p = cg_build(&t, &train, &eval, &sample, &td);
    diag_free(&td);
    if (mf) fclose(mf);
    free(buf);
    int64_t bytes = -1;
    if (!p) { /* again, with its errors shown */
        t.po.quiet = o->po.quiet;
        p = cg_build(&t, &train, &eval, &sample, d);
        if (p) error_at(d, NOLOC, "checkpoint = budget: the memory plan keeping %d blocks failed once and not twice", keep);
    } else {
        bytes = p->arena_bytes;
        if (state) *state = p->cat_bytes[MC_PARAM] + p->cat_bytes[MC_GRAD] + p->cat_bytes[MC_OPTSTATE];
    }
    if (p) {
        cg_free(p);
        ir_graph_free(train);
        ir_graph_free(eval);
        ir_graph_free(sample);
    }
    return bytes;
}

/* checkpoint = budget: the most repeated blocks that can keep their
 * activations (the last ones, which the backward reaches first) with the
 * arena within memory_budget; the blocks before them recompute theirs, as
 * with checkpoint = blocks.  The arena grows with the blocks kept (each
 * kept block saves its activations; one recomputed block is live at a
 * time), so a bisection between every block recomputing (the smallest
 * arena: over the budget is an error) and none finds the most in about
 * log2(N) builds of the memory plan (were the growth not monotone, the
 * choice would still fit).  The choice goes into o->po. */
bool cg_choose_checkpoint(CompileOptions *o, const TrainConfig *tc, Diag *d) {
    int64_t budget = tc->memory_budget;
    if (budget <= 0) {
        error_at(d, train_loc(tc, "checkpoint"), "checkpoint = budget needs memory_budget, the bound on the arena (bytes or a size, e.g. memory_budget = \"8GB\")");
        return false;
    }
    int n = 0;
    int64_t state = 0, lo_b = trial_arena(o, 0, &n, &state, d);
    if (lo_b < 0) return false;
    if (lo_b > budget) {
        error_at(d, train_loc(tc, "memory_budget"), "checkpoint = budget: memory_budget is %lld bytes, but the smallest arena, every one of the %d repeated blocks "
                           "recomputing its activations, is %lld bytes (%lld of them parameters, gradients and optimizer states)",
                 (long long)budget, n, (long long)lo_b, (long long)state);
        return false;
    }
    int lo = 0, hi = n; /* arena(lo) fits, arena(hi) does not (unless every block fits: lo = hi = n) */
    int64_t hi_b = trial_arena(o, n, &n, NULL, d);
    if (hi_b < 0) return false;
    if (hi_b <= budget) {
        lo = n;
        lo_b = hi_b;
    }
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        int64_t b = trial_arena(o, mid, &n, NULL, d);
        if (b < 0) return false;
        if (b <= budget) lo = mid, lo_b = b;
        else hi = mid, hi_b = b;
    }
    if (!o->po.quiet) {
        if (lo == n)
            note_at(d, NOLOC, "checkpoint = budget: every block keeps its activations: the arena, %lld bytes, is within memory_budget (%lld)",
                    (long long)lo_b, (long long)budget);
        else
            note_at(d, NOLOC,
                    "checkpoint = budget: the last %d of %d blocks keep their activations, %d recompute them: arena %lld bytes, within "
                    "memory_budget (%lld; keeping %d would need %lld)",
                    lo, n, n - lo, (long long)lo_b, (long long)budget, lo + 1, (long long)hi_b);
    }
    o->po.ckpt_keep = lo;
    o->po.ckpt_chosen = true;
    return true;
}

/* Index inputs: an integer input read, directly or through casts to i32
 * or i64 and the shape ops (reshape, permute, broadcast, slice, pad,
 * concat), as embedding indices or cross_entropy targets gets the
 * attributes the runtime checks values fed to it against (TrnTensor's
 * index_end, docs/runtime.md): "index_end", the fewest rows or classes of
 * its readers, and "index_ignore" where every reader is a cross_entropy
 * with that ignore_index.  Read from the graph before pad-tiles pads a
 * vocabulary. */
typedef struct IndexIn {
    const char *name;
    int64_t end, ignore;
    int ignores; /* 0: no reader yet; 1: only cross_entropys with one ignore_index; -1: another reader */
} IndexIn;

static void index_readers(Uses *u, const Value *v, IndexIn *x) {
    const UseList *l = &u->of[v->id];
    for (int i = 0; i < l->n; i++) {
        const Node *m = l->u[i].node;
        int64_t end;
        if ((m->op == OP_cast && (m->out[0]->ty.dt == DT_i32 || m->out[0]->ty.dt == DT_i64)) || m->op == OP_reshape || m->op == OP_permute ||
            m->op == OP_broadcast || m->op == OP_slice || m->op == OP_pad || m->op == OP_concat) {
            /* ops that move values without changing them (a slice's
             * dropped values checked too, as pad's zeros are) */
            index_readers(u, m->out[0], x);
            continue;
        } else if (m->op == OP_embedding && l->u[i].idx == 1) {
            end = m->in[0]->ty.shape.d[0];
            x->ignores = -1;
        } else if (m->op == OP_cross_entropy && l->u[i].idx == 1) {
            const Shape *s = &m->in[0]->ty.shape;
            end = ir_int(m, "classes", s->d[s->rank - 1]);
            int64_t ig = ir_int(m, "ignore_index", -100);
            if (x->ignores == 0) x->ignores = 1, x->ignore = ig;
            else if (x->ignores == 1 && x->ignore != ig) x->ignores = -1;
        } else {
            continue;
        }
        if (end > (int64_t)INT32_MAX + 1) end = (int64_t)INT32_MAX + 1; /* the kernels index with i32 */
        if (x->end == 0 || end < x->end) x->end = end;
    }
}

/* The index inputs of g (unpadded), their names copied (g is freed
 * before they are marked): *n of them, in an array to free with
 * free_index_inputs. */
static IndexIn *index_inputs(Graph *g, int *n) {
    Uses *u = ir_uses(g);
    IndexIn *x = xmalloc(sizeof *x * (size_t)(g->nnodes + 1));
    int k = 0;
    for (int i = 0; i < g->nnodes; i++) {
        Node *in = g->nodes[i];
        if (in->op != OP_input || dtype_is_float[in->out[0]->ty.dt]) continue;
        x[k] = (IndexIn){ir_source_name(in), 0, 0, 0};
        index_readers(u, in->out[0], &x[k]);
        if (x[k].end == 0) continue;
        size_t len = strlen(x[k].name) + 1;
        x[k].name = memcpy(xmalloc(len), x[k].name, len);
        k++;
    }
    ir_uses_free(u);
    *n = k;
    return x;
}

static void free_index_inputs(IndexIn *x, int n) {
    for (int i = 0; i < n; i++) free((char *)x[i].name);
    free(x);
}

/* Gives the inputs x[] names in g their attributes. */
static void mark_index_inputs(Graph *g, const IndexIn *x, int n) {
    for (int i = 0; g && i < n; i++) {
        Node *in = ir_find_source(g, OP_input, x[i].name);
        if (!in) continue;
        ir_set_int(g, in, "index_end", x[i].end);
        if (x[i].ignores == 1) ir_set_int(g, in, "index_ignore", x[i].ignore);
    }
}

bool cg_prepare(const CompileOptions *o, Graph **train_out, Graph **eval_out, Graph **sample_out, Diag *d) {
    Graph *fwd = fe_load_file(o->model, o->defs, o->ndefs, d);
    if (!fwd) return false;
    if (d->nerrors || !cg_apply_sets(fwd, o->sets, d)) {
        ir_graph_free(fwd);
        return false;
    }
    if (o->stats) ir_print_stats(stderr, fwd);
    CompileOptions chosen;
    if (fwd->train.checkpoint && strcmp(fwd->train.checkpoint, "budget") == 0 && !o->po.ckpt_chosen) {
        chosen = *o;
        if (!cg_choose_checkpoint(&chosen, &fwd->train, d)) {
            ir_graph_free(fwd);
            return false;
        }
        o = &chosen;
    }
    int nidx;
    IndexIn *idx = index_inputs(fwd, &nidx);
    Graph *eval = make_eval(fwd, d);
    Graph *sample = eval ? make_sample(eval, d) : NULL;
    Graph *train = ir_clone(fwd);
    ir_graph_free(fwd);
    const char *names[64];
    PassOptions po = o->po;
    if (!po.target) po.target = o->target; /* the passes choose by target */
    int n = pm_training_pipeline(train, &po, names, 64);
    bool ok = eval && n <= 64 && pm_run(train, names, n, &po, &o->pm, d);
    /* the eval and sampling graphs get the same forward passes (fused ops,
     * dtypes, padded parameters), quietly: pad-tiles' notes came once */
    PassOptions fpo = po;
    fpo.quiet = fpo.forward_only = true;
    fpo.train_graph = train; /* their params are the training graph's buffers */
    PMOptions fpm = {0};
    fpm.verify_each = o->pm.verify_each;
    for (int i = 0; ok && i < 2; i++) {
        Graph *g = i ? sample : eval;
        if (!g) continue;
        n = pm_forward_pipeline(g, &fpo, names, 64);
        ok = n <= 64 && pm_run(g, names, n, &fpo, &fpm, d);
        const char *dce[] = {"dce"};
        if (ok && read_half_copies(train, g) > 0) ok = pm_run(g, dce, 1, &fpo, &fpm, d);
        ok = ok && share_padding(train, g, d);
    }
    Graph *gs[3] = {train, eval, sample};
    for (int i = 0; ok && i < 3; i++) mark_index_inputs(gs[i], idx, nidx);
    free_index_inputs(idx, nidx);
    if (!ok) {
        ir_graph_free(eval);
        ir_graph_free(sample);
        ir_graph_free(train);
        return false;
    }
    *train_out = train;
    *eval_out = eval;
    *sample_out = sample;
    return true;
}

/* The lowest sm_NN of an --arch list (80 for the default, NULL); what is
 * not of that form is left to cg_nvrtc_build's error.  Below 80 the
 * tensor-core attention (mma.sync with bf16) is not used. */
static int min_sm(const char *archs) {
    int m = 0;
    for (const char *p = archs; p && (p = strstr(p, "sm_")) != NULL; p += 3) {
        int sm = atoi(p + 3);
        if (sm > 0 && (m == 0 || sm < m)) m = sm;
    }
    return m ? m : 80;
}

Program *cg_build(const CompileOptions *o, Graph **train_out, Graph **fwd_out, Graph **sample_out, Diag *d) {
    Graph *train, *eval, *sample;
    if (!cg_prepare(o, &train, &eval, &sample, d)) return NULL;
    CgOptions co = {o->fuse, o->target ? o->target : "cpu"};
    Program *p = cg_lower(train, eval, sample, o->model, &co, d);
    if (p) {
        p->no_tc_attention = o->no_tc_attention || min_sm(o->archs) < 80;
        p->tc_attention_rows = o->tc_attention_rows;
        char *baked = train_baked(&p->tc, o->defs, o->ndefs);
        p->baked = arena_strdup(p->arena, baked);
        free(baked);
    }
    if (!p) {
        ir_graph_free(eval);
        ir_graph_free(sample);
        ir_graph_free(train);
        return NULL;
    }
    /* cuda target: cuBLASLt's workspace and kernel scratch join the plan (codegen/cuda.h) */
    if (o->target && strcmp(o->target, "cuda") == 0) cg_cuda_plan_workspace(p);
    *train_out = train;
    *fwd_out = eval;
    *sample_out = sample;
    return p;
}

int cg_compile(const CompileOptions *o, Diag *d) {
    Graph *train = NULL, *eval = NULL, *sample = NULL;
    /* a compile that will need NVRTC finds it before the passes run, so a
     * machine without one hears that alone, not the passes' notes first */
    bool kernels_only = o->emit && strcmp(o->emit, "kernels") == 0;
    if (o->target && strcmp(o->target, "cuda") == 0 && !kernels_only && !(o->report && !o->out && !o->emit)) {
        char err[2400];
        if (!cg_nvrtc_open(err, sizeof err)) {
            error_at(d, NOLOC, "%s", err);
            return 1;
        }
        if (!cg_nvrtc_check_archs(o->archs, d)) return 1; /* --arch=sm_70, before the passes' notes too */
    }
    Program *p = cg_build(o, &train, &eval, &sample, d);
    if (!p) return 1;
    int rc = 0;
    if (o->report) cg_print_report(stdout, p);
    if (o->emit && strcmp(o->emit, "kernels") == 0) {
        cg_print_kernels(stdout, p);
        goto done;
    }
    if (o->report && !o->out && !o->emit) goto done;

    const char *out = o->out ? o->out : p->name;
    if (o->symbol) p->symbol = o->symbol;
    else {
        StrBuf id = {0};
        cg_c_ident(&id, p->name);
        p->symbol = arena_strdup(p->arena, id.s);
        sb_free(&id);
    }
    bool lib = o->emit && strcmp(o->emit, "lib") == 0;
    bool only_c = o->emit && strcmp(o->emit, "c") == 0;
    bool only_cu = o->emit && strcmp(o->emit, "cuda") == 0;
    bool cuda = o->target && strcmp(o->target, "cuda") == 0;
    if (o->emit && !lib && !only_c && !only_cu) {
        error_at(d, NOLOC, "unknown --emit=%s (expected kernels, c, lib or cuda)", o->emit);
        rc = 2;
        goto done;
    }
    if (o->target && !cuda && strcmp(o->target, "cpu") != 0) {
        error_at(d, NOLOC, "unknown --target=%s (expected cpu or cuda)", o->target);
        rc = 2;
        goto done;
    }
    if (only_cu && !cuda) {
        error_at(d, NOLOC, "--emit=cuda needs --target=cuda");
        rc = 2;
        goto done;
    }
    /* the paths made from out (NAME.cuda-report.txt, DIR/trainc_kernels.h,
     * NAME.PID.tmp) fit the buffers they are made in */
    if (strlen(out) > 4000) {
        error_at(d, NOLOC, "the output path %.60s... is %zu bytes long: at most 4000", out, strlen(out));
        rc = 1;
        goto done;
    }
    /* the executable replaces only a program (one trainc linked, or
     * another): not the model's source, a token file, a folder */
    if (!lib && !only_c && !only_cu && !exe_may_replace(out, d)) {
        rc = 1;
        goto done;
    }
    /* cuda target: the CUDA C of every kernel, compiled by NVRTC now */
    CudaModule *cm = NULL;
    CudaBuild cb = {0};
    if (cuda) {
        cm = cg_cuda_emit(p, d);
        if (!cm || !cg_nvrtc_build(cg_cuda_source(cm), o->archs, &cb, d)) {
            cg_cuda_free(cm);
            rc = 1;
            goto done;
        }
        if (o->verbose)
            fprintf(stderr, "trainc: %d CUDA functions for %d kernels, %d images in %.1f s (%s)\n", cg_cuda_nfns(cm), cg_cuda_nkernels(cm),
                    cb.n, cb.seconds, cb.cache);
    }
    if (only_cu) {
        /* NAME.cu, the prelude headers beside it, NAME.cuda-report.txt */
        OutFiles of = {0};
        char path[4096], dir[4096], from[4096];
        out_dir(dir, sizeof dir, out);
        snprintf(path, sizeof path, "%s.cu", out);
        out_text(&of, path, cg_cuda_source(cm));
        static const char *const cuh[] = {"trainc_cuda.cuh", "philox.h"};
        bool wok = true;
        for (size_t i = 0; wok && i < 2; i++) {
            snprintf(from, sizeof from, "%s/%s", cg_runtime_dir(), cuh[i]);
            wok = out_copy(&of, from, dir, cuh[i], d);
        }
        char *rt = NULL;
        size_t rlen = 0;
        FILE *rf = open_memstream(&rt, &rlen);
        if (!rf) die("open_memstream failed");
        cg_cuda_print_report(rf, cm, &cb);
        fclose(rf);
        snprintf(path, sizeof path, "%s.cuda-report.txt", out);
        out_text(&of, path, rt);
        free(rt);
        if (wok) wok = out_write(&of, d);
        out_free(&of);
        cg_cuda_build_free(&cb);
        cg_cuda_free(cm);
        rc = wok ? 0 : 1;
        goto done;
    }
    /* the generated source */
    char *text = NULL;
    size_t tlen = 0;
    FILE *mf = open_memstream(&text, &tlen);
    if (!mf) die("open_memstream failed");
    if (cuda) p->cuda_symbol = cg_cuda_module_symbol(cm);
    bool ok = cg_emit_c(mf, p, !lib, d);
    if (ok && cuda) ok = cg_cuda_emit_host(mf, cm, &cb, d); /* the module the descriptor points at */
    fclose(mf);
    cg_cuda_build_free(&cb);
    cg_cuda_free(cm);
    if (!ok) {
        free(text);
        rc = 1;
        goto done;
    }
    const char *rt = cg_runtime_dir();
    OutFiles of = {0};
    char cpath[4096];
    snprintf(cpath, sizeof cpath, "%s.c", out);
    out_text(&of, cpath, text);
    free(text);
    if (lib) {
        /* NAME.h, NAME.c, and the runtime (static library and headers) beside them */
        char hpath[4096], dir[4096], from[4096];
        snprintf(hpath, sizeof hpath, "%s.h", out);
        StrBuf h = {0}, base = {0};
        const char *id = p->symbol, *slash = strrchr(out, '/');
        /* the file's own name, not the folder it was written to (the same
         * header from any build folder), as comment text */
        cg_comment_text(&base, slash ? slash + 1 : out);
        sb_printf(&h,
                  "/* Generated by trainc: the %s model as a library, trn_model_%s.  Compile %s.c as trainc does\n"
                  " * (-O2 -fopenmp -fno-trapping-math -DTRN_HAVE_BLAS: without the last, the products are loops, not\n"
                  " * OpenBLAS's, and the losses differ in their last bits) and link it with libtrainc_rt.a, OpenBLAS,\n"
                  " * -lm -lpthread -ldl; see docs/runtime.md for the API (trn_create, trn_step, ...). */\n"
                  "#ifndef TRAINC_MODEL_%s_H\n#define TRAINC_MODEL_%s_H\n#include \"trainc_rt.h\"\n"
                  "extern const TrnModel trn_model_%s;\n#endif\n",
                  p->name, id, base.s ? base.s : "", id, id, id);
        sb_free(&base);
        out_text(&of, hpath, h.s);
        sb_free(&h);
        out_dir(dir, sizeof dir, out);
        static const char *const headers[] = {"trainc_rt.h", "trainc_kernels.h", "philox.h", "trainc_cuda.h"};
        ok = true;
        for (size_t i = 0; ok && i < (cuda ? 4u : 3u); i++) { /* trainc_cuda.h: what a cuda target's NAME.c includes */
            snprintf(from, sizeof from, "%s/%s", rt, headers[i]);
            ok = out_copy(&of, from, dir, headers[i], d);
        }
        if (ok) ok = out_copy(&of, cg_runtime_lib(), dir, "libtrainc_rt.a", d);
        if (ok) ok = out_write(&of, d);
        out_free(&of);
        rc = ok ? 0 : 1;
        goto done;
    }
    ok = out_write(&of, d);
    out_free(&of);
    if (!ok) {
        rc = 1;
        goto done;
    }
    if (only_c) goto done;

    /* build the executable */
    {
        char inc[4096], blas_inc[] = "-I/usr/include/x86_64-linux-gnu";
        snprintf(inc, sizeof inc, "-I%s", rt);
        const char *env = getenv("CC");
        const char *cc = o->cc && *o->cc ? o->cc : env && *env ? env : "cc";
        const char *argv[64];
        int a = 0;
        /* "ccache gcc", "gcc -m64": split at blanks, as make splits $(CC) */
        char ccw[1024];
        snprintf(ccw, sizeof ccw, "%s", cc);
        for (char *w = strtok(ccw, " \t"); w && a < 16; w = strtok(NULL, " \t")) argv[a++] = w;
        if (a == 0) argv[a++] = "cc";
        if (!o->opt || *o->opt) argv[a++] = o->opt ? o->opt : "-O2"; /* --copt= : none */
        for (int i = 0; cg_cflags[i]; i++) argv[a++] = cg_cflags[i];
        if (o->blas) argv[a++] = "-DTRN_HAVE_BLAS";
        if (o->native) argv[a++] = "-march=native";
#ifdef TRAINC_RT_SANITIZE
        argv[a++] = "-fsanitize=address,undefined"; /* the runtime library was built with them */
#endif
        argv[a++] = inc;
        argv[a++] = blas_inc;
        argv[a++] = cpath;
        argv[a++] = cg_runtime_lib();
        char blas_l[4200], blas_r[4200];
        if (o->blas && *cg_openblas_dir()) {
            snprintf(blas_l, sizeof blas_l, "-L%s", cg_openblas_dir());
            snprintf(blas_r, sizeof blas_r, "-Wl,-rpath,%s", cg_openblas_dir());
            argv[a++] = blas_l;
            argv[a++] = blas_r;
        }
        if (o->blas) argv[a++] = "-lopenblas";
        argv[a++] = "-lm";
        argv[a++] = "-lpthread";
        argv[a++] = "-ldl";
        /* linked as NAME.PID.tmp and renamed: a failed link (the linker
         * removes its output) leaves an earlier NAME as it was */
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%.4096s.%d.tmp", out, (int)getpid());
        argv[a++] = "-o";
        argv[a++] = tmp;
        argv[a] = NULL;
        tmp_track(tmp); /* a Ctrl-C during the link leaves neither */
        if (!o->keep) tmp_track(cpath);
        int st = run_cmd((char *const *)argv, o->verbose);
        if (st != 0) {
            error_at(d, NOLOC, "the C compiler failed on %s (status %d)", cpath, st);
            remove(tmp);
            rc = 1;
        } else if (rename(tmp, out) != 0) {
            error_at(d, NOLOC, "cannot write %s: %s", out, strerror(errno));
            remove(tmp);
            rc = 1;
            st = 1;
        }
        if (!o->keep && st == 0) remove(cpath);
        tmp_untrack(tmp);
        tmp_untrack(cpath);
    }
done:
    cg_free(p);
    ir_graph_free(train);
    ir_graph_free(eval);
    ir_graph_free(sample);
    return rc;
}
