/* tools/tokenize.c — trainc-tokenize: text to llm.c token files.
 *
 *   trainc-tokenize IN.txt OUT_PREFIX [--val-fraction F]
 *
 * Byte-level vocabulary (token = byte value, 0..255).  The last fraction F
 * of the text (default 0.1, rounded down to whole bytes) goes to
 * OUT_PREFIX_val.bin, the rest to OUT_PREFIX_train.bin.
 */
#include "tokens.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: trainc-tokenize IN.txt OUT_PREFIX [--val-fraction F]\n"
               "  writes OUT_PREFIX_train.bin and OUT_PREFIX_val.bin (llm.c format, byte vocabulary);\n"
               "  the last fraction F of the text (default 0.1, 0 <= F < 1) is the validation split\n");
}

/* Reads a whole file; NULL with a message on failure. */
static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "trainc-tokenize: %s: cannot open: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        fprintf(stderr, "trainc-tokenize: %s: %s\n", path, buf ? "read error" : "out of memory");
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static int write_split(const char *prefix, const char *suffix, const uint16_t *tok, int64_t n) {
    size_t pl = strlen(prefix), sl = strlen(suffix);
    char *path = malloc(pl + sl + 1), err[512];
    if (!path) return -1;
    memcpy(path, prefix, pl);
    memcpy(path + pl, suffix, sl + 1);
    int rc = tok_write(path, tok, n, err, sizeof err);
    if (rc != 0) fprintf(stderr, "trainc-tokenize: %s\n", err);
    else printf("%s: %lld tokens\n", path, (long long)n);
    free(path);
    return rc;
}

int main(int argc, char **argv) {
    const char *in = NULL, *prefix = NULL;
    double frac = 0.1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--val-fraction") == 0 || strncmp(argv[i], "--val-fraction=", 15) == 0) {
            const char *v = argv[i][14] == '=' ? argv[i] + 15 : (i + 1 < argc ? argv[++i] : NULL);
            char *end = NULL;
            frac = v ? strtod(v, &end) : -1;
            if (!v || end == v || *end || !(frac >= 0 && frac < 1)) {
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
    char *text = slurp(in, &len);
    if (!text) return 1;
    uint16_t *tok;
    int64_t n;
    if (tok_from_text_bytes(text, len, &tok, &n) != 0) {
        fprintf(stderr, "trainc-tokenize: out of memory\n");
        free(text);
        return 1;
    }
    free(text);
    int64_t nval = (int64_t)(frac * (double)n), ntrain = n - nval;
    printf("%s: %lld bytes, byte vocabulary (256 tokens)\n", in, (long long)n);
    int rc = write_split(prefix, "_train.bin", tok, ntrain);
    if (rc == 0) rc = write_split(prefix, "_val.bin", tok + ntrain, nval);
    free(tok);
    return rc == 0 ? 0 : 1;
}
