/* tests/codegen/cg_harness.h — compile a model to C, load the generated
 * code as a shared object, and run it beside the reference interpreter
 * through the runtime's session API, feeding both the same batches. */
#ifndef CG_HARNESS_H
#define CG_HARNESS_H

#include "cg.h"
#include "compile.h"
#include "interp_backend.h"
#include "trainc_rt.h"

#include <math.h>

typedef struct Harness {
    Graph          *train, *eval, *sample;
    Program        *prog;
    void           *so;              /* dlopen handle */
    const TrnModel *compiled;        /* descriptor from the generated code */
    InterpModel    *im;              /* the interpreter backend */
    Diag            d;               /* diagnostics (the interpreter backend keeps a pointer to it) */
    char            cpath[512], sopath[512];
} Harness;

/* Builds `model` with the -D overrides (NULL-terminated "k=v" strings) and
 * loads the generated code.  fuse: generic fusion.  Returns 0 on success. */
int  h_build(Harness *h, const char *model, const char *const *defs, const char *const *sets, bool fuse, int accum);
void h_free(Harness *h);

/* Token data: a byte-level encoding of a text file, or a synthetic pattern. */
typedef struct Tokens { int32_t *t; int64_t n; } Tokens;
int  h_tokens_from_file(Tokens *tk, const char *path, int64_t max);
void h_tokens_synthetic(Tokens *tk, int64_t n, int vocab, uint64_t seed);

/* The tests' text: the bytes of ../shared/data/tinyshakespeare.txt (up to
 * 200000), or a synthetic pattern when the file is not there (said on
 * stdout). */
void h_tokens_text(Tokens *tk);

/* "k=v" strings (NULL-terminated, may be NULL) as Defines; store holds the
 * copies.  Returns the count (at most max; a string without '=' is skipped). */
int  h_defines(const char *const *defs, Define *dv, char (*store)[64], int max);

/* The end of a test program: "N check(s) failed" (stderr) or "all checks
 * passed"; the exit status. */
int  h_finish(void);

/* Feeds micro-batch `i` (B x T from the model's tokens input) of tk. */
int  h_feed(TrnSession *s, const Tokens *tk, int64_t i);

/* A trn_step feed callback over consecutive micro-batches of tk:
 * HFeed f = {tk, 0}; trn_step(s, h_feed_next, &f, -1). */
typedef struct HFeed { const Tokens *tk; int64_t next; } HFeed;
int  h_feed_next(void *ctx, TrnSession *s, int micro);

/* A check that reports its location and counts failures in h_failures
 * (the test's exit status). */
extern int h_failures;
#define CHECK(cond, ...)                                         \
    do {                                                         \
        if (!(cond)) {                                           \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                        \
            fputc('\n', stderr);                                 \
            h_failures++;                                        \
        }                                                        \
    } while (0)

/* Relative difference |a-b| / max(|a|, |b|, floor); infinite when either
 * is a NaN (a NaN in both is no agreement: all-NaN runs must fail). */
double h_rel(double a, double b, double floor);

/* The larger of a running worst w and x, a NaN x counting as infinite
 * (fmax and `x > w` would pass over it). */
static inline double h_max(double w, double x) { return x <= w ? w : x != x ? INFINITY : x; }

/* Largest difference between the params of two sessions, per tensor
 * max|a - b| / max|a| (relative to the tensor's scale). */
double h_param_diff(TrnSession *a, TrnSession *b, const char **worst);

#endif
