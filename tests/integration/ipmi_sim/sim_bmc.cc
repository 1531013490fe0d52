#include "tests/integration/ipmi_sim/sim_bmc.h"

#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

extern char** environ;

namespace kiln::test {
namespace {

namespace fs = std::filesystem;
namespace asio = boost::asio;

// The chassis-control program ipmi_sim runs as `chassis.sh 0x20 get|set ...`
// (see OpenIPMI lanserv/ipmi_sim_chassiscontrol). Power and boot device live
// in files next to it, so `chassis power status` reflects what was set.
const char* kChassisScript = R"SH(#!/bin/sh
dir=$(dirname "$0")
shift            # the MC address
op=$1; shift
echo "$op $*" >> "$dir/calls.log"
case $op in
get)
  while [ -n "$1" ]; do
    case $1 in
      power) echo "power:$(cat "$dir/power" 2>/dev/null || echo 0)" ;;
      boot) echo "boot:$(cat "$dir/boot" 2>/dev/null || echo default)" ;;
      *) echo "Invalid parameter: $1"; exit 1 ;;
    esac
    shift
  done ;;
set)
  while [ -n "$1" ]; do
    parm=$1; val=$2; shift 2
    case $parm in
      power) echo "$val" > "$dir/power" ;;
      shutdown) echo 0 > "$dir/power" ;;   # the "OS" shuts down at once
      reset) ;;
      boot) echo "$val" > "$dir/boot" ;;
      identify) shift ;;
      *) echo "Invalid parameter: $parm"; exit 1 ;;
    esac
  done ;;
*) echo "Unknown operation: $op"; exit 1 ;;
esac
)SH";

uint16_t free_udp_port() {
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// True once something (ipmi_sim) has bound 127.0.0.1:port.
bool port_in_use(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  const bool in_use = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno == EADDRINUSE;
  ::close(fd);
  return in_use;
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p);
  f << text;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

std::optional<std::string> find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return std::nullopt;
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    const fs::path p = fs::path(dir) / name;
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return std::nullopt;
}

SimBmc::SimBmc(std::string user, std::string password)
    : user_(std::move(user)), password_(std::move(password)) {
  auto sim = find_on_path("ipmi_sim");
  if (!sim) {
    error_ = "ipmi_sim not on PATH";
    return;
  }
  char tmpl[] = "/tmp/kiln-ipmi-sim-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    error_ = std::string("mkdtemp: ") + std::strerror(errno);
    return;
  }
  dir_ = tmpl;
  port_ = free_udp_port();
  const fs::path d(dir_);
  fs::create_directory(d / "state");
  write_file(d / "chassis.sh", kChassisScript);
  fs::permissions(d / "chassis.sh", fs::perms::owner_all);
  write_file(d / "power", "0\n");

  std::ostringstream lan;
  lan << "name \"kiln_test\"\n"
      << "set_working_mc 0x20\n"
      << "  startlan 1\n"
      << "    addr 127.0.0.1 " << port_ << "\n"
      << "    priv_limit admin\n"
      << "    allowed_auths_callback none md5 straight\n"
      << "    allowed_auths_user none md5 straight\n"
      << "    allowed_auths_operator none md5 straight\n"
      << "    allowed_auths_admin none md5 straight\n"
      << "    guid a123456789abcdefa123456789abcdef\n"
      << "  endlan\n"
      << "  chassis_control \"" << (d / "chassis.sh").string() << " 0x20\"\n"
      << "  user 2 true \"" << user_ << "\" \"" << password_ << "\" admin 10 none md5 straight\n";
  write_file(d / "lan.conf", lan.str());
  // The BMC itself: MC 0x20 with chassis support (Get Device ID answers with these).
  write_file(d / "bmc.emu",
             "mc_setbmc 0x20\n"
             "mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\n"
             "mc_enable 0x20\n");

  const std::string conf = (d / "lan.conf").string();
  const std::string emu = (d / "bmc.emu").string();
  const std::string state = (d / "state").string();
  const std::string log = (d / "ipmi_sim.log").string();
  std::vector<std::string> args = {*sim, "-c", conf, "-f", emu, "-s", state, "-n"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // own group: kill scripts too
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, sim->c_str(), &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    error_ = std::string("posix_spawn ipmi_sim: ") + std::strerror(rc);
    return;
  }
  pid_ = pid;

  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      error_ = "ipmi_sim exited at start-up: " + read_file(d / "ipmi_sim.log");
      return;
    }
    if (port_in_use(port_)) return;
    ::usleep(20000);
  }
  error_ = "ipmi_sim did not bind 127.0.0.1:" + std::to_string(port_) + " within 10 s";
}

