/* tools/trainc.c — the trainc command-line driver (docs/driver.md).
 *
 *   trainc COMMAND [OPTIONS] FILE
 *
 * A command is one row of `commands` and one function; the options are one
 * table (`flags`) shared by every command, each row naming the commands it
 * applies to (NULL: all).  Exit status: 0 success, 1 a user error (bad
 * input, failed verification or pass), 2 a usage error (bad command line).
 */
#include "ir.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define TRAINC_VERSION "0.1.0"

enum { EXIT_OK = 0, EXIT_USER = 1, EXIT_USAGE = 2 };

typedef struct Opts {
    const char  *cmd;
    const char  *input;
    const char  *output;          /* -o; NULL or "-": stdout */
    Define      *defs;
    int          ndefs;
    const char **passes;          /* --passes */
    int          npasses;
    bool         have_passes;
    const char **print_after, **print_before;
    int          nprint_after, nprint_before;
    bool         print_after_all, time_passes, stats, no_verify, no_locs, train, verbose;
    const char  *emit;            /* "ir" or "dot" */
} Opts;

/* ---- options ---- */

typedef enum {
    F_OUTPUT, F_DEFINE, F_PASSES, F_TRAIN, F_PRINT_AFTER, F_PRINT_AFTER_ALL, F_PRINT_BEFORE, F_TIME_PASSES,
    F_EMIT, F_STATS, F_NO_VERIFY, F_NO_LOCS, F_VERBOSE,
} FlagId;

typedef struct Flag {
    FlagId      id;
    const char *name;             /* "--passes", "-D", "-o" */
    const char *arg;              /* NULL: takes no value */
    const char *cmds;             /* space-separated commands it applies to; NULL: every command */
    const char *help;
} Flag;

static const Flag flags[] = {
    {F_OUTPUT, "-o", "FILE", "ir opt", "write the output to FILE instead of stdout"},
    {F_DEFINE, "-D", "NAME=VALUE", NULL, "set a model constant (.model) or a train key (.ir); also -DNAME=VALUE"},
    {F_PASSES, "--passes", "a,b,c", "opt", "the passes to run, in order (see the list below)"},
    {F_TRAIN, "--train", NULL, "ir", "print the training graph (after the standard training pipeline)"},
    {F_PRINT_AFTER, "--print-ir-after", "PASS", NULL, "dump the IR after PASS runs (repeatable)"},
    {F_PRINT_AFTER_ALL, "--print-ir-after-all", NULL, NULL, "dump the IR after every pass"},
    {F_PRINT_BEFORE, "--print-ir-before", "PASS", NULL, "dump the IR before PASS runs (repeatable)"},
    {F_TIME_PASSES, "--time-passes", NULL, NULL, "print the time each pass took, to stderr"},
    {F_EMIT, "--emit", "ir|dot", "ir opt", "output format: IR text (default) or Graphviz"},
    {F_STATS, "--stats", NULL, NULL, "print node counts, parameters and FLOPs"},
    {F_NO_VERIFY, "--no-verify", NULL, NULL, "do not verify the input and the IR after every pass"},
    {F_NO_LOCS, "--no-locs", NULL, NULL, "do not print '# file:line:col' source locations"},
    {F_VERBOSE, "-v", NULL, NULL, "say what is done (check: 'FILE: ok')"},
};
#define NFLAGS ((int)(sizeof flags / sizeof flags[0]))

/* ---- commands ---- */

static int cmd_check(Opts *o);
static int cmd_ir(Opts *o);
static int cmd_opt(Opts *o);

typedef struct Command {
    const char *name;
    int (*run)(Opts *o);
    const char *args;             /* the synopsis after the command name */
    const char *summary;
} Command;

static const Command commands[] = {
    {"check", cmd_check, "FILE.model|FILE.ir [-D NAME=VALUE]...", "load a model and verify it; prints nothing on success"},
    {"ir", cmd_ir, "FILE.model|FILE.ir [--train] [-o OUT]", "print the graph IR of a model (--train: the training graph)"},
    {"opt", cmd_opt, "--passes=a,b,c FILE.ir|FILE.model [-o OUT]", "run passes over a graph and print the result"},
};
#define NCOMMANDS ((int)(sizeof commands / sizeof commands[0]))

