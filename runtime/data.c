/* runtime/data.c — micro-batches from llm.c token files, with a prefetch
 * thread (the runtime's only thread).
 *
 * Which tokens micro-batch k holds is a pure function (rt_data_batch, see
 * rt.h), so the loader's whole state is k.  The thread only computes ahead:
 * it keeps micro-batches k and k+1 ready in two slots while the step that
 * consumes k runs.
 *
 *   consumer (training loop)          producer (thread)
 *   rt_data_next: wait for slot       loop: pick a batch in {next, next+1}
 *     READY with k == next,             that no slot holds, and a free slot;
 *     copy it out, EMPTY, next++,       mark it FILLING, fill it unlocked,
 *     signal                            mark it READY, signal
 *   rt_data_seek: next = pos, signal  (slots holding batches outside the
 *                                      window count as free)
 *
 * Every shared field is read and written under `mu`, except a FILLING
 * slot's buffers, which only the producer touches until it marks them READY. */
#include "rt.h"

#include "philox.h"
#include "tokens.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { SLOT_EMPTY, SLOT_FILLING, SLOT_READY };

typedef struct Slot {
    int      state;
    int64_t  k;
    int32_t *tokens, *targets;      /* (B, T) each */
} Slot;

struct RtData {
    TokFile  tf;
    int64_t  B, T;
    int      random;
    uint64_t seed, stream;
    int      prefetch;
    /* shared with the thread, under mu */
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    pthread_t       thread;
    int             have_sync, started, stop;
    int64_t         next;           /* the batch rt_data_next hands out next */
    Slot            slot[2];
};

void rt_data_batch(const uint16_t *tok, int64_t n, int64_t B, int64_t T, int random, uint64_t seed, uint64_t stream, int64_t k,
                   int32_t *tokens, int32_t *targets) {
    int64_t nrows = (n - 1) / T;        /* >= B: rt_data_open checks n >= B*T + 1 */
    for (int64_t r = 0; r < B; r++) {
        uint64_t j = (uint64_t)k * (uint64_t)B + (uint64_t)r;
        int64_t start;
        if (random) {
            uint32_t w[4];
            rng_words(seed, stream, j, w);
            uint64_t u = (uint64_t)w[0] << 32 | w[1];
            start = (int64_t)(u % (uint64_t)(n - T));   /* start + T <= n - 1 */
        } else {
            start = (int64_t)(j % (uint64_t)nrows) * T;
        }
        for (int64_t t = 0; t < T; t++) {
            tokens[r * T + t] = tok[start + t];
            targets[r * T + t] = tok[start + t + 1];
        }
    }
}

static void fill(RtData *d, Slot *s) {
    rt_data_batch(d->tf.tokens, d->tf.n, d->B, d->T, d->random, d->seed, d->stream, s->k, s->tokens, s->targets);
}

static int in_window(const RtData *d, int64_t k) { return k == d->next || k == d->next + 1; }

