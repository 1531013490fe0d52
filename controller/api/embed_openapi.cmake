# Writes OUT: a C++ file defining kiln::api::openapi_yaml() returning IN's text.
file(READ ${IN} yaml)
string(FIND "${yaml}" ")kiln_openapi\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "openapi.yaml contains the raw-string delimiter")
endif()
file(WRITE ${OUT} "// Generated from schemas/openapi.yaml by embed_openapi.cmake. Do not edit.\n"
  "#include <string_view>\nnamespace kiln::api {\n"
  "std::string_view openapi_yaml() {\n  static constexpr std::string_view kText = R\"kiln_openapi(${yaml})kiln_openapi\";\n"
  "  return kText;\n}\n}  // namespace kiln::api\n")
