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
 *
 * Built with clang only (tests/ir.cmake): -fsanitize=fuzzer,address,undefined.
 * The corpus runner (tests/ir/run_corpus_ir.c) calls the same entry point
 * on tests/fuzz/corpus_ir/ with any compiler, in CTest.
 */
#include "ir.h"

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
