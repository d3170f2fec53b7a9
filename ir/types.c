/* ir/types.c — dtypes, shapes, the op property table, the train keys. */
#include "ir.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *const dtype_name[DT__COUNT] = {
#define X(n, b, f) #n,
    DTYPES(X)
#undef X
};
const int dtype_size[DT__COUNT] = {
#define X(n, b, f) b,
    DTYPES(X)
#undef X
};
const bool dtype_is_float[DT__COUNT] = {
#define X(n, b, f) f,
    DTYPES(X)
#undef X
};

bool dtype_parse(const char *s, DType *out) {
    for (int i = 0; i < DT__COUNT; i++)
        if (strcmp(s, dtype_name[i]) == 0) {
            *out = (DType)i;
            return true;
        }
    return false;
}

int64_t shape_numel(const Shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->d[i];
    return n;
}

bool shape_eq(const Shape *a, const Shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->d[i] != b->d[i]) return false;
    return true;
}

bool type_eq(const Type *a, const Type *b) { return a->dt == b->dt && shape_eq(&a->shape, &b->shape); }

bool shape_broadcast(const Shape *a, const Shape *b, Shape *out) {
    Shape r = {0};
    r.rank = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < r.rank; i++) {
        int ia = a->rank - r.rank + i, ib = b->rank - r.rank + i;
        int64_t da = ia >= 0 ? a->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        r.d[i] = da == 1 ? db : da;
    }
    *out = r;
    return true;
}

Shape shape_make(int rank, const int64_t *d) {
    Shape s = {0};
    s.rank = rank;
    for (int i = 0; i < rank; i++) s.d[i] = d[i];
    return s;
}

char *shape_str(const Shape *s, char *buf, size_t n) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int i = 0; i < s->rank && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)s->d[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

char *type_str(const Type *t, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "%s", dtype_name[t->dt]);
    if (k < n) shape_str(&t->shape, buf + k, n - k);
    return buf;
}

/* ---- the op table ---- */

const OpInfo op_info[OP__COUNT] = {
#define OP(name, mi, ma, no, fl) [OP_##name] = {#name, mi, ma, no, fl},
#include "ops.h"
#undef OP
};

bool op_lookup(const char *name, Op *out) {
    for (int i = 0; i < OP__COUNT; i++)
        if (strcmp(op_info[i].name, name) == 0) {
            *out = (Op)i;
            return true;
        }
    return false;
}

/* ---- train keys ---- */

const TrainKeyInfo train_keys[] = {
#define X(name, kind, def, allowed) {#name, kind, def, allowed, offsetof(TrainConfig, name)},
    TRAIN_KEYS(X)
#undef X
};
const int ntrain_keys = (int)(sizeof train_keys / sizeof train_keys[0]);

const TrainKeyInfo *train_key_lookup(const char *name) {
    for (int i = 0; i < ntrain_keys; i++)
        if (strcmp(train_keys[i].name, name) == 0) return &train_keys[i];
    return NULL;
}

static bool allowed_has(const char *allowed, const char *v) {
    size_t n = strlen(v);
    for (const char *p = allowed; *p;) {
        const char *e = strchr(p, ' ');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, v, n) == 0) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

/* "40GB", "512MiB", "1.5 TB" -> bytes; false if not a size.  A size with a
 * unit is rounded down to whole bytes; one that is not 0 but rounds to 0
 * ("0.0001KB") is refused, since 0 means no budget. */
size_t ir_number_len(const char *s) {
    const char *p = s;
    int digits = 0;
    while (*p >= '0' && *p <= '9') p++, digits++;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++) digits++;
    if (!digits) return 0;
    if (*p == 'e' || *p == 'E') {
        const char *q = p + 1 + (p[1] == '+' || p[1] == '-');
        if (*q >= '0' && *q <= '9')
            for (p = q; *p >= '0' && *p <= '9'; p++) {}
    }
    return (size_t)(p - s);
}