static void *producer(void *arg) {
    RtData *d = arg;
    pthread_mutex_lock(&d->mu);
    while (!d->stop) {
        /* the first batch of the window that no slot holds or is filling */
        int64_t want = -1;
        for (int64_t k = d->next; k <= d->next + 1 && want < 0; k++) {
            int held = 0;
            for (int i = 0; i < 2; i++)
                if (d->slot[i].state != SLOT_EMPTY && d->slot[i].k == k) held = 1;
            if (!held) want = k;
        }
        Slot *free_slot = NULL;
        for (int i = 0; i < 2 && !free_slot; i++)
            if (d->slot[i].state == SLOT_EMPTY || (d->slot[i].state == SLOT_READY && !in_window(d, d->slot[i].k))) free_slot = &d->slot[i];
        if (want < 0 || !free_slot) {
            pthread_cond_wait(&d->cv, &d->mu);
            continue;
        }
        free_slot->state = SLOT_FILLING;
        free_slot->k = want;
        pthread_mutex_unlock(&d->mu);
        fill(d, free_slot);
        pthread_mutex_lock(&d->mu);
        free_slot->state = SLOT_READY;
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

RtData *rt_data_open(const RtDataSpec *spec, char *err, size_t errn) {
    if (spec->B <= 0 || spec->T <= 0 || spec->B > INT32_MAX / spec->T) {
        rt_fail(err, errn, "%s: bad micro-batch shape B=%lld T=%lld", spec->path, (long long)spec->B, (long long)spec->T);
        return NULL;
    }
    RtData *d = rt_calloc(1, sizeof *d, err, errn);
    if (!d) return NULL;
    if (tok_read(spec->path, &d->tf, err, errn) != 0) {
        free(d);
        return NULL;
    }
    d->B = spec->B;
    d->T = spec->T;
    d->random = spec->random;
    d->seed = spec->seed;
    d->stream = rng_name_stream(spec->stream ? spec->stream : "data");
    if (d->tf.n < spec->B * spec->T + 1) {
        rt_fail(err, errn, "%s holds %lld tokens; a micro-batch of B=%lld rows of T=%lld tokens needs at least B*T+1 = %lld", spec->path,
                (long long)d->tf.n, (long long)spec->B, (long long)spec->T, (long long)(spec->B * spec->T + 1));
        tok_free(&d->tf);
        free(d);
        return NULL;
    }
    if (spec->vocab > 0) {
        for (int64_t i = 0; i < d->tf.n; i++)
            if (d->tf.tokens[i] >= spec->vocab) {
                rt_fail(err, errn, "%s: token %lld is %u, outside the model's vocabulary of %lld", spec->path, (long long)i,
                        (unsigned)d->tf.tokens[i], (long long)spec->vocab);
                tok_free(&d->tf);
                free(d);
                return NULL;
            }
    }
    size_t bt = (size_t)(spec->B * spec->T);
    for (int i = 0; i < 2; i++) {
        d->slot[i].tokens = rt_malloc(bt * sizeof(int32_t), err, errn);
        d->slot[i].targets = d->slot[i].tokens ? rt_malloc(bt * sizeof(int32_t), err, errn) : NULL;
        if (!d->slot[i].targets) {
            rt_data_close(d);
            return NULL;
        }
    }
    int rc = pthread_mutex_init(&d->mu, NULL);
    if (rc != 0) {
        rt_fail(err, errn, "pthread_mutex_init failed at %s:%d: %s", rt_srcname(__FILE__), __LINE__, strerror(rc));
        rt_data_close(d);
        return NULL;
    }
    if ((rc = pthread_cond_init(&d->cv, NULL)) != 0) {
        rt_fail(err, errn, "pthread_cond_init failed at %s:%d: %s", rt_srcname(__FILE__), __LINE__, strerror(rc));
        pthread_mutex_destroy(&d->mu);
        rt_data_close(d);
        return NULL;
    }
    d->have_sync = 1;
    d->prefetch = spec->prefetch;
    if (d->prefetch) {
        if ((rc = pthread_create(&d->thread, NULL, producer, d)) != 0) {
            rt_fail(err, errn, "pthread_create for the prefetch thread failed at %s:%d: %s", rt_srcname(__FILE__), __LINE__, strerror(rc));
            d->prefetch = 0;
            rt_data_close(d);
            return NULL;
        }
        d->started = 1;
    }
    return d;
}

void rt_data_close(RtData *d) {
    if (!d) return;
    if (d->started) {
        pthread_mutex_lock(&d->mu);
        d->stop = 1;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->thread, NULL);
    }
    if (d->have_sync) {
        pthread_cond_destroy(&d->cv);
        pthread_mutex_destroy(&d->mu);
    }
    for (int i = 0; i < 2; i++) {
        free(d->slot[i].tokens);
        free(d->slot[i].targets);
    }
    tok_free(&d->tf);
    free(d);
}

int rt_data_next(RtData *d, int32_t *tokens, int32_t *targets, char *err, size_t errn) {
    (void)err;
    (void)errn;
    size_t bytes = (size_t)(d->B * d->T) * sizeof(int32_t);
    if (!d->prefetch) {
        rt_data_batch(d->tf.tokens, d->tf.n, d->B, d->T, d->random, d->seed, d->stream, d->next, tokens, targets);
        d->next++;
        return 0;
    }
    pthread_mutex_lock(&d->mu);
    Slot *s = NULL;
    for (;;) {
        for (int i = 0; i < 2 && !s; i++)
            if (d->slot[i].state == SLOT_READY && d->slot[i].k == d->next) s = &d->slot[i];
        if (s) break;
        pthread_cond_wait(&d->cv, &d->mu);
    }
    memcpy(tokens, s->tokens, bytes);
    memcpy(targets, s->targets, bytes);
    s->state = SLOT_EMPTY;
    d->next++;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    return 0;
}

void rt_data_seek(RtData *d, int64_t pos) {
    if (!d->prefetch) {
        d->next = pos;
        return;
    }
    pthread_mutex_lock(&d->mu);
    d->next = pos;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

int64_t rt_data_pos(RtData *d) {
    if (!d->prefetch) return d->next;
    pthread_mutex_lock(&d->mu);
    int64_t k = d->next;
    pthread_mutex_unlock(&d->mu);
    return k;
}

int64_t rt_data_ntokens(const RtData *d) { return d->tf.n; }
const uint16_t *rt_data_tokens(const RtData *d) { return d->tf.tokens; }
