#include "controller/boot/image_fetcher.h"

#include "controller/boot/image_converter.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/crypto.h"

namespace kiln::boot {
namespace {

constexpr std::chrono::milliseconds kPoll{200};

// curl's exit code for "Failure writing output to destination".
constexpr int kCurlWriteError = 23;

// Below this much room for an unprivileged writer, a filesystem counts as
// full: curl reports only that a write failed, not why, and by the time it
// exits the partial file has taken every block but a few.
constexpr uint64_t kFullBelowBytes = 1 << 20;

// Whether the filesystem holding `dir` is (as good as) full.
bool filesystem_full(const std::string& dir) {
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) != 0) return false;
  return static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize < kFullBelowBytes;
}

// How long a finished download waits before recording its outcome again when
// the store could not take it (a full disk under SQLite, the database down):
// doubling from the first, at most the last.
constexpr std::chrono::seconds kRecordRetryFirst{1};
constexpr std::chrono::seconds kRecordRetryMax{30};

std::string last_line(const std::string& path) {
  std::ifstream f(path);
  std::string line, last;
  while (std::getline(f, line))
    if (!line.empty()) last = line;
  return last;
}

}  // namespace

Result<std::string> sha256_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Error(errno == ENOENT ? Code::kNotFound : Code::kInternal, path + ": " + std::strerror(errno));
  }
  Sha256 hash;
  std::vector<char> buf(1 << 20);
  while (true) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Error e(Code::kInternal, path + ": " + std::strerror(errno));
      ::close(fd);
      return e;
    }
    if (n == 0) break;
    hash.update(std::string_view(buf.data(), static_cast<std::size_t>(n)));
  }
  ::close(fd);
  return hash.hex_digest();
}

ImageFetcher::ImageFetcher(asio::io_context& io, CatalogueStore& store, BlockingPool& db, std::string images_dir,
                           Logger log, std::vector<Cidr> allowed, std::string curl)
    : io_(io), store_(store), db_(db), images_dir_(std::move(images_dir)), log_(std::move(log)),
      policy_(std::move(allowed)), curl_(std::move(curl)) {}

ImageFetcher::~ImageFetcher() { stop(); }

Status ImageFetcher::start() {
  if (::mkdir(images_dir_.c_str(), 0700) != 0 && errno != EEXIST)
    return Error(Code::kInternal, "cannot create " + images_dir_ + ": " + std::strerror(errno));
  Result<std::vector<Image>> images = store_.list_images();
  if (!images) return images.take_error();
  for (const Image& i : *images)
    if (i.state == kImageDownloading) fetch(i);
  return ok_status();
}

void ImageFetcher::fetch(const Image& image) {
  if (stopping_.load()) return;
  Logger log = log_;
  asio::co_spawn(io_, download(image), [log](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      log.error("image download failed", {{"error", ex.what()}});
    }
  });
}

void ImageFetcher::stop() {
  if (stopping_.exchange(true)) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& entry : running_) entry.second.stop(std::chrono::seconds(2));
  running_.clear();
}

Status ImageFetcher::verify_and_install(const Image& image, const std::string& part) {
  struct stat st {};
  if (::stat(part.c_str(), &st) != 0) return Error(Code::kInternal, "downloaded file missing: " + part);
  if (st.st_size != image.size) {
    return Error(Code::kInvalidArgument, "size mismatch: expected " + std::to_string(image.size) + " bytes, got " +
                                             std::to_string(static_cast<int64_t>(st.st_size)));
  }
  Result<std::string> sum = sha256_file(part);
  if (!sum) return sum.take_error();
  if (*sum != image.sha256)
    return Error(Code::kInvalidArgument, "sha256 mismatch: expected " + image.sha256 + ", got " + *sum);
  const std::string path = path_for(image.id);
  if (::rename(part.c_str(), path.c_str()) != 0)
    return Error(Code::kInternal, "cannot rename " + part + ": " + std::strerror(errno));
  return ok_status();
}

