#pragma once
// The whole of a file as a string ("" when it cannot be read: the caller's
// CHECK on the content says what was expected). Test code only.

#include <fstream>
#include <sstream>
#include <string>

namespace kiln::testing {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream b;
  b << in.rdbuf();
  return b.str();
}

}  // namespace kiln::testing
