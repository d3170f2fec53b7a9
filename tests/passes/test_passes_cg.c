/* tests/passes/test_passes_cg.c — the compiled CPU code of what the passes
 * make, against the reference interpreter, step by step:
 *   primitive  the fused ops made from primitive spellings (rms_norm,
 *              add_rms_norm, rope_qk with tables, geglu, swiglu,
 *              linear_cross_entropy), fp32: losses within 1e-5; the eval
 *              loss too (linear_cross_entropy without its gradients); the
 *              memory plan checked by poisoning dead buffers; rope_qk in place
 *              in the forward, its backward stored [B,T,H,D], no copy
 *   bf16, fp16 tiny GPT-2 and Llama in mixed precision: the emulated half
 *              GEMM and templates against the interpreter's rounding
 *   padded     tiny GPT-2 with vocabulary 257 padded to 8, fused and not: compiled against
 *              the interpreter, and against the unpadded compiled code
 *   sample     the sampling graph's logits of one position per sequence
 *              against those of every position (sample_logits=all),
 *              interpreted and compiled, fp32, bf16 and padded
 *   refresh    the half-precision copies made by the compiled refresh
 *              schedule (after initialising and loading), by the update's
 *              casts, and by trn_set, bit for bit the params converted on
 *              the host (rt_elem_set), bf16 and fp16, padded
 *   fusion     the fused schedule (attention and rope_qk on views, norms
 *              reading and writing half values, generic fusion) against one
 *              kernel per op, bf16 GPT-2 and Llama: bit for bit
 *   checkpoint  checkpoint = blocks compiled: the same losses and params
 *              bit for bit as without, its dead buffers poisoned (a
 *              recomputation reading a freed buffer would read NaN); a
 *              smaller arena
 *   lora       LoRA compiled (bf16): a base model's checkpoint loads into the
 *              LoRA model (the adapters keep their start), whose first loss
 *              is then the base model's bit for bit; the adapters train and
 *              the base does not; a checkpoint missing a base param fails
 * Usage: test_passes_cg [primitive|bf16|fusion|fp16|padded|sample|refresh|checkpoint|lora ...] (default: all). */
#include "cg_harness.h"
#include "rt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const gpt2_defs[] = {"vocab=256", "layers=2", "heads=4", "dim=64", "seq=32", "batch=2", NULL};
static const char *const llama_defs[] = {"vocab=256", "layers=2", "heads=4", "kv_heads=2", "dim=64", "ffn=128", "seq=32", "batch=2", NULL};
static const char *const gpt2_257[] = {"vocab=257", "layers=2", "heads=4", "dim=64", "seq=32", "batch=2", NULL};

static Tokens tokens, tokens61;

/* steps of a session; losses into out; also the eval loss of batch 1000. */
static bool train(TrnSession *s, const Tokens *tk, int steps, double *out, double *eval) {
    HFeed f = {tk, 0};
    for (int i = 0; i < steps; i++) {
        if (trn_step(s, h_feed_next, &f, -1) != 0) {
            fprintf(stderr, "step: %s\n", trn_error(s));
            return false;
        }
        out[i] = trn_loss(s);
    }
    if (eval && (h_feed(s, tk, 1000) != 0 || trn_eval(s, eval) != 0)) {
        fprintf(stderr, "eval: %s\n", trn_error(s));
        return false;
    }
    return true;
}

static TrnSession *session(const TrnModel *m, TrnBackend *be, int poison) {
    char err[512];
    TrnOptions o = {"cpu", 0, 1234, poison};
    TrnSession *s = be ? trn_create_with_backend(m, *be, &o, err, sizeof err) : trn_create(m, &o, err, sizeof err);
    if (!s) fprintf(stderr, "trn_create: %s\n", err);
    return s;
}

/* Builds, trains compiled and interpreted `steps` steps; returns the worst
 * relative loss difference (INFINITY on failure); eval losses compared too,
 * and trn_predict's logits (ptol: relative to the largest logit).
 * keep: the harness is left built (caller frees). */
