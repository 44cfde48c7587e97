# GPU gates of the CUDA products (tests/cuda/matmul_gates.cpp): input preparation bitwise and
# every product path and epilogue against the CPU reference, BF16 decode bandwidth printed.
# Without a GPU the program prints "SKIPPED: <why>" and exits 77, which CTest reports as skipped.
if(KIPP_HAVE_CUDA)
  add_executable(cuda_matmul_gates ${CMAKE_CURRENT_SOURCE_DIR}/cuda/matmul_gates.cpp)
  target_compile_options(cuda_matmul_gates PRIVATE ${KIPP_WARNINGS})
  target_link_libraries(cuda_matmul_gates PRIVATE kipplib CUDA::cudart_static)
  add_test(NAME cuda_matmul_gates COMMAND cuda_matmul_gates)
  set_tests_properties(cuda_matmul_gates PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 RESOURCE_LOCK gpu)
endif()
