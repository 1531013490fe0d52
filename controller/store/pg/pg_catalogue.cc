#include <utility>

#include "common/ids.h"
#include "controller/store/pg/pg_store.h"
#include "controller/store/store_rules.h"

namespace kiln {

using json = nlohmann::json;
using store_rules::json_text;

// PgStore: the catalogue (CatalogueStore): OS images, as sqlite_images.cc,
// and hardware profiles, as sqlite_profiles.cc.
//
// Concurrency. Every image write is one statement. replace_profile is one
// UPDATE, conditional on the version the caller read when it sends If-Match,
// so two instances replacing a profile cannot both win. delete_profile locks
// the profile row before counting the nodes that name it, so it is
// serialized with other deletes and replaces of that profile. seed_profiles
// may run on several kilnd starting at once: each default is inserted only
// when it was never seeded, with ON CONFLICT DO NOTHING, so racing seeders
// wait for each other's row and exactly one of them creates (and reports)
// each default.

namespace {

constexpr const char* kImageColumns[] = {"id",     "name",   "kind",       "format",     "sha256",
                                         "size",   "source", "path",       "kernel",     "kernel_args",
                                         "state",  "last_error", "created_at", "updated_at", "public",
                                         "ssh_user", "virtual_size", "served_sha256", "served_size",
                                         "served_path", "os_agent"};

const std::string& image_select() {
  static const std::string s = "SELECT " + store_rules::column_list(kImageColumns) + " FROM images";
  return s;
}

const std::string& image_returning() {
  static const std::string s = " RETURNING " + store_rules::column_list(kImageColumns);
  return s;
}

Image read_image(const pg::Rows& r, int row) {
  Image i;
  i.id = r.text(row, 0);
  i.name = r.text(row, 1);
  i.kind = r.text(row, 2);
  i.format = r.text(row, 3);
  i.sha256 = r.text(row, 4);
  i.size = r.int64(row, 5);
  i.source = r.text(row, 6);
  i.path = r.text(row, 7);
  i.kernel = r.text(row, 8);
  i.kernel_args = r.text(row, 9);
  i.state = r.text(row, 10);
  i.last_error = r.text(row, 11);
  i.created_at = r.int64(row, 12);
  i.updated_at = r.int64(row, 13);
  i.is_public = r.boolean(row, 14);
  i.ssh_user = r.text(row, 15);
  i.virtual_size = r.int64(row, 16);
  i.served_sha256 = r.text(row, 17);
  i.served_size = r.int64(row, 18);
  i.served_path = r.text(row, 19);
  i.os_agent = r.boolean(row, 20);
  return i;
}

// " WHERE id = $1" or " WHERE name = $1", with the key as matched: a UUID is
// stored lowercase and matched in any case, as in SQLite's lower(?1).
std::string where_id_or_name(std::string_view id_or_name, pg::Params& p) {
  if (is_uuid(id_or_name)) {
    p.add(store_rules::lower(id_or_name));
    return " WHERE id = $1";
  }
  p.add(id_or_name);
  return " WHERE name = $1";
}

constexpr const char kProfileSelect[] = "SELECT name, doc, created_at, updated_at, version FROM profiles";

Profile read_profile(const pg::Rows& r, int row) {
  Profile p;
  p.name = r.text(row, 0);
  p.doc = store_rules::profile_doc_from_text(r.text(row, 1), p.name);
  p.created_at = r.int64(row, 2);
  p.updated_at = r.int64(row, 3);
  p.version = r.int64(row, 4);
  return p;
}

Result<Profile> select_profile(pg::Connection& c, std::string_view name) {
  Result<pg::Rows> r = c.exec(std::string(kProfileSelect) + " WHERE name = $1", pg::Params().add(name));
  if (!r) return r.take_error();
  if (r->empty()) return store_rules::profile_not_found(name);
  return read_profile(*r, 0);
}

// The profile row's values, $1..$5, in kProfileSelect's column order.
pg::Params profile_params(const Profile& p) {
  return pg::Params()
      .add(p.name)
      .add(json_text(store_rules::profile_doc(p)))
      .add(p.created_at)
      .add(p.updated_at)
      .add(p.version);
}

}  // namespace

// ---------------------------------------------------------------------------
// Images

Result<Image> PgStore::create_image(const Image& image) {
  Result<Image> prepared = store_rules::image_to_create(image, now_ms());
  if (!prepared) return prepared;
  const Image& img = *prepared;
  static const std::string insert = store_rules::insert_sql("images", kImageColumns, '$');
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(insert, pg::Params()
                                                  .add(img.id)
                                                  .add(img.name)
                                                  .add(img.kind)
                                                  .add(img.format)
                                                  .add(img.sha256)
                                                  .add(img.size)
                                                  .add(img.source)
                                                  .add(img.path)
                                                  .add(img.kernel)
                                                  .add(img.kernel_args)
                                                  .add(img.state)
                                                  .add(img.last_error)
                                                  .add(img.created_at)
                                                  .add(img.updated_at)
                                                  .add(img.is_public)
                                                  .add(img.ssh_user)
                                                  .add(img.virtual_size)
                                                  .add(img.served_sha256)
                                                  .add(img.served_size)
                                                  .add(img.served_path)
                                                  .add(img.os_agent));
  if (!r) {
    Error e = r.take_error();
    if (pg::names_constraint(e, "images_name_key")) return store_rules::image_name_taken(img);
    if (pg::names_constraint(e, "images_pkey")) return store_rules::image_id_taken(img);
    return e;
  }
  return prepared;
}

Result<Image> PgStore::get_image(std::string_view id_or_name) {
  pg::Params p;
  const std::string where = where_id_or_name(id_or_name, p);
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(image_select() + where, p);
  if (!r) return r.take_error();
  if (r->empty()) return store_rules::image_not_found(id_or_name);
  return read_image(*r, 0);
}

Result<std::vector<Image>> PgStore::list_images() {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(image_select() + " ORDER BY created_at, id");
  if (!r) return r.take_error();
  std::vector<Image> out;
  for (int i = 0; i < r->size(); ++i) out.push_back(read_image(*r, i));
  return out;
}

Status PgStore::delete_image(std::string_view id_or_name) {
  pg::Params p;
  const std::string where = where_id_or_name(id_or_name, p);
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec("DELETE FROM images" + where, p);
  if (!r) return r.take_error();
  if (r->affected() == 0) return store_rules::image_not_found(id_or_name);
  return ok_status();
}

Result<Image> PgStore::update_image(const Image& image) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(
      "UPDATE images SET state = $2, path = $3, last_error = $4, updated_at = $5, virtual_size = $6, "
      "served_sha256 = $7, served_size = $8, served_path = $9 WHERE id = $1" + image_returning(),
      pg::Params()
          .add(image.id)
          .add(image.state)
          .add(image.path)
          .add(image.last_error)
          .add(now_ms())
          .add(image.virtual_size)
          .add(image.served_sha256)
          .add(image.served_size)
          .add(image.served_path));
  if (!r) return r.take_error();
  if (r->empty()) return store_rules::image_not_found(image.id);
  return read_image(*r, 0);
}

