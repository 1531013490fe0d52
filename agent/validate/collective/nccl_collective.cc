#include "agent/validate/collective/nccl_collective.h"

#include <signal.h>

#include <algorithm>
#include <thread>

#include "agent/validate/checks/plan.h"
#include "agent/validate/collective/collective_check.h"

namespace kiln::agent {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// kiln-gpucheck prints its unique id right after CUDA start-up and
// ncclGetUniqueId: seconds on an 8-GPU node; a minute or two is patience.
constexpr auto kUniqueIdWait = std::chrono::seconds(120);
// Beyond kiln-gpucheck's own bound (--timeout-s for set-up and sweep
// together): time to tear NCCL down and print its report. Below kilnd's own
// margin (it waits timeout_s plus a minute for collective_run), so the agent
// answers before kilnd gives up on it.
constexpr auto kExitMargin = std::chrono::seconds(30);
constexpr auto kPollInterval = std::chrono::milliseconds(10);

long long timeout_seconds(const CollectiveArgs& a) {
  return std::max<long long>(1, std::chrono::ceil<std::chrono::seconds>(a.timeout).count());
}

std::chrono::milliseconds process_bound(const CollectiveArgs& a) {
  return std::chrono::milliseconds(std::chrono::seconds(timeout_seconds(a))) + kExitMargin;
}

// The last `n` characters of what a child printed, without the final newline.
std::string tail(const std::string& s, std::size_t n = 300) {
  std::string t = s.size() > n ? s.substr(s.size() - n) : s;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
  return t;
}

// Complete lines of `text`, last first.
std::vector<std::string> lines_backwards(const std::string& text) {
  std::vector<std::string> out;
  std::size_t end = text.size();
  while (end > 0) {
    std::size_t start = text.rfind('\n', end - 1);
    start = start == std::string::npos ? 0 : start + 1;
    out.push_back(text.substr(start, end - start));
    end = start == 0 ? 0 : start - 1;
  }
  return out;
}

// The "nccl:..." id from the first line that announces one; "" if none yet.
// Only newline-terminated lines count: a half-written line is not an id.
std::string find_unique_id(const std::string& out) {
  std::size_t start = 0;
  for (std::size_t nl; (nl = out.find('\n', start)) != std::string::npos; start = nl + 1) {
    const json line = json::parse(out.substr(start, nl - start), nullptr, false);
    if (line.is_object() && line.contains("unique_id") && line["unique_id"].is_string()) {
      const std::string id = line["unique_id"].get<std::string>();
      if (id.rfind("nccl:", 0) == 0) return id;
    }
  }
  return "";
}

// The report: the last stdout line that is an object with a "checks" array.
json find_report(const std::string& out) {
  for (const auto& line : lines_backwards(out)) {
    if (line.empty() || line.front() != '{') continue;
    json doc = json::parse(line, nullptr, false);
    if (doc.is_object() && doc.contains("checks") && doc["checks"].is_array()) return doc;
  }
  return nullptr;
}

// Why a kiln-gpucheck that gave no unique id stopped, in its own words when
// it said any.
std::string exit_reason(const ProcessOutput& o) {
  const json doc = find_report(o.out);
  if (doc.is_object()) {
    for (const auto& c : doc["checks"]) {
      if (c.is_object() && c.value("name", "") == kMultinodeCheckName && c.contains("details") &&
          c["details"].is_object() && c["details"].contains("reason") && c["details"]["reason"].is_string())
        return c["details"]["reason"].get<std::string>();
    }
  }
  std::string why = o.signal ? "killed by signal " + std::to_string(o.signal) : "exit " + std::to_string(o.exit_code);
  if (const std::string err = tail(o.err); !err.empty()) why += ": " + err;
  return why;
}

// The check when kiln-gpucheck gave nothing usable: fail, value null.
CheckResult nccl_fail(const CollectiveArgs& args, const std::string& reason) {
  CheckResult r = multinode_check(args, 0);
  // nodes x GPUs per node when kilnd said how many; unknown otherwise.
  r.details["ranks"] = args.gpus_per_node > 0 ? json(args.nodes * args.gpus_per_node) : json();
  add_failure(r, reason);
  apply_min_busbw(r, args.min_busbw_gbps);
  return r;
}

}  // namespace

