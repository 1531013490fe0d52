#include "controller/boot/image_converter.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "controller/boot/image_fetcher.h"  // sha256_file

namespace kiln::boot {
namespace {

// Hidden per-job output names: ".convert-<image id>.simg" (and the ".part"
// convert_qcow2 writes beside it), and convert_qcow2's temporary windows,
// ".qcow2-<random>-<n>.raw". A crash leaves them; start() removes them.
constexpr std::string_view kJobPrefix = ".convert-";
constexpr std::string_view kWindowPrefix = ".qcow2-";

bool file_has_size(const std::string& path, int64_t size) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == size;
}

}  // namespace

ImageConverter::ImageConverter(asio::io_context& io, CatalogueStore& store, const ImageDirs& dirs,
                               ImageConverterOptions options, Logger log)
    : io_(io), store_(store), dirs_(dirs), options_(std::move(options)), log_(std::move(log)) {}

ImageConverter::~ImageConverter() {
  stop();
  pool_.stop();  // waits for the conversion running, if any
}

std::string ImageConverter::converted_path(const std::string& source_sha256) const {
  return options_.images_dir + "/qcow2-" + source_sha256 + std::string(kConvertedSuffix);
}

Status ImageConverter::start() {
  if (DIR* d = ::opendir(options_.images_dir.c_str())) {
    std::vector<std::string> stale;
    while (dirent* e = ::readdir(d))
      if (std::string_view name(e->d_name); name.starts_with(kJobPrefix) || name.starts_with(kWindowPrefix))
        stale.emplace_back(e->d_name);
    ::closedir(d);
    for (const std::string& name : stale) ::unlink((options_.images_dir + "/" + name).c_str());
  }
  Result<std::vector<Image>> images = store_.list_images();
  if (!images) return images.take_error();
  for (const Image& i : *images)
    if (i.state == kImageConverting) convert(i);
  return ok_status();
}

void ImageConverter::convert(const Image& image) {
  if (stopping_.load()) return;
  asio::co_spawn(
      io_,
      [this, image]() -> asio::awaitable<void> {
        co_await pool_.run([this, image]() {
          if (stopping_.load()) return;  // left `converting` for the next start()
          run_job(image);
        });
      },
      asio::detached);
}

void ImageConverter::stop() { stopping_.store(true); }

Result<Qcow2Info> ImageConverter::inspect(const std::string& path) const {
  // The path must still lie inside the image directories (openat2 beneath
  // them): qemu-img is then given the same path.
  Result<std::shared_ptr<http::OpenFile>> f = dirs_.open_stored(path);
  if (!f) return f.take_error();
  return inspect_qcow2(path, options_.qemu_img);
}

void ImageConverter::run_job(const Image& image) {
  Image update = image;
  auto fail = [&](const std::string& why) {
    update.state = std::string(kImageFailed);
    update.last_error = why;
    log_.warn("image conversion failed", {{"image", image.id}, {"name", image.name}, {"error", why}});
    std::lock_guard<std::mutex> lock(files_mu_);
    write_locked(update);
  };
  log_.info("image conversion started", {{"image", image.id}, {"name", image.name}});
  Result<Qcow2Info> info = inspect(image.path);
  if (!info) return fail(info.error().message);
  // The registration's checksum is the cache key: it must be the file's.
  Result<std::string> sum = sha256_file(image.path);
  if (!sum) return fail(sum.error().message);
  if (*sum != image.sha256)
    return fail("sha256 mismatch: registered " + image.sha256 + ", the source file has " + *sum);

  const std::string final_path = converted_path(image.sha256);
  {
    // Another ready image of the same source: share its file. Decided and
    // recorded under one lock, so release() cannot remove it in between.
    std::lock_guard<std::mutex> lock(files_mu_);
    Result<std::vector<Image>> all = store_.list_images();
    if (!all) {
      update.state = std::string(kImageFailed);
      update.last_error = "store: " + all.error().message;
      write_locked(update);
      return;
    }
    for (const Image& other : *all) {
      if (other.id == image.id || other.format != "qcow2" || other.state != kImageReady) continue;
      if (other.sha256 != image.sha256 || other.served_path != final_path) continue;
      if (!file_has_size(final_path, other.served_size)) continue;
      update.state = std::string(kImageReady);
      update.last_error.clear();
      update.virtual_size = other.virtual_size;
      update.served_sha256 = other.served_sha256;
      update.served_size = other.served_size;
      update.served_path = final_path;
      log_.info("image conversion reused", {{"image", image.id}, {"from", other.id}});
      write_locked(update);
      return;
    }
  }

  const std::string job_path = options_.images_dir + "/" + std::string(kJobPrefix) + image.id + std::string(kConvertedSuffix);
  ConvertOptions opt;
  opt.qemu_img = options_.qemu_img;
  opt.work_dir = options_.images_dir;
  Result<ConvertedImage> out = convert_qcow2(image.path, job_path, opt);
  if (!out) {
    ::unlink(job_path.c_str());  // convert_qcow2 removes its partial files; this is belt and braces
    return fail(out.error().message);
  }
  std::lock_guard<std::mutex> lock(files_mu_);
  // Installed under the lock: from here to the store write, release() cannot
  // see the file unclaimed.
  if (::rename(job_path.c_str(), final_path.c_str()) != 0) {
    const std::string why = "cannot install the converted file: " + std::string(std::strerror(errno));
    ::unlink(job_path.c_str());
    update.state = std::string(kImageFailed);
    update.last_error = why;
    log_.warn("image conversion failed", {{"image", image.id}, {"name", image.name}, {"error", why}});
    write_locked(update);
    return;
  }
  update.state = std::string(kImageReady);
  update.last_error.clear();
  update.virtual_size = out->virtual_size;
  update.served_sha256 = out->sha256;
  update.served_size = out->size;
  update.served_path = final_path;
  log_.info("image converted", {{"image", image.id},
                                {"name", image.name},
                                {"virtual_size", std::to_string(out->virtual_size)},
                                {"served_size", std::to_string(out->size)}});
  write_locked(update);
}

void ImageConverter::write_locked(const Image& update) {
  Result<Image> stored = store_.update_image(update);
  if (stored) return;
  // Deleted while converting: the file is nobody's unless another image of
  // the same source has it.
  log_.info("image gone before its conversion finished", {{"image", update.id}, {"error", stored.error().message}});
  if (update.state == kImageReady) release_locked(update.served_path, update.id);
}

void ImageConverter::release(const Image& deleted) {
  if (deleted.format != "qcow2" || deleted.served_path.empty()) return;
  std::lock_guard<std::mutex> lock(files_mu_);
  release_locked(deleted.served_path, deleted.id);
}

void ImageConverter::release_locked(const std::string& path, const std::string& except_id) {
  // Only files this class names: never a registered source.
  if (path.empty() || !path.starts_with(options_.images_dir + "/qcow2-")) return;
  Result<std::vector<Image>> all = store_.list_images();
  if (!all) {
    log_.warn("converted file kept: store unreadable", {{"path", path}, {"error", all.error().message}});
    return;
  }
  for (const Image& other : *all)
    if (other.id != except_id && other.served_path == path) return;  // still served
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    log_.warn("cannot remove converted file", {{"path", path}, {"error", std::strerror(errno)}});
}

}  // namespace kiln::boot
