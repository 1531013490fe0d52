#include "common/sparse_image.h"

namespace kiln::sparse {

namespace {

void store_le16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}

void store_le32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

std::array<uint8_t, kFileHeaderBytes> encode_file_header(const FileHeader& h) {
  std::array<uint8_t, kFileHeaderBytes> out{};
  store_le32(&out[0], kMagic);
  store_le16(&out[4], kMajorVersion);
  store_le16(&out[6], kMinorVersion);
  store_le16(&out[8], kFileHeaderBytes);
  store_le16(&out[10], kChunkHeaderBytes);
  store_le32(&out[12], h.block_size);
  store_le32(&out[16], h.total_blocks);
  store_le32(&out[20], h.total_chunks);
  store_le32(&out[24], 0);  // no image checksum
  return out;
}

std::array<uint8_t, kChunkHeaderBytes> encode_chunk_header(ChunkType type, uint32_t blocks, uint32_t total_bytes) {
  std::array<uint8_t, kChunkHeaderBytes> out{};
  store_le16(&out[0], static_cast<uint16_t>(type));
  store_le16(&out[2], 0);
  store_le32(&out[4], blocks);
  store_le32(&out[8], total_bytes);
  return out;
}

}  // namespace kiln::sparse
