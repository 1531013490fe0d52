#include "tools/vbmc/domain_xml.h"

#include <algorithm>
#include <cctype>

namespace kiln::vbmc {

namespace {

// Value of attribute `name` in the element text `elem` ("<mac address='x'/>").
std::string attr(const std::string& elem, const std::string& name) {
  for (const char q : {'\'', '"'}) {
    const std::string key = " " + name + "=" + q;
    auto p = elem.find(key);
    if (p == std::string::npos) continue;
    p += key.size();
    auto e = elem.find(q, p);
    if (e != std::string::npos) return elem.substr(p, e - p);
  }
  return {};
}

// The opening tag text starting at `pos` (up to '>').
std::string tag_at(const std::string& xml, std::size_t pos) {
  auto e = xml.find('>', pos);
  return e == std::string::npos ? xml.substr(pos) : xml.substr(pos, e - pos + 1);
}

std::string text_of(const std::string& xml, const std::string& elem) {
  auto p = xml.find("<" + elem);
  if (p == std::string::npos) return {};
  auto s = xml.find('>', p);
  auto e = xml.find("</" + elem + ">", s);
  if (s == std::string::npos || e == std::string::npos) return {};
  return xml.substr(s + 1, e - s - 1);
}

int64_t to_int(const std::string& s) {
  try {
    return std::stoll(s);
  } catch (...) {
    return 0;
  }
}

}  // namespace

DomainXmlInfo parse_domain_xml(const std::string& xml) {
  DomainXmlInfo out;
  out.vcpus = static_cast<int>(to_int(text_of(xml, "vcpu")));
  {
    auto p = xml.find("<memory");
    if (p != std::string::npos) {
      const std::string tag = tag_at(xml, p);
      int64_t v = to_int(text_of(xml, "memory"));
      const std::string unit = attr(tag, "unit");
      if (unit == "MiB" || unit == "M") v *= 1024;
      else if (unit == "GiB" || unit == "G") v *= 1024 * 1024;
      else if (unit == "b" || unit == "bytes") v /= 1024;
      out.memory_kib = v;
    }
  }
  for (std::size_t p = xml.find("<disk "); p != std::string::npos; p = xml.find("<disk ", p + 1)) {
    const std::string tag = tag_at(xml, p);
    auto end = xml.find("</disk>", p);
    const std::string body = xml.substr(p, end == std::string::npos ? std::string::npos : end - p);
    if (attr(tag, "device") != "disk") continue;
    MachineDisk d;
    auto t = body.find("<target ");
    if (t != std::string::npos) d.name = attr(tag_at(body, t), "dev");
    auto s = body.find("<source ");
    if (s != std::string::npos) {
      const std::string st = tag_at(body, s);
      d.source = attr(st, "file");
      if (d.source.empty()) d.source = attr(st, "dev");
    }
    out.disks.push_back(std::move(d));
  }
  for (std::size_t p = xml.find("<mac "); p != std::string::npos; p = xml.find("<mac ", p + 1)) {
    std::string mac = attr(tag_at(xml, p), "address");
    for (auto& c : mac) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!mac.empty()) out.macs.push_back(mac);
  }
  auto os = xml.find("<os");
  auto os_end = xml.find("</os>");
  if (os != std::string::npos && os_end != std::string::npos) {
    const std::string os_xml = xml.substr(os, os_end - os);
    for (std::size_t p = os_xml.find("<boot "); p != std::string::npos; p = os_xml.find("<boot ", p + 1)) {
      out.boot_devs.push_back(attr(tag_at(os_xml, p), "dev"));
    }
    if (attr(tag_at(os_xml, 0), "firmware") == "efi") out.uefi = true;
    auto loader = os_xml.find("<loader");
    if (loader != std::string::npos) {
      std::string l = os_xml.substr(loader, os_xml.find("</loader>", loader) - loader);
      std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
      if (l.find("ovmf") != std::string::npos || l.find("efi") != std::string::npos) out.uefi = true;
    }
  }
  return out;
}

std::string set_boot_devs(const std::string& xml, const std::vector<std::string>& devs) {
  auto os = xml.find("<os");
  auto os_end = xml.find("</os>");
  if (os == std::string::npos || os_end == std::string::npos) return xml;
  std::string os_xml = xml.substr(os, os_end - os);
  // Drop every existing <boot .../> line (with its indentation).
  for (auto p = os_xml.find("<boot "); p != std::string::npos; p = os_xml.find("<boot ")) {
    auto e = os_xml.find("/>", p);
    if (e == std::string::npos) break;
    auto line_start = os_xml.rfind('\n', p);
    std::size_t from = (line_start != std::string::npos && os_xml.find_first_not_of(" \t", line_start + 1) == p)
                           ? line_start
                           : p;
    os_xml.erase(from, e + 2 - from);
  }
  std::string indent = "    ";
  std::string insert;
  for (const auto& d : devs) insert += "\n" + indent + "<boot dev='" + d + "'/>";
  // Before the closing whitespace of <os>.
  std::size_t tail = os_xml.find_last_not_of(" \t\n");
  os_xml.insert(tail + 1, insert);
  return xml.substr(0, os) + os_xml + xml.substr(os_end);
}

}  // namespace kiln::vbmc
