/* tools/trainc.c — the trainc command-line driver (docs/driver.md).
 *
 *   trainc COMMAND [OPTIONS] FILE
 *
 * A command is one row of `commands` and one function; the options are one
 * table (`flags`) shared by every command, each row naming the commands it
 * applies to (NULL: all); `trainc run` also takes the runtime's flags
 * (`rt_flags`) and hands them to trn_main.  Exit status: 0 success, 1 a
 * user error (bad input, failed verification or pass), 2 a usage error
 * (bad command line).
 */
#include "ir.h"
#include "compile.h"
#include "interp_backend.h"
#include "trainc_flags.h"
#include "trainc_rt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
    const char  *emit;            /* ir/opt: "ir" or "dot"; compile: "kernels", "c", "lib" */
    /* compile and run */
    const char **sets;            /* --set KEY=VALUE (NULL-terminated) */
    int          nsets;
    bool         keep, report, no_fuse, native, fp64, no_blas, no_tc;
    int          tc_rows;         /* --tc-attention-rows (0: not given) */
    const char  *target, *cc, *opt_level, *precision, *archs, *symbol;
    int          pad_multiple;
    const char  *pass_flag;       /* the first option given that only passes read (--precision, --time-passes, ...) */
    /* run: the arguments handed to the runtime (argv[0] first) */
    char       **rt_argv;
    int          rt_argc;
    bool         rt_quiet;        /* --quiet among them: the compiler's notes of no warning go too */
    bool         run_help;        /* trainc run --help: the usage, and a model's defaults when one is given */
    bool         pass_ran[32];    /* PMOptions.ran: the passes that ran (a dump asked of one that did not: warn_unrun) */
} Opts;

/* ---- options ---- */

typedef enum {
    F_OUTPUT, F_DEFINE, F_PASSES, F_TRAIN, F_PRINT_AFTER, F_PRINT_AFTER_ALL, F_PRINT_BEFORE, F_TIME_PASSES,
    F_EMIT, F_STATS, F_NO_VERIFY, F_NO_LOCS, F_VERBOSE,
    F_SET, F_ARCH, F_SYMBOL, F_KEEP, F_REPORT, F_NO_FUSE, F_NO_TC, F_TC_ROWS, F_TARGET, F_CC, F_OPT_LEVEL, F_NATIVE, F_FP64, F_NO_BLAS, F_PRECISION, F_PAD_MULTIPLE,
} FlagId;

typedef struct Flag {
    FlagId      id;
    const char *name;             /* "--passes", "-D", "-o" */
    const char *arg;              /* NULL: takes no value */
    const char *cmds;             /* space-separated commands it applies to; NULL: every command */
    const char *help;
} Flag;

static const Flag flags[] = {
    {F_OUTPUT, "-o", "FILE", "ir opt compile", "write the output to FILE (compile: the executable, or the prefix of NAME.c/NAME.h/NAME.cu)"},
    {F_DEFINE, "-D", "NAME=VALUE", NULL, "set a model constant (.model) or a train key (.ir); also -DNAME=VALUE"},
    {F_PASSES, "--passes", "a,b,c", "opt", "the passes to run, in order (see the list below)"},
    {F_TRAIN, "--train", NULL, "ir", "print the training graph (after the standard training pipeline)"},
    {F_PRINT_AFTER, "--print-ir-after", "PASS", "ir opt compile run", "dump the IR after PASS runs (repeatable)"},
    {F_PRINT_AFTER_ALL, "--print-ir-after-all", NULL, "ir opt compile run", "dump the IR after every pass"},
    {F_PRINT_BEFORE, "--print-ir-before", "PASS", "ir opt compile run", "dump the IR before PASS runs (repeatable)"},
    {F_TIME_PASSES, "--time-passes", NULL, "ir opt compile run", "print the time each pass took, to stderr"},
    {F_EMIT, "--emit", "FORMAT", "ir opt compile", "ir, opt: ir (default) or dot (Graphviz); compile: kernels (print the schedule), c (write NAME.c), lib (NAME.c, NAME.h and the runtime, to link into another program), cuda (with --target=cuda: NAME.cu and the per-kernel resource report)"},
    {F_SET, "--set", "KEY=VALUE", "compile run ir", "override a key of the model's train section (e.g. --set grad_accum=4)"},
    {F_ARCH, "--arch", "sm_80,sm_90", "compile", "cuda target: the GPU architectures to build cubin for (and PTX of the oldest, for newer GPUs)"},
    {F_SYMBOL, "--symbol", "ID", "compile", "--emit=lib or c: name the model's descriptor trn_model_ID (default: from the model's name), so that two builds of one model link into one program"},
    {F_KEEP, "--keep", NULL, "compile", "keep the generated C source (NAME.c) next to the executable"},
    {F_REPORT, "--report", NULL, "compile", "print the memory plan (every byte of a training step) before anything runs"},
    {F_NO_FUSE, "--no-fuse", NULL, "compile", "one kernel per op: turn generic fusion off"},
    {F_NO_TC, "--no-tc-attention", NULL, "compile", "cuda target: bf16/fp16 attention on the CUDA cores, not tensor cores"},
    {F_TC_ROWS, "--tc-attention-rows", "1|2", "compile", "cuda target: tiles of 16 query rows a warp in the tensor-core attention forward and dq (default: 2 up to head dim 64, else 1)"},
    {F_TARGET, "--target", "cpu|cuda", "compile", "the backend (default cpu)"},
    {F_CC, "--cc", "CC", "compile", "the C compiler (default: $CC, else cc; split at blanks)"},
    {F_OPT_LEVEL, "--copt", "FLAG", "compile", "the C compiler's optimisation flag (default -O2; --copt= gives none)"},
    {F_NATIVE, "--native", NULL, "compile", "compile for this machine's CPU (-march=native): the executable then depends on it"},
    {F_NO_BLAS, "--no-blas", NULL, "compile", "matrix products as plain loops instead of OpenBLAS"},
    {F_FP64, "--fp64", NULL, "run", "interpret in f64 instead of rounding every value to its dtype"},
    {F_PRECISION, "--precision", "fp32|tf32|bf16|fp16", "compile run ir opt", "override the train section's precision"},
    {F_PAD_MULTIPLE, "--pad-multiple", "N", "compile run ir opt", "pad GEMM dimensions to multiples of N (0: chosen from dtype and target)"},
    {F_STATS, "--stats", NULL, NULL, "print node counts, parameters and FLOPs"},
    {F_NO_VERIFY, "--no-verify", NULL, NULL, "do not verify the input and the IR after every pass"},
    {F_NO_LOCS, "--no-locs", NULL, NULL, "do not print '# file:line:col' source locations"},
    {F_VERBOSE, "-v", NULL, NULL, "say what is done (check: 'FILE: ok')"},
};
#define NFLAGS ((int)(sizeof flags / sizeof flags[0]))

