#pragma once
// The kernel log since boot and the NVIDIA XID events in it.
//
// The NVIDIA driver reports GPU faults as "NVRM: Xid (PCI:0000:3b:00): 79,
// pid=..., GPU has fallen off the bus." lines. They reach the kernel ring
// buffer, which /dev/kmsg replays from boot (records "pri,seq,usec,flags;text")
// and `dmesg` prints ("[  12.345678] text"). Both forms are read.

#include <string>
#include <string_view>
#include <vector>

#include "agent/validate/checks/sysfs.h"
#include "common/result.h"

namespace kiln::agent {

struct XidEvent {
  std::string pci;       // "0000:3b:00" as the driver prints it
  int code = 0;          // 79
  std::string message;   // the rest of the line after "79, "
};

// Every XID line in `log` (kmsg records, dmesg text or plain lines), in order.
// Lines that mention Xid but do not carry a number are ignored.
std::vector<XidEvent> parse_xid_events(std::string_view log);

// A one-line meaning for the XIDs operators meet most, "" for others.
const char* xid_meaning(int code);

// Reads the kernel log: paths.kmsg without blocking until its end, or, when
// that cannot be opened (dmesg_restrict, no root), the output of `dmesg`.
// kUnavailable when neither works (the message says both reasons).
Result<std::string> read_kernel_log(const HostPaths& paths);

}  // namespace kiln::agent
