/* tests/e2e/mlp_interp.c — issue 3: examples/mlp.model, trained by the
 * reference interpreter through the runtime (no code generation), learns a
 * small synthetic classification task to high accuracy: the class of a
 * point is the quadrant of its first two features (the other 14 features
 * are noise).  Accuracy is measured on fresh points with the forward-only
 * logits. */
#include "compile.h"
#include "interp_backend.h"
#include "trainc_rt.h"

#include <stdio.h>
#include <stdlib.h>

enum { B = 32, F = 16, C = 4 };

static uint64_t rng = 99;
static float uni(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

static void batch(float *x, int32_t *y) {
    for (int i = 0; i < B; i++) {
        for (int j = 0; j < F; j++) x[i * F + j] = uni();
        y[i] = (x[i * F] > 0) + 2 * (x[i * F + 1] > 0);
    }
}

static int feed(void *ctx, TrnSession *s, int micro) {
    (void)ctx, (void)micro;
    float x[B * F];
    int32_t y[B];
    batch(x, y);
    if (trn_set(s, "x", x, sizeof x)) return -1;
    return trn_set(s, "labels", y, sizeof y);
}

int main(void) {
    Diag d;
    diag_init(&d, stderr);
    CompileOptions o = {0};
    o.model = "examples/mlp.model";
    o.pm.verify_each = true;
    Graph *train, *eval, *sample;
    if (!cg_prepare(&o, &train, &eval, &sample, &d) || !sample) return 1;
    InterpModel *im = ib_new(train, eval, sample, INTERP_F32, o.model, NULL, &d);
    char err[512];
    TrnOptions to = {"cpu", 0, 5, 0};
    TrnSession *s = trn_create_with_backend(ib_model(im), ib_backend(im), &to, err, sizeof err);
    if (!s) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    double first = 0, last = 0;
    for (int k = 1; k <= 1000; k++) {
        if (trn_step(s, feed, NULL, 3e-3)) {
            fprintf(stderr, "%s\n", trn_error(s));
            return 1;
        }
        if (k == 1) first = trn_loss(s);
        last = trn_loss(s);
    }
    int right = 0, total = 0;
    for (int r = 0; r < 20; r++) {
        float x[B * F], logits[B * C];
        int32_t y[B];
        batch(x, y);
        if (trn_set(s, "x", x, sizeof x) || trn_predict(s, logits, sizeof logits)) {
            fprintf(stderr, "%s\n", trn_error(s));
            return 1;
        }
        for (int i = 0; i < B; i++) {
            int best = 0;
            for (int c = 1; c < C; c++)
                if (logits[i * C + c] > logits[i * C + best]) best = c;
            right += best == y[i];
            total++;
        }
    }
    double acc = (double)right / total;
    printf("mlp (interpreter): loss %.4f -> %.4f after 1000 steps; accuracy on %d fresh points %.1f%%\n", first, last, total, 100 * acc);
    trn_destroy(s);
    ib_free(im);
    ir_graph_free(train);
    ir_graph_free(eval);
    ir_graph_free(sample);
    diag_free(&d);
    if (acc < 0.95) {
        printf("FAIL: accuracy below 95%%\n");
        return 1;
    }
    return 0;
}
