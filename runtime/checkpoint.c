/* runtime/checkpoint.c — trn_save and trn_load: checkpoints in the
 * safetensors format (header: safetensors.c).
 *
 * A checkpoint holds the parameters by name, each as its checkpoint view
 * (the leading ckpt_shape block: pad-tiles' padding is not saved), in the
 * tensor's own dtype; with state also every TRN_STATE tensor and, in the
 * metadata, what a resumed run needs to continue exactly: step, seed, data
 * position and order, the learning-rate schedule.  Tensors are sorted by
 * name and their data is contiguous in that order; the header is padded
 * with spaces to a multiple of 8 bytes so the data section is aligned.
 *
 * Saving writes a new file beside PATH (PATH.PID.tmp, made with O_EXCL:
 * rt_tmp_create), fsyncs it and renames it over PATH: a failure at any
 * point removes that file and leaves PATH as it was. */
#include "rt.h"

#include "trainc_flags.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CKPT_VERSION "1"

typedef struct Item { RtStTensor st; int ti; } Item;

static int item_by_name(const void *a, const void *b) { return strcmp(((const Item *)a)->st.name, ((const Item *)b)->st.name); }
static int meta_by_key(const void *a, const void *b) { return strcmp(((const RtStMeta *)a)->key, ((const RtStMeta *)b)->key); }

/* fsync the folder holding path, so the rename itself is durable.  Best
 * effort: the new checkpoint is already in place when this runs, and some
 * file systems cannot sync a folder. */
static void sync_dir(const char *path) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY);
    if (fd < 0) return;
    (void)fsync(fd);
    close(fd);
}

/* What trn_save writes: the tensors, sorted by name, with contiguous
 * offsets in the data section, and the header (metadata included). */
typedef struct Plan {
    Item       *items;      /* [n]: the tensors and their model indices */
    RtStTensor *st;         /* [n]: the same, for the header */
    int         n;
    int64_t     maxb;       /* the largest tensor's bytes (padding included) */
    uint64_t    data_bytes; /* the data section's */
    char       *hdr;        /* the header, padded: hlen bytes */
    size_t      hlen;
    RtBuf       pnames;
} Plan;

static void plan_free(Plan *p) {
    free(p->items);
    free(p->st);
    free(p->hdr);
    rt_buf_free(&p->pnames);
    memset(p, 0, sizeof *p);
}

static int plan_save(TrnSession *s, int with_state, Plan *p, char *err, size_t errn) {
    const TrnModel *m = s->m;
    memset(p, 0, sizeof *p);
    p->items = rt_calloc((size_t)m->ntensors + 1, sizeof *p->items, err, errn);
    p->st = rt_calloc((size_t)m->ntensors + 1, sizeof *p->st, err, errn);
    if (!p->items || !p->st) return -1;
    Item *items = p->items;
    int n = 0;
    for (int i = 0; i < m->ntensors; i++) {
        const TrnTensor *t = &m->tensors[i];
        if (t->kind != TRN_PARAM && !(with_state && t->kind == TRN_STATE)) continue;
        if (rt_copy_of(t)) continue; /* derived from its param */
        Item *it = &items[n++];
        it->ti = i;
        it->st.name = (char *)t->name;
        it->st.dtype = t->dtype;
        it->st.rank = t->rank;
        rt_ckpt_shape(t, it->st.shape);
        int64_t b = rt_nbytes(t->dtype, t->numel);
        if (b > p->maxb) p->maxb = b;
    }
    qsort(items, (size_t)n, sizeof *items, item_by_name);
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        items[i].st.begin = off;
        off += (uint64_t)rt_nbytes(items[i].st.dtype, rt_ckpt_numel(&m->tensors[items[i].ti]));
        items[i].st.end = off;
        p->st[i] = items[i].st;
    }
    p->n = n;
    p->data_bytes = off;

    /* the metadata: every value a string */
    char v[16][64];
    RtStMeta meta[18];
    int nm = 0;
