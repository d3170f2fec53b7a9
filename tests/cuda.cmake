# The CUDA backend without a GPU (docs/cuda.md): every kernel of every
# example compiles with NVRTC to sm_80 and sm_90 cubin and PTX; no template
# kernel spills registers at full GPT-2 size; a --target=cuda executable
# trains on the CPU with --device=auto and fails cleanly with --device=cuda.
# NVRTC output is cached under the build folder, so a rerun takes seconds.
# The full-size models carry the label cuda-full (about a minute cold).
if(NOT CUDAToolkit_FOUND)
  message(STATUS "trainc: no CUDA toolkit: the CUDA tests are not built")
  return()
endif()

set(TRAINC_CUDA_CACHE ${CMAKE_BINARY_DIR}/cuda-cache)

add_executable(cuda_abi ${CMAKE_SOURCE_DIR}/tests/cuda/test_abi.c)
target_include_directories(cuda_abi PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
add_test(NAME cuda_abi COMMAND cuda_abi)
set_tests_properties(cuda_abi PROPERTIES LABELS cuda)

add_executable(cuda_nvrtc ${CMAKE_SOURCE_DIR}/tests/cuda/test_nvrtc.c)
target_link_libraries(cuda_nvrtc PRIVATE trainc_core trainc_frontend)
add_executable(cuda_emit ${CMAKE_SOURCE_DIR}/tests/cuda/cuda_emit.c)
target_link_libraries(cuda_emit PRIVATE trainc_core trainc_frontend)
add_dependencies(cuda_emit trainc_rt)

set(CUDA_TINY_mlp "")
set(CUDA_TINY_gpt2 -D vocab=256 -D layers=2 -D heads=4 -D dim=64 -D seq=64 -D batch=4)
set(CUDA_TINY_llama -D vocab=256 -D layers=2 -D heads=4 -D kv_heads=2 -D dim=64 -D ffn=128 -D seq=64 -D batch=4)
# Precisions: fp32 now; add bf16 here once the mixed-precision pass exists
# (the kernels are generated from whatever dtypes the pipeline leaves).
set(TRAINC_CUDA_PRECISIONS fp32 tf32)
foreach(model mlp gpt2 llama)
  foreach(prec ${TRAINC_CUDA_PRECISIONS})
    add_test(NAME cuda_nvrtc_${model}_tiny_${prec}
             COMMAND cuda_nvrtc examples/${model}.model ${prec} --no-spills ${CUDA_TINY_${model}}
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(cuda_nvrtc_${model}_tiny_${prec} PROPERTIES LABELS cuda TIMEOUT 300
                         ENVIRONMENT "TRAINC_CACHE_DIR=${TRAINC_CUDA_CACHE}")
  endforeach()
endforeach()
# Full size: GPT-2 small (124M) and TinyLlama (1.1B).
foreach(model gpt2 llama)
  add_test(NAME cuda_nvrtc_${model}_full_fp32 COMMAND cuda_nvrtc examples/${model}.model fp32 --no-spills
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(cuda_nvrtc_${model}_full_fp32 PROPERTIES LABELS "cuda;cuda-full" TIMEOUT 600
                       ENVIRONMENT "TRAINC_CACHE_DIR=${TRAINC_CUDA_CACHE}")
endforeach()

add_test(NAME cuda_fallback
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cuda/fallback.sh $<TARGET_FILE:cuda_emit> $<TARGET_FILE:trainc-tokenize>
                 ${CMAKE_CURRENT_BINARY_DIR}/cuda-fallback)
set_tests_properties(cuda_fallback PROPERTIES LABELS cuda TIMEOUT 300
                     ENVIRONMENT "TRAINC_CACHE_DIR=${TRAINC_CUDA_CACHE};TRAINC_RUNTIME_DIR=${CMAKE_SOURCE_DIR}/runtime")
