/* tests/runtime/test_mathf.c — the float functions of generated C code
 * (runtime/trainc_kernels.h) against the same functions in double.
 *
 *   test_mathf
 *
 * Built as generated code is (-O2 -fopenmp -fno-trapping-math, CMake's
 * C11), so the loop below vectorises as a kernel's does.  Checks:
 *   - trn_expf on every 16th float in [-110, 90] and on the special
 *     values: within 1 ulp of exp in double (the ulp of the result's float
 *     rounding; subnormal results within 2^-149), inf above the range, 0
 *     below it, NaN for NaN;
 *   - the same values through a vectorised loop (omp simd) and through
 *     scalar calls: bit for bit equal, so a kernel's result does not
 *     depend on which of its elements fall in the vector body and which
 *     in the scalar remainder;
 *   - trn_tanhf, trn_sigmoidf, trn_siluf, trn_geluf and the gradients
 *     against their double versions on [-60, 60], error relative to
 *     max(|f|, 1) (to |f| for sigmoid and silu): bounds 1.3 times the
 *     errors measured with glibc's expf in their place (most of the error
 *     is the float formula's: 1 - t*t of the tanh GELU's gradient in its
 *     tails), so trn_expf makes none of them worse;
 *   - trn_round_format (bf16's and f16's rounding of a double, on the
 *     double's bits) against trn_round_format_ref (the interpreter's
 *     frexp/ldexp formula), bit for bit: at every exponent from below the
 *     format's subnormals to past its largest, random significands and
 *     the dropped bits that decide a rounding (zero, one, half less one,
 *     the tie, half plus one, all ones; kept bits even, odd and all
 *     ones, whose rounding carries into the exponent), both signs; and
 *     zeros, infinities, NaN, double subnormals, the overflow threshold;
 *   - tk_st_y (a float stored to bf16 or f16 by rounding its bits) against
 *     tk_st of the same value as a double, on every 61st float and the
 *     floats around each half dtype's overflow threshold: the same bits
 *     (NaN: a NaN).
 * Prints the worst errors; ends with "mathf: ok" or "mathf: FAILED". */
#include "check.h"
#include "trainc_kernels.h"

/* a float's bits: trn_f32_bits and trn_bits_f32 of the header; a double's: */
static uint64_t dbits(double x) {
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static double from_dbits(uint64_t b) {
    double x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* the spacing of floats at |ref| (2^-149 among the subnormals) */
static double ulp_at(double ref) {
    double a = fabs(ref);
    if (a < 0x1p-126) return 0x1p-149;
    int e;
    frexp(a, &e);
    return ldexp(1.0, e - 24);
}

/* scalar calls the optimiser cannot fold into a loop */
__attribute__((noinline)) static float expf_scalar(float x) { return trn_expf(x); }

__attribute__((noinline)) static void expf_vector(float *y, const float *x, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = trn_expf(x[i]);
}

static void test_expf(void) {
    double worst = 0, worst_x = 0;
    int64_t n = 0;
    for (uint64_t b = 0; b <= 0xffffffffu; b += 16) {
        float x = trn_bits_f32((uint32_t)b);
        if (!(x >= -110.0f && x <= 90.0f)) continue;
        double ref = exp((double)x);
        float y = expf_scalar(x);
        n++;
        if (ref > 0x1.fffffep127) {
            CHECK(isinf(y) && y > 0, "trn_expf(%a) = %a, want inf", x, y);
            continue;
        }
        double e = fabs((double)y - ref) / ulp_at(ref);
        if (e > worst) worst = e, worst_x = x;
    }
    printf("trn_expf: %lld values, worst %.3f ulp at %a\n", (long long)n, worst, worst_x);
    CHECK(n > 100000000, "only %lld values checked", (long long)n);
    CHECK(worst <= 1.0, "worst error %.3f ulp at %a", worst, worst_x);
    const float special[][2] = {{NAN, NAN},          {INFINITY, INFINITY}, {-INFINITY, 0.0f}, {0.0f, 1.0f},     {-0.0f, 1.0f},
                                {88.8f, INFINITY},   {1000.0f, INFINITY},  {-104.0f, 0.0f},   {-1000.0f, 0.0f}, {-103.0f, 0x1p-149f}};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
        float x = special[i][0], want = special[i][1], y = expf_scalar(x);
        CHECK(isnan(want) ? isnan(y) : y == want, "trn_expf(%a) = %a, want %a", x, y, want);
    }
}

static void test_vector_scalar(void) {
    enum { N = 1 << 20 };
    static float x[N + 3], y[N + 3];
    uint64_t s = 12345;
    for (int64_t i = 0; i < N + 3; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 11) * 0x1p-53 * 230.0 - 120.0); /* [-120, 110] */
    }
    x[0] = NAN, x[1] = INFINITY, x[2] = -INFINITY, x[3] = -0.0f;
    expf_vector(y, x, N + 3); /* N + 3: a scalar remainder for any vector width */
    int64_t diff = 0, first = -1;
    for (int64_t i = 0; i < N + 3; i++) {
        float z = expf_scalar(x[i]);
        if (trn_f32_bits(z) != trn_f32_bits(y[i]) && !(isnan(z) && isnan(y[i]))) {
            if (first < 0) first = i;
            diff++;
        }
    }
    printf("trn_expf vector vs scalar: %lld of %d differ\n", (long long)diff, N + 3);
    CHECK(diff == 0, "first at x = %a: vector %a, scalar %a", x[first], y[first], expf_scalar(x[first]));
}

