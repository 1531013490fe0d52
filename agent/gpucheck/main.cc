// kiln-gpucheck: the GPU measurements of a validation plan, in a companion
// binary so kiln-agent itself needs neither CUDA nor NCCL. kiln-agent runs it
// and merges what it prints: one JSON object on stdout,
//
//   {"gpucheck": {"cuda_runtime", "cuda_driver", "nccl", "devices", "gpus"},
//    "checks": [CheckResult, ...]}
//
// It exits 0 whenever it could measure and report, even when checks fail, and
// 2 only on a usage error. With no CUDA device every requested check fails
// with "no CUDA device found" (or is skipped with --expect-gpus 0).
//
// --multinode is this node's part of nccl_multinode, the all-reduce across
// the nodes of an allocation (docs/agent-protocol.md, "Multi-node
// collective"; nccl_multinode.cc). kiln-agent runs one per node: node-rank 0
// first prints {"unique_id": "nccl:<256 hex>"} on a line of its own, which
// kilnd passes to the other nodes (--unique-id). The report, with the single
// check nccl_multinode, is then the last stdout line, on one line. Without a
// usable GPU the check fails ("expected G GPUs per node, found 0") and no
// unique id is printed.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nccl.h>

#include "agent/gpucheck/cuda_device.h"
#include "agent/gpucheck/gemm_math.h"
#include "agent/gpucheck/gpu_checks.h"

namespace {

using kiln::gpucheck::GpucheckOptions;

const std::vector<std::string> kKnownChecks = {"nvlink", "hbm_bandwidth", "pcie_bandwidth", "nccl_allreduce", "gemm"};

void usage(std::ostream& os) {
  os << "usage: kiln-gpucheck [--checks LIST] [--expect-gpus N] [--nvlink-links N] [--iterations N]\n"
        "                     [--hbm-mib N] [--pcie-mib N] [--nccl-max-mib N]\n"
        "                     [--hbm-min-gbps X] [--pcie-min-gbps X] [--nccl-min-busbw X]\n"
        "                     [--gemm-seconds N] [--gemm-dtypes bf16[,fp8][,tf32]] [--gemm-min-tflops X]\n"
        "                     [--gemm-min-fraction-of-spec F] [--nvml-library PATH]\n"
        "       kiln-gpucheck --multinode --nodes N --node-rank R [--unique-id nccl:HEX]\n"
        "                     [--expect-gpus G] [--max-mib M] [--iterations N] [--timeout-s T]\n"
        "                     [--min-busbw X]\n"
        "LIST is a comma-separated subset of: nvlink,hbm_bandwidth,pcie_bandwidth,nccl_allreduce,gemm (default: all)\n"
        "gemm: N seconds (default 20, 1..3600) of GEMMs per type; the types must include bf16 (the headline);\n"
        "X is a BF16 TFLOPS floor per GPU, F (0..1] a fraction of the model's dense spec for every type.\n"
        "--multinode runs this node's part of nccl_multinode: every local GPU is a rank of an NCCL\n"
        "communicator of N nodes x G GPUs. Node-rank 0 without --unique-id prints\n"
        "{\"unique_id\": \"nccl:...\"} first; the other nodes join with that id (required for R > 0).\n"
        "T (default 600) bounds the whole run from its start: every node joining, then the sweep;\n"
        "M defaults to 1024.\n"
        "Prints one JSON object with the results (last line); exits 0 even when checks fail, 2 on a usage error.\n";
}

bool parse_long(const std::string& s, long long lo, long long hi, long long& out) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < lo || v > hi) return false;
  out = v;
  return true;
}

bool parse_positive_double(const std::string& s, std::optional<double>& out) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v >= 0)) return false;
  out = v;
  return true;
}

