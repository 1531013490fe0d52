#include "agent/deploy/block_device.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace kiln::agent {

namespace {

Error errno_error(const std::string& what, int e) {
  const Code code = e == ENOENT ? Code::kNotFound : (e == EACCES || e == EPERM) ? Code::kPermissionDenied : Code::kInternal;
  return Error(code, what + ": " + std::strerror(e));
}

}  // namespace

void AlignedBuffer::Free::operator()(char* p) const { std::free(p); }

AlignedBuffer::AlignedBuffer(std::size_t size) : size_(size) {
  void* p = nullptr;
  if (posix_memalign(&p, BlockDevice::kAlignment, std::max<std::size_t>(size, 1)) != 0) throw std::bad_alloc();
  std::memset(p, 0, size);
  data_.reset(static_cast<char*>(p));
}

Result<BlockDevice> BlockDevice::open(const std::string& path, bool writable) {
  BlockDevice d;
  d.path_ = path;
  const int mode = (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC;
  d.fd_ = ::open(path.c_str(), mode);
  if (d.fd_ < 0) return errno_error("open " + path, errno);
  struct stat st {};
  if (::fstat(d.fd_, &st) != 0) return errno_error("stat " + path, errno);
  if (S_ISBLK(st.st_mode)) {
    d.block_ = true;
    std::uint64_t bytes = 0;
    if (::ioctl(d.fd_, BLKGETSIZE64, &bytes) != 0) return errno_error("BLKGETSIZE64 " + path, errno);
    d.size_ = bytes;
    int lbs = 0;
    if (::ioctl(d.fd_, BLKSSZGET, &lbs) == 0 && lbs > 0) d.logical_block_size_ = static_cast<unsigned>(lbs);
  } else if (S_ISREG(st.st_mode)) {
    d.size_ = static_cast<std::uint64_t>(st.st_size);
  } else {
    return Error(Code::kInvalidArgument, path + " is neither a block device nor a regular file");
  }
  // tmpfs and some FUSE filesystems refuse O_DIRECT: fall back to buffered I/O.
  d.direct_fd_ = ::open(path.c_str(), mode | O_DIRECT);
  return d;
}

BlockDevice::BlockDevice(BlockDevice&& o) noexcept { *this = std::move(o); }

BlockDevice& BlockDevice::operator=(BlockDevice&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    if (direct_fd_ >= 0) ::close(direct_fd_);
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    direct_fd_ = std::exchange(o.direct_fd_, -1);
    size_ = o.size_;
    logical_block_size_ = o.logical_block_size_;
    block_ = o.block_;
  }
  return *this;
}

BlockDevice::~BlockDevice() {
  if (fd_ >= 0) ::close(fd_);
  if (direct_fd_ >= 0) ::close(direct_fd_);
}

bool BlockDevice::aligned(std::uint64_t offset, const void* data, std::size_t n) const {
  const std::uint64_t a = std::max<std::uint64_t>(logical_block_size_, 512);
  return direct_fd_ >= 0 && offset % a == 0 && n % a == 0 && reinterpret_cast<std::uintptr_t>(data) % kAlignment == 0;
}

Status BlockDevice::write_at(std::uint64_t offset, const char* data, std::size_t n) {
  bool direct = aligned(offset, data, n);
  while (n > 0) {
    const ssize_t w = ::pwrite(direct ? direct_fd_ : fd_, data, n, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      if (direct && errno == EINVAL) {  // the device refused this direct write: retry buffered
        direct = false;
        continue;
      }
      return errno_error("write " + path_ + " at " + std::to_string(offset), errno);
    }
    if (w == 0) return Error(Code::kInternal, "write " + path_ + ": no progress (device full?)");
    data += w;
    offset += static_cast<std::uint64_t>(w);
    n -= static_cast<std::size_t>(w);
    if (direct && !aligned(offset, data, n)) direct = false;
  }
  return ok_status();
}

Status BlockDevice::read_at(std::uint64_t offset, char* data, std::size_t n) {
  bool direct = aligned(offset, data, n);
  while (n > 0) {
    const ssize_t r = ::pread(direct ? direct_fd_ : fd_, data, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      if (direct && errno == EINVAL) {
        direct = false;
        continue;
      }
      return errno_error("read " + path_ + " at " + std::to_string(offset), errno);
    }
    if (r == 0) return Error(Code::kInternal, "read " + path_ + ": unexpected end at " + std::to_string(offset));
    data += r;
    offset += static_cast<std::uint64_t>(r);
    n -= static_cast<std::size_t>(r);
    if (direct && !aligned(offset, data, n)) direct = false;
  }
  return ok_status();
}

Status BlockDevice::zero_range(std::uint64_t offset, std::uint64_t n) {
  static constexpr std::size_t kChunk = 4 * 1024 * 1024;
  AlignedBuffer zeros(static_cast<std::size_t>(std::min<std::uint64_t>(n, kChunk)));
  while (n > 0) {
    const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(n, zeros.size()));
    if (auto s = write_at(offset, zeros.data(), take); !s) return s;
    offset += take;
    n -= take;
  }
  return ok_status();
}

Result<bool> BlockDevice::discard(std::uint64_t offset, std::uint64_t n) {
  if (!block_ || n == 0) return false;
  std::uint64_t range[2] = {offset, n};
  if (::ioctl(fd_, BLKDISCARD, &range) == 0) return true;
  const int e = errno;
  if (e == EOPNOTSUPP || e == ENOTTY || e == EINVAL || e == ENOSYS) return false;
  return errno_error("BLKDISCARD " + path_, e);
}

Status BlockDevice::sync() {
  for (int fd : {fd_, direct_fd_})
    if (fd >= 0 && ::fsync(fd) != 0) return errno_error("fsync " + path_, errno);
  return ok_status();
}

void BlockDevice::drop_cache() {
  if (block_) ::ioctl(fd_, BLKFLSBUF, 0);
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED);
}

}  // namespace kiln::agent