asio::awaitable<void> ImageFetcher::download(Image image) {
  const std::string part = images_dir_ + "/." + image.id + ".part";
  const std::string log_file = images_dir_ + "/." + image.id + ".log";
  ::unlink(part.c_str());
  ::unlink(log_file.c_str());
  log_.info("image download started", {{"image", image.id}, {"name", image.name}, {"source", image.source}});

  std::string failure;
  std::string url = image.source;
  for (int hop = 0;; ++hop) {
    std::string redirect;
    failure = co_await fetch_hop(image, url, part, log_file, &redirect);
    if (stopping_.load()) co_return;
    if (!failure.empty() || redirect.empty()) break;
    if (hop + 1 >= kMaxHops) {
      failure = "more than " + std::to_string(kMaxHops - 1) + " redirects";
      break;
    }
    if (!redirect.starts_with("https://")) {
      failure = "redirected to a URL that is not https: refused";
      break;
    }
    url = redirect;
  }

  if (failure.empty()) {
    Status installed = co_await db_.run([&] { return verify_and_install(image, part); });
    if (!installed) failure = installed.error().message;
  }
  // Nothing of a failed download stays in the image directory (the reason
  // is the image's last_error): a partial file on a full disk would keep it
  // full.
  ::unlink(part.c_str());
  ::unlink(log_file.c_str());
  Image update = image;
  if (failure.empty()) {
    // A qcow2 is served once converted (image_converter.h): its file is the
    // source the converter reads.
    const bool convert = image.format == "qcow2";
    if (convert && converter_ == nullptr) {
      update.state = std::string(kImageFailed);
      update.last_error = "this kilnd converts no qcow2 images";
    } else {
      update.state = std::string(convert ? kImageConverting : kImageReady);
      update.last_error.clear();
    }
    update.path = path_for(image.id);
  } else {
    update.state = std::string(kImageFailed);
    update.last_error = failure;
  }
  Result<Image> stored = co_await db_.run([&] { return store_.update_image(update); });
  // A store that cannot take the outcome now (its disk full:
  // kInsufficientStorage, its database down: kUnavailable) takes it later: the image must not stay
  // "downloading" with no download behind it until kilnd restarts.
  asio::steady_timer retry(io_);
  for (std::chrono::seconds wait = kRecordRetryFirst;
       !stored && (stored.error().code == Code::kUnavailable || stored.error().code == Code::kInsufficientStorage) &&
       !stopping_.load();
       wait = std::min(wait * 2, kRecordRetryMax)) {
    log_.warn("cannot record the image download yet; retrying",
              {{"image", image.id}, {"error", stored.error().message}, {"retry_s", std::to_string(wait.count())}});
    retry.expires_after(wait);
    boost::system::error_code ec;
    co_await retry.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (stopping_.load()) break;
    stored = co_await db_.run([&] { return store_.update_image(update); });
  }
  if (stored && stored->state == kImageConverting) converter_->convert(*stored);
  if (!stored) {
    // Deleted while downloading (or kilnd stopping): nobody wants the file;
    // a restart fetches an image still "downloading" again.
    if (failure.empty()) ::unlink(update.path.c_str());
    log_.info("image download not recorded", {{"image", image.id}, {"error", stored.error().message}});
    co_return;
  }
  if (failure.empty()) {
    log_.info("image downloaded", {{"image", image.id}, {"name", image.name}, {"size", std::to_string(image.size)}});
  } else {
    log_.warn("image download failed", {{"image", image.id}, {"name", image.name}, {"error", failure}});
  }
}

asio::awaitable<Result<std::string>> ImageFetcher::checked_address(const http::Url& url) {
  std::string host = url.host;
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  asio::ip::tcp::resolver resolver(io_);
  boost::system::error_code ec;
  asio::ip::tcp::resolver::results_type results = co_await resolver.async_resolve(
      host, std::to_string(url.port), asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return Error(Code::kInvalidArgument, "cannot resolve " + host + ": " + ec.message());
  std::string pinned;
  for (const auto& entry : results) {
    asio::ip::address a = entry.endpoint().address();
    Status allowed = policy_.check(a, url.port);
    // Every address the name has must pass: curl could otherwise be handed
    // the one that does not on a retry.
    if (!allowed) co_return Error(Code::kInvalidArgument, host + ": " + allowed.error().fields.front().message);
    if (pinned.empty()) pinned = a.is_v6() ? "[" + a.to_string() + "]" : a.to_string();
  }
  if (pinned.empty()) co_return Error(Code::kInvalidArgument, "cannot resolve " + host + ": no address");
  co_return pinned;
}

asio::awaitable<std::string> ImageFetcher::fetch_hop(const Image& image, const std::string& url_text,
                                                     const std::string& part, const std::string& log_file,
                                                     std::string* redirect) {
  Result<http::Url> url = http::Url::parse(url_text);
  if (!url) co_return "not a valid http(s) URL";
  Result<std::string> address = co_await checked_address(*url);
  if (!address) co_return address.error().message;
  std::string host = url->host;
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);

  ChildSpec spec;
  // No --location: redirects come back here to be checked. --globoff: "[1-20]"
  // in a URL is not twenty requests. --resolve: the address checked above.
  spec.argv = {curl_, "--fail", "--silent", "--show-error", "--globoff", "--proto", "=http,https",
               "--max-redirs", "0", "--retry", "3", "--connect-timeout", "30",
               "--resolve", host + ":" + std::to_string(url->port) + ":" + *address,
               "--write-out", "\nkiln-hop %{http_code} %{redirect_url}\n", "--output", part, "--", url_text};
  spec.output_file = log_file;
  std::string failure;
  {
    Result<ChildProcess> child = ChildProcess::spawn(spec);
    if (!child) co_return "cannot run curl: " + child.error().message;
    std::lock_guard<std::mutex> lock(mu_);
    running_[image.id] = std::move(*child);
  }
  asio::steady_timer timer(io_);
  std::optional<int> status;
  while (!status) {
    timer.expires_after(kPoll);
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_.load()) co_return "kilnd is stopping";
    auto it = running_.find(image.id);
    if (it == running_.end()) co_return "download cancelled";
    status = it->second.poll();
    if (status) running_.erase(it);
  }
  std::string hop = last_line(log_file);
  if (*status != 0) {
    // The last line is curl's own error when it failed before writing out.
    std::ifstream f(log_file);
    std::string line, error;
    while (std::getline(f, line))
      if (!line.empty() && !line.starts_with("kiln-hop ")) error = line;
    // curl says only that it could not write; the operator needs to hear
    // that the disk is full, and where.
    if (exit_code(*status) == kCurlWriteError && filesystem_full(images_dir_))
      co_return "no space left on device: the image directory " + images_dir_ +
                " is full (curl could not write the download; the partial file was removed)";
    co_return "download failed (curl " + describe_wait_status(*status) + "): " + error;
  }
  // "kiln-hop 302 https://..." for a redirect, "kiln-hop 200 " when done.
  if (hop.starts_with("kiln-hop 3")) {
    std::size_t sp = hop.find(' ', 9);
    std::string location = sp == std::string::npos ? "" : hop.substr(sp + 1);
    if (location.empty()) co_return "redirect without a Location";
    *redirect = location;
  }
  co_return failure;
}

}  // namespace kiln::boot