static double compare(const char *label, const char *model, const char *const *defs, const char *const *sets, int steps, const Tokens *tk,
                      Harness *keep, double *last, double ptol) {
    Harness h;
    if (h_build(&h, model, defs, sets, true, 0) != 0) {
        CHECK(0, "%s: build failed", label);
        h_free(&h);
        return INFINITY;
    }
    double *li = calloc((size_t)steps, sizeof(double)), *lc = calloc((size_t)steps, sizeof(double)), ei = NAN, ec = NAN;
    TrnBackend be = ib_backend(h.im);
    TrnSession *si = session(ib_model(h.im), &be, 0), *sc = session(h.compiled, NULL, 0);
    bool ok = si && sc && train(si, tk, steps, li, &ei) && train(sc, tk, steps, lc, &ec);
    double worst = ok ? 0 : INFINITY;
    for (int i = 0; ok && i < steps; i++) worst = h_max(worst, h_rel(li[i], lc[i], 1e-12));
    double ev = ok ? h_rel(ei, ec, 1e-12) : INFINITY;
    if (ok)
        printf("%-22s %2d steps: interp %.6f -> %.6f, compiled %.6f -> %.6f, worst loss difference %.2e; eval loss %.6f / %.6f (%.2e)\n", label,
               steps, li[0], li[steps - 1], lc[0], lc[steps - 1], worst, ei, ec, ev);
    CHECK(ok, "%s: a run failed", label);
    /* trn_predict on the eval batch: f32 logits in every precision, the
     * same from both; max |difference| / max |logit| within ptol */
    if (ok) {
        const TrnModel *mi = trn_model(si), *mc = trn_model(sc);
        const TrnTensor *ti = &mi->tensors[mi->t_logits], *tc = &mc->tensors[mc->t_logits];
        CHECK(ti->dtype == TRN_F32 && tc->dtype == TRN_F32 && ti->numel == tc->numel, "%s: logits are not f32 of one size", label);
        size_t nb = sizeof(float) * (size_t)tc->numel;
        float *pi = calloc((size_t)tc->numel, sizeof(float)), *pc = calloc((size_t)tc->numel, sizeof(float));
        bool pok = ti->numel == tc->numel && trn_predict(si, pi, nb) == 0 && trn_predict(sc, pc, nb) == 0;
        CHECK(pok, "%s: trn_predict: %s / %s", label, trn_error(si), trn_error(sc));
        double dmax = 0, lmax = 0;
        for (int64_t k = 0; pok && k < tc->numel; k++) {
            dmax = h_max(dmax, fabs((double)pi[k] - (double)pc[k]));
            lmax = fmax(lmax, fabs((double)pi[k]));
        }
        if (pok) printf("%-22s trn_predict: f32 [%lld logits], max |difference| / max |logit| %.2e\n", label, (long long)tc->numel, dmax / lmax);
        CHECK(pok && dmax <= ptol * lmax, "%s: predicted logits differ by %.3e of their scale (limit %g)", label, dmax / lmax, ptol);
        free(pi);
        free(pc);
    }
    if (last) *last = ok ? lc[steps - 1] : NAN;
    worst = h_max(worst, ev);
    if (si) trn_destroy(si);
    if (sc) trn_destroy(sc);
    free(li);
    free(lc);
    if (keep) *keep = h;
    else h_free(&h);
    return worst;
}

static const char *const adamw[] = {"optimizer=adamw", "lr=0.003", "warmup=0", "schedule=constant", "grad_clip=1.0", NULL};

/* ---- primitive spellings, fp32 ---- */

static Kernel *find_kernel(Program *p, TrnRun which, Op op) {
    Sched *s = &p->sched[which];
    for (int i = 0; i < s->nk; i++)
        for (int j = 0; j < s->k[i]->nnodes; j++)
            if (s->k[i]->nodes[j]->op == op) return s->k[i];
    return NULL;
}

static void test_primitive(void) {
    printf("== primitive.model (fp32): the fused ops made from primitive spellings\n");
    Harness h;
    double w = compare("primitive fp32", "tests/passes/primitive.model", NULL, adamw, 12, &tokens61, &h, NULL, 1e-5);
    CHECK(w < 1e-5, "primitive: compiled and interpreted differ by %.3e (limit 1e-5)", w);
    if (!h.prog) return;
    /* rope_qk rotates q and k in place in the forward, where their
     * projections left them ([B,T,H,D]: a view); the backward's inverse
     * stores dq, dk as [B,T,H,D] for the projections' gradients; nothing
     * is copied */
    Sched *ms = &h.prog->sched[TRN_RUN_MICRO];
    int nrope = 0, ncopy = 0;
    for (int i = 0; i < ms->nk; i++) {
        Kernel *k = ms->k[i];
        ncopy += k->kind == KK_COPY;
        if (k->kind != KK_TMPL || k->nodes[0]->op != OP_rope_qk) continue;
        Node *n = k->nodes[0];
        bool bwd = ir_int(n, "inverse", 0);
        int inplace = 0, btchd = 0;
        for (int j = 0; j < 2; j++) {
            const View *y = &ms->vi[n->out[j]->id].view;
            inplace += y->buf == ms->vi[n->in[j]->id].view.buf;
            btchd += y->stride[1] == y->shape[3] && y->stride[2] == y->shape[1] * y->shape[3]; /* [B,T,H,D] */
        }
        printf("%s (%s): %d of 2 results in place, %d of 2 stored [B,T,H,D]\n", k->name, bwd ? "backward" : "forward", inplace, btchd);
        CHECK(bwd ? inplace == 0 && btchd == 2 : inplace == 2 && btchd == 2, "%s: %d of 2 results in place, %d [B,T,H,D]", k->name, inplace,
              btchd);
        nrope++;
    }
    CHECK(nrope == 4, "%d rope_qk kernels (want 2 forward, 2 backward)", nrope);
    CHECK(ncopy == 0, "%d copy kernels in the micro-batch", ncopy);
    /* linear_cross_entropy: a scratch chunk in the plan; in eval no gradients */
    Kernel *lk = find_kernel(h.prog, TRN_RUN_MICRO, OP_linear_cross_entropy), *le = find_kernel(h.prog, TRN_RUN_EVAL, OP_linear_cross_entropy);
    CHECK(lk && lk->scratch && le, "no linear_cross_entropy kernels");
    if (le) {
        Sched *s = &h.prog->sched[TRN_RUN_EVAL];
        CHECK(s->vi[le->nodes[0]->out[1]->id].st == VS_NONE && s->vi[le->nodes[0]->out[2]->id].st == VS_NONE,
              "the eval linear_cross_entropy computes gradients");
    }
    /* poisoning every dead buffer changes nothing (in-place rope, scratch) */
    double a[12], b[12];
    TrnSession *s1 = session(h.compiled, NULL, 0), *s2 = session(h.compiled, NULL, 1);
    bool ok = s1 && s2 && train(s1, &tokens61, 12, a, NULL) && train(s2, &tokens61, 12, b, NULL);
    CHECK(ok && memcmp(a, b, sizeof a) == 0, "poisoned dead buffers change the losses");
    printf("poisoned dead buffers: losses %s\n", ok && memcmp(a, b, sizeof a) == 0 ? "identical" : "DIFFER");
    if (s1) trn_destroy(s1);
    if (s2) trn_destroy(s2);
    h_free(&h);
}

