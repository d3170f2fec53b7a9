/* codegen/nvrtc.c — CUDA C to cubin and PTX with NVRTC, at compile time.
 *
 * NVRTC is opened with dlopen, so `trainc` runs where no CUDA toolkit is
 * installed and says, only when asked for --target=cuda, what it misses.
 * Search order: $TRAINC_NVRTC (a path), the toolkit CMake found
 * (TRAINC_CUDA_LIBDIR), /usr/local/cuda/lib64, then the loader's path.
 *
 * Each architecture is one NVRTC compilation (in parallel, one thread per
 * image); the PTX is made for the lowest architecture, for GPUs newer than
 * every cubin.  `-Xptxas -v` puts registers, shared memory, stack and
 * spills of every kernel in the log: that is the resource report.
 *
 * The cache: an image is stored under a 128-bit hash of the NVRTC library
 * (its version, path, size, time and inode), the options, the source and the
 * prelude headers, in $TRAINC_CACHE_DIR, $XDG_CACHE_HOME/trainc,
 * ~/.cache/trainc or /tmp/trainc-cache-UID (written to NAME.PID.tmp and
 * renamed), so recompiling an unchanged model does not run NVRTC.
 */
#include "cuda.h"
#include "compile.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef TRAINC_CUDA_LIBDIR
#define TRAINC_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

/* The part of nvrtc.h used here (no header needed to build trainc). */
typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;

typedef struct Nvrtc {
    void       *so;
    nvrtcResult (*Version)(int *, int *);
    nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int, const char *const *, const char *const *);
    nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
    nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);
    nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetPTX)(nvrtcProgram, char *);
    nvrtcResult (*DestroyProgram)(nvrtcProgram *);
    const char *(*GetErrorString)(nvrtcResult);
    nvrtcResult (*GetNumSupportedArchs)(int *);   /* optional (NVRTC 11.2 on): NULL where absent */
    nvrtcResult (*GetSupportedArchs)(int *);
    int         major, minor;
} Nvrtc;

static Nvrtc nv;
static pthread_mutex_t nv_lock = PTHREAD_MUTEX_INITIALIZER;

