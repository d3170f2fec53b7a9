/* frontend/frontend.c — the entry points: read, parse, elaborate.
 *
 * fe_load_file/fe_load_string (ir.h) register the source text with the
 * Diag (for carets), parse it into a syntax tree held in a temporary arena,
 * and elaborate the tree into a fresh graph.  The temporary arena is freed
 * on every path; the graph is freed when anything was reported.
 */
#include "ast.h"
#include "parser.h"
#include "lexer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int fe_yyparse(void *scanner, ParseCtx *ctx);

bool ast_parse(const char *file, const char *text, size_t len, Arena *a, Diag *d, Program *out) {
    ParseCtx ctx = {.a = a, .d = d, .file = file, .prog = out, .line = 1, .col = 1};
    yyscan_t scanner;
    if (fe_yylex_init_extra(&ctx, &scanner)) die("cannot initialise the scanner");
    YY_BUFFER_STATE buf = fe_yy_scan_bytes(text, (int)len, scanner);
    int rc = fe_yyparse(scanner, &ctx);
    fe_yy_delete_buffer(buf, scanner);
    fe_yylex_destroy(scanner);
    return rc == 0 && ctx.nerr == 0;
}

/* Parses and elaborates text (len bytes, may hold NULs: they are lexical errors). */
static Graph *load(const char *name, const char *text, size_t len, const Define *defs, int ndefs, Diag *d) {
    if (len > SOURCE_MAX) {
        error_at(d, (SrcLoc){name, 0, 0}, "the file is too large (%zu bytes; at most %zu)", len, SOURCE_MAX);
        return NULL;
    }
    diag_add_source(d, name, text, len);
    int errors0 = d->nerrors;
    Graph *g = ir_graph_new("main");
    const char *file = arena_strdup(g->arena, name);
    Arena *tmp = arena_new();
    Program prog = {0};
    bool ok = ast_parse(file, text, len, tmp, d, &prog);
    if (ok) ok = elab_program(&prog, g, file, defs, ndefs, tmp, d);
    arena_free(tmp);
    if (!ok || d->nerrors > errors0) {
        ir_graph_free(g);
        return NULL;
    }
    return g;
}

Graph *fe_load_string(const char *name, const char *text, const Define *defs, int ndefs, Diag *d) {
    return load(name ? name : "<string>", text ? text : "", text ? strlen(text) : 0, defs, ndefs, d);
}

Graph *fe_load_file(const char *path, const Define *defs, int ndefs, Diag *d) {
    size_t len = 0;
    char *text = read_file_max(path, SOURCE_MAX, &len);
    if (!text && errno == EFBIG) {
        error_at(d, (SrcLoc){path, 0, 0}, "the file is too large (more than %zu bytes)", SOURCE_MAX);
        return NULL;
    }
    if (!text) {
        error_at(d, NOLOC, "cannot read '%s': %s", path, strerror(errno));
        return NULL;
    }
    Graph *g = load(path, text, len, defs, ndefs, d);
    free(text);
    return g;
}
