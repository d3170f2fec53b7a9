/* ir/parse.c — reads the IR text format (docs/ir.md) back into a Graph.
 *
 * Hand-written: a line-oriented lexer (newlines are tokens) and a recursive
 * descent parser, one function per grammar rule with the rule above it.
 * Errors are located at the .ir text (file:line:col with a caret); after an
 * error the parser skips to the next line and goes on, so one run reports
 * several errors.  Values named in a failed line are "poisoned": later uses
 * of them are skipped silently instead of cascading into more errors.
 *
 * The parser never trusts its input: every count, number and size is
 * checked before it reaches the builder or ir_infer, so arbitrary bytes give
 * errors, never a crash (tests/fuzz/fuzz_ir.c).
 */
#include "ir.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Largest tensor the parser accepts (elements); keeps every later size
 * computation (bytes, FLOPs) far from int64 overflow. */
#define MAX_NUMEL ((int64_t)1 << 50)

typedef enum { T_EOF, T_NL, T_VALUE, T_GNAME, T_IDENT, T_INT, T_FLOAT, T_STRING, T_PUNCT, T_ERROR } TokKind;

typedef struct Tok {
    TokKind     k;
    const char *p;        /* start in the text */
    int         len;      /* bytes in the text */
    int         line, col;
    int64_t     i;        /* T_INT */
    double      f;        /* T_FLOAT */
    const char *s;        /* T_STRING: unescaped (graph arena); T_VALUE/T_GNAME: name without sigil */
    int         slen;
    char        c;        /* T_PUNCT */
} Tok;

typedef struct Sym { const char *name; Value *v; bool poison; int line, col; } Sym;

typedef struct Attrib { Tok key; Attr a; } Attrib;

typedef struct Parser {
    const char *fname;    /* for error locations */
    const char *lfile;    /* fname in the graph arena: locs of nodes without a comment */
    const char *p, *line_start;
    int         line;
    Tok         tok;
    Diag       *d;
    Graph      *g;
    bool        quiet;    /* skipping after an error: no lexer errors */
    const char *cmt;      /* last "#" comment seen, its length and line */
    int         cmt_len, cmt_line;
    const char *last_loc_file;
    int         phase;
    bool        had_train;
    Sym        *syms;
    size_t      nsyms, capsyms;
    Value     **ops;      /* operand scratch */
    int         capops;
    const char **onames;  /* the output names so far (add_output_name): open addressing, ocap a power of 2 */
    size_t      nonames, ocap;
} Parser;

/* The output names parsed so far, in a table rather than a sweep of the
 * outputs (10^5 outputs took seconds).  oname_slot: where name is, or the
 * empty slot where it goes (ocap > 0). */
static size_t oname_slot(const Parser *P, const char *name) {
    size_t h = (size_t)ir_hash_str(name) & (P->ocap - 1);
    while (P->onames[h] && strcmp(P->onames[h], name) != 0) h = (h + 1) & (P->ocap - 1);
    return h;
}

static bool has_output_name(const Parser *P, const char *name) { return P->ocap && P->onames[oname_slot(P, name)]; }

static void add_output_name(Parser *P, const char *name) {
    if (2 * (P->nonames + 1) > P->ocap) {
        const char **was = P->onames;
        size_t wascap = P->ocap;
        P->ocap = P->ocap ? 2 * P->ocap : 64;
        P->onames = xcalloc(P->ocap, sizeof *P->onames);
        for (size_t i = 0; i < wascap; i++)
            if (was[i]) P->onames[oname_slot(P, was[i])] = was[i];
        free(was);
    }
    P->onames[oname_slot(P, name)] = name;
    P->nonames++;
}

/* ---- errors ---- */

static SrcLoc tok_loc(Parser *P, const Tok *t) { return (SrcLoc){P->fname, t->line, t->col}; }

