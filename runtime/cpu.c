/* runtime/cpu.c — the CPU backend: one allocation of exactly
 * m->arena_bytes (rounded up to whole pages), every tensor at its planned
 * offset, and the compiled schedules m->cpu_run[] run on it. */
#include "rt.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef struct CpuBackend {
    const TrnModel *m;
    unsigned char  *arena;      /* (arena_bytes) */
    size_t          mapped;     /* bytes mapped at arena */
    int             flags;
} CpuBackend;

/* The arena: anonymous memory (zero until written), 2 MiB-aligned, with
 * transparent huge pages asked for (where the kernel gives them only on
 * request).  In 4 KiB pages GPT-2 small's 4.2 GiB arena takes a million
 * first-touch faults, most of the time before the first step here. */
#define HUGE_PAGE ((size_t)2 << 20)
static void *map_arena(size_t n, size_t *mapped) {
    size_t body = (n + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE, len = body + HUGE_PAGE;
    unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    size_t head = (HUGE_PAGE - (uintptr_t)p % HUGE_PAGE) % HUGE_PAGE;
    if (head) munmap(p, head);
    if (len - head - body) munmap(p + head + body, len - head - body);
#ifdef MADV_HUGEPAGE
    madvise(p + head, body, MADV_HUGEPAGE); /* advice: no error when refused */
#endif
    *mapped = body;
    return p + head;
}

static int cpu_run(void *self, TrnRun which, char *err, size_t errn) {
    CpuBackend *c = self;
    if ((unsigned)which >= TRN_RUN__COUNT) return rt_fail(err, errn, "unknown schedule %d", (int)which);
    if (c->m->cpu_run[which]) c->m->cpu_run[which](c->arena, c->flags);   /* NULL: nothing to run */
    return 0;
}

static int cpu_place(CpuBackend *c, int tensor, size_t *bytes, char *err, size_t errn) {
    if (tensor < 0 || tensor >= c->m->ntensors) return rt_fail(err, errn, "no tensor %d", tensor);
    const TrnTensor *t = &c->m->tensors[tensor];
    if (t->offset < 0) return rt_fail(err, errn, "tensor '%s' has no place in the arena", t->name);
    *bytes = (size_t)rt_nbytes(t->dtype, t->numel);   /* within the arena: rt_check_model */
    return 0;
}

static int cpu_read(void *self, int tensor, void *dst, char *err, size_t errn) {
    CpuBackend *c = self;
    size_t n = 0;
    if (cpu_place(c, tensor, &n, err, errn) != 0) return -1;
    if (n) memcpy(dst, c->arena + c->m->tensors[tensor].offset, n);
    return 0;
}

static int cpu_read_part(void *self, int tensor, int64_t first, int64_t count, void *dst, char *err, size_t errn) {
    CpuBackend *c = self;
    size_t n = 0;
    if (cpu_place(c, tensor, &n, err, errn) != 0) return -1;
    const TrnTensor *t = &c->m->tensors[tensor];
    if (rt_part_in(t, first, count, err, errn) != 0) return -1;
    if (count) memcpy(dst, c->arena + t->offset + rt_nbytes(t->dtype, first), (size_t)rt_nbytes(t->dtype, count));
    return 0;
}

static int cpu_write(void *self, int tensor, const void *src, char *err, size_t errn) {
    CpuBackend *c = self;
    size_t n = 0;
    if (cpu_place(c, tensor, &n, err, errn) != 0) return -1;
    if (n) memcpy(c->arena + c->m->tensors[tensor].offset, src, n);
    return 0;
}

static void cpu_destroy(void *self) {
    CpuBackend *c = self;
    if (!c) return;
    if (c->arena) munmap(c->arena, c->mapped);
    free(c);
}

int rt_cpu_backend(const TrnModel *m, int flags, TrnBackend *out, char *err, size_t errn) {
    if (rt_check_model(m, err, errn) != 0) return -1;
    int any = 0;
    for (int i = 0; i < TRN_RUN__COUNT; i++) any |= m->cpu_run[i] != NULL;
    if (!any) return rt_fail(err, errn, "this executable has no CPU schedules (it was compiled for CUDA only)");
    if (m->arena_bytes < 0 || (uint64_t)m->arena_bytes > (uint64_t)SIZE_MAX)
        return rt_fail(err, errn, "bad arena size %lld", (long long)m->arena_bytes);
    CpuBackend *c = rt_calloc(1, sizeof *c, err, errn);
    if (!c) return -1;
    size_t n = m->arena_bytes > 0 ? (size_t)m->arena_bytes : 1;
    void *p = map_arena(n, &c->mapped);
    if (!p) {
        int e = errno;
        free(c);
        return rt_fail(err, errn, "mmap of %zu bytes for the arena failed at %s:%d: %s", n, rt_srcname(__FILE__), __LINE__, strerror(e));
    }
    /* Poison: all-ones bytes are NaN in f32, f64, bf16 and f16, so a read of
     * a buffer nothing wrote shows up in the loss.  (Otherwise zero, as
     * mapped.) */
    if (flags & TRN_FLAG_POISON) memset(p, 0xFF, n);
    c->m = m;
    c->arena = p;
    c->flags = flags;
    memset(out, 0, sizeof *out);
    out->name = "cpu";
    out->self = c;
    out->run = cpu_run;
    out->read = cpu_read;
    out->read_part = cpu_read_part;
    out->write = cpu_write;
    out->destroy = cpu_destroy;
    out->device_bytes = m->arena_bytes;
    return 0;
}

int trn_cpu_backend(const TrnModel *m, TrnBackend *out, char *err, size_t errn) { return rt_cpu_backend(m, 0, out, err, errn); }
