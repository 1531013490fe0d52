#pragma once
// Access to the captured tool outputs in shared/fixtures/validation. The
// folder lives outside the repository; when it is absent the fixture tests
// WARN and return early (Catch2 v2 has no SKIP), so they are tagged [fixtures].

#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include <catch2/catch.hpp>
#include "tests/support/skip.h"

namespace kiln::test {

inline std::optional<std::string> read_fixture(const std::string& rel) {
  std::ifstream in(std::string(KILN_FIXTURES_DIR) + "/" + rel, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace kiln::test

// Declares `var` with the fixture's text, or WARNs and returns from the test.
#define KILN_FIXTURE(var, rel)                                                                     \
  std::string var;                                                                                 \
  if (auto kiln_fixture_ = ::kiln::test::read_fixture(rel)) {                                      \
    var = std::move(*kiln_fixture_);                                                               \
  } else {                                                                                         \
    KILN_SKIP("fixture " << (rel) << " absent under " << KILN_FIXTURES_DIR);                        \
  }

// Parses the fixture with `parser` into json `var`, requiring success.
#define KILN_PARSE_FIXTURE(var, parser, rel)                                                       \
  KILN_FIXTURE(var##_text, rel)                                                                    \
  auto var##_result = parser(var##_text);                                                          \
  if (!var##_result) FAIL(var##_result.error().message);                                           \
  const nlohmann::json var = *var##_result;
