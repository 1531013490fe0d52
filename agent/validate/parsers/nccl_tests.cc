#include "agent/validate/parsers/nccl_tests.h"

#include <cstdint>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/validate/parsers/health.h"
#include "agent/validate/parsers/text_scan.h"

namespace kiln::agent {

using nlohmann::json;
namespace sc = scan;

namespace {

const std::vector<std::string> kCurrentColumns = {"size", "count", "type", "redop", "root",
                                                  "time", "algbw", "busbw", "#wrong",
                                                  "time", "algbw", "busbw", "#wrong"};
const std::vector<std::string> kOldColumns = {"size", "count", "type", "redop",
                                              "time", "algbw", "busbw", "error",
                                              "time", "algbw", "busbw", "error"};

json number_or_null(std::string_view tok) {
  if (auto i = sc::to_int(tok)) return *i;
  if (auto d = sc::to_double(tok)) return *d;
  return nullptr;
}

bool is_header_line(const std::vector<std::string_view>& toks) {
  bool size = false, count = false, bw = false;
  for (auto t : toks) {
    if (t == "size") size = true;
    if (t == "count") count = true;
    if (t == "busbw" || t == "algbw") bw = true;
  }
  return size && count && bw;
}

// Bytes per element of an nccl-tests type name; 0 when unknown.
int type_size(std::string_view t) {
  if (t == "int8" || t == "uint8" || t == "char" || sc::starts_with(t, "f8") || sc::starts_with(t, "fp8")) return 1;
  if (t == "half" || t == "bfloat16" || t == "float16") return 2;
  if (t == "float" || t == "int32" || t == "uint32" || t == "int" || t == "float32") return 4;
  if (t == "double" || t == "int64" || t == "uint64" || t == "float64") return 8;
  return 0;
}

// Infers the collective from the table when the program name is not printed.
// size/count tells "count per rank" collectives (all_gather, gather, scatter,
// reduce_scatter) from "count is the whole buffer" ones; redop and root split
// the rest. Ambiguous cases return no op and the candidates.
void infer_op(const json& rows, int nranks, json& out) {
  out["op_candidates"] = json::array();
  if (rows.empty()) return;
  const json& r = rows.back();
  const int ts = type_size(r.value("type", std::string()));
  const auto size = r["size"].get<std::int64_t>();
  const auto count = r["count"].get<std::int64_t>();
  if (ts == 0 || count <= 0) return;
  const double ratio = static_cast<double>(size) / static_cast<double>(count * ts);
  const bool whole = std::fabs(ratio - 1.0) < 0.01;
  const bool per_rank = nranks > 1 && std::fabs(ratio - nranks) < 0.01 * nranks;
  const std::string redop = r.value("redop", std::string());
  const bool has_root = r["root"].is_number() && r["root"].get<std::int64_t>() >= 0;
  const bool reduces = !redop.empty() && redop != "none";
  std::vector<std::string> cands;
  if (reduces) {
    if (whole) cands = {has_root ? "reduce" : "all_reduce"};
    else if (per_rank) cands = {"reduce_scatter"};
  } else {
    if (has_root) {
      if (whole) cands = {"broadcast"};
      else if (per_rank) cands = {"gather", "scatter"};
    } else {
      if (per_rank) cands = {"all_gather"};
      else if (whole) cands = {"alltoall", "sendrecv", "hypercube"};
    }
  }
  if (cands.size() == 1) {
    out["op"] = cands.front();
    out["op_source"] = "inferred";
  }
  out["op_candidates"] = cands;
}

// The collective named by a "<op>_perf" program token anywhere in the text.
std::optional<std::string> program_in_text(std::string_view text) {
  static const char* kOps[] = {"reduce_scatter", "all_reduce", "all_gather", "alltoall", "broadcast",
                               "hypercube",      "sendrecv",   "gather",     "scatter",  "reduce"};
  for (const char* op : kOps) {
    const std::string needle = std::string(op) + "_perf";
    std::size_t pos = 0;
    while ((pos = text.find(needle, pos)) != std::string_view::npos) {
      const bool word_start =
          pos == 0 || !(std::isalnum(static_cast<unsigned char>(text[pos - 1])) || text[pos - 1] == '_');
      if (word_start) return std::string(op);
      pos += needle.size();
    }
  }
  return std::nullopt;
}

void parse_params(std::string_view body, json& params) {
  const auto toks = sc::split_ws(body);
  for (std::size_t i = 0; i + 1 < toks.size(); ++i) {
    std::string_view t = toks[i];
    std::string_view v = toks[i + 1];
    auto put_int = [&](const char* key) {
      if (auto n = sc::to_int(v)) params[key] = *n;
    };
    if (t == "nThread") put_int("nthread");
    else if (t == "nGpus") put_int("ngpus");
    else if (t == "minBytes") put_int("min_bytes");
    else if (t == "maxBytes") put_int("max_bytes");
    else if (t == "step:") {
      const std::size_t paren = v.find('(');
      if (auto n = sc::to_int(v.substr(0, paren))) params["step"] = *n;
      if (paren != std::string_view::npos) {
        std::string_view kind = v.substr(paren + 1);
        if (!kind.empty() && kind.back() == ')') kind.remove_suffix(1);
        params["step_kind"] = std::string(kind);
      }
    } else if (t == "iters:") {
      const std::string_view prev = i > 0 ? toks[i - 1] : std::string_view();
      if (prev == "warmup") put_int("warmup_iters");
      else if (prev == "agg") put_int("agg_iters");
      else put_int("iters");
    } else if (t == "validation:") put_int("validation");
    else if (t == "graph:") put_int("graph");
    else if (t == "unalign:") put_int("unalign");
  }
}

// "#  Rank  0 Group  0 Pid    181 on host device  0 [0x04] NVIDIA H100 80GB HBM3"
bool parse_device(std::string_view body, json& dev) {
  const auto toks = sc::split_ws(body);
  if (toks.size() < 8 || toks[0] != "Rank") return false;
  std::size_t i = 1;
  auto rank = sc::to_int(toks[i++]);
  if (!rank) return false;
  dev["rank"] = *rank;
  dev["group"] = nullptr;
  if (toks[i] == "Group" && i + 1 < toks.size()) {
    if (auto g = sc::to_int(toks[i + 1])) dev["group"] = *g;
    i += 2;
  }
  if (i + 6 > toks.size() || toks[i] != "Pid") return false;
  auto pid = sc::to_int(toks[i + 1]);
  if (!pid || toks[i + 2] != "on" || toks[i + 4] != "device") return false;
  dev["pid"] = *pid;
  dev["host"] = std::string(toks[i + 3]);
  auto d = sc::to_int(toks[i + 5]);
  if (!d) return false;
  dev["device"] = *d;
  i += 6;
  dev["busid"] = nullptr;
  if (i < toks.size() && sc::starts_with(toks[i], "[")) {
    std::string_view b = toks[i];
    b.remove_prefix(1);
    if (!b.empty() && b.back() == ']') b.remove_suffix(1);
    dev["busid"] = std::string(b);
    ++i;
  }
  std::string model;
  for (; i < toks.size(); ++i) {
    if (!model.empty()) model.push_back(' ');
    model.append(toks[i]);
  }
  dev["model"] = model;
  return true;
}

json placement(const std::vector<std::string>& cols, const std::vector<std::string_view>& toks,
               std::size_t begin, std::size_t end) {
  json p = {{"time_us", nullptr}, {"algbw", nullptr}, {"busbw", nullptr},
            {"wrong", nullptr},   {"error", nullptr}};
  for (std::size_t c = begin; c < end && c < toks.size(); ++c) {
    const std::string& name = cols[c];
    const json v = number_or_null(toks[c]);
    if (name == "time" || name == "cputime") p["time_us"] = v;
    else if (name == "algbw") p["algbw"] = v;
    else if (name == "busbw") p["busbw"] = v;
    else if (name == "#wrong") p["wrong"] = v;
    else if (name == "error") p["error"] = v;
    else if (name == "#bitdiff") p["bitdiff"] = v;
  }
  return p;
}

}  // namespace

Result<json> parse_nccl_tests(std::string_view text) {
  json out;
  out["format"] = "nccl-tests";
  out["program"] = nullptr;
  out["op"] = nullptr;
  out["op_source"] = "unknown";
  out["nccl_tests_version"] = nullptr;
  out["nccl_version"] = nullptr;
  out["params"] = json::object();
  out["devices"] = json::array();
  out["rows"] = json::array();
  out["out_of_bounds"] = nullptr;
  out["avg_busbw"] = nullptr;
  out["avg_busbw_check"] = nullptr;
  json errors = json::array(), warnings = json::array();

  std::vector<std::string> cols;
  bool saw_params = false, saw_header = false, saw_footer = false;
  std::size_t skipped_rows = 0;

  for (const std::string& raw : sc::lines(text)) {
    const std::string_view line = sc::trim(sc::strip_mpi_tag(raw));
    if (line.empty()) continue;

    if (auto v = sc::after(line, "NCCL version ")) {
      const auto toks = sc::split_ws(*v);
      if (!toks.empty() && out["nccl_version"].is_null()) out["nccl_version"] = std::string(toks[0]);
      continue;
    }
    if (sc::contains(line, " NCCL INFO ") || sc::contains(line, " NCCL TRACE ")) continue;
    if (sc::contains(line, " NCCL WARN ")) {
      warnings.push_back(std::string(line));
      continue;
    }
    if (line.front() != '#') {
      // A table row: integer size and count, then the rest of the columns.
      const auto toks = sc::split_ws(line);
      if (toks.size() >= 8 && sc::to_int(toks[0]) && sc::to_int(toks[1])) {
        const std::vector<std::string>* layout = &cols;
        if (cols.empty()) {
          if (toks.size() == kCurrentColumns.size()) layout = &kCurrentColumns;
          else if (toks.size() == kOldColumns.size()) layout = &kOldColumns;
          else {
            ++skipped_rows;
            continue;
          }
        }
        const auto& lc = *layout;
        if (toks.size() < lc.size()) {
          ++skipped_rows;  // cut short
          continue;
        }
        json row;
        row["root"] = nullptr;
        std::size_t first_time = lc.size();
        for (std::size_t c = 0; c < lc.size(); ++c) {
          if (lc[c] == "time" || lc[c] == "cputime") {
            first_time = c;
            break;
          }
          if (lc[c] == "size" || lc[c] == "count" || lc[c] == "root") row[lc[c]] = number_or_null(toks[c]);
          else if (lc[c] == "type" || lc[c] == "redop") row[lc[c]] = std::string(toks[c]);
        }
        std::size_t second_time = lc.size();
        for (std::size_t c = first_time + 1; c < lc.size(); ++c)
          if (lc[c] == "time" || lc[c] == "cputime") {
            second_time = c;
            break;
          }
        if (!row["size"].is_number_integer() || !row["count"].is_number_integer()) {
          ++skipped_rows;
          continue;
        }
        row["out_of_place"] = placement(lc, toks, first_time, second_time);
        row["in_place"] = placement(lc, toks, second_time, lc.size());
        if (layout != &cols) {
          cols = lc;  // later rows use the guessed layout too
        }
        out["rows"].push_back(std::move(row));
        continue;
      }
      if (sc::icontains(line, "Test NCCL failure") || sc::icontains(line, "Test CUDA failure") ||
          sc::icontains(line, "NCCL failure") || sc::starts_with(line, "Error") ||
          (sc::icontains(line, "failed") && sc::icontains(line, "nccl"))) {
        errors.push_back(std::string(line));
      }
      continue;
    }

    // Comment lines ('#').
    const std::string_view body = sc::trim(line.substr(1));
    if (auto v = sc::after(body, "nccl-tests version ")) {
      const auto toks = sc::split_ws(*v);
      if (!toks.empty()) out["nccl_tests_version"] = std::string(toks[0]);
    } else if (auto v2 = sc::after(body, "Collective test starting:")) {
      const std::string prog(sc::trim(*v2));
      out["program"] = prog;
      std::string op = prog;
      if (sc::ends_with(op, "_mpi")) op.resize(op.size() - 4);
      if (sc::ends_with(op, "_perf")) op.resize(op.size() - 5);
      out["op"] = op;
      out["op_source"] = "header";
    } else if (sc::starts_with(body, "nThread ")) {
      parse_params(body, out["params"]);
      saw_params = true;
    } else if (sc::starts_with(body, "Rank ")) {
      json dev;
      if (parse_device(body, dev)) out["devices"].push_back(std::move(dev));
    } else if (auto oob = sc::after(body, "Out of bounds values")) {
      const auto toks = sc::split_ws(*oob);  // ": 0 OK"
      if (toks.size() >= 2) {
        if (auto n = sc::to_int(toks[1])) {
          const bool ok = toks.size() < 3 || toks[2] == "OK";
          out["out_of_bounds"] = {{"count", *n}, {"ok", ok && *n == 0}};
        }
      }
    } else if (auto bw = sc::after(body, "Avg bus bandwidth")) {
      const auto toks = sc::split_ws(*bw);  // ": 145.47 [OK|FAILED]"
      if (toks.size() >= 2) {
        if (auto d = sc::to_double(toks[1])) {
          out["avg_busbw"] = *d;
          saw_footer = true;
        }
        if (toks.size() >= 3) out["avg_busbw_check"] = std::string(toks[2]);
      }
    } else if (auto bm = sc::after(body, "Bitwise mismatches")) {
      const auto toks = sc::split_ws(*bm);
      if (toks.size() >= 2)
        if (auto n = sc::to_int(toks[1])) out["bitwise_mismatches"] = *n;
    } else if (auto e = sc::after(body, "error:")) {
      errors.push_back(std::string(sc::trim(*e)));
    } else {
      const auto toks = sc::split_ws(body);
      if (is_header_line(toks)) {
        cols.clear();
        for (auto t : toks) cols.emplace_back(t);
        saw_header = true;
      }
    }
  }

  json& rows = out["rows"];
  if (!saw_params && !saw_header && rows.empty()) {
    return Error(Code::kInvalidArgument,
                 "not nccl-tests output: no '# nThread' header, column header or result table found");
  }

  out["table_format"] = (std::find(cols.begin(), cols.end(), "root") != cols.end() ||
                         std::find(cols.begin(), cols.end(), "#wrong") != cols.end())
                            ? "current"
                            : (cols.empty() ? json(nullptr) : json("old"));
  std::set<std::string> hosts;
  for (const auto& d : out["devices"]) hosts.insert(d["host"].get<std::string>());
  out["hosts"] = std::vector<std::string>(hosts.begin(), hosts.end());
  out["nranks"] = out["devices"].size();
  if (skipped_rows) out["skipped_rows"] = skipped_rows;

  // Totals and peaks.
  json wrong_total = nullptr;
  json max_bw = nullptr;
  const json* largest = nullptr;
  for (const auto& r : rows) {
    for (const char* place : {"out_of_place", "in_place"}) {
      const json& p = r[place];
      if (p["wrong"].is_number_integer()) {
        // Saturating: a garbled "#wrong" column must not overflow the sum
        // (found by fuzzing; any non-zero total fails the check anyway).
        std::int64_t sum = 0;
        const std::int64_t before = wrong_total.is_null() ? 0 : wrong_total.get<std::int64_t>();
        if (__builtin_add_overflow(before, p["wrong"].get<std::int64_t>(), &sum))
          sum = p["wrong"].get<std::int64_t>() > 0 ? INT64_MAX : INT64_MIN;
        wrong_total = sum;
      }
      if (p["busbw"].is_number() && (max_bw.is_null() || p["busbw"].get<double>() > max_bw["busbw"].get<double>())) {
        max_bw = {{"busbw", p["busbw"]}, {"size", r["size"]}, {"placement", place}};
      }
    }
    if (!largest || r["size"].get<std::int64_t>() >= (*largest)["size"].get<std::int64_t>()) largest = &r;
  }
  out["wrong_total"] = wrong_total;
  out["max_busbw"] = max_bw;
  out["largest_size"] = nullptr;
  if (largest) {
    out["largest_size"] = {{"size", (*largest)["size"]},
                           {"busbw_out_of_place", (*largest)["out_of_place"]["busbw"]},
                           {"busbw_in_place", (*largest)["in_place"]["busbw"]},
                           {"algbw_out_of_place", (*largest)["out_of_place"]["algbw"]},
                           {"algbw_in_place", (*largest)["in_place"]["algbw"]}};
  }
  if (out["op"].is_null()) {
    infer_op(rows, static_cast<int>(out["nranks"].get<std::size_t>()), out);
    // Older nccl-tests do not print the program, but a captured command line
    // or a loader message often names it ("./build/gather_perf -b 8 ...").
    if (auto named = program_in_text(text)) {
      const json& cands = out["op_candidates"];
      if (cands.empty() || std::find(cands.begin(), cands.end(), json(*named)) != cands.end()) {
        out["op"] = *named;
        out["op_source"] = "command";
      }
    }
  } else {
    out["op_candidates"] = json::array({out["op"]});
  }

  Health h;
  if (rows.empty()) h.fail("no result rows in the table");
  if (wrong_total.is_number_integer() && wrong_total.get<std::int64_t>() > 0)
    h.fail("#wrong > 0: " + std::to_string(wrong_total.get<std::int64_t>()) + " wrong elements (data corruption)");
  if (!out["out_of_bounds"].is_null() && out["out_of_bounds"]["count"].get<std::int64_t>() > 0)
    h.fail("out of bounds values: " + std::to_string(out["out_of_bounds"]["count"].get<std::int64_t>()));
  if (out.contains("bitwise_mismatches") && out["bitwise_mismatches"].get<std::int64_t>() > 0)
    h.fail("bitwise mismatches: " + std::to_string(out["bitwise_mismatches"].get<std::int64_t>()));
  if (out["avg_busbw_check"] == "FAILED") h.fail("average bus bandwidth check FAILED");
  if (!saw_footer) h.fail("no '# Avg bus bandwidth' footer: the run did not complete");
  for (const auto& e : errors) h.fail("error: " + e.get<std::string>());
  if (!rows.empty() && wrong_total.is_null() && out["table_format"] == "current")
    h.warn("data validation was off (#wrong is N/A)");
  if (skipped_rows) h.warn(std::to_string(skipped_rows) + " table rows were incomplete and skipped");
  for (const auto& w : warnings) h.warn(w.get<std::string>());
  out["errors"] = std::move(errors);
  out["warnings"] = std::move(warnings);
  out["health"] = h.to_json();
  return out;
}

Result<std::vector<NcclLatencyPoint>> nccl_small_message_latency(const json& parsed, std::int64_t max_bytes) {
  if (!parsed.is_object() || !parsed.contains("rows") || !parsed["rows"].is_array())
    return Error(Code::kInvalidArgument, "not an nccl-tests result: rows missing");
  std::vector<NcclLatencyPoint> out;
  const json& rows = parsed["rows"];
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const json& r = rows[i];
    const std::string where = "rows/" + std::to_string(i);
    if (!r.is_object() || !r.contains("size") || !r["size"].is_number_integer() ||
        r["size"].get<std::int64_t>() < 1)
      return Error(Code::kInvalidArgument, where + "/size must be a positive integer");
    const std::int64_t size = r["size"].get<std::int64_t>();
    if (size > max_bytes) continue;
    bool seen = false;
    for (const auto& p : out) seen |= p.bytes == size;
    if (seen) continue;
    const json* t = nullptr;
    if (r.contains("out_of_place") && r["out_of_place"].is_object() && r["out_of_place"].contains("time_us"))
      t = &r["out_of_place"]["time_us"];
    if (t == nullptr || !t->is_number())
      return Error(Code::kInvalidArgument, where + "/out_of_place/time_us is missing or not a number");
    const double v = t->get<double>();
    if (!std::isfinite(v) || v < 0 || v > 1e7)
      return Error(Code::kInvalidArgument, where + "/out_of_place/time_us is out of bounds [0, 1e7] us");
    out.push_back({size, v});
  }
  if (out.empty())
    return Error(Code::kInvalidArgument,
                 "rows: no row at or under " + std::to_string(max_bytes) + " bytes (the sweep did not start small)");
  return out;
}

}  // namespace kiln::agent
