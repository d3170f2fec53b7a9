# Code generation: the compiled CPU code against the reference interpreter.
add_executable(cg_vs_interp
  ${CMAKE_SOURCE_DIR}/tests/codegen/cg_vs_interp.c
  ${CMAKE_SOURCE_DIR}/tests/codegen/cg_harness.c
  ${CMAKE_SOURCE_DIR}/tools/interp_backend.c)
target_include_directories(cg_vs_interp PRIVATE ${CMAKE_SOURCE_DIR}/tests/codegen ${CMAKE_SOURCE_DIR}/tools)
target_link_libraries(cg_vs_interp PRIVATE trainc_core trainc_frontend trainc_rt dl)
add_test(NAME cg_vs_interp COMMAND cg_vs_interp WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(cg_vs_interp PROPERTIES LABELS "codegen;slow" TIMEOUT 900)
