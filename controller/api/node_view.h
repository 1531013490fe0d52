#pragma once
// What each role sees of a node, port or event.
//
// Staff (admin, operator) see every field of the node model except the
// password, shown only as bmc.password_set. Tenants see what they need to use
// a machine they hold — identity, kind, ports, boot mode, profile, traits,
// states, allocation, validation and how to log in (addresses, ssh) — and
// nothing about how the provider drives it (no bmc, reservation,
// maintenance_reason, provision_step, fault, last_error, conductor). Timestamps are RFC 3339; empty optional strings are null.
//
// `conductor` (staff) is the conductor owning the node on the ring of the
// instance answering (`ring`), null when no conductor is alive or the
// instance has no membership (ring null).

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "controller/api/auth.h"
#include "controller/conductor/membership.h"
#include "controller/model/node.h"
#include "controller/store/store.h"

namespace kiln::api {

enum class NodeDetail { kFull, kList };  // kList omits `inventory`

nlohmann::json node_json(const Node& node, Role role, NodeDetail detail = NodeDetail::kFull,
                         const RingView* ring = nullptr);

// The top-level fields node_json() renders for `role` (the vocabulary of ?fields=).
const std::vector<std::string>& node_fields(Role role);

// Keeps only `fields` (plus "id") of a rendered node.
nlohmann::json select_fields(const nlohmann::json& node, const std::set<std::string>& fields);

nlohmann::json port_json(const Port& port);
// A node's ssh_host_keys as the API shows them: [{type, key, sha256}], []
// when none (the OS has not phoned home since its boot attempt started).
nlohmann::json ssh_host_keys_json(const std::vector<SshHostKey>& keys);
nlohmann::json event_json(const EventRecord& event);
nlohmann::json audit_json(const AuditRecord& record);
nlohmann::json token_json(const TokenRecord& token);

// The ETag of a node: "<version>" (strong).
std::string node_etag(const Node& node);

}  // namespace kiln::api