#define META(k, ...) (snprintf(v[nm], sizeof v[nm], __VA_ARGS__), meta[nm].key = (char *)(k), meta[nm].value = v[nm], nm++)
    META("format", "trainc");
    META("version", CKPT_VERSION);
    META("abi", "%d", TRN_ABI_VERSION);
    META("contents", "%s", with_state ? "params+state" : "params");
    META("step", "%" PRId64, s->step);
    META("seed", "%" PRIu64, s->seed);
    if (with_state) {
        META("data.pos", "%" PRId64, s->data_pos);
        META("data.batches", "%s", s->batches);
        if (m->t_tokens >= 0 && m->tensors[m->t_tokens].rank == 2) /* what a data.pos counts */
            META("data.batch", "%" PRId64 "x%" PRId64, m->tensors[m->t_tokens].shape[0], m->tensors[m->t_tokens].shape[1]);
        META("grad_accum", "%" PRId64, s->grad_accum);
        META("lr.schedule", "%s", s->schedule);
        char num[32];
        rt_fmt_double(num, sizeof num, s->lr);
        META("lr.max", "%s", num);
        rt_fmt_double(num, sizeof num, s->min_lr);
        META("lr.min", "%s", num);
        META("lr.warmup", "%" PRId64, s->warmup);
        META("lr.steps", "%" PRId64, s->total);
    }
#undef META
    meta[nm].key = "model";   /* not from v[]: names may be long */
    meta[nm].value = (char *)(m->name ? m->name : "");
    nm++;
    if (m->train.baked) { /* what the step was compiled with: trn_load_note */
        meta[nm].key = "compiled";
        meta[nm].value = (char *)m->train.baked;
        nm++;
    }
    if (with_state) { /* which tensors are parameters: --init loads those and skips the rest */
        for (int i = 0; i < n; i++)
            if (m->tensors[items[i].ti].kind == TRN_PARAM) rt_buf_printf(&p->pnames, "%s%s", p->pnames.len ? "," : "", items[i].st.name);
        if (p->pnames.oom) return rt_fail(err, errn, "out of memory listing the parameters");
        meta[nm].key = "params";
        meta[nm].value = p->pnames.p ? p->pnames.p : "";
        nm++;
    }
    qsort(meta, (size_t)nm, sizeof *meta, meta_by_key);
    return rt_st_header(p->st, n, meta, nm, &p->hdr, &p->hlen, err, errn);
}

int64_t rt_ckpt_bytes(TrnSession *s, int with_state) {
    Plan p;
    char e[RT_ERRN];
    int64_t bytes = plan_save(s, with_state, &p, e, sizeof e) == 0 ? (int64_t)(8 + p.hlen + p.data_bytes) : -1;
    plan_free(&p);
    return bytes;
}

int trn_save(TrnSession *s, const char *path, int with_state) {
    const TrnModel *m = s->m;
    char *err = s->err;
    size_t errn = sizeof s->err;
    err[0] = 0;
    if (!path || !*path) return rt_seterr(s, "trn_save: the path is %s", path ? "empty" : "NULL");
    if (!rt_host_is_little_endian()) return rt_seterr(s, "checkpoints are little-endian; this host is not");
    Plan p;
    char *tmp = NULL;
    unsigned char *full = NULL, *blk = NULL;
    FILE *f = NULL;
    if (plan_save(s, with_state, &p, err, errn) != 0) goto fail;
    full = rt_malloc((size_t)p.maxb, err, errn);
    blk = full ? rt_malloc((size_t)p.maxb, err, errn) : NULL;
    if (!blk) goto fail;
    /* the file replaced: a link's target (written through, as the
     * compiler's -o writes), keeping its permissions where the file system
     * takes them (as the compiler's: a save is not lost for them) */
    char real[RT_PATH_MAX];
    struct stat old;
    const char *dest = rt_write_target(path, real);
    int had = stat(dest, &old) == 0 && S_ISREG(old.st_mode);
    if (!(f = rt_tmp_create(dest, &tmp, err, errn))) goto fail;
    if (had) (void)fchmod(fileno(f), old.st_mode & 07777);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)p.hlen >> (8 * i));
    if (rt_fwrite(len8, 8, f, tmp, err, errn) != 0 || rt_fwrite(p.hdr, p.hlen, f, tmp, err, errn) != 0) goto fail;
    for (int i = 0; i < p.n; i++) {
        const Item *it = &p.items[i];
        const TrnTensor *t = &m->tensors[it->ti];
        char e[512];
        if (s->be.read(s->be.self, it->ti, full, e, sizeof e) != 0) {
            rt_fail(err, errn, "saving %s: reading '%s': %s", path, t->name, e);
            goto fail;
        }
        size_t bytes = (size_t)(it->st.end - it->st.begin);
        const unsigned char *src = full;
        if (bytes != (size_t)rt_nbytes(t->dtype, t->numel)) {   /* padded: save the leading block */
            rt_block_copy(blk, full, t->rank, t->shape, it->st.shape, (size_t)trn_dtype_size[t->dtype], 1);
            src = blk;
        }
        if (rt_fwrite(src, bytes, f, tmp, err, errn) != 0) goto fail;
    }
    if (rt_fflush_fsync(f, tmp, err, errn) != 0) goto fail;
    FILE *fc = f;
    f = NULL;
    if (rt_fclose(fc, tmp, err, errn) != 0) goto fail;
    if (rt_rename(tmp, dest, err, errn) != 0) goto fail;
    sync_dir(dest);
    plan_free(&p);
    free(tmp);
    free(full);
    free(blk);
    return 0;
