// inspect_qcow2 and convert_qcow2 (qcow2_image.h).
//
// Conversion is a pipeline of two threads over slices of the virtual disk.
// qemu-img cannot write raw to a pipe (it seeks), so a straight
// `qemu-img convert && compress` runs the two one after the other, on one
// core each, and takes the sum of both times. Instead the disk is cut into
// ConvertOptions::slice_bytes slices; qemu-img converts slice i+1 (its source opened as a raw
// window, driver=raw with offset and size, over the qcow2) while this thread
// compresses slice i, and each slice's temporary file is deleted as soon as it
// is compressed, so the work directory never holds more than two slices.
//
// Output: a sequence of zstd frames, which `zstd -d` and the agent's decoder
// (agent/deploy/stream_decoder.cc) read as one stream. Holes of at least
// kMinHole in a slice (what qemu-img left unwritten: unallocated or zero
// clusters) are not read or compressed: the data frame in progress is ended
// and prebuilt frames of zeros are copied out instead, a few bytes per MiB.

#include "controller/boot/qcow2_image.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "common/child_process.h"
#include "common/crypto.h"
#include "common/ids.h"
#include "common/json_text.h"

namespace kiln::boot {

namespace {

constexpr int64_t kMinHole = int64_t{1} << 20;       // smaller holes are compressed as data
constexpr size_t kReadBytes = size_t{4} << 20;
constexpr size_t kZeroFrameBytes = size_t{1} << 20;  // one prebuilt frame of zeros
constexpr size_t kMaxInfoJson = size_t{16} << 20;    // qemu-img info: even 65536 snapshots fit
constexpr auto kInfoTimeout = std::chrono::seconds(60);
constexpr auto kSliceTimeout = std::chrono::minutes(10);

// RAII file descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // close() reporting its error (a delayed write error shows here).
  int close_checked() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

bool disk_full(int e) { return e == ENOSPC || e == EDQUOT; }

Error io_error(int e, const std::string& what) {
  if (disk_full(e)) return Error(Code::kUnavailable, "no space left on device (" + what + ")");
  return Error(Code::kInternal, what + ": " + std::strerror(e));
}

// qemu's option syntax: a ',' in a value is written ',,'.
std::string qemu_opt_value(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    out += c;
    if (c == ',') out += ',';
  }
  return out;
}

// The source as qemu sees it: always qcow2 over a plain file, never a probe or
// a protocol chosen by the file's name.
std::string qcow2_opts(const std::string& path) {
  return "driver=qcow2,file.driver=file,file.filename=" + qemu_opt_value(path);
}

// What qemu-img said, short and on one line, for a message.
std::string tool_words(const std::string& err) {
  std::string s = err.substr(0, 400);
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

Result<int64_t> full_pread(int fd, uint8_t* buf, size_t n, int64_t at, size_t* got) {
  *got = 0;
  while (*got < n) {
    const ssize_t r = ::pread(fd, buf + *got, n - *got, at + static_cast<int64_t>(*got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return io_error(errno, "reading");
    if (r == 0) break;
    *got += static_cast<size_t>(r);
  }
  return static_cast<int64_t>(*got);
}

// Checks qemu-img's view of the image against the header's. The JSON is
// qemu's, but its strings come from the image (snapshot names): parsed with
// parse_json's bounds, read field by field, anything unexpected refused.
Status check_qemu_agrees(const std::string& text, const Qcow2Info& info) {
  if (text.size() > kMaxInfoJson) return Error(Code::kUnprocessable, "qcow2 image refused: qemu-img info says too much");
  auto parsed = parse_json(text, JsonLimits{.max_depth = 16});
  if (!parsed || !parsed->is_object()) {
    return Error(Code::kUnprocessable, "qcow2 image refused: qemu-img info gave no JSON object");
  }
  const nlohmann::json& j = *parsed;
  const auto refuse = [](const std::string& why) {
    return Error(Code::kUnprocessable, "qcow2 image refused: qemu-img " + why);
  };
  const auto format = j.find("format");
  if (format == j.end() || !format->is_string() || format->get<std::string>() != "qcow2") {
    return refuse("does not read it as qcow2");
  }
  const auto vsize = j.find("virtual-size");
  if (vsize == j.end() || !vsize->is_number_unsigned() ||
      vsize->get<uint64_t>() != static_cast<uint64_t>(info.virtual_size)) {
    return refuse("reports a virtual size other than the header's " + std::to_string(info.virtual_size));
  }
  for (const char* key : {"backing-filename", "full-backing-filename", "backing-filename-format", "backing-image"}) {
    if (j.contains(key)) return refuse("reports a backing file");
  }
  if (const auto enc = j.find("encrypted"); enc != j.end() && !(enc->is_boolean() && !enc->get<bool>())) {
    return refuse("reports it encrypted");
  }
  if (const auto fs = j.find("format-specific"); fs != j.end()) {
    if (!fs->is_object()) return refuse("gave a malformed format-specific section");
    if (const auto data = fs->find("data"); data != fs->end()) {
      if (!data->is_object()) return refuse("gave a malformed format-specific section");
      if (data->contains("data-file") || data->contains("data-file-raw")) return refuse("reports an external data file");
      if (data->contains("encrypt")) return refuse("reports it encrypted");
    }
  }
  return ok_status();
}

// Writes zstd frames to a file, hashing and counting what it writes.
class ZstdFrameWriter {
 public:
  ZstdFrameWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~ZstdFrameWriter() { ZSTD_freeCCtx(cctx_); }
  ZstdFrameWriter(const ZstdFrameWriter&) = delete;
  ZstdFrameWriter& operator=(const ZstdFrameWriter&) = delete;

  Status init(int level, int workers) {
    cctx_ = ZSTD_createCCtx();
    if (!cctx_) return Error(Code::kInternal, "zstd: cannot create a compression context");
    if (ZSTD_isError(ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level))) {
      return Error(Code::kInvalidArgument, "zstd: level " + std::to_string(level) + " refused");
    }
    // Each frame carries a checksum of its content: the agent's decoder checks it.
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 1);
    // A libzstd built without threads refuses workers: then compress here.
    if (workers > 0) ZSTD_CCtx_setParameter(cctx_, ZSTD_c_nbWorkers, workers);
    out_.resize(ZSTD_CStreamOutSize());
    // One frame of kZeroFrameBytes zeros, compressed once (a few dozen bytes).
    std::vector<char> zeros(kZeroFrameBytes, 0);
    zero_frame_.resize(ZSTD_compressBound(zeros.size()));
    ZSTD_CCtx* one = ZSTD_createCCtx();
    if (!one) return Error(Code::kInternal, "zstd: cannot create a compression context");
    const size_t n = ZSTD_compressCCtx(one, zero_frame_.data(), zero_frame_.size(), zeros.data(), zeros.size(), 1);
    ZSTD_freeCCtx(one);
    if (ZSTD_isError(n)) return Error(Code::kInternal, std::string("zstd: ") + ZSTD_getErrorName(n));
    zero_frame_.resize(n);
    return ok_status();
  }

  // Compresses `n` bytes into the current frame (starting one if needed).
  Status data(const char* p, size_t n) {
    if (n == 0) return ok_status();
    in_frame_ = true;
    content_ += static_cast<int64_t>(n);
    ZSTD_inBuffer in{p, n, 0};
    while (in.pos < in.size) {
      ZSTD_outBuffer out{out_.data(), out_.size(), 0};
      const size_t rc = ZSTD_compressStream2(cctx_, &out, &in, ZSTD_e_continue);
      if (ZSTD_isError(rc)) return Error(Code::kInternal, std::string("zstd: ") + ZSTD_getErrorName(rc));
      if (auto s = emit(out_.data(), out.pos); !s) return s;
    }
    return ok_status();
  }

  // `n` bytes of zeros: whole prebuilt frames of zeros after ending the
  // current frame, and the rest as data.
  Status zeros(int64_t n) {
    if (n < kMinHole) return zero_data(n);
    if (auto s = end_frame(); !s) return s;
    const int64_t frames = n / static_cast<int64_t>(kZeroFrameBytes);
    for (int64_t i = 0; i < frames; ++i)
      if (auto s = emit(zero_frame_.data(), zero_frame_.size()); !s) return s;
    content_ += frames * static_cast<int64_t>(kZeroFrameBytes);
    return zero_data(n - frames * static_cast<int64_t>(kZeroFrameBytes));
  }

  // Ends the frame in progress (if any) and writes out everything buffered.
  Status finish() {
    if (auto s = end_frame(); !s) return s;
    return flush();
  }

  int64_t content_bytes() const { return content_; }
  int64_t written() const { return written_; }
  std::string digest() { return sha_.hex_digest(); }

 private:
  Status zero_data(int64_t n) {
    static const std::vector<char> kZeros(kZeroFrameBytes, 0);
    while (n > 0) {
      const size_t k = static_cast<size_t>(std::min<int64_t>(n, static_cast<int64_t>(kZeros.size())));
      if (auto s = data(kZeros.data(), k); !s) return s;
      n -= static_cast<int64_t>(k);
    }
    return ok_status();
  }

  Status end_frame() {
    if (!in_frame_) return ok_status();
    ZSTD_inBuffer in{nullptr, 0, 0};
    for (;;) {
      ZSTD_outBuffer out{out_.data(), out_.size(), 0};
      const size_t rc = ZSTD_compressStream2(cctx_, &out, &in, ZSTD_e_end);
      if (ZSTD_isError(rc)) return Error(Code::kInternal, std::string("zstd: ") + ZSTD_getErrorName(rc));
      if (auto s = emit(out_.data(), out.pos); !s) return s;
      if (rc == 0) break;
    }
    in_frame_ = false;
    return ok_status();
  }

  // Output goes through a buffer so frames of zeros are not one write each.
  Status emit(const char* p, size_t n) {
    if (n == 0) return ok_status();
    sha_.update(std::string_view(p, n));
    written_ += static_cast<int64_t>(n);
    buf_.insert(buf_.end(), p, p + n);
    return buf_.size() >= kReadBytes ? flush() : ok_status();
  }

  Status flush() {
    size_t done = 0;
    while (done < buf_.size()) {
      const ssize_t w = ::write(fd_, buf_.data() + done, buf_.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return io_error(errno, "writing " + path_);
      done += static_cast<size_t>(w);
    }
    buf_.clear();
    return ok_status();
  }

  int fd_;
  std::string path_;
  ZSTD_CCtx* cctx_ = nullptr;
  std::vector<char> out_;
  std::vector<char> buf_;
  std::vector<char> zero_frame_;
  bool in_frame_ = false;
  int64_t content_ = 0;
  int64_t written_ = 0;
  Sha256 sha_;
};

// Compresses `len` bytes of the raw slice at `path` into `w`, reading only
// its data and passing its holes as zeros.
Status compress_slice(const std::string& path, int64_t len, ZstdFrameWriter& w, std::vector<char>& buf) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.ok()) return io_error(errno, "opening " + path);
  int64_t pos = 0;
  while (pos < len) {
    // [pos, data) is a hole, [data, hole) data. Without SEEK_DATA support
    // (EINVAL) the whole rest is read as data.
    int64_t data = ::lseek(fd.get(), pos, SEEK_DATA);
    if (data < 0 && errno == ENXIO) data = len;
    else if (data < 0 && errno == EINVAL) data = pos;
    else if (data < 0) return io_error(errno, "seeking in " + path);
    data = std::min(data, len);
    int64_t hole = data < len ? ::lseek(fd.get(), data, SEEK_HOLE) : len;
    if (hole < 0) hole = len;
    hole = std::min(hole, len);
    if (auto s = w.zeros(data - pos); !s) return s;
    for (int64_t at = data; at < hole;) {
      const size_t want = static_cast<size_t>(std::min<int64_t>(hole - at, static_cast<int64_t>(buf.size())));
      size_t got = 0;
      if (auto r = full_pread(fd.get(), reinterpret_cast<uint8_t*>(buf.data()), want, at, &got); !r) return r.error();
      if (got != want) return Error(Code::kInternal, path + " is shorter than qemu-img wrote it");
      if (auto s = w.data(buf.data(), got); !s) return s;
      at += static_cast<int64_t>(got);
    }
    pos = hole;
  }
  return ok_status();
}

// The temporary files of one conversion: removed on every path out.
class TempFiles {
 public:
  ~TempFiles() {
    std::lock_guard lock(mu_);
    for (const auto& p : live_) ::unlink(p.c_str());
  }
  void add(const std::string& p) {
    std::lock_guard lock(mu_);
    live_.insert(p);
  }
  void remove(const std::string& p) {
    ::unlink(p.c_str());
    keep(p);
  }
  // `p` is no longer temporary (renamed into place): leave it.
  void keep(const std::string& p) {
    std::lock_guard lock(mu_);
    live_.erase(p);
  }

