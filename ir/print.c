/* ir/print.c — the IR text format (printer side) and Graphviz output.
 *
 * The format is documented in docs/ir.md; ir/parse.c reads it back.  The
 * printer is deterministic (same graph, same bytes) and faithful: it prints
 * what the graph holds even when the graph is invalid (phase labels at every
 * change of phase, unknown values as %<undef:ID>), so a broken pass can be
 * debugged from its dump.
 *
 * Value names: a value with a name hint prints as %hint, sanitised to
 * [A-Za-z0-9_.] and made unique with .1, .2, ...; a value without a hint (or
 * whose hint is all digits) gets the next free number %0, %1, ...  The parser
 * keeps non-numeric names as hints, so print(parse(print(g))) == print(g).
 */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

/* ---- a string set with a "next suffix" counter per base name ---- */

typedef struct NameSlot { const char *key; int next; } NameSlot;
typedef struct NameSet { NameSlot *slots; size_t cap, n; } NameSet;

static NameSlot *ns_find(NameSet *s, const char *key) {
    size_t i = (size_t)ir_hash_str(key) & (s->cap - 1);
    while (s->slots[i].key && strcmp(s->slots[i].key, key) != 0) i = (i + 1) & (s->cap - 1);
    return &s->slots[i];
}

static void ns_grow(NameSet *s) {
    NameSet t = {xcalloc(s->cap ? s->cap * 2 : 64, sizeof(NameSlot)), s->cap ? s->cap * 2 : 64, 0};
    for (size_t i = 0; i < s->cap; i++)
        if (s->slots[i].key) {
            *ns_find(&t, s->slots[i].key) = s->slots[i];
            t.n++;
        }
    free(s->slots);
    *s = t;
}

/* The slot for key, inserted (next = 1) if absent. */
static NameSlot *ns_get(NameSet *s, const char *key, bool *fresh) {
    if (2 * (s->n + 1) > s->cap) ns_grow(s);
    NameSlot *sl = ns_find(s, key);
    *fresh = sl->key == NULL;
    if (*fresh) {
        sl->key = key;
        sl->next = 1;
        s->n++;
    }
    return sl;
}

static bool ns_has(NameSet *s, const char *key) { return s->cap && ns_find(s, key)->key != NULL; }

/* ---- value naming ---- */

typedef struct Names {
    Arena  *a;
    int     n;              /* g->nvalues */
    Value **val;            /* val[id]: the value named (identity check) */
    char  **name;           /* name[id]: without the '%' */
} Names;

static bool all_digits(const char *s) {
    if (!*s) return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return false;
    return true;
}

static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

static void names_build(Names *nm, Graph *g) {
    nm->a = arena_new();
    nm->n = g->nvalues;
    nm->val = arena_alloc(nm->a, sizeof(Value *) * (size_t)(nm->n + 1));
    nm->name = arena_alloc(nm->a, sizeof(char *) * (size_t)(nm->n + 1));
    NameSet used = {0};
    int next_num = 0;
    char buf[48];
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        for (int r = 0; r < n->nout; r++) {
            Value *v = n->out[r];
            if (!v || v->id < 0 || v->id >= nm->n || nm->val[v->id]) continue;
            char *base = NULL;
            if (v->name && *v->name && !all_digits(v->name)) {
                base = arena_strdup(nm->a, v->name);
                for (char *p = base; *p; p++)
                    if (!name_char(*p)) *p = '_';
            }
            const char *chosen;
            bool fresh;
            if (base) {
                NameSlot *sl = ns_get(&used, base, &fresh);
                chosen = base;
                if (!fresh) {
                    /* base is taken: try base.k from this base's counter on */
                    for (;;) {
                        char *cand = arena_printf(nm->a, "%s.%d", base, sl->next++);
                        if (!ns_has(&used, cand)) {
                            chosen = cand;
                            break;
                        }
                    }
                    ns_get(&used, chosen, &fresh);
                }
            } else {
                for (;;) {
                    snprintf(buf, sizeof buf, "%d", next_num++);
                    if (!ns_has(&used, buf)) break;
                }
                chosen = arena_strdup(nm->a, buf);
                ns_get(&used, chosen, &fresh);
            }
            nm->val[v->id] = v;
            nm->name[v->id] = (char *)chosen;
        }
    }
    free(used.slots);
}

