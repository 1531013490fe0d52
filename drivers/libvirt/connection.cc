#include "drivers/libvirt/connection.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <cstring>
#include <thread>

namespace kiln::libvirt {
namespace {

// libvirt prints errors to stderr by default; kilnd reports them itself.
void quiet_errors(void*, virErrorPtr) {}

struct Creds {
  const std::string* username;
  const std::string* password;
};

int auth_callback(virConnectCredentialPtr cred, unsigned int ncred, void* opaque) {
  const Creds* c = static_cast<const Creds*>(opaque);
  for (unsigned i = 0; i < ncred; ++i) {
    const std::string* value = nullptr;
    if (cred[i].type == VIR_CRED_AUTHNAME) value = c->username;
    else if (cred[i].type == VIR_CRED_PASSPHRASE || cred[i].type == VIR_CRED_NOECHOPROMPT) value = c->password;
    if (!value || value->empty()) return -1;
    cred[i].result = strdup(value->c_str());
    if (!cred[i].result) return -1;
    cred[i].resultlen = static_cast<unsigned>(value->size());
  }
  return 0;
}

}  // namespace

void start_event_loop() {
  static std::once_flag once;
  std::call_once(once, [] {
    virSetErrorFunc(nullptr, quiet_errors);
    if (virEventRegisterDefaultImpl() < 0) return;
    std::thread([] {
      for (;;)
        if (virEventRunDefaultImpl() < 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }).detach();
  });
}

std::string last_error(const std::string& what) {
  const char* m = virGetLastErrorMessage();
  return what + ": " + (m ? m : "unknown libvirt error");
}

HostConnection::HostConnection(std::string uri, std::string username, std::string password,
                               std::function<void()> on_drop)
    : uri_(std::move(uri)), shown_uri_(display_uri(uri_)), username_(std::move(username)),
      password_(std::move(password)), on_drop_(std::move(on_drop)),
      dropped_(std::make_shared<DropState>()) {
  start_event_loop();
}

HostConnection::~HostConnection() { close(); }

void HostConnection::on_close(_virConnect*, int reason, void* opaque) {
  auto* state = static_cast<std::shared_ptr<DropState>*>(opaque);
  (void)reason;
  (*state)->dropped.store(true);
  if ((*state)->on_drop) (*state)->on_drop();
}

Status HostConnection::open() {
  if (is_alive()) return ok_status();
  close();
  if (uri_has_password(uri_)) {
    std::string why = "cannot open " + shown_uri_ +
                      ": the URI holds a password; give it in the host's password field instead";
    std::lock_guard<std::mutex> l(mu_);
    reason_ = why;
    return Error(Code::kInvalidArgument, why);
  }
  Creds creds{&username_, &password_};
  int types[] = {VIR_CRED_AUTHNAME, VIR_CRED_PASSPHRASE, VIR_CRED_NOECHOPROMPT};
  virConnectAuth auth{types, sizeof(types) / sizeof(types[0]), auth_callback, &creds};
  virConnectPtr c = virConnectOpenAuth(uri_.c_str(), &auth, 0);
  if (!c) {
    // libvirt's message may quote the URI or what the transport printed.
    std::string why = scrub(last_error("cannot open " + shown_uri_), password_);
    std::lock_guard<std::mutex> l(mu_);
    reason_ = why;
    return Error(Code::kUnavailable, why);
  }
  // Keep-alive is refused by drivers without a remote peer (test:///, qemu:///
  // opened in-process); that is fine: they cannot drop.
  (void)virConnectSetKeepAlive(c, 5, 3);
  auto flag = std::make_shared<DropState>();
  flag->on_drop = on_drop_;
  // The callback's opaque is owned by the connection's deleter, not handed to
  // libvirt's free callback: some drivers (test:///) accept the registration
  // but never call the free callback, which leaked it.
  auto* opaque = new std::shared_ptr<DropState>(flag);
  const bool registered = virConnectRegisterCloseCallback(c, &HostConnection::on_close, opaque, nullptr) == 0;
  ConnPtr conn(c, [opaque, registered](_virConnect* p) {
    if (registered) virConnectUnregisterCloseCallback(p, &HostConnection::on_close);
    virConnectClose(p);
    delete opaque;
  });
  std::lock_guard<std::mutex> l(mu_);
  conn_ = std::move(conn);
  dropped_ = flag;
  reason_.clear();
  return ok_status();
}

bool HostConnection::is_alive() const {
  ConnPtr c;
  std::shared_ptr<DropState> dropped;
  {
    std::lock_guard<std::mutex> l(mu_);
    c = conn_;
    dropped = dropped_;
  }
  if (!c || dropped->dropped.load()) return false;
  return virConnectIsAlive(c.get()) == 1;
}

Result<ConnPtr> HostConnection::get() const {
  std::lock_guard<std::mutex> l(mu_);
  if (!conn_ || dropped_->dropped.load())
    return Error(Code::kUnavailable, "host " + shown_uri_ + " is not connected" + (reason_.empty() ? "" : ": " + reason_));
  return conn_;
}

void HostConnection::close() {
  ConnPtr old;
  std::lock_guard<std::mutex> l(mu_);
  old = std::move(conn_);
  conn_.reset();
  if (reason_.empty()) reason_ = "connection closed";
}

std::string HostConnection::down_reason() const {
  std::lock_guard<std::mutex> l(mu_);
  if (conn_ && !dropped_->dropped.load()) return "";
  if (conn_ && dropped_->dropped.load()) return "connection to " + shown_uri_ + " dropped (keep-alive or peer closed it)";
  return reason_;
}

}  // namespace kiln::libvirt