static bool perr(Parser *P, const Tok *t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool perr(Parser *P, const Tok *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verror_at(P->d, tok_loc(P, t), "error", fmt, ap);
    va_end(ap);
    return false;
}

/* A short description of a token for "expected X, found Y". */
static const char *tok_desc(const Tok *t, char *buf, size_t n) {
    switch (t->k) {
    case T_EOF: return "end of file";
    case T_NL: return "end of line";
    case T_ERROR: return "an invalid token";
    case T_STRING: return "a string";
    default: break;
    }
    int len = t->len > 40 ? 40 : t->len;
    snprintf(buf, n, "'%.*s'%s", len, t->p, t->len > 40 ? "..." : "");
    return buf;
}

static bool expected(Parser *P, const char *what) {
    char b[64];
    if (P->tok.k == T_ERROR) return false; /* the lexer has said why */
    return perr(P, &P->tok, "expected %s, found %s", what, tok_desc(&P->tok, b, sizeof b));
}

/* ---- lexer ---- */

static bool is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_name(int c) { return is_alpha(c) || is_digit(c) || c == '.'; }

static void lex_error(Parser *P, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void lex_error(Parser *P, const char *fmt, ...) {
    P->tok.k = T_ERROR;
    if (P->quiet) return;
    va_list ap;
    va_start(ap, fmt);
    verror_at(P->d, tok_loc(P, &P->tok), "error", fmt, ap);
    va_end(ap);
}

static int hexval(int c) {
    if (is_digit(c)) return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* string := '"' { char | '\"' | '\\' | '\n' | '\t' | '\xHH' } '"' */
static void lex_string(Parser *P) {
    Tok *t = &P->tok;
    const char *q = P->p + 1;
    StrBuf b = {0};
    for (;;) {
        unsigned char c = (unsigned char)*q;
        if (c == 0 || c == '\n') {
            P->p = q;
            t->len = (int)(q - t->p);
            sb_free(&b);
            lex_error(P, "unterminated string");
            return;
        }
        if (c == '"') break;
        if (c == '\\') {
            char e = q[1];
            if (e == '"' || e == '\\') sb_putc(&b, e), q += 2;
            else if (e == 'n') sb_putc(&b, '\n'), q += 2;
            else if (e == 't') sb_putc(&b, '\t'), q += 2;
            else if (e == 'x' && hexval(q[2]) >= 0 && hexval(q[3]) >= 0 && (hexval(q[2]) | hexval(q[3]))) {
                sb_putc(&b, (char)(hexval(q[2]) * 16 + hexval(q[3])));
                q += 4;
            } else {
                P->p = q + (e && e != '\n' ? 2 : 1);
                t->len = (int)(P->p - t->p);
                sb_free(&b);
                lex_error(P, "invalid escape in string (use \\\" \\\\ \\n \\t or \\xHH)");
                return;
            }
            continue;
        }
        sb_putc(&b, (char)c);
        q++;
    }
    P->p = q + 1;
    t->k = T_STRING;
    t->len = (int)(P->p - t->p);
    t->slen = (int)b.len;
    t->s = arena_strndup(P->g->arena, b.s ? b.s : "", b.len);
    sb_free(&b);
}

/* number := ['-'] digits ['.' digits] [('e'|'E') ['+'|'-'] digits] | '-inf'   ('inf' and 'nan' are identifiers) */
static void lex_number(Parser *P) {
    Tok *t = &P->tok;
    const char *q = P->p;
    bool is_float = false;
    if (*q == '-') q++;
    if (strncmp(q, "inf", 3) == 0 && !is_name((unsigned char)q[3])) {
        q += 3;
        is_float = true;
    } else {
        const char *digits = q;
        while (is_digit(*q)) q++;
        if (q == digits) {
            P->p = q;
            t->len = (int)(q - t->p);
            lex_error(P, "malformed number");
            return;
        }
        if (*q == '.') {
            is_float = true;
            q++;
            while (is_digit(*q)) q++;
        }
        if ((*q == 'e' || *q == 'E') && (is_digit(q[1]) || ((q[1] == '+' || q[1] == '-') && is_digit(q[2])))) {
            is_float = true;
            q += 2;
            while (is_digit(*q)) q++;
        }
    }
    P->p = q;
    t->len = (int)(q - t->p);
    char buf[512];
    if (t->len >= (int)sizeof buf) {
        lex_error(P, "number too long");
        return;
    }
    memcpy(buf, t->p, (size_t)t->len);
    buf[t->len] = 0;
    errno = 0;
    if (is_float) {
        t->k = T_FLOAT;
        t->f = strtod(buf, NULL);
        if (errno == ERANGE && isinf(t->f))
            lex_error(P, "float %s does not fit in a double (write inf for infinity)", buf);
    } else {
        t->k = T_INT;
        t->i = strtoll(buf, NULL, 10);
        if (errno == ERANGE) lex_error(P, "integer %s does not fit in 64 bits", buf);
    }
}

/* Reads the next token into P->tok.  Comments run from '#' to the end of
 * the line; the last one is remembered (a node line's trailing comment may
 * be its source location). */
static void next(Parser *P) {
    Tok *t = &P->tok;
    for (;;) {
        char c = *P->p;
        if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
            P->p++;
        } else if (c == '#') {
            const char *s = ++P->p;
            while (*P->p && *P->p != '\n') P->p++;
            P->cmt = s;
            P->cmt_len = (int)(P->p - s);
            P->cmt_line = P->line;
        } else {
            break;
        }
    }
    memset(t, 0, sizeof *t);
    t->p = P->p;
    t->line = P->line;
    t->col = (int)(P->p - P->line_start) + 1;
    unsigned char c = (unsigned char)*P->p;
    if (c == 0) {
        t->k = T_EOF;
        return;
    }
    if (c == '\n') {
        t->k = T_NL;
        t->len = 1;
        P->p++;
        P->line++;
        P->line_start = P->p;
        return;
    }
    if (c == '%' || c == '@') {
        const char *q = P->p + 1;
        while (is_name((unsigned char)*q) || (c == '@' && *q == '-')) q++;
        P->p = q;
        t->len = (int)(q - t->p);
        if (t->len == 1) {
            if (*q && *q != '\n') P->p++;
            lex_error(P, "expected a name after '%c'", c);
            return;
        }
        t->k = c == '%' ? T_VALUE : T_GNAME;
        t->s = t->p + 1;
        t->slen = t->len - 1;
        return;
    }
    if (c == '-' || is_digit(c)) {
        if (c == '-' && !is_digit((unsigned char)P->p[1]) && strncmp(P->p + 1, "inf", 3) != 0) {
            P->p++;
            t->len = 1;
            lex_error(P, "unexpected '-'");
            return;
        }
        lex_number(P);
        return;
    }
    if (is_alpha(c)) {
        const char *q = P->p;
        while (is_alpha((unsigned char)*q) || is_digit((unsigned char)*q)) q++;
        P->p = q;
        t->len = (int)(q - t->p);
        t->k = T_IDENT; /* inf and nan too: they are floats only where a value is expected */
        return;
    }
    if (c == '"') {
        lex_string(P);
        return;
    }
    if (strchr("=,:{}[]", c)) {
        t->k = T_PUNCT;
        t->c = (char)c;
        t->len = 1;
        P->p++;
        return;
    }
    P->p++;
    t->len = 1;
    if (c >= 0x20 && c < 0x7f) lex_error(P, "unexpected character '%c'", c);
    else lex_error(P, "unexpected byte 0x%02x", c);
}

static bool is_punct(Parser *P, char c) { return P->tok.k == T_PUNCT && P->tok.c == c; }
static bool is_ident(Parser *P, const char *s) {
    return P->tok.k == T_IDENT && (size_t)P->tok.len == strlen(s) && strncmp(P->tok.p, s, (size_t)P->tok.len) == 0;
}

static bool accept_punct(Parser *P, char c) {
    if (!is_punct(P, c)) return false;
    next(P);
    return true;
}

static bool expect_punct(Parser *P, char c) {
    char what[8] = {'\'', c, '\'', 0};
    if (accept_punct(P, c)) return true;
    return expected(P, what);
}

static bool at_line_end(Parser *P) { return P->tok.k == T_NL || P->tok.k == T_EOF; }

static bool expect_line_end(Parser *P) {
    if (at_line_end(P)) return true;
    return expected(P, "end of line");
}

/* Skips to the start of the next line, quietly. */
static void resync(Parser *P) {
    P->quiet = true;
    while (!at_line_end(P)) next(P);
    P->quiet = false;
    if (P->tok.k == T_NL) next(P);
}

/* ---- the symbol table (value names) ---- */

static Sym *sym_slot(Sym *tab, size_t cap, const char *s, int n) {
    size_t i = (size_t)ir_hash(IR_HASH0, s, (size_t)n) & (cap - 1);
    while (tab[i].name && !(strncmp(tab[i].name, s, (size_t)n) == 0 && tab[i].name[n] == 0)) i = (i + 1) & (cap - 1);
    return &tab[i];
}

static Sym *sym_find(Parser *P, const Tok *t) {
    if (!P->capsyms) return NULL;
    Sym *s = sym_slot(P->syms, P->capsyms, t->s, t->slen);
    return s->name ? s : NULL;
}

static Sym *sym_add(Parser *P, const Tok *t) {
    if (2 * (P->nsyms + 1) > P->capsyms) {
        size_t cap = P->capsyms ? 2 * P->capsyms : 256;
        Sym *tab = xcalloc(cap, sizeof(Sym));
        for (size_t i = 0; i < P->capsyms; i++)
            if (P->syms[i].name) *sym_slot(tab, cap, P->syms[i].name, (int)strlen(P->syms[i].name)) = P->syms[i];
        free(P->syms);
        P->syms = tab;
        P->capsyms = cap;
    }
    Sym *s = sym_slot(P->syms, P->capsyms, t->s, t->slen);
    if (!s->name) {
        s->name = arena_strndup(P->g->arena, t->s, (size_t)t->slen);
        s->line = t->line;
        s->col = t->col;
        P->nsyms++;
    }
    return s;
}

/* Defines the names of a failed line as poisoned (unless already defined). */
static void poison(Parser *P, const Tok *names, int n) {
    for (int i = 0; i < n; i++)
        if (!sym_find(P, &names[i])) sym_add(P, &names[i])->poison = true;
}

/* Resolves a use.  *ok is cleared on failure; an error is reported only for
 * names never defined (poisoned ones were reported where they failed). */
static Value *use_value(Parser *P, const Tok *t, bool *ok) {
    Sym *s = sym_find(P, t);
    if (!s) {
        perr(P, t, "use of undefined value %%%.*s", t->slen, t->s);
        *ok = false;
        return NULL;
    }
    if (s->poison) {
        *ok = false;
        return NULL;
    }
    return s->v;
}

/* ---- types and attributes ---- */

/* numel of s, or -1 when it exceeds MAX_NUMEL or a dimension is not positive. */
static int64_t safe_numel(const Shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) {
        if (s->d[i] <= 0 || n > MAX_NUMEL / s->d[i]) return -1;
        n *= s->d[i];
    }
    return n;
}

/* type := DTYPE '[' [INT {',' INT}] ']' */
static bool parse_type(Parser *P, Type *ty, Tok *where) {
    *where = P->tok;
    if (P->tok.k != T_IDENT) return expected(P, "a type such as f32[4,64]");
    char name[16];
    if (P->tok.len >= (int)sizeof name) return perr(P, &P->tok, "unknown dtype '%.*s'", P->tok.len > 40 ? 40 : P->tok.len, P->tok.p);
    memcpy(name, P->tok.p, (size_t)P->tok.len);
    name[P->tok.len] = 0;
    DType dt;
    if (!dtype_parse(name, &dt)) return perr(P, &P->tok, "unknown dtype '%s'", name);
    next(P);
    if (!expect_punct(P, '[')) return false;
    Shape s = {0};
    if (!is_punct(P, ']')) {
        for (;;) {
            if (P->tok.k != T_INT) return expected(P, "a dimension");
            if (s.rank == IR_MAX_RANK) return perr(P, &P->tok, "more than %d dimensions", IR_MAX_RANK);
            if (P->tok.i <= 0) return perr(P, &P->tok, "dimension %lld is not positive", (long long)P->tok.i);
            s.d[s.rank++] = P->tok.i;
            next(P);
            if (!accept_punct(P, ',')) break;
        }
    }
    if (!expect_punct(P, ']')) return false;
    if (safe_numel(&s) < 0) return perr(P, where, "type has more than 2^50 elements");
    ty->dt = dt;
    ty->shape = s;
    return true;
}

/* value := INT | FLOAT | STRING | '[' [INT {',' INT}] ']' */
static bool parse_attr_value(Parser *P, Attr *a) {
    switch (P->tok.k) {
    case T_INT: a->kind = ATTR_INT; a->i = P->tok.i; next(P); return true;
    case T_FLOAT: a->kind = ATTR_FLOAT; a->f = P->tok.f; next(P); return true;
    case T_STRING: a->kind = ATTR_STR; a->s = P->tok.s; next(P); return true;
    default: break;
    }
    if (is_ident(P, "inf") || is_ident(P, "nan")) {
        a->kind = ATTR_FLOAT;
        a->f = P->tok.p[0] == 'i' ? 1.0 / 0.0 : 0.0 / 0.0;
        next(P);
        return true;
    }
    if (!is_punct(P, '[')) return expected(P, "an attribute value (integer, float, \"string\" or [integers])");
    next(P);
    int n = 0, cap = 8;
    int64_t *v = xmalloc(sizeof(int64_t) * (size_t)cap);
    if (!is_punct(P, ']')) {
        for (;;) {
            if (P->tok.k != T_INT) {
                free(v);
                return expected(P, "an integer");
            }
            if (n == cap) v = xrealloc(v, sizeof(int64_t) * (size_t)(cap *= 2));
            v[n++] = P->tok.i;
            next(P);
            if (!accept_punct(P, ',')) break;
        }
    }
    if (!expect_punct(P, ']')) {
        free(v);
        return false;
    }
    a->kind = ATTR_INTS;
    a->n = n;
    a->v = arena_alloc(P->g->arena, sizeof(int64_t) * (size_t)(n ? n : 1));
    if (n) memcpy(a->v, v, sizeof(int64_t) * (size_t)n);
    free(v);
    return true;
}

/* attrs := '{' [KEY '=' value {',' KEY '=' value}] '}' */
enum { MAX_ATTRS = 64 };

static bool parse_attrs(Parser *P, Attrib **out, int *nout) {
    int n = 0, cap = 0;
    Attrib *at = NULL;
    next(P); /* '{' */
    bool ok = true;
    if (!is_punct(P, '}')) {
        for (;;) {
            if (P->tok.k != T_IDENT) {
                ok = expected(P, "an attribute name");
                break;
            }
            Tok key = P->tok;
            if (n == MAX_ATTRS) { /* more than any op reads (ir/infer.c's attr_kinds): each one copied the list */
                ok = perr(P, &key, "more than %d attributes on one node", MAX_ATTRS);
                break;
            }
            for (int i = 0; i < n; i++)
                if (at[i].key.len == key.len && strncmp(at[i].key.p, key.p, (size_t)key.len) == 0) {
                    ok = perr(P, &key, "duplicate attribute '%.*s'", key.len, key.p);
                    break;
                }
            if (!ok) break;
            next(P);
            if (!(ok = expect_punct(P, '='))) break;
            if (n == cap) at = xrealloc(at, sizeof(Attrib) * (size_t)(cap = cap ? 2 * cap : 8));
            memset(&at[n], 0, sizeof at[n]);
            at[n].key = key;
            if (!(ok = parse_attr_value(P, &at[n].a))) break;
            n++;
            if (!accept_punct(P, ',')) break;
        }
    }
    if (ok) ok = expect_punct(P, '}');
    *out = at;
    *nout = n;
    return ok;
}

/* ---- statements ---- */

/* Reads a trailing "# FILE:LINE:COL" comment on the line just ended into loc. */
static bool comment_loc(Parser *P, int line, SrcLoc *loc) {
    if (!P->cmt || P->cmt_line != line) return false;
    const char *s = P->cmt, *e = P->cmt + P->cmt_len;
    while (s < e && (*s == ' ' || *s == '\t')) s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) e--;
    const char *c2 = e;
    while (c2 > s && is_digit(c2[-1])) c2--;
    if (c2 == e || c2 == s || c2[-1] != ':' || e - c2 > 9) return false;
    const char *c1 = c2 - 1;
    while (c1 > s && is_digit(c1[-1])) c1--;
    if (c1 == c2 - 1 || c1 == s || c1[-1] != ':' || (c2 - 1) - c1 > 9) return false;
    size_t flen = (size_t)(c1 - 1 - s);
    if (!flen) return false;
    if (!P->last_loc_file || strlen(P->last_loc_file) != flen || strncmp(P->last_loc_file, s, flen) != 0)
        P->last_loc_file = arena_strndup(P->g->arena, s, flen);
    loc->file = P->last_loc_file;
    loc->line = atoi(c1);
    loc->col = atoi(c2);
    return true;
}

