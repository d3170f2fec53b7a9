/* tests/codegen/cg_harness.c — see cg_harness.h. */
#include "cg_harness.h"

#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int run(const char *cmd) {
    int rc = system(cmd);
    if (rc != 0) fprintf(stderr, "command failed (%d): %s\n", rc, cmd);
    return rc;
}

int h_build(Harness *h, const char *model, const char *const *defs, const char *const *sets, bool fuse, int accum) {
    memset(h, 0, sizeof *h);
    Define dv[32];
    char store[32][64];
    int nd = h_defines(defs, dv, store, 32);
    CompileOptions o = {0};
    o.model = model;
    o.defs = dv;
    o.ndefs = nd;
    o.fuse = fuse;
    o.sets = sets;
    o.blas = true;
    o.po.accum = accum;
    o.pm.verify_each = true;
    Diag *d = &h->d;
    diag_init(d, stderr);
    h->prog = cg_build(&o, &h->train, &h->eval, &h->sample, d);
    if (!h->prog) return -1;
    static int counter;
    snprintf(h->cpath, sizeof h->cpath, "/tmp/trainc_cg_%d_%d.c", (int)getpid(), counter);
    snprintf(h->sopath, sizeof h->sopath, "/tmp/trainc_cg_%d_%d.so", (int)getpid(), counter++);
    FILE *f = fopen(h->cpath, "w");
    if (!f) return -1;
    bool ok = cg_emit_c(f, h->prog, false, d);
    fclose(f);
    if (!ok) return -1;
    char flags[256] = "", cmd[2048];
    for (int i = 0; cg_cflags[i]; i++) snprintf(flags + strlen(flags), sizeof flags - strlen(flags), " %s", cg_cflags[i]);
    snprintf(cmd, sizeof cmd,
             "cc -O2%s -fPIC -shared -DTRN_HAVE_BLAS -I%s -I/usr/include/x86_64-linux-gnu "
             "-Wall -Wno-unused-variable -Wno-unused-function -Werror %s -o %s %s%s -lopenblas -lm",
             flags, cg_runtime_dir(), h->cpath, h->sopath, *cg_openblas_dir() ? "-L" : "", cg_openblas_dir());
    if (run(cmd) != 0) return -1;
    h->so = dlopen(h->sopath, RTLD_NOW | RTLD_LOCAL);
    if (!h->so) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return -1;
    }
    char sym[256];
    snprintf(sym, sizeof sym, "trn_model_%s", h->train->name);
    h->compiled = dlsym(h->so, sym);
    if (!h->compiled) {
        fprintf(stderr, "dlsym %s: %s\n", sym, dlerror());
        return -1;
    }
    h->im = ib_new(h->train, h->eval, h->sample, INTERP_F32, model, h->prog->baked, d);
    return h->im ? 0 : -1;
}

void h_free(Harness *h) {
    if (h->im) ib_free(h->im);
    diag_free(&h->d);
    /* the shared object is not closed: OpenMP's worker threads may still
     * hold code from it, and unloading it under them crashes at exit */
    if (h->prog) cg_free(h->prog);
    ir_graph_free(h->train);
    ir_graph_free(h->eval);
    ir_graph_free(h->sample);
    if (h->cpath[0] && !getenv("TRAINC_KEEP")) remove(h->cpath);
    if (h->sopath[0]) remove(h->sopath);
}

int h_tokens_from_file(Tokens *tk, const char *path, int64_t max) {
    size_t n;
    char *text = read_file(path, &n);
    if (!text) return -1;
    if ((int64_t)n > max) n = (size_t)max;
    tk->t = xmalloc(sizeof(int32_t) * n);
    for (size_t i = 0; i < n; i++) tk->t[i] = (unsigned char)text[i];
    tk->n = (int64_t)n;
    free(text);
    return 0;
}