/* The runtime's flags, which `trainc run` checks and hands to trn_main:
 * the list runtime/main.c parses (runtime/trainc_flags.h; --help is
 * trainc's own).  tests/ir/driver/run.ir compares the two --help texts. */
typedef enum { RTF_STR, RTF_INT, RTF_F64, RTF_BOOL } RtFlagType;

typedef struct RtFlag {
    const char *name;             /* "--steps" */
    const char *arg;              /* NULL: takes no value (RTF_BOOL) */
    RtFlagType  type;
    const char *help;
} RtFlag;

#define X(name, arg, type, field, given, help) {"--" name, arg, RTF_##type, help},
static const RtFlag rt_flags[] = {TRN_RUNTIME_FLAGS(X)};
#undef X
#define NRT_FLAGS ((int)(sizeof rt_flags / sizeof rt_flags[0]))

/* ---- commands ---- */

static int cmd_check(Opts *o);
static int cmd_ir(Opts *o);
static int cmd_opt(Opts *o);
static int cmd_compile(Opts *o);
static int cmd_run(Opts *o);

typedef struct Command {
    const char *name;
    int (*run)(Opts *o);
    const char *args;             /* the synopsis after the command name */
    const char *summary;
} Command;

static const Command commands[] = {
    {"check", cmd_check, "FILE.model|FILE.ir|- [-D NAME=VALUE]...", "load a model and verify it; prints nothing on success"},
    {"ir", cmd_ir, "FILE.model|FILE.ir|- [--train] [-o OUT]", "print the graph IR of a model (--train: the training graph)"},
    {"opt", cmd_opt, "--passes=a,b,c FILE.ir|FILE.model|- [-o OUT]", "run passes over a graph and print the result"},
    {"compile", cmd_compile, "FILE.model [-o NAME] [--emit=kernels|c|lib|cuda] [--report] [--target=cpu|cuda]",
     "compile a model into a training executable (or a library)"},
    {"run", cmd_run, "FILE.model [-D NAME=VALUE]... [RUNTIME OPTIONS]",
     "train a model with the reference interpreter (slow); runtime options as for a compiled executable (--data, --steps, ...)"},
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
               "       trainc --help | --version | COMMAND --help | help COMMAND\n\n"
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
    if (strcmp(c->name, "run") == 0) {
        fprintf(f, "\nruntime options (a compiled executable's flags, docs/runtime.md; defaults from the model's train section):\n");
        for (int i = 0; i < NRT_FLAGS; i++) {
            char lhs[64];
            snprintf(lhs, sizeof lhs, "%s%s%s", rt_flags[i].name, rt_flags[i].arg ? " " : "", rt_flags[i].arg ? rt_flags[i].arg : "");
            fprintf(f, "  %-26s %s\n", lhs, rt_flags[i].help);
        }
    }
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

/* Appends the comma-separated names in s to *list; an empty name ("",
 * "cse,", "a,,b": a slip) is a usage error of flag. */
static int split_list(const char *cmd, const char *flag, const char *s, const char ***list, int *n) {
    const char *p = s;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (!len && !*s) return usage_error(cmd, "%s: an empty list (no pass named)", flag);
        if (!len) return usage_error(cmd, "%s: an empty name in '%s' (names are separated by single commas)", flag, s);
        char *name = xmalloc(len + 1);
        memcpy(name, p, len);
        name[len] = 0;
        *list = xrealloc(*list, sizeof(char *) * (size_t)(*n + 1));
        (*list)[(*n)++] = name;
        if (!e) break;
        p = e + 1;
    }
    return EXIT_OK;
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
        if (split_list(o->cmd, "--passes", val, &o->passes, &o->npasses)) return EXIT_USAGE;
        for (int i = 0; i < o->npasses; i++)
            if (check_pass_name(o->cmd, "--passes", o->passes[i])) return EXIT_USAGE;
        break;
    case F_TRAIN: o->train = true; break;
    case F_PRINT_AFTER:
    case F_PRINT_BEFORE: {
        bool after = f->id == F_PRINT_AFTER;
        int before = after ? o->nprint_after : o->nprint_before;
        if (split_list(o->cmd, f->name, val, after ? &o->print_after : &o->print_before, after ? &o->nprint_after : &o->nprint_before))
            return EXIT_USAGE;
        int now = after ? o->nprint_after : o->nprint_before;
        for (int i = before; i < now; i++)
            if (check_pass_name(o->cmd, f->name, (after ? o->print_after : o->print_before)[i])) return EXIT_USAGE;
        break;
    }
    case F_PRINT_AFTER_ALL: o->print_after_all = true; break;
    case F_TIME_PASSES: o->time_passes = true; break;
    case F_EMIT:
        if (strcmp(o->cmd, "compile") == 0) {
            if (strcmp(val, "kernels") != 0 && strcmp(val, "c") != 0 && strcmp(val, "lib") != 0 && strcmp(val, "cuda") != 0)
                return usage_error(o->cmd, "--emit takes 'kernels', 'c', 'lib' or 'cuda', not '%s'", val);
        } else if (strcmp(val, "ir") != 0 && strcmp(val, "dot") != 0) {
            return usage_error(o->cmd, "--emit takes 'ir' or 'dot', not '%s'", val);
        }
        o->emit = val;
        break;
    case F_SET:
        if (!strchr(val, '=') || *val == '=') return usage_error(o->cmd, "--set takes KEY=VALUE, not '%s'", val);
        o->sets = xrealloc(o->sets, sizeof(char *) * (size_t)(o->nsets + 2));
        o->sets[o->nsets++] = val;
        o->sets[o->nsets] = NULL;
        break;
    case F_ARCH: {
        /* the list's form, before anything is compiled: sm_NN names, each
         * once, at most 7 (whether this NVRTC compiles for one is known
         * when it is loaded, at compile time) */
        int n = 0, seen[8];
        if (!*val) return usage_error(o->cmd, "--arch: the list is empty (the default is sm_80,sm_90)");
        for (const char *p = val;;) {
            const char *e = strchr(p, ',');
            int len = e ? (int)(e - p) : (int)strlen(p), sm = 0, k = 3;
            while (k < len && k < 7 && p[k] >= '0' && p[k] <= '9') sm = sm * 10 + (p[k++] - '0');
            if (strncmp(p, "sm_", 3) != 0 || k == 3 || k != len || sm < 50)
                return usage_error(o->cmd, "--arch: '%.*s' is not a GPU architecture like sm_80 or sm_90", len, p);
            for (int i = 0; i < n; i++)
                if (seen[i] == sm) return usage_error(o->cmd, "--arch: sm_%d is named twice", sm);
            if (n == 7) return usage_error(o->cmd, "--arch: more than 7 architectures");
            seen[n++] = sm;
            if (!e) break;
            p = e + 1;
        }
        o->archs = val;
        break;
    }
    case F_SYMBOL: {
        /* a C identifier, short enough for a linker's messages */
        size_t n = strlen(val);
        bool ok = n > 0 && n <= 200 && !(val[0] >= '0' && val[0] <= '9');
        for (size_t i = 0; ok && i < n; i++)
            ok = (val[i] >= 'a' && val[i] <= 'z') || (val[i] >= 'A' && val[i] <= 'Z') || (val[i] >= '0' && val[i] <= '9') || val[i] == '_';
        if (!ok) return usage_error(o->cmd, "--symbol takes a C identifier of at most 200 characters (letters, digits, '_'), not '%s'", val);
        o->symbol = val;
        break;
    }
    case F_KEEP: o->keep = true; break;
    case F_REPORT: o->report = true; break;
    case F_NO_FUSE: o->no_fuse = true; break;
    case F_NO_TC: o->no_tc = true; break;
    case F_TC_ROWS:
        if (strcmp(val, "1") != 0 && strcmp(val, "2") != 0) return usage_error(o->cmd, "--tc-attention-rows takes 1 or 2, not '%s'", val);
        o->tc_rows = val[0] - '0';
        break;
    case F_TARGET:
        if (strcmp(val, "cpu") != 0 && strcmp(val, "cuda") != 0) return usage_error(o->cmd, "--target takes 'cpu' or 'cuda', not '%s'", val);
        o->target = val;
        break;
    case F_CC: o->cc = val; break;
    case F_OPT_LEVEL: o->opt_level = val; break;
    case F_NATIVE: o->native = true; break;
    case F_NO_BLAS: o->no_blas = true; break;
    case F_FP64: o->fp64 = true; break;
    case F_PRECISION:
        if (strcmp(val, "fp32") && strcmp(val, "tf32") && strcmp(val, "bf16") && strcmp(val, "fp16"))
            return usage_error(o->cmd, "--precision takes fp32, tf32, bf16 or fp16, not '%s'", val);
        o->precision = val;
        break;
    case F_PAD_MULTIPLE: {
        char *end;
        long v = strtol(val, &end, 10);
        if (*val < '0' || *val > '9' || *end || v < 0 || v > 4096) /* digits only: not " 8", "+8" */
            return usage_error(o->cmd, "--pad-multiple takes an integer 0..4096, not '%s'", val);
        o->pad_multiple = (int)v;
        break;
    }
    case F_STATS: o->stats = true; break;
    case F_NO_VERIFY: o->no_verify = true; break;
    case F_NO_LOCS: o->no_locs = true; break;
    case F_VERBOSE: o->verbose = true; break;
    }
    return EXIT_OK;
}

