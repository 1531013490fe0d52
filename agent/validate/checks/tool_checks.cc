#include "agent/validate/checks/tool_checks.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <thread>
#include <vector>

#include "agent/validate/checks/subprocess.h"
#include "agent/validate/checks/tool_run.h"
#include "agent/validate/parsers/parse.h"
#include "agent/validate/parsers/text_scan.h"

namespace kiln::agent {

namespace {

using nlohmann::json;

using tool_run::apply_health;
using tool_run::base;
using tool_run::locate;
using tool_run::skip_without_gpus;
using tool_run::tail;

std::optional<ProcessOutput> run_tool(const ToolOptions& opts, std::vector<std::string> argv, CheckResult& r) {
  return tool_run::run(opts, std::move(argv), r);
}

void walk_dcgm(const json& j, const std::string& test, json& tests) {
  if (j.is_array()) {
    for (const auto& e : j) walk_dcgm(e, test, tests);
    return;
  }
  if (!j.is_object()) return;
  std::string name = test;
  if (auto n = j.find("name"); n != j.end() && n->is_string()) name = n->get<std::string>();
  for (const char* key : {"status", "result"}) {
    auto s = j.find(key);
    if (s != j.end() && s->is_string() && !name.empty()) {
      json entry = {{"name", name}, {"status", s->get<std::string>()}};
      for (const char* id : {"gpu_ids", "entity_id", "gpu_id"})
        if (auto g = j.find(id); g != j.end()) entry[id] = *g;
      if (auto w = j.find("warnings"); w != j.end()) entry["warnings"] = *w;
      if (auto i = j.find("info"); i != j.end()) entry["info"] = *i;
      tests.push_back(std::move(entry));
    }
  }
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it->is_structured()) walk_dcgm(*it, name, tests);
}

}  // namespace

json summarize_dcgm_json(const json& j) {
  json tests = json::array();
  walk_dcgm(j, "", tests);
  json failed = json::array(), warned = json::array();
  for (const auto& t : tests) {
    const std::string s = scan::to_lower(t["status"].get<std::string>());
    if (s.rfind("fail", 0) == 0 || s == "error") failed.push_back(t["name"]);
    else if (s.rfind("warn", 0) == 0) warned.push_back(t["name"]);
  }
  return {{"tests", tests}, {"failed", failed}, {"warned", warned}};
}

CheckResult check_nvidia_smi_topo(const ValidationProfile& profile, const ToolOptions& opts) {
  CheckResult r = base("nvidia_smi_topo", "GPUs");
  r.threshold = {{"expected", profile.gpu_count}};
  if (skip_without_gpus(profile, r)) return r;
  auto tool = locate(opts, "nvidia-smi", r);
  if (!tool) return r;
  auto out = run_tool(opts, {*tool, "topo", "-m"}, r);
  if (!out) return r;
  auto parsed = parse_tool_output("topo", out->out);
  if (!parsed) {
    add_failure(r, "nvidia-smi topo -m printed no matrix: " +
                       tail(out->out.empty() ? out->err : out->out, 300));
    return r;
  }
  apply_health(*parsed, r);
  const json summary = parsed->value("summary", json::object());
  const int gpus = summary.value("gpu_count", 0);
  r.value = gpus;
  if (gpus != profile.gpu_count)
    add_failure(r, "topology lists " + std::to_string(gpus) + " GPUs, expected " + std::to_string(profile.gpu_count));
  if (profile.nvlink_links_per_gpu > 0 && gpus >= 2 && !summary.value("all_gpu_pairs_nvlink", false))
    add_failure(r, "not every GPU pair is connected by NVLink");
  r.details["parsed"] = std::move(*parsed);
  return r;
}

CheckResult check_dcgm_diag(const ValidationProfile& profile, const ToolOptions& opts, int level) {
  CheckResult r = base("dcgm_diag", "failed tests");
  r.threshold = {{"max", 0}};
  r.details["level"] = level;
  if (skip_without_gpus(profile, r)) return r;
  auto tool = locate(opts, "dcgmi", r);
  if (!tool) return r;
  auto out = run_tool(opts, {*tool, "diag", "-r", std::to_string(level), "-j"}, r);
  if (!out) return r;
  json doc = json::parse(out->out, nullptr, false);
  if (!doc.is_discarded() && doc.is_object()) {
    json summary = summarize_dcgm_json(doc);
    r.value = summary["failed"].size();
    for (const auto& f : summary["failed"]) add_failure(r, "DCGM test failed: " + f.get<std::string>());
    for (const auto& w : summary["warned"]) add_warning(r, "DCGM test warned: " + w.get<std::string>());
    if (summary["tests"].empty()) add_failure(r, "dcgmi diag reported no test results");
    r.details["summary"] = std::move(summary);
    r.details["report"] = std::move(doc);
  } else {
    // dcgmi prints a text table or an "Error: ..." line when -j is unsupported or it cannot run.
    auto parsed = parse_tool_output("dcgm", out->out + out->err);
    if (!parsed) {
      add_failure(r, "dcgmi diag printed neither JSON nor a result table: " + tail(out->out + out->err, 300));
      return r;
    }
    apply_health(*parsed, r);
    int failed = 0;
    for (const auto& t : parsed->value("tests", json::array()))
      if (t.value("result", "") == "Fail") ++failed;
    r.value = failed;
    r.details["parsed"] = std::move(*parsed);
  }
  if (out->exit_code != 0 && r.status == CheckStatus::kPass)
    add_failure(r, "dcgmi exited with " + std::to_string(out->exit_code));
  return r;
}

