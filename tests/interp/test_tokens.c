/* tests/interp/test_tokens.c — token files (runtime/tokens.c) and
 * trainc-tokenize.
 *
 *   interp_tokens SCRATCH                         round trip, malformed files
 *   interp_tokens SCRATCH --tool T --data TEXT    tokenize TEXT (tinyshakespeare)
 *                                                 with T, and T's errors; exit 77 (skip)
 *                                                 if TEXT is absent
 */
#include "tokens.h"

#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                             \
        }                                                                           \
    } while (0)

static const char *scratch;

static char *path_in_scratch(const char *name) {
    static char buf[4][1024];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", scratch, name);
    return p;
}

static void put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8), p[2] = (unsigned char)(v >> 16), p[3] = (unsigned char)(v >> 24);
}

/* Writes a file with header (magic, version, count) and nbytes payload bytes
 * (or only hbytes of the header when hbytes < 1024). */
static void write_raw(const char *path, uint32_t magic, uint32_t version, uint32_t count, size_t hbytes, size_t nbytes) {
    unsigned char h[TOK_HEADER_SIZE] = {0};
    put32(h, magic);
    put32(h + 4, version);
    put32(h + 8, count);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    fwrite(h, 1, hbytes, f);
    for (size_t i = 0; i < nbytes; i++) fputc((int)(i & 0xff), f);
    fclose(f);
}

/* A file of times copies of line. */
static void write_text(const char *path, const char *line, int times) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    for (int i = 0; i < times; i++) fputs(line, f);
    fclose(f);
}

/* tok_read fails with a message containing want (and naming the file). */
static void expect_error(const char *path, const char *want) {
    TokFile t = {(uint16_t *)1, 5};
    char err[512] = "";
    int rc = tok_read(path, &t, err, sizeof err);
    CHECK(rc == -1);
    CHECK(t.tokens == NULL && t.n == 0);
    if (!strstr(err, want) || !strstr(err, path)) {
        fprintf(stderr, "for %s expected an error containing '%s', got '%s'\n", path, want, err);
        failures++;
    }
}

static char *slurp(const char *path, long *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    rewind(f);
    char *b = malloc((size_t)*len + 1);
    if (fread(b, 1, (size_t)*len, f) != (size_t)*len) *len = -1;
    b[*len > 0 ? *len : 0] = 0;
    fclose(f);
    return b;
}

/* How many files in the scratch folder start with prefix and end ".tmp". */
static int count_tmp(const char *prefix) {
    DIR *d = opendir(scratch);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0 && l > 4 && strcmp(e->d_name + l - 4, ".tmp") == 0;
    }
    if (d) closedir(d);
    return n;
}

