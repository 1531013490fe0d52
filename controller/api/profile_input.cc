#include "controller/api/profile_input.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "common/clock.h"
#include "common/ids.h"
#include "controller/api/json_input.h"
#include "controller/tenancy/usage.h"

namespace kiln::api {

namespace {

using nlohmann::json;

// Walks one object, recording errors and unknown keys.
class Section {
 public:
  Section(const json& doc, std::string pointer, std::vector<FieldError>& errors)
      : obj_(doc), ptr_(std::move(pointer)), errors_(errors) {}

  // Absent (or null) is fine; present must be an integer in [lo, hi].
  void integer(const char* key, int64_t lo, int64_t hi) {
    const json* v = get(key);
    if (v == nullptr) return;
    if (!v->is_number_integer() || v->get<int64_t>() < lo || v->get<int64_t>() > hi)
      error(key, "must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  }
  void number(const char* key, double lo, double hi, bool lo_open = false) {
    const json* v = get(key);
    if (v == nullptr) return;
    if (!v->is_number()) return error(key, "must be a number");
    double d = v->get<double>();
    if ((lo_open ? d <= lo : d < lo) || d > hi)
      error(key, std::string("must be ") + (lo_open ? "> " : ">= ") + trim(lo) + " and <= " + trim(hi));
  }
  void string(const char* key, std::size_t max_len) {
    const json* v = get(key);
    if (v == nullptr) return;
    if (!v->is_string()) return error(key, "must be a string");
    if (v->get<std::string>().size() > max_len) error(key, "must be at most " + std::to_string(max_len) + " characters");
  }
  void boolean(const char* key) {
    const json* v = get(key);
    if (v != nullptr && !v->is_boolean()) error(key, "must be true or false");
  }
  void int_array(const char* key) {
    const json* v = get(key);
    if (v == nullptr) return;
    if (!v->is_array()) return error(key, "must be an array of integers");
    for (std::size_t i = 0; i < v->size(); ++i)
      if (!(*v)[i].is_number_integer())
        errors_.push_back({json_pointer_append(ptr_, key) + "/" + std::to_string(i), "must be an integer"});
  }
  // A nested object, or nullptr (absent/null, or an error recorded).
  const json* object(const char* key) {
    const json* v = get(key);
    if (v == nullptr) return nullptr;
    if (!v->is_object()) {
      error(key, "must be an object");
      return nullptr;
    }
    return v;
  }
  const json* raw(const char* key) { return get(key); }
  void error(const std::string& key, std::string message) {
    errors_.push_back({json_pointer_append(ptr_, key), std::move(message)});
  }
  std::string pointer(const char* key) const { return json_pointer_append(ptr_, key); }
  void finish() {
    for (const auto& item : obj_.items())
      if (!seen_.count(item.key())) errors_.push_back({json_pointer_append(ptr_, item.key()), "unknown field"});
  }

 private:
  static std::string trim(double d) {
    json j = d;
    std::string s = j.dump();
    if (s.size() > 2 && s.ends_with(".0")) s.resize(s.size() - 2);
    return s;
  }
  const json* get(const char* key) {
    seen_.insert(key);
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  const json& obj_;
  std::string ptr_;
  std::vector<FieldError>& errors_;
  std::set<std::string> seen_;
};

bool good_profile_name(const std::string& s) {
  if (s.empty() || s.size() > 63 || is_uuid(s)) return false;
  if (!std::islower(static_cast<unsigned char>(s[0])) && !std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::islower(static_cast<unsigned char>(c)) && !std::isdigit(static_cast<unsigned char>(c)) && c != '-' &&
        c != '_' && c != '.')
      return false;
  return true;
}

void check_plans(Section& top, std::vector<FieldError>& errors) {
  const json* plans = top.object("plans");
  if (plans == nullptr) return;
  Section s(*plans, top.pointer("plans"), errors);
  for (ValidationPlan p : kValidationPlans) {
    const std::string plan(to_string(p));
    const json* list = s.raw(plan.c_str());
    if (list == nullptr) continue;
    const std::string ptr = s.pointer(plan.c_str());
    if (!list->is_array()) {
      errors.push_back({ptr, "must be an array of check names"});
      continue;
    }
    std::set<std::string> seen;
    for (std::size_t i = 0; i < list->size(); ++i) {
      const json& n = (*list)[i];
      const auto& known = known_check_names();
      if (!n.is_string() || std::find(known.begin(), known.end(), n.get<std::string>()) == known.end()) {
        std::string all;
        for (const auto& k : known) all += (all.empty() ? "" : ", ") + k;
        errors.push_back({ptr + "/" + std::to_string(i), "must be one of " + all});
      } else if (!seen.insert(n.get<std::string>()).second) {
        errors.push_back({ptr + "/" + std::to_string(i), "is listed twice"});
      }
    }
  }
  s.finish();
}

}  // namespace

Status check_profile_doc(const json& doc) {
  std::vector<FieldError> errors;
  if (!doc.is_object()) return invalid_fields({{"", "must be a JSON object"}});
  Section top(doc, "", errors);
  const json* name = top.raw("name");
  if (name == nullptr) {
    errors.push_back({"/name", "is required"});
  } else if (!name->is_string() || !good_profile_name(name->get<std::string>())) {
    errors.push_back({"/name", "must be 1-63 characters of a-z, 0-9, '-', '_', '.', starting with a letter or "
                               "digit, and not a UUID"});
  }
  top.string("description", 1024);

  if (const json* gpu = top.object("gpu")) {
    Section s(*gpu, "/gpu", errors);
    s.integer("count", 0, 64);
    s.string("model", 128);
    s.number("memory_gib_min", 0, 1e6);
    s.string("driver_min", 32);
    s.string("cuda_min", 32);
    s.int_array("xid_ignore");
    s.finish();
  }
  if (const json* nvlink = top.object("nvlink")) {
    Section s(*nvlink, "/nvlink", errors);
    s.integer("links_per_gpu", 0, 64);
    s.finish();
  }
  if (const json* pcie = top.object("pcie")) {
    Section s(*pcie, "/pcie", errors);
    s.boolean("strict_gpu_speed");
    s.finish();
  }
  if (const json* rdma = top.object("rdma")) {
    Section s(*rdma, "/rdma", errors);
    s.integer("ports", 0, 64);
    s.number("rate_gbps", 0, 1e5, true);
    s.boolean("require_peermem");
    s.finish();
  }
  if (const json* nvme = top.object("nvme")) {
    Section s(*nvme, "/nvme", errors);
    s.integer("devices", 0, 1024);
    s.string("path", 4096);
    s.integer("read_mib", 1, 1'000'000);
    s.finish();
  }
  if (const json* gds = top.object("gds")) {
    Section s(*gds, "/gds", errors);
    s.string("path", 4096);
    s.finish();
  }
  if (const json* jitter = top.object("jitter")) {
    Section s(*jitter, "/jitter", errors);
    s.number("duration_s", 0, 3600, true);
    s.integer("cpu", -1, 100'000);
    s.finish();
  }
  if (const json* t = top.object("thresholds")) {
    Section s(*t, "/thresholds", errors);
    for (const char* k : {"hbm_gbps_min", "pcie_gbps_min", "nccl_busbw_gbps_min", "nvme_gbps_min",
                          "jitter_p999_us_max", "jitter_max_us_max", "ib_write_bw_gbps_min",
                          "nccl_multinode_busbw_gbps_min", "gemm_tflops_min", "gpudirect_rdma_latency_us_max",
                          "nccl_latency_us_max", "gds_read_gbps_min"})
      s.number(k, 0, 1e7);
    s.number("gemm_fraction_of_spec_min", 0, 1, true);
    s.finish();
  }
  check_plans(top, errors);
  if (const json* price = top.object("price")) {
    // The bound keeps every usage row's cost inside int64 micro-units
    // (controller/tenancy/usage.h).
    Section s(*price, "/price", errors);
    s.number("baremetal_per_second", 0, kMaxPricePerSecond);
    s.number("virtual_per_second", 0, kMaxPricePerSecond);
    s.finish();
  }
  if (const json* v = top.object("virtual")) {
    Section s(*v, "/virtual", errors);
    s.integer("vcpus", 1, 4096);
    s.integer("memory_mib", 1, 64LL * 1024 * 1024);
    s.integer("gpus", 0, 64);
    s.integer("disk_gib", 1, 1'000'000);
    s.boolean("hugepages");
    s.boolean("numa_pin");
    for (const char* required : {"vcpus", "memory_mib", "disk_gib"})
      if (!v->contains(required) || (*v)[required].is_null())
        errors.push_back({std::string("/virtual/") + required, "is required in a virtual flavour"});
    s.finish();
  }
  top.finish();
  if (!errors.empty()) return invalid_fields(std::move(errors));
  return ok_status();
}

json profile_json(const Profile& p) {
  json j = p.doc.is_object() ? p.doc : json::object();
  j["name"] = p.name;
  j["created_at"] = format_rfc3339(p.created_at);
  j["updated_at"] = format_rfc3339(p.updated_at);
  j["version"] = p.version;
  return j;
}

}  // namespace kiln::api