fail:
    if (f) fclose(f);   /* already failing: the first error is the one reported */
    if (tmp) unlink(tmp);
    {
        char e[RT_ERRN];
        snprintf(e, sizeof e, "%s", err);
        rt_seterr(s, "cannot save %s (the previous file, if any, is untouched): %s", path, e);
    }
    plan_free(&p);
    free(tmp);
    free(full);
    free(blk);
    return -1;
}

/* ---- loading ---- */

/* Is name one of list's comma-separated names? */
static int in_list(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k == n && memcmp(p, name, n) == 0) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

static int parse_i64(const char *str, int64_t *out) {
    if (!str || !*str || (*str != '-' && (*str < '0' || *str > '9'))) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(str, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static int64_t get_i64(TrnDType dt, const unsigned char *p, int64_t i) {
    switch (dt) {
    case TRN_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case TRN_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); return v; }
    case TRN_U8: return p[i];
    default: return 0;
    }
}

static void set_i64(TrnDType dt, unsigned char *p, int64_t i, int64_t v) {
    switch (dt) {
    case TRN_I32: { int32_t x = v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : (int32_t)v; memcpy(p + 4 * i, &x, 4); break; }
    case TRN_I64: memcpy(p + 8 * i, &v, 8); break;
    case TRN_U8: p[i] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v); break;
    default: break;
    }
}

/* n elements of dtype sdt at src to dtype ddt at dst (float <-> float, int <-> int). */
static void convert(TrnDType ddt, unsigned char *dst, TrnDType sdt, const unsigned char *src, int64_t n) {
    if (ddt == sdt) memcpy(dst, src, (size_t)n * (size_t)trn_dtype_size[ddt]);
    else if (rt_dtype_is_float(ddt))
        for (int64_t i = 0; i < n; i++) rt_elem_set(ddt, dst, i, rt_elem_get(sdt, src, i));
    else
        for (int64_t i = 0; i < n; i++) set_i64(ddt, dst, i, get_i64(sdt, src, i));
}

static void shape_str(char *out, size_t n, int rank, const int64_t *shape) {
    size_t k = (size_t)snprintf(out, n, "[");
    for (int d = 0; d < rank && k < n; d++) k += (size_t)snprintf(out + k, n - k, "%s%lld", d ? "," : "", (long long)shape[d]);
    if (k < n) snprintf(out + k, n - k, "]");
}

/* What a checkpoint with state restores besides tensors. */
typedef struct Resume {
    int64_t  step, data_pos, warmup, total, grad_accum;
    int64_t  seed;   /* as --seed takes it: below 2^63 */
    double   lr, min_lr;
    const char *batches, *schedule;
} Resume;

/* The metadata that says what wrote a file to resume from (docs/runtime.md):
 * format "trainc" (or absent), version CKPT_VERSION, abi at most this
 * runtime's.  A PyTorch file ("pt", as safetensors' torch writer and
 * tools/hf_to_trainc.py mark theirs) holds parameters for --init, no
 * state to resume.  --init takes any safetensors file with the parameters'
 * names and shapes, whatever wrote it: not checked. */
