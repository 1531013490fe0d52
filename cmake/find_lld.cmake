# kiln_find_lld(VAR): VAR (a cache variable) names the ld.lld beside the C++
# compiler, the linker of clang's own version (scripts/install-deps installs
# lld-19 with clang-19), or is VAR-NOTFOUND. Used by the main build and by the
# libFuzzer project (tests/fuzz), which is configured on its own.
function(kiln_find_lld var)
  get_filename_component(_dir ${CMAKE_CXX_COMPILER} REALPATH)
  get_filename_component(_dir ${_dir} DIRECTORY)
  find_program(${var} NAMES ld.lld HINTS ${_dir} NO_DEFAULT_PATH)
endfunction()
