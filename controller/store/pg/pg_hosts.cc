#include <utility>

#include "controller/store/pg/pg_host_rows.h"
#include "controller/store/pg/pg_store.h"
#include "controller/store/store_rules.h"

namespace kiln {

using json = nlohmann::json;
using store_rules::json_text;

// PgStore: hypervisor hosts, their reservation rows and the virtual machines
// placed on them (HostStore), as sqlite_hosts.cc.
//
// Capacity is booked by pg_rows::place_guest under the host row locks
// pg_host_rows.h describes. place_virtual_node settles the other race, two
// placements of the same node, with the virtual machine's primary key: the
// loser's INSERT waits for the winner and fails, its transaction is rolled
// back, and a second attempt finds the winner's machine and returns it, as a
// resumed deploy does. Taking the deploy's domain on a machine booked by an
// allocation's claim is one conditional UPDATE (only while it has none).

namespace {

constexpr int kPlaceAttempts = 2;

}  // namespace

Result<Host> PgStore::create_host(const Host& host) {
  Result<Host> prepared = store_rules::host_to_create(host, now_ms());
  if (!prepared) return prepared;
  const Host& h = *prepared;
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(
      "INSERT INTO hosts (id, name, uri, username, password_sealed, options, status, status_reason, capacity,"
      " discovered_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
      pg::Params()
          .add(h.id)
          .add(h.name)
          .add(h.uri)
          .add(h.username)
          .add(h.password_sealed)
          .add(json_text(json(h.options)))
          .add(h.status)
          .add(h.status_reason)
          .add(json_text(json(h.capacity)))
          .add(h.discovered_at)
          .add(h.created_at)
          .add(h.updated_at));
  if (!r) {
    Error e = r.take_error();
    if (pg::names_constraint(e, "hosts_name_key")) return store_rules::host_name_taken(h);
    return e;
  }
  return prepared;
}

Result<Host> PgStore::get_host(std::string_view id_or_name) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  return pg_rows::host_by(l->conn(), id_or_name);
}

Result<std::vector<Host>> PgStore::list_hosts() {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  return pg_rows::hosts_by_name(l->conn());
}

Status PgStore::set_host_status(std::string_view id, std::string_view status, std::string_view reason,
                                const std::optional<HostCapacity>& capacity) {
  const int64_t now = now_ms();
  std::string sql = "UPDATE hosts SET status = $2, status_reason = $3, updated_at = $4";
  pg::Params p;
  p.add(id).add(status).add(reason).add(now);
  if (capacity) {
    sql += ", capacity = $5, discovered_at = $4";
    p.add(json_text(json(*capacity)));
  }
  sql += " WHERE id = $1";
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(sql, p);
  if (!r) return r.take_error();
  if (r->affected() == 0) return store_rules::host_not_found(id);
  return ok_status();
}

Status PgStore::delete_host(std::string_view id_or_name) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& c = l->conn();
  Result<pg::Transaction> tx = pg::Transaction::begin(c);
  if (!tx) return tx.take_error();
  Result<Host> h = pg_rows::host_by(c, id_or_name);
  if (!h) return h.take_error();
  // The row lock makes a booking on this host wait for the delete, or the
  // delete for the booking, whose machine the count below then sees.
  Result<pg::Rows> lock = c.exec("SELECT 1 FROM hosts WHERE id = $1 FOR UPDATE", pg::Params().add(h->id));
  if (!lock) return lock.take_error();
  if (lock->empty()) return store_rules::host_not_found(id_or_name);  // deleted meanwhile
  Result<pg::Rows> n = c.exec("SELECT count(*) FROM virtual_machines WHERE host_id = $1", pg::Params().add(h->id));
  if (!n) return n.take_error();
  if (n->int64(0, 0) > 0) return store_rules::host_in_use(*h, n->int64(0, 0));
  if (Result<pg::Rows> d = c.exec("DELETE FROM hosts WHERE id = $1", pg::Params().add(h->id)); !d)
    return d.take_error();
  return tx->commit();
}

Result<std::vector<HostReservation>> PgStore::host_reservations(std::string_view host_id) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  return pg_rows::reservations_of(l->conn(), host_id);
}

