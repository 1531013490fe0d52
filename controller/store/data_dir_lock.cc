#include "controller/store/data_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kiln {

Result<DataDirLock> DataDirLock::acquire(const std::string& data_dir) {
  const std::string path = data_dir + "/kiln.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Error(Code::kInternal, "cannot open " + path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    ::close(fd);
    if (err != EWOULDBLOCK) return Error(Code::kInternal, "cannot lock " + path + ": " + std::strerror(err));
    std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    return Error(Code::kUnavailable, "another kilnd" + (pid.empty() ? std::string() : " (pid " + pid + ")") +
                                         " is using " + data_dir + ": one kilnd per SQLite database");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    // The pid is only for the next one's message; the lock is what counts.
  }
  return DataDirLock(fd);
}

DataDirLock::~DataDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace kiln