/* trainc run: argv[*i] as a runtime flag, with its value (the next
 * argument unless --flag=VALUE), its value checked as runtime/main.c
 * checks it (trn_flag_int, trn_flag_f64), and appended to o->rt_argv.  Returns an exit
 * status, or -1 when it is not a runtime flag. */
static int runtime_flag(Opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i], *eq = strchr(a, '=');
    size_t n = eq ? (size_t)(eq - a) : strlen(a);
    const RtFlag *f = NULL;
    for (int k = 0; k < NRT_FLAGS && !f; k++)
        if (strlen(rt_flags[k].name) == n && strncmp(rt_flags[k].name, a, n) == 0) f = &rt_flags[k];
    if (!f) return -1;
    const char *val = eq ? eq + 1 : NULL;
    if (!f->arg && val) return usage_error(o->cmd, "option '%s' takes no value", f->name);
    o->rt_argv[o->rt_argc++] = argv[*i];
    if (strcmp(f->name, "--quiet") == 0) o->rt_quiet = true;
    if (f->arg && !val) {
        if (*i + 1 >= argc) return usage_error(o->cmd, "option '%s' needs a value (%s)", f->name, f->arg);
        val = argv[++*i];
        o->rt_argv[o->rt_argc++] = argv[*i];
        /* "--save --quiet": the value forgotten (as runtime/main.c says) */
        size_t vn = strcspn(val, "=");
        bool flag = strcmp(val, "-h") == 0 || strcmp(val, "--help") == 0;
        for (int k = 0; k < NRT_FLAGS && !flag; k++) flag = strlen(rt_flags[k].name) == vn && strncmp(rt_flags[k].name, val, vn) == 0;
        for (int k = 0; k < NFLAGS && !flag; k++) {
            const char *fn = flags[k].name;
            flag = fn[1] == '-' ? strlen(fn) == vn && strncmp(fn, val, vn) == 0   /* --stats, --pad-multiple=64 */
                                : applies(&flags[k], "run") && strncmp(fn, val, 2) == 0 && (val[2] == 0 || flags[k].arg); /* -v; -D, -DNAME=VALUE */
        }
        if (flag)
            return usage_error(o->cmd, "option '%s' needs a value (%s), not the option %s (%s=%s %s)", f->name, f->arg, val, f->name, val,
                               strcmp(f->arg, "FILE") == 0 ? "names a file of that name" : "is that value");
    }
    int64_t iv;
    double dv;
    if (f->type == RTF_INT && trn_flag_int(val, &iv) != 0)
        return usage_error(o->cmd, "%s takes a non-negative integer, not '%s'%s", f->name, val, trn_flag_digits(val, 0) ? " (past 64 bits)" : "");
    if (f->type == RTF_F64 && trn_flag_f64(val, &dv) != 0)
        return usage_error(o->cmd, "%s takes a non-negative number, not '%s'%s", f->name, val,
                           trn_flag_digits(val, 1) && errno == ERANGE ? " (out of a double's range)" : "");
    return EXIT_OK;
}

