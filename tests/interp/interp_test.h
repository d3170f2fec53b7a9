/* tests/interp/interp_test.h — small helpers shared by the interpreter tests:
 * checks that print the first values that differ, and graph building with
 * the IR builder. */
#ifndef TRAINC_INTERP_TEST_H
#define TRAINC_INTERP_TEST_H

#include "ir.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static Diag D; /* builder and run diagnostics (stderr) */

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                             \
        }                                                                           \
    } while (0)

/* |got - want| <= tol * max(1, |want|) elementwise (NaN equals NaN, inf equals
 * the same inf); prints the first few values that differ. */
static bool near_(const char *file, int line, const char *what, const double *got, const double *want, int64_t n, double tol) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        bool ok = (isnan(g) && isnan(w)) || g == w || fabs(g - w) <= tol * fmax(1.0, fabs(w));
        if (!ok) {
            if (bad < 5) fprintf(stderr, "%s:%d: %s[%lld] = %.17g, expected %.17g (tol %g)\n", file, line, what, (long long)i, g, w, tol);
            bad++;
        }
    }
    if (bad) {
        fprintf(stderr, "%s:%d: %s: %d of %lld values differ\n", file, line, what, bad, (long long)n);
        failures++;
    }
    return bad == 0;
}
#define CHECK_NEAR(what, got, want, n, tol) near_(__FILE__, __LINE__, (what), (got), (want), (n), (tol))
#define CHECK_VAL(what, got, want, tol)          \
    do {                                        \
        double g_ = (got), w_ = (want);          \
        near_(__FILE__, __LINE__, (what), &g_, &w_, 1, (tol)); \
    } while (0)

/* A type from a dtype and up to 8 dimensions: ty(DT_f32, 2, 3, 4) is f32[3,4]. */
static Type ty(DType dt, int rank, ...) {
    Type t = {dt, {0}};
    va_list ap;
    va_start(ap, rank);
    t.shape.rank = rank;
    for (int i = 0; i < rank; i++) t.shape.d[i] = va_arg(ap, int);
    va_end(ap);
    return t;
}

static const SrcLoc TLOC = {"test.model", 1, 1};

static Value *input(Graph *g, const char *name, Type t) { return ir_source(g, OP_input, name, t, TLOC)->out[0]; }

/* A node of op with nin operands (Value *), not yet typed or placed. */
static Node *node(Graph *g, Op op, int nin, ...) {
    Value *in[16];
    va_list ap;
    va_start(ap, nin);
    for (int i = 0; i < nin; i++) in[i] = va_arg(ap, Value *);
    va_end(ap);
    return ir_new(g, op, nin, in, TLOC);
}

/* Infers and appends n; a builder error is a bug in the test. */
static Node *emit(Graph *g, Node *n) {
    if (!ir_emit(g, n, &D)) {
        fprintf(stderr, "test graph does not type-check (op %s)\n", op_name(n->op));
        exit(1);
    }
    return n;
}

/* One-result shorthand: emit and return the first result. */
static Value *emit1(Graph *g, Node *n) { return emit(g, n)->out[0]; }

/* Copies vals into the input or param named name. */
static void set_source(Interp *it, const char *name, const double *vals) {
    Tensor *t = interp_source(it, name);
    if (!t) {
        fprintf(stderr, "no source named %s\n", name);
        exit(1);
    }
    memcpy(t->data, vals, sizeof(double) * (size_t)t->n);
}

/* Runs PH_MICRO; a failure is reported and counted. */
static bool run_micro(Interp *it) {
    bool ok = interp_run_phase(it, PH_MICRO, &D);
    if (!ok) {
        fprintf(stderr, "interp_run_phase failed\n");
        failures++;
    }
    return ok;
}

static const double *val(Interp *it, const Value *v) {
    Tensor *t = interp_value(it, v);
    if (!t) {
        fprintf(stderr, "value %%%d was not computed\n", v->id);
        exit(1);
    }
    return t->data;
}

static int finish(const char *name) {
    if (failures) {
        fprintf(stderr, "%s: %d failure%s\n", name, failures, failures == 1 ? "" : "s");
        return 1;
    }
    printf("%s: ok\n", name);
    return 0;
}

#endif
