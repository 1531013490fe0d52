# Included by tests/CMakeLists.txt: builds the libFuzzer targets with clang
# as part of the main build (target kiln_fuzzers, a project of its own in
# <build>/fuzz) and gives each a short CTest run, label fuzz, so they stay
# built and honest in `make test`. A missing clang is a configure error, not
# a skip.
#
# Built unoptimised (Debug, assertions on): the 3 s runs need the targets
# built more than fast. With the precompiled header and lld that takes 169
# CPU-s on 2 cores instead of 354 at RelWithDebInfo, an eighth of a clean
# `make test` build; the targets run 3-12x fewer inputs a second. `make fuzz`
# builds them optimised in build/fuzz (tests/fuzz on its own) and runs them
# longer (FUZZ_SECONDS).
include(${CMAKE_CURRENT_LIST_DIR}/targets.cmake)
# One clang: the main build's own (clang-19 from `make`), else, for a build
# with another compiler, the one install-deps puts there (clang-19), so a
# machine with other clangs builds what CI builds.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND CMAKE_C_COMPILER_ID STREQUAL "Clang")
  set(KILN_FUZZ_CXX ${CMAKE_CXX_COMPILER})
  set(KILN_FUZZ_CC ${CMAKE_C_COMPILER})
else()
  find_program(KILN_FUZZ_CXX NAMES clang++-19 clang++)
  find_program(KILN_FUZZ_CC NAMES clang-19 clang)
endif()
if(NOT KILN_FUZZ_CXX OR NOT KILN_FUZZ_CC)
  message(FATAL_ERROR "clang-19 not found: the libFuzzer targets in tests/fuzz need it; run scripts/install-deps")
endif()
set(KILN_FUZZ_BINARY_DIR ${CMAKE_BINARY_DIR}/fuzz)
cmake_host_system_information(RESULT _cores QUERY NUMBER_OF_LOGICAL_CORES)
set(_launcher "")
if(CMAKE_CXX_COMPILER_LAUNCHER)
  set(_launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER})
endif()
add_custom_target(kiln_fuzzers ALL
  COMMAND ${CMAKE_COMMAND} -S ${CMAKE_CURRENT_LIST_DIR} -B ${KILN_FUZZ_BINARY_DIR}
          -DCMAKE_CXX_COMPILER=${KILN_FUZZ_CXX} -DCMAKE_C_COMPILER=${KILN_FUZZ_CC} ${_launcher}
          -DCMAKE_BUILD_TYPE=Debug
  COMMAND ${CMAKE_COMMAND} --build ${KILN_FUZZ_BINARY_DIR} --parallel ${_cores}
  COMMENT "libFuzzer targets (clang): ${KILN_FUZZ_BINARY_DIR}"
  USES_TERMINAL)
kiln_add_fuzz_tests(${KILN_FUZZ_BINARY_DIR})
