/* passes/pm.c — the pass manager: the table of passes, running a list of
 * them with dumps, verification and timing, and the standard pipeline.
 */
#include "ir.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Every pass, one row each: name, entry point, one line of help. */
const PassInfo pass_list[] = {
    {"verify", pass_verify, "check every IR invariant (SSA, types, phases, outputs)"},
    {"dce", pass_dce, "remove nodes that no output depends on (inputs and params stay)"},
    {"cse", pass_cse, "merge nodes computing the same op on the same operands"},
    {"fold", pass_fold, "fold constants, identity arithmetic, casts and shape ops"},
    {"autodiff", pass_autodiff, "reverse-mode differentiation: add the backward pass"},
    {"optimizer", pass_optimizer, "add gradient accumulation, clipping and the update rule"},
    {"liger-fusion", pass_liger_fusion, "fuse norms, residual add + norm, RoPE, SwiGLU/GeGLU, softmax/linear + cross-entropy"},
    {"mixed-precision", pass_mixed_precision, "bf16/fp16 matrix products with fp32 master weights and reductions; tf32 marks"},
    {"pad-tiles", pass_pad_tiles, "pad vocabulary and hidden GEMM dimensions to tile multiples, results unchanged"},
    {"lora", pass_lora, "LoRA: low-rank adapters on the lora_targets weights, everything else frozen"},
    {"freeze", pass_freeze, "mark the params train.freeze's globs match as frozen (no gradient, no update)"},
    {"checkpoint", pass_checkpoint, "gradient checkpointing: the backward recomputes each repeated block's activations"},
};
const int npass_list = (int)(sizeof pass_list / sizeof pass_list[0]);

const PassInfo *pass_lookup(const char *name) {
    for (int i = 0; i < npass_list; i++)
        if (strcmp(pass_list[i].name, name) == 0) return &pass_list[i];
    return NULL;
}

static bool listed(const char *const *names, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (names[i] && strcmp(names[i], name) == 0) return true;
    return false;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void dump(const PMOptions *pm, Graph *g, const char *when, const char *pass) {
    FILE *f = pm->dump ? pm->dump : stderr;
    fprintf(f, "*** IR Dump %s %s ***\n", when, pass);
    ir_print(f, g, &pm->print);
    fflush(f);
}

/* Verifies g; on failure reports "<when> pass 'X': the IR is invalid" and
 * then the verifier's errors (captured first, so the headline comes first). */
static bool verify_around(Graph *g, Diag *d, const char *when, const char *pass) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) die("open_memstream failed");
    Diag tmp = *d;   /* (the sources, for carets; nothing counted or seen yet) */
    tmp.out = f;
    tmp.nerrors = tmp.nwarnings = tmp.nrepeats = tmp.nseen = 0;
    tmp.muted = tmp.stopped = false;
    tmp.context = 0;
    bool ok = ir_verify(g, &tmp);
    fclose(f);
    if (!ok) {
        error_at(d, NOLOC, "%s pass '%s': the IR is invalid", when, pass);
        fputs(buf, d->out);
        d->nerrors += tmp.nerrors;
        d->nwarnings += tmp.nwarnings;
    }
    free(buf);
    return ok;
}

typedef struct Timing { const char *name; double secs; } Timing;

