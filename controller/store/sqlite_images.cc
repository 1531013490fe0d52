// SqliteStore: the image catalogue (schemas/sql/sqlite/002_images.sql, public since
// 012_tenants.sql, qcow2 conversion since 019_image_conversion.sql). Owned by controller/boot (docs/agent-protocol.md).

#include "common/ids.h"
#include "controller/store/sqlite_store.h"
#include "controller/store/sqlite_rows.h"

namespace kiln {

using store_rows::mentions;
using store_rules::image_not_found;

namespace {

constexpr const char kImageColumns[] =
    "id, name, kind, format, sha256, size, source, path, kernel, kernel_args, state, last_error, "
    "created_at, updated_at, public, ssh_user, virtual_size, served_sha256, served_size, served_path, os_agent";

Image read_image(const sql::Statement& s) {
  Image i;
  i.id = s.column_text(0);
  i.name = s.column_text(1);
  i.kind = s.column_text(2);
  i.format = s.column_text(3);
  i.sha256 = s.column_text(4);
  i.size = s.column_int64(5);
  i.source = s.column_text(6);
  i.path = s.column_text(7);
  i.kernel = s.column_text(8);
  i.kernel_args = s.column_text(9);
  i.state = s.column_text(10);
  i.last_error = s.column_text(11);
  i.created_at = s.column_int64(12);
  i.updated_at = s.column_int64(13);
  i.is_public = s.column_bool(14);
  i.ssh_user = s.column_text(15);
  i.virtual_size = s.column_int64(16);
  i.served_sha256 = s.column_text(17);
  i.served_size = s.column_int64(18);
  i.served_path = s.column_text(19);
  i.os_agent = s.column_bool(20);
  return i;
}


}  // namespace

Result<Image> SqliteStore::create_image(const Image& image) {
  Result<Image> prepared = store_rules::image_to_create(image, now_ms());
  if (!prepared) return prepared;
  const Image& img = *prepared;
  Status s = on_writer([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st = db.prepare(std::string("INSERT INTO images (") + kImageColumns +
                                              ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)");
    if (!st) return st.take_error();
    (*st)->bind(1, img.id)
        .bind(2, img.name)
        .bind(3, img.kind)
        .bind(4, img.format)
        .bind(5, img.sha256)
        .bind(6, img.size)
        .bind(7, img.source)
        .bind(8, img.path)
        .bind(9, img.kernel)
        .bind(10, img.kernel_args)
        .bind(11, img.state)
        .bind(12, img.last_error)
        .bind(13, img.created_at)
        .bind(14, img.updated_at)
        .bind(15, img.is_public)
        .bind(16, img.ssh_user)
        .bind(17, img.virtual_size)
        .bind(18, img.served_sha256)
        .bind(19, img.served_size)
        .bind(20, img.served_path)
        .bind(21, img.os_agent);
    Status run = (*st)->run();
    if (!run) {
      Error e = run.take_error();
      if (e.code == Code::kConflict && mentions(e, "images.name")) return store_rules::image_name_taken(img);
      if (e.code == Code::kConflict && mentions(e, "images.id")) return store_rules::image_id_taken(img);
      return e;
    }
    return ok_status();
  });
  if (!s) return s.take_error();
  return prepared;
}

Result<Image> SqliteStore::get_image(std::string_view id_or_name) {
  Image out;
  const bool by_id = is_uuid(id_or_name);
  Status s = on_reader([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st = db.prepare(std::string("SELECT ") + kImageColumns + " FROM images WHERE " +
                                              (by_id ? "id = lower(?1)" : "name = ?1"));
    if (!st) return st.take_error();
    (*st)->bind(1, id_or_name);
    Result<bool> row = (*st)->step();
    if (!row) return row.take_error();
    if (!*row) return image_not_found(id_or_name);
    out = read_image(**st);
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

Result<std::vector<Image>> SqliteStore::list_images() {
  std::vector<Image> out;
  Status s = on_reader([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st =
        db.prepare(std::string("SELECT ") + kImageColumns + " FROM images ORDER BY created_at, id");
    if (!st) return st.take_error();
    while (true) {
      Result<bool> row = (*st)->step();
      if (!row) return row.take_error();
      if (!*row) break;
      out.push_back(read_image(**st));
    }
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

Status SqliteStore::delete_image(std::string_view id_or_name) {
  const bool by_id = is_uuid(id_or_name);
  return on_writer([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st =
        db.prepare(std::string("DELETE FROM images WHERE ") + (by_id ? "id = lower(?1)" : "name = ?1"));
    if (!st) return st.take_error();
    (*st)->bind(1, id_or_name);
    if (Status run = (*st)->run(); !run) return run;
    if (db.changes() == 0) return image_not_found(id_or_name);
    return ok_status();
  });
}

Result<Image> SqliteStore::set_image_public(std::string_view id_or_name, bool is_public) {
  Image out;
  const int64_t now = now_ms();
  Status s = on_writer([&](sql::Database& db) -> Status {
    const bool by_id = is_uuid(id_or_name);
    Result<sql::StatementRef> st = db.prepare(std::string("UPDATE images SET public = ?2, updated_at = ?3 WHERE ") +
                                              (by_id ? "id = lower(?1)" : "name = ?1"));
    if (!st) return st.take_error();
    (*st)->bind(1, id_or_name).bind(2, is_public).bind(3, now);
    if (Status run = (*st)->run(); !run) return run;
    if (db.changes() == 0) return image_not_found(id_or_name);
    return ok_status();
  });
  if (!s) return s.take_error();
  return get_image(id_or_name);
}

Result<Image> SqliteStore::update_image(const Image& image) {
  Image out;
  const int64_t now = now_ms();
  Status s = on_writer([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st = db.prepare(
        "UPDATE images SET state = ?2, path = ?3, last_error = ?4, updated_at = ?5, virtual_size = ?6, "
        "served_sha256 = ?7, served_size = ?8, served_path = ?9 WHERE id = ?1");
    if (!st) return st.take_error();
    (*st)->bind(1, image.id)
        .bind(2, image.state)
        .bind(3, image.path)
        .bind(4, image.last_error)
        .bind(5, now)
        .bind(6, image.virtual_size)
        .bind(7, image.served_sha256)
        .bind(8, image.served_size)
        .bind(9, image.served_path);
    if (Status run = (*st)->run(); !run) return run;
    if (db.changes() == 0) return image_not_found(image.id);
    Result<sql::StatementRef> rd =
        db.prepare(std::string("SELECT ") + kImageColumns + " FROM images WHERE id = ?1");
    if (!rd) return rd.take_error();
    (*rd)->bind(1, image.id);
    Result<bool> row = (*rd)->step();
    if (!row) return row.take_error();
    if (!*row) return image_not_found(image.id);
    out = read_image(**rd);
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

}  // namespace kiln