void *cg_nvrtc_open(char *err, size_t errn) {
    pthread_mutex_lock(&nv_lock);
    if (nv.so) {
        pthread_mutex_unlock(&nv_lock);
        return nv.so;
    }
    const char *env = getenv("TRAINC_NVRTC");
    const char *cands[] = {env && *env ? env : NULL, TRAINC_CUDA_LIBDIR "/libnvrtc.so", TRAINC_CUDA_LIBDIR "/libnvrtc.so.13",
                           "/usr/local/cuda/lib64/libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
    char tried[2048] = "";
    void *so = NULL;
    for (size_t i = 0; i < sizeof cands / sizeof cands[0] && !so; i++) {
        if (!cands[i]) continue;
        so = dlopen(cands[i], RTLD_NOW | RTLD_LOCAL);
        if (!so && strlen(tried) + strlen(cands[i]) + 4 < sizeof tried) {
            if (tried[0]) strcat(tried, ", ");
            strcat(tried, cands[i]);
        }
    }
    if (!so) {
        snprintf(err, errn,
                 "--target=cuda needs NVRTC (the CUDA toolkit's runtime compiler), and none was found (tried %s); install the CUDA "
                 "toolkit or set TRAINC_NVRTC to the path of libnvrtc.so",
                 tried);
        pthread_mutex_unlock(&nv_lock);
        return NULL;
    }
#define SYM(f)                                                                                                   \
    do {                                                                                                         \
        *(void **)(&nv.f) = dlsym(so, "nvrtc" #f);                                                               \
        if (!nv.f) {                                                                                             \
            snprintf(err, errn, "the NVRTC library lacks nvrtc" #f " (%s)", dlerror());                          \
            dlclose(so);                                                                                         \
            pthread_mutex_unlock(&nv_lock);                                                                      \
            return NULL;                                                                                         \
        }                                                                                                        \
    } while (0)
    SYM(Version);
    SYM(CreateProgram);
    SYM(CompileProgram);
    SYM(GetProgramLogSize);
    SYM(GetProgramLog);
    SYM(GetCUBINSize);
    SYM(GetCUBIN);
    SYM(GetPTXSize);
    SYM(GetPTX);
    SYM(DestroyProgram);
    SYM(GetErrorString);
#undef SYM
    *(void **)(&nv.GetNumSupportedArchs) = dlsym(so, "nvrtcGetNumSupportedArchs");
    *(void **)(&nv.GetSupportedArchs) = dlsym(so, "nvrtcGetSupportedArchs");
    nv.Version(&nv.major, &nv.minor);
    nv.so = so;
    pthread_mutex_unlock(&nv_lock);
    return so;
}

/* ---- the cache ---- */

static bool cache_dir_fallback; /* cg_cuda_cache_dir chose /tmp/trainc-cache-UID */

const char *cg_cuda_cache_dir(void) {
    static char dir[4096];
    const char *e = getenv("TRAINC_CACHE_DIR");
    cache_dir_fallback = false;
    if (e && *e) snprintf(dir, sizeof dir, "%s", e);
    else if ((e = getenv("XDG_CACHE_HOME")) && *e) snprintf(dir, sizeof dir, "%s/trainc", e);
    else if ((e = getenv("HOME")) && *e) snprintf(dir, sizeof dir, "%s/.cache/trainc", e);
    else snprintf(dir, sizeof dir, "/tmp/trainc-cache-%u", (unsigned)geteuid()), cache_dir_fallback = true; /* (checked: cache_usable) */
    return dir;
}

static void mkdirs(const char *path) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(tmp, 0755);
            *p = '/';
        }
    mkdir(tmp, 0755);
}

typedef struct Hash { uint64_t a, b; } Hash;
static void hash_add(Hash *h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h->a = (h->a ^ p[i]) * 0x100000001b3ull;
        h->b = (h->b ^ p[i]) * 0x100000001b3ull;
        h->b ^= h->b >> 29;
    }
    unsigned char sep = 0xff; /* field separator */
    h->a = (h->a ^ sep) * 0x100000001b3ull;
    h->b = (h->b ^ sep) * 0x100000001b3ull;
}

/* A cache entry is one file: a header line "trainc-cache 2 KEY IMAGE LOG
 * HASH\n" (its key, the hash its name is made of; the two sizes in bytes;
 * a hash of what follows; in hex), the image, then the ptxas log of the
 * resource report.  An entry that does not read back whole (truncated,
 * emptied by a crash, written by something else), that is not a regular
 * file (a FIFO would block the read) or is larger than any image, or that
 * names another key (copied or renamed), is a miss: the image is compiled
 * again and the entry replaced, so a broken file never reaches an
 * executable. */
#define CACHE_MAGIC "trainc-cache 2"
#define CACHE_MAX ((size_t)1 << 30)

static Hash hash_bytes(const void *data, size_t n) {
    Hash h = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
    hash_add(&h, data, n);
    return h;
}

/* The entry at path, whole, when it is a regular file of at most
 * CACHE_MAX bytes; NULL otherwise. */
static char *entry_read(const char *path, size_t *len) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    char *t = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size <= CACHE_MAX) {
        size_t n = (size_t)st.st_size, got = 0;
        t = xmalloc(n + 1);
        while (got < n) {
            ssize_t r = read(fd, t + got, n - got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            got += (size_t)r;
        }
        char extra;
        if (got != n || read(fd, &extra, 1) != 0) { /* (it changed while read: a miss) */
            free(t);
            t = NULL;
        } else {
            t[n] = 0;
            *len = n;
        }
    }
    close(fd);
    return t;
}

