# tests/runtime.cmake — the runtime's tests (tests/runtime/): a hand-written
# bigram language model driven through the embedding API and the command
# line.  Sanitizer runs: docs/runtime.md, "Testing".
set(RT_TESTS ${CMAKE_SOURCE_DIR}/tests/runtime)

add_library(rt_test_models STATIC ${RT_TESTS}/bigram.c)
target_link_libraries(rt_test_models PUBLIC trainc_rt)

# training executables made by hand, as generated code would be
add_executable(rt_bigram ${RT_TESTS}/bigram_main.c)
target_link_libraries(rt_bigram PRIVATE rt_test_models)

add_executable(test_runtime ${RT_TESTS}/test_runtime.c)
target_link_libraries(test_runtime PRIVATE rt_test_models)
add_test(NAME runtime_unit COMMAND test_runtime ${CMAKE_CURRENT_BINARY_DIR}/runtime-scratch/unit)

# the embedding API against a caller's mistakes
add_executable(test_api ${RT_TESTS}/test_api.c)
target_link_libraries(test_api PRIVATE rt_test_models)
add_test(NAME runtime_api COMMAND test_api)

add_test(NAME runtime_cli COMMAND bash ${RT_TESTS}/cli.sh $<TARGET_FILE:rt_bigram> ${CMAKE_CURRENT_BINARY_DIR}/runtime-scratch/cli)
# the program's files when writing them fails (full disks, file-size limits)
add_test(NAME runtime_disk COMMAND bash ${RT_TESTS}/disk.sh $<TARGET_FILE:rt_bigram> ${CMAKE_CURRENT_BINARY_DIR}/runtime-scratch/disk)

# the fuzz target's corpus, run without libFuzzer (any compiler)
add_executable(rt_fuzz_corpus ${RT_TESTS}/fuzz_safetensors.c ${RT_TESTS}/fuzz_main.c)
target_link_libraries(rt_fuzz_corpus PRIVATE rt_test_models)
add_test(NAME runtime_fuzz_corpus COMMAND rt_fuzz_corpus ${RT_TESTS}/corpus/safetensors)

# the float functions of generated C, built with the flags trainc compiles
# generated C with (codegen/compile.c)
add_executable(test_mathf ${RT_TESTS}/test_mathf.c)
target_include_directories(test_mathf PRIVATE ${CMAKE_SOURCE_DIR}/runtime)
target_compile_options(test_mathf PRIVATE -O2 -fopenmp -fno-trapping-math)
target_link_options(test_mathf PRIVATE -fopenmp)
target_link_libraries(test_mathf PRIVATE m)
add_test(NAME runtime_mathf COMMAND test_mathf)

# the half-precision GEMM of generated C, with OpenBLAS (as trainc links
# generated code: the OpenMP build where installed) and with the plain loops
foreach(blas IN ITEMS 1 0)
  if(blas)
    set(t test_gemm_dt)
  else()
    set(t test_gemm_dt_noblas)
  endif()
  add_executable(${t} ${RT_TESTS}/test_gemm_dt.c)
  target_include_directories(${t} PRIVATE ${CMAKE_SOURCE_DIR}/runtime)
  target_compile_options(${t} PRIVATE -O2 -fopenmp -fno-trapping-math)
  target_link_options(${t} PRIVATE -fopenmp)
  if(blas)
    target_compile_definitions(${t} PRIVATE TRN_HAVE_BLAS)
    target_include_directories(${t} PRIVATE /usr/include/x86_64-linux-gnu)
    if(TRAINC_OPENBLAS_DIR)
      target_link_options(${t} PRIVATE -L${TRAINC_OPENBLAS_DIR} -Wl,-rpath,${TRAINC_OPENBLAS_DIR})
    endif()
    target_link_libraries(${t} PRIVATE openblas)
  endif()
  target_link_libraries(${t} PRIVATE m)
  add_test(NAME runtime_${t} COMMAND ${t})
  set_tests_properties(runtime_${t} PROPERTIES LABELS runtime)
endforeach()

set_tests_properties(runtime_unit runtime_api runtime_cli runtime_disk runtime_fuzz_corpus runtime_mathf PROPERTIES LABELS runtime)

if(TRAINC_FUZZ)
  add_executable(fuzz_safetensors ${RT_TESTS}/fuzz_safetensors.c)
  target_link_libraries(fuzz_safetensors PRIVATE rt_test_models)
  target_compile_options(fuzz_safetensors PRIVATE -fsanitize=fuzzer)
  target_link_options(fuzz_safetensors PRIVATE -fsanitize=fuzzer)
  target_compile_options(rt_test_models PRIVATE -fsanitize=fuzzer-no-link)
endif()