static int check_origin(TrnSession *s, const RtSt *st, const char *label) {
    const char *format = rt_st_meta(st, "format"), *version = rt_st_meta(st, "version"), *abi = rt_st_meta(st, "abi");
    if (format && strcmp(format, "pt") == 0)
        return rt_seterr(s, "%s is a PyTorch file (metadata 'format' is 'pt'): it can initialise a run (--init) but not resume one", label);
    if (format && strcmp(format, "trainc") != 0)
        return rt_seterr(s, "%s: metadata 'format' is '%s' (expected trainc; pt for a PyTorch file of parameters)", label, format);
    if (version && strcmp(version, CKPT_VERSION) != 0)
        return rt_seterr(s, "%s: metadata 'version' is '%s': this runtime reads trainc checkpoints of version %s", label, version, CKPT_VERSION);
    int64_t a;
    if (abi && (parse_i64(abi, &a) != 0 || a < 1))
        return rt_seterr(s, "%s: metadata 'abi' is '%s' (expected a runtime ABI version, a positive integer)", label, abi);
    if (abi && a > TRN_ABI_VERSION)
        return rt_seterr(s, "%s: metadata 'abi' is '%s': a newer runtime than this one (ABI %d) wrote it", label, abi, TRN_ABI_VERSION);
    return 0;
}

/* The error for metadata key k: missing, or its value is not `want`. */
static int meta_error(TrnSession *s, const RtSt *st, const char *label, const char *k, const char *want) {
    const char *v = rt_st_meta(st, k);
    if (!v) return rt_seterr(s, "%s: metadata '%s' is missing", label, k);
    return rt_seterr(s, "%s: metadata '%s' is '%s' (expected %s)", label, k, v, want);
}

static int read_resume(TrnSession *s, const RtSt *st, const char *label, Resume *r) {
    const char *contents = rt_st_meta(st, "contents");
    if (!contents)
        return rt_seterr(s, "%s has no metadata 'contents' (trainc writes params+state there for a checkpoint that resumes): it can "
                            "initialise a run (--init) but not resume one",
                         label);
    if (strcmp(contents, "params+state") != 0)
        return rt_seterr(s, "%s has no optimizer state (it was saved with parameters only): it can initialise a run (--init) but not resume one",
                         label);
    /* every resume key is required (a default would continue another
     * run than the one saved), and each value is checked as it is read, so
     * that the message names its key; the numbers as the flags take them
     * (trainc_flags.h: decimal digits, no sign, space or hex; the rates
     * finite and >= 0, as --lr's) */
    memset(r, 0, sizeof *r);
    const char *k;
    if (trn_flag_int(rt_st_meta(st, k = "step"), &r->step) != 0 || trn_flag_int(rt_st_meta(st, k = "seed"), &r->seed) != 0 ||
        trn_flag_int(rt_st_meta(st, k = "data.pos"), &r->data_pos) != 0)
        return meta_error(s, st, label, k, "a non-negative integer below 2^63");
    r->batches = rt_st_meta(st, k = "data.batches");
    if (!r->batches || (strcmp(r->batches, "random") != 0 && strcmp(r->batches, "sequential") != 0))
        return meta_error(s, st, label, k, "random or sequential");
    r->schedule = rt_st_meta(st, k = "lr.schedule");
    if (!r->schedule || (strcmp(r->schedule, "constant") != 0 && strcmp(r->schedule, "cosine") != 0 && strcmp(r->schedule, "linear") != 0))
        return meta_error(s, st, label, k, "constant, cosine or linear");
    if (trn_flag_f64(rt_st_meta(st, k = "lr.max"), &r->lr) != 0 || trn_flag_f64(rt_st_meta(st, k = "lr.min"), &r->min_lr) != 0)
        return meta_error(s, st, label, k, "a finite non-negative number");
    if (trn_flag_int(rt_st_meta(st, k = "lr.warmup"), &r->warmup) != 0 || trn_flag_int(rt_st_meta(st, k = "lr.steps"), &r->total) != 0)
        return meta_error(s, st, label, k, "a non-negative integer");
    if (r->step > TRN_MAX_STEPS || r->data_pos > TRN_MAX_STEPS || r->total > TRN_MAX_STEPS)
        return meta_error(s, st, label, k = r->step > TRN_MAX_STEPS ? "step" : r->data_pos > TRN_MAX_STEPS ? "data.pos" : "lr.steps",
                          "an integer at most 2^53");
    /* data.pos counts micro-batches of this shape (absent in older files) */
    const char *db = rt_st_meta(st, "data.batch");
    const TrnModel *m = s->m;
    if (db && m->t_tokens >= 0 && m->tensors[m->t_tokens].rank == 2) {
        char own[48];
        snprintf(own, sizeof own, "%" PRId64 "x%" PRId64, m->tensors[m->t_tokens].shape[0], m->tensors[m->t_tokens].shape[1]);
        if (strcmp(db, own) != 0)
            return rt_seterr(s, "%s was saved by a run with micro-batches of %s tokens (batch x sequence); this model's are %s, so its "
                                "data position (data.pos) would not name the same data",
                             label, db, own);
    }
    const char *ga = rt_st_meta(st, k = "grad_accum");
    if (trn_flag_int(ga, &r->grad_accum) != 0 || r->grad_accum < 1) return meta_error(s, st, label, k, "a positive integer");
    if (r->grad_accum != s->grad_accum)
        return rt_seterr(s, "%s was saved by a run with grad_accum %s; this model accumulates %lld micro-batch%s per step", label, ga,
                         (long long)s->grad_accum, s->grad_accum == 1 ? "" : "es");
    return 0;
}

