#include "controller/hosts/placement.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace kiln {
namespace {

// What is booked on one host, summed from its rows.
struct Booked {
  std::set<int> pinned_cpus;
  std::set<std::string> gpus;
  int64_t unpinned_vcpus = 0;
  int64_t memory_mib = 0;
  int64_t hugepages = 0;
  std::map<int, int64_t> cell_memory_mib;
  std::map<int, int64_t> cell_hugepages;
};

// Row kinds with a cell suffix: "memory@1".
bool cell_kind(const std::string& kind, const char* base, int* cell) {
  std::string prefix = std::string(base) + "@";
  if (kind.rfind(prefix, 0) != 0) return false;
  try {
    *cell = std::stoi(kind.substr(prefix.size()));
  } catch (...) {
    return false;
  }
  return true;
}

Booked sum(const std::vector<HostReservation>& rows) {
  Booked b;
  for (const HostReservation& r : rows) {
    int cell = 0;
    if (r.kind == "cpu") {
      try {
        b.pinned_cpus.insert(std::stoi(r.item));
      } catch (...) {
      }
    } else if (r.kind == "gpu") {
      b.gpus.insert(r.item);
    } else if (r.kind == "vcpus") {
      b.unpinned_vcpus += r.amount;
    } else if (r.kind == "memory") {
      b.memory_mib += r.amount;
    } else if (r.kind == "hugepages") {
      b.hugepages += r.amount;
    } else if (cell_kind(r.kind, "memory", &cell)) {
      b.cell_memory_mib[cell] += r.amount;
    } else if (cell_kind(r.kind, "hugepages", &cell)) {
      b.cell_hugepages[cell] += r.amount;
    }
  }
  return b;
}

int64_t total_hugepages(const HostCapacity& c) {
  int64_t n = 0;
  for (const NumaCell& cell : c.cells) n += cell.hugepages_2m;
  return n;
}

int64_t free_unpinned_vcpus(const Host& h, const Booked& b) {
  double slots = static_cast<double>(h.capacity.cpus - static_cast<int>(b.pinned_cpus.size())) *
                 h.options.cpu_allocation_ratio;
  return static_cast<int64_t>(std::floor(slots)) - b.unpinned_vcpus;
}

// Host CPUs that unpinned guests are taken to occupy (for pinning decisions):
// pinning may not eat into what unpinned guests were promised.
int64_t cpus_used_by_unpinned(const Host& h, const Booked& b) {
  double ratio = h.options.cpu_allocation_ratio > 0 ? h.options.cpu_allocation_ratio : 1.0;
  return static_cast<int64_t>(std::ceil(static_cast<double>(b.unpinned_vcpus) / ratio));
}

bool gpu_offers(const HostGpu& g, const std::string& mdev_type) {
  if (mdev_type.empty()) return true;
  return std::find(g.mdev_types.begin(), g.mdev_types.end(), mdev_type) != g.mdev_types.end();
}

std::string plural(int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

Result<PlacementPlan> plan_placement(const Host& host, const std::vector<HostReservation>& booked,
                                     const Flavour& f, const std::string& node_id) {
  const std::string who = "host " + host.name + ": ";
  if (host.status != "ready")
    return Error(Code::kConflict, who + "is " + host.status +
                                      (host.status_reason.empty() ? "" : " (" + host.status_reason + ")"));
  const HostCapacity& cap = host.capacity;
  Booked b = sum(booked);
  std::vector<std::string> short_of;

  int64_t free_mem = cap.memory_mib - host.options.reserved_memory_mib - b.memory_mib;
  if (free_mem < f.memory_mib)
    short_of.push_back("needs " + std::to_string(f.memory_mib) + " MiB memory, " +
                       std::to_string(std::max<int64_t>(free_mem, 0)) + " free");
  int64_t pages = f.hugepages ? (f.memory_mib + 1) / 2 : 0;
  if (f.hugepages) {
    int64_t free_pages = total_hugepages(cap) - b.hugepages;
    if (free_pages < pages)
      short_of.push_back("needs " + std::to_string(pages) + " 2 MiB hugepages, " +
                         std::to_string(std::max<int64_t>(free_pages, 0)) + " free");
  }

  std::vector<const HostGpu*> free_gpus;
  for (const HostGpu& g : cap.gpus)
    if (!b.gpus.contains(g.address) && gpu_offers(g, f.gpu_mdev_type)) free_gpus.push_back(&g);
  if (static_cast<int>(free_gpus.size()) < f.gpus)
    short_of.push_back("needs " + plural(f.gpus, "gpu", "gpus") +
                       (f.gpu_mdev_type.empty() ? "" : " offering mdev type " + f.gpu_mdev_type) + ", " +
                       std::to_string(free_gpus.size()) + " free");

  PlacementPlan plan;
  plan.placement.host_id = host.id;
  plan.placement.flavour = f;

  if (!f.numa_pin) {
    int64_t free_vcpus = free_unpinned_vcpus(host, b);
    if (free_vcpus < f.vcpus)
      short_of.push_back("needs " + plural(f.vcpus, "vcpu", "vcpus") + ", " +
                         std::to_string(std::max<int64_t>(free_vcpus, 0)) + " free");
    if (!short_of.empty()) {
      std::string msg = who;
      for (std::size_t i = 0; i < short_of.size(); ++i) msg += (i ? "; " : "") + short_of[i];
      return Error(Code::kConflict, msg);
    }
    for (int i = 0; i < f.gpus; ++i) plan.placement.gpus.push_back(free_gpus[i]->address);
  } else {
    // Whole CPUs left for pinning: not pinned already, and not promised to
    // unpinned guests.
    int64_t spare = cap.cpus - static_cast<int64_t>(b.pinned_cpus.size()) - cpus_used_by_unpinned(host, b);
    if (spare < f.vcpus)
      short_of.push_back("needs " + plural(f.vcpus, "pinned cpu", "pinned cpus") + ", " +
                         std::to_string(std::max<int64_t>(spare, 0)) + " free");
    const NumaCell* chosen = nullptr;
    std::vector<int> cpus;
    std::vector<std::string> gpus;
    std::string best_cell_shortage;
    if (short_of.empty()) {
      for (const NumaCell& cell : cap.cells) {
        std::vector<int> cell_cpus;
        for (int c : cell.cpus)
          if (!b.pinned_cpus.contains(c)) cell_cpus.push_back(c);
        int64_t cell_mem = cell.memory_mib - b.cell_memory_mib[cell.id];
        int64_t cell_pages = cell.hugepages_2m - b.cell_hugepages[cell.id];
        std::vector<std::string> local;
        for (const HostGpu* g : free_gpus)
          if (g->numa_node < 0 || g->numa_node == cell.id) local.push_back(g->address);
        std::vector<std::string> cell_short;
        if (static_cast<int>(cell_cpus.size()) < f.vcpus)
          cell_short.push_back(std::to_string(cell_cpus.size()) + " free cpus");
        if (cell_mem < f.memory_mib) cell_short.push_back(std::to_string(std::max<int64_t>(cell_mem, 0)) + " MiB free");
        if (f.hugepages && cell_pages < pages)
          cell_short.push_back(std::to_string(std::max<int64_t>(cell_pages, 0)) + " free hugepages");
        if (static_cast<int>(local.size()) < f.gpus)
          cell_short.push_back(plural(static_cast<int64_t>(local.size()), "local gpu", "local gpus"));
        if (cell_short.empty()) {
          chosen = &cell;
          cpus.assign(cell_cpus.begin(), cell_cpus.begin() + f.vcpus);
          gpus.assign(local.begin(), local.begin() + f.gpus);
          break;
        }
        std::string s = "cell " + std::to_string(cell.id) + " has ";
        for (std::size_t i = 0; i < cell_short.size(); ++i) s += (i ? ", " : "") + cell_short[i];
        best_cell_shortage += (best_cell_shortage.empty() ? "" : "; ") + s;
      }
      if (!chosen) {
        if (cap.cells.empty()) best_cell_shortage = "no NUMA cells discovered";
        short_of.push_back("no single NUMA cell fits " + plural(f.vcpus, "vcpu", "vcpus") + ", " +
                           std::to_string(f.memory_mib) + " MiB" +
                           (f.gpus ? " and " + plural(f.gpus, "local gpu", "local gpus") : std::string()) +
                           " (" + best_cell_shortage + ")");
      }
    }
    if (!short_of.empty()) {
      std::string msg = who;
      for (std::size_t i = 0; i < short_of.size(); ++i) msg += (i ? "; " : "") + short_of[i];
      return Error(Code::kConflict, msg);
    }
    plan.placement.numa_cell = chosen->id;
    plan.placement.cpus = cpus;
    plan.placement.gpus = gpus;
  }

  auto row = [&](std::string kind, std::string item, int64_t amount) {
    plan.rows.push_back(HostReservation{host.id, node_id, std::move(kind), std::move(item), amount});
  };
  if (f.numa_pin) {
    for (int c : plan.placement.cpus) row("cpu", std::to_string(c), 1);
    row("memory@" + std::to_string(plan.placement.numa_cell), node_id, f.memory_mib);
    if (f.hugepages) row("hugepages@" + std::to_string(plan.placement.numa_cell), node_id, pages);
  } else {
    row("vcpus", node_id, f.vcpus);
  }
  row("memory", node_id, f.memory_mib);
  if (f.hugepages) row("hugepages", node_id, pages);
  for (const std::string& g : plan.placement.gpus) row("gpu", g, 1);
  row("disk", node_id, f.disk_gib);
  return plan;
}

Result<Flavour> flavour_of_profile(const nlohmann::json& doc, const std::string& name) {
  if (!doc.is_object() || !doc.contains("virtual") || !doc["virtual"].is_object())
    return Error::invalid("/profile", "profile " + name + " has no virtual flavour (its \"virtual\" block)");
  const nlohmann::json& v = doc["virtual"];
  Flavour f;
  try {
    f = v.get<Flavour>();
  } catch (const std::exception& e) {
    return Error::invalid("/profile", "profile " + name + ": bad virtual block: " + e.what());
  }
  if (f.vcpus < 1 || f.memory_mib < 1 || f.gpus < 0 || f.disk_gib < 1)
    return Error::invalid("/profile", "profile " + name + ": virtual block needs vcpus, memory_mib and disk_gib >= 1");
  return f;
}

nlohmann::json free_capacity(const Host& host, const std::vector<HostReservation>& booked) {
  Booked b = sum(booked);
  std::vector<std::string> gpus;
  for (const HostGpu& g : host.capacity.gpus)
    if (!b.gpus.contains(g.address)) gpus.push_back(g.address);
  return {{"vcpus", std::max<int64_t>(free_unpinned_vcpus(host, b), 0)},
          {"pinned_cpus_free", std::max<int64_t>(host.capacity.cpus - static_cast<int64_t>(b.pinned_cpus.size()) -
                                                     cpus_used_by_unpinned(host, b), 0)},
          {"memory_mib", std::max<int64_t>(host.capacity.memory_mib - host.options.reserved_memory_mib - b.memory_mib, 0)},
          {"hugepages_2m", std::max<int64_t>(total_hugepages(host.capacity) - b.hugepages, 0)},
          {"gpus", gpus}};
}

int64_t guests_that_fit(const Host& host, std::vector<HostReservation> booked, const Flavour& flavour, int64_t cap) {
  int64_t n = 0;
  while (n < cap) {
    Result<PlacementPlan> plan = plan_placement(host, booked, flavour, "fit-" + std::to_string(n));
    if (!plan) break;
    booked.insert(booked.end(), plan->rows.begin(), plan->rows.end());
    ++n;
  }
  return n;
}

}  // namespace kiln