/* node := VALUE {',' VALUE} '=' OPNAME [VALUE {',' VALUE}] [attrs] ':' type {',' type} [# FILE:LINE:COL] NL */
static void parse_node(Parser *P) {
    enum { MAXRES = 16 };
    Tok res[MAXRES], types_at[MAXRES];
    Type types[MAXRES];
    int nres = 0, ntypes = 0, nops = 0, nattr = 0;
    Attrib *attrs = NULL;
    bool ok = true, uses_ok = true, too_many = false;
    /* results */
    for (;;) {
        if (P->tok.k != T_VALUE) {
            ok = expected(P, "a value name");
            break;
        }
        if (nres == MAXRES) too_many = true;
        else res[nres++] = P->tok;
        next(P);
        if (!accept_punct(P, ',')) break;
    }
    if (ok) ok = expect_punct(P, '=');
    Tok optok = P->tok;
    Op op = OP_input;
    if (ok) {
        if (P->tok.k != T_IDENT) {
            ok = expected(P, "an op name");
        } else {
            char name[64];
            int len = P->tok.len < 63 ? P->tok.len : 63;
            memcpy(name, P->tok.p, (size_t)len);
            name[len] = 0;
            if (P->tok.len > 63 || !op_lookup(name, &op)) ok = perr(P, &P->tok, "unknown op '%.*s'", len, P->tok.p);
            else next(P);
        }
    }
    /* operands */
    if (ok && P->tok.k == T_VALUE) {
        for (;;) {
            if (P->tok.k != T_VALUE) {
                ok = expected(P, "an operand");
                break;
            }
            Value *v = use_value(P, &P->tok, &uses_ok);
            if (nops == P->capops) P->ops = xrealloc(P->ops, sizeof(Value *) * (size_t)(P->capops = P->capops ? 2 * P->capops : 16));
            P->ops[nops++] = v;
            next(P);
            if (!accept_punct(P, ',')) break;
        }
    }
    if (ok && is_punct(P, '{')) ok = parse_attrs(P, &attrs, &nattr);
    Tok colon = P->tok;
    if (ok) ok = expect_punct(P, ':');
    if (ok) {
        for (;;) {
            Type t;
            Tok at;
            if (!(ok = parse_type(P, &t, &at))) break;
            if (ntypes < MAXRES) {
                types_at[ntypes] = at;
                types[ntypes] = t;
            }
            ntypes++;
            if (!accept_punct(P, ',')) break;
        }
    }
    int endline = P->tok.line;
    if (ok) ok = expect_line_end(P);
    if (!ok || !uses_ok) goto fail;

    /* checks that need the whole line */
    const OpInfo *oi = &op_info[op];
    if (too_many || nres != oi->nout) {
        perr(P, &res[0], "%s has %d result%s, but %d name%s given", oi->name, oi->nout, oi->nout == 1 ? "" : "s",
             too_many ? MAXRES + 1 : nres, nres == 1 && !too_many ? " is" : "s are");
        goto fail;
    }
    if (ntypes != oi->nout) {
        perr(P, &colon, "%s has %d result%s, but %d type%s given", oi->name, oi->nout, oi->nout == 1 ? "" : "s", ntypes,
             ntypes == 1 ? " is" : "s are");
        goto fail;
    }
    if (nops < oi->min_in || (oi->max_in >= 0 && nops > oi->max_in)) {
        if (oi->min_in == oi->max_in)
            perr(P, &optok, "%s takes %d operand%s, not %d", oi->name, oi->min_in, oi->min_in == 1 ? "" : "s", nops);
        else
            perr(P, &optok, "%s takes at least %d operand%s, not %d", oi->name, oi->min_in, oi->min_in == 1 ? "" : "s", nops);
        goto fail;
    }
    for (int i = 0; i < nres; i++) {
        Sym *s = sym_find(P, &res[i]);
        bool dup = false;
        for (int j = 0; j < i; j++) dup |= res[j].slen == res[i].slen && strncmp(res[j].s, res[i].s, (size_t)res[i].slen) == 0;
        if (s || dup) {
            perr(P, &res[i], "redefinition of value %%%.*s", res[i].slen, res[i].s);
            if (s && !dup) note_at(P->d, (SrcLoc){P->fname, s->line, s->col}, "previous definition is here");
            goto fail;
        }
    }

    /* build */
    Graph *g = P->g;
    Node *n = ir_new(g, op, nops, P->ops, tok_loc(P, &optok));
    n->loc.file = P->lfile;
    n->phase = P->phase;
    for (int i = 0; i < nattr; i++) {
        char *key = arena_strndup(g->arena, attrs[i].key.p, (size_t)attrs[i].key.len);
        Attr *a = &attrs[i].a;
        switch (a->kind) {
        case ATTR_INT: ir_set_int(g, n, key, a->i); break;
        case ATTR_FLOAT: ir_set_float(g, n, key, a->f); break;
        case ATTR_STR: ir_set_str(g, n, key, a->s); break;
        case ATTR_INTS: ir_set_ints(g, n, key, a->n, a->v); break;
        }
    }
    bool source = op_has(op, OPF_SOURCE);
    if (source) n->out[0]->ty = types[0];
    if (!ir_infer(g, n, P->d)) goto fail;
    for (int i = 0; i < n->nout; i++) {
        char a[200], b[200];
        if (!type_eq(&n->out[i]->ty, &types[i])) {
            perr(P, &types_at[i], "declared type %s of %%%.*s differs from the inferred type %s", type_str(&types[i], a, sizeof a),
                 res[i].slen, res[i].s, type_str(&n->out[i]->ty, b, sizeof b));
            goto fail;
        }
    }
    comment_loc(P, endline, &n->loc);
    ir_append(g, n);
    for (int i = 0; i < nres; i++) {
        Sym *s = sym_add(P, &res[i]);
        s->v = n->out[i];
        bool digits = true;
        for (int k = 0; k < res[i].slen; k++) digits &= is_digit((unsigned char)res[i].s[k]);
        if (!digits) n->out[i]->name = s->name;
    }
    free(attrs);
    return;
fail:
    free(attrs);
    poison(P, res, nres);
    resync(P);
}

