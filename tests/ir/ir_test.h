/* tests/ir/ir_test.h — helpers shared by the IR tests (printer, parser,
 * verifier, stats, passes, pass manager). */
#ifndef TRAINC_IR_TEST_H
#define TRAINC_IR_TEST_H

#include "ir.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                             \
        }                                                                           \
    } while (0)

/* Two strings equal; on failure prints both. */
#define CHECK_STR(got, want) check_str_(__FILE__, __LINE__, (got), (want))
static inline void check_str_(const char *file, int line, const char *got, const char *want) {
    if (got && want && strcmp(got, want) == 0) return;
    fprintf(stderr, "%s:%d: strings differ\n--- got:\n%s\n--- expected:\n%s\n---\n", file, line, got ? got : "(null)", want ? want : "(null)");
    failures++;
}

/* s contains sub; on failure prints s. */
#define CHECK_HAS(s, sub) check_has_(__FILE__, __LINE__, (s), (sub))
static inline void check_has_(const char *file, int line, const char *s, const char *sub) {
    if (s && strstr(s, sub)) return;
    fprintf(stderr, "%s:%d: expected to find \"%s\" in:\n%s\n", file, line, sub, s ? s : "(null)");
    failures++;
}

/* A Diag whose output is captured in memory: diag_text() gives it so far. */
typedef struct Capture { Diag d; char *buf; size_t len; FILE *f; } Capture;
static inline void cap_init(Capture *c) {
    c->buf = NULL;
    c->len = 0;
    c->f = open_memstream(&c->buf, &c->len);
    diag_init(&c->d, c->f);
}
static inline const char *cap_text(Capture *c) {
    fflush(c->f);
    return c->buf ? c->buf : "";
}
static inline void cap_free(Capture *c) {
    fclose(c->f);
    free(c->buf);
    diag_free(&c->d);
}

static inline Type ty(DType dt, int rank, ...) {
    Type t = {dt, {0}};
    va_list ap;
    va_start(ap, rank);
    t.shape.rank = rank;
    for (int i = 0; i < rank; i++) t.shape.d[i] = va_arg(ap, int);
    va_end(ap);
    return t;
}

static inline char *print_str(Graph *g, bool locs) {
    PrintOptions po = {locs};
    return ir_print_str(g, &po);
}

#endif