/* ---- mixed precision ---- */

static void test_half(const char *prec) {
    printf("== %s: emulated half precision, compiled against the interpreter\n", prec);
    char key[32];
    snprintf(key, sizeof key, "precision=%s", prec);
    const char *sets[] = {key, "optimizer=adamw", "lr=0.003", "warmup=0", "schedule=constant", "grad_clip=1.0", NULL};
    char label[64];
    snprintf(label, sizeof label, "gpt2 %s", prec);
    double w = compare(label, "examples/gpt2.model", gpt2_defs, sets, 10, &tokens, NULL, NULL, 2e-2);
    CHECK(w < 3e-4, "%s: gpt2 compiled and interpreted differ by %.3e (limit 3e-4)", prec, w);
    snprintf(label, sizeof label, "llama %s", prec);
    w = compare(label, "examples/llama.model", llama_defs, sets, 10, &tokens, NULL, NULL, 2e-2);
    CHECK(w < 3e-4, "%s: llama compiled and interpreted differ by %.3e (limit 3e-4)", prec, w);
}

/* ---- padding ---- */

/* fusion "fusion=0": cross_entropy and its gradient each mask the padding
 * ({classes}), compiled and interpreted */
static void test_padded(const char *fusion) {
    printf("== pad-tiles: vocabulary 257 padded to 8 (fp32, %s)\n", fusion);
    const char *sets[] = {"optimizer=adamw", "lr=0.003", "warmup=0", "schedule=constant", "grad_clip=1.0", "pad_multiple=8", fusion, NULL};
    const char *none[] = {"optimizer=adamw", "lr=0.003", "warmup=0", "schedule=constant", "grad_clip=1.0", "pad_multiple=1", fusion, NULL};
    double lp, lu;
    double w = compare("gpt2 vocab 257 padded", "examples/gpt2.model", gpt2_257, sets, 10, &tokens, NULL, &lp, 1e-5);
    CHECK(w < 1e-5, "padded: compiled and interpreted differ by %.3e (limit 1e-5)", w);
    w = compare("gpt2 vocab 257", "examples/gpt2.model", gpt2_257, none, 10, &tokens, NULL, &lu, 1e-5);
    CHECK(w < 1e-5, "unpadded: compiled and interpreted differ by %.3e (limit 1e-5)", w);
    double d = h_rel(lp, lu, 1e-12);
    printf("compiled, padded against unpadded: step 10 %.9f / %.9f (relative %.2e)\n", lp, lu, d);
    CHECK(d < 1e-6, "compiled padded and unpadded differ by %.3e (limit 1e-6)", d);
}

/* ---- the sampling graph: one position per sequence ---- */

/* logits[b, :] of the one-position model against full[b, pos[b], :] of the
 * every-position one: the worst |difference| / max |logit|. */
static double rows_vs_full(const float *at, const float *full, const int64_t *pos, int64_t B, int64_t T, int64_t V) {
    double dmax = 0, lmax = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t v = 0; v < V; v++) {
            double f = full[(b * T + (pos ? pos[b] : T - 1)) * V + v];
            dmax = h_max(dmax, fabs((double)at[b * V + v] - f));
            lmax = fmax(lmax, fabs(f));
        }
    return lmax > 0 ? dmax / lmax : INFINITY;
}

/* sample_logits=position against =all, interpreted (tol_i) and compiled
 * (tol_c), after a few steps so that the logits have some shape. */
