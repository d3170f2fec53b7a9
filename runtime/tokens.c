/* runtime/tokens.c — reading and writing llm.c token files (tokens.h).
 * C11 and stdio; a new file is written beside its destination
 * (rt_tmp_create, util.c) and renamed; byte order is handled explicitly,
 * so the files are little-endian whatever the host. */
#include "tokens.h"
#include "rt.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail(char *err, size_t errn, const char *fmt, ...) {
    if (err && errn) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errn, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int32_t get_le32(const unsigned char *p) {
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return u <= INT32_MAX ? (int32_t)u : -(int32_t)~u - 1; /* two's complement, without implementation-defined casts */
}

/* For a file whose first n bytes read as text (no control characters but
 * tab, CR and newline; bytes >= 0x80 are UTF-8's), a hint to tokenize it
 * first, to append to the error; "" otherwise. */
static const char *text_hint(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((p[i] < 0x20 && p[i] != '\n' && p[i] != '\r' && p[i] != '\t') || p[i] == 0x7f) return "";
    return n ? "; the file looks like text: make token files from it with `trainc-tokenize TEXT PREFIX`" : "";
}

static void put_le32(unsigned char *p, int32_t v) {
    uint32_t u = (uint32_t)v;
    p[0] = (unsigned char)u;
    p[1] = (unsigned char)(u >> 8);
    p[2] = (unsigned char)(u >> 16);
    p[3] = (unsigned char)(u >> 24);
}

int tok_read(const char *path, TokFile *out, char *err, size_t errn) {
    out->tokens = NULL;
    out->n = 0;
    /* a pipe, FIFO or device has no size to check the count against (and
     * a FIFO with no writer would block the open) */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode))
        return fail(err, errn, "%s: not a regular file: a token file is read by its size (write the tokens to a file first)", path);
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, errn, "%s: cannot open: %s", path, strerror(errno));
    unsigned char h[TOK_HEADER_SIZE];
    size_t hgot = fread(h, 1, sizeof h, f);
    if (hgot < sizeof h) {
        int e = errno, bad = ferror(f);
        fclose(f);
        if (bad) return fail(err, errn, "%s: cannot read: %s", path, strerror(e));
        return fail(err, errn, "%s: truncated header: the file has %zu bytes, a token file starts with a %d-byte header%s", path, hgot,
                    TOK_HEADER_SIZE, text_hint(h, hgot));
    }
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < TOK_HEADER_SIZE || fseek(f, TOK_HEADER_SIZE, SEEK_SET) != 0) {
        int e = errno;
        fclose(f);
        if (!e) /* /proc's files: read, but of size 0 */
            return fail(err, errn, "%s: cannot determine the file size: it says %ld bytes, and %zu were read", path, size, hgot);
        return fail(err, errn, "%s: cannot determine the file size: %s", path, strerror(e));
    }
    int32_t magic = get_le32(h), version = get_le32(h + 4), count = get_le32(h + 8);
    if (magic != TOK_MAGIC) {
        fclose(f);
        return fail(err, errn, "%s: bad magic number %ld (expected %d): not a token file in llm.c's format%s", path, (long)magic,
                    TOK_MAGIC, text_hint(h, sizeof h));
    }
    if (version != TOK_VERSION) {
        fclose(f);
        return fail(err, errn, "%s: unsupported version %ld (expected %d)", path, (long)version, TOK_VERSION);
    }
    if (count < 0) {
        fclose(f);
        return fail(err, errn, "%s: bad token count %ld in the header", path, (long)count);
    }
    long long payload = (long long)size - TOK_HEADER_SIZE, want = 2LL * count;
    if (payload < want) {
        fclose(f);
        return fail(err, errn, "%s: truncated: the header announces %ld tokens (%lld bytes) but the file holds only %lld bytes of tokens", path,
                    (long)count, want, payload);
    }
    if (payload > want) {
        fclose(f);
        return fail(err, errn, "%s: count mismatch: the header announces %ld tokens (%lld bytes) but the file holds %lld bytes of tokens", path,
                    (long)count, want, payload);
    }
    /* read into the tokens' own memory (2 bytes a token, all the host
     * memory a token file takes), each made a host uint16_t in place */
    uint16_t *tok = malloc(sizeof(uint16_t) * ((size_t)count + 1));
    if (!tok) {
        fclose(f);
        return fail(err, errn, "%s: out of memory for %ld tokens", path, (long)count);
    }
    unsigned char *raw = (unsigned char *)tok;
    size_t got = fread(raw, 1, (size_t)want, f);
    fclose(f);
    if (got != (size_t)want) {
        free(tok);
        return fail(err, errn, "%s: read error after %zu of %lld token bytes", path, got, want);
    }
    for (int64_t i = 0; i < count; i++) { /* little-endian in the file */
        uint16_t v = (uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8);
        tok[i] = v;
    }
    out->tokens = tok;
    out->n = count;
    return 0;
}

void tok_free(TokFile *f) {
    if (!f) return;
    free(f->tokens);
    f->tokens = NULL;
    f->n = 0;
}

int tok_write_tmp(const char *path, const uint16_t *tokens, int64_t n, char **tmp, char *err, size_t errn) {
    *tmp = NULL;
    if (n < 0 || n > INT32_MAX) return fail(err, errn, "%s: cannot write %lld tokens: the header holds a 32-bit count", path, (long long)n);
    if (n > 0 && !tokens) return fail(err, errn, "%s: no tokens given", path);
    char *t, why[512];
    FILE *f = rt_tmp_create(path, &t, why, sizeof why);   /* (util.c: O_EXCL, PATH.PID.tmp) */
    if (!f) return fail(err, errn, "%s: cannot create a file beside it: %s", path, why);
    unsigned char h[TOK_HEADER_SIZE] = {0};
    put_le32(h, TOK_MAGIC);
    put_le32(h + 4, TOK_VERSION);
    put_le32(h + 8, (int32_t)n);
    int ok = fwrite(h, 1, sizeof h, f) == sizeof h;
    unsigned char buf[8192];
    for (int64_t i = 0; ok && i < n;) {
        size_t k = 0;
        for (; k + 2 <= sizeof buf && i < n; i++, k += 2) {
            buf[k] = (unsigned char)(tokens[i] & 0xff);
            buf[k + 1] = (unsigned char)(tokens[i] >> 8);
        }
        ok = fwrite(buf, 1, k, f) == k;
    }
    int e = errno;
    if (ok && (fflush(f) != 0 || fsync(fileno(f)) != 0)) ok = 0, e = errno;
    if (fclose(f) != 0 && ok) ok = 0, e = errno;
    if (!ok) {
        unlink(t);
        fail(err, errn, "%s: write error: %s", path, strerror(e));
        free(t);
        return -1;
    }
    *tmp = t;
    return 0;
}

int tok_write(const char *path, const uint16_t *tokens, int64_t n, char *err, size_t errn) {
    char *tmp;
    if (tok_write_tmp(path, tokens, n, &tmp, err, errn) != 0) return -1;
    int rc = 0;
    if (rename(tmp, path) != 0) {
        rc = fail(err, errn, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    return rc;
}

int tok_from_text_bytes(const char *text, size_t len, uint16_t **out, int64_t *n) {
    uint16_t *t = malloc(sizeof(uint16_t) * (len ? len : 1));
    *out = NULL;
    *n = 0;
    if (!t) return -1;
    for (size_t i = 0; i < len; i++) t[i] = (unsigned char)text[i];
    *out = t;
    *n = (int64_t)len;
    return 0;
}
