#include "controller/store/pg/pg_guest_booking.h"

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/ids.h"
#include "controller/store/store_rules.h"

namespace kiln::pg_rows {

namespace {

using json = nlohmann::json;

constexpr const char kHostColumns[] =
    "id, name, uri, username, password_sealed, options, status, status_reason, capacity, discovered_at, "
    "created_at, updated_at";
constexpr const char kVmColumns[] =
    "node_id, host_id, domain, mac, volume, nvram, state, placement, created_at, updated_at";

json parse_or_empty(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? json::object() : j;
}

Host read_host(const pg::Rows& r, int row) {
  Host h;
  h.id = r.text(row, 0);
  h.name = r.text(row, 1);
  h.uri = r.text(row, 2);
  h.username = r.text(row, 3);
  h.password_sealed = r.text(row, 4);
  h.options = parse_or_empty(r.text(row, 5)).get<HostOptions>();
  h.status = r.text(row, 6);
  h.status_reason = r.text(row, 7);
  h.capacity = parse_or_empty(r.text(row, 8)).get<HostCapacity>();
  h.discovered_at = r.int64(row, 9);
  h.created_at = r.int64(row, 10);
  h.updated_at = r.int64(row, 11);
  return h;
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
  v.placement = parse_or_empty(r.text(row, 7)).get<Placement>();
  v.created_at = r.int64(row, 8);
  v.updated_at = r.int64(row, 9);
  return v;
}

Result<std::vector<HostReservation>> rows_of(pg::Connection& c, const std::string& host_id) {
  // Byte order, as SQLite's, whatever the database's collation.
  Result<pg::Rows> r = c.exec(
      "SELECT host_id, node_id, kind, item, amount FROM host_reservations WHERE host_id = $1"
      " ORDER BY kind COLLATE \"C\", item COLLATE \"C\"",
      pg::Params().add(host_id));
  if (!r) return r.take_error();
  std::vector<HostReservation> out;
  for (int i = 0; i < r->size(); ++i)
    out.push_back(HostReservation{r->text(i, 0), r->text(i, 1), r->text(i, 2), r->text(i, 3), r->int64(i, 4)});
  return out;
}

}  // namespace

Result<std::optional<VirtualMachine>> guest_of(pg::Connection& c, std::string_view node_id) {
  Result<pg::Rows> r = c.exec(std::string("SELECT ") + kVmColumns + " FROM virtual_machines WHERE node_id = $1",
                              pg::Params().add(node_id));
  if (!r) return r.take_error();
  if (r->empty()) return std::optional<VirtualMachine>();
  return std::optional<VirtualMachine>(read_vm(*r, 0));
}

Result<VirtualMachine> place_guest(pg::Connection& c, const VirtualMachine& vm, std::string_view host,
                                   const HostStore::PlacementPlanner& planner, int64_t now) {
  // Every host, locked in name order (the header says why), then the
  // candidates among them.
  Result<pg::Rows> locked =
      c.exec(std::string("SELECT ") + kHostColumns + " FROM hosts ORDER BY name COLLATE \"C\" FOR NO KEY UPDATE");
  if (!locked) return locked.take_error();
  std::vector<Host> candidates;
  const std::string want = is_uuid(host) ? store_rules::lower(host) : std::string(host);
  for (int i = 0; i < locked->size(); ++i) {
    Host h = read_host(*locked, i);
    if (host.empty() || (is_uuid(host) ? h.id == want : h.name == want)) candidates.push_back(std::move(h));
  }
  if (!host.empty() && candidates.empty()) return Error::invalid("/host", "no such host: " + std::string(host));
  if (candidates.empty()) return Error(Code::kConflict, "no hypervisor host is registered");

  std::string shortages;
  for (const Host& h : candidates) {
    Result<std::vector<HostReservation>> booked = rows_of(c, h.id);
    if (!booked) return booked.take_error();
    Result<PlacementPlan> plan = planner(h, *booked);
    if (!plan) {
      if (plan.error().code != Code::kConflict) return plan.take_error();
      shortages += (shortages.empty() ? "" : "; ") + plan.error().message;
      continue;
    }
    VirtualMachine v = vm;
    v.host_id = h.id;
    v.placement = plan->placement;
    v.created_at = now;
    v.updated_at = now;
    json placement = v.placement;
    Result<pg::Rows> ins = c.exec(std::string("INSERT INTO virtual_machines (") + kVmColumns +
                                      ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                                  pg::Params()
                                      .add(v.node_id)
                                      .add(v.host_id)
                                      .add(v.domain)
                                      .add(v.mac)
                                      .add(v.volume)
                                      .add(v.nvram)
                                      .add(v.state)
                                      .add(placement.dump())
                                      .add(v.created_at)
                                      .add(v.updated_at));
    if (!ins) return ins.take_error();
    for (const HostReservation& r : plan->rows) {
      Result<pg::Rows> row = c.exec(
          "INSERT INTO host_reservations (host_id, node_id, kind, item, amount, created_at) "
          "VALUES ($1, $2, $3, $4, $5, $6)",
          pg::Params().add(r.host_id).add(r.node_id).add(r.kind).add(r.item).add(r.amount).add(now));
      if (!row) {
        Error e = row.take_error();
        if (e.code == Code::kConflict)
          return Error(Code::kInternal, "placement booked " + r.kind + " " + r.item + " twice on host " + h.name);
        return e;
      }
    }
    return v;
  }
  return Error(Code::kConflict, "no host has room for this node: " + shortages);
}

Status free_undefined_guest(pg::Connection& c, std::string_view node_id) {
  Result<pg::Rows> r =
      c.exec("DELETE FROM virtual_machines WHERE node_id = $1 AND domain = ''", pg::Params().add(node_id));
  if (!r) return r.take_error();
  return ok_status();
}

}  // namespace kiln::pg_rows
