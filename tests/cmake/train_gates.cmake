# Training-model gates against PyTorch autograd (tests/integration/train_gates.cpp driving
# tools/train_reference.py): loss and every gradient of one micro-batch, recompute_blocks bitwise
# equal to the plain pass, and the weights after 20 AdamW steps, for a tied and an untied config.
add_executable(train_gates integration/train_gates.cpp)
target_compile_options(train_gates PRIVATE ${KIPP_WARNINGS})
target_link_libraries(train_gates PRIVATE kipplib)

add_test(NAME train_gates
         COMMAND train_gates ${KIPP_PY} ${CMAKE_SOURCE_DIR}/tools/train_reference.py ${CMAKE_BINARY_DIR}/gates/train)
set_tests_properties(train_gates PROPERTIES TIMEOUT 600)
