#include "bench/soak/soak.h"

#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <thread>

#include "bench/soak/api_client.h"
#include "bench/soak/api_values.h"
#include "bench/soak/bmc_fleet.h"
#include "bench/soak/deadline_watch.h"
#include "bench/soak/event_feed.h"
#include "bench/soak/findings.h"
#include "bench/soak/isolation_probe.h"
#include "bench/soak/kilnd_cluster.h"
#include "bench/soak/operation_ledger.h"
#include "bench/soak/ownership.h"
#include "bench/soak/quota_probe.h"
#include "bench/soak/resource_monitor.h"
#include "bench/soak/usage_audit.h"
#include "bench/soak/wall_clock.h"
#include "bench/soak/workload.h"
#include "bench/soak/world.h"
#include "tests/integration/kilnd/kilnd_process.h"

namespace kiln::soak {

namespace {

using nlohmann::json;
using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The timeouts kilnd runs with: short enough that the nodes built to hang
// (ops-6, the Redfish nodes waiting for an agent) time out many times in a
// few minutes, long enough for the slowest healthy operation (ops-7's 6 s
// steps) on a loaded machine.
StateTimeouts soak_timeouts() {
  StateTimeouts t;
  t.fallback = seconds(30);
  t.by_state = {{"verifying", seconds(20)}, {"inspecting", seconds(20)}, {"cleaning", seconds(15)}};
  return t;
}

// The deadline check's slack past a timeout: the timeout sweep runs every
// second (--timeout-check-ms), and an ASan kilnd on a busy 2-core machine
// takes a few more to write the failure.
constexpr milliseconds kDeadlineSlack{10000};

// How often each watch runs.
constexpr milliseconds kTick{300};
constexpr milliseconds kEventsEvery{1000};
constexpr milliseconds kNodesEvery{2000};
constexpr milliseconds kQuotaEvery{5000};
constexpr milliseconds kIsolationEvery{4000};
constexpr milliseconds kRepairEvery{10000};
constexpr milliseconds kProgressEvery{30000};

// An ASan kilnd's RSS keeps creeping after its warm-up even with a small
// quarantine (the sanitizer's allocator and stack depot; measured up to
// 0.35 MiB/s under the soak's load, where a Release kilnd on the same run
// stayed within 2 MiB over minutes), so its bound is looser. Leaks are
// measured on a Release kilnd (--kilnd).
constexpr int64_t kAsanRssBoundKib = 48 * 1024;

// Whether the kilnd driven is this build's own and the build is ASan's.
bool sanitized_kilnd() {
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
  const char* over = std::getenv("KILN_KILND_BIN_OVERRIDE");
  return over == nullptr || *over == '\0';
#endif
#endif
  return false;
}

// This process's own CPU seconds (user + system), its children not counted.
double own_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

// A recurring task's next time.
struct Every {
  milliseconds period;
  Steady::time_point next = Steady::now();
  bool due(Steady::time_point now) {
    if (now < next) return false;
    next = now + period;
    return true;
  }
};

class SoakRun {
 public:
  explicit SoakRun(const SoakOptions& o) : opts_(o), findings_(o.verbose) {
    seed_ = o.seed != 0 ? o.seed : static_cast<uint64_t>(Steady::now().time_since_epoch().count());
    rng_.seed(seed_);
  }

  int run();

 private:
  void set_up();
  void chaos();
  void settle();
  void final_checks();
  void write_report();

  // One look at the system: nodes sampled, then the new events (in that
  // order: deadline_watch.h), then the deadline check and the footprints.
  void watch_nodes();
  void watch_events();
  void chaos_kill();
  void take_restart_failures();
  // Whether nothing moves any more: every allocation released, no node
  // held, in a transient state or waiting for a power state. `why` says
  // what still moves.
  bool at_rest(std::string* why);
  void progress(const char* phase);
  double since_start() const { return std::chrono::duration<double>(Steady::now() - started_).count(); }

  SoakOptions opts_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  Findings findings_;
  Steady::time_point started_ = Steady::now();
  double chaos_s_ = 0, settle_s_ = 0;

