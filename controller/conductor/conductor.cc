#include "controller/conductor/conductor.h"

#include <algorithm>
#include <chrono>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/ids.h"
#include "controller/conductor/conductor_impl.h"
#include "controller/model/steps.h"
#include "controller/store/store_down.h"
#include "controller/model/event_types.h"

namespace kiln {

int64_t Conductor::Impl::timeout_ms(ProvisionState s) const {
  auto it = opt.timeouts.find(s);
  return (it != opt.timeouts.end() ? it->second : opt.default_timeout).count();
}

PowerSyncOptions Conductor::Impl::owned_power_sync(const ConductorOptions& o) {
  PowerSyncOptions p = o.power_sync;
  if (o.membership == nullptr) return p;
  Membership* m = o.membership;
  if (!p.owns) p.owns = [m](std::string_view key) { return m->view()->is_mine(key); };
  if (!p.ranges) {
    p.ranges = [m] {
      std::shared_ptr<const RingView> v = m->view();
      return v->acting() ? v->ring().ranges_of(v->self()) : std::vector<RingRange>{};
    };
  }
  return p;
}

bool Conductor::Impl::owns(std::string_view node_id) const {
  return opt.membership == nullptr || opt.membership->view()->is_mine(node_id);
}

std::string Conductor::Impl::self_id() const {
  return opt.membership != nullptr ? opt.membership->id() : opt.instance_id;
}

std::string Conductor::Impl::new_op_id() const { return self_id() + "/" + new_uuid(); }

std::string Conductor::Impl::new_op_id_for(const Node& node) const {
  if (opt.membership == nullptr) return new_op_id();
  std::optional<std::string> owner = opt.membership->view()->owner_of(ownership_key(node));
  return (owner ? *owner : self_id()) + "/" + new_uuid();
}

void Conductor::Impl::count(const std::string& op, const std::string& result) {
  std::lock_guard<std::mutex> l(counts_mu);
  ++counts[{op, result}];
}

// A write conditional on an operation's own reservation records what that
// running operation did (a step begun, a power result, the state it ends
// in). When the store is down (store_down.h: its database unreachable or
// its disk full), dropping it would leave the node held by an operation that
// has ended, which nothing releases (a power action has no deadline, and
// adoption re-runs only provisioning states): so it is tried again, backing
// off from 200 ms to 2 s, until the database takes it or kilnd stops (the
// next start then recovers the node). Writes that take a free node (a verb)
// are not retried: the API answers those with 503 at once. A retry of a
// write whose COMMIT did land finds its condition gone (kConflict), never
// applies it twice.
asio::awaitable<Result<Node>> Conductor::Impl::write(std::string id, NodeCondition cond, std::function<Status(Node&)> mutate,
                                                     std::vector<EventDraft> events) {
  const bool op_write = cond.reservation.has_value() && !cond.reservation->empty();
  auto pause = std::chrono::milliseconds(200);
  for (;;) {
    Result<Node> w = co_await db.run([&] { return store.update_node_if(id, cond, mutate, events); });
    // Entering a transient state sets a deadline: the timeout job learns it
    // here instead of polling the store for it.
    if (w) note_deadline(w->deadline_at);
    if (w || !op_write || !store_down(w.error()) || stopped) co_return w;
    log.warn("operation's write waits for the database",
             {{"node", id}, {"op", *cond.reservation}, {"error", w.error().message}});
    co_await store_backoff(pause);
  }
}

asio::awaitable<Result<Node>> Conductor::Impl::read_held(std::string id) {
  auto pause = std::chrono::milliseconds(200);
  for (;;) {
    Result<Node> n = co_await db.run([&] { return store.get_node(id); });
    // An operation adopted or resumed here may hold a deadline another
    // instance wrote: the timeout job learns it from the operation's read.
    if (n) note_deadline(n->deadline_at);
    if (n || !store_down(n.error()) || stopped) co_return n;
    log.warn("operation's read waits for the database", {{"node", id}, {"error", n.error().message}});
    co_await store_backoff(pause);
  }
}

asio::awaitable<void> Conductor::Impl::store_backoff(std::chrono::milliseconds& pause) {
  asio::steady_timer t(io);
  t.expires_after(pause);
  boost::system::error_code ec;
  co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  pause = std::min(pause * 2, std::chrono::milliseconds(2000));
}

namespace {
// Whether a node going `from` -> `to` is still in the same deploy of the
// same OS: deploying -> validating -> active. Any other transition (undeploy,
// a failure, a new deploy) ends it.
bool same_deploy(ProvisionState from, ProvisionState to) {
  using P = ProvisionState;
  auto in_deploy = [](P s) { return s == P::kDeploying || s == P::kValidating || s == P::kActive; };
  if (!in_deploy(from) || !in_deploy(to)) return false;
  return from == to || from == P::kDeploying || (from == P::kValidating && to == P::kActive);
}
}  // namespace

void Conductor::Impl::enter(Node& n, ProvisionState to) {
  // The OS's addresses and login end with its deploy, in the same write as
  // the transition, whatever reported them (kiln-agent or DHCP leases): the
  // agent's forget() clears them too, but only where a boot attempt starts
  // through the agent (not the fake driver, not a virtual node's teardown),
  // and an address must never be shown into the next tenant's deploy.
  if (!same_deploy(n.provision_state, to)) {
    n.addresses.clear();
    n.address_source = AddressSource::kNone;
    n.ssh.clear();
  }
  n.provision_state = to;
  if (is_transient(to)) {
    n.provision_step = std::string(kStartingStep);
    n.deadline_at = clock.now_ms() + timeout_ms(to);
  } else {
    n.provision_step.clear();
    n.deadline_at = 0;
    n.reservation.clear();
    n.target_provision_state.reset();
  }
}

EventDraft Conductor::Impl::transition_event(const Node& before, ProvisionState to, nlohmann::json detail,
                                             const std::string& request_id) {
  EventDraft e;
  e.type = event_type::kProvisionTransition;
  e.node_id = before.id;
  e.from_state = std::string(to_string(before.provision_state));
  e.to_state = std::string(to_string(to));
  e.detail = std::move(detail);
  e.request_id = request_id;
  return e;
}

namespace {
// The detail of a failure's transition event (JSON built outside the
// coroutine: docs/coroutines.md rule 6).
nlohmann::json failure_detail(const std::string& outcome, const std::string& reason) {
  return {{"outcome", outcome}, {"reason", reason}};
}
}  // namespace

asio::awaitable<bool> Conductor::Impl::fail_transient(Node n, std::string outcome, std::string reason) {
  const ProvisionState to = failed_state(n.provision_state);
  std::vector<EventDraft> events = {transition_event(n, to, failure_detail(outcome, reason), "")};
  std::function<Status(Node&)> mutate = [this, to, &reason](Node& m) {
    enter(m, to);
    m.last_error = reason;
    return ok_status();
  };
  NodeCondition cond = held_by(n.reservation, n.provision_state);
  Result<Node> w = co_await write(n.id, cond, mutate, std::move(events));
  co_return static_cast<bool>(w);
}

Conductor::Conductor(asio::io_context& io, NodeStore& store, BlockingPool& db, const DriverRegistry& drivers,
                     const SecretBox& secrets, const Clock& clock, ConductorOptions options, Logger log)
    : impl_(std::make_shared<Impl>(io, store, db, drivers, secrets, clock, std::move(options), std::move(log))) {
  // A view change may move ownership: a dead conductor's nodes to take
  // over, deadlines this instance now answers for. The membership outlives
  // this object, so its listener holds the job weakly.
  if (impl_->opt.membership != nullptr) {
    std::weak_ptr<Impl> job = impl_;
    impl_->opt.membership->on_change([job] {
      if (std::shared_ptr<Impl> self = job.lock()) self->membership_changed();
    });
  }
}

Conductor::~Conductor() { stop(); }

asio::awaitable<Status> Conductor::start() {
  impl_->started_at_ms = impl_->clock.now_ms();
  Status s = co_await impl_->take_over(true);
  if (!s) co_return s;
  // The loop's first plan: nodes already late, and the earliest deadline.
  co_await impl_->deadline_pass(true);
  auto self = impl_;
  asio::co_spawn(impl_->job_strand, [self]() { return self->timeout_loop(); }, asio::detached);
  impl_->power_sync.start();
  co_return ok_status();
}

void Conductor::stop() {
  impl_->stopped = true;
  impl_->power_sync.stop();
  impl_->wake_job();
}

asio::awaitable<Result<Node>> Conductor::provision(std::string node, ProvisionEvent verb, ProvisionArgs args,
                                                   Actor actor) {
  return impl_->provision(std::move(node), verb, std::move(args), std::move(actor));
}

asio::awaitable<Result<Node>> Conductor::power(std::string node, PowerAction action, Actor actor) {
  return impl_->power(std::move(node), action, std::move(actor));
}

asio::awaitable<Result<Node>> Conductor::validate_now(std::string node, ValidationPlan plan, Actor actor) {
  return impl_->validate_now(std::move(node), plan, std::move(actor));
}

Status Conductor::validate_bmc(const BmcInfo& bmc) const {
  if (bmc.driver.empty()) return Error::invalid("/bmc/driver", "is required");
  if (!DriverRegistry::is_known_driver_name(bmc.driver))
    return Error::invalid("/bmc/driver", "must be one of fake, redfish, ipmi, libvirt");
  const Driver* d = impl_->drivers.find(bmc.driver);
  if (d == nullptr) {
    // Accepted so the node can be enrolled now; `manage` fails with a reason.
    if (bmc.address.empty() && bmc.driver != "libvirt") return Error::invalid("/bmc/address", "is required");
    return ok_status();
  }
  if (d->power) return d->power->validate(bmc);
  if (d->management) return d->management->validate(bmc);
  return ok_status();
}

std::map<std::pair<std::string, std::string>, uint64_t> Conductor::operation_counts() const {
  std::lock_guard<std::mutex> l(impl_->counts_mu);
  return impl_->counts;
}

std::size_t Conductor::running_operations() const { return impl_->running.load(); }

PowerSync& Conductor::power_sync() { return impl_->power_sync; }

asio::awaitable<void> Conductor::sweep_once() {
  auto self = impl_;
  co_await self->sweep();
}

uint64_t Conductor::job_store_calls() const { return impl_->job_store_calls.load(); }

void Conductor::kick() { impl_->kick_adoption(); }

const Membership* Conductor::membership() const { return impl_->opt.membership; }

}  // namespace kiln
