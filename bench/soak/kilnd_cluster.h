#pragma once
// KilndCluster: the kilnd processes a soak runs against, and their chaos.
//
// SQLite: one kilnd on a data directory of its own. PostgreSQL: a private
// server started here (tests/support/postgres_server.h), one database, and
// three kilnd sharing it and one key file, each with its own data directory,
// a short heartbeat and conductor timeout so that a killed instance's nodes
// move to the survivors within seconds.
//
// kill_and_restart() sends SIGKILL to one instance at once (on the calling
// thread, so the caller knows the moment) and restarts it on a thread of its
// own after a pause, so the soak keeps driving the other instances (or
// knocking on a dead port) while it is down. Clients ask live() for the
// instances that are ready now.
//
// Every kilnd process is an incarnation: its pid, when it became ready and
// when it was killed, for the resource checks (RSS and descriptors are held
// flat per process) and for the slack the deadline check allows after a
// disruption.
//
// Threading: every method may be called from the soak's driving thread while
// restarts run; the state they share is under one mutex. The destructor kills
// every instance and joins the restart threads.

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/soak/cluster_view.h"
#include "bench/soak/soak_options.h"

namespace kiln::testing {
class KilndProcess;
class TempDir;
class PostgresServer;
}  // namespace kiln::testing

namespace kiln::soak {

struct ClusterSpec {
  Backend backend = Backend::kSqlite;
  // Flags every instance gets (the bootstrap token, timeouts, the image
  // directory); --database, --key-file and the membership timing are added
  // here for PostgreSQL.
  std::vector<std::string> flags;
  // PostgreSQL only: how long a silent conductor lives in the others' view.
  std::chrono::milliseconds conductor_timeout{2000};
};

class KilndCluster : public ClusterView {
 public:
  struct Endpoint {
    std::size_t instance = 0;
    uint16_t port = 0;
  };
  // One kilnd process, as the resource checks see it.
  struct Process {
    std::size_t instance = 0;
    int incarnation = 0;  // 1 for the first process of an instance
    pid_t pid = -1;
    int64_t ready_ms = 0;  // ms since the epoch
  };

  // Starts PostgreSQL (for that backend) and every instance, and waits until
  // each answers /readyz. Throws std::runtime_error with the log when one
  // does not.
  explicit KilndCluster(const ClusterSpec& spec);
  ~KilndCluster() override;
  KilndCluster(const KilndCluster&) = delete;
  KilndCluster& operator=(const KilndCluster&) = delete;

  std::size_t size() const { return instances_.size(); }
  // The instances that are up (ready), in instance order.
  std::vector<Endpoint> live() const;
  bool all_up() const;
  // Kills instance `i` (SIGKILL, reaped) if it is up, and restarts it on a
  // thread after `down`; a start that fails is tried twice more, then the
  // instance stays down and the failure is kept for take_restart_failures().
  // False when `i` was not up.
  bool kill_and_restart(std::size_t i, std::chrono::milliseconds down);
  // Blocks until every instance is up or `limit` passes.
  bool wait_all_up(std::chrono::milliseconds limit) const;
  // Messages of restarts that failed since the last call (with the log tail).
  std::vector<std::string> take_restart_failures();

  // Whether an instance is down or restarting now.
  bool disrupted() const override;
  // When the cluster was last whole again (ms since the epoch): the latest of
  // each instance's last ready time and, on PostgreSQL, each kill plus the
  // conductor timeout (the survivors take a killed instance's nodes only
  // then). 0 before any kill.
  int64_t recovered_at_ms() const override;
  // The processes running now.
  std::vector<Process> running() const;
  int kills() const;

  // Every log line of every instance that holds `needle` (an operation or a
  // node id), at most `max_lines`, each prefixed with its instance: what a
  // finding about one operation needs.
  std::string log_lines_with(const std::string& needle, std::size_t max_lines = 40) const override;
  // The last `bytes` of instance i's log.
  std::string log_tail(std::size_t i, std::size_t bytes = 3000) const;

 private:
  struct Instance;
  void restart(Instance& in, std::chrono::milliseconds down);

  ClusterSpec spec_;
  std::unique_ptr<testing::TempDir> shared_dir_;
  std::unique_ptr<testing::PostgresServer> pg_;
  std::vector<std::unique_ptr<Instance>> instances_;
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  bool stopping_ = false;
  int kills_ = 0;
  int64_t last_kill_effect_ms_ = 0;
  std::vector<std::string> restart_failures_;
};

}  // namespace kiln::soak
