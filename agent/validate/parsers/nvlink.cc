#include "agent/validate/parsers/nvlink.h"

#include <set>
#include <string>

#include "agent/validate/parsers/health.h"
#include "agent/validate/parsers/text_scan.h"

namespace kiln::agent {

using nlohmann::json;
namespace sc = scan;

namespace {

// "GPU 3: Tesla V100-SXM2-32GB (UUID: GPU-...)"
bool parse_gpu_header(std::string_view line, json& gpu) {
  if (!sc::starts_with(line, "GPU ")) return false;
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) return false;
  const std::string_view num = line.substr(4, colon - 4);
  auto idx = sc::to_int(num);
  if (!idx || num.size() > 4) return false;  // "GPU 00000000:19:00.0" is nvidia-smi -q, not this
  std::string_view rest = sc::trim(line.substr(colon + 1));
  json uuid = nullptr;
  if (const std::size_t u = rest.rfind("(UUID:"); u != std::string_view::npos) {
    std::string_view id = sc::trim(rest.substr(u + 6));
    if (!id.empty() && id.back() == ')') id.remove_suffix(1);
    uuid = std::string(sc::trim(id));
    rest = sc::trim(rest.substr(0, u));
  }
  gpu = {{"index", *idx}, {"name", std::string(rest)}, {"uuid", uuid}, {"links", json::array()},
         {"messages", json::array()}};
  return true;
}

}  // namespace

Result<json> parse_nvlink(std::string_view text) {
  json gpus = json::array();
  Health h;
  for (const std::string& raw : sc::lines(text)) {
    const std::string_view line = sc::trim(raw);
    if (line.empty()) continue;
    json gpu;
    if (parse_gpu_header(line, gpu)) {
      gpus.push_back(std::move(gpu));
      continue;
    }
    if (gpus.empty()) continue;
    json& cur = gpus.back();
    if (sc::starts_with(line, "Link ")) {
      const std::size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      auto n = sc::to_int(line.substr(5, colon - 5));
      if (!n) continue;
      const std::string_view state = sc::trim(line.substr(colon + 1));
      json link = {{"link", *n}, {"state", std::string(state)}, {"speed_gb_s", nullptr}, {"active", false}};
      if (auto gbs = sc::leading_double(state); gbs && sc::icontains(state, "GB/s")) {
        link["speed_gb_s"] = *gbs;
        link["active"] = true;
      }
      cur["links"].push_back(std::move(link));
    } else {
      cur["messages"].push_back(std::string(line));
    }
  }
  bool any_content = false;
  for (const auto& g : gpus) {
    any_content = any_content || !g["links"].empty();
    for (const auto& m : g["messages"]) any_content = any_content || sc::icontains(m.get<std::string>(), "nvlink");
  }
  if (gpus.empty() || !any_content)
    return Error(Code::kInvalidArgument,
                 "not nvidia-smi nvlink status output: no 'GPU n: ...' header with 'Link n:' lines");

  std::int64_t total = 0, active = 0;
  std::set<double> speeds;
  std::set<std::size_t> link_counts;
  for (auto& g : gpus) {
    std::int64_t a = 0, inactive = 0;
    for (const auto& l : g["links"]) {
      if (l["active"].get<bool>()) {
        ++a;
        speeds.insert(l["speed_gb_s"].get<double>());
      } else {
        ++inactive;
        h.fail("GPU " + std::to_string(g["index"].get<std::int64_t>()) + " link " +
               std::to_string(l["link"].get<std::int64_t>()) + " is " + l["state"].get<std::string>());
      }
    }
    for (const auto& m : g["messages"]) {
      const std::string msg = m.get<std::string>();
      if (sc::icontains(msg, "inactive") || sc::icontains(msg, "unable"))
        h.fail("GPU " + std::to_string(g["index"].get<std::int64_t>()) + ": " + msg);
    }
    g["link_count"] = g["links"].size();
    g["active_links"] = a;
    g["inactive_links"] = inactive;
    total += static_cast<std::int64_t>(g["links"].size());
    active += a;
    link_counts.insert(g["links"].size());
  }
  if (link_counts.size() > 1) h.warn("GPUs report different numbers of NVLinks");
  json out;
  out["format"] = "nvlink";
  out["gpus"] = gpus;
  out["summary"] = {{"gpu_count", gpus.size()}, {"link_count", total}, {"active_links", active},
                    {"inactive_links", total - active},
                    {"speeds_gb_s", std::vector<double>(speeds.begin(), speeds.end())}};
  out["health"] = h.to_json();
  return out;
}

}  // namespace kiln::agent
