// power_sync_bench: one or more PowerSync sweeps over a kiln-vbmc fleet,
// through the real IPMI and Redfish drivers and a real (temporary) SQLite
// store — the path kilnd's periodic power sync takes.
//
//   power_sync_bench --protocol ipmi|redfish --count N
//                    (--vbmc PATH [--drop F] [--seed S] [--address-base A] | --manifest FILE)
//                    [--sweeps K] [--max-failures M] [--concurrency C]
//                    [--io-threads T] [--json FILE] [--recorded-power off|unknown]
//                    [--ipmi-timeout-ms N] [--redfish-max-idle N] [--redfish-tls-sessions N]
//
// With --vbmc it starts `kiln-vbmc --fleet N` itself (the BMCs run in that
// child process, so their CPU is not counted as Kiln's) and reads the
// manifest the fleet writes; with --manifest it uses a fleet already running.
// It enrolls one node per BMC (bmc.address from the manifest, the password
// sealed with a SecretBox, provision_state manageable), then runs K sweeps.
//
// Per sweep it reports: wall seconds (PowerSync's own figure), this
// process's CPU seconds (getrusage, user + system, less the descriptor
// sampler's own thread, which is the bench's and not Kiln's), the fleet's CPU seconds
// (/proc/PID/stat of the child), RSS and its peak, the peak number of open
// descriptors (sockets; /proc/self/fd sampled every 200 ms) and the number
// still open when the sweep is over (idle connections the drivers keep),
// PowerSync's counters (ok, failed, faulted) and, for Redfish, the TLS
// handshakes the sweep made and how many of them were resumed. A summary JSON
// object goes to --json.

#include <utility>  // before Asio

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <ctime>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <nlohmann/json.hpp>

#include "common/blocking_pool.h"
#include "common/child_process.h"
#include "common/crypto.h"
#include "common/fd_limit.h"
#include "common/log.h"
#include "controller/conductor/power_sync.h"
#include "controller/store/store.h"
#include "drivers/ipmi/ipmi_driver.h"
#include "drivers/redfish/redfish_driver.h"
#include "tests/support/heap_in_use.h"

namespace {

using namespace kiln;
using nlohmann::json;
namespace asio = boost::asio;

struct BenchOptions {
  std::string protocol = "ipmi";
  std::size_t count = 1000;
  std::string vbmc;
  std::string manifest;
  double drop = 0;
  uint64_t seed = 1;
  std::string address_base = "127.8.0.1";
  int sweeps = 1;
  int max_failures = 3;
  std::size_t concurrency = 1024;
  int io_threads = 1;
  std::string json_out;
  // The power state the store records before the first sweep: "off" matches
  // a fresh fleet (no drift, so the sweep measures BMC I/O); "unknown" makes
  // every node drift, adding one store write per node to the first sweep.
  std::string recorded_power = "off";
  int ipmi_timeout_ms = 0;  // 0 = the driver's default first per-try timeout
  // RedfishDriverOptions::max_idle_connections and max_tls_sessions; -1 = the
  // driver's defaults (for max_idle_connections, a quarter of the descriptor
  // limit, which this process raises to the hard limit first).
  long redfish_max_idle = -1;
  long redfish_tls_sessions = -1;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "power_sync_bench: " << why << "\n"
            << "usage: power_sync_bench --protocol ipmi|redfish --count N\n"
            << "         (--vbmc PATH [--drop F] [--seed S] [--address-base A] | --manifest FILE)\n"
            << "         [--sweeps K] [--max-failures M] [--concurrency C] [--io-threads T] [--json FILE]\n"
            << "         [--recorded-power off|unknown] [--ipmi-timeout-ms N]\n"
            << "         [--redfish-max-idle N] [--redfish-tls-sessions N]\n";
  std::exit(2);
}

BenchOptions parse(int argc, char** argv) {
  BenchOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (i + 1 >= argc) usage("missing value for " + f);
    const std::string v = argv[++i];
    try {
      if (f == "--protocol") o.protocol = v;
      else if (f == "--count") o.count = std::stoul(v);
      else if (f == "--vbmc") o.vbmc = v;
      else if (f == "--manifest") o.manifest = v;
      else if (f == "--drop") o.drop = std::stod(v);
      else if (f == "--seed") o.seed = std::stoull(v);
      else if (f == "--address-base") o.address_base = v;
      else if (f == "--sweeps") o.sweeps = std::stoi(v);
      else if (f == "--max-failures") o.max_failures = std::stoi(v);
      else if (f == "--concurrency") o.concurrency = std::stoul(v);
      else if (f == "--io-threads") o.io_threads = std::stoi(v);
      else if (f == "--json") o.json_out = v;
      else if (f == "--recorded-power") o.recorded_power = v;
      else if (f == "--ipmi-timeout-ms") o.ipmi_timeout_ms = std::stoi(v);
      else if (f == "--redfish-max-idle") o.redfish_max_idle = std::stol(v);
      else if (f == "--redfish-tls-sessions") o.redfish_tls_sessions = std::stol(v);
      else usage("unknown flag " + f);
    } catch (const std::exception&) {
      usage("bad value for " + f + ": " + v);
    }
  }
  if (o.protocol != "ipmi" && o.protocol != "redfish") usage("--protocol is ipmi or redfish");
  if (o.vbmc.empty() == o.manifest.empty()) usage("give exactly one of --vbmc and --manifest");
  if (o.recorded_power != "off" && o.recorded_power != "unknown") usage("--recorded-power is off or unknown");
  if (o.count == 0 || o.sweeps < 1 || o.io_threads < 1) usage("count, sweeps and io-threads must be positive");
  return o;
}


