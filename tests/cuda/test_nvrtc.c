/* tests/cuda/test_nvrtc.c — every kernel of a model compiles with NVRTC to
 * sm_80 and sm_90 cubin (and PTX), without a GPU:
 *   test_nvrtc MODEL PRECISION [--no-spills] [--no-generated-spills] [--arch LIST] [-D NAME=VALUE]...
 *              [--set KEY=VALUE]... [--expect OP[:ATTR]]... [--expect-half OP]...
 *              [--expect-src [!]TEXT]... [--no-tc-attention] [--tc-attention-rows N]
 * checks that every kernel of every schedule has its CUDA form (a launch, a
 * cuBLASLt product, a memset or a sequence of them), that each image holds
 * every function, with --no-spills that no template kernel spills registers
 * (the resource report of ptxas -v), with --no-generated-spills that no
 * generated kernel does either, with --expect that the training graph
 * has the op (with the attribute: so that the test covers what it is meant
 * to: fused ops, padding's {classes}), and with --expect-half that some node of the op has
 * a bf16 or f16 operand, with --expect-src that the CUDA source has TEXT
 * (with !, that it has not; e.g. which attention kernels were chosen).
 * --no-tc-attention, --tc-attention-rows: as trainc's flags.  PRECISION is train.precision (fp32, tf32, bf16,
 * fp16); the passes run as for `trainc compile --target=cuda`.
 *
 *   test_nvrtc --bad-source
 * compiles programs NVRTC refuses (an unknown name; 64 KB of static shared
 * memory, which ptxas refuses without an error line; twelve unknown names,
 * a log of thousands of bytes): each message says why, whole, without the
 * ptxas -v lines that filled it before. */
#include "cg.h"
#include "compile.h"
#include "cuda.h"

#include <stdlib.h>
#include <string.h>

