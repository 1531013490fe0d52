#pragma once
// Streaming decompression for image downloads: bytes go in as they arrive from
// the network, decoded bytes come out through a sink, state carries across
// calls (and so across resumed connections). "raw" passes bytes through,
// "raw+gzip" uses zlib (gzip or zlib framing, concatenated members allowed),
// "raw+zstd" libzstd's streaming API (concatenated frames allowed),
// "raw+sparse" Android's sparse image format (common/sparse_image.h: data
// as is, runs of zeros as fill chunks; what kilnd serves a qcow2 as).

#include <functional>
#include <memory>
#include <string>

#include "common/result.h"

namespace kiln::agent {

using ByteSink = std::function<Status(const char* data, std::size_t n)>;

class StreamDecoder {
 public:
  virtual ~StreamDecoder() = default;
  // Decodes `n` input bytes, calling `sink` with output as it is produced.
  // Errors: kInvalidArgument for corrupt input (with the library's words),
  // or whatever the sink returns.
  virtual Status feed(const char* data, std::size_t n, const ByteSink& sink) = 0;
  // After the last input: kInvalidArgument when the stream stopped mid-frame.
  virtual Status finish() = 0;

  // A decoder for an image format ("raw", "raw+gzip", "raw+zstd", "raw+sparse").
  // Errors: kInvalidArgument for an unknown format.
  static Result<std::unique_ptr<StreamDecoder>> create(const std::string& format);
};

}  // namespace kiln::agent
