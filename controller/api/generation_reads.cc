#include "controller/api/generation_reads.h"

#include <cassert>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/parked_handler.h"

namespace kiln::api {

// Callers answered by one read. Guarded by GenerationReads::mu_.
struct GenerationReads::Batch {
  std::optional<Result<WriteGeneration>> value;  // set once, by its leader
  bool promoted = false;     // its turn has come: the next to park (or the woken one) leads it
  bool lead_taken = false;   // someone leads it
  std::vector<std::unique_ptr<ParkedHandler>> waiters;
};

uint64_t GenerationReads::statements() const {
  std::lock_guard<std::mutex> l(mu_);
  return statements_;
}

uint64_t GenerationReads::callers() const {
  std::lock_guard<std::mutex> l(mu_);
  return callers_;
}

asio::awaitable<Result<WriteGeneration>> GenerationReads::read() {
  std::shared_ptr<Batch> batch;
  bool leads = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    ++callers_;
    if (!running_) {
      running_ = leads = true;
      batch = std::make_shared<Batch>();
      batch->promoted = batch->lead_taken = true;
    } else {
      // The batch whose read has not started yet: its read will start
      // after this call, so this caller may share it.
      if (!next_) next_ = std::make_shared<Batch>();
      batch = next_;
    }
  }
  if (!leads) {
    co_await park(batch);
    std::lock_guard<std::mutex> l(mu_);
    if (batch->value) co_return *batch->value;
    // Woken without a value: this caller leads the batch.
  }
  co_return co_await lead(std::move(batch));
}

asio::awaitable<void> GenerationReads::park(const std::shared_ptr<Batch>& batch) {
  auto initiation = [this, &batch](auto handler) {
    std::unique_lock<std::mutex> l(mu_);
    bool now = batch->value.has_value();
    if (!now && batch->promoted && !batch->lead_taken) {
      batch->lead_taken = true;  // its turn came before anyone parked: this caller leads
      now = true;
    }
    if (now) {
      l.unlock();
      auto ex = asio::get_associated_executor(handler);
      asio::post(ex, std::move(handler));
      return;
    }
    batch->waiters.push_back(park_handler(std::move(handler)));
  };
  co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>(initiation, asio::use_awaitable);
}

asio::awaitable<Result<WriteGeneration>> GenerationReads::lead(std::shared_ptr<Batch> batch) {
  // Answers the batch even when this frame is destroyed mid-read, so no
  // caller waits for a read nobody runs.
  struct Answer {
    GenerationReads* self;
    std::shared_ptr<Batch> batch;
    ~Answer() {
      if (batch) self->finish(batch, Error(Code::kUnavailable, "the read of the write generation was abandoned"));
    }
  } answer{this, batch};
  {
    std::lock_guard<std::mutex> l(mu_);
    if (next_ == batch) next_ = nullptr;  // started: later callers must wait for the next read
    ++statements_;
  }
  Result<WriteGeneration> value = co_await pool_.run([this] { return read_(); });
  answer.batch = nullptr;
  finish(batch, value);
  co_return value;
}

void GenerationReads::finish(const std::shared_ptr<Batch>& batch, Result<WriteGeneration> value) {
  std::vector<std::unique_ptr<ParkedHandler>> answered;
  std::unique_ptr<ParkedHandler> leader;
  {
    std::lock_guard<std::mutex> l(mu_);
    assert(!batch->value);
    batch->value = std::move(value);
    answered = std::move(batch->waiters);
    if (next_) {
      // Its callers all asked after this read started: its read runs now,
      // led by one of them (or by the first to park, if none has yet).
      next_->promoted = true;
      if (!next_->waiters.empty()) {
        next_->lead_taken = true;
        leader = std::move(next_->waiters.front());
        next_->waiters.erase(next_->waiters.begin());
      }
    } else {
      running_ = false;
    }
  }
  // Outside the lock: each resumes on its own executor.
  for (std::unique_ptr<ParkedHandler>& w : answered) w->resume();
  if (leader) leader->resume();
}

}  // namespace kiln::api
