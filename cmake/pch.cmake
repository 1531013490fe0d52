# Precompiled headers (Clang builds; KILN_PCH, on by default): the third-party
# headers almost every .cc parses (cmake/third_party_pch.h; the suites' adds
# Catch2, cmake/test_pch.h) are compiled once per build and reused by every
# target, which takes about a third off a clean build's compile time.
#
# kiln_use_precompiled_headers(): call after every folder is added. Each
# library and executable reuses one of the two headers: a target linking
# kiln_test_main (a suite) the suites', the others the product's. Reuse needs
# the same sanitizer and language flags as the header's own target, which
# kiln_flags gives every target; a target that does not take kiln_flags (the
# CUDA companion and its cuBLASLt loader) is named in KILN_PCH_EXCLUDE. A new target with other flags
# fails to compile loudly ("AST file was compiled with ..."): add it there.
# GCC is left out: it drops a mismatched header silently and parses anyway.
option(KILN_PCH "Precompile the third-party headers once and reuse them (Clang)" ON)
set(KILN_PCH_EXCLUDE kiln-gpucheck kiln-gemm-probe kiln_cublaslt_loader kiln_test_main)

function(_kiln_targets_under dir out)
  get_property(_targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(_subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(_sub ${_subdirs})
    _kiln_targets_under(${_sub} _more)
    list(APPEND _targets ${_more})
  endforeach()
  set(${out} ${_targets} PARENT_SCOPE)
endfunction()

function(kiln_use_precompiled_headers)
  if(NOT KILN_PCH OR NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    return()
  endif()
  # The suites' header only where the suites are built (Catch2 is found then).
  set(_kinds product)
  if(TARGET kiln_test_main)
    list(APPEND _kinds test)
  endif()
  foreach(_kind ${_kinds})
    add_library(kiln_pch_${_kind} OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch_anchor.cc)
    target_link_libraries(kiln_pch_${_kind} PRIVATE kiln_flags Boost::boost nlohmann_json::nlohmann_json)
  endforeach()
  target_precompile_headers(kiln_pch_product PRIVATE ${PROJECT_SOURCE_DIR}/cmake/third_party_pch.h)
  if(TARGET kiln_test_main)
    target_precompile_headers(kiln_pch_test PRIVATE ${PROJECT_SOURCE_DIR}/cmake/test_pch.h)
    target_link_libraries(kiln_pch_test PRIVATE Catch2::Catch2)
  endif()

  _kiln_targets_under(${PROJECT_SOURCE_DIR} _all)
  foreach(_t ${_all})
    get_target_property(_type ${_t} TYPE)
    if(NOT _type MATCHES "^(STATIC_LIBRARY|OBJECT_LIBRARY|SHARED_LIBRARY|EXECUTABLE)$"
       OR _t IN_LIST KILN_PCH_EXCLUDE OR _t MATCHES "^kiln_pch_")
      continue()
    endif()
    get_target_property(_links ${_t} LINK_LIBRARIES)
    if(_links AND "kiln_test_main" IN_LIST _links)
      target_precompile_headers(${_t} REUSE_FROM kiln_pch_test)
    else()
      target_precompile_headers(${_t} REUSE_FROM kiln_pch_product)
    endif()
  endforeach()
endfunction()
