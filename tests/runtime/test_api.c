/* tests/runtime/test_api.c — the embedding API against a caller's
 * mistakes, on the hand-written models of bigram.c: NULL pointers, index
 * inputs out of range, a bad learning rate or schedule, a missing feed.
 * Each is an error (-1 and a message), never a crash, and leaves the
 * session as it was: the next step's loss is the one an untouched session
 * takes.  Prints "passed" or "FAILED" last. */
#include "bigram.h"
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static TrnSession *session(const TrnModel *m) {
    char err[512];
    TrnOptions o = {"cpu", 1, -1, 0};
    TrnSession *s = trn_create(m, &o, err, sizeof err);
    if (!s) fprintf(stderr, "  trn_create: %s\n", err);
    return s;
}

/* tokens[r] = r % 251, targets[r] = (r + 1) % 251: one micro-batch of bigram_adam (4 x 16) */
static void batch(int32_t *tok, int32_t *tgt) {
    for (int r = 0; r < 64; r++) tok[r] = r % 251, tgt[r] = (r + 1) % 251;
}

static int feed(void *ctx, TrnSession *s, int micro) {
    (void)micro;
    int32_t *b = ctx;
    if (trn_set(s, "tokens", b, 64 * sizeof *b) != 0) return -1;
    return trn_set(s, "targets", b + 64, 64 * sizeof *b);
}

static int has(const TrnSession *s, const char *text) {
    const char *e = trn_error(s);
    if (strstr(e, text)) return 1;
    fprintf(stderr, "  the message '%s' does not say '%s'\n", e, text);
    return 0;
}

static void test_null(void) {
    puts("null pointers");
    TrnSession *s = session(&bigram_adam);
    if (!s) return (void)(failed = 1);
    int32_t b[128];
    batch(b, b + 64);
    double loss;
    CHECK(trn_find(s, NULL) == -1, "trn_find NULL");
    CHECK(trn_set(s, NULL, b, sizeof b / 2) == -1 && has(s, "tensor name is NULL"), "trn_set NULL name");
    CHECK(trn_set(s, "tokens", NULL, sizeof b / 2) == -1 && has(s, "data is NULL"), "trn_set NULL data");
    CHECK(trn_get(s, "tokens", NULL, sizeof b / 2) == -1 && has(s, "data is NULL"), "trn_get NULL data");
    CHECK(trn_eval(s, NULL) == -1 && has(s, "NULL"), "trn_eval NULL");
    CHECK(trn_predict(s, NULL, 4) == -1 && has(s, "trn_predict 'logits': the data is NULL"), "trn_predict NULL");
    static float lg[4 * 16 * 264]; /* bigram_adam's logits: [4, 16, 264] */
    CHECK(trn_predict(s, lg, sizeof lg - 4) == -1 && has(s, "trn_predict 'logits': 67580 bytes given, the tensor (f32, 16896 elements) has 67584"),
          "trn_predict's size");
    CHECK(trn_predict_at(s, (int64_t[4]){0, 1, 2, 3}, lg, sizeof lg) == -1 && has(s, "trn_predict_at: model 'bigram' computes the logits of every position"),
          "trn_predict_at where the logits are every position's");
    CHECK(trn_save(s, NULL, 1) == -1 && has(s, "NULL"), "trn_save NULL");
    CHECK(trn_load(s, NULL, 1) == -1 && has(s, "NULL"), "trn_load NULL");
    CHECK(trn_save(s, "", 1) == -1 && has(s, "empty"), "trn_save of an empty path");
    CHECK(trn_model(NULL) == NULL, "trn_model NULL");
    CHECK(trn_device(NULL) == NULL, "trn_device NULL");
    CHECK(strcmp(trn_device(s), "cpu") == 0, "trn_device: %s", trn_device(s));
    /* a call that works clears the last message */
    CHECK(trn_set(s, "tokens", b, sizeof b / 2) == 0 && trn_error(s)[0] == 0, "the message stays: '%s'", trn_error(s));
    CHECK(trn_eval(s, &loss) == 0 && isfinite(loss), "trn_eval after the errors: %s", trn_error(s));
    trn_destroy(s);
}

static void test_options(void) {
    puts("options");
    char err[512];
    TrnOptions o = {"cpu", 1, -5, 0};
    CHECK(trn_create(&bigram_adam, &o, err, sizeof err) == NULL && strstr(err, "TrnOptions.seed is -5"), "seed -5: %s", err);
    o.seed = -1, o.threads = -3;
    CHECK(trn_create(&bigram_adam, &o, err, sizeof err) == NULL && strstr(err, "TrnOptions.threads is -3"), "threads -3: %s", err);
}

static void test_indices(void) {
    puts("index inputs");
    TrnSession *s = session(&bigram_adam), *ref = session(&bigram_adam);
    if (!s || !ref) return (void)(failed = 1);
    int32_t b[128];
    batch(b, b + 64);
    CHECK(trn_step(ref, feed, b, 0.01) == 0, "%s", trn_error(ref));
    int32_t bad[64];
    memcpy(bad, b, sizeof bad);
    bad[37] = 256;
    CHECK(trn_set(s, "tokens", bad, sizeof bad) == -1 && has(s, "element 37 is 256, outside 0 .. 255"), "a token of 256");
    bad[37] = -1;
    CHECK(trn_set(s, "targets", bad, sizeof bad) == -1 && has(s, "element 37 is -1"), "a target of -1");
    bad[37] = 255;
    CHECK(trn_set(s, "tokens", bad, sizeof bad) == 0, "a token of 255: %s", trn_error(s));
    /* a feed that fails fails the step; the step after it is untouched */
    int32_t worse[128];
    memcpy(worse, b, sizeof worse);
    worse[64] = 1000;
    CHECK(trn_step(s, feed, worse, 0.01) == -1 && has(s, "element 0 is 1000") && trn_step_count(s) == 0, "a feed with a target of 1000");
    CHECK(trn_step(s, feed, b, 0.01) == 0 && trn_loss(s) == trn_loss(ref), "after the refused feed: %.9g, untouched %.9g", trn_loss(s), trn_loss(ref));
    trn_destroy(s);
    trn_destroy(ref);
}

