// convert_qcow2 (qcow2_image.h): a qcow2 to the raw+sparse stream the agent
// is served.
//
// The work is what qemu-img convert itself would do, without its detour
// through a raw file: `qemu-img map` says where each run of the disk lives;
// zeros become 16-byte fill chunks, plain clusters are copied from the qcow2
// file at the offsets the map gives, and only compressed clusters go through
// `qemu-img convert` (which must inflate them), into temporary raw windows
// that a second thread makes one window ahead of the writer. A third thread
// writes the output while this one reads and hashes the next buffer, so the
// SHA-256 (the one cost qemu-img does not pay) runs beside the I/O.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "common/child_process.h"
#include "common/crypto.h"
#include "common/ids.h"
#include "common/sparse_image.h"
#include "controller/boot/qcow2_image.h"
#include "controller/boot/qcow2_io.h"
#include "controller/boot/qcow2_map.h"

namespace kiln::boot {

namespace {

using namespace qcow2_io;

constexpr size_t kIoBytes = size_t{4} << 20;
constexpr int kBuffersInFlight = 3;
// Writeback of the output is started every this many bytes, so the fsync at
// the end finds little left to write (it was a quarter of the whole time).
constexpr int64_t kWritebackBytes = int64_t{32} << 20;
constexpr auto kMapTimeout = std::chrono::seconds(60);
constexpr auto kSliceTimeout = std::chrono::minutes(10);
// qemu-img map is asked about this many clusters at a time, so one answer
// is at most a few MiB of JSON however the image is laid out.
constexpr int64_t kMapWindowClusters = int64_t{1} << 15;

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

// The output file: bytes are appended and hashed on the calling thread, in
// kIoBytes buffers that a writer thread of its own writes out in order.
class HashedWriter {
 public:
  HashedWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {
    for (int i = 0; i < kBuffersInFlight; ++i) free_.emplace_back();
    cur_ = take_free();
    thread_ = std::thread([this] { write_loop(); });
  }
  ~HashedWriter() { stop(); }
  HashedWriter(const HashedWriter&) = delete;
  HashedWriter& operator=(const HashedWriter&) = delete;

  Status append(const void* p, size_t n) {
    const auto* c = static_cast<const char*>(p);
    while (n > 0) {
      const size_t k = std::min(n, kIoBytes - cur_.used);
      std::memcpy(cur_.data.get() + cur_.used, c, k);
      cur_.used += k;
      c += k, n -= k;
      if (auto s = submit_if_full(); !s) return s;
    }
    return ok_status();
  }

  Status zeros(int64_t n) {
    while (n > 0) {
      const size_t k = static_cast<size_t>(std::min<int64_t>(n, static_cast<int64_t>(kIoBytes - cur_.used)));
      std::memset(cur_.data.get() + cur_.used, 0, k);
      cur_.used += k;
      n -= static_cast<int64_t>(k);
      if (auto s = submit_if_full(); !s) return s;
    }
    return ok_status();
  }

  // Appends `n` bytes of `fd` from `at`, read straight into the buffer.
  Status copy_from(int fd, const std::string& what, int64_t at, int64_t n) {
    while (n > 0) {
      const size_t k = static_cast<size_t>(std::min<int64_t>(n, static_cast<int64_t>(kIoBytes - cur_.used)));
      size_t got = 0;
      if (auto r = full_pread(fd, reinterpret_cast<uint8_t*>(cur_.data.get() + cur_.used), k, at, &got); !r) {
        return r.error();
      }
      if (got != k) return Error(Code::kInternal, what + " ends before byte " + std::to_string(at + static_cast<int64_t>(k)));
      cur_.used += k;
      at += static_cast<int64_t>(k), n -= static_cast<int64_t>(k);
      if (auto s = submit_if_full(); !s) return s;
    }
    return ok_status();
  }

  // Writes out what is buffered and waits for the writer. Errors: the first
  // write error.
  Status finish() {
    if (cur_.used > 0)
      if (auto s = submit(); !s) return s;
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return full_.empty() || error_; });
    if (error_) return *error_;
    return ok_status();
  }

  std::string digest() { return sha_.hex_digest(); }
  int64_t written() const { return appended_; }

 private:
  // kIoBytes, left uninitialised: every byte is written before it is read.
  struct Buffer {
    std::unique_ptr<char[]> data{new char[kIoBytes]};
    size_t used = 0;
  };

  Status submit_if_full() { return cur_.used == kIoBytes ? submit() : ok_status(); }

  Buffer take_free() {
    Buffer b = std::move(free_.back());
    free_.pop_back();
    b.used = 0;
    return b;
  }

