/* tests/runtime/bigram_main.c — a training executable made by hand: one of
 * the test models (BIGRAM_MODEL) plus the runtime's trn_main, as generated
 * code would be.  Extra commands for the tests, handled before trn_main:
 *   --write-test-tokens FILE N [SEED]   writes N tokens of test text
 *   --slow-steps MS FLAGS...            trn_main with FLAGS on the CPU
 *                                       backend, each micro-step MS ms
 *                                       longer (a signal during a step)
 *   --slow-saves MS FLAGS...            each read of a parameter MS ms
 *                                       longer (a signal during a save)
 *   --slow-start MS FLAGS...            each write of a parameter MS ms
 *                                       longer (a signal before the run
 *                                       starts: its initialisation) */
#include "bigram.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef BIGRAM_MODEL
#define BIGRAM_MODEL bigram_adam
#endif

static TrnBackend cpu;
static long       slow_ms;

static void pause_ms(long ms) { /* the whole pause, signals or not */
    struct timespec t = {ms / 1000, ms % 1000 * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
}

static int slow_run(void *self, TrnRun which, char *err, size_t errn) {
    if (which == TRN_RUN_MICRO) pause_ms(slow_ms);
    return cpu.run(self, which, err, errn);
}

static int slow_read(void *self, int tensor, void *dst, char *err, size_t errn) {
    if (BIGRAM_MODEL.tensors[tensor].kind == TRN_PARAM) pause_ms(slow_ms);
    return cpu.read(self, tensor, dst, err, errn);
}

static int slow_write(void *self, int tensor, const void *src, char *err, size_t errn) {
    if (BIGRAM_MODEL.tensors[tensor].kind == TRN_PARAM) pause_ms(slow_ms);
    return cpu.write(self, tensor, src, err, errn);
}

int main(int argc, char **argv) {
    int steps = argc >= 3 && strcmp(argv[1], "--slow-steps") == 0, saves = argc >= 3 && strcmp(argv[1], "--slow-saves") == 0;
    int start = argc >= 3 && strcmp(argv[1], "--slow-start") == 0;
    if (steps || saves || start) {
        char err[512];
        slow_ms = atol(argv[2]);
        if (trn_cpu_backend(&BIGRAM_MODEL, &cpu, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        TrnBackend be = cpu;
        if (steps) be.run = slow_run;
        else if (saves) be.read = slow_read;
        else be.write = slow_write;
        argv[2] = argv[0];
        return trn_main(argc - 2, argv + 2, &BIGRAM_MODEL, &be);
    }
    if (argc >= 4 && strcmp(argv[1], "--write-test-tokens") == 0) {
        if (bigram_write_text_tokens(argv[2], atoll(argv[3]), argc > 4 ? (unsigned)atoi(argv[4]) : 1u) != 0) {
            fprintf(stderr, "cannot write %s\n", argv[2]);
            return 1;
        }
        return 0;
    }
    return trn_main(argc, argv, &BIGRAM_MODEL, NULL);
}
