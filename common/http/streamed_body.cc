// ChunkWriter and StreamedBody (streamed_body.h).

#include "common/http/streamed_body.h"

#include <boost/asio/write.hpp>

namespace kiln::http::detail {

template <class Stream>
asio::awaitable<bool> ChunkWriter<Stream>::write(std::string_view data) {
  if (!ok_) co_return false;
  if (data.empty()) co_return true;  // a zero-size chunk would end the body
  beast::get_lowest_layer(stream_).expires_after(timeout_);
  beast::error_code ec;
  co_await asio::async_write(stream_, bhttp::make_chunk(asio::buffer(data.data(), data.size())),
                             redirect(ec));
  if (ec) ok_ = false;
  co_return ok_;
}

template <class Stream>
asio::awaitable<Result<std::size_t>> StreamedBody<Stream>::read_some(char* data, std::size_t size) {
  if (failed_) co_return Error(Code::kUnavailable, "the request body cannot be read any more");
  const std::size_t none = 0;
  if (parser_.is_done()) co_return none;
  if (size == 0) co_return Error(Code::kInternal, "read_some needs room for at least one byte");
  beast::tcp_stream& lowest = beast::get_lowest_layer(stream_);
  beast::error_code ec;
  if (!started_) {
    started_ = true;
    if (expect_continue_) {
      bhttp::response<bhttp::empty_body> go_on{bhttp::status::continue_, parser_.get().version()};
      lowest.expires_after(opt_.write_timeout);
      co_await bhttp::async_write(stream_, go_on, redirect(ec));
      if (ec) {
        failed_ = true;
        co_return Error(Code::kUnavailable, "the client went away before sending the body");
      }
    }
    lowest.expires_after(opt_.read_timeout);
  }
  while (true) {
    parser_.get().body().data = data;
    parser_.get().body().size = size;
    parser_.get().body().more = true;
    co_await bhttp::async_read_some(stream_, buffer_, parser_, redirect(ec));
    if (ec == bhttp::error::need_buffer) ec = {};
    const std::size_t got = size - parser_.get().body().size;
    parser_.get().body().data = nullptr;
    if (ec) {
      failed_ = true;
      co_return failure(ec);
    }
    if (got == 0 && !parser_.is_done()) continue;  // a chunk header, no data yet
    // The deadline moves on only after a stretch of real progress.
    since_armed_ += got;
    if (since_armed_ >= kBodyProgressBytes) {
      since_armed_ = 0;
      lowest.expires_after(opt_.read_timeout);
    }
    co_return got;
  }
}

template <class Stream>
std::optional<uint64_t> StreamedBody<Stream>::content_length() const {
  boost::optional<std::uint64_t> n = parser_.content_length();
  if (!n) return std::nullopt;
  return *n;
}

template <class Stream>
Error StreamedBody<Stream>::failure(const beast::error_code& ec) const {
  if (ec == bhttp::error::body_limit) return Error(Code::kPayloadTooLarge, "the request body is too large");
  if (ec == beast::error::timeout)
    return Error(Code::kTimeout, "the request body arrived too slowly (read timeout)");
  if (is_disconnect(ec)) return Error(Code::kUnavailable, "the client went away before the body was complete");
  return Error(Code::kInvalidArgument, "malformed request body: " + ec.message());
}

template class ChunkWriter<PlainStream>;
template class ChunkWriter<TlsStream>;
template class StreamedBody<PlainStream>;
template class StreamedBody<TlsStream>;

}  // namespace kiln::http::detail