bool train_parse_size(const char *s, int64_t *out, const char **why) {
    static const char *dummy;
    if (!why) why = &dummy;
    *why = NULL;
    size_t len = ir_number_len(s);   /* no sign, blank or hex: "1.5", "1e9" */
    if (!len) return false;
    const char *p = s + len;
    double v = strtod(s, NULL);
    bool nonzero = false; /* a mantissa that is not 0 (1e-400 underflows to 0) */
    for (const char *q = s; q < p && *q != 'e' && *q != 'E'; q++) nonzero |= *q >= '1' && *q <= '9';
    if (v == 0 && nonzero) return *why = "it rounds down to 0 bytes, and 0 means no budget", false;
    const char *end = p;
    while (*end == ' ') end++;
    static const struct { const char *unit; double mul; } units[] = {
        {"", 1}, {"b", 1}, {"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
        {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0},
    };
    for (size_t i = 0; i < sizeof units / sizeof *units; i++)
        if (strcasecmp(end, units[i].unit) == 0 && (end == p || units[i].unit[0])) { /* "12 " is not 12 */
            double b = v * units[i].mul;
            if (b >= 9.2e18) return *why = "it is too large", false;
            if (units[i].mul == 1 && b != floor(b)) return *why = "a size in bytes is a whole number", false; /* "0.5B" */
            if (b > 0 && b < 1) return *why = "it rounds down to 0 bytes, and 0 means no budget", false; /* "0.0001KB" */
            *out = (int64_t)b;
            return true;
        }
    return false;
}

/* What a numeric key's value must be, where not every value of its kind
 * means something: NULL when v is one of them, else the allowed values in
 * words.  Floats must be finite too (checked by the caller).  v is a long
 * double, which holds every int64 (2^53 + 1 is past steps' 2^53). */
typedef enum { R_GE0, R_GE1, R_GT0, R_UNIT, R_BOOL, R_PAD, R_FUSION, R_SCALE, R_WINDOW, R_STEPS, R_ACCUM, R_F32 } KeyRange;
static const char *key_range(const TrainKeyInfo *k, long double v) {
    static const struct { const char *name; KeyRange r; } ranges[] = {
        {"lr", R_GE0},           {"min_lr", R_GE0},       {"beta1", R_UNIT},       {"beta2", R_UNIT},
        {"eps", R_F32},          {"weight_decay", R_GE0}, {"momentum", R_GE0},     {"grad_clip", R_GE0},
        {"loss_scale", R_SCALE}, {"lora_alpha", R_GE0},   {"decay_all", R_BOOL},   {"nesterov", R_BOOL},
        {"pad_tiles", R_BOOL},   {"warmup", R_GE0},       {"steps", R_STEPS},      {"grad_accum", R_ACCUM},
        {"loss_scale_window", R_WINDOW}, {"fusion", R_FUSION}, {"pad_multiple", R_PAD}, {"checkpoint_blocks", R_GE0},
        {"memory_budget", R_GE0}, {"lora_rank", R_GE0},   {"seed", R_GE0},         {"eval_every", R_GE0},
        {"eval_steps", R_GE1},   {"save_every", R_GE0},
    };
    bool num = k->kind == TK_FLOAT;
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        if (strcmp(ranges[i].name, k->name) != 0) continue;
        switch (ranges[i].r) {
        case R_GE0: return v >= 0 ? NULL : num ? "a number >= 0" : "an integer >= 0";
        case R_GE1: return v >= 1 ? NULL : "an integer >= 1";
        case R_GT0: return v > 0 ? NULL : "a number > 0";
        case R_UNIT: return v >= 0 && v < 1 ? NULL : "a number in [0, 1)";
        case R_BOOL: return v == 0 || v == 1 ? NULL : "0 or 1";
        case R_PAD: return v >= 0 && v <= 4096 ? NULL : "an integer in 0 .. 4096"; /* as --pad-multiple */
        case R_FUSION: return v >= 0 && v <= 127 ? NULL : "0, 1 or a sum of the bits 2 .. 64 (at most 127)";
        /* amp.scale is an f32 that doubles up to 2^40; amp.good_steps an f32 count */
        case R_SCALE: return v >= 0x1p-24 && v <= 0x1p40 ? NULL : "a number in [2^-24, 2^40]";
        case R_WINDOW: return v >= 1 && v <= 0x1p24 ? NULL : "an integer in 1 .. 2^24";
        /* as the runtime's --steps; micro-batches a step: 2^20 (a step of
         * more would run for days; counts of tokens stay far from 2^63) */
        case R_STEPS: return v >= 0 && v <= 0x1p53 ? NULL : "an integer in 0 .. 2^53";
        case R_ACCUM: return v >= 1 && v <= 0x1p20 ? NULL : "an integer in 1 .. 2^20";
        /* the optimizer's eps is an f32 in the update kernels, an op attribute within f32's range */
        case R_F32: return v >= 0 && v < 0x1.ffffffp127L ? NULL : "a number >= 0 within f32's range (at most about 3.4e38)";
        }
    }
    return NULL;
}