static void sample_case(const char *label, const char *model, const char *const *defs, const char *prec, const char *pad, double tol_i,
                        double tol_c) {
    const char *sp[] = {prec, pad, "optimizer=adamw", "lr=0.003", NULL, NULL};
    const char *sa[] = {prec, pad, "optimizer=adamw", "lr=0.003", "sample_logits=all", NULL};
    Harness hp, ha;
    int bp = h_build(&hp, model, defs, sp, true, 0), ba = h_build(&ha, model, defs, sa, true, 0);
    CHECK(bp == 0 && ba == 0, "%s: build failed", label);
    if (bp == 0 && ba == 0) {
        TrnBackend be_p = ib_backend(hp.im), be_a = ib_backend(ha.im);
        TrnSession *s[4] = {session(ib_model(hp.im), &be_p, 0), session(ib_model(ha.im), &be_a, 0), session(hp.compiled, NULL, 0),
                            session(ha.compiled, NULL, 0)};
        bool ok = s[0] && s[1] && s[2] && s[3];
        double l[3];
        for (int i = 0; ok && i < 4; i++) ok = train(s[i], &tokens, 3, l, NULL) && h_feed(s[i], &tokens, 1000) == 0;
        CHECK(ok, "%s: sessions failed", label);
        const TrnModel *mp = ok ? trn_model(s[2]) : NULL, *ma = ok ? trn_model(s[3]) : NULL;
        int64_t B = ok ? mp->tensors[mp->t_tokens].shape[0] : 0, T = ok ? mp->tensors[mp->t_tokens].shape[1] : 0;
        int64_t V = ok ? mp->vocab : 0;
        /* the logits as users see them (unpadded): [B, V] and [B, T, V] */
        int np = ok ? trn_find(s[2], "logits") : -1, na = ok ? trn_find(s[3], "logits") : -1;
        const TrnTensor *tp = np >= 0 ? &mp->tensors[np] : NULL, *ta = na >= 0 ? &ma->tensors[na] : NULL;
        ok = ok && tp && ta && B <= 64 && trn_find(s[2], "sample.rows") >= 0 && trn_find(s[3], "sample.rows") < 0 && tp->numel >= B * V &&
             ta->numel >= B * T * V;
        CHECK(ok, "%s: the logits are not [B, V] (with sample.rows) and [B, T, V] (without)", label);
        if (ok) printf("%-22s logits [%lld, %lld] and [%lld, %lld, %lld]\n", label, (long long)B, (long long)V, (long long)B, (long long)T,
                       (long long)V);
        size_t bp_ = sizeof(float) * (size_t)B * (size_t)V, ba_ = sizeof(float) * (size_t)(B * T * V);
        float *at = malloc(bp_), *full = malloc(ba_);
        int64_t pos[64];
        for (int64_t b = 0; b < B && b < 64; b++) pos[b] = (b * 5 + 3) % T;
        for (int k = 0; ok && k < 2; k++) { /* 0: interpreted, 1: compiled */
            TrnSession *p = s[2 * k], *a = s[2 * k + 1];
            double tol = k ? tol_c : tol_i, e0 = INFINITY, e1 = INFINITY;
            bool r = trn_predict(a, full, ba_) == 0;
            if (r && trn_predict(p, at, bp_) == 0) e0 = rows_vs_full(at, full, NULL, B, T, V);
            if (r && trn_predict_at(p, pos, at, bp_) == 0) e1 = rows_vs_full(at, full, pos, B, T, V);
            printf("%-22s %s: last position %.2e, positions (b*5+3)%%T %.2e of the largest logit\n", label, k ? "compiled" : "interpreted", e0,
                   e1);
            CHECK(r && e0 <= tol && e1 <= tol, "%s (%s): one-position logits differ from every position's by %.3e / %.3e (limit %g): %s %s",
                  label, k ? "compiled" : "interpreted", e0, e1, tol, trn_error(p), trn_error(a));
            /* positions outside 0 .. T-1, and trn_predict_at without positions to choose */
            int64_t bad[64];
            memcpy(bad, pos, sizeof bad);
            bad[B - 1] = T;
            CHECK(trn_predict_at(p, bad, at, bp_) != 0 && strstr(trn_error(p), "outside"), "%s: position T accepted", label);
            CHECK(trn_predict_at(a, pos, full, ba_) != 0 && strstr(trn_error(a), "every position"), "%s: trn_predict_at on all logits: %s",
                  label, trn_error(a));
        }
        free(at);
        free(full);
        for (int i = 0; i < 4; i++)
            if (s[i]) trn_destroy(s[i]);
    }
    h_free(&hp);
    h_free(&ha);
}

static void test_sample(void) {
    printf("== the sampling graph: the logits of one position per sequence against every position's\n");
    sample_case("gpt2 fp32", "examples/gpt2.model", gpt2_defs, "precision=fp32", "pad_multiple=1", 1e-6, 1e-5);
    sample_case("llama bf16", "examples/llama.model", llama_defs, "precision=bf16", "pad_multiple=1", 1e-6, 1e-5);
    sample_case("gpt2 vocab 257 padded", "examples/gpt2.model", gpt2_257, "precision=fp32", "pad_multiple=8", 1e-6, 1e-5);
}

/* ---- the half-precision copies ---- */

/* Every copy amp.<dt>.P of session s against P converted on the host;
 * returns the copies compared, -1 when one differs (reported). */
static int copies_exact(TrnSession *s, const char *label, const char *when) {
    const TrnModel *m = trn_model(s);
    int n = 0, bad = 0;
    for (int i = 0; i < m->ntensors; i++) {
        const TrnTensor *t = &m->tensors[i];
        const char *of = rt_copy_of(t);
        int pi = of ? trn_find(s, of) : -1;
        if (pi < 0) continue;
        const TrnTensor *p = &m->tensors[pi];
        size_t cb = (size_t)rt_nbytes(t->dtype, t->numel), pb = (size_t)rt_nbytes(p->dtype, p->numel);
        unsigned char *c = calloc(1, cb), *w = calloc(1, cb), *x = calloc(1, pb);
        if (trn_get(s, t->name, c, cb) != 0 || trn_get(s, p->name, x, pb) != 0) {
            CHECK(0, "%s %s: reading %s: %s", label, when, t->name, trn_error(s));
            bad++;
        } else {
            for (int64_t k = 0; k < t->numel; k++) rt_elem_set(t->dtype, w, k, rt_elem_get(p->dtype, x, k));
            int64_t k = 0;
            while (k < t->numel && memcmp(c + k * 2, w + k * 2, 2) == 0) k++;
            if (k < t->numel) {
                CHECK(0, "%s %s: %s[%lld] is %g, its param converted %g", label, when, t->name, (long long)k, rt_elem_get(t->dtype, c, k),
                      rt_elem_get(t->dtype, w, k));
                bad++;
            }
        }
        free(c);
        free(w);
        free(x);
        n++;
    }
    return bad ? -1 : n;
}

