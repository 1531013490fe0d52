#include "agent/validate/parsers/smi_query.h"

#include <map>
#include <string>
#include <vector>

#include "agent/validate/parsers/health.h"
#include "agent/validate/parsers/text_scan.h"

namespace kiln::agent {

using nlohmann::json;
namespace sc = scan;

namespace {

std::size_t indent_of(std::string_view line) {
  std::size_t n = 0;
  for (char c : line) {
    if (c == ' ') ++n;
    else if (c == '\t') n += 4;
    else break;
  }
  return n;
}

// "GPU 00000000:19:00.0"
bool is_gpu_header(std::string_view t, std::string& bus) {
  if (!sc::starts_with(t, "GPU ")) return false;
  const std::string_view id = sc::trim(t.substr(4));
  if (id.find(' ') != std::string_view::npos || id.find(':') == std::string_view::npos) return false;
  bus = std::string(id);
  return true;
}

const json* child(const json* node, std::initializer_list<std::string_view> names) {
  if (!node || !node->is_object()) return nullptr;
  for (auto n : names) {
    auto it = node->find(std::string(n));
    if (it != node->end()) return &*it;
  }
  return nullptr;
}

json str_or_null(const json* node, std::initializer_list<std::string_view> names) {
  const json* v = child(node, names);
  return (v && v->is_string()) ? *v : json(nullptr);
}

json num_or_null(const json* node, std::initializer_list<std::string_view> names) {
  const json* v = child(node, names);
  if (!v || !v->is_string()) return nullptr;
  if (auto d = sc::leading_double(v->get<std::string>())) return *d;
  return nullptr;
}

json int_or_null(const json* node, std::initializer_list<std::string_view> names) {
  const json* v = child(node, names);
  if (!v || !v->is_string()) return nullptr;
  if (auto d = sc::leading_double(v->get<std::string>())) return static_cast<std::int64_t>(*d);
  return nullptr;
}

json yes_no(const json* node, std::initializer_list<std::string_view> names) {
  const json* v = child(node, names);
  if (!v || !v->is_string()) return nullptr;
  const std::string s = sc::to_lower(v->get<std::string>());
  if (s == "yes") return true;
  if (s == "no") return false;
  return nullptr;
}

// Leaves of a section, nested keys joined with " / ", numbers as ints.
void flatten(const json& node, const std::string& prefix, json& out) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + " / " + it.key();
    if (it->is_object()) {
      flatten(*it, key, out);
    } else if (it->is_string()) {
      if (auto n = sc::to_int(it->get<std::string>())) out[key] = *n;
      else out[key] = *it;
    }
  }
}

// Sums ECC counters of one kind. Old drivers print "Single Bit / ... / Total";
// newer ones print "<Memory> Correctable" / "<Memory> Uncorrectable[ Parity|SEC-DED]".
json ecc_sum(const json& flat, bool uncorrectable) {
  std::int64_t total = 0;
  bool any = false;
  const std::string old_total = uncorrectable ? "Double Bit / Total" : "Single Bit / Total";
  if (flat.contains(old_total) && flat[old_total].is_number_integer()) return flat[old_total];
  for (auto it = flat.begin(); it != flat.end(); ++it) {
    if (!it->is_number_integer()) continue;
    const std::string& k = it.key();
    const bool unc = sc::icontains(k, "uncorrectable");
    const bool cor = !unc && sc::icontains(k, "correctable");
    if ((uncorrectable && unc) || (!uncorrectable && cor)) {
      total += it->get<std::int64_t>();
      any = true;
    }
  }
  return any ? json(total) : json(nullptr);
}

