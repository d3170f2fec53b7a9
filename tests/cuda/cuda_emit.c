/* tests/cuda/cuda_emit.c — a small driver for the CUDA backend's tests:
 * builds a model for --target=cuda and writes what `trainc compile` would
 * (until the driver has a compile command):
 *   cuda_emit MODEL OUT MODE [-D NAME=VALUE]... [--set KEY=VALUE]... [--arch LIST]
 *             [--cpu] [--no-blas] [--no-fuse] [--cc CC] [--no-tc-attention] [--tc-attention-rows N]
 * MODE: cuda (OUT.cu + report), c (OUT.c), exe (executable OUT), lib. */
#include "cg.h"
#include "compile.h"

#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: cuda_emit MODEL OUT cuda|c|exe|lib [-D NAME=VALUE]... [--set KEY=VALUE]... [--arch LIST] [--cpu] [--no-tc-attention] [--tc-attention-rows N] [--no-fuse] [--no-blas] [--cc CC]\n");
        return 2;
    }
    Define dv[64];
    const char *sets[64];
    int nd = 0, ns = 0;
    CompileOptions o = {0};
    o.model = argv[1];
    o.out = argv[2];
    o.fuse = true;
    o.blas = true;
    o.target = "cuda";
    o.verbose = getenv("VERBOSE") != NULL;
    const char *mode = argv[3];
    o.emit = strcmp(mode, "exe") == 0 ? NULL : mode;
    for (int i = 4; i < argc; i++) {
        if (strcmp(argv[i], "-D") == 0 && i + 1 < argc && nd < 64) {
            char *eq = strchr(argv[++i], '=');
            if (!eq) return 2;
            *eq = 0;
            dv[nd].name = argv[i];
            dv[nd].value = eq + 1;
            nd++;
        } else if (strcmp(argv[i], "--set") == 0 && i + 1 < argc && ns < 63) {
            sets[ns++] = argv[++i];
        } else if (strcmp(argv[i], "--arch") == 0 && i + 1 < argc) {
            o.archs = argv[++i];
        } else if (strcmp(argv[i], "--cpu") == 0) {
            o.target = "cpu";
        } else if (strcmp(argv[i], "--no-tc-attention") == 0) {
            o.no_tc_attention = true;
        } else if (strcmp(argv[i], "--tc-attention-rows") == 0 && i + 1 < argc) {
            o.tc_attention_rows = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--no-fuse") == 0) {
            o.fuse = false;
        } else if (strcmp(argv[i], "--no-blas") == 0) {
            o.blas = false;
        } else if (strcmp(argv[i], "--cc") == 0 && i + 1 < argc) {
            o.cc = argv[++i];
        } else {
            fprintf(stderr, "cuda_emit: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    sets[ns] = NULL;
    o.defs = dv;
    o.ndefs = nd;
    o.sets = sets;
    o.pm.verify_each = true;
    Diag d;
    diag_init(&d, stderr);
    int rc = cg_compile(&o, &d);
    diag_free(&d);
    return rc;
}
