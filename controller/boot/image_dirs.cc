#include "controller/boot/image_dirs.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "common/ids.h"

namespace kiln::boot {
namespace {

// Temporary upload files are ".<final name>.upload-<random>".
constexpr std::string_view kUploadMarker = ".upload-";

bool is_upload_temp(std::string_view name) {
  return name.size() > 1 && name.front() == '.' && name.find(kUploadMarker) != std::string_view::npos;
}

// Removes upload temporaries a crash left in `dir` (kilnd's own directory).
// Only those untouched for an hour: several kilnd sharing one --image-dir
// (docs/scale-out.md) must not remove an upload another one is writing, and
// a live upload's file is written to all the time.
constexpr int64_t kStaleUploadSeconds = 3600;

void remove_stale_uploads(int dir_fd) {
  const int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return;
  }
  std::vector<std::string> stale;
  while (dirent* e = ::readdir(d))
    if ((e->d_type == DT_REG || e->d_type == DT_UNKNOWN) && is_upload_temp(e->d_name)) stale.emplace_back(e->d_name);
  ::closedir(d);
  const time_t now = ::time(nullptr);
  for (const std::string& name : stale) {
    struct stat st{};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && now - st.st_mtime < kStaleUploadSeconds)
      continue;
    ::unlinkat(dir_fd, name.c_str(), 0);
  }
}

// The error for a failed write-side call (`what`) on an upload in `dir`: a
// full disk or quota is kUnavailable naming the directory, so the client is
// told to come back (503, Retry-After) and the operator what to clear.
Error upload_error(int e, const std::string& dir, const std::string& what) {
  if (e == ENOSPC || e == EDQUOT)
    return Error(Code::kInsufficientStorage, "no space left on device: the image directory " + dir + " is full (" + what + ")");
  return Error(Code::kInternal, what + " in " + dir + ": " + std::strerror(e));
}

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
  remove_stale_uploads(d->roots_.back().fd);
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

Result<std::unique_ptr<UploadFile>> ImageDirs::create_upload(const std::string& name) const {
  if (name.empty() || name.find('/') != std::string::npos || name.front() == '.')
    return Error(Code::kInternal, "upload: bad file name");
  const int dir_fd = roots_.back().fd;
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::string temp = "." + name + std::string(kUploadMarker) + random_hex(16);
    const int fd = ::openat(dir_fd, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0)
      return std::unique_ptr<UploadFile>(new UploadFile(dir_fd, fd, std::move(temp), name, own_file(name), own_path_));
    if (errno != EEXIST) return upload_error(errno, own_path_, "cannot create an upload file");
  }
  return Error(Code::kInternal, "cannot create an upload file in " + own_path_);
}

UploadFile::~UploadFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!installed_) ::unlinkat(dir_fd_, temp_.c_str(), 0);
}

Status UploadFile::write(std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return upload_error(errno, dir_path_, "cannot write the upload");
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return ok_status();
}

Result<std::string> UploadFile::install() {
  // fsync() is where a filesystem that allocates late (ext4, XFS delalloc,
  // NFS) reports the full disk that write() did not.
  if (::fsync(fd_) != 0) return upload_error(errno, dir_path_, "cannot fsync the upload");
  if (::renameat(dir_fd_, temp_.c_str(), dir_fd_, final_.c_str()) != 0)
    return upload_error(errno, dir_path_, "cannot move the upload into place");
  installed_ = true;
  // The rename is durable once the directory is.
  const int d = ::openat(dir_fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d >= 0) {
    ::fsync(d);
    ::close(d);
  }
  return final_path_;
}

}  // namespace kiln::boot
