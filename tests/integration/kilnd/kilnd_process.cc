#include "kilnd_process.h"

#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/support/http_test_client.h"

namespace kiln::testing {

std::string kilnd_binary() {
  const char* over = std::getenv("KILN_KILND_BIN_OVERRIDE");
  return over != nullptr && *over != '\0' ? over : KILND_BINARY;
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/kiln-it-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}
TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

KilndProcess::KilndProcess(std::string data_dir, std::vector<std::string> extra_flags)
    : data_dir_(std::move(data_dir)), flags_(std::move(extra_flags)) {
  log_file_ = data_dir_ + "/kilnd.log";
  bool binding_given = false;
  for (const std::string& f : flags_)
    if (f == "--lease-binding" || f == "--dhcp-leases" || f == "--pxe-interface") binding_given = true;
  if (!binding_given) {
    const std::string leases = data_dir_ + "/dhcp.leases";
    std::error_code ec;
    std::filesystem::create_directories(data_dir_, ec);
    if (!std::filesystem::exists(leases)) std::ofstream(leases).flush();
    flags_.insert(flags_.end(), {"--dhcp-leases", leases});
  }
}

void KilndProcess::lease_to_loopback(const std::string& mac) const {
  std::ofstream(data_dir_ + "/dhcp.leases", std::ios::app) << "0 " << mac << " 127.0.0.1 * *\n";
}

KilndProcess::~KilndProcess() { kill9(); }

bool KilndProcess::tls() const {
  for (const auto& f : flags_)
    if (f == "--tls-cert") return true;
  return false;
}

void KilndProcess::start(bool wait_ready, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  // stdout carries only "listening on HOST:PORT"; the log is stderr. A
  // restart appends to both, so the line is looked for past the old end.
  const std::string out_file = data_dir_ + "/kilnd.stdout";
  std::error_code ec;
  const auto size = std::filesystem::file_size(out_file, ec);
  ChildSpec spec;
  spec.argv = {kilnd_binary(), "--listen", "127.0.0.1:0", "--data-dir", data_dir_};
  spec.argv.insert(spec.argv.end(), flags_.begin(), flags_.end());
  spec.output_file = out_file;
  spec.error_file = log_file_;
  spec.parent_death_signal = 0;  // tests restart kilnd from helper threads too
  Result<ChildProcess> c = ChildProcess::spawn(spec);
  if (!c) throw std::runtime_error("cannot start kilnd: " + c.error().message);
  child_ = std::move(*c);
  auto lines = wait_for_lines(child_, out_file, {"listening on "}, timeout, ec ? 0 : size);
  if (!lines) {
    kill9();
    throw std::runtime_error("kilnd did not print its listening line (" + lines.error().message + "); log:\n" +
                             log());
  }
  const std::string& hostport = lines->at("listening on ");
  auto colon = hostport.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("unexpected listening line from kilnd: " + hostport);
  port_ = static_cast<uint16_t>(std::stoi(hostport.substr(colon + 1)));
  if (!wait_ready) return;
  while (std::chrono::steady_clock::now() < end) {
    try {
      HttpTestClient c("127.0.0.1", port_, tls(), std::chrono::seconds(2));
      if (c.request("GET", "/readyz").status == 200) return;
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw std::runtime_error("kilnd never became ready; log:\n" + log());
}

int KilndProcess::terminate(std::chrono::milliseconds timeout) {
  if (!child_.running()) return -1;
  child_.signal(SIGTERM);
  std::optional<int> st = child_.wait(timeout);
  if (!st) {
    kill9();
    return -1;
  }
  return exit_code(*st);
}

void KilndProcess::kill9() {
  if (!child_.running()) return;
  child_.signal(SIGKILL);  // a crash as far as kilnd can tell: no SIGTERM first
  std::optional<int> st = child_.wait(std::chrono::seconds(30));
  (void)st;
}

std::string KilndProcess::log() const {
  std::ifstream f(log_file_);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int KilndProcess::run_to_exit(const std::vector<std::string>& args, std::string* out, std::string* err) {
  std::vector<std::string> argv = {kilnd_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  Result<ProgramOutput> r = run_program(argv, std::chrono::seconds(20));
  if (!r && r.error().code == Code::kTimeout) return -1;
  if (!r) throw std::runtime_error("kilnd " + r.error().message);
  *out = std::move(r->out);
  *err = std::move(r->err);
  return exit_code(r->status);
}

nlohmann::json all_nodes(HttpTestClient& c, const Headers& headers) {
  nlohmann::json out = nlohmann::json::array();
  std::string target = "/v1/nodes?limit=1000";
  for (;;) {
    auto r = c.request("GET", target, "", headers);
    if (r.status != 200) {
      throw std::runtime_error("GET " + target + " -> " + std::to_string(r.status) + " " + r.body);
    }
    nlohmann::json page = nlohmann::json::parse(r.body);
    for (auto& n : page["nodes"]) out.push_back(n);
    if (page["next"].is_null()) return out;
    const std::string url = page["next"];
    target = url.substr(url.find("/v1/"));
  }
}

}  // namespace kiln::testing
