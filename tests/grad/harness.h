/* tests/grad/harness.h — building forward graphs and checking their
 * gradients against finite differences (see harness.c for the method and
 * the error metric). */
#ifndef TRAINC_GRAD_HARNESS_H
#define TRAINC_GRAD_HARNESS_H

#include "ir.h"

#define GT_MAX_SRC 256

/* How the harness fills a param before a run. */
typedef enum { FILL_UNIFORM, FILL_AWAY, FILL_NORMAL } FillKind;

typedef struct GTSource {
    const char *name;
    FillKind    fill;      /* params: values drawn by the harness */
    double      lo, hi;    /* uniform in [lo, hi]; FILL_AWAY: random sign, magnitude in [lo, hi] */
    int64_t     n;         /* inputs: element count */
    double     *vals;      /* inputs: values written before every run */
} GTSource;

typedef struct GT {
    Graph   *g;            /* the forward graph being built */
    Diag     d;
    int      line;         /* every node gets its own line: locs are checkable */
    GTSource src[GT_MAX_SRC];
    int      nsrc;
    uint64_t seed;
} GT;

GT   *gt_new(const char *name);
/* Takes over a graph built elsewhere (the front end): every param is
 * filled U(lo, hi) by the harness; inputs are set with gt_feed. */
GT   *gt_adopt(Graph *g, double lo, double hi);
void  gt_feed(GT *t, const char *name, int64_t n, const double *vals);
void  gt_free(GT *t);
SrcLoc gt_loc(GT *t);      /* a fresh line of "test.model" */

/* Sources.  Params are trainable unless frozen via gt_freeze. */
Value *gt_param(GT *t, const char *name, int rank, const int64_t *dims);                 /* U(-1, 1) */
Value *gt_param_fill(GT *t, const char *name, DType dt, int rank, const int64_t *dims, FillKind f, double lo, double hi);
void   gt_freeze(GT *t, Value *param);
Value *gt_input(GT *t, const char *name, DType dt, int rank, const int64_t *dims, const double *vals);

/* Nodes: gt_node makes one (attributes are set by the caller), gt_emit
 * infers and appends it and returns result 0; both abort on error. */
Node  *gt_node(GT *t, Op op, int nin, Value *const *in);
Value *gt_emit(GT *t, Node *n);
Value *gt_op1(GT *t, Op op, Value *a);
Value *gt_op2(GT *t, Op op, Value *a, Value *b);
Value *gt_matmul(GT *t, Value *a, Value *b, int ta, int tb);
Value *gt_reshape(GT *t, Value *x, int rank, const int64_t *dims);
Value *gt_permute(GT *t, Value *x, int rank, const int64_t *perm);
Value *gt_slice(GT *t, Value *x, int axis, int64_t start, int64_t end);

/* loss = sum(cast_f32(out) * R), R a frozen param drawn from N(0, 1):
 * a random linear functional, so every element of out matters. */
void   gt_loss_linear(GT *t, Value *out);
/* Makes v the "loss" result as it is. */
void   gt_loss(GT *t, Value *v);

/* Writes the harness's values into every param and input of it's graph. */
void   gt_fill(GT *t, Interp *it);

typedef struct GTResult {
    double  worst;         /* worst error over every checked element (metric: harness.c) */
    int64_t nchecked;
    bool    ok;            /* autodiff, verification and the structural checks passed */
} GTResult;

/* Runs autodiff on a copy of the graph, checks it (verifier, no dead
 * nodes, locs and phases of backward nodes, one grad.* per trainable
 * param), then compares every grad.* with finite differences of the loss
 * on every element of tensors of at most `sample` elements, a seeded
 * random sample of `sample` elements of larger ones.  Prints
 * "gradcheck LABEL: worst rel err E (n elements)". */
GTResult gt_check(GT *t, const char *label, int sample);

/* Graph checks shared by the tests. */
int  gt_dead_nodes(Graph *g, FILE *report);   /* non-source nodes none of whose results is used */
bool gt_verify(Graph *g);

/* The tolerance every gradient check must meet. */
#define GT_TOL 1e-6

/* What the test programs share: dims as literals, params by shape, and a
 * check that counts its failures in gt_fails (the exit status). */
#define D(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define P(t, name, ...) gt_param((t), (name), NDIM(__VA_ARGS__), D(__VA_ARGS__))
#define PF(t, name, f, lo, hi, ...) gt_param_fill((t), (name), DT_f32, NDIM(__VA_ARGS__), D(__VA_ARGS__), (f), (lo), (hi))

extern int gt_fails;

#define EXPECT(cond, ...)                               \
    do {                                                \
        if (!(cond)) {                                  \
            printf("FAIL %s:%d: ", __FILE__, __LINE__); \
            printf(__VA_ARGS__);                        \
            printf("\n");                               \
            gt_fails++;                                 \
        }                                               \
    } while (0)

#endif