 private:
  std::mutex mu_;
  std::set<std::string> live_;
};

// Slices converted by the qemu-img thread and not yet compressed.
struct SlicePipeline {
  std::mutex mu;
  std::condition_variable cv;
  int64_t converted = 0;  // slices [0, converted) are on disk
  int64_t consumed = 0;   // slices [0, consumed) are compressed and deleted
  bool cancelled = false;
  std::optional<Error> error;
};

// Runs qemu-img for one slice into `tmp` (created here, sparse, `len` bytes).
Status convert_slice(const std::string& source, const std::string& tmp, int64_t offset, int64_t len,
                     const ConvertOptions& opt) {
  {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd.ok()) return io_error(errno, "creating " + tmp);
    if (::ftruncate(fd.get(), len) != 0) return io_error(errno, "sizing " + tmp);
  }
  // The slice is a raw window over the qcow2; the target is given as options
  // too (-n: it exists; --target-is-zero: holes need no writing), so neither
  // name is ever parsed as a protocol. cache=unsafe: a temporary file needs
  // no flush to disk.
  const std::string src_opts = "driver=raw,offset=" + std::to_string(offset) + ",size=" + std::to_string(len) +
                         ",file.driver=qcow2,file.file.driver=file,file.file.filename=" + qemu_opt_value(source);
  const std::vector<std::string> argv = {
      opt.qemu_img, "convert", "--image-opts", src_opts, "-n", "--target-image-opts", "--target-is-zero",
      "-t", "unsafe", "driver=raw,file.driver=file,file.filename=" + qemu_opt_value(tmp)};
  auto run = run_program(argv, kSliceTimeout);
  if (!run) {
    if (run.error().code == Code::kTimeout) return Error(Code::kInternal, "qemu-img convert timed out");
    return Error(Code::kInternal, "qemu-img cannot run: " + run.error().message);
  }
  if (run->status != 0) {
    const std::string words = tool_words(run->err.empty() ? run->out : run->err);
    if (words.find("No space left on device") != std::string::npos ||
        words.find("Disk quota exceeded") != std::string::npos) {
      return Error(Code::kUnavailable, "no space left on device (qemu-img writing a temporary raw file in " +
                                           opt.work_dir + ")");
    }
    // qemu-img read a header we accepted; what fails now is the image's data
    // (an L2 table out of place, a cluster that does not decompress).
    return Error(Code::kUnprocessable,
                 "qemu-img cannot convert the image (" + describe_wait_status(run->status) + "): " + words);
  }
  return ok_status();
}

