#include "agent/validate/checks/sysfs.h"
#include "agent/validate/parsers/text_scan.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <system_error>

namespace kiln::agent {

namespace fs = std::filesystem;

namespace {

std::optional<unsigned> read_hex(const fs::path& p) {
  auto line = read_first_line(p);
  if (!line || line->empty()) return std::nullopt;
  char* end = nullptr;
  const unsigned long v = std::strtoul(line->c_str(), &end, 16);
  if (end == line->c_str()) return std::nullopt;
  return static_cast<unsigned>(v);
}

std::optional<int> read_int(const fs::path& p) {
  auto line = read_first_line(p);
  if (!line || line->empty()) return std::nullopt;
  char* end = nullptr;
  const long v = std::strtol(line->c_str(), &end, 10);
  if (end == line->c_str()) return std::nullopt;
  return static_cast<int>(v);
}

}  // namespace

std::optional<std::string> read_first_line(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  std::string line;
  std::getline(in, line);
  if (in.bad()) return std::nullopt;
  return std::string(scan::trim(line));
}

std::vector<fs::path> sorted_children(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<std::string> read_text_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<PciDevice> list_pci_devices(const std::string& sys_root) {
  std::vector<PciDevice> out;
  std::error_code ec;
  const fs::path dir = fs::path(sys_root) / "bus/pci/devices";
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path p = it->path();
    PciDevice d;
    d.address = p.filename().string();
    auto vendor = read_hex(p / "vendor");
    auto cls = read_hex(p / "class");
    if (!vendor || !cls) continue;
    d.vendor = *vendor;
    d.class_code = *cls;
    d.device = read_hex(p / "device").value_or(0);
    d.current_link_speed = read_first_line(p / "current_link_speed");
    d.max_link_speed = read_first_line(p / "max_link_speed");
    d.current_link_width = read_int(p / "current_link_width");
    d.max_link_width = read_int(p / "max_link_width");
    d.numa_node = read_int(p / "numa_node");
    out.push_back(std::move(d));
  }
  std::sort(out.begin(), out.end(), [](const PciDevice& a, const PciDevice& b) { return a.address < b.address; });
  return out;
}

bool is_nvidia_gpu(const PciDevice& d) {
  const unsigned base_sub = d.class_code >> 8;
  return d.vendor == kPciVendorNvidia && (base_sub == 0x0300 || base_sub == 0x0302);
}

bool is_nic(const PciDevice& d) {
  const unsigned base_sub = d.class_code >> 8;
  return base_sub == 0x0200 || base_sub == 0x0207;
}

std::optional<double> parse_link_speed_gts(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v <= 0) return std::nullopt;
  return v;
}

int pcie_generation(double gts) {
  constexpr double kSpeeds[] = {2.5, 5.0, 8.0, 16.0, 32.0, 64.0};
  for (int i = 0; i < 6; ++i)
    if (gts > kSpeeds[i] * 0.9 && gts < kSpeeds[i] * 1.1) return i + 1;
  return 0;
}

}  // namespace kiln::agent