/* The micro-batch's updates that write their param's half copy themselves
 * (lower.c absorbs the cast that refreshes it), and the casts left that
 * read a new weight; *merged: the updates that are parts of a multi-tensor
 * kernel (lower.c merge_updates). */
static void copy_writers(const Program *p, int *absorbed, int *casts, int *merged) {
    const Sched *s = &p->sched[TRN_RUN_MICRO];
    *absorbed = *casts = *merged = 0;
    for (int i = 0; i < s->nk; i++) {
        Kernel *const *ks = s->k[i]->nparts ? s->k[i]->parts : &s->k[i];
        int nk = s->k[i]->nparts ? s->k[i]->nparts : 1;
        if (s->k[i]->nparts) *merged += nk;
        for (int q = 0; q < nk; q++) {
            const Kernel *k = ks[q];
            Op op = k->nodes[0]->op;
            if ((op == OP_adamw || op == OP_sgd) && k->cast_out) ++*absorbed;
            for (int j = 0; j < k->nnodes; j++) {
                const Node *n = k->nodes[j];
                if (n->op == OP_cast && n != k->cast_out && (n->in[0]->def->op == OP_adamw || n->in[0]->def->op == OP_sgd)) ++*casts;
            }
        }
    }
}

static void refresh_case(const char *label, const char *prec, const char *const *defs, const char *pad, const char *opt) {
    char key[32];
    snprintf(key, sizeof key, "precision=%s", prec);
    const char *sets[] = {key, pad, opt, "lr=0.003", "warmup=0", "schedule=constant", "momentum=0.9", NULL};
    Harness h;
    if (h_build(&h, "examples/gpt2.model", defs, sets, true, 0) != 0) {
        CHECK(0, "%s: build failed", label);
        h_free(&h);
        return;
    }
    const TrnModel *m = h.compiled;
    CHECK(m->refresh == 1 && h.prog->sched[TRN_RUN_REFRESH].nk > 0, "%s: no refresh schedule", label);
    CHECK(h.prog->peak[TRN_RUN_REFRESH] == 0, "%s: the refresh schedule needs %lld bytes of temporaries", label,
          (long long)h.prog->peak[TRN_RUN_REFRESH]);
    TrnSession *s = session(m, NULL, 1), *t = session(m, NULL, 0);
    char ck[64];
    snprintf(ck, sizeof ck, "/tmp/trainc_refresh_%d.safetensors", (int)getpid());
    if (s && t) {
        int n0 = copies_exact(s, label, "initialised");
        CHECK(n0 > 0, "%s: no copies compared", label);
        int absorbed, casts, merged;
        copy_writers(h.prog, &absorbed, &casts, &merged);
        CHECK(absorbed == n0 && casts == 0, "%s: %d of %d copies written by their update, %d casts of a new weight left", label, absorbed, n0,
              casts);
        /* every param's update in one multi-tensor kernel (the 17 with a
         * copy, and the norms' and wpe's without) */
        int nupd = 0;
        for (int i = 0; i < h.prog->train->nnodes; i++) nupd += h.prog->train->nodes[i]->op == OP_adamw || h.prog->train->nodes[i]->op == OP_sgd;
        CHECK(nupd > n0 && merged == nupd, "%s: %d of %d updates in a multi-tensor kernel", label, merged, nupd);
        CHECK(s->refreshed_on_backend == 1, "%s: the copies were refreshed %d times on the backend", label, s->refreshed_on_backend);
        double l[3];
        bool ok = train(s, &tokens, 3, l, NULL);
        CHECK(ok && copies_exact(s, label, "after 3 steps") == n0, "%s: the update's copies", label);
        /* trn_set of one param: its copies, on the host */
        const char *name = "wte"; /* padded in the vocabulary 257 case */
        int pi = trn_find(s, name);
        CHECK(pi >= 0, "%s: no param wte", label);
        if (pi >= 0) {
            const TrnTensor *p = &m->tensors[pi];
            float *w = calloc((size_t)p->numel, sizeof(float));
            ok = trn_get(s, name, w, sizeof(float) * (size_t)p->numel) == 0;
            for (int64_t k = 0; k < p->numel; k++) w[k] = w[k] * 1.37f + 1e-3f * (float)(k % 7);
            ok = ok && trn_set(s, name, w, sizeof(float) * (size_t)p->numel) == 0;
            CHECK(ok && copies_exact(s, label, "after trn_set") == n0, "%s: trn_set: %s", label, trn_error(s));
            free(w);
        }
        /* a checkpoint loaded into another session: its refresh schedule */
        ok = trn_save(s, ck, 0) == 0 && trn_load(t, ck, 1) == 0;
        CHECK(ok, "%s: save/load: %s / %s", label, trn_error(s), trn_error(t));
        CHECK(ok && copies_exact(t, label, "loaded") == n0 && t->refreshed_on_backend == 2, "%s: the loaded copies (%d refreshes)", label,
              t->refreshed_on_backend);
        printf("%-22s %d copies (each written by its update) the params converted, bit for bit: initialised, after 3 steps, trn_set, loaded\n",
               label, n0);
        remove(ck);
    }
    if (s) trn_destroy(s);
    if (t) trn_destroy(t);
    h_free(&h);
}