std::string dir_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

Result<Qcow2Info> inspect_qcow2(const std::string& path, const std::string& qemu_img) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd.ok()) {
    if (errno == ENOENT) return Error(Code::kNotFound, "no image file " + path);
    return Error(Code::kInternal, "opening " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Error(Code::kInternal, "stat " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Error(Code::kUnprocessable, "qcow2 image refused: not a regular file");
  std::vector<uint8_t> head(static_cast<size_t>(std::min<int64_t>(st.st_size, kQcow2HeadBytes)));
  size_t got = 0;
  if (auto r = full_pread(fd.get(), head.data(), head.size(), 0, &got); !r) return r.error();
  head.resize(got);
  auto info = parse_qcow2_header(head, st.st_size);
  if (!info) return info;

  auto run = run_program({qemu_img, "info", "--output=json", "--image-opts", qcow2_opts(path)}, kInfoTimeout);
  if (!run) {
    return Error(Code::kInternal, "qemu-img info cannot run (" + qemu_img + "): " + run.error().message);
  }
  if (run->status != 0) {
    return Error(Code::kUnprocessable, "qcow2 image refused: qemu-img cannot read it: " + tool_words(run->err));
  }
  if (auto s = check_qemu_agrees(run->out, *info); !s) return s.error();
  return info;
}

Result<ConvertedImage> convert_qcow2(const std::string& source, const std::string& dest, const ConvertOptions& opt) {
  if (opt.slice_bytes <= 0 || opt.slice_bytes % 512 != 0) {
    return Error(Code::kInvalidArgument, "slice_bytes must be a positive multiple of 512");
  }
  auto info = inspect_qcow2(source, opt.qemu_img);
  if (!info) return info.error();
  if (info->virtual_size > opt.max_virtual_size) {
    return Error(Code::kUnprocessable, "qcow2 image refused: virtual size " + std::to_string(info->virtual_size) +
                                           " bytes above the " + std::to_string(opt.max_virtual_size) +
                                           " this conversion allows");
  }
  ConvertOptions o = opt;
  if (o.work_dir.empty()) o.work_dir = dir_of(dest);
  const std::string part = dest + ".part";
  const std::string stem = o.work_dir + "/.qcow2-" + random_hex(8) + "-";

  TempFiles temps;  // removed on every return, the .part included until renamed
  Fd out(::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out.ok()) return io_error(errno, "creating " + part);
  temps.add(part);
  ZstdFrameWriter writer(out.get(), part);
  if (auto s = writer.init(o.zstd_level, o.zstd_workers); !s) return s.error();

  const int64_t vsize = info->virtual_size;
  const int64_t slice = o.slice_bytes;
  const int64_t slices = (vsize + slice - 1) / slice;
  const auto slice_len = [&](int64_t i) { return std::min(slice, vsize - i * slice); };
  const auto slice_path = [&](int64_t i) { return stem + std::to_string(i) + ".raw"; };

  // The qemu-img thread runs at most one slice ahead of the compressor.
  SlicePipeline pipe;
  std::thread converter([&] {
    for (int64_t i = 0; i < slices; ++i) {
      {
        std::unique_lock lock(pipe.mu);
        pipe.cv.wait(lock, [&] { return pipe.cancelled || i < pipe.consumed + 2; });
        if (pipe.cancelled) return;
      }
      const std::string tmp = slice_path(i);
      temps.add(tmp);
      Status s = convert_slice(source, tmp, i * slice, slice_len(i), o);
      std::lock_guard lock(pipe.mu);
      if (!s) {
        pipe.error = s.take_error();
        pipe.cv.notify_all();
        return;
      }
      pipe.converted = i + 1;
      pipe.cv.notify_all();
    }
  });

  Status result;
  std::vector<char> buf(kReadBytes);
  for (int64_t i = 0; i < slices && result; ++i) {
    {
      std::unique_lock lock(pipe.mu);
      pipe.cv.wait(lock, [&] { return pipe.error.has_value() || pipe.converted > i; });
      if (pipe.converted <= i) {
        result = *pipe.error;
        break;
      }
    }
    result = compress_slice(slice_path(i), slice_len(i), writer, buf);
    temps.remove(slice_path(i));
    std::lock_guard lock(pipe.mu);
    pipe.consumed = i + 1;
    pipe.cv.notify_all();
  }
  {
    std::lock_guard lock(pipe.mu);
    pipe.cancelled = true;
    pipe.cv.notify_all();
  }
  converter.join();
  if (!result) return result.take_error();

  if (auto s = writer.finish(); !s) return s.take_error();
  if (writer.content_bytes() != vsize) {
    return Error(Code::kInternal, "converted " + std::to_string(writer.content_bytes()) + " bytes of " +
                                      std::to_string(vsize));
  }
  if (::fsync(out.get()) != 0) return io_error(errno, "syncing " + part);
  if (out.close_checked() != 0) return io_error(errno, "closing " + part);
  if (::rename(part.c_str(), dest.c_str()) != 0) return io_error(errno, "renaming " + part);
  temps.keep(part);
  // The rename is durable only once the directory is synced.
  if (Fd dir(::open(dir_of(dest).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)); dir.ok()) ::fsync(dir.get());

  ConvertedImage img;
  img.sha256 = writer.digest();
  img.size = writer.written();
  img.virtual_size = vsize;
  return img;
}

}  // namespace kiln::boot
