/* tests/codegen/cg_vs_interp.c — the compiled CPU code against the
 * reference interpreter (fp32), step by step:
 *   - the same loss at each of 20 steps (relative difference < 1e-5) and the
 *     same parameters afterwards (< 1e-5), for tiny GPT-2 and Llama (and
 *     tests/cuda/fake/gelu_mlp.model: GELU and bias-gradient epilogues);
 *   - fused and unfused schedules give the same losses;
 *   - poisoning every dead buffer (memory-plan checking) changes nothing;
 *   - the runtime allocates exactly the arena the plan reports.
 * Usage: cg_vs_interp [gpt2|llama|gelu|ones|ints|edges|accum ...] (default: all). */
#include "cg_harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const gpt2_defs[] = {"vocab=256", "layers=2", "heads=4", "dim=64", "seq=64", "batch=4", NULL};
/* AdamW without warm-up, so 20 steps visibly train.  Parameters are compared
 * after SGD with momentum: AdamW divides each gradient by its own RMS, so a
 * parameter whose true gradient is exactly zero (the attention key bias:
 * softmax does not change when every score moves by the same amount) moves
 * by about lr per step on rounding noise alone, differently in any two
 * correct implementations. */
static const char *const adamw_sets[] = {"optimizer=adamw", "lr=0.001", "warmup=0", "schedule=constant", "weight_decay=0.1", "grad_clip=1.0", NULL};
/* Accumulating over 3 micro-batches (the train section's grad_accum, which
 * the runtime and the interpreter run; PassOptions.accum alone shapes the
 * graph, not the step): in bf16 the weight gradients' products sum into the
 * f32 accumulators (GEMM with beta 1, tk_gemm_dt), the bias sums in place. */
static const char *const accum_sets[] = {"optimizer=adamw", "lr=0.001", "warmup=0", "schedule=constant", "weight_decay=0.1", "grad_clip=1.0", "grad_accum=3", NULL};
static const char *const bf16_sets[] = {"precision=bf16", "optimizer=adamw", "lr=0.001", "warmup=0", "schedule=constant", "weight_decay=0.1", "grad_clip=1.0", "grad_accum=3", NULL};
static const char *const sgd_sets[] = {"optimizer=sgd", "lr=0.05", "momentum=0.9", "warmup=0", "schedule=constant", "weight_decay=0.01", NULL};
/* SGD without momentum under accumulation and clipping: each update zeroes
 * its accumulator as it reads it, and its new weight is copied into the
 * parameter (no momentum state to update in place); that copy once made
 * the schedule a cycle ("internal: the kernel schedule has a cycle"). */
static const char *const sgd_accum_sets[] = {"optimizer=sgd", "lr=0.05", "momentum=0", "warmup=0", "schedule=constant", "grad_clip=1.0", "grad_accum=3", NULL};
static const char *const no_defs[] = {NULL};
static const char *const one_defs[] = {"seq=1", "batch=1", NULL};
static const char *const llama_defs[] = {"vocab=256", "layers=2", "heads=4", "kv_heads=2", "dim=64", "ffn=128", "seq=64", "batch=4", NULL};

static TrnSession *session(const TrnModel *m, int poison) {
    char err[512];
    TrnOptions o = {"cpu", 0, 1234, poison};
    TrnSession *s = trn_create(m, &o, err, sizeof err);
    if (!s) fprintf(stderr, "trn_create: %s\n", err);
    return s;
}

/* Runs `steps` steps of the compiled model; losses into out. */
static int run_compiled(const TrnModel *m, const Tokens *tk, int steps, int poison, double *out, TrnSession **keep) {
    TrnSession *s = session(m, poison);
    if (!s) return -1;
    HFeed c = {tk, 0};
    for (int i = 0; i < steps; i++) {
        if (trn_step(s, h_feed_next, &c, -1) != 0) {
            fprintf(stderr, "step: %s\n", trn_error(s));
            trn_destroy(s);
            return -1;
        }
        out[i] = trn_loss(s);
    }
    if (keep) *keep = s;
    else trn_destroy(s);
    return 0;
}

/* Whether check_model asks the loss to go down: the models of "ones",
 * "ints" and "edges" are too small to learn the synthetic tokens (no tiny Shakespeare
 * in a clean clone) in 20 steps; their parameters, compared after the
 * steps, show that both sides trained alike. */
static bool expect_descent = true;

