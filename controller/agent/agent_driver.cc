#include "controller/agent/agent_driver.h"

#include "controller/model/validation.h"

namespace kiln {

namespace {

nlohmann::json empty_object() { return nlohmann::json::object(); }

nlohmann::json wipe_args() { return {{"full_overwrite", false}}; }

// The node's profile (DriverTarget::profile, filled by the workflow) carries
// the thresholds the agent's checks compare against.
nlohmann::json validate_args(const std::string& plan, const nlohmann::json& profile) {
  return {{"plan", plan}, {"profile", profile.is_object() ? profile : nlohmann::json::object()}};
}

class AgentControl final : public AgentInterface {
 public:
  explicit AgentControl(AgentBroker& broker) : broker_(broker) {}
  asio::awaitable<Status> forget(const DriverTarget& t) override {
    std::string node_id = t.node_id;
    Status s = co_await broker_.forget(node_id);
    co_return s;
  }
  asio::awaitable<Status> wait_for_agent(const DriverTarget& t, AgentPhase phase) override {
    std::string node_id = t.node_id;
    StillHeld held = t.still_held;
    Status s = co_await broker_.wait_for_agent(node_id, phase, held);
    co_return s;
  }

 private:
  AgentBroker& broker_;
};

class AgentInspect final : public InspectInterface {
 public:
  AgentInspect(AgentBroker& broker, std::unique_ptr<InspectInterface> out_of_band)
      : broker_(broker), oob_(std::move(out_of_band)) {}
  bool in_band(const DriverTarget& t) const override { return !t.macs.empty() || !oob_; }
  asio::awaitable<Result<nlohmann::json>> inspect(const DriverTarget& t) override {
    if (!in_band(t)) {
      Result<nlohmann::json> r = co_await oob_->inspect(t);
      co_return r;
    }
    std::string node_id = t.node_id;
    std::string name = "inspect";
    nlohmann::json args = empty_object();
    StillHeld held = t.still_held;
    Result<nlohmann::json> inv = co_await broker_.run_command(node_id, name, args, held);
    if (!inv) co_return inv;
    Status ok = check_inventory(*inv);
    if (!ok) co_return ok.take_error();
    co_return inv;
  }

 private:
  AgentBroker& broker_;
  std::unique_ptr<InspectInterface> oob_;
};

class AgentClean final : public CleanInterface {
 public:
  explicit AgentClean(AgentBroker& broker) : broker_(broker) {}
  asio::awaitable<Status> clean(const DriverTarget& t) override {
    std::string node_id = t.node_id;
    std::string name = "wipe";
    nlohmann::json args = wipe_args();
    StillHeld held = t.still_held;
    Result<nlohmann::json> r = co_await broker_.run_command(node_id, name, args, held);
    if (!r) co_return r.take_error();
    co_return ok_status();
  }

 private:
  AgentBroker& broker_;
};

class AgentDeploy final : public DeployInterface {
 public:
  AgentDeploy(AgentBroker& broker, NodeStore& store, BlockingPool& db) : broker_(broker), store_(store), db_(db) {}
  asio::awaitable<Status> deploy(const DriverTarget& t, const DeployRequest& req) override {
    std::string ref = req.image;
    Result<Image> image = co_await db_.run([&] { return store_.get_image(ref); });
    if (!image) co_return Error(image.error().code, "image " + ref + ": " + image.error().message);
    if (image->kind != "os") co_return Error(Code::kUnprocessable, "image " + ref + " is not an os image");
    std::string node_id = t.node_id;
    std::string name = "write_image";
    std::string url = broker_.boot_url();
    // The deploy's os secret goes onto the disk with the image: the OS's
    // agent presents it at lookup (docs/agent-protocol.md, "Trust").
    Node node;
    node.id = node_id;
    Result<std::string> secret = co_await broker_.os_secret(node);
    if (!secret) co_return secret.take_error();
    std::string pin = broker_.tls_pin();
    nlohmann::json args = write_image_args(*image, url, *secret, pin);
    StillHeld held = t.still_held;
    Result<nlohmann::json> r = co_await broker_.run_command(node_id, name, args, held);
    if (!r) co_return r.take_error();
    co_return ok_status();
  }
  // Tear-down is cleaning's wipe; nothing to do on its own.
  asio::awaitable<Status> undeploy(const DriverTarget&) override { co_return ok_status(); }

