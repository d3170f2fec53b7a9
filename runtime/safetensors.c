/* runtime/safetensors.c — the header of a safetensors file: a strict
 * parser (fuzzed: tests/runtime/fuzz_safetensors.c) and the writer.
 *
 * File: u64 little-endian N, N bytes of JSON, the data section.
 *   {"__metadata__": {"key": "value", ...},
 *    "NAME": {"dtype": "F32", "shape": [2, 3], "data_offsets": [BEGIN, END]}, ...}
 * Offsets are relative to the data section.  The parser accepts exactly
 * this: an object whose values are the metadata object (string values
 * only) or tensor objects with those three keys, integers without sign,
 * fraction or exponent; JSON whitespace anywhere JSON allows it, and
 * trailing whitespace (the padding).  Anything else is an error with the
 * byte offset, never a crash: no recursion, every length checked. */
#include "rt.h"

#include <stdlib.h>
#include <string.h>

static const char *const st_dtypes[7] = {"F32", "F64", "BF16", "F16", "I32", "I64", "U8"};

const char *rt_st_dtype_name(TrnDType dt) { return (unsigned)dt <= TRN_U8 ? st_dtypes[dt] : "?"; }

typedef struct P {
    const unsigned char *s;
    size_t               n, i;
    char                *err;
    size_t               errn;
} P;

static int perr(P *p, const char *what) {
    return rt_fail(p->err, p->errn, "safetensors header: byte %zu: %s", p->i, what);
}

static void ws(P *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
}

static int peek(P *p) { return p->i < p->n ? p->s[p->i] : -1; }

static int expect(P *p, char c, const char *what) {
    ws(p);
    if (peek(p) != c) return perr(p, what);
    p->i++;
    return 0;
}

static int hex4(P *p, unsigned *out) {
    if (p->n - p->i < 4) return perr(p, "truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        int c = p->s[p->i++];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return perr(p, "bad \\u escape");
    }
    *out = v;
    return 0;
}

/* Length of the valid UTF-8 sequence at s[0..n), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, min = 0x10000;
    else return 0;
    if (n < len) return 0;
    unsigned cp = c & (0x3Fu >> (len - 1));
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[k] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

static void put_utf8(unsigned char *o, size_t *k, unsigned cp) {
    if (cp < 0x80) o[(*k)++] = (unsigned char)cp;
    else if (cp < 0x800) {
        o[(*k)++] = (unsigned char)(0xC0 | cp >> 6);
        o[(*k)++] = (unsigned char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        o[(*k)++] = (unsigned char)(0xE0 | cp >> 12);
        o[(*k)++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[(*k)++] = (unsigned char)(0x80 | (cp & 0x3F));
    } else {
        o[(*k)++] = (unsigned char)(0xF0 | cp >> 18);
        o[(*k)++] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        o[(*k)++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[(*k)++] = (unsigned char)(0x80 | (cp & 0x3F));
    }
}

/* string = '"' chars '"'; the decoded text is malloc'd (never longer than
 * the source: every escape is at least as long as what it encodes). */
static int parse_string(P *p, char **out) {
    *out = NULL;
    ws(p);
    if (peek(p) != '"') return perr(p, "expected a string");
    p->i++;
    size_t start = p->i;
    /* find the end first, to size the output */
    size_t j = start;
    while (j < p->n && p->s[j] != '"') j += p->s[j] == '\\' ? 2 : 1;
    if (j >= p->n) return perr(p, "unterminated string");
    unsigned char *o = rt_malloc(j - start + 1, p->err, p->errn);
    if (!o) return -1;
    size_t k = 0;
    while (p->s[p->i] != '"') {
        unsigned c = p->s[p->i];
        if (c < 0x20) {
            free(o);
            return perr(p, "control character in a string");
        }
        if (c != '\\') {
            size_t len = utf8_len(p->s + p->i, p->n - p->i);
            if (!len) {
                free(o);
                return perr(p, "invalid UTF-8 in a string");
            }
            memcpy(o + k, p->s + p->i, len);
            k += len;
            p->i += len;
            continue;
        }
        p->i++;
        c = p->s[p->i++];   /* within the string: the scan above saw it */
        unsigned cp;
        switch (c) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            if (hex4(p, &cp) != 0) {
                free(o);
                return -1;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (p->n - p->i < 2 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u') {
                    free(o);
                    return perr(p, "unpaired surrogate in a \\u escape");
                }
                p->i += 2;
                if (hex4(p, &lo) != 0) {
                    free(o);
                    return -1;
                }
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    free(o);
                    return perr(p, "unpaired surrogate in a \\u escape");
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                free(o);
                return perr(p, "unpaired surrogate in a \\u escape");
            }
            if (cp == 0) {
                free(o);
                return perr(p, "\\u0000 in a string");
            }
            break;
        default: free(o); return perr(p, "bad escape in a string");
        }
        if (p->i > j) {   /* the escape ran past the closing quote found above */
            free(o);
            return perr(p, "bad escape at the end of a string");
        }
        put_utf8(o, &k, cp);
    }
    p->i++;
    o[k] = 0;
    *out = (char *)o;
    return 0;
}

