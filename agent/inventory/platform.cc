#include "agent/inventory/platform.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "agent/inventory/block_devices.h"
#include "agent/validate/checks/nvml.h"
#include "agent/validate/checks/sysfs.h"
#include "agent/validate/parsers/text_scan.h"

namespace kiln::agent {

namespace fs = std::filesystem;

namespace {

nlohmann::json line_or_null(const fs::path& p) {
  auto v = read_first_line(p);
  if (!v) return nullptr;
  return *v;
}

// "MemTotal:       263895376 kB" in a meminfo-style text -> bytes.
std::optional<std::uint64_t> meminfo_kb(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto pos = line.find(key + ":");
    if (pos == std::string::npos) continue;
    std::uint64_t kb = 0;
    if (std::sscanf(line.c_str() + pos + key.size() + 1, " %lu", &kb) == 1) return kb * 1024;
  }
  return std::nullopt;
}

// Flags worth reporting: what instance types, schedulers and validation care
// about, not the 150 the kernel lists.
const std::set<std::string>& relevant_flags() {
  static const std::set<std::string> kFlags = {
      "avx",        "avx2",      "fma",        "avx512f",     "avx512bw",   "avx512cd",  "avx512dq",
      "avx512vl",   "avx512_bf16", "avx512_fp16", "avx512_vnni", "amx_tile", "amx_bf16",  "amx_int8",
      "aes",        "sha_ni",    "sse4_2",     "vmx",         "svm",        "hypervisor", "pdpe1gb",
      "constant_tsc", "nonstop_tsc", "rdrand",  "sev",         "sev_es",     "tdx_guest", "x2apic"};
  return kFlags;
}

}  // namespace

nlohmann::json collect_cpu(const std::string& root) {
  nlohmann::json cpu = {{"model", nullptr}, {"vendor", nullptr}, {"sockets", 0},   {"cores", 0},
                        {"threads", 0},     {"flags", nlohmann::json::array()}, {"architecture", nullptr}};
  auto text = read_text_file(host_path(root, "/proc/cpuinfo"));
  if (!text) return cpu;
  std::set<std::string> sockets;
  std::set<std::pair<std::string, std::string>> cores;
  std::set<std::string> flags;
  int threads = 0;
  std::string physical_id, core_id;
  bool any_core_id = false;
  std::istringstream in(*text);
  std::string line;
  auto end_processor = [&] {
    if (!physical_id.empty()) sockets.insert(physical_id);
    if (!core_id.empty()) cores.insert({physical_id, core_id});
    physical_id.clear();
    core_id.clear();
  };
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = std::string(scan::trim(line.substr(0, colon)));
    const std::string value = std::string(scan::trim(line.substr(colon + 1)));
    if (key == "processor") {
      end_processor();
      ++threads;
    } else if (key == "model name" && cpu["model"].is_null()) {
      cpu["model"] = value;
    } else if ((key == "vendor_id" || key == "CPU implementer") && cpu["vendor"].is_null()) {
      cpu["vendor"] = value;
    } else if (key == "physical id") {
      physical_id = value;
    } else if (key == "core id") {
      core_id = value;
      any_core_id = true;
    } else if ((key == "flags" || key == "Features") && flags.empty()) {
      std::istringstream f(value);
      std::string flag;
      while (f >> flag)
        if (relevant_flags().count(flag)) flags.insert(flag);
    }
  }
  end_processor();
  cpu["threads"] = threads;
  cpu["sockets"] = sockets.empty() ? (threads > 0 ? 1 : 0) : static_cast<int>(sockets.size());
  cpu["cores"] = any_core_id ? static_cast<int>(cores.size()) : threads;
  cpu["flags"] = std::vector<std::string>(flags.begin(), flags.end());
#if defined(__x86_64__)
  cpu["architecture"] = "x86_64";
#elif defined(__aarch64__)
  cpu["architecture"] = "aarch64";
#endif
  return cpu;
}