static bool cache_read(const char *path, Hash key, CudaImage *im) {
    size_t len;
    char *t = entry_read(path, &len);
    if (!t) return false;
    unsigned long long ka, kb, ni, nl, ha, hb;
    int hdr = 0;
    const char *nl_at = memchr(t, '\n', len < 256 ? len : 256);
    bool ok = nl_at && sscanf(t, CACHE_MAGIC " %16llx%16llx %llu %llu %16llx%16llx%n", &ka, &kb, &ni, &nl, &ha, &hb, &hdr) == 6 &&
              t + hdr == nl_at && ka == key.a && kb == key.b && ni > 0 && ni <= len && nl <= len && (size_t)(nl_at + 1 - t) + ni + nl == len;
    if (ok) {
        const char *body = nl_at + 1;
        Hash h = hash_bytes(body, (size_t)(ni + nl));
        ok = h.a == ha && h.b == hb;
        if (ok) {
            im->data = xmalloc((size_t)ni);
            memcpy(im->data, body, (size_t)ni);
            im->size = (size_t)ni;
            im->log = xmalloc((size_t)nl + 1);
            memcpy(im->log, body + ni, (size_t)nl);
            im->log[nl] = 0;
        }
    }
    free(t);
    return ok;
}

/* Writes the entry; 0, or an errno. */
static int cache_write(const char *path, Hash key, const CudaImage *im) {
    char tmp[4300], head[160];
    snprintf(tmp, sizeof tmp, "%.4200s.%d.tmp", path, (int)getpid());
    size_t nl = strlen(im->log);
    unsigned char *body = xmalloc(im->size + nl + 1);
    memcpy(body, im->data, im->size);
    memcpy(body + im->size, im->log, nl);
    Hash h = hash_bytes(body, im->size + nl);
    int nh = snprintf(head, sizeof head, CACHE_MAGIC " %016llx%016llx %zu %zu %016llx%016llx\n", (unsigned long long)key.a,
                      (unsigned long long)key.b, im->size, nl, (unsigned long long)h.a, (unsigned long long)h.b);
    errno = 0;
    FILE *f = fopen(tmp, "wb");
    if (f) tmp_track(tmp);
    bool ok = f && fwrite(head, 1, (size_t)nh, f) == (size_t)nh && fwrite(body, 1, im->size + nl, f) == im->size + nl;
    if (f && fclose(f) != 0) ok = false;
    if (ok) ok = rename(tmp, path) == 0;
    int e = ok ? 0 : errno ? errno : EIO;
    if (!ok) remove(tmp);
    tmp_untrack(tmp);
    free(body);
    return e;
}

/* The cache folder, made if missing: usable when it is a folder this user
 * can write; the /tmp fallback only when it is this user's and no one
 * else can write it (another user could have made it first, to plant
 * images).  Else why not, in why. */
static bool cache_usable(const char *dir, char *why, size_t n) {
    mkdirs(dir);
    struct stat st;
    if (stat(dir, &st) != 0) return snprintf(why, n, "%s", strerror(errno)), false;
    if (!S_ISDIR(st.st_mode)) return snprintf(why, n, "not a folder"), false;
    if (cache_dir_fallback) {
        struct stat lt;
        if (lstat(dir, &lt) != 0 || !S_ISDIR(lt.st_mode) || lt.st_uid != geteuid() || (lt.st_mode & 022))
            return snprintf(why, n, "not this user's alone"), false;
    }
    if (access(dir, W_OK | X_OK) != 0) return snprintf(why, n, "%s", strerror(errno)), false;
    return true;
}

/* Removes what interrupted writes left (NAME.PID.tmp) an hour old or more:
 * a live compile renames its own within seconds. */
static void cache_sweep(const char *dir) {
    DIR *dd = opendir(dir);
    if (!dd) return;
    time_t now_s = time(NULL);
    struct dirent *de;
    while ((de = readdir(dd))) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".tmp") != 0) continue;
        char path[8400];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && now_s - st.st_mtime >= 3600) unlink(path);
    }
    closedir(dd);
}

/* ---- one compilation ---- */

typedef struct Job {
    const char  *src;
    const char  *hdr[2], *hname[2];
    CudaImage   *img;
    char         err[4096];
    bool         ok;
} Job;

/* NVRTC's options for image im (archopt holds the first); their count.
 * No include path: the prelude and philox.h come as headers of the
 * program, so the compiled code depends on no file of this machine; no
 * -lineinfo: its line table names the compiler's working folder, which
 * would make the images (and the cache's) depend on it. */