static bool applies(const Flag *f, const char *cmd) {
    if (!f->cmds) return true;
    size_t n = strlen(cmd);
    for (const char *p = f->cmds; *p;) {
        const char *e = strchr(p, ' ');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, cmd, n) == 0) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

static void usage_main(FILE *f) {
    fprintf(f, "usage: trainc COMMAND [OPTIONS] FILE\n"
               "       trainc --help | --version | COMMAND --help\n\n"
               "commands:\n");
    for (int i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nRun 'trainc COMMAND --help' for the options of a command.\n");
}

static void usage_cmd(FILE *f, const Command *c) {
    fprintf(f, "usage: trainc %s %s [OPTIONS]\n\n%s.\n\noptions:\n", c->name, c->args, c->summary);
    for (int i = 0; i < NFLAGS; i++) {
        const Flag *fl = &flags[i];
        if (!applies(fl, c->name)) continue;
        char lhs[64];
        bool eq = fl->name[1] == '-';
        snprintf(lhs, sizeof lhs, "%s%s%s", fl->name, fl->arg ? (eq ? "=" : " ") : "", fl->arg ? fl->arg : "");
        fprintf(f, "  %-26s %s\n", lhs, fl->help);
    }
    fprintf(f, "  %-26s %s\n", "-h, --help", "print this help");
    fprintf(f, "\npasses:\n");
    for (int i = 0; i < npass_list; i++) fprintf(f, "  %-26s %s\n", pass_list[i].name, pass_list[i].help);
}

static int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "trainc: error: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    if (cmd) fprintf(stderr, "Run 'trainc %s --help' for usage.\n", cmd);
    else fprintf(stderr, "Run 'trainc --help' for usage.\n");
    return EXIT_USAGE;
}

/* Appends the comma-separated names in s to *list. */
static void split_list(const char *s, const char ***list, int *n) {
    const char *p = s;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len) {
            char *name = xmalloc(len + 1);
            memcpy(name, p, len);
            name[len] = 0;
            *list = xrealloc(*list, sizeof(char *) * (size_t)(*n + 1));
            (*list)[(*n)++] = name;
        }
        if (!e) break;
        p = e + 1;
    }
}

static int check_pass_name(const char *cmd, const char *flag, const char *name) {
    if (pass_lookup(name)) return EXIT_OK;
    char avail[512] = "";
    for (int k = 0; k < npass_list; k++) {
        if (k) strncat(avail, ", ", sizeof avail - strlen(avail) - 1);
        strncat(avail, pass_list[k].name, sizeof avail - strlen(avail) - 1);
    }
    return usage_error(cmd, "%s: unknown pass '%s' (available: %s)", flag, name, avail);
}

static int set_flag(Opts *o, const Flag *f, const char *val) {
    switch (f->id) {
    case F_OUTPUT: o->output = val; break;
    case F_DEFINE: {
        const char *eq = strchr(val, '=');
        if (!eq || eq == val) return usage_error(o->cmd, "-D takes NAME=VALUE, not '%s'", val);
        char *name = xmalloc((size_t)(eq - val) + 1);
        memcpy(name, val, (size_t)(eq - val));
        name[eq - val] = 0;
        o->defs = xrealloc(o->defs, sizeof(Define) * (size_t)(o->ndefs + 1));
        o->defs[o->ndefs++] = (Define){name, eq + 1};
        break;
    }
    case F_PASSES:
        o->have_passes = true;
        split_list(val, &o->passes, &o->npasses);
        for (int i = 0; i < o->npasses; i++)
            if (check_pass_name(o->cmd, "--passes", o->passes[i])) return EXIT_USAGE;
        break;
    case F_TRAIN: o->train = true; break;
    case F_PRINT_AFTER:
    case F_PRINT_BEFORE: {
        bool after = f->id == F_PRINT_AFTER;
        int before = after ? o->nprint_after : o->nprint_before;
        split_list(val, after ? &o->print_after : &o->print_before, after ? &o->nprint_after : &o->nprint_before);
        int now = after ? o->nprint_after : o->nprint_before;
        for (int i = before; i < now; i++)
            if (check_pass_name(o->cmd, f->name, (after ? o->print_after : o->print_before)[i])) return EXIT_USAGE;
        break;
    }
    case F_PRINT_AFTER_ALL: o->print_after_all = true; break;
    case F_TIME_PASSES: o->time_passes = true; break;
    case F_EMIT:
        if (strcmp(val, "ir") != 0 && strcmp(val, "dot") != 0) return usage_error(o->cmd, "--emit takes 'ir' or 'dot', not '%s'", val);
        o->emit = val;
        break;
    case F_STATS: o->stats = true; break;
    case F_NO_VERIFY: o->no_verify = true; break;
    case F_NO_LOCS: o->no_locs = true; break;
    case F_VERBOSE: o->verbose = true; break;
    }
    return EXIT_OK;
}