std::optional<DimmTotal> smbios_memory_total(std::string_view t) {
  DimmTotal total;
  bool any = false;
  std::size_t pos = 0;
  auto u16 = [&](std::size_t at) { return static_cast<unsigned>(static_cast<unsigned char>(t[at])) |
                                          static_cast<unsigned>(static_cast<unsigned char>(t[at + 1])) << 8; };
  auto u32 = [&](std::size_t at) { return static_cast<std::uint64_t>(u16(at)) | static_cast<std::uint64_t>(u16(at + 2)) << 16; };
  while (pos + 4 <= t.size()) {
    const unsigned type = static_cast<unsigned char>(t[pos]);
    const unsigned len = static_cast<unsigned char>(t[pos + 1]);
    if (len < 4 || pos + len > t.size()) break;
    if (type == 17 && len >= 0x0E) {
      any = true;
      const unsigned size = u16(pos + 0x0C);
      std::uint64_t bytes = 0;
      if (size == 0x7FFF && len >= 0x20) bytes = (u32(pos + 0x1C) & 0x7FFFFFFF) * 1024ull * 1024ull;
      else if (size != 0 && size != 0xFFFF)
        bytes = (size & 0x8000) ? static_cast<std::uint64_t>(size & 0x7FFF) * 1024ull
                                : static_cast<std::uint64_t>(size) * 1024ull * 1024ull;
      if (bytes > 0) {
        total.bytes += bytes;
        ++total.count;
      }
    }
    if (type == 127) break;  // end-of-table
    // Skip the formatted area, then the string set (ends with two NULs).
    std::size_t s = pos + len;
    while (s + 1 < t.size() && !(t[s] == '\0' && t[s + 1] == '\0')) ++s;
    pos = s + 2;
  }
  if (!any) return std::nullopt;
  return total;
}

nlohmann::json collect_memory(const std::string& root) {
  nlohmann::json mem = {{"total_bytes", nullptr}, {"physical_bytes", nullptr}, {"dimms", nullptr}};
  if (auto text = read_text_file(host_path(root, "/proc/meminfo")))
    if (auto total = meminfo_kb(*text, "MemTotal")) mem["total_bytes"] = *total;
  if (auto table = read_text_file(host_path(root, "/sys/firmware/dmi/tables/DMI")))
    if (auto dimms = smbios_memory_total(*table); dimms && dimms->count > 0) {
      mem["physical_bytes"] = dimms->bytes;
      mem["dimms"] = dimms->count;
    }
  return mem;
}

nlohmann::json collect_numa(const std::string& root) {
  nlohmann::json out = nlohmann::json::array();
  std::map<int, fs::path> nodes;
  std::error_code ec;
  for (fs::directory_iterator it(host_path(root, "/sys/devices/system/node"), ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("node", 0) != 0 || name.size() == 4 || !std::isdigit(static_cast<unsigned char>(name[4]))) continue;
    nodes[std::atoi(name.c_str() + 4)] = it->path();
  }
  for (const auto& [id, p] : nodes) {
    nlohmann::json n = {{"node", id}, {"cpulist", read_first_line(p / "cpulist").value_or("")}, {"memory_bytes", nullptr}};
    if (auto text = read_text_file(p / "meminfo"))
      if (auto total = meminfo_kb(*text, "MemTotal")) n["memory_bytes"] = *total;
    out.push_back(std::move(n));
  }
  return out;
}

nlohmann::json collect_dmi(const std::string& root) {
  const fs::path dir = host_path(root, "/sys/class/dmi/id");
  nlohmann::json dmi = nlohmann::json::object();
  for (const char* key : {"sys_vendor", "product_name", "product_version", "product_serial", "product_uuid",
                          "board_vendor", "board_name", "board_serial", "bios_vendor", "bios_version",
                          "bios_date", "chassis_type", "chassis_vendor"})
    dmi[key] = line_or_null(dir / key);
  return dmi;
}

nlohmann::json collect_hypervisor(const std::string& root, const nlohmann::json& dmi, bool probe_cpuid) {
  std::string vendor;
  nlohmann::json evidence = nlohmann::json::array();
#if defined(__x86_64__) || defined(__i386__)
  if (probe_cpuid) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 31))) {
      evidence.push_back("cpuid");
      __cpuid(0x40000000, a, b, c, d);
      char sig[13] = {};
      std::memcpy(sig, &b, 4);
      std::memcpy(sig + 4, &c, 4);
      std::memcpy(sig + 8, &d, 4);
      const std::string s(sig);
      if (s == "KVMKVMKVM") vendor = "kvm";
      else if (s == "Microsoft Hv") vendor = "hyperv";
      else if (s == "VMwareVMware") vendor = "vmware";
      else if (s == "XenVMMXenVMM") vendor = "xen";
      else if (s == "TCGTCGTCGTCG") vendor = "qemu";
      else if (s.find("VBox") != std::string::npos) vendor = "virtualbox";
    }
  }
