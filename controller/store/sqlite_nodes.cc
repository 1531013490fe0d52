#include "controller/store/sqlite_store.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <unordered_map>
#include <utility>
#include <variant>

#include "common/ids.h"
#include "controller/store/sqlite_locks.h"
#include "controller/store/sqlite_node_rows.h"
#include "controller/store/sqlite_rows.h"
#include "controller/store/store_rules.h"

namespace kiln {

using json = nlohmann::json;
using namespace store_rows;
using namespace store_rules;

// SqliteStore: nodes and ports (NodeRepo).

namespace {

// ---------------------------------------------------------------------------
// Row layout. kNodeColumns is the one list of node columns: each row names a
// column, binds a Node's field as a statement parameter and reads it back
// from a result column. SELECTs read the columns in this order; INSERT and
// UPDATE bind them in this order (parameter index + 1).

using St = sql::Statement;

// Enum columns: text written by to_string, read back by `parse`.
template <typename E, typename Parse>
Status read_enum(const St& st, int c, const Node& n, std::string_view column, Parse parse, E& out) {
  std::string v = st.column_text(c);
  std::optional<E> e = parse(v);
  if (!e) return unknown_node_value(n.id, column, v);
  out = *e;
  return ok_status();
}

template <typename E, typename Parse>
Status read_opt_enum(const St& st, int c, const Node& n, std::string_view column, Parse parse,
                     std::optional<E>& out) {
  if (st.column_is_null(c)) return ok_status();
  E e{};
  Status r = read_enum(st, c, n, column, parse, e);
  if (r) out = e;
  return r;
}

Status read_json(const St& st, int c, std::string_view column, json& out) {
  Result<json> j = parse_json_column(st, c, column);
  if (!j) return j.take_error();
  out = std::move(*j);
  return ok_status();
}

// A JSON array of strings (traits, addresses).
Status read_string_list(const St& st, int c, std::string_view column, std::vector<std::string>& out) {
  json list;
  Status r = read_json(st, c, column, list);
  if (r) out = string_list(list);
  return r;
}

struct NodeColumn {
  const char* name;
  void (*bind)(St& st, int i, const Node& n);
  Status (*read)(const St& st, int c, Node& n);
};

const NodeColumn kNodeColumns[] = {
    {"id", [](St& s, int i, const Node& n) { s.bind(i, n.id); },
     [](const St& s, int c, Node& n) { n.id = s.column_text(c); return ok_status(); }},
    {"name",  // NULL when unnamed: the unique index allows many
     [](St& s, int i, const Node& n) { s.bind(i, n.name.empty() ? std::optional<std::string>() : n.name); },
     [](const St& s, int c, Node& n) { n.name = s.column_text(c); return ok_status(); }},
    {"kind", [](St& s, int i, const Node& n) { s.bind(i, to_string(n.kind)); },
     [](const St& s, int c, Node& n) { return read_enum(s, c, n, "kind", parse_node_kind, n.kind); }},
    {"bmc_driver", [](St& s, int i, const Node& n) { s.bind(i, n.bmc.driver); },
     [](const St& s, int c, Node& n) { n.bmc.driver = s.column_text(c); return ok_status(); }},
    {"bmc_address", [](St& s, int i, const Node& n) { s.bind(i, n.bmc.address); },
     [](const St& s, int c, Node& n) { n.bmc.address = s.column_text(c); return ok_status(); }},
    {"bmc_username", [](St& s, int i, const Node& n) { s.bind(i, n.bmc.username); },
     [](const St& s, int c, Node& n) { n.bmc.username = s.column_text(c); return ok_status(); }},
    {"bmc_password_sealed", [](St& s, int i, const Node& n) { s.bind(i, n.bmc.password_sealed); },
     [](const St& s, int c, Node& n) { n.bmc.password_sealed = s.column_text(c); return ok_status(); }},
    {"bmc_system_id", [](St& s, int i, const Node& n) { s.bind(i, n.bmc.system_id); },
     [](const St& s, int c, Node& n) { n.bmc.system_id = s.column_text(c); return ok_status(); }},
    {"bmc_domain", [](St& s, int i, const Node& n) { s.bind(i, n.bmc.domain); },
     [](const St& s, int c, Node& n) { n.bmc.domain = s.column_text(c); return ok_status(); }},
    {"bmc_verify_tls", [](St& s, int i, const Node& n) { s.bind(i, n.bmc.verify_tls); },
     [](const St& s, int c, Node& n) { n.bmc.verify_tls = s.column_bool(c); return ok_status(); }},
    {"bmc_options", [](St& s, int i, const Node& n) { s.bind(i, json_text(n.bmc.options)); },
     [](const St& s, int c, Node& n) { return read_json(s, c, "bmc_options", n.bmc.options); }},
    {"boot_mode", [](St& s, int i, const Node& n) { s.bind(i, n.boot_mode); },
     [](const St& s, int c, Node& n) { n.boot_mode = s.column_text(c); return ok_status(); }},
    {"profile", [](St& s, int i, const Node& n) { s.bind(i, n.profile); },
     [](const St& s, int c, Node& n) { n.profile = s.column_text(c); return ok_status(); }},
    {"traits", [](St& s, int i, const Node& n) { s.bind(i, json_text(json(n.traits))); },
     [](const St& s, int c, Node& n) { return read_string_list(s, c, "traits", n.traits); }},
    {"provision_state", [](St& s, int i, const Node& n) { s.bind(i, to_string(n.provision_state)); },
     [](const St& s, int c, Node& n) {
       return read_enum(s, c, n, "provision_state", parse_provision_state, n.provision_state);
     }},
    {"target_provision_state", [](St& s, int i, const Node& n) { s.bind(i, opt_text(n.target_provision_state)); },
     [](const St& s, int c, Node& n) {
       return read_opt_enum(s, c, n, "target_provision_state", parse_provision_state, n.target_provision_state);
     }},
    {"provision_step", [](St& s, int i, const Node& n) { s.bind(i, n.provision_step); },
     [](const St& s, int c, Node& n) { n.provision_step = s.column_text(c); return ok_status(); }},
    {"deadline_at", [](St& s, int i, const Node& n) { s.bind(i, n.deadline_at); },
     [](const St& s, int c, Node& n) { n.deadline_at = s.column_int64(c); return ok_status(); }},
    {"power_state", [](St& s, int i, const Node& n) { s.bind(i, to_string(n.power_state)); },
     [](const St& s, int c, Node& n) { return read_enum(s, c, n, "power_state", parse_power_state, n.power_state); }},
    {"target_power_state", [](St& s, int i, const Node& n) { s.bind(i, opt_text(n.target_power_state)); },
     [](const St& s, int c, Node& n) {
       return read_opt_enum(s, c, n, "target_power_state", parse_power_state, n.target_power_state);
     }},
    {"maintenance", [](St& s, int i, const Node& n) { s.bind(i, n.maintenance); },
     [](const St& s, int c, Node& n) { n.maintenance = s.column_bool(c); return ok_status(); }},
    {"maintenance_reason", [](St& s, int i, const Node& n) { s.bind(i, n.maintenance_reason); },
     [](const St& s, int c, Node& n) { n.maintenance_reason = s.column_text(c); return ok_status(); }},
    {"fault", [](St& s, int i, const Node& n) { s.bind(i, n.fault); },
     [](const St& s, int c, Node& n) { n.fault = s.column_text(c); return ok_status(); }},
    {"last_error", [](St& s, int i, const Node& n) { s.bind(i, n.last_error); },
     [](const St& s, int c, Node& n) { n.last_error = s.column_text(c); return ok_status(); }},
    {"tenant", [](St& s, int i, const Node& n) { s.bind(i, n.tenant); },
     [](const St& s, int c, Node& n) { n.tenant = s.column_text(c); return ok_status(); }},
    {"allocation", [](St& s, int i, const Node& n) { s.bind(i, n.allocation); },
     [](const St& s, int c, Node& n) { n.allocation = s.column_text(c); return ok_status(); }},
    {"host", [](St& s, int i, const Node& n) { s.bind(i, n.host); },
     [](const St& s, int c, Node& n) { n.host = s.column_text(c); return ok_status(); }},
    {"inventory",  // NULL until inspected
     [](St& s, int i, const Node& n) {
       if (n.inventory.is_null()) {
         s.bind(i, std::nullopt);
       } else {
         s.bind(i, json_text(n.inventory));
       }
     },
     [](const St& s, int c, Node& n) { return read_json(s, c, "inventory", n.inventory); }},
    {"last_validation", [](St& s, int i, const Node& n) { s.bind(i, n.last_validation); },
     [](const St& s, int c, Node& n) { n.last_validation = s.column_text(c); return ok_status(); }},
    {"reservation", [](St& s, int i, const Node& n) { s.bind(i, n.reservation); },
     [](const St& s, int c, Node& n) { n.reservation = s.column_text(c); return ok_status(); }},
    {"created_at", [](St& s, int i, const Node& n) { s.bind(i, n.created_at); },
     [](const St& s, int c, Node& n) { n.created_at = s.column_int64(c); return ok_status(); }},
    {"updated_at", [](St& s, int i, const Node& n) { s.bind(i, n.updated_at); },
     [](const St& s, int c, Node& n) { n.updated_at = s.column_int64(c); return ok_status(); }},
    {"version", [](St& s, int i, const Node& n) { s.bind(i, n.version); },
     [](const St& s, int c, Node& n) { n.version = s.column_int64(c); return ok_status(); }},
    {"image", [](St& s, int i, const Node& n) { s.bind(i, n.image); },
     [](const St& s, int c, Node& n) { n.image = s.column_text(c); return ok_status(); }},
    {"addresses", [](St& s, int i, const Node& n) { s.bind(i, json_text(json(n.addresses))); },
     [](const St& s, int c, Node& n) { return read_string_list(s, c, "addresses", n.addresses); }},
    {"ssh", [](St& s, int i, const Node& n) { s.bind(i, n.ssh); },
     [](const St& s, int c, Node& n) { n.ssh = s.column_text(c); return ok_status(); }},
    {"ssh_host_keys", [](St& s, int i, const Node& n) { s.bind(i, json_text(ssh_host_keys_column(n.ssh_host_keys))); },
     [](const St& s, int c, Node& n) {
       json list;
       Status r = read_json(s, c, "ssh_host_keys", list);
       if (r) n.ssh_host_keys = ssh_host_keys_from_column(list);
       return r;
     }},
    {"address_source", [](St& s, int i, const Node& n) { s.bind(i, std::string(to_string(n.address_source))); },
     [](const St& s, int c, Node& n) {
       return read_enum(s, c, n, "address_source", parse_address_source, n.address_source);
     }},
    {"ironic", [](St& s, int i, const Node& n) { s.bind(i, json_text(n.ironic)); },
     [](const St& s, int c, Node& n) { return read_json(s, c, "ironic", n.ironic); }},
};
constexpr int kNodeColumnCount = sizeof(kNodeColumns) / sizeof(kNodeColumns[0]);

// The column names of kNodeColumns, for the statement builders of store_rules.h.
const std::vector<const char*>& node_column_names() {
  static const std::vector<const char*> names = [] {
    std::vector<const char*> v;
    for (const NodeColumn& c : kNodeColumns) v.push_back(c.name);
    return v;
  }();
  return names;
}

const std::string& node_select() {
  static const std::string s = "SELECT " + column_list(node_column_names()) + " FROM nodes";
  return s;
}

const std::string& node_insert_sql() {
  static const std::string s = insert_sql("nodes", node_column_names(), '?');
  return s;
}

const std::string& node_update_sql() {
  static const std::string s = update_by_key_sql("nodes", node_column_names(), '?');
  return s;
}

constexpr const char kPortColumns[] = "id, node_id, address, pxe, created_at";

void bind_node(St& st, const Node& n) {
  for (int i = 0; i < kNodeColumnCount; ++i) kNodeColumns[i].bind(st, i + 1, n);
}

Result<Node> read_node(const St& st) {
  Node n;
  for (int c = 0; c < kNodeColumnCount; ++c) {
    Status r = kNodeColumns[c].read(st, c, n);
    if (!r) return r.take_error();
  }
  return n;
}

Port read_port(const sql::Statement& st) {
  Port p;
  p.id = st.column_text(0);
  p.node_id = st.column_text(1);
  p.address = st.column_text(2);
  p.pxe = st.column_bool(3);
  p.created_at = st.column_int64(4);
  return p;
}



// Reads one node row by UUID, or by name when `id_or_name` is not a UUID. Ports
// are not filled.
Result<Node> load_node_row(sql::Database& db, std::string_view id_or_name) {
  bool by_id = is_uuid(id_or_name);
  Result<sql::StatementRef> st = db.prepare(node_select() + (by_id ? " WHERE id = ?1" : " WHERE name = ?1"));
  if (!st) return st.take_error();
  (*st)->bind(1, by_id ? lower(id_or_name) : std::string(id_or_name));
  Result<bool> row = (*st)->step();
  if (!row) return row.take_error();
  if (!*row) return node_not_found(id_or_name);
  return read_node(**st);
}

Result<std::vector<Port>> load_ports_of(sql::Database& db, const std::string& node_id) {
  Result<sql::StatementRef> st =
      db.prepare(std::string("SELECT ") + kPortColumns + " FROM ports WHERE node_id = ?1 ORDER BY created_at, rowid");
  if (!st) return st.take_error();
  (*st)->bind(1, node_id);
  return collect<Port>(**st, read_port);
}

Result<Node> load_node(sql::Database& db, std::string_view id_or_name) {
  Result<Node> n = load_node_row(db, id_or_name);
  if (!n) return n;
  Result<std::vector<Port>> ports = load_ports_of(db, n->id);
  if (!ports) return ports.take_error();
  n->ports = std::move(*ports);
  return n;
}

// Fills the ports of every node in `nodes` with one query (the ids travel as
// one JSON array parameter, so the statement text never changes and there is
// no limit on the number of variables).
Status fill_ports(sql::Database& db, std::vector<Node>& nodes) {
  if (nodes.empty()) return ok_status();
  json ids = json::array();
  std::unordered_map<std::string, Node*> by_id;
  by_id.reserve(nodes.size());
  for (Node& n : nodes) {
    ids.push_back(n.id);
    by_id.emplace(n.id, &n);
  }
  Result<sql::StatementRef> st = db.prepare(
      std::string("SELECT ") + kPortColumns +
      " FROM ports WHERE node_id IN (SELECT value FROM json_each(?1)) ORDER BY node_id, created_at, rowid");
  if (!st) return st.take_error();
  (*st)->bind(1, json_text(ids));
  for (;;) {
    Result<bool> row = (*st)->step();
    if (!row) return row.take_error();
    if (!*row) return ok_status();
    Port p = read_port(**st);
    auto it = by_id.find(p.node_id);
    if (it != by_id.end()) it->second->ports.push_back(std::move(p));
  }
}



// Turns a constraint violation from writing a node row into the field it is about.
Error node_write_error(Error e, const Node& n) {
  if (e.code != Code::kConflict) return e;
  if (mentions(e, "nodes.name"))
    return Error(Code::kConflict, "a node named '" + n.name + "' already exists",
                 {FieldError{"/name", "already in use"}});
  if (mentions(e, "nodes.id"))
    return Error(Code::kConflict, "node " + n.id + " already exists", {FieldError{"/id", "already in use"}});
  return e;
}

// The same for a port row; `prefix` is the port's JSON pointer ("" or "/ports/N").
Error port_write_error(Error e, const Port& p, const std::string& prefix) {
  if (e.code != Code::kConflict) return e;
  if (mentions(e, "ports.address"))
    return Error(Code::kConflict, "port address " + p.address + " is already in use",
                 {FieldError{prefix + "/address", "already in use"}});
  if (mentions(e, "ports.id"))
    return Error(Code::kConflict, "port " + p.id + " already exists", {FieldError{prefix + "/id", "already in use"}});
  return e;
}


Status insert_port(sql::Database& db, const Port& p) {
  Result<sql::StatementRef> st = db.prepare(
      "INSERT INTO ports (id, node_id, address, pxe, created_at) VALUES (?1, ?2, ?3, ?4, ?5)");
  if (!st) return st.take_error();
  (*st)->bind(1, p.id).bind(2, p.node_id).bind(3, p.address).bind(4, p.pxe).bind(5, p.created_at);
  return (*st)->run();
}

// Bumps a node's version and updated_at after a change to its ports, which are
// part of the node's representation (and so of its ETag).
Status touch_node(sql::Database& db, const std::string& id, int64_t now) {
  Result<sql::StatementRef> st =
      db.prepare("UPDATE nodes SET version = version + 1, updated_at = ?2 WHERE id = ?1");
  if (!st) return st.take_error();
  (*st)->bind(1, id).bind(2, now);
  return (*st)->run();
}


}  // namespace

namespace store_rows {

Result<std::vector<Node>> select_node_rows(sql::Database& db, const std::string& where,
                                           const std::function<void(sql::Statement&)>& bind) {
  Result<sql::StatementRef> st = db.prepare(node_select() + " WHERE " + where);
  if (!st) return st.take_error();
  if (bind) bind(**st);
  return collect<Node>(**st, [](const St& s) { return read_node(s); });
}

Status write_node_row(sql::Database& db, const Node& n) {
  Result<sql::StatementRef> st = db.prepare(node_update_sql());
  if (!st) return st.take_error();
  bind_node(**st, n);
  return (*st)->run();
}

Status insert_node_row(sql::Database& db, const Node& n) {
  Result<sql::StatementRef> st = db.prepare(node_insert_sql());
  if (!st) return st.take_error();
  bind_node(**st, n);
  return (*st)->run();
}

}  // namespace store_rows

// ---------------------------------------------------------------------------
// Nodes

Result<Node> SqliteStore::create_node(const Node& node, const EventDraft& event) {
  Result<Node> prepared = node_to_create(node, now_ms());
  if (!prepared) return prepared;
  const Node& n = *prepared;

  Result<WriterLock> w = lock_writer();
  if (!w) return w.take_error();
  sql::Database& db = w->db();
  Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
  if (!tx) return tx.take_error();
  {
    Result<sql::StatementRef> st = db.prepare(node_insert_sql());
    if (!st) return st.take_error();
    bind_node(**st, n);
    if (Status s = (*st)->run(); !s) return node_write_error(s.take_error(), n);
  }
  // Ports one by one, in order: the failing insert's index is the N of
  // "/ports/N/address" (a MAC repeated inside the same node included).
  for (size_t i = 0; i < n.ports.size(); ++i) {
    if (Status s = insert_port(db, n.ports[i]); !s)
      return port_write_error(s.take_error(), n.ports[i], "/ports/" + std::to_string(i));
  }
  Result<int64_t> seq = insert_events({event}, &n, n.tenant);
  if (!seq) return seq.take_error();
  if (Status s = tx->commit(); !s) return s.take_error();
  notify(*seq);
  return n;
}

Result<Node> SqliteStore::get_node(std::string_view id_or_name) {
  ReaderLease r = lease_reader();
  Result<sql::Transaction> tx = sql::Transaction::begin_read(r.db());
  if (!tx) return tx.take_error();
  return load_node(r.db(), id_or_name);
}

Result<std::vector<Node>> SqliteStore::list_nodes(const NodeFilter& filter, const ListOptions& opts) {
  Result<int> lim = checked_limit(opts.limit);
  if (!lim) return lim.take_error();

  // The sort expression must match the index expressions in 001_initial.sql
  // exactly, or SQLite sorts instead of walking an index.
  std::string expr;
  bool int_key = false;
  if (opts.sort_key == "created_at" || opts.sort_key == "updated_at") {
    expr = opts.sort_key;
    int_key = true;
  } else if (opts.sort_key == "name") {
    expr = "ifnull(name, '')";
  } else if (opts.sort_key == "provision_state" || opts.sort_key == "id") {
    expr = opts.sort_key;
  } else {
    return Error::invalid("sort", "must be one of created_at, updated_at, name, provision_state, id");
  }
  const char* dir = opts.descending ? " DESC" : " ASC";
  const char* cmp = opts.descending ? " < " : " > ";

  using Value = std::variant<int64_t, std::string>;
  std::vector<Value> values;
  std::string where;
  auto add = [&](const std::string& cond) { where += (where.empty() ? " WHERE " : " AND ") + cond; };
  auto param = [&](Value v) {
    values.push_back(std::move(v));
    return "?" + std::to_string(values.size());
  };
  if (filter.provision_state) add("provision_state = " + param(std::string(to_string(*filter.provision_state))));
  if (filter.kind) add("kind = " + param(std::string(to_string(*filter.kind))));
  if (filter.profile) add("profile = " + param(*filter.profile));
  // A literal, so the text (and the cached statement) has only two variants.
  if (filter.maintenance) add(*filter.maintenance ? "maintenance = 1" : "maintenance = 0");
  if (filter.tenant) add("tenant = " + param(*filter.tenant));
  if (filter.allocation) add("allocation = " + param(*filter.allocation));

  ReaderLease r = lease_reader();
  sql::Database& db = r.db();
  Result<sql::Transaction> tx = sql::Transaction::begin_read(db);
  if (!tx) return tx.take_error();

  if (!opts.marker.empty()) {
    Result<sql::StatementRef> st = db.prepare("SELECT " + expr + " FROM nodes WHERE id = ?1");
    if (!st) return st.take_error();
    (*st)->bind(1, lower(opts.marker));
    Result<bool> row = (*st)->step();
    if (!row) return row.take_error();
    if (!*row) return Error::invalid("marker", "no node with id " + opts.marker);
    std::string marker_id = lower(opts.marker);
    if (expr == "id") {
      add("id" + std::string(cmp) + param(marker_id));
    } else if (int_key || expr == "provision_state") {
      // A row-value comparison: SQLite turns it into one range on the index.
      Value key = int_key ? Value((*st)->column_int64(0)) : Value((*st)->column_text(0));
      std::string k = param(std::move(key));
      add("(" + expr + ", id)" + cmp + "(" + k + ", " + param(marker_id) + ")");
    } else {
      // SQLite does not seek an expression index with a row value, so spell the
      // same condition as a range on the expression plus the tie-break.
      std::string k = param(Value((*st)->column_text(0)));
      std::string m = param(marker_id);
      std::string cmp_eq = opts.descending ? " <= " : " >= ";
      add(expr + cmp_eq + k + " AND (" + expr + cmp + k + " OR id" + cmp + m + ")");
    }
  }
  std::string q = node_select() + where + " ORDER BY " + expr + dir;
  if (expr != "id") q += std::string(", id") + dir;
  q += " LIMIT " + param(int64_t{*lim});

  Result<sql::StatementRef> st = db.prepare(q);
  if (!st) return st.take_error();
  for (size_t i = 0; i < values.size(); ++i) {
    int idx = static_cast<int>(i + 1);
    std::visit([&](const auto& v) { (*st)->bind(idx, v); }, values[i]);
  }
  Result<std::vector<Node>> nodes = collect<Node>(**st, read_node);
  if (!nodes) return nodes;
  if (Status s = fill_ports(db, *nodes); !s) return s.take_error();
  return nodes;
}

Result<Node> SqliteStore::update_node_if(std::string_view id_or_name, const NodeCondition& cond,
                                         const std::function<Status(Node&)>& mutate,
                                         const std::vector<EventDraft>& events) {
  Result<WriterLock> w = lock_writer();
  if (!w) return w.take_error();
  sql::Database& db = w->db();
  Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
  if (!tx) return tx.take_error();

  Result<Node> current = load_node(db, id_or_name);
  if (!current) return current;
  const Node& before = *current;
  if (auto e = check_condition(before, cond)) return *e;

  Result<Node> mutated = node_after_mutate(before, mutate, now_ms());
  if (!mutated) return mutated;
  const Node& n = *mutated;

  {
    Result<sql::StatementRef> st = db.prepare(node_update_sql());
    if (!st) return st.take_error();
    bind_node(**st, n);
    if (Status s = (*st)->run(); !s) return node_write_error(s.take_error(), n);
  }
  Result<int64_t> seq = insert_events(events, &n, before.tenant);
  if (!seq) return seq.take_error();
  if (Status s = tx->commit(); !s) return s.take_error();
  notify(*seq);
  return n;
}

Status SqliteStore::delete_node_if(std::string_view id_or_name, const NodeCondition& cond, const EventDraft& event) {
  Result<WriterLock> w = lock_writer();
  if (!w) return w.take_error();
  sql::Database& db = w->db();
  Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
  if (!tx) return tx.take_error();

  Result<Node> current = load_node_row(db, id_or_name);
  if (!current) return current.take_error();
  if (auto e = check_condition(*current, cond)) return *e;
  for (const char* q : {"DELETE FROM ports WHERE node_id = ?1", "DELETE FROM nodes WHERE id = ?1"}) {
    Result<sql::StatementRef> st = db.prepare(q);
    if (!st) return st.take_error();
    (*st)->bind(1, current->id);
    if (Status s = (*st)->run(); !s) return s;
  }
  Result<int64_t> seq = insert_events({event}, &*current, current->tenant);
  if (!seq) return seq.take_error();
  if (Status s = tx->commit(); !s) return s;
  notify(*seq);
  return ok_status();
}

Result<std::vector<Node>> SqliteStore::nodes_past_deadline(int64_t now_ms, int limit) {
  Result<int> lim = checked_limit(limit);
  if (!lim) return lim.take_error();
  ReaderLease r = lease_reader();
  sql::Database& db = r.db();
  Result<sql::Transaction> tx = sql::Transaction::begin_read(db);
  if (!tx) return tx.take_error();
  Result<sql::StatementRef> st =
      db.prepare(node_select() + " WHERE deadline_at > 0 AND deadline_at < ?1 ORDER BY deadline_at, id LIMIT ?2");
  if (!st) return st.take_error();
  (*st)->bind(1, now_ms).bind(2, *lim);
  Result<std::vector<Node>> nodes = collect<Node>(**st, read_node);
  if (!nodes) return nodes;
  if (Status s = fill_ports(db, *nodes); !s) return s.take_error();
  return nodes;
}

Result<std::vector<Node>> SqliteStore::nodes_in_flight() {
  // No ORDER BY: it would turn the two index lookups (MULTI-INDEX OR) into a
  // scan of the whole table. Sorted below instead.
  static const std::string q =
      node_select() + " WHERE reservation > '' OR provision_state IN (" + transient_states_sql() + ")";
  ReaderLease r = lease_reader();
  sql::Database& db = r.db();
  Result<sql::Transaction> tx = sql::Transaction::begin_read(db);
  if (!tx) return tx.take_error();
  Result<sql::StatementRef> st = db.prepare(q);
  if (!st) return st.take_error();
  Result<std::vector<Node>> nodes = collect<Node>(**st, read_node);
  if (!nodes) return nodes;
  std::sort(nodes->begin(), nodes->end(), [](const Node& a, const Node& b) { return a.id < b.id; });
  if (Status s = fill_ports(db, *nodes); !s) return s.take_error();
  return nodes;
}

Result<std::vector<HeldNode>> SqliteStore::nodes_held_by_prefix(const std::string& prefix) {
  ReaderLease r = lease_reader();
  Result<sql::StatementRef> st = r.db().prepare(
      "SELECT id, reservation, provision_state FROM nodes WHERE reservation > '' AND "
      "substr(reservation, 1, length(?1)) = ?1 ORDER BY id");
  if (!st) return st.take_error();
  (*st)->bind(1, prefix);
  std::vector<HeldNode> out;
  for (;;) {
    Result<bool> row = (*st)->step();
    if (!row) return row.take_error();
    if (!*row) return out;
    std::optional<ProvisionState> state = parse_provision_state((*st)->column_text(2));
    if (!state) return Error(Code::kInternal, "node " + (*st)->column_text(0) + " has an unknown provision_state");
    out.push_back({(*st)->column_text(0), (*st)->column_text(1), *state});
  }
}

Result<std::map<std::string, int64_t>> SqliteStore::count_nodes_by_state() {
  std::map<std::string, int64_t> counts;
  for (ProvisionState p : kAllProvisionStates) counts[std::string(to_string(p))] = 0;
  ReaderLease r = lease_reader();
  Result<sql::StatementRef> st =
      r.db().prepare("SELECT provision_state, count(*) FROM nodes GROUP BY provision_state");
  if (!st) return st.take_error();
  for (;;) {
    Result<bool> row = (*st)->step();
    if (!row) return row.take_error();
    if (!*row) return counts;
    counts[(*st)->column_text(0)] = (*st)->column_int64(1);
  }
}

// ---------------------------------------------------------------------------
// Ports

Result<Port> SqliteStore::create_port(const Port& port, const EventDraft& event) {
  const int64_t now = now_ms();
  Port p = port_to_create(port, now);

  Result<WriterLock> w = lock_writer();
  if (!w) return w.take_error();
  sql::Database& db = w->db();
  Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
  if (!tx) return tx.take_error();

  Result<Node> node = load_node_row(db, p.node_id);
  if (!node) {
    Error e = node.take_error();
    if (e.code == Code::kNotFound) e.fields.push_back(FieldError{"/node", "no such node"});
    return e;
  }
  p.node_id = node->id;
  if (Status s = insert_port(db, p); !s) return port_write_error(s.take_error(), p, "");
  if (Status s = touch_node(db, node->id, now); !s) return s.take_error();
  Result<int64_t> seq = insert_events({event}, &*node, node->tenant);
  if (!seq) return seq.take_error();
  if (Status s = tx->commit(); !s) return s.take_error();
  notify(*seq);
  return p;
}

namespace {
Result<Port> load_port(sql::Database& db, const std::string& where, std::string_view value,
                       std::string_view what) {
  Result<sql::StatementRef> st = db.prepare(std::string("SELECT ") + kPortColumns + " FROM ports WHERE " + where);
  if (!st) return st.take_error();
  (*st)->bind(1, value);
  Result<bool> row = (*st)->step();
  if (!row) return row.take_error();
  if (!*row) return Error(Code::kNotFound, "port " + std::string(what) + " not found");
  return read_port(**st);
}
}  // namespace

Result<Port> SqliteStore::get_port(std::string_view id) {
  ReaderLease r = lease_reader();
  return load_port(r.db(), "id = ?1", lower(id), id);
}

Result<Port> SqliteStore::find_port_by_address(std::string_view mac) {
  ReaderLease r = lease_reader();
  return load_port(r.db(), "address = ?1", mac, mac);
}

Result<std::vector<Port>> SqliteStore::list_ports(std::optional<std::string> node_id, int limit,
                                                  std::string_view marker) {
  Result<int> lim = checked_limit(limit);
  if (!lim) return lim.take_error();
  std::string q = std::string("SELECT ") + kPortColumns + " FROM ports WHERE id > ?1";
  if (node_id) q += " AND node_id = ?3";
  q += " ORDER BY id LIMIT ?2";
  ReaderLease r = lease_reader();
  Result<sql::StatementRef> st = r.db().prepare(q);
  if (!st) return st.take_error();
  (*st)->bind(1, lower(marker)).bind(2, *lim);
  if (node_id) (*st)->bind(3, *node_id);
  return collect<Port>(**st, read_port);
}

Status SqliteStore::delete_port(std::string_view id, const EventDraft& event) {
  Result<WriterLock> w = lock_writer();
  if (!w) return w.take_error();
  sql::Database& db = w->db();
  Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
  if (!tx) return tx.take_error();

  Result<Port> port = load_port(db, "id = ?1", lower(id), id);
  if (!port) return port.take_error();
  Result<Node> node = load_node_row(db, port->node_id);
  if (!node) return node.take_error();
  {
    Result<sql::StatementRef> st = db.prepare("DELETE FROM ports WHERE id = ?1");
    if (!st) return st.take_error();
    (*st)->bind(1, port->id);
    if (Status s = (*st)->run(); !s) return s;
  }
  if (Status s = touch_node(db, node->id, now_ms()); !s) return s;
  Result<int64_t> seq = insert_events({event}, &*node, node->tenant);
  if (!seq) return seq.take_error();
  if (Status s = tx->commit(); !s) return s;
  notify(*seq);
  return ok_status();
}

}  // namespace kiln