/* Parses argv[from..] into o; returns an exit status, or -1 to go on. */
static int parse_args(Opts *o, const Command *c, int argc, char **argv, int from) {
    o->rt_argv = xcalloc((size_t)argc + 2, sizeof(char *));
    o->rt_argv[o->rt_argc++] = "trainc run";
    bool files_only = false; /* after "--": -dash.model is a file */
    for (int i = from; i < argc; i++) {
        const char *a = argv[i];
        if (!files_only && strcmp(a, "--") == 0) {
            files_only = true;
            continue;
        }
        if (files_only) a = "";
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            if (strcmp(o->cmd, "run") != 0) {
                usage_cmd(stdout, c);
                return EXIT_OK;
            }
            o->run_help = true; /* with a model, its train section's defaults follow (cmd_run) */
            continue;
        }
        bool run = strcmp(o->cmd, "run") == 0;
        if (files_only || a[0] != '-' || strcmp(a, "-") == 0) {
            a = argv[i];
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
            else if (fl->name[1] == '-' && a[n] == '=') f = fl, val = a + n + 1; /* a flag without a value says so below */
            else if (fl->arg && fl->name[1] != '-') f = fl, val = a + n; /* -DNAME=VALUE, -oFILE */
        }
        if (run && (!f || !applies(f, o->cmd))) {
            /* a runtime option (--steps N, --report): handed to the training loop */
            int st = runtime_flag(o, argc, argv, &i);
            if (st == EXIT_OK) continue;
            if (st > 0) return st;
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
        if (!o->pass_flag && (f->id == F_PRECISION || f->id == F_PAD_MULTIPLE || f->id == F_PRINT_AFTER || f->id == F_PRINT_AFTER_ALL ||
                              f->id == F_PRINT_BEFORE || f->id == F_TIME_PASSES))
            o->pass_flag = f->name;
    }
    if (!o->input && o->run_help) {
        usage_cmd(stdout, c);
        return EXIT_OK;
    }
    if (!o->input) return usage_error(o->cmd, "no input file");
    return -1;
}

/* ---- shared steps ---- */

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* ---- train keys an .ir graph already embodies ---- */

/* Which pass built the key's value into g, and when the key must be set
 * instead; NULL where g does not embody it (a key only the runtime reads:
 * lr, steps, schedule, warmup, seed, ...; or one whose pass has not run). */
typedef struct Built { const char *pass, *before; } Built;

static bool has_updates(const Graph *g) {
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i].kind == OUT_UPDATE) return true;
    return ir_find_source((Graph *)g, OP_input, "opt.lr") != NULL;
}

static bool has_node(const Graph *g, Op op, const char *attr) {
    for (int i = 0; i < g->nnodes; i++)
        if ((op == OP__COUNT || g->nodes[i]->op == op) && (!attr || ir_int(g->nodes[i], attr, 0))) return true;
    return false;
}

static const Built built_opt = {"the optimizer pass", "before autodiff and the optimizer run"};
static const Built built_lora = {"lora", "before lora runs"};
static const Built built_freeze = {"freeze", "before freeze runs"};
static const Built built_liger = {"liger-fusion", "before liger-fusion runs"};
static const Built built_mp = {"mixed-precision", "before mixed-precision runs"};
static const Built built_pad = {"pad-tiles", "before pad-tiles runs"};
static const Built built_ckpt = {"the checkpoint pass", "before the checkpoint pass runs"};

