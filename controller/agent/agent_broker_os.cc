#include "controller/agent/agent_broker.h"

#include "common/crypto.h"
#include "controller/model/event_types.h"
#include "controller/store/store.h"

// AgentBroker: what it holds of a node's deployed OS (agent_broker.h): the
// phone-home token and the SSH host keys the OS posts with it, and forget(),
// which drops all of a node's agent state before a fresh boot.

namespace kiln {

namespace {

// The secret half of a phone-home token for a deploy's os secret. The label
// keeps it from ever equalling any other value made of the secret.
std::string phone_home_secret(const std::string& os_secret) {
  return sha256_hex("kiln phone-home v1\n" + os_secret);
}

bool lower_hex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

nlohmann::json host_keys_detail(const std::vector<SshHostKey>& keys, const std::string& hostname) {
  nlohmann::json list = nlohmann::json::array();
  for (const SshHostKey& k : keys) list.push_back({{"type", k.type}, {"sha256", k.sha256}});
  nlohmann::json d = {{"ssh_host_keys", std::move(list)}};
  if (!hostname.empty()) d["hostname"] = hostname;
  return d;
}

}  // namespace

asio::awaitable<Result<std::string>> AgentBroker::phone_home_token(const Node& node) {
  Result<std::string> secret = co_await os_secret(node);
  if (!secret) co_return secret.take_error();
  co_return node.id + "." + phone_home_secret(*secret);
}

asio::awaitable<Result<std::string>> AgentBroker::phone_home_url(std::string node_id) {
  const std::string base = boot_url();
  if (base.empty()) co_return std::string();
  Node node;
  node.id = std::move(node_id);
  Result<std::string> token = co_await phone_home_token(node);
  if (!token) co_return token.take_error();
  co_return base + "/v1/phone-home/" + *token;
}

asio::awaitable<Result<Node>> AgentBroker::phone_home_node(std::string token) {
  const Error unknown(Code::kNotFound, "unknown phone-home token");
  // "<node id>.<64 lowercase hex>"; a node id is a UUID (36 characters).
  const std::size_t dot = token.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot > 64 || token.size() - dot - 1 != 64 ||
      !lower_hex(std::string_view(token).substr(dot + 1)))
    co_return unknown;
  std::string node_id = token.substr(0, dot);
  Result<Node> node = co_await db_.run([&] { return store_.get_node(node_id); });
  // By id only: get_node also takes names, and a token names its node by id.
  if (!node || node->id != node_id) {
    if (!node && node.error().code != Code::kNotFound) co_return node.take_error();
    co_return unknown;
  }
  Result<std::optional<AgentOsSecret>> row = co_await db_.run([&] { return store_.get_agent_os_secret(node_id); });
  if (!row) co_return row.take_error();
  if (!*row) co_return unknown;  // no deploy, or forgotten
  Result<std::string> secret = secrets_.open((*row)->secret_sealed);
  if (!secret) co_return unknown;
  if (!constant_time_equal(phone_home_secret(*secret), token.substr(dot + 1))) co_return unknown;
  if (!node->ssh_host_keys.empty()) co_return unknown;  // used
  co_return node;
}

asio::awaitable<Result<Node>> AgentBroker::record_ssh_host_keys(const Node& node, std::vector<SshHostKey> keys,
                                                                std::string hostname) {
  std::vector<EventDraft> events = {event(node, event_type::kNodeSshHostKeys, host_keys_detail(keys, hostname))};
  std::string node_id = node.id;
  NodeCondition cond;
  cond.version = node.version;
  Result<Node> saved = co_await db_.run([&] {
    return store_.update_node_if(node_id, cond,
                                 [&](Node& n) {
                                   if (!n.ssh_host_keys.empty())
                                     return Status(Error(Code::kNotFound, "unknown phone-home token"));
                                   n.ssh_host_keys = keys;
                                   return ok_status();
                                 },
                                 events);
  });
  if (!saved) co_return saved.take_error();
  log_.info("ssh host keys recorded", {{"node", node_id}, {"keys", std::to_string(keys.size())}});
  co_return saved;
}

asio::awaitable<Status> AgentBroker::forget(std::string node_id) {
  {
    std::lock_guard<std::mutex> l(mu_);
    last_heartbeat_.erase(node_id);
  }
  // Its outstanding command goes too: a run_command waiting for it (here or
  // on another instance) ends as dropped.
  Status s = co_await db_.run([&] { return store_.clear_agent_command(node_id, ""); });
  if (!s) co_return s;
  s = co_await db_.run([&] { return store_.delete_agent_sessions(node_id); });
  if (!s) co_return s;
  // A new boot attempt: the next script mints a new token, the next deploy a
  // new os secret.
  s = co_await db_.run([&] { return store_.clear_agent_boot_token(node_id); });
  if (!s) co_return s;
  s = co_await db_.run([&] { return store_.delete_agent_os_secret(node_id); });
  if (!s) co_return s;
  // The addresses were the last OS's: nobody may ssh to them any more.
  Result<Node> node = co_await db_.run([&] { return store_.get_node(node_id); });
  if (!node) co_return node.take_error();
  // The host keys were the last OS's too: a new OS has new ones, and until
  // it posts them nobody's ssh may trust the old.
  if (!node->ssh_host_keys.empty()) {
    std::vector<EventDraft> events = {event(*node, event_type::kNodeSshHostKeys, host_keys_detail({}, ""))};
    Result<Node> cleared = co_await db_.run([&] {
      return store_.update_node_if(node_id, NodeCondition{},
                                   [](Node& n) {
                                     n.ssh_host_keys.clear();
                                     return ok_status();
                                   },
                                   events);
    });
    if (!cleared) co_return cleared.take_error();
  }
  // Whatever reported them (the agent, or DHCP: lease_address_learner.h).
  if (node->addresses.empty() && node->ssh.empty() && node->address_source == AddressSource::kNone)
    co_return ok_status();
  std::vector<std::string> none;
  co_await record_addresses(*node, none);
  co_return ok_status();
}

}  // namespace kiln