static void test_round_trip(void) {
    enum { N = 70000 };
    uint16_t *tok = malloc(sizeof(uint16_t) * N);
    for (int i = 0; i < N; i++) tok[i] = (uint16_t)(i * 2654435761u >> 7);
    tok[0] = 0, tok[1] = 65535, tok[2] = 256;
    const char *p = path_in_scratch("rt_round.bin");
    char err[512];
    CHECK(tok_write(p, tok, N, err, sizeof err) == 0);
    /* the bytes on disk: little-endian header and tokens, nothing else */
    FILE *f = fopen(p, "rb");
    CHECK(f != NULL);
    if (f) {
        unsigned char h[TOK_HEADER_SIZE + 4];
        CHECK(fread(h, 1, sizeof h, f) == sizeof h);
        CHECK(h[0] == (20240520 & 0xff) && h[1] == ((20240520 >> 8) & 0xff) && h[2] == ((20240520 >> 16) & 0xff) && h[3] == 0x01);
        CHECK(h[4] == 1 && h[5] == 0 && h[8] == (N & 0xff) && h[9] == ((N >> 8) & 0xff) && h[10] == (N >> 16));
        CHECK(h[12] == 0 && h[1023] == 0);
        CHECK(h[1024] == 0 && h[1025] == 0 && h[1026] == 0xff && h[1027] == 0xff);
        fseek(f, 0, SEEK_END);
        CHECK(ftell(f) == TOK_HEADER_SIZE + 2L * N);
        fclose(f);
    }
    CHECK(count_tmp("rt_round.bin.") == 0); /* renamed into place */
    TokFile t;
    CHECK(tok_read(p, &t, err, sizeof err) == 0);
    CHECK(t.n == N && memcmp(t.tokens, tok, sizeof(uint16_t) * N) == 0);
    tok_free(&t);
    CHECK(t.tokens == NULL && t.n == 0);
    /* an empty token file is valid */
    CHECK(tok_write(p, NULL, 0, err, sizeof err) == 0);
    CHECK(tok_read(p, &t, err, sizeof err) == 0 && t.n == 0);
    tok_free(&t);
    /* overwriting an existing file works; a missing folder is an error */
    CHECK(tok_write(p, tok, 3, err, sizeof err) == 0);
    CHECK(tok_read(p, &t, err, sizeof err) == 0 && t.n == 3 && t.tokens[1] == 65535);
    tok_free(&t);
    CHECK(tok_write(path_in_scratch("no/such/dir/x.bin"), tok, 3, err, sizeof err) == -1 && strstr(err, "cannot create"));
    /* no existing file is opened for writing: a file of the user's named
     * PATH.tmp stays as it was, and a link at PATH.PID.tmp is not written
     * through (the next name, PATH.PID.1.tmp, is taken instead) */
    char victim[1024], link[1024], user_tmp[1024];
    snprintf(victim, sizeof victim, "%s", path_in_scratch("rt_victim.txt"));
    snprintf(link, sizeof link, "%s.%d.tmp", p, (int)getpid());
    snprintf(user_tmp, sizeof user_tmp, "%s.tmp", p);
    write_text(victim, "keep me\n", 1);
    write_text(user_tmp, "mine\n", 1);
    remove(link);
    CHECK(symlink(victim, link) == 0);
    CHECK(tok_write(p, tok, 5, err, sizeof err) == 0);
    CHECK(tok_read(p, &t, err, sizeof err) == 0 && t.n == 5 && t.tokens[1] == 65535);
    tok_free(&t);
    long vlen, ulen;
    char *v = slurp(victim, &vlen), *u = slurp(user_tmp, &ulen);
    CHECK(v && strcmp(v, "keep me\n") == 0);
    CHECK(u && strcmp(u, "mine\n") == 0);
    free(v), free(u);
    struct stat st;
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(count_tmp("rt_round.bin.") == 2); /* the two planted above, nothing else */
    remove(link), remove(user_tmp), remove(victim);
    CHECK(tok_write(p, tok, -1, err, sizeof err) == -1);
    free(tok);
}

