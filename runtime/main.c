/* runtime/main.c — trn_main: the command-line program of every training
 * executable (flags: docs/runtime.md and --help).
 *
 *   parse flags -> session (device, seed) -> --init / --resume -> schedule
 *   -> the outputs checked (every checkpoint's path, free space) -> data
 *   (train, val) -> steps: trn_step, progress line, metrics, eval,
 *   periodic checkpoints -> final checkpoint -> --sample
 *
 * A failure during training ends the run with the current step's
 * checkpoint saved where it can be (train_failed).
 *
 * Messages go to stderr; stdout carries only what the user asked to see
 * (--help, --report, --sample). */
#include "rt.h"
#include "schedule.h"

#include "trainc_flags.h"
#include "philox.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* ---- flags ---- */

typedef struct Args {
    const char *data, *val, *save, *resume, *init, *metrics, *device, *schedule, *batches, *prompt;
    int64_t     steps, warmup, seed, eval_every, eval_steps, save_every, sample, top_k, threads, print_every;
    double      lr, min_lr, temperature;
    int64_t     report, poison, quiet, help;
    /* which were given on the command line (they win over a checkpoint's values) */
    int         given_steps, given_warmup, given_seed, given_lr, given_min_lr, given_schedule, given_batches, given_save_every;
    int         given_temperature, given_top_k;   /* (they need --sample) */
} Args;

typedef enum { F_STR, F_INT, F_F64, F_BOOL } FlagType;

typedef struct Flag {
    const char *name, *arg;
    FlagType    type;
    size_t      off, given;     /* offsetof in Args; given: offsetof the given_ field, or 0 */
    const char *help;
} Flag;

#define S(f) offsetof(Args, f)
#define X(name, arg, type, field, given, help) {name, arg, F_##type, S(field), given, help},
static const Flag flags[] = {
    TRN_RUNTIME_FLAGS(X)
    {"help", NULL, F_BOOL, S(help), 0, "this text"},
};
#undef X
#undef S
#define NFLAGS (int)(sizeof flags / sizeof flags[0])

static const char *basename_of(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static void usage(FILE *out, const char *prog, const TrnModel *m) {
    const TrnTrainDefaults *d = &m->train;
    fprintf(out, "usage: %s [flags]\n", prog);
    fprintf(out, "Trains model '%s'%s%s%s.  Flags (--flag VALUE or --flag=VALUE):\n", m->name ? m->name : "?", m->source ? " (compiled from " : "",
            m->source ? m->source : "", m->source ? ")" : "");
    for (int i = 0; i < NFLAGS; i++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", flags[i].name, flags[i].arg ? " " : "", flags[i].arg ? flags[i].arg : "");
        fprintf(out, "  %-22s %s", left, flags[i].help);
        const char *n = flags[i].name;
        if (!strcmp(n, "steps")) fprintf(out, " [%" PRId64 "]", d->steps);
        else if (!strcmp(n, "lr")) fprintf(out, " [%g]", d->lr);
        else if (!strcmp(n, "min-lr")) fprintf(out, " [%g]", d->min_lr);
        else if (!strcmp(n, "schedule")) fprintf(out, " [%s]", d->schedule ? d->schedule : "constant");
        else if (!strcmp(n, "warmup")) fprintf(out, " [%" PRId64 "]", d->warmup);
        else if (!strcmp(n, "seed")) fprintf(out, " [%" PRId64 "]", d->seed);
        else if (!strcmp(n, "batches")) fprintf(out, " [random]");
        else if (!strcmp(n, "eval-every")) fprintf(out, " [%" PRId64 "]", d->eval_every);
        else if (!strcmp(n, "eval-steps")) fprintf(out, " [%" PRId64 "]", d->eval_steps > 0 ? d->eval_steps : 10);
        else if (!strcmp(n, "save-every")) fprintf(out, " [%" PRId64 "]", d->save_every);
        else if (!strcmp(n, "device")) fprintf(out, " [auto]");
        else if (!strcmp(n, "temperature")) fprintf(out, " [1]");
        else if (!strcmp(n, "top-k")) fprintf(out, " [0]");
        fprintf(out, "\n");
    }
    fprintf(out, "See docs/runtime.md for the checkpoint, data and metrics formats.\n");
}

/* Whether s is one of the flags ("--quiet", "--steps=3", "-h"). */
static int is_flag(const char *s) {
    if (strcmp(s, "-h") == 0) return 1;
    if (strncmp(s, "--", 2) != 0) return 0;
    size_t n = strcspn(s + 2, "=");
    for (int k = 0; k < NFLAGS; k++)
        if (strlen(flags[k].name) == n && strncmp(flags[k].name, s + 2, n) == 0) return 1;
    return 0;
}

static int parse_args(int argc, char **argv, Args *a, char *err, size_t errn) {
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0) arg = "--help";
        if (strncmp(arg, "--", 2) != 0) return rt_fail(err, errn, "unexpected argument '%s' (flags start with --)", arg);
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const Flag *f = NULL;
        for (int k = 0; k < NFLAGS && !f; k++)
            if (strlen(flags[k].name) == nlen && strncmp(flags[k].name, name, nlen) == 0) f = &flags[k];
        if (!f) return rt_fail(err, errn, "unknown flag '--%.*s'", (int)nlen, name);
        char *field = (char *)a + f->off;
        if (f->type == F_BOOL) {
            if (eq) return rt_fail(err, errn, "--%s takes no value", f->name);
            *(int64_t *)(void *)field = 1;
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val) return rt_fail(err, errn, "--%s needs a value (%s)", f->name, f->arg);
        if (!eq && is_flag(val)) /* "--save --quiet": a file named --quiet is a flag forgotten */
            return rt_fail(err, errn, "--%s needs a value (%s), not the flag %s (write --%s=%s for %s)", f->name, f->arg, val, f->name, val,
                           strcmp(f->arg, "FILE") == 0 ? "a file of that name" : "that value");
        if (f->type == F_STR) {
            if (!*val && strcmp(f->arg, "FILE") == 0) return rt_fail(err, errn, "--%s: the path is empty", f->name);
            *(const char **)(void *)field = val;
        } else if (f->type == F_INT) {
            if (trn_flag_int(val, (int64_t *)(void *)field) != 0)
                return rt_fail(err, errn, "--%s: '%s' is %s", f->name, val,
                               trn_flag_digits(val, 0) ? "too large for a 64-bit integer" : "not a non-negative integer");
        } else if (trn_flag_f64(val, (double *)(void *)field) != 0) {
            return rt_fail(err, errn, "--%s: '%s' is %s", f->name, val,
                           trn_flag_digits(val, 1) && errno == ERANGE ? "out of range for a double" : "not a non-negative number");
        }
        if (f->given) *(int *)(void *)((char *)a + f->given) = 1;
    }
    if (a->schedule && strcmp(a->schedule, "constant") && strcmp(a->schedule, "cosine") && strcmp(a->schedule, "linear"))
        return rt_fail(err, errn, "--schedule: '%s' (expected constant, cosine or linear)", a->schedule);
    if (a->batches && strcmp(a->batches, "random") && strcmp(a->batches, "sequential"))
        return rt_fail(err, errn, "--batches: '%s' (expected random or sequential)", a->batches);
    if (strcmp(a->device, "auto") && strcmp(a->device, "cpu") && strcmp(a->device, "cuda"))
        return rt_fail(err, errn, "--device: '%s' (expected auto, cpu or cuda)", a->device);
    if (a->eval_steps < 1) return rt_fail(err, errn, "--eval-steps must be at least 1");
    if (a->steps > TRN_MAX_STEPS)
        return rt_fail(err, errn, "%s: %" PRId64 " steps is more than 2^53", a->given_steps ? "--steps" : "the train section's steps", a->steps);
    if (a->init && a->resume) return rt_fail(err, errn, "--init and --resume cannot be combined (--resume restores the parameters too)");
    /* the train section's save_every applies to a run that saves */
    if (a->save_every > 0 && !a->save && a->given_save_every) return rt_fail(err, errn, "--save-every needs --save FILE");
    if (a->sample == 0 && (a->prompt || a->given_temperature || a->given_top_k))
        return rt_fail(err, errn, "%s needs --sample N (the tokens to generate)",
                       a->prompt ? "--prompt" : a->given_temperature ? "--temperature" : "--top-k");
    if (a->prompt && !*a->prompt) return rt_fail(err, errn, "--prompt is empty (without it, --sample starts from --data's first token)");
    if (a->threads > 4096) return rt_fail(err, errn, "--threads: %" PRId64 " is too many", a->threads);
    return 0;
}

/* ---- small helpers ---- */

