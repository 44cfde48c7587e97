# --backend on the subcommands that run a model: a name other than cpu or cuda is a usage error,
# and cuda on a machine without a usable GPU (or a build without nvcc) fails with one line that
# says so, exit status 1, no crash; on a machine with one, the same commands must succeed.
set(KIPP_NO_GPU_ERROR "^kipp: error: (no usable NVIDIA GPU: .+|the cuda backend is not built into this Kipp: .+)$")
add_test(NAME backend_cli_generate_cuda
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/cuda_or_error.sh "${KIPP_NO_GPU_ERROR}"
                 $<TARGET_FILE:kipp> generate -m ${KIPP_TINY_GGUF} -p hi --max-tokens 2 --backend cuda)
add_test(NAME backend_cli_logits_cuda
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/cuda_or_error.sh "${KIPP_NO_GPU_ERROR}"
                 $<TARGET_FILE:kipp> logits -m ${KIPP_TINY_GGUF} --prompt hi --backend cuda)
add_test(NAME backend_cli_inspect_cuda
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/cuda_or_error.sh "${KIPP_NO_GPU_ERROR}"
                 $<TARGET_FILE:kipp> inspect --no-tensors --backend cuda ${KIPP_TINY_GGUF})
# CLI11 refuses an unknown name before anything is loaded, naming the two that work.
add_test(NAME backend_cli_unknown_name
         COMMAND sh -c "\"$0\" generate -m \"$1\" -p hi --backend gpu 2>&1; echo \"exit=$?\"" $<TARGET_FILE:kipp>
                 ${KIPP_TINY_GGUF})
set_tests_properties(backend_cli_unknown_name PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION
                     "--backend: expected cpu or cuda, found 'gpu'\n.*exit=[1-9]")
# On the cpu, inspect --backend opens the engine and lists what the backend holds: the weights
# it keeps itself (the CPU backend's packed panels), K/V none yet, and host memory.
add_test(NAME backend_cli_inspect_cpu_memory
         COMMAND $<TARGET_FILE:kipp> inspect --no-tensors --backend cpu ${KIPP_TINY_GGUF})
set_tests_properties(backend_cli_inspect_cpu_memory PROPERTIES TIMEOUT 120 PASS_REGULAR_EXPRESSION
                     "\nmemory on cpu:\n  weights +[0-9.]+ MiB\n  K/V +0.0 MiB\n  scratch +[1-9][0-9.]* MiB\n  graphs +0.0 MiB\n  \\(host memory: no device of its own\\)\n$")
foreach(test backend_cli_generate_cuda backend_cli_logits_cuda
        backend_cli_inspect_cuda backend_cli_unknown_name backend_cli_inspect_cpu_memory)
  set_tests_properties(${test} PROPERTIES FIXTURES_REQUIRED gguf_tiny_bf16)
endforeach()
set_tests_properties(backend_cli_generate_cuda backend_cli_logits_cuda
                     backend_cli_inspect_cuda PROPERTIES TIMEOUT 120)