/* Parses argv[from..] into o; returns an exit status, or -1 to go on. */
static int parse_args(Opts *o, const Command *c, int argc, char **argv, int from) {
    for (int i = from; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage_cmd(stdout, c);
            return EXIT_OK;
        }
        if (a[0] != '-' || strcmp(a, "-") == 0) {
            if (o->input) return usage_error(o->cmd, "more than one input file ('%s' and '%s')", o->input, a);
            o->input = a;
            continue;
        }
        const Flag *f = NULL;
        const char *val = NULL;
        for (int k = 0; k < NFLAGS && !f; k++) {
            const Flag *fl = &flags[k];
            size_t n = strlen(fl->name);
            if (strncmp(a, fl->name, n) != 0) continue;
            if (a[n] == 0) f = fl;
            else if (fl->arg && fl->name[1] == '-' && a[n] == '=') f = fl, val = a + n + 1;
            else if (fl->arg && fl->name[1] != '-') f = fl, val = a + n; /* -DNAME=VALUE, -oFILE */
        }
        if (!f) return usage_error(o->cmd, "unknown option '%s'", a);
        if (!applies(f, o->cmd)) return usage_error(o->cmd, "option '%s' does not apply to 'trainc %s'", f->name, o->cmd);
        if (f->arg && !val) {
            if (i + 1 >= argc) return usage_error(o->cmd, "option '%s' needs a value (%s)", f->name, f->arg);
            val = argv[++i];
        }
        if (!f->arg && val) return usage_error(o->cmd, "option '%s' takes no value", f->name);
        int st = set_flag(o, f, val);
        if (st != EXIT_OK) return st;
    }
    if (!o->input) return usage_error(o->cmd, "no input file");
    return -1;
}

/* ---- shared steps ---- */

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Loads the input: .ir files with the IR parser, everything else with the
 * front end.  Verifies the result unless --no-verify.  NULL after errors. */
static Graph *load(Opts *o, Diag *d) {
    Graph *g = NULL;
    if (ends_with(o->input, ".ir")) {
        size_t len = 0;
        char *text = read_file(o->input, &len);
        if (!text) {
            error_at(d, NOLOC, "cannot read '%s': %s", o->input, strerror(errno));
            return NULL;
        }
        if (strlen(text) != len) {
            size_t at = strlen(text);
            int line = 1, col = 1;
            for (size_t i = 0; i < at; i++) line += text[i] == '\n', col = text[i] == '\n' ? 1 : col + 1;
            diag_add_source(d, o->input, text, at);
            error_at(d, (SrcLoc){o->input, line, col}, "the file contains a NUL byte");
            free(text);
            return NULL;
        }
        g = ir_parse(o->input, text, d);
        free(text);
        if (!g) return NULL;
        for (int i = 0; i < o->ndefs; i++) {
            char err[256];
            if (!train_set(&g->train, g->arena, o->defs[i].name, o->defs[i].value, err, sizeof err)) {
                error_at(d, NOLOC, "-D %s=%s: %s", o->defs[i].name, o->defs[i].value, err);
                ir_graph_free(g);
                return NULL;
            }
        }
    } else {
        g = fe_load_file(o->input, o->defs, o->ndefs, d);
        if (!g) {
            if (!d->nerrors) error_at(d, NOLOC, "cannot load '%s'", o->input);
            return NULL;
        }
        if (d->nerrors) {
            ir_graph_free(g);
            return NULL;
        }
    }
    if (!o->no_verify && !ir_verify(g, d)) {
        ir_graph_free(g);
        return NULL;
    }
    return g;
}

