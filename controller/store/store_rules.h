#pragma once
// What every store dialect applies the same way (internal to
// controller/store): the checks behind NodeCondition, the identity
// invariants, the error texts callers see, and how JSON columns are written.
// Keeping them in one place is what makes the SQLite and the PostgreSQL store
// answer alike (the conformance suite in tests/unit/store checks that).

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "controller/model/allocation.h"
#include "controller/model/host.h"
#include "controller/model/image.h"
#include "controller/model/node.h"
#include "controller/model/validation.h"
#include "controller/store/allocation_store.h"
#include "controller/store/event_log.h"
#include "controller/store/host_store.h"
#include "controller/store/node_repo.h"

namespace kiln::store_rules {

// JSON as stored in a TEXT column. Invalid UTF-8 is replaced rather than
// thrown on: a driver's garbage must not make a node unwritable.
std::string json_text(const nlohmann::json& j);

// kInvalidArgument naming "limit" unless positive.
Result<int> checked_limit(int limit);

// ASCII lowercase (UUIDs are stored lowercase and matched case-insensitively).
std::string lower(std::string_view s);

// kNotFound "node X not found".
Error node_not_found(std::string_view id_or_name);

// Checks `cond` against the node as stored: kPreconditionFailed on a version
// mismatch, kConflict on a reservation or state mismatch. The messages are
// shown to API callers, so they say what to do differently.
std::optional<Error> check_condition(const Node& n, const NodeCondition& cond);

// Store-side invariants the API also checks; kept here so no path around the
// API can break lookups (an id must be a UUID, a name must not look like one).
std::optional<Error> check_identity(const Node& n);

// The node create_node writes: id filled (new UUID when empty) and lowercased,
// created_at kept when set (else `now`), updated_at = `now`, version kept when
// > 0 (else 1), ports given ids, the node's id and created_at. Errors as
// check_identity.
Result<Node> node_to_create(const Node& node, int64_t now);

// Applies update_node_if's mutation `mutate` to a copy of `before` and puts
// back what the caller may not change (id, created_at, ports); version + 1,
// updated_at = max(now, before's). The Error of `mutate`, or of
// check_identity.
Result<Node> node_after_mutate(const Node& before, const std::function<Status(Node&)>& mutate, int64_t now);

// The port create_port writes: id and created_at filled when empty.
Port port_to_create(const Port& port, int64_t now);

// The transient provision states as a SQL list ('deploying', ...) for an
// IN (...) clause. State names are [a-z_], so inlining them is safe.
std::string transient_states_sql();

// kInternal "store: <what> <id> has unknown <column> '<value>'": a stored enum
// this binary does not know (a newer kilnd wrote it, or the row is corrupt).
Error unknown_stored_value(std::string_view what, std::string_view id, std::string_view column,
                           const std::string& value);

// A stored enum's text parsed with `parse` (parse_node_kind, ...), or
// unknown_stored_value naming the row.
template <typename E, typename Parse>
Status read_stored_enum(const std::string& text, Parse parse, std::string_view what, std::string_view id,
                        std::string_view column, E& out) {
  std::optional<E> e = parse(text);
  if (!e) return unknown_stored_value(what, id, column, text);
  out = *e;
  return ok_status();
}

// An optional enum as stored: its to_string text, or NULL when unset.
template <typename E>
std::optional<std::string> opt_text(const std::optional<E>& e) {
  if (!e) return std::nullopt;
  return std::string(to_string(*e));
}

// The strings of a JSON array column (traits, addresses); other elements
// and non-arrays are skipped, as a hand-edited row should not stop reads.
std::vector<std::string> string_list(const nlohmann::json& list);

// nodes.ssh_host_keys: a JSON array of {type, key}. Read back through
// parse_ssh_host_key (which also gives the fingerprint), so a hand-edited
// row can never put a key the rule refuses in front of a tenant's ssh: such
// an element is skipped, as string_list skips.
nlohmann::json ssh_host_keys_column(const std::vector<SshHostKey>& keys);
std::vector<SshHostKey> ssh_host_keys_from_column(const nlohmann::json& list);

// A JSON column read leniently: an object when the text is not JSON (a
// hand-edited or truncated row must not stop reads of a catalogue).
nlohmann::json json_or_empty(const std::string& text);

// ---------------------------------------------------------------------------
// Catalogue: images (CatalogueStore)

// The image create_image writes: id filled (new UUID when empty), created_at
// kept when set (else `now`), updated_at = `now`. kInvalidArgument naming
// /id (not a UUID) or /name (empty, or looks like a UUID).
Result<Image> image_to_create(const Image& image, int64_t now);
// kNotFound "image X not found".
Error image_not_found(std::string_view id_or_name);
// kConflict naming /name, and naming /id: the unique constraint create_image hit.
Error image_name_taken(const Image& image);
Error image_id_taken(const Image& image);

// ---------------------------------------------------------------------------
// Catalogue: hardware profiles (CatalogueStore)

// The profile create_profile (and seeding) writes: created_at = updated_at =
// `now`, version 1, doc an object whose "name" is the profile's.
// kInvalidArgument naming /name when the name is empty.
Result<Profile> profile_to_create(const Profile& profile, int64_t now);
// The document as stored: `p.doc` when an object (else {}), with "name" = p.name.
nlohmann::json profile_doc(const Profile& p);
// The document read back from its column: {} when not a JSON object, "name"
// set to the row's name.
nlohmann::json profile_doc_from_text(const std::string& text, const std::string& name);
// kNotFound "profile X not found".
Error profile_not_found(std::string_view name);
// kConflict naming /name.
Error profile_name_taken(std::string_view name);
// kPreconditionFailed: replace_profile's If-Match did not hold.
Error profile_version_mismatch(std::string_view name, int64_t current, int64_t expected);
// kConflict: delete_profile refused while `nodes` nodes name it.
Error profile_in_use(std::string_view name, int64_t nodes);

// ---------------------------------------------------------------------------
// Validation reports (ValidationStore)

// The record record_validation writes: id filled when empty, finished_at =
// `now` when unset, started_at = finished_at when unset.
ValidationRecord validation_to_record(const ValidationRecord& record, int64_t now);
// `events` with an empty node_id given the record's node (tenant left as
// drafted: a report's events are not a node write).
std::vector<EventDraft> validation_events(const std::vector<EventDraft>& events, const std::string& node_id);
// The report read back from its column: {} when the text is not JSON.
nlohmann::json validation_report_from_text(const std::string& text);
// kNotFound "validation X not found".
Error validation_not_found(std::string_view id);
// The condition (" AND ...") on a query over `validations` that keeps the
// reports the tenant bound to parameter `index` may read (validation_store.h:
// finished after its node joined the tenant's allocation, while it is still a
// member; a node the tenant does not hold matches nothing).
std::string tenant_report_sql(int index);

// The seq of the next validation report (a scalar subquery: max(seq) + 1, 1
// for the first), read from the index validations_by_seq rather than from
// every report ever stored.
extern const char kNextValidationSeqSql[];

// ---------------------------------------------------------------------------
// Hosts and virtual machines (HostStore)

// The host create_host writes: id filled when empty, created_at kept when set
// (else `now`), updated_at = `now`. kInvalidArgument naming /name (empty, or
// looks like a UUID).
Result<Host> host_to_create(const Host& host, int64_t now);
// kNotFound "host X not found".
Error host_not_found(std::string_view id_or_name);
// kConflict naming /name.
Error host_name_taken(const Host& host);
// kConflict: delete_host refused while `machines` virtual machines are placed on it.
Error host_in_use(const Host& host, int64_t machines);
// kNotFound "node X has no virtual machine".
Error vm_not_found(std::string_view node_id);

// How place_virtual_node (and a virtual allocation's claim) picks a host,
// in both dialects, inside the caller's writer transaction.
//
// `candidates`: the named host (`host` not empty), else every host by name.
// placement_host_unknown is the error for a named host that does not exist
// (kInvalidArgument naming /host: it is the caller's input that is wrong),
// no_hosts_registered the one for an empty candidate list.
Error placement_host_unknown(std::string_view host);
Error no_hosts_registered();
// Asks `planner` for each candidate in turn, giving it the host's booked rows
// (`booked_of`, read in the caller's transaction), and returns the index of
// the first that fits with its plan. A planner error other than kConflict,
// or an error of `booked_of`, is returned as it is; when none fits, kConflict
// "no host has room for this node: " joining every host's shortage with "; ".
struct HostChoice {
  size_t index = 0;
  PlacementPlan plan;
};
Result<HostChoice> choose_host(const std::vector<Host>& candidates,
                               const std::function<Result<std::vector<HostReservation>>(const Host&)>& booked_of,
                               const HostStore::PlacementPlanner& planner);
// The virtual machine place_virtual_node inserts for `vm` on `host` with `plan`.
VirtualMachine placed_vm(const VirtualMachine& vm, const Host& host, const PlacementPlan& plan, int64_t now);
// kInternal: a reservation row clashed with one already booked (the unique
// index on host, kind and item caught a planner bug).
Error booked_twice(const HostReservation& r, const Host& host);

// Statement text over one column list, with the seam's placeholders ($N,
// controller/store/sql/conn.h).
// "a, b, c"
std::string column_list(std::span<const char* const> columns);
// "INSERT INTO t (a, b) VALUES ($1, $2)"
std::string insert_sql(std::string_view table, std::span<const char* const> columns);
// "UPDATE t SET b = $2, c = $3 WHERE a = $1": the first column is the key.
std::string update_by_key_sql(std::string_view table, std::span<const char* const> columns);

// --- allocations (sql/allocation*.cc) ---

// The nodes a new allocation may claim, as a WHERE clause both dialects read
// alike (FALSE is 0 in SQLite's INTEGER column, false in PostgreSQL's
// BOOLEAN): available, not in maintenance, no fault, not reserved, claimed
// by no allocation and no tenant.
inline constexpr char kClaimableNodeSql[] =
    "provision_state = 'available' AND maintenance = FALSE AND fault = '' AND reservation = '' "
    "AND allocation = '' AND tenant = ''";

// Virtual nodes driven by libvirt (needs_guest below), as a SQL condition:
// count_free_nodes leaves them out (node_repo.h).
inline constexpr char kLibvirtGuestSql[] = "(kind = 'virtual' AND bmc_driver = 'libvirt')";

// Whether `n` has every one of `traits`.
bool has_traits(const Node& n, const std::vector<std::string>& traits);

// A libvirt guest's capacity is booked at claim time (allocation_store.h).
bool needs_guest(const Node& n);

// kPermissionDenied naming /count: "quota for P K is M, U in use".
Error quota_exceeded(const Allocation& a, int64_t max_nodes, int64_t in_use);
// Whether `count` more nodes of the allocation's profile and kind would
// exceed `max_nodes` with `in_use` already held.
inline bool over_quota(const Allocation& a, int64_t max_nodes, int64_t in_use) {
  return in_use + a.count > max_nodes;
}

// kConflict naming /count: "W requested, G available" and, when not empty,
// " (<short_of>)", what the hosts lack.
Error too_few_nodes(int64_t want, int64_t got, const std::string& short_of);

// The kConflict of leave_member's replacement: the allocation has used its
// `count` replacements, or `claim_error` (from claiming one node) restated.
Error replacements_used(const Allocation& a);
Error no_replacement(const Allocation& a, const Error& claim_error);

// kConflict naming /name: the tenant has a live allocation of that name.
Error allocation_name_taken(const Allocation& a);

// kNotFound "allocation X not found".
Error allocation_not_found(std::string_view ref);

// How get_allocation reads its reference (allocation_store.h). A name is
// unique among a tenant's allocations that are not released (the partial
// unique index allocations_live_name, in both dialects' 013 migration), so
// "tenant/name" names at most one live allocation; a bare name may be used by
// several tenants, and only a caller scoped to one tenant may use it bare.
struct AllocationRef {
  std::string id;      // lowercased (ids are stored lowercase); "" for "tenant/name"
  std::string name;    // as given
  std::string tenant;  // the name's tenant; "" = any tenant
};
// `ref` read within `scope` (the caller's tenant, "" for any): "tenant/name"
// gives the tenant (kNotFound when it is not `scope`'s, or when either part
// is empty or `ref` has a second '/'); anything else is an id or a name of
// `scope`.
Result<AllocationRef> allocation_ref(std::string_view ref, std::string_view scope);
// One allocation row that matched an AllocationRef.
struct AllocationMatch {
  std::string id;
  std::string tenant;
  bool released = false;
  int64_t created_at = 0;
};
// The id get_allocation reads: the row whose id is the key; else, among
// the rows of that name, kConflict when they belong to more than one tenant
// (a lookup across tenants never guesses: it asks for the id or
// "tenant/name"); else the tenant's live one, else its newest. kNotFound
// ("allocation <ref> not found") when nothing matched.
Result<std::string> choose_allocation(const std::vector<AllocationMatch>& matches, const AllocationRef& key,
                                      std::string_view ref);

// kPreconditionFailed for update_allocation_if's version check.
Error allocation_modified(int64_t version, int64_t expected);

// kNotFound: `node_id` is not a member of allocation `id`.
Error not_a_member(std::string_view node_id, std::string_view id);
// kPreconditionFailed: member `node_id` of allocation `id` is already `now`
// (leave_member asked to move it from an older read of its row).
Error member_moved(std::string_view node_id, std::string_view id, MemberStatus now);

// The history column's JSON, and back (entries that are not objects skipped).
nlohmann::json history_json(const std::vector<AllocationHistoryEntry>& h);
std::vector<AllocationHistoryEntry> history_from_json(const nlohmann::json& j);

// A node.claimed / node.released event for `n` and `a`.
EventDraft claim_event(const Node& n, const Allocation& a, const char* type);

// The node `n` becomes when claimed by `a` at `now` (claim_node,
// model/node_allocation.h), version + 1, updated_at = max(now, n's).
Node claimed(Node n, const Allocation& a, int64_t now);
// The node `n` becomes when detached at `now` (detach_node), version + 1,
// updated_at = max(now, n's).
Node detached(Node n, int64_t now);

// A new virtual guest node made by `vms` for `a` (id, kind, timestamps,
// version and a default name filled; unclaimed), and its node.created event.
Node made_guest(const Allocation& a, const VirtualNodeMaker& vms, int64_t now);
EventDraft made_guest_event(const Node& n, const Allocation& a);

// update_allocation_if's write: `mutated` with what the caller may not change
// put back from `cur`; version + 1, updated_at = max(now, cur's).
Allocation allocation_after_mutate(const Allocation& cur, Allocation mutated, int64_t now);

}  // namespace kiln::store_rules
