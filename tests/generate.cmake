# generate tests (see tests/CMakeLists.txt).
