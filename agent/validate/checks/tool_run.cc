#include "agent/validate/checks/tool_run.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace kiln::agent::tool_run {

using nlohmann::json;

CheckResult base(const char* name, const char* unit) {
  CheckResult r;
  r.name = name;
  r.unit = unit;
  r.status = CheckStatus::kPass;
  return r;
}

std::string tail(const std::string& s, std::size_t n) {
  std::string t = s.size() > n ? s.substr(s.size() - n) : s;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t;
}

std::optional<std::string> locate(const ToolOptions& opts, const char* tool, CheckResult& r) {
  auto path = find_executable(tool, opts.search_path);
  if (!path) {
    r.status = CheckStatus::kSkip;
    r.details["reason"] = std::string(tool) + " not installed";
  }
  return path;
}

std::optional<ProcessOutput> run(const ToolOptions& opts, std::vector<std::string> argv, CheckResult& r) {
  ProcessSpec spec;
  spec.argv = std::move(argv);
  spec.timeout = opts.timeout;
  std::string cmd;
  for (const auto& a : spec.argv) cmd += (cmd.empty() ? "" : " ") + a;
  r.details["command"] = cmd;
  auto out = run_process(spec);
  if (!out) {
    add_failure(r, out.error().message);
    return std::nullopt;
  }
  r.details["exit_code"] = out->exit_code;
  if (out->signal) r.details["signal"] = out->signal;
  return std::move(*out);
}

void apply_health(const json& parsed, CheckResult& r) {
  auto h = parsed.find("health");
  if (h == parsed.end() || !h->is_object()) return;
  if (h->value("status", "pass") == "fail")
    for (const auto& reason : h->value("reasons", json::array())) add_failure(r, reason.get<std::string>());
  for (const auto& w : h->value("warnings", json::array())) add_warning(r, w.get<std::string>());
}

bool skip_without_gpus(const ValidationProfile& profile, CheckResult& r) {
  if (profile.gpu_count > 0) return false;
  r.status = CheckStatus::kSkip;
  r.details["reason"] = "profile expects no GPU";
  return true;
}

std::optional<std::pair<std::string, std::string>> rdma_loopback_pair(const ValidationProfile& profile,
                                                                      const ToolOptions& opts, CheckResult& r) {
  std::vector<std::string> devices;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(std::filesystem::path(opts.paths.sys) / "class/infiniband", ec), end;
       !ec && it != end; it.increment(ec))
    devices.push_back(it->path().filename().string());
  std::sort(devices.begin(), devices.end());
  if (devices.empty()) {
    if (profile.rdma_ports > 0) {
      add_failure(r, "no RDMA device to test");
    } else {
      r.status = CheckStatus::kSkip;
      r.details["reason"] = "no RDMA device";
    }
    return std::nullopt;
  }
  return std::make_pair(devices.front(), devices.size() > 1 ? devices[1] : devices.front());
}

}  // namespace kiln::agent::tool_run
