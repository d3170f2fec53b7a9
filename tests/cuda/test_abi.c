/* tests/cuda/test_abi.c — runtime/cuda.c declares the few CUDA driver and
 * cuBLASLt types and numbers it uses itself (so that it builds without the
 * toolkit); this checks them against the toolkit's own headers. */
#include <cublasLt.h>
#include <cuda.h>
#include <stdio.h>

#define CHECK(a, b)                                                                            \
    do {                                                                                       \
        if ((long long)(a) != (long long)(b)) {                                                \
            fprintf(stderr, "FAIL: %s = %lld, runtime/cuda.c uses %lld\n", #a, (long long)(a), (long long)(b)); \
            fails++;                                                                           \
        }                                                                                      \
    } while (0)

int main(void) {
    int fails = 0;
    CHECK(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 75);
    CHECK(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 76);
    CHECK(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 16);
    CHECK(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 8);
    CHECK(CU_STREAM_NON_BLOCKING, 1);
    CHECK(CU_EVENT_DISABLE_TIMING, 2);
    CHECK(CU_STREAM_CAPTURE_MODE_RELAXED, 2);
    CHECK(CUDA_ERROR_OUT_OF_MEMORY, 2);
    CHECK(CUDA_ERROR_NO_DEVICE, 100);
    CHECK(CUDA_ERROR_STUB_LIBRARY, 34);
    CHECK(CU_JIT_INFO_LOG_BUFFER, 3);
    CHECK(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, 4);
    CHECK(CU_JIT_ERROR_LOG_BUFFER, 5);
    CHECK(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, 6);
    /* the kernel faults device_fault names */
    CHECK(CUDA_ERROR_ILLEGAL_ADDRESS, 700);
    CHECK(CUDA_ERROR_LAUNCH_TIMEOUT, 702);
    CHECK(CUDA_ERROR_ASSERT, 710);
    CHECK(CUDA_ERROR_HARDWARE_STACK_ERROR, 714);
    CHECK(CUDA_ERROR_ILLEGAL_INSTRUCTION, 715);
    CHECK(CUDA_ERROR_MISALIGNED_ADDRESS, 716);
    CHECK(CUDA_ERROR_INVALID_ADDRESS_SPACE, 717);
    CHECK(CUDA_ERROR_INVALID_PC, 718);
    CHECK(CUDA_ERROR_LAUNCH_FAILED, 719);
    CHECK(CUDA_ERROR_TENSOR_MEMORY_LEAK, 721);
    CHECK(sizeof(CUdeviceptr), 8);
    CHECK(CUBLAS_OP_N, 0);
    CHECK(CUBLAS_OP_T, 1);
    CHECK(CUBLAS_COMPUTE_32F, 68);
    CHECK(CUBLAS_COMPUTE_32F_FAST_TF32, 77);
    CHECK(CUBLAS_COMPUTE_64F, 70);
    CHECK(CUDA_R_32F, 0);
    CHECK(CUDA_R_64F, 1);
    CHECK(CUDA_R_16F, 2);
    CHECK(CUDA_R_16BF, 14);
    CHECK(CUBLASLT_MATMUL_DESC_POINTER_MODE, 2);
    CHECK(CUBLASLT_POINTER_MODE_DEVICE, 1);
    CHECK(CUBLASLT_MATMUL_DESC_TRANSA, 3);
    CHECK(CUBLASLT_MATMUL_DESC_TRANSB, 4);
    CHECK(CUBLASLT_MATMUL_DESC_EPILOGUE, 7);
    CHECK(CUBLASLT_MATMUL_DESC_BIAS_POINTER, 8);
    CHECK(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, 26);
    CHECK(CUBLASLT_EPILOGUE_DEFAULT, 1);
    CHECK(CUBLASLT_EPILOGUE_BIAS, 4);
    CHECK(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, 11);
    CHECK(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, 12);
    CHECK(CUBLASLT_EPILOGUE_GELU, 32);
    CHECK(CUBLASLT_EPILOGUE_GELU_BIAS, 36);
    CHECK(CUBLASLT_EPILOGUE_GELU_AUX, 32 | 128);
    CHECK(CUBLASLT_EPILOGUE_GELU_AUX_BIAS, 36 | 128);
    CHECK(CUBLASLT_EPILOGUE_DGELU, 192);
    CHECK(CUBLASLT_EPILOGUE_BGRADA, 256);
    CHECK(CUBLASLT_EPILOGUE_BGRADB, 512);
    CHECK(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 5);
    CHECK(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 6);
    CHECK(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, 1);
    CHECK(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, 5);
    CHECK(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, 6);
    CHECK(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, 7);
    CHECK(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, 8);
    CHECK(CUBLAS_STATUS_EXECUTION_FAILED, 13);
    CHECK(sizeof(cublasLtMatmulAlgo_t), 64);
    CHECK(sizeof(cublasLtMatmulHeuristicResult_t), 64 + 8 + 4 + 4 + 16);
    if (fails) return 1;
    printf("cuda abi: 45 constants match the toolkit's headers\n");
    return 0;
}