enum { MAX_LISTED = 24 };

/* Matches the model's tensors of one kind with the file's (src[i], the
 * largest size in *maxb), listing each problem: missing (a LoRA adapter
 * may be, from a base model's checkpoint: keep_adapters), mis-shaped, of
 * another kind of dtype (exact: of another dtype, for a resume). */
static void match_kind(TrnSession *s, const RtSt *st, TrnKind kind, int keep_adapters, int exact, const RtStTensor **src, int64_t *maxb,
                       RtBuf *probs, int *nprob) {
    const TrnModel *m = s->m;
    for (int i = 0; i < m->ntensors; i++) {
        const TrnTensor *t = &m->tensors[i];
        if (t->kind != kind || rt_copy_of(t)) continue; /* a copy: derived, refreshed after the load */
        const RtStTensor *x = rt_st_find(st, t->name);
        int64_t cs[TRN_MAX_RANK];
        rt_ckpt_shape(t, cs);
        if (!x && keep_adapters && rt_is_adapter(t)) continue; /* the adapters keep their start */
        if (!x) {
            if ((*nprob)++ < MAX_LISTED)
                rt_buf_printf(probs, "\n  missing tensor '%s' (%s %s)", t->name, t->kind == TRN_PARAM ? "parameter" : "state", trn_dtype_name[t->dtype]);
            continue;
        }
        int same = x->rank == t->rank;
        for (int d = 0; same && d < t->rank; d++) same = x->shape[d] == cs[d];
        if (!same) {
            char a[160], b[160];
            shape_str(a, sizeof a, x->rank, x->shape);
            shape_str(b, sizeof b, t->rank, cs);
            if ((*nprob)++ < MAX_LISTED) rt_buf_printf(probs, "\n  tensor '%s' has shape %s in the file, the model's is %s", t->name, a, b);
            continue;
        }
        if (exact ? x->dtype != t->dtype : rt_dtype_is_float(x->dtype) != rt_dtype_is_float(t->dtype)) {
            if ((*nprob)++ < MAX_LISTED)
                rt_buf_printf(probs, "\n  tensor '%s' is %s in the file, the model's is %s%s", t->name, rt_st_dtype_name(x->dtype), trn_dtype_name[t->dtype],
                              exact && rt_dtype_is_float(x->dtype) == rt_dtype_is_float(t->dtype) ? " (a run resumes from the tensors it saved; --init converts)" : "");
            continue;
        }
        src[i] = x;
        int64_t b = rt_nbytes(t->dtype, t->numel);
        if (b > *maxb) *maxb = b;
        if ((int64_t)(x->end - x->begin) > *maxb) *maxb = (int64_t)(x->end - x->begin);
    }
}

/* Lists the file's tensors the load has no place for.  A checkpoint with
 * state names its parameters (metadata "params"): for --init the others
 * are states, skipped whether or not this model has them (another
 * optimizer's, precision's or accumulation's). */
