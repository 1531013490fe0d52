#pragma once
// TlsClientStream: the client end of a TLS connection over a beast::tcp_stream
// that holds no buffers while idle (private to kiln_http; HttpClient's TLS
// connections).
//
// Why not asio::ssl::stream: it gives each connection four 17 KiB buffers
// for the connection's whole life, and OpenSSL keeps two more: about 80 KiB
// of buffers per connection. A client that kept a connection to each of
// 10,000 BMCs between power sweeps held over 800 MiB. Here the buffers live
// in a TlsEngine only while an operation moves bytes (see tls_engine.h): an
// idle connection is its socket, its SSL object and its session.
//
// An AsyncReadStream and AsyncWriteStream, so Beast's HTTP algorithms run on
// it. Every byte goes through next_layer()'s async_read_some and async_write,
// so its deadline (expires_at) bounds TLS operations too: beast::error::timeout.
//
// Errors: OpenSSL's in asio's SSL category (a failed certificate check among
// them); asio::error::eof for the server's close_notify; asio::ssl::error::
// stream_truncated when the connection ends without one (as asio's stream);
// the tcp_stream's own otherwise.
//
// Threading: one operation at a time, never a read beside a write (HTTP/1.1
// exchanges alternate them). Completion handlers run on their associated
// executor, never inside the initiating call.

#include <cstddef>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include <boost/asio/async_result.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <boost/beast/core/tcp_stream.hpp>

#include "common/http/tls_engine.h"

namespace kiln::http {

class TlsClientStream {
 public:
  using next_layer_type = boost::beast::tcp_stream;
  using executor_type = next_layer_type::executor_type;

  // A client SSL from `ctx` over a connected `tcp`. Check native_handle():
  // null when OpenSSL could not allocate one.
  TlsClientStream(next_layer_type&& tcp, SSL_CTX* ctx) : tcp_(std::move(tcp)), engine_(ctx) {}

  executor_type get_executor() { return tcp_.get_executor(); }
  next_layer_type& next_layer() { return tcp_; }
  SSL* native_handle() const { return engine_.ssl(); }
  // Bytes received and not yet decrypted or read (a connection put aside
  // with some is not at a message boundary).
  bool has_buffered_input() const { return engine_.has_input() || SSL_has_pending(engine_.ssl()) == 1; }

  template <class Token>
  auto async_handshake(Token&& token) {
    return run<void(boost::system::error_code)>(Handshake{}, std::forward<Token>(token));
  }

  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    return run<void(boost::system::error_code, std::size_t)>(Read{first_buffer<boost::asio::mutable_buffer>(buffers)},
                                                             std::forward<Token>(token));
  }

  template <class ConstBuffers, class Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    return run<void(boost::system::error_code, std::size_t)>(Write<ConstBuffers>{buffers},
                                                             std::forward<Token>(token));
  }

 private:
  using Step = TlsEngine::Step;
  using Want = TlsEngine::Want;

  // What one operation asks of the engine, called again after each wait.
  struct Handshake {
    Step operator()(TlsEngine& e) { return e.handshake(); }
  };
  struct Read {
    boost::asio::mutable_buffer into;
    Step operator()(TlsEngine& e) { return into.size() == 0 ? Step{} : e.read(into); }
  };
  // Encrypts up to kMaxWrite bytes of the sequence in one go, so a request's
  // header and body leave in one socket write.
  template <class ConstBuffers>
  struct Write {
    static constexpr std::size_t kMaxWrite = 64 * 1024;
    boost::beast::buffers_suffix<ConstBuffers> rest;
    std::size_t total = 0;
    explicit Write(const ConstBuffers& b) : rest(b) {}
    Step operator()(TlsEngine& e) {
      while (total < kMaxWrite) {
        const auto next = first_buffer<boost::asio::const_buffer>(rest);
        if (next.size() == 0) break;
        Step s = e.write(boost::asio::buffer(next, kMaxWrite - total));
        if (s.ec || s.want != Want::kDone) return s;
        rest.consume(s.bytes);
        total += s.bytes;
      }
      return Step{Want::kDone, total, {}};
    }
  };

  // The first non-empty buffer of a sequence; empty when there is none.
  template <class Buffer, class Buffers>
  static Buffer first_buffer(const Buffers& buffers) {
    for (auto b : boost::beast::buffers_range_ref(buffers)) {
      if (b.size() > 0) return Buffer(b);
    }
    return {};
  }

  // One operation: call the engine, write what it produced, read what it
  // wants, call it again, until it is done.
  template <class Action, bool kBytes>
  class Op {
   public:
    Op(TlsClientStream& s, Action a) : s_(s), action_(std::move(a)) {}

    template <class Self>
    void operator()(Self& self, boost::system::error_code ec = {}, std::size_t n = 0) {
      TlsEngine& e = s_.engine_;
      switch (phase_) {
        case Phase::kStart:
          break;
        case Phase::kWriting:
          if (ec) return finish(self, ec, 0);
          e.output_written();
          break;
        case Phase::kReading:
          if (ec == boost::asio::error::eof) ec = boost::asio::ssl::error::stream_truncated;
          if (ec) return finish(self, ec, 0);
          e.input_received(n);
          break;
        case Phase::kPosted:
          return finish(self, step_->ec, step_->bytes);
      }
      for (int retries = 0;;) {
        if (!step_) step_ = action_(e);
        if (e.has_output()) {
          phase_ = Phase::kWriting;
          boost::asio::async_write(s_.tcp_, e.output(), std::move(self));
          return;
        }
        switch (step_->want) {
          case Want::kInput:
            step_.reset();
            phase_ = Phase::kReading;
            s_.tcp_.async_read_some(e.input_space(), std::move(self));
            return;
          case Want::kRetry:
            // Output is always taken whole, so a second retry in a row is
            // OpenSSL asking for something this BIO cannot give.
            step_.reset();
            if (++retries > 1) {
              step_ = Step{Want::kDone, 0, boost::asio::ssl::error::unexpected_result};
            }
            continue;
          case Want::kDone:
            if (phase_ == Phase::kStart) {
              // Done without waiting on the socket (bytes already decrypted):
              // complete from the executor, not inside the initiating call.
              phase_ = Phase::kPosted;
              boost::asio::post(std::move(self));
              return;
            }
            return finish(self, step_->ec, step_->bytes);
        }
      }
    }

   private:
    enum class Phase { kStart, kWriting, kReading, kPosted };

    template <class Self>
    void finish(Self& self, boost::system::error_code ec, std::size_t n) {
      s_.engine_.release_buffers();
      if constexpr (kBytes) {
        self.complete(ec, n);
      } else {
        self.complete(ec);
      }
    }

    TlsClientStream& s_;
    Action action_;
    Phase phase_ = Phase::kStart;
    std::optional<Step> step_;
  };

  template <class Signature, class Action, class Token>
  auto run(Action action, Token&& token) {
    constexpr bool kBytes = !std::is_same_v<Signature, void(boost::system::error_code)>;
    return boost::asio::async_compose<Token, Signature>(Op<Action, kBytes>(*this, std::move(action)),
                                                        token, tcp_);
  }

  next_layer_type tcp_;
  TlsEngine engine_;
};

}  // namespace kiln::http
