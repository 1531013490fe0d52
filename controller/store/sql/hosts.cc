#include <algorithm>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "controller/store/sql/host_rows.h"
#include "controller/store/sql/id_or_name.h"
#include "controller/store/sql/sql_store.h"
#include "controller/store/store_rules.h"

namespace kiln {

// SqlStore: hypervisor hosts, their reservation rows and the virtual machines
// placed on them (HostStore; schemas/sql/<dialect>/010_hosts.sql), and the
// booking every placement goes through (sql/host_rows.h says how it locks).
//
// place_virtual_node settles two placements of the same node with the
// virtual machine's primary key: on PostgreSQL the loser's INSERT waits for
// the winner and fails on it, its transaction is rolled back, and the next
// attempt finds the winner's machine and returns it, as a resumed deploy
// does. (On SQLite the writer transaction already orders them: the second
// finds the first's machine.) A machine found is read with its row locked,
// so taking the deploy's domain on one booked by an allocation's claim does
// not race a second deploy or a release.

namespace {

using json = nlohmann::json;
using db::Binds;
using db::where_id_or_name;
using db::Rows;
using store_rules::json_or_empty;
using store_rules::json_text;

// Row layout: one list of columns per table, each naming a column, binding a
// value's field as a statement parameter and reading it back from a result
// column. SELECT reads the columns in this order; INSERT binds them in this
// order ($1 is the first).
template <typename T>
struct Column {
  const char* name;
  void (*bind)(Binds& b, const T& v);
  void (*read)(const Rows& r, int c, T& v);
};

const Column<Host> kHostColumns[] = {
    {"id", [](Binds& b, const Host& h) { b.add(h.id); }, [](const Rows& r, int c, Host& h) { h.id = r.text(c); }},
    {"name", [](Binds& b, const Host& h) { b.add(h.name); },
     [](const Rows& r, int c, Host& h) { h.name = r.text(c); }},
    {"uri", [](Binds& b, const Host& h) { b.add(h.uri); }, [](const Rows& r, int c, Host& h) { h.uri = r.text(c); }},
    {"username", [](Binds& b, const Host& h) { b.add(h.username); },
     [](const Rows& r, int c, Host& h) { h.username = r.text(c); }},
    {"password_sealed", [](Binds& b, const Host& h) { b.add(h.password_sealed); },
     [](const Rows& r, int c, Host& h) { h.password_sealed = r.text(c); }},
    {"options", [](Binds& b, const Host& h) { b.add(json_text(json(h.options))); },
     [](const Rows& r, int c, Host& h) { h.options = json_or_empty(r.text(c)).get<HostOptions>(); }},
    {"status", [](Binds& b, const Host& h) { b.add(h.status); },
     [](const Rows& r, int c, Host& h) { h.status = r.text(c); }},
    {"status_reason", [](Binds& b, const Host& h) { b.add(h.status_reason); },
     [](const Rows& r, int c, Host& h) { h.status_reason = r.text(c); }},
    {"capacity", [](Binds& b, const Host& h) { b.add(json_text(json(h.capacity))); },
     [](const Rows& r, int c, Host& h) { h.capacity = json_or_empty(r.text(c)).get<HostCapacity>(); }},
    {"discovered_at", [](Binds& b, const Host& h) { b.add(h.discovered_at); },
     [](const Rows& r, int c, Host& h) { h.discovered_at = r.int64(c); }},
    {"created_at", [](Binds& b, const Host& h) { b.add(h.created_at); },
     [](const Rows& r, int c, Host& h) { h.created_at = r.int64(c); }},
    {"updated_at", [](Binds& b, const Host& h) { b.add(h.updated_at); },
     [](const Rows& r, int c, Host& h) { h.updated_at = r.int64(c); }},
};

const Column<VirtualMachine> kVmColumns[] = {
    {"node_id", [](Binds& b, const VirtualMachine& v) { b.add(v.node_id); },
     [](const Rows& r, int c, VirtualMachine& v) { v.node_id = r.text(c); }},
    {"host_id", [](Binds& b, const VirtualMachine& v) { b.add(v.host_id); },
     [](const Rows& r, int c, VirtualMachine& v) { v.host_id = r.text(c); }},
    {"domain", [](Binds& b, const VirtualMachine& v) { b.add(v.domain); },
     [](const Rows& r, int c, VirtualMachine& v) { v.domain = r.text(c); }},
    {"mac", [](Binds& b, const VirtualMachine& v) { b.add(v.mac); },
     [](const Rows& r, int c, VirtualMachine& v) { v.mac = r.text(c); }},
    {"volume", [](Binds& b, const VirtualMachine& v) { b.add(v.volume); },
     [](const Rows& r, int c, VirtualMachine& v) { v.volume = r.text(c); }},
    {"nvram", [](Binds& b, const VirtualMachine& v) { b.add(v.nvram); },
     [](const Rows& r, int c, VirtualMachine& v) { v.nvram = r.text(c); }},
    {"state", [](Binds& b, const VirtualMachine& v) { b.add(v.state); },
     [](const Rows& r, int c, VirtualMachine& v) { v.state = r.text(c); }},
    {"placement", [](Binds& b, const VirtualMachine& v) { b.add(json_text(json(v.placement))); },
     [](const Rows& r, int c, VirtualMachine& v) { v.placement = json_or_empty(r.text(c)).get<Placement>(); }},
    {"created_at", [](Binds& b, const VirtualMachine& v) { b.add(v.created_at); },
     [](const Rows& r, int c, VirtualMachine& v) { v.created_at = r.int64(c); }},
    {"updated_at", [](Binds& b, const VirtualMachine& v) { b.add(v.updated_at); },
     [](const Rows& r, int c, VirtualMachine& v) { v.updated_at = r.int64(c); }},
};

template <typename T>
std::vector<const char*> names_of(std::span<const Column<T>> columns) {
  std::vector<const char*> out;
  for (const Column<T>& c : columns) out.push_back(c.name);
  return out;
}

// "SELECT <every column> FROM <table>"
template <typename T>
std::string select_sql(std::span<const Column<T>> columns, std::string_view table) {
  return "SELECT " + store_rules::column_list(names_of(columns)) + " FROM " + std::string(table);
}

template <typename T>
T read_row(std::span<const Column<T>> columns, const Rows& r) {
  T v;
  int c = 0;
  for (const Column<T>& col : columns) col.read(r, c++, v);
  return v;
}

// Inserts `v` as one row of `table`, every column bound.
template <typename T>
Result<int64_t> insert_row(db::Conn& conn, std::span<const Column<T>> columns, std::string_view table, const T& v) {
  Binds b;
  for (const Column<T>& col : columns) col.bind(b, v);
  return conn.exec(store_rules::insert_sql(table, names_of(columns)), b);
}

const std::string& host_select() {
  static const std::string s = select_sql<Host>(kHostColumns, "hosts");
  return s;
}
const std::string& vm_select() {
  static const std::string s = select_sql<VirtualMachine>(kVmColumns, "virtual_machines");
  return s;
}
Host read_host(const Rows& r) { return read_row<Host>(kHostColumns, r); }
VirtualMachine read_vm(const Rows& r) { return read_row<VirtualMachine>(kVmColumns, r); }

constexpr db::Constraint kHostName{"hosts.name", "hosts_name_key"};
constexpr db::Constraint kReservationItem{"host_reservations.host_id, host_reservations.kind, host_reservations.item",
                                          "host_reservations_item"};

// Names compare in byte order, as SQLite compares text: PostgreSQL's hosts.name
// has the database's collation, which may not be "C", so the order every
// caller sees is made here rather than by ORDER BY.
void sort_by_name(std::vector<Host>& hosts) {
  std::sort(hosts.begin(), hosts.end(), [](const Host& a, const Host& b) { return a.name < b.name; });
}

// The host by UUID or name, locked (`lock`) as sql/host_rows.h says.
Result<Host> host_by(db::Conn& c, std::string_view id_or_name, bool lock) {
  Binds b;
  std::string sql = host_select() + where_id_or_name(id_or_name, b);
  if (lock) sql += c.dialect().for_update;
  return db::query_one<Host>(c, sql, b, read_host, "host " + std::string(id_or_name) + " not found");
}

// Every host, by name; locked (`lock`) in the database's name order, one
// order for every locker, so two lockers of several hosts queue rather than
// deadlock.
Result<std::vector<Host>> hosts_by_name(db::Conn& c, bool lock) {
  std::string sql = host_select() + " ORDER BY name";
  if (lock) sql += c.dialect().for_update;
  Result<Rows> r = c.query(sql);
  if (!r) return r.take_error();
  Result<std::vector<Host>> out = db::collect<Host>(*r, read_host);
  if (out) sort_by_name(*out);
  return out;
}

// The reservation rows of `host_id`, by kind then item (byte order, as above).
Result<std::vector<HostReservation>> reservations_of(db::Conn& c, std::string_view host_id) {
  Result<Rows> r =
      c.query("SELECT host_id, node_id, kind, item, amount FROM host_reservations WHERE host_id = $1",
              Binds().add(host_id));
  if (!r) return r.take_error();
  Result<std::vector<HostReservation>> out = db::collect<HostReservation>(*r, [](const Rows& row) {
    return HostReservation{row.text(0), row.text(1), row.text(2), row.text(3), row.int64(4)};
  });
  if (out)
    std::sort(out->begin(), out->end(), [](const HostReservation& a, const HostReservation& b) {
      return std::tie(a.kind, a.item) < std::tie(b.kind, b.item);
    });
  return out;
}

// The candidate hosts of a booking, locked (sql/host_rows.h).
Result<std::vector<Host>> lock_candidates(db::Conn& c, std::string_view host) {
  if (host.empty()) {
    Result<std::vector<Host>> all = hosts_by_name(c, /*lock=*/true);
    if (all && all->empty()) return store_rules::no_hosts_registered();
    return all;
  }
  Result<Host> h = host_by(c, host, /*lock=*/true);
  if (!h) {
    if (h.error().code == Code::kNotFound) return store_rules::placement_host_unknown(host);
    return h.take_error();
  }
  return std::vector<Host>{std::move(*h)};
}

}  // namespace

namespace host_rows {

Result<std::optional<VirtualMachine>> guest_of(db::Conn& c, std::string_view node_id, bool lock) {
  std::string sql = vm_select() + " WHERE node_id = $1";
  if (lock) sql += c.dialect().for_update;
  Result<Rows> r = c.query(sql, Binds().add(node_id));
  if (!r) return r.take_error();
  Result<bool> row = r->next();
  if (!row) return row.take_error();
  if (!*row) return std::optional<VirtualMachine>();
  return std::optional<VirtualMachine>(read_vm(*r));
}

Result<VirtualMachine> place_guest(db::Conn& c, const VirtualMachine& vm, std::string_view host,
                                   const HostStore::PlacementPlanner& planner, int64_t now) {
  Result<std::vector<Host>> candidates = lock_candidates(c, host);
  if (!candidates) return candidates.take_error();
  Result<store_rules::HostChoice> choice = store_rules::choose_host(
      *candidates, [&](const Host& h) { return reservations_of(c, h.id); }, planner);
  if (!choice) return choice.take_error();
  const Host& h = (*candidates)[choice->index];
  const PlacementPlan& plan = choice->plan;
  VirtualMachine v = store_rules::placed_vm(vm, h, plan, now);
  if (Result<int64_t> ins = insert_row<VirtualMachine>(c, kVmColumns, "virtual_machines", v); !ins)
    return ins.take_error();
  for (const HostReservation& r : plan.rows) {
    Result<int64_t> row = c.exec(
        "INSERT INTO host_reservations (host_id, node_id, kind, item, amount, created_at)"
        " VALUES ($1, $2, $3, $4, $5, $6)",
        Binds().add(r.host_id).add(r.node_id).add(r.kind).add(r.item).add(r.amount).add(now));
    if (!row) {
      Error e = row.take_error();
      if (c.dialect().violated(e, kReservationItem)) return store_rules::booked_twice(r, h);
      return e;
    }
  }
  return v;
}

Status book_guest(db::Conn& c, const Node& n, const VirtualNodeMaker& vms, int64_t now) {
  Result<std::optional<VirtualMachine>> existing = guest_of(c, n.id);
  if (!existing) return existing.take_error();
  if (*existing) return ok_status();
  VirtualMachine vm;
  vm.node_id = n.id;
  HostStore::PlacementPlanner planner = [&vms, nid = n.id](const Host& h, const std::vector<HostReservation>& booked) {
    return vms.plan(h, booked, nid);
  };
  Result<VirtualMachine> placed = place_guest(c, vm, n.bmc.options.value("host", n.host), planner, now);
  if (!placed) return placed.take_error();
  return ok_status();
}

Status free_undefined_guest(db::Conn& c, std::string_view node_id) {
  Result<int64_t> n = c.exec("DELETE FROM virtual_machines WHERE node_id = $1 AND domain = ''", Binds().add(node_id));
  if (!n) return n.take_error();
  return ok_status();
}

}  // namespace host_rows

Result<Host> SqlStore::create_host(const Host& host) {
  Result<Host> prepared = store_rules::host_to_create(host, now_ms());
  if (!prepared) return prepared;
  Status s = autocommit([&](db::Conn& c) -> Status {
    Result<int64_t> n = insert_row<Host>(c, kHostColumns, "hosts", *prepared);
    if (n) return ok_status();
    Error e = n.take_error();
    if (c.dialect().violated(e, kHostName)) return store_rules::host_name_taken(*prepared);
    return e;
  });
  if (!s) return s.take_error();
  return prepared;
}

Result<Host> SqlStore::get_host(std::string_view id_or_name) {
  return read_value<Host>([&](db::Conn& c) { return host_by(c, id_or_name, /*lock=*/false); });
}

Result<std::vector<Host>> SqlStore::list_hosts() {
  return read_value<std::vector<Host>>([&](db::Conn& c) { return hosts_by_name(c, /*lock=*/false); });
}

Status SqlStore::set_host_status(std::string_view id, std::string_view status, std::string_view reason,
                                 const std::optional<HostCapacity>& capacity) {
  std::string sql = "UPDATE hosts SET status = $2, status_reason = $3, updated_at = $4";
  Binds b;
  b.add(id).add(status).add(reason).add(now_ms());
  if (capacity) {
    sql += ", capacity = $5, discovered_at = $4";
    b.add(json_text(json(*capacity)));
  }
  sql += " WHERE id = $1";
  return autocommit([&](db::Conn& c) -> Status {
    Result<int64_t> n = c.exec(sql, b);
    if (!n) return n.take_error();
    if (*n == 0) return store_rules::host_not_found(id);
    return ok_status();
  });
}

Status SqlStore::delete_host(std::string_view id_or_name) {
  return write([&](Tx& tx) -> Status {
    // Locked as a booking locks it (sql/host_rows.h): a booking on this host
    // waits for the delete, or the delete for the booking, whose machine the
    // count below then sees.
    Result<Host> h = host_by(tx.conn, id_or_name, /*lock=*/true);
    if (!h) return h.take_error();
    Result<int64_t> n =
        db::query_int(tx.conn, "SELECT count(*) FROM virtual_machines WHERE host_id = $1", Binds().add(h->id));
    if (!n) return n.take_error();
    if (*n > 0) return store_rules::host_in_use(*h, *n);
    Result<int64_t> d = tx.conn.exec("DELETE FROM hosts WHERE id = $1", Binds().add(h->id));
    if (!d) return d.take_error();
    return ok_status();
  });
}

Result<std::vector<HostReservation>> SqlStore::host_reservations(std::string_view host_id) {
  return read_value<std::vector<HostReservation>>([&](db::Conn& c) { return reservations_of(c, host_id); });
}

Result<VirtualMachine> SqlStore::place_virtual_node(const VirtualMachine& vm, std::string_view host,
                                                    const PlacementPlanner& planner) {
  const int64_t now = now_ms();
  // Two attempts: the second returns the machine a racing placement of the
  // same node committed first (above).
  constexpr int kAttempts = 2;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    bool raced = false;
    Result<VirtualMachine> out = write_value<VirtualMachine>([&](Tx& tx) -> Result<VirtualMachine> {
      Result<std::optional<VirtualMachine>> existing = host_rows::guest_of(tx.conn, vm.node_id, /*lock=*/true);
      if (!existing) return existing.take_error();
      if (!*existing) {
        Result<VirtualMachine> placed = host_rows::place_guest(tx.conn, vm, host, planner, now);
        raced = !placed && tx.conn.dialect().violated(placed.error(), host_rows::kVmNode);
        return placed;
      }
      VirtualMachine v = std::move(**existing);
      // Booked when an allocation claimed the node (capacity only): the
      // deploy names the guest now.
      if (v.domain.empty() && !vm.domain.empty()) {
        Result<int64_t> up =
            tx.conn.exec("UPDATE virtual_machines SET domain = $2, mac = $3, updated_at = $4 WHERE node_id = $1",
                         Binds().add(vm.node_id).add(vm.domain).add(vm.mac).add(now));
        if (!up) return up.take_error();
        v.domain = vm.domain;
        v.mac = vm.mac;
        v.updated_at = now;
      }
      return v;
    });
    if (!raced) return out;
  }
  return Error(Code::kUnavailable, "node " + vm.node_id + " was placed and released concurrently; retry");
}