static void test_lr(void) {
    puts("learning rates and schedules");
    TrnSession *s = session(&bigram_adam);
    if (!s) return (void)(failed = 1);
    int32_t b[128];
    batch(b, b + 64);
    double at5 = trn_lr_at(s, 5);
    CHECK(trn_step(s, feed, b, INFINITY) == -1 && has(s, "learning rate"), "lr inf");
    CHECK(trn_step(s, feed, b, NAN) == -1 && has(s, "learning rate"), "lr NaN");
    CHECK(trn_step_count(s) == 0, "a refused step counts: %lld", (long long)trn_step_count(s));
    /* a refused schedule changes nothing, its kind included */
    CHECK(trn_set_schedule(s, "constant", -1, 0, 0, 10) == -1, "a negative lr");
    CHECK(trn_set_schedule(s, "constant", INFINITY, 0, 0, 10) == -1, "an infinite lr");
    CHECK(trn_set_schedule(s, "nope", 0.1, 0, 0, 10) == -1 && has(s, "unknown learning-rate schedule"), "an unknown schedule");
    /* a checkpoint's lr.steps is at most 2^53, so the schedule's is too */
    CHECK(trn_set_schedule(s, "constant", 0.1, 0, 0, ((int64_t)1 << 53) + 1) == -1 && has(s, "past 2^53"), "steps past 2^53");
    CHECK(trn_set_schedule(s, "constant", 0.1, 0, 0, INT64_MAX) == -1 && has(s, "past 2^53"), "steps INT64_MAX");
    CHECK(trn_lr_at(s, 5) == at5, "the schedule changed: %g, was %g", trn_lr_at(s, 5), at5);
    CHECK(trn_step(s, feed, b, -1) == 0 && trn_step_count(s) == 1, "the schedule's lr: %s", trn_error(s));
    /* -0.0 is 0: a checkpoint records it unsigned, and resumes */
    char path[] = "test_api_negzero.st";
    CHECK(trn_set_schedule(s, "constant", -0.0, -0.0, 0, 10) == 0, "lr -0.0: %s", trn_error(s));
    CHECK(!signbit(trn_lr_at(s, 5)), "lr -0.0 kept its sign");
    CHECK(trn_save(s, path, 1) == 0, "save: %s", trn_error(s));
    TrnSession *r = session(&bigram_adam);
    CHECK(r && trn_load(r, path, 0) == 0, "resume after lr -0.0: %s", r ? trn_error(r) : "");
    remove(path);
    trn_destroy(r);
    trn_destroy(s);
}

static void test_no_feed(void) {
    puts("a step without a feed");
    TrnSession *s = session(&bigram_accum);
    if (!s) return (void)(failed = 1);
    CHECK(trn_step(s, NULL, NULL, 0.01) == -1 && has(s, "2 micro-batches"), "grad_accum 2, no feed");
    CHECK(trn_step_count(s) == 0, "a refused step counts");
    trn_destroy(s);
}

/* bigram_accum's feed (micro-batch 1 the shifted text), failing at
 * micro-batch 1 when ctx says so */
static int feed_accum(void *ctx, TrnSession *s, int micro) {
    int32_t b[128];
    batch(b, b + 64);
    for (int r = 0; micro == 1 && r < 128; r++) b[r] = (b[r] + 3) % 251;
    if (ctx && micro == 1) return -1;
    return feed(b, s, micro);
}

static void test_failed_accum(void) {
    puts("a step that fails after a micro-batch ran");
    TrnSession *s = session(&bigram_accum), *ref = session(&bigram_accum);
    if (!s || !ref) return (void)(failed = 1);
    int bad = 1;
    /* micro-batch 0 ran and added its gradient into grad_acc.*: the failed
     * step zeroes them, so the next step is the first step of an untouched
     * session, not that step plus half of another */
    CHECK(trn_step(s, feed_accum, &bad, 0.5) == -1 && has(s, "feeding micro-batch 1 failed") && trn_step_count(s) == 0, "micro-batch 1 failed");
    for (int k = 0; k < 2; k++) {
        CHECK(trn_step(s, feed_accum, NULL, 0.5) == 0 && trn_step(ref, feed_accum, NULL, 0.5) == 0, "%s %s", trn_error(s), trn_error(ref));
        CHECK(trn_loss(s) == trn_loss(ref), "step %d after the failed one: loss %.9g, untouched %.9g", k + 1, trn_loss(s), trn_loss(ref));
    }
    static float w[256 * 256], wr[256 * 256];
    CHECK(trn_get(s, "w", w, sizeof w) == 0 && trn_get(ref, "w", wr, sizeof wr) == 0 && memcmp(w, wr, sizeof w) == 0, "w differs");
    trn_destroy(s);
    trn_destroy(ref);
}

int main(void) {
    test_null();
    test_options();
    test_indices();
    test_lr();
    test_no_feed();
    test_failed_accum();
    printf("%s\n", failed ? "FAILED" : "passed");
    return failed;
}