static void check_model(const char *name, const char *path, const char *const *defs, const char *const *sets, const Tokens *tk,
                        int steps, int accum, bool params, bool extras) {
    printf("== %s (%d steps, grad_accum %d, %s)\n", name, steps, accum, sets[0]);
    Harness h;
    if (h_build(&h, path, defs, sets, true, accum) != 0) {
        CHECK(0, "%s: build failed", name);
        h_free(&h);
        return;
    }
    printf("arena %lld bytes, %d micro-batch kernels\n", (long long)h.compiled->arena_bytes, h.prog->sched[TRN_RUN_MICRO].nk);

    /* the interpreter */
    char err[512];
    TrnOptions io = {"cpu", 0, 1234, 0};
    TrnSession *si = trn_create_with_backend(ib_model(h.im), ib_backend(h.im), &io, err, sizeof err);
    CHECK(si, "interp session: %s", err);
    double *li = calloc((size_t)steps, sizeof(double)), *lc = calloc((size_t)steps, sizeof(double));
    double *lp = calloc((size_t)steps, sizeof(double)), *lu = calloc((size_t)steps, sizeof(double));
    HFeed c = {tk, 0};
    for (int i = 0; si && i < steps; i++) {
        if (trn_step(si, h_feed_next, &c, -1) != 0) {
            CHECK(0, "interp step: %s", trn_error(si));
            break;
        }
        li[i] = trn_loss(si);
    }
    /* compiled, fused */
    TrnSession *sc = NULL;
    CHECK(run_compiled(h.compiled, tk, steps, 0, lc, &sc) == 0, "compiled run failed");
    double worst = 0;
    for (int i = 0; i < steps; i++) {
        double r = h_rel(li[i], lc[i], 1e-12);
        printf("step %2d  interp %.9f  compiled %.9f  rel %.2e\n", i + 1, li[i], lc[i], r);
        worst = h_max(worst, r);
    }
    /* half precision: the emulated bf16 drifts from the interpreter's within
     * passes_compiled's bound (its loop kernels round through float) */
    double tol = strcmp(sets[0], "precision=bf16") == 0 ? 3e-4 : 1e-5;
    printf("%s: worst loss difference %.3e\n", name, worst);
    CHECK(worst < tol, "%s: losses differ by %.3e (limit %.0e)", name, worst, tol);
    CHECK(!expect_descent || lc[steps - 1] < lc[0], "%s: the loss did not go down (%g -> %g)", name, lc[0], lc[steps - 1]);
    if (si && sc && params) {
        const char *wn = "";
        double pd = h_param_diff(si, sc, &wn);
        printf("%s: parameters after %d steps: worst relative difference %.3e (%s)\n", name, steps, pd, wn);
        CHECK(pd < 1e-5, "%s: parameters differ by %.3e in %s", name, pd, wn);
    }
    if (!extras) goto out;
    /* memory plan: poisoned dead buffers change nothing, and the arena is what the plan says */
    CHECK(run_compiled(h.compiled, tk, steps, 1, lp, NULL) == 0, "poisoned run failed");
    for (int i = 0; i < steps; i++) CHECK(lp[i] == lc[i], "%s: poisoning dead buffers changed step %d: %.9g vs %.9g", name, i + 1, lp[i], lc[i]);
    TrnBackend be;
    if (trn_cpu_backend(h.compiled, &be, err, sizeof err) == 0) {
        CHECK(be.device_bytes == h.compiled->arena_bytes, "arena %lld allocated, %lld planned", (long long)be.device_bytes,
              (long long)h.compiled->arena_bytes);
        be.destroy(be.self);
    }
    /* fused and unfused schedules */
    Harness hu;
    if (h_build(&hu, path, defs, sets, false, accum) == 0) {
        printf("unfused: %d micro-batch kernels (fused: %d)\n", hu.prog->sched[TRN_RUN_MICRO].nk, h.prog->sched[TRN_RUN_MICRO].nk);
        CHECK(hu.prog->sched[TRN_RUN_MICRO].nk > h.prog->sched[TRN_RUN_MICRO].nk, "fusion made no fewer kernels");
        CHECK(run_compiled(hu.compiled, tk, steps, 0, lu, NULL) == 0, "unfused run failed");
        double wu = 0;
        for (int i = 0; i < steps; i++) wu = h_max(wu, h_rel(lu[i], lc[i], 1e-12));
        printf("%s: fused vs unfused worst loss difference %.3e\n", name, wu);
        CHECK(wu < 1e-6, "%s: fused and unfused losses differ by %.3e", name, wu);
    } else {
        CHECK(0, "unfused build failed");
    }
    h_free(&hu);
out:
    if (si) trn_destroy(si);
    if (sc) trn_destroy(sc);
    free(li);
    free(lc);
    free(lp);
    free(lu);
    h_free(&h);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    /* the comparisons below fail on a NaN, in one run or in both */
    CHECK(h_rel(NAN, NAN, 1e-12) == INFINITY && h_rel(1, NAN, 1e-12) == INFINITY && h_max(0, NAN) == INFINITY && h_max(INFINITY, 1) == INFINITY &&
              h_max(1e-9, 2e-9) == 2e-9 && h_rel(2, 2, 1e-12) == 0,
          "the harness's comparisons pass over a NaN");
    Tokens tk;
    h_tokens_text(&tk);
    int steps = 20;
    bool all = argc < 2;
    for (int i = 1; i < argc || all; i++) {
        const char *w = all ? NULL : argv[i];
        if (all || strcmp(w, "gpt2") == 0) {
            check_model("gpt2", "examples/gpt2.model", gpt2_defs, adamw_sets, &tk, steps, 1, false, true);
            check_model("gpt2", "examples/gpt2.model", gpt2_defs, sgd_sets, &tk, steps, 1, true, false);
        }
        if (all || strcmp(w, "llama") == 0) {
            check_model("llama", "examples/llama.model", llama_defs, adamw_sets, &tk, steps, 1, false, true);
            check_model("llama", "examples/llama.model", llama_defs, sgd_sets, &tk, steps, 1, true, false);
        }
        if (all || strcmp(w, "gelu") == 0) {
            /* tanh GELUs as the products' epilogues, the bias gradients
             * summed by the weight gradients' products (of w [out, in] and
             * of w [in, out]); SGD too, whose update, unlike AdamW's, shows
             * a gradient off by a constant factor */
            check_model("gelu_mlp", "tests/cuda/fake/gelu_mlp.model", no_defs, adamw_sets, &tk, steps, 1, true, true);
            check_model("gelu_mlp", "tests/cuda/fake/gelu_mlp.model", no_defs, sgd_sets, &tk, steps, 1, true, false);
        }
        expect_descent = false;
        if (all || strcmp(w, "ones") == 0) {
            /* axes of size 1: leading dimensions BLAS takes */
            check_model("size_one", "tests/codegen/size_one.model", no_defs, sgd_sets, &tk, steps, 1, true, true);
            check_model("size_one, one position", "tests/codegen/size_one.model", one_defs, sgd_sets, &tk, steps, 1, true, false);
            check_model("size_one_slice", "tests/codegen/size_one_slice.model", no_defs, sgd_sets, &tk, steps, 1, true, false);
        }
        if (all || strcmp(w, "ints") == 0) {
            /* integers past their range: wrapped, a float cast saturated */
            check_model("int_wrap", "tests/codegen/int_wrap.model", no_defs, sgd_sets, &tk, steps, 1, true, true);
        }
        if (all || strcmp(w, "edges") == 0) {
            /* a fused cross-entropy's logits sharing a buffer, a -0.0 fill,
             * a -inf constant, a loss sliced from a larger buffer, a
             * bias-free norm's zero and an accumulator's reset */
            check_model("edges", "tests/codegen/edges.model", no_defs, sgd_sets, &tk, steps, 1, true, true);
            check_model("slice_loss", "tests/codegen/slice_loss.model", no_defs, sgd_sets, &tk, steps, 1, true, false);
            check_model("norm_accum", "tests/codegen/norm_accum.model", no_defs, sgd_sets, &tk, 5, 2, true, true);
        }
        expect_descent = true;
        if (all || strcmp(w, "accum") == 0) {
            check_model("gpt2, accumulating", "examples/gpt2.model", gpt2_defs, accum_sets, &tk, 5, 3, false, true);
            check_model("gpt2 bf16, accumulating", "examples/gpt2.model", gpt2_defs, bf16_sets, &tk, 5, 3, false, true);
            check_model("gpt2 sgd, accumulating", "examples/gpt2.model", gpt2_defs, sgd_accum_sets, &tk, 5, 3, true, false);
            /* an untied head: linear_cross_entropy's dw summed into its
             * accumulator (BLAS's beta 1 in f32; in bf16 the double sum
             * rounded and added) */
            check_model("llama, accumulating", "examples/llama.model", llama_defs, accum_sets, &tk, 5, 3, false, true);
            check_model("llama bf16, accumulating", "examples/llama.model", llama_defs, bf16_sets, &tk, 5, 3, false, true);
        }
        if (all) break;
    }
    free(tk.t);
    return h_finish();
}
