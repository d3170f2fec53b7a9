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

/* Optimal-string-alignment distance (a transposition costs 1). */
static int edit_distance(const char *a, const char *b) {
    int n = (int)strlen(a), m = (int)strlen(b);
    if (n > 40 || m > 40) return 1000;
    int d[41][41];
    for (int i = 0; i <= n; i++) d[i][0] = i;
    for (int j = 0; j <= m; j++) d[0][j] = j;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= m; j++) {
            int c = a[i - 1] == b[j - 1] ? 0 : 1, v = d[i - 1][j - 1] + c;
            if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v) v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[n][m];
}

void elab_suggest_init(Suggest *s, const char *name) {
    s->name = name;
    s->best = NULL;
    s->dist = 1000;
}

void elab_suggest_add(Suggest *s, const char *cand) {
    if (!cand || strcmp(cand, s->name) == 0) return;
    int dist = edit_distance(s->name, cand);
    int len = (int)strlen(s->name), limit = len <= 3 ? 1 : (len + 2) / 3;
    if (dist <= limit && dist < s->dist) {
        s->dist = dist;
        s->best = cand;
    }
}

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
