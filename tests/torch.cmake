# trainc's training against PyTorch's on the CPU (tests/torch/parity.sh):
# tiny GPT-2 and Llama in fp32, AdamW, SGD and gradient accumulation, every
# step's loss and gradient norm and the final parameters; with negative
# controls.  Skips where no python3 imports torch (label torch).
if(TARGET trainc AND TARGET trainc-tokenize)
  add_test(NAME torch_parity
           COMMAND bash ${CMAKE_SOURCE_DIR}/tests/torch/parity.sh $<TARGET_FILE:trainc> $<TARGET_FILE:trainc-tokenize>
                   ${CMAKE_CURRENT_BINARY_DIR}/torch-parity)
  set_tests_properties(torch_parity PROPERTIES LABELS torch TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
# tools/hf_to_trainc.py: Hugging Face GPT-2 and Llama checkpoints (their
# names, Conv1D layouts, bf16, buffers) converted and loaded with --init
# give Hugging Face's loss (tests/torch/hf_import.sh)
if(TARGET trainc AND TARGET trainc-tokenize)
  add_test(NAME torch_hf_import
           COMMAND bash ${CMAKE_SOURCE_DIR}/tests/torch/hf_import.sh $<TARGET_FILE:trainc> $<TARGET_FILE:trainc-tokenize>
                   ${CMAKE_CURRENT_BINARY_DIR}/torch-hf-import)
  set_tests_properties(torch_hf_import PROPERTIES LABELS torch TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
# tools/hf_to_trainc.py on what it must refuse (cut or malformed files,
# pickles, bad -o paths, an untied GPT-2 head, --to-hf of what is not a
# trainc checkpoint), --config, and a LoRA model merged by --to-hf giving
# trainc's loss (tests/torch/hf_tool.sh)
if(TARGET trainc AND TARGET trainc-tokenize)
  add_test(NAME torch_hf_tool
           COMMAND bash ${CMAKE_SOURCE_DIR}/tests/torch/hf_tool.sh $<TARGET_FILE:trainc> $<TARGET_FILE:trainc-tokenize>
                   ${CMAKE_CURRENT_BINARY_DIR}/torch-hf-tool)
  set_tests_properties(torch_hf_tool PROPERTIES LABELS torch TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
