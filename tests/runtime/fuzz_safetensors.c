/* tests/runtime/fuzz_safetensors.c — libFuzzer target for the checkpoint
 * reader: the header parser on its own, then the whole of trn_load (through
 * fmemopen) into a session of the tiny test model, as --init and as
 * --resume.  Any input must give an error or a load, never a crash.
 *
 * Built with clang only (-DTRAINC_FUZZ=ON, see runtime/CMakeLists.txt):
 *   ./fuzz_safetensors tests/runtime/corpus/safetensors
 * Without libFuzzer, fuzz_main.c runs it over the corpus (a CTest test),
 * so every crash ever found, kept in the corpus, stays a regression test. */
#include "bigram.h"
#include "rt.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static TrnSession *s;   /* one session for the whole fuzzing run (test code: may hold state) */
    if (!s) {
        TrnOptions o = {"cpu", 0, -1, 0};
        char e[512];
        s = trn_create(&bigram_tiny, &o, e, sizeof e);
        if (!s) {
            fprintf(stderr, "fuzz_safetensors: %s\n", e);
            abort();
        }
    }
    if (size >= 8) {
        uint64_t hl = 0;
        for (int i = 0; i < 8; i++) hl |= (uint64_t)data[i] << (8 * i);
        if (hl <= size - 8) {
            RtSt st;
            char e[256];
            if (rt_st_parse((const char *)data + 8, (size_t)hl, size - 8 - hl, &st, e, sizeof e) == 0) rt_st_free(&st);
        }
    }
    for (int params_only = 0; params_only < 2 && size > 0; params_only++) {
        FILE *f = fmemopen((void *)data, size, "rb");
        if (!f) return 0;
        (void)rt_load_stream(s, f, "fuzz-input", params_only);
        fclose(f);
    }
    return 0;
}
