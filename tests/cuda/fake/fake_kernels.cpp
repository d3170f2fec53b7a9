/* tests/cuda/fake/fake_kernels.cpp — a model's generated kernels for the
 * fake driver (fake_cuda.cpp): its CUDA C compiled by g++ with
 * tests/cuda/emu/cuda_emu.h, found by name and run block after block.
 * Built by tests/cuda/fake/run.sh with
 *   -DEMU_KERNELS='"MODEL.cu"'      the generated kernels
 *   -DEMU_DISPATCH='"MODEL.emu.h"'  their table (tests/cuda/emu/dispatch.awk) */
#include "cuda_emu.h"

#include EMU_KERNELS

typedef struct EmuFn {
    const char *name;
    void (*fn)(void **);
    int nargs, max_threads;
} EmuFn;
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

extern "C" void fake_kernel_run(int fn, const unsigned grid[3], const unsigned block[3], void **args) {
    blockDim = emu_dim3{block[0], block[1], block[2]};
    gridDim = emu_dim3{grid[0], grid[1], grid[2]};
    for (unsigned z = 0; z < grid[2]; z++)
        for (unsigned y = 0; y < grid[1]; y++)
            for (unsigned x = 0; x < grid[0]; x++) {
                blockIdx = emu_dim3{x, y, z};
                emu_run_block(emu_fns[fn].fn, args);
            }
}