/* worst of |f(x) - ref(x)| / max(|ref(x)|, floor) over x in [lo, hi] */
typedef float (*Ff)(float);
typedef double (*Fd)(double);

static double worst_err(Ff f, Fd ref, double lo, double hi, double floor, double *at) {
    double w = 0;
    for (int i = 0; i <= 2000000; i++) {
        float x = (float)(lo + (hi - lo) * i / 2000000.0);
        double r = ref((double)x), e = fabs((double)f(x) - r) / fmax(fabs(r), floor);
        if (e > w || e != e) w = e, *at = x;
    }
    return w;
}

static float tanh_f(float x) { return trn_tanhf(x); }
static float sigmoid_f(float x) { return trn_sigmoidf(x); }
static float silu_f(float x) { return trn_siluf(x); }
static float gelu_f(float x) { return trn_geluf(x, 1); }
static float gelu_exact_f(float x) { return trn_geluf(x, 0); }
static float dgelu_f(float x) { return trn_gelu_gradf(1.0f, x, 1); }
static float dgelu_exact_f(float x) { return trn_gelu_gradf(1.0f, x, 0); }
static float dsilu_f(float x) { return trn_silu_gradf(1.0f, x); }
static double sigmoid_d(double x) { return trn_sigmoid(x); }
static double silu_d(double x) { return trn_silu(x); }
static double gelu_d(double x) { return trn_gelu(x, 1); }
static double gelu_exact_d(double x) { return trn_gelu(x, 0); }
static double dgelu_d(double x) { return trn_gelu_grad(1.0, x, 1); }
static double dgelu_exact_d(double x) { return trn_gelu_grad(1.0, x, 0); }
static double dsilu_d(double x) { return trn_silu_grad(1.0, x); }

static void test_functions(void) {
    /* error relative to max(|ref|, floor): absolute below floor; bounds
     * from the errors with glibc's expf (tanh 1.77e-7, sigmoid 1.47e-7,
     * silu 1.74e-7, GELU 3.08e-7 and 1.1e-7, its gradient 1.97e-6 and
     * 1.28e-7, silu's 9.75e-7), times 1.3 */
    const struct {
        const char *name;
        Ff f;
        Fd ref;
        double floor, bound;
    } fs[] = {
        {"trn_tanhf", tanh_f, tanh, 1.0, 2.5e-7},
        {"trn_sigmoidf", sigmoid_f, sigmoid_d, 1e-30, 3e-7},
        {"trn_siluf", silu_f, silu_d, 1e-30, 3e-7},
        {"trn_geluf (tanh)", gelu_f, gelu_d, 1.0, 4e-7},
        {"trn_geluf (erf)", gelu_exact_f, gelu_exact_d, 1.0, 2e-7},
        {"trn_gelu_gradf (tanh)", dgelu_f, dgelu_d, 1.0, 2.6e-6},
        {"trn_gelu_gradf (erf)", dgelu_exact_f, dgelu_exact_d, 1.0, 2e-7},
        {"trn_silu_gradf", dsilu_f, dsilu_d, 1.0, 1.3e-6},
    };
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
        double at = 0, w = worst_err(fs[i].f, fs[i].ref, -60.0, 60.0, fs[i].floor, &at);
        printf("%s: worst %.3g at %a (bound %.3g)\n", fs[i].name, w, at, fs[i].bound);
        CHECK(w <= fs[i].bound, "%s: error %.3g at %a", fs[i].name, w, at);
    }
    CHECK(trn_tanhf(INFINITY) == 1.0f && trn_tanhf(-INFINITY) == -1.0f && isnan(trn_tanhf(NAN)), "tanh at inf, NaN");
    CHECK(trn_sigmoidf(-INFINITY) == 0.0f && trn_sigmoidf(INFINITY) == 1.0f, "sigmoid at inf");
}

/* trn_round_format against the reference on one value; counts it */
static int64_t nround, nround_bad;
static void round_one(double x, int p, int emin, int emax) {
    double f = trn_round_format(x, p, emin, emax), r = trn_round_format_ref(x, p, emin, emax);
    nround++;
    if (dbits(f) == dbits(r) || (isnan(f) && isnan(r))) return;
    if (nround_bad++ < 5) CHECK(0, "round(%a, p=%d): %a, reference %a", x, p, f, r);
}

