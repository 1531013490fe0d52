#include "controller/agent/agent_channel.h"

#include "controller/model/node.h"
#include "controller/model/validation.h"

namespace kiln {

namespace {

MultinodeRequest multinode_request(const DriverTarget& t) {
  MultinodeRequest m;
  m.node_id = t.node_id;
  m.allocation = t.allocation;
  m.profile = t.profile;
  m.still_held = t.still_held;
  return m;
}

}  // namespace

nlohmann::json write_image_args(const Image& image, const std::string& boot_url, const std::string& os_secret,
                                const std::string& tls_sha256) {
  // What the content route serves: a qcow2's converted raw+zstd file.
  ServedFile served = served_file(image);
  nlohmann::json a = {{"url", boot_url + "/v1/images/" + image.id + "/content"},
                      {"sha256", served.sha256},
                      {"size", served.size},
                      {"format", served.format},
                      {"image", image.name},
                      {"device", ""}};
  // Known: the agent refuses a smaller disk before writing a byte.
  if (image.virtual_size > 0) a["virtual_size"] = image.virtual_size;
  if (!os_secret.empty()) a["os_secret"] = os_secret;
  if (!tls_sha256.empty()) a["tls_sha256"] = tls_sha256;
  return a;
}

asio::awaitable<Status> BrokerChannel::forget(std::string node_id) {
  Status s = co_await broker_.forget(node_id);
  co_return s;
}

asio::awaitable<Status> BrokerChannel::wait_for_agent(std::string node_id, AgentPhase phase, HeldFn still_held) {
  Status s = co_await broker_.wait_for_agent(node_id, phase, still_held);
  co_return s;
}

asio::awaitable<Result<nlohmann::json>> BrokerChannel::run_command(std::string node_id, std::string name,
                                                                   nlohmann::json args, HeldFn still_held) {
  Result<nlohmann::json> r = co_await broker_.run_command(node_id, name, args, still_held);
  co_return r;
}

asio::awaitable<Result<nlohmann::json>> BrokerChannel::write_image_args(std::string node_id, std::string image) {
  std::string ref = image;
  Result<Image> found = co_await db_.run([&] { return store_.get_image(ref); });
  if (!found) co_return Error(found.error().code, "image " + ref + ": " + found.error().message);
  if (found->kind != "os") co_return Error(Code::kUnprocessable, "image " + ref + " is not an os image");
  std::string url = broker_.boot_url();
  // The deploy's os secret goes onto the disk with the image: the OS's
  // agent presents it at lookup (docs/agent-protocol.md, "Trust").
  Node node;
  node.id = node_id;
  Result<std::string> secret = co_await broker_.os_secret(node);
  if (!secret) co_return secret.take_error();
  std::string pin = broker_.tls_pin();
  nlohmann::json args = kiln::write_image_args(*found, url, *secret, pin);
  co_return args;
}

// nccl_multinode runs only after the node's own quick plan passed the gate:
// a node about to be quarantined would only hold its peers up.
bool RendezvousValidation::due(const DriverTarget& t, ValidationPlan plan, const nlohmann::json& report) const {
  if (plan != ValidationPlan::kQuick || !CollectiveRendezvous::wanted(t.profile)) return false;
  return judge_report(report, t.profile, ValidationPlan::kQuick, 1).verdict == GateVerdict::kPass;
}

asio::awaitable<Result<nlohmann::json>> RendezvousValidation::add_round(DriverTarget t, nlohmann::json report) {
  MultinodeRequest m = multinode_request(t);
  Result<nlohmann::json> check = co_await rendezvous_.run_check(m);
  if (!check) co_return check.take_error();
  add_check_to_report(report, *check);
  co_return report;
}

void add_agent_capabilities(Driver& driver, AgentBroker& broker, CatalogueStore& store, BlockingPool& db,
                            CollectiveRendezvous* rendezvous) {
  auto channel = std::make_shared<BrokerChannel>(broker, store, db);
  std::shared_ptr<RendezvousValidation> multinode;
  if (rendezvous != nullptr) multinode = std::make_shared<RendezvousValidation>(*rendezvous);
  add_agent_capabilities(driver, std::move(channel), std::move(multinode));
}

}  // namespace kiln