static void names_free(Names *nm) { arena_free(nm->a); }

static void put_value(StrBuf *b, const Names *nm, const Value *v) {
    if (v && v->id >= 0 && v->id < nm->n && nm->val[v->id] == v) {
        sb_putc(b, '%');
        sb_puts(b, nm->name[v->id]);
    } else {
        sb_printf(b, "%%<undef:%d>", v ? v->id : -1);
    }
}

/* ---- attributes, strings, types ---- */

static void put_string(StrBuf *b, const char *s) {
    sb_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"': sb_puts(b, "\\\""); break;
        case '\\': sb_puts(b, "\\\\"); break;
        case '\n': sb_puts(b, "\\n"); break;
        case '\t': sb_puts(b, "\\t"); break;
        default:
            if (*p < 0x20 || *p == 0x7f) sb_printf(b, "\\x%02x", *p);
            else sb_putc(b, (char)*p);
        }
    }
    sb_putc(b, '"');
}

static void put_double(StrBuf *b, double v) {
    char buf[32];
    fmt_double(buf, v);
    sb_puts(b, buf);
}

static void put_attr_value(StrBuf *b, const Attr *a) {
    switch (a->kind) {
    case ATTR_INT: sb_printf(b, "%lld", (long long)a->i); break;
    case ATTR_FLOAT: put_double(b, a->f); break;
    case ATTR_STR: put_string(b, a->s); break;
    case ATTR_INTS:
        sb_putc(b, '[');
        for (int i = 0; i < a->n; i++) sb_printf(b, "%s%lld", i ? "," : "", (long long)a->v[i]);
        sb_putc(b, ']');
        break;
    }
}

static void put_attrs(StrBuf *b, const Node *n) {
    if (!n->nattr) return;
    sb_puts(b, " {");
    for (int i = 0; i < n->nattr; i++) {
        if (i) sb_puts(b, ", ");
        sb_puts(b, n->attrs[i].key);
        sb_putc(b, '=');
        put_attr_value(b, &n->attrs[i]);
    }
    sb_putc(b, '}');
}

static void put_type(StrBuf *b, const Type *t) {
    char buf[200];
    if ((unsigned)t->dt >= DT__COUNT || t->shape.rank < 0 || t->shape.rank > IR_MAX_RANK) {
        sb_puts(b, "<bad type>");
        return;
    }
    sb_puts(b, type_str(t, buf, sizeof buf));
}

/* "%a, %b = op %x, %y {k=v} : T, T" (no indent, no newline, no loc). */
static void put_node(StrBuf *b, const Names *nm, const Node *n) {
    for (int r = 0; r < n->nout; r++) {
        if (r) sb_puts(b, ", ");
        put_value(b, nm, n->out[r]);
    }
    sb_puts(b, " = ");
    sb_puts(b, (unsigned)n->op < OP__COUNT ? op_name(n->op) : "<bad op>");
    for (int i = 0; i < n->nin; i++) {
        sb_puts(b, i ? ", " : " ");
        put_value(b, nm, n->in[i]);
    }
    put_attrs(b, n);
    sb_puts(b, " :");
    for (int r = 0; r < n->nout; r++) {
        sb_puts(b, r ? ", " : " ");
        if (n->out[r]) put_type(b, &n->out[r]->ty);
    }
}

/* ---- the graph ---- */

static void put_graph_name(StrBuf *b, const char *name) {
    sb_putc(b, '@');
    if (!name || !*name) name = "main";
    for (const char *p = name; *p; p++) sb_putc(b, name_char(*p) || *p == '-' ? *p : '_');
}

static void put_train(StrBuf *b, const TrainConfig *tc) {
    bool any = false;
    for (int i = 0; i < ntrain_keys; i++) {
        const TrainKeyInfo *k = &train_keys[i];
        if (train_is_default(tc, k)) continue;
        sb_puts(b, any ? ", " : "  train {");
        any = true;
        sb_puts(b, k->name);
        sb_putc(b, '=');
        ir_put_train_value(b, tc, k);
    }
    if (any) sb_puts(b, "}\n");
}

