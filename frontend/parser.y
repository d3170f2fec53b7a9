/* frontend/parser.y — the grammar of the .model language (docs/language.md).
 *
 * A pure (reentrant) LALR(1) parser with locations that builds the syntax
 * tree of ast.h in the arena of its ParseCtx.  Statements end at a newline
 * or ';'.  Error recovery is at statement level (`skipped`, an `error` and the bodies after it, in item, top_item
 * and train_item), so several syntax errors are reported in one run.
 */
%define api.pure full
%define api.prefix {fe_yy}
%define parse.error custom
%define parse.lac full
%locations
%expect 0
%param {void *scanner}
%parse-param {ParseCtx *ctx}

%code requires {
#include "ast.h"
/* State shared by the lexer and the parser. */
typedef struct ParseCtx {
    Arena      *a;
    Diag       *d;
    const char *file;
    Program    *prog;
    int         line, col;      /* lexer position (1-based) */
    int         depth;          /* nesting of ( and [: newlines inside are ignored */
    int         lex_err_line;   /* last line with a lexical error */
    int         brace_line;     /* the line after an end of line that was reported where a '{' was expected */
    int         nerr;           /* errors reported by the lexer and the parser */
    char        tok[64];        /* text of the last token, for messages */
} ParseCtx;
}

%code provides {
/* The flex scanner (lexer.l) names the types without the prefix. */
#define YYSTYPE FE_YYSTYPE
#define YYLTYPE FE_YYLTYPE
int fe_yylex(FE_YYSTYPE *lval, FE_YYLTYPE *lloc, void *scanner);
}

%code {
#include <string.h>
#define L(l) ((SrcLoc){ctx->file, (l).first_line, (l).first_column})
static void fe_yyerror(FE_YYLTYPE *loc, void *scanner, ParseCtx *ctx, const char *msg);
}

%union {
    int64_t     i;
    double      f;
    const char *str;
    Expr       *expr;
    Stmt       *stmt;
    Top        *top;
    TypeExpr   *type;
    Formal     *formal;
    Arg        *arg;
    Vec         vec;
}

%token <str> IDENT "name" STRING "string"
%token <i> INT "integer"
%token <f> FLOAT "number"
%token CONST "const" BLOCK "block" MODEL "model" TRAIN "train" PARAM "param" FROZEN "frozen"
%token IF "if" ELSE "else" REPEAT "repeat" AS "as" RETURN "return"
%token TRUE "true" FALSE "false" NONE "none" AND "and" OR "or" NOT "not"
%token EQ "==" NE "!=" LE "<=" GE ">="
%token NEWLINE "end of line"

%type <expr> expr bexpr cexpr primary call init_opt
%type <stmt> stmt if_stmt
%type <top> top_decl
%type <type> type
%type <formal> formal input
%type <arg> arg
%type <vec> body items stmts exprs_opt exprs args_opt args formals_opt formals inputs_opt inputs
%type <vec> targets train_body train_items

%left OR
%left AND
%precedence NOT
%nonassoc EQ NE '<' LE '>' GE
%left '+' '-'
%left '*' '/' '%' '@'
%precedence UMINUS

%%

/* program = top_item (sep top_item)* */
program
    : top_items
    ;

top_items
    : top_item
    | top_items sep top_item
    ;

/* The end of an item: after a syntax error, the next item's errors are
 * reported (yyerrok; bison would stay quiet until three tokens had been
 * read, and an error on the line after another would not be said). */
sep
    : NEWLINE                 { yyerrok; }
    | ';'                     { yyerrok; }
    ;

/* top_item = (empty) | top_decl | skipped */
top_item
    : %empty
    | top_decl                { ast_vec_push(ctx->a, &ctx->prog->tops, $1); }
    | skipped
    ;

/* What a syntax error skips: the rest of its item, up to the next
 * newline or ';', with the bodies in it taken whole, so that the '}' of a
 * body the error is before (`else {` where no `if` is, `if c` and its
 * `{` on the next line) does not close the body around it. */
