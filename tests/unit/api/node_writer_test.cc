// The direct node writer must produce exactly the document node_json()
// builds, for every role, detail level and field selection.
#include <catch2/catch.hpp>

#include "controller/api/node_view.h"
#include "controller/api/node_writer.h"

using namespace kiln;
using namespace kiln::api;

namespace {
Node sample(bool sparse) {
  Node n;
  n.id = "4c1f6a52-5d0c-4a8e-9a55-3a4d6f0b7e21";
  n.created_at = 1'700'000'000'123;
  n.updated_at = 1'700'000'100'456;
  n.version = 7;
  if (sparse) return n;
  n.name = "gpu-\"01\"\\\n\t\x01";
  n.kind = NodeKind::kVirtual;
  n.bmc.driver = "redfish";
  n.bmc.address = "https://10.0.0.1";
  n.bmc.username = "root";
  n.bmc.password_sealed = "sealed";
  n.bmc.system_id = "1";
  n.bmc.verify_tls = false;
  n.bmc.options = {{"ca_file", "/etc/ca.pem"}, {"n", 3}};
  n.ports.push_back(Port{"p1", n.id, "52:54:00:aa:bb:01", true, 0});
  n.ports.push_back(Port{"p2", n.id, "52:54:00:aa:bb:02", false, 0});
  n.boot_mode = "bios";
  n.profile = "h100-sxm-8x";
  n.traits = {"nvlink", "ib \"ndr\""};
  n.provision_state = ProvisionState::kDeploying;
  n.target_provision_state = ProvisionState::kActive;
  n.provision_step = "write_image";
  n.power_state = PowerState::kOn;
  n.target_power_state = PowerState::kOff;
  n.maintenance = true;
  n.maintenance_reason = "PSU";
  n.fault = "power_failure";
  n.last_error = "timed out";
  n.tenant = "acme";
  n.allocation = "a1";
  n.last_validation = "r1";
  n.addresses = {"192.0.2.7", "2001:db8::7"};
  n.ssh = "root@192.0.2.7";
  n.ssh_host_keys = {SshHostKey{"ssh-ed25519", "AAAAC3NzaC1lZDI1NTE5AAAAIM6jHR8C6awzVMqmZAWuFW2u1isrYanrS/Ozu11WcKN8",
                                "SHA256:abc+/"},
                     SshHostKey{"ssh-rsa", "AAAAB3NzaC1yc2E=", "SHA256:def"}};
  n.reservation = "op-1";
  n.inventory = {{"gpus", {{{"model", "H100"}}}}, {"memory_mib", 1024}};
  return n;
}
}  // namespace

TEST_CASE("the direct node writer matches node_json for every role, detail and field selection") {
  for (bool sparse : {false, true}) {
    Node n = sample(sparse);
    for (Role role : {Role::kAdmin, Role::kOperator, Role::kTenant}) {
      for (NodeDetail detail : {NodeDetail::kFull, NodeDetail::kList}) {
        std::string out;
        append_node_json(out, n, role, detail, {});
        INFO("sparse=" << sparse << " role=" << static_cast<int>(role) << " out=" << out);
        CHECK(nlohmann::json::parse(out) == node_json(n, role, detail));
        for (const std::set<std::string>& f :
             {std::set<std::string>{"name"}, std::set<std::string>{"bmc", "ports", "traits"},
              std::set<std::string>{"provision_state", "last_error", "version"}}) {
          std::string sel;
          append_node_json(sel, n, role, detail, f);
          CHECK(nlohmann::json::parse(sel) == select_fields(node_json(n, role, detail), f));
        }
      }
    }
  }
}

TEST_CASE("json strings are escaped") {
  std::string out;
  append_json_string(out, std::string("a\"b\\c\n\x1f\xc3\xa9", 9));
  CHECK(nlohmann::json::parse(out) == std::string("a\"b\\c\n\x1f\xc3\xa9", 9));
}
