// kiln-agent: the on-node agent.
//
//   run                 the lookup/heartbeat loop (docs/agent-protocol.md): reads
//                       kiln.* arguments from /proc/cmdline in the deploy ramdisk,
//                       or takes --api URL --phase os in an installed OS
//   inspect             prints the inventory (schemas/inventory.schema.json)
//   wipe                wipes one device's signatures (operator aid)
//   write-image         streams an image onto a device (operator aid)
//   parse FORMAT FILE   prints what the agent extracts from a validation tool's
//                       captured output, so an operator can check a capture by hand
//   validate ...        runs a validation plan against a profile and prints the
//                       report (exit 0 pass, 1 fail, 2 usage or bad input)
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/deploy/agent_seed.h"
#include "agent/deploy/wipe.h"
#include "agent/deploy/write_image.h"
#include "agent/inventory/inventory.h"
#include "agent/runtime/agent_loop.h"
#include "agent/runtime/commands.h"
#include "agent/validate/checks/plan.h"
#include "agent/validate/checks/sysfs.h"
#include "agent/validate/parsers/parse.h"

#ifndef KILN_AGENT_VERSION
#define KILN_AGENT_VERSION "dev"
#endif

namespace {

// Log lines go to stderr and, in the ramdisk, to /dev/console too (unless
// stderr already is the console), so an operator watching the serial console
// sees what the agent does.
class ConsoleSink : public kiln::LogSink {
 public:
  explicit ConsoleSink(bool console) {
    if (!console) return;
    const int fd = ::open("/dev/console", O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return;
    struct stat a {}, b {};
    if (::fstat(fd, &a) == 0 && ::fstat(2, &b) == 0 && a.st_rdev == b.st_rdev && S_ISCHR(b.st_mode)) {
      ::close(fd);
      return;
    }
    console_fd_ = fd;
  }
  ~ConsoleSink() override {
    if (console_fd_ >= 0) ::close(console_fd_);
  }
  void write(std::string_view line) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
    if (console_fd_ >= 0 && ::write(console_fd_, line.data(), line.size()) < 0) {
      // The console is best effort; stderr has the line.
    }
  }

 private:
  std::mutex mu_;
  int console_fd_ = -1;
};

// Flags as "--name value" pairs and bare "--switch"es.
struct Flags {
  std::vector<std::pair<std::string, std::string>> values;
  std::vector<std::string> switches;
  std::string error;
  std::string get(const std::string& name, const std::string& fallback = "") const {
    for (const auto& [k, v] : values)
      if (k == name) return v;
    return fallback;
  }
  bool has(const std::string& name) const {
    for (const auto& s : switches)
      if (s == name) return true;
    return false;
  }
};

Flags parse_flags(const std::vector<std::string>& args, const std::vector<std::string>& with_value,
                  const std::vector<std::string>& switches) {
  Flags f;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (std::find(switches.begin(), switches.end(), a) != switches.end()) {
      f.switches.push_back(a);
    } else if (std::find(with_value.begin(), with_value.end(), a) != with_value.end()) {
      if (i + 1 >= args.size()) {
        f.error = a + " needs a value";
        return f;
      }
      f.values.emplace_back(a, args[++i]);
    } else {
      f.error = "unknown flag " + a;
      return f;
    }
  }
  return f;
}