static int nvrtc_options(const CudaImage *im, char archopt[64], const char *opts[5]) {
    snprintf(archopt, 64, "--gpu-architecture=%s", im->arch);
    static const char *const rest[] = {"-std=c++17", "-DNDEBUG", "-Xptxas", "-v"};
    opts[0] = archopt;
    for (int i = 0; i < 4; i++) opts[i + 1] = rest[i];
    return im->ptx ? 3 : 5;
}

static void *compile_one(void *arg) {
    Job *j = arg;
    CudaImage *im = j->img;
    char archopt[64];
    const char *opts[5];
    int nopt = nvrtc_options(im, archopt, opts);
    nvrtcProgram prog;
    nvrtcResult r = nv.CreateProgram(&prog, j->src, "trainc_model.cu", 2, j->hdr, j->hname);
    if (r != 0) {
        snprintf(j->err, sizeof j->err, "nvrtcCreateProgram failed: %s", nv.GetErrorString(r));
        return NULL;
    }
    r = nv.CompileProgram(prog, nopt, opts);
    size_t ln = 0;
    nv.GetProgramLogSize(prog, &ln);
    im->log = xmalloc(ln + 1);
    im->log[0] = 0;
    if (ln) nv.GetProgramLog(prog, im->log);
    if (r != 0) {
        /* the log without ptxas's -v lines ("ptxas info    : Used 40
         * registers ..."), which filled the message before the error */
        StrBuf f = {0};
        for (const char *p = im->log; *p;) {
            const char *e = strchr(p, '\n');
            size_t len = e ? (size_t)(e - p) + 1 : strlen(p);
            const char *q = p + 5;
            while (strncmp(p, "ptxas ", 6) == 0 && *q == ' ') q++;
            bool v = strncmp(p, "ptxas info", 10) == 0 || (q > p + 6 && *q == '.'); /* "ptxas         .     0 bytes stack frame" */
            if (!v) sb_printf(&f, "%.*s", (int)len, p);
            p += len;
        }
        bool blank = true;
        for (size_t i = 0; i < f.len; i++) blank &= f.s[i] == ' ' || f.s[i] == '\n';
        if (blank) {
            /* ptxas refuses a function past 48 KB of static shared memory
             * without an error line: the functions its report says are */
            StrBuf w = {0};
            char fn[160] = "?";
            for (const char *p = im->log; (p = strstr(p, "ptxas info")); p++) {
                const char *c = strstr(p, "entry function '"), *u = strstr(p, " bytes smem"), *e = strchr(p, '\n');
                if (c && (!e || c < e)) sscanf(c + 16, "%159[^']", fn);
                if (u && (!e || u < e)) {
                    const char *d = u;
                    while (d > p && d[-1] >= '0' && d[-1] <= '9') d--;
                    if (atol(d) > 48 * 1024) sb_printf(&w, "%s%s uses %ld bytes", w.len ? ", " : "", fn, atol(d));
                }
            }
            if (w.len)
                snprintf(j->err, sizeof j->err, "nvrtcCompileProgram(%s) failed: %s: %s of static shared memory, past the 48 KB a block has",
                         im->arch, nv.GetErrorString(r), w.s);
            else
                snprintf(j->err, sizeof j->err, "nvrtcCompileProgram(%s) failed: %s, with no error in its log", im->arch, nv.GetErrorString(r));
            sb_free(&w);
        } else
            snprintf(j->err, sizeof j->err, "nvrtcCompileProgram(%s) failed: %s\n%.3500s", im->arch, nv.GetErrorString(r), f.s);
        sb_free(&f);
        nv.DestroyProgram(&prog);
        return NULL;
    }
    size_t n = 0;
    r = im->ptx ? nv.GetPTXSize(prog, &n) : nv.GetCUBINSize(prog, &n);
    if (r == 0) {
        im->data = xmalloc(n ? n : 1);
        r = im->ptx ? nv.GetPTX(prog, (char *)im->data) : nv.GetCUBIN(prog, (char *)im->data);
        im->size = n;
    }
    if (r != 0) snprintf(j->err, sizeof j->err, "nvrtcGet%s(%s) failed: %s", im->ptx ? "PTX" : "CUBIN", im->arch, nv.GetErrorString(r));
    nv.DestroyProgram(&prog);
    j->ok = r == 0;
    return NULL;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Whether this NVRTC compiles for sm (1 yes, 0 no, -1 it cannot say);
 * when not, the ones it does into have ("sm_75, sm_80, ..."). */
static int nvrtc_has_arch(int sm, char *have, size_t n) {
    int cnt = 0, list[128];
    if (!nv.GetNumSupportedArchs || !nv.GetSupportedArchs || nv.GetNumSupportedArchs(&cnt) != 0 || cnt <= 0 || cnt > 128 ||
        nv.GetSupportedArchs(list) != 0)
        return -1;
    have[0] = 0;
    for (int i = 0; i < cnt; i++) {
        if (list[i] == sm) return 1;
        size_t l = strlen(have);
        snprintf(have + l, n - l, "%ssm_%d", i ? ", " : "", list[i]);
    }
    return 0;
}

/* The architectures of archs ("sm_80,sm_90"; NULL or "": sm_80,sm_90)
 * into out->img, each checked against this NVRTC, and the PTX of the
 * lowest after them. */
static bool parse_archs(const char *archs, CudaBuild *out, Diag *d) {
    const char *list = archs && *archs ? archs : "sm_80,sm_90";
    int minsm = 1000;
    int maxarch = (int)(sizeof out->img / sizeof out->img[0]) - 1; /* and the PTX */
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        int sm = 0, used = 0;
        char a[16];
        snprintf(a, sizeof a, "%.*s", (int)(len < 15 ? len : 15), p);
        if (out->n == maxarch) {
            error_at(d, NOLOC, "--arch: more than %d architectures", maxarch);
            return false;
        }
        /* the whole name: sm_90a (the architecture-specific features) is not sm_90 */
        if (sscanf(a, "sm_%d%n", &sm, &used) != 1 || (size_t)used != len || sm < 50) {
            error_at(d, NOLOC, "--arch: '%.*s' is not a GPU architecture like sm_80 or sm_90", (int)len, p);
            return false;
        }
        bool twice = false;
        for (int i = 0; i < out->n; i++) twice |= out->img[i].sm == sm;
        if (twice) {
            error_at(d, NOLOC, "--arch: sm_%d is named twice", sm);
            return false;
        }
        char have[1024];
        if (nvrtc_has_arch(sm, have, sizeof have) == 0) {
            error_at(d, NOLOC, "--arch: this NVRTC (CUDA %d.%d) does not compile for sm_%d; it compiles for %s", nv.major, nv.minor, sm, have);
            return false;
        }
        CudaImage *im = &out->img[out->n++];
        snprintf(im->arch, sizeof im->arch, "sm_%d", sm);
        im->sm = sm;
        if (sm < minsm) minsm = sm;
        p = e ? e + 1 : p + len;
    }
    CudaImage *px = &out->img[out->n++];
    snprintf(px->arch, sizeof px->arch, "compute_%d", minsm);
    px->sm = minsm;
    px->ptx = true;
    return true;
}

