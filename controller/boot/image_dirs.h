#pragma once
// ImageDirs: the only places kilnd reads image files from.
//
// An image registered with a local `source` (or `kernel`) is a path someone
// with an operator token typed, and ramdisk images are served to anyone who
// asks (iPXE has no credentials). If any path were accepted, a token would be
// enough to read /etc/shadow, or kilnd's own kiln.key and kiln.db and so
// every sealed BMC password. So local files must lie inside a directory the
// host's administrator named with --image-dir (default DATA_DIR/images), and
// they are opened with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
// relative to that directory: "..", absolute symlinks and symlinks that lead
// out are refused by the kernel, at registration and again every time the
// file is served (a file swapped for a symlink later is refused then).
//
// Errors never describe a file outside the directories (not whether it
// exists, nor its size): everything outside gets the same message.
//
// Uploads (PUT /v1/images/{id}/content) are written into kilnd's own
// directory only, through its directory descriptor: a hidden temporary file
// (O_EXCL, 0600, a random name) that is fsync'ed and renamed into place in
// the same directory once its checksum is right, and removed otherwise.
// Temporary files a crash left behind are removed by open().
//
// Thread-safety: immutable after open(); every method is safe from any thread.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/http/server.h"
#include "common/result.h"

namespace kiln::boot {

class ImageDirs;

// An upload being written: a temporary file in kilnd's own image directory.
// Removed when destroyed, unless install() moved it into place.
class UploadFile {
 public:
  ~UploadFile();
  UploadFile(const UploadFile&) = delete;
  UploadFile& operator=(const UploadFile&) = delete;

  // Appends `data`. A full disk or quota (ENOSPC, EDQUOT) is kInsufficientStorage
  // with a message starting "no space left on device" that names the
  // directory; anything else kInternal. Either way the caller drops this
  // object, which removes the partial file.
  Status write(std::string_view data);
  // fsync()s the file, renames it to the final name (replacing a file of
  // that name) and fsync()s the directory. Returns the final path. Errors
  // as write() (a late-allocating filesystem reports a full disk here).
  Result<std::string> install();
  const std::string& temp_name() const { return temp_; }

 private:
  friend class ImageDirs;
  UploadFile(int dir_fd, int fd, std::string temp, std::string final_name, std::string final_path,
             std::string dir_path)
      : dir_fd_(dir_fd), fd_(fd), temp_(std::move(temp)), final_(std::move(final_name)),
        final_path_(std::move(final_path)), dir_path_(std::move(dir_path)) {}
  int dir_fd_;  // the own directory's O_PATH descriptor (the ImageDirs outlives this)
  int fd_;
  std::string temp_, final_, final_path_;
  std::string dir_path_;  // the own directory, for error messages
  bool installed_ = false;
};

class ImageDirs {
 public:
  // `sources`: where registered local files may lie (--image-dir). `own`:
  // kilnd's own image directory (downloads and uploads), also served from;
  // created (0700) when missing. Errors: kInvalidArgument naming the
  // directory that cannot be opened.
  static Result<std::shared_ptr<ImageDirs>> open(std::vector<std::string> sources, std::string own);
  ~ImageDirs();
  ImageDirs(const ImageDirs&) = delete;
  ImageDirs& operator=(const ImageDirs&) = delete;

  // Opens `path`, an absolute path inside one of the source directories, for
  // reading. kInvalidArgument: outside them (one message for every such
  // path), no such file, not a regular file, not readable.
  Result<std::shared_ptr<http::OpenFile>> open_source(const std::string& path) const;
  // As open_source, and kilnd's own directory counts too (serving).
  Result<std::shared_ptr<http::OpenFile>> open_stored(const std::string& path) const;

  // Starts an upload that will become the file `name` (a plain file name, no
  // '/') in kilnd's own directory. kInsufficientStorage ("no space left on device
  // ...") when the disk is full, kInternal when it cannot be created otherwise.
  Result<std::unique_ptr<UploadFile>> create_upload(const std::string& name) const;
  // The path of `name` in kilnd's own directory.
  std::string own_file(const std::string& name) const { return own_path_ + "/" + name; }

  const std::vector<std::string>& sources() const { return source_paths_; }
  const std::string& own() const { return own_path_; }

 private:
  struct Root {
    std::string path;  // as given, without a trailing '/'
    std::string real;  // realpath() of it, for paths given through it
    int fd = -1;       // O_PATH | O_DIRECTORY
  };
  ImageDirs() = default;
  Result<std::shared_ptr<http::OpenFile>> open_in(const std::vector<const Root*>& roots, const std::string& path) const;

  std::vector<Root> roots_;  // sources, then own (last)
  std::vector<std::string> source_paths_;
  std::string own_path_;
};

// The one message for a path outside the image directories.
inline constexpr const char* kOutsideImageDirs =
    "must be a file inside an image directory of this kilnd (--image-dir)";

}  // namespace kiln::boot
