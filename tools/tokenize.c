/* tools/tokenize.c — trainc-tokenize: text to llm.c token files.
 *
 *   trainc-tokenize IN.txt OUT_PREFIX [--val-fraction F]
 *
 * Byte-level vocabulary (token = byte value, 0..255).  The last fraction F
 * of the text (default 0.1, rounded down to whole bytes: val_count) goes
 * to OUT_PREFIX_val.bin, the rest to OUT_PREFIX_train.bin: both or neither
 * (write_splits).  Refused: a token file as the input (tokenizing it again
 * is a slip), an output that is the input, a text whose training or
 * validation split would pass the 2^31 - 1 tokens a file's header counts
 * (checked as it is read: /dev/zero is not read to the end of memory).  A signal while the
 * files are written waits for them (both or neither, no temporary file).
 */
#include "tokens.h"
#include "trainc_flags.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f, "usage: trainc-tokenize IN.txt OUT_PREFIX [--val-fraction F]\n"
               "  writes OUT_PREFIX_train.bin and OUT_PREFIX_val.bin (llm.c format, byte vocabulary);\n"
               "  the last fraction F of the text (default 0.1, 0 <= F < 1) is the validation split\n");
}

/* The fraction F as written, num / 10^den10 exactly (digits past the
 * 18th dropped: F < 1, so they move floor(F * n) only for n past 10^18). */
typedef struct Frac { uint64_t num; int den10; } Frac;

static Frac frac_of(const char *s) {
    Frac f = {0, 0};
    int digits = 0, point = 0, e = 0;
    const char *p = s;
    for (; *p && *p != 'e' && *p != 'E'; p++) {
        if (*p == '.') { point = 1; continue; }
        if (!f.num && *p == '0') { f.den10 += point; continue; } /* leading zeros */
        if (digits < 18) f.num = f.num * 10 + (uint64_t)(*p - '0'), digits++, f.den10 += point;
        else f.den10 -= !point; /* a dropped digit before the point: one more power of ten */
    }
    if (*p) e = atoi(p + 1);
    f.den10 -= e;
    return f;
}

/* The validation split of n bytes: floor(F * n), F as written (0.29 of
 * 100 bytes is 29, though 0.29 * 100 is 28.999999999999996 in doubles). */
static int64_t val_count(Frac f, int64_t n) {
    if (f.num == 0 || n == 0) return 0;
    if (f.den10 > 36) return 0; /* F < 10^-18: F * n < 1 for any n here */
    unsigned __int128 v = (unsigned __int128)f.num * (uint64_t)n, d = 1;
    for (int i = 0; i < f.den10; i++) d *= 10;
    for (int i = 0; i > f.den10; i--) v *= 10; /* (F < 1: never past a few powers) */
    return (int64_t)(v / d);
}

/* Reads a whole file; NULL with a message on failure: once either split
 * (F = frac, exactly fr) would pass what a token file holds, it stops,
 * with an error. */
