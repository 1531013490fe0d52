#include "controller/store/pg/pg_host_rows.h"

#include <utility>

#include "common/ids.h"
#include "controller/store/store_rules.h"

namespace kiln::pg_rows {

using json = nlohmann::json;
using store_rules::json_or_empty;
using store_rules::json_text;

namespace {

constexpr const char* kHostColumns[] = {"id",           "name",          "uri",      "username",
                                        "password_sealed", "options",    "status",   "status_reason",
                                        "capacity",     "discovered_at", "created_at", "updated_at"};
constexpr const char* kVmColumns[] = {"node_id", "host_id", "domain",    "mac",       "volume",
                                      "nvram",   "state",   "placement", "created_at", "updated_at"};

// A name in byte order, as SQLite compares text: hosts.name has the
// database's collation, which may not be "C".
constexpr const char kByName[] = " ORDER BY name COLLATE \"C\"";

// The named host, or every host, locked for booking (see the header).
Result<std::vector<Host>> lock_candidates(pg::Connection& c, std::string_view host) {
  if (host.empty()) {
    Result<pg::Rows> r = c.exec(host_select() + kByName + " FOR NO KEY UPDATE");
    if (!r) return r.take_error();
    if (r->empty()) return store_rules::no_hosts_registered();
    std::vector<Host> out;
    for (int i = 0; i < r->size(); ++i) out.push_back(read_host(*r, i));
    return out;
  }
  const bool by_id = is_uuid(host);
  Result<pg::Rows> r = c.exec(host_select() + (by_id ? " WHERE id = $1" : " WHERE name = $1") + " FOR NO KEY UPDATE",
                              pg::Params().add(by_id ? store_rules::lower(host) : std::string(host)));
  if (!r) return r.take_error();
  if (r->empty()) return store_rules::placement_host_unknown(host);
  return std::vector<Host>{read_host(*r, 0)};
}

}  // namespace

const std::string& host_select() {
  static const std::string s = "SELECT " + store_rules::column_list(kHostColumns) + " FROM hosts";
  return s;
}

Host read_host(const pg::Rows& r, int row) {
  Host h;
  h.id = r.text(row, 0);
  h.name = r.text(row, 1);
  h.uri = r.text(row, 2);
  h.username = r.text(row, 3);
  h.password_sealed = r.text(row, 4);
  h.options = json_or_empty(r.text(row, 5)).get<HostOptions>();
  h.status = r.text(row, 6);
  h.status_reason = r.text(row, 7);
  h.capacity = json_or_empty(r.text(row, 8)).get<HostCapacity>();
  h.discovered_at = r.int64(row, 9);
  h.created_at = r.int64(row, 10);
  h.updated_at = r.int64(row, 11);
  return h;
}

const std::string& reservation_select() {
  static const std::string s = "SELECT host_id, node_id, kind, item, amount FROM host_reservations";
  return s;
}

HostReservation read_reservation(const pg::Rows& r, int row) {
  return HostReservation{r.text(row, 0), r.text(row, 1), r.text(row, 2), r.text(row, 3), r.int64(row, 4)};
}

const std::string& vm_select() {
  static const std::string s = "SELECT " + store_rules::column_list(kVmColumns) + " FROM virtual_machines";
  return s;
}

VirtualMachine read_vm(const pg::Rows& r, int row) {
  VirtualMachine v;
  v.node_id = r.text(row, 0);
  v.host_id = r.text(row, 1);
  v.domain = r.text(row, 2);
  v.mac = r.text(row, 3);
  v.volume = r.text(row, 4);
  v.nvram = r.text(row, 5);
  v.state = r.text(row, 6);
  v.placement = json_or_empty(r.text(row, 7)).get<Placement>();
  v.created_at = r.int64(row, 8);
  v.updated_at = r.int64(row, 9);
  return v;
}

Result<Host> host_by(pg::Connection& c, std::string_view id_or_name) {
  const bool by_id = is_uuid(id_or_name);
  Result<pg::Rows> r = c.exec(host_select() + (by_id ? " WHERE id = $1" : " WHERE name = $1"),
                              pg::Params().add(by_id ? store_rules::lower(id_or_name) : std::string(id_or_name)));
  if (!r) return r.take_error();
  if (r->empty()) return store_rules::host_not_found(id_or_name);
  return read_host(*r, 0);
}

Result<std::vector<Host>> hosts_by_name(pg::Connection& c) {
  Result<pg::Rows> r = c.exec(host_select() + kByName);
  if (!r) return r.take_error();
  std::vector<Host> out;
  for (int i = 0; i < r->size(); ++i) out.push_back(read_host(*r, i));
  return out;
}

Result<std::vector<HostReservation>> reservations_of(pg::Connection& c, std::string_view host_id) {
  Result<pg::Rows> r =
      c.exec(reservation_select() + " WHERE host_id = $1 ORDER BY kind COLLATE \"C\", item COLLATE \"C\"",
             pg::Params().add(host_id));
  if (!r) return r.take_error();
  std::vector<HostReservation> out;
  for (int i = 0; i < r->size(); ++i) out.push_back(read_reservation(*r, i));
  return out;
}

Result<std::optional<VirtualMachine>> guest_of(pg::Connection& c, std::string_view node_id) {
  Result<pg::Rows> r = c.exec(vm_select() + " WHERE node_id = $1", pg::Params().add(node_id));
  if (!r) return r.take_error();
  if (r->empty()) return std::optional<VirtualMachine>();
  return std::optional<VirtualMachine>(read_vm(*r, 0));
}

Result<VirtualMachine> place_guest(pg::Connection& c, const VirtualMachine& vm, std::string_view host,
                                   const HostStore::PlacementPlanner& planner, int64_t now) {
  Result<std::vector<Host>> candidates = lock_candidates(c, host);
  if (!candidates) return candidates.take_error();
  Result<store_rules::HostChoice> choice = store_rules::choose_host(
      *candidates, [&](const Host& h) { return reservations_of(c, h.id); }, planner);
  if (!choice) return choice.take_error();
  const Host& h = (*candidates)[choice->index];
  const PlacementPlan& plan = choice->plan;
  VirtualMachine v = store_rules::placed_vm(vm, h, plan, now);
  static const std::string insert_vm = store_rules::insert_sql("virtual_machines", kVmColumns, '$');
  Result<pg::Rows> ins = c.exec(insert_vm, pg::Params()
                                               .add(v.node_id)
                                               .add(v.host_id)
                                               .add(v.domain)
                                               .add(v.mac)
                                               .add(v.volume)
                                               .add(v.nvram)
                                               .add(v.state)
                                               .add(json_text(json(v.placement)))
                                               .add(v.created_at)
                                               .add(v.updated_at));
  if (!ins) return ins.take_error();
  for (const HostReservation& r : plan.rows) {
    Result<pg::Rows> row = c.exec(
        "INSERT INTO host_reservations (host_id, node_id, kind, item, amount, created_at)"
        " VALUES ($1, $2, $3, $4, $5, $6)",
        pg::Params().add(r.host_id).add(r.node_id).add(r.kind).add(r.item).add(r.amount).add(now));
    if (!row) {
      Error e = row.take_error();
      if (pg::is_unique_violation(e)) return store_rules::booked_twice(r, h);
      return e;
    }
  }
  return v;
}

Status free_undefined_guest(pg::Connection& c, std::string_view node_id) {
  Result<pg::Rows> r =
      c.exec("DELETE FROM virtual_machines WHERE node_id = $1 AND domain = ''", pg::Params().add(node_id));
  if (!r) return r.take_error();
  return ok_status();
}

}  // namespace kiln::pg_rows