void usage(std::ostream& os) {
  os << "usage: kiln-agent run [--api URL] [--phase ramdisk|os] [--node ID] [--cmdline FILE]\n"
        "                  [--root DIR] [--log-level LEVEL] [--console] [--seed-file FILE]\n"
        "                  [--tls-sha256 HEX]\n"
        "                                      talk to kilnd: lookup, heartbeats, commands;\n"
        "                                      without --api, kiln.* arguments come from /proc/cmdline\n"
        "       kiln-agent inspect [--root DIR] [--nvml-library LIB]\n"
        "                                      print the node inventory as JSON\n"
        "       kiln-agent wipe --device PATH [--full] [--no-discard]\n"
        "                                      remove partition tables and signatures, verify\n"
        "       kiln-agent write-image --url URL --device PATH [--sha256 HEX] [--size N]\n"
        "                  [--format raw|raw+gzip|raw+zstd|raw+sparse] [--token T]\n"
        "                                      stream an image onto a device ($KILN_AGENT_TOKEN\n"
        "                                      is the default bearer)\n"
        "       kiln-agent parse FORMAT FILE   print the facts extracted from FILE as JSON\n"
        "                                      (FILE '-' reads standard input)\n"
        "       kiln-agent validate --plan NAME --profile FILE.json [--gpucheck PATH]\n"
        "                  [--sys-root DIR] [--proc-root DIR] [--kmsg FILE] [--nvml-library LIB]\n"
        "                  [--nvme PATH]\n"
        "                                      run a validation plan, print the report as JSON;\n"
        "                                      exit 0 when it passes, 1 when it fails\n"
        "       kiln-agent --help\n"
        "FORMAT is one of:";
  for (const auto& f : kiln::agent::tool_output_formats()) os << ' ' << f;
  os << "\nNAME is one of:";
  for (const auto& p : kiln::agent::plan_names()) os << ' ' << p;
  os << '\n';
}

int parse_command(const std::string& format, const std::string& file) {
  auto text = kiln::agent::read_capture(file);
  if (!text) {
    std::cerr << "kiln-agent: " << text.error().message << '\n';
    return 2;
  }
  auto parsed = kiln::agent::parse_tool_output(format, *text);
  if (!parsed) {
    std::cerr << "kiln-agent: " << file << ": " << parsed.error().message << '\n';
    return 2;
  }
  std::cout << parsed->dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  return 0;
}

int validate_command(const std::vector<std::string>& args) {
  std::string plan, profile_path;
  kiln::agent::PlanOptions opts;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (i + 1 >= args.size()) {
      std::cerr << "kiln-agent: " << flag << " needs a value\n";
      usage(std::cerr);
      return 2;
    }
    const std::string& v = args[++i];
    if (flag == "--plan") plan = v;
    else if (flag == "--profile") profile_path = v;
    else if (flag == "--gpucheck") opts.gpucheck = v;
    else if (flag == "--sys-root") opts.paths.sys = v;
    else if (flag == "--proc-root") opts.paths.proc = v;
    else if (flag == "--kmsg") opts.paths.kmsg = v;
    else if (flag == "--nvml-library") opts.nvml_library = v;
    else if (flag == "--nvme") opts.nvme_path = v;
    else {
      std::cerr << "kiln-agent: unknown flag " << flag << '\n';
      usage(std::cerr);
      return 2;
    }
  }
  if (plan.empty() || profile_path.empty()) {
    std::cerr << "kiln-agent: validate needs --plan and --profile\n";
    usage(std::cerr);
    return 2;
  }
  auto text = kiln::agent::read_capture(profile_path);
  if (!text) {
    std::cerr << "kiln-agent: " << text.error().message << '\n';
    return 2;
  }
  const auto profile = nlohmann::json::parse(*text, nullptr, false);
  if (profile.is_discarded()) {
    std::cerr << "kiln-agent: " << profile_path << ": not valid JSON\n";
    return 2;
  }
  auto report = kiln::agent::run_plan(plan, profile, opts);
  if (!report) {
    std::cerr << "kiln-agent: " << report.error().message << '\n';
    return 2;
  }
  std::cout << report->dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  return (*report)["result"] == "pass" ? 0 : 1;
}

kiln::Logger make_logger(const std::string& level_name, bool console) {
  kiln::LogLevel level = kiln::LogLevel::kInfo;
  if (!level_name.empty() && !kiln::parse_log_level(level_name, &level))
    std::cerr << "kiln-agent: unknown log level " << level_name << ", using info\n";
  return kiln::Logger(std::make_shared<ConsoleSink>(console), level).with("component", "agent");
}

