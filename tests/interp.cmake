# tests/interp.cmake — the reference interpreter (ir/interp.c) and the token
# files (runtime/tokens.c, tools/tokenize.c).

trainc_unit_test(interp_ops   ${CMAKE_CURRENT_SOURCE_DIR}/interp/test_ops.c)
trainc_unit_test(interp_round ${CMAKE_CURRENT_SOURCE_DIR}/interp/test_round.c)
trainc_unit_test(interp_run   ${CMAKE_CURRENT_SOURCE_DIR}/interp/test_run.c)
trainc_unit_test(interp_grad  ${CMAKE_CURRENT_SOURCE_DIR}/interp/test_grad.c)

set(INTERP_TOK_SCRATCH ${CMAKE_CURRENT_BINARY_DIR}/scratch-tokens)
file(MAKE_DIRECTORY ${INTERP_TOK_SCRATCH})
add_executable(interp_tokens ${CMAKE_CURRENT_SOURCE_DIR}/interp/test_tokens.c ${CMAKE_SOURCE_DIR}/runtime/tokens.c ${CMAKE_SOURCE_DIR}/runtime/util.c)
target_include_directories(interp_tokens PRIVATE ${CMAKE_SOURCE_DIR}/runtime)
target_link_libraries(interp_tokens PRIVATE m Threads::Threads)
add_test(NAME interp_tokens COMMAND interp_tokens ${INTERP_TOK_SCRATCH})
add_test(NAME interp_tokenize_shakespeare
         COMMAND interp_tokens ${INTERP_TOK_SCRATCH} --tool $<TARGET_FILE:trainc-tokenize>
                 --data ${CMAKE_SOURCE_DIR}/../shared/data/tinyshakespeare.txt)
set_tests_properties(interp_tokenize_shakespeare PROPERTIES SKIP_RETURN_CODE 77)

# trainc run's errors: an input it does not set, a model too large for memory
trainc_filecheck_test(${CMAKE_CURRENT_SOURCE_DIR}/interp/run-errors.model)
# the tokens of a data file against the model's index inputs
trainc_filecheck_test(${CMAKE_CURRENT_SOURCE_DIR}/interp/token-range.model)
trainc_filecheck_test(${CMAKE_CURRENT_SOURCE_DIR}/interp/sample-range.model)
# what the end of a run needs, checked before its first step (--sample, save_every)
trainc_filecheck_test(${CMAKE_CURRENT_SOURCE_DIR}/interp/run-checks.model)
