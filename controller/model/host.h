#pragma once
// Hypervisor hosts and the virtual machines kilnd places on them.
// Plain data, like node.h: the store keeps it, controller/hosts fills and
// reads it, the API decides what each role sees.
//
// Capacity accounting. A host's `capacity` is what discovery found (CPUs and
// NUMA cells, memory, hugepages, NVIDIA GPUs with their IOMMU groups and mdev
// types). What is booked lives in HostReservation rows, one per booked thing:
// a pinned CPU or a GPU is one row whose `item` names it (so a UNIQUE index
// makes double booking impossible even for a buggy caller), amounts (vcpus,
// memory, hugepages, disk) are one row per node with `item` = the node id.
// Free capacity is always capacity minus the rows, computed inside the writer
// transaction that adds rows (NodeStore::place_virtual_node).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "drivers/host_facts.h"  // HostCapacity: what discovery finds on a host

namespace kiln {

// Host options accepted at registration (POST /v1/hosts "options").
struct HostOptions {
  // Run guests under TCG even when the host offers kvm: on some machines
  // /dev/kvm exists but KVM hangs guests (the lab forces this).
  bool force_tcg = false;
  // Libvirt network or Linux bridge the guests' NIC joins (bridge wins).
  std::string network = "default";
  std::string bridge;
  // Storage pool for guest disks: used when it exists, otherwise created as
  // a directory pool at pool_dir.
  std::string pool = "kiln";
  std::string pool_dir = "/var/lib/kiln/pool";
  // vCPUs per host CPU for unpinned guests (pinned guests take whole CPUs).
  double cpu_allocation_ratio = 1.0;
  // Memory kept for the host itself, never booked.
  int64_t reserved_memory_mib = 0;
  // Firmware for UEFI guests (Debian's ovmf package).
  std::string ovmf_code = "/usr/share/OVMF/OVMF_CODE_4M.fd";
  std::string ovmf_vars = "/usr/share/OVMF/OVMF_VARS_4M.fd";
  // Where serial console logs are written on the host.
  std::string console_dir = "/var/log/kiln";
};

struct Host {
  std::string id;                 // UUID
  std::string name;               // unique
  std::string uri;                // libvirt URI
  std::string username;
  std::string password_sealed;    // SecretBox; never plaintext here
  HostOptions options;
  std::string status = "connecting";  // connecting | ready | unreachable
  std::string status_reason;      // libvirt's message when unreachable
  HostCapacity capacity;          // as last discovered
  int64_t discovered_at = 0;
  int64_t created_at = 0;
  int64_t updated_at = 0;
};

struct HostReservation {
  std::string host_id;
  std::string node_id;
  std::string kind;               // cpu | vcpus | memory | hugepages | gpu | disk
  std::string item;               // CPU id or GPU address; the node id for amounts
  int64_t amount = 1;
  bool operator==(const HostReservation&) const = default;
};

// What a virtual node asks for: the profile's `virtual` block.
struct Flavour {
  int vcpus = 1;
  int64_t memory_mib = 1024;
  int gpus = 0;
  int64_t disk_gib = 10;
  bool hugepages = false;
  bool numa_pin = false;
  std::string gpu_mdev_type;      // optional: a vGPU type instead of passthrough
};

// Where a virtual node was placed and what it holds there.
struct Placement {
  std::string host_id;
  int numa_cell = -1;             // the cell it is pinned to; -1 = not pinned
  std::vector<int> cpus;          // pinned host CPUs (numa_pin), else empty
  std::vector<std::string> gpus;  // GPU PCI addresses
  Flavour flavour;
};

// A placement and the reservation rows that hold it (controller/hosts/placement.h
// computes it; the store inserts the rows in the transaction that checked them).
struct PlacementPlan {
  Placement placement;
  std::vector<HostReservation> rows;
};

// A virtual node's machine: kept from placement until teardown finishes, so a
// teardown that fails half-way knows what is left to remove.
struct VirtualMachine {
  std::string node_id;
  std::string host_id;
  std::string domain;             // libvirt domain name
  std::string mac;                // the NIC's MAC (a port of the node)
  std::string volume;             // the disk volume's path on the host
  std::string nvram;              // UEFI vars file on the host ("" for BIOS)
  std::string state = "placed";   // placed | defined | removing
  Placement placement;
  int64_t created_at = 0;
  int64_t updated_at = 0;
};

// --- JSON (store columns, API documents) ---

inline void to_json(nlohmann::json& j, const HostOptions& o) {
  j = {{"force_tcg", o.force_tcg},
       {"network", o.network},
       {"bridge", o.bridge},
       {"pool", o.pool},
       {"pool_dir", o.pool_dir},
       {"cpu_allocation_ratio", o.cpu_allocation_ratio},
       {"reserved_memory_mib", o.reserved_memory_mib},
       {"ovmf_code", o.ovmf_code},
       {"ovmf_vars", o.ovmf_vars},
       {"console_dir", o.console_dir}};
}
inline void from_json(const nlohmann::json& j, HostOptions& o) {
  HostOptions d;
  o.force_tcg = j.value("force_tcg", d.force_tcg);
  o.network = j.value("network", d.network);
  o.bridge = j.value("bridge", d.bridge);
  o.pool = j.value("pool", d.pool);
  o.pool_dir = j.value("pool_dir", d.pool_dir);
  o.cpu_allocation_ratio = j.value("cpu_allocation_ratio", d.cpu_allocation_ratio);
  o.reserved_memory_mib = j.value("reserved_memory_mib", d.reserved_memory_mib);
  o.ovmf_code = j.value("ovmf_code", d.ovmf_code);
  o.ovmf_vars = j.value("ovmf_vars", d.ovmf_vars);
  o.console_dir = j.value("console_dir", d.console_dir);
}
inline void to_json(nlohmann::json& j, const Flavour& f) {
  j = {{"vcpus", f.vcpus},   {"memory_mib", f.memory_mib}, {"gpus", f.gpus},
       {"disk_gib", f.disk_gib}, {"hugepages", f.hugepages}, {"numa_pin", f.numa_pin}};
  if (!f.gpu_mdev_type.empty()) j["gpu_mdev_type"] = f.gpu_mdev_type;
}
inline void from_json(const nlohmann::json& j, Flavour& f) {
  Flavour d;
  f.vcpus = j.value("vcpus", d.vcpus);
  f.memory_mib = j.value("memory_mib", d.memory_mib);
  f.gpus = j.value("gpus", d.gpus);
  f.disk_gib = j.value("disk_gib", d.disk_gib);
  f.hugepages = j.value("hugepages", d.hugepages);
  f.numa_pin = j.value("numa_pin", d.numa_pin);
  f.gpu_mdev_type = j.value("gpu_mdev_type", "");
}
inline void to_json(nlohmann::json& j, const Placement& p) {
  j = {{"host_id", p.host_id}, {"numa_cell", p.numa_cell}, {"cpus", p.cpus}, {"gpus", p.gpus},
       {"flavour", p.flavour}};
}
inline void from_json(const nlohmann::json& j, Placement& p) {
  p.host_id = j.value("host_id", "");
  p.numa_cell = j.value("numa_cell", -1);
  p.cpus = j.value("cpus", std::vector<int>{});
  p.gpus = j.value("gpus", std::vector<std::string>{});
  if (j.contains("flavour")) p.flavour = j["flavour"].get<Flavour>();
}

}  // namespace kiln