Result<Image> PgStore::set_image_public(std::string_view id_or_name, bool is_public) {
  pg::Params p;
  const std::string where = where_id_or_name(id_or_name, p);
  p.add(is_public).add(now_ms());
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r =
      l->conn().exec("UPDATE images SET public = $2, updated_at = $3" + where + image_returning(), p);
  if (!r) return r.take_error();
  if (r->empty()) return store_rules::image_not_found(id_or_name);
  return read_image(*r, 0);
}

// ---------------------------------------------------------------------------
// Profiles

Result<Profile> PgStore::create_profile(const Profile& profile) {
  Result<Profile> p = store_rules::profile_to_create(profile, now_ms());
  if (!p) return p;
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(
      "INSERT INTO profiles (name, doc, created_at, updated_at, version) VALUES ($1, $2, $3, $4, $5)",
      profile_params(*p));
  if (!r) {
    Error e = r.take_error();
    if (pg::names_constraint(e, "profiles_pkey")) return store_rules::profile_name_taken(p->name);
    return e;
  }
  return p;
}

Result<Profile> PgStore::get_profile(std::string_view name) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  return select_profile(l->conn(), name);
}

Result<std::vector<Profile>> PgStore::list_profiles() {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  // profiles.name is COLLATE "C": byte order, as SQLite's.
  Result<pg::Rows> r = l->conn().exec(std::string(kProfileSelect) + " ORDER BY name");
  if (!r) return r.take_error();
  std::vector<Profile> out;
  for (int i = 0; i < r->size(); ++i) out.push_back(read_profile(*r, i));
  return out;
}

