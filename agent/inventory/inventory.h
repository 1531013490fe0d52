#pragma once
// The `inspect` command: everything the agent can learn about the node from
// the kernel's view (sysfs, procfs, SMBIOS) and NVML, as one JSON document
// matching schemas/inventory.schema.json. Blocking (file reads, and NVML may
// take seconds); run it on the command worker thread.

#include <string>

#include <nlohmann/json.hpp>

namespace kiln::agent {

struct InventoryOptions {
  // Filesystem prefix of the tree to read: "" is the running host; tests
  // point it at a sample /sys and /proc they wrote.
  std::string root;
  // NVML for GPU model and memory; "" skips NVML (tests, nodes without GPUs).
  std::string nvml_library = "libnvidia-ml.so.1";
  // Execute CPUID for the hypervisor bit. Only true for the host itself: a
  // sample tree's answer must not depend on where the test runs.
  bool probe_cpuid = true;
  std::string agent_version;
};

// Collects the inventory. Never fails: what cannot be read is null or empty.
nlohmann::json collect_inventory(const InventoryOptions& options);

}  // namespace kiln::agent