char *train_baked(const TrainConfig *tc, const Define *defs, int ndefs) {
    static const char *const keys[] = {"beta1",     "beta2",     "eps",          "weight_decay", "decay_all", "momentum",
                                       "nesterov",  "lora_rank", "lora_alpha",   "lora_targets", "freeze"};
    StrBuf b = {0};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const TrainKeyInfo *k = train_key_lookup(keys[i]);
        sb_printf(&b, "%s=", k->name);
        ir_put_train_value(&b, tc, k);
        sb_putc(&b, '\n');
    }
    for (int i = 0; i < ndefs; i++) {
        sb_printf(&b, "-D %s=", defs[i].name);
        for (const unsigned char *p = (const unsigned char *)defs[i].value; *p; p++) /* one line: control bytes escaped */
            if (*p < 0x20 || *p == 0x7f) sb_printf(&b, "\\x%02x", *p);
            else sb_putc(&b, (char)*p);
        sb_putc(&b, '\n');
    }
    return sb_take(&b);
}

void ir_put_train_value(StrBuf *b, const TrainConfig *tc, const TrainKeyInfo *k) {
    const char *p = (const char *)tc + k->offset;
    switch (k->kind) {
    case TK_INT: sb_printf(b, "%lld", (long long)*(const int64_t *)p); break;
    case TK_FLOAT: put_double(b, *(const double *)p); break;
    case TK_ENUM:
    case TK_STR: put_string(b, *(const char *const *)p); break;
    }
}

/* Whether a file name can be a location comment that reads back as
 * itself: no line break or other control byte, no space or tab at either
 * end (the parser trims them).  Else the node prints without one. */
static bool loc_printable(const char *f) {
    size_t n = strlen(f);
    if (!n || f[0] == ' ' || f[0] == '\t' || f[n - 1] == ' ' || f[n - 1] == '\t') return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)f[i] < 0x20 || f[i] == 0x7f) return false;
    return true;
}

/* Trailing location comments start at this column (0-based) when the line is shorter. */
#define LOC_COLUMN 60

static void put_graph(StrBuf *b, Graph *g, const PrintOptions *po) {
    Names nm;
    names_build(&nm, g);
    sb_puts(b, "graph ");
    put_graph_name(b, g->name);
    sb_puts(b, g->is_training ? " training {\n" : " {\n");
    put_train(b, &g->train);
    int phase = PH_MICRO;
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (n->phase != phase) {
            sb_puts(b, n->phase == PH_STEP ? "step:\n" : "micro:\n");
            phase = n->phase;
        }
        size_t start = b->len;
        sb_puts(b, "  ");
        put_node(b, &nm, n);
        if (po && po->locs && n->loc.file && loc_printable(n->loc.file)) {
            size_t len = b->len - start;
            size_t pad = len + 2 < LOC_COLUMN ? LOC_COLUMN - len : 2;
            while (pad--) sb_putc(b, ' ');
            sb_printf(b, "# %s:%d:%d", n->loc.file, n->loc.line, n->loc.col);
        }
        sb_putc(b, '\n');
    }
    for (int i = 0; i < g->noutputs; i++) {
        Output *o = &g->outputs[i];
        if (o->kind == OUT_RESULT) {
            sb_puts(b, "  output ");
            put_string(b, o->name);
            sb_putc(b, ' ');
            put_value(b, &nm, o->value);
        } else {
            sb_puts(b, "  update ");
            put_value(b, &nm, o->target && o->target->nout ? o->target->out[0] : NULL);
            sb_puts(b, " = ");
            put_value(b, &nm, o->value);
        }
        sb_putc(b, '\n');
    }
    sb_puts(b, "}\n");
    names_free(&nm);
}

char *ir_print_str(Graph *g, const PrintOptions *po) {
    StrBuf b = {0};
    put_graph(&b, g, po);
    return sb_take(&b);
}

void ir_print(FILE *f, Graph *g, const PrintOptions *po) {
    char *s = ir_print_str(g, po);
    fputs(s, f);
    free(s);
}

void ir_print_node(FILE *f, Graph *g, Node *n) {
    Names nm;
    names_build(&nm, g);
    StrBuf b = {0};
    put_node(&b, &nm, n);
    fputs(b.s ? b.s : "", f);
    sb_free(&b);
    names_free(&nm);
}

