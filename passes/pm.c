/* passes/pm.c — the pass manager: the table of passes, running a list of
 * them with dumps, verification and timing, and the standard pipeline.
 */
#include "ir.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Every pass, one row each: name, entry point, one line of help. */
const PassInfo pass_list[] = {
    {"verify", pass_verify, "check every IR invariant (SSA, types, phases, outputs)"},
    {"dce", pass_dce, "remove nodes that no output depends on (inputs and params stay)"},
    {"cse", pass_cse, "merge nodes computing the same op on the same operands"},
    {"fold", pass_fold, "fold constants, identity arithmetic, casts and shape ops"},
    {"autodiff", pass_autodiff, "reverse-mode differentiation: add the backward pass"},
    {"optimizer", pass_optimizer, "add gradient accumulation, clipping and the update rule"},
};
const int npass_list = (int)(sizeof pass_list / sizeof pass_list[0]);

const PassInfo *pass_lookup(const char *name) {
    for (int i = 0; i < npass_list; i++)
        if (strcmp(pass_list[i].name, name) == 0) return &pass_list[i];
    return NULL;
}

static bool listed(const char *const *names, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (names[i] && strcmp(names[i], name) == 0) return true;
    return false;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void dump(const PMOptions *pm, Graph *g, const char *when, const char *pass) {
    FILE *f = pm->dump ? pm->dump : stderr;
    fprintf(f, "*** IR Dump %s %s ***\n", when, pass);
    ir_print(f, g, &pm->print);
    fflush(f);
}

/* Verifies g; on failure reports "<when> pass 'X': the IR is invalid" and
 * then the verifier's errors (captured first, so the headline comes first). */
static bool verify_around(Graph *g, Diag *d, const char *when, const char *pass) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) die("open_memstream failed");
    Diag tmp = *d;
    tmp.out = f;
    tmp.nerrors = tmp.nwarnings = 0;
    bool ok = ir_verify(g, &tmp);
    fclose(f);
    if (!ok) {
        error_at(d, NOLOC, "%s pass '%s': the IR is invalid", when, pass);
        fputs(buf, d->out);
        d->nerrors += tmp.nerrors;
        d->nwarnings += tmp.nwarnings;
    }
    free(buf);
    return ok;
}

typedef struct Timing { const char *name; double secs; } Timing;

/* An LLVM-style report: each run of a pass in order, then the total. */
static void print_timing(const Timing *t, int n) {
    double total = 0;
    for (int i = 0; i < n; i++) total += t[i].secs;
    FILE *f = stderr;
    fprintf(f, "===-------------------------------------------------------------------------===\n");
    fprintf(f, "                      ... Pass execution timing report ...\n");
    fprintf(f, "===-------------------------------------------------------------------------===\n");
    fprintf(f, "  Total Execution Time: %.4f seconds (%.4f wall clock)\n\n", total, total);
    fprintf(f, "   ---Wall Time---  --- Name ---\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "   %7.4f (%5.1f%%)  %s\n", t[i].secs, total > 0 ? 100.0 * t[i].secs / total : 0.0, t[i].name);
    fprintf(f, "   %7.4f (100.0%%)  Total\n", total);
}

bool pm_run(Graph *g, const char *const *names, int n, const PassOptions *po, const PMOptions *pm, Diag *d) {
    static const PMOptions none = {0};
    static const PassOptions no_po = {0};
    if (!pm) pm = &none;
    if (!po) po = &no_po;
    /* every name first, so that a typo fails before any work */
    for (int i = 0; i < n; i++)
        if (!pass_lookup(names[i])) {
            char avail[1024] = "";
            for (int k = 0; k < npass_list; k++) {
                if (k) strncat(avail, ", ", sizeof avail - strlen(avail) - 1);
                strncat(avail, pass_list[k].name, sizeof avail - strlen(avail) - 1);
            }
            error_at(d, NOLOC, "unknown pass '%s' (available: %s)", names[i], avail);
            return false;
        }
    if (pm->verify_each && n > 0 && !verify_around(g, d, "before", names[0])) return false;
    Timing *times = xcalloc((size_t)n + 1, sizeof(Timing));
    bool ok = true;
    int ran = 0;
    for (int i = 0; i < n && ok; i++) {
        const PassInfo *p = pass_lookup(names[i]);
        if (listed(pm->print_before, pm->nprint_before, p->name)) dump(pm, g, "Before", p->name);
        int errors = d->nerrors;
        double t0 = now();
        ok = p->fn(g, po, d) && d->nerrors == errors;
        times[ran++] = (Timing){p->name, now() - t0};
        if (!ok) {
            if (d->nerrors == errors) error_at(d, NOLOC, "pass '%s' failed", p->name);
            break;
        }
        if (pm->print_after_all || listed(pm->print_after, pm->nprint_after, p->name)) dump(pm, g, "After", p->name);
        if (pm->verify_each && strcmp(p->name, "verify") != 0) ok = verify_around(g, d, "after", p->name);
    }
    if (pm->time_passes) print_timing(times, ran);
    free(times);
    return ok;
}

/* The standard training pipeline, one literal list (later passes are
 * inserted here). */
int pm_training_pipeline(const Graph *g, const PassOptions *po, const char **names, int max) {
    (void)g;
    (void)po;
    static const char *const pipeline[] = {
        "fold", "cse", "dce", "autodiff", "optimizer", "cse", "dce",
    };
    int n = (int)(sizeof pipeline / sizeof pipeline[0]);
    for (int i = 0; i < n && i < max; i++) names[i] = pipeline[i];
    return n;
}
