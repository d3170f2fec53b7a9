/* tests/gpu/kcheck.c — every kernel of a compiled model, one at a time, on
 * the GPU against the C backend's kernel on the CPU (tests/gpu/run.sh).
 *
 * Linked with a model's generated C (--target=cuda, built with -DTRN_MODEL=
 * trn_model_NAME): its CUDA module lists, for each kernel, the C function
 * computing the same thing and the buffers it reads and writes.  For each
 * kernel: fresh random inputs (in the range the compiler gives for each
 * buffer: indices below the table size, variances >= 0, cross-entropy
 * targets some outside [0, classes) as computed ones may be, ...) go into both
 * arenas; the outputs are poisoned first, differently on each side (NaNs
 * with payloads no arithmetic makes; bytes 0xA5 and 0x5A for integers), so
 * an element one side writes and the other does not shows up, and one
 * neither writes (a copy of one part of a pad or concat) is no result;
 * both run; the outputs are
 * compared: max |gpu - cpu| / max |cpu| per buffer within the tolerance
 * (fp32: 2e-4; TF32 products 5e-3; a product with cuBLASLt's GELU
 * epilogue 2e-3, below; a kernel with a bf16 or f16 buffer 2e-2:
 * a unit in the last place of bf16 is up to 7.8e-3 of the value, and the
 * GPU and the CPU may round two steps of a chain differently),
 * integers exactly, NaN where the CPU has one.  One JSON object per kernel
 * goes to the file named by argv[1], a summary to stdout; the exit status
 * is 1 when any kernel fails.  TRAINC_KCHECK_ONLY=TEXT: only the kernels
 * whose name contains TEXT (the others are not run on either side).
 *   kcheck OUT.jsonl [SEED] */
#include "trainc_cuda.h"
#include "trainc_rt.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern const TrnModel TRN_MODEL;

static uint64_t rng = 88172645463325252ull;
static double urand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* f32 -> f16 for the test values (normal range, |v| < 65504): nearest even */
static uint16_t to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a < 0x38800000u) return (uint16_t)sign; /* below the normal range: zero */
    uint32_t r = a + 0x0fffu + ((a >> 13) & 1u);
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