static bool set_key(TrainConfig *tc, Arena *a, const TrainKeyInfo *k, const char *value, char *err, size_t errn) {
    char *p = (char *)tc + k->offset;
    char *end;
    switch (k->kind) {
    case TK_INT: {
        errno = 0;
        long long v = strtoll(value, &end, 10);
        if (*value == 0 || *end || errno == ERANGE) {
            /* accept integral floats such as 1e6 (range checked first: an
             * out-of-range conversion is undefined) */
            double dv = strtod(value, &end);
            int64_t bytes;
            const char *why = NULL;
            if (strcmp(k->name, "memory_budget") == 0 && train_parse_size(value, &bytes, &why)) { /* --set memory_budget=8GB */
                *(int64_t *)p = bytes;
                return true;
            }
            /* decimal only (not strtod's hex or inf), and not a size that
             * train_parse_size refused (1e-400: it would be 0, no budget) */
            const char *num = value + (*value == '-');
            bool decimal = ir_number_len(num) == strlen(num);
            if (*value == 0 || *end || !decimal || why || !(dv >= -9.2e18 && dv <= 9.2e18) || dv != (double)(long long)dv) {
                snprintf(err, errn, "train key '%s' takes %s, not '%s'%s%s", k->name,
                         strcmp(k->name, "memory_budget") == 0 ? "a number of bytes or a size (e.g. 40GB, 512MiB)" : "an integer", value,
                         why ? ": " : "", why ? why : "");
                return false;
            }
            v = (long long)dv;
        }
        const char *want = key_range(k, (long double)v);
        if (want) {
            snprintf(err, errn, "train key '%s' takes %s, not %lld", k->name, want, v);
            return false;
        }
        *(int64_t *)p = v;
        return true;
    }
    case TK_FLOAT: {
        double v = strtod(value, &end);
        if (*value == 0 || *end || !isfinite(v)) {
            snprintf(err, errn, "train key '%s' takes a %snumber, not '%s'", k->name, *value && !*end ? "finite " : "", value);
            return false;
        }
        const char *want = key_range(k, v);
        if (want) {
            snprintf(err, errn, "train key '%s' takes %s, not %s", k->name, want, value);
            return false;
        }
        *(double *)p = v + 0.0;   /* -0.0 is 0: --help and a checkpoint's lr.min print it unsigned */
        return true;
    }
    case TK_ENUM:
        if (!allowed_has(k->allowed, value)) {
            Suggest s;
            char al[256];
            suggest_init(&s, value);
            snprintf(al, sizeof al, "%s", k->allowed);
            for (char *q = strtok(al, " "); q; q = strtok(NULL, " ")) suggest_add(&s, q);
            snprintf(err, errn, "train key '%s' takes one of: %s; not '%s'%s%s%s", k->name, k->allowed, value, s.best ? "; did you mean '" : "",
                     s.best ? s.best : "", s.best ? "'?" : "");
            return false;
        }
        *(const char **)p = a ? arena_strdup(a, value) : value; /* a == NULL: static defaults */
        return true;
    case TK_STR:
        *(const char **)p = a ? arena_strdup(a, value) : value;
        return true;
    }
    return false;
}

void train_defaults(TrainConfig *tc) {
    char err[256];
    memset(tc, 0, sizeof *tc);
    for (int i = 0; i < ntrain_keys; i++)
        if (!set_key(tc, NULL, &train_keys[i], train_keys[i].def, err, sizeof err)) die("bad default: %s", err);
}

bool train_set(TrainConfig *tc, Arena *a, const char *key, const char *value, char *err, size_t errn) {
    const TrainKeyInfo *k = train_key_lookup(key);
    if (!k) {
        Suggest s;
        suggest_init(&s, key);
        for (int i = 0; i < ntrain_keys; i++) suggest_add(&s, train_keys[i].name);
        snprintf(err, errn, "unknown train key '%s'%s%s%s", key, s.best ? "; did you mean '" : "", s.best ? s.best : "", s.best ? "'?" : "");
        return false;
    }
    TrainConfig t = *tc;
    if (!set_key(&t, a, k, value, err, errn)) return false;
    t.at[k - train_keys] = NOLOC; /* the front end sets it after */
    /* values the language reserves for passes trainc does not have yet:
     * an error, not a request quietly ignored */
    const char *what = strcmp(k->name, "checkpoint") == 0 && !allowed_has("none blocks budget", t.checkpoint) ? "this policy of gradient checkpointing"
                     : strcmp(k->name, "zero") == 0 && t.zero != 0                                 ? "ZeRO sharding"
                                                                                                  : NULL;
    if (what) {
        snprintf(err, errn, "train key '%s': %s is not implemented yet (it takes only %s)", k->name, what,
                 k->name[0] == 'c' ? "none, blocks or budget" : "0");
        return false;
    }
    *tc = t;
    return true;
}

SrcLoc train_loc(const TrainConfig *tc, const char *key) {
    const TrainKeyInfo *k = train_key_lookup(key);
    return k ? tc->at[k - train_keys] : NOLOC;
}

bool train_is_default(const TrainConfig *tc, const TrainKeyInfo *k) {
    TrainConfig d;
    train_defaults(&d);
    return train_value_eq(tc, &d, k);
}

bool train_value_eq(const TrainConfig *a, const TrainConfig *b, const TrainKeyInfo *k) {
    const char *p = (const char *)a + k->offset, *q = (const char *)b + k->offset;
    switch (k->kind) {
    case TK_INT: return *(const int64_t *)p == *(const int64_t *)q;
    case TK_FLOAT: return *(const double *)p == *(const double *)q;
    case TK_ENUM:
    case TK_STR: return strcmp(*(const char *const *)p, *(const char *const *)q) == 0;
    }
    return true;
}

void train_copy_strings(TrainConfig *tc, Arena *a) {
    for (int i = 0; i < ntrain_keys; i++) {
        if (tc->at[i].file) tc->at[i].file = arena_strdup(a, tc->at[i].file); /* as ir_clone re-homes node locations */
        if (train_keys[i].kind != TK_ENUM && train_keys[i].kind != TK_STR) continue;
        const char **p = (const char **)(void *)((char *)tc + train_keys[i].offset);
        *p = arena_strdup(a, *p);
    }
}