static void test_refresh(void) {
    printf("== the half-precision copies: the refresh schedule, the update and trn_set against the host's conversion\n");
    refresh_case("gpt2 bf16", "bf16", gpt2_defs, "pad_multiple=1", "optimizer=adamw");
    refresh_case("gpt2 fp16 vocab 257", "fp16", gpt2_257, "pad_multiple=8", "optimizer=adamw");
    refresh_case("gpt2 bf16 sgd", "bf16", gpt2_defs, "pad_multiple=1", "optimizer=sgd");
    /* fp32: no copies, no schedule */
    const char *sets[] = {"precision=fp32", NULL};
    Harness h;
    if (h_build(&h, "examples/gpt2.model", gpt2_defs, sets, true, 0) == 0)
        CHECK(h.compiled->refresh == 0 && !h.prog->sched[TRN_RUN_REFRESH].g, "fp32: a refresh schedule");
    else CHECK(0, "fp32: build failed");
    h_free(&h);
}

/* ---- training unchanged: checkpoint = blocks, the fused schedule ---- */

/* Trains a's and b's compiled models 4 steps each (b with its dead buffers
 * poisoned, a too when poison_a) and checks that losses and params are the
 * same bit for bit ("what": b's name in the messages); a's losses into la.
 * True when they are. */
static bool same_training(const char *label, const char *what, const Harness *a, const Harness *b, int poison_a, double la[4]) {
    TrnSession *sa = session(a->compiled, NULL, poison_a), *sb = session(b->compiled, NULL, 1);
    double lb[4];
    bool ok = sa && sb && train(sa, &tokens, 4, la, NULL) && train(sb, &tokens, 4, lb, NULL);
    CHECK(ok, "%s: training failed", label);
    bool same = ok;
    for (int i = 0; ok && i < 4; i++) {
        CHECK(la[i] == lb[i], "%s: step %d loss %.17g, %s %.17g", label, i + 1, la[i], what, lb[i]);
        same &= la[i] == lb[i];
    }
    const char *worst = "";
    double pd = ok ? h_param_diff(sa, sb, &worst) : INFINITY;
    CHECK(pd == 0, "%s: params differ by %.3e (%s)", label, pd, worst);
    if (sa) trn_destroy(sa);
    if (sb) trn_destroy(sb);
    return same && pd == 0;
}

/* checkpoint = blocks against none.  smaller: the step's peak must go down
 * (false where the gradients, not the activations, make the peak: Llama at
 * batch 2 x 32) */
static void checkpoint_case(const char *label, const char *model, const char *const *defs, const char *prec, bool smaller) {
    const char *sets[] = {prec, "optimizer=adamw", "lr=0.003", "warmup=0", "grad_clip=1.0", NULL, NULL};
    Harness a, b;
    bool ok = h_build(&a, model, defs, sets, true, 0) == 0;
    sets[5] = "checkpoint=blocks";
    ok = h_build(&b, model, defs, sets, true, 0) == 0 && ok;
    CHECK(ok, "%s: build failed", label);
    double la[4];
    bool same = ok && same_training(label, "checkpointed", &a, &b, 0, la);
    int64_t pa = ok ? a.prog->peak[TRN_RUN_MICRO] : 0, pb = ok ? b.prog->peak[TRN_RUN_MICRO] : 0;
    CHECK(!ok || pb < pa || (!smaller && pb == pa), "%s: the step's peak %lld, checkpointed %lld", label, (long long)pa, (long long)pb);
    if (same)
        printf("%-22s 4 steps, losses %.6f -> %.6f bit for bit (poisoned), params identical; the step's temporaries %lld -> %lld bytes\n", label,
               la[0], la[3], (long long)pa, (long long)pb);
    /* checkpoint = budget, half way between the two arenas: some blocks
     * keep their activations, the others recompute, training unchanged */
    if (ok && smaller) {
        Harness c;
        char mb[64];
        int64_t budget = (a.prog->arena_bytes + b.prog->arena_bytes) / 2;
        snprintf(mb, sizeof mb, "memory_budget=%lld", (long long)budget);
        const char *sc[] = {prec, "optimizer=adamw", "lr=0.003", "warmup=0", "grad_clip=1.0", "checkpoint=budget", mb, NULL};
        bool okc = h_build(&c, model, defs, sc, true, 0) == 0;
        CHECK(okc, "%s: budget build failed", label);
        int64_t ac = okc ? c.prog->arena_bytes : 0;
        CHECK(!okc || (ac <= budget && ac >= b.prog->arena_bytes), "%s: arena %lld under checkpoint = budget (%lld), %lld with blocks", label,
              (long long)ac, (long long)budget, (long long)b.prog->arena_bytes);
        if (okc && same_training(label, "checkpoint = budget", &a, &c, 0, la))
            printf("%-22s checkpoint = budget %lld: arena %lld (none %lld, blocks %lld), 4 steps bit for bit (poisoned)\n", label,
                   (long long)budget, (long long)ac, (long long)a.prog->arena_bytes, (long long)b.prog->arena_bytes);
        h_free(&c);
    }
    h_free(&a);
    h_free(&b);
}

/* The fused schedule (attention and rope_qk on views, norms reading and
 * writing half values, generic fusion) against one kernel per op, both
 * poisoned. */
