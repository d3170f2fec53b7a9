/* tests/runtime/bigram.c — the hand-written test models (bigram.h).
 *
 * Each model is what the code generator would emit for a bigram language
 * model: a tensor table with arena offsets, and CPU schedules that read and
 * write the arena at those offsets.
 *
 *   forward:  logits[r, :V] = w[tokens[r], :V] + b          (B*T, VP)
 *             loss = mean_r logsumexp(logits[r, :V]) - logits[r, targets[r]]
 *   backward: dlogits[r, v] = (softmax(logits[r])_v - [v == targets[r]]) / (B*T)
 *             times the dropout mask keep(rng.seed, stream 77, r) / (1 - p)
 *             dw[tokens[r], v] += dlogits[r, v];  db[v] += dlogits[r, v]
 */
#include "bigram.h"

#include "philox.h"
#include "tokens.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define AL(x) ((((int64_t)(x)) + 63) / 64 * 64)

/* One arena layout: every buffer at a 64-byte-aligned offset. */
#define LAYOUT(P, B, T, V, VP)                                                                                                              \
    enum {                                                                                                                                  \
        P##_B = B, P##_T = T, P##_V = V, P##_VP = VP,                                                                                       \
        P##_w = 0,                                    /* (V, VP) f32 */                                                                     \
        P##_b = P##_w + AL((V) * (VP) * 4),           /* (V) */                                                                             \
        P##_mw = P##_b + AL((V) * 4),                 /* (V, VP) adam.m.w */                                                                \
        P##_vw = P##_mw + AL((V) * (VP) * 4),         /* (V, VP) adam.v.w */                                                                \
        P##_mb = P##_vw + AL((V) * (VP) * 4),         /* (V) adam.m.b */                                                                    \
        P##_vb = P##_mb + AL((V) * 4),                /* (V) adam.v.b */                                                                    \
        P##_tok = P##_vb + AL((V) * 4),               /* (B, T) i32 */                                                                      \
        P##_tgt = P##_tok + AL((B) * (T) * 4),        /* (B, T) i32 */                                                                      \
        P##_lr = P##_tgt + AL((B) * (T) * 4),         /* () f32 */                                                                          \
        P##_step = P##_lr + 64,                       /* () i32 */                                                                          \
        P##_seed = P##_step + 64,                     /* () i32 */                                                                          \
        P##_loss = P##_seed + 64,                     /* () f32 */                                                                          \
        P##_gn = P##_loss + 64,                       /* () f32 */                                                                          \
        P##_ev = P##_gn + 64,                         /* () f32 */                                                                          \
        P##_logits = P##_ev + 64,                     /* (B, T, VP) f32 */                                                                  \
        P##_gw = P##_logits + AL((B) * (T) * (VP) * 4), /* (V, VP) gradient / accumulator */                                                \
        P##_gb = P##_gw + AL((V) * (VP) * 4),         /* (V) */                                                                             \
        P##_end = P##_gb + AL((V) * 4)                                                                                                      \
    };

LAYOUT(LA, 4, 16, 256, 264)
LAYOUT(LB, 4, 16, 256, 256)
LAYOUT(LC, 2, 4, 8, 8)

typedef struct Lay {
    int     B, T, V, VP;
    int64_t w, b, mw, vw, mb, vb, tok, tgt, lr, step, seed, loss, gn, ev, logits, gw, gb;
} Lay;

