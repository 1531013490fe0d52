#include "agent/validate/collective/collective_session.h"

#include <thread>
#include <utility>

#include "agent/validate/collective/collective_check.h"
#include "agent/validate/collective/local_address.h"
#include "agent/validate/collective/tcp_collective.h"

namespace kiln::agent {

namespace {

using nlohmann::json;

// A rank-0 participant running between prepare and run.
class RootParticipant {
 public:
  virtual ~RootParticipant() = default;
  // Waits for it to end and returns its check. Called at most once.
  virtual CheckResult finish() = 0;
};

// The tcp root on its own thread, so the agent can answer prepare while it
// accepts peers. The destructor cancels a root still running and joins.
class TcpRootThread : public RootParticipant {
 public:
  explicit TcpRootThread(std::unique_ptr<TcpRoot> root)
      : root_(std::move(root)), thread_([this] { result_ = root_->run(); }) {}
  ~TcpRootThread() override {
    if (!thread_.joinable()) return;
    root_->cancel();
    thread_.join();
  }
  CheckResult finish() override {
    thread_.join();
    return std::move(result_);
  }

 private:
  std::unique_ptr<TcpRoot> root_;
  CheckResult result_;   // written by thread_, read after join
  std::thread thread_;   // last: starts once the members above exist
};

// kiln-gpucheck as rank 0; its destructor kills a child still running.
class NcclRootProcess : public RootParticipant {
 public:
  explicit NcclRootProcess(std::unique_ptr<NcclRoot> root) : root_(std::move(root)) {}
  CheckResult finish() override { return root_->finish(); }

 private:
  std::unique_ptr<NcclRoot> root_;
};

Error with_prefix(CollectiveCommand c, const Error& e) {
  Error out = e;
  out.message = std::string(collective_command_name(c)) + ": " + e.message;
  return out;
}

}  // namespace

struct CollectiveSession::Prepared {
  CollectiveArgs args;
  std::string unique_id;
  std::unique_ptr<RootParticipant> root;  // null when prepare failed
  std::string failure;                    // why prepare failed
};

CollectiveSession::CollectiveSession(CollectiveSessionOptions options, Logger log)
    : options_(std::move(options)), log_(std::move(log)) {}

CollectiveSession::~CollectiveSession() = default;

Result<json> CollectiveSession::prepare(const json& args) {
  constexpr CollectiveCommand kCmd = CollectiveCommand::kPrepare;
  auto parsed = parse_collective_args(kCmd, args);
  if (!parsed) return parsed.take_error();
  CollectiveArgs a = std::move(*parsed);
  a.rank = 0;
  // Stop an older participant first: it may hold the GPUs (nccl) and its
  // peers are better told now than at its deadline.
  if (prepared_) {
    log_.info("collective replaced", {{"run", prepared_->args.run}, {"by", a.run}});
    prepared_.reset();
  }

  auto p = std::make_unique<Prepared>();
  p->args = a;
  Error failed;
  if (a.collective == CollectiveKind::kTcp) {
    auto address = options_.api_url.empty()
                       ? Result<std::string>(Error(Code::kUnavailable, "no API URL to choose the local address from"))
                       : local_ipv4_towards(options_.api_url);
    if (!address) {
      failed = Error(address.error().code == Code::kInvalidArgument ? Code::kUnavailable : address.error().code,
                     "no local address towards kilnd: " + address.error().message);
    } else if (auto root = TcpRoot::listen(*address, a); !root) {
      failed = root.take_error();
    } else {
      p->unique_id = (*root)->unique_id();
      p->root = std::make_unique<TcpRootThread>(std::move(*root));
    }
  } else {
    if (auto root = NcclRoot::start(a, options_.gpucheck); !root) {
      failed = root.take_error();
    } else {
      p->unique_id = (*root)->unique_id();
      p->root = std::make_unique<NcclRootProcess>(std::move(*root));
    }
  }
  const std::string run = a.run;
  const char* kind = collective_kind_name(a.collective);
  if (!p->root) {
    p->failure = failed.message;
    prepared_ = std::move(p);
    log_.warn("collective prepare failed", {{"run", run}, {"collective", kind}, {"error", failed.message}});
    return with_prefix(kCmd, failed);
  }
  json out = {{"run", run}, {"unique_id", p->unique_id}};
  prepared_ = std::move(p);
  log_.info("collective prepared", {{"run", run}, {"collective", kind}, {"nodes", std::to_string(a.nodes)}});
  return out;
}

Result<json> CollectiveSession::run(const json& args) {
  constexpr CollectiveCommand kCmd = CollectiveCommand::kRun;
  auto parsed = parse_collective_args(kCmd, args);
  if (!parsed) return parsed.take_error();
  const CollectiveArgs a = std::move(*parsed);
  const char* kind = collective_kind_name(a.collective);
  log_.info("collective run", {{"run", a.run}, {"collective", kind}, {"rank", std::to_string(a.rank)},
                               {"nodes", std::to_string(a.nodes)}});

  CheckResult r;
  if (a.rank == 0) {
    if (!prepared_ || prepared_->args.run != a.run)
      return Error(Code::kNotFound, "collective_run: run " + a.run + " was not prepared on this node (rank 0)");
    const CollectiveArgs& p = prepared_->args;
    if (p.collective != a.collective || p.nodes != a.nodes)
      return Error(Code::kInvalidArgument, std::string("collective_run: collective/nodes (") + kind + ", " +
                                               std::to_string(a.nodes) + ") differ from the prepared run's (" +
                                               collective_kind_name(p.collective) + ", " + std::to_string(p.nodes) +
                                               ")");
    if (prepared_->root && a.unique_id != prepared_->unique_id)
      return Error(Code::kInvalidArgument, "collective_run: unique_id is not the one collective_prepare answered",
                   {FieldError{"unique_id", "is not the one collective_prepare answered"}});
    const std::unique_ptr<Prepared> prepared = std::move(prepared_);
    if (!prepared->root) {
      const int ranks = a.collective == CollectiveKind::kTcp ? a.nodes
                        : a.gpus_per_node > 0                ? a.nodes * a.gpus_per_node
                                                             : 0;
      r = multinode_check(a, ranks);
      if (ranks == 0) r.details["ranks"] = nullptr;
      add_failure(r, "collective_prepare failed: " + prepared->failure);
    } else {
      r = prepared->root->finish();
    }
  } else if (a.collective == CollectiveKind::kTcp) {
    r = run_tcp_peer(a);
  } else {
    r = run_nccl_peer(a, options_.gpucheck);
  }
  apply_min_busbw(r, a.min_busbw_gbps);
  log_.info("collective done", {{"run", a.run}, {"rank", std::to_string(a.rank)},
                                {"status", check_status_name(r.status)},
                                {"busbw_gbps", r.value.is_number() ? std::to_string(r.value.get<double>()) : "null"}});
  return r.to_json();
}

}  // namespace kiln::agent
