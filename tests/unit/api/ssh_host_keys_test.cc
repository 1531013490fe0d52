// A node's ssh_host_keys (what cloud-init's phone_home posted,
// controller/api/phone_home_routes.cc) as the API shows them: to staff and
// to the node's tenant, never to another tenant; [] until posted.
#include <catch2/catch.hpp>

#include <string>

#include "common/crypto.h"
#include "common/ids.h"
#include "common/ssh_host_key.h"
#include "controller/api/profile_input.h"
#include "tests/unit/api/api_harness.h"
#include "tests/unit/api/tenant_fixtures.h"

using namespace kiln;
using namespace kiln::test;
using json = nlohmann::json;
using V = http::bhttp::verb;

TEST_CASE("ssh_host_keys: shown with SHA256 fingerprints to staff and the node's tenant, not to another tenant",
          "[nodes][tenancy]") {
  ApiHarness h;
  REQUIRE(kiln::api::seed_default_profiles(h.store()));
  make_tenant(h, "acme");
  make_tenant(h, "zeta");
  const std::string acme = h.make_token("tenant", "acme");
  const std::string zeta = h.make_token("tenant", "zeta");

  Node n;
  n.id = new_uuid();
  n.name = "bm-1";
  n.profile = "cpu-lab";
  n.bmc.driver = "fake";
  n.bmc.address = "bmc-1";
  n.tenant = "acme";
  n.provision_state = ProvisionState::kActive;
  EventDraft e;
  e.type = "node.created";
  REQUIRE(h.store().create_node(n, e));

  // None posted yet: an empty list, for staff and the tenant alike.
  Resp none = h.call(V::get, "/v1/nodes/" + n.id, h.admin());
  REQUIRE(none.status == 200);
  CHECK(none.json["ssh_host_keys"] == json::array());
  CHECK(h.call(V::get, "/v1/nodes/" + n.id, acme).json["ssh_host_keys"] == json::array());

  const std::string blob = std::string("\0\0\0\x0bssh-ed25519\0\0\0\x20", 19) + std::string(32, '\x09');
  Result<SshHostKey> key = parse_ssh_host_key("ssh-ed25519", base64_encode(blob));
  REQUIRE(key);
  REQUIRE(h.store().update_node_if(n.id, NodeCondition{}, [&](Node& m) { m.ssh_host_keys = {*key}; return ok_status(); }, {}));

  const json want = json::array({{{"type", "ssh-ed25519"}, {"key", base64_encode(blob)}, {"sha256", key->sha256}}});
  CHECK(key->sha256.rfind("SHA256:", 0) == 0);
  Resp staff = h.call(V::get, "/v1/nodes/" + n.id, h.admin());
  CHECK(staff.json["ssh_host_keys"] == want);
  Resp own = h.call(V::get, "/v1/nodes/" + n.id, acme);
  REQUIRE(own.status == 200);
  CHECK(own.json["ssh_host_keys"] == want);
  // The list view and ?fields= carry it too.
  Resp listed = h.call(V::get, "/v1/nodes?fields=ssh_host_keys", acme);
  INFO(listed.body);
  REQUIRE(listed.status == 200);
  REQUIRE(listed.json["nodes"].size() == 1);
  CHECK(listed.json["nodes"][0]["ssh_host_keys"] == want);
  // Another tenant: the node is not theirs to see at all.
  Resp other = h.call(V::get, "/v1/nodes/" + n.id, zeta);
  CHECK(other.status == 404);
  CHECK(other.body.find(key->sha256) == std::string::npos);
  Resp other_list = h.call(V::get, "/v1/nodes", zeta);
  CHECK(other_list.body.find(key->sha256) == std::string::npos);
}
