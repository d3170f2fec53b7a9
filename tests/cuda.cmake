# The CUDA backend without a GPU (docs/cuda.md): every kernel of every
# example compiles with NVRTC to sm_80 and sm_90 cubin and PTX, with the
# passes at their cuda-target defaults (liger fusions on, the vocabulary
# padded to a multiple of 64) in fp32, tf32, bf16 (and fp16 for the tiny
# GPT-2); no template kernel spills registers; a --target=cuda executable
# trains on the CPU with --device=auto and fails cleanly with --device=cuda.
# NVRTC output is cached under the build folder, so a rerun takes seconds.
# The full-size models carry the label cuda-full (docs/cuda.md has the
# times, cold and cached).
# (without the toolkit too: the cuda target's lowering) an f64 product's
# bias stays a loop kernel on the cuda target, absorbed on the C target
if(TARGET trainc)
  trainc_filecheck_test(${CMAKE_SOURCE_DIR}/tests/cuda/f64_bias.model)
  set_property(TEST tests_cuda_f64_bias_model APPEND PROPERTY LABELS cuda)
endif()
# (these two need no toolkit: they run without one too)
# tests/gpu/run.sh itself (the one GPU call): its parsing, table, Goal line
# and time budget, with stand-ins for the GPU's programs
add_test(NAME gpu_script
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/gpu/selftest.sh ${CMAKE_CURRENT_BINARY_DIR}/gpu-script)
set_tests_properties(gpu_script PROPERTIES LABELS cuda TIMEOUT 240)
# the benchmark's PyTorch reference (bench/gpt2_torch.py) and the ceilings'
# measurement (tests/gpu/ceilings.py) on the CPU at a
# tiny size: it runs, prints what run.sh parses, and builds trainc's GPT-2
# (skips where no python3 imports torch)
if(TARGET trainc)
  add_test(NAME gpu_torch_smoke COMMAND bash ${CMAKE_SOURCE_DIR}/tests/gpu/torch_smoke.sh $<TARGET_FILE:trainc>)
  set_tests_properties(gpu_torch_smoke PROPERTIES LABELS cuda TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()

if(NOT CUDAToolkit_FOUND)
  message(STATUS "trainc: no CUDA toolkit: the CUDA tests are not built")
  return()
endif()

set(TRAINC_CUDA_CACHE ${CMAKE_BINARY_DIR}/cuda-cache)

# a sum of integers wraps in the CUDA C as in the C (--emit=cuda: NVRTC)
if(TARGET trainc)
  trainc_filecheck_test(${CMAKE_SOURCE_DIR}/tests/cuda/int_sum_wrap.model)
  set_property(TEST tests_cuda_int_sum_wrap_model APPEND PROPERTY LABELS cuda)
  set_property(TEST tests_cuda_int_sum_wrap_model APPEND PROPERTY ENVIRONMENT "TRAINC_CACHE_DIR=${TRAINC_CUDA_CACHE}")
endif()

add_executable(cuda_abi ${CMAKE_SOURCE_DIR}/tests/cuda/test_abi.c)
target_include_directories(cuda_abi PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
add_test(NAME cuda_abi COMMAND cuda_abi)
set_tests_properties(cuda_abi PROPERTIES LABELS cuda)

add_executable(cuda_nvrtc ${CMAKE_SOURCE_DIR}/tests/cuda/test_nvrtc.c)
target_link_libraries(cuda_nvrtc PRIVATE trainc_core trainc_frontend)
add_executable(cuda_emit ${CMAKE_SOURCE_DIR}/tests/cuda/cuda_emit.c)
target_link_libraries(cuda_emit PRIVATE trainc_core trainc_frontend)
add_dependencies(cuda_emit trainc_rt)

# NAME LABELS TIMEOUT MODEL PRECISION ARGS...: one NVRTC compile test
function(trainc_nvrtc_test name labels timeout model prec)
  add_test(NAME cuda_nvrtc_${name} COMMAND cuda_nvrtc examples/${model}.model ${prec} --no-spills ${ARGN}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(cuda_nvrtc_${name} PROPERTIES LABELS "${labels}" TIMEOUT ${timeout}
                       ENVIRONMENT "TRAINC_CACHE_DIR=${TRAINC_CUDA_CACHE}")
endfunction()

set(CUDA_TINY_mlp "")
set(CUDA_TINY_gpt2 -D vocab=256 -D layers=2 -D heads=4 -D dim=64 -D seq=64 -D batch=4)
set(CUDA_TINY_llama -D vocab=256 -D layers=2 -D heads=4 -D kv_heads=2 -D dim=64 -D ffn=128 -D seq=64 -D batch=4)
# What each model must show with the fusions on (so that the tests cover the
# fused ops' templates), and in bf16 which ops get half operands.
set(CUDA_EXPECT_mlp "")
set(CUDA_EXPECT_gpt2 --expect add_layer_norm --expect add_layer_norm_grad --expect linear_cross_entropy)
set(CUDA_EXPECT_llama --expect add_rms_norm --expect add_rms_norm_grad --expect rope_qk --expect swiglu --expect linear_cross_entropy)
set(CUDA_HALF_mlp "")
set(CUDA_HALF_gpt2 --expect-half attention --expect-half attention_grad --expect-half linear_cross_entropy
    --expect-src "tk_attention_tc<" --expect-src "tk_attention_tc_bwd_dkv<")
set(CUDA_HALF_llama --expect-half attention --expect-half attention_grad --expect-half rope_qk --expect-half linear_cross_entropy
    --expect-src "tk_attention_tc<" --expect-src "tk_attention_tc_bwd_dkv<")
set(TRAINC_CUDA_PRECISIONS fp32 tf32 bf16)
foreach(model mlp gpt2 llama)
  set(CUDA_CHECK_${model}_fp32 ${CUDA_EXPECT_${model}})
  set(CUDA_CHECK_${model}_tf32 ${CUDA_EXPECT_${model}})
  set(CUDA_CHECK_${model}_bf16 ${CUDA_EXPECT_${model}} ${CUDA_HALF_${model}})
  foreach(prec ${TRAINC_CUDA_PRECISIONS})
    trainc_nvrtc_test(${model}_tiny_${prec} cuda 300 ${model} ${prec} ${CUDA_TINY_${model}} ${CUDA_CHECK_${model}_${prec}})
  endforeach()
endforeach()
# The cuda target's padding: a vocabulary of 250 becomes 256 rows, of which
# linear_cross_entropy counts 250 ({classes}); the fusions off (primitive
# rms_norm and rope, in bf16 the single rope in bf16, cross_entropy with
# {classes}); fp16 (dynamic loss scaling: loss_scale_update, the optimizers'
# skip operand).
set(CUDA_PAD250_gpt2 -D vocab=250 -D layers=2 -D heads=4 -D dim=64 -D seq=64 -D batch=4)
set(CUDA_PAD250_llama -D vocab=250 -D layers=2 -D heads=4 -D kv_heads=2 -D dim=64 -D ffn=128 -D seq=64 -D batch=4)
foreach(model gpt2 llama)
  trainc_nvrtc_test(${model}_tiny_pad_bf16 cuda 300 ${model} bf16 ${CUDA_PAD250_${model}} --expect linear_cross_entropy:classes)
  trainc_nvrtc_test(${model}_tiny_nofusion_bf16 cuda 300 ${model} bf16 ${CUDA_PAD250_${model}} --set fusion=0
                    --expect cross_entropy:classes --expect-half attention)
  trainc_nvrtc_test(${model}_tiny_fp16 cuda 300 ${model} fp16 ${CUDA_TINY_${model}} --expect loss_scale_update)
endforeach()
trainc_nvrtc_test(llama_tiny_nofusion_rope_bf16 cuda 300 llama bf16 ${CUDA_TINY_llama} --set fusion=0 --expect-half rope)
# SGD without momentum (fp16: with the overflow skip): no buffer operand or
# result, -1 (a null pointer) in the table of the multi-tensor update, each
# accumulator zeroed as it is read (grad_accum = 2); no single-tensor
# update left
trainc_nvrtc_test(gpt2_tiny_sgd_fp16 cuda 300 gpt2 fp16 ${CUDA_TINY_gpt2} --set optimizer=sgd --set momentum=0 --set grad_accum=2
                  --expect-src "-1, -1, -1, 1, 0.0}, /* h.0.ln_1.weight */"
                  --expect-src "tk_sgd_multi<trn_f16, 4>(p0, u3_sgd_cast_x28_seg, 28, "
                  --expect-src "!tk_sgd(")
# half attention on the CUDA cores (--no-tc-attention, or below sm_80):
# the f32-tile kernels with bf16 operands; at D = 128 both kinds
trainc_nvrtc_test(gpt2_tiny_notc_bf16 cuda 300 gpt2 bf16 ${CUDA_TINY_gpt2} --no-tc-attention --expect-src "!tk_attention_tc")
trainc_nvrtc_test(gpt2_tiny_sm75_bf16 cuda 300 gpt2 bf16 ${CUDA_TINY_gpt2} --arch sm_75 --expect-src "!tk_attention_tc")
# the tensor-core forward and dq at D = 64: two row tiles a warp by
# default, one with --tc-attention-rows 1; neither spills
trainc_nvrtc_test(gpt2_d64_bf16 cuda 300 gpt2 bf16 -D vocab=512 -D layers=1 -D heads=4 -D dim=256 -D seq=80 -D batch=2
                  --expect-src "tk_attention_tc<64, 2>(" --expect-src "tk_attention_tc_bwd_dq<64, 2>(")
trainc_nvrtc_test(gpt2_d64_rows1_bf16 cuda 300 gpt2 bf16 -D vocab=512 -D layers=1 -D heads=4 -D dim=256 -D seq=80 -D batch=2
                  --tc-attention-rows 1 --expect-src "tk_attention_tc<64, 1>(" --expect-src "tk_attention_tc_bwd_dq<64, 1>(")
trainc_nvrtc_test(llama_d128_bf16 cuda 300 llama bf16 -D vocab=256 -D layers=1 -D heads=2 -D kv_heads=1 -D dim=256 -D ffn=256 -D seq=64
                  -D batch=2 --expect-src "tk_attention_tc<128" --expect-src "tk_attention_tc_bwd_dkv<128")
trainc_nvrtc_test(llama_d128_notc_bf16 cuda 300 llama bf16 -D vocab=256 -D layers=1 -D heads=2 -D kv_heads=1 -D dim=256 -D ffn=256 -D seq=64
                  -D batch=2 --no-tc-attention --expect-src "!tk_attention_tc" --expect-src "tk_attention<128")
# what NVRTC refuses is said without ptxas -v's lines: an unknown name's
# error, a function past 48 KB of static shared memory by name
add_test(NAME cuda_nvrtc_bad_source COMMAND cuda_nvrtc --bad-source)
set_tests_properties(cuda_nvrtc_bad_source PROPERTIES LABELS cuda TIMEOUT 120)
# head dimension 768 (GPT-2 small with one head): the CUDA-core attention's
# tiles within 48 KB of static shared memory (4 key rows; the backward's 8
# query rows of 768 floats were past it), spills allowed; and a batch x
# heads past 65535 (the grid's y): 70000 pairs as 35000 x 2 on y and z
add_test(NAME cuda_nvrtc_gpt2_d768_fp32
         COMMAND cuda_nvrtc examples/gpt2.model fp32 -D vocab=64 -D layers=1 -D heads=1 -D dim=768 -D seq=1 -D batch=70000
                 --expect-src "tk_attention<768" --expect-src "grid (1,35000,2)"
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(cuda_nvrtc_gpt2_d768_fp32 PROPERTIES LABELS cuda TIMEOUT 300 ENVIRONMENT "TRAINC_CACHE_DIR=${TRAINC_CUDA_CACHE}")
# Full size: GPT-2 small (124M, vocabulary 50257 padded to 50304) and
# TinyLlama (1.1B).  tf32 compiles the fp32 source again (a cache hit).
foreach(model gpt2 llama)
  foreach(prec ${TRAINC_CUDA_PRECISIONS})
    trainc_nvrtc_test(${model}_full_${prec} "cuda;cuda-full" 900 ${model} ${prec} ${CUDA_CHECK_${model}_${prec}})
  endforeach()
endforeach()
set_tests_properties(cuda_nvrtc_gpt2_full_tf32 PROPERTIES DEPENDS cuda_nvrtc_gpt2_full_fp32)
set_tests_properties(cuda_nvrtc_llama_full_tf32 PROPERTIES DEPENDS cuda_nvrtc_llama_full_fp32)
# Dropout at GPT-2 small's width, vocabulary, sequence and batch, one layer
# (about 15 s cold): the split column sums of the dropped-out gradients
# (bias gradients: 4096 rows of 768 columns, a Philox a column) spill no
# register, generated kernels included (at 8 columns a thread they spilled
# 8 to 12 bytes: emit_cuda.c emit_loop takes 4 where a kernel draws random
# numbers); with the fusions on and off (add_cast_dropout_sum)
trainc_nvrtc_test(gpt2_l1_dropout_bf16 cuda 300 gpt2 bf16 -D layers=1 -D dropout=0.1 --no-generated-spills
                  --expect dropout --expect-src "_dropout_cast_sum_gpt2_model_L59_part(")
trainc_nvrtc_test(gpt2_l1_dropout_nofusion_bf16 cuda 300 gpt2 bf16 -D layers=1 -D dropout=0.1 --set fusion=0 --no-generated-spills
                  --expect dropout --expect-src "_add_cast_dropout_sum_gpt2_model_L70_part(")

# The generated CUDA C run on the CPU (tests/cuda/emu: g++, a block's
# threads as fibers, cuBLASLt's products as their descriptors say), every
# kernel against the C backend's by tests/gpu/kcheck.c with the GPU check's
# tolerances: what the kernels compute, without a GPU.
find_program(TRAINC_CXX NAMES g++ c++)
if(TRAINC_CXX)
  # NAME, a .model file, the model's name, cuda_emit's arguments
  function(trainc_emu_model name path model)
    add_test(NAME cuda_emu_${name}
             COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cuda/emu/run.sh $<TARGET_FILE:cuda_emit> $<TARGET_FILE:trainc_rt>
                     ${CMAKE_CURRENT_BINARY_DIR}/cuda-emu/${name} ${path} ${model} trn_model_${model} ${ARGN})
    set_tests_properties(cuda_emu_${name} PROPERTIES LABELS cuda TIMEOUT 600
                         ENVIRONMENT "TRAINC_CACHE_DIR=${TRAINC_CUDA_CACHE};CXX=${TRAINC_CXX};CC=${CMAKE_C_COMPILER}")
  endfunction()
  # an example: NAME, examples/MODEL.model, cuda_emit's arguments
  function(trainc_emu_test name model)
    trainc_emu_model(${name} ${CMAKE_SOURCE_DIR}/examples/${model}.model ${model} ${ARGN})
  endfunction()
  trainc_emu_test(mlp_fp32 mlp --set precision=fp32)
  # SGD with Nesterov momentum, 2 micro-batches: the multi-tensor SGD with
  # its buffer, each accumulator zeroed as read, tensors of 1 to 100 blocks
  trainc_emu_test(mlp_sgd_fp32 mlp -D hidden=320 --set precision=fp32 --set optimizer=sgd --set momentum=0.9 --set nesterov=1 --set grad_accum=2)
  # 4096 rows in bf16: the erf GELU's vector loop kernels, and its
  # gradient stored 8 columns at a time by the bias gradient's split column
  # sum (tests/passes/cuda-vectors.ir)
  trainc_emu_test(mlp_rows_bf16 mlp -D batch=4096 -D hidden=128 --set precision=bf16)
  # RoPE from tables (tests/passes/primitive.model: rotate-half with cos
  # and sin [T, D], fused into rope_qk) over 640 rows of q and k: two
  # blocks of rows a position, q's and k's rows in one block
  trainc_emu_model(prim_rope_rows_bf16 ${CMAKE_SOURCE_DIR}/tests/passes/primitive.model prim -D batch=80 --set precision=bf16)
  # integers past their range: wrapped, a float cast saturated (trn_iadd ...
  # trn_f2i in trainc_cuda.cuh as in trainc_kernels.h)
  trainc_emu_model(int_wrap ${CMAKE_SOURCE_DIR}/tests/codegen/int_wrap.model int_wrap)
  # casts to bf16 and f16 from i32 and f64 rounded once (trn_odd), as in C
  trainc_emu_model(half_casts ${CMAKE_SOURCE_DIR}/tests/cuda/half_casts.model half_casts)
  # targets the graph computes, some outside the vocabulary: the separate
  # cross-entropy backward gives their rows a zero gradient, as the C one
  # does (tests/e2e/computed_index.sh)
  trainc_emu_model(computed_target ${CMAKE_SOURCE_DIR}/tests/codegen/computed_target.model computed_target --no-fuse)
  # tests/codegen/edges.model: a -0.0 fill (not a memset), a -inf constant
  trainc_emu_model(edges ${CMAKE_SOURCE_DIR}/tests/codegen/edges.model edges)
  # a sum of i64 past 2^63: wrapped in the CUDA kernels as in the C ones
  # (tests/cuda/int_sum_wrap.model)
  trainc_emu_model(int_sum_wrap ${CMAKE_SOURCE_DIR}/tests/frontend/filecheck/int_sum_wrap.model int_sum_wrap)
  # an f64 product (f32 parameters cast) whose bias the cuda target leaves
  # to the loop kernel after it (tests/cuda/f64_bias.model)
  trainc_emu_model(f64_bias ${CMAKE_SOURCE_DIR}/tests/cuda/f64_bias.model f64_bias)
  # 4096 rows of GPT-2 in bf16: split column reductions (4 columns a
  # thread, as they draw dropout's mask again in their prologue; 8 without
  # random numbers: cuda_emu_mlp_rows_bf16), the embedding
  # backward over 4 chunks of indices and 2 table rows a block, attention
  # over several key tiles (about 80 s: not in the sanitizer run)
  trainc_emu_test(gpt2_rows_bf16 gpt2 -D vocab=500 -D layers=1 -D heads=2 -D dim=32 -D seq=128 -D batch=32 -D dropout=0.1 --set precision=bf16)
  set_tests_properties(cuda_emu_gpt2_rows_bf16 PROPERTIES LABELS "cuda;slow")
  # the embedding backward's rows of many tokens (4096 indices into the 64
  # rows of a vocabulary of 16 padded: about 64 a row, loaded 64 ahead),
  # bit-identical to the C backend's
  trainc_emu_test(gpt2_v16_fp32 gpt2 -D vocab=16 -D layers=1 -D heads=2 -D dim=32 -D seq=32 -D batch=128 --set precision=fp32)
  set_property(TEST cuda_emu_gpt2_v16_fp32 APPEND PROPERTY ENVIRONMENT "EMU_EXACT=embedding_grad")
  trainc_emu_test(gpt2_tiny_fp32 gpt2 ${CUDA_TINY_gpt2} --set precision=fp32)
  # GPT-2's vocabulary (50257, padded to 50304) over a narrow model: the
  # rows of linear + cross-entropy held in registers in bf16 (7 vectors a
  # thread of 1024, the last ones partial, the padded columns masked) and
  # streamed in fp32 (a row too long for the registers)
  trainc_emu_test(gpt2_v50k_bf16 gpt2 -D vocab=50257 -D layers=1 -D heads=2 -D dim=64 -D seq=16 -D batch=2 --set precision=bf16)
  trainc_emu_test(gpt2_v50k_fp32 gpt2 -D vocab=50257 -D layers=1 -D heads=2 -D dim=64 -D seq=16 -D batch=2 --set precision=fp32)
  # the vocabulary 250 padded to 256 in fp32: the rows in registers, 6
  # columns of each masked, at the fp32 tolerance
  trainc_emu_test(gpt2_pad_fp32 gpt2 ${CUDA_PAD250_gpt2} --set precision=fp32 --set pad_multiple=8)
  # the norms' row kernels at widths whose chunks are 4 columns (132), 1
  # column (30) and over 1024 columns (1056: no register copy of the row)
  trainc_emu_test(gpt2_c132_bf16 gpt2 -D vocab=256 -D layers=1 -D heads=2 -D dim=132 -D seq=32 -D batch=2 --set precision=bf16)
  trainc_emu_test(gpt2_c30_fp32 gpt2 -D vocab=256 -D layers=1 -D heads=2 -D dim=30 -D seq=32 -D batch=2 --set precision=fp32)
  # layer norms over rows past 1024 (the forward read again for each pass,
  # plain and with the residual; llama_c1056 has rms_norm's)
  trainc_emu_test(gpt2_c1088_bf16 gpt2 -D vocab=64 -D layers=1 -D heads=17 -D dim=1088 -D seq=8 -D batch=1 --set precision=bf16)
  # head dimension 768: 4-row key tiles (cuda_nvrtc_gpt2_d768_fp32)
  trainc_emu_test(gpt2_d768_fp32 gpt2 -D vocab=64 -D layers=1 -D heads=1 -D dim=768 -D seq=16 -D batch=2 --set precision=fp32)
  trainc_emu_test(llama_c1056_bf16 llama -D vocab=128 -D layers=1 -D heads=11 -D kv_heads=1 -D dim=1056 -D ffn=64 -D seq=16 -D batch=1
                  --set precision=bf16)
  trainc_emu_test(gpt2_tiny_notc_bf16 gpt2 ${CUDA_TINY_gpt2} --set precision=bf16 --no-tc-attention)
  # (2 micro-batches a step: the norms' weight gradients summed into their
  # accumulators in place, Kernel.acc_grads)
  trainc_emu_test(gpt2_tiny_accum_fp16 gpt2 ${CUDA_TINY_gpt2} --set precision=fp16 --set grad_accum=2)
  trainc_emu_test(llama_tiny_pad_nofusion_bf16 llama ${CUDA_PAD250_llama} --set precision=bf16 --set fusion=0)
  # D = 64 (GPT-2 small's and TinyLlama's head size) at T = 80: the
  # tensor-core attention over two key tiles (the forward's online rescale)
  # and partial tiles; Llama's with grouped-query attention (4:2) in fp16
  trainc_emu_test(gpt2_d64_bf16 gpt2 -D vocab=512 -D layers=1 -D heads=4 -D dim=256 -D seq=80 -D batch=2 --set precision=bf16)
  # T = 160: the forward's two blocks of 128 query rows (32 a warp), the
  # second's last two warps past T, warps passing over key tiles wholly
  # above their rows
  trainc_emu_test(gpt2_d64_t160_bf16 gpt2 -D vocab=512 -D layers=1 -D heads=4 -D dim=256 -D seq=160 -D batch=1 --set precision=bf16)
  # the same with one row tile a warp (--tc-attention-rows 1: 64 rows a block)
  trainc_emu_test(gpt2_d64_t160_rows1_bf16 gpt2 -D vocab=512 -D layers=1 -D heads=4 -D dim=256 -D seq=160 -D batch=1 --set precision=bf16
                  --tc-attention-rows 1)
  trainc_emu_test(llama_d64_fp16 llama -D vocab=256 -D layers=1 -D heads=4 -D kv_heads=2 -D dim=256 -D ffn=256 -D seq=80 -D batch=2
                  --set precision=fp16)
  # D = 128 (Llama 2 7B's head size): smaller tiles, three key tiles at T = 80
  trainc_emu_test(llama_d128_bf16 llama -D vocab=256 -D layers=1 -D heads=4 -D kv_heads=2 -D dim=512 -D ffn=256 -D seq=80 -D batch=1
                  --set precision=bf16)
  set_tests_properties(cuda_emu_llama_d64_fp16 cuda_emu_llama_d128_bf16 PROPERTIES LABELS "cuda;slow")

  # ThreadSanitizer where g++ links and runs a -fsanitize=thread program
  # (not in the sanitizer build: its runtime library is built for
  # AddressSanitizer)
  set(emu_tsan 0)
  if(NOT TRAINC_SANITIZE)
    file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/tsan-probe.cpp "int main() { return 0; }\n")
    execute_process(COMMAND ${TRAINC_CXX} -fsanitize=thread ${CMAKE_CURRENT_BINARY_DIR}/tsan-probe.cpp -o ${CMAKE_CURRENT_BINARY_DIR}/tsan-probe
                    RESULT_VARIABLE tsan_rc OUTPUT_QUIET ERROR_QUIET)
    if(tsan_rc EQUAL 0)
      execute_process(COMMAND ${CMAKE_CURRENT_BINARY_DIR}/tsan-probe RESULT_VARIABLE tsan_rc OUTPUT_QUIET ERROR_QUIET)
    endif()
    if(tsan_rc EQUAL 0)
      set(emu_tsan 1)
    else()
      message(STATUS "trainc: g++ cannot link with -fsanitize=thread: no cuda_emu_tsan_* tests")
    endif()
  endif()

  # The emulation's checks themselves: kernels with one race each
  # (tests/cuda/emu/controls.cu), each reported by the two orders, the
  # shared-memory fill or ThreadSanitizer, and passing with that one off
  add_test(NAME cuda_emu_controls
           COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cuda/emu/controls.sh ${CMAKE_CURRENT_BINARY_DIR}/cuda-emu/controls ${emu_tsan})
  set_tests_properties(cuda_emu_controls PROPERTIES LABELS cuda TIMEOUT 300 ENVIRONMENT "CXX=${TRAINC_CXX}")

  # The generated kernels under ThreadSanitizer (EMU_TSAN=1, cuda_emu.h):
  # two threads of a block accessing one element with no __syncthreads or
  # __syncwarp between fail the test, whatever the values; one order (the
  # second is the tests above).
  if(emu_tsan)
    function(trainc_emu_tsan_test name model)
      trainc_emu_test(tsan_${name} ${model} ${ARGN})
      set_property(TEST cuda_emu_tsan_${name} APPEND PROPERTY ENVIRONMENT "EMU_TSAN=1;TRAINC_EMU_ONE_ORDER=1")
      set_tests_properties(cuda_emu_tsan_${name} PROPERTIES LABELS "cuda;slow")
    endfunction()
    # the tensor-core attention (cp.async, ldmatrix, mma.sync) at D = 64
    # over 4 key tiles, so that the forward's loads reuse a stage; the
    # split column sums and vector kernels; the CUDA-core attention and
    # the norms at a width of 30
    trainc_emu_tsan_test(gpt2_t200_bf16 gpt2 -D vocab=256 -D layers=1 -D heads=2 -D dim=128 -D seq=200 -D batch=1 --set precision=bf16)
    trainc_emu_tsan_test(mlp_rows_bf16 mlp -D batch=4096 -D hidden=128 --set precision=bf16)
    trainc_emu_tsan_test(gpt2_c30_fp32 gpt2 -D vocab=256 -D layers=1 -D heads=2 -D dim=30 -D seq=32 -D batch=2 --set precision=fp32)
  endif()

  # runtime/cuda.c itself, against a fake CUDA driver and cuBLASLt built from
  # the libraries' headers and documented behaviour (tests/cuda/fake: lazy
  # streams, graph capture, column-major products, the kernels emulated):
  # every kernel through trn_cuda_run_kernel against the C backend, then
  # STEPS steps of training on the fake GPU, with and without graphs,
  # against the CPU (LIMIT: relative).
  # NAME MODEL-FILE STEPS LIMIT ARGS... (the file relative to the source tree)
  if(TRAINC_SANITIZE)
    set(TRAINC_FAKE_LDFLAGS -fsanitize=address,undefined) # RTLIB was built with them
  endif()
  function(trainc_fake_test name file steps limit)
    get_filename_component(model ${file} NAME_WE)
    add_test(NAME cuda_fake_${name}
             COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cuda/fake/run.sh $<TARGET_FILE:cuda_emit> $<TARGET_FILE:trainc_rt> $<TARGET_FILE:trainc-tokenize>
                     ${CMAKE_CURRENT_BINARY_DIR}/cuda-fake/${name} ${CMAKE_SOURCE_DIR}/${file} ${model} trn_model_${model}
                     ${steps} ${limit} ${ARGN})
    set_tests_properties(cuda_fake_${name} PROPERTIES LABELS cuda TIMEOUT 600
                         ENVIRONMENT "TRAINC_CACHE_DIR=${TRAINC_CUDA_CACHE};CXX=${TRAINC_CXX};CC=${CMAKE_C_COMPILER};CUDA_INCLUDE=${TRAINC_CUDA_INCDIR};FAKE_LDFLAGS=${TRAINC_FAKE_LDFLAGS};CUDA_MAJOR=${CUDAToolkit_VERSION_MAJOR}")
  endfunction()
  # (the first of its two blocks recomputed, the second not: both kinds of
  # backward in one schedule)
  trainc_fake_test(gpt2_tiny_ckpt1_bf16 examples/gpt2.model 3 2e-2 ${CUDA_TINY_gpt2} --set precision=bf16 --set checkpoint=blocks --set checkpoint_blocks=1)
  # (with gradient checkpointing: the backward's recomputed blocks on the GPU;
  # and 2 micro-batches a step: the weight gradients summed into their
  # accumulators by cuBLASLt, beta 1)
  trainc_fake_test(llama_tiny_pad_ckpt_accum_tf32 examples/llama.model 3 1e-3 ${CUDA_PAD250_llama} --set precision=tf32 --set checkpoint=blocks --set grad_accum=2)
  # (about 90 s each, 210 s under the sanitizers: not in the sanitizer run,
  # where the two below cover runtime/cuda.c)
  set_tests_properties(cuda_fake_gpt2_tiny_ckpt1_bf16 cuda_fake_llama_tiny_pad_ckpt_accum_tf32 PROPERTIES LABELS "cuda;slow")
  # products batched over two dims: one strided in cuBLASLt, one looped;
  # SGD without momentum over 2 micro-batches (no buffer: null pointers)
  # a fused loop kernel of more buffers than a launch passes (17): it takes
  # the arena base alone and forms its pointers from it (tests/e2e/fuzz/)
  trainc_fake_test(fuzz_many_buffers_bf16 tests/e2e/fuzz/many_buffers.model 3 2e-2 --set precision=bf16)
  # (one of them, p @ v, with a bias: cuBLASLt's BIAS epilogue on a
  # batched product)
  trainc_fake_test(bmm_bf16 tests/cuda/fake/bmm.model 3 2e-2 --set precision=bf16 --set optimizer=sgd --set momentum=0 --set grad_accum=2)
  # ... refused: the batched products plain, then one k…_bias launch over
  # every batch entry of C
  trainc_fake_test(bmm_nobias_fp32 tests/cuda/fake/bmm.model 3 1e-4 --set precision=fp32)
  set_property(TEST cuda_fake_bmm_nobias_fp32 APPEND PROPERTY ENVIRONMENT "FAKE_CUBLASLT_NO_BIAS=1")
  # GELU (tanh) layers, with and without a bias: cuBLASLt's GELU epilogues
  # (GELU_AUX_BIAS, GELU_AUX, GELU_BIAS, GELU, DGELU) and the bias
  # gradient's (BGRADB); then with the fake cuBLASLt refusing them, the
  # products run plain and the kernels after
  trainc_fake_test(gelu_mlp_bf16 tests/cuda/fake/gelu_mlp.model 3 2e-2 --set precision=bf16)
  # a fault at each launch of a step: said as a fault of work queued before
  # the call that hears of it, a product's included (not a refused epilogue)
  set_property(TEST cuda_fake_gelu_mlp_bf16 APPEND PROPERTY ENVIRONMENT "FAKE_FAULT_SWEEP=1")
  trainc_fake_test(gelu_mlp_plain_fp32 tests/cuda/fake/gelu_mlp.model 3 1e-4 --set precision=fp32)
  # (and kcheck's control: an infinity in a product's result on the GPU
  # alone fails the kernel, and the JSON stays JSON)
  set_property(TEST cuda_fake_gelu_mlp_plain_fp32 APPEND PROPERTY ENVIRONMENT "FAKE_CUBLASLT_NO_GELU=1;FAKE_CUBLASLT_NO_BGRAD=1;FAKE_KCHECK_INF_CONTROL=1")
  # ... the heuristic offering the epilogues, the matmul refusing them: each
  # product planned again plain at its first run, said once, the kernels after
  trainc_fake_test(gelu_mlp_refused_bf16 tests/cuda/fake/gelu_mlp.model 3 2e-2 --set precision=bf16)
  set_property(TEST cuda_fake_gelu_mlp_refused_bf16 APPEND PROPERTY ENVIRONMENT "FAKE_CUBLASLT_EPI_RUN_REFUSE=1")
  # a cuBLASLt without bias epilogues: every product with a bias runs
  # plain, the kernel after adding the bias (and the GELU: the MLP's
  # GELU_AUX_BIAS), trained 3 steps to the CPU's losses
  trainc_fake_test(gpt2_nobias_bf16 examples/gpt2.model 3 2e-2 -D vocab=256 -D layers=1 -D heads=2 -D dim=32 -D seq=32 -D batch=4 --set precision=bf16)
  set_property(TEST cuda_fake_gpt2_nobias_bf16 APPEND PROPERTY ENVIRONMENT "FAKE_CUBLASLT_NO_BIAS=1")
  # ... and offered by the heuristic, refused by the matmul (the MLP
  # example: biases without a GELU epilogue, its GELU the erf form)
  trainc_fake_test(mlp_bias_refused_fp32 examples/mlp.model 0 0 --set precision=fp32)
  set_property(TEST cuda_fake_mlp_bias_refused_fp32 APPEND PROPERTY ENVIRONMENT "FAKE_CUBLASLT_EPI_RUN_REFUSE=1")
  # 2 micro-batches a step: the bias gradients cuBLASLt writes are added
  # into their accumulators by one launch (tk_add_multi, lower.c
  # merge_updates)
  trainc_fake_test(gelu_mlp_accum_bf16 tests/cuda/fake/gelu_mlp.model 3 2e-2 --set precision=bf16 --set grad_accum=2)
  # ... with a heuristic whose first two results are unusable (a state that
  # is not success; more workspace than asked for): the runtime takes the third
  set_property(TEST cuda_fake_gelu_mlp_accum_bf16 APPEND PROPERTY ENVIRONMENT "FAKE_CUBLASLT_BAD_FIRST=1")
  # fp16: the loss scale's states and update on the GPU, and the head's
  # linear_cross_entropy multiplying the scale into its products (the
  # count kernel's dx and dw alphas: lower.c lce_scale_mul)
  trainc_fake_test(gpt2_small_fp16 examples/gpt2.model 3 2e-2 -D vocab=256 -D layers=1 -D heads=2 -D dim=32 -D seq=32 -D batch=4 --set precision=fp16)
  # ... with a cuBLASLt that reads C where beta, from the device, is 0 (the
  # products above with the count kernel's alphas): the runtime zeroes C
  # first, and the control without that fails the kernel check
  set_property(TEST cuda_fake_gpt2_small_fp16 APPEND PROPERTY ENVIRONMENT "FAKE_CUBLASLT_BETA0_READS_C=1")
  # 4096 rows of GPT-2 in fp32: the norms' weight gradients over row
  # groups, 4 columns a thread (cuda_emu_gpt2_rows_bf16 has the bf16 form)
  # (about 45 s: not in the sanitizer run)
  trainc_fake_test(gpt2_rows_fp32 examples/gpt2.model 0 0 -D vocab=256 -D layers=1 -D heads=2 -D dim=32 -D seq=128 -D batch=32 --set precision=fp32)
  set_tests_properties(cuda_fake_gpt2_rows_fp32 PROPERTIES LABELS "cuda;slow")
  # 4096 rows, the bias gradient refused: its kernels split the rows into
  # groups (partials in the workspace, then their sum)
  trainc_fake_test(gelu_mlp_rows_plain_bf16 tests/cuda/fake/gelu_mlp.model 0 0 -D batch=256 --set precision=bf16)
  set_property(TEST cuda_fake_gelu_mlp_rows_plain_bf16 APPEND PROPERTY ENVIRONMENT "FAKE_CUBLASLT_NO_BGRAD=1")
  # 8192 rows: the column reductions (bias gradients) split over row groups
  trainc_fake_test(mlp_rows_fp32 examples/mlp.model 0 0 -D batch=8192 --set precision=fp32)
  # The embedding example (examples/embed, -DTRAINC_TARGET=cuda: `trainc
  # compile --emit=lib --target=cuda`) through the API: device "auto" on
  # this machine trains on the CPU as "cpu" does, "cuda" fails saying there
  # is no driver; on the fake driver "cuda" trains to the CPU's losses
  # (fp32: 1e-4 relative) (about 10 s)
  add_test(NAME cuda_fake_embed
           COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cuda/fake/embed.sh $<TARGET_FILE:trainc> ${CMAKE_CURRENT_BINARY_DIR}/cuda-fake/embed 1e-4)
  set_tests_properties(cuda_fake_embed PROPERTIES LABELS "cuda;e2e" TIMEOUT 300 SKIP_RETURN_CODE 77
                       ENVIRONMENT "TRAINC_CACHE_DIR=${TRAINC_CUDA_CACHE};CXX=${TRAINC_CXX};CC=${CMAKE_C_COMPILER};CUDA_INCLUDE=${TRAINC_CUDA_INCDIR};FAKE_LDFLAGS=${TRAINC_FAKE_LDFLAGS}")
else()
  message(STATUS "trainc: no C++ compiler: the CUDA emulation tests are not built")
endif()

# An architecture NVRTC does not compile for: the ones it does, exit 1,
# before the passes run (no pad-tiles note first: the error is all it says)
add_test(NAME cuda_arch_unsupported
         COMMAND bash -c "$0 compile examples/mlp.model --target=cuda --arch=sm_80,sm_99 -o $1/mlp-sm99 2> $1/arch.err; rc=$?; cat $1/arch.err;
                          [ $rc -eq 1 ] && [ $(wc -l < $1/arch.err) -eq 1 ] &&
                          grep -q '^trainc: error: --arch: this NVRTC (CUDA [0-9.]*) does not compile for sm_99; it compiles for .*sm_80' $1/arch.err"
                 $<TARGET_FILE:trainc> ${CMAKE_CURRENT_BINARY_DIR}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(cuda_arch_unsupported PROPERTIES LABELS cuda TIMEOUT 120)

# A grid past 2^32 blocks (tests/cuda/huge_grid.model): refused at compile
# time, at the line of its kernel, with the grid's true size (status 1),
# not wrapped to 0 blocks and launched as 1
add_test(NAME cuda_huge_grid
         COMMAND bash -c "$0 compile tests/cuda/huge_grid.model --target=cuda --emit=cuda -o $1/huge-grid 2> $1/huge-grid.err; rc=$?; cat $1/huge-grid.err;
                          [ $rc -eq 1 ] && grep -q 'huge_grid.model:9:.*error: the CUDA backend.s kernel k3_mul_huge_grid_model_L9 needs a grid of 4294967296 x 1 blocks, past the GPU.s limits' $1/huge-grid.err"
                 $<TARGET_FILE:trainc> ${CMAKE_CURRENT_BINARY_DIR}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(cuda_huge_grid PROPERTIES LABELS cuda TIMEOUT 120 ENVIRONMENT "TRAINC_CACHE_DIR=${TRAINC_CUDA_CACHE}")

# attention's limits, said at the model's line (status 1): a head dimension
# past 6136 (the tiles past 48 KB of shared memory), and batch x heads a
# prime past 65535, which no y x z grid holds (65537 sequences of one head)
add_test(NAME cuda_attention_limits
         COMMAND bash -c "$0 compile examples/gpt2.model -D vocab=64 -D layers=1 -D heads=1 -D dim=6144 -D seq=2 -D batch=1 --target=cuda --emit=cuda -o $1/att-d 2> $1/att-d.err; a=$?;
                          $0 compile examples/gpt2.model -D vocab=64 -D layers=1 -D heads=1 -D dim=16 -D seq=1 -D batch=65537 --target=cuda --emit=cuda -o $1/att-g 2> $1/att-g.err; b=$?;
                          cat $1/att-d.err $1/att-g.err | grep error;
                          [ $a -eq 1 ] && grep -q 'gpt2.model:47:7: error: the CUDA backend.s attention takes a head dimension of at most 6136, not 6144' $1/att-d.err &&
                          [ $b -eq 1 ] && grep -q 'gpt2.model:47:7: error: .*attention.* needs a grid of 1 x 1 x 65537 blocks' $1/att-g.err"
                 $<TARGET_FILE:trainc> ${CMAKE_CURRENT_BINARY_DIR}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(cuda_attention_limits PROPERTIES LABELS cuda TIMEOUT 120)

add_test(NAME cuda_fallback
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cuda/fallback.sh $<TARGET_FILE:cuda_emit> $<TARGET_FILE:trainc-tokenize>
                 ${CMAKE_CURRENT_BINARY_DIR}/cuda-fallback)
set_tests_properties(cuda_fallback PROPERTIES LABELS cuda TIMEOUT 300
                     ENVIRONMENT "TRAINC_CACHE_DIR=${TRAINC_CUDA_CACHE};TRAINC_RUNTIME_DIR=${CMAKE_SOURCE_DIR}/runtime")

# the NVRTC cache: the same images cold, cached and from any folder; broken
# entries compiled again; --arch names whole (its own cache folder: cold)
add_test(NAME cuda_cache
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cuda/cache.sh $<TARGET_FILE:trainc> ${CMAKE_CURRENT_BINARY_DIR}/cuda-cache-test)
set_tests_properties(cuda_cache PROPERTIES LABELS cuda TIMEOUT 300)

