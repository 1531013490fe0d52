#include "agent/validate/parsers/cyclictest.h"

#include <map>
#include <string>
#include <vector>

#include "agent/validate/parsers/health.h"
#include "agent/validate/parsers/text_scan.h"

namespace kiln::agent {

using nlohmann::json;
namespace sc = scan;

namespace {

json find_key(const json& o, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    auto it = o.find(k);
    if (it != o.end()) return *it;
  }
  return nullptr;
}

Result<json> parse_json_output(const json& doc) {
  if (!doc.is_object() || !doc.contains("thread") || !doc["thread"].is_object())
    return Error(Code::kInvalidArgument, "not cyclictest --json output: no \"thread\" object");
  json out;
  out["format"] = "cyclictest";
  out["source"] = "json";
  out["header"] = nullptr;
  out["histogram"] = nullptr;
  // rt-tests spells some keys with a trailing colon ("cmdline:").
  out["json"] = {{"file_version", find_key(doc, {"file_version"})},
                 {"cmdline", find_key(doc, {"cmdline:", "cmdline"})},
                 {"rt_test_version", find_key(doc, {"rt_test_version:", "rt_test_version"})},
                 {"start_time", find_key(doc, {"start_time"})},
                 {"end_time", find_key(doc, {"end_time"})},
                 {"return_code", find_key(doc, {"return_code"})},
                 {"num_threads", find_key(doc, {"num_threads"})},
                 {"resolution_in_ns", find_key(doc, {"resolution_in_ns"})},
                 {"sysinfo", find_key(doc, {"sysinfo"})}};
  std::map<std::int64_t, json> threads;
  Health h;
  for (auto it = doc["thread"].begin(); it != doc["thread"].end(); ++it) {
    auto id = sc::to_int(it.key());
    if (!id || !it->is_object()) continue;
    const json& t = *it;
    json th = {{"thread", *id}, {"tid", nullptr}, {"priority", nullptr}, {"interval_us", nullptr},
               {"cycles", find_key(t, {"cycles"})}, {"min_us", find_key(t, {"min"})}, {"act_us", nullptr},
               {"avg_us", find_key(t, {"avg"})}, {"max_us", find_key(t, {"max"})}, {"cpu", find_key(t, {"cpu"})},
               {"node", find_key(t, {"node"})}};
    std::int64_t total = 0;
    json hist = json::object();
    if (t.contains("histogram") && t["histogram"].is_object()) {
      for (auto b = t["histogram"].begin(); b != t["histogram"].end(); ++b) {
        if (!b->is_number_integer()) continue;
        hist[b.key()] = *b;
        total += b->get<std::int64_t>();
      }
    }
    th["histogram"] = hist;
    th["histogram_total"] = total;
    threads[*id] = std::move(th);
  }
  json arr = json::array();
  json max_lat = nullptr;
  for (auto& [id, th] : threads) {
    if (th["max_us"].is_number() && (max_lat.is_null() || th["max_us"].get<double>() > max_lat.get<double>()))
      max_lat = th["max_us"];
    if (!th["cycles"].is_number() || th["cycles"].get<double>() <= 0)
      h.fail("thread " + std::to_string(id) + " ran no cycles");
    arr.push_back(std::move(th));
  }
  const json rc = out["json"]["return_code"];
  if (rc.is_number_integer() && rc.get<std::int64_t>() != 0)
    h.fail("cyclictest return_code " + std::to_string(rc.get<std::int64_t>()));
  if (arr.empty()) h.fail("no threads in the JSON output");
  out["threads"] = arr;
  out["thread_count"] = arr.size();
  out["max_latency_us"] = max_lat;
  out["health"] = h.to_json();
  return out;
}

// "T: 0 ( 2013) P:80 I:200 C:1546988 Min:      6 Act:   18 Avg:   16 Max:     306"
bool parse_thread_line(std::string_view t, json& th) {
  if (!sc::starts_with(t, "T:")) return false;
  std::string_view rest = sc::ltrim(t.substr(2));
  std::size_t i = 0;
  while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i]))) ++i;
  auto id = sc::to_int(rest.substr(0, i));
  if (!id) return false;
  th = {{"thread", *id}, {"tid", nullptr}, {"priority", nullptr}, {"interval_us", nullptr}, {"cycles", nullptr},
        {"min_us", nullptr}, {"act_us", nullptr}, {"avg_us", nullptr}, {"max_us", nullptr}, {"cpu", nullptr}};
  rest = sc::ltrim(rest.substr(i));
  if (sc::starts_with(rest, "(")) {
    const std::size_t close = rest.find(')');
    if (close == std::string_view::npos) return false;
    if (auto tid = sc::to_int(rest.substr(1, close - 1))) th["tid"] = *tid;
    rest = rest.substr(close + 1);
  }
  // "Key:value" pairs; the value may follow after spaces.
  static const std::map<std::string, std::string> keys = {{"P", "priority"}, {"I", "interval_us"}, {"C", "cycles"},
                                                          {"Min", "min_us"}, {"Act", "act_us"}, {"Avg", "avg_us"},
                                                          {"Max", "max_us"}, {"CPU", "cpu"}};
  std::size_t pos = 0;
  bool any = false;
  while (pos < rest.size()) {
    const std::size_t colon = rest.find(':', pos);
    if (colon == std::string_view::npos) break;
    std::size_t ks = colon;
    while (ks > pos && std::isalpha(static_cast<unsigned char>(rest[ks - 1]))) --ks;
    const std::string key(rest.substr(ks, colon - ks));
    std::size_t vs = colon + 1;
    while (vs < rest.size() && (rest[vs] == ' ' || rest[vs] == '\t')) ++vs;
    std::size_t ve = vs;
    while (ve < rest.size() && (std::isdigit(static_cast<unsigned char>(rest[ve])) || rest[ve] == '.' || rest[ve] == '-'))
      ++ve;
    if (auto it = keys.find(key); it != keys.end() && ve > vs) {
      if (auto n = sc::to_int(rest.substr(vs, ve - vs))) th[it->second] = *n;
      else if (auto d = sc::to_double(rest.substr(vs, ve - vs))) th[it->second] = *d;
      any = true;
    }
    pos = ve > colon ? ve : colon + 1;
  }
  return any;
}

