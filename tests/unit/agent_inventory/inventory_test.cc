// The inventory collectors against sample trees: a GPU server (2 NVMe, a SATA
// SSD, a 2-port ConnectX with IB ports ACTIVE/DOWN, 8 GPUs on 2 NUMA nodes,
// UEFI) and a QEMU VM (virtio disk and NIC, BIOS); and the output checked
// against schemas/inventory.schema.json.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "agent/inventory/block_devices.h"
#include "agent/inventory/inventory.h"
#include "agent/inventory/network.h"
#include "agent/inventory/platform.h"
#include "tests/unit/agent_inventory/sample_trees.h"

using nlohmann::json;
using kiln::test::TempTree;

namespace {

json inspect(const TempTree& t) {
  kiln::agent::InventoryOptions o;
  o.root = t.root();
  o.nvml_library = "";  // no NVML in tests
  o.probe_cpuid = false;
  o.agent_version = "test";
  return kiln::agent::collect_inventory(o);
}

// A small JSON Schema checker for the keywords schemas/inventory.schema.json
// uses: type, required, properties, items, enum, const, minimum, $ref to $defs.
void check_schema(const json& schema, const json& root_schema, const json& v, const std::string& where,
                  std::vector<std::string>& errors) {
  const json* s = &schema;
  if (s->contains("$ref")) {
    const std::string ref = (*s)["$ref"];
    REQUIRE(ref.rfind("#/$defs/", 0) == 0);
    s = &root_schema["$defs"][ref.substr(8)];
  }
  if (s->contains("type")) {
    auto matches = [&](const std::string& t) {
      if (t == "object") return v.is_object();
      if (t == "array") return v.is_array();
      if (t == "string") return v.is_string();
      if (t == "integer") return v.is_number_integer();
      if (t == "number") return v.is_number();
      if (t == "boolean") return v.is_boolean();
      if (t == "null") return v.is_null();
      return false;
    };
    bool ok = false;
    if ((*s)["type"].is_string()) ok = matches((*s)["type"]);
    else for (const auto& t : (*s)["type"]) ok = ok || matches(t);
    if (!ok) {
      errors.push_back(where + ": type " + (*s)["type"].dump() + " but value " + v.dump());
      return;
    }
  }
  if (s->contains("enum")) {
    bool found = false;
    for (const auto& e : (*s)["enum"]) found = found || e == v;
    if (!found) errors.push_back(where + ": " + v.dump() + " not in enum");
  }
  if (s->contains("const") && (*s)["const"] != v) errors.push_back(where + ": not the const value");
  if (s->contains("minimum") && v.is_number() && v.get<double>() < (*s)["minimum"].get<double>())
    errors.push_back(where + ": below minimum");
  if (v.is_object()) {
    if (s->contains("required"))
      for (const auto& r : (*s)["required"])
        if (!v.contains(r.get<std::string>())) errors.push_back(where + ": missing required " + r.get<std::string>());
    if (s->contains("properties"))
      for (const auto& [k, sub] : (*s)["properties"].items())
        if (v.contains(k)) check_schema(sub, root_schema, v[k], where + "/" + k, errors);
  }
  if (v.is_array() && s->contains("items"))
    for (std::size_t i = 0; i < v.size(); ++i)
      check_schema((*s)["items"], root_schema, v[i], where + "/" + std::to_string(i), errors);
}

std::vector<std::string> schema_errors(const json& inventory) {
  std::ifstream in(KILN_INVENTORY_SCHEMA);
  REQUIRE(in);
  const json schema = json::parse(in);
  std::vector<std::string> errors;
  check_schema(schema, schema, inventory, "", errors);
  return errors;
}

const json& by_name(const json& list, const std::string& name) {
  for (const auto& e : list)
    if (e.value("name", "") == name) return e;
  FAIL("no entry named " << name);
  static json none;
  return none;
}

}  // namespace

