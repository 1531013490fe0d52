#pragma once
// ImageConverter: turns a registered qcow2 into the raw+sparse file the agent is
// served (qcow2_image.h does the inspecting and converting; this class runs
// it for the catalogue). Why convert on kilnd rather than decode qcow2 in the
// agent: the agent's stream stays one sequential, resumable, hashed pass
// (write_image.h) and never meets a qcow2 pointer, every hostile qcow2 is
// refused once on kilnd, which has qemu-img, and the converted file's
// checksum is known before any node downloads it.
//
// An image to convert is stored `converting` with `path` its local source
// file (an image-dir file, or the downloaded or uploaded copy). The job, one
// at a time on the converter's own thread (a conversion reads and writes
// GiBs: it must not hold a store thread, and two at once would only share
// the disk): re-checks that the source is still a file inside the image
// directories, checks its SHA-256 against the registration's (an image-dir
// file is hashed nowhere else, and the cache is keyed on it), then either
// reuses the converted file of a `ready` image with the same source SHA-256,
// or converts into a hidden per-job file and renames it to
// DATA_DIR/images/qcow2-<source sha256>.simg (kConvertedSuffix). The image
// turns `ready` with virtual_size and served_*, or `failed` with the reason (a refused
// qcow2, a wrong checksum, "no space left on device ..."); a failed
// conversion leaves no partial file. Images still `converting` when kilnd
// stopped are converted again by start().
//
// A converted file is shared by every image with that source SHA-256, so it
// is removed only when the last of them is deleted (release()). Deciding to
// reuse or install a file, and deciding to remove one, happen under one
// mutex together with the store write that records or forgets the image's
// use of it, so a delete cannot remove a file a conversion has just claimed.
//
// Threading: convert() and stop() from any thread; the jobs run on the
// converter's own BlockingPool; inspect() and release() block (callers run
// them on a BlockingPool).

#include <atomic>
#include <mutex>
#include <string>
#include <utility>  // before Asio (docs/coroutines.md)

#include <boost/asio/io_context.hpp>

#include "common/blocking_pool.h"
#include "common/log.h"
#include "common/result.h"
#include "controller/boot/image_dirs.h"
#include "controller/boot/qcow2_image.h"
#include "controller/model/image.h"
#include "controller/store/catalogue_store.h"

namespace kiln::boot {

namespace asio = boost::asio;

struct ImageConverterOptions {
  std::string qemu_img = "/usr/bin/qemu-img";
  // kilnd's own image directory (DATA_DIR/images): converted files go here,
  // where the content route serves them from.
  std::string images_dir;
};

class ImageConverter {
 public:
  // `dirs` (not owned, outlives this): where sources may lie.
  ImageConverter(asio::io_context& io, CatalogueStore& store, const ImageDirs& dirs, ImageConverterOptions options,
                 Logger log);
  ~ImageConverter();
  ImageConverter(const ImageConverter&) = delete;
  ImageConverter& operator=(const ImageConverter&) = delete;

  // Removes hidden conversion files a crash left behind and converts the
  // images left `converting`. Blocking (start-up). Store errors.
  Status start();
  // Queues the conversion of `image` (stored, state `converting`, `path` its
  // local source). Thread-safe; returns at once.
  void convert(const Image& image);
  // Stops taking jobs and returns at once: queued images stay `converting`
  // for the next start(). The conversion running, if any, cannot be cut
  // short (convert_qcow2 has no cancellation); the destructor waits for it.
  void stop();

  // Inspects the qcow2 at `path` (a file inside the image directories):
  // inspect_qcow2's result and errors (kUnprocessable naming the reason for a
  // hostile or invalid file), kInvalidArgument when `path` is outside the
  // image directories. Blocking.
  Result<Qcow2Info> inspect(const std::string& path) const;

  // After `deleted` (a qcow2 image) left the store: removes its converted file
  // unless another image still serves it. Blocking; errors are logged.
  void release(const Image& deleted);

  // Where the converted file of a source with this SHA-256 is kept.
  std::string converted_path(const std::string& source_sha256) const;

 private:
  // The whole job, blocking, ending with the image's store write.
  void run_job(const Image& image);
  // Writes the job's outcome (files_mu_ held); a deleted image's file is
  // released.
  void write_locked(const Image& update);
  // release() with files_mu_ held.
  void release_locked(const std::string& path, const std::string& except_id);

  asio::io_context& io_;
  CatalogueStore& store_;
  const ImageDirs& dirs_;
  const ImageConverterOptions options_;
  Logger log_;
  BlockingPool pool_{1};  // one conversion at a time
  std::mutex files_mu_;   // see the top of the file
  std::atomic<bool> stopping_{false};
};

}  // namespace kiln::boot
