#include "controller/store/open_store.h"

#include "controller/store/pg/pg_store.h"

namespace kiln {

Result<std::unique_ptr<NodeStore>> open_store(const StoreLocation& where) {
  if (where.database.empty()) return open_sqlite_store({.path = where.data_dir + "/kiln.db", .clock = where.clock});
  PgStoreOptions o;
  o.conninfo = where.database;
  o.connections = where.connections;
  o.clock = where.clock;
  Result<std::unique_ptr<PgStore>> pg = PgStore::open(o);
  if (!pg) return pg.take_error();
  return std::unique_ptr<NodeStore>(std::move(*pg));
}

}  // namespace kiln
