// GET /v1/drivers and /v1/drivers/{driver_name}: the hardware types Kiln
// serves under Ironic's names (ironic_driver_info.h maps each to Kiln's
// driver): redfish, ipmi, fake-hardware. Ironic lists the conductors that
// load a driver in `hosts`; every kilnd loads all three, so it is this host.

#include <unistd.h>

#include <array>

#include "controller/api/reply.h"
#include "controller/ironic/ironic_routes.h"

namespace kiln::ironic {
namespace {

constexpr std::array<std::string_view, 3> kDrivers = {"fake-hardware", "ipmi", "redfish"};

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "kilnd";
  return buf;
}

nlohmann::json link_pair(const IronicCall& call, const std::string& tail) {
  return nlohmann::json::array({{{"href", call.endpoint + "/v1/" + tail}, {"rel", "self"}},
                                {{"href", call.endpoint + "/" + tail}, {"rel", "bookmark"}}});
}

nlohmann::json driver_json(const IronicCall& call, std::string_view name, bool detail) {
  const std::string n(name);
  nlohmann::json d = {{"name", n}, {"hosts", nlohmann::json::array({host_name()})}};
  if (call.version.at_least(30)) d["type"] = "dynamic";
  d["links"] = link_pair(call, "drivers/" + n);
  d["properties"] = link_pair(call, "drivers/" + n + "/properties");
  if (detail && call.version.at_least(30)) {
    const bool fake = name == "fake-hardware";
    const std::string power = fake ? "fake" : n;
    d["default_bios_interface"] = "no-bios";
    d["default_boot_interface"] = fake ? "fake" : "pxe";
    d["default_console_interface"] = "no-console";
    d["default_deploy_interface"] = fake ? "fake" : "direct";
    d["default_inspect_interface"] = fake ? "fake" : "agent";
    d["default_management_interface"] = power;
    d["default_network_interface"] = "noop";
    d["default_power_interface"] = power;
    d["default_raid_interface"] = "no-raid";
    d["default_rescue_interface"] = "no-rescue";
    d["default_storage_interface"] = "noop";
    d["default_vendor_interface"] = "no-vendor";
    for (const char* iface : {"bios", "boot", "console", "deploy", "inspect", "management", "network", "power",
                              "raid", "rescue", "storage", "vendor"}) {
      std::string key = std::string("default_") + iface + "_interface";
      d[std::string("enabled_") + iface + "_interfaces"] = nlohmann::json::array({d[key]});
    }
  }
  return d;
}

Result<bool> detail_flag(const IronicCall& call) {
  std::optional<std::string> v = call.query().get("detail");
  if (!v) return false;
  if (*v == "true" || *v == "True" || *v == "1") return true;
  if (*v == "false" || *v == "False" || *v == "0") return false;
  return Error::invalid("detail", "must be true or false");
}

asio::awaitable<Result<http::Reply>> list_drivers(IronicCall& call) {
  Result<bool> detail = detail_flag(call);
  if (!detail) co_return detail.error();
  if (std::optional<std::string> type = call.query().get("type"); type && *type != "dynamic" && *type != "classic")
    co_return Error::invalid("type", "must be classic or dynamic");
  nlohmann::json list = nlohmann::json::array();
  // Kiln has hardware types only: a classic-driver listing is empty.
  if (call.query().get("type").value_or("dynamic") == "dynamic")
    for (std::string_view name : kDrivers) list.push_back(driver_json(call, name, *detail));
  co_return ironic_json_reply(call, bhttp::status::ok, {{"drivers", list}});
}

asio::awaitable<Result<http::Reply>> get_driver(IronicCall& call) {
  const std::string& name = call.param("driver_name");
  for (std::string_view d : kDrivers)
    if (d == name) co_return ironic_json_reply(call, bhttp::status::ok, driver_json(call, d, true));
  co_return Error(Code::kNotFound, "no such driver: " + name + " (Kiln serves fake-hardware, ipmi, redfish)");
}

}  // namespace

void add_ironic_driver_routes(IronicRouteTable& t, api::ApiContext& ctx) {
  (void)ctx;
  using V = bhttp::verb;
  t.add({V::get, "/v1/drivers", api::Access::kAnyRole, {"type", "detail", "fields"},
         [](IronicCall& c) { return list_drivers(c); }});
  t.add({V::get, "/v1/drivers/{driver_name}", api::Access::kAnyRole, {"fields"},
         [](IronicCall& c) { return get_driver(c); }});
}

}  // namespace kiln::ironic
