#include "controller/boot/hosts_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>

#include "controller/boot/dnsmasq_config.h"

namespace kiln::boot {
namespace {

Error io_error(const std::string& what, const std::string& path) {
  return Error(Code::kInternal, what + " " + path + ": " + std::strerror(errno));
}

// The file's content, or nullopt when it cannot be read.
std::optional<std::string> read_small(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[512];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || out.size() > 4096) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

Status write_atomically(const std::string& dir, const std::string& name, const std::string& content) {
  const std::string tmp = dir + "/.tmp-" + name;
  const std::string path = dir + "/" + name;
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("cannot create", tmp);
  std::size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Error e = io_error("cannot write", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return e;
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Error e = io_error("cannot rename into", path);
    ::unlink(tmp.c_str());
    return e;
  }
  return ok_status();
}

}  // namespace

Status HostsDir::ensure() {
  if (::mkdir(dir_.c_str(), 0755) != 0 && errno != EEXIST) return io_error("cannot create", dir_);
  return ok_status();
}

Result<HostsSync> HostsDir::sync(const std::set<std::string>& pxe_macs, const std::set<std::string>& dhcp_only) {
  std::map<std::string, bool> macs;  // mac -> pxe
  for (const std::string& m : dhcp_only) macs[m] = false;
  for (const std::string& m : pxe_macs) macs[m] = true;
  if (Status s = ensure(); !s) return s.take_error();
  std::map<std::string, bool> present;  // file name -> seen in `macs`
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return io_error("cannot list", dir_);
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    present.emplace(std::move(name), false);
  }
  ::closedir(d);

  HostsSync out;
  for (const auto& known : macs) {
    const std::string& mac = known.first;
    const std::string name = hosts_file_name(mac);
    const std::string want = hosts_file_content(mac, known.second);
    auto it = present.find(name);
    if (it != present.end()) {
      it->second = true;
      std::optional<std::string> have = read_small(dir_ + "/" + name);
      if (have && *have == want) continue;
      if (Status s = write_atomically(dir_, name, want); !s) return s.take_error();
      ++out.rewritten;
      continue;
    }
    if (Status s = write_atomically(dir_, name, want); !s) return s.take_error();
    ++out.added;
  }
  for (const auto& entry : present) {
    if (entry.second) continue;
    const std::string path = dir_ + "/" + entry.first;
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return io_error("cannot remove", path);
    // Leftover dot-files of an interrupted write were never read by dnsmasq.
    if (entry.first.rfind('.', 0) != 0) ++out.removed;
  }
  return out;
}

}  // namespace kiln::boot