SimBmc::~SimBmc() {
  if (pid_ > 0) {
    ::kill(-pid_, SIGTERM);
    int status = 0;
    bool reaped = false;
    for (int i = 0; i < 100 && !reaped; ++i) {
      reaped = ::waitpid(pid_, &status, WNOHANG) == pid_;
      if (!reaped) ::usleep(20000);
    }
    if (!reaped) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
  }
  if (!dir_.empty() && std::getenv("KILN_KEEP_SIM_DIR") == nullptr) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

std::optional<std::string> SimBmc::ipmitool(const std::string& args, int suite) const {
  if (!find_on_path("ipmitool")) return std::nullopt;
  const std::string cmd = "ipmitool -I lanplus -H 127.0.0.1 -p " + std::to_string(port_) + " -U " +
                          user_ + " -P " + password_ + " -C " + std::to_string(suite) + " " + args +
                          " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return std::string("popen failed");
  std::string out;
  std::array<char, 512> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  ::pclose(p);
  return out;
}

std::string SimBmc::observed_power(int suite) const {
  auto out = ipmitool("chassis power status", suite);
  if (!out) return "no ipmitool";
  if (out->find("Chassis Power is on") != std::string::npos) return "on";
  if (out->find("Chassis Power is off") != std::string::npos) return "off";
  return *out;
}

std::string SimBmc::power_file() const {
  std::string s = read_file(fs::path(dir_) / "power");
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// ---- LossyProxy -------------------------------------------------------------------------------

LossyProxy::LossyProxy(uint16_t target_port, double drop, uint32_t seed)
    : front_(ioc_, asio::ip::udp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
      back_(ioc_, asio::ip::udp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
      rng_(seed),
      coin_(drop) {
  back_.connect(asio::ip::udp::endpoint(asio::ip::make_address("127.0.0.1"), target_port));
  port_ = front_.local_endpoint().port();
  run_front();
  run_back();
  thread_ = std::thread([this] { ioc_.run(); });
}

LossyProxy::~LossyProxy() {
  asio::post(ioc_, [this] {
    boost::system::error_code ec;
    front_.close(ec);
    back_.close(ec);
  });
  thread_.join();
}

bool LossyProxy::lose() {
  if (coin_(rng_)) {
    ++dropped_;
    return true;
  }
  ++forwarded_;
  return false;
}

void LossyProxy::run_front() {
  auto buf = std::make_shared<std::array<uint8_t, 2048>>();
  auto from = std::make_shared<asio::ip::udp::endpoint>();
  front_.async_receive_from(asio::buffer(*buf), *from,
                            [this, buf, from](boost::system::error_code ec, size_t n) {
                              if (ec) return;  // closed
                              client_ = *from;
                              have_client_ = true;
                              if (!lose()) back_.send(asio::buffer(buf->data(), n), 0, ec);
                              run_front();
                            });
}

void LossyProxy::run_back() {
  auto buf = std::make_shared<std::array<uint8_t, 2048>>();
  back_.async_receive(asio::buffer(*buf), [this, buf](boost::system::error_code ec, size_t n) {
    if (ec == asio::error::operation_aborted || !back_.is_open()) return;
    if (!ec && have_client_ && !lose()) front_.send_to(asio::buffer(buf->data(), n), client_, 0, ec);
    run_back();
  });
}

}  // namespace kiln::test