void h_tokens_synthetic(Tokens *tk, int64_t n, int vocab, uint64_t seed) {
    tk->t = xmalloc(sizeof(int32_t) * (size_t)n);
    uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (int64_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        /* mostly predictable: the next token follows the previous one */
        tk->t[i] = (x >> 60) < 12 && i ? (tk->t[i - 1] + 1) % vocab : (int32_t)((x >> 33) % (uint64_t)vocab);
    }
    tk->n = n;
}

int h_feed(TrnSession *s, const Tokens *tk, int64_t i) {
    const TrnModel *m = trn_model(s);
    const TrnTensor *t = &m->tensors[m->t_tokens];
    int64_t bt = t->numel;
    int32_t *tok = xmalloc(sizeof(int32_t) * (size_t)bt), *tgt = xmalloc(sizeof(int32_t) * (size_t)bt);
    int64_t start = (i * bt) % (tk->n - bt - 1);
    for (int64_t k = 0; k < bt; k++) {
        tok[k] = tk->t[start + k];
        tgt[k] = tk->t[start + k + 1];
    }
    int rc = trn_set(s, "tokens", tok, sizeof(int32_t) * (size_t)bt);
    if (rc == 0 && m->t_targets >= 0) rc = trn_set(s, "targets", tgt, sizeof(int32_t) * (size_t)bt);
    free(tok);
    free(tgt);
    return rc;
}

int h_failures;

void h_tokens_text(Tokens *tk) {
    if (h_tokens_from_file(tk, "../shared/data/tinyshakespeare.txt", 200000) != 0) {
        printf("(tinyshakespeare.txt not found: synthetic tokens)\n");
        h_tokens_synthetic(tk, 200000, 256, 7);
    }
}

int h_defines(const char *const *defs, Define *dv, char (*store)[64], int max) {
    int nd = 0;
    for (int i = 0; defs && defs[i] && nd < max; i++) {
        snprintf(store[nd], 64, "%s", defs[i]);
        char *eq = strchr(store[nd], '=');
        if (!eq) continue;
        *eq = 0;
        dv[nd].name = store[nd];
        dv[nd].value = eq + 1;
        nd++;
    }
    return nd;
}

int h_finish(void) {
    if (h_failures) {
        fprintf(stderr, "%d check(s) failed\n", h_failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}

int h_feed_next(void *ctx, TrnSession *s, int micro) {
    (void)micro;
    HFeed *f = ctx;
    return h_feed(s, f->tk, f->next++);
}

double h_rel(double a, double b, double floor) {
    if (a != a || b != b) return INFINITY;
    double m = fmax(fmax(fabs(a), fabs(b)), floor);
    if (a == b) return 0;
    return fabs(a - b) / m;
}

double h_param_diff(TrnSession *a, TrnSession *b, const char **worst) {
    const TrnModel *m = trn_model(a);
    double w = 0;
    for (int i = 0; i < m->ntensors; i++) {
        const TrnTensor *t = &m->tensors[i];
        if (t->kind != TRN_PARAM || t->dtype != TRN_F32) continue;
        float *x = xmalloc(sizeof(float) * (size_t)t->numel), *y = xmalloc(sizeof(float) * (size_t)t->numel);
        if (trn_get(a, t->name, x, sizeof(float) * (size_t)t->numel) || trn_get(b, t->name, y, sizeof(float) * (size_t)t->numel)) {
            fprintf(stderr, "cannot read %s\n", t->name);
            w = INFINITY;
        } else {
            /* max |x - y| over max |x|: the error relative to the tensor's scale */
            double scale = 0, diff = 0;
            for (int64_t k = 0; k < t->numel; k++) {
                scale = fmax(scale, fabs(x[k]));
                diff = h_max(diff, fabs((double)x[k] - (double)y[k]));
            }
            double r = scale > 0 ? diff / scale : diff;
            if (!(r <= w)) {
                w = r;
                if (worst) *worst = t->name;
            }
        }
        free(x);
        free(y);
    }
    return w;
}
