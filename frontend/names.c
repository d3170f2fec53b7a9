/* frontend/names.c — name tables and "did you mean" suggestions. */
#include "elab.h"

#include <string.h>

/* ---- maps ---- */

void *elab_map_get(const Map *m, const char *key) {
    if (!m->cap) return NULL;
    size_t mask = (size_t)m->cap - 1;
    for (size_t i = ir_hash_str(key) & mask; m->e[i].key; i = (i + 1) & mask)
        if (strcmp(m->e[i].key, key) == 0) return m->e[i].val;
    return NULL;
}

static void map_insert(MapEnt *tab, int cap, const char *key, void *val, int *n) {
    size_t mask = (size_t)cap - 1, i = ir_hash_str(key) & mask;
    for (; tab[i].key; i = (i + 1) & mask)
        if (strcmp(tab[i].key, key) == 0) {
            tab[i].val = val;
            return;
        }
    tab[i].key = key;
    tab[i].val = val;
    (*n)++;
}

void elab_map_put(Arena *a, Map *m, const char *key, void *val) {
    if ((m->n + 1) * 2 > m->cap) {
        int cap = m->cap ? 2 * m->cap : 16, n = 0;
        MapEnt *tab = arena_alloc(a, sizeof(MapEnt) * (size_t)cap);
        for (int i = 0; i < m->cap; i++)
            if (m->e[i].key) map_insert(tab, cap, m->e[i].key, m->e[i].val, &n);
        m->e = tab;
        m->cap = cap;
        m->n = n;
    }
    map_insert(m->e, m->cap, key, val, &m->n);
}

/* ---- suggestions ---- */

const char *elab_suggest_hint(Elab *e, const Suggest *s) {
    return s->best ? arena_printf(e->a, "; did you mean '%s'?", s->best) : "";
}

const char *elab_const_hint(Elab *e, const Val *v) {
    if (v->k != V_SYM) return "";
    Suggest s;
    elab_suggest_init(&s, v->s);
    for (int i = 0; i < e->consts.cap; i++) elab_suggest_add(&s, e->consts.e[i].key);
    return elab_suggest_hint(e, &s);
}
