#include "controller/agent/lease_address_learner.h"

#include <sys/stat.h>

#include <optional>
#include <tuple>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "controller/agent/agent_broker.h"  // ssh_login
#include "controller/boot/dhcp_leases.h"
#include "controller/boot/lease_addresses.h"
#include "controller/model/event_types.h"

namespace kiln {

namespace {

using S = ProvisionState;

// A node lists a handful of ports; the sweep reads this many nodes a page.
constexpr int kSweepPage = 500;

std::vector<std::string> macs_of(const Node& n) {
  std::vector<std::string> out;
  for (const Port& p : n.ports) out.push_back(p.address);
  return out;
}

// What identifies a version of the file: dnsmasq rewrites it in place or
// renames a new one over it.
using FileStamp = std::tuple<int64_t, int64_t, int64_t, int64_t>;  // ino, size, mtime s, ns
std::optional<FileStamp> stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileStamp{static_cast<int64_t>(st.st_ino), static_cast<int64_t>(st.st_size),
                   static_cast<int64_t>(st.st_mtim.tv_sec), static_cast<int64_t>(st.st_mtim.tv_nsec)};
}

Result<boot::LeaseIndex> read_index(const std::string& path) {
  Result<std::vector<boot::DhcpLease>> leases = boot::LeaseFile(path).read();
  if (!leases) return leases.take_error();
  return boot::LeaseIndex(std::move(*leases));
}

// Built outside coroutines (docs/coroutines.md rule 6).
EventDraft addresses_event(const Node& n, const std::vector<std::string>& addresses, const std::string& ssh) {
  EventDraft e;
  e.type = event_type::kNodeAddresses;
  e.node_id = n.id;
  e.tenant = n.tenant;
  e.detail = {{"addresses", addresses}, {"ssh", ssh}, {"source", to_string(AddressSource::kDhcp)}};
  return e;
}

}  // namespace

bool learns_leased_addresses(const Node& n) {
  if (n.provision_state == S::kActive) return true;
  if (n.provision_state == S::kDeploying || n.provision_state == S::kValidating) return !n.ssh_host_keys.empty();
  return false;
}

LeaseAddressLearner::LeaseAddressLearner(asio::io_context& io, NodeRepo& nodes, CatalogueStore& images,
                                         BlockingPool& db, const Clock& clock, std::string lease_file,
                                         LeaseAddressLearnerOptions options, Logger log)
    : io_(io),
      nodes_(nodes),
      images_(images),
      db_(db),
      clock_(clock),
      lease_file_(std::move(lease_file)),
      opt_(options),
      log_(std::move(log)) {}

asio::awaitable<Result<bool>> LeaseAddressLearner::learn(std::string node_id) {
  Result<Node> node = co_await db_.run([&] { return nodes_.get_node(node_id); });
  if (!node) co_return node.take_error();
  if (!learns_leased_addresses(*node) || node->address_source == AddressSource::kAgent) co_return false;
  const std::string path = lease_file_;
  Result<boot::LeaseIndex> index = co_await db_.run([&] { return read_index(path); });
  if (!index) co_return index.take_error();
  Result<bool> learned = co_await learn(*node, *index, clock_.now_ms() / 1000);
  co_return learned;
}

