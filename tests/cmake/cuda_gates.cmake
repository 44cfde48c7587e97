# The CUDA engine against the CPU engine and the PyTorch reference on every synthetic model and
# weight type (tests/integration/cuda_engine_gates.cpp). Where no GPU is usable the program
# prints "SKIPPED: <why>" and exits 77, which CTest shows as skipped, never as passed. It takes
# only paths, so the same binary runs from a GPU bundle outside the build tree.
add_executable(cuda_engine_gates integration/cuda_engine_gates.cpp integration/npy.cpp)
target_compile_options(cuda_engine_gates PRIVATE ${KIPP_WARNINGS})
target_link_libraries(cuda_engine_gates PRIVATE kipplib)

set(KIPP_CUDA_GATE_FIXTURES "${KIPP_HF_FIXTURE_tiny};${KIPP_HF_FIXTURE_qwen3-0.6b}")
foreach(model tiny qwen3-0.6b)
  foreach(quant bf16 q8_0 affine4)
    list(APPEND KIPP_CUDA_GATE_FIXTURES gguf_${model}_${quant})
  endforeach()
endforeach()
add_test(NAME cuda_engine_gates
         COMMAND cuda_engine_gates ${KIPP_MODELS} ${KIPP_PY} ${CMAKE_SOURCE_DIR}/tools/torch_reference.py
                 ${CMAKE_BINARY_DIR}/gates/cuda)
set_tests_properties(cuda_engine_gates PROPERTIES FIXTURES_REQUIRED "${KIPP_CUDA_GATE_FIXTURES}" TIMEOUT 1800
                     SKIP_RETURN_CODE 77 RESOURCE_LOCK big_memory)
