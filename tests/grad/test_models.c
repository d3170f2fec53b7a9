/* tests/grad/test_models.c — the example models, loaded by the front end
 * (fe_load_file) at a tiny size: a finite-difference check of every
 * parameter's gradient through the whole model (tied embeddings, dropout,
 * GQA, RoPE, ...), and the standard training pipeline verifying. */
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Model {
    const char  *file;
    Define       defs[12];
    int          ndefs;
    int64_t      vocab;    /* integer inputs are drawn from [0, vocab) */
} Model;

#ifndef TRAINC_SOURCE_DIR
#define TRAINC_SOURCE_DIR "."
#endif

static const Model models[] = {
    {"examples/mlp.model", {{"batch", "3"}, {"features", "5"}, {"hidden", "6"}, {"classes", "4"}}, 4, 4},
    {"examples/mlp.model", {{"batch", "3"}, {"features", "5"}, {"hidden", "6"}, {"classes", "4"}, {"act", "relu"}}, 5, 4},
    {"examples/gpt2.model",
     {{"vocab", "11"}, {"layers", "2"}, {"heads", "2"}, {"dim", "8"}, {"seq", "5"}, {"batch", "2"}, {"dropout", "0.1"}}, 7, 11},
    {"examples/llama.model",
     {{"vocab", "13"}, {"layers", "2"}, {"heads", "4"}, {"kv_heads", "2"}, {"dim", "16"}, {"ffn", "24"}, {"seq", "6"}, {"batch", "2"}},
     8, 13},
};

/* Integer inputs: a fixed pattern in [0, vocab); the dropout seed: 7;
 * float inputs: a fixed smooth pattern. */
static void feed_inputs(GT *t, int64_t vocab) {
    for (int i = 0; i < t->g->nnodes; i++) {
        Node *n = t->g->nodes[i];
        if (n->op != OP_input) continue;
        int64_t cnt = shape_numel(&n->out[0]->ty.shape);
        double *v = xmalloc(sizeof(double) * (size_t)cnt);
        for (int64_t k = 0; k < cnt; k++) {
            if (dtype_is_float[n->out[0]->ty.dt]) v[k] = sin(0.7 * (double)k + 0.2);
            else if (n->out[0]->ty.shape.rank == 0) v[k] = 7;
            else v[k] = (double)((k * 7 + 3 + (int64_t)i) % vocab);
        }
        gt_feed(t, ir_source_name(n), cnt, v);
        free(v);
    }
}

int main(void) {
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        const Model *md = &models[m];
        Diag d;
        diag_init(&d, stderr);
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", TRAINC_SOURCE_DIR, md->file);
        Graph *g = fe_load_file(path, md->defs, md->ndefs, &d);
        diag_free(&d);
        EXPECT(g != NULL, "%s does not load", md->file);
        if (!g) continue;
        char label[256];
        snprintf(label, sizeof label, "%s (tiny%s)", md->file, md->ndefs == 5 ? ", relu" : "");

        /* The standard training pipeline, verified after every pass. */
        Graph *c = ir_clone(g);
        const char *names[32];
        PassOptions po = {.accum = 1};
        int np = pm_training_pipeline(c, &po, names, 32);
        PMOptions pm = {.verify_each = true};
        diag_init(&d, stderr);
        EXPECT(pm_run(c, names, np, &po, &pm, &d), "%s: the training pipeline fails", label);
        int ngrad = 0;
        for (int i = 0; i < c->noutputs; i++) ngrad += strncmp(c->outputs[i].name, "grad.", 5) == 0;
        EXPECT(ngrad == 0, "%s: %d grad.* results after the optimizer", label, ngrad);
        diag_free(&d);
        ir_graph_free(c);

        GT *t = gt_adopt(g, -0.5, 0.5);
        feed_inputs(t, md->vocab);
        GTResult r = gt_check(t, label, 12);
        EXPECT(r.ok && r.worst < GT_TOL, "%s: worst %.3g", label, r.worst);
        gt_free(t);
    }
    printf("%s\n", gt_fails ? "FAILED" : "ok");
    return gt_fails ? 1 : 0;
}
