# Front-end tests (frontend/, examples/, docs/language.md).
#   test_fe_examples   the examples elaborate at full and tiny size; parameter counts, names, tying, -D
#   test_fe_errors     golden error messages of tests/frontend/errors/*.model
#   test_fe_corpus     the fuzz target's entry point over the seed corpus (any compiler)
#   fuzz_model         libFuzzer target (clang only; see docs/language.md)
#   test_compile_corpus the whole-compiler fuzz target's entry point (tests/fuzz/fuzz_compile.c:
#                      passes, lowering and memory plan, cpu and cuda) over the seed corpus
#   fuzz_compile       its libFuzzer target (clang only)
trainc_unit_test(test_fe_examples ${CMAKE_CURRENT_SOURCE_DIR}/frontend/test_examples.c)
trainc_unit_test(test_fe_errors ${CMAKE_CURRENT_SOURCE_DIR}/frontend/test_errors.c)

add_executable(test_fe_corpus ${CMAKE_CURRENT_SOURCE_DIR}/frontend/run_corpus.c ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_model.c)
target_link_libraries(test_fe_corpus PRIVATE trainc_core trainc_frontend)
add_test(NAME test_fe_corpus
         COMMAND test_fe_corpus tests/fuzz/corpus_model examples tests/frontend/errors
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
add_executable(test_compile_corpus ${CMAKE_CURRENT_SOURCE_DIR}/frontend/run_corpus.c ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_compile.c)
target_link_libraries(test_compile_corpus PRIVATE trainc_core trainc_frontend m)
add_test(NAME test_compile_corpus
         COMMAND test_compile_corpus tests/fuzz/corpus_model examples tests/e2e/fuzz tests/passes tests/cuda/fake tests/frontend/filecheck
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})

if(CMAKE_C_COMPILER_ID STREQUAL "Clang")
  add_executable(fuzz_model ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_model.c)
  target_compile_options(fuzz_model PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_model PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_model PRIVATE trainc_core trainc_frontend)
  add_executable(fuzz_compile ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_compile.c)
  target_compile_options(fuzz_compile PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_compile PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_compile PRIVATE trainc_core trainc_frontend m)
endif()

# FileCheck tests through the driver (tools/trainc.c), when it is built.
if(TARGET trainc)
  file(GLOB FE_FILECHECK CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/frontend/filecheck/*.model)
  foreach(f ${FE_FILECHECK})
    trainc_filecheck_test(${f})
  endforeach()
endif()