  // Hashes the current buffer and queues it for the writer.
  Status submit() {
    sha_.update(std::string_view(cur_.data.get(), cur_.used));
    appended_ += static_cast<int64_t>(cur_.used);
    std::unique_lock lock(mu_);
    full_.push_back(std::move(cur_));
    cv_.notify_all();
    cv_.wait(lock, [&] { return !free_.empty() || error_; });
    if (error_) return *error_;
    cur_ = take_free();
    return ok_status();
  }

  void write_loop() {
    for (;;) {
      Buffer buf;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !full_.empty() || stopping_; });
        if (full_.empty()) return;
        buf = std::move(full_.front());
      }
      std::optional<Error> failed;
      for (size_t done = 0; done < buf.used;) {
        const ssize_t w = ::write(fd_, buf.data.get() + done, buf.used - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
          failed = io_error(errno, "writing " + path_);
          break;
        }
        done += static_cast<size_t>(w);
        written_ += w;
      }
      if (written_ - flushed_ >= kWritebackBytes) {
        // Starts writeback and returns; errors show at the final fsync.
        ::sync_file_range(fd_, flushed_, written_ - flushed_, SYNC_FILE_RANGE_WRITE);
        flushed_ = written_;
      }
      std::lock_guard lock(mu_);
      full_.pop_front();
      if (failed && !error_) error_ = std::move(failed);
      free_.push_back(std::move(buf));
      cv_.notify_all();
    }
  }

  void stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
  }

  int fd_;
  std::string path_;
  Sha256 sha_;
  int64_t appended_ = 0;
  int64_t written_ = 0;  // writer thread only
  int64_t flushed_ = 0;  // writer thread only: writeback started below this
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Buffer> full_;  // hashed, not yet written (front: being written)
  std::vector<Buffer> free_;
  Buffer cur_;
  std::optional<Error> error_;
  bool stopping_ = false;
  std::thread thread_;
};

// Asks qemu-img for the disk's layout, a window of clusters at a time.
Result<std::vector<MapRun>> map_image(const std::string& source, const Qcow2Info& info, const ConvertOptions& opt) {
  std::vector<MapRun> runs;
  const int64_t window = std::max<int64_t>(info.cluster_size, 512) * kMapWindowClusters;
  for (int64_t start = 0; start < info.virtual_size; start += window) {
    const int64_t length = std::min(window, info.virtual_size - start);
    auto run = run_program({opt.qemu_img, "map", "--output=json", "--start-offset=" + std::to_string(start),
                            "--max-length=" + std::to_string(length), "--image-opts", qcow2_opts(source)},
                           kMapTimeout);
    if (!run) return Error(Code::kInternal, "qemu-img map cannot run (" + opt.qemu_img + "): " + run.error().message);
    if (run->status != 0) {
      return Error(Code::kUnprocessable, "qcow2 image refused: qemu-img map cannot read it: " + tool_words(run->err));
    }
    if (auto s = parse_qemu_map(run->out, start, length, info.file_size, runs); !s) return s.take_error();
  }
  return runs;
}

// A window of the disk that qemu-img decodes into a temporary raw file.
struct Window {
  int64_t start = 0;
  int64_t length = 0;
  std::string path;
};

// The windows covering every compressed run, in disk order, each at most
// `slice` bytes (a multiple of 512, as runs start on cluster boundaries).
std::vector<Window> windows_for(const std::vector<MapRun>& runs, int64_t slice, int64_t virtual_size) {
  std::vector<Window> out;
  int64_t covered = 0;
  for (const auto& run : runs) {
    if (run.kind != MapRun::Kind::kCompressed) continue;
    for (int64_t s = std::max(run.start, covered); s < run.start + run.length;) {
      const int64_t len = std::min(slice, virtual_size - s);
      out.push_back({s, len, {}});
      s += len;
      covered = s;
    }
  }
  return out;
}

