# Training on an NVIDIA GPU. `kipp train --device cuda` is checked before any work: with a key
# the GPU does not support yet (train.lora) it fails naming train.device on every
# machine, whether CUDA is built or not and whether a GPU is present or not. Where the CUDA
# backend is built, cuda_train_gates holds the GPU training kernels and the GPU model's
# gradients to the CPU trainer's and to PyTorch autograd; without a usable GPU it reports
# SKIPPED (exit 77).
add_test(NAME train_device_cuda_checked
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/expect_error.sh "train\\.device: cuda" $<TARGET_FILE:kipp>
                 train --config ${CMAKE_SOURCE_DIR}/configs/tiny.yaml --device cuda --set train.lora.rank=4 --set
                 tokenizer=${KIPP_TRAIN_TOKENIZER} --set data.train=[${KIPP_TRAIN_CORPUS}] --set
                 run.dir=${KIPP_TRAIN_WORK}/device-cuda)
set_tests_properties(train_device_cuda_checked PROPERTIES FIXTURES_REQUIRED "tiny_hf;train_corpus" TIMEOUT 60)

if(KIPP_HAVE_CUDA)
  add_executable(cuda_train_gates integration/cuda_train_gates.cpp)
  target_compile_options(cuda_train_gates PRIVATE ${KIPP_WARNINGS})
  target_link_libraries(cuda_train_gates PRIVATE kipplib)
  add_test(NAME cuda_train_gates COMMAND cuda_train_gates ${KIPP_PY} ${CMAKE_SOURCE_DIR}/tools/train_reference.py
                                          ${CMAKE_BINARY_DIR}/gates/cuda_train)
  set_tests_properties(cuda_train_gates PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
  # Resume on the GPU is bitwise the uninterrupted GPU run (train_resume.sh with train.device
  # cuda); skipped where the probe finds no GPU.
  add_test(NAME train_resume_bitwise_cuda
           COMMAND sh -c "$<TARGET_FILE:cuda_train_gates> --probe || exit $?; exec ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_resume.sh $<TARGET_FILE:kipp> ${KIPP_TRAIN_CONFIG} ${KIPP_TRAIN_TOKENIZER} ${KIPP_TRAIN_CORPUS} ${KIPP_TRAIN_WORK}/resume-cuda --set train.device=cuda")
  set_tests_properties(train_resume_bitwise_cuda PROPERTIES FIXTURES_REQUIRED "tiny_hf;train_corpus"
                       SKIP_RETURN_CODE 77 TIMEOUT 900)
endif()

# 200 steps of the tiny config on the GPU reach a final validation loss within 2% of the CPU FP32
# run from the same initialization (both at once); skipped where the GPU run finds no usable GPU.
add_test(NAME train_convergence_cuda
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_convergence_cuda.sh $<TARGET_FILE:kipp>
                 ${CMAKE_SOURCE_DIR}/configs/tiny.yaml ${CMAKE_CURRENT_SOURCE_DIR}/train/corpus.md
                 ${KIPP_TRAIN_WORK}/convergence-cuda)
set_tests_properties(train_convergence_cuda PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