CheckResult check_nccl_tests(const ValidationProfile& profile, const ToolOptions& opts) {
  CheckResult r = base("nccl_tests", "GB/s");
  if (profile.nccl_busbw_gbps_min) r.threshold = {{"min", *profile.nccl_busbw_gbps_min}};
  if (skip_without_gpus(profile, r)) return r;
  auto tool = locate(opts, "all_reduce_perf", r);
  if (!tool) return r;
  auto out = run_tool(opts, {*tool, "-b", "8M", "-e", "1G", "-f", "2", "-g", std::to_string(profile.gpu_count)}, r);
  if (!out) return r;
  auto parsed = parse_tool_output("nccl-tests", out->out);
  if (!parsed) {
    add_failure(r, "all_reduce_perf printed no result table: " + tail(out->out + out->err, 300));
    return r;
  }
  apply_health(*parsed, r);
  const json largest = parsed->value("largest_size", json());
  if (largest.is_object()) {
    double bus = 0;
    for (const char* k : {"busbw_out_of_place", "busbw_in_place"})
      if (largest.contains(k) && largest[k].is_number()) bus = std::max(bus, largest[k].get<double>());
    r.value = bus;
    r.details["largest_size_bytes"] = largest.value("size", json());
    if (profile.nccl_busbw_gbps_min && bus < *profile.nccl_busbw_gbps_min && profile.gpu_count > 1) {
      char b[160];
      std::snprintf(b, sizeof b, "all_reduce bus bandwidth %.1f GB/s at the largest size, expected at least %.1f",
                    bus, *profile.nccl_busbw_gbps_min);
      add_failure(r, b);
    }
  }
  if (out->exit_code != 0 && r.status == CheckStatus::kPass)
    add_failure(r, "all_reduce_perf exited with " + std::to_string(out->exit_code) + ": " + tail(out->err, 300));
  r.details["parsed"] = std::move(*parsed);
  return r;
}

CheckResult check_ib_write_bw(const ValidationProfile& profile, const ToolOptions& opts) {
  CheckResult r = base("ib_write_bw", "Gb/s");
  if (profile.ib_write_bw_gbps_min) r.threshold = {{"min", *profile.ib_write_bw_gbps_min}};
  if (skip_without_gpus(profile, r)) return r;
  auto tool = locate(opts, "ib_write_bw", r);
  if (!tool) return r;
  auto pair = tool_run::rdma_loopback_pair(profile, opts, r);
  if (!pair) return r;
  const std::string server_dev = pair->first;
  const std::string client_dev = pair->second;
  const std::string client_gpu = profile.gpu_count > 1 ? "1" : "0";
  ProcessSpec server;
  server.argv = {*tool, "-d", server_dev, "--use_cuda=0", "--report_gbits", "-F", "-s", "1048576", "-n", "2000"};
  auto srv = BackgroundProcess::start(server);
  if (!srv) {
    add_failure(r, srv.error().message);
    return r;
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));  // let the server listen
  auto out = run_tool(opts, {*tool, "-d", client_dev, "--use_cuda=" + client_gpu, "--report_gbits", "-F", "-s",
                             "1048576", "-n", "2000", "127.0.0.1"}, r);
  ProcessOutput server_out = (*srv)->finish(std::chrono::seconds(30));
  r.details["server_devices"] = {server_dev, client_dev};
  if (!out) return r;
  auto parsed = parse_tool_output("perftest", out->out + out->err);
  if (!parsed) {
    add_failure(r, "ib_write_bw printed no result: " + tail(out->out + out->err + server_out.out, 300));
    return r;
  }
  apply_health(*parsed, r);
  const json bw = parsed->value("bw_average_max", json());
  r.value = bw;
  if (!parsed->value("use_cuda", false)) add_failure(r, "ib_write_bw did not use a GPU buffer (--use_cuda)");
  if (profile.ib_write_bw_gbps_min && bw.is_number() && bw.get<double>() < *profile.ib_write_bw_gbps_min) {
    char b[160];
    std::snprintf(b, sizeof b, "ib_write_bw %.1f Gb/s, expected at least %.1f", bw.get<double>(),
                  *profile.ib_write_bw_gbps_min);
    add_failure(r, b);
  }
  r.details["parsed"] = std::move(*parsed);
  return r;
}

}  // namespace kiln::agent
