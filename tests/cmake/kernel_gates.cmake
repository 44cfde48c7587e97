# Whole-model gates of the CPU kernels (tests/integration/kernel_gates.cpp) on the checkpoint
# our trainer makes in train_tiny_run, converted to BF16, Q8_0 and affine4: every fast kernel
# table against the scalar reference table (FP32 activations; the fast tables round each
# product's input to BF16 or Q8 codes) at NMSE 1e-5 with every argmax equal, and the quantized
# conversions against the BF16 one. Not on the synthetic models: their random weights amplify
# the input rounding from layer to layer, to NMSE ~1e-4 (tiny, BF16) to ~1.5e-2 (0.6b, Q8_0);
# see docs/PERFORMANCE.md. The reference table itself is gated against PyTorch on
# both synthetic models (engine_gates.cmake, cli_logits.cmake).
add_executable(kernel_gates integration/kernel_gates.cpp)
target_compile_options(kernel_gates PRIVATE ${KIPP_WARNINGS})
target_link_libraries(kernel_gates PRIVATE kipplib)

foreach(quant q8_0 affine4)
  add_test(NAME train_export_convert_${quant}
           COMMAND sh -c "$<TARGET_FILE:kipp> convert ${KIPP_TRAIN_WORK}/run/latest -o ${KIPP_TRAIN_WORK}/run-${quant}.gguf --quant ${quant} && echo 'exit 0'")
  set_tests_properties(train_export_convert_${quant} PROPERTIES FIXTURES_REQUIRED train_run
                       FIXTURES_SETUP train_gguf_${quant} PASS_REGULAR_EXPRESSION "provenance local.*exit 0")
endforeach()
add_test(NAME kernel_gates_simd_trained
         COMMAND kernel_gates simd ${KIPP_TRAIN_WORK}/run.gguf ${KIPP_TRAIN_WORK}/run-q8_0.gguf
                 ${KIPP_TRAIN_WORK}/run-affine4.gguf)
set_tests_properties(kernel_gates_simd_trained PROPERTIES
                     FIXTURES_REQUIRED "train_gguf;train_gguf_q8_0;train_gguf_affine4" TIMEOUT 600)
add_test(NAME kernel_gates_quant_trained
         COMMAND kernel_gates quant ${KIPP_TRAIN_WORK}/run.gguf ${KIPP_TRAIN_WORK}/run-q8_0.gguf
                 ${KIPP_TRAIN_WORK}/run-affine4.gguf)
set_tests_properties(kernel_gates_quant_trained PROPERTIES
                     FIXTURES_REQUIRED "train_gguf;train_gguf_q8_0;train_gguf_affine4" TIMEOUT 600)