static void test_round(void) {
    const struct {
        const char *name;
        int p, emin, emax;
    } fmt[] = {{"bf16", 8, -126, 127}, {"f16", 11, -14, 15}};
    uint64_t s = 987654321;
    for (size_t k = 0; k < sizeof fmt / sizeof fmt[0]; k++) {
        int p = fmt[k].p, sh = 53 - p;
        int64_t bad0 = nround_bad, n0 = nround;
        uint64_t half = 1ull << (sh - 1), low[] = {0, 1, half - 1, half, half + 1, (half << 1) - 1};
        for (int e = fmt[k].emin - p - 3; e <= fmt[k].emax + 2; e++) {
            uint64_t ebits = (uint64_t)(e + 1023) << 52;
            for (int i = 0; i < 2000; i++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                uint64_t m = (s >> 12) & 0xfffffffffffffull; /* 52 random significand bits */
                round_one(from_dbits(ebits | m), p, fmt[k].emin, fmt[k].emax);
                round_one(-from_dbits(ebits | m), p, fmt[k].emin, fmt[k].emax);
            }
            uint64_t kept = 0xfffffffffffffull >> sh; /* the p - 1 kept fraction bits */
            uint64_t keeps[] = {0, 1, 2, 3, kept - 1, kept};
            for (size_t a = 0; a < sizeof keeps / sizeof keeps[0]; a++)
                for (size_t b = 0; b < sizeof low / sizeof low[0]; b++) {
                    double x = from_dbits(ebits | keeps[a] << sh | low[b]);
                    round_one(x, p, fmt[k].emin, fmt[k].emax);
                    round_one(-x, p, fmt[k].emin, fmt[k].emax);
                }
        }
        /* the largest finite number, the tie above it (to inf) and its neighbours */
        double big = ldexp(2.0 - ldexp(1.0, 1 - p), fmt[k].emax), tie = ldexp(2.0 - ldexp(1.0, -p), fmt[k].emax);
        const double special[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 0x1p-1074, -0x1p-1060, 0x1.8p-1030, 1e300, -1e300,
                                  big, nextafter(big, 0), tie, nextafter(tie, 0), nextafter(tie, 1e9), 1.0};
        for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) round_one(special[i], p, fmt[k].emin, fmt[k].emax);
        CHECK(isinf(trn_round_format(tie, p, fmt[k].emin, fmt[k].emax)), "%s: the tie above the largest number rounds to inf", fmt[k].name);
        printf("trn_round_format %s: %lld values, %lld differ from the reference\n", fmt[k].name, (long long)(nround - n0),
               (long long)(nround_bad - bad0));
    }
    CHECK(trn_r_bf16(1.00390625) == 1.0 && trn_r_bf16(1.01171875) == 1.015625, "bf16 ties to even");
    CHECK(trn_r_f16(65520.0) == INFINITY && trn_r_f16(65519.0) == 65504.0, "f16 overflow threshold");
    CHECK(nround_bad == 0, "%lld values rounded differently", (long long)nround_bad);
}

static void test_store_float(void) {
    int64_t n = 0, bad = 0;
    for (uint64_t b = 0; b <= 0xffffffffu; b += 61) { /* 61 is odd: every pattern of the low 16 bits occurs */
        float v = trn_bits_f32((uint32_t)b);
        for (int dt = 2; dt <= 3; dt++) {
            uint16_t f, r;
            tk_st_y(&f, dt, 0, v);
            tk_st(&r, dt, 0, (double)v);
            n++;
            int nan = (f & 0x7fff) > (dt == 2 ? 0x7f80 : 0x7c00) && (r & 0x7fff) > (dt == 2 ? 0x7f80 : 0x7c00);
            if (f != r && !nan && bad++ < 5) CHECK(0, "dt %d: tk_st_y(%a) = %#x, tk_st %#x", dt, v, f, r);
        }
    }
    const float edge[] = {0x1.fep127f, 0x1.ff8p127f, 0x1.ff7ffep127f, 65504.0f, 65519.99f, 65520.0f,
                          0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-133f, 0x1p-134f};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++)
        for (int dt = 2; dt <= 3; dt++) {
            uint16_t f, r;
            tk_st_y(&f, dt, 0, edge[i]);
            tk_st(&r, dt, 0, (double)edge[i]);
            CHECK(f == r, "dt %d: tk_st_y(%a) = %#x, tk_st %#x", dt, edge[i], f, r);
        }
    printf("tk_st_y: %lld stores, %lld differ from tk_st\n", (long long)n, (long long)bad);
    CHECK(bad == 0, "%lld stores differ", (long long)bad);
}

int main(void) {
    test_round();
    test_store_float();
    test_expf();
    test_vector_scalar();
    test_functions();
    printf("mathf: %s\n", failed ? "FAILED" : "ok");
    return failed;
}
