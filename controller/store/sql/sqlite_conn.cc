#include "controller/store/sql/sqlite_conn.h"

#include <sqlite3.h>

#include <string>
#include <utility>

namespace kiln::db {

namespace {

class SqliteCursor final : public Rows::Cursor {
 public:
  explicit SqliteCursor(sql::StatementRef st) : st_(std::move(st)) {}
  Result<bool> next() override { return st_->step(); }
  bool is_null(int col) const override { return st_->column_is_null(col); }
  std::string text(int col) const override { return st_->column_text(col); }
  int64_t int64(int col) const override { return st_->column_int64(col); }
  bool boolean(int col) const override { return st_->column_int64(col) != 0; }

 private:
  sql::StatementRef st_;
};

}  // namespace

Result<sql::StatementRef> SqliteConn::prepared(std::string_view sql, const Binds& binds) {
  Result<sql::StatementRef> st = db_.prepare(std::string(sql));
  if (!st) return st.take_error();
  sqlite3_stmt* raw = (*st)->raw();
  const int expected = sqlite3_bind_parameter_count(raw);
  const auto& values = binds.values();
  if (static_cast<std::size_t>(expected) != values.size())
    return Error(Code::kInternal, "sqlite: statement takes " + std::to_string(expected) + " parameters, given " +
                                      std::to_string(values.size()) + " (" + std::string(sql.substr(0, 60)) + ")");
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::string name = "$" + std::to_string(i + 1);
    const int index = sqlite3_bind_parameter_index(raw, name.c_str());
    if (index == 0)
      return Error(Code::kInternal, "sqlite: statement has no parameter " + name + " (" +
                                        std::string(sql.substr(0, 60)) + ")");
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::monostate>) {
            (*st)->bind(index, std::nullopt);
          } else if constexpr (std::is_same_v<V, bool>) {
            (*st)->bind(index, static_cast<int64_t>(v ? 1 : 0));
          } else {
            (*st)->bind(index, v);
          }
        },
        values[i]);
  }
  return st;
}

Result<Rows> SqliteConn::query(std::string_view sql, const Binds& binds) {
  Result<sql::StatementRef> st = prepared(sql, binds);
  if (!st) return st.take_error();
  return Rows(std::make_unique<SqliteCursor>(std::move(*st)));
}

Result<int64_t> SqliteConn::exec(std::string_view sql, const Binds& binds) {
  Result<sql::StatementRef> st = prepared(sql, binds);
  if (!st) return st.take_error();
  if (Status s = (*st)->run(); !s) return s.take_error();
  return db_.changes();
}

}  // namespace kiln::db
