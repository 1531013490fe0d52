#pragma once
// run_sync's body (a template, so it lives in a header).

#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <optional>
#include <utility>

#include <boost/asio/co_spawn.hpp>

namespace kiln::cli {

template <typename T>
T run_sync(boost::asio::io_context& io, boost::asio::awaitable<T> aw) {
  std::optional<T> out;
  std::exception_ptr failure;
  boost::asio::co_spawn(io, std::move(aw), [&](std::exception_ptr e, T value) {
    failure = e;
    if (!e) out.emplace(std::move(value));
  });
  io.restart();
  io.run();
  if (failure) std::rethrow_exception(failure);
  return std::move(*out);
}

}  // namespace kiln::cli
