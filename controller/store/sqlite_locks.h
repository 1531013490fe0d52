#pragma once
// SqliteStore's connection leases, shared by its sqlite_*.cc files (internal
// to controller/store): WriterLock holds the one writer connection (and
// remembers the owning thread, so a write from inside a write is an error
// rather than a deadlock); ReaderLease borrows a reader connection and gives
// it back when destroyed.

#include <mutex>
#include <thread>
#include <utility>

#include "controller/store/sqlite_store.h"

namespace kiln {

class SqliteStore::WriterLock {
 public:
  explicit WriterLock(SqliteStore* s) : s_(s), lock_(s->writer_mu_) {
    s_->writer_owner_.store(std::this_thread::get_id());
  }
  WriterLock(WriterLock&& o) noexcept : s_(o.s_), lock_(std::move(o.lock_)) { o.s_ = nullptr; }
  WriterLock& operator=(WriterLock&&) = delete;
  ~WriterLock() {
    if (s_ != nullptr) s_->writer_owner_.store(std::thread::id());
  }
  sql::Database& db() const { return *s_->writer_; }

 private:
  SqliteStore* s_;
  std::unique_lock<std::mutex> lock_;
};

class SqliteStore::ReaderLease {
 public:
  explicit ReaderLease(SqliteStore* s) : s_(s) {
    std::unique_lock<std::mutex> lock(s_->readers_mu_);
    s_->reader_free_.wait(lock, [&] { return !s_->free_readers_.empty(); });
    db_ = s_->free_readers_.back();
    s_->free_readers_.pop_back();
  }
  ReaderLease(const ReaderLease&) = delete;
  ReaderLease& operator=(const ReaderLease&) = delete;
  ~ReaderLease() {
    {
      std::lock_guard<std::mutex> lock(s_->readers_mu_);
      s_->free_readers_.push_back(db_);
    }
    s_->reader_free_.notify_one();
  }
  sql::Database& db() const { return *db_; }

 private:
  SqliteStore* s_;
  sql::Database* db_ = nullptr;
};

}  // namespace kiln
