#pragma once
// The commands kilnd sends in heartbeat replies (docs/agent-protocol.md,
// "Commands"), behind one interface so the agent loop can be tested with a
// scripted runner and the real one can be tested command by command.

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/deploy/write_image.h"
#include "agent/runtime/power.h"
#include "agent/validate/checks/plan.h"
#include "common/log.h"

namespace kiln::agent {

class CollectiveSession;  // agent/validate/collective/collective_session.h

struct CommandOutcome {
  bool ok = true;
  nlohmann::json result = nlohmann::json::object();
  std::string error;                 // the message kilnd shows when !ok
  std::function<void()> after_post;  // runs once the result is posted (reboot, poweroff)
};

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // Runs one command to completion. Called on the agent's worker thread, one
  // command at a time; blocking (seconds to an hour for write_image). The
  // session is the bearer for downloads from kilnd; never log it.
  virtual CommandOutcome run(const std::string& name, const nlohmann::json& args, const std::string& session) = 0;
};

struct NodeCommandOptions {
  std::string root;                                   // "" = the host
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string version;
  WriteImageOptions write_image;
  PlanOptions plan;  // also where collective "nccl" finds kiln-gpucheck
  // kilnd's URL: the tcp collective's root listens on the local address
  // that reaches it (collective_prepare).
  std::string api_url;
  // What reboot/poweroff do once their result is posted; tests replace it.
  std::function<void(PowerAction)> power;
};

// The real commands: inspect, wipe, write_image, write_config_drive (on the
// disk write_image wrote, unless its args name one), validate, reboot,
// poweroff, collective_prepare and collective_run. An unknown name or bad arguments is
// an error outcome, not a crash. The collective commands share one
// CollectiveSession: prepare leaves a rank-0 participant running in the
// background (a thread or a kiln-gpucheck child) for run to collect; the
// destructor stops it.
class NodeCommands : public CommandRunner {
 public:
  NodeCommands(NodeCommandOptions options, Logger log);
  ~NodeCommands() override;
  NodeCommands(const NodeCommands&) = delete;
  NodeCommands& operator=(const NodeCommands&) = delete;
  CommandOutcome run(const std::string& name, const nlohmann::json& args, const std::string& session) override;

 private:
  NodeCommandOptions options_;
  Logger log_;
  std::unique_ptr<CollectiveSession> collective_;
  std::string last_image_device_;  // where write_image put the image: the config drive goes there
};

}  // namespace kiln::agent