bool cg_nvrtc_check_archs(const char *archs, Diag *d) {
    CudaBuild b;
    memset(&b, 0, sizeof b);
    return parse_archs(archs, &b, d);
}

bool cg_nvrtc_build(const char *src, const char *archs, CudaBuild *out, Diag *d) {
    memset(out, 0, sizeof *out);
    double t0 = now();
    char err[1024];
    if (!cg_nvrtc_open(err, sizeof err)) {
        error_at(d, NOLOC, "%s", err);
        return false;
    }
    /* the prelude headers, from the runtime folder */
    static const char *const hnames[2] = {"trainc_cuda.cuh", "philox.h"};
    char *htext[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", cg_runtime_dir(), hnames[i]);
        size_t n;
        htext[i] = read_file(path, &n);
        if (!htext[i]) {
            error_at(d, NOLOC, "cannot read %s: %s", path, strerror(errno));
            free(htext[0]);
            return false;
        }
    }
    if (!parse_archs(archs, out, d)) {
        free(htext[0]);
        free(htext[1]);
        return false;
    }

    const char *dir = cg_cuda_cache_dir(), *nc = getenv("TRAINC_NO_CACHE");
    bool use_cache = !nc || !*nc || strcmp(nc, "0") == 0;
    char why[256] = "";
    if (!use_cache) snprintf(out->cache, sizeof out->cache, "no cache: TRAINC_NO_CACHE");
    else if (!cache_usable(dir, why, sizeof why)) use_cache = false, snprintf(out->cache, sizeof out->cache, "no cache: %.3800s: %s", dir, why);
    else snprintf(out->cache, sizeof out->cache, "cache %.4000s", dir), cache_sweep(dir);
    /* the library: its version, and the file (a different build of one
     * version, or another chosen with TRAINC_NVRTC, compiles anew) */
    Hash lib = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
    int ver[2] = {nv.major, nv.minor};
    hash_add(&lib, ver, sizeof ver);
    Dl_info dli;
    struct stat lst;
    if (dladdr(*(void **)&nv.Version, &dli) && dli.dli_fname && stat(dli.dli_fname, &lst) == 0) {
        long long id[3] = {(long long)lst.st_size, (long long)lst.st_mtime, (long long)lst.st_ino};
        hash_add(&lib, dli.dli_fname, strlen(dli.dli_fname));
        hash_add(&lib, id, sizeof id);
    }
    Job jobs[8];
    pthread_t th[8];
    bool started[8] = {0};
    char paths[8][4200];
    Hash keys[8];
    for (int i = 0; i < out->n; i++) {
        CudaImage *im = &out->img[i];
        Hash h = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
        hash_add(&h, "trainc-cuda-5", 13); /* bumped when the entries or what NVRTC is given change */
        hash_add(&h, &lib, sizeof lib);
        char archopt[64];
        const char *opts[5];
        int nopt = nvrtc_options(im, archopt, opts);
        for (int k = 0; k < nopt; k++) hash_add(&h, opts[k], strlen(opts[k]));
        hash_add(&h, src, strlen(src));
        for (int k = 0; k < 2; k++) hash_add(&h, htext[k], strlen(htext[k]));
        keys[i] = h;
        snprintf(paths[i], sizeof paths[i], "%s/%016llx%016llx.%s", dir, (unsigned long long)h.a, (unsigned long long)h.b,
                 im->ptx ? "ptx" : "cubin");
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].src = src;
        jobs[i].img = im;
        for (int k = 0; k < 2; k++) {
            jobs[i].hdr[k] = htext[k];
            jobs[i].hname[k] = hnames[k];
        }
        if (use_cache && cache_read(paths[i], h, im)) {
            im->cached = true;
            jobs[i].ok = true;
            continue;
        }
        if (pthread_create(&th[i], NULL, compile_one, &jobs[i]) == 0) started[i] = true;
        else compile_one(&jobs[i]);
    }
    bool ok = true;
    int werr = 0;
    for (int i = 0; i < out->n; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        CudaImage *im = &out->img[i];
        if (!jobs[i].ok) {
            error_at(d, NOLOC, "%s", jobs[i].err);
            ok = false;
            continue;
        }
        int e = use_cache && !im->cached ? cache_write(paths[i], keys[i], im) : 0;
        if (e && !werr) werr = e;
    }
    if (!use_cache && strcmp(out->cache, "no cache: TRAINC_NO_CACHE") != 0)
        note_at(d, NOLOC, "the NVRTC cache is not used (%s): every compile runs NVRTC (TRAINC_CACHE_DIR names another folder)", out->cache + 10);
    else if (werr) {
        note_at(d, NOLOC, "the NVRTC cache %s cannot be written (%s): every compile runs NVRTC (TRAINC_CACHE_DIR names another folder)", dir, strerror(werr));
        snprintf(out->cache + strlen(out->cache), sizeof out->cache - strlen(out->cache), ", not written: %s", strerror(werr));
    }
    free(htext[0]);
    free(htext[1]);
    out->seconds = now() - t0;
    if (!ok) cg_cuda_build_free(out);
    return ok;
}

