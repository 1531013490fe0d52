#include <catch2/catch.hpp>

#include "cli/cluster_files.h"

using namespace kiln::cli;

TEST_CASE("cluster files: hostfile and ssh_config and inventory from the nodes' reported addresses") {
  std::vector<ClusterNode> nodes = {
      {"n1", "w0", "workers", "h100-sxm-8x", "baremetal", {"10.0.0.5"}, "ubuntu@10.0.0.5", 8},
      {"n2", "w1", "workers", "h100-sxm-8x", "baremetal", {}, "", 8},
      {"n3", "d0", "dev", "cpu-lab", "virtual", {"10.0.1.9", "fd00::9"}, "debian@10.0.1.9", 0},
  };
  CHECK(hostfile_text(nodes) == "10.0.0.5 slots=8\n10.0.1.9 slots=1\n");
  CHECK(ssh_config_text(nodes) ==
        "Host w0\n  HostName 10.0.0.5\n  User ubuntu\n\n# w1: no address reported yet\n"
        "Host d0\n  HostName 10.0.1.9\n  User debian\n\n");
  CHECK(inventory_text({"workers", "dev"}, nodes) ==
        "[workers]\nw0 ansible_host=10.0.0.5 ansible_user=ubuntu\n# w1: no address reported yet\n\n"
        "[dev]\nd0 ansible_host=10.0.1.9 ansible_user=debian\n\n");
  auto doc = cluster_document("c", nlohmann::json::array(), nodes);
  CHECK(doc["nodes"][1]["addresses"].empty());
  CHECK(doc["nodes"][1]["ssh"].is_null());
  CHECK(doc["nodes"][0]["gpus"] == 8);
}
