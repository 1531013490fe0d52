#include "controller/agent/agent_broker.h"

#include "common/crypto.h"
#include "common/ids.h"
#include "controller/model/event_types.h"
#include "controller/store/store.h"

namespace kiln {

namespace {

using S = ProvisionState;


Error session_over(const Node& n) {
  return Error(Code::kUnauthenticated,
               "agent session is over: node is " + std::string(to_string(n.provision_state)));
}

// Event details, built outside coroutines (docs/coroutines.md rule 6).
nlohmann::json sent_detail(const AgentCommand& c) { return {{"command", c.name}, {"command_id", c.id}}; }

nlohmann::json result_detail(const std::string& name, const AgentResultPost& post) {
  nlohmann::json d = {{"command", name}, {"command_id", post.command_id}, {"status", post.status}};
  if (post.status != "ok") d["error"] = post.error;
  return d;
}

nlohmann::json lookup_detail(const std::string& phase, const std::string& version, const std::string& step) {
  return {{"phase", phase}, {"version", version}, {"step", step}};
}

// The fields and reasons only: never the values, which are hostile text.
nlohmann::json refusal_detail(const std::string& route, const std::vector<FieldError>& errors) {
  nlohmann::json list = nlohmann::json::array();
  for (const FieldError& f : errors) list.push_back({{"field", f.field}, {"message", f.message}});
  return {{"route", route}, {"errors", std::move(list)}};
}

nlohmann::json addresses_detail(const std::vector<std::string>& addresses, const std::string& ssh) {
  return {{"addresses", addresses}, {"ssh", ssh}, {"source", to_string(AddressSource::kAgent)}};
}

// Whether an agent's report changes what the node shows: other addresses,
// or the same ones until now known only from DHCP (the agent's word wins).
bool agent_report_changes(const Node& n, const std::vector<std::string>& addresses) {
  const AddressSource source = addresses.empty() ? AddressSource::kNone : AddressSource::kAgent;
  return addresses != n.addresses || source != n.address_source;
}

}  // namespace

std::string ssh_login(const std::string& user, const std::vector<std::string>& addresses) {
  if (user.empty() || addresses.empty()) return "";
  for (const std::string& a : addresses)
    if (a.find(':') == std::string::npos) return user + "@" + a;  // IPv4 first
  return user + "@" + addresses.front();
}

bool agent_expected(const Node& n, const std::string& phase) {
  // What the state's agent flow boots (controller/model/steps.h): the
  // ramdisk all along, the OS only once its step waits for it.
  S s = n.provision_state;
  if (phase == "ramdisk") return boots_into(s, n.provision_step) == BootsInto::kRamdisk || on_demand_ramdisk(n);
  if (phase == "os") return agent_awaited(s, n.provision_step) == AgentIn::kOs;
  return false;
}

bool agent_session_valid(const AgentSession& session, const Node& n) {
  auto issued = parse_provision_state(session.issued_state);
  if (!issued) return false;
  S now = n.provision_state;
  if (session.phase == "ramdisk") {
    // Cleaning leaves the ramdisk running for burn-in.
    if (*issued == S::kCleaning) return now == S::kCleaning || now == S::kBurningIn;
    // An on-demand validation's ramdisk: good only while that run is on.
    if (!is_transient(*issued)) return now == *issued && on_demand_ramdisk(n);
    return now == *issued;
  }
  if (session.phase == "os") {
    if (*issued == S::kDeploying) return now == S::kDeploying || now == S::kValidating;
    return now == *issued;
  }
  return false;
}

AgentBroker::AgentBroker(NodeStore& store, BlockingPool& db, const Clock& clock, const SecretBox& secrets,
                         AgentBrokerOptions options, Logger log)
    : store_(store), db_(db), clock_(clock), opt_(std::move(options)), log_(std::move(log)), secrets_(secrets) {}

void AgentBroker::set_tls_pin(std::string sha256_hex) {
  std::lock_guard<std::mutex> l(mu_);
  tls_pin_ = std::move(sha256_hex);
}

std::string AgentBroker::tls_pin() const {
  std::lock_guard<std::mutex> l(mu_);
  return tls_pin_;
}

void AgentBroker::set_boot_url(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  std::lock_guard<std::mutex> l(mu_);
  boot_url_ = std::move(url);
}

std::string AgentBroker::boot_url() const {
  std::lock_guard<std::mutex> l(mu_);
  return boot_url_;
}

void AgentBroker::shutdown() { shutdown_ = true; }

std::optional<int64_t> AgentBroker::last_heartbeat_ms(const std::string& node_id) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = last_heartbeat_.find(node_id);
  if (it == last_heartbeat_.end() || it->second == 0) return std::nullopt;
  return it->second;
}