skipped
    : error
    | skipped body
    | skipped ELSE
    ;

/* top_decl = "const" NAME "=" expr */
top_decl
    : CONST IDENT '=' expr
        { $$ = ast_top(ctx->a, TOP_CONST, L(@1)); $$->name = $2; $$->nameloc = L(@2); $$->value = $4; }
/* top_decl = "block" NAME "(" formals? ")" body */
    | BLOCK IDENT '(' formals_opt ')' body
        { $$ = ast_top(ctx->a, TOP_BLOCK, L(@1)); $$->name = $2; $$->nameloc = L(@2); $$->formals = $4; $$->body = $6; }
/* top_decl = "model" NAME "(" inputs? ")" body */
    | MODEL IDENT '(' inputs_opt ')' body
        { $$ = ast_top(ctx->a, TOP_MODEL, L(@1)); $$->name = $2; $$->nameloc = L(@2); $$->formals = $4; $$->body = $6; }
/* top_decl = "train" "{" train_items "}" */
    | TRAIN train_body
        { $$ = ast_top(ctx->a, TOP_TRAIN, L(@1)); $$->body = $2; }
    ;

/* formals = formal ("," formal)* ","? */
formals_opt
    : %empty                  { $$ = (Vec){0}; }
    | formals
    | formals ','
    ;

/* formals = formal | formals "," formal */
formals
    : formal                  { $$ = (Vec){0}; ast_vec_push(ctx->a, &$$, $1); }
    | formals ',' formal      { $$ = $1; ast_vec_push(ctx->a, &$$, $3); }
    ;

/* formal = NAME ("=" expr)? */
formal
    : IDENT                   { $$ = arena_alloc(ctx->a, sizeof *$$); $$->name = $1; $$->loc = L(@1); }
    | IDENT '=' expr          { $$ = arena_alloc(ctx->a, sizeof *$$); $$->name = $1; $$->loc = L(@1); $$->dflt = $3; }
    ;

/* inputs = input ("," input)* ","? */
inputs_opt
    : %empty                  { $$ = (Vec){0}; }
    | inputs
    | inputs ','
    ;

/* inputs = input | inputs "," input */
inputs
    : input                   { $$ = (Vec){0}; ast_vec_push(ctx->a, &$$, $1); }
    | inputs ',' input        { $$ = $1; ast_vec_push(ctx->a, &$$, $3); }
    ;

/* input = NAME ":" type */
input
    : IDENT ':' type          { $$ = arena_alloc(ctx->a, sizeof *$$); $$->name = $1; $$->loc = L(@1); $$->type = $3; }
    ;

/* type = DTYPE? "[" exprs? "]" */
type
    : '[' exprs_opt ']'
        { $$ = arena_alloc(ctx->a, sizeof *$$); $$->dims = $2; $$->loc = L(@1); }
    | IDENT '[' exprs_opt ']'
        { $$ = arena_alloc(ctx->a, sizeof *$$); $$->dtype = $1; $$->dtloc = L(@1); $$->dims = $3; $$->loc = L(@1); }
    ;

/* train_body = "{" train_item (sep train_item)* "}" */
train_body
    : '{' train_items '}'     { $$ = $2; }
    ;

/* train_item = (empty) | NAME "=" expr | skipped
 * train_items = train_item (sep train_item)* */
train_items
    : %empty                  { $$ = (Vec){0}; }
    | IDENT '=' expr
        { $$ = (Vec){0}; TrainItem *t = arena_alloc(ctx->a, sizeof *t); t->key = $1; t->loc = L(@1); t->value = $3; ast_vec_push(ctx->a, &$$, t); }
    | skipped                 { $$ = (Vec){0}; }
    | train_items sep
    | train_items sep IDENT '=' expr
        { $$ = $1; TrainItem *t = arena_alloc(ctx->a, sizeof *t); t->key = $3; t->loc = L(@3); t->value = $5; ast_vec_push(ctx->a, &$$, t); }
    | train_items sep skipped
    ;

