#pragma once
// What the tenancy and allocation suites set up through the API: tenants
// with a cpu-lab quota, cpu-lab fake nodes taken to available, ready images,
// allocation requests, and waiting for an allocation's state. Each helper
// REQUIREs inside the calling test case.

#include <chrono>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "common/ids.h"
#include "controller/api/profile_input.h"
#include "tests/support/wait_until.h"
#include "tests/unit/api/api_harness.h"

namespace kiln::test {

// A real ed25519 public key (ssh-keygen -t ed25519).
inline const char* const kTenantKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ci@example";

// The default profiles (cpu-lab among them) in the harness's store: it
// starts with none, and quotas name kilnd's shipped ones.
inline void seed_profiles(ApiHarness& h) { REQUIRE(api::seed_default_profiles(h.store())); }

// A ready raw image called `name`, written straight to the store (its
// ssh_user the model's default unless given); its id.
inline std::string add_ready_image(ApiHarness& h, const std::string& name, bool is_public = true,
                            const std::string& ssh_user = "") {
  Image img;
  img.id = new_uuid();
  img.name = name;
  img.kind = "os";
  img.format = "raw";
  img.sha256 = std::string(64, 'a');
  img.size = 1024;
  img.source = "/images/" + name;
  img.path = img.source;
  if (!ssh_user.empty()) img.ssh_user = ssh_user;
  img.state = "ready";
  img.is_public = is_public;
  REQUIRE(h.store().create_image(img));
  return img.id;
}

// A tenant whose quota is `max_nodes` cpu-lab bare-metal nodes.
inline void make_tenant(ApiHarness& h, const std::string& name, int max_nodes = 4) {
  Resp r = h.call_json(
      http::bhttp::verb::post, "/v1/tenants", h.admin(),
      {{"name", name},
       {"quotas", nlohmann::json::array({{{"profile", "cpu-lab"}, {"kind", "baremetal"}, {"max_nodes", max_nodes}}})}});
  INFO(r.body);
  REQUIRE(r.status == 201);
}

// Enrolls a cpu-lab fake node (its driver options `options`, and a port with
// `mac` unless empty) and takes it to available; its id.
inline std::string available_node(ApiHarness& h, const std::string& name,
                                  nlohmann::json options = nlohmann::json::object(), const std::string& mac = "") {
  using V = http::bhttp::verb;
  nlohmann::json bmc = {{"driver", "fake"}, {"address", "bmc-" + name}, {"username", "root"}, {"password", "pw"},
                        {"options", options}};
  Resp made = h.call_json(V::post, "/v1/nodes", h.admin(), {{"name", name}, {"profile", "cpu-lab"}, {"bmc", bmc}});
  INFO(made.body);
  REQUIRE(made.status == 201);
  std::string id = made.json["id"];
  if (!mac.empty()) REQUIRE(h.call_json(V::post, "/v1/ports", h.admin(), {{"node", id}, {"address", mac}}).status == 201);
  for (const char* target : {"manage", "provide"}) {
    Resp r = h.call_json(V::put, "/v1/nodes/" + id + "/states/provision", h.admin(), {{"target", target}});
    INFO(r.body);
    REQUIRE(r.status == 202);
    h.wait_state(id, std::string(target) == "manage" ? "manageable" : "available");
  }
  return id;
}

// A POST /v1/allocations body: `count` cpu-lab bare-metal nodes with the image
// "ubuntu" and kTenantKey, plus (or overridden by) `extra`'s fields.
inline nlohmann::json allocation_request(int count, nlohmann::json extra = nlohmann::json::object()) {
  nlohmann::json body = {{"profile", "cpu-lab"}, {"kind", "baremetal"}, {"count", count}, {"image", "ubuntu"},
                         {"ssh_keys", nlohmann::json::array({kTenantKey})}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

// Polls the allocation until its state is `state`; returns it.
inline nlohmann::json wait_allocation(ApiHarness& h, const std::string& id, const std::string& state,
                                      std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  nlohmann::json last;
  bool reached = testing::wait_until([&] {
    Resp r = h.call(http::bhttp::verb::get, "/v1/allocations/" + id, h.admin());
    last = r.json;
    return r.status == 200 && r.json["state"] == state;
  }, limit, std::chrono::milliseconds(25));
  INFO(last.dump(2));
  REQUIRE(reached);
  return last;
}

}  // namespace kiln::test