/* NVRTC's refusal of src: the message, with want in it and no "ptxas info" line. */
static int bad_source(const char *what, const char *src, const char *want, const char *want2) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    Diag d;
    diag_init(&d, f);
    CudaBuild b = {0};
    bool ok = cg_nvrtc_build(src, "sm_90", &b, &d);
    fclose(f);
    cg_cuda_build_free(&b);
    int fail = ok || !strstr(buf, want) || (want2 && !strstr(buf, want2)) || strstr(buf, "ptxas info");
    printf("%s: %s\n%s", what, fail ? "FAIL" : "ok", buf);
    free(buf);
    return fail;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc == 2 && strcmp(argv[1], "--bad-source") == 0) {
        setenv("TRAINC_NO_CACHE", "1", 1);
        int fails = bad_source("an unknown name", "extern \"C\" __global__ void f(float *x) { x[0] = no_such_name; }\n", "no_such_name",
                               "error");
        fails += bad_source("64 KB of static shared memory",
                            "extern \"C\" __global__ void g(float *x) {\n"
                            "    __shared__ float s[16384 + 64];\n"
                            "    s[threadIdx.x] = x[threadIdx.x];\n"
                            "    __syncthreads();\n"
                            "    x[threadIdx.x] = s[16383 + 64 - threadIdx.x];\n"
                            "}\n",
                            "g uses 65792 bytes of static shared memory, past the 48 KB a block has", NULL);
        /* a log of thousands of bytes reaches the message whole (a Diag
         * message was cut at 1023 bytes) */
        char big[4096];
        int m = snprintf(big, sizeof big, "extern \"C\" __global__ void h(float *x) {\n");
        for (int i = 0; i < 12; i++) m += snprintf(big + m, sizeof big - (size_t)m, "    x[%d] = undefined_name_number_%d;\n", i, i);
        snprintf(big + m, sizeof big - (size_t)m, "}\n");
        fails += bad_source("twelve unknown names", big, "undefined_name_number_11", "12 errors detected");
        return fails ? 1 : 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: test_nvrtc MODEL PRECISION [--no-spills] [--no-generated-spills] [--arch LIST] [-D NAME=VALUE]...\n");
        return 2;
    }
    Define dv[32];
    const char *sets[34], *expect[16], *srcs[8];
    bool expect_half[16];
    int nd = 0, ns = 1, ne = 0, nsrc = 0;
    bool nospill = false, nogspill = false, notc = false;
    int tcrows = 0;
    const char *archs = "sm_80,sm_90";
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--no-spills") == 0) nospill = true;
        else if (strcmp(argv[i], "--no-generated-spills") == 0) nogspill = true;
        else if (strcmp(argv[i], "--no-tc-attention") == 0) notc = true;
        else if (strcmp(argv[i], "--tc-attention-rows") == 0 && i + 1 < argc) tcrows = atoi(argv[++i]);
        else if (strcmp(argv[i], "--expect-src") == 0 && i + 1 < argc && nsrc < 8) srcs[nsrc++] = argv[++i];
        else if (strcmp(argv[i], "--arch") == 0 && i + 1 < argc) archs = argv[++i];
        else if (strcmp(argv[i], "--set") == 0 && i + 1 < argc && ns < 33) sets[ns++] = argv[++i];
        else if ((strcmp(argv[i], "--expect") == 0 || strcmp(argv[i], "--expect-half") == 0) && i + 1 < argc && ne < 16) {
            expect_half[ne] = strcmp(argv[i], "--expect-half") == 0;
            expect[ne++] = argv[++i];
        } else if (strcmp(argv[i], "-D") == 0 && i + 1 < argc && nd < 32) {
            char *eq = strchr(argv[++i], '=');
            if (!eq) return 2;
            *eq = 0;
            dv[nd++] = (Define){argv[i], eq + 1};
        } else {
            fprintf(stderr, "test_nvrtc: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    char set[64];
    snprintf(set, sizeof set, "precision=%s", argv[2]);
    sets[0] = set;
    sets[ns] = NULL;
    CompileOptions o = {0};
    o.model = argv[1];
    o.defs = dv;
    o.ndefs = nd;
    o.fuse = true;
    o.target = "cuda";
    o.sets = sets;
    o.pm.verify_each = true;
    o.no_tc_attention = notc;
    o.tc_attention_rows = tcrows;
    o.archs = archs;
    Diag d;
    diag_init(&d, stderr);
    Graph *train = NULL, *eval = NULL, *sample = NULL;
    Program *p = cg_build(&o, &train, &eval, &sample, &d);
    if (!p) return 1;
    int fails = 0, nk = 0;
    for (int i = 0; i < ne; i++) {
        int n = 0, nh = 0;
        char opn[64];
        snprintf(opn, sizeof opn, "%s", expect[i]);
        char *attr = strchr(opn, ':');
        if (attr) *attr++ = 0;
        for (int j = 0; j < train->nnodes; j++) {
            Node *x = train->nodes[j];
            if (strcmp(op_name(x->op), opn) != 0 || (attr && !ir_attr(x, attr))) continue;
            n++;
            bool h = false;
            for (int q = 0; q < x->nin; q++) h |= x->in[q]->ty.dt == DT_bf16 || x->in[q]->ty.dt == DT_f16;
            nh += h;
        }
        printf("expected %s: %d node(s), %d with half operands\n", expect[i], n, nh);
        if (!n || (expect_half[i] && !nh)) {
            fprintf(stderr, "FAIL: the training graph has no %s%s\n", expect[i], expect_half[i] ? " with bf16/f16 operands" : "");
            fails++;
        }
    }
    for (int s = 0; s < TRN_RUN__COUNT; s++) nk += p->sched[s].nk;
    CudaModule *m = cg_cuda_emit(p, &d);
    if (!m) return 1;
    if (cg_cuda_nkernels(m) != nk) {
        fprintf(stderr, "FAIL: %d kernels in the program, %d in the CUDA module\n", nk, cg_cuda_nkernels(m));
        fails++;
    }
    printf("%s (%s): %d kernels -> %d CUDA functions, %zu bytes of CUDA C; workspace %lld bytes\n", argv[1], argv[2], nk, cg_cuda_nfns(m),
           strlen(cg_cuda_source(m)), (long long)p->workspace_bytes);
    for (int i = 0; i < nsrc; i++) {
        bool neg = srcs[i][0] == '!', has = strstr(cg_cuda_source(m), srcs[i] + neg) != NULL;
        printf("CUDA source %s \"%s\"\n", has ? "has" : "lacks", srcs[i] + neg);
        if (has == neg) {
            fprintf(stderr, "FAIL: the CUDA source %s \"%s\"\n", has ? "has" : "lacks", srcs[i] + neg);
            fails++;
        }
    }
    CudaBuild b;
    if (!cg_nvrtc_build(cg_cuda_source(m), archs, &b, &d)) return 1;
    printf("NVRTC: %d images in %.1f s (%s)\n", b.n, b.seconds, b.cache);
    CudaRes *rows;
    int nr = cg_cuda_resources(&b, &rows);
    int ncubin = 0;
    for (int i = 0; i < b.n; i++) {
        ncubin += !b.img[i].ptx;
        printf("  %-11s %9zu bytes%s\n", b.img[i].arch, b.img[i].size, b.img[i].cached ? " (cached)" : "");
        if (b.img[i].size == 0) {
            fprintf(stderr, "FAIL: empty image %s\n", b.img[i].arch);
            fails++;
        }
    }
    /* every generated function and trn_init_f32 (parameter initialisation) */
    bool has_init = false;
    for (int i = 0; i < nr; i++) has_init = has_init || strcmp(rows[i].name, "trn_init_f32") == 0;
    if (!has_init) {
        fprintf(stderr, "FAIL: no trn_init_f32 in the resource report\n");
        fails++;
    }
    if (nr != ncubin * (cg_cuda_nfns(m) + 1)) {
        fprintf(stderr, "FAIL: the report lists %d functions, expected %d x (%d + 1)\n", nr, ncubin, cg_cuda_nfns(m));
        fails++;
    }
    int spills = 0, tspills = 0, maxregs = 0;
    for (int i = 0; i < nr; i++) {
        bool tmpl = false;
        for (int j = 0; j < cg_cuda_nfns(m); j++)
            if (strcmp(cg_cuda_fn_name(m, j), rows[i].name) == 0) tmpl = cg_cuda_fn_is_template(m, j);
        if (rows[i].regs > maxregs) maxregs = rows[i].regs;
        if (rows[i].spill_st + rows[i].spill_ld == 0) continue;
        spills++;
        tspills += tmpl;
        printf("  spill: %s %s: %d registers, %d bytes stores, %d bytes loads (%s)\n", rows[i].name, rows[i].arch, rows[i].regs, rows[i].spill_st,
               rows[i].spill_ld, tmpl ? "template" : "generated");
    }
    printf("resource report: %d function images, at most %d registers, %d with spills (%d templates)\n", nr, maxregs, spills, tspills);
    if (nospill && tspills) {
        fprintf(stderr, "FAIL: %d template kernel image(s) spill registers\n", tspills);
        fails++;
    }
    if (nogspill && spills > tspills) {
        fprintf(stderr, "FAIL: %d generated kernel image(s) spill registers\n", spills - tspills);
        fails++;
    }
    free(rows);
    cg_cuda_build_free(&b);
    cg_cuda_free(m);
    cg_free(p);
    ir_graph_free(train);
    ir_graph_free(eval);
    ir_graph_free(sample);
    diag_free(&d);
    if (fails) return 1;
    printf("ok\n");
    return 0;
}
