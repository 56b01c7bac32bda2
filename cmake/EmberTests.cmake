# ember_add_gtest(<target> TIMEOUT <seconds> [LABELS <label>...])
#
# Registers a GoogleTest program with ctest: one entry per test (gtest_discover_tests),
# or, with EMBER_TEST_PER_PROGRAM, one entry that runs the whole program. The sanitizer
# presets use the latter: an ASan+UBSan process spends ~1.2 s before main() relocating
# libember's ~120 MB of sanitizer metadata, a cost per-test entries would pay ~1,300 times.
# A program's entry gets the sum of its tests' time limits' worth of time, at most
# EMBER_TEST_PROGRAM_TIMEOUT.
include(GoogleTest)
option(EMBER_TEST_PER_PROGRAM "One ctest entry per test program instead of per test" OFF)
set(EMBER_TEST_PROGRAM_TIMEOUT 1800 CACHE STRING "Time limit of a whole test program's ctest entry (s)")

function(ember_add_gtest target)
  cmake_parse_arguments(ARG "" "TIMEOUT" "LABELS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  if(EMBER_TEST_PER_PROGRAM)
    add_test(NAME ${target} COMMAND ${target})
    set_tests_properties(${target} PROPERTIES TIMEOUT ${EMBER_TEST_PROGRAM_TIMEOUT})
    if(ARG_LABELS)
      set_tests_properties(${target} PROPERTIES LABELS "${ARG_LABELS}")
    endif()
  elseif(ARG_LABELS)
    gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS "${ARG_LABELS}")
  else()
    gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT ${ARG_TIMEOUT})
  endif()
endfunction()
