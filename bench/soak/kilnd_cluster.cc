#include "bench/soak/kilnd_cluster.h"

#include <signal.h>

#include <sstream>
#include <stdexcept>

#include "bench/soak/wall_clock.h"
#include "tests/integration/kilnd/kilnd_process.h"
#include "tests/support/postgres_server.h"

namespace kiln::soak {

struct KilndCluster::Instance {
  std::size_t index = 0;
  std::unique_ptr<testing::TempDir> dir;
  // Touched by the restart thread only while the instance is down, and by
  // the driving thread only while it is up (the `up` flag hands it over).
  std::unique_ptr<testing::KilndProcess> kilnd;
  std::thread restarter;
  // Under mu_.
  bool up = false;
  uint16_t port = 0;
  pid_t pid = -1;
  int incarnation = 0;
  int64_t ready_ms = 0;
};

namespace {

// How long one start may take: the ASan build on a loaded 2-core machine,
// migrations included, takes a few seconds; a minute is a failure.
constexpr auto kStartLimit = std::chrono::seconds(60);
constexpr int kStartTries = 3;

}  // namespace

KilndCluster::KilndCluster(const ClusterSpec& spec) : spec_(spec) {
  shared_dir_ = std::make_unique<testing::TempDir>();
  std::vector<std::string> flags = spec.flags;
  std::size_t count = 1;
  if (spec.backend == Backend::kPostgresql) {
    pg_ = std::make_unique<testing::PostgresServer>();
    pg_->create_database("soak");
    flags.insert(flags.end(), {"--database", pg_->url("soak"), "--key-file", shared_dir_->path() + "/kiln.key",
                               "--heartbeat-interval-ms", "300", "--conductor-timeout-ms",
                               std::to_string(spec.conductor_timeout.count())});
    count = 3;
  }
  for (std::size_t i = 0; i < count; ++i) {
    auto in = std::make_unique<Instance>();
    in->index = i;
    in->dir = std::make_unique<testing::TempDir>();
    in->kilnd = std::make_unique<testing::KilndProcess>(in->dir->path(), flags);
    // One at a time: the first migrates the database the others then open.
    in->kilnd->start(true, kStartLimit);
    in->up = true;
    in->port = in->kilnd->port();
    in->pid = in->kilnd->pid();
    in->incarnation = 1;
    in->ready_ms = wall_ms();
    instances_.push_back(std::move(in));
  }
}

KilndCluster::~KilndCluster() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (auto& in : instances_)
    if (in->restarter.joinable()) in->restarter.join();
  // The KilndProcess destructors kill what still runs; PostgreSQL stops after.
  instances_.clear();
}

std::vector<KilndCluster::Endpoint> KilndCluster::live() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<Endpoint> out;
  for (const auto& in : instances_)
    if (in->up) out.push_back({in->index, in->port});
  return out;
}

bool KilndCluster::all_up() const {
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& in : instances_)
    if (!in->up) return false;
  return true;
}

bool KilndCluster::disrupted() const { return !all_up(); }

bool KilndCluster::kill_and_restart(std::size_t i, std::chrono::milliseconds down) {
  Instance& in = *instances_.at(i);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!in.up) return false;
    in.up = false;
    ++kills_;
    const int64_t now = wall_ms();
    const int64_t effect = spec_.backend == Backend::kPostgresql ? now + spec_.conductor_timeout.count() : now;
    last_kill_effect_ms_ = std::max(last_kill_effect_ms_, effect);
  }
  // The previous restart thread ended when it set `up`.
  if (in.restarter.joinable()) in.restarter.join();
  in.kilnd->kill9();
  in.restarter = std::thread([this, &in, down] { restart(in, down); });
  return true;
}

void KilndCluster::restart(Instance& in, std::chrono::milliseconds down) {
  {
    std::unique_lock<std::mutex> l(mu_);
    if (changed_.wait_for(l, down, [this] { return stopping_; })) return;
  }
  std::string last_error;
  for (int attempt = 1; attempt <= kStartTries; ++attempt) {
    try {
      in.kilnd->start(true, kStartLimit);
      std::lock_guard<std::mutex> l(mu_);
      in.up = true;
      in.port = in.kilnd->port();
      in.pid = in.kilnd->pid();
      in.incarnation += 1;
      in.ready_ms = wall_ms();
      changed_.notify_all();
      return;
    } catch (const std::exception& e) {
      last_error = e.what();
      in.kilnd->kill9();
    }
    std::lock_guard<std::mutex> l(mu_);
    restart_failures_.push_back("instance " + std::to_string(in.index) + " did not restart after kill -9 (try " +
                                std::to_string(attempt) + " of " + std::to_string(kStartTries) + "): " +
                                (last_error.size() > 4000 ? last_error.substr(last_error.size() - 4000) : last_error));
    if (stopping_) return;
  }
}

bool KilndCluster::wait_all_up(std::chrono::milliseconds limit) const {
  std::unique_lock<std::mutex> l(mu_);
  return changed_.wait_for(l, limit, [this] {
    for (const auto& in : instances_)
      if (!in->up) return false;
    return true;
  });
}

std::vector<std::string> KilndCluster::take_restart_failures() {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::string> out;
  out.swap(restart_failures_);
  return out;
}

int64_t KilndCluster::recovered_at_ms() const {
  std::lock_guard<std::mutex> l(mu_);
  if (kills_ == 0) return 0;
  int64_t at = last_kill_effect_ms_;
  for (const auto& in : instances_)
    if (in->incarnation > 1) at = std::max(at, in->ready_ms);
  return at;
}

std::vector<KilndCluster::Process> KilndCluster::running() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<Process> out;
  for (const auto& in : instances_)
    if (in->up) out.push_back({in->index, in->incarnation, in->pid, in->ready_ms});
  return out;
}

int KilndCluster::kills() const {
  std::lock_guard<std::mutex> l(mu_);
  return kills_;
}

std::string KilndCluster::log_lines_with(const std::string& needle, std::size_t max_lines) const {
  std::string out;
  std::size_t n = 0;
  for (const auto& in : instances_) {
    std::istringstream log(in->kilnd->log());
    for (std::string line; std::getline(log, line);) {
      if (line.find(needle) == std::string::npos) continue;
      if (++n > max_lines) return out + "    ...\n";
      out += "    [kilnd " + std::to_string(in->index) + "] " + line + "\n";
    }
  }
  return out;
}

std::string KilndCluster::log_tail(std::size_t i, std::size_t bytes) const {
  std::string log = instances_.at(i)->kilnd->log();
  return log.size() > bytes ? log.substr(log.size() - bytes) : log;
}

}  // namespace kiln::soak