static char *slurp(const char *path, double frac, Frac fr, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "trainc-tokenize: %s: cannot open: %s\n", path, strerror(errno));
        return NULL;
    }
    /* a little past the most bytes whose larger split a file holds: the
     * buffer never grows past it */
    double most = ((double)INT32_MAX + 16) / (frac > 0.5 ? frac : 1 - frac) + 16; /* (the larger split fills first) */
    size_t lim = most < (double)(SIZE_MAX / 4) ? (size_t)most : SIZE_MAX / 4;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    int rerr = 0; /* errno of a failed read (a folder: EISDIR) */
    while (buf) {
        if (n == cap) {
            cap = cap < lim / 2 ? cap * 2 : lim;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        int64_t nv = val_count(fr, (int64_t)n);
        if (n >= lim || (int64_t)n - nv > INT32_MAX || nv > INT32_MAX) {
            fprintf(stderr, "trainc-tokenize: %s: its %s split would pass the %d tokens a token file's header counts (%lld bytes read so far)\n",
                    path, nv > INT32_MAX || (n >= lim && frac > 0.5) ? "validation" : "training", INT32_MAX, (long long)n);
            fclose(f);
            free(buf);
            return NULL;
        }
        if (got == 0) {
            if (ferror(f)) rerr = errno;
            break;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        if (buf) fprintf(stderr, "trainc-tokenize: %s: read error: %s\n", path, strerror(rerr ? rerr : EIO));
        else fprintf(stderr, "trainc-tokenize: %s: out of memory\n", path);
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

/* One output file: PREFIX + suffix, written to a new file beside it first
 * (tok_write_tmp). */
typedef struct Split {
    const char     *suffix;
    const uint16_t *tok;
    int64_t         n;
    char           *path, *tmp;
} Split;

static char *concat(const char *a, const char *b) {
    size_t al = strlen(a), bl = strlen(b);
    char *p = malloc(al + bl + 1);
    if (!p) return NULL;
    memcpy(p, a, al);
    memcpy(p + al, b, bl + 1);
    return p;
}

/* Writes both splits, or neither: each goes to a new file beside PATH
 * (tok_write_tmp: PATH.PID.tmp, no existing file opened), and the two are
 * renamed into place only when both are whole, so a failure (a folder in
 * the way, a full disk) leaves the old files as they were.  A folder at
 * either destination is refused before anything is written. */
static int write_splits(const char *in, const char *prefix, Split *sp, int nsp) {
    int rc = 0;
    for (int i = 0; i < nsp && rc == 0; i++) {
        sp[i].path = concat(prefix, sp[i].suffix);
        if (!sp[i].path) {
            fprintf(stderr, "trainc-tokenize: out of memory\n");
            rc = -1;
        }
    }
    struct stat ist;
    int have_in = stat(in, &ist) == 0;
    for (int i = 0; i < nsp && rc == 0; i++) {
        struct stat st;
        if (stat(sp[i].path, &st) == 0 && S_ISDIR(st.st_mode)) {
            fprintf(stderr, "trainc-tokenize: %s: cannot write: %s (nothing was written)\n", sp[i].path, strerror(EISDIR));
            rc = -1;
        } else if (have_in && stat(sp[i].path, &st) == 0 && st.st_dev == ist.st_dev && st.st_ino == ist.st_ino) {
            fprintf(stderr, "trainc-tokenize: %s is the input %s: its tokens would replace the text (nothing was written)\n", sp[i].path, in);
            rc = -1;
        }
    }
    int written = 0;
    for (; written < nsp && rc == 0; written++) {
        char err[512];
        if (tok_write_tmp(sp[written].path, sp[written].tok, sp[written].n, &sp[written].tmp, err, sizeof err) != 0) {
            fprintf(stderr, "trainc-tokenize: %s (nothing was written)\n", err);
            rc = -1;
            break;
        }
    }
    for (int i = 0; i < nsp && rc == 0; i++) {
        if (rename(sp[i].tmp, sp[i].path) != 0) {
            /* the folders were checked, both files written whole: a rename
             * that fails now, after another succeeded, says which is new */
            fprintf(stderr, "trainc-tokenize: cannot rename %s to %s: %s%s%s%s\n", sp[i].tmp, sp[i].path, strerror(errno),
                    i ? " (" : " (nothing was written)", i ? sp[0].path : "", i ? " was replaced)" : "");
            rc = -1;
        }
    }
    if (rc != 0)
        for (int i = 0; i < written; i++) unlink(sp[i].tmp); /* what is left of them */
    for (int i = 0; i < nsp && rc == 0; i++) printf("%s: %lld tokens\n", sp[i].path, (long long)sp[i].n);
    for (int i = 0; i < nsp; i++) {
        free(sp[i].path);
        free(sp[i].tmp);
    }
    return rc;
}

int main(int argc, char **argv) {
    const char *in = NULL, *prefix = NULL;
    double frac = 0.1;
    const char *fs = "0.1";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--val-fraction") == 0 || strncmp(argv[i], "--val-fraction=", 15) == 0) {
            const char *v = argv[i][14] == '=' ? argv[i] + 15 : (i + 1 < argc ? argv[++i] : NULL);
            fs = v;
            if (!v || trn_flag_f64(v, &frac) != 0 || !(frac < 1)) {
                fprintf(stderr, "trainc-tokenize: --val-fraction needs a number in [0, 1), got '%s'\n", v ? v : "");
                return 2;
            }
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "trainc-tokenize: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!in) {
            in = argv[i];
        } else if (!prefix) {
            prefix = argv[i];
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (!in || !prefix) {
        usage(stderr);
        return 2;
    }
    size_t len;
    Frac fr = frac_of(fs);
    char *text = slurp(in, frac, fr, &len);
    if (!text) return 1;
    if (len >= 4 && (unsigned char)text[0] == (TOK_MAGIC & 0xff) && (unsigned char)text[1] == ((TOK_MAGIC >> 8) & 0xff) &&
        (unsigned char)text[2] == ((TOK_MAGIC >> 16) & 0xff) && (unsigned char)text[3] == ((TOK_MAGIC >> 24) & 0xff)) {
        fprintf(stderr, "trainc-tokenize: %s is a token file (llm.c's format, magic number %d), not text (give it to --data as it is)\n", in, TOK_MAGIC);
        free(text);
        return 1;
    }
    uint16_t *tok;
    int64_t n;
    if (tok_from_text_bytes(text, len, &tok, &n) != 0) {
        fprintf(stderr, "trainc-tokenize: out of memory\n");
        free(text);
        return 1;
    }
    free(text);
    int64_t nval = val_count(fr, n), ntrain = n - nval;
    printf("%s: %lld bytes, byte vocabulary (256 tokens)\n", in, (long long)n);
    Split sp[2] = {{"_train.bin", tok, ntrain, NULL, NULL}, {"_val.bin", tok + ntrain, nval, NULL, NULL}};
    /* SIGINT, SIGTERM and SIGHUP wait while the files are written and
     * renamed: a Ctrl-C leaves both or neither, and no temporary file */
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGHUP);
    sigprocmask(SIG_BLOCK, &stop, &old);
    int rc = write_splits(in, prefix, sp, 2);
    fflush(stdout);
    sigprocmask(SIG_SETMASK, &old, NULL);   /* (one that came now ends the program) */
    free(tok);
    if (rc == 0)
        for (int i = 0; i < 2; i++)
            if (sp[i].n == 0 && (i == 0 || frac > 0))   /* (--val-fraction 0: an empty split asked for) */
                fprintf(stderr, "trainc-tokenize: warning: %s%s holds no tokens (the text has %lld bytes)\n", prefix, sp[i].suffix, (long long)n);
    if (rc == 0 && (fflush(stdout) != 0 || ferror(stdout))) {
        fprintf(stderr, "trainc-tokenize: cannot write to stdout: %s (the token files are written)\n", strerror(errno));
        return 1;
    }
    return rc == 0 ? 0 : 1;
}