/* An LLVM-style report: each run of a pass in order, then the total. */
static void print_timing(const Timing *t, int n) {
    double total = 0;
    for (int i = 0; i < n; i++) total += t[i].secs;
    FILE *f = stderr;
    fprintf(f, "===-------------------------------------------------------------------------===\n");
    fprintf(f, "                      ... Pass execution timing report ...\n");
    fprintf(f, "===-------------------------------------------------------------------------===\n");
    fprintf(f, "  Total Execution Time: %.4f seconds (%.4f wall clock)\n\n", total, total);
    fprintf(f, "   ---Wall Time---  --- Name ---\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "   %7.4f (%5.1f%%)  %s\n", t[i].secs, total > 0 ? 100.0 * t[i].secs / total : 0.0, t[i].name);
    fprintf(f, "   %7.4f (100.0%%)  Total\n", total);
}

bool pm_run(Graph *g, const char *const *names, int n, const PassOptions *po, const PMOptions *pm, Diag *d) {
    static const PMOptions none = {0};
    static const PassOptions no_po = {0};
    if (!pm) pm = &none;
    if (!po) po = &no_po;
    /* every name first, so that a typo fails before any work */
    for (int i = 0; i < n; i++)
        if (!pass_lookup(names[i])) {
            char avail[1024] = "";
            for (int k = 0; k < npass_list; k++) {
                if (k) strncat(avail, ", ", sizeof avail - strlen(avail) - 1);
                strncat(avail, pass_list[k].name, sizeof avail - strlen(avail) - 1);
            }
            error_at(d, NOLOC, "unknown pass '%s' (available: %s)", names[i], avail);
            return false;
        }
    /* liger-fusion matches the patterns as the model wrote them: after
     * mixed precision's casts it would quietly fuse less (the graph does
     * not always show that the pass ran: pm_mixed_precision_of) */
    for (int i = 0, mp = -1; i < n; i++) {
        if (strcmp(names[i], "mixed-precision") == 0 && mp < 0) mp = i;
        if (strcmp(names[i], "liger-fusion") == 0 && mp >= 0) {
            const char *prec = pm_precision(g, po);
            if (g->train.fusion == 0 || (strcmp(prec, "bf16") != 0 && strcmp(prec, "fp16") != 0)) continue;
            error_at(d, NOLOC, "passes: liger-fusion after mixed-precision (%s): its casts hide the patterns the fusion matches; run liger-fusion first",
                     prec);
            return false;
        }
    }
    if (pm->verify_each && n > 0 && !verify_around(g, d, "before", names[0])) return false;
    Timing *times = xcalloc((size_t)n + 1, sizeof(Timing));
    bool ok = true;
    int ran = 0;
    for (int i = 0; i < n && ok; i++) {
        const PassInfo *p = pass_lookup(names[i]);
        if (listed(pm->print_before, pm->nprint_before, p->name)) dump(pm, g, "Before", p->name);
        int errors = d->nerrors;
        double t0 = now();
        diag_unmute(d); /* a pass's notes are its own, not a muted error's */
        ok = p->fn(g, po, d) && d->nerrors == errors;
        times[ran++] = (Timing){p->name, now() - t0};
        if (pm->ran) pm->ran[p - pass_list] = true;
        if (!ok) {
            if (d->nerrors == errors) error_at(d, NOLOC, "pass '%s' failed", p->name);
            break;
        }
        if (pm->print_after_all || listed(pm->print_after, pm->nprint_after, p->name)) dump(pm, g, "After", p->name);
        if (pm->verify_each && strcmp(p->name, "verify") != 0) ok = verify_around(g, d, "after", p->name);
    }
    if (pm->time_passes) print_timing(times, ran);
    free(times);
    return ok;
}

/* Whether the CUDA emitter (codegen/emit_cuda.c) has templates for the ops
 * these passes make (the fused ops, cross_entropy's {classes} mask, the
 * optimizers' skip operand: docs/passes.md lists them).  It has; false
 * would give the cuda target only the rewrites into the older ops. */
static const bool cuda_has_fused_ops = true;

bool pm_target_has_fused_ops(const PassOptions *po) {
    bool cuda = po && po->target && strcmp(po->target, "cuda") == 0;
    return !cuda || cuda_has_fused_ops;
}

int pm_pad_multiple(const Graph *g, const PassOptions *po, bool vocab) {
    if (po && po->pad_multiple > 0) return po->pad_multiple;
    if (g && g->train.pad_multiple > 0) return (int)g->train.pad_multiple;
    const char *p = pm_precision(g, po);
    bool half = strcmp(p, "bf16") == 0 || strcmp(p, "fp16") == 0;
    bool cuda = po && po->target && strcmp(po->target, "cuda") == 0;
    if (cuda && !cuda_has_fused_ops) return 1;
    if (cuda && vocab) return 64;
    return half ? 8 : 1;
}

/* A forward graph runs once per micro-batch and updates nothing: the step
 * nodes and updates are autodiff's and the optimizer's to make.  A pass
 * that takes one (autodiff, mixed-precision) refuses a graph that has
 * them, a training graph printed without its `training` word. */
bool pm_need_forward(Graph *g, const char *pass, Diag *d) {
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->phase == PH_STEP) {
            error_at(d, g->nodes[i]->loc, "%s: graph '%s' has step nodes (this is the first): %s takes a forward graph, "
                                          "whose nodes run once per micro-batch", pass, g->name, pass);
            return false;
        }
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i].kind == OUT_UPDATE) {
            error_at(d, g->outputs[i].target->loc, "%s: graph '%s' updates '%s': %s takes a forward graph, which updates nothing "
                                                   "(the optimizer pass writes the updates)", pass, g->name, g->outputs[i].name, pass);
            return false;
        }
    return true;
}

