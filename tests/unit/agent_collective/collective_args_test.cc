// collective_prepare / collective_run arguments: defaults and strict checks.
#include <catch2/catch.hpp>

#include <string>

#include "agent/validate/collective/collective_args.h"

using kiln::agent::CollectiveCommand;
using kiln::agent::CollectiveKind;
using kiln::agent::parse_collective_args;
using nlohmann::json;

namespace {

const std::string kTcpId = "tcp:127.0.0.1:4000:" + std::string(32, 'a');
const std::string kLongestNcclId = "nccl:" + std::string(256, 'f');

json run_args() {
  return {{"run", "r1"}, {"collective", "tcp"}, {"nodes", 2}, {"rank", 1}, {"unique_id", kTcpId},
          {"min_busbw_gbps", nullptr}};
}

std::string error_of(CollectiveCommand c, const json& args) {
  auto r = parse_collective_args(c, args);
  REQUIRE_FALSE(r);
  return r.error().message;
}

}  // namespace

TEST_CASE("collective arguments take the documented defaults", "[args]") {
  auto tcp = parse_collective_args(CollectiveCommand::kPrepare, {{"run", "r1"}, {"collective", "tcp"}, {"nodes", 4}});
  REQUIRE(tcp);
  CHECK(tcp->collective == CollectiveKind::kTcp);
  CHECK(tcp->nodes == 4);
  CHECK(tcp->max_mib == 8);
  CHECK(tcp->iterations == 5);
  CHECK(tcp->timeout == std::chrono::seconds(600));
  CHECK(tcp->gpus_per_node == -1);
  auto nccl = parse_collective_args(CollectiveCommand::kPrepare,
                                    {{"run", "r1"}, {"collective", "nccl"}, {"nodes", 2}, {"gpus_per_node", 8}});
  REQUIRE(nccl);
  CHECK(nccl->max_mib == 1024);
  CHECK(nccl->gpus_per_node == 8);

  auto run = parse_collective_args(CollectiveCommand::kRun, run_args());
  REQUIRE(run);
  CHECK(run->rank == 1);
  CHECK(run->unique_id == kTcpId);
  CHECK_FALSE(run->min_busbw_gbps);
  json with_floor = run_args();
  with_floor["min_busbw_gbps"] = 40.5;
  CHECK(*parse_collective_args(CollectiveCommand::kRun, with_floor)->min_busbw_gbps == 40.5);
}

TEST_CASE("bad collective arguments are errors naming the field", "[args]") {
  const auto P = CollectiveCommand::kPrepare;
  const auto R = CollectiveCommand::kRun;
  const json prep = {{"run", "r1"}, {"collective", "tcp"}, {"nodes", 2}};
  auto with = [](json j, const char* k, json v) {
    j[k] = std::move(v);
    return j;
  };
  CHECK(error_of(R, with(run_args(), "rank", 2)) == "collective_run: rank must be 0..1");
  CHECK(error_of(R, with(run_args(), "rank", -1)) == "collective_run: rank must be 0..1");
  CHECK(error_of(R, with(run_args(), "rank", "1")) == "collective_run: rank must be 0..1");
  CHECK(error_of(P, with(prep, "run", "")) == "collective_prepare: run must be a string of 1..128 characters");
  CHECK(error_of(P, with(prep, "run", std::string(129, 'x'))).find("run must be") != std::string::npos);
  CHECK(parse_collective_args(P, with(prep, "run", std::string(128, 'x'))));
  CHECK(error_of(P, with(prep, "collective", "mpi")) == "collective_prepare: collective must be \"nccl\" or \"tcp\"");
  CHECK(error_of(P, with(prep, "nodes", 1)) == "collective_prepare: nodes must be 2..1024");
  CHECK(error_of(P, with(prep, "nodes", 1025)) == "collective_prepare: nodes must be 2..1024");
  CHECK(error_of(P, with(prep, "nodes", 2.5)) == "collective_prepare: nodes must be 2..1024");
  CHECK(error_of(P, with(prep, "max_mib", 0)) == "collective_prepare: max_mib must be 1..16384");
  CHECK(error_of(P, with(prep, "max_mib", 16385)) == "collective_prepare: max_mib must be 1..16384");
  CHECK(error_of(P, with(prep, "iterations", 101)) == "collective_prepare: iterations must be 1..100");
  CHECK(error_of(P, with(prep, "timeout_s", 0)) == "collective_prepare: timeout_s must be 1..3600");
  CHECK(error_of(P, with(prep, "timeout_s", 3601)) == "collective_prepare: timeout_s must be 1..3600");
  CHECK(error_of(P, with(prep, "gpus_per_node", -2)) == "collective_prepare: gpus_per_node must be 0..1024");
  CHECK(error_of(P, with(prep, "nodes", 18446744073709551615ULL)) == "collective_prepare: nodes must be 2..1024");
  CHECK(error_of(P, json::array()) == "collective_prepare: arguments must be an object");
  json no_nodes = prep;
  no_nodes.erase("nodes");
  CHECK(error_of(P, no_nodes) == "collective_prepare: nodes is required (must be 2..1024)");

  json no_id = run_args();
  no_id.erase("unique_id");
  CHECK(error_of(R, no_id).find("collective_run: unique_id is required") == 0);
  CHECK(error_of(R, with(run_args(), "unique_id", kLongestNcclId)).find("collective_run: unique_id must be tcp:") == 0);
  json nccl = with(run_args(), "collective", "nccl");
  CHECK(error_of(R, nccl).find("collective_run: unique_id must be nccl:") == 0);
  CHECK(parse_collective_args(R, with(nccl, "unique_id", kLongestNcclId)));
  CHECK(error_of(R, with(nccl, "unique_id", kLongestNcclId + "0")).find("unique_id must be nccl:") != std::string::npos);
  CHECK(error_of(R, with(nccl, "unique_id", "nccl:" + std::string(256, 'z'))).find("unique_id") != std::string::npos);
  CHECK(error_of(R, with(run_args(), "min_busbw_gbps", -1)) ==
        "collective_run: min_busbw_gbps must be a number >= 0 or null");
  CHECK(error_of(R, with(run_args(), "min_busbw_gbps", "40")) ==
        "collective_run: min_busbw_gbps must be a number >= 0 or null");

  auto e = parse_collective_args(R, with(run_args(), "rank", 9));
  REQUIRE_FALSE(e);
  CHECK(e.error().code == kiln::Code::kInvalidArgument);
  REQUIRE(e.error().fields.size() == 1);
  CHECK(e.error().fields[0].field == "rank");
}
