#include "agent/validate/parsers/topo.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/validate/parsers/health.h"
#include "agent/validate/parsers/text_scan.h"

namespace kiln::agent {

using nlohmann::json;
namespace sc = scan;

namespace {

// "GPU3" -> 3 (also for "NIC3"); nullopt for anything else.
std::optional<std::int64_t> numbered(std::string_view name, std::string_view prefix) {
  if (!sc::starts_with(name, prefix) || name.size() == prefix.size()) return std::nullopt;
  return sc::to_int(name.substr(prefix.size()));
}

std::optional<std::int64_t> nvlinks(std::string_view cell) {
  if (!sc::starts_with(cell, "NV") || cell.size() < 3) return std::nullopt;
  return sc::to_int(cell.substr(2));
}

bool known_cell(std::string_view c) {
  return c == "X" || c == "PIX" || c == "PXB" || c == "PHB" || c == "NODE" || c == "SYS" || c == "SOC" ||
         nvlinks(c).has_value();
}

bool is_affinity_label(std::string_view s) {
  return sc::contains(s, "Affinity") || sc::contains(s, "NUMA") || s == "CPU";
}

// Header cells; with no tabs, rebuild the multi-word affinity labels.
std::vector<std::string> header_cells(std::string_view line) {
  std::vector<std::string> out;
  const auto tabbed = sc::split_on(line, '\t');
  if (tabbed.size() > 2) {
    for (auto c : tabbed)
      if (!sc::trim(c).empty()) out.emplace_back(sc::collapse_ws(c));
    return out;
  }
  const auto toks = sc::split_ws(line);
  for (std::size_t i = 0; i < toks.size(); ++i) {
    if (toks[i] == "CPU" && i + 1 < toks.size() && toks[i + 1] == "Affinity") {
      out.emplace_back("CPU Affinity");
      ++i;
    } else if (toks[i] == "NUMA" && i + 1 < toks.size() && toks[i + 1] == "Affinity") {
      out.emplace_back("NUMA Affinity");
      ++i;
    } else if (toks[i] == "GPU" && i + 2 < toks.size() && toks[i + 1] == "NUMA" && toks[i + 2] == "ID") {
      out.emplace_back("GPU NUMA ID");
      i += 2;
    } else {
      out.emplace_back(toks[i]);
    }
  }
  return out;
}

}  // namespace

Result<json> parse_topo(std::string_view text) {
  const auto all = sc::lines(text);
  std::size_t header_at = all.size();
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto toks = sc::split_ws(all[i]);
    if (toks.empty() || !numbered(toks[0], "GPU")) continue;
    bool has_self = false;
    for (auto t : toks) has_self = has_self || t == "X";
    const bool indented = all[i][0] == '\t' || all[i][0] == ' ';
    if (!has_self && (indented || sc::contains(all[i], "Affinity"))) {
      header_at = i;
      break;
    }
  }
  if (header_at == all.size())
    return Error(Code::kInvalidArgument, "not nvidia-smi topo -m output: no device header row (GPU0 ...) found");

  const std::vector<std::string> labels = header_cells(all[header_at]);
  std::vector<std::string> devices, extra;
  for (const auto& l : labels) {
    if (extra.empty() && !is_affinity_label(l)) devices.push_back(l);
    else extra.push_back(l);
  }

  Health h;
  json matrix = json::object();
  std::map<std::string, std::map<std::string, std::string>> affinity;
  std::size_t i = header_at + 1;
  for (; i < all.size(); ++i) {
    const std::string& line = all[i];
    if (sc::trim(line).empty() || sc::starts_with(sc::trim(line), "Legend")) break;
    auto cells = sc::split_on(line, '\t');
    std::vector<std::string> cs;
    for (auto c : cells) cs.emplace_back(sc::trim(c));
    if (cs.size() < devices.size() + 1) {  // the capture lost its tabs: split on spaces
      cs.clear();
      for (auto t : sc::split_ws(line)) cs.emplace_back(t);
    }
    if (cs.empty()) continue;
    const std::string name = cs[0];
    if (std::find(devices.begin(), devices.end(), name) == devices.end()) continue;
    json row = json::object();
    const std::size_t have = std::min(devices.size(), cs.size() - 1);
    for (std::size_t d = 0; d < have; ++d) {
      row[devices[d]] = cs[d + 1];
      if (!known_cell(cs[d + 1])) h.warn(name + "/" + devices[d] + ": unknown connection type '" + cs[d + 1] + "'");
    }
    if (have < devices.size()) h.fail("row " + name + " has " + std::to_string(have) + " of " +
                                      std::to_string(devices.size()) + " cells");
    matrix[name] = row;
    // Affinity cells: all but the last label from the left, the last from the
    // right (nvidia-smi pads "GPU NUMA ID" with an extra tab).
    std::vector<std::string> rest(cs.begin() + static_cast<std::ptrdiff_t>(std::min(cs.size(), devices.size() + 1)),
                                  cs.end());
    auto& aff = affinity[name];
    for (const auto& l : extra) aff[l] = "";
    if (!extra.empty()) {
      if (rest.size() >= extra.size()) {
        for (std::size_t k = 0; k + 1 < extra.size(); ++k) aff[extra[k]] = rest[k];
        aff[extra.back()] = rest.back();
      } else {
        const std::size_t shift = extra.size() - rest.size();
        for (std::size_t k = 0; k < rest.size(); ++k) aff[extra[k + shift]] = rest[k];
      }
    }
  }