double cpu_seconds_self() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// utime + stime of another process, from /proc/PID/stat.
double cpu_seconds_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = all.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> fields;
  std::string cur;
  for (char c : all.substr(close + 2)) {
    if (c == ' ') {
      fields.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (fields.size() < 13) return 0;
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  return (std::stod(fields[11]) + std::stod(fields[12])) / ticks;  // fields 14 and 15 of stat
}

// VmRSS or VmHWM of this process, MiB.
double status_mib(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1)) / 1024.0;
  }
  return 0;
}

std::size_t open_fds() {
  std::size_t n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return 0;
  while (::readdir(d) != nullptr) ++n;
  ::closedir(d);
  return n >= 2 ? n - 2 : 0;  // . and ..
}

// kiln-vbmc --fleet as a child; stops it on destruction.
class FleetProcess {
 public:
  FleetProcess(const BenchOptions& o, const std::string& manifest) {
    std::vector<std::string> args = {o.vbmc, "--fleet", std::to_string(o.count),
                                     "--fleet-protocols", o.protocol, "--fleet-manifest", manifest,
                                     "--fleet-address-base", o.address_base,
                                     "--seed", std::to_string(o.seed), "--log-level", "error"};
    if (o.drop > 0) {
      args.push_back("--fault-drop-fraction");
      args.push_back(std::to_string(o.drop));
    }
    char tmpl[] = "/tmp/kiln-fleet-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    if (fd < 0) throw std::runtime_error("mkstemp");
    ::close(fd);
    log_ = tmpl;
    ChildSpec spec;
    spec.argv = args;
    spec.output_file = log_;
    spec.parent_death_signal = SIGKILL;
    Result<ChildProcess> c = ChildProcess::spawn(spec);
    if (!c) throw std::runtime_error("cannot start the fleet: " + c.error().message);
    child_ = std::move(*c);
    auto lines = wait_for_lines(child_, log_, {"fleet ready: "}, std::chrono::seconds(120));
    if (!lines) throw std::runtime_error("fleet did not start: " + lines.error().message);
    ready_ = "fleet ready: " + lines->at("fleet ready: ");
  }
  ~FleetProcess() {
    child_.stop(std::chrono::seconds(5));
    ::unlink(log_.c_str());
  }
  pid_t pid() const { return child_.pid(); }
  const std::string& ready_line() const { return ready_; }

 private:
  ChildProcess child_;
  std::string log_;
  std::string ready_;
};

}  // namespace