// The os phase's seed (agent/deploy/agent_seed.h): --seed-file when given,
// else the seed block the ramdisk agent left on a disk (bare metal), else a
// virtual node's NoCloud seed (retried for a minute: the VM's network may
// still be settling). nullopt, logged, when there is none: lookup then gets
// 401 and kilnd never sees this OS as booted.
std::optional<kiln::agent::AgentSeed> os_seed(const kiln::agent::AgentConfig& config, const std::string& file,
                                              const kiln::Logger& log) {
  if (!file.empty()) {
    auto text = kiln::agent::read_text_file(file);
    if (!text) {
      std::cerr << "kiln-agent: cannot read --seed-file " << file << '\n';
      return std::nullopt;
    }
    auto seed = kiln::agent::parse_seed_env(*text);
    if (!seed) {
      std::cerr << "kiln-agent: --seed-file " << file << ": " << seed.error().message << '\n';
      return std::nullopt;
    }
    return *seed;
  }
  if (auto seed = kiln::agent::find_seed_on_disks(config.root)) {
    log.info("os seed found on disk");
    return seed;
  }
  kiln::agent::HttpClientOptions http;
  http.tls_sha256 = config.tls_sha256;
  for (int attempt = 0; attempt < 12; ++attempt) {
    auto seed = kiln::agent::fetch_nocloud_seed(config.root, http);
    if (seed && !*seed) break;  // not a NoCloud VM
    if (seed) {
      log.info("os seed fetched from the NoCloud seed");
      return **seed;
    }
    log.warn("NoCloud seed not available yet", {{"error", seed.error().message}});
    std::this_thread::sleep_for(std::chrono::seconds(5));
  }
  log.error("no os seed (no --seed-file, no seed block on a disk, no NoCloud seed): kilnd will refuse the lookup");
  return std::nullopt;
}

int run_command(const std::vector<std::string>& args) {
  auto f = parse_flags(args, {"--api", "--phase", "--node", "--cmdline", "--root", "--log-level", "--seed-file",
                              "--tls-sha256"},
                       {"--console"});
  if (!f.error.empty()) {
    std::cerr << "kiln-agent: " << f.error << '\n';
    usage(std::cerr);
    return 2;
  }
  kiln::agent::AgentConfig config;
  config.version = KILN_AGENT_VERSION;
  config.root = f.get("--root");
  if (!f.get("--api").empty() && f.get("--cmdline").empty()) {
    config.api_url = f.get("--api");
    config.node_id = f.get("--node");
    const std::string phase = f.get("--phase", "os");
    if (phase != "os") {
      std::cerr << "kiln-agent: --api is for the os phase; the ramdisk phase reads /proc/cmdline\n";
      return 2;
    }
    config.phase = kiln::agent::AgentPhase::kOs;
  } else {
    const std::string path = f.get("--cmdline", kiln::agent::HostPaths{}.proc + "/cmdline");
    auto text = kiln::agent::read_text_file(path);
    if (!text) {
      std::cerr << "kiln-agent: cannot read " << path << '\n';
      return 2;
    }
    if (auto s = kiln::agent::apply_kernel_cmdline(*text, &config); !s) {
      std::cerr << "kiln-agent: " << path << ": " << s.error().message << '\n';
      return 2;
    }
    if (!f.get("--api").empty()) config.api_url = f.get("--api");
  }
  const bool ramdisk = config.phase == kiln::agent::AgentPhase::kRamdisk;
  kiln::Logger log = make_logger(f.get("--log-level"), ramdisk || f.has("--console"));
  if (!f.get("--tls-sha256").empty()) config.tls_sha256 = f.get("--tls-sha256");
  if (!ramdisk) {
    std::optional<kiln::agent::AgentSeed> seed = os_seed(config, f.get("--seed-file"), log);
    if (!seed && !f.get("--seed-file").empty()) return 2;
    if (seed) {
      config.os_secret = seed->os_secret;
      if (config.tls_sha256.empty()) config.tls_sha256 = seed->tls_sha256;
      if (config.api_url.empty()) config.api_url = seed->api_url;
      if (config.node_id.empty()) config.node_id = seed->node_id;
    }
  }

  // SIGINT/SIGTERM end the loop; a thread waits for them so no handler runs
  // on an arbitrary thread.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  kiln::agent::HttpClientOptions http;
  http.tls_sha256 = config.tls_sha256;
  kiln::agent::NodeCommandOptions copts;
  copts.write_image.http = http;
  copts.root = config.root;
  copts.version = config.version;
  copts.api_url = config.api_url;
  kiln::agent::NodeCommands commands(copts, log);
  kiln::agent::AgentLoop loop(config, commands, log, http);
  std::thread signals([&] {
    int sig = 0;
    sigwait(&set, &sig);
    if (sig != 0) loop.stop();
  });
  signals.detach();
  loop.run();
  return 0;
}

