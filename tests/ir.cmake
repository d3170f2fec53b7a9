# tests/ir.cmake — the graph IR: text format (print/parse), verifier,
# statistics, cleanup passes (dce, cse, fold), pass manager and the driver.
#   test_ir                      unit tests on graphs built with the builder
#   test_ir_roundtrip_files      print(parse(print(g))) == print(g) for every tests/ir/**/*.ir
#   test_ir_roundtrip_examples   the same for examples/*.model (tiny and full size), also after
#                                the cleanup passes and the training pipeline (77 = skipped
#                                while the front end is missing)
#   test_ir_corpus               the IR fuzz target over tests/fuzz/corpus_ir and tests/ir
#   tests_ir_*_ir                FileCheck tests: every tests/ir/**/*.ir (RUN: lines)
#   fuzz_ir                      libFuzzer target (clang only; not a test)
trainc_unit_test(test_ir ${CMAKE_CURRENT_SOURCE_DIR}/ir/test_ir.c)

add_executable(test_ir_roundtrip ${CMAKE_CURRENT_SOURCE_DIR}/ir/test_roundtrip.c)
target_link_libraries(test_ir_roundtrip PRIVATE trainc_core trainc_frontend)
add_test(NAME test_ir_roundtrip_files COMMAND test_ir_roundtrip files tests/ir WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
add_test(NAME test_ir_roundtrip_examples COMMAND test_ir_roundtrip examples WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_ir_roundtrip_examples PROPERTIES SKIP_RETURN_CODE 77)

add_executable(test_ir_corpus ${CMAKE_CURRENT_SOURCE_DIR}/ir/run_corpus_ir.c ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_ir.c)
target_link_libraries(test_ir_corpus PRIVATE trainc_core)
add_test(NAME test_ir_corpus COMMAND test_ir_corpus tests/fuzz/corpus_ir tests/ir WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})

file(GLOB_RECURSE IR_FILECHECK_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/ir/*.ir)
foreach(f ${IR_FILECHECK_TESTS})
  trainc_filecheck_test(${f})
endforeach()

# The fuzzer instruments the IR and pass sources itself, so trainc_core is
# left as configured.  Run it as docs/ir.md ("Fuzzing") says.
if(CMAKE_C_COMPILER_ID MATCHES "Clang")
  include(CheckCSourceCompiles)
  set(CMAKE_REQUIRED_FLAGS -fsanitize=fuzzer)
  check_c_source_compiles("#include <stdint.h>
#include <stddef.h>
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }" TRAINC_HAVE_LIBFUZZER)
  unset(CMAKE_REQUIRED_FLAGS)
  if(TRAINC_HAVE_LIBFUZZER)
    add_executable(fuzz_ir ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_ir.c ${IR_SRC} ${PASS_SRC})
    target_include_directories(fuzz_ir PRIVATE ${CMAKE_SOURCE_DIR}/ir ${CMAKE_SOURCE_DIR}/runtime)
    target_compile_options(fuzz_ir PRIVATE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
    target_link_options(fuzz_ir PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(fuzz_ir PRIVATE m)
  endif()
endif()
