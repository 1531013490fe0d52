#pragma once
// CollectiveSession: one agent's side of a multi-node collective across the
// two commands kilnd sends it (docs/agent-protocol.md, "Multi-node
// collective"). On the rank-0 node, collective_prepare starts the root
// participant in the background and answers with its unique id;
// collective_run then collects that participant's result. On the other
// nodes, collective_run runs a participant that joins with the id.
//
// The session keeps at most one prepared root, by run id: a second prepare
// stops and replaces the first. A prepare that failed is remembered too, so
// a collective_run for that run reports a fail check with the reason instead
// of "never prepared".
//
// Threads: prepare() and run() are called from the agent's single worker
// thread, one at a time. A tcp root runs on a thread of its own from prepare
// to run; an nccl root is a kiln-gpucheck child process. The destructor
// stops either (cancels and joins the thread, kills the process).

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/validate/collective/collective_args.h"
#include "agent/validate/collective/nccl_collective.h"
#include "common/log.h"
#include "common/result.h"

namespace kiln::agent {

struct CollectiveSessionOptions {
  // kilnd's URL: the tcp root listens on the local address that reaches it.
  std::string api_url;
  // Where kiln-gpucheck is, for collective "nccl".
  GpucheckLocation gpucheck;
};

class CollectiveSession {
 public:
  CollectiveSession(CollectiveSessionOptions options, Logger log);
  ~CollectiveSession();
  CollectiveSession(const CollectiveSession&) = delete;
  CollectiveSession& operator=(const CollectiveSession&) = delete;

  // collective_prepare: starts this node's rank-0 participant and returns
  // {"run", "unique_id"} once peers can join. Errors (command errors):
  // kInvalidArgument for bad arguments (the field named); for tcp,
  // kUnavailable when no local address reaches kilnd or the port cannot be
  // opened; for nccl, kNotFound when kiln-gpucheck is missing and
  // kUnavailable when it gave no unique id (e.g. no GPU). Every message
  // starts "collective_prepare: ".
  Result<nlohmann::json> prepare(const nlohmann::json& args);

  // collective_run: the nccl_multinode check (CheckResult JSON) of this
  // node's participant. Rank 0 waits for the one its prepare started (same
  // run, collective, nodes and unique_id); other ranks run theirs to
  // completion. Blocking for up to the collective's timeout (nccl: plus a
  // 30 s margin). A collective that could not run is a `fail` check,
  // not an error. Errors: kInvalidArgument for bad arguments, kNotFound when
  // rank 0 has no prepared participant for this run; messages start
  // "collective_run: ".
  Result<nlohmann::json> run(const nlohmann::json& args);

 private:
  struct Prepared;  // the rank-0 participant of one run, or why it failed

  CollectiveSessionOptions options_;
  Logger log_;
  std::unique_ptr<Prepared> prepared_;
};

}  // namespace kiln::agent