/* A non-negative integer: 0 | [1-9][0-9]*, below 2^63. */
static int parse_uint(P *p, uint64_t *out) {
    ws(p);
    int c = peek(p);
    if (c < '0' || c > '9') return perr(p, "expected a non-negative integer");
    uint64_t v = 0;
    if (c == '0') p->i++;
    else
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
            unsigned d = (unsigned)(p->s[p->i] - '0');
            if (v > ((uint64_t)INT64_MAX - d) / 10) return perr(p, "integer too large");
            v = v * 10 + d;
            p->i++;
        }
    c = peek(p);
    if (c == '.' || c == 'e' || c == 'E' || (c >= '0' && c <= '9')) return perr(p, "expected an integer without fraction, exponent or leading zero");
    *out = v;
    return 0;
}

/* '[' uint (',' uint)* ']' or '[' ']', at most maxn entries. */
static int parse_uint_array(P *p, uint64_t *vals, int maxn, int *count) {
    if (expect(p, '[', "expected '['") != 0) return -1;
    *count = 0;
    ws(p);
    if (peek(p) == ']') {
        p->i++;
        return 0;
    }
    for (;;) {
        if (*count == maxn) return perr(p, "too many entries in an array");
        if (parse_uint(p, &vals[(*count)++]) != 0) return -1;
        ws(p);
        if (peek(p) == ',') {
            p->i++;
            continue;
        }
        return expect(p, ']', "expected ',' or ']' in an array");
    }
}

/* '{' ( '"dtype"' ':' string | '"shape"' ':' array | '"data_offsets"' ':' array ) ... '}' */
static int parse_tensor(P *p, RtStTensor *t) {
    if (expect(p, '{', "expected '{' for a tensor") != 0) return -1;
    int have_dtype = 0, have_shape = 0, have_off = 0;
    ws(p);
    if (peek(p) == '}') return perr(p, "a tensor entry needs dtype, shape and data_offsets");
    for (;;) {
        char *key;
        if (parse_string(p, &key) != 0) return -1;
        if (expect(p, ':', "expected ':'") != 0) {
            free(key);
            return -1;
        }
        int rc = 0;
        if (strcmp(key, "dtype") == 0) {
            char *dt;
            if (have_dtype++) rc = perr(p, "duplicate key \"dtype\"");
            else if ((rc = parse_string(p, &dt)) == 0) {
                int found = -1;
                for (int d = 0; d < 7; d++)
                    if (strcmp(dt, st_dtypes[d]) == 0) found = d;
                free(dt);
                if (found < 0) rc = perr(p, "unsupported dtype (F32, F64, BF16, F16, I32, I64, U8)");
                else t->dtype = (TrnDType)found;
            }
        } else if (strcmp(key, "shape") == 0) {
            uint64_t v[TRN_MAX_RANK];
            if (have_shape++) rc = perr(p, "duplicate key \"shape\"");
            else if ((rc = parse_uint_array(p, v, TRN_MAX_RANK, &t->rank)) == 0)
                for (int d = 0; d < t->rank; d++) t->shape[d] = (int64_t)v[d];
        } else if (strcmp(key, "data_offsets") == 0) {
            uint64_t v[2];
            int cnt;
            if (have_off++) rc = perr(p, "duplicate key \"data_offsets\"");
            else if ((rc = parse_uint_array(p, v, 2, &cnt)) == 0) {
                if (cnt != 2) rc = perr(p, "data_offsets needs two entries");
                else {
                    t->begin = v[0];
                    t->end = v[1];
                }
            }
        } else {
            rc = perr(p, "unknown key in a tensor entry (expected dtype, shape, data_offsets)");
        }
        free(key);
        if (rc != 0) return -1;
        ws(p);
        if (peek(p) == ',') {
            p->i++;
            continue;
        }
        if (expect(p, '}', "expected ',' or '}' in a tensor entry") != 0) return -1;
        break;
    }
    if (!have_dtype || !have_shape || !have_off) return perr(p, "a tensor entry needs dtype, shape and data_offsets");
    return 0;
}

