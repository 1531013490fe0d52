#include "agent/validate/checks/kernel_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/validate/checks/subprocess.h"

namespace kiln::agent {

std::vector<XidEvent> parse_xid_events(std::string_view log) {
  std::vector<XidEvent> out;
  constexpr std::string_view kMark = "NVRM: Xid (";
  std::size_t pos = 0;
  while ((pos = log.find(kMark, pos)) != std::string_view::npos) {
    std::size_t eol = log.find('\n', pos);
    if (eol == std::string_view::npos) eol = log.size();
    std::string_view line = log.substr(pos + kMark.size(), eol - pos - kMark.size());
    pos = eol;
    const std::size_t close = line.find(')');
    if (close == std::string_view::npos) continue;
    std::string_view where = line.substr(0, close);
    if (where.substr(0, 4) == "PCI:") where.remove_prefix(4);
    std::string_view rest = line.substr(close + 1);
    if (rest.substr(0, 1) == ":") rest.remove_prefix(1);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    int code = 0;
    std::size_t digits = 0;
    while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9' && digits < 6)
      code = code * 10 + (rest[digits++] - '0');
    if (digits == 0) continue;
    rest.remove_prefix(digits);
    if (rest.substr(0, 1) == ",") rest.remove_prefix(1);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    while (!rest.empty() && (rest.back() == '\r' || rest.back() == ' ')) rest.remove_suffix(1);
    out.push_back(XidEvent{std::string(where), code, std::string(rest)});
  }
  return out;
}

const char* xid_meaning(int code) {
  switch (code) {
    case 13: return "graphics engine exception (often the application)";
    case 31: return "GPU memory page fault (often the application)";
    case 43: return "GPU stopped processing (often the application)";
    case 45: return "preemptive cleanup after an earlier fault";
    case 48: return "double-bit ECC error";
    case 61: case 62: return "internal micro-controller halt";
    case 63: case 64: return "ECC page retirement or row remapping event";
    case 74: return "NVLink error";
    case 79: return "GPU has fallen off the bus";
    case 92: return "high single-bit ECC error rate";
    case 94: return "contained ECC error";
    case 95: return "uncontained ECC error";
    case 119: case 120: return "GSP firmware error";
    case 140: return "unrecovered ECC error";
    case 154: return "GPU recovery action required";
    default: return "";
  }
}

Result<std::string> read_kernel_log(const HostPaths& paths) {
  std::string kmsg_error;
  const int fd = open(paths.kmsg.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd >= 0) {
    std::string text;
    struct stat st {};
    // /dev/kmsg returns one record per read; a regular file (a saved log) is
    // read in chunks that may split lines.
    const bool records = fstat(fd, &st) == 0 && S_ISCHR(st.st_mode);
    char buf[8192];
    while (true) {
      const ssize_t n = read(fd, buf, sizeof buf);
      if (n > 0) {
        text.append(buf, static_cast<std::size_t>(n));
        // Each /dev/kmsg read returns one record without its newline
        // guarantee across records; keep records on their own lines.
        if (records && text.back() != '\n') text.push_back('\n');
        if (text.size() > 256 * 1024 * 1024) break;
        continue;
      }
      if (n == 0 || errno == EAGAIN) break;  // end of file / end of the ring buffer
      if (errno == EINTR) continue;
      if (errno == EPIPE) continue;          // records overwritten while reading: go on from the next
      kmsg_error = paths.kmsg + ": " + std::strerror(errno);
      break;
    }
    close(fd);
    if (kmsg_error.empty()) return text;
  } else {
    kmsg_error = paths.kmsg + ": " + std::strerror(errno);
  }
  if (!paths.dmesg_fallback) return Error(Code::kUnavailable, "cannot read the kernel log: " + kmsg_error);
  ProcessSpec spec;
  spec.argv = {"dmesg"};
  spec.timeout = std::chrono::seconds(30);
  auto path = find_executable("dmesg", "/usr/bin:/bin:/usr/sbin:/sbin");
  if (!path) return Error(Code::kUnavailable, "cannot read the kernel log: " + kmsg_error + "; dmesg not installed");
  spec.argv[0] = *path;
  auto out = run_process(spec);
  if (!out) return Error(Code::kUnavailable, "cannot read the kernel log: " + kmsg_error + "; " + out.error().message);
  if (out->exit_code != 0) {
    std::string err = out->err.substr(0, 200);
    while (!err.empty() && (err.back() == '\n')) err.pop_back();
    return Error(Code::kUnavailable, "cannot read the kernel log: " + kmsg_error + "; dmesg: " + err);
  }
  return std::move(out->out);
}

}  // namespace kiln::agent
