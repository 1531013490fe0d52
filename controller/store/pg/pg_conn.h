#pragma once
// db::Conn over one libpq connection (controller/store/pg/connection.h):
// parameters travel as text apart from the SQL ($1..$n). Borrows the
// Connection; used by one thread, for the length of one store call (see
// controller/store/sql/conn.h).

#include "controller/store/pg/connection.h"
#include "controller/store/sql/conn.h"

namespace kiln::db {

class PgConn final : public Conn {
 public:
  explicit PgConn(pg::Connection& conn) : conn_(conn) {}
  Result<Rows> query(std::string_view sql, const Binds& binds = {}) override;
  Result<int64_t> exec(std::string_view sql, const Binds& binds = {}) override;
  const Dialect& dialect() const override { return pg_dialect(); }
  pg::Connection& connection() const { return conn_; }

 private:
  pg::Connection& conn_;
};

}  // namespace kiln::db
