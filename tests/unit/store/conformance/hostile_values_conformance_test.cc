// Values no name holds, on SQLite and PostgreSQL (backends.h): a NUL byte,
// which libpq would take as the end of a text parameter (so "gpu-01\0x"
// would be looked up as "gpu-01"), bytes that are not UTF-8, SQL quoting and
// LIKE wildcards. Each store matches the value literally or refuses it
// (kInvalidArgument); neither returns a row another value names.
#include <catch2/catch.hpp>

#include <map>

#include "backends.h"
#include "common/ids.h"

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

TEMPLATE_TEST_CASE("conformance: hostile image and profile names match literally or are refused",
                   "[store][conformance][catalogue]", KILN_STORE_BACKENDS) {
  TestType b;
  CatalogueStore& s = b.catalogue();
  Image img;
  img.name = "debian";
  img.kind = "os";
  img.format = "raw";
  img.sha256 = std::string(64, 'e');
  img.source = "https://images.example/debian.raw";
  img.state = "downloading";
  REQUIRE(s.create_image(img));
  Profile p;
  p.name = "cpu-lab";
  REQUIRE(s.create_profile(p));

  const std::vector<std::string> hostile = {"debian\0x"s, "cpu-lab\0"s, "\xff\xfe", "' OR '1'='1", "%", "cpu_lab"};
  for (const std::string& v : hostile) {
    INFO("value of " << v.size() << " bytes");
    auto refused = [](const auto& r) {
      return !r && (r.error().code == Code::kNotFound || r.error().code == Code::kInvalidArgument);
    };
    CHECK(refused(s.get_image(v)));
    CHECK(refused(s.get_profile(v)));
    CHECK(refused(s.set_image_public(v, true)));
    CHECK(refused(s.delete_image(v)));
    CHECK(refused(s.delete_profile(v)));
  }
  REQUIRE(s.get_image("debian"));
  CHECK_FALSE(s.get_image("debian")->is_public);
  REQUIRE(s.get_profile("cpu-lab"));

  // A name with a NUL is stored whole or refused, never as its prefix.
  p.name = "gpu\0tail"s;
  auto made = s.create_profile(p);
  if (made) CHECK(made->name == "gpu\0tail"s);
  else CHECK(made.error().code == Code::kInvalidArgument);
  CHECK(s.get_profile("gpu").error().code == Code::kNotFound);
}

TEMPLATE_TEST_CASE("conformance: hostile allocation traits match literally or are refused",
                   "[store][conformance][allocations]", KILN_STORE_BACKENDS) {
  TestType b;
  REQUIRE(b.tenants().create_tenant(Tenant{"acme", "", {{"gpu", NodeKind::kBaremetal, 20}}, 0, 0, 0}));
  // One node per trait, each a value SQL or JSON could misread: quotes,
  // JSON escapes, LIKE wildcards, a prefix of another, another case, non-ASCII.
  const std::vector<std::string> traits = {"it's", "a\"b", "back\\slash", "%", "_", "nv", "nvlink", "\u00e9", "NVLINK"};
  std::map<std::string, std::string> node_of;
  for (std::size_t i = 0; i < traits.size(); ++i) {
    Node n = make_node("t" + std::to_string(i));
    n.provision_state = ProvisionState::kAvailable;
    n.profile = "gpu";
    n.traits = {traits[i]};
    auto made = b.nodes().create_node(n, event("node.created"));
    REQUIRE(made);
    node_of[traits[i]] = made->id;
  }
  for (std::size_t i = 0; i < traits.size(); ++i) {
    INFO("trait " << traits[i]);
    Allocation a;
    a.id = new_uuid();
    a.name = "a" + std::to_string(i);
    a.tenant = "acme";
    a.profile = "gpu";
    a.kind = NodeKind::kBaremetal;
    a.count = 1;
    a.image = "img";
    a.traits = {traits[i]};
    a.state = AllocationState::kPending;
    auto got = b.allocations().create_allocation(a, {}, nullptr);
    REQUIRE(got);
    REQUIRE(got->members.size() == 1);
    CHECK(got->members[0].node_id == node_of[traits[i]]);
  }
  // A trait no node has, or one with a NUL (refused: PostgreSQL's jsonb
  // cannot hold it): nothing is claimed.
  for (const std::string& v : {"nvlink\0"s, "' OR '1'='1"s, "\xff\xfe"s}) {
    Allocation a;
    a.id = new_uuid();
    a.name = "none";
    a.tenant = "acme";
    a.profile = "gpu";
    a.kind = NodeKind::kBaremetal;
    a.count = 1;
    a.image = "img";
    a.traits = {v};
    a.state = AllocationState::kPending;
    auto got = b.allocations().create_allocation(a, {}, nullptr);
    REQUIRE_FALSE(got);
    INFO(got.error().message);
    CHECK(got.error().code == (v.find('\0') == std::string::npos ? Code::kConflict : Code::kInvalidArgument));
  }
}
