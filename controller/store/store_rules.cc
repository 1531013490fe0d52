#include "controller/store/store_rules.h"

#include <algorithm>
#include <cctype>

#include "common/ids.h"

namespace kiln::store_rules {

using json = nlohmann::json;

std::string json_text(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

Result<int> checked_limit(int limit) {
  if (limit <= 0) return Error::invalid("limit", "must be a positive number");
  return limit;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Error node_not_found(std::string_view id_or_name) {
  return Error(Code::kNotFound, "node " + std::string(id_or_name) + " not found");
}

std::optional<Error> check_condition(const Node& n, const NodeCondition& cond) {
  if (cond.version && *cond.version != n.version)
    return Error(Code::kPreconditionFailed, "node was modified (version " + std::to_string(n.version) +
                                                ", If-Match " + std::to_string(*cond.version) + ")");
  if (cond.reservation && *cond.reservation != n.reservation) {
    if (cond.reservation->empty())
      return Error(Code::kConflict, "node is busy: locked by operation " + n.reservation);
    return Error(Code::kConflict, "node is no longer held by operation " + *cond.reservation);
  }
  if (cond.provision_state && *cond.provision_state != n.provision_state)
    return Error(Code::kConflict, "node is in state " + std::string(to_string(n.provision_state)) + ", not " +
                                      std::string(to_string(*cond.provision_state)));
  return std::nullopt;
}

std::optional<Error> check_identity(const Node& n) {
  if (!is_uuid(n.id)) return Error::invalid("/id", "must be a UUID");
  if (!n.name.empty() && is_uuid(n.name)) return Error::invalid("/name", "must not look like a UUID");
  return std::nullopt;
}

std::string transient_states_sql() {
  std::string s;
  for (ProvisionState p : kAllProvisionStates) {
    if (!is_transient(p)) continue;
    if (!s.empty()) s += ", ";
    s += "'" + std::string(to_string(p)) + "'";  // state names are [a-z_]: safe to inline
  }
  return s;
}

Error unknown_node_value(const std::string& id, std::string_view column, const std::string& value) {
  return Error(Code::kInternal, "store: node " + id + " has unknown " + std::string(column) + " '" + value + "'");
}

std::vector<std::string> string_list(const json& list) {
  std::vector<std::string> out;
  if (list.is_array())
    for (const json& v : list)
      if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

std::string column_list(std::span<const char* const> columns) {
  std::string s;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (i > 0) s += ", ";
    s += columns[i];
  }
  return s;
}

std::string insert_sql(std::string_view table, std::span<const char* const> columns, char placeholder) {
  std::string v = "INSERT INTO " + std::string(table) + " (" + column_list(columns) + ") VALUES (";
  for (size_t i = 0; i < columns.size(); ++i) v += (i > 0 ? ", " : "") + std::string(1, placeholder) + std::to_string(i + 1);
  return v + ")";
}

std::string update_by_key_sql(std::string_view table, std::span<const char* const> columns, char placeholder) {
  std::string v = "UPDATE " + std::string(table) + " SET ";
  for (size_t i = 1; i < columns.size(); ++i) {
    if (i > 1) v += ", ";
    v += std::string(columns[i]) + " = " + placeholder + std::to_string(i + 1);
  }
  return v + " WHERE " + columns[0] + " = " + placeholder + "1";
}

Result<Node> node_to_create(const Node& node, int64_t now) {
  Node n = node;
  if (n.id.empty()) n.id = new_uuid();
  n.id = lower(n.id);
  if (auto e = check_identity(n)) return *e;
  if (n.created_at == 0) n.created_at = now;
  n.updated_at = now;
  if (n.version <= 0) n.version = 1;
  for (Port& p : n.ports) {
    if (p.id.empty()) p.id = new_uuid();
    p.node_id = n.id;
    if (p.created_at == 0) p.created_at = now;
  }
  return n;
}

Result<Node> node_after_mutate(const Node& before, const std::function<Status(Node&)>& mutate, int64_t now) {
  Node n = before;
  if (mutate) {
    if (Status s = mutate(n); !s) return s.take_error();
  }
  n.id = before.id;
  n.created_at = before.created_at;
  n.ports = before.ports;
  n.version = before.version + 1;
  n.updated_at = std::max(now, before.updated_at);
  if (auto e = check_identity(n)) return *e;
  return n;
}

Port port_to_create(const Port& port, int64_t now) {
  Port p = port;
  if (p.id.empty()) p.id = new_uuid();
  if (p.created_at == 0) p.created_at = now;
  return p;
}

}  // namespace kiln::store_rules
