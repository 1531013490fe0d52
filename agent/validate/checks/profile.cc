#include "agent/validate/checks/profile.h"

#include <cstdlib>

namespace kiln::agent {

namespace {

using nlohmann::json;

// Field readers: absent keeps the default; a wrong type is an error value.
Status read_int(const json& obj, const char* key, const std::string& ptr, int& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return ok_status();
  if (!it->is_number_integer() || it->get<long long>() < 0 || it->get<long long>() > 1'000'000)
    return Error::invalid(ptr + "/" + key, "must be a non-negative integer");
  out = it->get<int>();
  return ok_status();
}

Status read_double(const json& obj, const char* key, const std::string& ptr,
                   std::optional<double>& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return ok_status();
  if (!it->is_number()) return Error::invalid(ptr + "/" + key, "must be a number");
  out = it->get<double>();
  return ok_status();
}

Status read_string(const json& obj, const char* key, const std::string& ptr, std::string& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return ok_status();
  if (!it->is_string()) return Error::invalid(ptr + "/" + key, "must be a string");
  out = it->get<std::string>();
  return ok_status();
}

Status read_bool(const json& obj, const char* key, const std::string& ptr, bool& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return ok_status();
  if (!it->is_boolean()) return Error::invalid(ptr + "/" + key, "must be true or false");
  out = it->get<bool>();
  return ok_status();
}

// Returns the sub-object `key` (an empty object when absent).
Result<json> section(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return json::object();
  if (!it->is_object()) return Error::invalid(std::string("/") + key, "must be an object");
  return *it;
}

#define KILN_TRY(expr)                  \
  do {                                  \
    if (auto s_ = (expr); !s_) return s_.take_error(); \
  } while (0)

}  // namespace

Result<ValidationProfile> ValidationProfile::from_json(const json& j) {
  if (!j.is_object()) return Error::invalid("/", "profile must be a JSON object");
  ValidationProfile p;
  KILN_TRY(read_string(j, "name", "", p.name));

  auto gpu = section(j, "gpu");
  if (!gpu) return gpu.take_error();
  KILN_TRY(read_int(*gpu, "count", "/gpu", p.gpu_count));
  KILN_TRY(read_string(*gpu, "model", "/gpu", p.gpu_model));
  KILN_TRY(read_double(*gpu, "memory_gib_min", "/gpu", p.gpu_memory_gib_min));
  KILN_TRY(read_string(*gpu, "driver_min", "/gpu", p.driver_min));
  KILN_TRY(read_string(*gpu, "cuda_min", "/gpu", p.cuda_min));
  if (auto it = gpu->find("xid_ignore"); it != gpu->end() && !it->is_null()) {
    if (!it->is_array()) return Error::invalid("/gpu/xid_ignore", "must be an array of integers");
    for (const auto& x : *it) {
      if (!x.is_number_integer()) return Error::invalid("/gpu/xid_ignore", "must be an array of integers");
      p.xid_ignore.push_back(x.get<int>());
    }
  }

  auto nvlink = section(j, "nvlink");
  if (!nvlink) return nvlink.take_error();
  KILN_TRY(read_int(*nvlink, "links_per_gpu", "/nvlink", p.nvlink_links_per_gpu));

  auto pcie = section(j, "pcie");
  if (!pcie) return pcie.take_error();
  KILN_TRY(read_bool(*pcie, "strict_gpu_speed", "/pcie", p.pcie_strict_gpu_speed));

  auto rdma = section(j, "rdma");
  if (!rdma) return rdma.take_error();
  KILN_TRY(read_int(*rdma, "ports", "/rdma", p.rdma_ports));
  KILN_TRY(read_double(*rdma, "rate_gbps", "/rdma", p.rdma_rate_gbps));
  KILN_TRY(read_bool(*rdma, "require_peermem", "/rdma", p.rdma_require_peermem));

  auto nvme = section(j, "nvme");
  if (!nvme) return nvme.take_error();
  KILN_TRY(read_int(*nvme, "devices", "/nvme", p.nvme_devices));
  KILN_TRY(read_string(*nvme, "path", "/nvme", p.nvme_path));
  KILN_TRY(read_int(*nvme, "read_mib", "/nvme", p.nvme_read_mib));
  if (p.nvme_read_mib == 0) return Error::invalid("/nvme/read_mib", "must be at least 1");

  auto jitter = section(j, "jitter");
  if (!jitter) return jitter.take_error();
  std::optional<double> duration;
  KILN_TRY(read_double(*jitter, "duration_s", "/jitter", duration));
  if (duration) {
    if (*duration <= 0 || *duration > 3600)
      return Error::invalid("/jitter/duration_s", "must be in (0, 3600]");
    p.jitter_duration_s = *duration;
  }
  if (auto it = jitter->find("cpu"); it != jitter->end() && !it->is_null()) {
    KILN_TRY(read_int(*jitter, "cpu", "/jitter", p.jitter_cpu));
  }

  auto t = section(j, "thresholds");
  if (!t) return t.take_error();
  KILN_TRY(read_double(*t, "hbm_gbps_min", "/thresholds", p.hbm_gbps_min));
  KILN_TRY(read_double(*t, "pcie_gbps_min", "/thresholds", p.pcie_gbps_min));
  KILN_TRY(read_double(*t, "nccl_busbw_gbps_min", "/thresholds", p.nccl_busbw_gbps_min));
  KILN_TRY(read_double(*t, "nvme_gbps_min", "/thresholds", p.nvme_gbps_min));
  KILN_TRY(read_double(*t, "jitter_p999_us_max", "/thresholds", p.jitter_p999_us_max));
  KILN_TRY(read_double(*t, "jitter_max_us_max", "/thresholds", p.jitter_max_us_max));
  KILN_TRY(read_double(*t, "ib_write_bw_gbps_min", "/thresholds", p.ib_write_bw_gbps_min));
  KILN_TRY(read_double(*t, "gpudirect_rdma_latency_us_max", "/thresholds", p.gpudirect_rdma_latency_us_max));
  KILN_TRY(read_double(*t, "nccl_latency_us_max", "/thresholds", p.nccl_latency_us_max));
  KILN_TRY(read_double(*t, "gds_read_gbps_min", "/thresholds", p.gds_read_gbps_min));

  auto gds = section(j, "gds");
  if (!gds) return gds.take_error();
  KILN_TRY(read_string(*gds, "path", "/gds", p.gds_path));
  KILN_TRY(read_double(*t, "gemm_tflops_min", "/thresholds", p.gemm_tflops_min));
  KILN_TRY(read_double(*t, "gemm_fraction_of_spec_min", "/thresholds", p.gemm_fraction_of_spec_min));
  if (p.gemm_tflops_min && (*p.gemm_tflops_min < 0 || *p.gemm_tflops_min > 1e6))
    return Error::invalid("/thresholds/gemm_tflops_min", "must be from 0 to 1e6");
  if (p.gemm_fraction_of_spec_min && !(*p.gemm_fraction_of_spec_min > 0 && *p.gemm_fraction_of_spec_min <= 1))
    return Error::invalid("/thresholds/gemm_fraction_of_spec_min", "must be in (0, 1]");
  return p;
}

int compare_versions(const std::string& a, const std::string& b) {
  std::size_t i = 0, k = 0;
  while (i < a.size() || k < b.size()) {
    auto part = [](const std::string& s, std::size_t& pos) {
      long long v = 0;
      while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') v = v * 10 + (s[pos++] - '0');
      while (pos < s.size() && s[pos] != '.') ++pos;  // suffixes such as "-rc1" end the part
      if (pos < s.size()) ++pos;
      return v;
    };
    const long long x = part(a, i), y = part(b, k);
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

}  // namespace kiln::agent