static void fusion_case(const char *label, const char *model, const char *const *defs) {
    const char *sets[] = {"precision=bf16", "optimizer=adamw", "lr=0.003", "warmup=0", "grad_clip=1.0", NULL};
    Harness a, b;
    bool ok = h_build(&a, model, defs, sets, true, 0) == 0;
    ok = h_build(&b, model, defs, sets, false, 0) == 0 && ok;
    CHECK(ok, "%s: build failed", label);
    double la[4];
    if (ok && same_training(label, "unfused", &a, &b, 1, la))
        printf("%-22s 4 steps, %d kernels against %d unfused: losses %.6f -> %.6f bit for bit (poisoned), params identical\n", label,
               a.prog->sched[TRN_RUN_MICRO].nk, b.prog->sched[TRN_RUN_MICRO].nk, la[0], la[3]);
    h_free(&a);
    h_free(&b);
}

static void test_fusion(void) {
    printf("== the fused schedule against one kernel per op (bf16)\n");
    fusion_case("gpt2 bf16", "examples/gpt2.model", gpt2_defs);
    fusion_case("llama bf16", "examples/llama.model", llama_defs);
}

static void test_checkpoint(void) {
    printf("== checkpoint = blocks, compiled: training unchanged, the step's peak smaller\n");
    const char *gpt2_drop[] = {"vocab=256", "layers=3", "heads=4", "dim=64", "seq=32", "batch=2", "dropout=0.1", NULL};
    checkpoint_case("gpt2 fp32 dropout", "examples/gpt2.model", gpt2_drop, "precision=fp32", true);
    checkpoint_case("llama bf16", "examples/llama.model", llama_defs, "precision=bf16", false);
}

/* ---- LoRA, compiled ---- */

/* Every base (not adapter) param of a and b (one model) equal; the first
 * that is not in *worst.  Under bf16 the frozen ones are bf16. */
static bool base_equal(TrnSession *a, TrnSession *b, const char **worst, int *nhalf) {
    const TrnModel *m = trn_model(a);
    bool same = true;
    for (int i = 0; i < m->ntensors && same; i++) {
        const TrnTensor *t = &m->tensors[i];
        if (t->kind != TRN_PARAM || rt_is_adapter(t)) continue;
        *nhalf += t->dtype == TRN_BF16;
        size_t nb = (size_t)rt_nbytes(t->dtype, t->numel);
        unsigned char *x = xmalloc(nb), *y = xmalloc(nb);
        same = trn_get(a, t->name, x, nb) == 0 && trn_get(b, t->name, y, nb) == 0 && memcmp(x, y, nb) == 0;
        if (!same) *worst = t->name;
        free(x);
        free(y);
    }
    return same;
}

