// SqliteStore: hypervisor hosts, their reservations and the virtual machines
// placed on them (schemas/sql/sqlite/010_hosts.sql; issue 7).
//
// place_virtual_node is the one place capacity is booked: under BEGIN
// IMMEDIATE on the single writer it reads each candidate host's rows, lets
// the caller's planner decide, and inserts the winning plan's rows before
// committing, so no other booking can interleave between the check and the
// write. The UNIQUE index on (host_id, kind, item) is the second line of
// defence: a planner bug that picks a booked CPU or GPU fails the insert.

#include "common/ids.h"
#include "controller/store/sqlite_host_rows.h"
#include "controller/store/sqlite_store.h"
#include "controller/store/store_rules.h"

namespace kiln {

namespace {

constexpr const char kHostColumns[] =
    "id, name, uri, username, password_sealed, options, status, status_reason, capacity, discovered_at, "
    "created_at, updated_at";
constexpr const char kVmColumns[] = "node_id, host_id, domain, mac, volume, nvram, state, placement, created_at, updated_at";

using store_rules::json_or_empty;

Host read_host(const sql::Statement& s) {
  Host h;
  h.id = s.column_text(0);
  h.name = s.column_text(1);
  h.uri = s.column_text(2);
  h.username = s.column_text(3);
  h.password_sealed = s.column_text(4);
  h.options = json_or_empty(s.column_text(5)).get<HostOptions>();
  h.status = s.column_text(6);
  h.status_reason = s.column_text(7);
  h.capacity = json_or_empty(s.column_text(8)).get<HostCapacity>();
  h.discovered_at = s.column_int64(9);
  h.created_at = s.column_int64(10);
  h.updated_at = s.column_int64(11);
  return h;
}

VirtualMachine read_vm(const sql::Statement& s) {
  VirtualMachine v;
  v.node_id = s.column_text(0);
  v.host_id = s.column_text(1);
  v.domain = s.column_text(2);
  v.mac = s.column_text(3);
  v.volume = s.column_text(4);
  v.nvram = s.column_text(5);
  v.state = s.column_text(6);
  v.placement = json_or_empty(s.column_text(7)).get<Placement>();
  v.created_at = s.column_int64(8);
  v.updated_at = s.column_int64(9);
  return v;
}

Result<std::vector<HostReservation>> rows_of(sql::Database& db, const std::string& host_id) {
  std::vector<HostReservation> out;
  Result<sql::StatementRef> st =
      db.prepare("SELECT host_id, node_id, kind, item, amount FROM host_reservations WHERE host_id = ?1 "
                 "ORDER BY kind, item");
  if (!st) return st.take_error();
  (*st)->bind(1, host_id);
  while (true) {
    Result<bool> row = (*st)->step();
    if (!row) return row.take_error();
    if (!*row) break;
    out.push_back(HostReservation{(*st)->column_text(0), (*st)->column_text(1), (*st)->column_text(2),
                                  (*st)->column_text(3), (*st)->column_int64(4)});
  }
  return out;
}

Result<std::vector<Host>> hosts_of(sql::Database& db) {
  std::vector<Host> out;
  Result<sql::StatementRef> st = db.prepare(std::string("SELECT ") + kHostColumns + " FROM hosts ORDER BY name");
  if (!st) return st.take_error();
  while (true) {
    Result<bool> row = (*st)->step();
    if (!row) return row.take_error();
    if (!*row) break;
    out.push_back(read_host(**st));
  }
  return out;
}

Result<Host> host_by(sql::Database& db, std::string_view id_or_name) {
  const bool by_id = is_uuid(id_or_name);
  Result<sql::StatementRef> st = db.prepare(std::string("SELECT ") + kHostColumns + " FROM hosts WHERE " +
                                            (by_id ? "id = lower(?1)" : "name = ?1"));
  if (!st) return st.take_error();
  (*st)->bind(1, id_or_name);
  Result<bool> row = (*st)->step();
  if (!row) return row.take_error();
  if (!*row) return store_rules::host_not_found(id_or_name);
  return read_host(**st);
}

Result<std::optional<VirtualMachine>> vm_by(sql::Database& db, std::string_view node_id) {
  Result<sql::StatementRef> st =
      db.prepare(std::string("SELECT ") + kVmColumns + " FROM virtual_machines WHERE node_id = ?1");
  if (!st) return st.take_error();
  (*st)->bind(1, node_id);
  Result<bool> row = (*st)->step();
  if (!row) return row.take_error();
  if (!*row) return std::optional<VirtualMachine>();
  return std::optional<VirtualMachine>(read_vm(**st));
}

}  // namespace

namespace store_rows {

Result<std::optional<VirtualMachine>> guest_of(sql::Database& db, std::string_view node_id) { return vm_by(db, node_id); }

Result<VirtualMachine> place_guest(sql::Database& db, const VirtualMachine& vm, std::string_view host,
                                   const HostStore::PlacementPlanner& planner, int64_t now) {
  std::vector<Host> candidates;
  if (!host.empty()) {
    Result<Host> h = host_by(db, host);
    if (!h) {
      if (h.error().code == Code::kNotFound) return store_rules::placement_host_unknown(host);
      return h.take_error();
    }
    candidates.push_back(std::move(*h));
  } else {
    Result<std::vector<Host>> all = hosts_of(db);
    if (!all) return all.take_error();
    candidates = std::move(*all);
    if (candidates.empty()) return store_rules::no_hosts_registered();
  }
  Result<store_rules::HostChoice> choice = store_rules::choose_host(
      candidates, [&](const Host& h) { return rows_of(db, h.id); }, planner);
  if (!choice) return choice.take_error();
  const Host& h = candidates[choice->index];
  const PlacementPlan& plan = choice->plan;
  VirtualMachine v = store_rules::placed_vm(vm, h, plan, now);
  Result<sql::StatementRef> ins = db.prepare(std::string("INSERT INTO virtual_machines (") + kVmColumns +
                                             ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
  if (!ins) return ins.take_error();
  nlohmann::json placement = v.placement;
  (*ins)->bind(1, v.node_id)
      .bind(2, v.host_id)
      .bind(3, v.domain)
      .bind(4, v.mac)
      .bind(5, v.volume)
      .bind(6, v.nvram)
      .bind(7, v.state)
      .bind(8, store_rules::json_text(placement))
      .bind(9, v.created_at)
      .bind(10, v.updated_at);
  if (Status run = (*ins)->run(); !run) return run.take_error();
  for (const HostReservation& r : plan.rows) {
    Result<sql::StatementRef> row = db.prepare(
        "INSERT INTO host_reservations (host_id, node_id, kind, item, amount, created_at) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    if (!row) return row.take_error();
    (*row)->bind(1, r.host_id).bind(2, r.node_id).bind(3, r.kind).bind(4, r.item).bind(5, r.amount).bind(6, now);
    if (Status run = (*row)->run(); !run) {
      Error e = run.take_error();
      if (e.code == Code::kConflict) return store_rules::booked_twice(r, h);
      return e;
    }
  }
  return v;
}

}  // namespace store_rows

Result<Host> SqliteStore::create_host(const Host& host) {
  Result<Host> prepared = store_rules::host_to_create(host, now_ms());
  if (!prepared) return prepared;
  const Host& h = *prepared;
  Status s = on_writer([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st = db.prepare(std::string("INSERT INTO hosts (") + kHostColumns +
                                              ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
    if (!st) return st.take_error();
    nlohmann::json options = h.options;
    nlohmann::json capacity = h.capacity;
    (*st)->bind(1, h.id)
        .bind(2, h.name)
        .bind(3, h.uri)
        .bind(4, h.username)
        .bind(5, h.password_sealed)
        .bind(6, store_rules::json_text(options))
        .bind(7, h.status)
        .bind(8, h.status_reason)
        .bind(9, store_rules::json_text(capacity))
        .bind(10, h.discovered_at)
        .bind(11, h.created_at)
        .bind(12, h.updated_at);
    Status run = (*st)->run();
    if (!run) {
      Error e = run.take_error();
      if (e.code == Code::kConflict && e.message.find("hosts.name") != std::string::npos)
        return store_rules::host_name_taken(h);
      return e;
    }
    return ok_status();
  });
  if (!s) return s.take_error();
  return prepared;
}

Result<Host> SqliteStore::get_host(std::string_view id_or_name) {
  Result<Host> out = Error(Code::kInternal, "not read");
  Status s = on_reader([&](sql::Database& db) -> Status {
    out = host_by(db, id_or_name);
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

Result<std::vector<Host>> SqliteStore::list_hosts() {
  Result<std::vector<Host>> out = Error(Code::kInternal, "not read");
  Status s = on_reader([&](sql::Database& db) -> Status {
    out = hosts_of(db);
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

Status SqliteStore::set_host_status(std::string_view id, std::string_view status, std::string_view reason,
                                    const std::optional<HostCapacity>& capacity) {
  const int64_t now = now_ms();
  return on_writer([&](sql::Database& db) -> Status {
    std::string sql = "UPDATE hosts SET status = ?2, status_reason = ?3, updated_at = ?4";
    if (capacity) sql += ", capacity = ?5, discovered_at = ?4";
    sql += " WHERE id = ?1";
    Result<sql::StatementRef> st = db.prepare(sql);
    if (!st) return st.take_error();
    (*st)->bind(1, id).bind(2, status).bind(3, reason).bind(4, now);
    if (capacity) {
      nlohmann::json c = *capacity;
      (*st)->bind(5, store_rules::json_text(c));
    }
    if (Status run = (*st)->run(); !run) return run;
    if (db.changes() == 0) return Error(Code::kNotFound, "host " + std::string(id) + " not found");
    return ok_status();
  });
}

Status SqliteStore::delete_host(std::string_view id_or_name) {
  return on_writer([&](sql::Database& db) -> Status {
    Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
    if (!tx) return tx.take_error();
    Result<Host> h = host_by(db, id_or_name);
    if (!h) return h.take_error();
    Result<sql::StatementRef> count = db.prepare("SELECT count(*) FROM virtual_machines WHERE host_id = ?1");
    if (!count) return count.take_error();
    (*count)->bind(1, h->id);
    Result<bool> row = (*count)->step();
    if (!row) return row.take_error();
    int64_t n = *row ? (*count)->column_int64(0) : 0;
    (*count)->reset();
    if (n > 0) return store_rules::host_in_use(*h, n);
    Result<sql::StatementRef> del = db.prepare("DELETE FROM hosts WHERE id = ?1");
    if (!del) return del.take_error();
    (*del)->bind(1, h->id);
    if (Status run = (*del)->run(); !run) return run;
    return tx->commit();
  });
}

Result<std::vector<HostReservation>> SqliteStore::host_reservations(std::string_view host_id) {
  Result<std::vector<HostReservation>> out = Error(Code::kInternal, "not read");
  Status s = on_reader([&](sql::Database& db) -> Status {
    out = rows_of(db, std::string(host_id));
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

Result<VirtualMachine> SqliteStore::place_virtual_node(const VirtualMachine& vm, std::string_view host,
                                                       const PlacementPlanner& planner) {
  Result<VirtualMachine> out = Error(Code::kInternal, "not placed");
  const int64_t now = now_ms();
  Status s = on_writer([&](sql::Database& db) -> Status {
    Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
    if (!tx) return tx.take_error();
    Result<std::optional<VirtualMachine>> existing = vm_by(db, vm.node_id);
    if (!existing) return existing.take_error();
    if (*existing) {
      out = **existing;
      // Booked when an allocation claimed the node (capacity only): the
      // deploy names the guest now.
      if (out->domain.empty() && !vm.domain.empty()) {
        Result<sql::StatementRef> st =
            db.prepare("UPDATE virtual_machines SET domain = ?2, mac = ?3, updated_at = ?4 WHERE node_id = ?1");
        if (!st) return st.take_error();
        (*st)->bind(1, vm.node_id).bind(2, vm.domain).bind(3, vm.mac).bind(4, now);
        if (Status run = (*st)->run(); !run) return run;
        if (Status c = tx->commit(); !c) return c;
        out->domain = vm.domain;
        out->mac = vm.mac;
        out->updated_at = now;
      }
      return ok_status();
    }
    Result<VirtualMachine> placed = store_rows::place_guest(db, vm, host, planner, now);
    if (!placed) return placed.take_error();
    if (Status c = tx->commit(); !c) return c;
    out = *placed;
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

Result<VirtualMachine> SqliteStore::get_virtual_machine(std::string_view node_id) {
  Result<VirtualMachine> out = Error(Code::kInternal, "not read");
  Status s = on_reader([&](sql::Database& db) -> Status {
    Result<std::optional<VirtualMachine>> v = vm_by(db, node_id);
    if (!v) return v.take_error();
    if (!*v) {
      out = store_rules::vm_not_found(node_id);
    } else {
      out = **v;
    }
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

Result<std::vector<VirtualMachine>> SqliteStore::list_virtual_machines(std::string_view host_id) {
  std::vector<VirtualMachine> out;
  Status s = on_reader([&](sql::Database& db) -> Status {
    std::string sql = std::string("SELECT ") + kVmColumns + " FROM virtual_machines";
    if (!host_id.empty()) sql += " WHERE host_id = ?1";
    sql += " ORDER BY created_at, node_id";
    Result<sql::StatementRef> st = db.prepare(sql);
    if (!st) return st.take_error();
    if (!host_id.empty()) (*st)->bind(1, host_id);
    while (true) {
      Result<bool> row = (*st)->step();
      if (!row) return row.take_error();
      if (!*row) break;
      out.push_back(read_vm(**st));
    }
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

Status SqliteStore::update_virtual_machine(const VirtualMachine& vm) {
  const int64_t now = now_ms();
  return on_writer([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st = db.prepare(
        "UPDATE virtual_machines SET domain = ?2, mac = ?3, volume = ?4, nvram = ?5, state = ?6, updated_at = ?7 "
        "WHERE node_id = ?1");
    if (!st) return st.take_error();
    (*st)->bind(1, vm.node_id).bind(2, vm.domain).bind(3, vm.mac).bind(4, vm.volume).bind(5, vm.nvram);
    (*st)->bind(6, vm.state).bind(7, now);
    if (Status run = (*st)->run(); !run) return run;
    if (db.changes() == 0) return store_rules::vm_not_found(vm.node_id);
    return ok_status();
  });
}

Status SqliteStore::release_virtual_machine(std::string_view node_id) {
  return on_writer([&](sql::Database& db) -> Status {
    Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
    if (!tx) return tx.take_error();
    for (const char* sql : {"DELETE FROM host_reservations WHERE node_id = ?1",
                            "DELETE FROM virtual_machines WHERE node_id = ?1"}) {
      Result<sql::StatementRef> st = db.prepare(sql);
      if (!st) return st.take_error();
      (*st)->bind(1, node_id);
      if (Status run = (*st)->run(); !run) return run;
    }
    return tx->commit();
  });
}

}  // namespace kiln
