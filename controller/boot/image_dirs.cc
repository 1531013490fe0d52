#include "controller/boot/image_dirs.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace kiln::boot {
namespace {

std::string without_trailing_slash(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

// `path` relative to `root` when it lies lexically under it; "" otherwise.
std::string relative_to(const std::string& root, const std::string& path) {
  if (root.empty() || path.size() <= root.size() + 1) return "";
  if (path.compare(0, root.size(), root) != 0 || path[root.size()] != '/') return "";
  return path.substr(root.size() + 1);
}

}  // namespace

Result<std::shared_ptr<ImageDirs>> ImageDirs::open(std::vector<std::string> sources, std::string own) {
  std::shared_ptr<ImageDirs> d(new ImageDirs());
  own = without_trailing_slash(std::move(own));
  if (::mkdir(own.c_str(), 0700) != 0 && errno != EEXIST)
    return Error::invalid("--data-dir", "cannot create " + own + ": " + std::strerror(errno));
  for (std::string& s : sources) d->source_paths_.push_back(without_trailing_slash(std::move(s)));
  d->own_path_ = own;
  std::vector<std::string> all = d->source_paths_;
  all.push_back(own);
  for (const std::string& p : all) {
    if (p.empty() || p.front() != '/')
      return Error::invalid("--image-dir", p + ": must be an absolute directory path");
    Root r;
    r.path = p;
    r.fd = ::open(p.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (r.fd < 0) return Error::invalid("--image-dir", p + ": " + std::strerror(errno));
    char buf[PATH_MAX];
    if (::realpath(p.c_str(), buf) != nullptr) r.real = buf;
    d->roots_.push_back(std::move(r));
  }
  return d;
}

ImageDirs::~ImageDirs() {
  for (Root& r : roots_)
    if (r.fd >= 0) ::close(r.fd);
}

Result<std::shared_ptr<http::OpenFile>> ImageDirs::open_in(const std::vector<const Root*>& roots,
                                                           const std::string& path) const {
  const Error outside = Error(Code::kInvalidArgument, kOutsideImageDirs);
  if (path.empty() || path.front() != '/') return outside;
  for (const Root* r : roots) {
    std::string rel = relative_to(r->path, path);
    if (rel.empty()) rel = relative_to(r->real, path);
    if (rel.empty()) continue;
    open_how how{};
    how.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    const int fd = static_cast<int>(::syscall(SYS_openat2, r->fd, rel.c_str(), &how, sizeof how));
    if (fd < 0) {
      const int e = errno;
      if (e == ENOENT || e == ENOTDIR) return Error(Code::kInvalidArgument, "no such file in the image directory");
      if (e == EACCES || e == EPERM) return Error(Code::kInvalidArgument, "not readable by kilnd");
      if (e == ENOSYS) return Error(Code::kInternal, "openat2 is not available (Linux 5.6 or later is needed)");
      // EXDEV / ELOOP: resolution left the directory (.., a symlink out).
      return outside;
    }
    // O_NONBLOCK only kept open() of a FIFO from blocking; reads are regular.
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    Result<std::shared_ptr<http::OpenFile>> file = http::OpenFile::adopt(fd);
    if (!file) return Error(Code::kInvalidArgument, "not a regular file");
    return file;
  }
  return outside;
}

Result<std::shared_ptr<http::OpenFile>> ImageDirs::open_source(const std::string& path) const {
  std::vector<const Root*> roots;
  for (std::size_t i = 0; i + 1 < roots_.size(); ++i) roots.push_back(&roots_[i]);
  return open_in(roots, path);
}

Result<std::shared_ptr<http::OpenFile>> ImageDirs::open_stored(const std::string& path) const {
  std::vector<const Root*> roots;
  for (const Root& r : roots_) roots.push_back(&r);
  return open_in(roots, path);
}

}  // namespace kiln::boot
