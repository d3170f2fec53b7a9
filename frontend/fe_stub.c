/* Temporary: replaced by the flex/bison front end (lexer.l, parser.y, elaborate.c). */
#include "ir.h"
Graph *fe_load_string(const char *name, const char *text, const Define *defs, int ndefs, Diag *d) {
    (void)text; (void)defs; (void)ndefs;
    error_at(d, (SrcLoc){name, 0, 0}, "the .model front end is not built yet");
    return NULL;
}
Graph *fe_load_file(const char *path, const Define *defs, int ndefs, Diag *d) { return fe_load_string(path, "", defs, ndefs, d); }