TEST_CASE("server tree: CPU, memory, NUMA, DMI, boot mode", "[inventory]") {
  TempTree t;
  kiln::test::write_server_tree(t);
  const json inv = inspect(t);
  CHECK(inv["cpu"]["model"] == "Intel(R) Xeon(R) Platinum 8480+");
  CHECK(inv["cpu"]["vendor"] == "GenuineIntel");
  CHECK(inv["cpu"]["sockets"] == 2);
  CHECK(inv["cpu"]["cores"] == 4);
  CHECK(inv["cpu"]["threads"] == 8);
  CHECK(inv["cpu"]["flags"] == json({"aes", "amx_bf16", "amx_tile", "avx", "avx2", "avx512bw", "avx512f", "pdpe1gb", "sse4_2", "vmx"}));
  CHECK(inv["memory"]["total_bytes"] == 2113929216ull * 1024);
  CHECK(inv["memory"]["physical_bytes"] == 2ull * 1024 * 1024 * 1024 * 1024);
  CHECK(inv["memory"]["dimms"] == 2);
  REQUIRE(inv["numa"].size() == 2);
  CHECK(inv["numa"][1]["node"] == 1);
  CHECK(inv["numa"][1]["cpulist"] == "4-7");
  CHECK(inv["numa"][1]["memory_bytes"] == 1056964608ull * 1024);
  CHECK(inv["dmi"]["sys_vendor"] == "Supermicro");
  CHECK(inv["dmi"]["product_serial"] == "S928374");
  CHECK(inv["dmi"]["board_name"] == "X13DEG-OAD");
  CHECK(inv["dmi"]["chassis_type"].is_null());
  CHECK(inv["boot_mode"] == "uefi");
  CHECK(inv["hypervisor"]["virtual"] == false);
  CHECK(inv["hypervisor"]["vendor"].is_null());
  CHECK(inv["kernel"] == "6.1.0-18-amd64");
}

TEST_CASE("server tree: two NVMe and a SATA SSD, pseudo devices skipped", "[inventory][disks]") {
  TempTree t;
  kiln::test::write_server_tree(t);
  const json disks = inspect(t)["disks"];
  REQUIRE(disks.size() == 3);
  CHECK(disks[0]["name"] == "nvme0n1");
  CHECK(disks[1]["name"] == "nvme1n1");
  CHECK(disks[2]["name"] == "sda");
  const json& n0 = disks[0];
  CHECK(n0["size_bytes"] == 7501476528ull * 512);
  CHECK(n0["model"] == "SAMSUNG MZQL23T8HCLS-00A07");
  CHECK(n0["serial"] == "S64HNE0T500001");
  CHECK(n0["wwn"] == "eui.36344630525000010025384500000001");
  CHECK(n0["nvme"] == true);
  CHECK(n0["rotational"] == false);
  CHECK(n0["removable"] == false);
  CHECK(n0["logical_block_size"] == 512);
  CHECK(n0["physical_block_size"] == 4096);
  CHECK(n0["path"] == "/dev/nvme0n1");
  const json& sda = disks[2];
  CHECK(sda["nvme"] == false);
  CHECK(sda["model"] == "INTEL SSDSC2KB48");  // SCSI padding trimmed
  CHECK(sda["vendor"] == "ATA");
  CHECK(sda["wwn"] == "naa.55cd2e415125a4e1");
  CHECK(sda["serial"] == "PHYS1234005Y480BGN");  // from the VPD page 0x80
  CHECK(sda["size_bytes"] == 937703088ull * 512);
}

