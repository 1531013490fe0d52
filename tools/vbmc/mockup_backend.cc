#include "tools/vbmc/mockup_backend.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tools/vbmc/redfish_documents.h"

namespace kiln::vbmc {

namespace fs = std::filesystem;

namespace {

using redfish_docs::str;

std::string last_segment(const std::string& uri) {
  std::string u = uri;
  while (!u.empty() && u.back() == '/') u.pop_back();
  auto pos = u.rfind('/');
  return pos == std::string::npos ? u : u.substr(pos + 1);
}

}  // namespace

Result<std::unique_ptr<MockupTree>> MockupTree::open(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(fs::path(dir) / "redfish" / "v1" / "index.json", ec)) {
    return std::unique_ptr<MockupTree>(new MockupTree((fs::path(dir) / "redfish" / "v1").string()));
  }
  if (fs::exists(fs::path(dir) / "index.json", ec)) {
    return std::unique_ptr<MockupTree>(new MockupTree(dir));
  }
  return Error(Code::kInvalidArgument,
               "--mockup " + dir + ": no redfish/v1/index.json or index.json (not a mockup tree)");
}

std::optional<nlohmann::json> MockupTree::load(const std::string& uri) const {
  std::string path = uri;
  const auto q = path.find('?');
  if (q != std::string::npos) path.resize(q);
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const std::string prefix = "/redfish/v1";
  if (path.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  std::string rest = path.substr(prefix.size());
  if (!rest.empty() && rest[0] != '/') return std::nullopt;
  fs::path file = v1_dir_;
  std::stringstream segments(rest);
  std::string seg;
  while (std::getline(segments, seg, '/')) {
    if (seg.empty()) continue;
    if (seg == "." || seg == ".." || seg.find('\\') != std::string::npos) return std::nullopt;
    file /= seg;
  }
  file /= "index.json";
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::stringstream buf;
  buf << in.rdbuf();
  auto j = nlohmann::json::parse(buf.str(), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

Result<std::unique_ptr<MockupBackend>> MockupBackend::create(const MockupTree& tree) {
  auto root = tree.load("/redfish/v1");
  if (!root) return Error(Code::kInvalidArgument, "mockup: no service root");
  std::string systems_uri = "/redfish/v1/Systems";
  if (root->contains("Systems")) systems_uri = str((*root)["Systems"], "@odata.id", "/redfish/v1/Systems");
  auto systems = tree.load(systems_uri);
  if (!systems || !systems->contains("Members")) {
    return Error(Code::kInvalidArgument, "mockup: no Systems collection at " + systems_uri);
  }
  auto out = std::unique_ptr<MockupBackend>(new MockupBackend());
  for (const auto& m : (*systems)["Members"]) {
    const std::string uri = str(m, "@odata.id");
    auto sys = tree.load(uri);
    if (!sys) continue;  // listed but not captured
    Machine machine;
    machine.state.id = last_segment(uri);
    machine.state.name = str(*sys, "Name", machine.state.id.c_str());
    machine.state.uuid = str(*sys, "UUID");
    machine.state.powered_on = str(*sys, "PowerState", "Off") == "On";
    if (sys->contains("Boot")) {
      const auto& b = (*sys)["Boot"];
      machine.state.boot.target = str(b, "BootSourceOverrideTarget", "None");
      machine.state.boot.enabled = str(b, "BootSourceOverrideEnabled", "Disabled");
      machine.state.boot.mode = str(b, "BootSourceOverrideMode", "UEFI");
    }
    // Captures hold nulls where the BMC did not know (GH200: Count): absent.
    const nlohmann::json cpus = sys->value("/ProcessorSummary/Count"_json_pointer, nlohmann::json());
    if (cpus.is_number_integer()) machine.hardware.cpus = cpus.get<int>();
    const nlohmann::json gib = sys->value("/MemorySummary/TotalSystemMemoryGiB"_json_pointer, nlohmann::json());
    if (gib.is_number()) machine.hardware.memory_mib = static_cast<int64_t>(gib.get<double>() * 1024);
    out->ids_.push_back(machine.state.id);
    out->machines_.emplace(machine.state.id, std::move(machine));
  }
  if (out->ids_.empty()) return Error(Code::kInvalidArgument, "mockup: the Systems collection is empty");
  return out;
}

Result<bool> MockupBackend::power_after(bool on, const std::string& t) {
  if (t == "On" || t == "ForceOn") return true;
  if (t == "ForceOff" || t == "GracefulShutdown") return false;
  if (t == "ForceRestart" || t == "GracefulRestart") return on;  // a restart of an off machine does nothing
  if (t == "PowerCycle") return true;
  if (t == "Nmi") return on;
  if (t == "PushPowerButton") return !on;
  return Error(Code::kInvalidArgument, "unknown ResetType " + t);
}

asio::awaitable<Result<std::vector<std::string>>> MockupBackend::machines() { co_return ids_; }

asio::awaitable<Result<MachineState>> MockupBackend::state(std::string id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = machines_.find(id);
  if (it == machines_.end()) co_return Error(Code::kNotFound, "no system " + id);
  co_return it->second.state;
}

asio::awaitable<Status> MockupBackend::reset(std::string id, std::string reset_type) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = machines_.find(id);
  if (it == machines_.end()) co_return Error(Code::kNotFound, "no system " + id);
  auto next = power_after(it->second.state.powered_on, reset_type);
  if (!next) co_return next.take_error();
  it->second.state.powered_on = *next;
  co_return ok_status();
}

asio::awaitable<Status> MockupBackend::set_boot(std::string id, BootOverride boot) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = machines_.find(id);
  if (it == machines_.end()) co_return Error(Code::kNotFound, "no system " + id);
  it->second.state.boot = std::move(boot);
  co_return ok_status();
}

asio::awaitable<Result<MachineHardware>> MockupBackend::hardware(std::string id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = machines_.find(id);
  if (it == machines_.end()) co_return Error(Code::kNotFound, "no system " + id);
  co_return it->second.hardware;
}

}  // namespace kiln::vbmc