  std::unique_ptr<testing::TempDir> image_dir_;
  std::unique_ptr<BmcFleet> fleet_;
  std::unique_ptr<KilndCluster> cluster_;
  std::unique_ptr<ApiClient> api_;
  World world_;
  std::unique_ptr<EventFeed> feed_;
  std::unique_ptr<OperationLedger> ledger_;
  std::unique_ptr<Ownership> ownership_;
  std::unique_ptr<DeadlineWatch> deadlines_;
  std::unique_ptr<ResourceMonitor> resources_;
  std::unique_ptr<IsolationProbe> isolation_;
  std::unique_ptr<Workload> workload_;
  json nodes_ = json::array();
  json usage_figures_;
  Steady::time_point next_kill_, next_pause_, resume_at_;
};

void SoakRun::set_up() {
  std::cerr << "kiln-soak: seed " << seed_ << ", backend " << to_string(opts_.backend) << ", "
            << opts_.duration.count() << " s of chaos" << std::endl;
  image_dir_ = std::make_unique<testing::TempDir>();
  write_image_file(image_dir_->path());
  fleet_ = std::make_unique<BmcFleet>(8, seed_);
  ClusterSpec spec;
  spec.backend = opts_.backend;
  spec.flags = {"--bootstrap-token", kAdminToken, "--image-dir", image_dir_->path(), "--allocation-interval-ms", "200",
                "--power-sync-interval", "5", "--timeout-check-ms", "1000"};
  for (const std::string& f : soak_timeouts().kilnd_flags()) spec.flags.push_back(f);
  cluster_ = std::make_unique<KilndCluster>(spec);
  api_ = std::make_unique<ApiClient>(*cluster_, findings_, seed_ + 1);
  world_ = build_world(*api_, *fleet_, image_dir_->path(), seed_ + 2);
  feed_ = std::make_unique<EventFeed>(*api_, findings_, world_.admin_token);
  ledger_ = std::make_unique<OperationLedger>(findings_, *cluster_);
  ownership_ = std::make_unique<Ownership>(findings_, world_.quotas);
  deadlines_ = std::make_unique<DeadlineWatch>(findings_, *cluster_, soak_timeouts(), kDeadlineSlack);
  FlatnessBounds bounds;
  bounds.warmup = opts_.warmup;
  if (sanitized_kilnd()) bounds.rss_bound_kib = kAsanRssBoundKib;
  resources_ = std::make_unique<ResourceMonitor>(findings_, bounds);
  isolation_ = std::make_unique<IsolationProbe>(*api_, findings_, *ownership_, world_.tenants, world_.admin_token,
                                                seed_ + 3);
  workload_ = std::make_unique<Workload>(*api_, world_, *ownership_, seed_ + 4, opts_.verbose);
  std::cerr << "kiln-soak: set up in " << since_start() << " s: " << world_.nodes.size() << " nodes, "
            << cluster_->size() << " kilnd" << std::endl;
}

void SoakRun::watch_events() {
  for (const Event& e : feed_->poll()) {
    ledger_->on_event(e);
    ownership_->on_event(e);
    deadlines_->on_event(e);
  }
}

void SoakRun::watch_nodes() {
  const int64_t sampled = wall_ms();
  Reply r = api_->get("/v1/nodes?limit=1000", world_.admin_token);
  watch_events();
  resources_->sample(cluster_->running(), fleet_->pid(), wall_ms());
  if (!r.reached || r.status != 200 || !r.body.is_object()) return;
  nodes_ = r.body["nodes"];
  workload_->set_nodes(nodes_);
  deadlines_->check(nodes_, sampled);
}

void SoakRun::take_restart_failures() {
  for (std::string& f : cluster_->take_restart_failures()) findings_.broken(invariant::kKilndRestarts, std::move(f));
}

void SoakRun::chaos_kill() {
  std::vector<KilndCluster::Endpoint> live = cluster_->live();
  if (live.size() != cluster_->size()) return;  // one restart at a time
  const std::size_t i = live[std::uniform_int_distribution<std::size_t>(0, live.size() - 1)(rng_)].instance;
  const milliseconds down(std::uniform_int_distribution<int>(0, 3000)(rng_));
  if (cluster_->kill_and_restart(i, down) && opts_.verbose)
    std::cerr << "kiln-soak: kill -9 kilnd " << i << ", restart in " << down.count() << " ms" << std::endl;
}

void SoakRun::progress(const char* phase) {
  std::cerr << "kiln-soak: " << phase << " t=" << static_cast<int>(since_start()) << "s events=" << feed_->last_seq()
            << " kills=" << cluster_->kills() << " bmc_pauses=" << fleet_->pauses()
            << " requests=" << api_->requests() << " unreached=" << api_->unreached()
            << (findings_.ok() ? " all invariants hold" : " BROKEN: " + findings_.first().substr(0, 200)) << std::endl;
}

void SoakRun::chaos() {
  const auto begin = Steady::now();
  const auto end = begin + opts_.duration;
  auto gap = [&](seconds mean) {
    return milliseconds(std::uniform_int_distribution<int64_t>(mean.count() * 500, mean.count() * 1500)(rng_));
  };
  // Every other gap between kills lets the process live past its warm-up
  // and the flatness window, so that each run judges some processes' RSS
  // and descriptors; the gaps between are drawn freely, and may kill a
  // kilnd that is still recovering from the last kill.
  const milliseconds judged_life = std::chrono::duration_cast<milliseconds>(
      opts_.warmup + FlatnessBounds{}.min_window + seconds(10));  // + the restart
  int kills = 0;
  auto kill_gap = [&] {
    const milliseconds g = gap(opts_.kill_every);
    return ++kills % 2 == 1 ? std::max(g, judged_life) : g;
  };
  next_kill_ = begin + kill_gap();
  next_pause_ = begin + gap(opts_.bmc_pause_every);
  Every events{kEventsEvery}, nodes{kNodesEvery}, quota{kQuotaEvery}, isolation{kIsolationEvery},
      repair{kRepairEvery}, report{kProgressEvery};
  report.next = begin + kProgressEvery;
  while (Steady::now() < end) {
    const auto now = Steady::now();
    if (nodes.due(now)) watch_nodes();
    else if (events.due(now)) watch_events();
    if (quota.due(now)) probe_quotas(*api_, findings_, world_, nodes_);
    if (isolation.due(now)) isolation_->probe_next(workload_->allocations());
    if (repair.due(now)) workload_->repair_pool();
    if (now >= next_kill_) {
      chaos_kill();
      next_kill_ = now + kill_gap();
    }
    if (!fleet_->paused() && now >= next_pause_) {
      fleet_->pause();
      resume_at_ = now + milliseconds(std::uniform_int_distribution<int>(2000, 6000)(rng_));
      next_pause_ = now + gap(opts_.bmc_pause_every);
    }
    if (fleet_->paused() && now >= resume_at_) fleet_->resume();
    take_restart_failures();
    if (report.due(now)) progress("chaos");
    // About two actions a second: the soak's own CPU stays small beside an
    // ASan kilnd on a 2-core machine.
    if (std::uniform_int_distribution<int>(0, 9)(rng_) < 7) workload_->act();
    std::this_thread::sleep_for(kTick);
  }
  fleet_->resume();
  chaos_s_ = std::chrono::duration<double>(Steady::now() - begin).count();
}

bool SoakRun::at_rest(std::string* why) {
  why->clear();
  Reply a = api_->get("/v1/allocations", world_.admin_token);
  if (!a.reached || a.status != 200) {
    *why = "the allocations cannot be read";
    return false;
  }
  for (const json& al : a.body.value("allocations", json::array()))
    if (str(al["state"]) != "released")
      *why += " allocation " + str(al["name"]) + " " + str(al["state"]) + " (" + str(al["last_error"]) + ");";
  for (const json& n : nodes_) {
    const std::string state = str(n["provision_state"]);
    const bool moving = state == "verifying" || state == "inspecting" || state == "cleaning" ||
                        state == "burning_in" || state == "deploying" || state == "validating";
    if (moving || !n["reservation"].is_null() || !n["target_power_state"].is_null())
      *why += " node " + str(n["name"]) + " " + state + " step " + str(n["provision_step"]) + " reservation " +
              str(n["reservation"]) + " power target " + n["target_power_state"].dump() + ";";
  }
  return why->empty();
}

void SoakRun::settle() {
  const auto begin = Steady::now();
  if (!cluster_->wait_all_up(milliseconds(180000)))
    findings_.broken(invariant::kKilndRestarts, "an instance is still down three minutes after the chaos stopped");
  take_restart_failures();
  StateTimeouts t = soak_timeouts();
  seconds longest = t.fallback;
  for (const auto& [state, s] : t.by_state) longest = std::max(longest, s);
  const auto limit = begin + longest + seconds(120);
  Every release{milliseconds(5000)};
  std::string why;
  bool rested = false;
  while (Steady::now() < limit) {
    if (release.due(Steady::now())) workload_->release_everything();
    watch_nodes();
    if (at_rest(&why)) {
      rested = true;
      break;
    }
    std::this_thread::sleep_for(milliseconds(1000));
  }
  if (!rested)
    findings_.broken(invariant::kOperationsSettle,
                     "still moving " + std::to_string(std::chrono::duration_cast<seconds>(Steady::now() - begin).count()) +
                         " s after the chaos stopped:" + why.substr(0, 3000));
  findings_.checked(invariant::kOperationsSettle);
  settle_s_ = std::chrono::duration<double>(Steady::now() - begin).count();
  progress("settled");
}

void SoakRun::final_checks() {
  watch_nodes();
  ledger_->check_complete();
  for (const auto& [tenant, nodes] : ownership_->held())
    for (const std::string& n : nodes)
      findings_.broken(invariant::kOperationsSettle,
                       "node " + n + " is still " + tenant + "'s after every allocation was released");
  usage_figures_ = audit_usage(*api_, findings_, world_.admin_token);
  isolation_->probe_all(workload_->allocations());
  feed_->reread_all();
  resources_->sample(cluster_->running(), fleet_->pid(), wall_ms());
  resources_->finish();
}

void SoakRun::write_report() {
  json nodes = json::array();
  for (const WorldNode& n : world_.nodes)
    nodes.push_back({{"name", n.name},
                     {"role", n.role == NodeRole::kPool ? "pool" : n.role == NodeRole::kOps ? "ops" : "redfish"},
                     {"note", n.note}});
  json report = {
      {"result", findings_.ok() ? "pass" : "fail"},
      {"first_violation", findings_.first()},
      {"backend", to_string(opts_.backend)},
      {"seed", seed_},
      {"kilnd_instances", cluster_->size()},
      {"kilnd_binary", testing::kilnd_binary()},
      {"kilnd_sanitized", sanitized_kilnd()},
      {"duration_s", {{"chaos_planned", opts_.duration.count()}, {"chaos", chaos_s_}, {"settle", settle_s_},
                      {"total", since_start()}}},
      {"requests", {{"sent", api_->requests()}, {"unreached", api_->unreached()}}},
      {"soak_cpu_s", own_cpu_seconds()},
      {"actions", workload_->figures()},
      {"operations", ledger_->figures()},
      {"restarts", {{"kill9", cluster_->kills()}}},
      {"faults", {{"bmc_pauses", fleet_->pauses()}, {"bmc_paused_s", fleet_->paused_seconds()}, {"nodes", nodes}}},
      {"events", {{"last_seq", feed_->last_seq()}, {"read", feed_->events_read()}}},
      {"peak_nodes_held", ownership_->peaks()},
      {"usage", usage_figures_},
      {"deadlines", deadlines_->figures()},
      {"isolation_probes", isolation_->probes()},
      {"invariants", findings_.to_json()},
      {"resources", resources_->figures()},
  };
  if (opts_.report_path.empty()) return;
  std::ofstream out(opts_.report_path);
  out << report.dump(2) << "\n";
  if (!out) std::cerr << "kiln-soak: could not write " << opts_.report_path << std::endl;
}

int SoakRun::run() {
  set_up();
  chaos();
  settle();
  final_checks();
  write_report();
  std::cerr << "kiln-soak: " << (findings_.ok() ? "PASS" : "FAIL") << " after " << static_cast<int>(since_start())
            << " s (seed " << seed_ << ", " << cluster_->kills() << " kill -9, " << fleet_->pauses()
            << " BMC pauses, " << feed_->last_seq() << " events)" << std::endl;
  if (!findings_.ok()) {
    std::cerr << "kiln-soak: first broken invariant: " << findings_.first() << std::endl;
    return 1;
  }
  return 0;
}

}  // namespace

int run_soak(const SoakOptions& options) {
  SoakRun run(options);
  return run.run();
}

}  // namespace kiln::soak