static float from_f16(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0) {
        float v = (float)m * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    u = e == 31 ? sign | 0x7f800000u | (m << 13) : sign | ((e + 112) << 23) | (m << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void fill_random(unsigned char *p, const TrnCudaBuf *b) {
    int64_t n = b->bytes / (b->dtype == TRN_F64 || b->dtype == TRN_I64 ? 8 : b->dtype == TRN_U8 ? 1 : b->dtype == TRN_BF16 || b->dtype == TRN_F16 ? 2 : 4);
    for (int64_t i = 0; i < n; i++) {
        double v = b->lo + (b->hi - b->lo) * urand();
        switch (b->dtype) {
        case TRN_F32: ((float *)p)[i] = (float)v; break;
        case TRN_F64: ((double *)p)[i] = v; break;
        case TRN_BF16: ((uint16_t *)p)[i] = to_bf16((float)v); break;
        case TRN_F16: ((uint16_t *)p)[i] = to_f16((float)v); break;
        case TRN_I32: ((int32_t *)p)[i] = (int32_t)floor(v); break;
        case TRN_I64: ((int64_t *)p)[i] = (int64_t)floor(v); break;
        case TRN_U8: p[i] = (unsigned char)floor(v); break;
        }
    }
}

static double get(const unsigned char *p, int dt, int64_t i) {
    switch (dt) {
    case TRN_F32: return ((const float *)p)[i];
    case TRN_F64: return ((const double *)p)[i];
    case TRN_BF16: {
        uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case TRN_F16: return from_f16(((const uint16_t *)p)[i]);
    case TRN_I32: return ((const int32_t *)p)[i];
    case TRN_I64: return (double)((const int64_t *)p)[i];
    default: return p[i];
    }
}

static int esize(int dt) { return dt == TRN_F64 || dt == TRN_I64 ? 8 : dt == TRN_U8 ? 1 : dt == TRN_BF16 || dt == TRN_F16 ? 2 : 4; }

/* The poison of one element of dtype dt, for the GPU (side 0) or the CPU (1). */
static void poison_elem(unsigned char *e, int dt, int side) {
    uint64_t v;
    switch (dt) {
    case TRN_F32: v = side ? 0x7fda5a5aull : 0x7fe5a5a5ull; break;
    case TRN_F64: v = side ? 0x7ffc5a5a5a5a5a5aull : 0x7ffda5a5a5a5a5a5ull; break;
    case TRN_BF16: v = side ? 0x7fdaull : 0x7fe5ull; break;
    case TRN_F16: v = side ? 0x7d5aull : 0x7ea5ull; break;
    default: v = side ? 0x5a5a5a5a5a5a5a5aull : 0xa5a5a5a5a5a5a5a5ull; break;
    }
    memcpy(e, &v, (size_t)esize(dt)); /* little-endian: the low bytes */
}

static void poison(unsigned char *p, const TrnCudaBuf *b, int side) {
    int es = esize(b->dtype);
    for (int64_t i = 0; i < b->bytes / es; i++) poison_elem(p + i * es, b->dtype, side);
}

/* Whether every product's GELU epilogue runs in cuBLASLt: the device's
 * description counts none as kernels (runtime/cuda.c). */
static int gelu_all_lt(TrnCudaDev *g) {
    const char *ge = strstr(trn_cuda_describe(g), "GELU epilogues: ");
    int lt = 0, kern = 0;
    if (ge) sscanf(ge, "GELU epilogues: %d in cuBLASLt, %d as kernels", &lt, &kern);
    return lt > 0 && kern == 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    const TrnModel *m = &TRN_MODEL;
    const TrnCudaModule *cm = m->cuda;
    if (argc > 2) rng ^= (uint64_t)strtoull(argv[2], NULL, 10) * 0x9E3779B97F4A7C15ull;
    else rng ^= (uint64_t)time(NULL);
    FILE *out = fopen(argc > 1 ? argv[1] : "kcheck.jsonl", "w");
    if (!out) {
        perror("kcheck: output");
        return 2;
    }
    setvbuf(out, NULL, _IOLBF, 0); /* a line a kernel, there when a later one hangs and is killed */
    /* TRAINC_KCHECK_TRACE=1: each kernel's name before it runs (run.sh: a
     * kernel that hangs is the last one named) */
    const char *tr = getenv("TRAINC_KCHECK_TRACE");
    int trace = tr && strcmp(tr, "1") == 0;
    char err[2048];
    TrnCudaDev *g = trn_cuda_open(m, 0, err, sizeof err);
    if (!g) {
        fprintf(stderr, "kcheck: %s\n", err);
        fprintf(out, "{\"model\":\"%s\",\"error\":\"cannot open the device\"}\n", m->name);
        return 2;
    }
    printf("kcheck %s on %s: arena %lld bytes\n", m->name, trn_cuda_describe(g), (long long)m->arena_bytes);
    /* whether the products' GELU epilogues run in cuBLASLt: every one (the
     * device's count of those it runs as kernels is 0), or not (below) */
    int all_gelu_lt = gelu_all_lt(g);
    unsigned char *A = calloc(1, (size_t)m->arena_bytes), *G = malloc((size_t)m->arena_bytes);
    if (!A || !G) return 2;
    int total = 0, failed = 0;
    double worst = 0;
    const char *worst_name = "";
    static const char *const sname[TRN_RUN__COUNT] = {"micro", "update", "eval", "sample", "refresh"};
    const char *only = getenv("TRAINC_KCHECK_ONLY");
    for (int s = 0; s < TRN_RUN__COUNT; s++)
        for (int i = 0; i < cm->nkern[s]; i++) {
            const TrnCudaKernel *k = &cm->kern[s][i];
            if (only && *only && !strstr(k->name, only)) continue;
            int rc = 0;
            /* inputs, into both arenas */
            for (int r = 0; r < k->nreads && rc == 0; r++) {
                const TrnCudaBuf *b = &k->reads[r];
                fill_random(A + b->off, b);
                rc = trn_cuda_upload(g, b->off, A + b->off, (size_t)b->bytes, err, sizeof err);
            }
            /* outputs poisoned on both sides (not those also read: in place) */
            for (int w = 0; w < k->nwrites && rc == 0; w++) {
                const TrnCudaBuf *b = &k->writes[w];
                int also = 0;
                for (int r = 0; r < k->nreads; r++) also |= k->reads[r].off == b->off;
                if (also) continue;
                poison(G + b->off, b, 0);
                poison(A + b->off, b, 1);
                rc = trn_cuda_upload(g, b->off, G + b->off, (size_t)b->bytes, err, sizeof err);
            }
            if (trace) printf("run %s %s (%s)\n", sname[s], k->name, k->where);
            if (rc == 0) rc = trn_cuda_run_kernel(g, s, i, err, sizeof err);
            /* (a product whose epilogue cuBLASLt refused as it ran is a kernel from now on) */
            all_gelu_lt = all_gelu_lt && gelu_all_lt(g);
            k->cpu(A);
            double kworst = 0;
            int64_t unwritten = 0, nanmis = 0, infmis = 0, intmis = 0;
            for (int w = 0; w < k->nwrites && rc == 0; w++) {
                const TrnCudaBuf *b = &k->writes[w];
                rc = trn_cuda_download(g, b->off, G + b->off, (size_t)b->bytes, err, sizeof err);
                int es = esize(b->dtype);
                int64_t n = b->bytes / es;
                int fl = b->dtype <= TRN_F16;
                double scale = 0, diff = 0;
                for (int64_t e = 0; e < n && rc == 0; e++) {
                    const unsigned char *gp = G + b->off + e * es, *cp = A + b->off + e * es;
                    unsigned char pg[8], pc[8];
                    poison_elem(pg, b->dtype, 0);
                    poison_elem(pc, b->dtype, 1);
                    int gpois = memcmp(gp, pg, (size_t)es) == 0, cpois = memcmp(cp, pc, (size_t)es) == 0;
                    if (gpois && cpois) continue; /* neither side writes it */
                    if (gpois != cpois) {
                        unwritten++;
                        continue;
                    }
                    double c = get(A + b->off, b->dtype, e), x = get(G + b->off, b->dtype, e);
                    if (!fl) {
                        intmis += c != x;
                        continue;
                    }
                    /* NaN and the infinities compare as values, apart
                     * from the relative error (an infinity there would
                     * make it infinite, and "inf" is not JSON): a NaN on
                     * one side only is a NaN mismatch; an infinity
                     * against anything but the same infinity, or the
                     * largest finite value of the dtype with its sign
                     * (one side rounding past it where the other stops:
                     * f16's 65504), an infinity mismatch */
                    if (isnan(c) || isnan(x)) {
                        nanmis += !(isnan(c) && isnan(x));
                        continue;
                    }
                    if (isinf(c) || isinf(x)) {
                        double big = b->dtype == TRN_F16 ? 65504.0 : b->dtype == TRN_BF16 ? 0x1.fep127 : b->dtype == TRN_F32 ? (double)FLT_MAX : DBL_MAX;
                        infmis += !(c == x || ((c > 0) == (x > 0) && fmin(fabs(c), fabs(x)) >= big));
                        continue;
                    }
                    scale = fmax(scale, fabs(c));
                    diff = fmax(diff, fabs(c - x));
                }
                double rel = scale > 0 ? diff / scale : diff;
                if (rel > kworst) kworst = rel;
            }
            int half = 0;
            for (int r = 0; r < k->nreads; r++) half |= k->reads[r].dtype == TRN_BF16 || k->reads[r].dtype == TRN_F16;
            for (int w = 0; w < k->nwrites; w++) half |= k->writes[w].dtype == TRN_BF16 || k->writes[w].dtype == TRN_F16;
            /* a product with a GELU epilogue in cuBLASLt: its documentation
             * does not say which GELU (the tanh form the C kernel computes,
             * erf's, or the tanh form with an approximate tanh); at these
             * inputs erf's differs from the C kernel's by up to 4e-5 of the
             * largest value in the forward (GELU) and 4e-4 in the backward
             * (DGELU), a tanh with 2^-11 relative error by up to 2.4e-4 and
             * 6.5e-5 (docs/cuda.md), so they get 2e-3 (an operand or layout
             * gone wrong is far above it), and their error is recorded apart
             * (gelu_epilogue "gelu" or "dgelu" in the JSON, run.sh's finding
             * line).  Where the runtime runs some of them as kernels (the
             * heuristic had no algorithm, or TRAINC_CUDA_GELU_EPILOGUE=0),
             * none is so marked: those kernels compute the C kernel's GELU. */
            int gelu = all_gelu_lt && k->kind == TRN_CK_GEMM && k->ngemm > 0 ? k->gemm[0].epi : TRN_GEMM_PLAIN;
            double tol = half ? 2e-2 : k->ngemm > 0 && cm->tf32 ? 5e-3 : gelu != TRN_GEMM_PLAIN ? 2e-3 : 2e-4;
            int ok = rc == 0 && unwritten == 0 && nanmis == 0 && infmis == 0 && intmis == 0 && kworst <= tol;
            total++;
            if (!ok) failed++;
            if (kworst > worst) {
                worst = kworst;
                worst_name = k->name;
            }
            fprintf(out,
                    "{\"model\":\"%s\",\"schedule\":\"%s\",\"kernel\":\"%s\",\"where\":\"%s\",\"kind\":%d,\"rel_err\":%.3e,\"tol\":%.1e,"
                    "\"unwritten\":%lld,\"nan_mismatch\":%lld,\"inf_mismatch\":%lld,\"int_mismatch\":%lld,\"ok\":%s%s%s%s%s}\n",
                    m->name, sname[s], k->name, k->where, k->kind, kworst, tol, (long long)unwritten, (long long)nanmis, (long long)infmis,
                    (long long)intmis,
                    ok ? "true" : "false", gelu == TRN_GEMM_GELU ? ",\"gelu_epilogue\":\"gelu\"" : gelu == TRN_GEMM_DGELU ? ",\"gelu_epilogue\":\"dgelu\"" : "", rc ? ",\"error\":\"" : "", rc ? "see stderr" : "", rc ? "\"" : "");
            if (!ok)
                printf("FAIL %-56s rel %.3e (tol %.0e) unwritten %lld nan %lld inf %lld int %lld%s%s\n", k->name, kworst, tol, (long long)unwritten,
                       (long long)nanmis, (long long)infmis, (long long)intmis, rc ? " error: " : "", rc ? err : "");
            if (rc) {
                /* a failed launch may leave the context unusable: stop */
                fprintf(stderr, "kcheck: %s\n", err);
                goto end;
            }
        }
end:
    printf("kcheck %s: %d kernels, %d failed, worst relative error %.3e (%s)\n", m->name, total, failed, worst, worst_name);
    fprintf(out, "{\"model\":\"%s\",\"summary\":true,\"kernels\":%d,\"failed\":%d,\"worst\":%.3e,\"worst_kernel\":\"%s\"}\n", m->name, total, failed,
            worst, worst_name);
    fclose(out);
    trn_cuda_close(g);
    free(A);
    free(G);
    if (total == 0) fprintf(stderr, "kcheck %s: no kernel was checked\n", m->name);
    return failed || total == 0 ? 1 : 0;
}
