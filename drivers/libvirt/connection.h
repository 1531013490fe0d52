#pragma once
// HostConnection: kilnd's one libvirt connection to one hypervisor host.
//
// Opening uses virConnectOpenAuth with the host's username/password (the
// callback answers AUTHNAME and PASSPHRASE; SSH keys and TLS certificates are
// configured outside kilnd). Once open, libvirt keep-alives (5 s, 3 missed)
// detect a dead peer and the close callback marks the connection dropped
// and calls `on_drop`; a caller then sees is_alive() false and the
// HostRegistry, woken by on_drop, reconnects with backoff. Keep-alives need libvirt's event loop: start_event_loop() runs the
// default implementation on one thread for the whole process (idempotent).
//
// Credentials: the password reaches libvirt only through the auth callback.
// A URI carrying one in its userinfo (qemu+ssh://user:pw@host/...) is never
// opened: libvirt would put it in the ssh child's argv and echo it in its
// error messages. Every message this class returns or keeps names the host by
// display_uri() and has the password scrubbed out, so callers may log it.
//
// Every method blocks (libvirt is synchronous): call them on a thread meant
// for blocking calls, never on an I/O thread. open() can block for as long as
// the peer keeps the socket open without answering (libvirt has no connect
// deadline): the HostRegistry bounds it from outside. Thread-safe: the virConnectPtr is shared by
// reference count, so close() never frees a connection another thread is
// using; libvirt itself allows concurrent calls on one connection.

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "common/result.h"
#include "drivers/libvirt/uri.h"  // uri_has_password, display_uri, scrub

struct _virConnect;

namespace kiln::libvirt {

// Registers libvirt's default event loop and runs it on a background thread.
void start_event_loop();

// libvirt's last error message, prefixed with `what`.
std::string last_error(const std::string& what);

using ConnPtr = std::shared_ptr<_virConnect>;

class HostConnection {
 public:
  // `on_drop` (may be empty) is called on libvirt's event-loop thread each
  // time an open connection drops (keep-alive missed, peer closed): keep it
  // quick and thread-safe, and valid for as long as this object lives.
  HostConnection(std::string uri, std::string username, std::string password,
                 std::function<void()> on_drop = {});
  ~HostConnection();
  HostConnection(const HostConnection&) = delete;
  HostConnection& operator=(const HostConnection&) = delete;

  // Opens the connection unless it is open and alive. kUnavailable carrying
  // libvirt's message (scrubbed) when it cannot be opened; kInvalidArgument,
  // without calling libvirt, when the URI holds a password.
  Status open();
  // Open and alive (keep-alive answered, close callback not fired).
  bool is_alive() const;
  // The open connection, or kUnavailable (with the last open failure) when
  // it is closed or dropped. Never opens: reconnecting is the registry's job,
  // with backoff.
  Result<ConnPtr> get() const;
  // Drops the connection (as a dead peer would); the next open() reconnects.
  void close();

  // The URI as given (may hold a password only if the caller ignored the
  // rule above; never log it: use display_uri()).
  const std::string& uri() const { return uri_; }
  // Why the connection is down ("" while alive).
  std::string down_reason() const;

 private:
  static void on_close(_virConnect* conn, int reason, void* opaque);

  // What the close callback of one open connection touches (owned by that
  // connection's deleter).
  struct DropState {
    std::atomic<bool> dropped{false};
    std::function<void()> on_drop;
  };

  const std::string uri_, shown_uri_, username_, password_;
  const std::function<void()> on_drop_;
  mutable std::mutex mu_;
  ConnPtr conn_;                 // guarded by mu_
  std::string reason_;           // guarded by mu_
  std::shared_ptr<DropState> dropped_;  // set by the close callback
};

}  // namespace kiln::libvirt
