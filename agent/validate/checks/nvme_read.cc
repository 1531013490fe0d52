#include "agent/validate/checks/nvme_read.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>
#include <vector>

namespace kiln::agent {

namespace fs = std::filesystem;

namespace {

// Whole NVMe namespaces ("nvme0n1"), not the per-controller paths the native
// multipath driver also lists ("nvme0c0n1").
std::vector<std::string> nvme_namespaces(const std::string& sys_root) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(fs::path(sys_root) / "block", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.rfind("nvme", 0) != 0) continue;
    std::size_t i = 4;
    while (i < n.size() && std::isdigit(static_cast<unsigned char>(n[i]))) ++i;
    if (i < n.size() && n[i] == 'n') names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

struct ReadOutcome {
  std::uint64_t bytes = 0;
  double seconds = 0;
  std::string error;       // set when a read failed
  bool refused_direct = false;
};

ReadOutcome timed_read(int fd, std::uint64_t limit, char* buf, std::size_t chunk) {
  ReadOutcome o;
  const auto start = std::chrono::steady_clock::now();
  while (o.bytes < limit) {
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, limit - o.bytes));
    // O_DIRECT needs block-multiple sizes: round the tail up, count what came back.
    const std::size_t ask = (want + 4095) / 4096 * 4096;
    const ssize_t n = read(fd, buf, ask);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EINVAL && o.bytes == 0) o.refused_direct = true;
      o.error = std::strerror(errno);
      break;
    }
    if (n == 0) break;
    o.bytes += std::min<std::uint64_t>(static_cast<std::uint64_t>(n), limit - o.bytes);
    if (static_cast<std::size_t>(n) < ask) break;  // end of file
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return o;
}

}  // namespace

CheckResult check_nvme_read(const ValidationProfile& profile, const std::string& sys_root,
                            const std::string& path_override) {
  CheckResult r;
  r.name = "nvme_read";
  r.unit = "GB/s";
  r.threshold = profile.nvme_gbps_min ? nlohmann::json{{"min", *profile.nvme_gbps_min}} : nlohmann::json();
  r.status = CheckStatus::kPass;

  const auto namespaces = nvme_namespaces(sys_root);
  r.details["nvme_namespaces"] = namespaces;
  std::string target = !path_override.empty() ? path_override : profile.nvme_path;
  if (target.empty() && !namespaces.empty()) target = "/dev/" + namespaces.front();
  if (static_cast<int>(namespaces.size()) < profile.nvme_devices)
    add_failure(r, "expected " + std::to_string(profile.nvme_devices) + " NVMe devices, found " +
                       std::to_string(namespaces.size()));
  if (target.empty()) {
    if (r.status == CheckStatus::kPass) {
      r.status = CheckStatus::kSkip;
      r.details["reason"] = "no NVMe device and the profile expects none";
    }
    return r;
  }
  r.details["target"] = target;

  constexpr std::size_t kChunk = 4 * 1024 * 1024;
  void* raw = nullptr;
  if (posix_memalign(&raw, 4096, kChunk) != 0) {
    add_failure(r, "cannot allocate an aligned read buffer");
    return r;
  }
  std::unique_ptr<void, FreeDeleter> buf(raw);
  const std::uint64_t limit = static_cast<std::uint64_t>(profile.nvme_read_mib) * 1024 * 1024;

  bool direct = true;
  int fd = open(target.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0 && errno == EINVAL) {
    direct = false;
    fd = open(target.c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (fd < 0) {
    add_failure(r, "cannot open " + target + ": " + std::strerror(errno));
    return r;
  }
  ReadOutcome o;
  if (direct) {
    o = timed_read(fd, limit, static_cast<char*>(buf.get()), kChunk);
    if (o.refused_direct) {
      // Some filesystems accept O_DIRECT at open and refuse it on read.
      close(fd);
      direct = false;
      fd = open(target.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        add_failure(r, "cannot open " + target + ": " + std::strerror(errno));
        return r;
      }
    }
  }
  if (!direct) {
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // best effort: start from a cold cache
    o = timed_read(fd, limit, static_cast<char*>(buf.get()), kChunk);
  }
  close(fd);

  r.details["direct"] = direct;
  r.details["bytes"] = o.bytes;
  r.details["seconds"] = o.seconds;
  r.details["block_bytes"] = kChunk;
  if (!o.error.empty()) {
    add_failure(r, "reading " + target + " failed after " + std::to_string(o.bytes) + " bytes: " + o.error);
    return r;
  }
  if (o.bytes == 0) {
    add_failure(r, target + " is empty: nothing to read");
    return r;
  }
  const double gbps = o.seconds > 0 ? static_cast<double>(o.bytes) / o.seconds / 1e9 : 0;
  r.value = gbps;
  if (o.bytes < limit)
    add_warning(r, "read " + std::to_string(o.bytes) + " bytes, less than the " +
                       std::to_string(profile.nvme_read_mib) + " MiB asked (end of " + target + ")");
  if (!direct) {
    if (r.status == CheckStatus::kPass) {
      r.status = CheckStatus::kSkip;
      r.details["reason"] = "the filesystem of " + target +
                            " refused O_DIRECT; a buffered read was measured but it reflects the page cache, "
                            "not the device";
    }
    return r;
  }
  if (profile.nvme_gbps_min && gbps < *profile.nvme_gbps_min) {
    char b[160];
    std::snprintf(b, sizeof b, "read %.2f GB/s from %s, expected at least %.2f GB/s", gbps, target.c_str(),
                  *profile.nvme_gbps_min);
    add_failure(r, b);
  }
  return r;
}

}  // namespace kiln::agent
