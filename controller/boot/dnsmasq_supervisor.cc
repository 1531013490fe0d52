#include "controller/boot/dnsmasq_supervisor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "controller/boot/dnsmasq_config.h"
#include "controller/boot/host_info.h"
#include "controller/model/event_types.h"

namespace kiln::boot {
namespace {

using SteadyClock = std::chrono::steady_clock;
// A dnsmasq younger than this may not have installed its SIGHUP handler yet
// (SIGHUP's default action would kill it): the reload waits.
constexpr std::chrono::seconds kHupGrace{1};
// A dnsmasq that stayed up this long starts the next backoff from the minimum.
constexpr std::chrono::seconds kStableRun{60};

bool is_ipv4(const std::string& s) {
  in_addr a{};
  return ::inet_pton(AF_INET, s.c_str(), &a) == 1;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Status write_file(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << content;
    if (!f.good()) return Error(Code::kInternal, "cannot write " + tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return Error(Code::kInternal, "cannot rename " + tmp + ": " + std::strerror(errno));
  return ok_status();
}

// Port events that change which MACs dnsmasq must answer.
bool touches_ports(const std::string& type) {
  return type.rfind("port.", 0) == 0 || type == event_type::kNodeCreated || type == event_type::kNodeDeleted;
}

}  // namespace

DnsmasqSupervisor::DnsmasqSupervisor(asio::io_context& io, NodeRepo& nodes, EventLog& events, BlockingPool& db,
                                     DnsmasqOptions options, Logger log)
    : io_(io),
      nodes_(nodes),
      events_(events),
      db_(db),
      options_(std::move(options)),
      log_(std::move(log)),
      hosts_(options_.state_dir + "/hosts") {}

DnsmasqSupervisor::~DnsmasqSupervisor() { stop(); }

Status DnsmasqSupervisor::start() {
  const DnsmasqOptions& o = options_;
  if (o.interface.empty() || ::if_nametoindex(o.interface.c_str()) == 0)
    return Error::invalid("--pxe-interface", "no such network interface: " + o.interface);
  if (!is_ipv4(o.range_start) || !is_ipv4(o.range_end))
    return Error::invalid("--pxe-range", "must be START,END IPv4 addresses");
  if (::access(o.dnsmasq.c_str(), X_OK) != 0)
    return Error::invalid("--dnsmasq", o.dnsmasq + ": " + std::strerror(errno));
  struct stat st {};
  if (::stat(o.ipxe_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Error::invalid("--ipxe-dir", o.ipxe_dir + " is not a directory (install Debian's ipxe package)");
  for (const char* f : {"undionly.kpxe", "ipxe.efi"}) {
    const std::string p = o.ipxe_dir + "/" + f;
    if (::access(p.c_str(), R_OK) != 0) log_.warn("iPXE binary missing", {{"path", p}});
  }
  if (::mkdir(o.state_dir.c_str(), 0755) != 0 && errno != EEXIST)
    return Error(Code::kInternal, "cannot create " + o.state_dir + ": " + std::strerror(errno));
  if (Status s = hosts_.ensure(); !s) return s;
  stop_stale();

  DnsmasqConfigInput in;
  in.interface = o.interface;
  in.range_start = o.range_start;
  in.range_end = o.range_end;
  in.boot_url = o.boot_url;
  in.discovery = o.discovery;
  in.ipxe_dir = o.ipxe_dir;
  in.state_dir = o.state_dir;
  in.user = current_user_name();
  in.group = current_group_name();
  if (Status s = write_file(config_path(), render_dnsmasq_config(in)); !s) return s;

  Result<int64_t> last = events_.last_event_seq();
  if (!last) return last.take_error();
  seen_seq_ = *last;
  notified_seq_.store(*last);
  Result<KnownMacs> macs = known_macs();
  if (!macs) return macs.take_error();
  Result<HostsSync> synced = hosts_.sync(macs->pxe, macs->dhcp_only);
  if (!synced) return synced.take_error();

  if (Status s = spawn_child(); !s) return s;
  const auto end = SteadyClock::now() + o.startup_check;
  while (SteadyClock::now() < end) {
    std::optional<int> exited;
    {
      std::lock_guard<std::mutex> lock(child_mu_);
      exited = child_.poll();
    }
    if (exited) {
      pid_.store(-1);
      return Error(Code::kUnavailable, "dnsmasq exited at once (" + describe_wait_status(*exited) +
                                           "); its log " + log_path() + " ends with: " + log_tail());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  log_.info("dnsmasq started", {{"pid", std::to_string(pid_.load())},
                                {"interface", o.interface},
                                {"range", o.range_start + "-" + o.range_end},
                                {"boot_url", o.boot_url},
                                {"known_macs", std::to_string(macs->pxe.size() + macs->dhcp_only.size())},
                                {"discovery", o.discovery ? "on" : "off"},
                                {"config", config_path()}});
  return ok_status();
}

void DnsmasqSupervisor::run() {
  if (running_.exchange(true)) return;
  timer_ = std::make_shared<asio::steady_timer>(io_);
  Logger log = log_;
  asio::co_spawn(io_, supervise(), [log](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      log.error("dnsmasq supervision failed", {{"error", ex.what()}});
    }
  });
}

Status DnsmasqSupervisor::spawn_child() {
  ChildSpec spec;
  spec.argv = {options_.dnsmasq, "--keep-in-foreground", "--conf-file=" + config_path()};
  spec.output_file = log_path();
  Result<ChildProcess> child = ChildProcess::spawn(spec);
  if (!child) return Error(child.error().code, "cannot start dnsmasq: " + child.error().message);
  std::lock_guard<std::mutex> lock(child_mu_);
  if (stopping_.load()) return Error(Code::kUnavailable, "stopping");
  child_ = std::move(*child);
  pid_.store(child_.pid());
  return ok_status();
}

void DnsmasqSupervisor::notify_events(int64_t seq) {
  int64_t cur = notified_seq_.load();
  while (seq > cur && !notified_seq_.compare_exchange_weak(cur, seq)) {
  }
}

asio::awaitable<void> DnsmasqSupervisor::supervise() {
  std::shared_ptr<asio::steady_timer> timer = timer_;
  std::chrono::milliseconds backoff = options_.min_backoff;
  SteadyClock::time_point started_at = SteadyClock::now();
  SteadyClock::time_point restart_at = started_at;
  SteadyClock::time_point next_resync = started_at + options_.resync_interval;
  bool down = false;
  bool hup_pending = false;
  while (!stopping_.load()) {
    timer->expires_after(options_.poll_interval);
    boost::system::error_code ec;
    co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (stopping_.load()) break;
    const SteadyClock::time_point now = SteadyClock::now();

    std::optional<int> exited;
    {
      std::lock_guard<std::mutex> lock(child_mu_);
      exited = child_.poll();
    }
    if (exited) {
      pid_.store(-1);
      down = true;
      if (now - started_at >= kStableRun) backoff = options_.min_backoff;
      restart_at = now + backoff;
      log_.warn("dnsmasq exited; restarting", {{"status", describe_wait_status(*exited)},
                                               {"restart_in_ms", std::to_string(backoff.count())},
                                               {"log_tail", log_tail()}});
      backoff = std::min(backoff * 2, options_.max_backoff);
    }
    if (down && now >= restart_at) {
      Status s = spawn_child();
      if (s) {
        down = false;
        hup_pending = false;  // a fresh dnsmasq reads the whole hostsdir
        started_at = now;
        log_.info("dnsmasq restarted", {{"pid", std::to_string(pid_.load())}});
      } else {
        restart_at = now + backoff;
        log_.error("dnsmasq restart failed", {{"error", s.error().message},
                                              {"retry_in_ms", std::to_string(backoff.count())}});
        backoff = std::min(backoff * 2, options_.max_backoff);
      }
    }

    bool want = resync_requested_.exchange(false);
    if (!want && notified_seq_.load() > seen_seq_) {
      bool changed = co_await ports_changed_since(&seen_seq_);
      want = changed;
    }
    if (!want && now >= next_resync) want = true;
    if (want) {
      next_resync = now + options_.resync_interval;
      Result<HostsSync> r = co_await db_.run([this]() -> Result<HostsSync> {
        Result<KnownMacs> macs = known_macs();
        if (!macs) return macs.take_error();
        return hosts_.sync(macs->pxe, macs->dhcp_only);
      });
      if (!r) {
        log_.warn("dhcp hosts resync failed", {{"error", r.error().message}});
      } else {
        if (r->added + r->removed + r->rewritten > 0)
          log_.info("dhcp hosts synced", {{"added", std::to_string(r->added)},
                                          {"removed", std::to_string(r->removed)},
                                          {"rewritten", std::to_string(r->rewritten)}});
        if (r->needs_reload() && !down) hup_pending = true;
      }
    }
    if (hup_pending && !down && SteadyClock::now() - started_at >= kHupGrace) {
      bool sent = false;
      {
        std::lock_guard<std::mutex> lock(child_mu_);
        sent = child_.signal(SIGHUP);
      }
      hup_pending = false;
      if (sent) log_.info("dnsmasq reloads its hosts (SIGHUP)", {{"pid", std::to_string(pid_.load())}});
    }
  }
}

asio::awaitable<bool> DnsmasqSupervisor::ports_changed_since(int64_t* seq) {
  constexpr int kPage = 1000;
  const int64_t since = *seq;
  const int64_t target = notified_seq_.load();
  Result<std::vector<EventRecord>> events = co_await db_.run(
      [this, since] { return events_.list_events(since, kPage, std::nullopt, std::nullopt); });
  if (!events) {
    log_.warn("reading events failed; resyncing", {{"error", events.error().message}});
    *seq = std::max(*seq, target);
    co_return true;
  }
  bool changed = false;
  for (const EventRecord& e : *events) {
    *seq = std::max(*seq, e.seq);
    if (touches_ports(e.type)) changed = true;
  }
  if (events->size() < static_cast<std::size_t>(kPage)) *seq = std::max(*seq, target);
  co_return changed;
}

Result<DnsmasqSupervisor::KnownMacs> DnsmasqSupervisor::known_macs() {
  KnownMacs macs;
  std::string marker;
  constexpr int kPage = 1000;
  while (true) {
    Result<std::vector<Port>> page = nodes_.list_ports(std::nullopt, kPage, marker);
    if (!page) return page.take_error();
    for (const Port& p : *page) {
      std::string mac = p.address;
      std::transform(mac.begin(), mac.end(), mac.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      (p.pxe ? macs.pxe : macs.dhcp_only).insert(std::move(mac));
    }
    if (page->size() < static_cast<std::size_t>(kPage)) break;
    marker = page->back().id;
  }
  return macs;
}

// A dnsmasq an earlier kilnd started on this data dir (kilnd killed before
// PR_SET_PDEATHSIG could act, or an older binary) would hold port 67.
void DnsmasqSupervisor::stop_stale() {
  const std::string pid_text = slurp(options_.state_dir + "/dnsmasq.pid");
  const long pid = std::atol(pid_text.c_str());
  if (pid <= 1) return;
  const std::string cmdline = slurp("/proc/" + std::to_string(pid) + "/cmdline");
  if (cmdline.find("--conf-file=" + config_path()) == std::string::npos) return;
  log_.warn("stopping a dnsmasq left by an earlier kilnd", {{"pid", std::to_string(pid)}});
  ::kill(static_cast<pid_t>(pid), SIGTERM);
  for (int i = 0; i < 100 && ::kill(static_cast<pid_t>(pid), 0) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (::kill(static_cast<pid_t>(pid), 0) == 0) ::kill(static_cast<pid_t>(pid), SIGKILL);
}

std::string DnsmasqSupervisor::log_tail() const {
  std::string all = slurp(log_path());
  if (all.size() > 2000) all = all.substr(all.size() - 2000);
  // The last five lines, joined with " | ".
  std::vector<std::string> lines;
  std::stringstream ss(all);
  for (std::string l; std::getline(ss, l);)
    if (!l.empty()) lines.push_back(l);
  std::string out;
  for (std::size_t i = lines.size() > 5 ? lines.size() - 5 : 0; i < lines.size(); ++i)
    out += (out.empty() ? "" : " | ") + lines[i];
  return out;
}

void DnsmasqSupervisor::stop() {
  if (stopping_.exchange(true)) return;
  if (timer_) {
    std::shared_ptr<asio::steady_timer> t = timer_;
    asio::post(io_, [t] { t->cancel(); });
  }
  std::optional<int> status;
  {
    std::lock_guard<std::mutex> lock(child_mu_);
    status = child_.stop(std::chrono::seconds(2));
  }
  pid_.store(-1);
  if (status) log_.info("dnsmasq stopped", {{"status", describe_wait_status(*status)}});
}

}  // namespace kiln::boot
