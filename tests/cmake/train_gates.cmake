# Training-model gates against PyTorch autograd (tests/integration/train_gates.cpp driving
# tools/train_reference.py): loss and every gradient of one micro-batch, recompute_blocks bitwise
# equal to the plain pass, and the weights after 20 AdamW steps, for a tied and an untied config.
add_executable(train_gates integration/train_gates.cpp)
target_compile_options(train_gates PRIVATE ${KIPP_WARNINGS})
target_link_libraries(train_gates PRIVATE kipplib)

add_test(NAME train_gates
         COMMAND train_gates ${KIPP_PY} ${CMAKE_SOURCE_DIR}/tools/train_reference.py ${CMAKE_BINARY_DIR}/gates/train)
set_tests_properties(train_gates PROPERTIES TIMEOUT 600)

# LoRA gates (tests/integration/lora_gates.cpp driving tools/lora_reference.py): adapter
# gradients against PyTorch autograd on the tiny model as BF16, Q8_0 and affine4 GGUFs, zero-B
# logits, dropout determinism. With the reference kernel table (FP32 activations) at FP32
# bounds, and with this CPU's fast table at the bounds of its rounded activations.
add_executable(lora_gates integration/lora_gates.cpp)
target_compile_options(lora_gates PRIVATE ${KIPP_WARNINGS})
target_link_libraries(lora_gates PRIVATE kipplib)
foreach(table reference fast)
  add_test(NAME lora_gates_${table} COMMAND lora_gates ${KIPP_PY} ${CMAKE_SOURCE_DIR}/tools/lora_reference.py
                                            ${KIPP_MODELS} ${CMAKE_BINARY_DIR}/gates/lora_${table})
  set_tests_properties(lora_gates_${table} PROPERTIES TIMEOUT 600
                       FIXTURES_REQUIRED "tiny_hf;gguf_tiny_bf16;gguf_tiny_q8_0;gguf_tiny_affine4")
endforeach()
set_tests_properties(lora_gates_reference PROPERTIES ENVIRONMENT KIPP_KERNELS=reference)
