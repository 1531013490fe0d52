#include "drivers/agent/agent_driver.h"

#include "common/crypto.h"
#include "common/machine_values.h"

namespace kiln {

namespace {

nlohmann::json empty_object() { return nlohmann::json::object(); }

nlohmann::json wipe_args() { return {{"full_overwrite", false}}; }

// The ISO travels in the command itself (kConfigDriveMaxBytes caps it):
// no route to serve it, no second credential.
nlohmann::json config_drive_args(const std::string& iso) { return {{"iso_base64", base64_encode(iso)}}; }

// The node's profile (DriverTarget::profile, filled by the workflow) carries
// the thresholds the agent's checks compare against.
nlohmann::json validate_args(ValidationPlan plan, const nlohmann::json& profile) {
  return {{"plan", std::string(to_string(plan))}, {"profile", profile.is_object() ? profile : nlohmann::json::object()}};
}

class AgentControl final : public AgentInterface {
 public:
  explicit AgentControl(std::shared_ptr<AgentChannel> channel) : channel_(std::move(channel)) {}
  asio::awaitable<Status> forget(const DriverTarget& t) override {
    std::string node_id = t.node_id;
    Status s = co_await channel_->forget(node_id);
    co_return s;
  }
  asio::awaitable<Status> wait_for_agent(const DriverTarget& t, AgentPhase phase) override {
    std::string node_id = t.node_id;
    HeldFn held = t.still_held;
    Status s = co_await channel_->wait_for_agent(node_id, phase, held);
    co_return s;
  }

 private:
  std::shared_ptr<AgentChannel> channel_;
};

class AgentInspect final : public InspectInterface {
 public:
  AgentInspect(std::shared_ptr<AgentChannel> channel, std::unique_ptr<InspectInterface> out_of_band)
      : channel_(std::move(channel)), oob_(std::move(out_of_band)) {}
  bool in_band(const DriverTarget& t) const override { return !t.macs.empty() || !oob_; }
  asio::awaitable<Result<nlohmann::json>> inspect(const DriverTarget& t) override {
    if (!in_band(t)) {
      Result<nlohmann::json> r = co_await oob_->inspect(t);
      co_return r;
    }
    std::string node_id = t.node_id;
    std::string name = "inspect";
    nlohmann::json args = empty_object();
    HeldFn held = t.still_held;
    Result<nlohmann::json> inv = co_await channel_->run_command(node_id, name, args, held);
    if (!inv) co_return inv;
    Status ok = check_inventory(*inv);
    if (!ok) co_return ok.take_error();
    clean_inventory_strings(*inv);
    co_return inv;
  }

 private:
  std::shared_ptr<AgentChannel> channel_;
  std::unique_ptr<InspectInterface> oob_;
};

class AgentClean final : public CleanInterface {
 public:
  explicit AgentClean(std::shared_ptr<AgentChannel> channel) : channel_(std::move(channel)) {}
  asio::awaitable<Status> clean(const DriverTarget& t) override {
    std::string node_id = t.node_id;
    std::string name = "wipe";
    nlohmann::json args = wipe_args();
    HeldFn held = t.still_held;
    Result<nlohmann::json> r = co_await channel_->run_command(node_id, name, args, held);
    if (!r) co_return r.take_error();
    co_return ok_status();
  }

 private:
  std::shared_ptr<AgentChannel> channel_;
};

class AgentDeploy final : public DeployInterface {
 public:
  explicit AgentDeploy(std::shared_ptr<AgentChannel> channel) : channel_(std::move(channel)) {}
  asio::awaitable<Status> deploy(const DriverTarget& t, const DeployRequest& req) override {
    std::string node_id = t.node_id;
    std::string image = req.image;
    Result<nlohmann::json> args = co_await channel_->write_image_args(node_id, image);
    if (!args) co_return args.take_error();
    std::string name = "write_image";
    nlohmann::json command_args = *args;
    HeldFn held = t.still_held;
    Result<nlohmann::json> r = co_await channel_->run_command(node_id, name, command_args, held);
    if (!r) co_return r.take_error();
    co_return ok_status();
  }
  asio::awaitable<Status> write_config_drive(const DriverTarget& t, const std::string& iso) override {
    std::string node_id = t.node_id;
    std::string name = "write_config_drive";
    nlohmann::json args = config_drive_args(iso);
    HeldFn held = t.still_held;
    Result<nlohmann::json> r = co_await channel_->run_command(node_id, name, args, held);
    if (!r) co_return r.take_error();
    co_return ok_status();
  }
  // Tear-down is cleaning's wipe; nothing to do on its own.
  asio::awaitable<Status> undeploy(const DriverTarget&) override { co_return ok_status(); }

