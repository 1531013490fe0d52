#include "agent/validate/parsers/nccl_debug.h"

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "agent/validate/parsers/health.h"
#include "agent/validate/parsers/nccl_tests.h"
#include "agent/validate/parsers/text_scan.h"

namespace kiln::agent {

using nlohmann::json;
namespace sc = scan;

namespace {

// The network family behind a NET plugin name as NCCL prints it.
std::string net_kind(std::string_view name) {
  if (name.empty()) return {};
  if (sc::icontains(name, "libfabric") || sc::icontains(name, "ofi") || sc::icontains(name, "efa")) return "OFI";
  if (sc::starts_with(name, "IB")) return "IB";  // IB, IBext, IBext_v8
  if (sc::icontains(name, "socket")) return "Socket";
  return std::string(name);
}

// "0[0]" / "16[101c0]" -> rank and the bracketed device.
bool parse_endpoint(std::string_view s, std::int64_t& rank, std::string& dev) {
  const std::size_t open = s.find('[');
  const std::size_t close = s.find(']');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) return false;
  auto r = sc::to_int(s.substr(0, open));
  if (!r) return false;
  rank = *r;
  dev = std::string(s.substr(open + 1, close - open - 1));
  return true;
}

struct Connection {
  json j;
  std::string count_key;
  std::string device;
  bool net = false;
  bool socket = false;
};

// "<chan> : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA"
bool parse_connection(std::string_view chan, std::string_view rest, Connection& c) {
  const std::size_t via_at = rest.find(" via ");
  const std::size_t arrow = rest.find("->");
  if (via_at == std::string_view::npos || arrow == std::string_view::npos || arrow > via_at) return false;
  std::string_view via = sc::trim(rest.substr(via_at + 5));
  if (const std::size_t comm = via.find(" comm "); comm != std::string_view::npos) via = via.substr(0, comm);
  const auto left = sc::split_ws(rest.substr(0, via_at));  // "0[0]" "->" "1[1]" ["[send]"]
  if (left.size() < 3 || left[1] != "->") return false;
  std::int64_t from = 0, to = 0;
  std::string from_dev, to_dev;
  if (!parse_endpoint(left[0], from, from_dev) || !parse_endpoint(left[2], to, to_dev)) return false;
  json direction = nullptr;
  if (left.size() >= 4) {
    if (left[3] == "[send]") direction = "send";
    else if (left[3] == "[receive]") direction = "receive";
  }
  const auto comps = sc::split_on(via, '/');
  const std::string kind(comps[0]);
  std::string transport = kind;
  bool gdr = false;
  for (auto comp : comps)
    if (sc::starts_with(comp, "GDRDMA")) gdr = true;
  std::string count_key(via);
  if (kind == "P2P" && comps.size() >= 2) {
    transport = "P2P/" + std::string(sc::starts_with(comps[1], "direct") ? std::string_view("direct") : comps[1]);
  } else if (kind == "NET" && comps.size() >= 2) {
    transport = "NET/" + net_kind(comps[1]);
    c.net = true;
    c.socket = net_kind(comps[1]) == "Socket";
    count_key = "NET/" + std::string(comps[1]);
    for (std::size_t i = 3; i < comps.size(); ++i) count_key += "/" + std::string(comps[i]);
    if (comps.size() >= 3) {
      std::string_view d = comps[2];
      if (const std::size_t paren = d.find('('); paren != std::string_view::npos) d = d.substr(0, paren);
      c.device = std::string(d);
    }
  }
  auto chan_no = sc::to_int(chan.substr(0, chan.find('/')));
  c.j = {{"channel", chan_no ? json(*chan_no) : json(std::string(chan))},
         {"from_rank", from}, {"from_dev", from_dev}, {"to_rank", to}, {"to_dev", to_dev},
         {"direction", direction}, {"via", std::string(via)}, {"transport", transport}, {"gdrdma", gdr}};
  c.count_key = count_key;
  return true;
}

// "8 coll channels, 8 p2p channels, 1 p2p channels per peer"
json parse_channel_counts(std::string_view msg) {
  json out = json::object();
  for (auto part : sc::split_on(msg, ',')) {
    const auto toks = sc::split_ws(part);
    if (toks.size() < 3) continue;
    auto n = sc::to_int(toks[0]);
    if (!n) continue;
    std::string key;
    std::size_t i = 1;
    for (; i < toks.size() && toks[i] != "channels"; ++i) key += (key.empty() ? "" : "_") + std::string(toks[i]);
    if (i + 2 < toks.size() && toks[i + 1] == "per") key += "_per_" + std::string(toks[i + 2]);
    if (!key.empty()) out[key] = *n;
  }
  return out;
}

}  // namespace

