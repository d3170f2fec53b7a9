/* bench/roofline.c — the work of a compiled model's step, from its CUDA
 * module (bench/roofline.sh links it with the generated C, -DTRN_MODULE=
 * trn_cuda_module_NAME): per schedule, the FLOPs of its products (2MNK)
 * and attention (TrnCudaKernel.flops), the bytes of the buffers its
 * kernels read and write, and the roofline's bound on the step's time:
 * each kernel at least max(FLOPs / PEAK_FLOPS, bytes / PEAK_BYTES_PER_S),
 * summed.  What TRAINC_CUDA_PROFILE reports per kernel, summed, and a
 * bound at the given peaks, not a measurement.
 * With KERNELS, a line per kernel before its schedule's ("kernel",
 * "where", "kind", "flops", "bytes", "bound_ms"), which roofline.sh sums
 * per op as tests/gpu/run.sh's profile does.
 *   roofline PEAK_TFLOPS PEAK_TB_PER_S [KERNELS] */
#include "trainc_cuda.h"

#include <stdio.h>
#include <stdlib.h>

extern const TrnCudaModule TRN_MODULE;

int main(int argc, char **argv) {
    double pf = (argc > 1 ? atof(argv[1]) : 989) * 1e12, pb = (argc > 2 ? atof(argv[2]) : 4.8) * 1e12;
    static const char *const sname[TRN_RUN__COUNT] = {"micro", "update", "eval", "sample", "refresh"};
    static const char *const kname[] = {"launch", "gemm", "memset", "steps"};
    const TrnCudaModule *cm = &TRN_MODULE;
    int each = argc > 3 && argv[3][0];
    for (int s = 0; s < TRN_RUN__COUNT; s++) {
        if (!cm->nkern[s] || (s != TRN_RUN_MICRO && s != TRN_RUN_UPDATE)) continue;
        double prod = 0, att = 0, bytes = 0, bound = 0;
        for (int i = 0; i < cm->nkern[s]; i++) {
            const TrnCudaKernel *k = &cm->kern[s][i];
            double f, b;
            trn_cuda_kernel_work(k, &f, &b);
            double kb = f / pf > b / pb ? f / pf : b / pb;
            prod += f - k->flops, att += k->flops, bytes += b, bound += kb;
            if (each)
                printf("{\"schedule\":\"%s\",\"kernel\":\"%s\",\"where\":\"%s\",\"kind\":\"%s\",\"flops\":%.0f,\"bytes\":%.0f,\"bound_ms\":%.6f}\n", sname[s],
                       k->name, k->where ? k->where : "", (unsigned)k->kind < 4 ? kname[k->kind] : "?", f, b, kb * 1e3);
        }
        printf("{\"schedule\":\"%s\",\"kernels\":%d,\"product_flops\":%.0f,\"attention_flops\":%.0f,\"bytes\":%.0f,\"bound_ms\":%.3f}\n", sname[s],
               cm->nkern[s], prod, att, bytes, bound * 1e3);
    }
    return 0;
}
