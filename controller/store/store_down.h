#pragma once
// Whether a store error means "the store cannot take this now, and will
// later": its database is unreachable (kUnavailable: a PostgreSQL outage or
// restart, SQLite's file locked) or its disk is full (kInsufficientStorage).
// What a running operation did and what a tenant is billed are written again,
// with back-off, on these rather than dropped (conductor.cc, the allocation
// engine); a request's own write answers 503 or 507 at once instead.

#include "common/error.h"

namespace kiln {

inline bool store_down(const Error& e) {
  return e.code == Code::kUnavailable || e.code == Code::kInsufficientStorage;
}

}  // namespace kiln
