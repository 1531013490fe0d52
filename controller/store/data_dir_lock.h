#pragma once
// DataDirLock: one kilnd per SQLite database. SQLite is the embedded,
// single-instance store: two kilnd on one --data-dir would both believe they
// are the only conductor and take over each other's operations, and
// `kilnd migrate-store` must not copy a database a kilnd is still writing.
// Whoever uses DIR/kiln.db holds an exclusive flock(2) on DIR/kiln.lock for
// as long as it runs; the kernel releases it when the process ends, however
// it ends (kill -9 included), so a crash never leaves a stale lock.
//
// The lock file holds the holder's pid, for the message the next one prints.
// Not used with PostgreSQL, where several kilnd sharing the database is the
// point (docs/scale-out.md).
//
// Errors: kUnavailable "another kilnd (pid N) is using DIR" when held;
// kInternal when the file cannot be created.

#include <string>

#include "common/result.h"

namespace kiln {

class DataDirLock {
 public:
  static Result<DataDirLock> acquire(const std::string& data_dir);
  DataDirLock(DataDirLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  DataDirLock& operator=(DataDirLock&&) = delete;
  DataDirLock(const DataDirLock&) = delete;
  ~DataDirLock();

 private:
  explicit DataDirLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace kiln
