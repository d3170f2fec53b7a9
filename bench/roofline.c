/* bench/roofline.c — the work of a compiled model's step, from its CUDA
 * module (bench/roofline.sh links it with the generated C, -DTRN_MODULE=
 * trn_cuda_module_NAME): per schedule, the FLOPs of its products (2MNK)
 * and attention (TrnCudaKernel.flops), the bytes of the buffers its
 * kernels read and write, and the roofline's bound on the step's time:
 * each kernel at least max(FLOPs / PEAK_FLOPS, bytes / PEAK_BYTES_PER_S),
 * summed.  What TRAINC_CUDA_PROFILE reports per kernel, summed, and a
 * bound at the given peaks, not a measurement.
 *   roofline PEAK_TFLOPS PEAK_TB_PER_S */
#include "trainc_cuda.h"

#include <stdio.h>
#include <stdlib.h>

extern const TrnCudaModule TRN_MODULE;

int main(int argc, char **argv) {
    double pf = (argc > 1 ? atof(argv[1]) : 989) * 1e12, pb = (argc > 2 ? atof(argv[2]) : 4.8) * 1e12;
    static const char *const sname[TRN_RUN__COUNT] = {"micro", "update", "eval", "sample", "refresh"};
    const TrnCudaModule *cm = &TRN_MODULE;
    for (int s = 0; s < TRN_RUN__COUNT; s++) {
        if (!cm->nkern[s] || (s != TRN_RUN_MICRO && s != TRN_RUN_UPDATE)) continue;
        double prod = 0, att = 0, bytes = 0, bound = 0;
        for (int i = 0; i < cm->nkern[s]; i++) {
            const TrnCudaKernel *k = &cm->kern[s][i];
            double f, b;
            trn_cuda_kernel_work(k, &f, &b);
            prod += f - k->flops, att += k->flops, bytes += b;
            bound += f / pf > b / pb ? f / pf : b / pb;
        }
        printf("{\"schedule\":\"%s\",\"kernels\":%d,\"product_flops\":%.0f,\"attention_flops\":%.0f,\"bytes\":%.0f,\"bound_ms\":%.3f}\n", sname[s],
               cm->nkern[s], prod, att, bytes, bound * 1e3);
    }
    return 0;
}
