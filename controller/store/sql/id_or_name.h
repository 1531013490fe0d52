#pragma once
// Looking a row up by the key an API caller gave: ids are UUIDs (stored
// lowercase, matched in any case), anything else is a name. Internal to the
// store's flows (controller/store/sql).

#include <string>
#include <string_view>

#include "common/ids.h"
#include "controller/store/sql/conn.h"
#include "controller/store/store_rules.h"

namespace kiln::db {

// " WHERE id = $1" for a UUID, else " WHERE name = $1"; binds the key as $1
// (so `b` must be empty).
inline std::string where_id_or_name(std::string_view id_or_name, Binds& b) {
  if (is_uuid(id_or_name)) {
    b.add(store_rules::lower(id_or_name));
    return " WHERE id = $1";
  }
  b.add(id_or_name);
  return " WHERE name = $1";
}

}  // namespace kiln::db
