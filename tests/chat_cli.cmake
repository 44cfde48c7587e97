# chat_cli tests (see tests/CMakeLists.txt).
