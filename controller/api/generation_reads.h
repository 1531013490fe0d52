#pragma once
// GenerationReads: concurrent requests share reads of the database's write
// generation (NodeStore::database_generation, one round trip to PostgreSQL)
// without any of them getting an older value than its own read would give.
//
// The rule: a caller is answered only by a read that STARTED after the caller
// asked, so the value reflects every commit that finished before the request
// arrived (what a read of its own would see; read_cache.h relies on it). At
// most one read runs at a time. Callers that ask while it runs cannot use it
// (it may have started before a commit they must see), so they wait for the
// next one and share it, however many they are. Under load a read answers
// every request that arrived during the one before it, and the database sees
// one statement per round trip instead of one per request.
//
// No task of its own: the first caller of a batch runs the read inside its
// own coroutine and hands the value to the others; when it is done, it wakes
// one caller of the next batch, if any, to run that batch's read. A leader
// whose coroutine is destroyed mid-read (its io_context torn down) answers
// its batch with an error instead, so nobody waits on a read that will never
// finish; an error means "nothing may be taken from memory" to the caller.
//
// Threading: read() may be called from any executor, any number at once;
// each caller resumes on its own executor. The object must outlive every
// read() in progress. The read function runs on the BlockingPool.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>  // before Asio (docs/coroutines.md)
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/blocking_pool.h"
#include "common/result.h"
#include "controller/store/store.h"

namespace kiln::api {

class GenerationReads {
 public:
  using ReadFn = std::function<Result<WriteGeneration>()>;

  GenerationReads(BlockingPool& pool, ReadFn read) : pool_(pool), read_(std::move(read)) {}
  GenerationReads(const GenerationReads&) = delete;
  GenerationReads& operator=(const GenerationReads&) = delete;

  // A generation read by a statement that started after this call began.
  asio::awaitable<Result<WriteGeneration>> read();

  // Statements run so far, and calls of read() so far (for tests and
  // metrics: their ratio is how many requests one round trip served).
  uint64_t statements() const;
  uint64_t callers() const;

 private:
  struct Batch;

  // Runs the read for `batch` (this caller leads it), answers it, and passes
  // the lead to the next batch.
  asio::awaitable<Result<WriteGeneration>> lead(std::shared_ptr<Batch> batch);
  // Answers `batch` with `value` and wakes its waiters; promotes the next
  // batch (waking one of its waiters to lead) or marks nothing running.
  void finish(const std::shared_ptr<Batch>& batch, Result<WriteGeneration> value);
  // Suspends until `batch` is answered or this caller is woken to lead it.
  asio::awaitable<void> park(const std::shared_ptr<Batch>& batch);

  BlockingPool& pool_;
  ReadFn read_;
  mutable std::mutex mu_;
  bool running_ = false;          // a batch's read is in progress (or its leader is being woken)
  std::shared_ptr<Batch> next_;   // callers who asked while it ran
  uint64_t statements_ = 0;
  uint64_t callers_ = 0;
};

}  // namespace kiln::api