asio::awaitable<Result<bool>> LeaseAddressLearner::learn(const Node& node, const boot::LeaseIndex& leases,
                                                         int64_t now_s) {
  if (!learns_leased_addresses(node) || node.address_source == AddressSource::kAgent) co_return false;
  const std::vector<std::string> recorded =
      node.address_source == AddressSource::kDhcp ? node.addresses : std::vector<std::string>{};
  std::vector<std::string> addresses = leases.node_addresses(macs_of(node), recorded, now_s);
  const AddressSource source = addresses.empty() ? AddressSource::kNone : AddressSource::kDhcp;
  if (addresses == node.addresses && source == node.address_source) co_return false;

  std::string user;
  const std::string image_ref = node.image;
  if (!image_ref.empty() && !addresses.empty()) {
    Result<Image> image = co_await db_.run([&] { return images_.get_image(image_ref); });
    if (image) user = image->ssh_user;
  }
  const std::string ssh = ssh_login(user, addresses);
  std::vector<EventDraft> events = {addresses_event(node, addresses, ssh)};
  NodeCondition cond;
  cond.version = node.version;  // as read: still deployed, still not the agent's
  const std::string node_id = node.id;
  Result<Node> saved = co_await db_.run([&] {
    return nodes_.update_node_if(node_id, cond,
                                 [&](Node& n) {
                                   n.addresses = addresses;
                                   n.address_source = source;
                                   n.ssh = ssh;
                                   return ok_status();
                                 },
                                 events);
  });
  if (!saved) {
    // The node changed since it was read: the next sweep reads it again.
    if (saved.error().code == Code::kPreconditionFailed || saved.error().code == Code::kNotFound) co_return false;
    co_return saved.take_error();
  }
  log_.info("dhcp addresses", {{"node", node_id}, {"ssh", ssh}, {"addresses", std::to_string(addresses.size())}});
  co_return true;
}

asio::awaitable<Status> LeaseAddressLearner::sweep() {
  const std::string path = lease_file_;
  Result<boot::LeaseIndex> index = co_await db_.run([&] { return read_index(path); });
  if (!index) co_return index.take_error();
  const int64_t now_s = clock_.now_ms() / 1000;
  NodeFilter filter;
  filter.provision_state = S::kActive;
  ListOptions page;
  page.limit = kSweepPage;
  page.sort_key = "id";
  for (;;) {
    Result<std::vector<Node>> nodes = co_await db_.run([&] { return nodes_.list_nodes(filter, page); });
    if (!nodes) co_return nodes.take_error();
    for (const Node& n : *nodes) {
      Result<bool> learned = co_await learn(n, *index, now_s);
      if (!learned) log_.warn("dhcp addresses not recorded", {{"node", n.id}, {"error", learned.error().message}});
    }
    if (nodes->size() < static_cast<std::size_t>(kSweepPage) || stopping_.load()) break;
    page.marker = nodes->back().id;
  }
  co_return ok_status();
}

void LeaseAddressLearner::run() {
  if (running_.exchange(true)) return;
  timer_ = std::make_shared<asio::steady_timer>(io_);
  Logger log = log_;
  asio::co_spawn(io_, loop(), [this, log](std::exception_ptr e) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        log.error("dhcp address sweep failed", {{"error", ex.what()}});
      }
    }
    ended_.set_value();
  });
}

void LeaseAddressLearner::join() {
  if (!running_.load()) return;
  ended_.get_future().wait();
}

void LeaseAddressLearner::stop() {
  if (stopping_.exchange(true)) return;
  if (timer_) {
    std::shared_ptr<asio::steady_timer> t = timer_;
    asio::post(io_, [t] { t->cancel(); });
  }
}

asio::awaitable<void> LeaseAddressLearner::loop() {
  std::shared_ptr<asio::steady_timer> timer = timer_;
  std::optional<FileStamp> seen;
  auto next_resync = std::chrono::steady_clock::now();  // a first sweep at once
  std::string last_problem;
  while (!stopping_.load()) {
    const std::string path = lease_file_;
    std::optional<FileStamp> now_stamp = co_await db_.run([&] { return stamp_of(path); });
    const auto now = std::chrono::steady_clock::now();
    if (now_stamp != seen || now >= next_resync) {
      Status s = co_await sweep();
      if (s) {
        seen = now_stamp;
        last_problem.clear();
      } else if (s.error().message != last_problem) {
        // Once per distinct problem: a half-written file is retried at the
        // next poll (seen is not updated), and a broken one is not logged
        // every second.
        last_problem = s.error().message;
        log_.warn("DHCP leases unreadable: no addresses learned from them", {{"reason", last_problem}});
      }
      next_resync = now + opt_.resync_interval;
    }
    if (stopping_.load()) break;
    timer->expires_after(opt_.poll_interval);
    boost::system::error_code ec;
    co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

}  // namespace kiln
