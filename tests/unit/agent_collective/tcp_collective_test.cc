// The test-only TCP collective on 127.0.0.1: every rank in a thread of this
// process, as every node's agent would run one.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "agent/validate/collective/collective_check.h"
#include "agent/validate/collective/local_address.h"
#include "agent/validate/collective/tcp_collective.h"

using kiln::agent::CheckResult;
using kiln::agent::CheckStatus;
using kiln::agent::CollectiveArgs;
using kiln::agent::CollectiveKind;
using kiln::agent::TcpRoot;
using namespace std::chrono_literals;

namespace {

CollectiveArgs args_for(int nodes, int rank, std::chrono::milliseconds timeout = 5s) {
  CollectiveArgs a;
  a.run = "run-1";
  a.collective = CollectiveKind::kTcp;
  a.nodes = nodes;
  a.rank = rank;
  a.max_mib = 4;
  a.iterations = 2;
  a.timeout = timeout;
  return a;
}

std::unique_ptr<TcpRoot> listen(const CollectiveArgs& a) {
  auto root = TcpRoot::listen("127.0.0.1", a);
  REQUIRE(root);
  return std::move(*root);
}

// Runs the root and peers 1..n-1 concurrently; results by rank.
std::vector<CheckResult> run_all(const CollectiveArgs& base) {
  CollectiveArgs ra = base;
  ra.rank = 0;
  auto root = listen(ra);
  std::vector<std::future<CheckResult>> ranks;
  ranks.push_back(std::async(std::launch::async, [&] { return root->run(); }));
  for (int r = 1; r < base.nodes; ++r) {
    CollectiveArgs pa = base;
    pa.rank = r;
    pa.unique_id = root->unique_id();
    ranks.push_back(std::async(std::launch::async, [pa] { return kiln::agent::run_tcp_peer(pa); }));
  }
  std::vector<CheckResult> out;
  for (auto& f : ranks) out.push_back(f.get());
  return out;
}

std::string reason(const CheckResult& r) { return r.details.value("reason", ""); }

// The id with its nonce replaced.
std::string with_nonce(const std::string& id, char digit) {
  return id.substr(0, id.size() - 32) + std::string(32, digit);
}

}  // namespace

TEST_CASE("the tcp collective passes with two ranks and reports every size", "[tcp]") {
  const auto results = run_all(args_for(2, 0));
  REQUIRE(results.size() == 2);
  for (int rank = 0; rank < 2; ++rank) {
    const CheckResult& r = results[rank];
    INFO(r.to_json().dump());
    CHECK(r.name == "nccl_multinode");
    CHECK(r.status == CheckStatus::kPass);
    REQUIRE(r.value.is_number());
    CHECK(r.value.get<double>() > 0);
    CHECK(r.unit == "GB/s");
    CHECK(r.threshold.is_null());
    CHECK(r.details["collective"] == "tcp");
    CHECK(r.details["run"] == "run-1");
    CHECK(r.details["rank"] == rank);
    CHECK(r.details["nodes"] == 2);
    CHECK(r.details["ranks"] == 2);
    CHECK(r.details["note"].get<std::string>().find("test-only") != std::string::npos);
    CHECK_FALSE(r.details.contains("reason"));
    const auto& sizes = r.details["sizes"];
    REQUIRE(sizes.size() == 2);
    CHECK(sizes[0]["bytes"] == 1 << 20);
    CHECK(sizes[1]["bytes"] == 4 << 20);
    for (const auto& s : sizes) {
      CHECK(s["time_us"].get<double>() > 0);
      // busbw = algbw * 2(n-1)/n = algbw for two ranks.
      CHECK(s["busbw_gbps"].get<double>() == Approx(s["algbw_gbps"].get<double>()));
    }
    CHECK(r.value.get<double>() == sizes[1]["busbw_gbps"].get<double>());
  }
}

TEST_CASE("the tcp collective passes with three ranks and ends the sweep at max_mib", "[tcp]") {
  CollectiveArgs a = args_for(3, 0);
  a.max_mib = 2;  // 1 MiB, then 2 MiB (not 4)
  const auto results = run_all(a);
  for (int rank = 0; rank < 3; ++rank) {
    const CheckResult& r = results[rank];
    INFO(r.to_json().dump());
    CHECK(r.status == CheckStatus::kPass);
    CHECK(r.details["rank"] == rank);
    CHECK(r.details["ranks"] == 3);
    REQUIRE(r.details["sizes"].size() == 2);
    CHECK(r.details["sizes"][1]["bytes"] == 2 << 20);
    const auto& s = r.details["sizes"][1];
    CHECK(s["busbw_gbps"].get<double>() == Approx(s["algbw_gbps"].get<double>() * 4.0 / 3.0));
  }
}

TEST_CASE("a floor far above what TCP can do fails with the value and the threshold", "[tcp]") {
  CollectiveArgs a = args_for(2, 0);
  a.max_mib = 1;
  a.min_busbw_gbps = 1e9;
  const auto results = run_all(a);
  for (const auto& r : results) {
    INFO(r.to_json().dump());
    CHECK(r.status == CheckStatus::kFail);
    CHECK(r.value.is_number());
    CHECK(r.threshold == nlohmann::json{{"min", 1e9}});
    CHECK(reason(r).find("expected at least 1000000000.00 GB/s") != std::string::npos);
  }
}

