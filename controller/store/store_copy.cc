#include "controller/store/store_copy.h"

#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <set>

#include "controller/store/pg/connection.h"
#include "controller/store/pg/migrations.h"
#include "controller/store/sqlite.h"
#include "controller/store/store.h"

namespace kiln {

namespace {

// Tables that describe a database or a process, not the fleet, and
// PostgreSQL's queue of events not yet numbered (empty in a new database;
// SQLite numbers events as it appends them).
const std::set<std::string> kNotCopied = {"schema_migrations", "event_counter", "event_queue", "conductors"};

// Flush a table's COPY data at about this size, so a million events do not
// sit in memory at once.
constexpr size_t kCopyBatchBytes = 8 << 20;

std::string quoted(const std::string& identifier) {
  std::string out = "\"";
  for (char c : identifier) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

struct PgColumn {
  std::string name;
  std::string type;  // information_schema data_type: "bigint", "text", "boolean", ...
  bool identity = false;
};

// One value in COPY's text format.
void append_copy_text(std::string& out, std::string_view v) {
  for (char c : v) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      default: out += c;
    }
  }
}

void append_value(std::string& out, sqlite3_stmt* st, int col, const PgColumn& target) {
  const int type = sqlite3_column_type(st, col);
  if (type == SQLITE_NULL) {
    out += "\\N";
    return;
  }
  if (target.type == "boolean") {
    out += sqlite3_column_int64(st, col) != 0 ? "t" : "f";
    return;
  }
  if (type == SQLITE_BLOB && target.type == "bytea") {
    static const char* kHex = "0123456789abcdef";
    const auto* p = static_cast<const unsigned char*>(sqlite3_column_blob(st, col));
    out += "\\\\x";
    for (int i = 0, n = sqlite3_column_bytes(st, col); i < n; ++i) {
      out += kHex[p[i] >> 4];
      out += kHex[p[i] & 0xf];
    }
    return;
  }
  // Integers and text alike: SQLite's text form is what PostgreSQL's input
  // functions read (a non-number in a BIGINT column fails the COPY, naming it).
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(st, col));
  append_copy_text(out, std::string_view(text, static_cast<size_t>(sqlite3_column_bytes(st, col))));
}

Result<std::vector<PgColumn>> pg_columns(pg::Connection& conn, const std::string& table) {
  auto rows = conn.exec(
      "SELECT column_name, data_type, is_identity FROM information_schema.columns"
      " WHERE table_schema = current_schema() AND table_name = $1 AND is_generated = 'NEVER'"
      " ORDER BY ordinal_position",
      pg::Params().add(table));
  if (!rows) return rows.take_error();
  std::vector<PgColumn> out;
  for (int i = 0; i < rows->size(); ++i)
    out.push_back({rows->text(i, 0), rows->text(i, 1), rows->text(i, 2) == "YES"});
  return out;
}

Result<std::set<std::string>> sqlite_columns(sql::Database& db, const std::string& table) {
  auto st = db.prepare("SELECT name FROM pragma_table_info(?1)");
  if (!st) return st.take_error();
  (*st)->bind(1, table);
  std::set<std::string> out;
  for (;;) {
    auto more = (*st)->step();
    if (!more) return more.take_error();
    if (!*more) break;
    out.insert((*st)->column_text(0));
  }
  return out;
}

Result<std::set<std::string>> sqlite_tables(sql::Database& db) {
  auto st = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'");
  if (!st) return st.take_error();
  std::set<std::string> out;
  for (;;) {
    auto more = (*st)->step();
    if (!more) return more.take_error();
    if (!*more) break;
    out.insert((*st)->column_text(0));
  }
  return out;
}

// The target's tables, parents before the tables whose foreign keys refer to
// them (ties by name), so every row's parent is there when it arrives.
Result<std::vector<std::string>> pg_tables_parents_first(pg::Connection& conn) {
  auto tables = conn.exec(
      "SELECT table_name FROM information_schema.tables"
      " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name");
  if (!tables) return tables.take_error();
  auto fks = conn.exec(
      "SELECT c.relname, p.relname FROM pg_constraint k"
      " JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class p ON p.oid = k.confrelid"
      " WHERE k.contype = 'f' AND k.connamespace = current_schema()::regnamespace");
  if (!fks) return fks.take_error();
  std::map<std::string, std::set<std::string>> parents;
  for (int i = 0; i < tables->size(); ++i) {
    std::string t = tables->text(i, 0);
    if (!kNotCopied.count(t)) parents[t];
  }
  for (int i = 0; i < fks->size(); ++i) {
    std::string child = fks->text(i, 0), parent = fks->text(i, 1);
    if (child != parent && parents.count(child) && parents.count(parent)) parents[child].insert(parent);
  }
  std::vector<std::string> order;
  std::set<std::string> placed;
  while (order.size() < parents.size()) {
    bool progress = false;
    for (const auto& [t, ps] : parents) {
      if (placed.count(t)) continue;
      if (std::all_of(ps.begin(), ps.end(), [&](const std::string& p) { return placed.count(p) > 0; })) {
        order.push_back(t);
        placed.insert(t);
        progress = true;
      }
    }
    if (!progress) return Error(Code::kInternal, "the PostgreSQL schema's foreign keys form a cycle");
  }
  return order;
}

