#include "controller/store/pg/pg_conn.h"

#include <utility>

namespace kiln::db {

namespace {

pg::Params params_of(const Binds& binds) {
  pg::Params p;
  for (const Binds::Value& v : binds.values()) {
    std::visit(
        [&](const auto& x) {
          using V = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<V, std::monostate>) {
            p.add(std::nullopt);
          } else {
            p.add(x);
          }
        },
        v);
  }
  return p;
}

// Reads the rows one statement returned.
class PgCursor final : public Rows::Cursor {
 public:
  explicit PgCursor(pg::Rows rows) : rows_(std::move(rows)) {}
  Result<bool> next() override { return ++row_ < rows_.size(); }
  bool is_null(int col) const override { return rows_.is_null(row_, col); }
  std::string text(int col) const override { return rows_.text(row_, col); }
  int64_t int64(int col) const override { return rows_.int64(row_, col); }
  // A BOOLEAN column reads "t"/"f"; an integer expression (a count used
  // as a flag) reads as its value.
  bool boolean(int col) const override {
    const std::string t = rows_.text(row_, col);
    return t == "t" || (t != "f" && !t.empty() && rows_.int64(row_, col) != 0);
  }

 private:
  pg::Rows rows_;
  int row_ = -1;
};

}  // namespace

Result<Rows> PgConn::query(std::string_view sql, const Binds& binds) {
  Result<pg::Rows> r = conn_.exec(sql, params_of(binds));
  if (!r) return r.take_error();
  return Rows(std::make_unique<PgCursor>(std::move(*r)));
}

Result<int64_t> PgConn::exec(std::string_view sql, const Binds& binds) {
  Result<pg::Rows> r = conn_.exec(sql, params_of(binds));
  if (!r) return r.take_error();
  return r->affected();
}

}  // namespace kiln::db