static const Built *built_by(const Graph *g, const char *key) {
    static const struct { const char *key; const Built *by; } keys[] = {
        {"optimizer", &built_opt},   {"beta1", &built_opt},     {"beta2", &built_opt},        {"eps", &built_opt},
        {"weight_decay", &built_opt}, {"decay_all", &built_opt}, {"momentum", &built_opt},     {"nesterov", &built_opt},
        {"grad_clip", &built_opt},   {"grad_accum", &built_opt}, {"loss_scale_window", &built_opt},
        {"lora_rank", &built_lora},  {"lora_alpha", &built_lora}, {"lora_targets", &built_lora}, {"freeze", &built_freeze},
        {"fusion", &built_liger},    {"memory_budget", &built_liger}, {"precision", &built_mp}, {"loss_scale", &built_mp},
        {"pad_tiles", &built_pad},   {"pad_multiple", &built_pad}, {"checkpoint", &built_ckpt}, {"checkpoint_blocks", &built_ckpt},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (strcmp(keys[i].key, key) != 0) continue;
        const Built *b = keys[i].by;
        if (b == &built_opt) return has_updates(g) ? b : NULL;
        /* checkpointing runs on a training graph: settable before it, kept after */
        if (b == &built_ckpt) return has_node(g, OP__COUNT, "recompute") ? b : NULL;
        /* the chunk of linear + cross-entropy comes from the budget */
        if (strcmp(key, "memory_budget") == 0) return g->is_training && has_node(g, OP_linear_cross_entropy, NULL) ? b : NULL;
        if (g->is_training) return b;
        /* a forward graph after mixed-precision (the other forward passes
         * may run on theirs again) */
        const char *mp = b == &built_mp ? pm_mixed_precision_of(g) : NULL;
        return mp && (strcmp(key, "precision") == 0 || strcmp(mp, "fp16") == 0) ? b : NULL;
    }
    return NULL;
}

/* -D or --set KEY=VALUE on an .ir graph: false, after an error at the key
 * in the file (or the graph's `training` word), when VALUE changes a key
 * that the graph's passes have built into it, e.g. grad_accum in a graph
 * whose optimizer made no accumulators: the header would say one thing and
 * the graph do another (the runtime runs grad_accum micro-batches). */
static bool train_change_ok(Graph *g, const char *flag, const char *key, const char *value, Diag *d) {
    const TrainKeyInfo *k = train_key_lookup(key);
    const Built *b = k ? built_by(g, k->name) : NULL;
    TrainConfig t = g->train;
    char err[256];
    if (!b || !train_set(&t, g->arena, key, value, err, sizeof err)) return true; /* (a bad value: train_set's error, after) */
    if (train_value_eq(&g->train, &t, k)) return true;
    StrBuf was = {0};
    ir_put_train_value(&was, &g->train, k);
    SrcLoc at = g->train.at[k - train_keys];
    bool dflt = !at.file;
    if (dflt) at = g->training_loc;
    /* a forward pass's key in a training graph: the pipeline ran with it,
     * whether or not that pass had anything to do (pad-tiles on a model
     * with nothing to pad) */
    bool fwd = g->is_training && b != &built_opt && b != &built_ckpt && strcmp(key, "memory_budget") != 0;
    error_at(d, at, "%s %s=%s: %s is %s%s in %sgraph '%s', which %s%s: set %s %s", flag, key, value, k->name, was.s,
             dflt ? " (the default)" : "", g->is_training ? "training " : "", g->name, fwd ? "was built with that value" : b->pass,
             fwd ? "" : " built for it", k->name, b->before);
    sb_free(&was);
    return false;
}

/* `-`: the input is standard input (check, ir and opt), named <stdin> in
 * locations. */
static bool is_stdin(const Opts *o) { return strcmp(o->input, "-") == 0; }

/* Whether text is IR: its first word, past blank and comment lines, is
 * `graph` (a .model's is const, block, model or train). */
static bool looks_like_ir(const char *text) {
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
        if (*p != '#') break;
        while (*p && *p != '\n') p++;
    }
    return strncmp(p, "graph", 5) == 0 && (p[5] == ' ' || p[5] == '\t' || p[5] == '@');
}

/* The model's graph, elaborated by the front end; NULL after errors. */
static Graph *load_model(Opts *o, const char *name, const char *text, Diag *d) {
    Graph *g = text ? fe_load_string(name, text, o->defs, o->ndefs, d) : fe_load_file(name, o->defs, o->ndefs, d);
    if (!g) {
        if (!d->nerrors) error_at(d, NOLOC, "cannot load '%s'", name);
        return NULL;
    }
    if (d->nerrors) {
        ir_graph_free(g);
        return NULL;
    }
    return g;
}

/* The text of an .ir file or of standard input (`name` in messages);
 * NULL after an error (unreadable, too large, a NUL byte). */
static char *read_input(Opts *o, const char *name, bool in, Diag *d) {
    size_t len = 0;
    char *text = in ? read_stream_max(stdin, SOURCE_MAX, &len) : read_file_max(o->input, SOURCE_MAX, &len);
    if (!text && errno == EFBIG) {
        error_at(d, (SrcLoc){name, 0, 0}, "the %s is too large (more than %zu bytes)", in ? "input" : "file", SOURCE_MAX);
        return NULL;
    }
    if (!text) {
        error_at(d, NOLOC, "cannot read '%s': %s", name, strerror(errno));
        return NULL;
    }
    if (strlen(text) != len) {
        size_t at = strlen(text);
        int line = 1, col = 1;
        for (size_t i = 0; i < at; i++) line += text[i] == '\n', col = text[i] == '\n' ? 1 : col + 1;
        diag_add_source(d, name, text, at);
        error_at(d, (SrcLoc){name, line, col}, "the %s contains a NUL byte", in ? "input" : "file");
        free(text);
        return NULL;
    }
    return text;
}

/* -D on an IR graph: train keys (train_change_ok, then train_set). */
static bool set_ir_defs(Opts *o, Graph *g, Diag *d) {
    for (int i = 0; i < o->ndefs; i++) {
        char err[256];
        if (!train_change_ok(g, "-D", o->defs[i].name, o->defs[i].value, d)) return false;
        if (!train_set(&g->train, g->arena, o->defs[i].name, o->defs[i].value, err, sizeof err)) {
            error_at(d, NOLOC, "-D %s=%s: %s", o->defs[i].name, o->defs[i].value, err);
            return false;
        }
    }
    return true;
}

/* Loads the input: .ir files with the IR parser, everything else with the
 * front end; standard input (`-`) with the one its text is for.  Verifies
 * the result unless --no-verify.  NULL after errors. */