#define LAY(P)                                                                                                                              \
    {P##_B, P##_T, P##_V, P##_VP, P##_w, P##_b, P##_mw, P##_vw, P##_mb, P##_vb, P##_tok, P##_tgt, P##_lr, P##_step, P##_seed, P##_loss,   \
     P##_gn, P##_ev, P##_logits, P##_gw, P##_gb}

static const Lay lay_a = LAY(LA), lay_b = LAY(LB), lay_c = LAY(LC);

#define P_DROP 0.1f

static float *F(unsigned char *a, int64_t off) { return (float *)(void *)(a + off); }
static int32_t *I(unsigned char *a, int64_t off) { return (int32_t *)(void *)(a + off); }

/* logits and the mean loss of the current tokens / targets */
static float forward(const Lay *L, unsigned char *a) {
    const float *w = F(a, L->w), *b = F(a, L->b);
    float *lg = F(a, L->logits);
    const int32_t *tok = I(a, L->tok), *tgt = I(a, L->tgt);
    double loss = 0;
    for (int r = 0; r < L->B * L->T; r++) {
        float *row = lg + (int64_t)r * L->VP;
        const float *wr = w + (int64_t)tok[r] * L->VP;
        float mx = -INFINITY;
        for (int v = 0; v < L->V; v++) {
            row[v] = wr[v] + b[v];
            if (row[v] > mx) mx = row[v];
        }
        for (int v = L->V; v < L->VP; v++) row[v] = 0;   /* padded logits: masked */
        double z = 0;
        for (int v = 0; v < L->V; v++) z += exp((double)(row[v] - mx));
        loss += (double)mx + log(z) - (double)row[tgt[r]];
    }
    return (float)(loss / (L->B * L->T));
}

/* adds the gradient of the loss (from the logits forward() left) to gw, gb */
static void backward(const Lay *L, unsigned char *a) {
    const float *lg = F(a, L->logits);
    float *gw = F(a, L->gw), *gb = F(a, L->gb);
    const int32_t *tok = I(a, L->tok), *tgt = I(a, L->tgt);
    uint64_t seed = (uint32_t)*I(a, L->seed);
    float inv = 1.0f / (float)(L->B * L->T);
    for (int r = 0; r < L->B * L->T; r++) {
        const float *row = lg + (int64_t)r * L->VP;
        float scale = rng_keep(seed, 77, (uint64_t)r, P_DROP) ? inv / (1.0f - P_DROP) : 0.0f;
        if (scale == 0) continue;
        float mx = -INFINITY;
        for (int v = 0; v < L->V; v++)
            if (row[v] > mx) mx = row[v];
        double z = 0;
        for (int v = 0; v < L->V; v++) z += exp((double)(row[v] - mx));
        float *gwr = gw + (int64_t)tok[r] * L->VP;
        for (int v = 0; v < L->V; v++) {
            float p = (float)(exp((double)(row[v] - mx)) / z);
            float g = (p - (v == tgt[r] ? 1.0f : 0.0f)) * scale;
            gwr[v] += g;
            gb[v] += g;
        }
    }
}

static float norm2(const Lay *L, unsigned char *a, float div) {
    const float *gw = F(a, L->gw), *gb = F(a, L->gb);
    double s = 0;
    for (int64_t i = 0; i < (int64_t)L->V * L->VP; i++) s += (double)(gw[i] / div) * (gw[i] / div);
    for (int v = 0; v < L->V; v++) s += (double)(gb[v] / div) * (gb[v] / div);
    return (float)sqrt(s);
}

static void adam(float *p, float *m, float *v, const float *g, int64_t n, float lr, int t) {
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    float c1 = 1.0f - powf(b1, (float)t), c2 = 1.0f - powf(b2, (float)t);
    for (int64_t i = 0; i < n; i++) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        p[i] -= lr * (m[i] / c1) / (sqrtf(v[i] / c2) + eps);
    }
}

/* grad_accum 1: forward, backward and the AdamW update in one schedule */
static void micro_adam(const Lay *L, unsigned char *a) {
    memset(F(a, L->gw), 0, (size_t)L->V * (size_t)L->VP * 4);
    memset(F(a, L->gb), 0, (size_t)L->V * 4);
    *F(a, L->loss) = forward(L, a);
    backward(L, a);
    *F(a, L->gn) = norm2(L, a, 1);
    float lr = *F(a, L->lr);
    int t = *I(a, L->step);
    /* only the V real columns of w: the padding stays zero */
    for (int r = 0; r < L->V; r++) {
        int64_t o = (int64_t)r * L->VP;
        adam(F(a, L->w) + o, F(a, L->mw) + o, F(a, L->vw) + o, F(a, L->gw) + o, L->V, lr, t);
    }
    adam(F(a, L->b), F(a, L->mb), F(a, L->vb), F(a, L->gb), L->V, lr, t);
}

static void eval(const Lay *L, unsigned char *a) { *F(a, L->ev) = forward(L, a); }
static void sample(const Lay *L, unsigned char *a) { (void)forward(L, a); }

static void a_micro(unsigned char *a, int flags) { (void)flags; micro_adam(&lay_a, a); }
static void a_eval(unsigned char *a, int flags) { (void)flags; eval(&lay_a, a); }
static void a_sample(unsigned char *a, int flags) { (void)flags; sample(&lay_a, a); }
static void c_micro(unsigned char *a, int flags) { (void)flags; micro_adam(&lay_c, a); }
static void c_eval(unsigned char *a, int flags) { (void)flags; eval(&lay_c, a); }
static void c_sample(unsigned char *a, int flags) { (void)flags; sample(&lay_c, a); }

