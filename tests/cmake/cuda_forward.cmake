# The CUDA backend's kernel gates (tests/cuda/forward_kernel_gates.cpp): the forward kernels
# against the CPU reference. They need a GPU; without one the program prints SKIPPED and the
# reason and exits 77, which CTest reports as skipped.
if(NOT KIPP_HAVE_CUDA)
  return()
endif()
add_executable(cuda_forward_kernel_gates cuda/forward_kernel_gates.cpp)
target_compile_options(cuda_forward_kernel_gates PRIVATE ${KIPP_WARNINGS})
target_link_libraries(cuda_forward_kernel_gates PRIVATE kipplib)
add_test(NAME cuda_forward_kernel_gates COMMAND cuda_forward_kernel_gates)
set_tests_properties(cuda_forward_kernel_gates PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
# The unit tests that open a model on the cuda backend find the synthetic models here.
target_compile_definitions(kipp_unit_tests PRIVATE KIPP_TEST_MODELS="${KIPP_MODELS}")
