#include "controller/api/node_view.h"

#include "common/clock.h"

namespace kiln::api {
namespace {

nlohmann::json str_or_null(const std::string& s) {
  return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
}

template <typename T>
nlohmann::json opt_state(const std::optional<T>& s) {
  return s ? nlohmann::json(std::string(to_string(*s))) : nlohmann::json(nullptr);
}

const std::vector<std::string> kStaffFields = {
    "id", "name", "kind", "bmc", "ports", "boot_mode", "profile", "traits", "provision_state",
    "target_provision_state", "provision_step", "power_state", "target_power_state",
    "maintenance", "maintenance_reason", "fault", "last_error", "tenant", "allocation",
    "last_validation", "addresses", "address_source", "ssh", "ssh_host_keys", "reservation", "conductor", "created_at", "updated_at",
    "version"};
const std::vector<std::string> kTenantFields = {
    "id", "name", "kind", "ports", "boot_mode", "profile", "traits", "provision_state",
    "target_provision_state", "power_state", "target_power_state", "maintenance", "tenant",
    "allocation", "last_validation", "addresses", "address_source", "ssh", "ssh_host_keys", "created_at", "updated_at", "version"};

}  // namespace

nlohmann::json ssh_host_keys_json(const std::vector<SshHostKey>& keys) {
  nlohmann::json out = nlohmann::json::array();
  for (const SshHostKey& k : keys) out.push_back({{"type", k.type}, {"key", k.key}, {"sha256", k.sha256}});
  return out;
}

const std::vector<std::string>& node_fields(Role role) {
  return role == Role::kTenant ? kTenantFields : kStaffFields;
}

nlohmann::json port_json(const Port& port) {
  return {{"id", port.id},
          {"node", port.node_id},
          {"address", port.address},
          {"pxe", port.pxe},
          {"created_at", format_rfc3339(port.created_at)}};
}

nlohmann::json node_json(const Node& node, Role role, NodeDetail detail, const RingView* ring) {
  nlohmann::json ports = nlohmann::json::array();
  for (const Port& p : node.ports)
    ports.push_back({{"id", p.id}, {"address", p.address}, {"pxe", p.pxe}});
  nlohmann::json j = {
      {"id", node.id},
      {"name", str_or_null(node.name)},
      {"kind", std::string(to_string(node.kind))},
      {"ports", std::move(ports)},
      {"boot_mode", node.boot_mode},
      {"profile", str_or_null(node.profile)},
      {"traits", node.traits},
      {"provision_state", std::string(to_string(node.provision_state))},
      {"target_provision_state", opt_state(node.target_provision_state)},
      {"power_state", std::string(to_string(node.power_state))},
      {"target_power_state", opt_state(node.target_power_state)},
      {"maintenance", node.maintenance},
      {"tenant", str_or_null(node.tenant)},
      {"allocation", str_or_null(node.allocation)},
      {"last_validation", str_or_null(node.last_validation)},
      {"addresses", node.addresses},
      {"address_source", str_or_null(to_string(node.address_source))},
      {"ssh", str_or_null(node.ssh)},
      {"ssh_host_keys", ssh_host_keys_json(node.ssh_host_keys)},
      {"created_at", format_rfc3339(node.created_at)},
      {"updated_at", format_rfc3339(node.updated_at)},
      {"version", node.version},
  };
  if (role != Role::kTenant) {
    j["bmc"] = {
        {"driver", node.bmc.driver},
        {"address", node.bmc.address},
        {"username", str_or_null(node.bmc.username)},
        {"password_set", !node.bmc.password_sealed.empty()},
        {"system_id", str_or_null(node.bmc.system_id)},
        {"domain", str_or_null(node.bmc.domain)},
        {"verify_tls", node.bmc.verify_tls},
        {"options", node.bmc.options.is_null() ? nlohmann::json::object() : node.bmc.options},
    };
    j["provision_step"] = str_or_null(node.provision_step);
    j["maintenance_reason"] = str_or_null(node.maintenance_reason);
    j["fault"] = str_or_null(node.fault);
    j["last_error"] = str_or_null(node.last_error);
    j["reservation"] = str_or_null(node.reservation);
    std::optional<std::string> owner = ring != nullptr ? ring->owner_of(ownership_key(node)) : std::nullopt;
    j["conductor"] = owner ? nlohmann::json(*owner) : nlohmann::json(nullptr);
  }
  if (detail == NodeDetail::kFull) j["inventory"] = node.inventory;
  return j;
}

nlohmann::json select_fields(const nlohmann::json& node, const std::set<std::string>& fields) {
  nlohmann::json out = nlohmann::json::object();
  for (auto it = node.begin(); it != node.end(); ++it)
    if (it.key() == "id" || fields.contains(it.key())) out[it.key()] = *it;
  return out;
}

nlohmann::json event_json(const EventRecord& e) {
  return {{"seq", e.seq},
          {"ts", format_rfc3339(e.ts)},
          {"type", e.type},
          {"node", str_or_null(e.node_id)},
          {"from", str_or_null(e.from_state)},
          {"to", str_or_null(e.to_state)},
          {"detail", e.detail.is_null() ? nlohmann::json::object() : e.detail},
          {"request_id", str_or_null(e.request_id)}};
}

nlohmann::json audit_json(const AuditRecord& a) {
  return {{"id", a.id},
          {"ts", format_rfc3339(a.ts)},
          {"actor", str_or_null(a.actor)},
          {"actor_name", str_or_null(a.actor_name)},
          {"role", str_or_null(a.role)},
          {"method", a.method},
          {"path", a.path},
          {"status", a.status},
          {"request_id", str_or_null(a.request_id)},
          {"node", str_or_null(a.node_id)}};
}

nlohmann::json token_json(const TokenRecord& t) {
  return {{"id", t.id},
          {"name", t.name},
          {"role", t.role},
          {"tenant", str_or_null(t.tenant)},
          {"created_at", format_rfc3339(t.created_at)},
          {"expires_at", t.expires_at == 0 ? nlohmann::json(nullptr)
                                           : nlohmann::json(format_rfc3339(t.expires_at))}};
}

std::string node_etag(const Node& node) { return "\"" + std::to_string(node.version) + "\""; }

}  // namespace kiln::api