/* train := 'train' '{' [KEY '=' (INT | FLOAT | STRING | IDENT) {',' ...}] '}' NL */
static void parse_train(Parser *P) {
    Tok kw = P->tok;
    next(P);
    if (P->had_train) {
        perr(P, &kw, "duplicate train line");
        resync(P);
        return;
    }
    P->had_train = true;
    bool ok = expect_punct(P, '{');
    bool seen[256] = {0};
    if (ok && !is_punct(P, '}')) {
        for (;;) {
            if (P->tok.k != T_IDENT) {
                ok = expected(P, "a train key");
                break;
            }
            Tok key = P->tok;
            next(P);
            if (!(ok = expect_punct(P, '='))) break;
            Tok val = P->tok;
            char kbuf[64], vbuf[512], err[256];
            const char *vtext;
            if (val.k == T_STRING) {
                vtext = val.s;
            } else if (val.k == T_INT || val.k == T_FLOAT || val.k == T_IDENT) {
                if (val.len >= (int)sizeof vbuf) {
                    ok = perr(P, &val, "train value too long");
                    break;
                }
                memcpy(vbuf, val.p, (size_t)val.len);
                vbuf[val.len] = 0;
                vtext = vbuf;
            } else {
                ok = expected(P, "a train value");
                break;
            }
            next(P);
            snprintf(kbuf, sizeof kbuf, "%.*s", key.len, key.p);
            const TrainKeyInfo *k = train_key_lookup(kbuf);
            if (!k || key.len >= (int)sizeof kbuf) {
                ok = perr(P, &key, "unknown train key '%.*s'", key.len > 40 ? 40 : key.len, key.p);
                break;
            }
            int idx = (int)(k - train_keys);
            if (idx < 256 && seen[idx]) {
                ok = perr(P, &key, "duplicate train key '%s'", kbuf);
                break;
            }
            if (idx < 256) seen[idx] = true;
            if (!train_set(&P->g->train, P->g->arena, kbuf, vtext, err, sizeof err)) {
                ok = perr(P, &val, "%s", err);
                break;
            }
            /* the errors about the value point at it, as in a .model's
             * train section (TrainConfig.at) */
            P->g->train.at[idx] = (SrcLoc){P->lfile, val.line, val.col};
            if (!accept_punct(P, ',')) break;
        }
    }
    if (ok) ok = expect_punct(P, '}');
    if (ok) ok = expect_line_end(P);
    if (!ok) resync(P);
}

