#pragma once
// The store kilnd runs on: SQLite in its data dir (the embedded default, one
// kilnd), or PostgreSQL when --database names one (several kilnd sharing it,
// docs/scale-out.md). Neither is migrated here.
//
// Errors: as open_sqlite_store / PgStore::open (kUnavailable when the
// PostgreSQL server cannot be reached; the URL, which may hold a password, is
// never in the message).

#include <memory>
#include <string>

#include "common/clock.h"
#include "common/result.h"
#include "controller/store/store.h"

namespace kiln {

struct StoreLocation {
  std::string database;  // empty: SQLite at data_dir/kiln.db; else a postgresql:// URL
  std::string data_dir;
  // PostgreSQL connections kept open: the blocking pool's threads plus the
  // few calls made outside it (start-up, the event listener's reads).
  int connections = 8;
  const Clock* clock = nullptr;
};

Result<std::unique_ptr<NodeStore>> open_store(const StoreLocation& where);

}  // namespace kiln