EventDraft AgentBroker::event(const Node& node, std::string type, nlohmann::json detail) const {
  EventDraft e;
  e.type = std::move(type);
  e.node_id = node.id;
  e.detail = std::move(detail);
  e.tenant = node.tenant;
  return e;
}

asio::awaitable<void> AgentBroker::append(std::vector<EventDraft> events) {
  Status s = co_await db_.run([&] { return store_.append_events(events); });
  if (!s) log_.warn("agent event not recorded", {{"error", s.error().message}});
}

asio::awaitable<Result<std::string>> AgentBroker::boot_token(const Node& node) {
  std::string node_id = node.id;
  Result<std::optional<std::string>> sealed = co_await db_.run([&] { return store_.agent_boot_token_sealed(node_id); });
  if (!sealed) co_return sealed.take_error();
  if (*sealed) {
    // The same boot attempt: show the same token again (a re-fetched script
    // must not replace the token the node is booting with).
    Result<std::string> token = secrets_.open(**sealed);
    if (!token) co_return Error(Code::kInternal, "the boot token no longer opens (kiln.key replaced?)");
    co_return token;
  }
  std::string token = random_hex(32);
  std::string hash = sha256_hex(token);
  std::string seal = secrets_.seal(token);
  Status s = co_await db_.run([&] { return store_.set_agent_boot_token(node_id, hash, seal); });
  if (!s) co_return s.take_error();
  log_.info("agent boot token minted", {{"node", node_id}});
  co_return token;
}

asio::awaitable<Result<std::string>> AgentBroker::os_secret(const Node& node) {
  std::string node_id = node.id;
  Result<std::optional<AgentOsSecret>> have = co_await db_.run([&] { return store_.get_agent_os_secret(node_id); });
  if (!have) co_return have.take_error();
  AgentOsSecret row;
  if (*have) {
    row = **have;
  } else {
    std::string secret = random_hex(32);
    AgentOsSecret fresh;
    fresh.node_id = node_id;
    fresh.secret_hash = sha256_hex(secret);
    fresh.secret_sealed = secrets_.seal(secret);
    fresh.created_at = clock_.now_ms();
    // put keeps a secret another caller stored first, so both agree on one.
    Result<AgentOsSecret> put = co_await db_.run([&] { return store_.put_agent_os_secret(fresh); });
    if (!put) co_return put.take_error();
    row = *put;
    if (row.secret_hash == fresh.secret_hash) log_.info("agent os secret minted", {{"node", node_id}});
  }
  Result<std::string> secret = secrets_.open(row.secret_sealed);
  if (!secret) co_return Error(Code::kInternal, "the os secret no longer opens (kiln.key replaced?)");
  co_return secret;
}

asio::awaitable<Result<Node>> AgentBroker::authenticate(std::string bearer) {
  if (bearer.empty()) co_return Error(Code::kUnauthenticated, "missing agent session (Authorization: Bearer)");
  std::string hash = sha256_hex(bearer);
  Result<AgentSession> session = co_await db_.run([&] { return store_.find_agent_session(hash); });
  if (!session) {
    if (session.error().code == Code::kNotFound) co_return Error(Code::kUnauthenticated, "unknown agent session");
    co_return session.take_error();
  }
  std::string node_id = session->node_id;
  Result<Node> node = co_await db_.run([&] { return store_.get_node(node_id); });
  if (!node) {
    if (node.error().code == Code::kNotFound) co_return Error(Code::kUnauthenticated, "unknown agent session");
    co_return node.take_error();
  }
  if (!agent_session_valid(*session, *node)) {
    // The node moved on: kilnd forgets the session (docs/agent-protocol.md).
    Status d = co_await db_.run([&] { return store_.delete_agent_sessions(node_id); });
    (void)d;
    log_.info("agent session over", {{"node", node_id},
                                     {"state", std::string(to_string(node->provision_state))}});
    co_return session_over(*node);
  }
  co_return node;
}

asio::awaitable<Result<Node>> AgentBroker::session_node(std::string bearer) {
  Result<Node> n = co_await authenticate(std::move(bearer));
  co_return n;
}