/* ---- Graphviz ---- */

/* Escapes s for a double-quoted dot label. */
static void put_dot_escaped(StrBuf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') sb_putc(b, '\\');
        if (*s == '\n') {
            sb_puts(b, "\\n");
            continue;
        }
        sb_putc(b, *s);
    }
}

static const char *dot_style(Op op) {
    switch (op) {
    case OP_param: return ", style=filled, fillcolor=\"#fff2cc\"";
    case OP_input: return ", style=filled, fillcolor=\"#dae8fc\"";
    case OP_state: return ", style=filled, fillcolor=\"#e1d5e7\"";
    case OP_constant:
    case OP_iota: return ", style=filled, fillcolor=\"#f5f5f5\"";
    default: return "";
    }
}

void ir_print_dot(FILE *f, Graph *g) {
    Names nm;
    names_build(&nm, g);
    int *pos = xcalloc((size_t)g->nextnode + 1, sizeof(int)); /* node id -> index + 1 */
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->id >= 0 && g->nodes[i]->id < g->nextnode) pos[g->nodes[i]->id] = i + 1;
    StrBuf b = {0};
    sb_puts(&b, "digraph \"");
    put_dot_escaped(&b, g->name ? g->name : "main");
    sb_puts(&b, "\" {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n"
                "  edge [fontname=\"monospace\", fontsize=9];\n");
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        StrBuf lab = {0};
        sb_puts(&lab, op_name(n->op));
        for (int k = 0; k < n->nattr; k++) {
            sb_puts(&lab, k ? ", " : "\n");
            sb_puts(&lab, n->attrs[k].key);
            sb_putc(&lab, '=');
            StrBuf v = {0};
            put_attr_value(&v, &n->attrs[k]);
            if (v.len > 40) sb_printf(&lab, "%.37s...", v.s);
            else sb_puts(&lab, v.s);
            sb_free(&v);
        }
        sb_putc(&lab, '\n');
        for (int r = 0; r < n->nout; r++) {
            if (r) sb_puts(&lab, ", ");
            put_value(&lab, &nm, n->out[r]);
            sb_puts(&lab, ": ");
            if (n->out[r]) put_type(&lab, &n->out[r]->ty);
        }
        sb_printf(&b, "  n%d [label=\"", i);
        put_dot_escaped(&b, lab.s);
        sb_printf(&b, "\"%s%s];\n", dot_style(n->op), n->phase == PH_STEP ? ", color=\"#b85450\"" : "");
        sb_free(&lab);
    }
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        for (int k = 0; k < n->nin; k++) {
            Value *v = n->in[k];
            int p = v && v->def && v->def->id >= 0 && v->def->id < g->nextnode ? pos[v->def->id] : 0;
            if (!p) continue;
            sb_printf(&b, "  n%d -> n%d", p - 1, i);
            if (v->def->nout > 1) sb_printf(&b, " [label=\"%d\"]", v->res);
            sb_puts(&b, ";\n");
        }
    }
    for (int i = 0; i < g->noutputs; i++) {
        Output *o = &g->outputs[i];
        StrBuf lab = {0};
        sb_puts(&lab, o->kind == OUT_RESULT ? "output " : "update ");
        sb_puts(&lab, o->name ? o->name : "?");
        sb_printf(&b, "  out%d [label=\"", i);
        put_dot_escaped(&b, lab.s);
        sb_puts(&b, "\", shape=ellipse, style=filled, fillcolor=\"#d5e8d4\"];\n");
        sb_free(&lab);
        Value *v = o->value;
        int p = v && v->def && v->def->id >= 0 && v->def->id < g->nextnode ? pos[v->def->id] : 0;
        if (p) sb_printf(&b, "  n%d -> out%d;\n", p - 1, i);
        if (o->kind == OUT_UPDATE && o->target && o->target->id >= 0 && o->target->id < g->nextnode && pos[o->target->id])
            sb_printf(&b, "  out%d -> n%d [style=dashed, constraint=false];\n", i, pos[o->target->id] - 1);
    }
    sb_puts(&b, "}\n");
    fputs(b.s, f);
    sb_free(&b);
    free(pos);
    names_free(&nm);
}
