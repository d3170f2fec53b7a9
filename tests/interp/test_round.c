/* tests/interp/test_round.c — INTERP_F32 rounding to f32, bf16 and f16,
 * checked against values decoded from bit patterns: every finite pattern,
 * the midpoints between neighbours (ties go to the even pattern) and the
 * doubles just either side of each midpoint; plus overflow, NaN, signed
 * zeros, subnormals, and INTERP_F64 leaving everything alone. */
#include "interp_test.h"

#include <stdint.h>

/* bf16 is the top half of an f32. */
static double bf16_value(uint32_t bits) {
    uint32_t u = bits << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* IEEE binary16: sign, 5 exponent bits (bias 15), 10 fraction bits. */
static double f16_value(uint32_t bits) {
    double s = bits & 0x8000 ? -1 : 1;
    int e = (bits >> 10) & 0x1f, f = bits & 0x3ff;
    if (e == 0) return s * ldexp(f, -24);
    if (e == 31) return f ? NAN : s * INFINITY;
    return s * ldexp(1024 + f, e - 25);
}

/* Casts x[0..n) from f64 to dt in mode; returns the results (malloc'd). */
static double *cast_all(const double *x, int64_t n, DType dt, InterpMode mode) {
    Graph *g = ir_graph_new("t");
    Value *in = input(g, "x", ty(DT_f64, 1, (int)n));
    Node *c = node(g, OP_cast, 1, in);
    ir_set_str(g, c, "dtype", dtype_name[dt]);
    Value *y = emit1(g, c);
    Interp *it = interp_new(g, mode);
    set_source(it, "x", x);
    double *out = calloc((size_t)n, sizeof(double));
    if (run_micro(it)) memcpy(out, val(it, y), sizeof(double) * (size_t)n);
    interp_free(it);
    ir_graph_free(g);
    return out;
}

/* Every positive finite pattern 0..maxbits of a format and its negative:
 * the value itself, the midpoint to the next pattern, and one double on
 * each side of the midpoint. */
static void exhaustive(const char *name, DType dt, double (*value)(uint32_t), uint32_t maxbits, double overflow_at) {
    int64_t n = 0, cap = 8 * ((int64_t)maxbits + 1);
    double *x = malloc(sizeof(double) * (size_t)cap), *want = malloc(sizeof(double) * (size_t)cap);
    for (uint32_t b = 0; b <= maxbits; b++) {
        double v = value(b), next = b == maxbits ? overflow_at : value(b + 1);
        double rnext = b == maxbits ? INFINITY : next; /* what rounding up gives */
        double mid = (v + next) / 2;                   /* exact in double */
        double tie = (b & 1) ? rnext : v;              /* ties to the even pattern */
        double xs[4] = {v, mid, nextafter(mid, 0), nextafter(mid, INFINITY)}, ws[4] = {v, tie, v, rnext};
        for (int k = 0; k < 4; k++)
            for (int sgn = 0; sgn < 2; sgn++) {
                x[n] = sgn ? -xs[k] : xs[k];
                want[n] = sgn ? -ws[k] : ws[k];
                n++;
            }
    }
    double *got = cast_all(x, n, dt, INTERP_F32);
    char what[64];
    snprintf(what, sizeof what, "%s: %lld values", name, (long long)n);
    CHECK_NEAR(what, got, want, n, 0);
    free(got);
    free(x);
    free(want);
}

static void test_exhaustive(void) {
    exhaustive("bf16", DT_bf16, bf16_value, 0x7f7f, ldexp(1, 128));
    exhaustive("f16", DT_f16, f16_value, 0x7bff, 65536);
}

static void test_known_values(void) {
    const double p9 = ldexp(1, -9), p24 = ldexp(1, -24), p25 = ldexp(1, -25);
    const double x[] = {1 + p9, 1 + ldexp(1, -8), 1 + 3 * ldexp(1, -8), 65520, 65519.99, -65520, 1e300, 1e-300, -1e-300, NAN, INFINITY,
                        -INFINITY, -0.0, p24, p25, p25 * 1.0000001, 3 * p25, 1023 * p24, ldexp(1, -14), 0.1, 257};
    enum { N = sizeof x / sizeof x[0] };
    /* bf16: 8 significand bits, spacing 2^-7 at 1 (1 + 2^-8 is a tie -> 1), 256 at 65536,
     * the exponent range of f32 (2^-25 is normal); 0.1 is 0x3dcd; 257 ties to 256 */
    const double bf[N] = {1, 1, 1 + ldexp(1, -6), 65536, 65536, -65536, INFINITY, 0, -0.0, NAN, INFINITY, -INFINITY, -0.0, p24, p25, p25,
                          3 * p25, ldexp(1, -14), ldexp(1, -14), bf16_value(0x3dcd), 256};
    /* f16: 11 significand bits; max 65504, and 65520, the midpoint to 65536, ties
     * to the even side: overflow to inf; subnormals are multiples of 2^-24, so
     * 2^-25 ties to 0 and 3 2^-25 to 2^-23; 0.1 is 0x2e66 */
    const double hf[N] = {1 + p9, 1 + ldexp(1, -8), 1 + 3 * ldexp(1, -8), INFINITY, 65504, -INFINITY, INFINITY, 0, -0.0, NAN, INFINITY,
                          -INFINITY, -0.0, p24, 0, p24, 2 * p24, 1023 * p24, ldexp(1, -14), f16_value(0x2e66), 257};
    const double f32[N] = {1 + p9, 1 + ldexp(1, -8), 1 + 3 * ldexp(1, -8), 65520, (float)65519.99, -65520, INFINITY, 0, -0.0, NAN, INFINITY,
                           -INFINITY, -0.0, p24, p25, (float)(p25 * 1.0000001), 3 * p25, 1023 * p24, ldexp(1, -14), (float)0.1, 257};
    double *gb = cast_all(x, N, DT_bf16, INTERP_F32), *gh = cast_all(x, N, DT_f16, INTERP_F32), *gf = cast_all(x, N, DT_f32, INTERP_F32);
    CHECK_NEAR("bf16 known values", gb, bf, N, 0);
    CHECK_NEAR("f16 known values", gh, hf, N, 0);
    CHECK_NEAR("f32 known values", gf, f32, N, 0);
    /* signed zeros keep their sign; the -1e-300 underflow gives -0 */
    CHECK(signbit(gb[12]) && signbit(gh[12]) && signbit(gh[8]) && signbit(gb[8]));
    CHECK(!signbit(gh[7]));
    free(gb);
    free(gh);
    free(gf);
    /* INTERP_F64: a cast between float types is the identity */
    double *g64 = cast_all(x, N, DT_bf16, INTERP_F64);
    CHECK_NEAR("f64 mode leaves bf16 alone", g64, x, N, 0);
    free(g64);
}

/* Results of every op are rounded, not only casts; inputs are rounded to
 * their dtype when a phase starts. */
static void test_op_results_rounded(void) {
    Graph *g = ir_graph_new("t");
    Value *a = input(g, "a", ty(DT_bf16, 1, 1)), *b = input(g, "b", ty(DT_bf16, 1, 1));
    Value *s = emit1(g, node(g, OP_add, 2, a, b));
    Value *h = input(g, "h", ty(DT_f16, 1, 1));
    Value *sq = emit1(g, node(g, OP_mul, 2, h, h));
    Value *f = input(g, "f", ty(DT_f32, 1, 1));
    Value *f2 = emit1(g, node(g, OP_add, 2, f, f));
    Value *i = input(g, "i", ty(DT_i32, 1, 1));
    Value *i3 = emit1(g, node(g, OP_mul, 2, i, i));
    for (int mode = 0; mode <= 1; mode++) {
        Interp *it = interp_new(g, mode == 0 ? INTERP_F64 : INTERP_F32);
        set_source(it, "a", (double[]){1});
        set_source(it, "b", (double[]){ldexp(1, -9)});
        set_source(it, "h", (double[]){256});
        set_source(it, "f", (double[]){0.1});
        set_source(it, "i", (double[]){-3});
        if (run_micro(it)) {
            if (mode == 1) {
                CHECK_VAL("bf16 1 + 2^-9", val(it, s)[0], 1, 0);
                CHECK_VAL("f16 256*256 overflows", val(it, sq)[0], INFINITY, 0);
                CHECK_VAL("f32 input rounded", val(it, f)[0], (double)0.1f, 0);
                CHECK_VAL("f32 0.1f + 0.1f", val(it, f2)[0], (double)(0.1f + 0.1f), 0);
            } else {
                CHECK_VAL("f64 mode: bf16 1 + 2^-9 exact", val(it, s)[0], 1 + ldexp(1, -9), 0);
                CHECK_VAL("f64 mode: f16 256*256", val(it, sq)[0], 65536, 0);
                CHECK_VAL("f64 mode: f32 input untouched", val(it, f)[0], 0.1, 0);
            }
            CHECK_VAL("i32 exact", val(it, i3)[0], 9, 0);
        }
        interp_free(it);
    }
    ir_graph_free(g);
}

int main(void) {
    diag_init(&D, stderr);
    test_exhaustive();
    test_known_values();
    test_op_results_rounded();
    diag_free(&D);
    return finish("interp_round");
}