/* body = "{" item (sep item)* "}" */
body
    : '{' items '}'           { $$ = $2; }
    ;

/* items = item (sep item)*;  item = (empty) | stmt | skipped */
items
    : stmts
    ;

/* stmts = (empty) | stmt | skipped | stmts sep (stmt | skipped)? */
stmts
    : %empty                  { $$ = (Vec){0}; }
    | stmt                    { $$ = (Vec){0}; ast_vec_push(ctx->a, &$$, $1); }
    | skipped                 { $$ = (Vec){0}; }
    | stmts sep
    | stmts sep stmt          { $$ = $1; ast_vec_push(ctx->a, &$$, $3); }
    | stmts sep skipped
    ;

stmt
/* stmt = "frozen"? "param" NAME ":" type ("=" init)? */
    : PARAM IDENT ':' type init_opt
        { $$ = ast_stmt(ctx->a, ST_PARAM, L(@1)); $$->name = $2; $$->nameloc = L(@2); $$->type = $4; $$->init = $5; }
    | FROZEN PARAM IDENT ':' type init_opt
        { $$ = ast_stmt(ctx->a, ST_PARAM, L(@1)); $$->name = $3; $$->nameloc = L(@3); $$->type = $5; $$->init = $6; $$->frozen = true; }
/* stmt = NAME ("," NAME)* "=" expr */
    | targets '=' expr
        { $$ = ast_stmt(ctx->a, ST_ASSIGN, L(@2)); $$->targets = $1; $$->value = $3; }
/* stmt = "return" (expr ("," expr)*)? */
    | RETURN exprs
        { $$ = ast_stmt(ctx->a, ST_RETURN, L(@1)); $$->values = $2; }
    | RETURN
        { $$ = ast_stmt(ctx->a, ST_RETURN, L(@1)); }
/* stmt = "repeat" expr body          (expr may be `COUNT as NAME`) */
    | REPEAT expr body
        { $$ = ast_stmt(ctx->a, ST_REPEAT, L(@1)); $$->cond = $2; $$->then = $3; }
    | if_stmt
    ;

/* init = "=" expr */
init_opt
    : %empty                  { $$ = NULL; }
    | '=' expr                { $$ = $2; }
    ;

/* if_stmt = "if" expr body ("else" (body | if_stmt))? */
if_stmt
    : IF expr body
        { $$ = ast_stmt(ctx->a, ST_IF, L(@1)); $$->cond = $2; $$->then = $3; }
    | IF expr body ELSE body
        { $$ = ast_stmt(ctx->a, ST_IF, L(@1)); $$->cond = $2; $$->then = $3; $$->else_ = $5; $$->has_else = true; }
    | IF expr body ELSE if_stmt
        { $$ = ast_stmt(ctx->a, ST_IF, L(@1)); $$->cond = $2; $$->then = $3; $$->has_else = true;
          ast_vec_push(ctx->a, &$$->else_, $5); }
    ;

/* targets = NAME ("," NAME)* */
targets
    : IDENT
        { $$ = (Vec){0}; Name *n = arena_alloc(ctx->a, sizeof *n); n->s = $1; n->loc = L(@1); ast_vec_push(ctx->a, &$$, n); }
    | targets ',' IDENT
        { $$ = $1; Name *n = arena_alloc(ctx->a, sizeof *n); n->s = $3; n->loc = L(@3); ast_vec_push(ctx->a, &$$, n); }
    ;

/* expr = bexpr ("as" NAME)?          (`as` binds loosest of all) */
expr
    : bexpr
    | bexpr AS IDENT
        { $$ = ast_expr(ctx->a, EX_LABEL, L(@2)); $$->a = $1; $$->s = $3; }
    ;

/* bexpr = bexpr ("or" | "and") bexpr | "not" bexpr | cexpr
 * (`not` applies to a comparison or a sum, never is an operand of one:
 * `1 == not b` is an error, as in Python) */
