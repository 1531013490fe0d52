#include "agent/validate/parsers/nvbandwidth.h"

#include <limits>
#include <string>
#include <vector>

#include "agent/validate/parsers/health.h"
#include "agent/validate/parsers/text_scan.h"

namespace kiln::agent {

using nlohmann::json;
namespace sc = scan;

namespace {

bool is_matrix_title(std::string_view t) {
  return sc::contains(t, "(row)") && sc::contains(t, "(column)");
}

bool all_ints(const std::vector<std::string_view>& toks) {
  if (toks.empty()) return false;
  for (auto tok : toks)
    if (!sc::to_int(tok)) return false;
  return true;
}

// "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)"
json new_matrix(std::string_view title) {
  json m = {{"title", std::string(title)}, {"unit", nullptr}, {"row_kind", nullptr}, {"column_kind", nullptr},
            {"direction", nullptr}, {"columns", json::array()}, {"row_ids", json::array()},
            {"values", json::array()}};
  if (const std::size_t open = title.rfind('('); open != std::string_view::npos) {
    const std::size_t close = title.find(')', open);
    if (close != std::string_view::npos && open + 1 < close) {
      const std::string_view unit = title.substr(open + 1, close - open - 1);
      if (unit != "row" && unit != "column") m["unit"] = std::string(unit);
    }
  }
  const auto toks = sc::split_ws(title);
  for (std::size_t i = 0; i < toks.size(); ++i) {
    if (sc::ends_with(toks[i], "(row)")) {
      m["row_kind"] = std::string(toks[i].substr(0, toks[i].size() - 5));
      if (i + 2 < toks.size() && sc::ends_with(toks[i + 2], "(column)")) {
        m["direction"] = std::string(toks[i + 1]);
        m["column_kind"] = std::string(toks[i + 2].substr(0, toks[i + 2].size() - 8));
      }
    }
  }
  return m;
}

void finish_matrix(json& m) {
  const bool same_kind = m["row_kind"] == m["column_kind"];
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0;
  std::int64_t n = 0;
  const json& rows = m["values"];
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (std::size_t c = 0; c < rows[r].size(); ++c) {
      if (!rows[r][c].is_number()) continue;
      if (same_kind && r < m["row_ids"].size() && c < m["columns"].size() && m["row_ids"][r] == m["columns"][c])
        continue;
      const double v = rows[r][c].get<double>();
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
      ++n;
    }
  }
  m["value_count"] = n;
  m["min"] = n ? json(lo) : json(nullptr);
  m["max"] = n ? json(hi) : json(nullptr);
  m["mean"] = n ? json(sum / static_cast<double>(n)) : json(nullptr);
}

bool is_error_line(std::string_view t) {
  return sc::contains(t, "Invalid value when checking") || sc::contains(t, "ASSERT") || sc::contains(t, "ERROR") ||
         sc::starts_with(t, "Error") || sc::contains(t, "CUDA_ERROR") || sc::icontains(t, "failed") ||
         sc::contains(t, "Current offset");
}

}  // namespace

