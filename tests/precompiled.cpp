// The translation unit the tests' precompiled header (tests/CMakeLists.txt) is built with.
