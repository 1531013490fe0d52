#include "common/ids.h"
#include "controller/store/sql/id_or_name.h"
#include "controller/store/sql/sql_store.h"
#include "controller/store/store_rules.h"

namespace kiln {

// SqlStore: the image catalogue (CatalogueStore; schemas/sql/<dialect>/
// 002_images.sql, public since 012_tenants.sql, qcow2 conversion since
// 019_image_conversion.sql, os_agent since 021_image_os_agent.sql). Owned by
// controller/boot (docs/agent-protocol.md).
//
// Every image write is one statement, so each runs in autocommit; a write
// that answers with the image reads it back with RETURNING in that same
// statement (what it wrote, not what a later writer left).

namespace {

using Binds = db::Binds;
using Rows = db::Rows;
using db::where_id_or_name;

// Row layout. kImageColumns is the one list of image columns: each names a
// column, says whether update_image writes it, binds an Image's field as a
// statement parameter and reads it back from a result column. SELECT and
// RETURNING read the columns in this order; INSERT binds them all, and
// update_image its own, in this order ($1 is the first).
enum class Written {
  kAtCreate,   // the catalogue entry: set by create_image (public also by set_image_public)
  kByOutcome,  // what a download, upload or conversion learnt: update_image writes it too
};

struct ImageColumn {
  const char* name;
  Written written;
  void (*bind)(Binds& b, const Image& i);
  void (*read)(const Rows& r, int c, Image& i);
};

const ImageColumn kImageColumns[] = {
    {"id", Written::kAtCreate, [](Binds& b, const Image& i) { b.add(i.id); },
     [](const Rows& r, int c, Image& i) { i.id = r.text(c); }},
    {"name", Written::kAtCreate, [](Binds& b, const Image& i) { b.add(i.name); },
     [](const Rows& r, int c, Image& i) { i.name = r.text(c); }},
    {"kind", Written::kAtCreate, [](Binds& b, const Image& i) { b.add(i.kind); },
     [](const Rows& r, int c, Image& i) { i.kind = r.text(c); }},
    {"format", Written::kAtCreate, [](Binds& b, const Image& i) { b.add(i.format); },
     [](const Rows& r, int c, Image& i) { i.format = r.text(c); }},
    {"sha256", Written::kAtCreate, [](Binds& b, const Image& i) { b.add(i.sha256); },
     [](const Rows& r, int c, Image& i) { i.sha256 = r.text(c); }},
    {"size", Written::kAtCreate, [](Binds& b, const Image& i) { b.add(i.size); },
     [](const Rows& r, int c, Image& i) { i.size = r.int64(c); }},
    {"source", Written::kAtCreate, [](Binds& b, const Image& i) { b.add(i.source); },
     [](const Rows& r, int c, Image& i) { i.source = r.text(c); }},
    {"path", Written::kByOutcome, [](Binds& b, const Image& i) { b.add(i.path); },
     [](const Rows& r, int c, Image& i) { i.path = r.text(c); }},
    {"kernel", Written::kAtCreate, [](Binds& b, const Image& i) { b.add(i.kernel); },
     [](const Rows& r, int c, Image& i) { i.kernel = r.text(c); }},
    {"kernel_args", Written::kAtCreate, [](Binds& b, const Image& i) { b.add(i.kernel_args); },
     [](const Rows& r, int c, Image& i) { i.kernel_args = r.text(c); }},
    {"state", Written::kByOutcome, [](Binds& b, const Image& i) { b.add(i.state); },
     [](const Rows& r, int c, Image& i) { i.state = r.text(c); }},
    {"last_error", Written::kByOutcome, [](Binds& b, const Image& i) { b.add(i.last_error); },
     [](const Rows& r, int c, Image& i) { i.last_error = r.text(c); }},
    {"created_at", Written::kAtCreate, [](Binds& b, const Image& i) { b.add(i.created_at); },
     [](const Rows& r, int c, Image& i) { i.created_at = r.int64(c); }},
    {"updated_at", Written::kAtCreate, [](Binds& b, const Image& i) { b.add(i.updated_at); },
     [](const Rows& r, int c, Image& i) { i.updated_at = r.int64(c); }},
    {"public", Written::kAtCreate,  // BOOLEAN on PostgreSQL, INTEGER 0/1 on SQLite
     [](Binds& b, const Image& i) { b.add(i.is_public); },
     [](const Rows& r, int c, Image& i) { i.is_public = r.boolean(c); }},
    {"ssh_user", Written::kAtCreate, [](Binds& b, const Image& i) { b.add(i.ssh_user); },
     [](const Rows& r, int c, Image& i) { i.ssh_user = r.text(c); }},
    {"virtual_size", Written::kByOutcome, [](Binds& b, const Image& i) { b.add(i.virtual_size); },
     [](const Rows& r, int c, Image& i) { i.virtual_size = r.int64(c); }},
    {"served_sha256", Written::kByOutcome, [](Binds& b, const Image& i) { b.add(i.served_sha256); },
     [](const Rows& r, int c, Image& i) { i.served_sha256 = r.text(c); }},
    {"served_size", Written::kByOutcome, [](Binds& b, const Image& i) { b.add(i.served_size); },
     [](const Rows& r, int c, Image& i) { i.served_size = r.int64(c); }},
    {"served_path", Written::kByOutcome, [](Binds& b, const Image& i) { b.add(i.served_path); },
     [](const Rows& r, int c, Image& i) { i.served_path = r.text(c); }},
    {"os_agent", Written::kAtCreate,  // BOOLEAN on PostgreSQL, INTEGER 0/1 on SQLite
     [](Binds& b, const Image& i) { b.add(i.os_agent); },
     [](const Rows& r, int c, Image& i) { i.os_agent = r.boolean(c); }},
};

const std::vector<const char*>& image_column_names() {
  static const std::vector<const char*> names = [] {
    std::vector<const char*> v;
    for (const ImageColumn& c : kImageColumns) v.push_back(c.name);
    return v;
  }();
  return names;
}

const std::string& image_select() {
  static const std::string s = "SELECT " + store_rules::column_list(image_column_names()) + " FROM images";
  return s;
}

const std::string& image_returning() {
  static const std::string s = " RETURNING " + store_rules::column_list(image_column_names());
  return s;
}

Image read_image(const Rows& r) {
  Image i;
  int c = 0;
  for (const ImageColumn& col : kImageColumns) col.read(r, c++, i);
  return i;
}

// The one image `sql` (a SELECT, or a write ... RETURNING) answers with;
// kNotFound naming `key` when it matched none.
Result<Image> one_image(db::Conn& c, const std::string& sql, const Binds& b, std::string_view key) {
  Result<Rows> r = c.query(sql, b);
  if (!r) return r.take_error();
  Result<bool> row = r->next();
  if (!row) return row.take_error();
  if (!*row) return store_rules::image_not_found(key);
  Image out = read_image(*r);
  // Read to the end: an autocommit write commits when its statement ends,
  // and only a step that ends it reports a failed commit.
  Result<bool> more = r->next();
  if (!more) return more.take_error();
  return out;
}

constexpr db::Constraint kImageName{"images.name", "images_name_key"};
constexpr db::Constraint kImageId{"images.id", "images_pkey"};

}  // namespace

Result<Image> SqlStore::create_image(const Image& image) {
  Result<Image> prepared = store_rules::image_to_create(image, now_ms());
  if (!prepared) return prepared;
  const Image& img = *prepared;
  static const std::string insert = store_rules::insert_sql("images", image_column_names());
  Binds b;
  for (const ImageColumn& col : kImageColumns) col.bind(b, img);
  Status s = autocommit([&](db::Conn& c) -> Status {
    Result<int64_t> n = c.exec(insert, b);
    if (n) return ok_status();
    Error e = n.take_error();
    if (c.dialect().violated(e, kImageName)) return store_rules::image_name_taken(img);
    if (c.dialect().violated(e, kImageId)) return store_rules::image_id_taken(img);
    return e;
  });
  if (!s) return s.take_error();
  return prepared;
}

Result<Image> SqlStore::get_image(std::string_view id_or_name) {
  Binds b;
  const std::string sql = image_select() + where_id_or_name(id_or_name, b);
  return read_value<Image>([&](db::Conn& c) { return one_image(c, sql, b, id_or_name); });
}

Result<std::vector<Image>> SqlStore::list_images() {
  return read_value<std::vector<Image>>([&](db::Conn& c) -> Result<std::vector<Image>> {
    Result<Rows> r = c.query(image_select() + " ORDER BY created_at, id");
    if (!r) return r.take_error();
    return db::collect<Image>(*r, read_image);
  });
}

Status SqlStore::delete_image(std::string_view id_or_name) {
  Binds b;
  const std::string sql = "DELETE FROM images" + where_id_or_name(id_or_name, b);
  return autocommit([&](db::Conn& c) -> Status {
    Result<int64_t> n = c.exec(sql, b);
    if (!n) return n.take_error();
    if (*n == 0) return store_rules::image_not_found(id_or_name);
    return ok_status();
  });
}

Result<Image> SqlStore::update_image(const Image& image) {
  // "UPDATE images SET path = $2, state = $3, ..., updated_at = $N WHERE
  // id = $1": the outcome columns in kImageColumns' order, then the time.
  static const std::string sql = [] {
    std::string s = "UPDATE images SET ";
    int n = 2;
    for (const ImageColumn& col : kImageColumns) {
      if (col.written == Written::kByOutcome) s += std::string(col.name) + " = $" + std::to_string(n++) + ", ";
    }
    return s + "updated_at = $" + std::to_string(n) + " WHERE id = $1" + image_returning();
  }();
  Binds b;
  b.add(image.id);
  for (const ImageColumn& col : kImageColumns) {
    if (col.written == Written::kByOutcome) col.bind(b, image);
  }
  b.add(now_ms());
  return autocommit_value<Image>([&](db::Conn& c) { return one_image(c, sql, b, image.id); });
}

Result<Image> SqlStore::set_image_public(std::string_view id_or_name, bool is_public) {
  Binds b;
  const std::string where = where_id_or_name(id_or_name, b);
  b.add(is_public).add(now_ms());
  const std::string sql = "UPDATE images SET public = $2, updated_at = $3" + where + image_returning();
  return autocommit_value<Image>([&](db::Conn& c) { return one_image(c, sql, b, id_or_name); });
}

}  // namespace kiln
