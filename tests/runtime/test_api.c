/* tests/runtime/test_api.c — the embedding API against a caller's
 * mistakes, on the hand-written models of bigram.c: NULL pointers, index
 * inputs out of range, a bad learning rate or schedule, a missing feed.
 * Each is an error (-1 and a message), never a crash, and leaves the
 * session as it was: the next step's loss is the one an untouched session
 * takes.  Prints "passed" or "FAILED" last. */
#include "bigram.h"
#include "check.h"

#include <math.h>
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
    CHECK(trn_predict(s, NULL, 4) == -1, "trn_predict NULL");
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
    CHECK(trn_lr_at(s, 5) == at5, "the schedule changed: %g, was %g", trn_lr_at(s, 5), at5);
    CHECK(trn_step(s, feed, b, -1) == 0 && trn_step_count(s) == 1, "the schedule's lr: %s", trn_error(s));
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

int main(void) {
    test_null();
    test_indices();
    test_lr();
    test_no_feed();
    printf("%s\n", failed ? "FAILED" : "passed");
    return failed;
}
