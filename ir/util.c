/* ir/util.c — arena, growable buffers, diagnostics, fatal errors. */
#include "ir.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- checked allocation ---- */

void *xmalloc_(size_t n, const char *file, int line) {
    void *p = malloc(n ? n : 1);
    if (!p) die_(file, line, "out of memory (malloc of %zu bytes)", n);
    return p;
}

void *xcalloc_(size_t n, size_t sz, const char *file, int line) {
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (!p) die_(file, line, "out of memory (calloc of %zu x %zu bytes)", n, sz);
    return p;
}

void *xrealloc_(void *p, size_t n, const char *file, int line) {
    void *q = realloc(p, n ? n : 1);
    if (!q) die_(file, line, "out of memory (realloc to %zu bytes)", n);
    return q;
}

_Noreturn void die_(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "trainc: internal error at %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

/* ---- arena: a chain of blocks, freed at once ---- */

typedef struct Block { struct Block *next; size_t used, cap; _Alignas(16) unsigned char data[]; } Block;
struct Arena { Block *head; size_t total; };

Arena *arena_new(void) { return xcalloc(1, sizeof(Arena)); }

void arena_free(Arena *a) {
    if (!a) return;
    for (Block *b = a->head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(a);
}

void *arena_alloc(Arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    Block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        b = xmalloc(sizeof(Block) + cap);
        b->used = 0;
        b->cap = cap;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    a->total += n;
    memset(p, 0, n);
    return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n) {
    char *p = arena_alloc(a, n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *arena_strdup(Arena *a, const char *s) { return s ? arena_strndup(a, s, strlen(s)) : NULL; }

char *arena_printf(Arena *a, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = arena_alloc(a, (size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}

size_t arena_used(const Arena *a) { return a->total; }

/* ---- string buffer ---- */

static void sb_reserve(StrBuf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    b->s = xrealloc(b->s, cap);
    b->cap = cap;
}

void sb_putc(StrBuf *b, char c) {
    sb_reserve(b, 1);
    b->s[b->len++] = c;
    b->s[b->len] = 0;
}

void sb_puts(StrBuf *b, const char *s) {
    size_t n = strlen(s);
    sb_reserve(b, n);
    memcpy(b->s + b->len, s, n + 1);
    b->len += n;
}

void sb_vprintf(StrBuf *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    sb_reserve(b, (size_t)n);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    b->len += (size_t)n;
}

void sb_printf(StrBuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(b, fmt, ap);
    va_end(ap);
}

void sb_free(StrBuf *b) {
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
}

char *sb_take(StrBuf *b) {
    char *s = b->s;
    if (!s) s = xcalloc(1, 1);
    b->s = NULL;
    b->len = b->cap = 0;
    return s;
}

char *read_file(const char *path, size_t *len) { return read_file_max(path, SIZE_MAX, len); }

char *read_file_max(const char *path, size_t max, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *text = read_stream_max(f, max, len);
    int e = errno;
    fclose(f);
    errno = e;
    return text;
}

char *read_stream_max(FILE *f, size_t max, size_t *len) {
    StrBuf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (n > max - b.len) {
            sb_free(&b);
            errno = EFBIG;
            return NULL;
        }
        sb_reserve(&b, n);
        memcpy(b.s + b.len, chunk, n);
        b.len += n;
        b.s[b.len] = 0;
    }
    if (ferror(f)) {
        sb_free(&b);
        errno = EIO;
        return NULL;
    }
    if (len) *len = b.len;
    return sb_take(&b);
}

/* ---- files removed by a signal that ends the process ---- */

enum { TMP_SLOTS = 8 };
static char tmp_path[TMP_SLOTS][4200];
static volatile sig_atomic_t tmp_used[TMP_SLOTS];
static volatile sig_atomic_t tmp_pid;

void tmp_child(int pid) { tmp_pid = pid; }

void tmp_track(const char *path) {
    if (strlen(path) >= sizeof tmp_path[0]) return;
    for (int i = 0; i < TMP_SLOTS; i++)
        if (!tmp_used[i]) {
            memcpy(tmp_path[i], path, strlen(path) + 1);
            tmp_used[i] = 1; /* (after the path: a handler never sees half of one) */
            return;
        }
}

void tmp_untrack(const char *path) {
    for (int i = 0; i < TMP_SLOTS; i++)
        if (tmp_used[i] && strcmp(tmp_path[i], path) == 0) {
            tmp_used[i] = 0;
            return;
        }
}

static void tmp_on_signal(int sig) {
    if (tmp_pid > 0) { /* its process group: the compiler and its children (kill and waitpid are async-signal-safe) */
        kill(-(pid_t)tmp_pid, sig);
        waitpid((pid_t)tmp_pid, NULL, 0);
    }
    for (int i = 0; i < TMP_SLOTS; i++)
        if (tmp_used[i]) unlink(tmp_path[i]); /* (async-signal-safe) */
    signal(sig, SIG_DFL);
    raise(sig);
}

void tmp_guard(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction on, old;
    memset(&on, 0, sizeof on);
    on.sa_handler = tmp_on_signal;
    sigemptyset(&on.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) sigaction(sigs[i], &on, NULL);
}

FILE *out_open(OutWrite *w, const char *path, const char *mode) {
    struct stat st;
    bool exists = lstat(path, &st) == 0;
    char real[PATH_MAX];
    snprintf(w->dest, sizeof w->dest, "%s", path);
    if (exists && S_ISLNK(st.st_mode) && realpath(path, real)) {
        snprintf(w->dest, sizeof w->dest, "%s", real);
        exists = stat(w->dest, &st) == 0;
    }
    w->tmp[0] = 0;
    w->copy = exists && S_ISREG(st.st_mode) && st.st_nlink > 1;
    w->kept = false;
    if (w->copy && access(w->dest, W_OK) != 0) return w->f = NULL; /* (errno set) */
    snprintf(w->mode, sizeof w->mode, "%s", mode);
    if (!exists || S_ISREG(st.st_mode)) {
        snprintf(w->tmp, sizeof w->tmp, "%.4096s.%d.tmp", w->dest, (int)getpid());
        if ((w->f = fopen(w->tmp, mode))) {
            tmp_track(w->tmp);
            if (exists) fchmod(fileno(w->f), st.st_mode & 07777);
            return w->f;
        }
        w->tmp[0] = 0;
    }
    w->copy = false;
    return w->f = fopen(path, mode);
}

/* The temporary's bytes copied into DEST (a file with other hard links,
 * which a rename would part from them). */
static bool copy_into(const char *tmp, const char *dest, const char *mode) {
    size_t n;
    char *text = read_file(tmp, &n);
    if (!text) return false;
    FILE *f = fopen(dest, mode);
    bool ok = f && fwrite(text, 1, n, f) == n;
    int e = errno;
    if (f && fclose(f) != 0 && ok) ok = false, e = errno;
    free(text);
    errno = e;
    return ok;
}

bool out_close(OutWrite *w, bool ok) {
    if (ferror(w->f)) ok = false;
    int e = errno;
    if (fclose(w->f) != 0) ok = false, e = errno;
    w->f = NULL;
    if (ok && w->tmp[0] && w->copy) {
        if (copy_into(w->tmp, w->dest, w->mode)) {
            remove(w->tmp);
        } else {
            e = errno;
            w->kept = true; /* DEST may be cut short: the new text stays in the temporary */
        }
        tmp_untrack(w->tmp); /* (after: a signal before removes it) */
        errno = e;
        return !w->kept;
    }
    if (ok && w->tmp[0] && rename(w->tmp, w->dest) != 0) ok = false, e = errno;
    if (!ok && w->tmp[0]) remove(w->tmp);
    if (w->tmp[0]) tmp_untrack(w->tmp);
    errno = e;
    return ok;
}

void fmt_double(char buf[32], double v) {
    if (v != v) { strcpy(buf, "nan"); return; }
    if (v == 1.0 / 0.0) { strcpy(buf, "inf"); return; }
    if (v == -1.0 / 0.0) { strcpy(buf, "-inf"); return; }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, 32, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    /* a whole number below 1e16 in full: 70000.0, not 7e+04 */
    if (strchr(buf, 'e') && v > -1e16 && v < 1e16 && (double)(long long)v == v) snprintf(buf, 32, "%.1f", v);
    /* Keep a float looking like a float: "2" -> "2.0" (so the IR parser
     * knows the attribute is a float, not an int). */
    if (!strpbrk(buf, ".eEn")) strcat(buf, ".0");
}

/* ---- diagnostics ---- */

void diag_init(Diag *d, FILE *out) {
    memset(d, 0, sizeof *d);
    d->out = out ? out : stderr;
}

void diag_free(Diag *d) {
    for (SrcFile *f = d->files, *next; f; f = next) {
        next = f->next;
        free((char *)f->name);
        free((char *)f->text);
        free(f);
    }
    d->files = NULL;
}

void diag_add_source(Diag *d, const char *name, const char *text, size_t len) {
    SrcFile *f = xcalloc(1, sizeof *f);
    size_t nl = strlen(name);
    char *nm = xmalloc(nl + 1);
    memcpy(nm, name, nl + 1);
    char *tx = xmalloc(len + 1);
    memcpy(tx, text, len);
    tx[len] = 0;
    f->name = nm;
    f->text = tx;
    f->len = len;
    f->next = d->files;
    d->files = f;
}

static const SrcFile *find_source(Diag *d, const char *name) {
    if (!name) return NULL;
    for (SrcFile *f = d->files; f; f = f->next)
        if (strcmp(f->name, name) == 0) return f;
    return NULL;
}

/* Prints the source line of loc and a caret under its column. */
static void print_caret(Diag *d, SrcLoc loc) {
    const SrcFile *f = find_source(d, loc.file);
    if (!f || loc.line <= 0) return;
    const char *p = f->text, *end = f->text + f->len;
    for (int l = 1; l < loc.line && p < end; p++)
        if (*p == '\n') l++;
    if (p >= end && loc.line > 1) return;
    const char *e = p;
    while (e < end && *e != '\n') e++;
    if (e > p && e[-1] == '\r') e--; /* a CRLF file's line */
    for (const char *c = p; c < e; c++) /* a control character (ESC) as '?': the terminal's state is not the input's to set */
        fputc(((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f ? '?' : *c, d->out);
    fputc('\n', d->out);
    /* keep tabs so the caret lines up; a UTF-8 character (in a string or
     * a comment) is one column on the terminal, however many bytes */
    for (int c = 1; c < loc.col && p + c - 1 < e; c++)
        if (((unsigned char)p[c - 1] & 0xC0) != 0x80) fputc(p[c - 1] == '\t' ? '\t' : ' ', d->out);
    fputs("^\n", d->out);
}

uint64_t ir_hash(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

uint64_t ir_hash_str(const char *s) { return ir_hash(IR_HASH0, s, strlen(s)); }

void verror_at(Diag *d, SrcLoc loc, const char *kind, const char *fmt, va_list ap) {
    bool is_error = strcmp(kind, "error") == 0, is_note = strcmp(kind, "note") == 0;
    int limit = d->max_errors ? d->max_errors : 20;
    if (is_note && (d->muted || (d->quiet && !d->attached))) return;
    va_list aq;
    va_copy(aq, ap);
    int mlen = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    char *msg = xmalloc(mlen > 0 ? (size_t)mlen + 1 : 1); /* whole: NVRTC's log runs to thousands of bytes */
    if (mlen > 0) vsnprintf(msg, (size_t)mlen + 1, fmt, ap);
    else msg[0] = 0;
    if (!is_note) {
        char at[64];
        int n = snprintf(at, sizeof at, "%s:%d:%d:", kind, loc.line, loc.col);
        uint64_t h = ir_hash(IR_HASH0 ^ d->context, at, (size_t)n);
        if (loc.file) h = ir_hash(h, loc.file, strlen(loc.file));
        h = ir_hash(h, msg, strlen(msg));
        /* the notes after an error that is not printed are its own; a
         * warning's (rare) are printed, as a note of no error (a pass's
         * summary) must be */
        d->muted = is_error;
        if (is_error) d->nerrors++;
        else d->nwarnings += strcmp(kind, "warning") == 0;
        for (int i = 0; i < d->nseen; i++)
            if (d->seen[i] == h) {
                d->nrepeats += is_error;
                free(msg);
                return;
            }
        if (is_error && d->nerrors - d->nrepeats > limit) {
            if (!d->stopped) fprintf(d->out, "trainc: too many errors, stopping here\n");
            d->stopped = true;
            free(msg);
            return;
        }
        if (d->nseen < (int)(sizeof d->seen / sizeof d->seen[0])) d->seen[d->nseen++] = h;
        d->muted = false;
        d->attached = true;
    }
    if (loc.file && loc.line > 0)
        fprintf(d->out, "%s:%d:%d: %s: ", loc.file, loc.line, loc.col, kind);
    else if (loc.file)
        fprintf(d->out, "%s: %s: ", loc.file, kind);
    else
        fprintf(d->out, "trainc: %s: ", kind);
    /* control characters a message quotes from the input (a string's
     * escape, ESC of a terminal sequence) are written as escapes, so a
     * message stays one line; only a message at no line of the source (a
     * tool's log it carries, NVRTC's) keeps its line breaks */
    bool keep_lines = !(loc.file && loc.line > 0);
    for (const char *c = msg; *c; c++) {
        unsigned char ch = (unsigned char)*c;
        if (ch == '\n' && !keep_lines) fputs("\\n", d->out);
        else if ((ch < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7f) fprintf(d->out, "\\x%02x", ch);
        else fputc(ch, d->out);
    }
    fputc('\n', d->out);
    free(msg);
    print_caret(d, loc);
    if (!is_note && d->on_report) {
        void (*report)(void *, SrcLoc) = d->on_report; /* not again from within */
        d->on_report = NULL;
        report(d->on_report_ctx, loc);
        d->on_report = report;
    }
}

void error_at(Diag *d, SrcLoc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verror_at(d, loc, "error", fmt, ap);
    va_end(ap);
}

void warning_at(Diag *d, SrcLoc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verror_at(d, loc, "warning", fmt, ap);
    va_end(ap);
}

void note_at(Diag *d, SrcLoc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verror_at(d, loc, "note", fmt, ap);
    va_end(ap);
}

/* ---- suggestions by edit distance ---- */

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

void suggest_init(Suggest *s, const char *name) {
    s->name = name;
    s->best = NULL;
    s->dist = 1000;
}

void suggest_add(Suggest *s, const char *cand) {
    if (!cand || strcmp(cand, s->name) == 0) return;
    int dist = edit_distance(s->name, cand);
    int len = (int)strlen(s->name), limit = len <= 3 ? 1 : (len + 2) / 3;
    if (dist <= limit && dist < s->dist) {
        s->dist = dist;
        s->best = cand;
    }
}
