# trainc against PyTorch on the CPU; each test skips (status 77) where no
# python3 imports torch (label torch).
#
#   torch_parity     trainc's training against PyTorch's (tests/torch/parity.sh):
#                    tiny GPT-2 and Llama in fp32, AdamW, SGD and gradient
#                    accumulation, every step's loss and gradient norm and
#                    the final parameters; with negative controls
#   torch_hf_import  tools/hf_to_trainc.py: Hugging Face GPT-2 and Llama
#                    checkpoints (their names, Conv1D layouts, bf16,
#                    buffers) converted and loaded with --init give Hugging
#                    Face's loss (tests/torch/hf_import.sh)
#   torch_hf_tool    tools/hf_to_trainc.py on what it must refuse (cut or
#                    malformed files, pickles, bad -o paths, an untied GPT-2
#                    head, --to-hf of what is not a trainc checkpoint),
#                    --config, and a LoRA model merged by --to-hf giving
#                    trainc's loss (tests/torch/hf_tool.sh)
if(TARGET trainc AND TARGET trainc-tokenize)
  foreach(t parity hf_import hf_tool)
    string(REPLACE "_" "-" dir ${t})
    add_test(NAME torch_${t}
             COMMAND bash ${CMAKE_SOURCE_DIR}/tests/torch/${t}.sh $<TARGET_FILE:trainc> $<TARGET_FILE:trainc-tokenize>
                     ${CMAKE_CURRENT_BINARY_DIR}/torch-${dir})
    set_tests_properties(torch_${t} PROPERTIES LABELS torch TIMEOUT 300 SKIP_RETURN_CODE 77)
  endforeach()
endif()