static Graph *load(Opts *o, Diag *d) {
    Graph *g = NULL;
    bool in = is_stdin(o);
    const char *name = in ? "<stdin>" : o->input;
    if (in || ends_with(o->input, ".ir")) {
        char *text = read_input(o, name, in, d);
        if (!text) return NULL;
        bool ir = !in || looks_like_ir(text);
        g = ir ? ir_parse(name, text, d) : load_model(o, name, text, d);
        free(text);
        if (g && ir && !set_ir_defs(o, g, d)) {
            ir_graph_free(g);
            g = NULL;
        }
    } else {
        g = load_model(o, name, NULL, d);
    }
    if (g && !o->no_verify && !ir_verify(g, d)) {
        ir_graph_free(g);
        g = NULL;
    }
    return g;
}

static PMOptions pm_options(Opts *o) {
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
    if (npass_list > (int)(sizeof o->pass_ran / sizeof o->pass_ran[0])) die("more passes than Opts.pass_ran holds");
    pm.ran = o->pass_ran;
    return pm;
}

/* After the passes: a dump asked of a pass that did not run printed
 * nothing; said once per pass, so that an empty dump is not taken for a
 * pass that left no trace (--print-ir-after=fold with --passes=cse). */
static void warn_unrun(Opts *o, Diag *d) {
    for (int k = 0; k < 2; k++) {
        const char **names = k ? o->print_before : o->print_after;
        int n = k ? o->nprint_before : o->nprint_after;
        for (int i = 0; i < n; i++) {
            const PassInfo *p = pass_lookup(names[i]);
            bool dup = false;
            for (int j = 0; j < i; j++) dup |= strcmp(names[j], names[i]) == 0;
            if (p && !dup && !o->pass_ran[p - pass_list])
                warning_at(d, NOLOC, "--print-ir-%s=%s: pass '%s' did not run, so nothing was dumped for it", k ? "before" : "after", names[i], names[i]);
        }
    }
}

static PassOptions pass_options(Opts *o) {
    PassOptions po = {0};
    po.precision = o->precision;
    po.pad_multiple = o->pad_multiple;
    po.target = o->target;
    return po;
}

static bool run_passes(Opts *o, Graph *g, const char *const *names, int n, const PassOptions *po, Diag *d) {
    PMOptions pm = pm_options(o);
    return pm_run(g, names, n, po, &pm, d);
}

static CompileOptions compile_options(Opts *o) {
    CompileOptions c = {0};
    c.model = o->input;
    c.defs = o->defs;
    c.ndefs = o->ndefs;
    c.out = o->output;
    c.emit = o->emit;
    c.target = o->target;
    c.keep = o->keep;
    c.report = o->report;
    c.stats = o->stats;
    c.fuse = !o->no_fuse;
    c.no_tc_attention = o->no_tc;
    c.tc_attention_rows = o->tc_rows;
    c.blas = !o->no_blas;
    c.native = o->native;
    c.verbose = o->verbose;
    c.cc = o->cc;
    c.opt = o->opt_level;
    c.sets = o->sets;
    c.archs = o->archs;
    c.symbol = o->symbol;
    c.po = pass_options(o);
    c.pm = pm_options(o);
    return c;
}

/* Writes the graph as IR text or Graphviz to -o (or stdout), whole or
 * not at all (out_open: the input itself, where an .ir file is rewritten
 * in place, survives a failed write). */
static int emit(Opts *o, Graph *g, Diag *d) {
    FILE *f = stdout;
    OutWrite w = {0};
    if (o->output && strcmp(o->output, "-") != 0 && !(f = out_open(&w, o->output, "w"))) {
        error_at(d, NOLOC, "cannot write '%s': %s", o->output, strerror(errno));
        return EXIT_USER;
    }
    if (o->emit && strcmp(o->emit, "dot") == 0) {
        ir_print_dot(f, g);
    } else {
        PrintOptions po = {!o->no_locs};
        ir_print(f, g, &po);
    }
    /* stdout is checked by main (stdout_checked), after every command */
    if (f != stdout && !out_close(&w, true)) {
        error_at(d, NOLOC, "error writing '%s'", o->output);
        if (w.kept) note_at(d, NOLOC, "'%s' may be cut short: the whole output is in '%s'", o->output, w.tmp);
        return EXIT_USER;
    }
    if (o->stats) {
        fflush(stdout); /* after the IR, also where stdout and stderr share a pipe */
        ir_print_stats(stderr, g);
    }
    return EXIT_OK;
}

/* ---- the commands ---- */

static int cmd_check(Opts *o) {
    Diag d;
    diag_init(&d, stderr);
    Graph *g = load(o, &d);
    int st = g ? EXIT_OK : EXIT_USER;
    if (g && o->stats) ir_print_stats(stdout, g);
    if (g && o->verbose) printf("%s: ok\n", is_stdin(o) ? "<stdin>" : o->input);
    ir_graph_free(g);
    diag_free(&d);
    return st;
}

/* ir without --train and opt without --passes run no pass: an option
 * only a pass reads would be ignored (check refuses them outright). */
static int no_passes(const Opts *o, const char *why) {
    if (!o->pass_flag) return -1;
    return usage_error(o->cmd, "option '%s' does nothing without %s: 'trainc %s' runs no pass then", o->pass_flag, why, o->cmd);
}