Result<json> parse_nvbandwidth(std::string_view text) {
  json out;
  out["format"] = "nvbandwidth";
  for (const char* k : {"version", "git_version", "driver_version", "cuda_runtime_version", "cuda_driver_version"})
    out[k] = nullptr;
  json devices = json::array(), tests = json::array(), errors = json::array(), notes = json::array();
  json sums = json::object();
  bool marker = false;
  json* matrix = nullptr;  // the matrix being filled (last of the last test)
  bool header_seen = false;

  auto current_test = [&]() -> json& {
    if (tests.empty())
      tests.push_back({{"name", nullptr}, {"matrices", json::array()}, {"sum", nullptr}, {"waived", false},
                       {"errors", json::array()}});
    return tests.back();
  };

  for (const std::string& raw : sc::lines(text)) {
    const std::string_view t = sc::trim(raw);
    if (t.empty()) {
      if (matrix) finish_matrix(*matrix);
      matrix = nullptr;
      continue;
    }
    // Matrix body: the column-id header, then "<row id> v v v".
    if (matrix) {
      const auto toks = sc::split_ws(t);
      if (!header_seen && all_ints(toks)) {
        for (auto tok : toks) (*matrix)["columns"].push_back(*sc::to_int(tok));
        header_seen = true;
        continue;
      }
      if (header_seen && toks.size() >= 2 && sc::to_int(toks[0])) {
        json row = json::array();
        bool numeric = true;
        for (std::size_t i = 1; i < toks.size(); ++i) {
          if (auto d = sc::to_double(toks[i])) row.push_back(*d);
          else if (toks[i] == "N/A") row.push_back(nullptr);
          else numeric = false;
        }
        if (numeric) {
          (*matrix)["row_ids"].push_back(*sc::to_int(toks[0]));
          (*matrix)["values"].push_back(std::move(row));
          continue;
        }
      }
      finish_matrix(*matrix);
      matrix = nullptr;
    }

    auto value_after = [&](std::string_view key) -> std::optional<std::string> {
      if (!sc::starts_with(t, key)) return std::nullopt;
      return std::string(sc::trim(t.substr(key.size())));
    };
    if (auto v = value_after("nvbandwidth Version:")) {
      out["version"] = *v;
      marker = true;
    } else if (auto g = value_after("Built from Git version:")) {
      out["git_version"] = *g;
    } else if (auto rv = value_after("CUDA Runtime Version:")) {
      out["cuda_runtime_version"] = sc::to_int(*rv) ? json(*sc::to_int(*rv)) : json(*rv);
    } else if (auto dv = value_after("CUDA Driver Version:")) {
      out["cuda_driver_version"] = sc::to_int(*dv) ? json(*sc::to_int(*dv)) : json(*dv);
    } else if (auto drv = value_after("Driver Version:")) {
      out["driver_version"] = *drv;
    } else if (sc::starts_with(t, "Device ") && t.find(':') != std::string_view::npos &&
               sc::to_int(t.substr(7, t.find(':') - 7))) {
      const std::size_t colon = t.find(':');
      std::string_view rest = sc::trim(t.substr(colon + 1));
      json bus = nullptr;
      if (const std::size_t open = rest.rfind('('); open != std::string_view::npos && rest.back() == ')') {
        bus = std::string(rest.substr(open + 1, rest.size() - open - 2));
        rest = sc::trim(rest.substr(0, open));
      }
      devices.push_back({{"index", *sc::to_int(t.substr(7, colon - 7))}, {"name", std::string(rest)}, {"bus_id", bus}});
    } else if (auto run = value_after("Running ")) {
      std::string name = *run;
      while (!name.empty() && (name.back() == '.' || name.back() == ' ')) name.pop_back();
      tests.push_back({{"name", name}, {"matrices", json::array()}, {"sum", nullptr}, {"waived", false},
                       {"errors", json::array()}});
      marker = true;
    } else if (is_matrix_title(t)) {
      json& test = current_test();
      test["matrices"].push_back(new_matrix(t));
      matrix = &test["matrices"].back();
      header_seen = false;
      marker = true;
    } else if (sc::starts_with(t, "SUM ")) {
      const auto toks = sc::split_ws(t);
      if (toks.size() >= 3) {
        auto v = sc::to_double(toks.back());
        std::string name(toks[1]);
        json& test = tests.empty() ? current_test() : tests.back();
        if (test["name"].is_null()) test["name"] = name;
        if (test["name"] == name) {
          test["sum"] = v ? json(*v) : json(nullptr);
        } else {
          tests.push_back({{"name", name}, {"matrices", json::array()}, {"sum", v ? json(*v) : json(nullptr)},
                           {"waived", false}, {"errors", json::array()}});
        }
        if (v) sums[name] = *v;
        marker = true;
      }
    } else if (sc::icontains(t, "waived")) {
      if (!tests.empty()) tests.back()["waived"] = true;
      notes.push_back(std::string(t));
    } else if (sc::starts_with(t, "NOTE") || sc::starts_with(t, "Performance can vary")) {
      notes.push_back(std::string(t));
    } else if (is_error_line(t)) {
      errors.push_back(std::string(t));
      if (!tests.empty()) tests.back()["errors"].push_back(std::string(t));
    }
  }
  if (matrix) finish_matrix(*matrix);

  if (!marker)
    return Error(Code::kInvalidArgument,
                 "not nvbandwidth output: no version header, 'Running' line, bandwidth matrix or SUM line");

  Health h;
  for (const auto& e : errors) h.fail(e.get<std::string>());
  for (auto& test : tests) {
    bool has_values = false;
    for (auto& m : test["matrices"]) {
      if (!m.contains("value_count")) finish_matrix(m);
      has_values = has_values || m["value_count"].get<std::int64_t>() > 0;
    }
    const std::string name = test["name"].is_string() ? test["name"].get<std::string>() : "(unnamed)";
    if (!has_values && test["sum"].is_null() && !test["waived"].get<bool>())
      h.fail("test " + name + " produced no results");
    if (test["waived"].get<bool>()) h.warn("test " + name + " was waived");
  }
  out["devices"] = devices;
  out["tests"] = tests;
  out["sums"] = sums;
  out["errors"] = errors;
  out["notes"] = notes;
  out["health"] = h.to_json();
  return out;
}

}  // namespace kiln::agent