std::vector<std::string> gpucheck_multinode_argv(const std::string& exe, const CollectiveArgs& args) {
  std::vector<std::string> argv = {exe,
                                   "--multinode",
                                   "--nodes", std::to_string(args.nodes),
                                   "--node-rank", std::to_string(args.rank),
                                   "--max-mib", std::to_string(args.max_mib),
                                   "--iterations", std::to_string(args.iterations),
                                   "--timeout-s", std::to_string(timeout_seconds(args))};
  if (args.gpus_per_node >= 0) argv.insert(argv.end(), {"--expect-gpus", std::to_string(args.gpus_per_node)});
  if (args.rank > 0) argv.insert(argv.end(), {"--unique-id", args.unique_id});
  return argv;
}

CheckResult multinode_check_from_output(const ProcessOutput& out, const CollectiveArgs& args) {
  const json doc = find_report(out.out);
  if (!doc.is_object()) return nccl_fail(args, "kiln-gpucheck printed no report (" + exit_reason(out) + ")");
  CheckResult r;
  bool found = false;
  for (const auto& c : doc["checks"]) {
    auto parsed = CheckResult::from_json(c);
    if (!parsed || parsed->name != kMultinodeCheckName) continue;
    r = std::move(*parsed);
    found = true;
    break;
  }
  if (!found) return nccl_fail(args, "kiln-gpucheck did not report nccl_multinode (" + exit_reason(out) + ")");
  r.unit = "GB/s";
  // The agent's view of who ran what; kiln-gpucheck knows no run id.
  r.details["collective"] = "nccl";
  r.details["run"] = args.run;
  r.details["rank"] = args.rank;
  r.details["nodes"] = args.nodes;
  if (doc.contains("gpucheck")) r.details["gpucheck"] = doc["gpucheck"];
  apply_min_busbw(r, args.min_busbw_gbps);
  return r;
}

Result<std::unique_ptr<NcclRoot>> NcclRoot::start(const CollectiveArgs& args, const GpucheckLocation& where) {
  auto exe = find_gpucheck(where.path, where.agent_dir, where.search_path);
  if (!exe) return exe.take_error();
  const auto started = Clock::now();
  std::unique_ptr<NcclRoot> root(new NcclRoot());
  root->args_ = args;
  root->args_.rank = 0;
  root->kill_at_ = started + process_bound(root->args_);
  ProcessSpec spec;
  spec.argv = gpucheck_multinode_argv(*exe, root->args_);
  auto proc = BackgroundProcess::start(spec, BackgroundOutput::kSeparate);
  if (!proc) return proc.take_error();
  root->process_ = std::move(*proc);

  // Poll the output file: the child writes one short line and keeps
  // running, so there is nothing to block on but its exit.
  const auto give_up = started + std::min<std::chrono::milliseconds>(args.timeout, kUniqueIdWait);
  for (;;) {
    const bool running = root->process_->running();
    root->unique_id_ = find_unique_id(root->process_->output_so_far());
    if (!root->unique_id_.empty()) return root;
    if (!running) {
      const ProcessOutput o = root->process_->finish(std::chrono::milliseconds(0));
      return Error(Code::kUnavailable, "kiln-gpucheck exited before giving a unique id: " + exit_reason(o));
    }
    if (Clock::now() >= give_up) {
      const ProcessOutput o = root->process_->finish(std::chrono::milliseconds(0));
      const auto waited = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - started).count();
      const std::string err = tail(o.err);
      return Error(Code::kUnavailable, "kiln-gpucheck gave no unique id within " + std::to_string(waited) + " s" +
                                           (err.empty() ? "" : ": " + err));
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

CheckResult NcclRoot::finish() {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(kill_at_ - Clock::now());
  const ProcessOutput o = process_->finish(std::max(left, std::chrono::milliseconds(0)));
  if (o.signal == SIGKILL && Clock::now() >= kill_at_)
    return nccl_fail(args_, "kiln-gpucheck ran past " + std::to_string(process_bound(args_).count() / 1000) +
                                " s and was killed");
  return multinode_check_from_output(o, args_);
}

CheckResult run_nccl_peer(const CollectiveArgs& args, const GpucheckLocation& where) {
  auto exe = find_gpucheck(where.path, where.agent_dir, where.search_path);
  if (!exe) return nccl_fail(args, exe.error().message);
  ProcessSpec spec;
  spec.argv = gpucheck_multinode_argv(*exe, args);
  spec.timeout = process_bound(args);
  auto run = run_process(spec);
  if (!run) return nccl_fail(args, "kiln-gpucheck: " + run.error().message);
  return multinode_check_from_output(*run, args);
}

}  // namespace kiln::agent