static int cmd_ir(Opts *o) {
    if (!o->train && no_passes(o, "--train") >= 0) return EXIT_USAGE;
    Diag d;
    diag_init(&d, stderr);
    Graph *g = load(o, &d);
    int st = g ? EXIT_OK : EXIT_USER;
    for (int i = 0; g && st == EXIT_OK && i < o->nsets; i++) {
        const char *eq = strchr(o->sets[i], '=');
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)(eq - o->sets[i]), o->sets[i]);
        if (!train_change_ok(g, "--set", key, eq + 1, &d)) st = EXIT_USER;
    }
    if (g && st == EXIT_OK && !cg_apply_sets(g, o->sets, &d)) st = EXIT_USER;
    if (g && st == EXIT_OK && o->train && g->is_training) {
        /* each pass of the pipeline would refuse it, the first one to run without a location */
        error_at(&d, g->training_loc, "graph '%s' is already a training graph: --train takes a forward graph", g->name);
        st = EXIT_USER;
    }
    if (g && st == EXIT_OK && o->train) {
        const char *names[64];
        PassOptions po = pass_options(o);
        /* checkpoint = budget: the blocks chosen from the memory plan, as
         * trainc compile and run choose them */
        if (g->train.checkpoint && strcmp(g->train.checkpoint, "budget") == 0) {
            CompileOptions c = compile_options(o);
            if (ends_with(o->input, ".ir") || is_stdin(o)) /* the trial builds compile the file, a .model */
                st = usage_error(o->cmd, "'%s': checkpoint = budget is chosen from a .model file's memory plan (an .ir file%s takes none or blocks)",
                                 o->input, is_stdin(o) ? " or standard input" : "");
            else if (cg_choose_checkpoint(&c, &g->train, &d)) po = c.po;
            else st = EXIT_USER;
        }
        int n = pm_training_pipeline(g, &po, names, 64);
        if (n > 64) die("training pipeline longer than 64 passes");
        if (st == EXIT_OK && !run_passes(o, g, names, n, &po, &d)) st = EXIT_USER;
        if (st == EXIT_OK) warn_unrun(o, &d);
    }
    if (st == EXIT_OK) st = emit(o, g, &d);
    ir_graph_free(g);
    diag_free(&d);
    return st;
}

static int cmd_opt(Opts *o) {
    if (!o->npasses && no_passes(o, "--passes") >= 0) return EXIT_USAGE;
    Diag d;
    diag_init(&d, stderr);
    Graph *g = load(o, &d);
    int st = g ? EXIT_OK : EXIT_USER;
    PassOptions po = pass_options(o);
    if (g && !run_passes(o, g, o->passes, o->npasses, &po, &d)) st = EXIT_USER;
    if (st == EXIT_OK) warn_unrun(o, &d);
    if (st == EXIT_OK) st = emit(o, g, &d);
    ir_graph_free(g);
    diag_free(&d);
    return st;
}

/* compile and run: the front end's pipeline, from a .model file only */
static int model_only(Opts *o) {
    if (ends_with(o->input, ".ir"))
        return usage_error(o->cmd, "'%s': 'trainc %s' takes a .model file (an .ir file is read by check, ir and opt)", o->input, o->cmd);
    if (is_stdin(o))
        return usage_error(o->cmd, "'-': 'trainc %s' takes a .model file (standard input is read by check, ir and opt)", o->cmd);
    return -1;
}

static int cmd_compile(Opts *o) {
    int mo = model_only(o);
    if (mo >= 0) return mo;
    if (o->output && strcmp(o->output, "-") == 0)
        return usage_error(o->cmd, "-o - (standard output) is for ir and opt; compile writes files (NAME, NAME.c, ...)");
    if (o->emit && strcmp(o->emit, "cuda") == 0 && (!o->target || strcmp(o->target, "cuda") != 0))
        return usage_error(o->cmd, "--emit=cuda needs --target=cuda");
    if (o->archs && (!o->target || strcmp(o->target, "cuda") != 0)) return usage_error(o->cmd, "--arch needs --target=cuda");
    if (o->tc_rows && (!o->target || strcmp(o->target, "cuda") != 0)) return usage_error(o->cmd, "--tc-attention-rows needs --target=cuda");
    if (o->tc_rows && o->no_tc) return usage_error(o->cmd, "--tc-attention-rows is for the tensor-core attention, which --no-tc-attention turns off");
    if (o->emit && strcmp(o->emit, "kernels") == 0 && o->output)
        return usage_error(o->cmd, "-o does nothing with --emit=kernels, which prints the schedule on stdout");
    if (o->symbol && !(o->emit && (strcmp(o->emit, "lib") == 0 || strcmp(o->emit, "c") == 0)))
        return usage_error(o->cmd, "--symbol names what NAME.c defines for another program: it needs --emit=lib or --emit=c");
    /* an executable is built without --emit, unless --report alone; --emit=c keeps NAME.c anyway */
    bool exe = !o->emit && !(o->report && !o->output);
    if (o->keep && !exe && !(o->emit && strcmp(o->emit, "c") == 0))
        return usage_error(o->cmd, "--keep keeps NAME.c beside the executable it builds: this compile builds none");
    Diag d;
    diag_init(&d, stderr);
    CompileOptions c = compile_options(o);
    int st = cg_compile(&c, &d);
    if (st == EXIT_OK) warn_unrun(o, &d);
    diag_free(&d);
    return st;
}

static int cmd_run(Opts *o) {
    int mo = model_only(o);
    if (mo >= 0) return mo;
    Diag d;
    diag_init(&d, stderr);
    d.quiet = o->rt_quiet;
    CompileOptions c = compile_options(o);
    Graph *train, *eval, *sample;
    if (!cg_prepare(&c, &train, &eval, &sample, &d)) {
        diag_free(&d);
        return EXIT_USER;
    }
    warn_unrun(o, &d);
    int st = EXIT_USER;
    if (o->run_help) { /* the training graph's train section: the runtime options' defaults, as a compiled program's --help shows them */
        const TrainConfig *t = &train->train;
        for (int i = 0; i < NCOMMANDS; i++)
            if (strcmp(commands[i].name, "run") == 0) usage_cmd(stdout, &commands[i]);
        printf("\nModel '%s' (%s) trains by default with --steps %" PRId64 " --lr %g --min-lr %g --schedule %s --warmup %" PRId64
               " --seed %" PRId64 " --eval-every %" PRId64 " --eval-steps %" PRId64 " --save-every %" PRId64 " (its train section, "
               "else the runtime's defaults).\n",
               train->name, o->input, (int64_t)t->steps, t->lr, t->min_lr, t->schedule ? t->schedule : "constant", (int64_t)t->warmup,
               (int64_t)t->seed, (int64_t)t->eval_every, (int64_t)(t->eval_steps > 0 ? t->eval_steps : 10), (int64_t)t->save_every);
        st = EXIT_OK;
    } else {
        char *baked = train_baked(&train->train, o->defs, o->ndefs);
        InterpModel *im = ib_new(train, eval, sample, o->fp64 ? INTERP_F64 : INTERP_F32, o->input, baked, &d);
        if (im) {
            TrnBackend be = ib_backend(im);
            o->rt_argv[o->rt_argc] = NULL;
            st = trn_main(o->rt_argc, o->rt_argv, ib_model(im), &be);
            ib_free(im);
        }
        free(baked);
    }
    ir_graph_free(train);
    ir_graph_free(eval);
    ir_graph_free(sample);
    diag_free(&d);
    return st;
}

