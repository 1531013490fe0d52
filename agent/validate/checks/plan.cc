#include "agent/validate/checks/plan.h"

#include <cstdlib>
#include <sstream>

#include "agent/validate/checks/check_result.h"
#include "agent/validate/checks/gpu_health.h"
#include "agent/validate/checks/gpu_inventory.h"
#include "agent/validate/checks/gpudirect_rdma.h"
#include "agent/validate/checks/jitter.h"
#include "agent/validate/checks/kernel_log.h"
#include "agent/validate/checks/latency_checks.h"
#include "agent/validate/checks/nvme_read.h"
#include "agent/validate/checks/pcie_links.h"
#include "agent/validate/checks/profile.h"
#include "agent/validate/checks/subprocess.h"
#include "agent/validate/checks/tool_checks.h"

namespace kiln::agent {

namespace {

using nlohmann::json;

struct PlanShape {
  bool full = false;
  int gpucheck_iterations = 5;
  long long nccl_max_bytes = 1LL << 30;
  int dcgm_level = 1;
  // The gemm check's timed seconds per GPU and type: the full plan (burn-in)
  // long enough for steady clocks, the quick plan (pre-hand-off) a short
  // proof that every GPU still computes at speed.
  int gemm_seconds = 3;
};

std::string format_double(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::vector<std::string> gpucheck_argv(const std::string& exe, const ValidationProfile& p, const PlanShape& shape,
                                       const PlanOptions& opts) {
  std::string checks;
  for (const auto& c : gpucheck_check_names()) checks += (checks.empty() ? "" : ",") + c;
  std::vector<std::string> argv = {exe,
                                   "--checks", checks,
                                   "--expect-gpus", std::to_string(p.gpu_count),
                                   "--nvlink-links", std::to_string(p.nvlink_links_per_gpu),
                                   "--iterations", std::to_string(shape.gpucheck_iterations),
                                   "--nccl-max-mib", std::to_string(shape.nccl_max_bytes >> 20),
                                   "--nvml-library", opts.nvml_library};
  if (p.hbm_gbps_min) argv.insert(argv.end(), {"--hbm-min-gbps", format_double(*p.hbm_gbps_min)});
  if (p.pcie_gbps_min) argv.insert(argv.end(), {"--pcie-min-gbps", format_double(*p.pcie_gbps_min)});
  if (p.nccl_busbw_gbps_min) argv.insert(argv.end(), {"--nccl-min-busbw", format_double(*p.nccl_busbw_gbps_min)});
  argv.insert(argv.end(), {"--gemm-seconds", std::to_string(shape.gemm_seconds)});
  if (p.gemm_tflops_min) argv.insert(argv.end(), {"--gemm-min-tflops", format_double(*p.gemm_tflops_min)});
  if (p.gemm_fraction_of_spec_min)
    argv.insert(argv.end(), {"--gemm-min-fraction-of-spec", format_double(*p.gemm_fraction_of_spec_min)});
  return argv;
}

// One result per GPU check for when kiln-gpucheck gave us nothing usable.
void gpu_checks_without_gpucheck(const ValidationProfile& p, const std::string& why, std::vector<CheckResult>& out) {
  for (const auto& name : gpucheck_check_names()) {
    if (p.gpu_count == 0) out.push_back(check_skip(name, "profile expects no GPU"));
    else out.push_back(check_fail(name, "expected " + std::to_string(p.gpu_count) + " GPUs, not measured: " + why));
  }
}

void run_gpucheck(const ValidationProfile& p, const PlanShape& shape, const PlanOptions& opts,
                  const std::string& search_path, std::vector<CheckResult>& out) {
  if (p.gpu_count == 0) {
    gpu_checks_without_gpucheck(p, "", out);
    return;
  }
  auto exe = find_gpucheck(opts.gpucheck, opts.agent_dir, search_path);
  if (!exe) {
    gpu_checks_without_gpucheck(p, exe.error().message, out);
    return;
  }
  ProcessSpec spec;
  spec.argv = gpucheck_argv(*exe, p, shape, opts);
  spec.timeout = opts.gpucheck_timeout;
  auto run = run_process(spec);
  if (!run) {
    gpu_checks_without_gpucheck(p, "kiln-gpucheck: " + run.error().message, out);
    return;
  }
  json doc = json::parse(run->out, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("checks") || !doc["checks"].is_array()) {
    std::string err = run->err.size() > 300 ? run->err.substr(run->err.size() - 300) : run->err;
    gpu_checks_without_gpucheck(p, "kiln-gpucheck exited " + std::to_string(run->exit_code) +
                                       " without a JSON report" + (err.empty() ? "" : ": " + err), out);
    return;
  }
  std::vector<CheckResult> reported;
  for (const auto& c : doc["checks"]) {
    auto r = CheckResult::from_json(c);
    if (r) reported.push_back(std::move(*r));
  }
  // Every GPU check appears exactly once, in plan order; anything extra the
  // companion reports follows.
  for (const auto& name : gpucheck_check_names()) {
    bool found = false;
    for (auto& r : reported) {
      if (r.name != name) continue;
      found = true;
      out.push_back(r);
      break;
    }
    if (!found) out.push_back(check_fail(name, "kiln-gpucheck did not report " + name));
  }
  for (auto& r : reported) {
    bool known = false;
    for (const auto& name : gpucheck_check_names()) known |= r.name == name;
    if (!known) out.push_back(std::move(r));
  }
  if (doc.contains("gpucheck") && !out.empty()) {
    // Where the figures came from (binary, CUDA/NCCL versions), once per report.
    for (auto& r : out)
      if (r.name == gpucheck_check_names().front()) r.details["gpucheck"] = doc["gpucheck"];
  }
}

}  // namespace

Result<std::string> find_gpucheck(const std::string& explicit_path, const std::string& agent_dir,
                                  const std::string& search_path) {
  if (!explicit_path.empty()) {
    if (auto exe = find_executable(explicit_path, "")) return *exe;
    return Error(Code::kNotFound, explicit_path + " is not an executable file");
  }
  const std::string dir = agent_dir.empty() ? self_exe_dir() : agent_dir;
  if (!dir.empty())
    if (auto exe = find_executable(dir + "/kiln-gpucheck", "")) return *exe;
  std::string path = search_path;
  if (path.empty()) {
    const char* env = std::getenv("PATH");
    path = env ? env : "/usr/local/bin:/usr/bin:/bin";
  }
  if (auto exe = find_executable("kiln-gpucheck", path)) return *exe;
  return Error(Code::kNotFound, "kiln-gpucheck not found next to kiln-agent (" + dir + ") or on PATH");
}

const std::vector<std::string>& plan_names() {
  static const std::vector<std::string> names = {"quick", "full"};
  return names;
}

const std::vector<std::string>& gpucheck_check_names() {
  static const std::vector<std::string> names = {"nvlink", "hbm_bandwidth", "pcie_bandwidth", "nccl_allreduce",
                                                 "gemm"};
  return names;
}

Result<json> run_plan(const std::string& plan, const json& profile_json, const PlanOptions& opts) {
  PlanShape shape;
  if (plan == "full") {
    shape.full = true;
    shape.gpucheck_iterations = 20;
    shape.nccl_max_bytes = 4LL << 30;
    shape.dcgm_level = 3;
    shape.gemm_seconds = 20;
  } else if (plan != "quick") {
    return Error::invalid("plan", "unknown plan '" + plan + "' (known: quick, full)");
  }
  auto parsed = ValidationProfile::from_json(profile_json);
  if (!parsed) return parsed.take_error();
  const ValidationProfile& p = *parsed;

  SystemClock system_clock;
  const Clock& clock = opts.clock ? *opts.clock : system_clock;
  const std::string started_at = format_rfc3339(clock.now_ms());
  const auto t0 = std::chrono::steady_clock::now();
  std::string search_path = opts.search_path;
  if (search_path.empty()) {
    const char* env = std::getenv("PATH");
    search_path = env ? env : "/usr/local/bin:/usr/bin:/bin";
  }

  std::vector<CheckResult> checks;
  // Cheap first: NVML and sysfs reads take milliseconds.
  const Result<NvmlSnapshot> nvml = read_nvml(opts.nvml_library);
  const Result<std::string> kernel_log = p.gpu_count > 0 ? read_kernel_log(opts.paths)
                                                          : Result<std::string>(std::string());
  checks.push_back(check_gpu_inventory(p, nvml, opts.paths.sys));
  checks.push_back(check_gpu_health(p, nvml, kernel_log));
  checks.push_back(check_pcie_links(p, opts.paths.sys));
  checks.push_back(check_gpudirect_rdma(p, opts.paths));
  checks.push_back(check_jitter(p, opts.paths.sys));
  checks.push_back(check_nvme_read(p, opts.paths.sys, opts.nvme_path));

  // Then the GPU measurements.
  run_gpucheck(p, shape, opts, search_path, checks);

  // Then the vendors' tools, when installed.
  ToolOptions tools;
  tools.search_path = search_path;
  tools.timeout = opts.tool_timeout;
  tools.paths = opts.paths;
  checks.push_back(check_nvidia_smi_topo(p, tools));
  checks.push_back(check_dcgm_diag(p, tools, shape.dcgm_level));
  if (shape.full) {
    checks.push_back(check_nccl_tests(p, tools));
    checks.push_back(check_ib_write_bw(p, tools));
    // Small-message latencies and the storage path: seconds each, so the
    // full plan only (burn-in), after the bandwidth runs.
    checks.push_back(check_gpudirect_rdma_latency(p, tools));
    checks.push_back(check_nccl_latency(p, tools));
    checks.push_back(check_gds_read(p, tools));
  }

  int n_pass = 0, n_fail = 0, n_skip = 0;
  json list = json::array();
  for (const auto& c : checks) {
    if (c.status == CheckStatus::kPass) ++n_pass;
    else if (c.status == CheckStatus::kFail) ++n_fail;
    else ++n_skip;
    list.push_back(c.to_json());
  }
  const double duration = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return json{{"plan", plan},
              {"profile", p.name},
              {"result", n_fail > 0 ? "fail" : "pass"},
              {"started_at", started_at},
              {"duration_s", duration},
              {"summary", {{"pass", n_pass}, {"fail", n_fail}, {"skip", n_skip}}},
              {"checks", std::move(list)}};
}

}  // namespace kiln::agent