TEST_CASE("server tree: NICs with driver, speed, carrier and PCI address, RDMA ports", "[inventory][network]") {
  TempTree t;
  kiln::test::write_server_tree(t);
  const json inv = inspect(t);
  const json& nics = inv["nics"];
  REQUIRE(nics.size() == 3);  // not lo, docker0 or bond0
  const json& p0 = by_name(nics, "ens1f0np0");
  CHECK(p0["mac"] == "b8:3f:d2:00:00:01");  // lower-cased
  CHECK(p0["driver"] == "mlx5_core");
  CHECK(p0["speed_mbps"] == 400000);
  CHECK(p0["carrier"] == true);
  CHECK(p0["pci_address"] == "0000:1a:00.0");
  CHECK(p0["mtu"] == 9000);
  const json& p1 = by_name(nics, "ens1f1np1");
  CHECK(p1["speed_mbps"].is_null());  // -1 while down
  CHECK(p1["carrier"] == false);
  CHECK(p1["pci_address"] == "0000:1a:00.1");
  CHECK(by_name(nics, "eno1")["driver"] == "igb");

  const json& rdma = inv["rdma"];
  REQUIRE(rdma.size() == 2);
  CHECK(rdma[0]["name"] == "mlx5_0");
  CHECK(rdma[0]["pci_address"] == "0000:1a:00.0");
  CHECK(rdma[0]["fw_ver"] == "28.39.1002");
  REQUIRE(rdma[0]["ports"].size() == 1);
  CHECK(rdma[0]["ports"][0]["port"] == 1);
  CHECK(rdma[0]["ports"][0]["state"] == "ACTIVE");
  CHECK(rdma[0]["ports"][0]["phys_state"] == "LinkUp");
  CHECK(rdma[0]["ports"][0]["rate"] == "400 Gb/sec (4X NDR)");
  CHECK(rdma[0]["ports"][0]["rate_gbps"] == 400.0);
  CHECK(rdma[0]["ports"][0]["link_layer"] == "InfiniBand");
  CHECK(rdma[1]["ports"][0]["state"] == "DOWN");

  // Lookup MACs: physical interfaces only, in name order, de-duplicated.
  CHECK(kiln::agent::lookup_macs(t.root()) ==
        std::vector<std::string>{"3c:ec:ef:00:00:03", "b8:3f:d2:00:00:01", "b8:3f:d2:00:00:02"});
}

TEST_CASE("server tree: eight GPUs on two NUMA nodes, NVSwitch left out", "[inventory][gpu]") {
  TempTree t;
  kiln::test::write_server_tree(t);
  const json gpus = inspect(t)["gpus"];
  REQUIRE(gpus.size() == 8);
  int node0 = 0, node1 = 0;
  for (const auto& g : gpus) {
    CHECK(g["vendor_id"] == "0x10de");
    CHECK(g["device_id"] == "0x2330");
    CHECK(g["class"] == "0x030200");
    CHECK(g["model"].is_null());  // no NVML here
    (g["numa_node"] == 0 ? node0 : node1)++;
  }
  CHECK(node0 == 4);
  CHECK(node1 == 4);
  CHECK(gpus[0]["pci_address"] == "0000:18:00.0");
  CHECK(gpus[7]["numa_node"] == 1);
}

TEST_CASE("QEMU VM tree: virtio disk and NIC, hypervisor from cpuinfo and DMI, BIOS boot", "[inventory][vm]") {
  TempTree t;
  kiln::test::write_vm_tree(t);
  const json inv = inspect(t);
  CHECK(inv["cpu"]["threads"] == 4);
  CHECK(inv["cpu"]["sockets"] == 1);
  CHECK(inv["cpu"]["cores"] == 4);
  CHECK(inv["memory"]["total_bytes"] == 8129812ull * 1024);
  CHECK(inv["memory"]["physical_bytes"].is_null());
  REQUIRE(inv["disks"].size() == 1);
  const json& vda = inv["disks"][0];
  CHECK(vda["name"] == "vda");
  CHECK(vda["serial"] == "kiln-vm-disk0");
  CHECK(vda["size_bytes"] == 41943040ull * 512);
  CHECK(vda["rotational"] == true);
  CHECK(vda["nvme"] == false);
  CHECK(vda["pci_address"] == "0000:00:05.0");
  REQUIRE(inv["nics"].size() == 1);
  const json& nic = inv["nics"][0];
  CHECK(nic["mac"] == "52:54:00:12:34:56");
  CHECK(nic["driver"] == "virtio_net");
  CHECK(nic["pci_address"] == "0000:00:03.0");
  CHECK(nic["speed_mbps"].is_null());
  CHECK(nic["carrier"] == true);
  CHECK(inv["hypervisor"]["virtual"] == true);
  CHECK(inv["hypervisor"]["vendor"] == "kvm");
  CHECK(inv["hypervisor"]["evidence"] == json({"cpuinfo", "dmi"}));
  CHECK(inv["boot_mode"] == "bios");
  CHECK(inv["gpus"].empty());
  CHECK(inv["rdma"].empty());
}

TEST_CASE("an empty tree still yields a document with every required key", "[inventory]") {
  TempTree t;
  const json inv = inspect(t);
  CHECK(inv["cpu"]["threads"] == 0);
  CHECK(inv["memory"]["total_bytes"].is_null());
  CHECK(inv["disks"].empty());
  CHECK(inv["boot_mode"] == "bios");
  CHECK(schema_errors(inv).empty());
}