void cg_cuda_build_free(CudaBuild *b) {
    for (int i = 0; i < b->n; i++) {
        free(b->img[i].data);
        free(b->img[i].log);
    }
    memset(b, 0, sizeof *b);
}

/* ---- the resource report: ptxas -v lines ----
 *   ptxas info    : Compiling entry function 'NAME' for 'sm_90'
 *   ptxas info    : Function properties for NAME
 *   ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
 *   ptxas info    : Used 40 registers, used 1 barriers, 8192 bytes smem, 400 bytes cmem[0]
 */
int cg_cuda_resources(const CudaBuild *b, CudaRes **rows) {
    int n = 0, cap = 0;
    CudaRes *r = NULL;
    for (int i = 0; i < b->n; i++) {
        if (b->img[i].ptx || !b->img[i].log) continue;
        CudaRes *cur = NULL;
        for (const char *line = b->img[i].log; line && *line;) {
            const char *nl = strchr(line, '\n');
            size_t len = nl ? (size_t)(nl - line) : strlen(line);
            char buf[512];
            snprintf(buf, sizeof buf, "%.*s", (int)(len < 511 ? len : 511), line);
            char *p;
            if ((p = strstr(buf, "Compiling entry function '"))) {
                if (n == cap) {
                    cap = cap ? 2 * cap : 256;
                    r = xrealloc(r, sizeof(CudaRes) * (size_t)cap);
                }
                cur = &r[n++];
                memset(cur, 0, sizeof *cur);
                p += strlen("Compiling entry function '");
                char *q = strchr(p, '\'');
                if (q) *q = 0;
                snprintf(cur->name, sizeof cur->name, "%s", p);
                snprintf(cur->arch, sizeof cur->arch, "%s", b->img[i].arch);
            } else if (cur && (p = strstr(buf, "bytes stack frame"))) {
                while (p > buf && (p[-1] == ' ' || isdigit((unsigned char)p[-1]))) p--; /* the number before it */
                sscanf(p, "%d bytes stack frame, %d bytes spill stores, %d bytes spill loads", &cur->stack, &cur->spill_st, &cur->spill_ld);
            } else if (cur && (p = strstr(buf, "Used "))) {
                sscanf(p, "Used %d registers", &cur->regs);
                char *s = strstr(p, "bytes smem");
                if (s) {
                    while (s > p && s[-1] == ' ') s--;
                    while (s > p && s[-1] >= '0' && s[-1] <= '9') s--;
                    cur->smem = atoi(s);
                }
            }
            line = nl ? nl + 1 : NULL;
        }
    }
    *rows = r;
    return n;
}