/* output := 'output' STRING VALUE NL */
static void parse_output(Parser *P) {
    next(P);
    bool ok = true, uses_ok = true;
    const char *name = NULL;
    Value *v = NULL;
    Tok nt = P->tok;
    if (P->tok.k != T_STRING) ok = expected(P, "the output's name (a string)");
    else name = P->tok.s, next(P);
    if (ok && has_output_name(P, name)) ok = perr(P, &nt, "output name '%s' is used more than once", name);
    if (ok && P->tok.k != T_VALUE) ok = expected(P, "a value");
    if (ok) v = use_value(P, &P->tok, &uses_ok), next(P);
    if (ok) ok = expect_line_end(P);
    if (!ok || !uses_ok) {
        resync(P);
        return;
    }
    ir_add_output(P->g, name, v);
    add_output_name(P, P->g->outputs[P->g->noutputs - 1].name);
}

/* update := 'update' VALUE '=' VALUE NL     (target: the result of a param or state) */
static void parse_update(Parser *P) {
    next(P);
    bool ok = true, uses_ok = true;
    Value *target = NULL, *v = NULL;
    Tok ttok = P->tok;
    if (P->tok.k != T_VALUE) ok = expected(P, "the updated param or state (a value)");
    if (ok) target = use_value(P, &P->tok, &uses_ok), next(P);
    if (ok) ok = expect_punct(P, '=');
    if (ok && P->tok.k != T_VALUE) ok = expected(P, "a value");
    if (ok) v = use_value(P, &P->tok, &uses_ok), next(P);
    if (ok) ok = expect_line_end(P);
    if (ok && uses_ok && target->def->op != OP_param && target->def->op != OP_state)
        ok = perr(P, &ttok, "update target %%%.*s is not a param or state (it is defined by %s)", ttok.slen, ttok.s, op_name(target->def->op));
    if (!ok || !uses_ok) {
        resync(P);
        return;
    }
    ir_add_update(P->g, target->def, v);
}

