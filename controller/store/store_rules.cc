#include "controller/store/store_rules.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <tuple>

#include "common/ids.h"
#include "controller/model/allocation_states.h"
#include "controller/model/event_types.h"
#include "controller/model/node_allocation.h"

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

Error unknown_stored_value(std::string_view what, std::string_view id, std::string_view column,
                           const std::string& value) {
  return Error(Code::kInternal, "store: " + std::string(what) + " " + std::string(id) + " has unknown " +
                                    std::string(column) + " '" + value + "'");
}

std::vector<std::string> string_list(const json& list) {
  std::vector<std::string> out;
  if (list.is_array())
    for (const json& v : list)
      if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

json ssh_host_keys_column(const std::vector<SshHostKey>& keys) {
  json out = json::array();
  for (const SshHostKey& k : keys) out.push_back({{"type", k.type}, {"key", k.key}});
  return out;
}

std::vector<SshHostKey> ssh_host_keys_from_column(const json& list) {
  std::vector<SshHostKey> out;
  if (!list.is_array()) return out;
  for (const json& v : list) {
    if (!v.is_object() || !v.contains("type") || !v.contains("key") || !v["type"].is_string() ||
        !v["key"].is_string())
      continue;
    Result<SshHostKey> k = parse_ssh_host_key(v["type"].get<std::string>(), v["key"].get<std::string>());
    if (k) out.push_back(std::move(*k));
  }
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

std::string insert_sql(std::string_view table, std::span<const char* const> columns) {
  std::string v = "INSERT INTO " + std::string(table) + " (" + column_list(columns) + ") VALUES (";
  for (size_t i = 0; i < columns.size(); ++i) v += (i > 0 ? ", $" : "$") + std::to_string(i + 1);
  return v + ")";
}

std::string update_by_key_sql(std::string_view table, std::span<const char* const> columns) {
  std::string v = "UPDATE " + std::string(table) + " SET ";
  for (size_t i = 1; i < columns.size(); ++i) {
    if (i > 1) v += ", ";
    v += std::string(columns[i]) + " = $" + std::to_string(i + 1);
  }
  return v + " WHERE " + columns[0] + " = $1";
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

json json_or_empty(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? json::object() : j;
}

// ---------------------------------------------------------------------------
// Images

Result<Image> image_to_create(const Image& image, int64_t now) {
  Image img = image;
  if (img.id.empty()) img.id = new_uuid();
  if (!is_uuid(img.id)) return Error::invalid("/id", "must be a UUID");
  if (img.name.empty()) return Error::invalid("/name", "must not be empty");
  if (is_uuid(img.name)) return Error::invalid("/name", "must not look like a UUID");
  if (img.created_at == 0) img.created_at = now;
  img.updated_at = now;
  return img;
}

Error image_not_found(std::string_view id_or_name) {
  return Error(Code::kNotFound, "image " + std::string(id_or_name) + " not found");
}

Error image_name_taken(const Image& image) {
  return Error(Code::kConflict, "an image named " + image.name + " already exists",
               {FieldError{"/name", "already in use"}});
}

Error image_id_taken(const Image& image) {
  return Error(Code::kConflict, "image " + image.id + " already exists", {FieldError{"/id", "already in use"}});
}

// ---------------------------------------------------------------------------
// Profiles

json profile_doc(const Profile& p) {
  json doc = p.doc.is_object() ? p.doc : json::object();
  doc["name"] = p.name;
  return doc;
}

Result<Profile> profile_to_create(const Profile& profile, int64_t now) {
  if (profile.name.empty()) return Error::invalid("/name", "must not be empty");
  Profile p = profile;
  p.created_at = now;
  p.updated_at = now;
  p.version = 1;
  p.doc = profile_doc(p);
  return p;
}

json profile_doc_from_text(const std::string& text, const std::string& name) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) doc = json::object();
  doc["name"] = name;
  return doc;
}

Error profile_not_found(std::string_view name) {
  return Error(Code::kNotFound, "profile " + std::string(name) + " not found");
}

Error profile_name_taken(std::string_view name) {
  return Error(Code::kConflict, "a profile named " + std::string(name) + " already exists",
               {FieldError{"/name", "already in use"}});
}

Error profile_version_mismatch(std::string_view name, int64_t current, int64_t expected) {
  return Error(Code::kPreconditionFailed, "profile " + std::string(name) + " is at version " +
                                              std::to_string(current) + ", not " + std::to_string(expected));
}

Error profile_in_use(std::string_view name, int64_t nodes) {
  return Error(Code::kConflict, "profile " + std::string(name) + " is used by " + std::to_string(nodes) +
                                    (nodes == 1 ? " node" : " nodes") + "; change their profile first");
}

// ---------------------------------------------------------------------------
// Validation reports

ValidationRecord validation_to_record(const ValidationRecord& record, int64_t now) {
  ValidationRecord v = record;
  if (v.id.empty()) v.id = new_uuid();
  if (v.finished_at == 0) v.finished_at = now;
  if (v.started_at == 0) v.started_at = v.finished_at;
  return v;
}

std::vector<EventDraft> validation_events(const std::vector<EventDraft>& events, const std::string& node_id) {
  std::vector<EventDraft> out = events;
  for (EventDraft& e : out)
    if (e.node_id.empty()) e.node_id = node_id;
  return out;
}

json validation_report_from_text(const std::string& text) { return json_or_empty(text); }

Error validation_not_found(std::string_view id) {
  return Error(Code::kNotFound, "validation " + std::string(id) + " not found");
}

const char kNextValidationSeqSql[] = "(SELECT coalesce(max(seq), 0) + 1 FROM validations)";

std::string tenant_report_sql(int index) {
  // A correlated scalar subquery: NULL (no row) when the tenant does not
  // hold the node, and "finished_at > NULL" keeps nothing, so the rule
  // fails closed. At most one row: (allocation, node_id) is the members' key.
  return std::string(" AND finished_at > (SELECT m.joined_at FROM nodes n JOIN allocation_members m"
                     " ON m.allocation = n.allocation AND m.node_id = n.id"
                     " WHERE n.id = validations.node_id AND m.status <> 'left' AND n.tenant = $") +
         std::to_string(index) + ")";
}

// ---------------------------------------------------------------------------
// Hosts and virtual machines

Result<Host> host_to_create(const Host& host, int64_t now) {
  Host h = host;
  if (h.id.empty()) h.id = new_uuid();
  if (h.name.empty()) return Error::invalid("/name", "must not be empty");
  if (is_uuid(h.name)) return Error::invalid("/name", "must not look like a UUID");
  if (h.created_at == 0) h.created_at = now;
  h.updated_at = now;
  return h;
}

Error host_not_found(std::string_view id_or_name) {
  return Error(Code::kNotFound, "host " + std::string(id_or_name) + " not found");
}

Error host_name_taken(const Host& host) {
  return Error(Code::kConflict, "a host named " + host.name + " already exists",
               {FieldError{"/name", "already in use"}});
}

Error host_in_use(const Host& host, int64_t machines) {
  return Error(Code::kConflict, "host " + host.name + " still has " + std::to_string(machines) +
                                    " virtual machine(s); undeploy them first");
}

Error vm_not_found(std::string_view node_id) {
  return Error(Code::kNotFound, "node " + std::string(node_id) + " has no virtual machine");
}

Error placement_host_unknown(std::string_view host) {
  return Error::invalid("/host", "no such host: " + std::string(host));
}

Error no_hosts_registered() { return Error(Code::kConflict, "no hypervisor host is registered"); }

Result<HostChoice> choose_host(const std::vector<Host>& candidates,
                               const std::function<Result<std::vector<HostReservation>>(const Host&)>& booked_of,
                               const HostStore::PlacementPlanner& planner) {
  std::string shortages;
  for (size_t i = 0; i < candidates.size(); ++i) {
    Result<std::vector<HostReservation>> booked = booked_of(candidates[i]);
    if (!booked) return booked.take_error();
    Result<PlacementPlan> plan = planner(candidates[i], *booked);
    if (!plan) {
      if (plan.error().code != Code::kConflict) return plan.take_error();
      shortages += (shortages.empty() ? "" : "; ") + plan.error().message;
      continue;
    }
    return HostChoice{i, std::move(*plan)};
  }
  return Error(Code::kConflict, "no host has room for this node: " + shortages);
}

VirtualMachine placed_vm(const VirtualMachine& vm, const Host& host, const PlacementPlan& plan, int64_t now) {
  VirtualMachine v = vm;
  v.host_id = host.id;
  v.placement = plan.placement;
  v.created_at = now;
  v.updated_at = now;
  return v;
}

Error booked_twice(const HostReservation& r, const Host& host) {
  return Error(Code::kInternal, "placement booked " + r.kind + " " + r.item + " twice on host " + host.name);
}

// --- allocations ---

bool has_traits(const Node& n, const std::vector<std::string>& traits) {
  for (const std::string& t : traits)
    if (std::find(n.traits.begin(), n.traits.end(), t) == n.traits.end()) return false;
  return true;
}

bool needs_guest(const Node& n) { return n.kind == NodeKind::kVirtual && n.bmc.driver == "libvirt"; }

Error quota_exceeded(const Allocation& a, int64_t max_nodes, int64_t in_use) {
  std::string msg = "quota for " + a.profile + " " + std::string(to_string(a.kind)) + " is " + std::to_string(max_nodes) + ", " +
                    std::to_string(in_use) + " in use";
  return Error(Code::kPermissionDenied, msg, {FieldError{"/count", msg}});
}

Error too_few_nodes(int64_t want, int64_t got, const std::string& short_of) {
  std::string msg = std::to_string(want) + " requested, " + std::to_string(got) + " available";
  if (!short_of.empty()) msg += " (" + short_of + ")";
  return Error(Code::kConflict, msg, {FieldError{"/count", msg}});
}

Error replacements_used(const Allocation& a) {
  return Error(Code::kConflict,
               "allocation " + a.name + " has used all " + std::to_string(a.count) + " of its replacements");
}

Error no_replacement(const Allocation& a, const Error& claim_error) {
  std::string why = "no eligible " + a.profile + " " + std::string(to_string(a.kind)) + " node is free";
  if (a.kind == NodeKind::kVirtual) why += ": " + claim_error.message;
  return Error(Code::kConflict, why);
}

Error allocation_name_taken(const Allocation& a) {
  return Error(Code::kConflict, "tenant " + a.tenant + " already has a live allocation named " + a.name,
               {FieldError{"/name", "already in use"}});
}

Error allocation_not_found(std::string_view ref) {
  return Error(Code::kNotFound, "allocation " + std::string(ref) + " not found");
}

Result<AllocationRef> allocation_ref(std::string_view ref, std::string_view scope) {
  const std::size_t slash = ref.find('/');
  if (slash == std::string_view::npos) return AllocationRef{lower(ref), std::string(ref), std::string(scope)};
  std::string_view tenant = ref.substr(0, slash);
  std::string_view name = ref.substr(slash + 1);
  if (tenant.empty() || name.empty() || name.find('/') != std::string_view::npos ||
      (!scope.empty() && tenant != scope))
    return allocation_not_found(ref);
  return AllocationRef{"", std::string(name), std::string(tenant)};
}

Result<std::string> choose_allocation(const std::vector<AllocationMatch>& matches, const AllocationRef& key,
                                      std::string_view ref) {
  const AllocationMatch* best = nullptr;
  std::set<std::string> tenants;
  for (const AllocationMatch& m : matches) {
    if (!key.id.empty() && m.id == key.id) return m.id;
    tenants.insert(m.tenant);
    // The live one (at most one per tenant), else the newest.
    auto rank = [](const AllocationMatch& x) { return std::tie(x.released, x.created_at, x.id); };
    if (best == nullptr || (m.released != best->released ? !m.released : rank(*best) < rank(m))) best = &m;
  }
  if (best == nullptr) return allocation_not_found(ref);
  if (tenants.size() > 1) {
    std::string names;
    for (const std::string& t : tenants) names += (names.empty() ? "" : ", ") + t;
    return Error(Code::kConflict, "allocation name " + key.name + " is used by " +
                                      std::to_string(tenants.size()) + " tenants (" + names +
                                      "): ask for it by id or as <tenant>/" + key.name);
  }
  return best->id;
}

Error allocation_modified(int64_t version, int64_t expected) {
  return Error(Code::kPreconditionFailed, "allocation was modified (version " + std::to_string(version) +
                                              ", expected " + std::to_string(expected) + ")");
}

Error not_a_member(std::string_view node_id, std::string_view id) {
  return Error(Code::kNotFound, "node " + std::string(node_id) + " is not a member of allocation " + std::string(id));
}

Error member_moved(std::string_view node_id, std::string_view id, MemberStatus now) {
  const std::string is = now == MemberStatus::kLeft ? "has already left" : "is already " + std::string(to_string(now));
  return Error(Code::kPreconditionFailed, "node " + std::string(node_id) + " " + is + " allocation " + std::string(id));
}

json history_json(const std::vector<AllocationHistoryEntry>& h) {
  json out = json::array();
  for (const AllocationHistoryEntry& e : h)
    out.push_back({{"at", e.at}, {"from", e.from}, {"to", e.to}, {"reason", e.reason}});
  return out;
}

std::vector<AllocationHistoryEntry> history_from_json(const json& j) {
  std::vector<AllocationHistoryEntry> out;
  if (!j.is_array()) return out;
  for (const json& e : j)
    if (e.is_object())
      out.push_back({e.value("at", int64_t{0}), e.value("from", ""), e.value("to", ""), e.value("reason", "")});
  return out;
}

EventDraft claim_event(const Node& n, const Allocation& a, const char* type) {
  EventDraft e;
  e.type = type;
  e.node_id = n.id;
  e.tenant = a.tenant;
  e.detail = {{"allocation", a.id}, {"allocation_name", a.name}};
  return e;
}

Node claimed(Node n, const Allocation& a, int64_t now) {
  claim_node(n, a);
  n.version += 1;
  n.updated_at = std::max(now, n.updated_at);
  return n;
}

Node detached(Node n, int64_t now) {
  detach_node(n);
  n.version += 1;
  n.updated_at = std::max(now, n.updated_at);
  return n;
}

Node made_guest(const Allocation& a, const VirtualNodeMaker& vms, int64_t now) {
  Node n = vms.make(a);
  n.id = new_uuid();
  n.kind = NodeKind::kVirtual;
  n.created_at = n.updated_at = now;
  n.version = 1;
  if (n.name.empty()) n.name = "vm-" + n.id.substr(0, 8);
  return n;
}

EventDraft made_guest_event(const Node& n, const Allocation& a) {
  EventDraft e;
  e.type = event_type::kNodeCreated;
  e.node_id = n.id;
  e.to_state = std::string(to_string(n.provision_state));
  e.detail = {{"kind", "virtual"}, {"made_for", a.id}};
  return e;
}

Allocation allocation_after_mutate(const Allocation& cur, Allocation a, int64_t now) {
  a.id = cur.id;
  a.tenant = cur.tenant;
  a.created_at = cur.created_at;
  a.members = cur.members;
  a.version = cur.version + 1;
  a.updated_at = std::max(now, cur.updated_at);
  return a;
}

}  // namespace kiln::store_rules