/* '{' ( string ':' string ) ... '}' */
static int parse_meta(P *p, RtSt *st) {
    if (expect(p, '{', "expected '{' for __metadata__") != 0) return -1;
    ws(p);
    if (peek(p) == '}') {
        p->i++;
        return 0;
    }
    int cap = 0;
    for (;;) {
        if (st->nmeta == cap) {
            cap = cap ? 2 * cap : 16;
            RtStMeta *m = rt_realloc(st->meta, (size_t)cap * sizeof *m, p->err, p->errn);
            if (!m) return -1;
            st->meta = m;
        }
        RtStMeta *m = &st->meta[st->nmeta];
        m->key = m->value = NULL;
        if (parse_string(p, &m->key) != 0) return -1;
        st->nmeta++;
        if (expect(p, ':', "expected ':'") != 0) return -1;
        ws(p);
        if (peek(p) != '"') return perr(p, "__metadata__ values must be strings");
        if (parse_string(p, &m->value) != 0) return -1;
        ws(p);
        if (peek(p) == ',') {
            p->i++;
            continue;
        }
        return expect(p, '}', "expected ',' or '}' in __metadata__");
    }
}

static int by_name(const void *a, const void *b) { return strcmp(((const RtStTensor *)a)->name, ((const RtStTensor *)b)->name); }
static int by_key(const void *a, const void *b) { return strcmp(((const RtStMeta *)a)->key, ((const RtStMeta *)b)->key); }
/* pointers to tensors, by the first byte of their data */
static int by_begin(const void *a, const void *b) {
    uint64_t x = (*(const RtStTensor *const *)a)->begin, y = (*(const RtStTensor *const *)b)->begin;
    return (x > y) - (x < y);
}

int rt_st_parse(const char *json, size_t len, uint64_t data_bytes, RtSt *st, char *err, size_t errn) {
    memset(st, 0, sizeof *st);
    P p = {(const unsigned char *)json, len, 0, err, errn};
    int cap = 0;
    ws(&p);
    if (peek(&p) != '{') {
        perr(&p, "the header must be a JSON object");
        goto fail;
    }
    p.i++;
    ws(&p);
    if (peek(&p) == '}') p.i++;
    else
        for (;;) {
            char *key;
            if (parse_string(&p, &key) != 0) goto fail;
            if (expect(&p, ':', "expected ':'") != 0) {
                free(key);
                goto fail;
            }
            if (strcmp(key, "__metadata__") == 0) {
                free(key);
                if (st->has_meta++) {
                    perr(&p, "duplicate __metadata__");
                    goto fail;
                }
                if (parse_meta(&p, st) != 0) goto fail;
            } else {
                if (st->ntensors == cap) {
                    cap = cap ? 2 * cap : 16;
                    RtStTensor *t = rt_realloc(st->t, (size_t)cap * sizeof *t, err, errn);
                    if (!t) {
                        free(key);
                        goto fail;
                    }
                    st->t = t;
                }
                RtStTensor *t = &st->t[st->ntensors++];
                memset(t, 0, sizeof *t);
                t->name = key;
                if (parse_tensor(&p, t) != 0) goto fail;
            }
            ws(&p);
            if (peek(&p) == ',') {
                p.i++;
                continue;
            }
            if (expect(&p, '}', "expected ',' or '}'") != 0) goto fail;
            break;
        }
    ws(&p);
    if (p.i != p.n) {
        perr(&p, "text after the header object (only space padding may follow)");
        goto fail;
    }
    /* semantic checks */
    if (st->ntensors > 1) qsort(st->t, (size_t)st->ntensors, sizeof *st->t, by_name);
    if (st->nmeta > 1) qsort(st->meta, (size_t)st->nmeta, sizeof *st->meta, by_key);
    for (int i = 1; i < st->ntensors; i++)
        if (strcmp(st->t[i - 1].name, st->t[i].name) == 0) {
            rt_fail(err, errn, "safetensors header: tensor '%s' appears twice", st->t[i].name);
            goto fail;
        }
    for (int i = 1; i < st->nmeta; i++)
        if (strcmp(st->meta[i - 1].key, st->meta[i].key) == 0) {
            rt_fail(err, errn, "safetensors header: metadata key '%s' appears twice", st->meta[i].key);
            goto fail;
        }
    for (int i = 0; i < st->ntensors; i++) {
        RtStTensor *t = &st->t[i];
        int64_t numel = 1;
        for (int d = 0; d < t->rank; d++) {
            if (t->shape[d] > 0 && numel > INT64_MAX / t->shape[d]) {
                rt_fail(err, errn, "safetensors header: tensor '%s' is too large", t->name);
                goto fail;
            }
            numel *= t->shape[d];
        }
        int64_t bytes = rt_nbytes(t->dtype, numel);
        if (bytes < 0) {
            rt_fail(err, errn, "safetensors header: tensor '%s' is too large", t->name);
            goto fail;
        }
        if (t->begin > t->end || t->end > data_bytes) {
            rt_fail(err, errn, "safetensors header: tensor '%s' has data_offsets [%llu, %llu] outside the %llu-byte data section", t->name,
                    (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)data_bytes);
            goto fail;
        }
        if (t->end - t->begin != (uint64_t)bytes) {
            rt_fail(err, errn, "safetensors header: tensor '%s' has %llu bytes of data, its dtype and shape need %lld", t->name,
                    (unsigned long long)(t->end - t->begin), (long long)bytes);
            goto fail;
        }
    }
    /* no two tensors' bytes overlap (the format forbids it; a write of one
     * would change the other), and together they fill the data section:
     * no gap, nothing after the last (the format forbids both: a file cut
     * or joined to another shows so) */
    if (st->ntensors == 0 && data_bytes > 0) {
        rt_fail(err, errn, "safetensors header: no tensor, and %llu bytes of data after it", (unsigned long long)data_bytes);
        goto fail;
    }
    if (st->ntensors > 0) {
        const RtStTensor **by = malloc(sizeof *by * (size_t)st->ntensors);
        if (!by) {
            rt_fail(err, errn, "out of memory");
            goto fail;
        }
        for (int i = 0; i < st->ntensors; i++) by[i] = &st->t[i];
        qsort(by, (size_t)st->ntensors, sizeof *by, by_begin);
        const RtStTensor *prev = NULL;
        for (int i = 0; i < st->ntensors; i++) {
            if (by[i]->begin == by[i]->end) continue; /* no bytes */
            if (prev && by[i]->begin < prev->end) {
                rt_fail(err, errn, "safetensors header: tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap", prev->name,
                        (unsigned long long)prev->begin, (unsigned long long)prev->end, by[i]->name, (unsigned long long)by[i]->begin,
                        (unsigned long long)by[i]->end);
                free(by);
                goto fail;
            }
            uint64_t at = prev ? prev->end : 0;
            if (by[i]->begin > at) {
                rt_fail(err, errn, "safetensors header: bytes [%llu, %llu) of the data section belong to no tensor (before '%s')",
                        (unsigned long long)at, (unsigned long long)by[i]->begin, by[i]->name);
                free(by);
                goto fail;
            }
            prev = by[i];
        }
        free(by);
        uint64_t end = prev ? prev->end : 0;
        if (end < data_bytes) {
            rt_fail(err, errn, "safetensors header: %llu bytes after the last tensor's data (the data section has %llu, the tensors %llu)",
                    (unsigned long long)(data_bytes - end), (unsigned long long)data_bytes, (unsigned long long)end);
            goto fail;
        }
    }
    return 0;
fail:
    rt_st_free(st);
    return -1;
}

