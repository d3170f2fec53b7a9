/* tests/fuzz/fuzz_model.c — libFuzzer target for the .model front end.
 *
 * Feeds the bytes to fe_load_string (as NUL-terminated text) with -D
 * overrides taken from nothing, and the messages going to a memory stream.
 * Any crash, sanitizer report, leak or timeout is a bug: keep the input in
 * tests/fuzz/corpus_model/ once fixed.  See docs/language.md for a run.
 */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    char *msgs = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&msgs, &len);
    Diag d;
    diag_init(&d, mem);
    Graph *g = fe_load_string("fuzz.model", text, NULL, 0, &d);
    if (g) {
        /* A graph that loads must be well formed. */
        if (!ir_verify(g, &d)) {
            fclose(mem);
            fprintf(stderr, "%s", msgs);
            abort();
        }
        ir_graph_free(g);
    }
    diag_free(&d);
    fclose(mem);
    free(msgs);
    free(text);
    return 0;
}
