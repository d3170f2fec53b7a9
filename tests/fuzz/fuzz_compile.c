/* tests/fuzz/fuzz_compile.c — libFuzzer target for the whole compiler
 * short of the C compiler: the .model front end, the training pipeline
 * (autodiff, the optimizer, mixed precision, fusion, padding,
 * checkpointing, LoRA, freezing, ...), the eval and sampling graphs, and
 * the lowering to kernels and the memory plan, for the cpu target and the
 * cuda one (cg_build), and the C or the CUDA C of the kernels (thrown
 * away: nothing is compiled).
 *
 * The bytes are the .model file (NUL-terminated, read through a memfd, as
 * `trainc compile` reads its file), with the IR verified after every pass.
 * Any crash, sanitizer report, leak, timeout, internal error (die aborts)
 * or invalid IR after a pass is a bug; an input that only fails with an
 * error message is not.  Keep an input that found one in
 * tests/fuzz/corpus_model/ once fixed: test_compile_corpus runs this entry
 * point on that folder and on the examples.  See docs/language.md.
 */
#include "cg.h"
#include "compile.h"
#include "cuda.h"
#include "ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The verifier's headline after a pass (passes/pm.c); an input holding
 * the words itself (echoed under an error) is not judged by them. */
static const char invalid[] = ": the IR is invalid";

static void build(const char *path, const char *target, bool judge) {
    char *msgs = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&msgs, &len);
    if (!mem) abort();
    Diag d;
    diag_init(&d, mem);
    CompileOptions o = {.model = path, .target = target, .fuse = true, .po.quiet = true, .pm.verify_each = true};
    Graph *train = NULL, *eval = NULL, *sample = NULL;
    Program *p = cg_build(&o, &train, &eval, &sample, &d);
    if (p) {
        /* the emitters' text, thrown away (nothing is compiled) */
        static FILE *devnull;
        if (!devnull) devnull = fopen("/dev/null", "w");
        if (strcmp(target, "cuda") == 0) {
            CudaModule *m = cg_cuda_emit(p, &d);
            cg_cuda_free(m);
        } else {
            cg_emit_c(devnull, p, true, &d);
        }
        cg_free(p);
        ir_graph_free(train);
        ir_graph_free(eval);
        ir_graph_free(sample);
    }
    diag_free(&d);
    fclose(mem);
    if (judge && msgs && strstr(msgs, invalid)) {
        fprintf(stderr, "target %s:\n%s", target, msgs);
        abort();
    }
    free(msgs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    if (nul) size = (size_t)(nul - data); /* the file would stop there too */
    int fd = memfd_create("fuzz.model", 0);
    if (fd < 0) abort();
    if (size && write(fd, data, size) != (ssize_t)size) abort();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    bool judge = !memmem(data, size, invalid, sizeof invalid - 1);
    build(path, "cpu", judge);
    build(path, "cuda", judge);
    close(fd);
    return 0;
}