bexpr
    : bexpr OR bexpr          { $$ = ast_binary(ctx->a, BOP_OR, $1, $3, L(@2)); }
    | bexpr AND bexpr         { $$ = ast_binary(ctx->a, BOP_AND, $1, $3, L(@2)); }
    | NOT bexpr               { $$ = ast_unary(ctx->a, 'n', $2, L(@1)); }
    | cexpr
    ;

/* cexpr = cexpr OP cexpr | "-" cexpr | primary   (comparisons, arithmetic) */
cexpr
    : cexpr EQ cexpr          { $$ = ast_binary(ctx->a, BOP_EQ, $1, $3, L(@2)); }
    | cexpr NE cexpr          { $$ = ast_binary(ctx->a, BOP_NE, $1, $3, L(@2)); }
    | cexpr '<' cexpr         { $$ = ast_binary(ctx->a, '<', $1, $3, L(@2)); }
    | cexpr LE cexpr          { $$ = ast_binary(ctx->a, BOP_LE, $1, $3, L(@2)); }
    | cexpr '>' cexpr         { $$ = ast_binary(ctx->a, '>', $1, $3, L(@2)); }
    | cexpr GE cexpr          { $$ = ast_binary(ctx->a, BOP_GE, $1, $3, L(@2)); }
    | cexpr '+' cexpr         { $$ = ast_binary(ctx->a, '+', $1, $3, L(@2)); }
    | cexpr '-' cexpr         { $$ = ast_binary(ctx->a, '-', $1, $3, L(@2)); }
    | cexpr '*' cexpr         { $$ = ast_binary(ctx->a, '*', $1, $3, L(@2)); }
    | cexpr '/' cexpr         { $$ = ast_binary(ctx->a, '/', $1, $3, L(@2)); }
    | cexpr '%' cexpr         { $$ = ast_binary(ctx->a, '%', $1, $3, L(@2)); }
    | cexpr '@' cexpr         { $$ = ast_binary(ctx->a, '@', $1, $3, L(@2)); }
    | '-' cexpr %prec UMINUS  { $$ = ast_unary(ctx->a, '-', $2, L(@1)); }
    | primary
    ;

/* primary = INT | FLOAT | STRING | "true" | "false" | "none" | NAME
 *         | call | "(" expr ")" | "[" exprs? "]" */
primary
    : INT                     { $$ = ast_expr(ctx->a, EX_INT, L(@1)); $$->i = $1; }
    | FLOAT                   { $$ = ast_expr(ctx->a, EX_FLOAT, L(@1)); $$->f = $1; }
    | STRING                  { $$ = ast_expr(ctx->a, EX_STR, L(@1)); $$->s = $1; }
    | TRUE                    { $$ = ast_expr(ctx->a, EX_BOOL, L(@1)); $$->i = 1; }
    | FALSE                   { $$ = ast_expr(ctx->a, EX_BOOL, L(@1)); $$->i = 0; }
    | NONE                    { $$ = ast_expr(ctx->a, EX_NONE, L(@1)); }
    | IDENT                   { $$ = ast_expr(ctx->a, EX_IDENT, L(@1)); $$->s = $1; }
    | call
    | '(' expr ')'            { $$ = $2; }
    | '[' exprs_opt ']'       { $$ = ast_expr(ctx->a, EX_LIST, L(@1)); $$->items = $2; }
    ;

/* call = NAME "(" (arg ("," arg)* ","?)? ")" */
call
    : IDENT '(' args_opt ')'  { $$ = ast_expr(ctx->a, EX_CALL, L(@1)); $$->s = $1; $$->items = $3; }
    ;

/* args_opt = (empty) | args ","? */
args_opt
    : %empty                  { $$ = (Vec){0}; }
    | args
    | args ','
    ;

/* args = arg | args "," arg */
args
    : arg                     { $$ = (Vec){0}; ast_vec_push(ctx->a, &$$, $1); }
    | args ',' arg            { $$ = $1; ast_vec_push(ctx->a, &$$, $3); }
    ;