asio::awaitable<Result<Node>> AgentBroker::authorize_lookup(const AgentLookup& req) {
  // The node owning one of the MACs.
  std::optional<std::string> owner;
  for (const std::string& mac : req.macs) {
    std::string m = mac;
    Result<Port> port = co_await db_.run([&] { return store_.find_port_by_address(m); });
    if (port) {
      owner = port->node_id;
      break;
    }
    if (port.error().code != Code::kNotFound) co_return port.take_error();
  }
  if (!owner) co_return Error(Code::kNotFound, "no node owns these MACs");
  std::string owner_id = *owner;
  Result<Node> node = co_await db_.run([&] { return store_.get_node(owner_id); });
  if (!node) co_return node.take_error();
  if (!req.node.empty() && req.node != node->id && req.node != node->name)
    co_return Error(Code::kNotFound, "node " + req.node + " does not own these MACs");
  std::string node_id = node->id;
  if (req.phase == "ramdisk") {
    Result<std::optional<std::string>> sealed =
        co_await db_.run([&] { return store_.agent_boot_token_sealed(node_id); });
    if (!sealed) co_return sealed.take_error();
    bool good = false;
    if (*sealed) {
      Result<std::string> current = secrets_.open(**sealed);
      good = current && constant_time_equal(sha256_hex(*current), sha256_hex(req.token));
    }
    if (!good) co_return Error(Code::kUnauthenticated, "boot token is unknown or already used");
  } else {
    Result<std::optional<AgentOsSecret>> secret =
        co_await db_.run([&] { return store_.get_agent_os_secret(node_id); });
    if (!secret) co_return secret.take_error();
    bool good = *secret && !req.secret.empty() &&
                constant_time_equal((*secret)->secret_hash, sha256_hex(req.secret));
    if (!good) co_return Error(Code::kUnauthenticated, "os-phase lookup needs the node's deploy secret (missing or wrong)");
  }
  co_return node;
}

asio::awaitable<Result<AgentLookupReply>> AgentBroker::lookup(AgentLookup req) {
  // The credential first: a caller without it learns nothing about the
  // node's state (no 409 with the state in it).
  Result<Node> node = co_await authorize_lookup(req);
  if (!node) co_return node.take_error();
  if (!agent_expected(*node, req.phase)) {
    std::string where = std::string(to_string(node->provision_state));
    if (!node->provision_step.empty()) where += " (step " + node->provision_step + ")";
    co_return Error(Code::kConflict, "node is not expecting a " + req.phase + " agent: it is " + where);
  }

  std::string bearer = random_hex(32);
  AgentSession session;
  session.token_hash = sha256_hex(bearer);
  session.node_id = node->id;
  session.phase = req.phase;
  session.issued_state = std::string(to_string(node->provision_state));
  session.created_at = clock_.now_ms();
  std::string token_hash;
  if (req.phase == "ramdisk") token_hash = sha256_hex(req.token);

  std::vector<EventDraft> events;
  nlohmann::json detail = lookup_detail(req.phase, req.version, node->provision_step);
  events.push_back(event(*node, event_type::kAgentLookup, detail));
  bool os_booted = req.phase == "os" && node->provision_state == S::kDeploying;
  if (os_booted) events.push_back(event(*node, event_type::kAgentOsBooted, detail));

  Status opened = co_await db_.run([&] { return store_.open_agent_session(session, token_hash, events); });
  if (!opened) co_return opened.take_error();
  {
    std::lock_guard<std::mutex> l(mu_);
    last_heartbeat_[node->id] = clock_.now_ms();
  }
  log_.info(os_booted ? "agent lookup: os booted" : "agent lookup",
            {{"node", node->id}, {"phase", req.phase}, {"version", req.version}});
  // Recorded now: with nothing to validate the node is handed over (and this
  // session over) before the agent's first heartbeat.
  if (req.phase == "os" && req.addresses && agent_report_changes(*node, *req.addresses))
    co_await record_addresses(*node, std::move(*req.addresses));
  AgentLookupReply reply;
  reply.node = *node;
  reply.session = bearer;
  reply.heartbeat_interval_s = opt_.heartbeat_interval_s;
  co_return reply;
}

asio::awaitable<void> AgentBroker::record_addresses(Node node, std::vector<std::string> addresses) {
  std::string image_ref = node.image;
  std::string user;
  if (!image_ref.empty() && !addresses.empty()) {
    Result<Image> image = co_await db_.run([&] { return store_.get_image(image_ref); });
    if (image) user = image->ssh_user;
  }
  std::string ssh = ssh_login(user, addresses);
  nlohmann::json detail = addresses_detail(addresses, ssh);
  std::vector<EventDraft> events = {event(node, event_type::kNodeAddresses, detail)};
  std::string node_id = node.id;
  Result<Node> saved = co_await db_.run([&] {
    return store_.update_node_if(node_id, NodeCondition{},
                                 [&](Node& n) {
                                   n.addresses = addresses;
                                   n.address_source = addresses.empty() ? AddressSource::kNone : AddressSource::kAgent;
                                   n.ssh = ssh;
                                   return ok_status();
                                 },
                                 events);
  });
  if (!saved) {
    log_.warn("agent addresses not recorded", {{"node", node_id}, {"error", saved.error().message}});
    co_return;
  }
  log_.info("agent addresses", {{"node", node_id}, {"ssh", ssh}});
}

