// The Redfish documents and replies of kiln-vbmc (redfish_documents.h).

#include "tools/vbmc/redfish_documents.h"

namespace kiln::vbmc::redfish_docs {

namespace {

const std::string kRegistryPrefix = "Base.1.8.";

json error_body(const std::string& message_id, const std::string& message) {
  return json{{"error",
               {{"code", kRegistryPrefix + message_id},
                {"message", message},
                {"@Message.ExtendedInfo",
                 json::array({{{"@odata.type", "#Message.v1_1_1.Message"},
                               {"MessageId", kRegistryPrefix + message_id},
                               {"Message", message},
                               {"Severity", "Critical"},
                               {"Resolution", "See the message."}}})}}}};
}

json string_list(const std::vector<std::string>& v) {
  json a = json::array();
  for (const auto& s : v) a.push_back(s);
  return a;
}

}  // namespace

std::string str(const json& j, const char* key, const char* fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string(fallback);
}

namespace {

http::Response bare_response(int status) {
  http::Response r;
  r.result(static_cast<unsigned>(status));
  r.set(http::bhttp::field::server, "kiln-vbmc");
  r.set("OData-Version", "4.0");
  return r;
}

}  // namespace

http::Response make_response(int status, const json& body) {
  if (body.is_null()) return bare_response(status);
  return make_text_response(status, body.dump(2));
}

http::Response make_text_response(int status, std::string json_text) {
  http::Response r = bare_response(status);
  r.set(http::bhttp::field::content_type, "application/json; charset=utf-8");
  r.body() = std::move(json_text);
  return r;
}

http::Response error(int status, const std::string& message_id, const std::string& message) {
  return make_response(status, error_body(message_id, message));
}

json link(const std::string& uri) { return json{{"@odata.id", uri}}; }

void add_settings_link(json& sys, const std::string& uri) {
  sys["@Redfish.Settings"] = {{"@odata.type", "#Settings.v1_3_5.Settings"},
                              {"SettingsObject", link(uri + "/Settings")}};
}

json settings_resource(const BootOverride& boot, const std::string& uri, const std::string& etag) {
  return json{{"@odata.id", uri + "/Settings"},
              {"@odata.type", "#ComputerSystem.v1_20_0.ComputerSystem"},
              {"@odata.etag", etag},
              {"Id", "Settings"},
              {"Name", "Pending settings of " + uri},
              {"Boot",
               {{"BootSourceOverrideTarget", boot.target},
                {"BootSourceOverrideEnabled", boot.enabled},
                {"BootSourceOverrideMode", boot.mode}}}};
}

json version_pointer() { return json{{"v1", "/redfish/v1/"}}; }

std::vector<std::string> default_boot_targets() { return {"None", "Pxe", "Hdd", "Cd", "UefiHttp"}; }

json collection(const std::string& uri, const std::string& type, const std::string& name,
                const std::vector<std::string>& members) {
  json m = json::array();
  for (const auto& u : members) m.push_back(link(u));
  return json{{"@odata.id", uri},
              {"@odata.type", "#" + type + "." + type},
              {"Name", name},
              {"Members@odata.count", members.size()},
              {"Members", m}};
}

json generated_root() {
  return json{{"@odata.id", kRoot},
              {"@odata.type", "#ServiceRoot.v1_5_0.ServiceRoot"},
              {"Id", "RootService"},
              {"Name", "Kiln virtual BMC"},
              {"RedfishVersion", "1.11.0"},
              {"Systems", link(kSystems)},
              {"SessionService", link(kSessionService)},
              {"Links", {{"Sessions", link(kSessions)}}}};
}

json session_service() {
  return json{{"@odata.id", kSessionService},
              {"@odata.type", "#SessionService.v1_1_8.SessionService"},
              {"Id", "SessionService"},
              {"Name", "Session Service"},
              {"ServiceEnabled", true},
              {"SessionTimeout", 1800},
              {"Sessions", link(kSessions)}};
}

json session_resource(const std::string& id, const std::string& user) {
  return json{{"@odata.id", kSessions + "/" + id},
              {"@odata.type", "#Session.v1_3_0.Session"},
              {"Id", id},
              {"Name", "User Session"},
              {"UserName", user}};
}

json generated_system(const MachineState& s, const MachineHardware& h, const std::string& uri,
                      const std::vector<std::string>& resets, const std::string& etag) {
  return json{
      {"@odata.id", uri},
      {"@odata.type", "#ComputerSystem.v1_14_0.ComputerSystem"},
      {"@odata.etag", etag},
      {"Id", s.id},
      {"Name", s.name},
      {"UUID", s.uuid},
      {"SystemType", "Virtual"},
      {"Manufacturer", "Kiln"},
      {"Model", "libvirt domain"},
      {"SerialNumber", s.uuid},
      {"PowerState", s.powered_on ? "On" : "Off"},
      {"Status", {{"State", "Enabled"}, {"Health", "OK"}}},
      {"ProcessorSummary", {{"Count", h.cpus}, {"Model", "Virtual CPU"}}},
      {"MemorySummary", {{"TotalSystemMemoryGiB", static_cast<double>(h.memory_mib) / 1024.0}}},
      {"Boot",
       {{"BootSourceOverrideTarget", s.boot.target},
        {"BootSourceOverrideEnabled", s.boot.enabled},
        {"BootSourceOverrideMode", s.boot.mode},
        {"BootSourceOverrideTarget@Redfish.AllowableValues", json::array({"None", "Pxe", "Hdd", "Cd", "UefiHttp"})}}},
      {"Processors", link(uri + "/Processors")},
      {"Memory", link(uri + "/Memory")},
      {"EthernetInterfaces", link(uri + "/EthernetInterfaces")},
      {"Storage", link(uri + "/Storage")},
      {"Actions",
       {{"#ComputerSystem.Reset",
         {{"target", uri + "/Actions/ComputerSystem.Reset"},
          {"ResetType@Redfish.AllowableValues", string_list(resets)}}}}}};
}

json generated_part(const std::string& uri, const std::string& rest, const MachineHardware& h) {
  if (rest == "/Processors") {
    return collection(uri + rest, "ProcessorCollection", "Processors", {uri + rest + "/CPU0"});
  }
  if (rest == "/Processors/CPU0") {
    return json{{"@odata.id", uri + rest},
                {"@odata.type", "#Processor.v1_7_0.Processor"},
                {"Id", "CPU0"},
                {"Name", "Virtual CPU"},
                {"ProcessorType", "CPU"},
                {"ProcessorArchitecture", "x86"},
                {"Model", "Virtual CPU"},
                {"TotalCores", h.cpus},
                {"TotalThreads", h.cpus},
                {"Status", {{"State", "Enabled"}, {"Health", "OK"}}}};
  }
  if (rest == "/Memory") {
    return collection(uri + rest, "MemoryCollection", "Memory", {uri + rest + "/DIMM0"});
  }
  if (rest == "/Memory/DIMM0") {
    return json{{"@odata.id", uri + rest},
                {"@odata.type", "#Memory.v1_7_0.Memory"},
                {"Id", "DIMM0"},
                {"Name", "Virtual memory"},
                {"CapacityMiB", h.memory_mib},
                {"Status", {{"State", "Enabled"}, {"Health", "OK"}}}};
  }
  if (rest == "/EthernetInterfaces") {
    std::vector<std::string> m;
    for (std::size_t i = 0; i < h.macs.size(); ++i) m.push_back(uri + rest + "/nic" + std::to_string(i));
    return collection(uri + rest, "EthernetInterfaceCollection", "Ethernet Interfaces", m);
  }
  for (std::size_t i = 0; i < h.macs.size(); ++i) {
    if (rest == "/EthernetInterfaces/nic" + std::to_string(i)) {
      return json{{"@odata.id", uri + rest},
                  {"@odata.type", "#EthernetInterface.v1_6_0.EthernetInterface"},
                  {"Id", "nic" + std::to_string(i)},
                  {"Name", "nic" + std::to_string(i)},
                  {"MACAddress", h.macs[i]},
                  {"PermanentMACAddress", h.macs[i]},
                  {"Status", {{"State", "Enabled"}, {"Health", "OK"}}}};
    }
  }
  if (rest == "/Storage") return collection(uri + rest, "StorageCollection", "Storage", {uri + rest + "/1"});
  if (rest == "/Storage/1") {
    json drives = json::array();
    for (std::size_t i = 0; i < h.disks.size(); ++i) drives.push_back(link(uri + rest + "/Drives/" + std::to_string(i)));
    return json{{"@odata.id", uri + rest},
                {"@odata.type", "#Storage.v1_8_0.Storage"},
                {"Id", "1"},
                {"Name", "Virtual storage"},
                {"Drives", drives},
                {"Drives@odata.count", h.disks.size()}};
  }
  for (std::size_t i = 0; i < h.disks.size(); ++i) {
    if (rest == "/Storage/1/Drives/" + std::to_string(i)) {
      json cap = h.disks[i].size_bytes > 0 ? json(h.disks[i].size_bytes) : json();
      return json{{"@odata.id", uri + rest},
                  {"@odata.type", "#Drive.v1_9_0.Drive"},
                  {"Id", std::to_string(i)},
                  {"Name", h.disks[i].name},
                  {"Model", "Virtual disk"},
                  {"CapacityBytes", cap},
                  {"MediaType", "SSD"},
                  {"Protocol", "PCIe"},
                  {"Status", {{"State", "Enabled"}, {"Health", "OK"}}}};
    }
  }
  return nullptr;
}

json overlay_system(json sys, const MachineState& s, const std::string& etag,
                    const std::vector<std::string>& forced_resets) {
  sys["PowerState"] = s.powered_on ? "On" : "Off";
  if (!sys.contains("Boot") || !sys["Boot"].is_object()) sys["Boot"] = json::object();
  sys["Boot"]["BootSourceOverrideTarget"] = s.boot.target;
  sys["Boot"]["BootSourceOverrideEnabled"] = s.boot.enabled;
  sys["Boot"]["BootSourceOverrideMode"] = s.boot.mode;
  sys["@odata.etag"] = etag;
  if (!forced_resets.empty() && sys.contains("Actions") && sys["Actions"].contains("#ComputerSystem.Reset")) {
    json& a = sys["Actions"]["#ComputerSystem.Reset"];
    a.erase("@Redfish.ActionInfo");
    a["ResetType@Redfish.AllowableValues"] = string_list(forced_resets);
  }
  return sys;
}

std::vector<std::string> json_strings(const json& j) {
  std::vector<std::string> out;
  if (!j.is_array()) return out;
  for (const auto& v : j)
    if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

std::string header(const http::Request& req, const char* name) {
  auto it = req.find(name);
  return it == req.end() ? std::string() : std::string(it->value());
}

}  // namespace kiln::vbmc::redfish_docs
