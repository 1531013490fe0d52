#include "agent/deploy/write_image.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>
#include <thread>

#include "agent/deploy/block_device.h"
#include "agent/deploy/stream_decoder.h"
#include "agent/deploy/wipe.h"
#include "agent/inventory/block_devices.h"
#include "agent/validate/parsers/text_scan.h"

namespace kiln::agent {

namespace {

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const char* d, std::size_t n) { EVP_DigestUpdate(ctx_, d, n); }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_DigestFinal_ex(ctx_, md, &len);
    static const char* kHex = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < len; ++i) {
      out.push_back(kHex[md[i] >> 4]);
      out.push_back(kHex[md[i] & 15]);
    }
    return out;
  }

 private:
  EVP_MD_CTX* ctx_;
};

// Collects decoded bytes into one aligned buffer and writes it out whole, so
// every write but the last is buffer-sized and buffer-aligned (O_DIRECT).
class ChunkWriter {
 public:
  ChunkWriter(BlockDevice& dev, std::size_t size) : dev_(dev), buf_(size) {}
  Status append(const char* d, std::size_t n) {
    while (n > 0) {
      const std::size_t take = std::min(n, buf_.size() - fill_);
      std::memcpy(buf_.data() + fill_, d, take);
      fill_ += take;
      d += take;
      n -= take;
      if (fill_ == buf_.size())
        if (auto s = flush(); !s) return s;
    }
    return ok_status();
  }
  Status flush() {
    if (fill_ == 0) return ok_status();
    if (offset_ + fill_ > dev_.size())
      return Error(Code::kInvalidArgument, "image is larger than " + dev_.path() + " (" +
                                               std::to_string(dev_.size()) + " bytes)");
    if (auto s = dev_.write_at(offset_, buf_.data(), fill_); !s) return s;
    offset_ += fill_;
    fill_ = 0;
    return ok_status();
  }
  std::uint64_t written() const { return offset_; }
  bool touched() const { return offset_ > 0; }

 private:
  BlockDevice& dev_;
  AlignedBuffer buf_;
  std::size_t fill_ = 0;
  std::uint64_t offset_ = 0;
};