int main(int argc, char** argv) {
  const BenchOptions o = parse(argc, argv);
  (void)raise_fd_limit();
  std::signal(SIGPIPE, SIG_IGN);

  char tmpl[] = "/tmp/kiln-power-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string dir = tmpl;

  std::unique_ptr<FleetProcess> fleet;
  std::string manifest_path = o.manifest;
  const auto t_fleet = std::chrono::steady_clock::now();
  if (!o.vbmc.empty()) {
    manifest_path = dir + "/manifest.json";
    fleet = std::make_unique<FleetProcess>(o, manifest_path);
    std::cout << "# " << fleet->ready_line() << " (started in "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t_fleet).count()
              << " s)\n";
  }
  std::ifstream min(manifest_path);
  const json manifest = json::parse(min, nullptr, false);
  if (!manifest.is_array()) {
    std::cerr << "power_sync_bench: cannot read the manifest " << manifest_path << "\n";
    return 1;
  }

  asio::io_context io;
  auto work = asio::make_work_guard(io);
  BlockingPool db(2);
  SecretBox box(SecretBox::Key{4, 2});
  auto st = open_sqlite_store({.path = dir + "/kiln.db"});
  if (!st || !(*st)->migrate()) {
    std::cerr << "power_sync_bench: cannot open the store\n";
    return 1;
  }
  std::unique_ptr<NodeStore> store = std::move(*st);

  // Enroll one node per BMC of the protocol.
  const auto t_seed = std::chrono::steady_clock::now();
  std::size_t enrolled = 0;
  std::size_t faulty_bmcs = 0;
  for (const json& e : manifest) {
    if (enrolled >= o.count) break;
    if (e.value("protocol", "") != o.protocol) continue;
    Node n;
    n.name = e["name"].get<std::string>();
    n.bmc.driver = o.protocol;
    const std::string hostport =
        e["address"].get<std::string>() + ":" + std::to_string(e["port"].get<int>());
    n.bmc.address = o.protocol == "redfish" ? "https://" + hostport : hostport;
    n.bmc.username = e["username"].get<std::string>();
    n.bmc.password_sealed = box.seal(e["password"].get<std::string>());
    n.bmc.verify_tls = false;
    if (o.protocol == "redfish") n.bmc.system_id = e.value("system_id", "");
    n.provision_state = ProvisionState::kManageable;
    n.power_state = o.recorded_power == "off" ? PowerState::kOff : PowerState::kUnknown;
    for (const auto& f : e["faults"]) {
      const std::string s = f.get<std::string>();
      if (s.rfind("drop=", 0) != 0) {
        ++faulty_bmcs;
        break;
      }
    }
    EventDraft ev;
    ev.type = "node.created";
    auto r = store->create_node(n, ev);
    if (!r) {
      std::cerr << "power_sync_bench: create_node: " << r.error().message << "\n";
      return 1;
    }
    ++enrolled;
  }
  const double seed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_seed).count();
  std::cout << "# enrolled " << enrolled << " " << o.protocol << " nodes in " << seed_s << " s\n";

  DriverRegistry drivers;
  IpmiDriverOptions ipmi_opts;
  if (o.ipmi_timeout_ms > 0) ipmi_opts.request_timeout = std::chrono::milliseconds(o.ipmi_timeout_ms);
  drivers.add(make_ipmi_driver(io.get_executor(), ipmi_opts, Logger(LogLevel::kError)));
  RedfishDriverOptions redfish_opts;
  if (o.redfish_max_idle >= 0) redfish_opts.max_idle_connections = static_cast<std::size_t>(o.redfish_max_idle);
  if (o.redfish_tls_sessions >= 0) redfish_opts.max_tls_sessions = static_cast<std::size_t>(o.redfish_tls_sessions);
  drivers.add(make_redfish_driver(io.get_executor(), redfish_opts, Logger(LogLevel::kError)));
  if (o.protocol == "redfish") {
    std::cout << "# redfish: at most " << redfish_opts.max_idle_connections << " idle connections (descriptor limit "
              << fd_limit() << "), " << redfish_opts.max_tls_sessions << " TLS sessions\n";
  }
  PowerSyncOptions po;
  po.interval = std::chrono::milliseconds(0);
  po.concurrency = o.concurrency;
  po.max_failures = o.max_failures;
  auto sync = std::make_unique<PowerSync>(io, *store, db, drivers, box, po, Logger(LogLevel::kWarn));

  std::vector<std::thread> threads;
  for (int i = 0; i < o.io_threads; ++i) threads.emplace_back([&io] { io.run(); });

  json result = {{"protocol", o.protocol},    {"count", enrolled},
                 {"drop", o.drop},            {"concurrency", o.concurrency},
                 {"max_failures", o.max_failures}, {"io_threads", o.io_threads},
                 {"faulty_bmcs", faulty_bmcs}, {"seed_seconds", seed_s},
                 {"recorded_power", o.recorded_power}, {"ipmi_timeout_ms", o.ipmi_timeout_ms},
                 {"redfish_max_idle", redfish_opts.max_idle_connections},
                 {"redfish_tls_sessions", redfish_opts.max_tls_sessions},
                 {"sweeps", json::array()}};
  std::size_t total_faulted = 0;
  for (int k = 0; k < o.sweeps; ++k) {
    std::atomic<bool> sampling{true};
    std::atomic<std::size_t> peak_fds{open_fds()};
    std::atomic<double> sampler_cpu{0};
    std::thread sampler([&] {
      while (sampling) {
        const std::size_t n = open_fds();
        if (n > peak_fds) peak_fds = n;
        // Listing /proc/self/fd costs about a microsecond per descriptor:
        // at 10,000 sockets every 20 ms it took a fifth of a core from the
        // sweep it measures. Sockets live for a whole call, so 200 ms still
        // sees the plateau. What it still costs (5-6% of a warm sweep's CPU
        // at 10,000) is taken out of the sweep's CPU below.
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      timespec t{};
      ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
      sampler_cpu = static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
    });
    const Driver* redfish = drivers.find("redfish");
    const http::ClientStats tls0 = redfish ? redfish_driver_stats(*redfish).connections : http::ClientStats{};
    const double cpu0 = cpu_seconds_self();
    const double fleet_cpu0 = fleet ? cpu_seconds_of(fleet->pid()) : 0;
    const SweepStats s = asio::co_spawn(io, sync->sweep_once(), asio::use_future).get();
    const double fleet_cpu = fleet ? cpu_seconds_of(fleet->pid()) - fleet_cpu0 : 0;
    sampling = false;
    sampler.join();
    const double cpu = cpu_seconds_self() - cpu0 - sampler_cpu.load();
    const std::size_t fds_after = open_fds();
    const http::ClientStats tls = redfish ? redfish_driver_stats(*redfish).connections : http::ClientStats{};
    const uint64_t handshakes = tls.tls_handshakes - tls0.tls_handshakes;
    const uint64_t resumed = tls.tls_resumed - tls0.tls_resumed;
    total_faulted += s.faulted;
    // What malloc holds, where RSS also counts what it kept after freeing.
    const double heap_mib = static_cast<double>(kiln::testing::heap_in_use_bytes()) / (1024.0 * 1024.0);
    const json one = {{"sweep", k + 1},
                      {"seconds", s.seconds},
                      {"nodes", s.nodes},
                      {"ok", s.ok},
                      {"failed", s.failed},
                      {"faulted", s.faulted},
                      {"drifted", s.drifted},
                      {"cpu_seconds", cpu},
                      {"fleet_cpu_seconds", fleet_cpu},
                      {"rss_mib", status_mib("VmRSS")},
                      {"peak_rss_mib", status_mib("VmHWM")},
                      {"heap_in_use_mib", heap_mib},
                      {"peak_fds", peak_fds.load()},
                      {"fds_after", fds_after},
                      {"tls_handshakes", handshakes},
                      {"tls_resumed", resumed},
                      {"ms_per_bmc", s.nodes ? 1000.0 * s.seconds / static_cast<double>(s.nodes) : 0.0}};
    result["sweeps"].push_back(one);
    std::printf("%s sweep %d: %zu nodes in %.3f s (%.3f ms/BMC), ok %zu, failed %zu, faulted %zu, "
                "cpu %.2f s, fleet cpu %.2f s, rss %.0f MiB (peak %.0f, heap in use %.0f), peak fds %zu, fds after %zu, "
                "tls handshakes %llu (resumed %llu)\n",
                o.protocol.c_str(), k + 1, s.nodes, s.seconds, one["ms_per_bmc"].get<double>(), s.ok,
                s.failed, s.faulted, cpu, fleet_cpu, status_mib("VmRSS"), status_mib("VmHWM"), heap_mib,
                peak_fds.load(), fds_after, static_cast<unsigned long long>(handshakes),
                static_cast<unsigned long long>(resumed));
    std::fflush(stdout);
  }
  result["total_faulted"] = total_faulted;

  sync.reset();
  work.reset();
  io.stop();
  for (auto& t : threads) t.join();
  db.stop();
  if (!o.json_out.empty()) {
    std::ofstream out(o.json_out, std::ios::app);
    out << result.dump() << "\n";
  }
  std::filesystem::remove_all(dir);
  // Sessions are closed (best effort) as the drivers go.
  return 0;
}
