/* tests/runtime/check.h — CHECK(cond, fmt, ...) for the runtime's test
 * programs: on failure it prints the file, line, condition and message on
 * stderr and sets `failed`, which the program returns. */
#ifndef TRAINC_TESTS_RUNTIME_CHECK_H
#define TRAINC_TESTS_RUNTIME_CHECK_H

#include <stdio.h>

static int failed;

#define CHECK(c, ...)                                                                                                                       \
    do {                                                                                                                                    \
        if (!(c)) {                                                                                                                         \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #c);                                                        \
            fprintf(stderr, __VA_ARGS__);                                                                                                   \
            fputc('\n', stderr);                                                                                                            \
            failed = 1;                                                                                                                     \
        }                                                                                                                                   \
    } while (0)

#endif