static void test_malformed(void) {
    const char *p;
    p = path_in_scratch("rt_missing.bin");
    remove(p);
    expect_error(p, "cannot open");
    p = path_in_scratch("rt_empty.bin");
    write_raw(p, TOK_MAGIC, 1, 0, 0, 0);
    expect_error(p, "truncated header");
    p = path_in_scratch("rt_short_header.bin");
    write_raw(p, TOK_MAGIC, 1, 0, 500, 0);
    expect_error(p, "truncated header");
    p = path_in_scratch("rt_magic.bin");
    write_raw(p, 20240521, 1, 4, TOK_HEADER_SIZE, 8);
    expect_error(p, "bad magic number 20240521");
    {   /* a binary file gets no hint; text (the corpus itself, say) is told to tokenize */
        TokFile t = {0};
        char err[512] = "";
        CHECK(tok_read(p, &t, err, sizeof err) == -1 && !strstr(err, "trainc-tokenize"));
        const char *line = "First Citizen:\n\tBefore we proceed any further, hear me speak.\r\n\xc3\xa9t\xc3\xa9\n";
        write_text(p = path_in_scratch("rt_text.txt"), line, 40);
        expect_error(p, "not a token file in llm.c's format; the file looks like text: make token files from it with `trainc-tokenize");
        write_text(p = path_in_scratch("rt_short_text.txt"), line, 1);
        expect_error(p, "a 1024-byte header; the file looks like text");
    }
    p = path_in_scratch("rt_version.bin");
    write_raw(p, TOK_MAGIC, 2, 4, TOK_HEADER_SIZE, 8);
    expect_error(p, "unsupported version 2");
    p = path_in_scratch("rt_negative.bin");
    write_raw(p, TOK_MAGIC, 1, 0xffffffffu, TOK_HEADER_SIZE, 8);
    expect_error(p, "bad token count -1");
    p = path_in_scratch("rt_truncated.bin");
    write_raw(p, TOK_MAGIC, 1, 100, TOK_HEADER_SIZE, 20);
    expect_error(p, "truncated: the header announces 100 tokens");
    p = path_in_scratch("rt_huge.bin");
    write_raw(p, TOK_MAGIC, 1, 0x7fffffffu, TOK_HEADER_SIZE, 20);
    expect_error(p, "truncated");
    p = path_in_scratch("rt_extra.bin");
    write_raw(p, TOK_MAGIC, 1, 5, TOK_HEADER_SIZE, 20);
    expect_error(p, "count mismatch");
    p = path_in_scratch("rt_odd.bin");
    write_raw(p, TOK_MAGIC, 1, 5, TOK_HEADER_SIZE, 11);
    expect_error(p, "count mismatch");
    expect_error(scratch, "cannot read"); /* a folder */
    /* a well-formed raw file reads back */
    p = path_in_scratch("rt_ok.bin");
    write_raw(p, TOK_MAGIC, 1, 3, TOK_HEADER_SIZE, 6);
    TokFile t;
    char err[512];
    CHECK(tok_read(p, &t, err, sizeof err) == 0 && t.n == 3 && t.tokens[0] == 0x0100 && t.tokens[2] == 0x0504);
    tok_free(&t);
}

/* Mutated and cut copies of a valid file: tok_read accepts exactly the
 * well-formed ones and never crashes (run under ASan in build-*-asan). */
static void test_fuzz(void) {
    enum { NT = 10, SIZE = TOK_HEADER_SIZE + 2 * NT };
    unsigned char good[SIZE] = {0}, buf[SIZE + 8];
    put32(good, TOK_MAGIC);
    put32(good + 4, TOK_VERSION);
    put32(good + 8, NT);
    for (int i = 0; i < 2 * NT; i++) good[TOK_HEADER_SIZE + i] = (unsigned char)(i * 37);
    const char *p = path_in_scratch("rt_fuzz.bin");
    uint32_t r = 12345;
    int accepted = 0, bad = 0;
    for (int iter = 0; iter < 200; iter++) {
        memcpy(buf, good, SIZE);
        memset(buf + SIZE, 0xab, 8);
        size_t len = SIZE;
        r = r * 1664525u + 1013904223u;
        if (r >> 31) len = (r >> 8) % (SIZE + 9);              /* cut or extend */
        r = r * 1664525u + 1013904223u;
        int flips = (int)(r >> 30);                             /* 0..3 byte changes, mostly in the header fields */
        for (int k = 0; k < flips; k++) {
            r = r * 1664525u + 1013904223u;
            size_t at = (r >> 28) < 12 ? (r >> 8) % 12 : (r >> 8) % SIZE;
            r = r * 1664525u + 1013904223u;
            buf[at] = (unsigned char)(r >> 24);
        }
        FILE *f = fopen(p, "wb");
        if (!f) break;
        fwrite(buf, 1, len, f);
        fclose(f);
        TokFile t;
        char err[512];
        int rc = tok_read(p, &t, err, sizeof err);
        bool wellformed = len >= TOK_HEADER_SIZE && memcmp(buf, good, 8) == 0 &&
                          (long)len == TOK_HEADER_SIZE + 2L * (long)(buf[8] | buf[9] << 8 | buf[10] << 16 | (uint32_t)buf[11] << 24) &&
                          buf[11] < 0x80;
        if ((rc == 0) != wellformed) bad++;
        if (rc == 0) {
            accepted++;
            bad += t.n != NT;
            for (int64_t i = 0; i < t.n; i++) bad += t.tokens[i] != (buf[TOK_HEADER_SIZE + 2 * i] | buf[TOK_HEADER_SIZE + 2 * i + 1] << 8);
            tok_free(&t);
        } else {
            bad += err[0] == 0;
        }
    }
    CHECK(bad == 0);
    CHECK(accepted > 0);
}