// Runs qemu-img for one window into `w.path` (created here, sparse).
Status convert_window(const std::string& source, const Window& w, const ConvertOptions& opt) {
  {
    Fd fd(::open(w.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd.ok()) return io_error(errno, "creating " + w.path);
    if (::ftruncate(fd.get(), w.length) != 0) return io_error(errno, "sizing " + w.path);
  }
  // The window is a raw view over the qcow2; the target is given as options
  // too (-n: it exists; --target-is-zero: holes need no writing), so neither
  // name is ever parsed as a protocol. cache=unsafe: a temporary file needs
  // no flush to disk.
  const std::string src_opts = "driver=raw,offset=" + std::to_string(w.start) + ",size=" + std::to_string(w.length) +
                               ",file.driver=qcow2,file.file.driver=file,file.file.filename=" + qemu_opt_value(source);
  const std::vector<std::string> argv = {
      opt.qemu_img, "convert", "--image-opts", src_opts, "-n", "--target-image-opts", "--target-is-zero",
      "-t", "unsafe", "driver=raw,file.driver=file,file.filename=" + qemu_opt_value(w.path)};
  auto run = run_program(argv, kSliceTimeout);
  if (!run) {
    if (run.error().code == Code::kTimeout) return Error(Code::kInternal, "qemu-img convert timed out");
    return Error(Code::kInternal, "qemu-img cannot run: " + run.error().message);
  }
  if (run->status != 0) {
    const std::string words = tool_words(run->err.empty() ? run->out : run->err);
    if (words.find("No space left on device") != std::string::npos ||
        words.find("Disk quota exceeded") != std::string::npos) {
      return Error(Code::kInsufficientStorage, "no space left on device (qemu-img writing a temporary raw file in " +
                                           opt.work_dir + ")");
    }
    // qemu-img read a header we accepted; what fails now is the image's data
    // (an L2 table out of place, a cluster that does not decompress).
    return Error(Code::kUnprocessable,
                 "qemu-img cannot convert the image (" + describe_wait_status(run->status) + "): " + words);
  }
  return ok_status();
}

// The qemu-img thread and the writer hand windows over here. The qemu-img
// thread runs at most two windows ahead of the last one the writer let go.
class WindowPipeline {
 public:
  WindowPipeline(const std::string& source, std::vector<Window>& windows, TempFiles& temps, const ConvertOptions& opt)
      : source_(source), windows_(windows), temps_(temps), opt_(opt) {
    thread_ = std::thread([this] { run(); });
  }
  ~WindowPipeline() {
    {
      std::lock_guard lock(mu_);
      cancelled_ = true;
      cv_.notify_all();
    }
    thread_.join();
  }

  // Blocks until window i is on disk. Errors: the qemu-img thread's.
  Status wait_ready(size_t i) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return error_ || converted_ > i; });
    if (converted_ > i) return ok_status();
    return *error_;
  }
  // Windows before i are no longer needed: their files go.
  void release_before(size_t i) {
    std::lock_guard lock(mu_);
    for (; released_ < i && released_ < converted_; ++released_) temps_.remove(windows_[released_].path);
    cv_.notify_all();
  }

 private:
  void run() {
    for (size_t i = 0; i < windows_.size(); ++i) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return cancelled_ || i < released_ + 2; });
        if (cancelled_) return;
      }
      temps_.add(windows_[i].path);
      Status s = convert_window(source_, windows_[i], opt_);
      std::lock_guard lock(mu_);
      if (!s) {
        error_ = s.take_error();
        cv_.notify_all();
        return;
      }
      converted_ = i + 1;
      cv_.notify_all();
    }
  }

  const std::string& source_;
  std::vector<Window>& windows_;
  TempFiles& temps_;
  const ConvertOptions& opt_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t converted_ = 0;  // windows [0, converted_) are on disk
  size_t released_ = 0;   // windows [0, released_) are deleted
  bool cancelled_ = false;
  std::optional<Error> error_;
  std::thread thread_;
};

// Writes the data of bytes [from, to) of the disk: runs in order, from the
// qcow2 file (plain), the windows (compressed) or zeros.
class DataSource {
 public:
  DataSource(const std::vector<MapRun>& runs, int source_fd, const std::string& source, std::vector<Window>& windows,
             WindowPipeline& pipe)
      : runs_(runs), source_fd_(source_fd), source_(source), windows_(windows), pipe_(pipe) {}

  Status write(int64_t from, int64_t to, HashedWriter& out) {
    while (from < to) {
      while (run_ < runs_.size() && runs_[run_].start + runs_[run_].length <= from) ++run_;
      if (run_ == runs_.size()) return Error(Code::kInternal, "the map ends before byte " + std::to_string(from));
      const MapRun& r = runs_[run_];
      const int64_t end = std::min(to, r.start + r.length);
      Status s;
      switch (r.kind) {
        case MapRun::Kind::kZero:
          s = out.zeros(end - from);
          break;
        case MapRun::Kind::kPlain:
          s = out.copy_from(source_fd_, source_, r.offset + (from - r.start), end - from);
          break;
        case MapRun::Kind::kCompressed:
          s = compressed(from, end, out);
          break;
      }
      if (!s) return s;
      from = end;
    }
    return ok_status();
  }