void cg_cuda_print_report(FILE *f, const CudaModule *m, const CudaBuild *b) {
    CudaRes *rows;
    int n = cg_cuda_resources(b, &rows);
    fprintf(f, "# CUDA resource report: %d functions, images", m ? cg_cuda_nfns(m) : 0);
    for (int i = 0; i < b->n; i++) fprintf(f, " %s (%zu bytes%s)", b->img[i].arch, b->img[i].size, b->img[i].cached ? ", cached" : "");
    fputc('\n', f);
    static const char *const sname[TRN_RUN__COUNT] = {"micro-batch", "update", "eval", "sample", "refresh"};
    for (int s = 0; m && s < TRN_RUN__COUNT; s++) {
        int nk, nl, np;
        cg_cuda_sched_counts(m, s, &nk, &nl, &np);
        if (nk) fprintf(f, "# schedule %s: %d kernels, %d launches, %d cuBLASLt products\n", sname[s], nk, nl, np);
    }
    fprintf(f, "# %-60s %-6s %5s %7s %6s %6s %6s %s\n", "function", "arch", "regs", "smem", "stack", "spillS", "spillL", "kind");
    int spills = 0;
    for (int i = 0; i < n; i++) {
        bool tmpl = false;
        for (int j = 0; m && j < cg_cuda_nfns(m); j++)
            if (strcmp(cg_cuda_fn_name(m, j), rows[i].name) == 0) tmpl = cg_cuda_fn_is_template(m, j);
        fprintf(f, "  %-60s %-6s %5d %7d %6d %6d %6d %s\n", rows[i].name, rows[i].arch, rows[i].regs, rows[i].smem, rows[i].stack, rows[i].spill_st,
                rows[i].spill_ld, tmpl ? "template" : "generated");
        spills += rows[i].spill_st + rows[i].spill_ld > 0;
    }
    fprintf(f, "# %d function(s) with spills\n", spills);
    free(rows);
}