TEST_CASE("inventories of both sample trees match schemas/inventory.schema.json", "[inventory][schema]") {
  for (int vm = 0; vm < 2; ++vm) {
    TempTree t;
    if (vm) kiln::test::write_vm_tree(t);
    else kiln::test::write_server_tree(t);
    const auto errors = schema_errors(inspect(t));
    for (const auto& e : errors) UNSCOPED_INFO(e);
    CHECK(errors.empty());
  }
  // And the checker can fail: a string where the schema wants an integer.
  TempTree t;
  kiln::test::write_vm_tree(t);
  json bad = inspect(t);
  bad["cpu"]["threads"] = "four";
  bad.erase("boot_mode");
  CHECK(schema_errors(bad).size() == 2);
}

TEST_CASE("SMBIOS memory devices: MB, KB granularity, extended size, empty slots", "[inventory][smbios]") {
  auto entry = [](unsigned size_field, unsigned ext_mb, unsigned len) {
    std::string s(len, '\0');
    s[0] = 17;
    s[1] = static_cast<char>(len);
    s[0x0C] = static_cast<char>(size_field & 0xFF);
    s[0x0D] = static_cast<char>(size_field >> 8);
    if (len >= 0x20)
      for (int i = 0; i < 4; ++i) s[0x1C + i] = static_cast<char>((ext_mb >> (8 * i)) & 0xFF);
    return s + std::string("\0\0", 2);  // no strings: two NULs
  };
  std::string table = std::string("\x00\x18\x00\x00", 4) + std::string(0x14, '\x01') + "BIOS" + std::string("\0\0", 2);
  table += entry(16384, 0, 0x15);              // 16 GiB in MB
  table += entry(0x8000 | 512, 0, 0x15);       // 512 KiB (granularity bit)
  table += entry(0x7FFF, 65536, 0x22);         // 64 GiB extended
  table += entry(0xFFFF, 0, 0x15);             // unknown: not counted
  table += entry(0, 0, 0x15);                  // empty slot
  auto total = kiln::agent::smbios_memory_total(table);
  REQUIRE(total);
  CHECK(total->count == 3);
  CHECK(total->bytes == 16ull * 1024 * 1024 * 1024 + 512 * 1024 + 64ull * 1024 * 1024 * 1024);
  CHECK_FALSE(kiln::agent::smbios_memory_total(std::string("\x7f\x04\x00\x00\x00\x00", 6)));
}

TEST_CASE("target disk: smallest non-removable writable disk that fits", "[inventory][disks]") {
  using kiln::agent::BlockDisk;
  auto disk = [](std::string name, std::uint64_t size, bool removable = false, bool ro = false) {
    BlockDisk d;
    d.name = name;
    d.path = "/dev/" + name;
    d.size_bytes = size;
    d.removable = removable;
    d.read_only = ro;
    return d;
  };
  const std::uint64_t G = 1000ull * 1000 * 1000;
  const std::vector<BlockDisk> disks = {disk("nvme0n1", 3840 * G), disk("nvme1n1", 1920 * G), disk("sda", 480 * G),
                                        disk("sdb", 16 * G, true), disk("sdc", 100 * G, false, true)};
  CHECK(kiln::agent::choose_target_disk(disks, 10 * G)->name == "sda");
  CHECK(kiln::agent::choose_target_disk(disks, 500 * G)->name == "nvme1n1");
  CHECK(kiln::agent::choose_target_disk(disks, 2000 * G)->name == "nvme0n1");
  CHECK_FALSE(kiln::agent::choose_target_disk(disks, 5000 * G));

  TempTree t;
  kiln::test::write_server_tree(t);
  CHECK(kiln::agent::choose_target_disk(kiln::agent::list_disks(t.root()), 1)->name == "sda");
}

TEST_CASE("kiln-agent inspect --root prints the inventory", "[inventory][cli]") {
  TempTree t;
  kiln::test::write_vm_tree(t);
  const std::string out = t.path("out.json");
  const std::string cmd = std::string(KILN_AGENT_BIN) + " inspect --nvml-library '' --root " + t.root() + " > " + out;
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream in(out);
  const json inv = json::parse(in);
  CHECK(inv["disks"][0]["name"] == "vda");
  CHECK(inv["hypervisor"]["vendor"] == "kvm");
}
