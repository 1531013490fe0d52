#include "controller/store/sql/node_rows.h"

#include <cassert>
#include <iterator>
#include <string_view>
#include <utility>
#include <vector>

#include "controller/model/ring_position.h"
#include "controller/store/store_rules.h"

namespace kiln::node_rows {

using json = nlohmann::json;
using namespace store_rules;

namespace {

// Enum columns: text written by to_string, read back by `parse`.
template <typename E, typename Parse>
Status read_enum(const db::Rows& r, int c, const Node& n, std::string_view column, Parse parse, E& out) {
  return read_stored_enum(r.text(c), parse, "node", n.id, column, out);
}

template <typename E, typename Parse>
Status read_opt_enum(const db::Rows& r, int c, const Node& n, std::string_view column, Parse parse,
                     std::optional<E>& out) {
  if (r.is_null(c)) return ok_status();
  E e{};
  Status s = read_enum(r, c, n, column, parse, e);
  if (s) out = e;
  return s;
}

// A JSON array of strings (traits, addresses).
Status read_string_list(const db::Rows& r, int c, std::string_view column, std::vector<std::string>& out) {
  json list;
  Status s = db::json_column_into(r, c, "nodes." + std::string(column), list);
  if (s) out = string_list(list);
  return s;
}

// One node column: its name, how a Node's field is bound as the next
// parameter, and how it is read back from result column `c`. SELECTs read the
// columns in this order; INSERT and UPDATE bind them in this order ($1 is id).
struct NodeColumn {
  const char* name;
  void (*bind)(db::Binds& b, const Node& n);
  Status (*read)(const db::Rows& r, int c, Node& n);
};

using B = db::Binds;
using R = db::Rows;

const NodeColumn kNodeColumns[] = {
    {"id", [](B& b, const Node& n) { b.add(n.id); },
     [](const R& r, int c, Node& n) { n.id = r.text(c); return ok_status(); }},
    {"name",  // NULL when unnamed: the unique index allows many
     [](B& b, const Node& n) { b.add(n.name.empty() ? std::optional<std::string>() : n.name); },
     [](const R& r, int c, Node& n) { n.name = r.text(c); return ok_status(); }},
    {"kind", [](B& b, const Node& n) { b.add(to_string(n.kind)); },
     [](const R& r, int c, Node& n) { return read_enum(r, c, n, "kind", parse_node_kind, n.kind); }},
    {"bmc_driver", [](B& b, const Node& n) { b.add(n.bmc.driver); },
     [](const R& r, int c, Node& n) { n.bmc.driver = r.text(c); return ok_status(); }},
    {"bmc_address", [](B& b, const Node& n) { b.add(n.bmc.address); },
     [](const R& r, int c, Node& n) { n.bmc.address = r.text(c); return ok_status(); }},
    {"bmc_username", [](B& b, const Node& n) { b.add(n.bmc.username); },
     [](const R& r, int c, Node& n) { n.bmc.username = r.text(c); return ok_status(); }},
    {"bmc_password_sealed", [](B& b, const Node& n) { b.add(n.bmc.password_sealed); },
     [](const R& r, int c, Node& n) { n.bmc.password_sealed = r.text(c); return ok_status(); }},
    {"bmc_system_id", [](B& b, const Node& n) { b.add(n.bmc.system_id); },
     [](const R& r, int c, Node& n) { n.bmc.system_id = r.text(c); return ok_status(); }},
    {"bmc_domain", [](B& b, const Node& n) { b.add(n.bmc.domain); },
     [](const R& r, int c, Node& n) { n.bmc.domain = r.text(c); return ok_status(); }},
    {"bmc_verify_tls", [](B& b, const Node& n) { b.add(n.bmc.verify_tls); },
     [](const R& r, int c, Node& n) { n.bmc.verify_tls = r.boolean(c); return ok_status(); }},
    {"bmc_options", [](B& b, const Node& n) { b.add(json_text(n.bmc.options)); },
     [](const R& r, int c, Node& n) { return db::json_column_into(r, c, "nodes.bmc_options", n.bmc.options); }},
    {"boot_mode", [](B& b, const Node& n) { b.add(n.boot_mode); },
     [](const R& r, int c, Node& n) { n.boot_mode = r.text(c); return ok_status(); }},
    {"profile", [](B& b, const Node& n) { b.add(n.profile); },
     [](const R& r, int c, Node& n) { n.profile = r.text(c); return ok_status(); }},
    {"traits", [](B& b, const Node& n) { b.add(json_text(json(n.traits))); },
     [](const R& r, int c, Node& n) { return read_string_list(r, c, "traits", n.traits); }},
    {"provision_state", [](B& b, const Node& n) { b.add(to_string(n.provision_state)); },
     [](const R& r, int c, Node& n) {
       return read_enum(r, c, n, "provision_state", parse_provision_state, n.provision_state);
     }},
    {"target_provision_state", [](B& b, const Node& n) { b.add(opt_text(n.target_provision_state)); },
     [](const R& r, int c, Node& n) {
       return read_opt_enum(r, c, n, "target_provision_state", parse_provision_state, n.target_provision_state);
     }},
    {"provision_step", [](B& b, const Node& n) { b.add(n.provision_step); },
     [](const R& r, int c, Node& n) { n.provision_step = r.text(c); return ok_status(); }},
    {"deadline_at", [](B& b, const Node& n) { b.add(n.deadline_at); },
     [](const R& r, int c, Node& n) { n.deadline_at = r.int64(c); return ok_status(); }},
    {"power_state", [](B& b, const Node& n) { b.add(to_string(n.power_state)); },
     [](const R& r, int c, Node& n) { return read_enum(r, c, n, "power_state", parse_power_state, n.power_state); }},
    {"target_power_state", [](B& b, const Node& n) { b.add(opt_text(n.target_power_state)); },
     [](const R& r, int c, Node& n) {
       return read_opt_enum(r, c, n, "target_power_state", parse_power_state, n.target_power_state);
     }},
    {"maintenance", [](B& b, const Node& n) { b.add(n.maintenance); },
     [](const R& r, int c, Node& n) { n.maintenance = r.boolean(c); return ok_status(); }},
    {"maintenance_reason", [](B& b, const Node& n) { b.add(n.maintenance_reason); },
     [](const R& r, int c, Node& n) { n.maintenance_reason = r.text(c); return ok_status(); }},
    {"fault", [](B& b, const Node& n) { b.add(n.fault); },
     [](const R& r, int c, Node& n) { n.fault = r.text(c); return ok_status(); }},
    {"last_error", [](B& b, const Node& n) { b.add(n.last_error); },
     [](const R& r, int c, Node& n) { n.last_error = r.text(c); return ok_status(); }},
    {"tenant", [](B& b, const Node& n) { b.add(n.tenant); },
     [](const R& r, int c, Node& n) { n.tenant = r.text(c); return ok_status(); }},
    {"allocation", [](B& b, const Node& n) { b.add(n.allocation); },
     [](const R& r, int c, Node& n) { n.allocation = r.text(c); return ok_status(); }},
    {"host", [](B& b, const Node& n) { b.add(n.host); },
     [](const R& r, int c, Node& n) { n.host = r.text(c); return ok_status(); }},
    {"inventory",  // NULL until inspected
     [](B& b, const Node& n) {
       if (n.inventory.is_null()) {
         b.add(std::nullopt);
       } else {
         b.add(json_text(n.inventory));
       }
     },
     [](const R& r, int c, Node& n) { return db::json_column_into(r, c, "nodes.inventory", n.inventory); }},
    {"last_validation", [](B& b, const Node& n) { b.add(n.last_validation); },
     [](const R& r, int c, Node& n) { n.last_validation = r.text(c); return ok_status(); }},
    {"reservation", [](B& b, const Node& n) { b.add(n.reservation); },
     [](const R& r, int c, Node& n) { n.reservation = r.text(c); return ok_status(); }},
    {"created_at", [](B& b, const Node& n) { b.add(n.created_at); },
     [](const R& r, int c, Node& n) { n.created_at = r.int64(c); return ok_status(); }},
    {"updated_at", [](B& b, const Node& n) { b.add(n.updated_at); },
     [](const R& r, int c, Node& n) { n.updated_at = r.int64(c); return ok_status(); }},
    {"version", [](B& b, const Node& n) { b.add(n.version); },
     [](const R& r, int c, Node& n) { n.version = r.int64(c); return ok_status(); }},
    {"image", [](B& b, const Node& n) { b.add(n.image); },
     [](const R& r, int c, Node& n) { n.image = r.text(c); return ok_status(); }},
    {"addresses", [](B& b, const Node& n) { b.add(json_text(json(n.addresses))); },
     [](const R& r, int c, Node& n) { return read_string_list(r, c, "addresses", n.addresses); }},
    {"ssh", [](B& b, const Node& n) { b.add(n.ssh); },
     [](const R& r, int c, Node& n) { n.ssh = r.text(c); return ok_status(); }},
    {"ssh_host_keys", [](B& b, const Node& n) { b.add(json_text(ssh_host_keys_column(n.ssh_host_keys))); },
     [](const R& r, int c, Node& n) {
       json list;
       Status s = db::json_column_into(r, c, "nodes.ssh_host_keys", list);
       if (s) n.ssh_host_keys = ssh_host_keys_from_column(list);
       return s;
     }},
    {"address_source", [](B& b, const Node& n) { b.add(std::string(to_string(n.address_source))); },
     [](const R& r, int c, Node& n) {
       return read_enum(r, c, n, "address_source", parse_address_source, n.address_source);
     }},
    {"ironic", [](B& b, const Node& n) { b.add(json_text(n.ironic)); },
     [](const R& r, int c, Node& n) { return db::json_column_into(r, c, "nodes.ironic", n.ironic); }},
    // Derived from id and allocation at every write (ring_position.h); not a
    // field of Node. Read only by the power-sync projection.
    {"ring_pos", [](B& b, const Node& n) { b.add(ring_position(n.id, n.allocation)); },
     [](const R&, int, Node&) { return ok_status(); }},
};
constexpr int kNodeColumnCount = sizeof(kNodeColumns) / sizeof(kNodeColumns[0]);

const std::vector<const char*>& column_names() {
  static const std::vector<const char*> names = [] {
    std::vector<const char*> v;
    for (const NodeColumn& c : kNodeColumns) v.push_back(c.name);
    return v;
  }();
  return names;
}

db::Binds bind_node(const Node& n) {
  db::Binds b;
  for (const NodeColumn& c : kNodeColumns) c.bind(b, n);
  return b;
}

// The columns of a PowerSyncNode, by their names in kNodeColumns: each is
// decoded by the reader a whole node uses. The BMC's come last: a row whose
// BMC no sweep asks stops before them (read_power_sync_nodes).
constexpr const char* kPowerSyncColumns[] = {
    "id",          "allocation",   "provision_state", "reservation", "power_state",
    "fault",       "version",      "ring_pos",        "bmc_driver",  "bmc_address",
    "bmc_username", "bmc_password_sealed", "bmc_system_id", "bmc_domain", "bmc_verify_tls", "bmc_options"};
constexpr int kPowerSyncRingColumn = 7;  // read here: Node has no field for it
constexpr int kPowerSyncFirstBmcColumn = 8;

const std::vector<const NodeColumn*>& power_sync_columns() {
  static const std::vector<const NodeColumn*> cols = [] {
    std::vector<const NodeColumn*> v;
    for (const char* name : kPowerSyncColumns)
      for (const NodeColumn& c : kNodeColumns)
        if (std::string_view(c.name) == name) v.push_back(&c);
    assert(v.size() == std::size(kPowerSyncColumns));
    return v;
  }();
  return cols;
}

constexpr db::Constraint kNodeName{"nodes.name", "nodes_name_key"};
constexpr db::Constraint kNodeId{"nodes.id", "nodes_pkey"};

// Turns a constraint violation from writing a node row into the field it is about.
Error node_write_error(const db::Conn& c, Error e, const Node& n) {
  if (c.dialect().violated(e, kNodeName))
    return Error(Code::kConflict, "a node named '" + n.name + "' already exists",
                 {FieldError{"/name", "already in use"}});
  if (c.dialect().violated(e, kNodeId))
    return Error(Code::kConflict, "node " + n.id + " already exists", {FieldError{"/id", "already in use"}});
  return e;
}

}  // namespace

const std::string& node_select() {
  static const std::string s = "SELECT " + column_list(column_names()) + " FROM nodes";
  return s;
}

Result<Node> read_node(const db::Rows& r) {
  Node n;
  for (int c = 0; c < kNodeColumnCount; ++c) {
    if (Status s = kNodeColumns[c].read(r, c, n); !s) return s.take_error();
  }
  return n;
}

Result<std::vector<Node>> read_nodes(db::Rows& r) { return db::collect<Node>(r, read_node); }

const std::string& power_sync_select() {
  static const std::string s = [] {
    std::vector<const char*> names;
    for (const NodeColumn* c : power_sync_columns()) names.push_back(c->name);
    return "SELECT " + column_list(names) + " FROM nodes";
  }();
  return s;
}

Result<std::vector<PowerSyncNode>> read_power_sync_nodes(db::Rows& r) {
  const std::vector<const NodeColumn*>& cols = power_sync_columns();
  // Each row's columns are decoded into this one Node (every one it reads
  // is overwritten by the next row), then moved out: no Node is built per row.
  Node scratch;
  return db::collect<PowerSyncNode>(r, [&](const db::Rows& row) -> Result<PowerSyncNode> {
    for (int c = 0; c < kPowerSyncRingColumn; ++c) {
      if (Status s = cols[c]->read(row, c, scratch); !s) return s.take_error();
    }
    PowerSyncNode p;
    p.id = std::move(scratch.id);
    p.allocation = std::move(scratch.allocation);
    p.provision_state = scratch.provision_state;
    p.reservation = std::move(scratch.reservation);
    p.power_state = scratch.power_state;
    p.fault = std::move(scratch.fault);
    p.version = scratch.version;
    if (!row.is_null(kPowerSyncRingColumn)) p.ring_position = row.int64(kPowerSyncRingColumn);
    if (!power_sync_asks(p.provision_state, p.reservation)) return p;
    for (int c = kPowerSyncFirstBmcColumn; c < static_cast<int>(cols.size()); ++c) {
      if (Status s = cols[c]->read(row, c, scratch); !s) return s.take_error();
    }
    p.bmc = std::move(scratch.bmc);
    return p;
  });
}

Status insert_node_row(db::Conn& c, const Node& n) {
  static const std::string sql = insert_sql("nodes", column_names());
  Result<int64_t> w = c.exec(sql, bind_node(n));
  if (!w) return node_write_error(c, w.take_error(), n);
  return ok_status();
}

Result<int64_t> update_node_row(db::Conn& c, const Node& n, int64_t read_version) {
  // Every column but id, only while the row still has the version read.
  static const std::string sql =
      update_by_key_sql("nodes", column_names()) + " AND version = $" + std::to_string(kNodeColumnCount + 1);
  db::Binds b = bind_node(n);
  b.add(read_version);
  Result<int64_t> w = c.exec(sql, b);
  if (!w) return node_write_error(c, w.take_error(), n);
  return w;
}

Status add_profile_kind_count(const db::Rows& row, int first, ProfileKindCounts& out) {
  NodeKind kind = NodeKind::kBaremetal;
  std::string profile = row.text(first);
  if (Status s = read_stored_enum(row.text(first + 1), parse_node_kind, "node count of profile", profile, "kind", kind);
      !s)
    return s;
  out[{std::move(profile), kind}] = row.int64(first + 2);
  return ok_status();
}

}  // namespace kiln::node_rows
