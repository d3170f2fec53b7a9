/* tests/fuzz/fuzz_ir.c — libFuzzer target for the IR parser, printer,
 * verifier and cleanup passes.
 *
 * For every input: ir_parse must not crash; when it succeeds, the printed
 * text must parse again and print the same bytes (with and without
 * locations); and when the graph verifies, fold, cse and dce must leave a
 * graph that still verifies and still round-trips.  A broken property
 * aborts, which libFuzzer reports as a crash.
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
        }
        diag_free(&v);
        ir_graph_free(g);
    }
    diag_free(&d);
    free(text);
    return 0;
}
