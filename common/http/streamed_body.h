#pragma once
// Internal to HttpServer: bodies that are not held whole in memory.
//
//   ChunkWriter   the StreamWriter a streaming Reply writes to: one HTTP chunk
//                 per write(), each with the write deadline.
//   StreamedBody  the BodyReader of a request ServerOptions::streamed_body
//                 claimed: read on the handler's demand straight into its
//                 buffer (buffer_body parser), with the deadlines and limits
//                 BodyReader states (server.h).
//
// Ownership: both borrow the session's stream (and StreamedBody its read
// buffer, parser and options); they live on the session's stack for one
// exchange and must not outlive it.
// Threading: used only from the session's coroutine, on its strand.
// Errors: ChunkWriter::write answers false once the peer is gone (and stays
// false); StreamedBody::read_some returns the Error codes BodyReader lists,
// and after one of them the connection cannot carry another request.
//
// Defined in streamed_body.cc for PlainStream and TlsStream only.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "common/http/server_stream.h"

namespace kiln::http::detail {

template <class Stream>
class ChunkWriter final : public StreamWriter {
 public:
  ChunkWriter(Stream& stream, std::chrono::seconds timeout) : stream_(stream), timeout_(timeout) {}

  asio::awaitable<bool> write(std::string_view data) override;
  // False once a write failed: the body was cut short.
  bool ok() const { return ok_; }

 private:
  Stream& stream_;
  std::chrono::seconds timeout_;
  bool ok_ = true;
};

template <class Stream>
class StreamedBody final : public BodyReader {
 public:
  using Parser = bhttp::request_parser<bhttp::buffer_body>;

  // `expect_continue`: the request asked for "100 Continue", sent by the
  // first read_some().
  StreamedBody(Stream& stream, beast::flat_buffer& buffer, Parser& parser, const ServerOptions& opt,
               bool expect_continue)
      : stream_(stream), buffer_(buffer), parser_(parser), opt_(opt), expect_continue_(expect_continue) {}

  asio::awaitable<Result<std::size_t>> read_some(char* data, std::size_t size) override;
  std::optional<uint64_t> content_length() const override;

  // Whether the connection can carry another request after the reply.
  bool complete() const { return !failed_ && parser_.is_done(); }

 private:
  Error failure(const beast::error_code& ec) const;

  Stream& stream_;
  beast::flat_buffer& buffer_;
  Parser& parser_;
  const ServerOptions& opt_;
  bool expect_continue_;
  bool started_ = false;
  bool failed_ = false;
  std::size_t since_armed_ = 0;
};

extern template class ChunkWriter<PlainStream>;
extern template class ChunkWriter<TlsStream>;
extern template class StreamedBody<PlainStream>;
extern template class StreamedBody<TlsStream>;

}  // namespace kiln::http::detail
