/* passes/freeze.c — train.freeze: fine-tuning part of a model.
 *
 * train.freeze is a comma-separated list of globs (fnmatch(3): `*` and `?`
 * also match dots, `[...]` classes); every param whose name one of them
 * matches gets {frozen = 1}, as `frozen param` in the .model file does:
 * autodiff gives it no gradient, the optimizer no state and no update, and
 * the runtime marks it untrainable.  It still initialises, loads and saves.
 *
 * A glob that matches no param is an error naming the params there are: a
 * misspelt glob would otherwise train the whole model without a word.
 * Runs before everything; the pipeline lists it only when train.freeze is
 * set.  pm_match_params is shared with the lora pass (lora_targets).
 */
#include "ir.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

bool pm_match_params(Graph *g, const char *key, const char *list, bool (*fn)(Graph *, Node *, void *, Diag *), void *ctx, Diag *d) {
    /* the matches of every glob first (a param once), then fn: fn may add
     * params, which no glob then sees */
    int np = 0;
    for (int i = 0; i < g->nnodes; i++) np += g->nodes[i]->op == OP_param;
    Node **params = xcalloc((size_t)(np ? np : 1), sizeof(Node *));
    bool *hit = xcalloc((size_t)(np ? np : 1), sizeof(bool));
    np = 0;
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->op == OP_param) params[np++] = g->nodes[i];
    char glob[256];
    bool ok = true;
    /* every item between commas, the one after a trailing comma too (an
     * empty glob); an empty list has none */
    for (const char *p = list && *list ? list : NULL; p && ok;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *at = p;
        p = end ? end + 1 : NULL;
        while (n && (*at == ' ' || *at == '\t')) at++, n--;
        while (n && (at[n - 1] == ' ' || at[n - 1] == '\t')) n--;
        if (n >= sizeof glob) {
            error_at(d, train_loc(&g->train, key), "train.%s: a glob of %zu characters (at most %zu)", key, n, sizeof glob - 1);
            ok = false;
            break;
        }
        memcpy(glob, at, n);
        glob[n] = 0;
        if (!n) {
            error_at(d, train_loc(&g->train, key), "train.%s: an empty glob in \"%s\"", key, list);
            ok = false;
            break;
        }
        int matched = 0;
        for (int i = 0; i < np; i++)
            if (fnmatch(glob, ir_source_name(params[i]), 0) == 0) hit[i] = true, matched++;
        if (!matched && !np) {
            error_at(d, train_loc(&g->train, key), "train.%s: '%s' matches no parameter: graph '%s' has no parameters", key, glob, g->name);
            ok = false;
        } else if (!matched) {
            StrBuf names = {0};
            for (int i = 0; i < np && i < 6; i++) sb_printf(&names, "%s'%s'", i ? ", " : "", ir_source_name(params[i]));
            error_at(d, train_loc(&g->train, key), "train.%s: '%s' matches no parameter (the %d parameter%s %s named like %s%s)", key, glob, np,
                     np == 1 ? "" : "s", np == 1 ? "is" : "are", names.s, np > 6 ? ", ..." : "");
            sb_free(&names);
            ok = false;
        }
    }
    for (int i = 0; i < np && ok; i++)
        if (hit[i] && !fn(g, params[i], ctx, d)) ok = false;
    free(params);
    free(hit);
    return ok;
}

static bool freeze_one(Graph *g, Node *p, void *ctx, Diag *d) {
    (void)ctx;
    (void)d;
    ir_set_int(g, p, "frozen", 1);
    return true;
}

bool pass_freeze(Graph *g, const PassOptions *po, Diag *d) {
    (void)po;
    if (g->is_training && g->train.freeze && g->train.freeze[0]) {
        error_at(d, graph_loc(g), "freeze: graph '%s' is already a training graph; freeze applies to a forward graph", g->name);
        return false;
    }
    return pm_match_params(g, "freeze", g->train.freeze, freeze_one, NULL, d);
}
