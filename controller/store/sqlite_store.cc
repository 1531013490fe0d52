#include "controller/store/sqlite_store.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>

#include "common/ids.h"
#include "controller/store/migrations.h"

namespace kiln {

using json = nlohmann::json;

namespace {

// ---------------------------------------------------------------------------
// Row layout. kNodeColumns is the one list of node columns: SELECTs read them
// in this order, INSERT/UPDATE bind them in this order (parameter i+1).

constexpr const char* kNodeColumns[] = {
    "id",                 "name",           "kind",            "bmc_driver",
    "bmc_address",        "bmc_username",   "bmc_password_sealed", "bmc_system_id",
    "bmc_domain",         "bmc_verify_tls", "bmc_options",     "boot_mode",
    "profile",            "traits",         "provision_state", "target_provision_state",
    "provision_step",     "deadline_at",    "power_state",     "target_power_state",
    "maintenance",        "maintenance_reason", "fault",       "last_error",
    "tenant",             "allocation",     "host",            "inventory",
    "last_validation",    "reservation",    "created_at",      "updated_at",
    "version",            "image",
};
constexpr int kNodeColumnCount = sizeof(kNodeColumns) / sizeof(kNodeColumns[0]);

std::string node_select_list() {
  std::string s;
  for (int i = 0; i < kNodeColumnCount; ++i) {
    if (i > 0) s += ", ";
    s += kNodeColumns[i];
  }
  return s;
}

const std::string& node_select() {
  static const std::string s = "SELECT " + node_select_list() + " FROM nodes";
  return s;
}

const std::string& node_insert_sql() {
  static const std::string s = [] {
    std::string v = "INSERT INTO nodes (" + node_select_list() + ") VALUES (";
    for (int i = 0; i < kNodeColumnCount; ++i) v += (i > 0 ? ", ?" : "?") + std::to_string(i + 1);
    return v + ")";
  }();
  return s;
}

const std::string& node_update_sql() {
  static const std::string s = [] {
    std::string v = "UPDATE nodes SET ";
    for (int i = 1; i < kNodeColumnCount; ++i) {
      if (i > 1) v += ", ";
      v += std::string(kNodeColumns[i]) + " = ?" + std::to_string(i + 1);
    }
    return v + " WHERE id = ?1";
  }();
  return s;
}

constexpr const char kPortColumns[] = "id, node_id, address, pxe, created_at";

std::string json_text(const json& j) {
  // Replace invalid UTF-8 rather than throw: a driver's garbage must not make a
  // node unwritable.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<json> parse_json_column(const sql::Statement& st, int col, std::string_view what) {
  if (st.column_is_null(col)) return json();
  json j = json::parse(st.column_text(col), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error(Code::kInternal, "store: corrupt JSON in " + std::string(what));
  return j;
}

std::optional<std::string> opt_text(const std::optional<ProvisionState>& s) {
  if (!s) return std::nullopt;
  return std::string(to_string(*s));
}
std::optional<std::string> opt_text(const std::optional<PowerState>& s) {
  if (!s) return std::nullopt;
  return std::string(to_string(*s));
}

void bind_node(sql::Statement& st, const Node& n) {
  std::optional<std::string> name;
  if (!n.name.empty()) name = n.name;
  json traits = n.traits;
  st.bind(1, n.id)
      .bind(2, name)
      .bind(3, to_string(n.kind))
      .bind(4, n.bmc.driver)
      .bind(5, n.bmc.address)
      .bind(6, n.bmc.username)
      .bind(7, n.bmc.password_sealed)
      .bind(8, n.bmc.system_id)
      .bind(9, n.bmc.domain)
      .bind(10, n.bmc.verify_tls)
      .bind(11, json_text(n.bmc.options))
      .bind(12, n.boot_mode)
      .bind(13, n.profile)
      .bind(14, json_text(traits))
      .bind(15, to_string(n.provision_state))
      .bind(16, opt_text(n.target_provision_state))
      .bind(17, n.provision_step)
      .bind(18, n.deadline_at)
      .bind(19, to_string(n.power_state))
      .bind(20, opt_text(n.target_power_state))
      .bind(21, n.maintenance)
      .bind(22, n.maintenance_reason)
      .bind(23, n.fault)
      .bind(24, n.last_error)
      .bind(25, n.tenant)
      .bind(26, n.allocation)
      .bind(27, n.host);
  if (n.inventory.is_null())
    st.bind(28, std::nullopt);
  else
    st.bind(28, json_text(n.inventory));
  st.bind(29, n.last_validation)
      .bind(30, n.reservation)
      .bind(31, n.created_at)
      .bind(32, n.updated_at)
      .bind(33, n.version)
      .bind(34, n.image);
}

Error corrupt(const std::string& id, std::string_view column, const std::string& value) {
  return Error(Code::kInternal, "store: node " + id + " has unknown " + std::string(column) + " '" + value + "'");
}

Result<Node> read_node(const sql::Statement& st) {
  Node n;
  n.id = st.column_text(0);
  n.name = st.column_text(1);
  std::string kind = st.column_text(2);
  if (auto k = parse_node_kind(kind)) n.kind = *k; else return corrupt(n.id, "kind", kind);
  n.bmc.driver = st.column_text(3);
  n.bmc.address = st.column_text(4);
  n.bmc.username = st.column_text(5);
  n.bmc.password_sealed = st.column_text(6);
  n.bmc.system_id = st.column_text(7);
  n.bmc.domain = st.column_text(8);
  n.bmc.verify_tls = st.column_bool(9);
  Result<json> options = parse_json_column(st, 10, "bmc_options");
  if (!options) return options.take_error();
  n.bmc.options = std::move(*options);
  n.boot_mode = st.column_text(11);
  n.profile = st.column_text(12);
  Result<json> traits = parse_json_column(st, 13, "traits");
  if (!traits) return traits.take_error();
  if (traits->is_array())
    for (const json& t : *traits)
      if (t.is_string()) n.traits.push_back(t.get<std::string>());
  std::string ps = st.column_text(14);
  if (auto p = parse_provision_state(ps)) n.provision_state = *p; else return corrupt(n.id, "provision_state", ps);
  if (!st.column_is_null(15)) {
    std::string t = st.column_text(15);
    auto p = parse_provision_state(t);
    if (!p) return corrupt(n.id, "target_provision_state", t);
    n.target_provision_state = *p;
  }
  n.provision_step = st.column_text(16);
  n.deadline_at = st.column_int64(17);
  std::string pw = st.column_text(18);
  if (auto p = parse_power_state(pw)) n.power_state = *p; else return corrupt(n.id, "power_state", pw);
  if (!st.column_is_null(19)) {
    std::string t = st.column_text(19);
    auto p = parse_power_state(t);
    if (!p) return corrupt(n.id, "target_power_state", t);
    n.target_power_state = *p;
  }
  n.maintenance = st.column_bool(20);
  n.maintenance_reason = st.column_text(21);
  n.fault = st.column_text(22);
  n.last_error = st.column_text(23);
  n.tenant = st.column_text(24);
  n.allocation = st.column_text(25);
  n.host = st.column_text(26);
  Result<json> inventory = parse_json_column(st, 27, "inventory");
  if (!inventory) return inventory.take_error();
  n.inventory = std::move(*inventory);
  n.last_validation = st.column_text(28);
  n.reservation = st.column_text(29);
  n.created_at = st.column_int64(30);
  n.updated_at = st.column_int64(31);
  n.version = st.column_int64(32);
  n.image = st.column_text(33);
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

// Collects every row of `st` with `read` (which returns T or Result<T>).
template <typename T, typename Read>
Result<std::vector<T>> collect(sql::Statement& st, Read read) {
  std::vector<T> out;
  for (;;) {
    Result<bool> row = st.step();
    if (!row) return row.take_error();
    if (!*row) return out;
    if constexpr (std::is_same_v<decltype(read(st)), T>) {
      out.push_back(read(st));
    } else {
      auto v = read(st);
      if (!v) return v.take_error();
      out.push_back(std::move(*v));
    }
  }
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Error node_not_found(std::string_view id_or_name) {
  return Error(Code::kNotFound, "node " + std::string(id_or_name) + " not found");
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

// Checks `cond` against the node as stored. The messages are shown to API
// callers, so they say what to do differently.
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

bool mentions(const Error& e, std::string_view what) { return e.message.find(what) != std::string::npos; }

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

// Store-side invariants the API also checks; kept here so no path around the
// API can break lookups (an id must be a UUID, a name must not look like one).
std::optional<Error> check_identity(const Node& n) {
  if (!is_uuid(n.id)) return Error::invalid("/id", "must be a UUID");
  if (!n.name.empty() && is_uuid(n.name)) return Error::invalid("/name", "must not look like a UUID");
  return std::nullopt;
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

Result<int> checked_limit(int limit) {
  if (limit <= 0) return Error::invalid("limit", "must be a positive number");
  return limit;
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

}  // namespace

// ---------------------------------------------------------------------------
// Connections

class SqliteStore::WriterLock {
 public:
  explicit WriterLock(SqliteStore* s) : s_(s), lock_(s->writer_mu_) {
    s_->writer_owner_.store(std::this_thread::get_id());
  }
  WriterLock(WriterLock&& o) noexcept : s_(o.s_), lock_(std::move(o.lock_)) { o.s_ = nullptr; }
  WriterLock& operator=(WriterLock&&) = delete;
  ~WriterLock() {
    if (s_ != nullptr) s_->writer_owner_.store(std::thread::id());
  }
  sql::Database& db() const { return *s_->writer_; }

 private:
  SqliteStore* s_;
  std::unique_lock<std::mutex> lock_;
};

class SqliteStore::ReaderLease {
 public:
  explicit ReaderLease(SqliteStore* s) : s_(s) {
    std::unique_lock<std::mutex> lock(s_->readers_mu_);
    s_->reader_free_.wait(lock, [&] { return !s_->free_readers_.empty(); });
    db_ = s_->free_readers_.back();
    s_->free_readers_.pop_back();
  }
  ReaderLease(const ReaderLease&) = delete;
  ReaderLease& operator=(const ReaderLease&) = delete;
  ~ReaderLease() {
    {
      std::lock_guard<std::mutex> lock(s_->readers_mu_);
      s_->free_readers_.push_back(db_);
    }
    s_->reader_free_.notify_one();
  }
  sql::Database& db() const { return *db_; }

 private:
  SqliteStore* s_;
  sql::Database* db_ = nullptr;
};

Result<SqliteStore::WriterLock> SqliteStore::lock_writer() {
  if (writer_owner_.load() == std::this_thread::get_id())
    return Error(Code::kInternal, "store: write from inside update_node_if's mutate or the event listener "
                                  "(would deadlock)");
  return WriterLock(this);
}

SqliteStore::ReaderLease SqliteStore::lease_reader() { return ReaderLease(this); }

Result<std::unique_ptr<SqliteStore>> SqliteStore::open(const SqliteStoreOptions& options) {
  if (options.path.empty() || options.path == ":memory:" || options.path.rfind("file:", 0) == 0)
    return Error::invalid("path", "must be a database file path (readers share it with the writer)");
  sql::OpenOptions wopts;
  wopts.busy_timeout_ms = options.busy_timeout_ms;
  Result<std::unique_ptr<sql::Database>> writer = sql::Database::open(options.path, wopts);
  if (!writer) return writer.take_error();
  sql::Database& w = **writer;
  Result<std::string> mode = w.query_text("PRAGMA journal_mode=WAL");
  if (!mode) return mode.take_error();
  if (*mode != "wal")
    return Error(Code::kInternal, "store: could not enable WAL on " + options.path + " (journal_mode " + *mode + ")");
  if (Status s = w.exec("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON"); !s) return s.take_error();

  std::vector<std::unique_ptr<sql::Database>> readers;
  int n = std::max(1, options.reader_connections);
  sql::OpenOptions ropts;
  ropts.create = false;
  ropts.query_only = true;
  ropts.busy_timeout_ms = options.busy_timeout_ms;
  for (int i = 0; i < n; ++i) {
    Result<std::unique_ptr<sql::Database>> r = sql::Database::open(options.path, ropts);
    if (!r) return r.take_error();
    readers.push_back(std::move(*r));
  }
  return std::unique_ptr<SqliteStore>(new SqliteStore(options, std::move(*writer), std::move(readers)));
}

SqliteStore::SqliteStore(const SqliteStoreOptions& options, std::unique_ptr<sql::Database> writer,
                         std::vector<std::unique_ptr<sql::Database>> readers)
    : options_(options),
      clock_(options.clock != nullptr ? options.clock : &system_clock_),
      writer_(std::move(writer)),
      readers_(std::move(readers)) {
  for (auto& r : readers_) free_readers_.push_back(r.get());
}

SqliteStore::~SqliteStore() = default;

Result<std::unique_ptr<NodeStore>> open_sqlite_store(const SqliteStoreOptions& options) {
  Result<std::unique_ptr<SqliteStore>> s = SqliteStore::open(options);
  if (!s) return s.take_error();
  return std::unique_ptr<NodeStore>(std::move(*s));
}

// ---------------------------------------------------------------------------
// Migrations

Status SqliteStore::migrate() {
  Result<WriterLock> w = lock_writer();
  if (!w) return w.take_error();
  return store::apply_migrations(w->db(), now_ms());
}

Result<std::vector<std::string>> SqliteStore::applied_migrations() {
  ReaderLease r = lease_reader();
  return store::applied_migrations(r.db());
}

// ---------------------------------------------------------------------------
// Events

Result<int64_t> SqliteStore::insert_events(const std::vector<EventDraft>& events, const Node* node,
                                           const std::string& fallback_tenant) {
  int64_t max_seq = 0;
  sql::Database& db = *writer_;
  int64_t ts = now_ms();
  for (const EventDraft& e : events) {
    Result<sql::StatementRef> st = db.prepare(
        "INSERT INTO events (ts, type, node_id, from_state, to_state, request_id, tenant, detail)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    if (!st) return st.take_error();
    std::string node_id = e.node_id;
    std::string tenant = e.tenant;
    if (node != nullptr) {
      if (node_id.empty()) node_id = node->id;
      if (tenant.empty()) tenant = node->tenant.empty() ? fallback_tenant : node->tenant;
    }
    (*st)->bind(1, ts)
        .bind(2, e.type)
        .bind(3, node_id)
        .bind(4, e.from_state)
        .bind(5, e.to_state)
        .bind(6, e.request_id)
        .bind(7, tenant)
        .bind(8, json_text(e.detail));
    if (Status s = (*st)->run(); !s) return s.take_error();
    max_seq = std::max(max_seq, db.last_insert_rowid());
  }
  return max_seq;
}

void SqliteStore::notify(int64_t seq) {
  if (seq > 0 && listener_) listener_(seq);
}

void SqliteStore::set_event_listener(std::function<void(int64_t)> listener) {
  std::lock_guard<std::mutex> lock(writer_mu_);
  listener_ = std::move(listener);
}

Result<std::vector<EventRecord>> SqliteStore::list_events(int64_t since_seq, int limit,
                                                          std::optional<std::string> node_id,
                                                          std::optional<std::string> tenant) {
  Result<int> lim = checked_limit(limit);
  if (!lim) return lim.take_error();
  std::string q =
      "SELECT seq, ts, type, node_id, from_state, to_state, request_id, tenant, detail FROM events WHERE seq > ?1";
  if (node_id) q += " AND node_id = ?3";
  if (tenant) q += " AND tenant = ?4";
  q += " ORDER BY seq LIMIT ?2";
  ReaderLease r = lease_reader();
  Result<sql::StatementRef> st = r.db().prepare(q);
  if (!st) return st.take_error();
  (*st)->bind(1, since_seq).bind(2, *lim);
  if (node_id) (*st)->bind(3, *node_id);
  if (tenant) (*st)->bind(4, *tenant);
  return collect<EventRecord>(**st, [](const sql::Statement& s) -> Result<EventRecord> {
    EventRecord e;
    e.seq = s.column_int64(0);
    e.ts = s.column_int64(1);
    e.type = s.column_text(2);
    e.node_id = s.column_text(3);
    e.from_state = s.column_text(4);
    e.to_state = s.column_text(5);
    e.request_id = s.column_text(6);
    e.tenant = s.column_text(7);
    Result<json> d = parse_json_column(s, 8, "events.detail");
    if (!d) return d.take_error();
    e.detail = std::move(*d);
    return e;
  });
}

Result<int64_t> SqliteStore::last_event_seq() {
  ReaderLease r = lease_reader();
  Result<sql::StatementRef> st = r.db().prepare("SELECT ifnull(max(seq), 0) FROM events");
  if (!st) return st.take_error();
  Result<bool> row = (*st)->step();
  if (!row) return row.take_error();
  return (*st)->column_int64(0);
}

// ---------------------------------------------------------------------------
// Nodes

Result<Node> SqliteStore::create_node(const Node& node, const EventDraft& event) {
  Node n = node;
  int64_t now = now_ms();
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

  Node n = before;
  if (mutate) {
    if (Status s = mutate(n); !s) return s.take_error();
  }
  // What the caller may not change through this call.
  n.id = before.id;
  n.created_at = before.created_at;
  n.ports = before.ports;
  n.version = before.version + 1;
  n.updated_at = std::max(now_ms(), before.updated_at);
  if (auto e = check_identity(n)) return *e;

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
  Port p = port;
  int64_t now = now_ms();
  if (p.id.empty()) p.id = new_uuid();
  if (p.created_at == 0) p.created_at = now;

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

// ---------------------------------------------------------------------------
// Audit

Status SqliteStore::append_audit(const AuditRecord& a) {
  Result<WriterLock> w = lock_writer();
  if (!w) return w.take_error();
  Result<sql::StatementRef> st = w->db().prepare(
      "INSERT INTO audit (ts, actor, actor_name, role, method, path, request_id, node_id, status)"
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  if (!st) return st.take_error();
  (*st)->bind(1, a.ts != 0 ? a.ts : now_ms())
      .bind(2, a.actor)
      .bind(3, a.actor_name)
      .bind(4, a.role)
      .bind(5, a.method)
      .bind(6, a.path)
      .bind(7, a.request_id)
      .bind(8, a.node_id)
      .bind(9, a.status);
  return (*st)->run();  // one statement: autocommit is its transaction
}

Result<std::vector<AuditRecord>> SqliteStore::list_audit(int64_t since_id, int limit) {
  Result<int> lim = checked_limit(limit);
  if (!lim) return lim.take_error();
  ReaderLease r = lease_reader();
  Result<sql::StatementRef> st = r.db().prepare(
      "SELECT id, ts, actor, actor_name, role, method, path, request_id, node_id, status"
      " FROM audit WHERE id > ?1 ORDER BY id LIMIT ?2");
  if (!st) return st.take_error();
  (*st)->bind(1, since_id).bind(2, *lim);
  return collect<AuditRecord>(**st, [](const sql::Statement& s) {
    AuditRecord a;
    a.id = s.column_int64(0);
    a.ts = s.column_int64(1);
    a.actor = s.column_text(2);
    a.actor_name = s.column_text(3);
    a.role = s.column_text(4);
    a.method = s.column_text(5);
    a.path = s.column_text(6);
    a.request_id = s.column_text(7);
    a.node_id = s.column_text(8);
    a.status = static_cast<int>(s.column_int64(9));
    return a;
  });
}

// ---------------------------------------------------------------------------
// Tokens

namespace {
constexpr const char kTokenColumns[] = "id, name, role, tenant, secret_hash, created_at, expires_at";

TokenRecord read_token(const sql::Statement& s) {
  TokenRecord t;
  t.id = s.column_text(0);
  t.name = s.column_text(1);
  t.role = s.column_text(2);
  t.tenant = s.column_text(3);
  t.secret_hash = s.column_text(4);
  t.created_at = s.column_int64(5);
  t.expires_at = s.column_int64(6);
  return t;
}
}  // namespace

Result<TokenRecord> SqliteStore::create_token(const TokenRecord& token) {
  TokenRecord t = token;
  if (t.id.empty()) t.id = new_uuid();
  if (t.created_at == 0) t.created_at = now_ms();
  Result<WriterLock> w = lock_writer();
  if (!w) return w.take_error();
  Result<sql::StatementRef> st = w->db().prepare(std::string("INSERT INTO tokens (") + kTokenColumns +
                                                 ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  if (!st) return st.take_error();
  (*st)->bind(1, t.id)
      .bind(2, t.name)
      .bind(3, t.role)
      .bind(4, t.tenant)
      .bind(5, t.secret_hash)
      .bind(6, t.created_at)
      .bind(7, t.expires_at);
  if (Status s = (*st)->run(); !s) {
    Error e = s.take_error();
    if (e.code == Code::kConflict && mentions(e, "tokens.secret_hash"))
      return Error(Code::kConflict, "a token with this secret already exists");
    if (e.code == Code::kConflict && mentions(e, "tokens.id"))
      return Error(Code::kConflict, "token " + t.id + " already exists", {FieldError{"/id", "already in use"}});
    return e;
  }
  return t;
}

Result<TokenRecord> SqliteStore::find_token_by_hash(std::string_view secret_hash) {
  ReaderLease r = lease_reader();
  Result<sql::StatementRef> st =
      r.db().prepare(std::string("SELECT ") + kTokenColumns + " FROM tokens WHERE secret_hash = ?1");
  if (!st) return st.take_error();
  (*st)->bind(1, secret_hash);
  Result<bool> row = (*st)->step();
  if (!row) return row.take_error();
  if (!*row) return Error(Code::kNotFound, "token not found");  // never echo the hash
  return read_token(**st);
}

Result<std::vector<TokenRecord>> SqliteStore::list_tokens() {
  ReaderLease r = lease_reader();
  Result<sql::StatementRef> st =
      r.db().prepare(std::string("SELECT ") + kTokenColumns + " FROM tokens ORDER BY created_at, id");
  if (!st) return st.take_error();
  return collect<TokenRecord>(**st, read_token);
}

Status SqliteStore::delete_token(std::string_view id) {
  Result<WriterLock> w = lock_writer();
  if (!w) return w.take_error();
  Result<sql::StatementRef> st = w->db().prepare("DELETE FROM tokens WHERE id = ?1");
  if (!st) return st.take_error();
  (*st)->bind(1, id);
  if (Status s = (*st)->run(); !s) return s;
  if (w->db().changes() == 0) return Error(Code::kNotFound, "token " + std::string(id) + " not found");
  return ok_status();
}

Result<bool> SqliteStore::has_token_with_role(std::string_view role) {
  ReaderLease r = lease_reader();
  Result<sql::StatementRef> st = r.db().prepare(
      "SELECT EXISTS (SELECT 1 FROM tokens WHERE role = ?1 AND (expires_at = 0 OR expires_at > ?2))");
  if (!st) return st.take_error();
  (*st)->bind(1, role).bind(2, now_ms());
  Result<bool> row = (*st)->step();
  if (!row) return row.take_error();
  return (*st)->column_bool(0);
}

}  // namespace kiln