/* The precision the passes use: the option, else the train section's. */
const char *pm_precision(const Graph *g, const PassOptions *po) {
    if (po && po->precision) return po->precision;
    return g && g->train.precision ? g->train.precision : "fp32";
}

/* The mixed precision a forward graph shows it already has, from what only
 * the pass makes (a model may cast a weight to bf16 itself, so casts do not
 * say, and neither does the header, which names the precision the passes
 * are to use): "fp16" for the loss scale amp.scale, else "tf32" for a
 * matmul {tf32=1}; NULL otherwise, bf16 included, which leaves no other
 * mark: pm_run refuses the orders that would need one within one list. */
const char *pm_mixed_precision_of(const Graph *g) {
    bool tf32 = false;
    for (int i = 0; i < g->nnodes; i++) {
        const Node *n = g->nodes[i];
        const char *name = n->op == OP_state ? ir_source_name(n) : NULL;
        if (name && strcmp(name, "amp.scale") == 0) return "fp16";
        tf32 = tf32 || (n->op == OP_matmul && ir_int(n, "tf32", 0));
    }
    return tf32 ? "tf32" : NULL;
}

/* The forward passes, each where its train key (or option) turns it on:
 * lora (lora_rank > 0), freeze (freeze globs), liger-fusion (fusion), mixed-precision (precision
 * other than fp32), pad-tiles (pad_tiles, when a multiple is above 1). */
static int forward_passes(const Graph *g, const PassOptions *po, const char **out) {
    int n = 0;
    if (!g) return 0;
    /* (lora_targets or lora_alpha without a rank: the pass says so) */
    if (g->train.lora_rank != 0 || (g->train.lora_targets && g->train.lora_targets[0]) || g->train.lora_alpha != 0) out[n++] = "lora";
    /* after lora (its globs may name adapters); in the forward graphs too,
     * where mixed precision stores frozen params in half precision */
    if (g->train.freeze && g->train.freeze[0]) out[n++] = "freeze";
    if (g->train.fusion) out[n++] = "liger-fusion";
    if (strcmp(pm_precision(g, po), "fp32") != 0) out[n++] = "mixed-precision";
    /* (either multiple: the cuda target pads the vocabulary in fp32 too) */
    if (g->train.pad_tiles && (pm_pad_multiple(g, po, true) > 1 || pm_pad_multiple(g, po, false) > 1)) out[n++] = "pad-tiles";
    return n;
}

static int fill(const char *const *list, int n, const char **names, int max) {
    for (int i = 0; i < n && i < max; i++) names[i] = list[i];
    return n;
}

/* The standard training pipeline, one literal list: the forward passes
 * that are on, then the cleanups, autodiff, the optimizer, cleanups. */
int pm_training_pipeline(const Graph *g, const PassOptions *po, const char **names, int max) {
    const char *list[24];
    int n = forward_passes(g, po, list);
    static const char *const pipeline[] = {
        "fold", "cse", "dce", "autodiff", "optimizer", "cse", "dce",
    };
    for (size_t i = 0; i < sizeof pipeline / sizeof pipeline[0]; i++) {
        /* after the optimizer, fold what autodiff made: mixed precision's
         * cast pairs and half bias-gradient sums, and reshapes of reshapes
         * (a backward read of a forward activation through two reshapes
         * no longer keeps the first one's copy alive: GPT-2 small saves
         * one [B, T, C] per layer) */
        if (strcmp(pipeline[i], "optimizer") == 0 && g) {
            list[n++] = "optimizer";
            list[n++] = "fold";
            continue;
        }
        list[n++] = pipeline[i];
    }
    /* after the last cse, which would merge the recomputation back */
    if (g && ((g->train.checkpoint && strcmp(g->train.checkpoint, "none") != 0) || g->train.checkpoint_blocks != 0)) {
        list[n++] = "checkpoint";
        list[n++] = "dce";
    }
    return fill(list, n, names, max);
}

/* The forward part alone, for the eval and sampling graphs, which must see
 * the same fused ops, dtypes and padded parameters as the training graph. */
int pm_forward_pipeline(const Graph *g, const PassOptions *po, const char **names, int max) {
    const char *list[24];
    int n = forward_passes(g, po, list);
    static const char *const cleanup[] = {"fold", "cse", "dce"};
    for (size_t i = 0; i < sizeof cleanup / sizeof cleanup[0]; i++) list[n++] = cleanup[i];
    return fill(list, n, names, max);
}
