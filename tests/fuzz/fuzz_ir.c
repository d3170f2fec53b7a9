/* tests/fuzz/fuzz_ir.c — libFuzzer target for the IR parser, printer,
 * verifier and cleanup passes.
 *
 * For every input: ir_parse must not crash; when it succeeds, the printed
 * text must parse again and print the same bytes (with and without
 * locations); and when the graph verifies, fold, cse and dce must leave a
 * graph that still verifies and still round-trips, and the training
 * pipeline (`trainc ir --train`: autodiff, the optimizer, mixed precision,
 * fusion, padding, ...; for the cpu target and the cuda one) must leave,
 * after every pass, a graph that verifies or stop with an error.  A broken
 * property, or an internal error (die aborts), is a crash to libFuzzer.
 * The interpreter runs the graph before and after the cleanup passes too:
 * the same results (see compare below).
 *
 * Built with clang only (tests/ir.cmake): -fsanitize=fuzzer,address,undefined.
 * The corpus runner (tests/ir/run_corpus_ir.c) calls the same entry point
 * on tests/fuzz/corpus_ir/ with any compiler, in CTest.
 */
#include "ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what, const char *text) {
    fprintf(stderr, "fuzz_ir: %s\n--- input as printed:\n%s\n", what, text);
    abort();
}

static void roundtrip(Graph *g, Diag *quiet, bool locs) {
    PrintOptions po = {locs};
    char *p1 = ir_print_str(g, &po);
    Graph *h = ir_parse("p1.ir", p1, quiet);
    if (!h) fail("the printed IR does not parse", p1);
    char *p2 = ir_print_str(h, &po);
    if (strcmp(p1, p2) != 0) {
        /* with locations, nodes without one get their .ir position once */
        Graph *k = locs ? ir_parse("p2.ir", p2, quiet) : NULL;
        char *p3 = k ? ir_print_str(k, &po) : NULL;
        if (!p3 || strcmp(p2, p3) != 0) fail("print(parse(print(g))) != print(g)", p1);
        free(p3);
        ir_graph_free(k);
    }
    free(p2);
    ir_graph_free(h);
    free(p1);
}

/* ---- the cleanup passes against the interpreter ----
 * The graph before fold, cse, dce, fold and after them, run by the
 * interpreter in f32 mode (each op computed in double and rounded to its
 * dtype, as fold computes) with the same initialisation and inputs, must
 * give the same results and updates: bit for bit, but for +0 and -0
 * (docs/ir.md: `x+0 -> x`) and any two NaNs; where the graph casts, within
 * a rounding of the narrowest float dtype it casts from or to (1e-5 for
 * f32, 2^-10 for f16, 2^-7 for bf16) of the larger: fold moves a widening
 * cast before a reduction, which then sums in the wider dtype, and drops
 * the rounding of its result.  An update of a param or state to its own
 * value may go (dce, docs/ir.md).  Graphs of more than 2^18 elements in
 * all are skipped, and so are graphs the interpreter refuses before the
 * passes (an index out of range, ...). */
static bool small_graph(const Graph *g, double *tol) {
    double total = 0;
    *tol = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const Node *n = g->nodes[i];
        if (n->op == OP_cast) {
            DType dts[2] = {n->in[0]->ty.dt, n->out[0]->ty.dt};
            for (int k = 0; k < 2; k++) {
                double t = dts[k] == DT_bf16 ? 0x1p-7 : dts[k] == DT_f16 ? 0x1p-10 : 1e-5;
                if (t > *tol) *tol = t;
            }
        }
        for (int j = 0; j < n->nout; j++) {
            double e = 1;
            for (int k = 0; k < n->out[j]->ty.shape.rank; k++) e *= (double)n->out[j]->ty.shape.d[k];
            total += e;
        }
    }
    return total <= (double)(1 << 18);
}

/* Inputs: floats in [-2, 2), integers in [0, 4), from the element's index. */
static void feed(Graph *g, Interp *it) {
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (n->op != OP_input) continue;
        Tensor *t = interp_source(it, ir_source_name(n));
        if (!t) continue;
        bool integer = !dtype_is_float[t->ty.dt];
        for (int64_t k = 0; k < t->n; k++) {
            uint64_t h = (uint64_t)(k + 1) * 0x9E3779B97F4A7C15ull;
            h ^= h >> 29;
            t->data[k] = integer ? (double)(h % 4) : (double)(h % 4096) / 1024.0 - 2.0;
        }
    }
}