static void test_lora(void) {
    printf("== LoRA compiled (bf16): from a base model's checkpoint\n");
    const char *base[] = {"precision=bf16", "optimizer=adamw", "lr=0.01", "warmup=0", "schedule=constant", NULL};
    const char *lora[] = {"precision=bf16", "optimizer=adamw", "lr=0.01", "warmup=0", "schedule=constant", "lora_rank=4",
                          "lora_targets=*.c_attn.weight, *.c_proj.weight, *.c_fc.weight", NULL};
    const char *lora_attn[] = {"precision=bf16", "optimizer=adamw", "lr=0.01", "warmup=0", "schedule=constant", "lora_rank=4",
                               "lora_targets=*.c_attn.weight", NULL};
    static const char *const gpt2_1layer[] = {"vocab=256", "layers=1", "heads=4", "dim=64", "seq=32", "batch=2", NULL};
    Harness a, b, c, e;
    bool ok = h_build(&a, "examples/gpt2.model", gpt2_defs, base, true, 0) == 0;
    ok = h_build(&b, "examples/gpt2.model", gpt2_defs, lora, true, 0) == 0 && ok;
    ok = h_build(&c, "examples/gpt2.model", gpt2_1layer, base, true, 0) == 0 && ok;
    ok = h_build(&e, "examples/gpt2.model", gpt2_defs, lora_attn, true, 0) == 0 && ok;
    CHECK(ok, "lora: build failed");
    char ck[64], ck1[64];
    snprintf(ck, sizeof ck, "/tmp/trainc_lora_%d.safetensors", (int)getpid());
    snprintf(ck1, sizeof ck1, "/tmp/trainc_lora1_%d.safetensors", (int)getpid());
    TrnSession *sa = ok ? session(a.compiled, NULL, 0) : NULL, *sb = ok ? session(b.compiled, NULL, 1) : NULL;
    TrnSession *sc = ok ? session(b.compiled, NULL, 0) : NULL, *s1 = ok ? session(c.compiled, NULL, 0) : NULL;
    ok = sa && sb && sc && s1;
    /* the base model, trained 3 steps, is the pretrained checkpoint */
    double l[3], la = NAN, lb[3];
    ok = ok && train(sa, &tokens, 3, l, NULL) && trn_save(sa, ck, 0) == 0;
    CHECK(ok, "lora: the base model: %s", sa ? trn_error(sa) : "");
    ok = ok && trn_load(sb, ck, 1) == 0 && trn_load(sc, ck, 1) == 0;
    CHECK(ok, "lora: loading the base checkpoint: %s", sb ? trn_error(sb) : "");
    /* (its lora_rank 0 against 4 is the point: no note) */
    CHECK(!ok || strcmp(trn_load_note(sb), "") == 0, "lora: a note loading the base checkpoint: %s", trn_load_note(sb));
    HFeed fa = {&tokens, 3}, fb = {&tokens, 3};
    ok = ok && trn_step(sa, h_feed_next, &fa, -1) == 0;
    la = ok ? trn_loss(sa) : NAN;
    for (int i = 0; ok && i < 3; i++) ok = trn_step(sb, h_feed_next, &fb, -1) == 0, lb[i] = trn_loss(sb);
    CHECK(ok, "lora: training: %s", sb ? trn_error(sb) : "");
    CHECK(!ok || la == lb[0], "lora: the first loss from the base checkpoint %.17g, the base model's %.17g", lb[0], la);
    /* sb trained 3 steps from the checkpoint, sc is the checkpoint: the
     * base params equal, and every adapter B moved from zero */
    const char *worst = "";
    int nhalf = 0;
    CHECK(!ok || base_equal(sb, sc, &worst, &nhalf), "lora: the base param %s moved", worst);
    /* the frozen linear weights and biases that only products read: stored in bf16 */
    CHECK(!ok || nhalf == 16, "lora: %d base params stored in bf16 (16 expected)", nhalf);
    const TrnModel *m = b.compiled;
    int moved = 0, nb = 0;
    for (int i = 0; ok && i < m->ntensors; i++) {
        const TrnTensor *t = &m->tensors[i];
        if (t->kind != TRN_PARAM || !strstr(t->name, ".lora_B.")) continue;
        float *x = xmalloc(sizeof(float) * (size_t)t->numel);
        trn_get(sb, t->name, x, sizeof(float) * (size_t)t->numel);
        bool zero = true;
        for (int64_t k = 0; k < t->numel; k++) zero &= x[k] == 0;
        moved += !zero;
        nb++;
        free(x);
    }
    CHECK(!ok || (nb == 8 && moved == nb), "lora: %d of %d adapter Bs moved (8 expected)", moved, nb);
    if (ok)
        printf("lora: the base checkpoint loads (adapters at their start); first loss %.6f = the base model's bit for bit; 3 steps -> %.6f, "
               "%d adapter Bs moved, the base unmoved (%d of its params stored in bf16)\n",
               lb[0], lb[2], moved, nhalf);
    /* freshly initialised, a param stored in bf16 holds what the base
     * model's copy of its f32 master holds, bit for bit */
    TrnSession *ia = ok ? session(a.compiled, NULL, 0) : NULL, *ib = ok ? session(b.compiled, NULL, 0) : NULL;
    int same = 0, half = 0;
    for (int i = 0; ia && ib && i < m->ntensors; i++) {
        const TrnTensor *t = &m->tensors[i];
        if (t->kind != TRN_PARAM || t->dtype != TRN_BF16) continue;
        char cp[200];
        snprintf(cp, sizeof cp, "amp.bf16.%s", t->name);
        size_t nb = (size_t)rt_nbytes(t->dtype, t->numel);
        unsigned char *x = xmalloc(nb), *y = xmalloc(nb);
        half++;
        if (trn_get(ib, t->name, x, nb) == 0 && trn_get(ia, cp, y, nb) == 0 && memcmp(x, y, nb) == 0) same++;
        free(x);
        free(y);
    }
    CHECK(!ok || (half > 0 && same == half), "lora: %d of %d bf16 params start as the base model's copies", same, half);
    if (ia) trn_destroy(ia);
    if (ib) trn_destroy(ib);
    /* a checkpoint that lacks base params (a 1-layer model's) still fails, naming them */
    bool saved = s1 && trn_save(s1, ck1, 0) == 0;
    CHECK(saved && trn_load(sc, ck1, 1) != 0 && strstr(trn_error(sc), "missing tensor 'h.1."), "lora: a 1-layer checkpoint: %s",
          sc ? trn_error(sc) : "");
    /* a checkpoint with some of the adapters (another LoRA model's: the
     * attention's alone) fails, naming those it lacks: a trained B with a
     * fresh A was loaded without a word */
    TrnSession *se = ok ? session(e.compiled, NULL, 0) : NULL;
    saved = se && trn_save(se, ck1, 0) == 0;
    CHECK(saved && trn_load(sc, ck1, 1) != 0 && strstr(trn_error(sc), "missing tensor 'h.0.mlp.c_fc.lora_A"), "lora: some adapters: %s",
          sc ? trn_error(sc) : "");
    TrnSession *ss[] = {sa, sb, sc, s1, se};
    for (int i = 0; i < 5; i++)
        if (ss[i]) trn_destroy(ss[i]);
    remove(ck);
    remove(ck1);
    h_free(&a);
    h_free(&b);
    h_free(&c);
    h_free(&e);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    h_tokens_text(&tokens);
    h_tokens_synthetic(&tokens61, 20000, 61, 11);
    bool all = argc < 2;
    for (int i = all ? 0 : 1; i < (all ? 1 : argc); i++) {
        const char *w = all ? NULL : argv[i];
        if (all || strcmp(w, "primitive") == 0) test_primitive();
        if (all || strcmp(w, "bf16") == 0) test_half("bf16");
        if (all || strcmp(w, "fusion") == 0) test_fusion();
        if (all || strcmp(w, "fp16") == 0) test_half("fp16");
        if (all || strcmp(w, "padded") == 0) test_padded("fusion=1"), test_padded("fusion=0");
        if (all || strcmp(w, "sample") == 0) test_sample();
        if (all || strcmp(w, "refresh") == 0) test_refresh();
        if (all || strcmp(w, "checkpoint") == 0) test_checkpoint();
        if (all || strcmp(w, "lora") == 0) test_lora();
    }
    free(tokens.t);
    free(tokens61.t);
    return h_finish();
}
