#include "postgres_server.h"

#include <fcntl.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>

namespace kiln::testing {

namespace fs = std::filesystem;

namespace {

bool running_as_root() { return ::geteuid() == 0; }

std::string tail(const std::string& s, size_t n = 3000) { return s.size() > n ? s.substr(s.size() - n) : s; }

// initdb's options after -D: trust authentication, no locale (text sorts by bytes),
// no fsync of what it writes.
constexpr std::array<std::string_view, 7> kInitdbArgs = {"-U", "postgres",  "--auth=trust", "--no-locale",
                                                         "-E", "UTF8",      "--no-sync"};

// The user the server's files belong to: postgres when the test runs as root.
uid_t server_uid() {
  if (!running_as_root()) return ::geteuid();
  const passwd* pw = ::getpwnam("postgres");
  return pw != nullptr ? pw->pw_uid : 0;
}

void hand_to_postgres(const std::string& dir) {
  if (!running_as_root()) return;
  const passwd* pw = ::getpwnam("postgres");
  if (pw == nullptr || ::chown(dir.c_str(), pw->pw_uid, pw->pw_gid) != 0)
    throw std::runtime_error("cannot hand " + dir + " to the postgres user");
}

// A template another user could have planted in the shared temp directory (a symlink,
// someone else's files, a folder others may write) would run its configuration as the
// server: only a plain folder of the server's user that no one else may write is used.
bool ours(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == server_uid() &&
         (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

}  // namespace

std::string PostgresServer::bin_dir() {
  const char* env = std::getenv("KILN_PG_BIN");
  return env != nullptr && *env != '\0' ? env : "/usr/lib/postgresql/15/bin";
}

std::optional<std::string> PostgresServer::missing_binaries() {
  for (const char* tool : {"initdb", "pg_ctl", "postgres"}) {
    std::string p = bin_dir() + "/" + tool;
    if (::access(p.c_str(), X_OK) != 0) return p + " (install postgresql-15, or set KILN_PG_BIN)";
  }
  if (running_as_root()) {
    if (::getpwnam("postgres") == nullptr) return std::string("the postgres user (PostgreSQL refuses to run as root)");
    if (::access("/usr/sbin/runuser", X_OK) != 0 && ::access("/sbin/runuser", X_OK) != 0)
      return std::string("runuser (to run PostgreSQL as the postgres user)");
  }
  return std::nullopt;
}

void PostgresServer::run_tool(const std::string& tool, const std::vector<std::string>& args) const {
  std::vector<std::string> command = {bin_dir() + "/" + tool};
  command.insert(command.end(), args.begin(), args.end());
  run_as_postgres(tool, command);
}

void PostgresServer::run_as_postgres(const std::string& what, const std::vector<std::string>& command) const {
  std::vector<std::string> argv;
  if (running_as_root()) argv = {"runuser", "-u", "postgres", "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  const std::string log_path = dir_ + "/tools.log";
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    // The postgres user may not enter the test's working directory.
    if (::chdir(dir_.c_str()) != 0) ::_exit(126);
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0666);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    ::execvp(cargv[0], cargv.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream in(log_path);
    std::stringstream out;
    out << in.rdbuf();
    throw std::runtime_error(what + " failed (status " + std::to_string(status) + "):\n" + tail(out.str()) +
                             "\nserver log:\n" + tail(log()));
  }
}

PostgresServer::PostgresServer() {
  std::string t = (fs::temp_directory_path() / "kiln-pg-XXXXXX").string();
  if (::mkdtemp(t.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = t;
  data_ = dir_ + "/data";
  // The postgres user writes the cluster, the log and the socket here.
  hand_to_postgres(dir_);
  try {
    // A copy of the machine's template cluster: the same files initdb would write here.
    run_as_postgres("cp", {"cp", "-a", cluster_template() + "/data", data_});
    start();
  } catch (...) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    throw;
  }
}

std::string PostgresServer::cluster_template() const {
  // Keyed by the binaries and the user: another PostgreSQL gets its own template.
  std::string key = bin_dir() + "|" + std::to_string(::geteuid());
  for (std::string_view a : kInitdbArgs) key.append("|").append(a);
  const fs::path dir = fs::temp_directory_path() /
                       ("kiln-pg-template-" + std::to_string(std::hash<std::string>{}(key)));
  // One maker at a time; the others wait here and then find it made.
  const std::string lock_path = dir.string() + ".lock";
  int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lock < 0) throw std::runtime_error("cannot open " + lock_path);
  while (::flock(lock, LOCK_EX) != 0 && errno == EINTR) {
  }
  try {
    if (!ours(dir.string()) || !ours((dir / "data").string()) || !fs::exists(dir / "data" / "PG_VERSION")) {
      // Made beside it and renamed into place, so a maker killed half-way leaves no
      // template that looks whole.
      const fs::path making = dir.string() + ".making";
      fs::remove_all(making);
      fs::remove_all(dir);
      fs::create_directory(making);
      hand_to_postgres(making.string());
      std::vector<std::string> args = {"-D", (making / "data").string()};
      args.insert(args.end(), kInitdbArgs.begin(), kInitdbArgs.end());
      run_tool("initdb", args);
      fs::rename(making, dir);
    }
  } catch (...) {
    ::close(lock);
    throw;
  }
  ::close(lock);
  return dir.string();
}

void PostgresServer::start() {
  if (started_) return;
  // -k: the socket in our directory; listen_addresses='': no TCP at all.
  const std::string opts = "-k " + dir_ + " -p " + std::to_string(port_) +
                           " -c listen_addresses= -c fsync=off -c full_page_writes=off"
                           " -c synchronous_commit=off";
  run_tool("pg_ctl", {"-D", data_, "-l", dir_ + "/server.log", "-w", "-t", "60", "-o", opts, "start"});
  started_ = true;
}

void PostgresServer::stop(const std::string& mode) {
  if (!started_) return;
  run_tool("pg_ctl", {"-D", data_, "-m", mode, "-w", "-t", "60", "stop"});
  started_ = false;
}

PostgresServer::~PostgresServer() {
  if (started_) {
    try {
      run_tool("pg_ctl", {"-D", data_, "-m", "immediate", "-w", "stop"});
    } catch (...) {
      // The directory goes anyway; a server left behind dies with its socket dir.
    }
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string PostgresServer::conninfo(const std::string& db) const {
  return "host=" + dir_ + " port=" + std::to_string(port_) + " user=postgres dbname=" + db;
}

std::string PostgresServer::url(const std::string& db) const {
  return "postgresql://postgres@/" + db + "?host=" + dir_ + "&port=" + std::to_string(port_);
}

std::string PostgresServer::create_database(const std::string& name) const {
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
      throw std::runtime_error("database name must be [a-z0-9_]: " + name);
  PGconn* conn = PQconnectdb(conninfo().c_str());
  std::string err;
  if (PQstatus(conn) != CONNECTION_OK) {
    err = PQerrorMessage(conn);
  } else {
    PGresult* r = PQexec(conn, ("CREATE DATABASE " + name).c_str());
    if (PQresultStatus(r) != PGRES_COMMAND_OK) err = PQresultErrorMessage(r);
    PQclear(r);
  }
  PQfinish(conn);
  if (!err.empty()) throw std::runtime_error("create database " + name + ": " + err);
  return conninfo(name);
}

std::string PostgresServer::log() const {
  std::ifstream in(dir_ + "/server.log");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace kiln::testing