static bool run_passes(Opts *o, Graph *g, const char *const *names, int n, Diag *d) {
    PMOptions pm = {0};
    pm.print_after = o->print_after;
    pm.nprint_after = o->nprint_after;
    pm.print_before = o->print_before;
    pm.nprint_before = o->nprint_before;
    pm.print_after_all = o->print_after_all;
    pm.time_passes = o->time_passes;
    pm.verify_each = !o->no_verify;
    pm.print.locs = !o->no_locs;
    pm.dump = stderr;
    PassOptions po = {0};
    return pm_run(g, names, n, &po, &pm, d);
}

/* Writes the graph as IR text or Graphviz to -o (or stdout). */
static int emit(Opts *o, Graph *g, Diag *d) {
    FILE *f = stdout;
    if (o->output && strcmp(o->output, "-") != 0) {
        f = fopen(o->output, "w");
        if (!f) {
            error_at(d, NOLOC, "cannot write '%s': %s", o->output, strerror(errno));
            return EXIT_USER;
        }
    }
    if (o->emit && strcmp(o->emit, "dot") == 0) {
        ir_print_dot(f, g);
    } else {
        PrintOptions po = {!o->no_locs};
        ir_print(f, g, &po);
    }
    bool bad = ferror(f) != 0;
    if (f != stdout) bad |= fclose(f) != 0;
    else bad |= fflush(f) != 0;
    if (bad) {
        error_at(d, NOLOC, "error writing '%s'", f == stdout ? "<stdout>" : o->output);
        return EXIT_USER;
    }
    if (o->stats) ir_print_stats(stderr, g);
    return EXIT_OK;
}

/* ---- the commands ---- */

static int cmd_check(Opts *o) {
    Diag d;
    diag_init(&d, stderr);
    Graph *g = load(o, &d);
    int st = g ? EXIT_OK : EXIT_USER;
    if (g && o->stats) ir_print_stats(stdout, g);
    if (g && o->verbose) printf("%s: ok\n", o->input);
    ir_graph_free(g);
    diag_free(&d);
    return st;
}

static int cmd_ir(Opts *o) {
    Diag d;
    diag_init(&d, stderr);
    Graph *g = load(o, &d);
    int st = g ? EXIT_OK : EXIT_USER;
    if (g && o->train) {
        const char *names[64];
        int n = pm_training_pipeline(g, NULL, names, 64);
        if (n > 64) die("training pipeline longer than 64 passes");
        if (!run_passes(o, g, names, n, &d)) st = EXIT_USER;
    }
    if (st == EXIT_OK) st = emit(o, g, &d);
    ir_graph_free(g);
    diag_free(&d);
    return st;
}

static int cmd_opt(Opts *o) {
    Diag d;
    diag_init(&d, stderr);
    Graph *g = load(o, &d);
    int st = g ? EXIT_OK : EXIT_USER;
    if (g && !run_passes(o, g, o->passes, o->npasses, &d)) st = EXIT_USER;
    if (st == EXIT_OK) st = emit(o, g, &d);
    ir_graph_free(g);
    diag_free(&d);
    return st;
}

/* ---- main ---- */

static void free_opts(Opts *o) {
    for (int i = 0; i < o->ndefs; i++) free((char *)o->defs[i].name);
    for (int i = 0; i < o->npasses; i++) free((char *)o->passes[i]);
    for (int i = 0; i < o->nprint_after; i++) free((char *)o->print_after[i]);
    for (int i = 0; i < o->nprint_before; i++) free((char *)o->print_before[i]);
    free(o->defs);
    free(o->passes);
    free(o->print_after);
    free(o->print_before);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage_main(stderr);
        return EXIT_USAGE;
    }
    const char *c = argv[1];
    if (strcmp(c, "--help") == 0 || strcmp(c, "-h") == 0 || strcmp(c, "help") == 0) {
        usage_main(stdout);
        return EXIT_OK;
    }
    if (strcmp(c, "--version") == 0) {
        printf("trainc %s\n", TRAINC_VERSION);
        return EXIT_OK;
    }
    const Command *cmd = NULL;
    for (int i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, c) == 0) cmd = &commands[i];
    if (!cmd) return usage_error(NULL, "unknown command '%s'", c);
    Opts o = {0};
    o.cmd = cmd->name;
    int st = parse_args(&o, cmd, argc, argv, 2);
    if (st < 0) st = cmd->run(&o);
    free_opts(&o);
    return st;
}