TEST_CASE("a missing peer fails the root within its timeout and names the rank", "[tcp]") {
  auto root = listen(args_for(3, 0, 300ms));
  CollectiveArgs pa = args_for(3, 1);
  pa.unique_id = root->unique_id();
  auto peer = std::async(std::launch::async, [pa] { return kiln::agent::run_tcp_peer(pa); });
  const auto t0 = std::chrono::steady_clock::now();
  const CheckResult r = root->run();
  CHECK(std::chrono::steady_clock::now() - t0 < 3s);
  CHECK(r.status == CheckStatus::kFail);
  CHECK(r.value.is_null());
  CHECK(reason(r) == "timed out after 0.3 s waiting for 1 of 2 peers (ranks 2)");
  // The peer that did join is told, rather than waiting out its own 5 s.
  const CheckResult p = peer.get();
  CHECK(p.status == CheckStatus::kFail);
  CHECK(reason(p) == "the root gave up: timed out after 0.3 s waiting for 1 of 2 peers (ranks 2)");
  CHECK(std::chrono::steady_clock::now() - t0 < 3s);
}

TEST_CASE("a peer with the wrong nonce is refused and the run fails saying so", "[tcp]") {
  auto root = listen(args_for(2, 0, 1s));
  auto root_run = std::async(std::launch::async, [&] { return root->run(); });
  CollectiveArgs bad = args_for(2, 1);
  bad.unique_id = with_nonce(root->unique_id(), root->unique_id().back() == '0' ? '1' : '0');
  const CheckResult p = kiln::agent::run_tcp_peer(bad);
  CHECK(p.status == CheckStatus::kFail);
  CHECK(p.value.is_null());
  CHECK(reason(p).find("refused this peer: wrong nonce (not a participant of run run-1)") != std::string::npos);
  const CheckResult r = root_run.get();
  CHECK(r.status == CheckStatus::kFail);
  CHECK(reason(r).rfind("timed out after 1 s waiting for 1 of 1 peers (ranks 1); refused a peer from 127.0.0.1:", 0) ==
        0);
  CHECK(reason(r).find("wrong nonce") != std::string::npos);
}

TEST_CASE("a refused stranger does not stop the right peers from running", "[tcp]") {
  auto root = listen(args_for(2, 0, 5s));
  auto root_run = std::async(std::launch::async, [&] { return root->run(); });
  CollectiveArgs bad = args_for(2, 1);
  bad.unique_id = with_nonce(root->unique_id(), root->unique_id().back() == 'f' ? 'e' : 'f');
  CHECK(kiln::agent::run_tcp_peer(bad).status == CheckStatus::kFail);
  CollectiveArgs good = args_for(2, 1);
  good.unique_id = root->unique_id();
  CHECK(kiln::agent::run_tcp_peer(good).status == CheckStatus::kPass);
  const CheckResult r = root_run.get();
  CHECK(r.status == CheckStatus::kPass);
  REQUIRE(r.details.contains("warnings"));
  CHECK(r.details["warnings"][0].get<std::string>().find("wrong nonce") != std::string::npos);
}

TEST_CASE("the root refuses a nodes mismatch, an out-of-range rank and a duplicate", "[tcp]") {
  auto root = listen(args_for(3, 0, 1s));
  auto root_run = std::async(std::launch::async, [&] { return root->run(); });

  CollectiveArgs wrong_nodes = args_for(2, 1);
  wrong_nodes.unique_id = root->unique_id();
  CHECK(reason(kiln::agent::run_tcp_peer(wrong_nodes)).find("refused this peer: nodes 2 does not match the root's 3") !=
        std::string::npos);

  CollectiveArgs sweep = args_for(3, 1);
  sweep.unique_id = root->unique_id();
  sweep.max_mib = 8;
  CHECK(reason(kiln::agent::run_tcp_peer(sweep)).find("differs from the root's") != std::string::npos);

  // Rank 1 joins and waits; a second rank 1 is refused.
  CollectiveArgs first = args_for(3, 1, 5s);
  first.unique_id = root->unique_id();
  auto joined = std::async(std::launch::async, [first] { return kiln::agent::run_tcp_peer(first); });
  // The duplicate may arrive before the first has been admitted; then the
  // first is the one refused. Either way exactly one of them is.
  const CheckResult dup = kiln::agent::run_tcp_peer(first);
  const CheckResult r = root_run.get();
  const CheckResult j = joined.get();
  const bool dup_refused = reason(dup).find("refused this peer: rank 1 has already joined") != std::string::npos;
  const bool first_refused = reason(j).find("refused this peer: rank 1 has already joined") != std::string::npos;
  CHECK(dup_refused != first_refused);
  CHECK(r.status == CheckStatus::kFail);
  CHECK(reason(r).rfind("timed out after 1 s waiting for 1 of 2 peers (ranks 2)", 0) == 0);
  CHECK(reason(r).find("nodes 2 does not match") != std::string::npos);
  CHECK(reason(r).find("rank 1 has already joined") != std::string::npos);
}