Result<json> parse_nccl_debug(std::string_view text) {
  json out;
  out["format"] = "nccl-debug";
  out["nccl_version"] = nullptr;
  json network = {{"name", nullptr}, {"kind", nullptr}, {"using_network_lines", 0},
                  {"ofi_provider", nullptr}, {"ib_no_device", false}, {"ib_no_device_lines", 0},
                  {"socket_threads", nullptr}, {"sockets_per_thread", nullptr}, {"socket_thread_lines", 0}};
  std::set<std::string> ib_devices, socket_devices, plugin_messages, ring_specs;
  std::set<int> ranks;
  std::set<std::tuple<std::string, std::int64_t, std::string, bool>> gdr_seen;
  json gdr_hca = json::array();
  json connections = json::array();
  std::map<std::string, std::int64_t> counts, net_devices;
  std::int64_t net_conns = 0, net_gdr = 0, socket_conns = 0;
  std::int64_t rings = 0, trees = 0;
  json channel_counts = nullptr;
  json warnings = json::array();
  std::size_t nccl_lines = 0;

  for (const std::string& raw : sc::lines(text)) {
    int rank = -1;
    const std::string_view line = sc::trim(sc::strip_mpi_tag(raw, &rank));
    std::string_view msg;
    bool warn = false;
    if (auto m = sc::after(line, " NCCL INFO ")) msg = *m;
    else if (auto w = sc::after(line, " NCCL WARN ")) {
      msg = *w;
      warn = true;
    } else if (auto t = sc::after(line, " NCCL TRACE ")) msg = *t;
    else {
      if (auto v = sc::after(line, "NCCL version ")) {
        const auto toks = sc::split_ws(*v);
        if (!toks.empty() && out["nccl_version"].is_null()) out["nccl_version"] = std::string(toks[0]);
      }
      continue;
    }
    ++nccl_lines;
    if (rank >= 0) ranks.insert(rank);
    msg = sc::trim(msg);
    if (warn) {
      warnings.push_back(std::string(msg));
      continue;
    }

    if (auto v = sc::after(msg, "NCCL version ")) {
      const auto toks = sc::split_ws(*v);
      if (!toks.empty() && out["nccl_version"].is_null()) out["nccl_version"] = std::string(toks[0]);
    } else if (sc::starts_with(msg, "Channel ")) {
      const std::string_view body = msg.substr(8);
      const std::size_t colon = body.find(" : ");
      if (colon == std::string_view::npos) continue;
      const std::string_view chan = sc::trim(body.substr(0, colon));
      const std::string_view rest = body.substr(colon + 3);
      Connection c;
      if (parse_connection(chan, rest, c)) {
        ++counts[c.count_key];
        if (c.net) {
          ++net_conns;
          if (c.j["gdrdma"].get<bool>()) ++net_gdr;
          if (c.socket) ++socket_conns;
          if (!c.device.empty()) ++net_devices[c.device];
        }
        connections.push_back(std::move(c.j));
      } else {
        bool all_ints = true;
        const auto toks = sc::split_ws(rest);
        for (auto t : toks) all_ints = all_ints && sc::to_int(t).has_value();
        if (all_ints && !toks.empty()) ring_specs.insert(std::string(chan));
      }
    } else if (auto n = sc::after(msg, "Using network ")) {
      network["name"] = std::string(sc::trim(*n));
      network["kind"] = net_kind(sc::trim(*n));
      network["using_network_lines"] = network["using_network_lines"].get<int>() + 1;
    } else if (sc::icontains(msg, "Selected Provider is ")) {
      const std::size_t p = sc::to_lower(msg).find("selected provider is ");
      auto toks = sc::split_ws(msg.substr(p + 21));
      if (!toks.empty()) {
        std::string_view prov = toks[0];
        while (!prov.empty() && (prov.back() == ',' || prov.back() == '.')) prov.remove_suffix(1);
        network["ofi_provider"] = std::string(prov);
      }
    } else if (sc::contains(msg, "GPU Direct RDMA ") && sc::contains(msg, " for HCA ")) {
      const bool enabled = sc::contains(msg, "RDMA Enabled");
      std::string plugin(sc::trim(msg.substr(0, msg.find(':'))));
      std::int64_t idx = -1;
      std::string hca;
      if (auto a = sc::after(msg, " for HCA ")) {
        const auto toks = sc::split_ws(*a);
        if (!toks.empty())
          if (auto i = sc::to_int(toks[0])) idx = *i;
        const std::size_t q1 = a->find('\'');
        const std::size_t q2 = q1 == std::string_view::npos ? q1 : a->find('\'', q1 + 1);
        if (q2 != std::string_view::npos) hca = std::string(a->substr(q1 + 1, q2 - q1 - 1));
      }
      if (gdr_seen.emplace(plugin, idx, hca, enabled).second)
        gdr_hca.push_back({{"plugin", plugin}, {"hca_index", idx}, {"hca", hca}, {"enabled", enabled}});
    } else if (sc::starts_with(msg, "NET/IB") && sc::contains(msg, "No device found")) {
      network["ib_no_device"] = true;
      network["ib_no_device_lines"] = network["ib_no_device_lines"].get<int>() + 1;
    } else if (sc::starts_with(msg, "NET/Socket") && sc::contains(msg, " threads and ")) {
      // "NET/Socket: Using 4 threads and 1 sockets per thread". A line with
      // " threads and " but no "Using " has no counts (found by fuzzing: the
      // empty optional was dereferenced).
      const std::optional<std::string_view> using_at = sc::after(msg, "Using ");
      const auto toks = using_at ? sc::split_ws(*using_at) : std::vector<std::string_view>{};
      if (toks.size() >= 4) {
        network["socket_threads"] = sc::to_int(toks[0]) ? json(*sc::to_int(toks[0])) : json(nullptr);
        network["sockets_per_thread"] = sc::to_int(toks[3]) ? json(*sc::to_int(toks[3])) : json(nullptr);
      }
      network["socket_thread_lines"] = network["socket_thread_lines"].get<int>() + 1;
    } else if ((sc::starts_with(msg, "NET/IB") || sc::starts_with(msg, "NET/Socket")) &&
               sc::contains(msg, "Using [")) {
      std::string_view list = *sc::after(msg, "Using ");
      list = list.substr(0, list.find(';'));
      auto& dest = sc::starts_with(msg, "NET/IB") ? ib_devices : socket_devices;
      for (auto tok : sc::split_ws(list)) {
        if (!sc::starts_with(tok, "[")) continue;
        const std::size_t close = tok.find(']');
        if (close != std::string_view::npos) dest.insert(std::string(tok.substr(close + 1)));
      }
    } else if (sc::starts_with(msg, "NET/Plugin")) {
      plugin_messages.insert(std::string(msg));
    } else if (sc::starts_with(msg, "Connected all rings")) {
      ++rings;
    } else if (sc::starts_with(msg, "Connected all trees")) {
      ++trees;
    } else if (sc::contains(msg, " coll channels")) {
      if (channel_counts.is_null()) channel_counts = parse_channel_counts(msg);
    }
  }

  if (nccl_lines == 0) {
    return Error(Code::kInvalidArgument,
                 "not an NCCL debug log: no 'NCCL INFO' or 'NCCL WARN' lines (was NCCL_DEBUG=INFO set?)");
  }

  network["ib_devices"] = std::vector<std::string>(ib_devices.begin(), ib_devices.end());
  network["socket_devices"] = std::vector<std::string>(socket_devices.begin(), socket_devices.end());
  network["plugin_messages"] = std::vector<std::string>(plugin_messages.begin(), plugin_messages.end());
  // When no "Using network" line was printed, the NET connections name it.
  if (network["name"].is_null()) {
    for (const auto& c : connections) {
      const std::string via = c["via"].get<std::string>();
      if (sc::starts_with(via, "NET/")) {
        const auto comps = sc::split_on(via, '/');
        network["name"] = std::string(comps[1]);
        network["kind"] = net_kind(comps[1]);
        break;
      }
    }
  }
  out["ranks_seen"] = std::vector<int>(ranks.begin(), ranks.end());
  out["network"] = network;
  out["gdr_hca"] = gdr_hca;
  out["connections"] = connections;
  out["connection_counts"] = counts;
  out["net_connections"] = net_conns;
  out["net_gdrdma_connections"] = net_gdr;
  out["net_device_counts"] = net_devices;
  out["ring_channels"] = ring_specs.size();
  out["connected_all_rings"] = rings;
  out["connected_all_trees"] = trees;
  out["channel_counts"] = channel_counts;
  out["nccl_tests"] = nullptr;
  if (auto t = parse_nccl_tests(text); t.ok() && !(*t)["rows"].empty()) out["nccl_tests"] = std::move(*t);

  std::set<std::string> transports;
  for (const auto& c : connections) transports.insert(c["transport"].get<std::string>());
  const bool socket_fallback = network["kind"] == "Socket" || socket_conns > 0;
  out["summary"] = {{"transports", std::vector<std::string>(transports.begin(), transports.end())},
                    {"gdrdma", net_gdr > 0},
                    {"net", network["kind"]},
                    {"socket_fallback", socket_fallback}};

  Health h;
  if (socket_conns > 0)
    h.fail(std::to_string(socket_conns) + " inter-node connections over NET/Socket (TCP fallback, no RDMA)");
  else if (network["kind"] == "Socket")
    h.warn("NCCL selected the Socket network (no RDMA device found); no NET connections in the log");
  for (const auto& g : gdr_hca)
    if (!g["enabled"].get<bool>())
      h.fail("GPU Direct RDMA Disabled for HCA " + std::to_string(g["hca_index"].get<std::int64_t>()) + " '" +
             g["hca"].get<std::string>() + "' (" + g["plugin"].get<std::string>() + ")");
  const std::int64_t rdma_conns = net_conns - socket_conns;
  if (rdma_conns > 0 && net_gdr < rdma_conns)
    h.fail(std::to_string(rdma_conns - net_gdr) + " of " + std::to_string(rdma_conns) +
           " RDMA NET connections do not use GDRDMA");
  if (connections.empty()) h.warn("no 'Channel .. via ..' lines: transports unknown");
  for (const auto& w : warnings) h.warn("NCCL WARN " + w.get<std::string>());
  out["warnings"] = std::move(warnings);
  out["health"] = h.to_json();
  return out;
}

}  // namespace kiln::agent
