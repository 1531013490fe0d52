#pragma once
// collective "nccl": the real nccl_multinode measurement, run by
// kiln-gpucheck --multinode (agent/gpucheck/nccl_multinode.cc) so kiln-agent
// itself links no CUDA. One kiln-gpucheck per node, every local GPU a rank.
//
// Rank 0's kiln-gpucheck starts at collective_prepare: it calls
// ncclGetUniqueId, prints {"unique_id": "nccl:<256 hex>"} as its first
// stdout line and then waits in ncclCommInitRank for the other nodes, so it
// runs in the background (BackgroundProcess) while the agent answers with the
// id. The other nodes' kiln-gpucheck runs with --unique-id at collective_run,
// to completion. Every kiln-gpucheck prints its report as the last stdout
// line, {"gpucheck": {...}, "checks": [{"name": "nccl_multinode", ...}]}.
//
// kiln-gpucheck bounds its communicator set-up and sweep together by
// --timeout-s from its start; the agent kills it if it overstays that by a
// margin (30 s).

#include <memory>
#include <string>
#include <vector>

#include "agent/validate/checks/check_result.h"
#include "agent/validate/checks/subprocess.h"
#include "agent/validate/collective/collective_args.h"
#include "common/result.h"

namespace kiln::agent {

// Where kiln-gpucheck is (find_gpucheck in agent/validate/checks/plan.h).
struct GpucheckLocation {
  std::string path;         // explicit path; "" = look for it
  std::string agent_dir;    // "" = the running executable's directory
  std::string search_path;  // "" = $PATH
};

// The kiln-gpucheck command line for this node of `args`: --multinode
// --nodes --node-rank --max-mib --iterations --timeout-s, --expect-gpus when
// gpus_per_node is given, --unique-id for ranks other than 0. The floor
// (min_busbw_gbps) is not passed: the agent applies it to every rank alike.
std::vector<std::string> gpucheck_multinode_argv(const std::string& exe, const CollectiveArgs& args);

// kiln-gpucheck's nccl_multinode check from what it printed: the last stdout
// line that is a JSON object with a "checks" array. When there is none, or
// it lacks the check, a fail saying why (exit status, stderr tail). The
// agent's own details (collective, run, rank, nodes) are set on the result.
CheckResult multinode_check_from_output(const ProcessOutput& out, const CollectiveArgs& args);

// Rank 0's kiln-gpucheck, running in the background between prepare and run.
class NcclRoot {
 public:
  // Starts kiln-gpucheck and waits (at most min(args.timeout, 120 s)) for its
  // unique id. Errors: kNotFound when kiln-gpucheck is not found or cannot
  // run; kUnavailable when it exits or stays silent without giving a unique
  // id (no CUDA device, NCCL failed), the message carrying its reason.
  static Result<std::unique_ptr<NcclRoot>> start(const CollectiveArgs& args, const GpucheckLocation& where);

  const std::string& unique_id() const { return unique_id_; }

  // Waits for kiln-gpucheck to finish and returns its check. Blocking, at
  // most args.timeout plus a margin from start(); call once. The
  // destructor kills a kiln-gpucheck still running.
  CheckResult finish();

 private:
  NcclRoot() = default;

  CollectiveArgs args_;
  std::unique_ptr<BackgroundProcess> process_;
  std::string unique_id_;
  std::chrono::steady_clock::time_point kill_at_;
};

// Ranks 1..nodes-1: runs kiln-gpucheck with args.unique_id to completion.
// Never fails as a call: a missing kiln-gpucheck, a timeout or an unreadable
// report is a fail check.
CheckResult run_nccl_peer(const CollectiveArgs& args, const GpucheckLocation& where);

}  // namespace kiln::agent
