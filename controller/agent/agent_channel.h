#pragma once
// The controller's side of the in-band driver (drivers/agent/agent_driver.h):
// BrokerChannel reaches a node's agent through the AgentBroker and resolves
// deploy images in the store; RendezvousValidation runs nccl_multinode across
// a node's allocation through the CollectiveRendezvous.
//
// Threading: as the AgentBroker's (any I/O thread; store calls on the
// BlockingPool).

#include <memory>
#include <string>

#include "common/blocking_pool.h"
#include "controller/agent/agent_broker.h"
#include "controller/agent/collective_rendezvous.h"
#include "controller/model/image.h"
#include "controller/store/catalogue_store.h"
#include "drivers/agent/agent_driver.h"

namespace kiln {

// The write_image arguments for `image` (docs/agent-protocol.md). `os_secret`
// (the deploy's secret) and `tls_sha256` (kilnd's certificate pin, "" for
// plain HTTP) are what the agent leaves on the disk for the OS's agent;
// empty ones are left out.
nlohmann::json write_image_args(const Image& image, const std::string& boot_url, const std::string& os_secret = "",
                                const std::string& tls_sha256 = "");

// AgentChannel over the AgentBroker. `broker`, `store` and `db` must outlive it.
class BrokerChannel final : public AgentChannel {
 public:
  BrokerChannel(AgentBroker& broker, CatalogueStore& store, BlockingPool& db)
      : broker_(broker), store_(store), db_(db) {}

  asio::awaitable<Status> forget(std::string node_id) override;
  asio::awaitable<Status> wait_for_agent(std::string node_id, AgentPhase phase, HeldFn still_held) override;
  asio::awaitable<Result<nlohmann::json>> run_command(std::string node_id, std::string name, nlohmann::json args,
                                                      HeldFn still_held) override;
  // The catalogued os image `image`, the broker's boot URL, the deploy's os
  // secret (minted now) and kilnd's TLS pin. Errors: the store's, prefixed
  // "image <ref>: "; kUnprocessable when it is not an os image; the broker's
  // os_secret errors.
  asio::awaitable<Result<nlohmann::json>> write_image_args(std::string node_id, std::string image) override;

 private:
  AgentBroker& broker_;
  CatalogueStore& store_;
  BlockingPool& db_;
};

// MultinodeValidation over the CollectiveRendezvous: due after a passing
// quick plan whose profile asks for nccl_multinode (the gate, judge_report,
// decides "passing"). `rendezvous` must outlive it.
class RendezvousValidation final : public MultinodeValidation {
 public:
  explicit RendezvousValidation(CollectiveRendezvous& rendezvous) : rendezvous_(rendezvous) {}

  bool due(const DriverTarget& t, ValidationPlan plan, const nlohmann::json& report) const override;
  asio::awaitable<Result<nlohmann::json>> add_round(DriverTarget t, nlohmann::json report) override;

 private:
  CollectiveRendezvous& rendezvous_;
};

// Gives `driver` the in-band capabilities over `broker` (BrokerChannel) and,
// when `rendezvous` is not null, the nccl_multinode round. `broker`, `store`,
// `db` and `rendezvous` must outlive the driver.
void add_agent_capabilities(Driver& driver, AgentBroker& broker, CatalogueStore& store, BlockingPool& db,
                            CollectiveRendezvous* rendezvous = nullptr);

}  // namespace kiln