Result<int64_t> copy_table(sql::Database& src, pg::Connection& dst, const std::string& table) {
  auto columns = pg_columns(dst, table);
  if (!columns) return columns.take_error();
  auto have = sqlite_columns(src, table);
  if (!have) return have.take_error();
  std::vector<PgColumn> copied;
  std::string select, names;
  for (const PgColumn& c : *columns) {
    std::string from;
    if (have->count(c.name)) {
      from = quoted(c.name);
    } else if (c.identity) {
      // An ordering column SQLite keeps as its rowid (ports.ord).
      from = "rowid";
    } else {
      continue;  // a column only PostgreSQL has: its default
    }
    select += (select.empty() ? "" : ", ") + from;
    names += (names.empty() ? "" : ", ") + quoted(c.name);
    copied.push_back(c);
  }
  for (const std::string& name : *have) {
    if (std::none_of(columns->begin(), columns->end(), [&](const PgColumn& c) { return c.name == name; }))
      return Error(Code::kInvalidArgument, "table " + table + ": column " + name +
                                               " has no PostgreSQL counterpart (is this kilnd older than the database?)");
  }

  auto st = src.prepare("SELECT " + select + " FROM " + quoted(table));
  if (!st) return st.take_error();
  const std::string copy_sql = "COPY " + quoted(table) + " (" + names + ") FROM STDIN";
  std::string data;
  int64_t rows = 0;
  for (;;) {
    auto more = (*st)->step();
    if (!more) return more.take_error();
    if (*more) {
      for (size_t i = 0; i < copied.size(); ++i) {
        if (i > 0) data += '\t';
        append_value(data, (*st)->raw(), static_cast<int>(i), copied[i]);
      }
      data += '\n';
      ++rows;
    }
    if (!data.empty() && (!*more || data.size() >= kCopyBatchBytes)) {
      if (auto n = dst.copy_in(copy_sql, data); !n) return n.take_error();
      data.clear();
    }
    if (!*more) break;
  }
  return rows;
}

// Identity sequences and the event counter continue after the copied rows.
Status move_counters(pg::Connection& conn) {
  auto ids = conn.exec(
      "SELECT table_name, column_name FROM information_schema.columns"
      " WHERE table_schema = current_schema() AND is_identity = 'YES'");
  if (!ids) return ids.take_error();
  for (int i = 0; i < ids->size(); ++i) {
    const std::string t = ids->text(i, 0), c = ids->text(i, 1);
    auto r = conn.exec("SELECT setval(pg_get_serial_sequence($1, $2), coalesce((SELECT max(" + quoted(c) +
                           ") FROM " + quoted(t) + "), 0) + 1, false)",
                       pg::Params().add(quoted(t)).add(c));
    if (!r) return r.take_error();
  }
  auto r = conn.exec("UPDATE event_counter SET last_seq = (SELECT coalesce(max(seq), 0) FROM events)");
  if (!r) return r.take_error();
  return ok_status();
}

Result<int64_t> count_sqlite(sql::Database& db, const std::string& table) {
  auto st = db.prepare("SELECT count(*) FROM " + quoted(table));
  if (!st) return st.take_error();
  auto more = (*st)->step();
  if (!more) return more.take_error();
  return (*st)->column_int64(0);
}

}  // namespace

Result<std::vector<TableCopied>> copy_sqlite_to_postgres(const std::string& sqlite_path,
                                                         const std::string& conninfo, const Clock& clock) {
  // The source at this build's schema.
  {
    auto store = open_sqlite_store({.path = sqlite_path, .clock = &clock});
    if (!store) return store.take_error();
    if (Status s = (*store)->migrate(); !s) return s.take_error();
  }
  auto src = sql::Database::open(sqlite_path, {.create = false, .query_only = true});
  if (!src) return src.take_error();
  auto snapshot = sql::Transaction::begin_read(**src);
  if (!snapshot) return snapshot.take_error();
  auto src_tables = sqlite_tables(**src);
  if (!src_tables) return src_tables.take_error();

  auto dst = pg::Connection::open(conninfo);
  if (!dst) return dst.take_error();
  if (Status s = pg::apply_migrations(**dst, clock.now_ms()); !s) return s.take_error();
  auto order = pg_tables_parents_first(**dst);
  if (!order) return order.take_error();
  for (const std::string& t : *src_tables) {
    if (!kNotCopied.count(t) && std::find(order->begin(), order->end(), t) == order->end())
      return Error(Code::kInvalidArgument, "SQLite table " + t + " has no PostgreSQL counterpart");
  }

  auto tx = pg::Transaction::begin(**dst);
  if (!tx) return tx.take_error();
  // A second run, or a database some kilnd already uses, is refused before
  // anything is written.
  for (const std::string& t : *order) {
    auto rows = (*dst)->exec("SELECT EXISTS (SELECT 1 FROM " + quoted(t) + ")");
    if (!rows) return rows.take_error();
    if (rows->boolean(0, 0))
      return Error(Code::kInvalidArgument, "the PostgreSQL database is not empty (table " + t +
                                               " has rows): migrate-store copies into an empty database");
  }
  std::vector<TableCopied> report;
  for (const std::string& t : *order) {
    if (!src_tables->count(t)) return Error(Code::kInvalidArgument, "PostgreSQL table " + t + " has no SQLite counterpart");
    auto n = copy_table(**src, **dst, t);
    if (!n) return Error(n.error().code, "copying " + t + ": " + n.error().message);
    auto expected = count_sqlite(**src, t);
    if (!expected) return expected.take_error();
    auto got = (*dst)->exec("SELECT count(*) FROM " + quoted(t));
    if (!got) return got.take_error();
    if (*n != *expected || got->int64(0, 0) != *expected)
      return Error(Code::kInternal, "copying " + t + ": " + std::to_string(*expected) + " rows in SQLite, " +
                                        std::to_string(got->int64(0, 0)) + " arrived");
    report.push_back({t, *n});
  }
  if (Status s = move_counters(**dst); !s) return s.take_error();
  if (Status s = tx->commit(); !s) return s.take_error();
  return report;
}

}  // namespace kiln