 private:
  std::shared_ptr<AgentChannel> channel_;
};

class AgentValidate final : public ValidateInterface {
 public:
  AgentValidate(std::shared_ptr<AgentChannel> channel, std::shared_ptr<MultinodeValidation> multinode)
      : channel_(std::move(channel)), multinode_(std::move(multinode)) {}
  asio::awaitable<Result<nlohmann::json>> validate(const DriverTarget& t, ValidationPlan plan) override {
    std::string node_id = t.node_id;
    std::string name = "validate";
    nlohmann::json args = validate_args(plan, t.profile);
    HeldFn held = t.still_held;
    Result<nlohmann::json> r = co_await channel_->run_command(node_id, name, args, held);
    if (!r || multinode_ == nullptr || !multinode_->due(t, plan, *r)) co_return r;
    DriverTarget target = t;
    nlohmann::json report = *r;
    Result<nlohmann::json> with_round = co_await multinode_->add_round(target, report);
    co_return with_round;
  }

 private:
  std::shared_ptr<AgentChannel> channel_;
  std::shared_ptr<MultinodeValidation> multinode_;
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
  // Interface names are identifiers people and tools use (ip(8), ssh_config
  // comments, the portal), not free text: a strict charset, refused otherwise.
  const nlohmann::json& nics = inventory["nics"];
  if (nics.size() > kMaxInventoryNics)
    return Error(Code::kUnprocessable, "inspect: the agent's inventory: nics has more than " +
                                           std::to_string(kMaxInventoryNics) + " entries");
  for (std::size_t i = 0; i < nics.size(); ++i) {
    const std::string at = "inspect: the agent's inventory: nics/" + std::to_string(i);
    if (!nics[i].is_object()) return Error(Code::kUnprocessable, at + " must be an object");
    const nlohmann::json* name = nics[i].contains("name") ? &nics[i]["name"] : nullptr;
    if (name == nullptr || !name->is_string() || !parse_interface_name(name->get_ref<const std::string&>()))
      return Error(Code::kUnprocessable, at + "/name must be an interface name (1-15 of A-Z a-z 0-9 _ . -)");
  }
  return ok_status();
}

void clean_inventory_strings(nlohmann::json& inventory) {
  // Iterative: the depth is bounded by parse_json already, but a walk that
  // cannot overflow the stack needs no argument.
  std::vector<nlohmann::json*> todo = {&inventory};
  while (!todo.empty()) {
    nlohmann::json* j = todo.back();
    todo.pop_back();
    if (j->is_string()) {
      *j = printable_field(j->get_ref<const std::string&>(), kMaxInventoryText);
    } else if (j->is_structured()) {
      for (auto& child : *j) todo.push_back(&child);
    }
  }
}

void add_agent_capabilities(Driver& driver, std::shared_ptr<AgentChannel> channel,
                            std::shared_ptr<MultinodeValidation> multinode) {
  driver.agent = std::make_unique<AgentControl>(channel);
  driver.inspect = std::make_unique<AgentInspect>(channel, std::move(driver.inspect));
  driver.clean = std::make_unique<AgentClean>(channel);
  driver.deploy = std::make_unique<AgentDeploy>(channel);
  driver.validate = std::make_unique<AgentValidate>(channel, std::move(multinode));
}

}  // namespace kiln
