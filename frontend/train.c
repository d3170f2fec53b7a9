/* frontend/train.c — the train section.
 *
 * Each `KEY = EXPR` is evaluated at compile time (constants visible, other
 * bare names are symbols), turned into text and set with train_set
 * (ir/types.c), which checks kinds and enum values.  memory_budget also
 * takes sizes such as "40GB" or "512MiB".
 */
#include "elab.h"

#include <stdlib.h>
#include <string.h>

/* ---- the train section ---- */

static void train_item(Elab *e, TrainItem *t, Map *seen) {
    Graph *g = e->g;
    const TrainKeyInfo *k = train_key_lookup(t->key);
    if (!k) {
        Suggest s;
        elab_suggest_init(&s, t->key);
        for (int i = 0; i < ntrain_keys; i++) elab_suggest_add(&s, train_keys[i].name);
        error_at(e->d, t->loc, "unknown train key '%s'%s", t->key, elab_suggest_hint(e, &s));
        return;
    }
    TrainItem *prev = elab_map_get(seen, t->key);
    if (prev) {
        error_at(e->d, t->loc, "train key '%s' is set twice", t->key);
        elab_note(e, prev->loc, "first set here");
        return;
    }
    elab_map_put(e->a, seen, t->key, t);
    Val v = elab_eval(e, t->value);
    if (v.k == V_POISON) return;
    char text[64], b[200], err[256];
    const char *txt = NULL;
    bool numeric = k->kind == TK_INT || k->kind == TK_FLOAT;
    switch (v.k) {
    case V_INT: if (numeric) txt = (snprintf(text, sizeof text, "%lld", (long long)v.i), text); break;
    case V_FLOAT: if (numeric) txt = (fmt_double(text, v.f), text); break;
    case V_BOOL: if (k->kind == TK_INT) txt = v.i ? "1" : "0"; break;
    case V_NONE: if (k->kind == TK_ENUM) txt = "none"; break; /* `none` is the language's literal (checkpoint = none) */
    case V_STR:
    case V_SYM:
        if (!numeric) txt = v.s;
        else if (strcmp(k->name, "memory_budget") == 0 && v.k == V_STR) {
            int64_t bytes;
            const char *why;
            if (!train_parse_size(v.s, &bytes, &why)) {
                if (why) error_at(e->d, t->value->loc, "'%s' is not a size: %s", v.s, why);
                else error_at(e->d, t->value->loc, "'%s' is not a size (write e.g. \"40GB\", \"512MiB\" or a number of bytes)", v.s);
                return;
            }
            snprintf(text, sizeof text, "%lld", (long long)bytes);
            txt = text;
        }
        break;
    default: break;
    }
    if (!txt) {
        static const char *const kinds[] = {"an integer", "a number", "a name", "a string"};
        error_at(e->d, t->value->loc, "train key '%s' takes %s, not %s%s", k->name, kinds[k->kind], elab_desc(&v, b, sizeof b),
                 k->kind == TK_INT || k->kind == TK_FLOAT ? elab_const_hint(e, &v) : "");
        return;
    }
    if (train_set(&g->train, g->arena, k->name, txt, err, sizeof err)) {
        g->train.at[k - train_keys] = t->value->loc;
    } else {
        error_at(e->d, t->value->loc, "%s", err); /* (with a suggestion for a name: train_set) */
    }
}

void elab_train(Elab *e, Top *train) {
    Map seen = {0};
    e->in_train = true;
    for (int i = 0; i < train->body.n; i++) train_item(e, train->body.v[i], &seen);
    e->in_train = false;
}
