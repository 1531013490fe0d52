#include "agent/deploy/stream_decoder.h"

#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <vector>

#include "common/sparse_image.h"

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

// Android's sparse format (common/sparse_image.h), as kilnd serves a converted
// qcow2. A state machine over the stream, so input may be cut anywhere. The
// stream is from kilnd but is still parsed as untrusted: every size is checked
// against the header's totals before a byte of its chunk is passed on, and
// the stream must end exactly after total_chunks chunks covering total_blks.
class SparseDecoder : public StreamDecoder {
 public:
  Status feed(const char* data, std::size_t n, const ByteSink& sink) override {
    const auto* p = reinterpret_cast<const uint8_t*>(data);
    while (n > 0) {
      switch (state_) {
        case State::kFileHeader:
        case State::kChunkHeader:
        case State::kFillValue: {
          const std::size_t k = std::min(n, want_ - head_.size());
          head_.insert(head_.end(), p, p + k);
          p += k, n -= k;
          if (head_.size() < want_) break;
          if (auto s = on_header(sink); !s) return s;
          break;
        }
        case State::kSkip: {
          const std::size_t k = static_cast<std::size_t>(std::min<uint64_t>(n, left_));
          p += k, n -= k, left_ -= k;
          if (left_ == 0) next_chunk();
          break;
        }
        case State::kRaw: {
          const std::size_t k = static_cast<std::size_t>(std::min<uint64_t>(n, left_));
          if (auto s = sink(reinterpret_cast<const char*>(p), k); !s) return s;
          p += k, n -= k, left_ -= k;
          if (left_ == 0) next_chunk();
          break;
        }
        case State::kDone:
          return bad("data after the last chunk");
      }
    }
    return ok_status();
  }

  Status finish() override {
    if (state_ == State::kFileHeader) return bad("stream ends inside the file header");
    if (state_ != State::kDone) {
      return bad("stream ends after " + std::to_string(chunks_) + " of " + std::to_string(header_.total_chunks) +
                 " chunks");
    }
    if (blocks_ != header_.total_blocks) {
      return bad("chunks cover " + std::to_string(blocks_) + " of " + std::to_string(header_.total_blocks) +
                 " blocks");
    }
    return ok_status();
  }

 private:
  enum class State { kFileHeader, kChunkHeader, kFillValue, kSkip, kRaw, kDone };
  static constexpr uint32_t kMaxHeaderBytes = 4096;
  static constexpr uint32_t kMaxBlockSize = 1u << 20;

  static Error bad(const std::string& why) { return Error(Code::kInvalidArgument, "sparse image: " + why); }

