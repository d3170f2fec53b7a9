/* runtime/cuda.c — the CUDA backend.
 *
 * A placeholder until the real backend lands (it will load libcuda with
 * dlopen, so that the driver is never a load-time dependency and a machine
 * without a GPU still runs every executable on the CPU).  Until then it
 * answers why it cannot run, and trn_create's "auto" falls back to the CPU. */
#include "rt.h"

int trn_cuda_backend(const TrnModel *m, TrnBackend *out, char *err, size_t errn) {
    (void)out;
    if (!m || !m->cuda) return rt_fail(err, errn, "this executable was built without a CUDA module");
    return rt_fail(err, errn, "CUDA backend not available yet");
}