 private:
  AgentBroker& broker_;
  NodeStore& store_;
  BlockingPool& db_;
};

MultinodeRequest multinode_request(const DriverTarget& t) {
  MultinodeRequest m;
  m.node_id = t.node_id;
  m.allocation = t.allocation;
  m.profile = t.profile;
  m.still_held = t.still_held;
  return m;
}

// nccl_multinode runs only after the node's own quick plan passed the gate:
// a node about to be quarantined would only hold its peers up.
bool multinode_due(const std::string& plan, const DriverTarget& t, const nlohmann::json& report) {
  if (plan != "quick" || !CollectiveRendezvous::wanted(t.profile)) return false;
  return judge_report(report, t.profile, "quick", 1).verdict == GateVerdict::kPass;
}

class AgentValidate final : public ValidateInterface {
 public:
  AgentValidate(AgentBroker& broker, CollectiveRendezvous* rendezvous) : broker_(broker), rendezvous_(rendezvous) {}
  asio::awaitable<Result<nlohmann::json>> validate(const DriverTarget& t, const std::string& plan) override {
    std::string node_id = t.node_id;
    std::string name = "validate";
    std::string agent_plan = plan == "burn_in" ? std::string("full") : plan;
    nlohmann::json args = validate_args(agent_plan, t.profile);
    StillHeld held = t.still_held;
    Result<nlohmann::json> r = co_await broker_.run_command(node_id, name, args, held);
    if (!r || rendezvous_ == nullptr || !multinode_due(plan, t, *r)) co_return r;
    MultinodeRequest m = multinode_request(t);
    Result<nlohmann::json> check = co_await rendezvous_->run_check(m);
    if (!check) co_return check.take_error();
    add_check_to_report(*r, *check);
    co_return r;
  }

 private:
  AgentBroker& broker_;
  CollectiveRendezvous* rendezvous_;
};

}  // namespace

const std::vector<std::string>& inventory_required_keys() {
  // schemas/inventory.schema.json "required" (agent/inventory/inventory.cc
  // writes them); tests/unit/agent_broker checks this list against the schema.
  static const std::vector<std::string> keys = {"cpu", "memory", "disks", "nics", "boot_mode", "hypervisor"};
  return keys;
}

Status check_inventory(const nlohmann::json& inventory) {
  if (!inventory.is_object()) return Error(Code::kUnprocessable, "inspect: the agent's inventory is not an object");
  std::string missing;
  for (const std::string& k : inventory_required_keys()) {
    if (inventory.contains(k)) continue;
    if (!missing.empty()) missing += ", ";
    missing += k;
  }
  if (!missing.empty())
    return Error(Code::kUnprocessable, "inspect: the agent's inventory lacks required keys: " + missing);
  // The shapes of the required members (schemas/inventory.schema.json).
  for (const char* k : {"cpu", "memory", "hypervisor"})
    if (!inventory[k].is_object())
      return Error(Code::kUnprocessable, std::string("inspect: the agent's inventory: ") + k + " must be an object");
  for (const char* k : {"disks", "nics"})
    if (!inventory[k].is_array())
      return Error(Code::kUnprocessable, std::string("inspect: the agent's inventory: ") + k + " must be an array");
  if (!inventory["boot_mode"].is_string())
    return Error(Code::kUnprocessable, "inspect: the agent's inventory: boot_mode must be a string");
  return ok_status();
}

nlohmann::json write_image_args(const Image& image, const std::string& boot_url, const std::string& os_secret,
                                const std::string& tls_sha256) {
  nlohmann::json a = {{"url", boot_url + "/v1/images/" + image.id + "/content"},
                      {"sha256", image.sha256},
                      {"size", image.size},
                      {"format", image.format.empty() ? std::string("raw") : image.format},
                      {"device", ""}};
  if (!os_secret.empty()) a["os_secret"] = os_secret;
  if (!tls_sha256.empty()) a["tls_sha256"] = tls_sha256;
  return a;
}

void add_agent_capabilities(Driver& driver, AgentBroker& broker, NodeStore& store, BlockingPool& db,
                            CollectiveRendezvous* rendezvous) {
  driver.agent = std::make_unique<AgentControl>(broker);
  driver.inspect = std::make_unique<AgentInspect>(broker, std::move(driver.inspect));
  driver.clean = std::make_unique<AgentClean>(broker);
  driver.deploy = std::make_unique<AgentDeploy>(broker, store, db);
  driver.validate = std::make_unique<AgentValidate>(broker, rendezvous);
}

}  // namespace kiln