  // Legends.
  json legend = json::object();
  std::map<std::string, std::string> nic_legend;
  bool in_nic_legend = false;
  for (; i < all.size(); ++i) {
    const std::string_view t = sc::trim(all[i]);
    if (sc::starts_with(t, "NIC Legend")) {
      in_nic_legend = true;
      continue;
    }
    if (in_nic_legend) {
      const std::size_t colon = t.find(':');
      if (colon != std::string_view::npos)
        nic_legend[std::string(sc::trim(t.substr(0, colon)))] = std::string(sc::trim(t.substr(colon + 1)));
    } else if (const std::size_t eq = t.find(" = "); eq != std::string_view::npos) {
      legend[std::string(sc::trim(t.substr(0, eq)))] = std::string(sc::trim(t.substr(eq + 3)));
    }
  }

  json gpus = json::array(), nics = json::array();
  std::vector<std::string> gpu_names;
  for (const auto& d : devices) {
    if (auto g = numbered(d, "GPU")) {
      json gj = {{"name", d}, {"index", *g}};
      const auto& aff = affinity[d];
      auto get = [&](const char* label) -> json {
        auto it = aff.find(label);
        return it == aff.end() ? json(nullptr) : json(it->second);
      };
      gj["cpu_affinity"] = get("CPU Affinity");
      gj["numa_affinity"] = get("NUMA Affinity");
      gj["gpu_numa_id"] = get("GPU NUMA ID");
      gpus.push_back(gj);
      gpu_names.push_back(d);
    } else {
      auto n = numbered(d, "NIC");
      json nj = {{"name", d}, {"index", n ? json(*n) : json(nullptr)}, {"device", nullptr}};
      if (auto it = nic_legend.find(d); it != nic_legend.end()) nj["device"] = it->second;
      else if (!n) nj["device"] = d;  // old drivers name the NIC column itself (mlx5_0)
      nics.push_back(nj);
    }
  }
  if (gpu_names.empty() || matrix.empty())
    return Error(Code::kInvalidArgument, "not nvidia-smi topo -m output: no GPU rows under the header");
  for (const auto& g : gpu_names)
    if (!matrix.contains(g)) h.fail("matrix has no row for " + g);

  json pairs = json::array();
  std::map<std::string, std::int64_t> pair_kinds;
  std::size_t npairs = 0, nv_pairs = 0;
  json min_nv = nullptr, max_nv = nullptr;
  for (std::size_t a = 0; a < gpu_names.size(); ++a) {
    for (std::size_t b = a + 1; b < gpu_names.size(); ++b) {
      ++npairs;
      std::string cell;
      if (matrix.contains(gpu_names[a]) && matrix[gpu_names[a]].contains(gpu_names[b]))
        cell = matrix[gpu_names[a]][gpu_names[b]].get<std::string>();
      ++pair_kinds[cell.empty() ? "missing" : cell];
      if (auto n = nvlinks(cell)) {
        ++nv_pairs;
        pairs.push_back({{"a", gpu_names[a]}, {"b", gpu_names[b]}, {"links", *n}});
        if (min_nv.is_null() || *n < min_nv.get<std::int64_t>()) min_nv = *n;
        if (max_nv.is_null() || *n > max_nv.get<std::int64_t>()) max_nv = *n;
      }
    }
  }
  const bool all_nv = npairs > 0 && nv_pairs == npairs;
  if (nv_pairs > 0 && nv_pairs < npairs)
    h.warn(std::to_string(npairs - nv_pairs) + " of " + std::to_string(npairs) + " GPU pairs are not NVLink-connected");
  if (!min_nv.is_null() && min_nv != max_nv) h.warn("NVLink counts differ between GPU pairs");

  json out;
  out["format"] = "topo";
  out["devices"] = devices;
  out["gpus"] = gpus;
  out["nics"] = nics;
  out["matrix"] = matrix;
  out["nvlink_pairs"] = pairs;
  out["legend"] = legend;
  out["summary"] = {{"gpu_count", gpu_names.size()}, {"nic_count", nics.size()}, {"gpu_pairs", npairs},
                    {"all_gpu_pairs_nvlink", all_nv}, {"min_nvlinks_per_pair", min_nv},
                    {"max_nvlinks_per_pair", max_nv}, {"gpu_pair_connections", pair_kinds}};
  out["health"] = h.to_json();
  return out;
}

}  // namespace kiln::agent