static void list_extra(TrnSession *s, const RtSt *st, int params_only, RtBuf *probs, int *nprob) {
    const TrnModel *m = s->m;
    const char *pnames = params_only ? rt_st_meta(st, "params") : NULL;
    for (int j = 0; j < st->ntensors; j++) {
        int i = trn_find(s, st->t[j].name);
        TrnKind kind = i >= 0 ? m->tensors[i].kind : TRN_INPUT;
        if (pnames && !in_list(pnames, st->t[j].name)) continue;
        int needed = i >= 0 && (kind == TRN_PARAM || (!params_only && kind == TRN_STATE));
        if (needed) continue;                                      /* loaded, or its problem listed */
        if (i >= 0 && rt_copy_of(&m->tensors[i])) continue;        /* a copy saved by someone else: derived anyway */
        if (i >= 0 && params_only && kind == TRN_STATE) continue;  /* a checkpoint with state initialises the params only */
        if ((*nprob)++ < MAX_LISTED)
            rt_buf_printf(probs, "\n  extra tensor '%s'%s", st->t[j].name,
                          i >= 0 ? " (not a parameter or state of the model)" : " (the model has no tensor of that name)");
    }
}

static void baked_compare(char *note, size_t nn, const char *file, const char *here, int lora_only);

/* The NaNs and infinities among n floats of dtype dt at p (0 for integers). */
static int64_t count_nonfinite(TrnDType dt, const unsigned char *p, int64_t n) {
    int64_t bad = 0;
    if (dt == TRN_F32) {
        for (int64_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, p + 4 * i, 4);
            bad += (u & 0x7f800000u) == 0x7f800000u;
        }
    } else if (dt == TRN_BF16 || dt == TRN_F16) {
        uint16_t e = dt == TRN_BF16 ? 0x7f80 : 0x7c00;
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            bad += (h & e) == e;
        }
    } else if (dt == TRN_F64) {
        for (int64_t i = 0; i < n; i++) bad += !isfinite(rt_elem_get(dt, p, i));
    }
    return bad;
}