/* ---- main ---- */

/* A folder given as the input: reading one fails with EISDIR, or EIO
 * through stdio ("Input/output error"), which does not say what is wrong. */
static int check_input(const Opts *o) {
    struct stat sb;
    if (stat(o->input, &sb) != 0 || !S_ISDIR(sb.st_mode)) return -1;
    Diag d;
    diag_init(&d, stderr);
    error_at(&d, NOLOC, "cannot read '%s': %s", o->input, strerror(EISDIR));
    diag_free(&d);
    return EXIT_USER;
}

/* -o: not empty, not a folder for compile, and not the input file where
 * the output would replace a source with something else ("trainc ir
 * m.model -o m.model", a compile with -o m.model, any input load() reads
 * as a model: every name but *.ir); an .ir rewritten in place by ir or opt
 * is fine (read whole before it is written).  compile's other outputs
 * (NAME.c, NAME without -o) are checked where it writes them. */
static int check_output(const Opts *o) {
    struct stat in, out;
    if (o->output && !o->output[0]) return usage_error(o->cmd, "-o: the path is empty");
    /* compile's -o is a prefix (NAME, NAME.c, ...): a folder would give "dir/.c" */
    size_t len = o->output ? strlen(o->output) : 0;
    if (len && strcmp(o->cmd, "compile") == 0 &&
        (o->output[len - 1] == '/' || (stat(o->output, &out) == 0 && S_ISDIR(out.st_mode))))
        return usage_error(o->cmd, "-o %s is a folder: give the output's path and name (%s%sNAME)", o->output, o->output,
                           o->output[len - 1] == '/' ? "" : "/");
    if (!o->output || strcmp(o->output, "-") == 0 || stat(o->input, &in) != 0 || stat(o->output, &out) != 0) return -1;
    if (in.st_dev != out.st_dev || in.st_ino != out.st_ino) return -1;
    /* ir and opt read the whole .ir before writing: "opt --passes=dce m.ir -o m.ir" rewrites it */
    if (strcmp(o->cmd, "compile") != 0 && ends_with(o->input, ".ir")) return -1;
    return usage_error(o->cmd, "-o %s is the input file", o->output);
}

static void free_opts(Opts *o) {
    for (int i = 0; i < o->ndefs; i++) free((char *)o->defs[i].name);
    for (int i = 0; i < o->npasses; i++) free((char *)o->passes[i]);
    for (int i = 0; i < o->nprint_after; i++) free((char *)o->print_after[i]);
    for (int i = 0; i < o->nprint_before; i++) free((char *)o->print_before[i]);
    free(o->defs);
    free(o->passes);
    free(o->print_after);
    free(o->print_before);
    free(o->sets);
    free(o->rt_argv);
}

/* A schedule, IR, a report or statistics lost on a full disk is a
 * failure, whichever command printed it. */
static int stdout_checked(int st) {
    if ((fflush(stdout) != 0 || ferror(stdout)) && st == EXIT_OK) {
        Diag d;
        diag_init(&d, stderr);
        error_at(&d, NOLOC, "error writing '<stdout>'");
        diag_free(&d);
        st = EXIT_USER;
    }
    return st;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage_main(stderr);
        return EXIT_USAGE;
    }
    const char *c = argv[1];
    bool help = strcmp(c, "--help") == 0 || strcmp(c, "-h") == 0 || strcmp(c, "help") == 0;
    if (help && argc == 3) { /* trainc help ir: as trainc ir --help */
        for (int i = 0; i < NCOMMANDS; i++)
            if (strcmp(commands[i].name, argv[2]) == 0) {
                usage_cmd(stdout, &commands[i]);
                return stdout_checked(EXIT_OK);
            }
        return usage_error(NULL, "unknown command '%s'", argv[2]);
    }
    if (help && argc > 3) return usage_error(NULL, "%s takes one command (%s COMMAND), not '%s' and more", c, c, argv[2]);
    if (strcmp(c, "--version") == 0 && argc > 2) return usage_error(NULL, "--version takes nothing after it, not '%s'", argv[2]);
    if (strcmp(c, "--help") == 0 || strcmp(c, "-h") == 0 || strcmp(c, "help") == 0) {
        usage_main(stdout);
        return stdout_checked(EXIT_OK);
    }
    if (strcmp(c, "--version") == 0) {
        printf("trainc %s\nruntime headers: %s\nruntime library: %s\n", TRAINC_VERSION, cg_runtime_dir(), cg_runtime_lib());
        return stdout_checked(EXIT_OK);
    }
    tmp_guard(); /* a Ctrl-C leaves no half-written file */
    const Command *cmd = NULL;
    for (int i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, c) == 0) cmd = &commands[i];
    if (!cmd) return usage_error(NULL, "unknown command '%s'", c);
    Opts o = {0};
    o.cmd = cmd->name;
    int st = parse_args(&o, cmd, argc, argv, 2);
    if (st < 0) st = check_input(&o);
    if (st < 0) st = check_output(&o);
    if (st < 0) st = cmd->run(&o);
    free_opts(&o);
    return stdout_checked(st);
}
