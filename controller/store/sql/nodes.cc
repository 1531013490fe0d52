#include <algorithm>
#include <unordered_map>
#include <utility>

#include "common/ids.h"
#include "controller/store/sql/node_rows.h"
#include "controller/store/sql/sql_store.h"
#include "controller/store/store_rules.h"

namespace kiln {

using json = nlohmann::json;
using namespace store_rules;
using node_rows::node_select;
using node_rows::read_nodes;

// SqlStore: nodes and ports (NodeRepo).
//
// A node write reads the row, checks the condition, applies `mutate` in
// memory (inside the write transaction: on SQLite a write from `mutate` is
// refused, the one writer being held) and writes the row back only while it
// still has the version read. SQLite's one writer never loses that race;
// on PostgreSQL several writers run at once, so a lost race rolls back and
// is tried once more reading the row FOR UPDATE, which cannot lose (see
// pg/pg_store.h: the uncontended write holds no row lock while `mutate` runs,
// a contended one waits its turn instead of retrying without end).

namespace {

// What the node SQL spells differently per engine, each for an index or a
// column the schemas (schemas/sql/<dialect>/001_initial.sql) spell differently.
struct NodeSql {
  // The key of the nodes_by_name index.
  const char* name_key;
  // The predicate of the nodes_in_maintenance partial index, and its negation:
  // SQLite uses the index only for the literal text "maintenance = 1".
  const char* in_maintenance;
  const char* not_in_maintenance;
  // Whether a row value (key, id) > (k, m) walks an expression index as one
  // range (PostgreSQL); SQLite needs the condition spelled as a range on the
  // expression plus the tie-break.
  bool row_value_on_expression;
  // Insertion order of a node's ports: SQLite's rowid, PostgreSQL's ord.
  const char* port_order;
  // "node_id <this>": the node ids of the JSON array parameter $1. On
  // PostgreSQL = ANY(ARRAY(...)) builds the array once and looks the ports
  // index up per id; IN (SELECT ...) was planned as a hash semi-join over a
  // scan of every port (2.6 ms against 0.1 ms for a page at 10,000 ports).
  const char* node_id_in_json;
};

const NodeSql& node_sql(const db::Conn& c) {
  static const NodeSql sqlite{.name_key = "ifnull(name, '')",
                              .in_maintenance = "maintenance = 1",
                              .not_in_maintenance = "maintenance = 0",
                              .row_value_on_expression = false,
                              .port_order = "rowid",
                              .node_id_in_json = "IN (SELECT value FROM json_each($1))"};
  static const NodeSql pg{.name_key = "coalesce(name, '')",
                          .in_maintenance = "maintenance",
                          .not_in_maintenance = "NOT maintenance",
                          .row_value_on_expression = true,
                          .port_order = "ord",
                          .node_id_in_json = "= ANY (ARRAY(SELECT jsonb_array_elements_text($1::jsonb)))"};
  return c.dialect().engine == db::Engine::kSqlite ? sqlite : pg;
}

constexpr const char kPortSelect[] = "SELECT id, node_id, address, pxe, created_at FROM ports";
constexpr db::Constraint kPortAddress{"ports.address", "ports_by_address"};
constexpr db::Constraint kPortId{"ports.id", "ports_pkey"};

Port read_port(const db::Rows& r) {
  Port p;
  p.id = r.text(0);
  p.node_id = r.text(1);
  p.address = r.text(2);
  p.pxe = r.boolean(3);
  p.created_at = r.int64(4);
  return p;
}

// How a node is read before a conditional write: plainly (the write then
// checks the version read), or locking the row until the transaction ends.
enum class RowLock { kNone, kForUpdate };

// The first attempt at a node write reads without a lock; the second, made
// only when another writer committed in between, with FOR UPDATE.
constexpr int kWriteAttempts = 2;

RowLock lock_for(int attempt) { return attempt == 0 ? RowLock::kNone : RowLock::kForUpdate; }

// One node row by UUID, or by name when `id_or_name` is not a UUID. Ports
// are not filled.
Result<Node> load_node_row(db::Conn& c, std::string_view id_or_name, RowLock lock = RowLock::kNone) {
  const bool by_id = is_uuid(id_or_name);
  std::string q = node_select() + (by_id ? " WHERE id = $1" : " WHERE name = $1");
  if (lock == RowLock::kForUpdate) q += c.dialect().for_update;
  Result<db::Rows> r = c.query(q, db::Binds().add(by_id ? lower(id_or_name) : std::string(id_or_name)));
  if (!r) return r.take_error();
  Result<bool> row = r->next();
  if (!row) return row.take_error();
  if (!*row) return node_not_found(id_or_name);
  return node_rows::read_node(*r);
}

Result<std::vector<Port>> load_ports_of(db::Conn& c, const std::string& node_id) {
  Result<db::Rows> r = c.query(std::string(kPortSelect) + " WHERE node_id = $1 ORDER BY created_at, " +
                                   node_sql(c).port_order,
                               db::Binds().add(node_id));
  if (!r) return r.take_error();
  return db::collect<Port>(*r, read_port);
}

Result<Node> load_node(db::Conn& c, std::string_view id_or_name, RowLock lock = RowLock::kNone) {
  Result<Node> n = load_node_row(c, id_or_name, lock);
  if (!n) return n;
  Result<std::vector<Port>> ports = load_ports_of(c, n->id);
  if (!ports) return ports.take_error();
  n->ports = std::move(*ports);
  return n;
}

// Fills the ports of every node in `nodes` with one query: the ids travel as
// one JSON array parameter, so the statement text never changes and there is
// no limit on the number of parameters.
Status fill_ports(db::Conn& c, std::vector<Node>& nodes) {
  if (nodes.empty()) return ok_status();
  json ids = json::array();
  std::unordered_map<std::string, Node*> by_id;
  by_id.reserve(nodes.size());
  for (Node& n : nodes) {
    ids.push_back(n.id);
    by_id.emplace(n.id, &n);
  }
  const NodeSql& sql = node_sql(c);
  Result<db::Rows> r = c.query(std::string(kPortSelect) + " WHERE node_id " + sql.node_id_in_json +
                                   " ORDER BY node_id, created_at, " + sql.port_order,
                               db::Binds().add(json_text(ids)));
  if (!r) return r.take_error();
  for (;;) {
    Result<bool> row = r->next();
    if (!row) return row.take_error();
    if (!*row) return ok_status();
    Port p = read_port(*r);
    auto it = by_id.find(p.node_id);
    if (it != by_id.end()) it->second->ports.push_back(std::move(p));
  }
}

// The nodes `sql` selects (node_select() ...) with their ports.
Result<std::vector<Node>> nodes_with_ports(db::Conn& c, const std::string& sql, const db::Binds& binds) {
  Result<db::Rows> r = c.query(sql, binds);
  if (!r) return r.take_error();
  Result<std::vector<Node>> nodes = read_nodes(*r);
  if (!nodes) return nodes;
  if (Status s = fill_ports(c, *nodes); !s) return s.take_error();
  return nodes;
}

// Turns a constraint violation from writing a port row into the field it is
// about; `prefix` is the port's JSON pointer ("" or "/ports/N").
Error port_write_error(const db::Conn& c, Error e, const Port& p, const std::string& prefix) {
  if (c.dialect().violated(e, kPortAddress))
    return Error(Code::kConflict, "port address " + p.address + " is already in use",
                 {FieldError{prefix + "/address", "already in use"}});
  if (c.dialect().violated(e, kPortId))
    return Error(Code::kConflict, "port " + p.id + " already exists", {FieldError{prefix + "/id", "already in use"}});
  return e;
}

Status insert_port(db::Conn& c, const Port& p, const std::string& prefix) {
  Result<int64_t> w = c.exec("INSERT INTO ports (id, node_id, address, pxe, created_at) VALUES ($1, $2, $3, $4, $5)",
                             db::Binds().add(p.id).add(p.node_id).add(p.address).add(p.pxe).add(p.created_at));
  if (!w) return port_write_error(c, w.take_error(), p, prefix);
  return ok_status();
}

// Bumps a node's version and updated_at after a change to its ports, which are
// part of the node's representation (and so of its ETag).
Status touch_node(db::Conn& c, const std::string& id, int64_t now) {
  Result<int64_t> w = c.exec("UPDATE nodes SET version = version + 1, updated_at = $2 WHERE id = $1",
                             db::Binds().add(id).add(now));
  if (!w) return w.take_error();
  return ok_status();
}

Result<Port> load_port(db::Conn& c, const std::string& where, std::string_view value, std::string_view what) {
  return db::query_one<Port>(c, std::string(kPortSelect) + " WHERE " + where, db::Binds().add(value), read_port,
                             "port " + std::string(what) + " not found");
}

Error changed_under_lock(std::string_view id_or_name) {
  // Cannot happen: the locked attempt's write finds the version it read.
  return Error(Code::kInternal, "store: node " + std::string(id_or_name) + " changed under its row lock");
}

}  // namespace

// ---------------------------------------------------------------------------
// Nodes

Result<Node> SqlStore::create_node(const Node& node, const EventDraft& event) {
  Result<Node> prepared = node_to_create(node, now_ms());
  if (!prepared) return prepared;
  const Node& n = *prepared;
  Status s = write([&](Tx& tx) -> Status {
    if (Status w = node_rows::insert_node_row(tx.conn, n); !w) return w;
    // Ports one by one, in order: the failing insert's index is the N of
    // "/ports/N/address" (a MAC repeated inside the same node included).
    for (size_t i = 0; i < n.ports.size(); ++i) {
      if (Status w = insert_port(tx.conn, n.ports[i], "/ports/" + std::to_string(i)); !w) return w;
    }
    return append_tx_events(tx, {event}, &n, n.tenant);
  });
  if (!s) return s.take_error();
  return n;
}

Result<Node> SqlStore::get_node(std::string_view id_or_name) {
  return snapshot_value<Node>([&](db::Conn& c) { return load_node(c, id_or_name); });
}

Result<std::vector<Node>> SqlStore::list_nodes(const NodeFilter& filter, const ListOptions& opts) {
  Result<int> lim = checked_limit(opts.limit);
  if (!lim) return lim.take_error();
  return snapshot_value<std::vector<Node>>([&](db::Conn& c) -> Result<std::vector<Node>> {
    const NodeSql& sql = node_sql(c);
    // The sort expression must match the index expressions in 001_initial.sql
    // exactly, or the engine sorts instead of walking an index.
    std::string expr;
    bool int_key = false;
    if (opts.sort_key == "created_at" || opts.sort_key == "updated_at") {
      expr = opts.sort_key;
      int_key = true;
    } else if (opts.sort_key == "name") {
      expr = sql.name_key;
    } else if (opts.sort_key == "provision_state" || opts.sort_key == "id") {
      expr = opts.sort_key;
    } else {
      return Error::invalid("sort", "must be one of created_at, updated_at, name, provision_state, id");
    }
    const char* dir = opts.descending ? " DESC" : " ASC";
    const std::string cmp = opts.descending ? " < " : " > ";

    db::Binds b;
    std::string where;
    auto add = [&](const std::string& cond) { where += (where.empty() ? " WHERE " : " AND ") + cond; };
    auto param = [&](auto v) {
      std::string ref = "$" + std::to_string(b.next());
      b.add(v);
      return ref;
    };
    if (filter.provision_state) add("provision_state = " + param(std::string(to_string(*filter.provision_state))));
    if (filter.kind) add("kind = " + param(std::string(to_string(*filter.kind))));
    if (filter.profile) add("profile = " + param(*filter.profile));
    // A literal: the partial index's own predicate (and the statement text has
    // only two variants).
    if (filter.maintenance) add(*filter.maintenance ? sql.in_maintenance : sql.not_in_maintenance);
    if (filter.tenant) add("tenant = " + param(*filter.tenant));
    if (filter.allocation) add("allocation = " + param(*filter.allocation));

    if (!opts.marker.empty()) {
      const std::string marker_id = lower(opts.marker);
      Result<db::Rows> m = c.query("SELECT " + expr + " FROM nodes WHERE id = $1", db::Binds().add(marker_id));
      if (!m) return m.take_error();
      Result<bool> found = m->next();
      if (!found) return found.take_error();
      if (!*found) return Error::invalid("marker", "no node with id " + opts.marker);
      if (expr == "id") {
        add("id" + cmp + param(marker_id));
      } else if (int_key || expr == "provision_state" || sql.row_value_on_expression) {
        // A row-value comparison: one range on the (key, id) index.
        std::string k = int_key ? param(m->int64(0)) : param(m->text(0));
        add("(" + expr + ", id)" + cmp + "(" + k + ", " + param(marker_id) + ")");
      } else {
        // The same condition as a range on the expression plus the tie-break.
        std::string k = param(m->text(0));
        std::string mk = param(marker_id);
        std::string cmp_eq = opts.descending ? " <= " : " >= ";
        add(expr + cmp_eq + k + " AND (" + expr + cmp + k + " OR id" + cmp + mk + ")");
      }
    }
    std::string q = node_select() + where + " ORDER BY " + expr + dir;
    if (expr != "id") q += std::string(", id") + dir;
    q += " LIMIT " + param(int64_t{*lim});
    return nodes_with_ports(c, q, b);
  });
}

Result<Node> SqlStore::update_node_if(std::string_view id_or_name, const NodeCondition& cond,
                                      const std::function<Status(Node&)>& mutate,
                                      const std::vector<EventDraft>& events) {
  for (int attempt = 0; attempt < kWriteAttempts; ++attempt) {
    bool raced = false;
    Result<Node> written = write_value<Node>([&](Tx& tx) -> Result<Node> {
      Result<Node> current = load_node(tx.conn, id_or_name, lock_for(attempt));
      if (!current) return current;
      const Node& before = *current;
      if (auto e = check_condition(before, cond)) return *e;
      Result<Node> mutated = node_after_mutate(before, mutate, now_ms());
      if (!mutated) return mutated;
      Result<int64_t> w = node_rows::update_node_row(tx.conn, *mutated, before.version);
      if (!w) return w.take_error();
      if (*w == 0) {
        raced = true;  // another writer committed first: roll back, read again
        return changed_under_lock(id_or_name);
      }
      if (Status s = append_tx_events(tx, events, &*mutated, before.tenant); !s) return s.take_error();
      return mutated;
    });
    if (!raced) return written;
  }
  return changed_under_lock(id_or_name);
}

Status SqlStore::delete_node_if(std::string_view id_or_name, const NodeCondition& cond, const EventDraft& event) {
  for (int attempt = 0; attempt < kWriteAttempts; ++attempt) {
    bool raced = false;
    Status s = write([&](Tx& tx) -> Status {
      Result<Node> current = load_node_row(tx.conn, id_or_name, lock_for(attempt));
      if (!current) return current.take_error();
      if (auto e = check_condition(*current, cond)) return *e;
      // Ports and the node's other rows go with it (ON DELETE CASCADE);
      // conditional on the version checked, like update_node_if.
      Result<int64_t> d = tx.conn.exec("DELETE FROM nodes WHERE id = $1 AND version = $2",
                                       db::Binds().add(current->id).add(current->version));
      if (!d) return d.take_error();
      if (*d == 0) {
        raced = true;
        return changed_under_lock(id_or_name);
      }
      return append_tx_events(tx, {event}, &*current, current->tenant);
    });
    if (!raced) return s;
  }
  return changed_under_lock(id_or_name);
}

Result<std::vector<Node>> SqlStore::nodes_past_deadline(int64_t now, int limit) {
  Result<int> lim = checked_limit(limit);
  if (!lim) return lim.take_error();
  return snapshot_value<std::vector<Node>>([&](db::Conn& c) {
    return nodes_with_ports(
        c, node_select() + " WHERE deadline_at > 0 AND deadline_at < $1 ORDER BY deadline_at, id LIMIT $2",
        db::Binds().add(now).add(int64_t{*lim}));
  });
}

Result<std::optional<int64_t>> SqlStore::next_deadline(int64_t from_ms) {
  // "deadline_at > 0" spelled out: the nodes_deadline partial index has that
  // predicate, and SQLite uses the index only when the query implies it.
  return read_value<std::optional<int64_t>>([&](db::Conn& c) -> Result<std::optional<int64_t>> {
    Result<db::Rows> r = c.query("SELECT min(deadline_at) FROM nodes WHERE deadline_at > 0 AND deadline_at >= $1",
                                 db::Binds().add(from_ms));
    if (!r) return r.take_error();
    Result<bool> row = r->next();
    if (!row) return row.take_error();
    if (!*row || r->is_null(0)) return std::optional<int64_t>();
    return std::optional<int64_t>(r->int64(0));
  });
}

Result<std::vector<Node>> SqlStore::nodes_in_flight() {
  // No ORDER BY: on SQLite it would turn the two index lookups (MULTI-INDEX
  // OR) into a scan of the whole table. Sorted below instead.
  static const std::string q =
      node_select() + " WHERE reservation > '' OR provision_state IN (" + transient_states_sql() + ")";
  return snapshot_value<std::vector<Node>>([&](db::Conn& c) -> Result<std::vector<Node>> {
    Result<db::Rows> r = c.query(q);
    if (!r) return r.take_error();
    Result<std::vector<Node>> nodes = read_nodes(*r);
    if (!nodes) return nodes;
    std::sort(nodes->begin(), nodes->end(), [](const Node& a, const Node& b) { return a.id < b.id; });
    if (Status s = fill_ports(c, *nodes); !s) return s.take_error();
    return nodes;
  });
}

Result<std::vector<HeldNode>> SqlStore::nodes_held_by_prefix(const std::string& prefix) {
  return read_value<std::vector<HeldNode>>([&](db::Conn& c) -> Result<std::vector<HeldNode>> {
    Result<db::Rows> r = c.query(
        "SELECT id, reservation, provision_state FROM nodes WHERE reservation > '' AND "
        "substr(reservation, 1, length($1)) = $1 ORDER BY id",
        db::Binds().add(prefix));
    if (!r) return r.take_error();
    return db::collect<HeldNode>(*r, [](const db::Rows& row) -> Result<HeldNode> {
      std::optional<ProvisionState> state = parse_provision_state(row.text(2));
      if (!state) return Error(Code::kInternal, "node " + row.text(0) + " has an unknown provision_state");
      return HeldNode{row.text(0), row.text(1), *state};
    });
  });
}

Result<std::map<std::string, int64_t>> SqlStore::count_nodes_by_state() {
  return read_value<std::map<std::string, int64_t>>([&](db::Conn& c) -> Result<std::map<std::string, int64_t>> {
    std::map<std::string, int64_t> counts;
    for (ProvisionState p : kAllProvisionStates) counts[std::string(to_string(p))] = 0;
    Result<db::Rows> r = c.query("SELECT provision_state, count(*) FROM nodes GROUP BY provision_state");
    if (!r) return r.take_error();
    Status walked = db::each_row(*r, [&](const db::Rows& row) { counts[row.text(0)] = row.int64(1); });
    if (!walked) return walked.take_error();
    return counts;
  });
}

Result<std::map<std::pair<std::string, NodeKind>, int64_t>> SqlStore::count_free_nodes() {
  using Counts = std::map<std::pair<std::string, NodeKind>, int64_t>;
  return read_value<Counts>([&](db::Conn& c) -> Result<Counts> {
    // The claim predicate of the allocation store, libvirt guests left out
    // (store_rules.h).
    Result<db::Rows> r = c.query(std::string("SELECT profile, kind, count(*) FROM nodes WHERE ") +
                                 kClaimableNodeSql + " AND NOT " + kLibvirtGuestSql + " GROUP BY profile, kind");
    if (!r) return r.take_error();
    Counts out;
    Status walked = db::each_row(*r, [&](const db::Rows& row) { return node_rows::add_profile_kind_count(row, 0, out); });
    if (!walked) return walked.take_error();
    return out;
  });
}

// ---------------------------------------------------------------------------
// Ports

Result<Port> SqlStore::create_port(const Port& port, const EventDraft& event) {
  const int64_t now = now_ms();
  Port p = port_to_create(port, now);
  Status s = write([&](Tx& tx) -> Status {
    Result<Node> node = load_node_row(tx.conn, p.node_id);
    if (!node) {
      Error e = node.take_error();
      if (e.code == Code::kNotFound) e.fields.push_back(FieldError{"/node", "no such node"});
      return e;
    }
    p.node_id = node->id;
    if (Status w = insert_port(tx.conn, p, ""); !w) return w;
    if (Status w = touch_node(tx.conn, node->id, now); !w) return w;
    return append_tx_events(tx, {event}, &*node, node->tenant);
  });
  if (!s) return s.take_error();
  return p;
}

Result<Port> SqlStore::get_port(std::string_view id) {
  return read_value<Port>([&](db::Conn& c) { return load_port(c, "id = $1", lower(id), id); });
}

Result<Port> SqlStore::find_port_by_address(std::string_view mac) {
  return read_value<Port>([&](db::Conn& c) { return load_port(c, "address = $1", mac, mac); });
}

Result<std::vector<Port>> SqlStore::list_ports(std::optional<std::string> node_id, int limit,
                                               std::string_view marker) {
  Result<int> lim = checked_limit(limit);
  if (!lim) return lim.take_error();
  db::Binds b;
  b.add(lower(marker)).add(int64_t{*lim});
  std::string q = std::string(kPortSelect) + " WHERE id > $1";
  if (node_id) {
    q += " AND node_id = $3";
    b.add(*node_id);
  }
  q += " ORDER BY id LIMIT $2";
  return read_value<std::vector<Port>>([&](db::Conn& c) -> Result<std::vector<Port>> {
    Result<db::Rows> r = c.query(q, b);
    if (!r) return r.take_error();
    return db::collect<Port>(*r, read_port);
  });
}

Status SqlStore::delete_port(std::string_view id, const EventDraft& event) {
  return write([&](Tx& tx) -> Status {
    Result<Port> port = load_port(tx.conn, "id = $1", lower(id), id);
    if (!port) return port.take_error();
    Result<Node> node = load_node_row(tx.conn, port->node_id);
    if (!node) return node.take_error();
    Result<int64_t> d = tx.conn.exec("DELETE FROM ports WHERE id = $1", db::Binds().add(port->id));
    if (!d) return d.take_error();
    // Gone since it was read (another writer's delete committed first).
    if (*d == 0) return Error(Code::kNotFound, "port " + std::string(id) + " not found");
    if (Status w = touch_node(tx.conn, node->id, now_ms()); !w) return w;
    return append_tx_events(tx, {event}, &*node, node->tenant);
  });
}

}  // namespace kiln