  Status on_header(const ByteSink& sink) {
    const uint8_t* h = head_.data();
    if (state_ == State::kFileHeader) {
      if (sparse::load_le32(h) != sparse::kMagic) return bad("bad magic");
      if (sparse::load_le16(h + 4) != sparse::kMajorVersion) return bad("major version not 1");
      const uint16_t file_hdr = sparse::load_le16(h + 8);
      chunk_hdr_ = sparse::load_le16(h + 10);
      header_.block_size = sparse::load_le32(h + 12);
      header_.total_blocks = sparse::load_le32(h + 16);
      header_.total_chunks = sparse::load_le32(h + 20);
      if (file_hdr < sparse::kFileHeaderBytes || file_hdr > kMaxHeaderBytes) return bad("file header size out of range");
      if (chunk_hdr_ < sparse::kChunkHeaderBytes || chunk_hdr_ > kMaxHeaderBytes)
        return bad("chunk header size out of range");
      if (header_.block_size == 0 || header_.block_size % 4 != 0 || header_.block_size > kMaxBlockSize)
        return bad("block size " + std::to_string(header_.block_size) + " out of range");
      head_.clear();
      left_ = file_hdr - sparse::kFileHeaderBytes;
      if (left_ > 0) {
        state_ = State::kSkip;
        return ok_status();
      }
      next_chunk();
      return ok_status();
    }
    if (state_ == State::kFillValue) {
      std::array<char, 4> pattern;
      std::copy(head_.begin(), head_.end(), pattern.begin());
      head_.clear();
      if (auto s = repeat(pattern, fill_bytes_, sink); !s) return s;
      next_chunk();
      return ok_status();
    }
    // A chunk header.
    const auto type = static_cast<sparse::ChunkType>(sparse::load_le16(h));
    const uint32_t blocks = sparse::load_le32(h + 4);
    const uint64_t total = sparse::load_le32(h + 8);
    head_.clear();
    if (blocks > header_.total_blocks - blocks_) return bad("chunks cover more than total_blks");
    blocks_ += blocks;
    ++chunks_;
    const uint64_t bytes = uint64_t{blocks} * header_.block_size;
    switch (type) {
      case sparse::ChunkType::kRaw:
        if (total != chunk_hdr_ + bytes) return bad("raw chunk size does not match its blocks");
        if (bytes == 0) {
          next_chunk();
        } else {
          left_ = bytes;
          state_ = State::kRaw;
        }
        return ok_status();
      case sparse::ChunkType::kFill:
        if (total != chunk_hdr_ + 4u) return bad("fill chunk size is not 4 bytes");
        fill_bytes_ = bytes;
        state_ = State::kFillValue;
        want_ = 4;
        return ok_status();
      case sparse::ChunkType::kDontCare:
        if (total != chunk_hdr_) return bad("don't-care chunk carries data");
        if (auto s = repeat({0, 0, 0, 0}, bytes, sink); !s) return s;
        next_chunk();
        return ok_status();
      case sparse::ChunkType::kCrc32:
        return bad("crc32 chunks are not accepted (the download's sha256 covers the stream)");
    }
    return bad("unknown chunk type " + std::to_string(sparse::load_le16(h)));
  }

  // Past a header's extra bytes or a chunk: the next chunk header, or the end.
  void next_chunk() {
    if (chunks_ == header_.total_chunks) {
      state_ = State::kDone;
      return;
    }
    // The whole header is read (chunk_hdr_ <= kMaxHeaderBytes); bytes past
    // the 12 this version defines are ignored.
    state_ = State::kChunkHeader;
    want_ = chunk_hdr_;
  }

  static Status repeat(std::array<char, 4> pattern, uint64_t bytes, const ByteSink& sink) {
    std::vector<char> block(std::min<uint64_t>(bytes, kOutChunk));
    for (std::size_t i = 0; i < block.size(); ++i) block[i] = pattern[i % 4];
    while (bytes > 0) {
      const std::size_t k = static_cast<std::size_t>(std::min<uint64_t>(bytes, block.size()));
      if (auto s = sink(block.data(), k); !s) return s;
      bytes -= k;
    }
    return ok_status();
  }

  State state_ = State::kFileHeader;
  std::size_t want_ = sparse::kFileHeaderBytes;
  std::vector<uint8_t> head_;
  sparse::FileHeader header_;
  uint16_t chunk_hdr_ = sparse::kChunkHeaderBytes;
  uint64_t left_ = 0;
  uint64_t fill_bytes_ = 0;
  uint32_t blocks_ = 0;
  uint32_t chunks_ = 0;
};

}  // namespace

Result<std::unique_ptr<StreamDecoder>> StreamDecoder::create(const std::string& format) {
  if (format == "raw" || format.empty()) return std::unique_ptr<StreamDecoder>(new RawDecoder());
  if (format == "raw+gzip") return std::unique_ptr<StreamDecoder>(new GzipDecoder());
  if (format == "raw+zstd") return std::unique_ptr<StreamDecoder>(new ZstdDecoder());
  if (format == "raw+sparse") return std::unique_ptr<StreamDecoder>(new SparseDecoder());
  return Error::invalid("format", "unknown image format '" + format + "' (raw, raw+gzip, raw+zstd, raw+sparse)");
}

}  // namespace kiln::agent