/* arg = (NAME "=")? expr */
arg
    : expr                    { $$ = arena_alloc(ctx->a, sizeof *$$); $$->e = $1; }
    | IDENT '=' expr          { $$ = arena_alloc(ctx->a, sizeof *$$); $$->kw = $1; $$->kwloc = L(@1); $$->e = $3; }
    ;

/* exprs = expr ("," expr)* ","? */
exprs_opt
    : %empty                  { $$ = (Vec){0}; }
    | exprs
    | exprs ','
    ;

/* exprs = expr | exprs "," expr */
exprs
    : expr                    { $$ = (Vec){0}; ast_vec_push(ctx->a, &$$, $1); }
    | exprs ',' expr          { $$ = $1; ast_vec_push(ctx->a, &$$, $3); }
    ;

%%

/* How a token is named in messages: 'x' for punctuation and keywords, a
 * phrase for the others. */
static const char *sym_phrase(yysymbol_kind_t k, char *buf, size_t n) {
    const char *s = yysymbol_name(k);
    switch ((int)k) {
    case YYSYMBOL_YYEOF: return "end of file";
    case YYSYMBOL_NEWLINE: return "end of line";
    case YYSYMBOL_IDENT: return "a name";
    case YYSYMBOL_STRING: return "a string";
    case YYSYMBOL_INT: return "an integer";
    case YYSYMBOL_FLOAT: return "a number";
    default: break;
    }
    if (s[0] == '\'') return s; /* 'x', quoted by bison */
    snprintf(buf, n, "'%s'", s);
    return buf;
}

/* Binary operators and `as`: collapsed into "an operator". */
static bool is_operator(yysymbol_kind_t k) {
    switch ((int)k) {
    case YYSYMBOL_AND: case YYSYMBOL_OR: case YYSYMBOL_EQ: case YYSYMBOL_NE: case YYSYMBOL_LE: case YYSYMBOL_GE:
        return true;
    default: {
        const char *s = yysymbol_name(k);
        return strlen(s) == 3 && s[0] == '\'' && strchr("+-*/%@<>", s[1]);
    }
    }
}

/* Tokens that can start an expression: collapsed into "an expression". */
static bool starts_expr(yysymbol_kind_t k) {
    switch ((int)k) {
    case YYSYMBOL_IDENT: case YYSYMBOL_STRING: case YYSYMBOL_INT: case YYSYMBOL_FLOAT:
    case YYSYMBOL_TRUE: case YYSYMBOL_FALSE: case YYSYMBOL_NONE: case YYSYMBOL_NOT:
        return true;
    default: {
        const char *s = yysymbol_name(k);
        return strcmp(s, "'-'") == 0 || strcmp(s, "'('") == 0 || strcmp(s, "'['") == 0;
    }
    }
}