/* grad_accum 2: the micro-batch accumulates into the grad_acc.* states ... */
static void b_micro(unsigned char *a, int flags) {
    (void)flags;
    *F(a, lay_b.loss) = forward(&lay_b, a);
    backward(&lay_b, a);
}
/* ... and the update applies their mean and clears them */
static void b_update(unsigned char *a, int flags) {
    (void)flags;
    const Lay *L = &lay_b;
    float lr = *F(a, L->lr);
    float *w = F(a, L->w), *b = F(a, L->b), *gw = F(a, L->gw), *gb = F(a, L->gb);
    *F(a, L->gn) = norm2(L, a, 2);
    for (int64_t i = 0; i < (int64_t)L->V * L->VP; i++) w[i] -= lr * gw[i] / 2, gw[i] = 0;
    for (int v = 0; v < L->V; v++) b[v] -= lr * gb[v] / 2, gb[v] = 0;
}
static void b_eval(unsigned char *a, int flags) { (void)flags; eval(&lay_b, a); }
static void b_sample(unsigned char *a, int flags) { (void)flags; sample(&lay_b, a); }

#define TEN(nm, k, dt, r, sh, n, off, ini, ia, ib, cs)                                                                                   \
    {.name = nm, .kind = k, .dtype = dt, .rank = r, .shape = sh, .numel = n, .offset = off, .init = ini, .init_a = ia, .init_b = ib,        \
     .trainable = 1, .ckpt_shape = cs}
#define SH(...) {__VA_ARGS__}
/* an index input: values below V (trn_set refuses others) */
#define TENI(nm, r, sh, n, off, V)                                                                                                          \
    {.name = nm, .kind = TRN_INPUT, .dtype = TRN_I32, .rank = r, .shape = sh, .numel = n, .offset = off, .ckpt_shape = sh, .index_end = V}

/* ---- bigram_adam ---- */
static const TrnTensor tens_a[] = {
    TEN("w", TRN_PARAM, TRN_F32, 2, SH(256, 264), 256 * 264, LA_w, "normal", 0.02, 0, SH(256, 256)),
    TEN("b", TRN_PARAM, TRN_F32, 1, SH(256), 256, LA_b, "uniform", -0.01, 0.01, SH(256)),
    TEN("adamw.m.w", TRN_STATE, TRN_F32, 2, SH(256, 264), 256 * 264, LA_mw, "zeros", 0, 0, SH(256, 256)),
    TEN("adamw.v.w", TRN_STATE, TRN_F32, 2, SH(256, 264), 256 * 264, LA_vw, "zeros", 0, 0, SH(256, 256)),
    TEN("adamw.m.b", TRN_STATE, TRN_F32, 1, SH(256), 256, LA_mb, "zeros", 0, 0, SH(256)),
    TEN("adamw.v.b", TRN_STATE, TRN_F32, 1, SH(256), 256, LA_vb, "zeros", 0, 0, SH(256)),
    TENI("tokens", 2, SH(4, 16), 64, LA_tok, 256),
    TENI("targets", 2, SH(4, 16), 64, LA_tgt, 256),
    TEN("opt.lr", TRN_INPUT, TRN_F32, 0, SH(0), 1, LA_lr, NULL, 0, 0, SH(0)),
    TEN("opt.step", TRN_INPUT, TRN_I32, 0, SH(0), 1, LA_step, NULL, 0, 0, SH(0)),
    TEN("rng.seed", TRN_INPUT, TRN_I32, 0, SH(0), 1, LA_seed, NULL, 0, 0, SH(0)),
    TEN("loss", TRN_OUTPUT, TRN_F32, 0, SH(0), 1, LA_loss, NULL, 0, 0, SH(0)),
    TEN("grad_norm", TRN_OUTPUT, TRN_F32, 0, SH(0), 1, LA_gn, NULL, 0, 0, SH(0)),
    TEN("eval.loss", TRN_OUTPUT, TRN_F32, 0, SH(0), 1, LA_ev, NULL, 0, 0, SH(0)),
    TEN("logits", TRN_OUTPUT, TRN_F32, 3, SH(4, 16, 264), 4 * 16 * 264, LA_logits, NULL, 0, 0, SH(4, 16, 256)),
};

static const TrnMemLine mem_a[] = {
    {"params", LA_mw - LA_w}, {"optimizer state", LA_tok - LA_mw}, {"inputs and outputs", LA_gw - LA_tok}, {"gradients", LA_end - LA_gw}};