void rt_st_free(RtSt *st) {
    for (int i = 0; i < st->ntensors; i++) free(st->t[i].name);
    for (int i = 0; i < st->nmeta; i++) {
        free(st->meta[i].key);
        free(st->meta[i].value);
    }
    free(st->t);
    free(st->meta);
    memset(st, 0, sizeof *st);
}

const char *rt_st_meta(const RtSt *st, const char *key) {
    for (int i = 0; i < st->nmeta; i++)
        if (strcmp(st->meta[i].key, key) == 0) return st->meta[i].value;
    return NULL;
}

const RtStTensor *rt_st_find(const RtSt *st, const char *name) {
    if (st->ntensors == 0) return NULL;
    RtStTensor key;
    key.name = (char *)name;
    return bsearch(&key, st->t, (size_t)st->ntensors, sizeof *st->t, by_name);
}

int rt_st_header(const RtStTensor *t, int n, const RtStMeta *meta, int nmeta, char **out, size_t *len, char *err, size_t errn) {
    RtBuf b = {0};
    rt_buf_printf(&b, "{");
    if (nmeta > 0) {
        rt_buf_printf(&b, "\"__metadata__\":{");
        for (int i = 0; i < nmeta; i++) {
            if (i) rt_buf_printf(&b, ",");
            rt_buf_json_string(&b, meta[i].key);
            rt_buf_printf(&b, ":");
            rt_buf_json_string(&b, meta[i].value);
        }
        rt_buf_printf(&b, "}");
    }
    for (int i = 0; i < n; i++) {
        if (i || nmeta > 0) rt_buf_printf(&b, ",");
        rt_buf_json_string(&b, t[i].name);
        rt_buf_printf(&b, ":{\"dtype\":\"%s\",\"shape\":[", rt_st_dtype_name(t[i].dtype));
        for (int d = 0; d < t[i].rank; d++) rt_buf_printf(&b, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
        rt_buf_printf(&b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)t[i].begin, (unsigned long long)t[i].end);
    }
    rt_buf_printf(&b, "}");
    while (!b.oom && b.len % 8 != 0) rt_buf_printf(&b, " ");
    if (b.oom) {
        rt_buf_free(&b);
        return rt_fail(err, errn, "out of memory building a safetensors header at %s:%d", rt_srcname(__FILE__), __LINE__);
    }
    *out = b.p;
    *len = b.len;
    return 0;
}
