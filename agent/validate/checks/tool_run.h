#pragma once
// The steps every check that runs a vendor's tool shares (tool_checks.cc,
// latency_checks.cc): find the tool or skip, run it with the deadline and
// record the command, apply a parser's health verdict, skip on a profile
// without GPUs, and pick the RDMA devices for a loopback pair. Blocking like
// run_process(); call off any I/O thread.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/validate/checks/check_result.h"
#include "agent/validate/checks/profile.h"
#include "agent/validate/checks/subprocess.h"
#include "agent/validate/checks/tool_checks.h"

namespace kiln::agent::tool_run {

// A passing result named `name` with `unit`, to be failed or skipped.
CheckResult base(const char* name, const char* unit);

// The last `n` bytes of `s`, trailing newlines and spaces dropped.
std::string tail(const std::string& s, std::size_t n = 600);

// The tool's path, or nullopt with `r` made a skip ("<tool> not installed").
std::optional<std::string> locate(const ToolOptions& opts, const char* tool, CheckResult& r);

// Runs `argv` with opts.timeout, recording details.command and exit_code. On
// a spawn error or timeout `r` fails with the reason and nullopt is returned.
std::optional<ProcessOutput> run(const ToolOptions& opts, std::vector<std::string> argv, CheckResult& r);

// A parser's health verdict on `r`: its reasons fail the check, its warnings show.
void apply_health(const nlohmann::json& parsed, CheckResult& r);

// True (and `r` a skip) when the profile expects no GPU.
bool skip_without_gpus(const ValidationProfile& profile, CheckResult& r);

// The node's RDMA devices (<sys>/class/infiniband/*), sorted, as a loopback
// pair: {server, client}, the second device when there is one, else the first
// with itself. nullopt when there is none: then `r` fails ("no RDMA device to
// test") if the profile expects RDMA ports, else is a skip ("no RDMA device").
std::optional<std::pair<std::string, std::string>> rdma_loopback_pair(const ValidationProfile& profile,
                                                                      const ToolOptions& opts, CheckResult& r);

}  // namespace kiln::agent::tool_run