const TrnModel bigram_adam = {
    .abi = TRN_ABI_VERSION,
    .name = "bigram",
    .source = "tests/runtime/bigram.c",
    .ntensors = (int)(sizeof tens_a / sizeof tens_a[0]),
    .tensors = tens_a,
    .t_tokens = 6, .t_targets = 7, .t_lr = 8, .t_step = 9, .t_seed = 10,
    .t_loss = 11, .t_grad_norm = 12, .t_eval_loss = 13, .t_logits = 14,
    .vocab = 256,
    .train = {.optimizer = "adamw", .schedule = "cosine", .lr = 0.05, .min_lr = 0.001, .grad_clip = 0, .loss_scale = 1, .warmup = 2,
              .steps = 30, .grad_accum = 1, .seed = 1337, .eval_every = 0, .eval_steps = 4, .save_every = 0, .loss_scale_window = 1000,
              .precision = "fp32"},
    .arena_bytes = LA_end,
    .nmem = 4,
    .mem = mem_a,
    .cpu_run = {a_micro, NULL, a_eval, a_sample},
    .cuda = NULL,
};

/* ---- bigram_accum ---- */
static const TrnTensor tens_b[] = {
    TEN("w", TRN_PARAM, TRN_F32, 2, SH(256, 256), 256 * 256, LB_w, "normal", 0.02, 0, SH(0)),
    TEN("b", TRN_PARAM, TRN_F32, 1, SH(256), 256, LB_b, "zeros", 0, 0, SH(0)),
    TEN("grad_acc.w", TRN_STATE, TRN_F32, 2, SH(256, 256), 256 * 256, LB_gw, "zeros", 0, 0, SH(0)),
    TEN("grad_acc.b", TRN_STATE, TRN_F32, 1, SH(256), 256, LB_gb, NULL, 0, 0, SH(0)),
    TEN("tokens", TRN_INPUT, TRN_I32, 2, SH(4, 16), 64, LB_tok, NULL, 0, 0, SH(0)),
    TEN("targets", TRN_INPUT, TRN_I32, 2, SH(4, 16), 64, LB_tgt, NULL, 0, 0, SH(0)),
    TEN("opt.lr", TRN_INPUT, TRN_F32, 0, SH(0), 1, LB_lr, NULL, 0, 0, SH(0)),
    TEN("rng.seed", TRN_INPUT, TRN_I32, 0, SH(0), 1, LB_seed, NULL, 0, 0, SH(0)),
    TEN("loss", TRN_OUTPUT, TRN_F32, 0, SH(0), 1, LB_loss, NULL, 0, 0, SH(0)),
    TEN("grad_norm", TRN_OUTPUT, TRN_F32, 0, SH(0), 1, LB_gn, NULL, 0, 0, SH(0)),
    TEN("eval.loss", TRN_OUTPUT, TRN_F32, 0, SH(0), 1, LB_ev, NULL, 0, 0, SH(0)),
    TEN("logits", TRN_OUTPUT, TRN_F32, 3, SH(4, 16, 256), 4 * 16 * 256, LB_logits, NULL, 0, 0, SH(0)),
};

const TrnModel bigram_accum = {
    .abi = TRN_ABI_VERSION,
    .name = "bigram_accum",
    .source = "tests/runtime/bigram.c",
    .ntensors = (int)(sizeof tens_b / sizeof tens_b[0]),
    .tensors = tens_b,
    .t_tokens = 4, .t_targets = 5, .t_lr = 6, .t_step = -1, .t_seed = 7,
    .t_loss = 8, .t_grad_norm = 9, .t_eval_loss = 10, .t_logits = 11,
    .vocab = 256,
    .train = {.optimizer = "sgd", .schedule = "constant", .lr = 1.0, .min_lr = 0, .warmup = 0, .steps = 20, .grad_accum = 2, .seed = 7,
              .eval_every = 5, .eval_steps = 2, .save_every = 0, .precision = "fp32"},
    .arena_bytes = LB_end,
    .nmem = 0,
    .mem = NULL,
    .cpu_run = {b_micro, b_update, b_eval, b_sample},
    .cuda = NULL,
};