static void test_bytes(void) {
    uint16_t *t;
    int64_t n;
    CHECK(tok_from_text_bytes("Hi\xff\0x", 5, &t, &n) == 0);
    CHECK(n == 5 && t[0] == 'H' && t[1] == 'i' && t[2] == 255 && t[3] == 0 && t[4] == 'x');
    free(t);
    CHECK(tok_from_text_bytes("", 0, &t, &n) == 0 && n == 0);
    free(t);
}


/* trainc-tokenize on the text; both splits read back and together are the
 * text's bytes. */
static void tokenize_case(const char *tool, const char *data, const char *prefix, const char *extra, double frac) {
    long len;
    char *text = slurp(data, &len);
    CHECK(text && len >= 0);
    if (!text) return;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' %s", tool, data, path_in_scratch(prefix), extra);
    printf("$ %s\n", cmd);
    fflush(stdout);
    CHECK(system(cmd) == 0);
    char ptrain[1024], pval[1024], err[512];
    snprintf(ptrain, sizeof ptrain, "%s_train.bin", path_in_scratch(prefix));
    snprintf(pval, sizeof pval, "%s_val.bin", path_in_scratch(prefix));
    TokFile tr, va;
    int ok = tok_read(ptrain, &tr, err, sizeof err) == 0;
    if (!ok) fprintf(stderr, "%s\n", err);
    ok = ok && tok_read(pval, &va, err, sizeof err) == 0;
    CHECK(ok);
    if (ok) {
        int64_t nval = (int64_t)floor(frac * (double)len + 1e-9);
        CHECK(va.n == nval && tr.n == len - nval);
        int bad = 0;
        for (int64_t i = 0; i < tr.n; i++) bad += tr.tokens[i] != (unsigned char)text[i];
        for (int64_t i = 0; i < va.n; i++) bad += va.tokens[i] != (unsigned char)text[tr.n + i];
        CHECK(bad == 0);
        printf("%s: %ld bytes -> %lld train + %lld val tokens\n", data, len, (long long)tr.n, (long long)va.n);
        tok_free(&tr);
        tok_free(&va);
    }
    free(text);
}