int rt_load_stream(TrnSession *s, FILE *f, const char *label, int params_only) {
    const TrnModel *m = s->m;
    char *err = s->err;
    size_t errn = sizeof s->err;
    err[0] = 0;
    if (!rt_host_is_little_endian()) return rt_seterr(s, "checkpoints are little-endian; this host is not");
    uint64_t size;
    if (rt_fsize(f, label, &size, err, errn) != 0) return -1;
    if (size < 8) return rt_seterr(s, "%s is not a safetensors file: %llu bytes, less than the 8-byte header length", label, (unsigned long long)size);
    unsigned char len8[8];
    if (rt_fread(len8, 8, f, label, err, errn) != 0) return -1;
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)len8[i] << (8 * i);
    if (hlen > RT_ST_MAX_HEADER)
        return rt_seterr(s, "%s is not a safetensors file: its header length %llu exceeds the limit, 100 MiB", label, (unsigned long long)hlen);
    if (hlen > size - 8)
        return rt_seterr(s, "%s is not a safetensors file: its header length %llu exceeds the %llu bytes that follow it", label,
                         (unsigned long long)hlen, (unsigned long long)(size - 8));
    char *hdr = rt_malloc((size_t)hlen, err, errn);
    if (!hdr) return -1;
    if (rt_fread(hdr, (size_t)hlen, f, label, err, errn) != 0) {
        free(hdr);
        return -1;
    }
    RtSt st;
    char e[1024];
    int rc = rt_st_parse(hdr, (size_t)hlen, size - 8 - hlen, &st, e, sizeof e);
    free(hdr);
    if (rc != 0) return rt_seterr(s, "%s: %s", label, e);

    Resume r;
    memset(&r, 0, sizeof r);
    unsigned char *fbuf = NULL, *blk = NULL, *full = NULL;
    const RtStTensor **src = NULL;
    RtBuf probs = {0};
    int nprob = 0;
    if (!params_only && check_origin(s, &st, label) != 0) goto fail;
    if (!params_only && read_resume(s, &st, label, &r) != 0) goto fail;

    /* match the file's tensors with the model's: every problem is listed */
    src = rt_calloc((size_t)m->ntensors + 1, sizeof *src, err, errn);
    if (!src) goto fail;
    int64_t maxb = 0;
    /* a base model's checkpoint has none of the LoRA adapters, which then
     * keep their start; one with some has them all (a trained B with a
     * fresh A would be another model) */
    int base_ckpt = params_only;
    for (int i = 0; base_ckpt && i < m->ntensors; i++)
        if (m->tensors[i].kind == TRN_PARAM && rt_is_adapter(&m->tensors[i]) && rt_st_find(&st, m->tensors[i].name)) base_ckpt = 0;
    /* the parameters' problems first, then the file's extra tensors, then
     * the states' (a LoRA model's checkpoint given to its base model: the
     * adapters named before the optimizer states every base weight lacks) */
    match_kind(s, &st, TRN_PARAM, base_ckpt, !params_only, src, &maxb, &probs, &nprob);
    list_extra(s, &st, params_only, &probs, &nprob);
    if (!params_only) match_kind(s, &st, TRN_STATE, 0, 1, src, &maxb, &probs, &nprob);
    if (nprob > 0) {
        if (nprob > MAX_LISTED) rt_buf_printf(&probs, "\n  ... and %d more", nprob - MAX_LISTED);
        const char *fm = rt_st_meta(&st, "model"); /* another model's checkpoint: said first */
        char of[200] = "";
        if (fm && m->name && strcmp(fm, m->name) != 0) snprintf(of, sizeof of, " (a checkpoint of model '%.120s')", fm);
        rt_seterr(s, "%s%s does not match model '%s' (%d problem%s):%s", label, of, m->name ? m->name : "?", nprob, nprob > 1 ? "s" : "",
                  probs.oom ? " (out of memory listing them)" : probs.p);
        goto fail;
    }

    /* load: read, convert to the tensor's dtype, place the block, write */
    fbuf = rt_malloc((size_t)maxb, err, errn);
    blk = fbuf ? rt_malloc((size_t)maxb, err, errn) : NULL;
    full = blk ? rt_malloc((size_t)maxb, err, errn) : NULL;
    if (!full) goto fail;
    int64_t nbad_tensors = 0;   /* tensors holding NaNs or infinities: the first named */
    char bad_first[200] = "";
    for (int i = 0; i < m->ntensors; i++) {
        const RtStTensor *x = src[i];
        if (!x) continue;
        const TrnTensor *t = &m->tensors[i];
        if (rt_fseek(f, (off_t)(8 + hlen + x->begin), SEEK_SET, label, err, errn) != 0) goto fail;
        if (rt_fread(fbuf, (size_t)(x->end - x->begin), f, label, err, errn) != 0) goto fail;
        int64_t cn = rt_ckpt_numel(t);
        unsigned char *host = blk;
        convert(t->dtype, blk, x->dtype, fbuf, cn);
        int64_t bad = count_nonfinite(t->dtype, blk, cn);
        if (bad > 0 && nbad_tensors++ == 0)
            snprintf(bad_first, sizeof bad_first, "'%.120s' holds %" PRId64 " %s of %" PRId64 " values", t->name, bad,
                     bad > 1 ? "NaNs or infinities" : "NaN or infinity", cn);
        if (cn != t->numel) {   /* padded: the padding is zero */
            memset(full, 0, (size_t)rt_nbytes(t->dtype, t->numel));
            rt_block_copy(full, blk, t->rank, t->shape, x->shape, (size_t)trn_dtype_size[t->dtype], 0);
            host = full;
        }
        if (s->be.write(s->be.self, i, host, e, sizeof e) != 0) {
            rt_seterr(s, "%s: writing '%s': %s", label, t->name, e);
            goto fail;
        }
    }
    if (!params_only) {
        s->step = r.step;
        s->seed = r.seed;
        s->data_pos = r.data_pos;
        s->has_data_pos = 1;
        snprintf(s->batches, sizeof s->batches, "%s", r.batches);
        snprintf(s->schedule, sizeof s->schedule, "%s", r.schedule);
        s->lr = r.lr;
        s->min_lr = r.min_lr;
        s->warmup = r.warmup;
        s->total = r.total;
    }
    if (nbad_tensors > 1)
        snprintf(s->load_nonfinite, sizeof s->load_nonfinite, "%s, and %" PRId64 " more tensor%s some", bad_first, nbad_tensors - 1,
                 nbad_tensors > 2 ? "s hold" : " holds");
    else
        snprintf(s->load_nonfinite, sizeof s->load_nonfinite, "%s", bad_first);
    const char *fb = rt_st_meta(&st, "compiled");
    s->load_note[0] = 0;
    const char *fm = rt_st_meta(&st, "model"); /* resuming another model's run: its tensors fit, but say so */
    if (!params_only && fm && m->name && strcmp(fm, m->name) != 0) snprintf(s->load_model, sizeof s->load_model, "%s", fm);
    if (fb && m->train.baked && !base_ckpt) /* (a base model's checkpoint into a LoRA model: its purpose) */
        baked_compare(s->load_note, sizeof s->load_note, fb, m->train.baked, params_only);
    rt_buf_free(&probs);
    free(src);
    free(fbuf);
    free(blk);
    free(full);
    rt_st_free(&st);
    return rt_refresh_copies(s, -1);