static void hms(char *out, size_t n, double sec) {
    if (!(sec >= 0) || sec > 1e8) {
        snprintf(out, n, "--:--");
        return;
    }
    long s = (long)(sec + 0.5);
    snprintf(out, n, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
}

/* A JSON number that reads back as the same double, or null when not
 * finite (JSON has no NaN). */
static void json_num(char *out, size_t n, double v) {
    if (isfinite(v)) rt_fmt_double(out, n, v);
    else snprintf(out, n, "null");
}

/* "{step}" in a --save path becomes the step number. */
/* --save's pattern with every {step} replaced by the step (cut at n - 1 bytes). */
static void save_path(char *out, size_t n, const char *pattern, int64_t step) {
    size_t k = 0;
    out[0] = 0;
    for (const char *p = pattern; *p && k + 1 < n;) {
        if (strncmp(p, "{step}", 6) == 0) {
            int w = snprintf(out + k, n - k, "%" PRId64, step);
            k = w < 0 ? k : k + (size_t)w < n ? k + (size_t)w : n - 1;
            p += 6;
        } else {
            out[k++] = *p++;
            out[k] = 0;
        }
    }
}

static int report(const TrnModel *m) {
    char b[64];
    int64_t total = 0;
    if (m->nmem == 0 && m->arena_bytes == 0) { /* the reference interpreter's model (trainc run) */
        printf("model '%s' has no memory plan: the reference interpreter allocates its values as it goes "
               "(trainc compile --report prints the compiled program's)\n", m->name ? m->name : "?");
        return 0;
    }
    printf("memory plan of model '%s'%s%s:\n", m->name ? m->name : "?", m->source ? " from " : "", m->source ? m->source : "");
    for (int i = 0; i < m->nmem; i++) {
        rt_human_bytes(b, sizeof b, m->mem[i].bytes);
        printf("  %-42s %16" PRId64 " bytes  %12s\n", m->mem[i].what, m->mem[i].bytes, b);
        total += m->mem[i].bytes;
    }
    rt_human_bytes(b, sizeof b, total);
    printf("  %-42s %16" PRId64 " bytes  %12s\n", "total", total, b);
    rt_human_bytes(b, sizeof b, m->arena_bytes);
    printf("  %-42s %16" PRId64 " bytes  %12s\n", "arena (one allocation)", m->arena_bytes, b);
    return 0;
}

/* ---- feeding micro-batches ---- */

typedef struct Feed {
    RtData  *d;
    int32_t *tokens, *targets;  /* (B, T) */
    void    *conv;              /* (B, T) in the input's dtype when it is not i32 */
} Feed;

static int put_tokens(TrnSession *s, int t, const int32_t *src, void *conv) {
    const TrnTensor *tt = &s->m->tensors[t];
    const void *p = src;
    if (tt->dtype != TRN_I32) {
        for (int64_t i = 0; i < tt->numel; i++) rt_elem_set(tt->dtype, conv, i, src[i]);
        p = conv;
    }
    char e[512];
    if (s->be.write(s->be.self, t, p, e, sizeof e) != 0) return rt_seterr(s, "writing '%s': %s", tt->name, e);
    return 0;
}

static int feed_fn(void *ctx, TrnSession *s, int micro) {
    (void)micro;
    Feed *f = ctx;
    char e[512];
    if (rt_data_next(f->d, f->tokens, f->targets, e, sizeof e) != 0) return rt_seterr(s, "data: %s", e);
    if (put_tokens(s, s->m->t_tokens, f->tokens, f->conv) != 0) return -1;
    if (s->m->t_targets >= 0 && put_tokens(s, s->m->t_targets, f->targets, f->conv) != 0) return -1;
    return 0;
}

/* ---- the program ---- */

typedef struct Run {
    const char *prog;
    Args        a;
    TrnSession *s;
    RtData     *train, *val;
    FILE       *metrics;
    Feed        feed;
    int64_t     B, T;
    int         tty, line_open, be_taken;
    int         reported;                /* the error in err is printed already */
    int         step_failed;             /* a step failed: its update may be half applied */
    char        failed_save[4096];       /* the checkpoint whose save failed, or "" */
    char        saved[4096];             /* the last checkpoint this run saved, or "" */
    int64_t     saved_step;
    int64_t     first;                   /* the first step this run trains */
    double      launched;                /* rt_now() at trn_main's start */
    double      t_load, t_data;          /* seconds spent on --init/--resume, on opening the data */
    int         signal;                  /* the SIGINT or SIGTERM that stopped the run (exit status 128 + it), or 0 */
    int32_t    *prompt;                  /* --prompt's tokens (check_sample), or NULL */
    int64_t     nprompt;
    char        err[RT_ERRN];
} Run;

/* SIGINT and SIGTERM while trn_main runs: the first is noted (and said,
 * unless --quiet) and the run stops between two steps (stopped(), which
 * saves with --save); a second one, a second or more after it, kills the
 * program as the signal would have, once the checkpoint being written (if
 * any) is whole.  One sooner is the same request sent twice: timeout(1)
 * signals the program and then its process group, a shell script's kill
 * may reach it along with the group's.  Any thread may run the handler
 * (OpenMP's and OpenBLAS's do not block the signals), two at once: the
 * state is lock-free atomics, the first one the one that sets rt_signal.
 * A signal ignored when trn_main starts (nohup, a background job of a
 * shell) stays ignored. */
static atomic_int   rt_signal;      /* the first signal | the phase it came in << 8, or 0 */
static atomic_ulong rt_signal_ms;   /* when it came (CLOCK_MONOTONIC, ms, modulo the type's range) */
static atomic_int   rt_saving;      /* 1: a checkpoint is being written (save_now); 2: a handler ends the program */
static atomic_int   rt_deferred;    /* the signal that ends the program when it is written */
/* What the run is doing, which decides what the first signal does and
 * says (rt_stop_msg): */
enum {
    RT_STARTING,    /* before the run starts: it stops there (run_main), nothing saved */
    RT_TRAINING,    /* the steps: after the one under way (train), saved */
    RT_SAMPLING,    /* the sample: cut short (sample) */
    RT_FINISHING,   /* a run with no step to train, after its start: the evaluation and save asked for, then no sample */
    RT_NPHASES
};
static atomic_int   rt_phase;
static char         rt_stop_msg[2][RT_NPHASES][600];   /* said at the first SIGINT, SIGTERM (write: async-signal-safe) */
static size_t       rt_stop_len[2][RT_NPHASES];

static const char *sig_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal"; }

static void on_signal(int sig) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);   /* (async-signal-safe) */
    unsigned long ms = (unsigned long)t.tv_sec * 1000 + (unsigned long)t.tv_nsec / 1000000;
    int none = 0;
    if (atomic_load(&rt_signal) == 0) {
        atomic_store(&rt_signal_ms, ms);
        int p = atomic_load(&rt_phase);
        if (atomic_compare_exchange_strong(&rt_signal, &none, sig | p << 8)) {
            int k = sig == SIGTERM;
            if (rt_stop_len[k][p] && write(2, rt_stop_msg[k][p], rt_stop_len[k][p]) < 0) {}
            return;
        }
    }
    /* the first again: (long), as another thread's handler may have taken
     * its time a little later than this one (and across a wrap) */
    if ((long)(ms - atomic_load(&rt_signal_ms)) < 1000) return;
    /* the second: as if there were no handler, but for a checkpoint being
     * written: noted first, then claimed, so that save_now either sees it
     * when the write is done or does not start one */
    atomic_store(&rt_deferred, sig);
    int idle = 0;
    if (!atomic_compare_exchange_strong(&rt_saving, &idle, 2)) return;
    signal(sig, SIG_DFL);
    raise(sig);
}

/* What the first signal says (on_signal), unless --quiet, in each phase. */
static void set_stop_msgs(const Run *r) {
    const char *what[RT_NPHASES] = {"stopping before the run starts",
                                    r->a.save ? "stopping after the step under way, then saving it" : "stopping after the step under way",
                                    "stopping the sample", "stopping once what is under way is done"};
    for (int k = 0; k < 2; k++)
        for (int p = 0; p < RT_NPHASES; p++) {
            int n = r->a.quiet ? 0
                               : snprintf(rt_stop_msg[k][p], sizeof rt_stop_msg[k][p],
                                          "%s%s: %s: %s (another signal, a second or more from now, ends the program at once)\n",
                                          r->tty ? "\n" : "", r->prog, k ? "SIGTERM" : "SIGINT", what[p]);
            rt_stop_len[k][p] = n > 0 && (size_t)n < sizeof rt_stop_msg[k][p] ? (size_t)n : 0;
        }
}