/* "syntax error: unexpected X; expected A, B or C". */
static int yyreport_syntax_error(const yypcontext_t *yyctx, void *scanner, ParseCtx *ctx) {
    (void)scanner;
    YYLTYPE *l = yypcontext_location(yyctx);
    SrcLoc loc = {ctx->file, l->first_line, l->first_column};
    ctx->nerr++;
    if (ctx->lex_err_line == loc.line) return 0; /* the lexer already complained about this line */
    yysymbol_kind_t tok = yypcontext_token(yyctx);
    /* `if c` with its '{' on the next line: the '{' was said to be
     * expected; that it cannot start a statement is not said again */
    if (loc.line == ctx->brace_line && strcmp(yysymbol_name(tok), "'{'") == 0) return 0;
    char ubuf[128];
    const char *u;
    switch ((int)tok) {
    case YYSYMBOL_IDENT: snprintf(ubuf, sizeof ubuf, "name '%s'", ctx->tok); u = ubuf; break;
    case YYSYMBOL_INT: case YYSYMBOL_FLOAT: snprintf(ubuf, sizeof ubuf, "number '%s'", ctx->tok); u = ubuf; break;
    case YYSYMBOL_STRING: u = "string"; break;
    default: u = sym_phrase(tok, ubuf, sizeof ubuf); break;
    }
    yysymbol_kind_t exp[YYNTOKENS];
    int n = yypcontext_expected_tokens(yyctx, exp, YYNTOKENS);
    StrBuf sb = {0};
    sb_printf(&sb, "syntax error: unexpected %s", u);
    const char *items[YYNTOKENS + 1];
    char bufs[YYNTOKENS + 1][64];
    int ni = 0, nexpr = 0;
    int nop = 0;
    for (int i = 0; i < n; i++) {
        nexpr += starts_expr(exp[i]);
        nop += is_operator(exp[i]);
    }
    bool collapse = nexpr >= 4, collapse_ops = nop >= 4;
    if (collapse) items[ni++] = "an expression";
    if (collapse_ops) items[ni++] = "an operator";
    for (int i = 0; i < n; i++) {
        if ((collapse && starts_expr(exp[i])) || (collapse_ops && is_operator(exp[i]))) continue;
        items[ni] = sym_phrase(exp[i], bufs[ni], sizeof bufs[ni]);
        ni++;
    }
    bool want_close = false, want_brace = false, top = false, ended = false;
    for (int i = 0; i < n; i++) {
        want_close |= strcmp(yysymbol_name(exp[i]), "'}'") == 0;
        want_brace |= strcmp(yysymbol_name(exp[i]), "'{'") == 0;
        ended |= exp[i] == YYSYMBOL_AND || strcmp(yysymbol_name(exp[i]), "'*'") == 0; /* binary only: an operand has ended */
        top |= exp[i] == YYSYMBOL_MODEL; /* where a declaration may start */
    }
    if (tok == YYSYMBOL_NEWLINE && want_brace) ctx->brace_line = l->last_line;
    bool decl = tok == YYSYMBOL_CONST || tok == YYSYMBOL_BLOCK || tok == YYSYMBOL_MODEL || tok == YYSYMBOL_TRAIN;
    const char *name = yysymbol_name(tok);
    bool comparison = tok == YYSYMBOL_EQ || tok == YYSYMBOL_NE || tok == YYSYMBOL_LE || tok == YYSYMBOL_GE ||
                      strcmp(name, "'<'") == 0 || strcmp(name, "'>'") == 0;
    if (comparison && ended) {   /* %nonassoc: `a == b == c` */
        sb_puts(&sb, "; comparisons do not chain (write `a < b and b < c`)");
    } else if (tok == YYSYMBOL_NOT && !ended) { /* where an operand of a comparison or arithmetic must start */
        sb_puts(&sb, "; 'not' binds more loosely than comparisons and arithmetic (write `(not b)`)");
    } else if (ni > 0 && ni <= 6) {
        sb_puts(&sb, "; expected ");
        for (int i = 0; i < ni; i++) {
            if (i) sb_puts(&sb, i == ni - 1 ? " or " : ", ");
            sb_puts(&sb, items[i]);
        }
    } else if (tok == YYSYMBOL_YYEOF && want_close) {
        sb_puts(&sb, "; a '{' is not closed with '}'");
    } else if (decl && !top) {
        const char *kw = yysymbol_name(tok);
        bool q = kw[0] == '"';   /* (the alias, quoted in some Bison versions) */
        sb_printf(&sb, "; %.*s declarations go at the top level, outside every body", (int)strlen(kw) - (q ? 2 : 0), kw + q);
    } else if (top && !decl) {
        sb_puts(&sb, "; at the top level a program has const, block, model and train declarations only");
    }
    error_at(ctx->d, loc, "%s", sb.s);
    sb_free(&sb);
    return 0;
}

static void fe_yyerror(FE_YYLTYPE *loc, void *scanner, ParseCtx *ctx, const char *msg) {
    (void)scanner;
    ctx->nerr++;
    SrcLoc l = {ctx->file, loc->first_line, loc->first_column};
    if (strstr(msg, "memory exhausted"))
        error_at(ctx->d, l, "the program is nested too deeply");
    else
        error_at(ctx->d, l, "%s", msg);
}
