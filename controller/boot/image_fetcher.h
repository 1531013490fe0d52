#pragma once
// ImageFetcher: downloads images registered with an http(s) source into
// DATA_DIR/images/<id>, in the background, then marks them ready (a qcow2:
// converting, handed to the ImageConverter) or failed.
//
// Each download is a curl child (ChildProcess): curl already does what a
// download of many GiB needs (TLS with the system trust store, retries,
// progress without buffering), and a child process cannot block or bloat
// kilnd. curl is not trusted with the destination, though (url_guard.h):
// kilnd resolves the host itself, checks every address against the
// DestinationPolicy, and pins the checked one (--resolve); curl runs with
// globbing off, http/https only and no redirects. A 3xx answer ends that
// curl; kilnd checks the Location (https only, the same address check) and
// runs the next hop itself, at most kMaxHops. The file is written as
// .<id>.part and renamed into place only after its size and SHA-256 match the
// registration, so a served file is always the registered one. A failed
// download leaves nothing in the directory (the reason is the image's
// last_error; a full disk reads "no space left on device: the image
// directory ... is full"). An outcome the store cannot take yet
// (kUnavailable: its disk full, its database down) is recorded again with
// backoff until it can. Images still "downloading" when kilnd stopped are
// fetched again by start().
//
// Threading: fetch() from any thread; each download is a coroutine on the
// io_context; hashing and store calls run on the BlockingPool.

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>
#include <utility>  // before Asio (docs/coroutines.md)

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include "common/blocking_pool.h"
#include "common/log.h"
#include "common/result.h"
#include "common/http/client.h"
#include "common/child_process.h"
#include "controller/boot/url_guard.h"
#include "controller/model/image.h"
#include "controller/store/catalogue_store.h"

namespace kiln::boot {

namespace asio = boost::asio;

class ImageConverter;

class ImageFetcher {
 public:
  ImageFetcher(asio::io_context& io, CatalogueStore& store, BlockingPool& db, std::string images_dir, Logger log,
               std::vector<Cidr> allowed = {}, std::string curl = "/usr/bin/curl");
  ~ImageFetcher();
  ImageFetcher(const ImageFetcher&) = delete;
  ImageFetcher& operator=(const ImageFetcher&) = delete;

  // Creates the images dir and restarts downloads left unfinished. Blocking
  // (start-up). Errors: kInternal (directory), store errors.
  Status start();
  // Starts downloading `image.source` for `image` (stored, state
  // "downloading"). Thread-safe; returns at once.
  void fetch(const Image& image);
  // Stops downloads in flight (their images stay "downloading").
  void stop();

  // Hands downloaded qcow2 images to `converter` (not owned, outlives this;
  // set before start()). Without one, a downloaded qcow2 ends `failed`.
  void convert_with(ImageConverter* converter) { converter_ = converter; }

  // Which addresses downloads may reach (add kilnd's listeners once bound).
  DestinationPolicy& policy() { return policy_; }
  const DestinationPolicy& policy() const { return policy_; }

  // Redirects followed per download, at most.
  static constexpr int kMaxHops = 5;

  // Where image `id` is kept once downloaded.
  std::string path_for(const std::string& id) const { return images_dir_ + "/" + id; }
  const std::string& images_dir() const { return images_dir_; }

 private:
  asio::awaitable<void> download(Image image);
  // One curl run for `url` (checked, pinned). Sets *redirect to the Location
  // of a 3xx answer. Returns "" or why the hop failed.
  asio::awaitable<std::string> fetch_hop(const Image& image, const std::string& url, const std::string& part,
                                         const std::string& log_file, std::string* redirect);
  // Resolves `url`'s host and checks every address; the one to pin, or why not.
  asio::awaitable<Result<std::string>> checked_address(const http::Url& url);
  // Checks size and SHA-256 of `part` and renames it to the image's path.
  Status verify_and_install(const Image& image, const std::string& part);

  asio::io_context& io_;
  CatalogueStore& store_;
  BlockingPool& db_;
  const std::string images_dir_;
  Logger log_;
  DestinationPolicy policy_;
  const std::string curl_;
  std::mutex mu_;
  std::map<std::string, ChildProcess> running_;  // by image id
  std::atomic<bool> stopping_{false};
  ImageConverter* converter_ = nullptr;
};

// SHA-256 (lowercase hex) of a file, read in 1 MiB blocks. kNotFound / kInternal.
Result<std::string> sha256_file(const std::string& path);

}  // namespace kiln::boot
