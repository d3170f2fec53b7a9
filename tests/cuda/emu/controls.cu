/* tests/cuda/emu/controls.cu — kernels written with one race each, beside
 * their correct forms, in the generated kernels' style (dispatch.awk reads
 * them the same way): the positive controls of the emulation's checks
 * (tests/cuda/emu/controls.sh).  Each bug is one the emulation hid before
 * the check that finds it existed, and each but the misaligned access
 * passes with that check off.  A launch is 4 blocks of 256 threads over
 * CTL_N elements. */
#define CTL_N 1024

#include "trainc_cuda.cuh" /* trn_ld4, trn_st4 */

/* in place, each thread its own element: no race */
extern "C" __global__ void __launch_bounds__(256) ctl_scale(float *x)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    x[i] = 2.0f * x[i];
}

/* in place, reading the element one block further on: whether that block
 * has written it yet is up to the GPU (a race between blocks).  Block
 * order 0, 1, 2, 3 reads it before (the intended result); the reverse
 * order after.  The two orders report it. */
extern "C" __global__ void __launch_bounds__(256) ctl_next_block(float *x)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    x[i] = x[i] + (i + 256 < CTL_N ? x[i + 256] : 0.0f);
}

/* a table in shared memory, loaded by every block (ALL) or, the bug,
 * by block 0 only: the other blocks then read shared memory they never
 * wrote, which on a GPU holds whatever was there.  With shared memory
 * kept between blocks they read the table block 0 left (the intended
 * result), in either order once block 0 has run; filled with 0xFF before
 * each block, NaN.  The fill reports it. */
template <bool ALL> static __device__ void ctl_table_(const float *tab, const float *x, float *y)
{
    __shared__ float t[256];
    if (ALL || blockIdx.x == 0) t[threadIdx.x] = tab[threadIdx.x];
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = x[i] * t[threadIdx.x];
}
extern "C" __global__ void __launch_bounds__(256) ctl_table(const float *tab, const float *x, float *y)
{ ctl_table_<true>(tab, x, y); }
extern "C" __global__ void __launch_bounds__(256) ctl_table_once(const float *tab, const float *x, float *y)
{ ctl_table_<false>(tab, x, y); }

/* a block's sum by its last thread, after a barrier (SYNC) or, the bug,
 * with the barrier left out.  The last thread runs last in order 0, so
 * the values come out right; ThreadSanitizer reports its reads against
 * the other threads' writes (with the fill, so do the two orders). */
template <bool SYNC> static __device__ void ctl_sum_(const float *x, float *out)
{
    __shared__ float s[256];
    s[threadIdx.x] = x[threadIdx.x];
    if (SYNC) __syncthreads();
    if (threadIdx.x == blockDim.x - 1) {
        float a = 0.0f;
        for (unsigned j = 0; j < blockDim.x; j++) a += s[j];
        out[0] = a;
    }
}
extern "C" __global__ void __launch_bounds__(256) ctl_sum(const float *x, float *out)
{ ctl_sum_<true>(x, out); }
extern "C" __global__ void __launch_bounds__(256) ctl_sum_nobarrier(const float *x, float *out)
{ ctl_sum_<false>(x, out); }

/* a warp's lanes exchanging through shared memory, after __syncwarp
 * (SYNC) or, the bug, without: a warp's lanes are not in step (since
 * Volta), so a lane may read its neighbour's element before it is
 * written.  ThreadSanitizer reports it; so do the fill and the two orders
 * (lane 0 runs to its end first). */
template <bool SYNC> static __device__ void ctl_warp_(const float *x, float *y)
{
    __shared__ float s[32];
    s[threadIdx.x] = x[threadIdx.x];
    if (SYNC) __syncwarp();
    y[threadIdx.x] = s[(threadIdx.x + 1) % 32];
}
extern "C" __global__ void __launch_bounds__(32) ctl_warp(const float *x, float *y)
{ ctl_warp_<true>(x, y); }
extern "C" __global__ void __launch_bounds__(32) ctl_warp_nosync(const float *x, float *y)
{ ctl_warp_<false>(x, y); }

/* 16-byte vector loads and stores (trainc_cuda.cuh's trn_ld4, trn_st4),
 * 4 floats a thread in place, at x (aligned) or, the bug, at x + 1: a GPU
 * faults on the misaligned access, while the emulation's vector types are
 * plain structs that would let it pass: TRN_ALIGNED (emu_aligned) reports
 * it. */
template <int OFF> static __device__ void ctl_vec_(float *x)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (4 * i + OFF + 4 <= CTL_N) {
        float4 v = trn_ld4(x + 4 * i + OFF);
        trn_st4(x + 4 * i + OFF, make_float4(2.0f * v.x, 2.0f * v.y, 2.0f * v.z, 2.0f * v.w));
    }
}
extern "C" __global__ void __launch_bounds__(256) ctl_vec(float *x)
{ ctl_vec_<0>(x); }
extern "C" __global__ void __launch_bounds__(256) ctl_vec_misaligned(float *x)
{ ctl_vec_<1>(x); }

/* a warp's sum by shuffles (trainc_cuda.cuh's trn_warp_sum form), every
 * lane taking part or, the bug, lanes 16-31 returning first: a full-mask
 * shuffle without them is undefined on a GPU; the emulation lets the
 * lanes that remain exchange, so it checks for this itself. */
template <bool ALL> static __device__ void ctl_shfl_(const float *x, float *y)
{
    if (!ALL && threadIdx.x >= 16) return;
    float v = x[threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    y[threadIdx.x] = v;
}
extern "C" __global__ void __launch_bounds__(32) ctl_shfl(const float *x, float *y)
{ ctl_shfl_<true>(x, y); }
extern "C" __global__ void __launch_bounds__(32) ctl_shfl_exited(const float *x, float *y)
{ ctl_shfl_<false>(x, y); }
