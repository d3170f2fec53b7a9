/* tests/cuda/emu/emu_rename.h — included first (-include) by
 * tests/gpu/kcheck.c for the CPU emulation: its device calls go to
 * emu_device.cpp instead of runtime/cuda.c. */
#define TrnCudaDev          EmuDev
#define trn_cuda_open       emu_cuda_open
#define trn_cuda_close      emu_cuda_close
#define trn_cuda_upload     emu_cuda_upload
#define trn_cuda_download   emu_cuda_download
#define trn_cuda_fill       emu_cuda_fill
#define trn_cuda_run_kernel emu_cuda_run_kernel
#define trn_cuda_run        emu_cuda_run
#define trn_cuda_sync       emu_cuda_sync
#define trn_cuda_describe   emu_cuda_describe