json summarize_gpu(const std::string& bus, const json& f, Health& h) {
  json g;
  g["bus_id"] = bus;
  g["product_name"] = str_or_null(&f, {"Product Name"});
  g["uuid"] = str_or_null(&f, {"GPU UUID"});
  g["persistence_mode"] = str_or_null(&f, {"Persistence Mode"});
  g["display_mode"] = str_or_null(&f, {"Display Mode"});
  g["mig_mode_current"] = str_or_null(child(&f, {"MIG Mode"}), {"Current"});
  g["performance_state"] = str_or_null(&f, {"Performance State"});

  const json* pci = child(&f, {"PCI"});
  const json* link = child(pci, {"GPU Link Info"});
  g["pcie"] = {{"gen_current", int_or_null(child(link, {"PCIe Generation"}), {"Current"})},
               {"gen_max", int_or_null(child(link, {"PCIe Generation"}), {"Max"})},
               {"width_current", int_or_null(child(link, {"Link Width"}), {"Current"})},
               {"width_max", int_or_null(child(link, {"Link Width"}), {"Max"})},
               {"replays_since_reset", int_or_null(pci, {"Replays Since Reset"})}};

  // Clock event (throttle) reasons: the section name changed across drivers.
  json reasons = json::object();
  json active = json::array();
  for (auto it = f.begin(); it != f.end(); ++it) {
    const std::string& k = it.key();
    if (!it->is_object() || !sc::starts_with(k, "Clocks") || sc::contains(k, "Counters") ||
        !(sc::contains(k, "Reasons") || sc::contains(k, "Throttle")))
      continue;
    json flat = json::object();
    flatten(*it, "", flat);
    for (auto r = flat.begin(); r != flat.end(); ++r) {
      if (!r->is_string()) continue;
      reasons[r.key()] = *r;
      if (*r == "Active") active.push_back(r.key());
    }
  }
  g["clock_event_reasons"] = reasons;
  g["active_clock_event_reasons"] = active;

  const json* ecc_mode = child(&f, {"ECC Mode"});
  g["ecc_mode"] = ecc_mode ? json{{"current", str_or_null(ecc_mode, {"Current"})},
                                  {"pending", str_or_null(ecc_mode, {"Pending"})}}
                           : json(nullptr);
  g["ecc_errors"] = nullptr;
  if (const json* ecc = child(&f, {"ECC Errors"})) {
    json vol = json::object(), agg = json::object(), sources = json::object();
    if (const json* v = child(ecc, {"Volatile"})) flatten(*v, "", vol);
    if (const json* a = child(ecc, {"Aggregate"})) flatten(*a, "", agg);
    if (const json* s = child(ecc, {"Aggregate Uncorrectable SRAM Sources"})) flatten(*s, "", sources);
    json thr = yes_no(child(ecc, {"Aggregate"}), {"SRAM Threshold Exceeded"});
    if (thr.is_null()) thr = yes_no(ecc, {"SRAM Threshold Exceeded"});
    g["ecc_errors"] = {{"volatile", vol},
                       {"aggregate", agg},
                       {"aggregate_uncorrectable_sram_sources", sources},
                       {"volatile_correctable", ecc_sum(vol, false)},
                       {"volatile_uncorrectable", ecc_sum(vol, true)},
                       {"aggregate_correctable", ecc_sum(agg, false)},
                       {"aggregate_uncorrectable", ecc_sum(agg, true)},
                       {"sram_threshold_exceeded", thr}};
  }
  g["retired_pages"] = nullptr;
  if (const json* rp = child(&f, {"Retired Pages"})) {
    json pending = yes_no(rp, {"Pending Page Blacklist", "Pending Page Retirement", "Pending"});
    g["retired_pages"] = {{"single_bit_ecc", int_or_null(rp, {"Single Bit ECC"})},
                          {"double_bit_ecc", int_or_null(rp, {"Double Bit ECC"})},
                          {"pending", pending}};
  }
  g["remapped_rows"] = nullptr;
  if (const json* rr = child(&f, {"Remapped Rows"})) {
    const json* hist = child(rr, {"Bank Remap Availability Histogram"});
    g["remapped_rows"] = {{"correctable", int_or_null(rr, {"Correctable Error"})},
                          {"uncorrectable", int_or_null(rr, {"Uncorrectable Error"})},
                          {"pending", yes_no(rr, {"Pending"})},
                          {"failure", yes_no(rr, {"Remapping Failure Occurred"})},
                          {"histogram", hist ? json{{"max", int_or_null(hist, {"Max"})},
                                                    {"high", int_or_null(hist, {"High"})},
                                                    {"partial", int_or_null(hist, {"Partial"})},
                                                    {"low", int_or_null(hist, {"Low"})},
                                                    {"none", int_or_null(hist, {"None"})}}
                                             : json(nullptr)}};
  }
  const json* temp = child(&f, {"Temperature"});
  g["temperature"] = {{"gpu_c", num_or_null(temp, {"GPU Current Temp"})},
                      {"memory_c", num_or_null(temp, {"Memory Current Temp"})},
                      {"t_limit_c", num_or_null(temp, {"GPU T.Limit Temp"})},
                      {"shutdown_c", num_or_null(temp, {"GPU Shutdown Temp", "GPU Shutdown T.Limit Temp"})},
                      {"slowdown_c", num_or_null(temp, {"GPU Slowdown Temp", "GPU Slowdown T.Limit Temp"})}};
  const json* pw = child(&f, {"GPU Power Readings", "Power Readings"});
  const json* samples = child(&f, {"Power Samples"});
  g["power"] = {{"draw_w", num_or_null(pw, {"Power Draw", "Instantaneous Power Draw", "Average Power Draw"})},
                {"limit_w", num_or_null(pw, {"Current Power Limit", "Enforced Power Limit", "Power Limit"})},
                {"samples", samples ? json{{"max_w", num_or_null(samples, {"Max"})},
                                           {"min_w", num_or_null(samples, {"Min"})},
                                           {"avg_w", num_or_null(samples, {"Avg"})},
                                           {"count", int_or_null(samples, {"Number of Samples"})}}
                                    : json(nullptr)}};
  const json* clocks = child(&f, {"Clocks"});
  const json* max_clocks = child(&f, {"Max Clocks"});
  g["clocks"] = {{"graphics_mhz", num_or_null(clocks, {"Graphics"})},
                 {"sm_mhz", num_or_null(clocks, {"SM"})},
                 {"memory_mhz", num_or_null(clocks, {"Memory"})},
                 {"max_graphics_mhz", num_or_null(max_clocks, {"Graphics"})},
                 {"max_sm_mhz", num_or_null(max_clocks, {"SM"})}};
  const json* fabric = child(&f, {"Fabric"});
  g["fabric"] = fabric ? json{{"state", str_or_null(fabric, {"State"})}, {"status", str_or_null(fabric, {"Status"})}}
                       : json(nullptr);
  const json* reset = child(&f, {"GPU Reset Status"});
  g["reset_required"] = yes_no(reset, {"Reset Required"});
  g["drain_and_reset_recommended"] = yes_no(reset, {"Drain and Reset Recommended"});
  g["recovery_action"] = str_or_null(&f, {"GPU Recovery Action"});

  // Health.
  const json& rr = g["remapped_rows"];
  if (!rr.is_null()) {
    if (rr["pending"] == true) h.fail("row remapping pending (GPU reset required)");
    if (rr["failure"] == true) h.fail("row remapping failure occurred");
    if (rr["uncorrectable"].is_number_integer() && rr["uncorrectable"].get<std::int64_t>() > 0)
      h.warn("rows remapped for uncorrectable errors: " + std::to_string(rr["uncorrectable"].get<std::int64_t>()));
    if (rr["correctable"].is_number_integer() && rr["correctable"].get<std::int64_t>() > 0)
      h.warn("rows remapped for correctable errors: " + std::to_string(rr["correctable"].get<std::int64_t>()));
  }
  const json& ecc = g["ecc_errors"];
  if (!ecc.is_null()) {
    auto positive = [&](const char* k) { return ecc[k].is_number_integer() && ecc[k].get<std::int64_t>() > 0; };
    if (positive("volatile_uncorrectable"))
      h.fail("volatile uncorrectable ECC errors: " + std::to_string(ecc["volatile_uncorrectable"].get<std::int64_t>()));
    if (positive("aggregate_uncorrectable"))
      h.warn("aggregate uncorrectable ECC errors: " + std::to_string(ecc["aggregate_uncorrectable"].get<std::int64_t>()));
    if (positive("volatile_correctable"))
      h.warn("volatile correctable ECC errors: " + std::to_string(ecc["volatile_correctable"].get<std::int64_t>()));
    else if (positive("aggregate_correctable"))
      h.warn("aggregate correctable ECC errors: " + std::to_string(ecc["aggregate_correctable"].get<std::int64_t>()));
    if (ecc["sram_threshold_exceeded"] == true) h.fail("SRAM error threshold exceeded");
  }
  const json& rp = g["retired_pages"];
  if (!rp.is_null()) {
    if (rp["pending"] == true) h.fail("page retirement pending (GPU reset required)");
    if (rp["double_bit_ecc"].is_number_integer() && rp["double_bit_ecc"].get<std::int64_t>() > 0)
      h.warn("pages retired for double-bit ECC errors: " + std::to_string(rp["double_bit_ecc"].get<std::int64_t>()));
  }
  for (const auto& a : active) {
    const std::string r = a.get<std::string>();
    if (sc::starts_with(r, "HW ") || r == "SW Thermal Slowdown") h.fail("clock event reason Active: " + r);
    else if (r == "SW Power Cap") h.warn("clock event reason Active: " + r);
  }
  if (!g["ecc_mode"].is_null()) {
    if (g["ecc_mode"]["current"] == "Disabled") h.warn("ECC is disabled");
    if (g["ecc_mode"]["pending"].is_string() && g["ecc_mode"]["pending"] != g["ecc_mode"]["current"])
      h.warn("ECC mode change pending");
  }
  if (g["reset_required"] == true) h.fail("GPU reset required");
  if (g["drain_and_reset_recommended"] == true) h.fail("drain and reset recommended");
  if (g["recovery_action"].is_string() && g["recovery_action"] != "None" && g["recovery_action"] != "N/A")
    h.fail("GPU recovery action: " + g["recovery_action"].get<std::string>());
  if (!g["fabric"].is_null()) {
    const json& st = g["fabric"]["state"];
    const json& ss = g["fabric"]["status"];
    if (st.is_string() && st != "Completed" && st != "N/A") h.fail("fabric state " + st.get<std::string>());
    if (ss.is_string() && ss != "Success" && ss != "N/A") h.fail("fabric status " + ss.get<std::string>());
  }
  g["fields"] = f;
  g["health"] = h.to_json();
  return g;
}

}  // namespace

