#pragma once
// PostgresServer: a private PostgreSQL server a test starts and owns, from
// Debian's postgresql-15 binaries (initdb, pg_ctl). Test code only.
//
// Everything lives in one temporary directory: the cluster (trust
// authentication, no locale so text sorts by bytes, fsync off: the data is
// thrown away), its log, and the unix socket. The cluster is a copy of a
// template that initdb writes once per machine into the temp directory
// (kiln-pg-template-<hash>, made under a lock by the first server that needs
// it): `make test` starts a few hundred servers, and initdb takes over a
// second of CPU where the copy takes a tenth. The server listens on that
// socket only (no TCP), so servers of tests running side by side cannot
// collide on a port. PostgreSQL refuses to run as root: when the test runs as
// root, the directory is handed to the `postgres` user and the tools run as
// that user (runuser). The destructor stops the server (pg_ctl stop -m
// immediate) and removes the directory.
//
// Tests call missing_binaries() first and end as skipped (KILN_SKIP) when it
// names something: a machine without PostgreSQL cannot run them, which is not
// a pass. start() throws std::runtime_error with the tool's output when the
// server does not come up (a real failure).

#include <optional>
#include <string>
#include <vector>

namespace kiln::testing {

class PostgresServer {
 public:
  // Where the server binaries are: $KILN_PG_BIN, else Debian's
  // /usr/lib/postgresql/15/bin.
  static std::string bin_dir();
  // What is missing to start a server (a binary, or the postgres user when
  // running as root), or nullopt when nothing is.
  static std::optional<std::string> missing_binaries();

  // A fresh cluster + pg_ctl start; waits until the server accepts connections.
  PostgresServer();
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // Stops the server (pg_ctl stop -m `mode`: "smart", "fast" or "immediate")
  // and waits until it is down; start() starts it again on the same socket
  // with the same data: a database outage as a client sees one. Both throw
  // like the constructor when the tool fails; each does nothing when the
  // server already is in that state.
  void stop(const std::string& mode);
  void start();

  // The directory of the server's Unix socket (its data lives beside it).
  const std::string& socket_dir() const { return dir_; }
  // A libpq connection string for database `db` as the superuser `postgres`.
  std::string conninfo(const std::string& db = "postgres") const;
  // The same as a URL, the form kilnd's --database takes:
  // postgresql://postgres@/DB?host=SOCKET_DIR&port=N.
  std::string url(const std::string& db = "postgres") const;
  // Creates an empty database `name` ([a-z0-9_]) and returns its conninfo.
  std::string create_database(const std::string& name) const;
  // The server's log, for a failing test's message.
  std::string log() const;

 private:
  // Runs bin_dir()/tool with `args` (as postgres when root), output appended
  // to the server log; throws with the log's tail when it fails.
  void run_tool(const std::string& tool, const std::vector<std::string>& args) const;
  // Runs `command` (as postgres when root) the same way; `what` names it in errors.
  void run_as_postgres(const std::string& what, const std::vector<std::string>& command) const;
  // The template cluster's directory (its cluster in data/), made first when missing.
  std::string cluster_template() const;

  std::string dir_;
  std::string data_;
  int port_ = 5432;  // names the socket file only: no TCP listener
  bool started_ = false;
};

}  // namespace kiln::testing