 private:
  Status compressed(int64_t from, int64_t to, HashedWriter& out) {
    while (from < to) {
      while (window_ < windows_.size() && windows_[window_].start + windows_[window_].length <= from) ++window_;
      if (window_ == windows_.size() || windows_[window_].start > from) {
        return Error(Code::kInternal, "no window holds byte " + std::to_string(from));
      }
      if (window_ != open_) {
        pipe_.release_before(window_);
        if (auto s = pipe_.wait_ready(window_); !s) return s;
        fd_.reset(::open(windows_[window_].path.c_str(), O_RDONLY | O_CLOEXEC));
        if (!fd_.ok()) return io_error(errno, "opening " + windows_[window_].path);
        open_ = window_;
      }
      const Window& w = windows_[window_];
      const int64_t end = std::min(to, w.start + w.length);
      if (auto s = out.copy_from(fd_.get(), w.path, from - w.start, end - from); !s) return s;
      from = end;
    }
    return ok_status();
  }

  const std::vector<MapRun>& runs_;
  int source_fd_;
  const std::string& source_;
  std::vector<Window>& windows_;
  WindowPipeline& pipe_;
  size_t run_ = 0;
  size_t window_ = 0;
  size_t open_ = SIZE_MAX;
  Fd fd_;
};

std::string dir_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

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
  auto runs = map_image(source, *info, opt);
  if (!runs) return runs.error();
  auto plan = plan_sparse(*runs, info->virtual_size);
  if (!plan) return plan.error();

  ConvertOptions o = opt;
  if (o.work_dir.empty()) o.work_dir = dir_of(dest);
  const std::string part = dest + ".part";
  const std::string stem = o.work_dir + "/.qcow2-" + random_hex(8) + "-";
  std::vector<Window> windows = windows_for(*runs, o.slice_bytes, info->virtual_size);
  for (size_t i = 0; i < windows.size(); ++i) windows[i].path = stem + std::to_string(i) + ".raw";

  Fd src(::open(source.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!src.ok()) return io_error(errno, "opening " + source);
  TempFiles temps;  // removed on every return, the .part included until renamed
  Fd out(::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out.ok()) return io_error(errno, "creating " + part);
  temps.add(part);

  int64_t written = 0;
  std::string digest;
  {
    // Declared so that the pipeline stops (and its qemu-img finishes) before
    // `temps` removes its files, and the writer drains before `out` closes.
    WindowPipeline pipe(source, windows, temps, o);
    HashedWriter w(out.get(), part);
    DataSource data(*runs, src.get(), source, windows, pipe);
    const int64_t block = plan->block_size;
    Status s = w.append(sparse::encode_file_header({plan->block_size, plan->total_blocks,
                                                    static_cast<uint32_t>(plan->chunks.size())})
                            .data(),
                        sparse::kFileHeaderBytes);
    for (const auto& c : plan->chunks) {
      if (!s) break;
      const int64_t bytes = int64_t{c.blocks} * block;
      if (c.data) {
        s = w.append(sparse::encode_chunk_header(sparse::ChunkType::kRaw, c.blocks,
                                                 static_cast<uint32_t>(sparse::kChunkHeaderBytes + bytes))
                         .data(),
                     sparse::kChunkHeaderBytes);
        if (s) s = data.write(c.first * block, c.first * block + bytes, w);
      } else {
        s = w.append(sparse::encode_chunk_header(sparse::ChunkType::kFill, c.blocks, sparse::kChunkHeaderBytes + 4)
                         .data(),
                     sparse::kChunkHeaderBytes);
        static constexpr uint8_t kZeroPattern[4] = {0, 0, 0, 0};
        if (s) s = w.append(kZeroPattern, sizeof kZeroPattern);
      }
    }
    if (s) s = w.finish();
    if (!s) return s.take_error();
    written = w.written();
    digest = w.digest();
  }
  if (::fsync(out.get()) != 0) return io_error(errno, "syncing " + part);
  if (out.close_checked() != 0) return io_error(errno, "closing " + part);
  if (::rename(part.c_str(), dest.c_str()) != 0) return io_error(errno, "renaming " + part);
  temps.keep(part);
  // The rename is durable only once the directory is synced.
  if (Fd dir(::open(dir_of(dest).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)); dir.ok()) ::fsync(dir.get());

  ConvertedImage img;
  img.sha256 = digest;
  img.size = written;
  img.virtual_size = info->virtual_size;
  return img;
}

}  // namespace kiln::boot
