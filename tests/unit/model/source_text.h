#pragma once
// Reading the tree's own files from model tests: the lists in controller/model
// are the one source, and these tests hold every published copy (the OpenAPI
// document, the portal, its stylesheet) to them. KILN_SOURCE_DIR is set by
// tests/unit/model/CMakeLists.txt.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::test {

// The file at `relative` under the source tree; "" when it cannot be read.
inline std::string source_text(const std::string& relative) {
  std::ifstream in(std::filesystem::path(KILN_SOURCE_DIR) / relative);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The items of the first bracketed list after `from` in `text`, each with
// spaces, newlines and quotes trimmed: "[a, b,\n c]" and '["a", "b"]' both
// read {a, b}. Empty when there is no list.
inline std::vector<std::string> list_after(const std::string& text, std::size_t from) {
  std::vector<std::string> out;
  const std::size_t open = text.find('[', from);
  if (open == std::string::npos) return out;
  const std::size_t close = text.find(']', open);
  if (close == std::string::npos) return out;
  std::stringstream ss(text.substr(open + 1, close - open - 1));
  for (std::string item; std::getline(ss, item, ',');) {
    const auto keep = [](char c) { return c != ' ' && c != '\n' && c != '"' && c != '\''; };
    std::string t;
    for (char c : item)
      if (keep(c)) t.push_back(c);
    if (!t.empty()) out.push_back(t);
  }
  return out;
}

}  // namespace kiln::test