/* ---- bigram_tiny ---- */
static const TrnTensor tens_c[] = {
    TEN("w", TRN_PARAM, TRN_F32, 2, SH(8, 8), 64, LC_w, "normal", 0.5, 0, SH(8, 8)),
    TEN("b", TRN_PARAM, TRN_F32, 1, SH(8), 8, LC_b, "zeros", 0, 0, SH(8)),
    TEN("adamw.m.w", TRN_STATE, TRN_F32, 2, SH(8, 8), 64, LC_mw, "zeros", 0, 0, SH(8, 8)),
    TEN("adamw.v.w", TRN_STATE, TRN_F32, 2, SH(8, 8), 64, LC_vw, "zeros", 0, 0, SH(8, 8)),
    TEN("adamw.m.b", TRN_STATE, TRN_F32, 1, SH(8), 8, LC_mb, "zeros", 0, 0, SH(8)),
    TEN("adamw.v.b", TRN_STATE, TRN_F32, 1, SH(8), 8, LC_vb, "zeros", 0, 0, SH(8)),
    TEN("tokens", TRN_INPUT, TRN_I32, 2, SH(2, 4), 8, LC_tok, NULL, 0, 0, SH(2, 4)),
    TEN("targets", TRN_INPUT, TRN_I32, 2, SH(2, 4), 8, LC_tgt, NULL, 0, 0, SH(2, 4)),
    TEN("opt.lr", TRN_INPUT, TRN_F32, 0, SH(0), 1, LC_lr, NULL, 0, 0, SH(0)),
    TEN("opt.step", TRN_INPUT, TRN_I32, 0, SH(0), 1, LC_step, NULL, 0, 0, SH(0)),
    TEN("rng.seed", TRN_INPUT, TRN_I32, 0, SH(0), 1, LC_seed, NULL, 0, 0, SH(0)),
    TEN("loss", TRN_OUTPUT, TRN_F32, 0, SH(0), 1, LC_loss, NULL, 0, 0, SH(0)),
    TEN("grad_norm", TRN_OUTPUT, TRN_F32, 0, SH(0), 1, LC_gn, NULL, 0, 0, SH(0)),
    TEN("eval.loss", TRN_OUTPUT, TRN_F32, 0, SH(0), 1, LC_ev, NULL, 0, 0, SH(0)),
    TEN("logits", TRN_OUTPUT, TRN_F32, 3, SH(2, 4, 8), 64, LC_logits, NULL, 0, 0, SH(2, 4, 8)),
};

const TrnModel bigram_tiny = {
    .abi = TRN_ABI_VERSION,
    .name = "tiny",
    .source = "tests/runtime/bigram.c",
    .ntensors = (int)(sizeof tens_c / sizeof tens_c[0]),
    .tensors = tens_c,
    .t_tokens = 6, .t_targets = 7, .t_lr = 8, .t_step = 9, .t_seed = 10,
    .t_loss = 11, .t_grad_norm = 12, .t_eval_loss = 13, .t_logits = 14,
    .vocab = 8,
    .train = {.optimizer = "adamw", .schedule = "constant", .lr = 0.05, .steps = 10, .grad_accum = 1, .seed = 1, .eval_steps = 1,
              .precision = "fp32"},
    .arena_bytes = LC_end,
    .cpu_run = {c_micro, NULL, c_eval, c_sample},
};

/* ---- test data ---- */

int bigram_write_text_tokens(const char *path, int64_t n, unsigned seed) {
    static const char *const words[] = {"the", "king", "and", "queen", "of", "a", "castle", "rode", "to", "war", "with",
                                        "his", "men", "love", "her", "is", "not", "what", "shall", "we", "do", "now", "my", "lord"};
    const int nw = (int)(sizeof words / sizeof words[0]);
    uint16_t *tok = malloc((size_t)(n > 0 ? n : 1) * sizeof *tok);
    if (!tok) return -1;
    uint32_t x = seed * 2654435761u + 12345u;
    int64_t i = 0;
    int cap = 1;
    while (i < n) {
        x = x * 1664525u + 1013904223u;
        const char *w = words[(x >> 8) % (uint32_t)nw];
        for (const char *p = w; *p && i < n; p++, cap = 0) tok[i++] = (uint16_t)(cap && p == w ? *p - 32 : *p);
        x = x * 1664525u + 1013904223u;
        if (i < n) {
            uint32_t k = (x >> 8) % 12;
            if (k == 0) tok[i++] = '.', cap = 1;
            else if (k == 1) tok[i++] = ',';
            if (k == 0 && i < n) tok[i++] = '\n';
            else if (i < n) tok[i++] = ' ';
        }
    }
    char err[512];
    int rc = tok_write(path, tok, n, err, sizeof err);
    free(tok);
    return rc;
}
