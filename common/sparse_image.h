#pragma once
// Android's sparse image format ("simg", AOSP system/core/libsparse/
// sparse_format.h), the "raw+sparse" format kilnd serves a converted qcow2 in.
//
// Why this format: a disk image is mostly zeros and the rest is data that is
// already as small as it will get cheaply; a sparse stream carries the data
// as it is and each run of zeros as 16 bytes, so making one costs a copy (no
// compression pass, which on a 2-core controller took 4x qemu-img's own time)
// and reading one costs a copy. It is a plain sequential stream (the agent's
// resumable, hashed, one-pass download stays as it is), and it is an existing
// format with an independent reader (`simg2img`, Debian's
// android-sdk-libsparse-utils), which the tests use to check our writer.
//
// Layout, all integers little-endian:
//   file header (28 bytes): magic 0xed26ff3a, major 1, minor 0,
//     file_hdr_sz 28, chunk_hdr_sz 12, blk_sz, total_blks, total_chunks,
//     image_checksum (0: none)
//   total_chunks chunks, each a 12-byte header (type, reserved 0,
//     chunk_sz in blocks, total_sz in bytes including the header) and:
//     RAW (0xCAC1): chunk_sz * blk_sz bytes of data
//     FILL (0xCAC2): 4 bytes, the pattern repeated over chunk_sz blocks
//     DONT_CARE (0xCAC3): nothing (kilnd never writes it; readers here
//       write zeros for it, so a reused disk never keeps old bytes)
//     CRC32 (0xCAC4): 4 bytes (kilnd never writes it; refused by our reader:
//       the download's SHA-256 covers the whole stream)
// The chunks' chunk_sz sum to total_blks; the disk is total_blks * blk_sz.
//
// Pure functions; no I/O.

#include <array>
#include <cstdint>

namespace kiln::sparse {

inline constexpr uint32_t kMagic = 0xed26ff3a;
inline constexpr uint16_t kMajorVersion = 1;
inline constexpr uint16_t kMinorVersion = 0;
inline constexpr uint16_t kFileHeaderBytes = 28;
inline constexpr uint16_t kChunkHeaderBytes = 12;

enum class ChunkType : uint16_t { kRaw = 0xCAC1, kFill = 0xCAC2, kDontCare = 0xCAC3, kCrc32 = 0xCAC4 };

struct FileHeader {
  uint32_t block_size = 4096;
  uint32_t total_blocks = 0;
  uint32_t total_chunks = 0;
};

std::array<uint8_t, kFileHeaderBytes> encode_file_header(const FileHeader& h);
// total_bytes: the chunk's size in the stream, its header included.
std::array<uint8_t, kChunkHeaderBytes> encode_chunk_header(ChunkType type, uint32_t blocks, uint32_t total_bytes);

inline uint16_t load_le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
inline uint32_t load_le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

}  // namespace kiln::sparse
