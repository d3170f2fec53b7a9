/* tests/runtime/bigram_main.c — a training executable made by hand: one of
 * the test models (BIGRAM_MODEL) plus the runtime's trn_main, as generated
 * code would be.  One extra command for the tests, handled before trn_main:
 *   --write-test-tokens FILE N [SEED]   writes N tokens of test text */
#include "bigram.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef BIGRAM_MODEL
#define BIGRAM_MODEL bigram_adam
#endif

int main(int argc, char **argv) {
    if (argc >= 4 && strcmp(argv[1], "--write-test-tokens") == 0) {
        if (bigram_write_text_tokens(argv[2], atoll(argv[3]), argc > 4 ? (unsigned)atoi(argv[4]) : 1u) != 0) {
            fprintf(stderr, "cannot write %s\n", argv[2]);
            return 1;
        }
        return 0;
    }
    return trn_main(argc, argv, &BIGRAM_MODEL, NULL);
}
