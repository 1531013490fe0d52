#pragma once
// The arguments of `collective_prepare` and `collective_run`
// (docs/agent-protocol.md, "Multi-node collective"), checked strictly: kilnd
// builds them, so anything out of range is a bug worth an error naming the
// field rather than a guess.
//
//   prepare: {"run", "collective": "nccl"|"tcp", "nodes", "gpus_per_node",
//             "max_mib", "iterations", "timeout_s"}
//   run:     the same plus "unique_id", "rank", "min_busbw_gbps": X | null

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::agent {

enum class CollectiveKind { kNccl, kTcp };

// "nccl" or "tcp".
const char* collective_kind_name(CollectiveKind k);

enum class CollectiveCommand { kPrepare, kRun };

// "collective_prepare" or "collective_run", the prefix of every error.
const char* collective_command_name(CollectiveCommand c);

struct CollectiveArgs {
  std::string run;                       // kilnd's id for this collective, 1..128 chars
  CollectiveKind collective = CollectiveKind::kTcp;
  int nodes = 2;                         // 2..1024
  int gpus_per_node = -1;                // -1: not given (nccl then uses what the node has)
  std::size_t max_mib = 64;              // largest size of the sweep, 1..16384
  int iterations = 5;                    // timed rounds per size, 1..100 (plus one warm-up)
  // From the start of a participant: peers must have joined and (tcp) the
  // sweep finished by then. Milliseconds so tests can use short ones; the
  // protocol sends whole seconds (1..3600).
  std::chrono::milliseconds timeout{std::chrono::seconds(600)};
  // collective_run only.
  int rank = 0;                          // 0..nodes-1
  std::string unique_id;                 // "nccl:<256 hex>" | "tcp:<ip>:<port>:<32 hex>"
  std::optional<double> min_busbw_gbps;  // the floor on busbw at the largest size
};

// Defaults when a field is absent: max_mib 64 (tcp) or 1024 (nccl),
// iterations 5, timeout_s 600. `run` and `collective` and `nodes` are always
// required; `rank` and `unique_id` for collective_run (whose rank-0 id must be
// the one its prepare answered; the session checks that). Fields the command
// does not take are ignored.
//
// Errors: kInvalidArgument, "<command>: <field> must be ..." (e.g.
// "collective_run: rank must be 0..1"), with the field in Error::fields.
Result<CollectiveArgs> parse_collective_args(CollectiveCommand command, const nlohmann::json& args);

}  // namespace kiln::agent
