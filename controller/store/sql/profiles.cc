#include <utility>

#include "controller/store/sql/sql_store.h"
#include "controller/store/store_rules.h"

namespace kiln {

// SqlStore: hardware profiles (CatalogueStore; schemas/sql/<dialect>/
// 004_profiles_validations.sql: `profiles`, and `profile_defaults_seeded`,
// the names of the defaults ever seeded).
//
// Concurrency, settled in the database so that several kilnd agree:
// replace_profile is one UPDATE, conditional on the version the caller read
// when it sends If-Match, so two writers replacing a profile cannot both win.
// delete_profile locks the profile row before counting the nodes that name
// it, so it is serialized with other deletes and replaces of that profile.
// seed_profiles may run on several kilnd starting at once: each default is
// inserted only when it was never seeded and its name is free (ON CONFLICT
// DO NOTHING), so racing seeders wait for each other's row and exactly one
// of them creates (and reports) each default.

namespace {

using Binds = db::Binds;
using Rows = db::Rows;

// Row layout. kProfileColumns is the one list of profile columns: each names
// a column, binds a Profile's field as a statement parameter and reads it
// back from a result column. SELECT reads the columns in this order; INSERT
// binds them in this order ($1 is the first).
struct ProfileColumn {
  const char* name;
  void (*bind)(Binds& b, const Profile& p);
  void (*read)(const Rows& r, int c, Profile& p);
};

const ProfileColumn kProfileColumns[] = {
    {"name", [](Binds& b, const Profile& p) { b.add(p.name); },
     [](const Rows& r, int c, Profile& p) { p.name = r.text(c); }},
    {"doc",  // doc["name"] is the profile's: read after the name
     [](Binds& b, const Profile& p) { b.add(store_rules::json_text(store_rules::profile_doc(p))); },
     [](const Rows& r, int c, Profile& p) { p.doc = store_rules::profile_doc_from_text(r.text(c), p.name); }},
    {"created_at", [](Binds& b, const Profile& p) { b.add(p.created_at); },
     [](const Rows& r, int c, Profile& p) { p.created_at = r.int64(c); }},
    {"updated_at", [](Binds& b, const Profile& p) { b.add(p.updated_at); },
     [](const Rows& r, int c, Profile& p) { p.updated_at = r.int64(c); }},
    {"version", [](Binds& b, const Profile& p) { b.add(p.version); },
     [](const Rows& r, int c, Profile& p) { p.version = r.int64(c); }},
};

const std::vector<const char*>& profile_column_names() {
  static const std::vector<const char*> names = [] {
    std::vector<const char*> v;
    for (const ProfileColumn& c : kProfileColumns) v.push_back(c.name);
    return v;
  }();
  return names;
}

Binds profile_binds(const Profile& p) {
  Binds b;
  for (const ProfileColumn& col : kProfileColumns) col.bind(b, p);
  return b;
}

Profile read_profile(const Rows& r) {
  Profile p;
  int c = 0;
  for (const ProfileColumn& col : kProfileColumns) col.read(r, c++, p);
  return p;
}

const std::string& profile_select() {
  static const std::string s = "SELECT " + store_rules::column_list(profile_column_names()) + " FROM profiles";
  return s;
}

const std::string& profile_insert() {
  static const std::string s = store_rules::insert_sql("profiles", profile_column_names());
  return s;
}

Result<Profile> select_profile(db::Conn& c, std::string_view name, std::string_view suffix = "") {
  Result<Rows> r = c.query(profile_select() + " WHERE name = $1" + std::string(suffix), Binds().add(name));
  if (!r) return r.take_error();
  Result<bool> row = r->next();
  if (!row) return row.take_error();
  if (!*row) return store_rules::profile_not_found(name);
  return read_profile(*r);
}

constexpr db::Constraint kProfileName{"profiles.name", "profiles_pkey"};

}  // namespace

Result<Profile> SqlStore::create_profile(const Profile& profile) {
  Result<Profile> p = store_rules::profile_to_create(profile, now_ms());
  if (!p) return p;
  Status s = autocommit([&](db::Conn& c) -> Status {
    Result<int64_t> n = c.exec(profile_insert(), profile_binds(*p));
    if (n) return ok_status();
    Error e = n.take_error();
    if (c.dialect().violated(e, kProfileName)) return store_rules::profile_name_taken(p->name);
    return e;
  });
  if (!s) return s.take_error();
  return p;
}

Result<Profile> SqlStore::get_profile(std::string_view name) {
  return read_value<Profile>([&](db::Conn& c) { return select_profile(c, name); });
}

Result<std::vector<Profile>> SqlStore::list_profiles() {
  return read_value<std::vector<Profile>>([&](db::Conn& c) -> Result<std::vector<Profile>> {
    // Byte order in both engines: PostgreSQL's profiles.name is COLLATE "C".
    Result<Rows> r = c.query(profile_select() + " ORDER BY name");
    if (!r) return r.take_error();
    return db::collect<Profile>(*r, read_profile);
  });
}

Result<Profile> SqlStore::replace_profile(const Profile& profile, std::optional<int64_t> expected_version) {
  Profile next = profile;
  next.doc = store_rules::profile_doc(profile);
  next.updated_at = now_ms();
  Binds b;
  b.add(next.name).add(store_rules::json_text(next.doc)).add(next.updated_at);
  std::string sql = "UPDATE profiles SET doc = $2, updated_at = $3, version = version + 1 WHERE name = $1";
  if (expected_version) {
    sql += " AND version = $4";
    b.add(*expected_version);
  }
  sql += " RETURNING created_at, version";
  return write_value<Profile>([&](Tx& tx) -> Result<Profile> {
    Result<Rows> r = tx.conn.query(sql, b);
    if (!r) return r.take_error();
    Result<bool> row = r->next();
    if (!row) return row.take_error();
    if (*row) {
      next.created_at = r->int64(0);
      next.version = r->int64(1);
      return next;
    }
    // Which failure: no profile, or another version (the UPDATE decided; this
    // read, in the same transaction, only names the reason).
    Result<Profile> cur = select_profile(tx.conn, profile.name);
    if (!cur) return cur.take_error();
    return store_rules::profile_version_mismatch(profile.name, cur->version, expected_version.value_or(0));
  });
}

Status SqlStore::delete_profile(std::string_view name) {
  return write([&](Tx& tx) -> Status {
    db::Conn& c = tx.conn;
    const std::string lock = "SELECT 1 FROM profiles WHERE name = $1" + std::string(c.dialect().for_update);
    if (Result<int64_t> locked = db::query_int(c, lock, Binds().add(name)); !locked) return locked.take_error();
    // Counted before the profile is looked for: nodes may name a profile
    // that has no row, and deleting nothing is then refused as in use.
    Result<int64_t> n = db::query_int(c, "SELECT count(*) FROM nodes WHERE profile = $1", Binds().add(name));
    if (!n) return n.take_error();
    if (*n > 0) return store_rules::profile_in_use(name, *n);
    Result<int64_t> gone = c.exec("DELETE FROM profiles WHERE name = $1", Binds().add(name));
    if (!gone) return gone.take_error();
    if (*gone == 0) return store_rules::profile_not_found(name);
    return ok_status();
  });
}

Result<std::vector<std::string>> SqlStore::seed_profiles(const std::vector<Profile>& defaults) {
  const int64_t now = now_ms();
  std::vector<Profile> rows;
  for (const Profile& d : defaults) {
    Result<Profile> p = store_rules::profile_to_create(d, now);
    if (!p) return p.take_error();
    rows.push_back(std::move(*p));
  }
  return write_value<std::vector<std::string>>([&](Tx& tx) -> Result<std::vector<std::string>> {
    std::vector<std::string> created;
    for (const Profile& p : rows) {
      // Inserted unless seeded before (an operator deleted it) or its name is
      // taken (an operator's own profile, or a racing seeder's: ON CONFLICT
      // waits for that one's commit and then inserts nothing).
      Result<int64_t> seeded =
          db::query_int(tx.conn, "SELECT count(*) FROM profile_defaults_seeded WHERE name = $1", Binds().add(p.name));
      if (!seeded) return seeded.take_error();
      if (*seeded == 0) {
        Result<int64_t> inserted = tx.conn.exec(profile_insert() + " ON CONFLICT (name) DO NOTHING", profile_binds(p));
        if (!inserted) return inserted.take_error();
        if (*inserted > 0) created.push_back(p.name);
      }
      Result<int64_t> mark = tx.conn.exec(
          "INSERT INTO profile_defaults_seeded (name, seeded_at) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
          Binds().add(p.name).add(now));
      if (!mark) return mark.take_error();
    }
    return created;
  });
}

}  // namespace kiln
