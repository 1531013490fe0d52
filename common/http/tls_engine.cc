#include "common/http/tls_engine.h"

#include <openssl/bio.h>
#include <openssl/err.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>

namespace kiln::http {

namespace {

// The largest TLS record on the wire: 2^14 bytes of plaintext plus 256 of
// expansion (RFC 8446 5.2; TLS 1.2 allows 2048, which no cipher OpenSSL
// offers uses) and the 5-byte header. One socket read fills at most this.
constexpr std::size_t kInputSize = 16384 + 256 + 5;

int clamp_int(std::size_t n) { return static_cast<int>(std::min<std::size_t>(n, INT_MAX)); }

// One input buffer per thread, kept for the next operation: every read of
// every connection would otherwise allocate and free 16 KiB, a block glibc
// may hand back to the kernel and fault in again.
thread_local std::unique_ptr<char[]> spare_input;

std::unique_ptr<char[]> take_input_buffer() {
  if (spare_input) return std::move(spare_input);
  return std::make_unique<char[]>(kInputSize);
}

void give_back_input_buffer(std::unique_ptr<char[]> buffer) {
  if (!spare_input) spare_input = std::move(buffer);
}

}  // namespace

// The BIO's callbacks, which reach into the engine's buffers.
struct TlsEngineBio {
  static int write(BIO* bio, const char* data, int len) {
    BIO_clear_retry_flags(bio);
    if (len <= 0) return 0;
    static_cast<TlsEngine*>(BIO_get_data(bio))->out_.append(data, static_cast<std::size_t>(len));
    return len;
  }

  static int read(BIO* bio, char* data, int len) {
    BIO_clear_retry_flags(bio);
    auto* e = static_cast<TlsEngine*>(BIO_get_data(bio));
    const std::size_t available = e->in_end_ - e->in_begin_;
    if (available == 0) {
      BIO_set_retry_read(bio);
      return -1;
    }
    const std::size_t n = std::min(available, static_cast<std::size_t>(std::max(len, 0)));
    std::memcpy(data, e->in_.get() + e->in_begin_, n);
    e->in_begin_ += n;
    return static_cast<int>(n);
  }

  static long ctrl(BIO* bio, int cmd, long /*num*/, void* /*ptr*/) {
    auto* e = static_cast<TlsEngine*>(BIO_get_data(bio));
    switch (cmd) {
      case BIO_CTRL_FLUSH:
        return 1;
      case BIO_CTRL_PENDING:
        return static_cast<long>(e->in_end_ - e->in_begin_);
      case BIO_CTRL_WPENDING:
        return static_cast<long>(e->out_.size());
      default:
        return 0;  // no push/pop, no kTLS, no datagram controls
    }
  }

  static int create(BIO* bio) {
    BIO_set_init(bio, 1);
    return 1;
  }

  static const BIO_METHOD* method() {
    static BIO_METHOD* const m = [] {
      BIO_METHOD* made = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "kiln tls engine");
      if (made == nullptr) return made;
      BIO_meth_set_write(made, &TlsEngineBio::write);
      BIO_meth_set_read(made, &TlsEngineBio::read);
      BIO_meth_set_ctrl(made, &TlsEngineBio::ctrl);
      BIO_meth_set_create(made, &TlsEngineBio::create);
      return made;
    }();
    return m;
  }
};

TlsEngine::TlsEngine(SSL_CTX* ctx) {
  const BIO_METHOD* method = TlsEngineBio::method();
  if (method == nullptr) return;
  ssl_ = SSL_new(ctx);
  if (ssl_ == nullptr) return;
  BIO* bio = BIO_new(method);
  if (bio == nullptr) {
    SSL_free(ssl_);
    ssl_ = nullptr;
    return;
  }
  BIO_set_data(bio, this);
  SSL_set_bio(ssl_, bio, bio);  // one BIO both ways: the SSL takes the one reference
  SSL_set_mode(ssl_, SSL_MODE_RELEASE_BUFFERS);
  SSL_set_connect_state(ssl_);
}

TlsEngine::~TlsEngine() {
  if (ssl_ != nullptr) SSL_free(ssl_);
}

TlsEngine::Step TlsEngine::step(int ret, std::size_t bytes) {
  Step s;
  switch (SSL_get_error(ssl_, ret)) {
    case SSL_ERROR_NONE:
      s.bytes = bytes;
      return s;
    case SSL_ERROR_WANT_READ:
      s.want = Want::kInput;
      return s;
    case SSL_ERROR_WANT_WRITE:
      s.want = Want::kRetry;
      return s;
    case SSL_ERROR_ZERO_RETURN:
      s.ec = boost::asio::error::eof;
      return s;
    default:
      break;
  }
  const unsigned long err = ERR_get_error();
  if (err != 0) {
    s.ec = boost::system::error_code(static_cast<int>(err), boost::asio::error::get_ssl_category());
  } else {
    // SSL_ERROR_SYSCALL with nothing queued: the BIO never fails, so this is
    // OpenSSL seeing an end it did not expect.
    s.ec = boost::asio::ssl::error::unexpected_result;
  }
  ERR_clear_error();
  return s;
}

TlsEngine::Step TlsEngine::handshake() {
  ERR_clear_error();
  return step(SSL_do_handshake(ssl_), 0);
}

TlsEngine::Step TlsEngine::read(boost::asio::mutable_buffer into) {
  ERR_clear_error();
  std::size_t n = 0;
  const int ret = SSL_read_ex(ssl_, into.data(), static_cast<std::size_t>(clamp_int(into.size())), &n);
  return step(ret == 1 ? 1 : 0, n);
}

TlsEngine::Step TlsEngine::write(boost::asio::const_buffer from) {
  ERR_clear_error();
  std::size_t n = 0;
  const int ret = SSL_write_ex(ssl_, from.data(), static_cast<std::size_t>(clamp_int(from.size())), &n);
  return step(ret == 1 ? 1 : 0, n);
}

void TlsEngine::output_written() { out_.clear(); }

boost::asio::mutable_buffer TlsEngine::input_space() {
  // OpenSSL asks for input only once it has taken every byte it was given,
  // so the buffer is empty here and the read starts at its front.
  if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;
  if (!in_) in_ = take_input_buffer();
  return boost::asio::buffer(in_.get() + in_end_, kInputSize - in_end_);
}

void TlsEngine::input_received(std::size_t n) { in_end_ += std::min(n, kInputSize - in_end_); }

void TlsEngine::release_buffers() {
  if (in_ && in_begin_ == in_end_) {
    give_back_input_buffer(std::move(in_));
    in_begin_ = in_end_ = 0;
  }
  if (out_.empty()) std::string().swap(out_);
  // OpenSSL 3.0 keeps its 16 KiB read buffer after reading post-handshake
  // messages (a TLS 1.3 server's session tickets) despite
  // SSL_MODE_RELEASE_BUFFERS; this frees it when it holds nothing.
  if (!has_input()) (void)SSL_free_buffers(ssl_);
}

}  // namespace kiln::http
