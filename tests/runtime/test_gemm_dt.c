/* tests/runtime/test_gemm_dt.c — tk_gemm_dt (runtime/trainc_kernels.h),
 * the half-precision GEMM of generated C, against the product it stands
 * for: each element the sum in double of the widened operands, in k
 * order, rounded once to the result's dtype (and with beta 1 that result
 * added to C's value and rounded again).
 *
 *   test_gemm_dt
 *
 * Built twice: test_gemm_dt with OpenBLAS (TRN_HAVE_BLAS, as generated
 * code is by default) and test_gemm_dt_noblas with the plain loops
 * (`--no-blas`).  Shapes cross the widening tiles (TK_GEMM_DT_MB, _NB,
 * _KB) in every dimension, with both transposes, leading dimensions wider
 * than the rows, bf16 and f16 operands into f32 and into their own dtype.
 * The plain loops sum in k order across the tiles: the same bits as the
 * reference.  OpenBLAS sums in its own order in double: a result within
 * 2^-40 of the reference before its rounding, so equal after it but where
 * the sum lies that close to a tie of the result's dtype (such results
 * are counted, and may be at most 1 in 10000).
 * Ends with "gemm_dt: ok" or "gemm_dt: FAILED". */
#include "check.h"
#include "trainc_kernels.h"

#include <stdint.h>
#include <stdlib.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

static size_t esize(int dt) { return dt == 0 ? 4 : 2; }

/* One product: C[M,N] (ldc) (+)= op(A) op(B), A and B of dtype dt, C of cdt. */
static void one(int dt, int cdt, int ta, int tb, int64_t M, int64_t N, int64_t K, int beta) {
    int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
    int64_t arows = ta ? K : M, brows = tb ? N : K;
    void *A = calloc((size_t)(arows * lda), esize(dt)), *B = calloc((size_t)(brows * ldb), esize(dt));
    void *C = calloc((size_t)(M * ldc), esize(cdt)), *C0 = calloc((size_t)(M * ldc), esize(cdt));
    for (int64_t i = 0; i < arows * lda; i++) tk_st(A, dt, i, urand());
    for (int64_t i = 0; i < brows * ldb; i++) tk_st(B, dt, i, urand());
    for (int64_t i = 0; i < M * ldc; i++) tk_st(C0, cdt, i, urand());
    memcpy(C, C0, (size_t)(M * ldc) * esize(cdt));
    tk_gemm_dt(dt, cdt, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    int64_t bad = 0, near = 0, untouched = 0;
    double worst = 0;
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += tk_ld(A, dt, ta ? k * lda + i : i * lda + k) * tk_ld(B, dt, tb ? j * ldb + k : k * ldb + j);
            double want = tk_round(cdt, acc);
            if (beta) want = tk_round(cdt, want + tk_ld(C0, cdt, i * ldc + j));
            double got = tk_ld(C, cdt, i * ldc + j);
            if (got == want) continue;
            /* a different rounding: only where the sum is within 2^-40 of a tie */
            double up = tk_round(cdt, acc * (1 + 0x1p-40) + 0x1p-60), dn = tk_round(cdt, acc * (1 - 0x1p-40) - 0x1p-60);
            if (beta) up = tk_round(cdt, up + tk_ld(C0, cdt, i * ldc + j)), dn = tk_round(cdt, dn + tk_ld(C0, cdt, i * ldc + j));
            if (got == up || got == dn) {
                near++;
                continue;
            }
            if (!bad) worst = got - want;
            bad++;
        }
        for (int64_t j = N; j < ldc; j++) /* the row's padding is C's, not the product's */
            untouched += memcmp((char *)C + (size_t)(i * ldc + j) * esize(cdt), (char *)C0 + (size_t)(i * ldc + j) * esize(cdt), esize(cdt)) != 0;
    }
    CHECK(bad == 0 && untouched == 0 && near * 10000 <= M * N,
          "dt %d -> %d, ta %d tb %d, %lldx%lldx%lld, beta %d: %lld results differ (the first by %g), %lld near a tie, %lld padding elements written", dt, cdt, ta,
          tb, (long long)M, (long long)N, (long long)K, beta, (long long)bad, worst, (long long)near, (long long)untouched);
#ifndef TRN_HAVE_BLAS
    CHECK(near == 0, "dt %d: %lld results differ near a tie; the plain loops sum in k order", dt, (long long)near);
#endif
    free(A), free(B), free(C), free(C0);
}

int main(void) {
    /* across the tiles' boundaries: M past MB (512), N past NB (1024), K past KB (2048) */
    one(2, 0, 0, 0, TK_GEMM_DT_MB + 1, 17, TK_GEMM_DT_KB + 2, 0);
    one(2, 2, 1, 1, 70, TK_GEMM_DT_NB + 1, TK_GEMM_DT_KB + 9, 1);
    one(3, 3, 0, 1, TK_GEMM_DT_MB + 3, 40, TK_GEMM_DT_KB * 2 + 1, 0);
    one(3, 0, 1, 0, 2 * TK_GEMM_DT_MB + 1, 2 * TK_GEMM_DT_NB + 3, 30, 1);
    /* small ones, one tile; and a sum of no terms */
    one(2, 2, 0, 0, 5, 7, 3, 1);
    one(3, 0, 1, 1, 1, 1, 1, 0);
    one(2, 0, 0, 0, 4, 6, 0, 1);
    printf("gemm_dt: %s\n", failed ? "FAILED" : "ok");
    return failed;
}
