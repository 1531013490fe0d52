#include "agent/deploy/stream_decoder.h"

#include <zlib.h>
#include <zstd.h>

#include <vector>

namespace kiln::agent {

namespace {

constexpr std::size_t kOutChunk = 1024 * 1024;

class RawDecoder : public StreamDecoder {
 public:
  Status feed(const char* data, std::size_t n, const ByteSink& sink) override { return sink(data, n); }
  Status finish() override { return ok_status(); }
};

class GzipDecoder : public StreamDecoder {
 public:
  GzipDecoder() : out_(kOutChunk) {
    // 15 + 32: accept gzip or zlib headers.
    if (inflateInit2(&z_, 15 + 32) != Z_OK) ok_ = false;
  }
  ~GzipDecoder() override { inflateEnd(&z_); }

  Status feed(const char* data, std::size_t n, const ByteSink& sink) override {
    if (!ok_) return Error(Code::kInternal, "zlib initialisation failed");
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
    z_.avail_in = static_cast<uInt>(n);
    for (;;) {
      if (ended_) {
        if (z_.avail_in == 0) break;
        // Another gzip member follows the one that ended.
        if (inflateReset(&z_) != Z_OK) return Error(Code::kInternal, "zlib reset failed");
        ended_ = false;
      }
      z_.next_out = reinterpret_cast<Bytef*>(out_.data());
      z_.avail_out = static_cast<uInt>(out_.size());
      const int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
        return Error(Code::kInvalidArgument, std::string("gzip: ") + (z_.msg ? z_.msg : "corrupt data"));
      const std::size_t produced = out_.size() - z_.avail_out;
      if (produced > 0)
        if (auto s = sink(out_.data(), produced); !s) return s;
      if (rc == Z_STREAM_END) ended_ = true;
      else if (z_.avail_in == 0 && produced < out_.size()) break;  // all input used, all output flushed
      else if (rc == Z_BUF_ERROR && produced == 0) break;
    }
    started_ = true;
    return ok_status();
  }
  Status finish() override {
    if (!ended_) return Error(Code::kInvalidArgument, "gzip: stream ends before the end of the compressed data");
    return ok_status();
  }

 private:
  z_stream z_{};
  std::vector<char> out_;
  bool ok_ = true;
  bool ended_ = false;
  bool started_ = false;
};

class ZstdDecoder : public StreamDecoder {
 public:
  ZstdDecoder() : ds_(ZSTD_createDStream()), out_(ZSTD_DStreamOutSize()) {
    if (ds_) ZSTD_initDStream(ds_);
  }
  ~ZstdDecoder() override { ZSTD_freeDStream(ds_); }

  Status feed(const char* data, std::size_t n, const ByteSink& sink) override {
    if (!ds_) return Error(Code::kInternal, "zstd initialisation failed");
    ZSTD_inBuffer in{data, n, 0};
    while (in.pos < in.size) {
      ZSTD_outBuffer out{out_.data(), out_.size(), 0};
      const std::size_t rc = ZSTD_decompressStream(ds_, &out, &in);
      if (ZSTD_isError(rc)) return Error(Code::kInvalidArgument, std::string("zstd: ") + ZSTD_getErrorName(rc));
      if (out.pos > 0)
        if (auto s = sink(out_.data(), out.pos); !s) return s;
      frame_done_ = rc == 0;
    }
    // Flush output the decoder still holds with no more input.
    for (;;) {
      ZSTD_outBuffer out{out_.data(), out_.size(), 0};
      const std::size_t rc = ZSTD_decompressStream(ds_, &out, &in);
      if (ZSTD_isError(rc)) return Error(Code::kInvalidArgument, std::string("zstd: ") + ZSTD_getErrorName(rc));
      if (out.pos == 0) break;  // nothing pending (a finished frame stays finished)
      if (auto s = sink(out_.data(), out.pos); !s) return s;
      frame_done_ = rc == 0;
      if (out.pos < out.size) break;
    }
    return ok_status();
  }
  Status finish() override {
    if (!frame_done_) return Error(Code::kInvalidArgument, "zstd: stream ends inside a frame");
    return ok_status();
  }

 private:
  ZSTD_DStream* ds_;
  std::vector<char> out_;
  bool frame_done_ = false;
};

}  // namespace

Result<std::unique_ptr<StreamDecoder>> StreamDecoder::create(const std::string& format) {
  if (format == "raw" || format.empty()) return std::unique_ptr<StreamDecoder>(new RawDecoder());
  if (format == "raw+gzip") return std::unique_ptr<StreamDecoder>(new GzipDecoder());
  if (format == "raw+zstd") return std::unique_ptr<StreamDecoder>(new ZstdDecoder());
  return Error::invalid("format", "unknown image format '" + format + "' (raw, raw+gzip, raw+zstd)");
}

}  // namespace kiln::agent
