/* examples/embed/main.c — a C program that trains a trainc-compiled model
 * through the runtime's embedding API: create a session, feed batches,
 * step, read the loss, save a checkpoint, load it back, destroy.
 *
 * The model is examples/mlp.model (a classifier: x f32[32,16] -> 4
 * classes), compiled with `trainc compile --emit=lib` into mlp.c / mlp.h
 * (the build does that; see CMakeLists.txt).  The data is synthetic: the
 * class of a point is the quadrant of its first two features.
 *
 *   embed [CHECKPOINT [DEVICE]]    DEVICE: cpu (default), auto or cuda; a
 *                                  GPU needs the --target=cuda build
 *                                  (-DTRAINC_TARGET=cuda) */
#include "mlp.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { B = 32, F = 16 };   /* the model's batch and features (mlp.model defaults) */

typedef struct Data { uint64_t state; } Data;

static double uniform(Data *d) {
    d->state = d->state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(d->state >> 11) * (1.0 / 9007199254740992.0);
}

/* One micro-batch: x (B, F) uniform in [-1, 1); labels (B) = quadrant of (x0, x1). */
static void batch(Data *d, float x[B * F], int32_t labels[B]) {
    for (int i = 0; i < B; i++) {
        for (int j = 0; j < F; j++) x[i * F + j] = (float)(2 * uniform(d) - 1);
        labels[i] = (x[i * F] > 0) + 2 * (x[i * F + 1] > 0);
    }
}

static int feed(void *ctx, TrnSession *s, int micro) {
    float x[B * F];
    int32_t labels[B];
    (void)micro;
    batch(ctx, x, labels);
    if (trn_set(s, "x", x, sizeof x) != 0) return -1;
    return trn_set(s, "labels", labels, sizeof labels);
}

int main(int argc, char **argv) {
    const char *ckpt = argc > 1 ? argv[1] : "mlp.safetensors";
    const char *device = argc > 2 ? argv[2] : "cpu";
    char err[1024];
    TrnOptions opt = {.device = device, .threads = 0, .seed = 7, .poison = 0};
    TrnSession *s = trn_create(&trn_model_mlp, &opt, err, sizeof err);
    if (!s) {
        fprintf(stderr, "embed: %s\n", err);
        return 1;
    }
    fprintf(stderr, "embed: training on %s (device %s)\n", trn_device(s), device);
    Data d = {12345};
    double first = 0, last = 0;
    for (int k = 1; k <= 300; k++) {
        if (trn_step(s, feed, &d, -1) != 0) {
            fprintf(stderr, "embed: %s\n", trn_error(s));
            trn_destroy(s);
            return 1;
        }
        if (k == 1) first = trn_loss(s);
        last = trn_loss(s);
        if (k == 1 || k % 50 == 0) printf("step %3lld  loss %.9g\n", (long long)trn_step_count(s), last);
    }
    /* accuracy on fresh data: forward only, the arg-max of the logits */
    int correct = 0, total = 0;
    for (int r = 0; r < 10; r++) {
        float x[B * F], logits[B * 4];
        int32_t labels[B];
        batch(&d, x, labels);
        if (trn_set(s, "x", x, sizeof x) || trn_predict(s, logits, sizeof logits)) {
            fprintf(stderr, "embed: %s\n", trn_error(s));
            return 1;
        }
        for (int i = 0; i < B; i++) {
            int best = 0;
            for (int c = 1; c < 4; c++)
                if (logits[i * 4 + c] > logits[i * 4 + best]) best = c;
            correct += best == labels[i];
            total++;
        }
    }
    if (trn_save(s, ckpt, 1) != 0) {
        fprintf(stderr, "embed: %s\n", trn_error(s));
        trn_destroy(s);
        return 1;
    }
    /* a second session picks the checkpoint up */
    TrnSession *s2 = trn_create(&trn_model_mlp, &opt, err, sizeof err);
    if (!s2 || trn_load(s2, ckpt, 0) != 0) {
        fprintf(stderr, "embed: reload: %s\n", s2 ? trn_error(s2) : err);
        return 1;
    }
    float w1[64 * 16], w2[64 * 16];
    int same = trn_get(s, "fc1.weight", w1, sizeof w1) == 0 && trn_get(s2, "fc1.weight", w2, sizeof w2) == 0 &&
               memcmp(w1, w2, sizeof w1) == 0;
    printf("loss %.4f -> %.4f; accuracy on fresh data %d/%d; checkpoint %s reloads %s\n", first, last, correct, total, ckpt,
           same ? "identically" : "DIFFERENTLY");
    trn_destroy(s2);
    trn_destroy(s);
    return last < 0.5 * first && correct > 0.9 * total && same ? 0 : 1;
}
