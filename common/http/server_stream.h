#pragma once
// Internal to HttpServer (server_core, session, file_body, streamed_body):
// the two transports a session runs on, and the error vocabulary they share.
// Nothing here owns anything or holds state; all of it is safe on any thread.

#include <chrono>
#include <type_traits>
#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "common/http/server.h"

namespace kiln::http::detail {

using tcp = asio::ip::tcp;
namespace ssl = asio::ssl;
using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;
using SteadyClock = std::chrono::steady_clock;

template <class S>
constexpr bool kIsTls = std::is_same_v<S, TlsStream>;

// co_await completion token that reports the error in `ec` instead of throwing.
inline auto redirect(beast::error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); }

// Errors that mean "the peer went away or a deadline fired": nothing to answer.
inline bool is_disconnect(const beast::error_code& ec) {
  return ec == beast::error::timeout || ec == asio::error::eof ||
         ec == asio::error::operation_aborted || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::error::bad_descriptor ||
         ec == asio::error::not_connected || ec == bhttp::error::end_of_stream ||
         ec == bhttp::error::partial_message || ec == asio::ssl::error::stream_truncated;
}

}  // namespace kiln::http::detail
