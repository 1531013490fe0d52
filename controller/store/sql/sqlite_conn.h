#pragma once
// db::Conn over one SQLite connection (controller/store/sqlite.h): the
// connection's statement cache serves every statement, parameters are bound
// by their "$N" names. Borrows the Database; used by one thread, for the
// length of one store call (see sql/conn.h).

#include "controller/store/sql/conn.h"
#include "controller/store/sqlite.h"

namespace kiln::db {

class SqliteConn final : public Conn {
 public:
  explicit SqliteConn(sql::Database& db) : db_(db) {}
  Result<Rows> query(std::string_view sql, const Binds& binds = {}) override;
  Result<int64_t> exec(std::string_view sql, const Binds& binds = {}) override;
  const Dialect& dialect() const override { return sqlite_dialect(); }
  sql::Database& database() const { return db_; }

 private:
  Result<sql::StatementRef> prepared(std::string_view sql, const Binds& binds);
  sql::Database& db_;
};

}  // namespace kiln::db
