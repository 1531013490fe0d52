#pragma once
// The `write_image` command: stream an image from kilnd onto a disk.
//
// One pass, no staging (the ramdisk has no room for a copy): the HTTP body is
// hashed (SHA-256 of the bytes as served), decompressed on the fly and written
// in large aligned chunks. A dropped connection resumes with
// `Range: bytes=N-` where N counts the bytes already hashed; the hash and the
// decoder simply continue. Because bytes reach the disk before the hash is
// known, a mismatch (or any failure after the first write) zeroes the first
// and last MiB of the disk so it cannot boot half an image, then reports the
// error. On success the disk is fsynced and sync() is called.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/net/http_client.h"
#include "agent/deploy/agent_seed.h"
#include "common/log.h"
#include "common/result.h"

namespace kiln::agent {

struct WriteImageRequest {
  std::string url;       // http://.../v1/images/<id>/content
  std::string sha256;    // hex of the file as served; "" skips the check (operator CLI only)
  std::uint64_t size = 0;  // bytes as served; 0 = unknown (no size check)
  std::string format = "raw";  // raw | raw+gzip | raw+zstd | raw+sparse
  // Bytes the image decompresses to, when kilnd knows (raw, a converted
  // qcow2); 0 = unknown: the write then stops with an error at the disk's end.
  // Known, it picks the disk and refuses a smaller one before a byte is written.
  std::uint64_t virtual_size = 0;
  std::string image;     // the image's name, for messages; may be empty
  std::string device;    // "" = choose per the contract (see choose_target_disk)
  std::string token;     // bearer for the download; never logged
  // Left in the seed block at the end of the disk once the image is written
  // and verified (agent_seed.h): the deployed OS's agent reads it there.
  std::optional<AgentSeed> seed;
};

struct WriteImageOptions {
  std::string root;                 // prefix for /sys when choosing a device
  std::size_t buffer_bytes = 4 * 1024 * 1024;  // large aligned writes; 4 MiB saturates NVMe
  int max_resumes = 5;              // reconnects after a dropped download
  std::chrono::milliseconds resume_delay{1000};  // doubled per attempt
  HttpClientOptions http;
};

struct WriteImageReport {
  std::string device;
  std::uint64_t bytes_downloaded = 0;
  std::uint64_t bytes_written = 0;
  double seconds = 0;
  double mb_per_s = 0;             // written bytes / 1e6 / seconds
  std::string sha256;
  int resumes = 0;
};

nlohmann::json to_json(const WriteImageReport& r);

// Downloads and writes the image. Blocking (minutes). Errors:
// kInvalidArgument (bad request, unknown format, no suitable disk, image
// larger than the device: "image X is N bytes; disk /dev/sda has M bytes"
// before any write when the size is known, at the disk's end otherwise;
// corrupt compressed data), kUnavailable (download
// failed after the allowed resumes, or an HTTP error status),
// kUnprocessable ("sha256 mismatch: expected X, got Y", "size mismatch: ..."),
// kInternal (disk I/O); kInvalidArgument when a seed is asked for and the
// image leaves no room for it at the end of the disk.
Result<WriteImageReport> write_image(const WriteImageRequest& request, const WriteImageOptions& options,
                                     const Logger& log);

}  // namespace kiln::agent
