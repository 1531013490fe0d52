#pragma once
// Reading the kernel's view of the node: sysfs, procfs and the kernel log.
// Every path is rooted in HostPaths so tests point the checks at sample trees
// they write into a temporary directory. All reads are blocking file I/O.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace kiln::agent {

struct HostPaths {
  std::string sys = "/sys";          // sysfs mount
  std::string proc = "/proc";        // procfs mount
  std::string kmsg = "/dev/kmsg";    // kernel log device (or a file holding kmsg/dmesg text)
  bool dmesg_fallback = true;        // run `dmesg` when `kmsg` cannot be read
};

// The first line of a small file with surrounding whitespace removed;
// nullopt when it cannot be read.
std::optional<std::string> read_first_line(const std::filesystem::path& p);

// The entries of `dir`, sorted by path; empty when it cannot be read.
std::vector<std::filesystem::path> sorted_children(const std::filesystem::path& dir);

// The whole of a (small) file; nullopt when it cannot be opened.
std::optional<std::string> read_text_file(const std::filesystem::path& p);

struct PciDevice {
  std::string address;                 // "0000:1b:00.0"
  unsigned vendor = 0;                 // 0x10de NVIDIA, 0x15b3 Mellanox
  unsigned device = 0;
  unsigned class_code = 0;             // 24-bit class: 0x030200 3D controller
  std::optional<std::string> current_link_speed, max_link_speed;   // "32.0 GT/s PCIe"
  std::optional<int> current_link_width, max_link_width;
  std::optional<int> numa_node;
};

// Every device under <sys>/bus/pci/devices, sorted by address. Devices whose
// vendor or class file cannot be read are left out.
std::vector<PciDevice> list_pci_devices(const std::string& sys_root);

constexpr unsigned kPciVendorNvidia = 0x10de;
// An NVIDIA display controller (VGA 0x0300 or 3D 0x0302): a GPU, not an NVSwitch.
bool is_nvidia_gpu(const PciDevice& d);
// An Ethernet (0x0200) or InfiniBand (0x0207) controller.
bool is_nic(const PciDevice& d);

// "32.0 GT/s PCIe" -> 32.0; nullopt for "Unknown" or garbage.
std::optional<double> parse_link_speed_gts(const std::string& s);

// The PCIe generation for a per-lane speed (2.5 -> 1 ... 64 -> 6), 0 if unknown.
int pcie_generation(double gts);

}  // namespace kiln::agent