fail:
    if (!err[0]) rt_seterr(s, "%s: loading failed", label);
    rt_buf_free(&probs);
    free(src);
    free(fbuf);
    free(blk);
    free(full);
    rt_st_free(&st);
    return -1;
}

/* The item of list (lines "key=value" or "-D name=value") with the key
 * of item it (the text before its '='), or NULL; *n its length. */
static const char *baked_find(const char *list, const char *it, size_t itn, size_t *n) {
    const char *eq = memchr(it, '=', itn);
    size_t kn = eq ? (size_t)(eq - it) + 1 : itn;
    for (const char *p = list; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len >= kn && memcmp(p, it, kn) == 0) return *n = len, p;
        p += len + (e != NULL);
    }
    return NULL;
}

/* Appends to the note what differs between the checkpoint's compiled
 * settings (file) and the step's (here): each of here's keys, then those
 * only in the file; with lora_only, the lora_ keys alone. */
static void baked_compare(char *note, size_t nn, const char *file, const char *here, int lora_only) {
    int cut = 0; /* an item left out for room */
    for (int pass = 0; pass < 2; pass++) {
        const char *a = pass ? file : here, *b = pass ? here : file;
        for (const char *p = a; *p;) {
            const char *e = strchr(p, '\n');
            size_t len = e ? (size_t)(e - p) : strlen(p), bn = 0;
            const char *q = baked_find(b, p, len, &bn);
            size_t l = strlen(note);
            int lora = len > 5 && memcmp(p, "lora_", 5) == 0, differs = !q || (!pass && (bn != len || memcmp(p, q, len) != 0));
            if ((!lora_only || lora) && differs && l + 80 >= nn) cut = 1;
            else if ((!lora_only || lora) && differs) {
                const char *eq = memchr(p, '=', len);
                int kn = eq ? (int)(eq - p) : (int)len;
                if (!q) {
                    snprintf(note + l, nn - l, "%s%.*s only %s", l ? "; " : "", (int)len, p, pass ? "in the checkpoint" : "here");
                } else {
                    int vn = eq ? (int)(len - (size_t)kn - 1) : 0, qn = (int)(bn - (size_t)kn - 1);
                    snprintf(note + l, nn - l, "%s%.*s is %.*s in the checkpoint, %.*s here", l ? "; " : "", kn, p, qn > 0 ? qn : 0, q + kn + 1, vn, eq ? eq + 1 : "");
                }
            }
            p += len + (e != NULL);
        }
    }
    size_t l = strlen(note);
    if (cut) snprintf(note + (l + 6 <= nn ? l : nn - 6), 6, "; ...");
}

const char *trn_load_note(const TrnSession *s) { return s ? s->load_note : ""; }
const char *trn_load_nonfinite(const TrnSession *s) { return s ? s->load_nonfinite : ""; }
const char *trn_load_model(const TrnSession *s) { return s ? s->load_model : ""; }

int trn_load(TrnSession *s, const char *path, int params_only) {
    s->err[0] = 0;
    s->load_note[0] = 0;
    s->load_nonfinite[0] = 0;
    s->load_model[0] = 0;
    if (!path || !*path) return rt_seterr(s, "trn_load: the path is %s", path ? "empty" : "NULL");
    /* a pipe, FIFO or device: a checkpoint is read by its size (and a FIFO
     * with no writer would block the open) */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode))
        return rt_seterr(s, "%s: not a regular file: a checkpoint is read by its size (copy it to a file first)", path);
    FILE *f = rt_fopen(path, "rb", s->err, sizeof s->err);
    if (!f) return -1;
    int rc = rt_load_stream(s, f, path, params_only);
    fclose(f);   /* read only: nothing to lose on a failed close */
    return rc;
}