// "# Total: 001999931 001999930" -> [1999931, 1999930]
json numbers_after(std::string_view s) {
  json arr = json::array();
  for (auto tok : sc::split_ws(s))
    if (auto n = sc::to_int(tok)) arr.push_back(*n);
  return arr;
}

}  // namespace

Result<json> parse_cyclictest(std::string_view text) {
  const std::string_view body = sc::trim(text);
  if (!body.empty() && body.front() == '{') {
    json doc = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded())
      return Error(Code::kInvalidArgument, "cyclictest --json output is not valid JSON (truncated?)");
    return parse_json_output(doc);
  }

  json header = {{"cpu_dma_latency_us", nullptr}, {"policy", nullptr}, {"loadavg", nullptr}};
  std::map<std::int64_t, json> threads;
  json hist = nullptr;
  bool in_hist = false;
  for (const std::string& raw : sc::lines(text)) {
    const std::string_view t = sc::trim(raw);
    if (t.empty()) continue;
    json th;
    if (parse_thread_line(t, th)) {
      const auto id = th["thread"].get<std::int64_t>();
      threads[id] = std::move(th);
      in_hist = false;
      continue;
    }
    if (auto v = sc::after(t, "/dev/cpu_dma_latency set to ")) {
      if (auto n = sc::leading_double(*v)) header["cpu_dma_latency_us"] = static_cast<std::int64_t>(*n);
      continue;
    }
    if (sc::starts_with(t, "policy:")) {
      const std::string_view rest = t.substr(7);
      const std::size_t la = rest.find("loadavg:");
      std::string policy(sc::trim(rest.substr(0, la)));
      while (!policy.empty() && policy.back() == ':') policy.pop_back();
      header["policy"] = policy;
      if (la != std::string_view::npos) header["loadavg"] = std::string(sc::trim(rest.substr(la + 8)));
      continue;
    }
    if (t == "# Histogram") {
      in_hist = true;
      hist = {{"buckets", json::array()}, {"total", json::array()}, {"min_us", json::array()},
              {"avg_us", json::array()}, {"max_us", json::array()}, {"overflows", json::array()}};
      continue;
    }
    if (hist.is_null()) continue;
    if (in_hist && t.front() != '#') {
      const auto toks = sc::split_ws(t);
      if (toks.size() >= 2) {
        auto lat = sc::to_int(toks[0]);
        json counts = json::array();
        for (std::size_t i = 1; i < toks.size(); ++i)
          if (auto n = sc::to_int(toks[i])) counts.push_back(*n);
        if (lat && counts.size() == toks.size() - 1) hist["buckets"].push_back({{"latency_us", *lat}, {"counts", counts}});
      }
      continue;
    }
    if (auto v = sc::after(t, "# Total:")) hist["total"] = numbers_after(*v);
    else if (auto mn = sc::after(t, "# Min Latencies:")) hist["min_us"] = numbers_after(*mn);
    else if (auto av = sc::after(t, "# Avg Latencies:")) hist["avg_us"] = numbers_after(*av);
    else if (auto mx = sc::after(t, "# Max Latencies:")) hist["max_us"] = numbers_after(*mx);
    else if (auto ov = sc::after(t, "# Histogram Overflows:")) hist["overflows"] = numbers_after(*ov);
    if (t.front() == '#') in_hist = false;
  }
  if (threads.empty() && hist.is_null())
    return Error(Code::kInvalidArgument, "not cyclictest output: no 'T:' thread lines, '# Histogram' or JSON");

  json out;
  out["format"] = "cyclictest";
  out["source"] = "text";
  out["header"] = header;
  out["json"] = nullptr;
  json arr = json::array();
  json max_lat = nullptr;
  Health h;
  auto consider = [&](const json& v) {
    if (v.is_number() && (max_lat.is_null() || v.get<double>() > max_lat.get<double>())) max_lat = v;
  };
  for (auto& [id, th] : threads) {
    consider(th["max_us"]);
    if (th["cycles"].is_number() && th["cycles"].get<double>() <= 0)
      h.fail("thread " + std::to_string(id) + " ran no cycles");
    arr.push_back(std::move(th));
  }
  if (!hist.is_null()) {
    for (const auto& m : hist["max_us"]) consider(m);
    std::int64_t overflows = 0;
    for (const auto& o : hist["overflows"]) overflows += o.get<std::int64_t>();
    if (overflows > 0)
      h.fail("histogram overflows: " + std::to_string(overflows) + " samples beyond the histogram range");
    if (hist["buckets"].empty()) h.warn("histogram has no buckets");
  }
  out["threads"] = arr;
  out["thread_count"] = threads.empty() && !hist.is_null() ? hist["max_us"].size() : arr.size();
  out["histogram"] = hist;
  out["max_latency_us"] = max_lat;
  out["health"] = h.to_json();
  return out;
}

}  // namespace kiln::agent