asio::awaitable<Result<AgentHeartbeatReply>> AgentBroker::heartbeat(std::string bearer, std::string node_ref,
                                                                    std::string busy,
                                                                    std::optional<std::vector<std::string>> addresses) {
  Result<Node> node = co_await authenticate(std::move(bearer));
  if (!node) co_return node.take_error();
  if (!node_ref.empty() && node_ref != node->id)
    co_return Error::invalid("/node", "is not the node of this agent session");
  AgentHeartbeatReply reply;
  reply.heartbeat_interval_s = opt_.heartbeat_interval_s;
  const int64_t now = clock_.now_ms();
  {
    std::lock_guard<std::mutex> l(mu_);
    last_heartbeat_[node->id] = now;
  }
  // The node's command, whichever instance stored it.
  std::string node_id = node->id;
  Result<std::optional<AgentCommandHandout>> handout =
      co_await db_.run([&] { return store_.deliver_agent_command(node_id, now); });
  if (!handout) co_return handout.take_error();
  bool first_delivery = false;
  if (*handout) {
    AgentCommand c;
    c.id = (*handout)->command.id;
    c.name = (*handout)->command.name;
    c.args = std::move((*handout)->command.args);
    reply.command = std::move(c);
    first_delivery = (*handout)->first_delivery;
  }
  if (first_delivery) {
    nlohmann::json detail = sent_detail(*reply.command);
    std::vector<EventDraft> events = {event(*node, event_type::kAgentCommandSent, detail)};
    co_await append(std::move(events));
    log_.info("agent command sent", {{"node", node->id},
                                     {"command", reply.command->name},
                                     {"command_id", reply.command->id}});
  }
  if (!busy.empty()) log_.debug("agent busy", {{"node", node->id}, {"command_id", busy}});
  if (addresses && agent_report_changes(*node, *addresses)) co_await record_addresses(*node, std::move(*addresses));
  co_return reply;
}

asio::awaitable<Status> AgentBroker::post_result(std::string bearer, AgentResultPost post) {
  Result<Node> node = co_await authenticate(std::move(bearer));
  if (!node) co_return node.take_error();
  if (!post.node.empty() && post.node != node->id)
    co_return Error::invalid("/node", "is not the node of this agent session");
  {
    std::lock_guard<std::mutex> l(mu_);
    last_heartbeat_[node->id] = clock_.now_ms();
  }
  // Stored for the waiting run_command, on whichever instance it runs;
  // kConflict for a stale or repeated id.
  std::string node_id = node->id;
  Result<AgentCommandRecord> recorded = co_await db_.run(
      [&] { return store_.record_agent_result(node_id, post.command_id, post.status, post.result, post.error); });
  if (!recorded) co_return recorded.take_error();
  std::string name = recorded->name;
  nlohmann::json detail = result_detail(name, post);
  std::vector<EventDraft> events = {event(*node, event_type::kAgentResult, detail)};
  co_await append(std::move(events));
  log_.info("agent result", {{"node", node->id}, {"command", name}, {"status", post.status}});
  co_return ok_status();
}

asio::awaitable<void> AgentBroker::record_refusal(const Node& node, std::string route,
                                                 std::vector<FieldError> errors) {
  nlohmann::json detail = refusal_detail(route, errors);
  std::vector<EventDraft> events = {event(node, event_type::kNodeAgentInputRefused, detail)};
  co_await append(std::move(events));
  log_.warn("agent input refused", {{"node", node.id}, {"route", route}, {"fields", detail["errors"].dump()}});
}

asio::awaitable<void> AgentBroker::record_refused_input(std::string bearer, std::string route,
                                                        std::vector<FieldError> errors) {
  Result<Node> node = co_await authenticate(std::move(bearer));
  if (!node) co_return;
  co_await record_refusal(*node, std::move(route), std::move(errors));
}

asio::awaitable<void> AgentBroker::record_refused_lookup(AgentLookup credential, std::vector<FieldError> errors) {
  // Only for a caller holding the node's credential: anyone else could
  // flood any node's events by naming its MACs.
  Result<Node> node = co_await authorize_lookup(credential);
  if (!node) co_return;
  co_await record_refusal(*node, "/v1/agent/lookup", std::move(errors));
}

}  // namespace kiln
