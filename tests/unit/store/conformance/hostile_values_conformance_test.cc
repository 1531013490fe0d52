// Values no name holds, on SQLite and PostgreSQL (backends.h): a NUL byte,
// which libpq would take as the end of a text parameter (so "gpu-01\0x"
// would be looked up as "gpu-01"), bytes that are not UTF-8, SQL quoting and
// LIKE wildcards. Each store matches the value literally or refuses it
// (kInvalidArgument); neither returns a row another value names.
#include <catch2/catch.hpp>

#include "backends.h"

using namespace kiln;
using namespace kiln::test;
using namespace std::string_literals;

TEMPLATE_TEST_CASE("conformance: hostile values match literally or are refused, never truncated", "[store][conformance]",
                   KILN_STORE_BACKENDS) {
  TestType b;
  Node proto = make_node("gpu-01", {"52:54:00:00:ee:01"});
  proto.profile = "cpu-lab";
  proto.tenant = "acme";
  auto n = b.nodes().create_node(proto, event("node.created"));
  REQUIRE(n);

  const std::vector<std::string> hostile = {"gpu-01\0x"s, "gpu-01\0"s, "\xff\xfe", "' OR '1'='1", "%", "_",
                                            "gpu_01",     "gpu%"};
  for (const std::string& v : hostile) {
    INFO("value of " << v.size() << " bytes");
    auto got = b.nodes().get_node(v);
    REQUIRE_FALSE(got);
    CHECK((got.error().code == Code::kNotFound || got.error().code == Code::kInvalidArgument));
    auto port = b.nodes().find_port_by_address(v);
    CHECK_FALSE(port);
  }
  const std::vector<std::string> filters = {"cpu-lab\0x"s, "acme\0"s, "\0"s, "\xc0\xaf", "cpu_lab", "%"};
  for (const std::string& v : filters) {
    INFO("filter of " << v.size() << " bytes");
    for (int which = 0; which < 3; ++which) {
      NodeFilter f;
      if (which == 0) f.profile = v;
      if (which == 1) f.tenant = v;
      if (which == 2) f.allocation = v;  // the node has none: "" must not match "\0"
      auto listed = b.nodes().list_nodes(f, ListOptions{});
      if (listed) CHECK(listed->empty());
      else CHECK(listed.error().code == Code::kInvalidArgument);
    }
  }
  // A name with a NUL is stored whole or refused, never as its prefix.
  Node nul = make_node("gpu-02\0tail"s);
  auto made = b.nodes().create_node(nul, event("node.created"));
  if (made) CHECK(made->name == "gpu-02\0tail"s);
  else CHECK(made.error().code == Code::kInvalidArgument);
  CHECK_FALSE(b.nodes().get_node("gpu-02"));
}
