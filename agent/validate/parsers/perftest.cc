#include "agent/validate/parsers/perftest.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "agent/validate/parsers/health.h"
#include "agent/validate/parsers/text_scan.h"

namespace kiln::agent {

using nlohmann::json;
namespace sc = scan;

namespace {

bool is_dashes(std::string_view t) { return t.size() >= 10 && t.find_first_not_of('-') == std::string_view::npos; }

bool is_title(std::string_view t) {
  return sc::ends_with(t, " Test") && t.find(':') == std::string_view::npos &&
         (sc::contains(t, "BW") || sc::contains(t, "Lat"));
}

// "Dual-port : OFF\x1fDevice\x1f: mlx5_5" style: columns joined by a separator.
void parse_settings_line(std::string_view line, std::map<std::string, std::string>& out) {
  std::string joined;
  for (auto col : sc::split_columns(line)) {
    if (!joined.empty()) joined.push_back('\x1f');
    joined.append(col);
  }
  std::size_t pos = 0;
  while (pos < joined.size()) {
    const std::size_t colon = joined.find(':', pos);
    if (colon == std::string::npos) break;
    std::string key = joined.substr(pos, colon - pos);
    for (char& c : key)
      if (c == '\x1f') c = ' ';
    std::size_t end = joined.find('\x1f', colon + 1);
    if (end == std::string::npos) end = joined.size();
    const std::string value(sc::trim(std::string_view(joined).substr(colon + 1, end - colon - 1)));
    const std::string k = sc::collapse_ws(key);
    if (!k.empty()) out[k] = value;
    pos = end + 1;
  }
}

std::string column_key(std::string_view label, json& bw_unit) {
  const std::size_t br = label.find('[');
  std::string_view name = label.substr(0, br);
  std::string_view unit;
  if (br != std::string_view::npos) {
    unit = label.substr(br + 1);
    if (!unit.empty() && unit.back() == ']') unit.remove_suffix(1);
  }
  name = sc::trim(name);
  if (name == "#bytes") return "bytes";
  if (name == "#iterations") return "iterations";
  if (name == "BW peak" || name == "BW average") {
    bw_unit = std::string(unit);
    return name == "BW peak" ? "bw_peak" : "bw_average";
  }
  if (name == "MsgRate") return "msg_rate_mpps";
  std::string key;
  for (char c : std::string(name) + (unit.empty() ? "" : "_" + std::string(unit))) {
    const bool alnum = std::isalnum(static_cast<unsigned char>(c)) != 0;
    if (alnum) key.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    else if (!key.empty() && key.back() != '_') key.push_back('_');
  }
  while (!key.empty() && key.back() == '_') key.pop_back();
  return key;
}

// " local address: LID 0000 QPN 0x0093 PSN 0xbf9bfe RKey 0x184300 VAddr 0x00ec99bedad000"
json parse_address(std::string_view rest) {
  json a = json::object();
  const auto toks = sc::split_ws(rest);
  for (std::size_t i = 0; i + 1 < toks.size(); i += 2) a[sc::to_lower(toks[i])] = std::string(toks[i + 1]);
  return a;
}

bool looks_like_error(std::string_view t) {
  // perftest's refusals of a CUDA latency run, worded without an error word.
  for (const char* refusal : {"supports CUDA latency tests with", "doesn't support CUDA tests with inline"})
    if (sc::contains(t, refusal)) return true;
  for (const char* w : {"couldn't", "could not", "fail", "unable", "errno", "segmentation fault", "error",
                        "cannot", "not supported", "abort", "invalid"})
    if (sc::icontains(t, w)) return true;
  return false;
}

// Column labels of the result header. Padding differs between tools and
// versions ("#bytes #iterations" has one space in the latency tools), so
// labels are rebuilt from words: "#..." is a label on its own, and a label
// ends at its "[unit]" ("BW peak[Gb/sec]", "99% percentile[usec]").
std::vector<std::string> header_columns(std::string_view line) {
  std::vector<std::string> cols;
  bool open = false;
  for (auto w : sc::split_ws(line)) {
    if (!open || w[0] == '#') {
      cols.emplace_back(w);
    } else {
      cols.back() += " " + std::string(w);
    }
    open = w[0] != '#' && w.back() != ']';
  }
  return cols;
}

// The set-up lines perftest prints for --use_cuda (and --use_cuda_dmabuf).
bool is_cuda_setup(std::string_view t) {
  for (const char* m : {"initializing CUDA", "CUDA devices in system", "CUDA device ", "Picking device No.",
                        "device name = [", "CUDA Ctx", "cuMemAlloc", "GPU buffer address", "DMA-BUF", "cuMemGetAddressRange"})
    if (sc::contains(t, m)) return true;
  return false;
}

json opt_int(const std::map<std::string, std::string>& s, const char* key) {
  auto it = s.find(key);
  if (it == s.end()) return nullptr;
  if (auto d = sc::leading_double(it->second)) return static_cast<std::int64_t>(*d);
  return nullptr;
}

json opt_str(const std::map<std::string, std::string>& s, const char* key) {
  auto it = s.find(key);
  return it == s.end() ? json(nullptr) : json(it->second);
}

}  // namespace

Result<json> parse_perftest(std::string_view text) {
  json out;
  out["format"] = "perftest";
  out["test"] = nullptr;
  out["kind"] = nullptr;
  std::map<std::string, std::string> settings;
  json cuda = nullptr;
  bool use_cuda = false;
  json local = json::array(), remote = json::array();
  json* last_addr = nullptr;
  std::vector<std::string> cols;
  json bw_unit = nullptr;
  json rows = json::array();
  json warnings = json::array(), errors = json::array();
  bool in_settings = false, perftest_marker = false, table_closed = false;

  for (const std::string& raw : sc::lines(text)) {
    const std::string_view t = sc::trim(raw);
    if (t.empty()) continue;
    if (is_dashes(t)) {
      if (in_settings && !settings.empty()) in_settings = false;
      if (!rows.empty()) table_closed = true;
      continue;
    }
    if (is_title(t)) {
      out["test"] = std::string(t);
      out["kind"] = sc::contains(t, "BW") ? "bw" : "lat";
      in_settings = true;
      perftest_marker = true;
      continue;
    }
    if (sc::starts_with(t, "#bytes")) {
      cols = header_columns(t);
      in_settings = false;
      perftest_marker = true;
      continue;
    }
    if (auto a = sc::after(t, "local address:"); a && sc::starts_with(t, "local address")) {
      local.push_back(parse_address(*a));
      last_addr = &local.back();
      continue;
    }
    if (auto a = sc::after(t, "remote address:"); a && sc::starts_with(t, "remote address")) {
      remote.push_back(parse_address(*a));
      last_addr = &remote.back();
      continue;
    }
    if (sc::starts_with(t, "GID:")) {
      if (last_addr) (*last_addr)["gid"] = std::string(sc::trim(t.substr(4)));
      continue;
    }
    if (!cols.empty()) {
      const auto toks = sc::split_ws(t);
      if (toks.size() >= 2 && sc::to_int(toks[0])) {
        json row = json::object();
        for (std::size_t i = 0; i < toks.size() && i < cols.size(); ++i) {
          json unit_unused = nullptr;
          const std::string key = column_key(cols[i], i < 2 ? unit_unused : bw_unit);
          if (auto n = sc::to_int(toks[i])) row[key] = *n;
          else if (auto d = sc::to_double(toks[i])) row[key] = *d;
          else row[key] = std::string(toks[i]);
        }
        if (toks.size() >= cols.size()) rows.push_back(std::move(row));
        else warnings.push_back("incomplete result row: " + std::string(t));
        continue;
      }
    }
    // CUDA set-up lines printed by --use_cuda.
    if (is_cuda_setup(t)) {
      use_cuda = true;
      perftest_marker = true;
      if (cuda.is_null())
        cuda = {{"device_index", nullptr}, {"device_name", nullptr}, {"pci_address", nullptr}, {"buffer_bytes", nullptr}};
      if (auto p = sc::after(t, "PCIe address is ")) cuda["pci_address"] = std::string(sc::trim(*p));
      if (auto n = sc::after(t, "device name = [")) cuda["device_name"] = std::string(n->substr(0, n->find(']')));
      if (auto b = sc::after(t, "cuMemAlloc() of a ")) {
        if (auto v = sc::leading_double(*b)) cuda["buffer_bytes"] = static_cast<std::int64_t>(*v);
      }
      if (auto d = sc::after(t, "Picking device No. ")) {
        if (auto v = sc::to_int(sc::trim(*d).substr(0, sc::trim(*d).find_first_not_of("0123456789"))))
          cuda["device_index"] = *v;
      }
      if (looks_like_error(t)) errors.push_back(std::string(t));
      continue;
    }
    if (in_settings && t.find(':') != std::string_view::npos) {
      parse_settings_line(raw, settings);
      continue;
    }
    if (sc::icontains(t, "warning") || sc::contains(t, "CPU Frequency is not max")) {
      warnings.push_back(std::string(t));
      continue;
    }
    if (looks_like_error(t)) {
      errors.push_back(std::string(t));
      if (sc::icontains(t, "rdma") || sc::contains(t, "ibv_") || sc::contains(t, " MR") ||
          sc::contains(t, "QP") || sc::icontains(t, "perftest") || sc::starts_with(t, "ERRNO"))
        perftest_marker = true;
    }
  }

  if (!perftest_marker && settings.empty())
    return Error(Code::kInvalidArgument,
                 "not perftest output: no test title, settings block, '#bytes' table, CUDA set-up or RDMA error");

  out["settings"] = settings;
  out["device"] = opt_str(settings, "Device");
  out["transport"] = opt_str(settings, "Transport type");
  out["link_type"] = opt_str(settings, "Link type");
  out["connection_type"] = opt_str(settings, "Connection type");
  out["mtu"] = opt_int(settings, "Mtu");
  out["gid_index"] = opt_int(settings, "GID index");
  out["qps"] = opt_int(settings, "Number of qps");
  out["tx_depth"] = opt_int(settings, "TX depth");
  out["cq_moderation"] = opt_int(settings, "CQ Moderation");
  out["post_list"] = opt_int(settings, "Post List");
  out["rdma_cm"] = nullptr;
  if (auto it = settings.find("rdma_cm QPs"); it != settings.end()) out["rdma_cm"] = it->second == "ON";
  out["use_cuda"] = use_cuda;
  out["cuda"] = cuda;
  out["local"] = local;
  out["remote"] = remote;
  out["columns"] = cols;
  out["bw_unit"] = bw_unit;
  json bw_avg_max = nullptr, bw_peak_max = nullptr;
  for (const auto& r : rows) {
    if (r.contains("bw_average") && r["bw_average"].is_number() &&
        (bw_avg_max.is_null() || r["bw_average"].get<double>() > bw_avg_max.get<double>()))
      bw_avg_max = r["bw_average"].get<double>();
    if (r.contains("bw_peak") && r["bw_peak"].is_number() &&
        (bw_peak_max.is_null() || r["bw_peak"].get<double>() > bw_peak_max.get<double>()))
      bw_peak_max = r["bw_peak"].get<double>();
  }
  out["rows"] = rows;
  out["table_closed"] = table_closed;
  out["bw_average_max"] = bw_avg_max;
  out["bw_peak_max"] = bw_peak_max;

  Health h;
  for (const auto& e : errors) h.fail(e.get<std::string>());
  if (rows.empty()) h.fail("no result rows (the test did not run to a measurement)");
  for (const auto& w : warnings) h.warn(w.get<std::string>());
  out["warnings"] = warnings;
  out["errors"] = errors;
  out["status"] = h.failed() ? "fail" : "pass";
  out["health"] = h.to_json();
  return out;
}

namespace {

// A number from a row, bounded; nullopt (and `why` set) when out of bounds.
std::optional<double> bounded_us(const json& row, const char* key, std::size_t index, std::string& why) {
  auto it = row.find(key);
  if (it == row.end()) return std::nullopt;
  const std::string where = "rows/" + std::to_string(index) + "/" + key;
  if (!it->is_number()) {
    why = where + " is not a number";
    return std::nullopt;
  }
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < 0 || v > 1e7) {
    why = where + " is out of bounds [0, 1e7] us";
    return std::nullopt;
  }
  return v;
}

}  // namespace

