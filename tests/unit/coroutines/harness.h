#pragma once
// Shared pieces of the coroutine pattern tests (tests/unit/coroutines): each
// test file writes one pattern that docs/coroutines.md once forbade because
// GCC 12 miscompiled it, and checks at run time, under ASan/UBSan, that the
// compiler in use gets it right.
//
// Tracked counts its live instances and owns a heap string (longer than the
// small-string buffer), so a copy destroyed twice is a double free that ASan
// reports and a lost destructor shows as live() != 0.

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded

#include <atomic>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace kiln::coro_test {

namespace asio = boost::asio;

class Tracked {
 public:
  explicit Tracked(std::string text) : text_(std::move(text)) { ++count(); }
  Tracked(const Tracked& o) : text_(o.text_) { ++count(); }
  Tracked(Tracked&& o) noexcept : text_(std::move(o.text_)) { ++count(); }
  Tracked& operator=(const Tracked&) = default;
  Tracked& operator=(Tracked&&) = default;
  ~Tracked() { --count(); }

  const std::string& text() const { return text_; }
  static int live() { return count().load(); }

 private:
  static std::atomic<int>& count() {
    static std::atomic<int> n{0};
    return n;
  }
  std::string text_;
};

// A string too long for the small-string buffer: its copies own heap memory.
inline std::string long_text(const std::string& tag) { return tag + std::string(48, '.') + tag; }

// Suspends the calling coroutine and resumes it from the executor's queue, so
// every pattern below really crosses a suspension point.
inline asio::awaitable<void> hop() {
  auto ex = co_await asio::this_coro::executor;
  co_await asio::post(ex, asio::use_awaitable);
}

// Runs `count` copies of a coroutine concurrently on one io_context (their
// frames interleave, as kilnd's do) and returns their results in order.
template <typename T>
std::vector<T> run_all(int count, const std::function<asio::awaitable<T>(int)>& make) {
  asio::io_context io;
  std::vector<std::optional<T>> out(count);
  std::exception_ptr failure;
  for (int i = 0; i < count; ++i) {
    asio::co_spawn(io, make(i), [&out, &failure, i](std::exception_ptr e, T value) {
      if (e) failure = e;
      else out[i].emplace(std::move(value));
    });
  }
  io.run();
  if (failure) std::rethrow_exception(failure);
  std::vector<T> values;
  for (auto& v : out) values.push_back(std::move(v.value()));
  return values;
}

template <typename T>
T run_one(const std::function<asio::awaitable<T>(int)>& make) {
  return std::move(run_all<T>(1, make).front());
}

}  // namespace kiln::coro_test