Result<Profile> PgStore::replace_profile(const Profile& profile, std::optional<int64_t> expected_version) {
  const int64_t now = now_ms();
  const json doc = store_rules::profile_doc(profile);
  pg::Params p;
  p.add(profile.name).add(json_text(doc)).add(now);
  std::string sql = "UPDATE profiles SET doc = $2, updated_at = $3, version = version + 1 WHERE name = $1";
  if (expected_version) {
    sql += " AND version = $4";
    p.add(*expected_version);
  }
  sql += " RETURNING created_at, version";
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& c = l->conn();
  Result<pg::Rows> r = c.exec(sql, p);
  if (!r) return r.take_error();
  if (r->empty()) {
    // Which failure: no profile, or another version (read after the fact; the
    // UPDATE above is what decided).
    Result<Profile> cur = select_profile(c, profile.name);
    if (!cur) return cur.take_error();
    return store_rules::profile_version_mismatch(profile.name, cur->version, expected_version.value_or(0));
  }
  Profile out;
  out.name = profile.name;
  out.doc = doc;
  out.created_at = r->int64(0, 0);
  out.updated_at = now;
  out.version = r->int64(0, 1);
  return out;
}

Status PgStore::delete_profile(std::string_view name) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& c = l->conn();
  Result<pg::Transaction> tx = pg::Transaction::begin(c);
  if (!tx) return tx.take_error();
  Result<pg::Rows> lock = c.exec("SELECT 1 FROM profiles WHERE name = $1 FOR UPDATE", pg::Params().add(name));
  if (!lock) return lock.take_error();
  // Counted before the profile is looked for, as in SQLite: nodes may name a
  // profile that has no row.
  Result<pg::Rows> n = c.exec("SELECT count(*) FROM nodes WHERE profile = $1", pg::Params().add(name));
  if (!n) return n.take_error();
  if (n->int64(0, 0) > 0) return store_rules::profile_in_use(name, n->int64(0, 0));
  Result<pg::Rows> d = c.exec("DELETE FROM profiles WHERE name = $1", pg::Params().add(name));
  if (!d) return d.take_error();
  if (d->affected() == 0) return store_rules::profile_not_found(name);
  return tx->commit();
}

Result<std::vector<std::string>> PgStore::seed_profiles(const std::vector<Profile>& defaults) {
  const int64_t now = now_ms();
  std::vector<Profile> rows;
  for (const Profile& d : defaults) {
    Result<Profile> p = store_rules::profile_to_create(d, now);
    if (!p) return p.take_error();
    rows.push_back(std::move(*p));
  }
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& c = l->conn();
  Result<pg::Transaction> tx = pg::Transaction::begin(c);
  if (!tx) return tx.take_error();
  std::vector<std::string> created;
  for (const Profile& p : rows) {
    Result<pg::Rows> ins = c.exec(
        "INSERT INTO profiles (name, doc, created_at, updated_at, version)"
        " SELECT $1::text, $2::text, $3::bigint, $4::bigint, $5::bigint"
        " WHERE NOT EXISTS (SELECT 1 FROM profile_defaults_seeded WHERE name = $1)"
        " ON CONFLICT (name) DO NOTHING RETURNING name",
        profile_params(p));
    if (!ins) return ins.take_error();
    if (!ins->empty()) created.push_back(p.name);
    Result<pg::Rows> mark = c.exec(
        "INSERT INTO profile_defaults_seeded (name, seeded_at) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
        pg::Params().add(p.name).add(now));
    if (!mark) return mark.take_error();
  }
  if (Status s = tx->commit(); !s) return s.take_error();
  return created;
}

}  // namespace kiln