#else
  (void)probe_cpuid;
#endif
  if (auto text = read_text_file(host_path(root, "/proc/cpuinfo")))
    if (text->find(" hypervisor") != std::string::npos) evidence.push_back("cpuinfo");
  if (auto type = read_first_line(host_path(root, "/sys/hypervisor/type")); type && !type->empty()) {
    evidence.push_back("sys_hypervisor");
    if (vendor.empty()) vendor = scan::to_lower(*type);
  }
  std::string hints;
  for (const char* k : {"sys_vendor", "product_name", "bios_vendor", "board_vendor", "chassis_vendor"})
    if (dmi.contains(k) && dmi[k].is_string()) hints += scan::to_lower(dmi[k].get<std::string>()) + " ";
  struct Hint { const char* needle; const char* vendor; };
  static const Hint kHints[] = {{"qemu", "kvm"},       {"kvm", "kvm"},           {"vmware", "vmware"},
                                {"virtualbox", "virtualbox"}, {"innotek", "virtualbox"}, {"xen", "xen"},
                                {"bochs", "kvm"},      {"openstack", "kvm"},     {"virtual machine", "hyperv"},
                                {"amazon ec2", "kvm"}, {"google compute engine", "kvm"}};
  for (const auto& h : kHints)
    if (hints.find(h.needle) != std::string::npos) {
      evidence.push_back("dmi");
      if (vendor.empty()) vendor = h.vendor;
      break;
    }
  return {{"virtual", !evidence.empty()},
          {"vendor", vendor.empty() ? nlohmann::json(nullptr) : nlohmann::json(vendor)},
          {"evidence", evidence}};
}

std::string collect_boot_mode(const std::string& root) {
  std::error_code ec;
  return fs::is_directory(host_path(root, "/sys/firmware/efi"), ec) ? "uefi" : "bios";
}

nlohmann::json collect_gpus(const std::string& root, const std::string& nvml_library) {
  nlohmann::json out = nlohmann::json::array();
  std::vector<PciDevice> gpus;
  for (auto& d : list_pci_devices(host_path(root, "/sys")))
    if (is_nvidia_gpu(d)) gpus.push_back(std::move(d));
  std::map<std::string, GpuDeviceInfo> by_address;
  if (!gpus.empty() && !nvml_library.empty()) {
    if (auto snap = read_nvml(nvml_library)) {
      for (auto& dev : snap->devices) {
        // NVML: "00000000:1B:00.0" (32-bit domain); sysfs: "0000:1b:00.0".
        std::string id = scan::to_lower(dev.pci_bus_id);
        if (id.size() == 16) id = id.substr(4);
        by_address[id] = std::move(dev);
      }
    }
  }
  char hex[16];
  for (const auto& g : gpus) {
    nlohmann::json j;
    j["pci_address"] = g.address;
    std::snprintf(hex, sizeof hex, "0x%04x", g.vendor);
    j["vendor_id"] = hex;
    std::snprintf(hex, sizeof hex, "0x%04x", g.device);
    j["device_id"] = hex;
    std::snprintf(hex, sizeof hex, "0x%06x", g.class_code);
    j["class"] = hex;
    j["numa_node"] = g.numa_node && *g.numa_node >= 0 ? nlohmann::json(*g.numa_node) : nlohmann::json(nullptr);
    auto it = by_address.find(g.address);
    j["model"] = it != by_address.end() ? nlohmann::json(it->second.name) : nlohmann::json(nullptr);
    j["memory_bytes"] = it != by_address.end() ? nlohmann::json(it->second.memory_total_bytes) : nlohmann::json(nullptr);
    j["uuid"] = it != by_address.end() ? nlohmann::json(it->second.uuid) : nlohmann::json(nullptr);
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace kiln::agent
