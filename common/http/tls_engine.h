#pragma once
// TlsEngine: one client SSL object and the bytes between it and the socket,
// kept only while they carry something (private to kiln_http; used by
// TlsClientStream).
//
// OpenSSL reads and writes a memory BIO of Kiln's own:
//  - input: bytes read from the socket wait here until OpenSSL takes them. The
//    buffer is taken for a socket read (one TLS record at most) and given
//    back once OpenSSL has taken every byte;
//  - output: the records OpenSSL produced, until they have been written to the
//    socket; then freed.
// With SSL_MODE_RELEASE_BUFFERS OpenSSL also frees its own record buffers
// between records. So a connection that is not moving bytes holds the SSL
// object, its session and keys: about 20 KiB, where asio::ssl::stream keeps
// four 17 KiB buffers for the connection's whole life.
//
// Each SSL call returns a Step: done (with a byte count or an error), or
// wants more input from the socket. Output produced by the call is in
// output() whatever the step says, and must be written before the next call
// waits for input (the peer may be waiting for it).
//
// Errors: OpenSSL's own, in asio's SSL category (so ec.message() is
// OpenSSL's reason, e.g. "certificate verify failed"); asio::error::eof for a
// close_notify from the peer.
//
// Threading: not thread-safe; one operation at a time (the owner's).

#include <openssl/ssl.h>

#include <cstddef>
#include <memory>
#include <string>

#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>

namespace kiln::http {

class TlsEngine {
 public:
  // A client SSL for `ctx` (which the SSL references; the caller keeps no
  // duty). ssl() is null when OpenSSL could not allocate one.
  explicit TlsEngine(SSL_CTX* ctx);
  ~TlsEngine();
  TlsEngine(const TlsEngine&) = delete;
  TlsEngine& operator=(const TlsEngine&) = delete;

  SSL* ssl() const { return ssl_; }

  enum class Want {
    kDone,   // finished: `bytes` moved, or `ec` set
    kInput,  // needs bytes from the socket, then the same call again
    kRetry,  // needs its output written, then the same call again
  };
  struct Step {
    Want want = Want::kDone;
    std::size_t bytes = 0;
    boost::system::error_code ec;
  };

  Step handshake();
  Step read(boost::asio::mutable_buffer into);
  // All of `from` or nothing (no partial writes): a kInput or kRetry step
  // must be followed by the same call with the same buffer.
  Step write(boost::asio::const_buffer from);

  bool has_output() const { return !out_.empty(); }
  boost::asio::const_buffer output() const { return boost::asio::buffer(out_); }
  void output_written();  // every byte of output() reached the socket

  // Room for one socket read; then input_received(n) with what was read.
  boost::asio::mutable_buffer input_space();
  void input_received(std::size_t n);
  // Bytes from the socket that OpenSSL has not taken yet.
  bool has_input() const { return in_end_ > in_begin_; }

  // Frees the input and output buffers and OpenSSL's record buffers, those
  // that hold nothing (all of them at the end of an operation that took
  // every byte it read).
  void release_buffers();

 private:
  friend struct TlsEngineBio;
  Step step(int ret, std::size_t bytes);

  SSL* ssl_ = nullptr;
  std::unique_ptr<char[]> in_;
  std::size_t in_begin_ = 0;
  std::size_t in_end_ = 0;
  std::string out_;
};

}  // namespace kiln::http
