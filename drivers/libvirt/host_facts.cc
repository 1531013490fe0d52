#include "drivers/libvirt/host_facts.h"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xpath.h>

#include <algorithm>
#include <cstdio>
#include <memory>

namespace kiln::libvirt {
namespace {

struct Doc {
  xmlDocPtr doc = nullptr;
  xmlXPathContextPtr ctx = nullptr;
  explicit Doc(const std::string& text) {
    doc = xmlReadMemory(text.data(), static_cast<int>(text.size()), "libvirt.xml", nullptr,
                        XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    if (doc) ctx = xmlXPathNewContext(doc);
  }
  ~Doc() {
    if (ctx) xmlXPathFreeContext(ctx);
    if (doc) xmlFreeDoc(doc);
  }
  Doc(const Doc&) = delete;
  Doc& operator=(const Doc&) = delete;

  // Nodes matching `xpath` relative to `at` (the document when null).
  std::vector<xmlNodePtr> all(const char* xpath, xmlNodePtr at = nullptr) const {
    std::vector<xmlNodePtr> out;
    if (!ctx) return out;
    ctx->node = at ? at : xmlDocGetRootElement(doc);
    xmlXPathObjectPtr r = xmlXPathEvalExpression(reinterpret_cast<const xmlChar*>(xpath), ctx);
    if (!r) return out;
    if (r->nodesetval)
      for (int i = 0; i < r->nodesetval->nodeNr; ++i) out.push_back(r->nodesetval->nodeTab[i]);
    xmlXPathFreeObject(r);
    return out;
  }
  xmlNodePtr one(const char* xpath, xmlNodePtr at = nullptr) const {
    auto v = all(xpath, at);
    return v.empty() ? nullptr : v.front();
  }
};

std::string text(xmlNodePtr n) {
  if (!n) return {};
  xmlChar* c = xmlNodeGetContent(n);
  std::string s = c ? reinterpret_cast<const char*>(c) : "";
  if (c) xmlFree(c);
  return s;
}

std::string attr(xmlNodePtr n, const char* name) {
  if (!n) return {};
  xmlChar* c = xmlGetProp(n, reinterpret_cast<const xmlChar*>(name));
  std::string s = c ? reinterpret_cast<const char*>(c) : "";
  if (c) xmlFree(c);
  return s;
}

int64_t to_int(const std::string& s, int64_t fallback = 0) {
  try {
    std::size_t used = 0;
    int64_t v = std::stoll(s, &used, 0);
    return used ? v : fallback;
  } catch (...) {
    return fallback;
  }
}

// KiB in `unit` -> MiB.
int64_t to_mib(int64_t value, const std::string& unit) {
  if (unit.empty() || unit == "KiB" || unit == "k" || unit == "K") return value / 1024;
  if (unit == "MiB" || unit == "M") return value;
  if (unit == "GiB" || unit == "G") return value * 1024;
  if (unit == "b" || unit == "bytes") return value / (1024 * 1024);
  return value / 1024;
}

}  // namespace

Result<HostCapacity> parse_capabilities(const std::string& xml) {
  Doc d(xml);
  if (!d.doc || !d.one("/capabilities/host"))
    return Error(Code::kDriverError, "libvirt capabilities: not a capabilities document");
  HostCapacity c;
  c.arch = text(d.one("/capabilities/host/cpu/arch"));
  for (xmlNodePtr cell : d.all("/capabilities/host/topology/cells/cell")) {
    NumaCell nc;
    nc.id = static_cast<int>(to_int(attr(cell, "id")));
    xmlNodePtr mem = d.one("memory", cell);
    nc.memory_mib = to_mib(to_int(text(mem)), attr(mem, "unit"));
    for (xmlNodePtr p : d.all("pages", cell))
      if (to_int(attr(p, "size")) == 2048 && (attr(p, "unit").empty() || attr(p, "unit") == "KiB"))
        nc.hugepages_2m = to_int(text(p));
    for (xmlNodePtr cpu : d.all("cpus/cpu", cell)) nc.cpus.push_back(static_cast<int>(to_int(attr(cpu, "id"))));
    c.cpus += static_cast<int>(nc.cpus.size());
    c.memory_mib += nc.memory_mib;
    c.cells.push_back(std::move(nc));
  }
  // Guests of the host's own arch, hvm only.
  for (xmlNodePtr g : d.all("/capabilities/guest")) {
    if (text(d.one("os_type", g)) != "hvm") continue;
    xmlNodePtr arch = d.one("arch", g);
    if (!arch || (!c.arch.empty() && attr(arch, "name") != c.arch)) continue;
    if (c.emulator.empty()) c.emulator = text(d.one("emulator", arch));
    for (xmlNodePtr m : d.all("machine", arch)) {
      std::string name = text(m);
      if (!name.empty() && std::find(c.machines.begin(), c.machines.end(), name) == c.machines.end())
        c.machines.push_back(name);
    }
    for (xmlNodePtr dt : d.all("domain", arch)) {
      std::string t = attr(dt, "type");
      if (!t.empty() && std::find(c.domain_types.begin(), c.domain_types.end(), t) == c.domain_types.end())
        c.domain_types.push_back(t);
    }
  }
  return c;
}

std::optional<HostGpu> parse_gpu_nodedev(const std::string& xml) {
  Doc d(xml);
  if (!d.doc) return std::nullopt;
  xmlNodePtr pci = d.one("/device/capability[@type='pci']");
  if (!pci) return std::nullopt;
  xmlNodePtr vendor = d.one("vendor", pci);
  if (to_int(attr(vendor, "id"), -1) != 0x10de) return std::nullopt;
  int64_t cls = to_int(text(d.one("class", pci)), -1);
  if (cls < 0 || (cls >> 16) != 0x03) return std::nullopt;
  HostGpu g;
  g.nodedev = text(d.one("/device/name"));
  char addr[32];
  std::snprintf(addr, sizeof addr, "%04x:%02x:%02x.%x", static_cast<unsigned>(to_int(text(d.one("domain", pci)))),
                static_cast<unsigned>(to_int(text(d.one("bus", pci)))),
                static_cast<unsigned>(to_int(text(d.one("slot", pci)))),
                static_cast<unsigned>(to_int(text(d.one("function", pci)))));
  g.address = addr;
  xmlNodePtr product = d.one("product", pci);
  g.product = text(product);
  if (g.product.empty()) g.product = attr(product, "id");
  if (xmlNodePtr grp = d.one("iommuGroup", pci)) g.iommu_group = static_cast<int>(to_int(attr(grp, "number"), -1));
  if (xmlNodePtr numa = d.one("numa", pci)) g.numa_node = static_cast<int>(to_int(attr(numa, "node"), -1));
  for (xmlNodePtr t : d.all("capability[@type='mdev_types']/type", pci)) {
    std::string id = attr(t, "id");
    if (!id.empty()) g.mdev_types.push_back(id);
  }
  return g;
}

}  // namespace kiln::libvirt