bool is_nccl_unique_id(const std::string& s) {
  const std::string prefix = "nccl:";
  if (s.rfind(prefix, 0) != 0 || s.size() != prefix.size() + 2 * sizeof(ncclUniqueId::internal)) return false;
  return std::all_of(s.begin() + prefix.size(), s.end(),
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

// "bf16,fp8" -> {"bf16", "fp8"}: known types, each once, bf16 among them
// (it is the headline figure). Returns an error message, "" on success.
std::string parse_gemm_dtypes(const std::string& v, std::vector<std::string>& out) {
  std::vector<std::string> types;
  std::stringstream ss(v);
  std::string name;
  while (std::getline(ss, name, ',')) {
    if (!kiln::gpucheck::parse_gemm_dtype(name)) return "--gemm-dtypes: unknown type '" + name + "' (bf16, fp8, tf32)";
    if (std::find(types.begin(), types.end(), name) != types.end())
      return "--gemm-dtypes: '" + name + "' is listed twice";
    types.push_back(name);
  }
  if (std::find(types.begin(), types.end(), "bf16") == types.end()) return "--gemm-dtypes must include bf16";
  // BF16 runs first: it is the figure the report leads with.
  out = {"bf16"};
  for (const auto& t : types)
    if (t != "bf16") out.push_back(t);
  return "";
}

// Fills `opts` from argv; returns an error message, "" on success.
std::string parse_flags(const std::vector<std::string>& args, GpucheckOptions& opts) {
  static const std::vector<std::string> kSingleNode = {"--checks",       "--nvlink-links",  "--hbm-mib",
                                                       "--pcie-mib",     "--nccl-max-mib",  "--hbm-min-gbps",
                                                       "--pcie-min-gbps", "--nccl-min-busbw", "--gemm-seconds",
                                                       "--gemm-dtypes", "--gemm-min-tflops",
                                                       "--gemm-min-fraction-of-spec"};
  static const std::vector<std::string> kMultinode = {"--nodes", "--node-rank", "--unique-id", "--max-mib",
                                                      "--timeout-s", "--min-busbw"};
  static const std::vector<std::string> kShared = {"--expect-gpus", "--iterations", "--nvml-library"};
  auto is_in = [](const std::vector<std::string>& v, const std::string& f) {
    return std::find(v.begin(), v.end(), f) != v.end();
  };
  auto& m = opts.multinode;
  m.enabled = std::find(args.begin(), args.end(), "--multinode") != args.end();
  bool have_nodes = false, have_rank = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--multinode") continue;
    if (!is_in(kSingleNode, flag) && !is_in(kMultinode, flag) && !is_in(kShared, flag)) return "unknown flag " + flag;
    if (m.enabled && is_in(kSingleNode, flag)) return flag + " is not used with --multinode";
    if (!m.enabled && is_in(kMultinode, flag)) return flag + " needs --multinode";
    if (i + 1 >= args.size()) return flag + " needs a value";
    const std::string& v = args[++i];
    long long n = 0;
    if (flag == "--checks") {
      opts.checks.clear();
      std::stringstream ss(v);
      std::string name;
      while (std::getline(ss, name, ',')) {
        bool known = false;
        for (const auto& k : kKnownChecks) known |= k == name;
        if (!known) return "unknown check '" + name + "'";
        opts.checks.push_back(name);
      }
      if (opts.checks.empty()) return "--checks is empty";
    } else if (flag == "--expect-gpus") {
      if (!parse_long(v, 0, 1024, n)) return "--expect-gpus must be 0..1024";
      opts.expect_gpus = static_cast<int>(n);
    } else if (flag == "--nvlink-links") {
      if (!parse_long(v, 0, 64, n)) return "--nvlink-links must be 0..64";
      opts.nvlink_links = static_cast<int>(n);
    } else if (flag == "--iterations") {
      if (!parse_long(v, 1, 1000, n)) return "--iterations must be 1..1000";
      opts.iterations = static_cast<int>(n);
    } else if (flag == "--hbm-mib") {
      if (!parse_long(v, 1, 1 << 20, n)) return "--hbm-mib must be a positive size in MiB";
      opts.hbm_mib = static_cast<std::size_t>(n);
    } else if (flag == "--pcie-mib") {
      if (!parse_long(v, 1, 1 << 20, n)) return "--pcie-mib must be a positive size in MiB";
      opts.pcie_mib = static_cast<std::size_t>(n);
    } else if (flag == "--nccl-max-mib") {
      if (!parse_long(v, 1, 1 << 20, n)) return "--nccl-max-mib must be a positive size in MiB";
      opts.nccl_max_mib = static_cast<std::size_t>(n);
    } else if (flag == "--hbm-min-gbps") {
      if (!parse_positive_double(v, opts.hbm_min_gbps)) return "--hbm-min-gbps must be a number >= 0";
    } else if (flag == "--pcie-min-gbps") {
      if (!parse_positive_double(v, opts.pcie_min_gbps)) return "--pcie-min-gbps must be a number >= 0";
    } else if (flag == "--nccl-min-busbw") {
      if (!parse_positive_double(v, opts.nccl_min_busbw)) return "--nccl-min-busbw must be a number >= 0";
    } else if (flag == "--gemm-seconds") {
      if (!parse_long(v, 1, 3600, n)) return "--gemm-seconds must be 1..3600";
      opts.gemm_seconds = static_cast<int>(n);
    } else if (flag == "--gemm-dtypes") {
      if (std::string err = parse_gemm_dtypes(v, opts.gemm_dtypes); !err.empty()) return err;
    } else if (flag == "--gemm-min-tflops") {
      if (!parse_positive_double(v, opts.gemm_min_tflops) || *opts.gemm_min_tflops > 1e6)
        return "--gemm-min-tflops must be a number from 0 to 1e6";
    } else if (flag == "--gemm-min-fraction-of-spec") {
      if (!parse_positive_double(v, opts.gemm_min_fraction_of_spec) || *opts.gemm_min_fraction_of_spec > 1 ||
          *opts.gemm_min_fraction_of_spec == 0)
        return "--gemm-min-fraction-of-spec must be in (0, 1]";
    } else if (flag == "--nvml-library") {
      opts.nvml_library = v;
    } else if (flag == "--nodes") {
      if (!parse_long(v, 1, 1024, n)) return "--nodes must be 1..1024";
      m.nodes = static_cast<int>(n);
      have_nodes = true;
    } else if (flag == "--node-rank") {
      if (!parse_long(v, 0, 1023, n)) return "--node-rank must be 0..1023";
      m.node_rank = static_cast<int>(n);
      have_rank = true;
    } else if (flag == "--unique-id") {
      if (!is_nccl_unique_id(v)) return "--unique-id must be nccl:<256 hex digits>";
      m.unique_id = v;
    } else if (flag == "--max-mib") {
      if (!parse_long(v, 1, 16384, n)) return "--max-mib must be 1..16384";
      m.max_mib = static_cast<std::size_t>(n);
    } else if (flag == "--timeout-s") {
      if (!parse_long(v, 1, 3600, n)) return "--timeout-s must be 1..3600";
      m.timeout_s = static_cast<int>(n);
    } else if (flag == "--min-busbw") {
      if (!parse_positive_double(v, m.min_busbw)) return "--min-busbw must be a number >= 0";
    }
  }
  if (m.enabled) {
    if (!have_nodes || !have_rank) return "--multinode needs --nodes and --node-rank";
    if (m.node_rank >= m.nodes) return "--node-rank must be below --nodes";
    if (m.node_rank > 0 && m.unique_id.empty())
      return "--node-rank " + std::to_string(m.node_rank) + " needs --unique-id";
  }
  return "";
}

kiln::agent::CheckResult run_check(const std::string& name, const GpucheckOptions& opts, int devices) {
  if (name == "nvlink") return kiln::gpucheck::check_nvlink(opts, devices);
  if (name == "hbm_bandwidth") return kiln::gpucheck::check_hbm_bandwidth(opts, devices);
  if (name == "pcie_bandwidth") return kiln::gpucheck::check_pcie_bandwidth(opts, devices);
  if (name == "gemm") return kiln::gpucheck::check_gemm(opts, devices);
  return kiln::gpucheck::check_nccl_allreduce(opts, devices);
}

// --multinode: one check, and the report on one line (the agent reads the
// last line). No unique id is printed unless check_nccl_multinode runs.
int multinode(const GpucheckOptions& opts, const kiln::gpucheck::DeviceCount& found, const nlohmann::json& info) {
  kiln::agent::CheckResult r;
  if (opts.expect_gpus == 0) {
    r = kiln::agent::check_skip("nccl_multinode", "profile expects no GPU");
  } else if (found.count == 0) {
    std::string why = opts.expect_gpus > 0
                          ? "expected " + std::to_string(opts.expect_gpus) + " GPUs per node, found 0"
                          : "no CUDA device found";
    if (!found.error.empty()) why += ": " + found.error;
    r = kiln::agent::check_fail("nccl_multinode", why);
  } else {
    r = kiln::gpucheck::check_nccl_multinode(opts, found.count);
  }
  r.unit = "GB/s";
  if (r.status != kiln::agent::CheckStatus::kPass && r.value.is_null() && opts.multinode.min_busbw)
    r.threshold = {{"min", *opts.multinode.min_busbw}};
  if (!r.details.contains("collective")) {
    const int g = opts.expect_gpus;
    r.details["collective"] = "nccl";
    r.details["rank"] = opts.multinode.node_rank;
    r.details["nodes"] = opts.multinode.nodes;
    r.details["ranks"] = g > 0 ? nlohmann::json(opts.multinode.nodes * g) : nlohmann::json();
    r.details["sizes"] = nlohmann::json::array();
  }
  std::cout << nlohmann::json{{"gpucheck", info}, {"checks", nlohmann::json::array({r.to_json()})}}.dump(
                   -1, ' ', false, nlohmann::json::error_handler_t::replace)
            << '\n'
            << std::flush;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    usage(std::cout);
    return 0;
  }
  GpucheckOptions opts;
  if (std::string err = parse_flags(args, opts); !err.empty()) {
    std::cerr << "kiln-gpucheck: " << err << '\n';
    usage(std::cerr);
    return 2;
  }
  // CUDA numbers devices fastest-first by default; NVML and nvidia-smi use
  // PCI order. Make them agree before the first CUDA call.
  setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);

  const kiln::gpucheck::DeviceCount found = kiln::gpucheck::cuda_device_count();
  nlohmann::json info = {{"devices", found.count}};
  int runtime = 0, driver = 0, nccl = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) info["cuda_runtime"] = runtime;
  if (cudaDriverGetVersion(&driver) == cudaSuccess) info["cuda_driver"] = driver;
  if (ncclGetVersion(&nccl) == ncclSuccess) info["nccl"] = nccl;
  if (!found.error.empty()) info["cuda_error"] = found.error;
  nlohmann::json gpus = nlohmann::json::array();
  for (int d = 0; d < found.count; ++d) {
    const auto di = kiln::gpucheck::device_info(d);
    gpus.push_back({{"index", d}, {"name", di.name}, {"pci_bus_id", di.pci_bus_id},
                    {"memory_bytes", di.memory_bytes}, {"sm_count", di.sm_count}});
  }
  info["gpus"] = gpus;

  if (opts.multinode.enabled) return multinode(opts, found, info);

  nlohmann::json checks = nlohmann::json::array();
  for (const auto& name : opts.checks) {
    if (found.count == 0) {
      std::string why = "no CUDA device found";
      if (opts.expect_gpus > 0) why += " (expected " + std::to_string(opts.expect_gpus) + " GPUs, found 0)";
      if (!found.error.empty()) why += ": " + found.error;
      auto r = opts.expect_gpus == 0 ? kiln::agent::check_skip(name, "profile expects no GPU; " + why)
                                     : kiln::agent::check_fail(name, why);
      r.unit = name == "nvlink" ? "links" : name == "gemm" ? "TFLOPS" : "GB/s";
      checks.push_back(r.to_json());
      continue;
    }
    checks.push_back(run_check(name, opts, found.count).to_json());
  }
  std::cout << nlohmann::json{{"gpucheck", info}, {"checks", checks}}.dump(2, ' ', false,
                                                                          nlohmann::json::error_handler_t::replace)
            << '\n';
  return 0;
}