TEST_CASE("a peer that cannot reach the root fails at once", "[tcp]") {
  // A port that was just closed: nothing listens there.
  std::string id;
  {
    auto root = listen(args_for(2, 0));
    id = root->unique_id();
  }
  CollectiveArgs a = args_for(2, 1, 5s);
  a.unique_id = id;
  const auto t0 = std::chrono::steady_clock::now();
  const CheckResult r = kiln::agent::run_tcp_peer(a);
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  CHECK(r.status == CheckStatus::kFail);
  CHECK(reason(r).find("cannot connect to the root at 127.0.0.1:") == 0);
}

TEST_CASE("a peer whose root never answers its hello times out", "[tcp]") {
  // A listening socket nobody accepts from: the connection completes in the
  // kernel's backlog, the hello is buffered, no answer comes.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  REQUIRE(::listen(fd, 4) == 0);
  socklen_t len = sizeof sa;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0);
  CollectiveArgs a = args_for(2, 1, 300ms);
  a.unique_id = "tcp:127.0.0.1:" + std::to_string(ntohs(sa.sin_port)) + ":" + std::string(32, 'a');
  const CheckResult r = kiln::agent::run_tcp_peer(a);
  close(fd);
  CHECK(r.status == CheckStatus::kFail);
  CHECK(reason(r) == "timed out after 0.3 s waiting for the root at 127.0.0.1:" + std::to_string(ntohs(sa.sin_port)) +
                         " to accept this peer");
}

TEST_CASE("cancel() ends a root that is waiting for peers", "[tcp]") {
  auto root = listen(args_for(2, 0, 30s));
  auto run = std::async(std::launch::async, [&] { return root->run(); });
  root->cancel();
  const CheckResult r = run.get();
  CHECK(r.status == CheckStatus::kFail);
  CHECK(reason(r) == "cancelled");
}

TEST_CASE("tcp unique ids parse strictly", "[tcp]") {
  const std::string nonce(32, 'a');
  auto ok = kiln::agent::parse_tcp_unique_id("tcp:10.77.0.5:40123:" + std::string(32, 'A'));
  REQUIRE(ok);
  CHECK(ok->ip == "10.77.0.5");
  CHECK(ok->port == 40123);
  CHECK(ok->nonce == nonce);  // lower-cased
  CHECK(kiln::agent::format_tcp_unique_id(*ok) == "tcp:10.77.0.5:40123:" + nonce);
  const std::vector<std::string> bad_ids = {"",
                                            "tcp:",
                                            "nccl:10.0.0.1:1:" + nonce,
                                            "tcp:10.0.0.1:1:" + nonce.substr(1),
                                            "tcp:10.0.0.1:0:" + nonce,
                                            "tcp:10.0.0.1:65536:" + nonce,
                                            "tcp:10.0.0:1:" + nonce,
                                            "tcp:host:1:" + nonce,
                                            "tcp:10.0.0.1::" + nonce,
                                            "tcp:10.0.0.1:1:" + nonce + "0",
                                            "tcp:10.0.0.1:1:" + std::string(32, 'g')};
  for (const std::string& bad : bad_ids) {
    INFO(bad);
    CHECK_FALSE(kiln::agent::parse_tcp_unique_id(bad));
  }
}

TEST_CASE("the sweep runs 1 MiB by x4 and always ends at max_mib", "[tcp]") {
  using V = std::vector<std::size_t>;
  constexpr std::size_t M = 1 << 20;
  CHECK(kiln::agent::sweep_sizes(1) == V{M});
  CHECK(kiln::agent::sweep_sizes(4) == V{M, 4 * M});
  CHECK(kiln::agent::sweep_sizes(64) == V{M, 4 * M, 16 * M, 64 * M});
  CHECK(kiln::agent::sweep_sizes(100) == V{M, 4 * M, 16 * M, 64 * M, 100 * M});
  CHECK(kiln::agent::busbw_factor(2) == 1.0);
  CHECK(kiln::agent::busbw_factor(16) == Approx(30.0 / 16.0));
}

TEST_CASE("the local address towards kilnd comes from the routing table", "[tcp]") {
  auto loopback = kiln::agent::local_ipv4_towards("http://127.0.0.1:8080/v1");
  REQUIRE(loopback);
  CHECK(*loopback == "127.0.0.1");
  auto named = kiln::agent::local_ipv4_towards("http://localhost:9");
  REQUIRE(named);
  CHECK(*named == "127.0.0.1");
  auto tls = kiln::agent::local_ipv4_towards("https://127.0.0.1/");  // kilnd over TLS (pinned)
  REQUIRE(tls);
  CHECK(*tls == "127.0.0.1");
  CHECK_FALSE(kiln::agent::local_ipv4_towards("ftp://127.0.0.1/"));
  CHECK_FALSE(kiln::agent::local_ipv4_towards("http://no-such-host.invalid:80/"));
}