Result<VirtualMachine> PgStore::place_virtual_node(const VirtualMachine& vm, std::string_view host,
                                                   const PlacementPlanner& planner) {
  const int64_t now = now_ms();
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& c = l->conn();
  for (int attempt = 0; attempt < kPlaceAttempts; ++attempt) {
    Result<pg::Transaction> tx = pg::Transaction::begin(c);
    if (!tx) return tx.take_error();
    Result<std::optional<VirtualMachine>> existing = pg_rows::guest_of(c, vm.node_id);
    if (!existing) return existing.take_error();
    if (*existing) {
      VirtualMachine out = **existing;
      // Booked when an allocation claimed the node (capacity only): the
      // deploy names the guest now, unless another deploy did first.
      if (out.domain.empty() && !vm.domain.empty()) {
        Result<pg::Rows> up = c.exec(
            "UPDATE virtual_machines SET domain = $2, mac = $3, updated_at = $4 WHERE node_id = $1 AND domain = ''",
            pg::Params().add(vm.node_id).add(vm.domain).add(vm.mac).add(now));
        if (!up) return up.take_error();
        if (up->affected() == 1) {
          if (Status s = tx->commit(); !s) return s.take_error();
          out.domain = vm.domain;
          out.mac = vm.mac;
          out.updated_at = now;
          return out;
        }
        Result<std::optional<VirtualMachine>> now_there = pg_rows::guest_of(c, vm.node_id);
        if (!now_there) return now_there.take_error();
        if (*now_there) return std::move(**now_there);
        continue;  // released in between: place it afresh
      }
      return out;
    }
    Result<VirtualMachine> placed = pg_rows::place_guest(c, vm, host, planner, now);
    if (!placed) {
      // Another placement of this node committed first: the next attempt
      // returns its machine.
      if (pg::names_constraint(placed.error(), "virtual_machines_pkey")) continue;
      return placed.take_error();
    }
    if (Status s = tx->commit(); !s) return s.take_error();
    return placed;
  }
  return Error(Code::kUnavailable, "node " + vm.node_id + " was placed and released concurrently; retry");
}

Result<VirtualMachine> PgStore::get_virtual_machine(std::string_view node_id) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<std::optional<VirtualMachine>> v = pg_rows::guest_of(l->conn(), node_id);
  if (!v) return v.take_error();
  if (!*v) return store_rules::vm_not_found(node_id);
  return std::move(**v);
}

Result<std::vector<VirtualMachine>> PgStore::list_virtual_machines(std::string_view host_id) {
  std::string sql = pg_rows::vm_select();
  pg::Params p;
  if (!host_id.empty()) {
    sql += " WHERE host_id = $1";
    p.add(host_id);
  }
  sql += " ORDER BY created_at, node_id";
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(sql, p);
  if (!r) return r.take_error();
  std::vector<VirtualMachine> out;
  for (int i = 0; i < r->size(); ++i) out.push_back(pg_rows::read_vm(*r, i));
  return out;
}

Status PgStore::update_virtual_machine(const VirtualMachine& vm) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(
      "UPDATE virtual_machines SET domain = $2, mac = $3, volume = $4, nvram = $5, state = $6, updated_at = $7"
      " WHERE node_id = $1",
      pg::Params().add(vm.node_id).add(vm.domain).add(vm.mac).add(vm.volume).add(vm.nvram).add(vm.state).add(now_ms()));
  if (!r) return r.take_error();
  if (r->affected() == 0) return store_rules::vm_not_found(vm.node_id);
  return ok_status();
}

Status PgStore::release_virtual_machine(std::string_view node_id) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& c = l->conn();
  Result<pg::Transaction> tx = pg::Transaction::begin(c);
  if (!tx) return tx.take_error();
  for (const char* sql : {"DELETE FROM host_reservations WHERE node_id = $1",
                          "DELETE FROM virtual_machines WHERE node_id = $1"}) {
    if (Result<pg::Rows> d = c.exec(sql, pg::Params().add(node_id)); !d) return d.take_error();
  }
  return tx->commit();
}

}  // namespace kiln
