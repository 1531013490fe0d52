#pragma once
// HostConnection: kilnd's one libvirt connection to one hypervisor host.
//
// Opening uses virConnectOpenAuth with the host's username/password (the
// callback answers AUTHNAME and PASSPHRASE; SSH keys and TLS certificates are
// configured outside kilnd). Once open, libvirt keep-alives (5 s, 3 missed)
// detect a dead peer and the close callback marks the connection dropped; a
// caller then sees is_alive() false and the HostRegistry reconnects with
// backoff. Keep-alives need libvirt's event loop: start_event_loop() runs the
// default implementation on one thread for the whole process (idempotent).
//
// Every method blocks (libvirt is synchronous): call them on a BlockingPool,
// never on an I/O thread. Thread-safe: the virConnectPtr is shared by
// reference count, so close() never frees a connection another thread is
// using; libvirt itself allows concurrent calls on one connection.

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "common/result.h"

struct _virConnect;

namespace kiln::libvirt {

// Registers libvirt's default event loop and runs it on a background thread.
void start_event_loop();

// libvirt's last error message, prefixed with `what`.
std::string last_error(const std::string& what);

using ConnPtr = std::shared_ptr<_virConnect>;

class HostConnection {
 public:
  HostConnection(std::string uri, std::string username, std::string password);
  ~HostConnection();
  HostConnection(const HostConnection&) = delete;
  HostConnection& operator=(const HostConnection&) = delete;

  // Opens the connection unless it is open and alive. kUnavailable carrying
  // libvirt's message when it cannot be opened.
  Status open();
  // Open and alive (keep-alive answered, close callback not fired).
  bool is_alive() const;
  // The open connection, or kUnavailable (with the last open failure) when
  // it is closed or dropped. Never opens: reconnecting is the registry's job,
  // with backoff.
  Result<ConnPtr> get() const;
  // Drops the connection (as a dead peer would); the next open() reconnects.
  void close();

  const std::string& uri() const { return uri_; }
  // Why the connection is down ("" while alive).
  std::string down_reason() const;

 private:
  static void on_close(_virConnect* conn, int reason, void* opaque);

  const std::string uri_, username_, password_;
  mutable std::mutex mu_;
  ConnPtr conn_;                 // guarded by mu_
  std::string reason_;           // guarded by mu_
  std::shared_ptr<std::atomic<bool>> dropped_;  // set by the close callback
};

}  // namespace kiln::libvirt
