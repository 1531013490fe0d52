#pragma once
// HostsDir: the dhcp-hostsdir kilnd keeps for dnsmasq, one file per known
// PXE MAC (dnsmasq_config.h says what a file holds).
//
// dnsmasq reads new and changed files by itself (inotify) but keeps entries
// of removed or rewritten files until SIGHUP, so sync() reports whether a
// reload is needed. Files are written to a dot-file first and renamed into
// place (dnsmasq ignores dot-files), so dnsmasq never reads half a file.
//
// Blocking file I/O: call from a BlockingPool or at start-up. Not
// thread-safe; the supervisor calls it from one coroutine.

#include <set>
#include <string>

#include "common/result.h"

namespace kiln::boot {

struct HostsSync {
  int added = 0;
  int removed = 0;
  int rewritten = 0;  // a file whose content was not what it should be
  bool needs_reload() const { return removed > 0 || rewritten > 0; }
};

class HostsDir {
 public:
  explicit HostsDir(std::string dir) : dir_(std::move(dir)) {}

  // Creates the directory (0755) when absent.
  Status ensure();
  // Makes the directory hold exactly one file per MAC of `macs` (lowercase,
  // colon-separated), removing every other file. Errors: kInternal naming the
  // file that could not be written or removed (what was done before stays).
  // `dhcp_only` MACs (ports with pxe=false) get a file too, tagged nopxe.
  Result<HostsSync> sync(const std::set<std::string>& macs, const std::set<std::string>& dhcp_only = {});

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace kiln::boot