Result<json> parse_smi_query(std::string_view text) {
  json top = {{"timestamp", nullptr}, {"driver_version", nullptr}, {"cuda_version", nullptr},
              {"attached_gpus", nullptr}};
  bool banner = false;
  std::vector<std::pair<std::string, json>> blocks;
  std::map<std::string, std::size_t> by_bus;

  json fields;
  std::string bus;
  bool in_gpu = false;
  struct Frame {
    std::size_t indent;
    json* node;
  };
  std::vector<Frame> stack;
  auto finish = [&] {
    if (!in_gpu) return;
    if (auto it = by_bus.find(bus); it != by_bus.end()) blocks[it->second].second = std::move(fields);
    else {
      by_bus[bus] = blocks.size();
      blocks.emplace_back(bus, std::move(fields));
    }
    in_gpu = false;
    stack.clear();
  };

  for (const std::string& raw : sc::lines(text)) {
    const std::string_view t = sc::trim(raw);
    if (t.empty()) continue;
    const std::size_t ind = indent_of(raw);
    std::string gpu_bus;
    if (ind == 0 && is_gpu_header(t, gpu_bus)) {
      finish();
      in_gpu = true;
      bus = gpu_bus;
      fields = json::object();
      stack.push_back({0, &fields});
      continue;
    }
    if (ind == 0) {
      finish();
      if (sc::contains(t, "NVSMI LOG")) banner = true;
      const std::size_t sep = t.find(" : ");
      if (sep != std::string_view::npos) {
        const std::string key(sc::trim(t.substr(0, sep)));
        const std::string value(sc::trim(t.substr(sep + 3)));
        if (key == "Timestamp") top["timestamp"] = value;
        else if (key == "Driver Version") top["driver_version"] = value;
        else if (key == "CUDA Version") top["cuda_version"] = value;
        else if (key == "Attached GPUs")
          top["attached_gpus"] = sc::to_int(value) ? json(*sc::to_int(value)) : json(nullptr);
      }
      continue;
    }
    if (!in_gpu || sc::starts_with(t, "[")) continue;  // "[...]" marks an elided excerpt
    while (stack.size() > 1 && stack.back().indent >= ind) stack.pop_back();
    json& parent = *stack.back().node;
    std::string key, value;
    bool leaf = true;
    if (const std::size_t sep = t.find(" : "); sep != std::string_view::npos) {
      key = std::string(sc::trim(t.substr(0, sep)));
      value = std::string(sc::trim(t.substr(sep + 3)));
    } else if (t.back() == ':') {
      key = std::string(sc::trim(t.substr(0, t.size() - 1)));
    } else {
      key = std::string(t);
      leaf = false;
    }
    if (parent.contains(key)) {
      int n = 2;
      while (parent.contains(key + " #" + std::to_string(n))) ++n;
      key += " #" + std::to_string(n);
    }
    if (leaf) {
      parent[key] = value;
    } else {
      parent[key] = json::object();
      stack.push_back({ind, &parent[key]});
    }
  }
  finish();

  if (blocks.empty() && !banner && top["attached_gpus"].is_null())
    return Error(Code::kInvalidArgument,
                 "not nvidia-smi -q output: no NVSMI LOG banner, 'Attached GPUs' line or 'GPU <bus id>' block");

  json out;
  out["format"] = "smi-query";
  for (auto it = top.begin(); it != top.end(); ++it) out[it.key()] = *it;
  out["gpus"] = json::array();
  Health all;
  for (const auto& [b, f] : blocks) {
    Health h;
    json g = summarize_gpu(b, f, h);
    for (const auto& r : g["health"]["reasons"]) all.fail(b + ": " + r.get<std::string>());
    for (const auto& w : g["health"]["warnings"]) all.warn(b + ": " + w.get<std::string>());
    out["gpus"].push_back(std::move(g));
  }
  if (blocks.empty()) all.fail("no GPU blocks in the output");
  if (out["attached_gpus"].is_number_integer() &&
      out["attached_gpus"].get<std::int64_t>() != static_cast<std::int64_t>(blocks.size()))
    all.warn("Attached GPUs is " + std::to_string(out["attached_gpus"].get<std::int64_t>()) + " but " +
             std::to_string(blocks.size()) + " GPU blocks were printed");
  out["health"] = all.to_json();
  return out;
}

}  // namespace kiln::agent
