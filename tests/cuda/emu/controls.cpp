/* tests/cuda/emu/controls.cpp — runs one kernel of controls.cu on the
 * emulation as emu_device.cpp runs a generated one (emu_launch_orders: both
 * orders unless TRAINC_EMU_ONE_ORDER=1; shared memory filled unless
 * TRAINC_EMU_NO_FILL=1; under ThreadSanitizer when built with it) and
 * compares the memory with what the kernel is meant to compute:
 *   controls KERNEL
 * prints "KERNEL: ok", or "KERNEL: FAIL: ..." and exits 1 (ThreadSanitizer
 * exits 66 with its report).  Built by controls.sh with
 * -DEMU_DISPATCH='"controls.emu.h"' (dispatch.awk on controls.cu). */
#include "cuda_emu.h"

#include "controls.cu"

#include EMU_DISPATCH

/* the memory of a launch: x, a table, y, a sum */
struct alignas(16) Mem {
    float x[CTL_N], tab[256], y[CTL_N], out[1];
};
static Mem m, want; /* at file scope: function-local statics are taken for __shared__ and filled */

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: controls KERNEL\n");
        return 2;
    }
    const char *name = argv[1];
    const EmuFn *f = NULL;
    for (size_t i = 0; i < sizeof emu_fns / sizeof emu_fns[0]; i++)
        if (strcmp(emu_fns[i].name, name) == 0) f = &emu_fns[i];
    if (!f) {
        fprintf(stderr, "controls: no kernel %s\n", name);
        return 2;
    }
    for (int i = 0; i < CTL_N; i++) m.x[i] = 1.0f + (float)(i % 13) * 0.25f;
    for (int j = 0; j < 256; j++) m.tab[j] = 0.5f + (float)(j % 7) * 0.125f;
    want = m;

    /* the arguments, the grid, and the intended result */
    void *args[3];
    unsigned grid[3] = {CTL_N / 256, 1, 1}, block[3] = {256, 1, 1};
    if (strcmp(name, "ctl_scale") == 0 || strcmp(name, "ctl_vec") == 0 || strcmp(name, "ctl_vec_misaligned") == 0) {
        args[0] = m.x;
        for (int i = 0; i < CTL_N; i++) want.x[i] = 2.0f * m.x[i];
    } else if (strcmp(name, "ctl_next_block") == 0) {
        args[0] = m.x;
        for (int i = 0; i < CTL_N; i++) want.x[i] = m.x[i] + (i + 256 < CTL_N ? m.x[i + 256] : 0.0f);
    } else if (strcmp(name, "ctl_table") == 0 || strcmp(name, "ctl_table_once") == 0) {
        args[0] = m.tab, args[1] = m.x, args[2] = m.y;
        for (int i = 0; i < CTL_N; i++) want.y[i] = m.x[i] * m.tab[i % 256];
    } else if (strcmp(name, "ctl_shfl") == 0 || strcmp(name, "ctl_shfl_exited") == 0) {
        args[0] = m.x, args[1] = m.y;
        grid[0] = 1, block[0] = 32;
        float a = 0.0f;
        for (int l = 0; l < 32; l++) a += m.x[l];
        for (int l = 0; l < 32; l++) want.y[l] = a;
    } else if (strcmp(name, "ctl_warp") == 0 || strcmp(name, "ctl_warp_nosync") == 0) {
        args[0] = m.x, args[1] = m.y;
        grid[0] = 1, block[0] = 32;
        for (int l = 0; l < 32; l++) want.y[l] = m.x[(l + 1) % 32];
    } else {
        args[0] = m.x, args[1] = m.out;
        grid[0] = 1;
        float a = 0.0f;
        for (int j = 0; j < 256; j++) a += m.x[j];
        want.out[0] = a;
    }

    size_t at, ndiff = emu_launch_orders(f->fn, grid, block, args, (unsigned char *)&m, sizeof m, &at);
    if (ndiff) {
        printf("%s: FAIL: (grid %u, block %u): " EMU_ORDERS_DIFFER ": %zu bytes differ, the first at offset %zu\n", name, grid[0], block[0],
               ndiff, at);
        return 1;
    }
    const float *got = (const float *)&m, *exp = (const float *)&want;
    for (size_t i = 0; i < sizeof m / sizeof(float); i++)
        if (memcmp(&got[i], &exp[i], sizeof(float)) != 0) {
            printf("%s: FAIL: float %zu of the memory is %g, not %g\n", name, i, (double)got[i], (double)exp[i]);
            return 1;
        }
    printf("%s: ok\n", name);
    return 0;
}