Result<std::vector<PerftestLatencyRow>> perftest_latency_rows(const json& parsed) {
  if (!parsed.is_object() || !parsed.contains("rows") || !parsed["rows"].is_array() ||
      !parsed.contains("columns") || !parsed["columns"].is_array())
    return Error(Code::kInvalidArgument, "not a perftest result: rows/columns missing");
  bool has_typical = false;
  for (const auto& c : parsed["columns"])
    if (c.is_string() && sc::starts_with(c.get<std::string>(), "t_typical")) has_typical = true;
  if (!has_typical)
    return Error(Code::kInvalidArgument,
                 "columns: no t_typical[usec] column (a bandwidth table, or a latency run with -D that "
                 "prints only the average)");
  const json& rows = parsed["rows"];
  if (rows.empty()) return Error(Code::kInvalidArgument, "rows: the latency table has no rows");
  std::vector<PerftestLatencyRow> out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const json& r = rows[i];
    const std::string where = "rows/" + std::to_string(i);
    if (!r.is_object()) return Error(Code::kInvalidArgument, where + " is not an object");
    PerftestLatencyRow row;
    auto b = r.find("bytes");
    if (b == r.end() || !b->is_number_integer() || b->get<std::int64_t>() < 1 ||
        b->get<std::int64_t>() > (std::int64_t{1} << 31))
      return Error(Code::kInvalidArgument, where + "/bytes must be an integer in [1, 2^31]");
    row.bytes = b->get<std::int64_t>();
    auto n = r.find("iterations");
    if (n == r.end() || !n->is_number_integer() || n->get<std::int64_t>() < 1)
      return Error(Code::kInvalidArgument, where + "/iterations must be a positive integer");
    row.iterations = n->get<std::int64_t>();
    std::string why;
    const auto min = bounded_us(r, "t_min_usec", i, why);
    const auto max = bounded_us(r, "t_max_usec", i, why);
    const auto typ = bounded_us(r, "t_typical_usec", i, why);
    row.avg_us = bounded_us(r, "t_avg_usec", i, why);
    row.stdev_us = bounded_us(r, "t_stdev_usec", i, why);
    row.p99_us = bounded_us(r, "99_percentile_usec", i, why);
    row.p999_us = bounded_us(r, "99_9_percentile_usec", i, why);
    if (!why.empty()) return Error(Code::kInvalidArgument, why);
    if (!min || !max || !typ)
      return Error(Code::kInvalidArgument, where + ": t_min, t_max and t_typical are all required");
    if (*min > *max || *typ < *min || *typ > *max)
      return Error(Code::kInvalidArgument, where + ": t_typical must lie between t_min and t_max");
    row.min_us = *min;
    row.max_us = *max;
    row.typical_us = *typ;
    out.push_back(row);
  }
  return out;
}

}  // namespace kiln::agent