int inspect_command(const std::vector<std::string>& args) {
  auto f = parse_flags(args, {"--root", "--nvml-library"}, {});
  if (!f.error.empty()) {
    std::cerr << "kiln-agent: " << f.error << '\n';
    return 2;
  }
  kiln::agent::InventoryOptions o;
  o.root = f.get("--root");
  o.nvml_library = f.get("--nvml-library", o.nvml_library);
  o.probe_cpuid = o.root.empty() || o.root == "/";
  o.agent_version = KILN_AGENT_VERSION;
  std::cout << kiln::agent::collect_inventory(o).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  return 0;
}

int wipe_command(const std::vector<std::string>& args) {
  auto f = parse_flags(args, {"--device", "--log-level"}, {"--full", "--no-discard"});
  if (!f.error.empty() || f.get("--device").empty()) {
    std::cerr << "kiln-agent: " << (f.error.empty() ? "wipe needs --device" : f.error) << '\n';
    return 2;
  }
  kiln::agent::WipeOptions o;
  o.full_overwrite = f.has("--full");
  o.discard = !f.has("--no-discard");
  auto r = kiln::agent::wipe_device(f.get("--device"), o, make_logger(f.get("--log-level"), false));
  std::cout << kiln::agent::to_json(r).dump(2) << '\n';
  return r.verified ? 0 : 1;
}

int write_image_command(const std::vector<std::string>& args) {
  auto f = parse_flags(args, {"--url", "--sha256", "--size", "--format", "--device", "--token", "--log-level"}, {});
  if (!f.error.empty() || f.get("--url").empty() || f.get("--device").empty()) {
    std::cerr << "kiln-agent: " << (f.error.empty() ? "write-image needs --url and --device" : f.error) << '\n';
    return 2;
  }
  kiln::agent::WriteImageRequest req;
  req.url = f.get("--url");
  req.sha256 = f.get("--sha256");
  req.format = f.get("--format", "raw");
  req.device = f.get("--device");
  const char* env_token = std::getenv("KILN_AGENT_TOKEN");
  req.token = f.get("--token", env_token ? env_token : "");
  try {
    req.size = std::stoull(f.get("--size", "0"));
  } catch (...) {
    std::cerr << "kiln-agent: --size must be a byte count\n";
    return 2;
  }
  auto r = kiln::agent::write_image(req, {}, make_logger(f.get("--log-level"), false));
  if (!r) {
    std::cerr << "kiln-agent: " << r.error().message << '\n';
    return 1;
  }
  std::cout << kiln::agent::to_json(*r).dump(2) << '\n';
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    usage(std::cout);
    return 0;
  }
  if (args.size() == 3 && args[0] == "parse") return parse_command(args[1], args[2]);
  const std::vector<std::string> rest(args.empty() ? args.end() : args.begin() + 1, args.end());
  if (!args.empty() && args[0] == "validate") return validate_command(rest);
  if (!args.empty() && args[0] == "run") return run_command(rest);
  if (!args.empty() && args[0] == "inspect") return inspect_command(rest);
  if (!args.empty() && args[0] == "wipe") return wipe_command(rest);
  if (!args.empty() && args[0] == "write-image") return write_image_command(rest);
  usage(std::cerr);
  return 2;
}