// "bytes 100-199/200" -> 100.
std::optional<std::uint64_t> content_range_start(const std::string& v) {
  const auto sp = v.find(' ');
  if (sp == std::string::npos || scan::to_lower(v.substr(0, sp)) != "bytes") return std::nullopt;
  try {
    return std::stoull(v.substr(sp + 1));
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace

nlohmann::json to_json(const WriteImageReport& r) {
  return {{"device", r.device},   {"bytes_downloaded", r.bytes_downloaded}, {"bytes_written", r.bytes_written},
          {"seconds", r.seconds}, {"mb_per_s", r.mb_per_s},                 {"sha256", r.sha256},
          {"resumes", r.resumes}};
}

Result<WriteImageReport> write_image(const WriteImageRequest& req, const WriteImageOptions& options,
                                     const Logger& log) {
  if (req.url.empty()) return Error::invalid("url", "required");
  if (auto u = Url::parse(req.url); !u) return u.take_error();
  auto decoder = StreamDecoder::create(req.format);
  if (!decoder) return decoder.take_error();
  const std::string want_sha = scan::to_lower(req.sha256);

  // The bytes the disk must hold, when known: a raw image's size, or what
  // kilnd says a compressed one decompresses to.
  const std::uint64_t needed = std::max<std::uint64_t>(req.format == "raw" ? req.size : 0, req.virtual_size);
  const std::string what = "image " + (req.image.empty() ? std::string() : req.image + " ") + "is " +
                           std::to_string(needed) + " bytes";

  WriteImageReport report;
  report.device = req.device;
  if (report.device.empty()) {
    std::vector<BlockDisk> disks = list_disks(options.root);
    auto disk = choose_target_disk(disks, std::max(needed, req.size));
    if (!disk) {
      // Name the largest candidate, so the message holds both sizes.
      std::optional<BlockDisk> largest;
      for (const BlockDisk& d : disks)
        if (choose_target_disk({d}, 1) && (!largest || d.size_bytes > largest->size_bytes)) largest = d;
      if (largest && needed > 0)
        return Error(Code::kInvalidArgument,
                     what + "; disk " + largest->path + " has " + std::to_string(largest->size_bytes) +
                         " bytes (the largest writable disk): nothing was written");
      return Error(Code::kInvalidArgument, "no non-removable writable disk of at least " +
                                               std::to_string(std::max(needed, req.size)) + " bytes");
    }
    report.device = disk->path;
  }
  auto opened = BlockDevice::open(report.device);
  if (!opened) return opened.take_error();
  BlockDevice& dev = *opened;
  if (needed > dev.size())
    return Error(Code::kInvalidArgument, what + "; disk " + report.device + " has " + std::to_string(dev.size()) +
                                             " bytes: nothing was written");
  log.info("writing image", {{"device", report.device},
                             {"format", req.format},
                             {"size", std::to_string(req.size)},
                             {"direct_io", dev.direct_io() ? "true" : "false"}});

  const auto started = std::chrono::steady_clock::now();
  Sha256 sha;
  ChunkWriter writer(dev, std::max<std::size_t>(options.buffer_bytes, BlockDevice::kAlignment));
  HttpClient http(options.http);
  std::uint64_t downloaded = 0;
  const ByteSink to_disk = [&](const char* d, std::size_t n) { return writer.append(d, n); };

  // Any failure after the first byte reached the disk leaves it unbootable.
  auto fail = [&](Error e) -> Error {
    if (writer.touched() || downloaded > 0) {
      if (auto s = zero_edges(dev, 1024 * 1024); !s)
        log.error("could not zero the edges of a half-written disk", {{"device", report.device}, {"error", s.error().message}});
    }
    log.error("write_image failed", {{"device", report.device}, {"error", e.message}});
    return e;
  };

  for (;;) {
    HttpHeaders headers;
    if (!req.token.empty()) headers.emplace_back("Authorization", "Bearer " + req.token);
    if (downloaded > 0) headers.emplace_back("Range", "bytes=" + std::to_string(downloaded) + "-");
    std::uint64_t skip = 0;
    bool fatal = false;  // the failure came from us (status, data, disk), not the network
    Status s = http.stream(
        "GET", req.url, headers, {},
        [&](const HttpResponseHead& h) -> Status {
          if (downloaded > 0 && h.status == 206) {
            auto start = content_range_start(h.header("Content-Range"));
            if (!start || *start != downloaded) {
              fatal = true;
              return Error(Code::kUnavailable, "resume: server sent Content-Range '" + h.header("Content-Range") +
                                                   "' for a request from byte " + std::to_string(downloaded));
            }
            return ok_status();
          }
          if (h.status == 200) {
            skip = downloaded;  // no Range support: discard what we already have
            return ok_status();
          }
          // 5xx may pass (kilnd restarting); anything else will not.
          fatal = h.status < 500;
          return Error(Code::kUnavailable, "GET " + req.url + ": HTTP " + std::to_string(h.status));
        },
        [&](const char* d, std::size_t n) -> Status {
          if (skip > 0) {
            const std::size_t drop = static_cast<std::size_t>(std::min<std::uint64_t>(skip, n));
            skip -= drop;
            d += drop;
            n -= drop;
            if (n == 0) return ok_status();
          }
          if (req.size > 0 && downloaded + n > req.size) {
            fatal = true;
            return Error(Code::kUnprocessable, "size mismatch: server sent more than " + std::to_string(req.size) +
                                                   " bytes");
          }
          sha.update(d, n);
          downloaded += n;
          if (auto st = (*decoder)->feed(d, n, to_disk); !st) {
            fatal = true;
            return st;
          }
          return ok_status();
        });
    // A body that ended cleanly but short (no Content-Length) is a drop too.
    if (s && req.size > 0 && downloaded < req.size)
      s = Error(Code::kUnavailable, "connection ended after " + std::to_string(downloaded) + " of " +
                                        std::to_string(req.size) + " bytes");
    if (s) break;
    if (fatal || report.resumes >= options.max_resumes) return fail(s.take_error());
    ++report.resumes;
    log.warn("image download interrupted; resuming", {{"device", report.device},
                                                       {"offset", std::to_string(downloaded)},
                                                       {"attempt", std::to_string(report.resumes)},
                                                       {"error", s.error().message}});
    std::this_thread::sleep_for(options.resume_delay * (1 << std::min(report.resumes - 1, 5)));
  }

  if (auto s = (*decoder)->finish(); !s) return fail(s.take_error());
  if (auto s = writer.flush(); !s) return fail(s.take_error());
  report.sha256 = sha.hex();
  report.bytes_downloaded = downloaded;
  report.bytes_written = writer.written();
  if (req.size > 0 && downloaded != req.size)
    return fail(Error(Code::kUnprocessable, "size mismatch: expected " + std::to_string(req.size) + " bytes, got " +
                                                std::to_string(downloaded)));
  if (!want_sha.empty() && report.sha256 != want_sha)
    return fail(Error(Code::kUnprocessable, "sha256 mismatch: expected " + want_sha + ", got " + report.sha256));
  if (auto s = dev.sync(); !s) return fail(s.take_error());
  if (req.seed) {
    if (auto s = write_seed_block(report.device, report.bytes_written, *req.seed); !s) return fail(s.take_error());
    log.info("os agent seed written", {{"device", report.device}, {"tls_pinned", req.seed->tls_sha256.empty() ? "false" : "true"}});
  }
  ::sync();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  report.mb_per_s = report.seconds > 0 ? static_cast<double>(report.bytes_written) / 1e6 / report.seconds : 0;
  log.info("image written", {{"device", report.device},
                             {"bytes_written", std::to_string(report.bytes_written)},
                             {"mb_per_s", std::to_string(report.mb_per_s)},
                             {"resumes", std::to_string(report.resumes)}});
  return report;
}

}  // namespace kiln::agent
