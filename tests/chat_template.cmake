# chat_template tests (see tests/CMakeLists.txt).