Result<VirtualMachine> SqlStore::get_virtual_machine(std::string_view node_id) {
  return read_value<VirtualMachine>([&](db::Conn& c) -> Result<VirtualMachine> {
    Result<std::optional<VirtualMachine>> v = host_rows::guest_of(c, node_id);
    if (!v) return v.take_error();
    if (!*v) return store_rules::vm_not_found(node_id);
    return std::move(**v);
  });
}

Result<std::vector<VirtualMachine>> SqlStore::list_virtual_machines(std::string_view host_id) {
  std::string sql = vm_select();
  Binds b;
  if (!host_id.empty()) {
    sql += " WHERE host_id = $1";
    b.add(host_id);
  }
  sql += " ORDER BY created_at, node_id";
  return read_value<std::vector<VirtualMachine>>([&](db::Conn& c) -> Result<std::vector<VirtualMachine>> {
    Result<Rows> r = c.query(sql, b);
    if (!r) return r.take_error();
    return db::collect<VirtualMachine>(*r, read_vm);
  });
}

Status SqlStore::update_virtual_machine(const VirtualMachine& vm) {
  return autocommit([&](db::Conn& c) -> Status {
    Result<int64_t> n = c.exec(
        "UPDATE virtual_machines SET domain = $2, mac = $3, volume = $4, nvram = $5, state = $6, updated_at = $7"
        " WHERE node_id = $1",
        Binds().add(vm.node_id).add(vm.domain).add(vm.mac).add(vm.volume).add(vm.nvram).add(vm.state).add(now_ms()));
    if (!n) return n.take_error();
    if (*n == 0) return store_rules::vm_not_found(vm.node_id);
    return ok_status();
  });
}

Status SqlStore::release_virtual_machine(std::string_view node_id) {
  return write([&](Tx& tx) -> Status {
    for (const char* sql : {"DELETE FROM host_reservations WHERE node_id = $1",
                            "DELETE FROM virtual_machines WHERE node_id = $1"}) {
      if (Result<int64_t> d = tx.conn.exec(sql, Binds().add(node_id)); !d) return d.take_error();
    }
    return ok_status();
  });
}

}  // namespace kiln
