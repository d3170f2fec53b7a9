# End-to-end tests: training with the interpreter and with compiled code,
# resume, checkpoints, the embedding example.
set(SHAKESPEARE ${CMAKE_SOURCE_DIR}/../shared/data/tinyshakespeare.txt)

add_executable(e2e_mlp_interp ${CMAKE_SOURCE_DIR}/tests/e2e/mlp_interp.c ${CMAKE_SOURCE_DIR}/tools/interp_backend.c)
target_include_directories(e2e_mlp_interp PRIVATE ${CMAKE_SOURCE_DIR}/tools)
target_link_libraries(e2e_mlp_interp PRIVATE trainc_core trainc_frontend trainc_rt)
add_test(NAME e2e_mlp_interp COMMAND e2e_mlp_interp WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(e2e_mlp_interp PROPERTIES LABELS "e2e")

add_test(NAME e2e_interp_gpt2
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/e2e/interp_gpt2.sh $<TARGET_FILE:trainc> $<TARGET_FILE:trainc-tokenize>
                 ${CMAKE_CURRENT_BINARY_DIR}/e2e_interp_gpt2 ${SHAKESPEARE})
add_test(NAME e2e_compiled_gpt2
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/e2e/compiled_gpt2.sh $<TARGET_FILE:trainc> $<TARGET_FILE:trainc-tokenize>
                 ${CMAKE_CURRENT_BINARY_DIR}/e2e_compiled_gpt2 ${SHAKESPEARE})
# tests/e2e/NAME.sh TRAINC TOKENIZE SCRATCH as the test e2e_NAME, with a time limit
function(trainc_e2e_script name timeout)
  add_test(NAME e2e_${name}
           COMMAND bash ${CMAKE_SOURCE_DIR}/tests/e2e/${name}.sh $<TARGET_FILE:trainc> $<TARGET_FILE:trainc-tokenize>
                   ${CMAKE_CURRENT_BINARY_DIR}/e2e_${name})
  set_tests_properties(e2e_${name} PROPERTIES LABELS "e2e" TIMEOUT ${timeout})
endfunction()
trainc_e2e_script(pad_sample 300)
# Models differential fuzzing found bugs with (tests/fuzz/models.py): each
# compiles for both targets and trains to the interpreter's losses.
add_test(NAME e2e_fuzz_models
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/e2e/fuzz.sh $<TARGET_FILE:trainc> $<TARGET_FILE:trainc-tokenize>
                 ${CMAKE_CURRENT_BINARY_DIR}/e2e_fuzz_models)
set_tests_properties(e2e_fuzz_models PROPERTIES LABELS "e2e" TIMEOUT 300)
# Targets a graph computes outside the vocabulary: the interpreter stops,
# and the compiled fused and unfused steps agree.
trainc_e2e_script(computed_index 300)
# A NaN gradient norm under clipping: every parameter NaN after the step.
trainc_e2e_script(nan_clip 300)
# A signal that ends trainc compile or trainc-tokenize leaves no half-written file.
trainc_e2e_script(interrupt 120)
# cmake --install: the installed programs, moved, build with their own runtime.
add_test(NAME e2e_install
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/e2e/install.sh ${CMAKE_COMMAND} ${CMAKE_BINARY_DIR} ${CMAKE_CURRENT_BINARY_DIR}/e2e_install)
set_tests_properties(e2e_install PROPERTIES LABELS "e2e" TIMEOUT 300)
# The embedding example: its own CMake build against `trainc compile --emit=lib`.
add_test(NAME e2e_embed
         COMMAND bash -c "rm -rf embed && ${CMAKE_COMMAND} -S ${CMAKE_SOURCE_DIR}/examples/embed -B embed -DTRAINC=$<TARGET_FILE:trainc> >/dev/null && ${CMAKE_COMMAND} --build embed >/dev/null && ./embed/embed embed/mlp.safetensors"
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(e2e_interp_gpt2 e2e_compiled_gpt2 e2e_embed PROPERTIES LABELS "e2e;slow" SKIP_RETURN_CODE 77 TIMEOUT 900)
