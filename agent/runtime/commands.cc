#include "agent/runtime/commands.h"

#include "agent/deploy/config_drive_partition.h"
#include "agent/deploy/wipe.h"
#include "agent/inventory/inventory.h"
#include "agent/validate/collective/collective_session.h"
#include "common/crypto.h"

namespace kiln::agent {

namespace {

CommandOutcome failure(std::string message, nlohmann::json result = nlohmann::json::object()) {
  CommandOutcome o;
  o.ok = false;
  o.error = std::move(message);
  o.result = std::move(result);
  return o;
}

template <typename T>
T arg_or(const nlohmann::json& args, const char* key, T fallback) {
  if (!args.is_object() || !args.contains(key) || args[key].is_null()) return fallback;
  return args[key].get<T>();
}

}  // namespace

NodeCommands::NodeCommands(NodeCommandOptions options, Logger log) : options_(std::move(options)), log_(std::move(log)) {
  if (!options_.power) options_.power = [l = log_](PowerAction a) { execute_power_action(a, l); };
  CollectiveSessionOptions c;
  c.api_url = options_.api_url;
  c.gpucheck.path = options_.plan.gpucheck;
  c.gpucheck.agent_dir = options_.plan.agent_dir;
  c.gpucheck.search_path = options_.plan.search_path;
  collective_ = std::make_unique<CollectiveSession>(std::move(c), log_);
}

NodeCommands::~NodeCommands() = default;

CommandOutcome NodeCommands::run(const std::string& name, const nlohmann::json& args, const std::string& session) {
  try {
    if (name == "inspect") {
      InventoryOptions o;
      o.root = options_.root;
      o.nvml_library = options_.nvml_library;
      o.probe_cpuid = options_.root.empty() || options_.root == "/";
      o.agent_version = options_.version;
      CommandOutcome out;
      out.result = collect_inventory(o);
      return out;
    }
    if (name == "wipe") {
      WipeOptions o;
      o.full_overwrite = arg_or<bool>(args, "full_overwrite", false);
      auto r = wipe_all_disks(options_.root, o, log_);
      if (!r.error.empty()) return failure(r.error, r.result);
      CommandOutcome out;
      out.result = std::move(r.result);
      return out;
    }
    if (name == "write_image") {
      WriteImageRequest req;
      req.url = arg_or<std::string>(args, "url", "");
      req.sha256 = arg_or<std::string>(args, "sha256", "");
      req.size = arg_or<std::uint64_t>(args, "size", 0);
      req.format = arg_or<std::string>(args, "format", "raw");
      req.virtual_size = arg_or<std::uint64_t>(args, "virtual_size", 0);
      req.image = arg_or<std::string>(args, "image", "");
      req.device = arg_or<std::string>(args, "device", "");
      req.token = session;
      if (req.sha256.empty()) return failure("write_image: sha256 is required");
      const std::string os_secret = arg_or<std::string>(args, "os_secret", "");
      if (!os_secret.empty()) {
        // Checked like a seed read back from the disk would be.
        AgentSeed seed;
        seed.os_secret = os_secret;
        seed.tls_sha256 = arg_or<std::string>(args, "tls_sha256", "");
        Result<AgentSeed> checked = parse_seed_env(render_seed_env(seed));
        if (!checked) return failure("write_image: " + checked.error().message);
        req.seed = *checked;
      }
      WriteImageOptions o = options_.write_image;
      o.root = options_.root;
      auto r = write_image(req, o, log_);
      if (!r) return failure(r.error().message);
      last_image_device_ = r->device;
      CommandOutcome out;
      out.result = to_json(*r);
      return out;
    }
    if (name == "write_config_drive") {
      std::string device = arg_or<std::string>(args, "device", "");
      if (device.empty()) device = last_image_device_;
      if (device.empty())
        return failure("write_config_drive: no image was written by this agent and no device was named");
      Result<std::string> iso = base64_decode(arg_or<std::string>(args, "iso_base64", ""));
      if (!iso) return failure("write_config_drive: iso_base64: " + iso.error().message);
      auto r = write_config_drive(device, *iso, log_);
      if (!r) return failure("write_config_drive: " + r.error().message);
      CommandOutcome out;
      out.result = to_json(*r);
      return out;
    }
    if (name == "validate") {
      const std::string plan = arg_or<std::string>(args, "plan", "quick");
      const nlohmann::json profile = args.is_object() && args.contains("profile") ? args["profile"] : nlohmann::json::object();
      auto report = run_plan(plan, profile, options_.plan);
      if (!report) return failure(report.error().message);
      CommandOutcome out;
      out.result = std::move(*report);
      return out;
    }
    if (name == "collective_prepare" || name == "collective_run") {
      auto r = name == "collective_prepare" ? collective_->prepare(args) : collective_->run(args);
      if (!r) return failure(r.error().message);
      CommandOutcome out;
      out.result = std::move(*r);
      return out;
    }
    if (name == "reboot" || name == "poweroff") {
      CommandOutcome out;
      const PowerAction a = name == "reboot" ? PowerAction::kReboot : PowerAction::kPowerOff;
      out.after_post = [power = options_.power, a] { power(a); };
      return out;
    }
  } catch (const nlohmann::json::exception& e) {
    return failure(name + ": bad arguments: " + e.what());
  } catch (const std::exception& e) {
    return failure(name + ": " + e.what());
  }
  return failure("unknown command '" + name + "'");
}

}  // namespace kiln::agent
