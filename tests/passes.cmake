# tests/passes.cmake — liger-fusion, mixed-precision, pad-tiles (docs/passes.md).
#   tests/passes/*.ir      FileCheck: where each pass rewrites what
#   passes_interp          through the interpreter: fusion on/off, bf16/fp16
#                          vs fp32, fp16 overflow, padding bit-identical,
#                          --report's activation bytes
#   passes_compiled        the compiled CPU code of the new ops against the
#                          interpreter (fp32, bf16, fp16, padded, fused),
#                          sampling logits, the half-precision copies' refresh
set(PASSES_DIR ${CMAKE_CURRENT_SOURCE_DIR}/passes)
foreach(t interp compiled)
  if(t STREQUAL "interp")
    set(src ${PASSES_DIR}/test_passes.c)
  else()
    set(src ${PASSES_DIR}/test_passes_cg.c)
  endif()
  add_executable(passes_${t} ${src} ${CMAKE_SOURCE_DIR}/tests/codegen/cg_harness.c ${CMAKE_SOURCE_DIR}/tools/interp_backend.c)
  target_include_directories(passes_${t} PRIVATE ${CMAKE_SOURCE_DIR}/tests/codegen ${CMAKE_SOURCE_DIR}/tools)
  target_link_libraries(passes_${t} PRIVATE trainc_core trainc_frontend trainc_rt dl)
  add_test(NAME passes_${t} COMMAND passes_${t} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # (sanitizer builds) tests/codegen/cg_harness.c's h_build keeps its Diag's
  # registered sources: LeakSanitizer reports them at exit
  set_tests_properties(passes_${t} PROPERTIES LABELS passes TIMEOUT 600 ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
endforeach()

if(TARGET trainc)
  file(GLOB PASSES_IR_TESTS CONFIGURE_DEPENDS ${PASSES_DIR}/*.ir)
  foreach(f ${PASSES_IR_TESTS})
    # one that compiles CUDA code (--emit=cuda needs NVRTC) only with the toolkit
    file(STRINGS ${f} needs_cuda REGEX "--emit=cuda")
    if(needs_cuda AND NOT CUDAToolkit_FOUND)
      get_filename_component(n ${f} NAME)
      message(STATUS "trainc: no CUDA toolkit; tests/passes/${n} is not run (it compiles CUDA code)")
      continue()
    endif()
    trainc_filecheck_test(${f})
  endforeach()
endif()
