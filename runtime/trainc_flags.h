/* runtime/trainc_flags.h — the runtime's command-line flags, one list for the two
 * programs that take them: a compiled executable (runtime/main.c parses
 * them into its Args) and `trainc run` (tools/trainc.c passes them through
 * to trn_main, checking names and values first).
 *
 * X(NAME, ARG, TYPE, FIELD, GIVEN, HELP): --NAME takes ARG (NULL: no
 * value) of TYPE (STR, INT, F64, BOOL), stored in Args.FIELD; GIVEN is
 * S(given_FIELD) where the program tells a value given on the command
 * line from a default (it wins over a checkpoint's; --save-every alone
 * needs --save), else 0 (main.c defines S; an X that ignores FIELD and
 * GIVEN needs nothing).  --help is each program's own. */
#ifndef TRAINC_RUNTIME_FLAGS_H
#define TRAINC_RUNTIME_FLAGS_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* The values the flags take, checked alike by both programs: an INT is a
 * non-negative integer, an F64 a finite non-negative number, written in
 * decimal digits (with a point and an exponent for an F64): not the
 * spaces, signs, hex and inf that strtoll and strtod also read.  0 and
 * *out set, or -1. */
static inline int trn_flag_digits(const char *s, int real) {
    if (!s || !*s) return 0;
    for (const char *p = s; *p; p++)
        if (!(*p >= '0' && *p <= '9') &&
            !(real && (*p == '.' || *p == 'e' || *p == 'E' || ((*p == '+' || *p == '-') && p > s && (p[-1] == 'e' || p[-1] == 'E')))))
            return 0;
    return 1;
}

static inline int trn_flag_int(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    long long v = trn_flag_digits(s, 0) ? strtoll(s, &end, 10) : -1;
    if (v < 0 || errno || *end) return -1;
    *out = v;
    return 0;
}

static inline int trn_flag_f64(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = trn_flag_digits(s, 1) ? strtod(s, &end) : -1;
    /* ERANGE from an underflow is no error: 5e-324 (as %.17g writes the
     * smallest subnormal) is that number, 1e-400 is 0; past the largest
     * double strtod gives an infinity (errno stays ERANGE for the message) */
    if (!(v >= 0) || (errno && errno != ERANGE) || *end || isinf(v)) return -1;
    *out = v;
    return 0;
}

#define TRN_RUNTIME_FLAGS(X) \
    X("data", "FILE", STR, data, 0, "training tokens (llm.c .bin)") \
    X("val", "FILE", STR, val, 0, "validation tokens (llm.c .bin)") \
    X("steps", "N", INT, steps, S(given_steps), "optimizer steps of the run (the schedule's length)") \
    X("lr", "X", F64, lr, S(given_lr), "peak learning rate") \
    X("min-lr", "X", F64, min_lr, S(given_min_lr), "the learning rate cosine / linear decay towards") \
    X("schedule", "S", STR, schedule, S(given_schedule), "constant | cosine | linear") \
    X("warmup", "N", INT, warmup, S(given_warmup), "linear warm-up steps") \
    X("seed", "N", INT, seed, S(given_seed), "seed of init, batch order, dropout and sampling") \
    X("batches", "ORDER", STR, batches, S(given_batches), "random | sequential (training; validation is sequential)") \
    X("eval-every", "N", INT, eval_every, 0, "evaluate on --val every N steps (0: at the end only)") \
    X("eval-steps", "N", INT, eval_steps, 0, "validation micro-batches per evaluation") \
    X("save", "FILE", STR, save, 0, "checkpoint with state at the end ({step} in FILE: the step)") \
    X("save-every", "N", INT, save_every, S(given_save_every), "also save to --save every N steps (0: never)") \
    X("resume", "FILE", STR, resume, 0, "continue a run from a checkpoint with state") \
    X("init", "FILE", STR, init, 0, "initialise the parameters from a checkpoint") \
    X("metrics", "FILE", STR, metrics, 0, "JSON-lines log: one object per step and per evaluation") \
    X("sample", "N", INT, sample, 0, "after training, generate N tokens and print them") \
    X("prompt", "TEXT", STR, prompt, 0, "--sample continues TEXT (token ids where the vocabulary is not bytes)") \
    X("temperature", "X", F64, temperature, S(given_temperature), "--sample divides the logits by X (0: the most likely token)") \
    X("top-k", "K", INT, top_k, S(given_top_k), "--sample draws from the K most likely tokens (0: all)") \
    X("device", "D", STR, device, 0, "auto | cpu | cuda") \
    X("threads", "N", INT, threads, 0, "host threads: OpenMP and initialisation (0: default)") \
    X("print-every", "N", INT, print_every, 0, "progress line every N steps when stderr is not a terminal (0: auto)") \
    X("report", NULL, BOOL, report, 0, "print the memory plan and exit") \
    X("poison", NULL, BOOL, poison, 0, "fill dead buffers with NaN (checks the memory plan)") \
    X("quiet", NULL, BOOL, quiet, 0, "no progress or information lines")

#endif