static int test_tool(const char *tool, const char *data) {
    FILE *f = fopen(data, "rb");
    if (!f) {
        printf("SKIP: %s is absent; the tokenizer test on it is skipped\n", data);
        return 77;
    }
    fclose(f);
    long len;
    free(slurp(data, &len));
    if (strstr(data, "tinyshakespeare")) CHECK(len == 1115394);
    tokenize_case(tool, data, "shakespeare", "", 0.1);
    /* a small file with another fraction */
    const char *small = path_in_scratch("tool_small.txt");
    FILE *s = fopen(small, "wb");
    CHECK(s != NULL);
    if (s) {
        fputs("hello, world\n\xc3\xa9t\xc3\xa9\n", s);
        fclose(s);
        tokenize_case(tool, small, "tool_small", "--val-fraction 0.5", 0.5);
    }
    /* the last floor(F x bytes) bytes as F is written: 0.29 of 100 is 29
     * (0.29 * 100 is 28.999999999999996 in doubles) */
    const char *hundred = path_in_scratch("tool_100.txt");
    write_text(hundred, "0123456789", 10);
    tokenize_case(tool, hundred, "tool_100", "--val-fraction 0.29", 0.29);
    char pv[1100], e2[512];
    snprintf(pv, sizeof pv, "%s_val.bin", path_in_scratch("tool_100"));
    TokFile v100;
    int r100 = tok_read(pv, &v100, e2, sizeof e2) == 0;
    CHECK(r100 && v100.n == 29);
    if (r100) tok_free(&v100);
    /* exactly, where a double's product rounds the other way near a whole
     * number: floor(0.12345678901 x 33263112) = 4106556 (4106556.99999...) */
    char big[1100], bigp[1100], cmd2[4096];
    snprintf(big, sizeof big, "%s", path_in_scratch("tool_33m.txt"));
    snprintf(bigp, sizeof bigp, "%s", path_in_scratch("tool_33m"));
    FILE *bf = fopen(big, "wb");
    CHECK(bf != NULL);
    if (bf) {
        static char row[33263112 / 8];
        memset(row, 'a', sizeof row);
        for (int i = 0; i < 8; i++) fwrite(row, 1, sizeof row, bf);
        fclose(bf);
        snprintf(cmd2, sizeof cmd2, "'%s' '%s' '%s' --val-fraction 0.12345678901 > /dev/null", tool, big, bigp);
        CHECK(system(cmd2) == 0);
        char pvb[1200];
        snprintf(pvb, sizeof pvb, "%s_val.bin", bigp);
        TokFile vb;
        int rb = tok_read(pvb, &vb, e2, sizeof e2) == 0;
        CHECK(rb && vb.n == 4106556);
        if (rb) {
            if (vb.n != 4106556) fprintf(stderr, "0.12345678901 of 33263112 bytes: %lld, not 4106556\n", (long long)vb.n);
            tok_free(&vb);
        }
        remove(big);
        remove(pvb);
        snprintf(pvb, sizeof pvb, "%s_train.bin", bigp);
        remove(pvb);
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' --val-fraction 1.5 2>/dev/null", tool, small, path_in_scratch("tool_bad"));
    CHECK(system(cmd) != 0);
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' 2>/dev/null", tool, path_in_scratch("no_such_file.txt"), path_in_scratch("tool_bad"));
    CHECK(system(cmd) != 0);
    return 0;
}

/* trainc-tokenize writes both splits or neither: a folder where the
 * validation file goes is an error before anything is written (the
 * training file used to be replaced first), and a folder as the input is a
 * read error that says why. */
static void test_tool_errors(const char *tool) {
    const char *text = path_in_scratch("tool_err.txt"), *log = path_in_scratch("tool_err.log");
    write_text(text, "to be, or not to be\n", 10);
    char prefix[1024], ptrain[1100], pval[1100], ptmp[1200], cmd[4096], err[512];
    snprintf(prefix, sizeof prefix, "%s", path_in_scratch("tool_err"));
    snprintf(ptrain, sizeof ptrain, "%s_train.bin", prefix);
    snprintf(pval, sizeof pval, "%s_val.bin", prefix);
    snprintf(ptmp, sizeof ptmp, "%s.tmp", ptrain);
    remove(pval);
    CHECK(tok_write(ptrain, (const uint16_t[]){1, 2, 3}, 3, err, sizeof err) == 0);
    CHECK(mkdir(pval, 0755) == 0);
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' > /dev/null 2> '%s'", tool, text, prefix, log);
    int st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    TokFile t;
    CHECK(tok_read(ptrain, &t, err, sizeof err) == 0 && t.n == 3 && t.tokens[2] == 3); /* the old file */
    tok_free(&t);
    CHECK(count_tmp("tool_err_") == 0);
    long len;
    char *msg = slurp(log, &len);
    CHECK(msg && strstr(msg, "_val.bin: cannot write: Is a directory (nothing was written)"));
    if (msg && !strstr(msg, "Is a directory")) fprintf(stderr, "got: %s\n", msg);
    free(msg);
    rmdir(pval);
    /* a successful run leaves a file of the user's at the old temporary
     * name (PATH.tmp) alone, and no temporary file of its own */
    write_text(ptmp, "mine\n", 1);
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' > /dev/null 2> '%s'", tool, text, prefix, log);
    st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(tok_read(ptrain, &t, err, sizeof err) == 0 && t.n == 180);
    tok_free(&t);
    msg = slurp(ptmp, &len);
    CHECK(msg && strcmp(msg, "mine\n") == 0);
    free(msg);
    CHECK(count_tmp("tool_err_") == 1);
    remove(ptmp);
    /* a folder as the input */
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' > /dev/null 2> '%s'", tool, scratch, prefix, log);
    st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    msg = slurp(log, &len);
    CHECK(msg && strstr(msg, ": read error: Is a directory"));
    if (msg && !strstr(msg, "read error: Is a directory")) fprintf(stderr, "got: %s\n", msg);
    free(msg);
    /* (path_in_scratch's buffers are reused: text and log copied) */
    char txt[1100], lg[1100];
    snprintf(txt, sizeof txt, "%s", text);
    snprintf(lg, sizeof lg, "%s", log);
    text = txt;
    log = lg;
    /* the slips it refuses, nothing written: a token file as the input,
     * an output that is the input, a fraction in hex */
    struct {
        const char *what, *in, *prefix, *extra, *want;
    } refused[] = {
        {"a token file as the input", ptrain, "tool_again", "", "_train.bin is a token file (llm.c's format, magic number 20240520), not text (give it to --data as it is)"},
        {"an output that is the input", "", "", "", "_train.bin: its tokens would replace the text (nothing was written)"},
        {"--val-fraction in hex", text, "tool_hex", "--val-fraction 0x0.8", "--val-fraction needs a number in [0, 1), got '0x0.8'"},
    };
    char same_in[1100];
    snprintf(same_in, sizeof same_in, "%s", path_in_scratch("tool_same_train.bin"));
    write_text(same_in, "not tokens\n", 1);
    refused[1].in = same_in;
    refused[1].prefix = "tool_same";
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char pre[1100], out1[1200];
        snprintf(pre, sizeof pre, "%s", path_in_scratch(refused[i].prefix));
        snprintf(out1, sizeof out1, "%s_val.bin", pre);
        remove(out1); /* (a run before this one's) */
        snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' %s > /dev/null 2> '%s'", tool, refused[i].in, pre, refused[i].extra, log);
        st = system(cmd);
        msg = slurp(log, &len);
        int ok = WIFEXITED(st) && WEXITSTATUS(st) != 0 && msg && strstr(msg, refused[i].want) && access(out1, F_OK) != 0;
        CHECK(ok);
        if (!ok) fprintf(stderr, "%s: got status %d: %s\n", refused[i].what, st, msg ? msg : "(nothing)");
        free(msg);
    }
    msg = slurp(same_in, &len);
    CHECK(msg && strcmp(msg, "not tokens\n") == 0); /* the input as it was */
    free(msg);
    /* an empty text: written, with a warning for each empty split */
    char empty[1100];
    snprintf(empty, sizeof empty, "%s", path_in_scratch("tool_empty.txt"));
    write_text(empty, "", 0);
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' > /dev/null 2> '%s'", tool, empty, path_in_scratch("tool_empty"), log);
    st = system(cmd);
    msg = slurp(log, &len);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && msg && strstr(msg, "warning: ") && strstr(msg, "tool_empty_train.bin holds no tokens (the text has 0 bytes)") &&
          strstr(msg, "tool_empty_val.bin holds no tokens"));
    free(msg);
    /* --val-fraction 0: the empty validation split asked for, no warning */
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' --val-fraction 0 > /dev/null 2> '%s'", tool, text, path_in_scratch("tool_nov"), log);
    st = system(cmd);
    msg = slurp(log, &len);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && msg && len == 0);
    if (!(msg && len == 0)) fprintf(stderr, "--val-fraction 0: status %d: %s\n", st, msg ? msg : "(nothing)");
    free(msg);
    /* stdout that cannot be written: an error, exit 1 */
    if (access("/dev/full", W_OK) == 0) {
        snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' > /dev/full 2> '%s'", tool, text, path_in_scratch("tool_full"), log);
        st = system(cmd);
        msg = slurp(log, &len);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1 && msg && strstr(msg, "cannot write to stdout"));
        free(msg);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: interp_tokens SCRATCH [--tool T --data TEXT]\n");
        return 2;
    }
    scratch = argv[1];
    const char *tool = NULL, *data = NULL;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--tool") == 0) tool = argv[i + 1];
        if (strcmp(argv[i], "--data") == 0) data = argv[i + 1];
    }
    if (tool && data) {
        test_tool_errors(tool);
        int rc = test_tool(tool, data);
        if (rc == 77 && !failures) return 77;
    } else {
        test_round_trip();
        test_malformed();
        test_fuzz();
        test_bytes();
    }
    if (failures) {
        fprintf(stderr, "interp_tokens: %d failure%s\n", failures, failures == 1 ? "" : "s");
        return 1;
    }
    printf("interp_tokens: ok\n");
    return 0;
}