/* line := NL | train | ('step' | 'micro') ':' NL | node | output | update */
static void parse_line(Parser *P) {
    if (P->tok.k == T_VALUE) {
        parse_node(P);
    } else if (is_ident(P, "train")) {
        parse_train(P);
    } else if (is_ident(P, "output")) {
        parse_output(P);
    } else if (is_ident(P, "update")) {
        parse_update(P);
    } else if (is_ident(P, "step") || is_ident(P, "micro")) {
        int phase = is_ident(P, "step") ? PH_STEP : PH_MICRO;
        next(P);
        if (!expect_punct(P, ':') || !expect_line_end(P)) {
            resync(P);
            return;
        }
        P->phase = phase;
    } else {
        expected(P, "a node (%name = op ...), 'output', 'update', 'train' or 'step:'");
        resync(P);
    }
}

static void skip_blank_lines(Parser *P) {
    while (P->tok.k == T_NL) next(P);
}

/* file := {NL} 'graph' GNAME ['training'] '{' NL {line} '}' {NL} EOF */
static void parse_file(Parser *P, const char *text) {
    next(P);
    skip_blank_lines(P);
    if (!is_ident(P, "graph")) {
        expected(P, "'graph @name {'");
        return;
    }
    next(P);
    if (P->tok.k != T_GNAME) {
        expected(P, "the graph's name (@name)");
        return;
    }
    char *gname = xmalloc((size_t)P->tok.slen + 1);
    memcpy(gname, P->tok.s, (size_t)P->tok.slen);
    gname[P->tok.slen] = 0;
    P->g = ir_graph_new(gname);
    free(gname);
    P->lfile = arena_strdup(P->g->arena, P->fname);
    P->g->loc = tok_loc(P, &P->tok);
    next(P);
    if (is_ident(P, "training")) {
        P->g->is_training = true;
        P->g->training_loc = tok_loc(P, &P->tok);
        next(P);
    }
    if (!expect_punct(P, '{') || !expect_line_end(P)) return;
    int limit = P->d->max_errors ? P->d->max_errors : 20;
    for (;;) {
        if (P->d->nerrors > limit) return;
        if (P->tok.k == T_NL) {
            next(P);
        } else if (P->tok.k == T_EOF) {
            expected(P, "'}' at the end of the graph");
            return;
        } else if (is_punct(P, '}')) {
            next(P);
            break;
        } else {
            parse_line(P);
        }
    }
    skip_blank_lines(P);
    if (P->tok.k != T_EOF) expected(P, "end of file after the graph");
    (void)text;
}

Graph *ir_parse(const char *name, const char *text, Diag *d) {
    if (!name) name = "<ir>";
    size_t len = strlen(text);
    diag_add_source(d, name, text, len);
    Parser P = {0};
    P.fname = name;
    P.p = P.line_start = text;
    P.line = 1;
    P.d = d;
    /* strings lexed before the graph exists (only in a malformed header) need an arena */
    Arena *pre = arena_new();
    Graph pre_g = {0};
    pre_g.arena = pre;
    P.g = &pre_g;
    int errors = d->nerrors;
    parse_file(&P, text);
    Graph *g = P.g == &pre_g ? NULL : P.g;
    arena_free(pre);
    free(P.syms);
    free(P.ops);
    free(P.onames);
    if (d->nerrors > errors) {
        ir_graph_free(g);
        return NULL;
    }
    return g;
}