static int fail(Run *r, const char *fmt, ...) RT_PRINTF(2, 3);
static int fail(Run *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- what the program reads and writes, checked before it starts ---- */

/* The inputs trn_main writes: tokens and targets (feed_fn), opt.lr,
 * opt.step and rng.seed (trn_step), sample.rows (--sample).  Another input
 * would hold zeros (NaN under --poison) at every step: a model with inputs
 * of its own is trained through the API, with a feed that sets them. */
static int check_inputs(Run *r, const TrnModel *m) {
    for (int i = 0; i < m->ntensors; i++) {
        const TrnTensor *t = &m->tensors[i];
        if (t->kind != TRN_INPUT || i == m->t_tokens || i == m->t_targets || i == m->t_lr || i == m->t_step || i == m->t_seed ||
            strcmp(t->name, "sample.rows") == 0)
            continue;
        char sh[160];
        size_t k = (size_t)snprintf(sh, sizeof sh, "[");
        for (int d = 0; d < t->rank && k < sizeof sh; d++) k += (size_t)snprintf(sh + k, sizeof sh - k, "%s%" PRId64, d ? "," : "", t->shape[d]);
        if (k < sizeof sh) snprintf(sh + k, sizeof sh - k, "]");
        return fail(r, "model '%s' has an input '%s' (%s%s) that this program does not set (it sets tokens, targets, opt.lr, opt.step, "
                       "rng.seed and sample.rows): only the embedding API (docs/runtime.md), with a feed that sets '%s', can train it",
                    m->name ? m->name : "?", t->name, trn_dtype_name[t->dtype], sh, t->name);
    }
    return 0;
}

/* The tokens of a file must be below this (0: unchecked): the fewest
 * values the tokens and targets inputs take as indices (TrnTensor
 * index_end: embedding rows, cross_entropy classes), else the vocabulary. */
static int64_t token_end(const TrnModel *m) {
    int64_t end = 0;
    const int t[2] = {m->t_tokens, m->t_targets};
    for (int i = 0; i < 2; i++) {
        int64_t e = t[i] >= 0 ? m->tensors[t[i]].index_end : 0;
        if (e > 0 && (end == 0 || e < end)) end = e;
    }
    return end > 0 ? end : m->vocab;
}

/* The folder of path (".": none named). */
static void folder_of(char *out, size_t n, const char *path) {
    const char *slash = strrchr(path, '/');
    snprintf(out, n, "%.*s", slash ? (slash == path ? 1 : (int)(slash - path)) : 1, slash ? path : ".");
}

/* An output of --FLAG ARG: path, the file it names.  renamed: the file is
 * written as a new file beside path and renamed over it (--save,
 * trn_save), so the folder must take new files; else it is opened for
 * writing (--metrics). */
static int check_output(Run *r, const char *flag, const char *arg, const char *path, int renamed, int folder_checked) {
    if (!path[0]) return fail(r, "--%s: the path is empty", flag);
    if (renamed && strlen(path) + 40 >= PATH_MAX) /* room for rt_tmp_create's name beside it */
        return fail(r, "--%s %s: the path is too long (%zu bytes; at most %d)", flag, arg, strlen(path), PATH_MAX - 41);
    struct stat st;
    int found = stat(path, &st) == 0;
    /* a name too long (the save would fail at the end), a link loop (it
     * would replace the loop): errors (a file as the folder: said of the
     * folder, below) */
    if (!found && errno != ENOENT && errno != ENOTDIR) return fail(r, "--%s %s: cannot write %s: %s", flag, arg, path, strerror(errno));
    if (found) {
        if (S_ISDIR(st.st_mode)) return fail(r, "--%s %s: %s is a folder", flag, arg, path);
        if (renamed && !S_ISREG(st.st_mode)) return fail(r, "--%s %s: %s is not a regular file (the checkpoint would replace it)", flag, arg, path);
        if (!renamed) return access(path, W_OK) == 0 ? 0 : fail(r, "--%s %s: cannot write %s: %s", flag, arg, path, strerror(errno));
    }
    /* a link is written through (trn_save): its target's folder takes the new file */
    char real[RT_PATH_MAX];
    const char *dest = renamed ? rt_write_target(path, real) : path;
    if (dest != path) folder_checked = 0;
    if (folder_checked) return 0;
    char dir[4096];
    folder_of(dir, sizeof dir, dest);
    int e = stat(dir, &st) != 0 ? errno : !S_ISDIR(st.st_mode) ? ENOTDIR : access(dir, W_OK | X_OK) != 0 ? errno : 0;
    if (e) return fail(r, "--%s %s: cannot write into folder %s: %s", flag, arg, dir, strerror(e));
    return 0;
}

/* --save-every as the run saves by it: 0 when it does not train, or names
 * one file (no {step}). */
static int64_t save_every(const Run *r, int training) { return training && strstr(r->a.save, "{step}") ? r->a.save_every : 0; }

/* The steps the run saves at, in order: each multiple of --save-every
 * after the current step and before the last, then the last (the final
 * checkpoint).  The first is save_step(r, -1, ...), the next after k
 * save_step(r, k, ...), and -1 follows the last.  A --save without {step}
 * names one file: only the last counts. */
static int64_t save_step(const Run *r, int64_t k, int64_t last, int training) {
    int64_t from = r->s->step, every = save_every(r, training);
    if (k == last) return -1;
    if (k < 0) k = from - (every > 0 ? from % every : 0);   /* the periodic step at or before the current */
    return every > 0 && every < last - k ? k + every : last;
}

/* Whether every path --save names is in one folder: no {step} before its
 * last '/'. */
static int save_one_folder(const char *pattern) {
    const char *st = strstr(pattern, "{step}"), *slash = strrchr(pattern, '/');
    return !st || !slash || st > slash;
}

/* Whether the run saves at step k: save_step's sequence as a test (the
 * multiples of --save-every after the current step and before the last,
 * and the last). */
static int saves_at(const Run *r, int64_t k, int64_t last, int training) {
    int64_t every = save_every(r, training);
    return k == last || (every > 0 && k > r->s->step && k < last && k % every == 0);
}

/* How many checkpoints a run with --save-every every > 0 and {step}
 * saves: save_step's sequence counted (the multiples of every in
 * (step, last), and the last). */
static int64_t saves_count(const Run *r, int64_t last, int64_t every) {
    return 1 + (last - 1 > r->s->step ? (last - 1) / every - r->s->step / every : 0);
}

/* The step whose checkpoint file name (base: --save's part after its last
 * '/') is name, or -1: the digits where base's first {step} is, cut where
 * base written with them gives name. */
static int64_t step_of(const char *base, const char *name) {
    size_t pre = (size_t)(strstr(base, "{step}") - base);
    if (strncmp(base, name, pre) != 0) return -1;
    char buf[4096];
    int64_t k = 0;
    for (const char *d = name + pre; *d >= '0' && *d <= '9' && d - (name + pre) < 18; d++) {
        k = k * 10 + (*d - '0');
        if (d > name + pre && name[pre] == '0') return -1; /* the steps are written without leading zeros */
        save_path(buf, sizeof buf, base, k);
        if (strcmp(buf, name) == 0) return k;
    }
    return -1;
}

/* The files an output must not be (writing it would destroy them):
 * stat'ed once.  [NIN]: --metrics. */
enum { NIN = 6 };
typedef struct Ins {
    const char *what[NIN], *path[NIN];
    struct stat st[NIN + 1];
    int         have[NIN + 1];
} Ins;

static int same_file(const Ins *in, const struct stat *st, int i) {
    return in->have[i] && st->st_dev == in->st[i].st_dev && st->st_ino == in->st[i].st_ino;
}

/* The checkpoint of step k, at path, can be written and is none of the
 * inputs (but --resume and --init: read whole before) nor --metrics. */
static int check_save(Run *r, const Ins *in, const char *path, int64_t k, int folder_checked) {
    const Args *a = &r->a;
    if (check_output(r, "save", a->save, path, 1, folder_checked) != 0) {
        if (strstr(a->save, "{step}")) {   /* which checkpoint */
            size_t n = strlen(r->err);
            snprintf(r->err + n, sizeof r->err - n, " (the checkpoint of step %" PRId64 ")", k);
        }
        return -1;
    }
    struct stat st;
    if (stat(path, &st) != 0) return 0;
    for (int i = 0; i < NIN; i++)
        if (i != 2 && i != 3 && same_file(in, &st, i))
            return fail(r, "--save %s is %s %s: the checkpoint would replace it", a->save, in->what[i], i == 5 ? r->prog : in->path[i]);
    if (same_file(in, &st, NIN)) return fail(r, "--save %s and --metrics %s are the same file", a->save, a->metrics);
    return 0;
}

/* Before the first step, so that a run is not lost at its end: the outputs
 * can be written (every checkpoint's: {step} may name a folder), and none
 * of them is an input, which writing it would destroy (--save may replace
 * the checkpoint it resumes from: that one was read, and the new one
 * replaces it whole). */
static int check_outputs(Run *r, int training) {
    const Args *a = &r->a;
    Ins in = {{"the --data file", "the --val file", "the --resume file", "the --init file", "the model's source", "this program"},
              {a->data, a->val, a->resume, a->init,
               /* the .model trainc run trains; a compiled program's source path is
                * relative to where it was compiled, not to here */
               r->s->be.name && strcmp(r->s->be.name, "interp") == 0 ? r->s->m->source : NULL, "/proc/self/exe"},
              {{0}},
              {0}};
    for (int i = 0; i <= NIN; i++) {
        const char *path = i < NIN ? in.path[i] : a->metrics;
        in.have[i] = path && stat(path, &in.st[i]) == 0;
    }
    if (a->metrics) {
        if (check_output(r, "metrics", a->metrics, a->metrics, 0, 0) != 0) return -1;
        for (int i = 0; i < NIN && in.have[NIN]; i++)
            if (same_file(&in, &in.st[NIN], i))
                return fail(r, "--metrics %s is %s %s: writing the metrics would destroy it", a->metrics, in.what[i],
                            i == 5 ? r->prog : in.path[i]);
    }
    if (!a->save) return 0;
    int64_t last = training ? r->s->total : r->s->step;
    char path[4096], dir[4096];
    DIR *dp;
    if (save_every(r, training) > 0 && save_one_folder(a->save)) {
        /* One folder: checked once, with the first checkpoint, and the
         * files the run would replace are those in it now, read from the
         * folder rather than stat'ed one step at a time (a run may save at
         * each of 2^53 steps).  The earliest bad checkpoint is reported, as
         * the sweep below does; a folder that cannot be listed is swept up
         * to a million checkpoints. */
        int64_t first = save_step(r, -1, last, training);
        save_path(path, sizeof path, a->save, first);
        if (check_save(r, &in, path, first, 0) != 0) return -1;
        folder_of(dir, sizeof dir, path);
        int64_t count = saves_count(r, last, a->save_every);
        if ((dp = opendir(dir)) == NULL && count > 1000000)
            return fail(r, "--save %s: cannot list folder %s (%s), where the run saves %" PRId64 " checkpoints: the files it would replace "
                           "are checked before it starts (make the folder readable, or save fewer checkpoints)",
                        a->save, dir, strerror(errno), count);
        if (dp) {
            const char *slash = strrchr(a->save, '/'), *base = slash ? slash + 1 : a->save;
            int64_t bad = -1;
            struct dirent *e;
            while ((e = readdir(dp)) != NULL) {
                int64_t k = step_of(base, e->d_name);
                if (k < 0 || k == first || k == last || (bad >= 0 && k > bad) || !saves_at(r, k, last, training)) continue;
                save_path(path, sizeof path, a->save, k);
                if (check_save(r, &in, path, k, 1) != 0) bad = k;
            }
            closedir(dp);
            if (bad >= 0) {   /* its message again: a later entry's may have replaced it */
                save_path(path, sizeof path, a->save, bad);
                return check_save(r, &in, path, bad, 1);
            }
            save_path(path, sizeof path, a->save, last);
            return check_save(r, &in, path, last, 1);
        }
    }
    /* each path stat'ed once, its folder checked when it is not the
     * previous path's */
    char prev[4096] = "";
    for (int64_t k = save_step(r, -1, last, training); k >= 0; k = save_step(r, k, last, training)) {
        save_path(path, sizeof path, a->save, k);
        folder_of(dir, sizeof dir, path);
        if (check_save(r, &in, path, k, prev[0] && strcmp(dir, prev) == 0) != 0) return -1;
        snprintf(prev, sizeof prev, "%s", dir);
    }
    return 0;
}

/* A warning, before the first step, when the folder of the final
 * checkpoint has less space free (statvfs) than the checkpoints the run
 * saves there: not an error, since space can be freed while it trains. */
static void check_space(Run *r, int training) {
    if (!r->a.save || r->a.quiet) return;
    int64_t bytes = rt_ckpt_bytes(r->s, 1), last = training ? r->s->total : r->s->step, files = 0;
    char dir[4096], path[4096], d[4096];
    struct statvfs v;
    save_path(path, sizeof path, r->a.save, last);
    folder_of(dir, sizeof dir, path);
    if (bytes <= 0 || statvfs(dir, &v) != 0) return;
    int64_t every = save_every(r, training);
    if (every > 0 && save_one_folder(r->a.save)) /* every checkpoint in the one folder */
        files = saves_count(r, last, every);
    else
        for (int64_t k = save_step(r, -1, last, training); k >= 0; k = save_step(r, k, last, training)) {
            save_path(path, sizeof path, r->a.save, k);
            folder_of(d, sizeof d, path);
            files += strcmp(d, dir) == 0;
        }
    int64_t need = files > INT64_MAX / bytes ? INT64_MAX : files * bytes;
    uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize;
    if (avail >= (uint64_t)need) return;
    char hf[64], hc[64], hn[64];
    rt_human_bytes(hf, sizeof hf, (int64_t)avail);
    rt_human_bytes(hc, sizeof hc, bytes);
    rt_human_bytes(hn, sizeof hn, need);
    if (files == 1)
        fprintf(stderr, "%s: warning: --save: folder %s has %s (%" PRId64 " bytes) free, less than the checkpoint's %s (%" PRId64
                        " bytes): saving it will fail unless space is freed\n",
                r->prog, dir, hf, (int64_t)avail, hc, bytes);
    else
        fprintf(stderr, "%s: warning: --save: folder %s has %s (%" PRId64 " bytes) free, less than the %" PRId64 " checkpoints saved "
                        "there take: %s (%s, %" PRId64 " bytes, each): saving them will fail unless space is freed\n",
                r->prog, dir, hf, (int64_t)avail, files, hn, hc, bytes);
}

static void end_line(Run *r) {
    if (r->line_open) fputc('\n', stderr);
    r->line_open = 0;
}

static int metric(Run *r, const char *fmt, ...) RT_PRINTF(2, 3);
static int metric(Run *r, const char *fmt, ...) {
    if (!r->metrics) return 0;
    va_list ap;
    va_start(ap, fmt);
    int n = vfprintf(r->metrics, fmt, ap);
    va_end(ap);
    if (n < 0 || fflush(r->metrics) != 0)
        return fail(r, "fprintf/fflush to %s failed at %s:%d: %s", r->a.metrics, rt_srcname(__FILE__), __LINE__, strerror(errno));
    return 0;
}

/* x, a NaN printed "nan" whatever its sign bit (printf writes "-nan") */
static double plain_nan(double x) { return isnan(x) ? NAN : x; }

static int evaluate(Run *r, int64_t step) {
    double sum = 0;
    rt_data_seek(r->val, 0);
    Feed f = r->feed;
    f.d = r->val;
    for (int64_t i = 0; i < r->a.eval_steps; i++) {
        double l;
        if (feed_fn(&f, r->s, 0) != 0 || trn_eval(r->s, &l) != 0) return fail(r, "evaluation: %s", trn_error(r->s));
        sum += l;
    }
    double loss = sum / (double)r->a.eval_steps;
    loss = plain_nan(loss);
    if (!r->a.quiet) {
        end_line(r);
        fprintf(stderr, "step %" PRId64 "/%" PRId64 " | val loss %.6f (%" PRId64 " micro-batch%s of %s)\n", step, r->s->total, loss,
                r->a.eval_steps, r->a.eval_steps == 1 ? "" : "es", r->a.val);
    }
    char v[64];
    json_num(v, sizeof v, loss);
    return metric(r, "{\"step\":%" PRId64 ",\"val_loss\":%s}\n", step, v);
}

/* The checkpoint of the current step, to --save's path for it (which
 * failed is remembered: train_failed does not try it again). */
static int save_now(Run *r, char path[4096]) {
    save_path(path, 4096, r->a.save, r->s->step);
    if (r->train) r->s->data_pos = rt_data_pos(r->train);
    /* a second SIGINT or SIGTERM waits for the checkpoint (on_signal):
     * ending the program in the middle would leave PATH.PID.tmp behind */
    int idle = 0;
    if (!atomic_compare_exchange_strong(&rt_saving, &idle, 1))
        for (;;) pause();   /* a handler is ending the program: no write to leave half done */
    int rc = trn_save(r->s, path, 1);
    atomic_store(&rt_saving, 0);
    int late = atomic_exchange(&rt_deferred, 0);
    if (late) {   /* a second signal came while it was written */
        end_line(r);
        if (rc == 0) fprintf(stderr, "%s: %s: ended at once, once %s was written whole\n", r->prog, sig_name(late), path);
        else fprintf(stderr, "%s: %s: ended at once (the save of %s failed: %s)\n", r->prog, sig_name(late), path, trn_error(r->s));
        signal(late, SIG_DFL);
        raise(late);
    }
    if (rc != 0) {
        snprintf(r->failed_save, sizeof r->failed_save, "%s", path);
        return fail(r, "%s", trn_error(r->s));
    }
    snprintf(r->saved, sizeof r->saved, "%s", path);
    r->saved_step = r->s->step;
    return 0;
}

static int save(Run *r) {
    char path[4096];
    if (save_now(r, path) != 0) return -1;
    if (!r->a.quiet) {
        end_line(r);
        fprintf(stderr, "step %" PRId64 ": saved %s\n", r->s->step, path);
    }
    return 0;
}

static void print_error(Run *r) {
    end_line(r);
    fprintf(stderr, "%s: error: %s\n", r->prog, r->err[0] ? r->err : "failed");
    r->reported = 1;
}

/* A signal stopped the run between two steps: said, and the state of the
 * last step this run trained saved to --save's path for it (as
 * train_failed saves it); -1, the exit status 128 + the signal. */
static int stopped(Run *r) {
    TrnSession *s = r->s;
    const char *name = sig_name(r->signal);
    end_line(r);
    r->reported = 1;
    if (s->step < r->first) {
        fprintf(stderr, "%s: stopped by %s before the run started: nothing trained, nothing saved\n", r->prog, name);
        return -1;
    }
    char path[4096];
    if (!r->a.save) {
        fprintf(stderr, "%s: stopped by %s at step %" PRId64 " of %" PRId64 " (nothing saved: no --save)\n", r->prog, name, s->step, s->total);
        return -1;
    }
    if (save_now(r, path) != 0) {
        fprintf(stderr, "%s: stopped by %s at step %" PRId64 " of %" PRId64 "; saving it failed: %s\n", r->prog, name, s->step, s->total, r->err);
        return -1;
    }
    fprintf(stderr, "%s: stopped by %s at step %" PRId64 " of %" PRId64 ": saved %s (--resume %s continues the run)\n", r->prog, name, s->step,
            s->total, path, path);
    return -1;
}

/* Training failed (a step, the metrics, an evaluation, a periodic save):
 * the error is reported, then nothing is lost that can be kept.  After a
 * completed step the state of that step is saved to --save's path for it,
 * unless saving there is what failed; a step that failed may have half
 * applied its update (with grad_accum 1 the update runs with the
 * micro-batch), so its state is not saved.  Says where the run can resume
 * from; -1 (exit status 1). */
static int train_failed(Run *r) {
    TrnSession *s = r->s;
    char path[4096] = "", last[4200] = "";
    print_error(r);
    if (!r->a.save) return -1;
    if (r->saved[0]) snprintf(last, sizeof last, "; the last checkpoint saved is %s (step %" PRId64 ")", r->saved, r->saved_step);
    save_path(path, sizeof path, r->a.save, s->step);
    if (r->step_failed)
        fprintf(stderr, "%s: nothing saved: a step that fails may leave its update half applied%s\n", r->prog, last);
    else if (strcmp(path, r->failed_save) == 0)
        fprintf(stderr, "%s: the checkpoint of step %" PRId64 " is not saved (above)%s\n", r->prog, s->step, last);
    else if (save_now(r, path) != 0) {   /* a path no check saw: the current step's, between two --save-every steps */
        print_error(r);
        if (last[0]) fprintf(stderr, "%s: the checkpoint of step %" PRId64 " is not saved%s\n", r->prog, s->step, last);
    } else if (s->step < s->total)
        fprintf(stderr, "%s: stopped at step %" PRId64 " of %" PRId64 ": saved %s (--resume %s continues the run)\n", r->prog, s->step, s->total,
                path, path);
    else
        fprintf(stderr, "%s: the last step, %" PRId64 ", is done: saved %s\n", r->prog, s->step, path);
    return -1;
}

static void progress(Run *r, int64_t step, double loss, double lr, double gn, double tok_s, double eta, int last) {
    if (r->a.quiet) return;
    loss = plain_nan(loss);
    int64_t total = r->s->total;
    int64_t every = r->a.print_every > 0 ? r->a.print_every : (total <= 1000 ? 1 : (total + 999) / 1000);
    if (!r->tty && !last && step % every != 0 && step != r->first) return;
    char e[32], line[256];
    hms(e, sizeof e, eta);
    int w = snprintf(line, sizeof line, "%" PRId64, total);
    int k = snprintf(line, sizeof line, "step %*" PRId64 "/%" PRId64 " | loss %.6f | lr %.3e", w, step, total, loss, lr);
    if (isfinite(gn)) k += snprintf(line + k, sizeof line - (size_t)k, " | norm %.4f", gn);
    snprintf(line + k, sizeof line - (size_t)k, " | %.0f tok/s | eta %s", tok_s, e);
    if (r->tty) {
        fprintf(stderr, "\r\033[K%s", line);
        r->line_open = 1;
        if (last) end_line(r);
    } else {
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
}

/* fp16: this many steps in a row skipped for an overflow, the loss scale
 * below 1 after them, draw a warning.  Each skip halves the scale, which
 * from its default of 65536 is below 1 after 17: an overflow that a
 * smaller scale cures is over by then (from a larger loss_scale the
 * warning waits for the scale to get there). */
#define TRN_SKIP_WARN 20

static int train(Run *r) {
    TrnSession *s = r->s;
    double tokens_per_step = (double)r->B * (double)r->T * (double)s->grad_accum; /* a rate's numerator: no overflow */
    double ema = -1, t_start = rt_now(), last_draw = 0;
    int warned_nan = 0, warned_skip = 0;
    int64_t first = s->step + 1, skip_run = 0; /* fp16: steps in a row that an overflow skipped */
    r->first = first;
    double skipped_before = -1;                 /* amp.skipped before the step (from the checkpoint on --resume) */
    int tsk0 = trn_find(s, "amp.skipped");
    if (tsk0 >= 0 && rt_get_scalar(s, tsk0, &skipped_before) != 0) skipped_before = -1;
    for (int64_t step = first; step <= s->total; step++) {
        /* (one that came before the run started stopped it in run_main,
         * or stops it here; one since, "after the step under way", is
         * seen after step 1) */
        int got = atomic_load(&rt_signal);
        if (got && (step > first || got >> 8 == RT_STARTING)) {
            r->signal = got & 0xff;
            return -1;
        }
        double t0 = rt_now();
        if (trn_step(s, feed_fn, &r->feed, -1) != 0) {
            r->step_failed = 1;
            return fail(r, "step %" PRId64 ": %s", step, trn_error(s));
        }
        double dt = rt_now() - t0;
        s->data_pos = rt_data_pos(r->train);
        ema = ema < 0 ? dt : 0.9 * ema + 0.1 * dt;
        double loss = trn_loss(s), lr = trn_lr_at(s, step), gn = trn_grad_norm(s);
        double tok_s = dt > 0 ? tokens_per_step / dt : 0;
        int last = step == s->total;
        if (!isfinite(loss) && !warned_nan && !r->a.quiet) {
            end_line(r);
            fprintf(stderr, "%s: warning: step %" PRId64 ": the loss is %g\n", r->prog, step, plain_nan(loss));
            warned_nan = 1;
        }
        double t = rt_now();
        if (!r->tty || last || t - last_draw > 0.1) {   /* a terminal is redrawn at most 10 times a second */
            progress(r, step, loss, lr, gn, tok_s, ema * (double)(s->total - step), last);
            last_draw = t;
        }
        char l[64], g[64], lrs[64], amp[160] = "", start[384] = "";
        if (step == first) /* from trn_main's start to this step's: loading, device setup, initialisation */
            snprintf(start, sizeof start, ",\"start_s\":%.3f,\"start_phases\":{\"device\":%.3f,%s%s\"init\":%.3f,\"load\":%.3f,\"data\":%.3f}",
                     t0 - r->launched, s->t_device, s->dev_phases, s->dev_phases[0] ? "," : "", s->t_init, r->t_load, r->t_data);
        json_num(l, sizeof l, loss);
        json_num(g, sizeof g, gn);
        json_num(lrs, sizeof lrs, lr);
        /* fp16 dynamic loss scaling (mixed precision): the scale for the next
         * step and how many steps overflow has skipped so far */
        int tsc = trn_find(s, "amp.scale"), tsk = trn_find(s, "amp.skipped");
        double sc, sk;
        if (tsc >= 0 && tsk >= 0 && rt_get_scalar(s, tsc, &sc) == 0 && rt_get_scalar(s, tsk, &sk) == 0) {
            char a[64];
            json_num(a, sizeof a, sc);
            snprintf(amp, sizeof amp, ",\"loss_scale\":%s,\"skipped\":%.0f", a, sk);
            /* a run of skipped steps that halving the scale does not end:
             * the gradients hold infinities or NaNs whatever the scale */
            skip_run = skipped_before >= 0 && sk > skipped_before ? skip_run + 1 : 0;
            skipped_before = sk;
            if (skip_run >= TRN_SKIP_WARN && sc < 1 && !warned_skip && !r->a.quiet) {
                end_line(r);
                fprintf(stderr,
                        "%s: warning: step %" PRId64 ": fp16 loss scaling skipped the last %" PRId64 " steps (every one overflowed; the loss scale "
                        "is now %s): the gradients hold infinities or NaNs that no scale removes\n",
                        r->prog, step, skip_run, a);
                warned_skip = 1;
            }
        }
        if (metric(r, "{\"step\":%" PRId64 ",\"loss\":%s,\"lr\":%s,\"grad_norm\":%s%s,\"tokens_per_s\":%.1f,\"ms\":%.3f%s}\n", step, l, lrs, g,
                   amp, tok_s, dt * 1e3, start) != 0)
            return -1;
        if (r->val && ((r->a.eval_every > 0 && step % r->a.eval_every == 0) || last) && evaluate(r, step) != 0) return -1;
        if (r->a.save && r->a.save_every > 0 && step % r->a.save_every == 0 && !last && save(r) != 0) return -1;
    }
    if (!r->a.quiet && s->step > 0) {
        end_line(r);
        char e[32];
        hms(e, sizeof e, rt_now() - t_start);
        fprintf(stderr, "trained to step %" PRId64 " in %s\n", s->step, e);
    }
    return 0;
}

/* Sampling: row 0 of `tokens` holds the context (the rest is zero): the
 * --prompt's tokens (its last T when longer), else --data's first token,
 * else token 0.  The next token is drawn from logits[0, len-1, :V] (V: the
 * vocabulary, or the tokens input's index_end when fewer: the values it
 * takes) by rt_draw_token, with --temperature, --top-k and a uniform from
 * Philox (seed, stream "sample", i); the context slides when full.  The
 * logits are those of one position per sequence ([B, V], the sampling
 * graph pointed at position len-1 of row 0) or of every position. */

/* The tokens the sample draws from: [0, V). */
static int64_t sample_vocab(const TrnModel *m) {
    const TrnTensor *lt = &m->tensors[m->t_logits];
    int64_t Vp = lt->shape[lt->rank - 1];
    int64_t V = m->vocab > 0 && m->vocab <= Vp ? m->vocab : Vp;
    int64_t tend = m->tensors[m->t_tokens].index_end; /* a token the model cannot read next is never drawn */
    return tend > 0 && tend < V ? tend : V;
}

/* --prompt as tokens, into r->prompt: its bytes where the vocabulary is
 * (V = 256, as the sample is printed), else token ids written in decimal
 * and separated by spaces or commas, each below V. */
static int parse_prompt(Run *r, int64_t V) {
    const char *p = r->a.prompt;
    size_t n = strlen(p);
    if (!(r->prompt = rt_malloc((n + 1) * sizeof *r->prompt, r->err, sizeof r->err))) return -1;
    r->nprompt = 0;
    if (V == 256) {
        for (size_t i = 0; i < n; i++) r->prompt[r->nprompt++] = (unsigned char)p[i];
        return 0;
    }
    for (;;) {
        p += strspn(p, " ,\t\r\n");
        if (!*p) break;
        size_t k = strcspn(p, " ,\t\r\n");
        char word[32];
        int64_t id;
        snprintf(word, sizeof word, "%.*s", (int)(k < 31 ? k : 31), p);
        if (k > 20 || trn_flag_int(word, &id) != 0)
            return fail(r, "--prompt: '%.*s' is not a token id (the vocabulary of %" PRId64 " tokens is not bytes: the prompt is token ids, "
                           "separated by spaces or commas)", (int)(k < 40 ? k : 40), p, V);
        if (id >= V)
            return fail(r, "--prompt: token %" PRId64 " (the prompt's token %" PRId64 ") is not one the model reads (0 to %" PRId64 ")", id,
                        r->nprompt + 1, V - 1);
        r->prompt[r->nprompt++] = (int32_t)id;
        p += k;
    }
    if (r->nprompt == 0) return fail(r, "--prompt holds no token id");
    return 0;
}

/* What --sample needs of the model's logits and its --prompt, checked
 * before the first step so that a run does not train to fail at its end. */
static int check_sample(Run *r) {
    const TrnModel *m = r->s->m;
    if (m->t_logits < 0) return fail(r, "--sample: model '%s' has no logits output", m->name);
    const TrnTensor *lt = &m->tensors[m->t_logits];
    int64_t Vp = lt->rank > 0 ? lt->shape[lt->rank - 1] : 0;
    int at = trn_find(r->s, "sample.rows") >= 0; /* one position per sequence */
    if (at && (Vp <= 0 || lt->numel != r->B * Vp))
        return fail(r, "--sample: the logits output '%s' must have a row of the vocabulary per sequence ([%" PRId64 ", V])", lt->name, r->B);
    if (!at && (Vp <= 0 || lt->numel != r->B * r->T * Vp))
        return fail(r, "--sample: the logits output '%s' must have B*T rows of the vocabulary ([%" PRId64 ", %" PRId64 ", V])", lt->name, r->B,
                    r->T);
    if (r->a.prompt && !r->prompt && parse_prompt(r, sample_vocab(m)) != 0) return -1;
    return 0;
}

static int sample(Run *r, int32_t first) {
    TrnSession *s = r->s;
    const TrnModel *m = s->m;
    if (check_sample(r) != 0) return -1;
    const TrnTensor *lt = &m->tensors[m->t_logits];
    int64_t Vp = lt->shape[lt->rank - 1];
    int at = trn_find(s, "sample.rows") >= 0; /* one position per sequence */
    int64_t V = sample_vocab(m);
    /* the row drawn from: read alone where the backend can (read_part),
     * not the [B, T, V] logits of every position */
    size_t lbytes = (size_t)rt_nbytes(lt->dtype, s->be.read_part ? Vp : lt->numel);
    unsigned char *logits = rt_malloc(lbytes, r->err, sizeof r->err);
    int32_t *ctx = rt_calloc((size_t)r->T, sizeof *ctx, r->err, sizeof r->err);
    double *p = rt_malloc((size_t)V * 2 * sizeof *p, r->err, sizeof r->err);   /* the logits, and rt_draw_token's scratch */
    int64_t *pos = rt_calloc((size_t)r->B, sizeof *pos, r->err, sizeof r->err);
    if (!logits || !ctx || !p || !pos) {
        free(logits);
        free(ctx);
        free(p);
        free(pos);
        return -1;
    }
    int rc = 0;
    int64_t len = 1;
    ctx[0] = first;
    if (r->prompt) {   /* its last T tokens */
        len = r->nprompt < r->T ? r->nprompt : r->T;
        memcpy(ctx, r->prompt + (r->nprompt - len), (size_t)len * sizeof *ctx);
    }
    uint64_t stream = rng_name_stream("sample");
    atomic_store(&rt_phase, RT_SAMPLING);   /* (what a signal says: on_signal) */
    if (!r->a.quiet) {
        end_line(r);
        fprintf(stderr, "sample (%" PRId64 " tokens):\n", r->a.sample);
    }
    for (int64_t i = 0; i < r->a.sample; i++) {
        if (atomic_load(&rt_signal)) {   /* a long sample is cut short, as training is */
            r->signal = atomic_load(&rt_signal) & 0xff;
            r->reported = 1;
            end_line(r);
            fprintf(stderr, "%s: stopped by %s after %" PRId64 " token%s of the sample\n", r->prog, sig_name(r->signal), i, i == 1 ? "" : "s");
            rc = -1;
            break;
        }
        memset(r->feed.tokens, 0, (size_t)(r->B * r->T) * sizeof(int32_t));
        memcpy(r->feed.tokens, ctx, (size_t)len * sizeof(int32_t));
        char e[1024];
        if (put_tokens(s, m->t_tokens, r->feed.tokens, r->feed.conv) != 0) {
            rc = fail(r, "--sample: %s", trn_error(s));
            break;
        }
        pos[0] = len - 1;
        if (at && rt_set_sample_rows(s, pos) != 0) {
            rc = fail(r, "--sample: %s", trn_error(s));
            break;
        }
        int64_t base = at ? 0 : (len - 1) * Vp;   /* row 0, position len-1 */
        if (s->be.run(s->be.self, TRN_RUN_SAMPLE, e, sizeof e) != 0 ||
            (s->be.read_part ? s->be.read_part(s->be.self, m->t_logits, base, Vp, logits, e, sizeof e)
                             : s->be.read(s->be.self, m->t_logits, logits, e, sizeof e)) != 0) {
            rc = fail(r, "--sample: %s", e);
            break;
        }
        if (s->be.read_part) base = 0;
        for (int64_t v = 0; v < V; v++) p[v] = rt_elem_get(lt->dtype, logits, base + v);
        int64_t tok = rt_draw_token(p, V, r->a.temperature, r->a.top_k, rng_uniform(s->seed, stream, (uint64_t)i), p + V);
        if (tok < 0) {   /* NaN or infinite logits: nothing sensible to draw */
            rc = fail(r, "--sample: the logits of token %" PRId64 " of the sample hold NaNs or infinities (so do the parameters?): nothing to draw from",
                      i + 1);
            break;
        }
        if (V == 256) fputc((int)tok, stdout);
        else printf("%s%d", i ? " " : "", (int)tok);
        if (len < r->T) ctx[len++] = (int32_t)tok;
        else {
            memmove(ctx, ctx + 1, (size_t)(r->T - 1) * sizeof *ctx);
            ctx[r->T - 1] = (int32_t)tok;
        }
    }
    fputc('\n', stdout);
    fflush(stdout);
    free(logits);
    free(ctx);
    free(p);
    free(pos);
    return rc;
}

static int run_main(Run *r, const TrnModel *m, const TrnBackend *be) {
    Args *a = &r->a;
    /* the session */
    TrnOptions opt = {a->device, (int)a->threads, a->given_seed ? a->seed : -1, (int)a->poison};
    char e[RT_ERRN];
    /* a backend given (trainc run's interpreter) runs where it runs */
    if (be && strcmp(a->device, "cuda") == 0 && (!be->name || strcmp(be->name, "cuda") != 0)) {
        if (be->name && strcmp(be->name, "interp") == 0)
            return fail(r, "--device cuda: the interpreter runs on the CPU; to train on a GPU, compile with "
                           "`trainc compile --target=cuda` and run the executable with --device cuda");
        return fail(r, "--device cuda: this program trains on the backend it was given (%s)", be->name ? be->name : "?");
    }
    r->be_taken = be != NULL;
    r->s = be ? trn_create_with_backend(m, *be, &opt, e, sizeof e) : trn_create(m, &opt, e, sizeof e);
    if (!r->s) return fail(r, "%s", e);
    TrnSession *s = r->s;
    double t = rt_now();
    if (a->init && trn_load(s, a->init, 1) != 0) return fail(r, "--init: %s", trn_error(s));
    if (a->init && *trn_load_note(s))
        fprintf(stderr, "%s: warning: --init %s: its step was compiled with other settings: %s\n", r->prog, a->init, trn_load_note(s));
    if (a->init && *trn_load_nonfinite(s))
        fprintf(stderr, "%s: warning: --init %s: %s\n", r->prog, a->init, trn_load_nonfinite(s));
    if (a->resume) {
        if (trn_load(s, a->resume, 0) != 0) return fail(r, "--resume: %s", trn_error(s));
        if (*trn_load_model(s))
            fprintf(stderr, "%s: warning: --resume %s: a checkpoint of model '%s', not '%s' (its tensors fit; the run goes on)\n", r->prog, a->resume,
                    trn_load_model(s), s->m->name ? s->m->name : "?");
        if (*trn_load_note(s))
            fprintf(stderr, "%s: warning: --resume %s: its step was compiled with other settings (the run goes on with this one's): %s\n", r->prog,
                    a->resume, trn_load_note(s));
        if (*trn_load_nonfinite(s)) fprintf(stderr, "%s: warning: --resume %s: %s\n", r->prog, a->resume, trn_load_nonfinite(s));
        if (a->given_seed && (uint64_t)a->seed != s->seed && !a->quiet)
            fprintf(stderr, "%s: note: --seed %" PRId64 " ignored: the run resumes with the checkpoint's seed %" PRIu64 "\n", r->prog, a->seed,
                    s->seed);
    }
    r->t_load = rt_now() - t;
    /* the schedule: flags given > the checkpoint's > the model's */
    int64_t done_total = s->total;           /* a resumed run's: the checkpoint's lr.steps */
    double done_lr = trn_lr_at(s, s->step);  /* its last step's rate */
    char done_sched[sizeof s->schedule], done_batches[sizeof s->batches];
    double done_base = s->lr, done_min = s->min_lr;
    int64_t done_warmup = s->warmup;
    memcpy(done_sched, s->schedule, sizeof done_sched);
    memcpy(done_batches, s->batches, sizeof done_batches);
    if (trn_set_schedule(s, a->given_schedule ? a->schedule : NULL, a->given_lr ? a->lr : s->lr, a->given_min_lr ? a->min_lr : s->min_lr,
                         a->given_warmup ? a->warmup : s->warmup, a->given_steps ? a->steps : s->total) != 0)
        return fail(r, "%s", trn_error(s));
    /* --steps on --resume changes the schedule's length: the steps already
     * done had the old length's rates (docs/runtime.md, resuming) */
    /* (the rate the checkpoint's schedule would give at its step with the
     * new length: other flags' changes are the note below's) */
    double len_lr = sched_lr_at(done_sched, done_base, done_min, done_warmup, s->total, s->step);
    if (a->resume && a->given_steps && !a->quiet && s->step > 0 && s->step < s->total && s->total != done_total && len_lr != done_lr) {
        fprintf(stderr,
                "%s: note: --steps %" PRId64 " changes the schedule's length from %s's %" PRId64 " steps: its steps 1 to %" PRId64
                " ran at the %" PRId64 "-step schedule's rates (step %" PRId64 ": %.4g, where %" PRId64 " steps would give %.4g), so the run differs "
                "from one run of %" PRId64 " steps\n",
                r->prog, s->total, a->resume, done_total, s->step, done_total, s->step, done_lr, s->total, len_lr, s->total);
    }
    if (a->given_batches || !s->has_data_pos) snprintf(s->batches, sizeof s->batches, "%s", a->batches ? a->batches : "random");
    /* the other schedule flags and --batches on --resume: the steps done
     * had the checkpoint's (docs/runtime.md, resuming) */
    if (a->resume && !a->quiet && s->step > 0 && s->step < s->total) {
        char what[512] = ""; /* "lr 0.001 with --lr 0.01, warmup 2 with --warmup 0" */
        size_t n = 0;
        if (strcmp(done_sched, s->schedule) != 0)
            n += snprintf(what + n, sizeof what - n, "%sschedule %s with --schedule %s", n ? ", " : "", done_sched, s->schedule);
        if (done_base != s->lr) n += snprintf(what + n, sizeof what - n, "%slr %g with --lr %g", n ? ", " : "", done_base, s->lr);
        if (done_min != s->min_lr) n += snprintf(what + n, sizeof what - n, "%smin_lr %g with --min-lr %g", n ? ", " : "", done_min, s->min_lr);
        if (done_warmup != s->warmup)
            n += snprintf(what + n, sizeof what - n, "%swarmup %" PRId64 " with --warmup %" PRId64, n ? ", " : "", done_warmup, s->warmup);
        if (n)
            fprintf(stderr, "%s: note: the run replaces %s's %s from step %" PRId64 " on: its steps 1 to %" PRId64 " ran at the checkpoint's rates\n",
                    r->prog, a->resume, what, s->step + 1, s->step);
        if (s->has_data_pos && strcmp(done_batches, s->batches) != 0)
            fprintf(stderr,
                    "%s: note: the run replaces %s's %s batches with --batches %s from micro-batch %" PRId64 " on: its micro-batches 1 to %" PRId64
                    " were %s\n",
                    r->prog, a->resume, done_batches, s->batches, s->data_pos + 1, s->data_pos, done_batches);
    }

    int lm = m->t_tokens >= 0 && m->tensors[m->t_tokens].rank == 2;
    int training = s->step < s->total;
    /* a warmup that outlasts the run (the examples' 700 steps, a short
     * fine-tune): the rate never gets to --lr; said once, before it starts */
    if (training && !a->quiet && s->warmup > s->total)
        fprintf(stderr, "%s: warning: the warmup (%" PRId64 " steps) is longer than the run (%" PRId64 " step%s): the learning rate climbs to %g, "
                        "not --lr %g (--warmup sets it)\n",
                r->prog, s->warmup, s->total, s->total == 1 ? "" : "s", trn_lr_at(s, s->total), s->lr);
    if (lm) {
        r->B = m->tensors[m->t_tokens].shape[0];
        r->T = m->tensors[m->t_tokens].shape[1];
    }
    if ((training || a->val || a->sample > 0) && !lm)
        return fail(r, "model '%s' has no 'tokens' input of shape [B, T]: this program trains language models only; embed other models with "
                       "the API (docs/runtime.md)",
                    m->name);
    if ((training || a->val || a->sample > 0) && check_inputs(r, m) != 0) return -1;
    if (a->sample > 0 && check_sample(r) != 0) return -1;
    if (check_outputs(r, training) != 0) return -1;
    if (lm) {
        size_t bt = (size_t)(r->B * r->T);
        r->feed.tokens = rt_malloc(bt * sizeof(int32_t), r->err, sizeof r->err);
        r->feed.targets = r->feed.tokens ? rt_malloc(bt * sizeof(int32_t), r->err, sizeof r->err) : NULL;
        r->feed.conv = r->feed.targets ? rt_malloc(bt * sizeof(int64_t), r->err, sizeof r->err) : NULL;
        if (!r->feed.conv) {
            char why[256];
            snprintf(why, sizeof why, "%.200s", r->err);
            return fail(r, "a micro-batch's tokens, B=%" PRId64 " x T=%" PRId64 ": %s", r->B, r->T, why);
        }
    }
    if (training && !a->data) return fail(r, "--data FILE is needed to train (%" PRId64 " steps to go)", s->total - s->step);
    t = rt_now();
    if (training || (a->data && a->sample > 0 && !a->prompt)) {
        if (!a->data) return fail(r, "--data FILE is needed");
        RtDataSpec spec = {a->data, r->B, r->T, strcmp(s->batches, "random") == 0, s->seed, "data.train", token_end(m), 1};
        if (!(r->train = rt_data_open(&spec, e, sizeof e))) return fail(r, "--data: %s", e);
        if (s->has_data_pos) rt_data_seek(r->train, s->data_pos);
        r->feed.d = r->train;
    } else if (a->data && !a->quiet) { /* a run with nothing to train: say so, or a wrong path goes unseen */
        fprintf(stderr, "%s: note: --data %s is not read: the run has no step to train (step %" PRId64 " of %" PRId64 ") and %s\n", r->prog,
                a->data, s->step, s->total, a->sample > 0 ? "--sample starts from --prompt" : "no --sample");
    }
    if (a->val) {
        RtDataSpec spec = {a->val, r->B, r->T, 0, s->seed, "data.val", token_end(m), 1};
        if (!(r->val = rt_data_open(&spec, e, sizeof e))) return fail(r, "--val: %s", e);
        int64_t rows = (rt_data_ntokens(r->val) - 1) / r->T; /* validation is sequential: rows wrap at the end */
        if (!a->quiet && rows / r->B < a->eval_steps)
            fprintf(stderr, "%s: warning: --val %s has %" PRId64 " rows of %" PRId64 " tokens, and an evaluation reads %" PRId64
                            " micro-batches of %" PRId64 " rows: it reads some rows more than once\n",
                    r->prog, a->val, rows, r->T, a->eval_steps, r->B);
    }
    r->t_data = rt_now() - t;
    struct stat mst;
    int made = a->metrics && stat(a->metrics, &mst) != 0; /* no such file yet (a link may name it): this run makes it */
    if (a->metrics && !(r->metrics = rt_fopen(a->metrics, "w", r->err, sizeof r->err))) return -1;
    char *real = made ? realpath(a->metrics, NULL) : NULL; /* the file made, where a link led the open */
    if (a->save && a->metrics && check_outputs(r, training) != 0) { /* again: --save naming the --metrics file made just now */
        fclose(r->metrics);
        r->metrics = NULL;
        if (real) unlink(real); /* refused: nothing is left behind, and what was there before stays (a link) */
        free(real);
        return -1;
    }
    free(real);

    if (!a->quiet) {
        int64_t np = 0, nt = 0;
        for (int i = 0; i < m->ntensors; i++)
            if (m->tensors[i].kind == TRN_PARAM) np += rt_ckpt_numel(&m->tensors[i]), nt++;
        char ab[64];
        rt_human_bytes(ab, sizeof ab, s->be.device_bytes);
        fprintf(stderr, "model '%s': %" PRId64 " parameters in %" PRId64 " tensors | device %s (%s) | seed %" PRIu64 "%s\n", m->name, np, nt,
                s->be.name ? s->be.name : "?", ab, s->seed, s->init_on_device ? ", initialised on the device" : "");
        if (a->init) fprintf(stderr, "initialised from %s\n", a->init);
        if (a->resume) fprintf(stderr, "resumed from %s at step %" PRId64 " (micro-batch %" PRId64 ")\n", a->resume, s->step, s->data_pos);
        if (a->resume && !training)   /* it still evaluates, saves and samples, as asked */
            fprintf(stderr, "%s: note: %s is at step %" PRId64 ", and the run has %" PRId64 " steps (%s): nothing to train%s\n", r->prog,
                    a->resume, s->step, s->total, a->given_steps ? "--steps" : "the checkpoint's lr.steps, the schedule's length",
                    a->given_steps ? "" : "; --steps N trains it on to step N");
        if (r->train && training)
            fprintf(stderr, "data %s: %" PRId64 " tokens, %s batches of B=%" PRId64 " x T=%" PRId64 ", grad_accum %" PRId64 " | steps %" PRId64
                            "/%" PRId64 " | lr %g %s (warmup %" PRId64 ", min %g)\n",
                    a->data, rt_data_ntokens(r->train), s->batches, r->B, r->T, s->grad_accum, s->step, s->total, s->lr, s->schedule, s->warmup,
                    s->min_lr);
    }
    check_space(r, training);
    int32_t first = r->train ? (int32_t)rt_data_tokens(r->train)[0] : 0;
    /* the start is over: a signal that came before this stops the run now,
     * one after it as the next phase says (the phase first, then the look) */
    r->first = s->step + 1;
    atomic_store(&rt_phase, training ? RT_TRAINING : RT_FINISHING);
    int got = atomic_load(&rt_signal);
    if (got && got >> 8 == RT_STARTING) {
        r->signal = got & 0xff;
        return stopped(r);
    }
    if (training && train(r) != 0) return r->signal ? stopped(r) : train_failed(r);
    if (!training && r->val && evaluate(r, s->step) != 0) return -1;
    if (a->save && save(r) != 0) return -1;
    if (a->sample > 0 && sample(r, first) != 0) return -1;
    return 0;
}

int trn_main(int argc, char **argv, const TrnModel *m, const TrnBackend *be) {
    double launched = rt_now();
    Run *r = calloc(1, sizeof *r);
    if (!r) {
        fprintf(stderr, "error: calloc(%zu) failed at %s:%d: out of memory\n", sizeof *r, rt_srcname(__FILE__), __LINE__);
        if (be && be->destroy) be->destroy(be->self);
        return 1;
    }
    r->prog = argc > 0 && argv[0] ? basename_of(argv[0]) : "train";
    r->launched = launched;
    Args *a = &r->a;
    a->device = "auto";
    a->steps = m->train.steps;
    a->lr = m->train.lr;
    a->min_lr = m->train.min_lr;
    a->warmup = m->train.warmup;
    a->seed = m->train.seed;
    a->eval_every = m->train.eval_every;
    a->eval_steps = m->train.eval_steps > 0 ? m->train.eval_steps : 10;
    a->save_every = m->train.save_every;
    a->temperature = 1;
    r->tty = isatty(fileno(stderr));
    /* A file-size limit (ulimit -f) would kill the process in the middle
     * of a write (SIGXFSZ), leaving the checkpoint's temporary file
     * behind: ignored, the write fails with EFBIG, which is reported like
     * a full disk, and the file is removed.  Restored on return (a program
     * that embeds the runtime decides for itself: docs/runtime.md). */
    struct sigaction ign, old_xfsz;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    int xfsz = sigaction(SIGXFSZ, &ign, &old_xfsz) == 0;
    /* SIGINT and SIGTERM stop the run between two steps (on_signal) */
    static const int stop_sigs[2] = {SIGINT, SIGTERM};
    struct sigaction on, old_stop[2];
    memset(&on, 0, sizeof on);
    on.sa_handler = on_signal;
    on.sa_flags = SA_RESTART;   /* (a read or write under way goes on) */
    sigemptyset(&on.sa_mask);   /* (the other one waits for on_signal to return) */
    sigaddset(&on.sa_mask, SIGINT);
    sigaddset(&on.sa_mask, SIGTERM);
    int took[2] = {0, 0};
    atomic_store(&rt_signal, 0);
    atomic_store(&rt_deferred, 0);
    atomic_store(&rt_saving, 0);
    atomic_store(&rt_phase, RT_STARTING);
    /* the flags first: what the first signal says is in place before a
     * handler can read it (one during the parse ends the program as usual) */
    int parsed = parse_args(argc, argv, a, r->err, sizeof r->err);
    if (parsed == 0) set_stop_msgs(r);
    else memset(rt_stop_len, 0, sizeof rt_stop_len);
    for (int i = 0; i < 2; i++)
        if (sigaction(stop_sigs[i], NULL, &old_stop[i]) == 0 && old_stop[i].sa_handler != SIG_IGN)
            took[i] = sigaction(stop_sigs[i], &on, NULL) == 0;
    int status = 0;
    if (parsed != 0) {
        fprintf(stderr, "%s: error: %s\n(run %s --help for the flags)\n", r->prog, r->err, r->prog);
        status = 1;
    } else if (a->help) {
        usage(stdout, r->prog, m);
    } else if (a->report) {
        report(m);
    } else if (run_main(r, m, be) != 0) {
        if (!r->reported) print_error(r);
        status = r->signal ? 128 + r->signal : 1;
    }
    /* what the user asked to see (the report, samples, --help) is lost if stdout cannot take it */
    if ((fflush(stdout) != 0 || ferror(stdout)) && status == 0) {
        fprintf(stderr, "%s: error: cannot write to stdout (what it printed there is lost)\n", r->prog);
        status = 1;
    }
    /* trn_create_with_backend takes the backend, even when it fails; otherwise it is ours to free */
    if (be && !r->be_taken && be->destroy) be->destroy(be->self);
    if (r->metrics && fclose(r->metrics) != 0 && status == 0) {
        fprintf(stderr, "%s: error: fclose(%s) failed at %s:%d: %s\n", r->prog, a->metrics, rt_srcname(__FILE__), __LINE__, strerror(errno));
        status = 1;
    }
    rt_data_close(r->train);
    rt_data_close(r->val);
    trn_destroy(r->s);
    free(r->feed.tokens);
    free(r->feed.targets);
    free(r->feed.conv);
    free(r->prompt);
    free(r);
    if (xfsz) sigaction(SIGXFSZ, &old_xfsz, NULL);
    for (int i = 0; i < 2; i++)
        if (took[i]) sigaction(stop_sigs[i], &old_stop[i], NULL);
    return status;
}
