/* tests/cuda/fake/fake_kernels.cpp — a model's generated kernels for the
 * fake driver (fake_cuda.cpp): its CUDA C compiled by g++ with
 * tests/cuda/emu/cuda_emu.h, found by name and run block after block.
 * Built by tests/cuda/fake/run.sh with
 *   -DEMU_KERNELS='"MODEL.cu"'      the generated kernels
 *   -DEMU_DISPATCH='"MODEL.emu.h"'  their table (tests/cuda/emu/dispatch.awk) */
#include "cuda_emu.h"

#include EMU_KERNELS

#include EMU_DISPATCH

extern "C" int fake_kernel_find(const char *name, int *nargs, int *max_threads) {
    for (size_t i = 0; i < sizeof emu_fns / sizeof emu_fns[0]; i++)
        if (strcmp(emu_fns[i].name, name) == 0) {
            *nargs = emu_fns[i].nargs;
            *max_threads = emu_fns[i].max_threads;
            return (int)i;
        }
    return -1;
}

extern "C" void fake_kernel_run(int fn, const unsigned grid[3], const unsigned block[3], void **args) { emu_launch(emu_fns[fn].fn, grid, block, args); }
