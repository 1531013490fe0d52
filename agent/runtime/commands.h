#pragma once
// The commands kilnd sends in heartbeat replies (docs/agent-protocol.md,
// "Commands"), behind one interface so the agent loop can be tested with a
// scripted runner and the real one can be tested command by command.

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/deploy/write_image.h"
#include "agent/runtime/power.h"
#include "agent/validate/checks/plan.h"
#include "common/log.h"

namespace kiln::agent {

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
  PlanOptions plan;
  // What reboot/poweroff do once their result is posted; tests replace it.
  std::function<void(PowerAction)> power;
};

// The real commands: inspect, wipe, write_image, validate, reboot, poweroff.
// An unknown name or bad arguments is an error outcome, not a crash.
class NodeCommands : public CommandRunner {
 public:
  NodeCommands(NodeCommandOptions options, Logger log);
  CommandOutcome run(const std::string& name, const nlohmann::json& args, const std::string& session) override;

 private:
  NodeCommandOptions options_;
  Logger log_;
};

}  // namespace kiln::agent
