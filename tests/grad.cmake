# tests/grad.cmake — autodiff (passes/autodiff.c, passes/grad.c) and the
# optimizer pass (passes/optimizer.c).
#   grad_rules    the rule table against ops.h; autodiff's located errors
#   grad_ops      a finite-difference check of every OPF_DIFF op (fp64 interpreter)
#   grad_blocks   MLP, attention, transformer blocks, tied/frozen params, fan-out
#   grad_optim    accumulation identity, AdamW/SGD references, state naming
#   grad_models   examples/*.model at a tiny size: gradient check, training pipeline
#   tests/grad/*.ir  FileCheck tests of `trainc opt --passes=autodiff,optimizer`
set(GRAD_DIR ${CMAKE_CURRENT_SOURCE_DIR}/grad)
foreach(t rules ops blocks optim models)
  trainc_unit_test(grad_${t} ${GRAD_DIR}/test_${t}.c ${GRAD_DIR}/harness.c)
  target_include_directories(grad_${t} PRIVATE ${CMAKE_SOURCE_DIR}/passes ${GRAD_DIR})
  if(EXISTS ${CMAKE_SOURCE_DIR}/ir/verify.c)
    target_compile_definitions(grad_${t} PRIVATE TRAINC_HAVE_VERIFY)
  endif()
  set_tests_properties(grad_${t} PROPERTIES LABELS grad TIMEOUT 60)
endforeach()
target_compile_definitions(grad_models PRIVATE TRAINC_SOURCE_DIR="${CMAKE_SOURCE_DIR}")

if(TARGET trainc)
  file(GLOB GRAD_IR_TESTS CONFIGURE_DEPENDS ${GRAD_DIR}/*.ir)
  foreach(f ${GRAD_IR_TESTS})
    trainc_filecheck_test(${f})
  endforeach()
endif()