/* Runs g's phases once; NULL when the interpreter refuses it. */
static Interp *run(Graph *g) {
    static FILE *devnull;
    if (!devnull) devnull = fopen("/dev/null", "w");
    Diag d;
    diag_init(&d, devnull);
    Interp *it = interp_new(g, INTERP_F32);
    interp_init(it, 7);
    feed(g, it);
    bool ok = interp_run_phase(it, PH_MICRO, &d) && interp_run_phase(it, PH_STEP, &d) && !d.nerrors;
    diag_free(&d);
    if (!ok) {
        interp_free(it);
        return NULL;
    }
    return it;
}

static bool same(double a, double b, double tol) {
    if (a == b || (isnan(a) && isnan(b))) return true;
    return tol > 0 && fabs(a - b) <= tol * fmax(fabs(a), fabs(b));
}

/* Compares the outputs of a (graph ga) and b (graph gb) by name. */
static void compare(Graph *ga, Interp *a, Graph *gb, Interp *b, double tol, const char *text) {
    for (int i = 0; i < ga->noutputs; i++) {
        Output *o = &ga->outputs[i];
        const Tensor *x = o->kind == OUT_UPDATE ? interp_source(a, o->name) : interp_value(a, o->value), *y = NULL;
        bool kept = false;
        for (int j = 0; j < gb->noutputs && !y; j++)
            if (gb->outputs[j].kind == o->kind && strcmp(gb->outputs[j].name, o->name) == 0)
                kept = true, y = o->kind == OUT_UPDATE ? interp_source(b, o->name) : interp_value(b, gb->outputs[j].value);
        if (!kept && o->kind == OUT_UPDATE && o->target && o->value == o->target->out[0]) continue; /* `update %w = %w`, dropped */
        if (!x || !y || x->n != y->n) {
            fprintf(stderr, "fuzz_ir: output '%s' is missing or has another size after the cleanups\n", o->name);
            fail("the cleanup passes changed an output", text);
        }
        for (int64_t k = 0; k < x->n; k++)
            if (!same(x->data[k], y->data[k], tol)) {
                fprintf(stderr, "fuzz_ir: output '%s' element %lld: %.17g before the cleanups, %.17g after\n", o->name, (long long)k,
                        x->data[k], y->data[k]);
                fail("the cleanup passes changed a result", text);
            }
    }
}

/* The verifier's headline after a pass (passes/pm.c); an input holding
 * the words itself (echoed under an error) is not judged by them. */
static const char invalid[] = ": the IR is invalid";

/* The training pipeline on a copy of g, verified after every pass. */
static void train_pipeline(Graph *g, const char *target, const char *text) {
    Graph *t = ir_clone(g);
    char *msgs = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&msgs, &len);
    if (!mem) abort();
    Diag d;
    diag_init(&d, mem);
    PassOptions po = {.quiet = true, .target = target};
    PMOptions pm = {.verify_each = true};
    const char *names[64];
    int n = pm_training_pipeline(t, &po, names, 64);
    if (n > 64) abort();
    pm_run(t, names, n, &po, &pm, &d);
    diag_free(&d);
    fclose(mem);
    if (strstr(msgs, invalid) && !strstr(text, invalid)) {
        fprintf(stderr, "fuzz_ir: target %s:\n%s", target, msgs);
        fail("the training pipeline left an invalid graph", text);
    }
    free(msgs);
    ir_graph_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static FILE *devnull;
    if (!devnull) devnull = fopen("/dev/null", "w");
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    Diag d;
    diag_init(&d, devnull);
    Graph *g = ir_parse("fuzz.ir", text, &d);
    if (g) {
        roundtrip(g, &d, false);
        roundtrip(g, &d, true);
        ir_print_dot(devnull, g);
        Diag v;
        diag_init(&v, devnull);
        if (ir_verify(g, &v)) {
            ir_print_stats(devnull, g);
            double tol;
            Graph *before = small_graph(g, &tol) ? ir_clone(g) : NULL;
            Interp *ib = before ? run(before) : NULL;
            PassOptions po = {0};
            static const PassFn passes[] = {pass_fold, pass_cse, pass_dce, pass_fold};
            for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++) {
                if (!passes[i](g, &po, &v)) fail("a cleanup pass failed", text);
                if (!ir_verify(g, &v)) {
                    char *p = ir_print_str(g, &(PrintOptions){false});
                    fprintf(stderr, "fuzz_ir: pass %zu broke the graph:\n%s\n", i, p);
                    fail("a cleanup pass left an invalid graph", text);
                }
            }
            roundtrip(g, &d, false);
            if (ib) {
                Interp *ia = run(g);
                if (!ia) fail("the graph runs before the cleanup passes and not after them", text);
                compare(before, ib, g, ia, tol, text);
                interp_free(ia);
                interp_free(ib);
            }
            ir_graph_free(before);
            train_pipeline(g, "cpu", text);
            train_pipeline(g, "cuda", text);
        }
        diag_free(&v);
        ir_graph_free(g);
    }
    diag_free(&d);
    free(text);
    return 0;
}
