#pragma once
// BlockDevice: a disk (or, in tests, a regular file standing in for one)
// opened for large aligned I/O. Writes and reads go through an O_DIRECT
// descriptor when the offset, length and buffer are aligned to the logical
// block size, so a multi-GiB image does not churn the ramdisk's page cache;
// a second, buffered descriptor takes everything else (an image's unaligned
// tail, filesystems such as tmpfs that refuse O_DIRECT). All calls block.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/result.h"

namespace kiln::agent {

// A heap buffer aligned for O_DIRECT (4 KiB), zero-filled on creation.
class AlignedBuffer {
 public:
  explicit AlignedBuffer(std::size_t size);
  char* data() { return data_.get(); }
  const char* data() const { return data_.get(); }
  std::size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(char* p) const;
  };
  std::unique_ptr<char, Free> data_;
  std::size_t size_;
};

class BlockDevice {
 public:
  static constexpr std::size_t kAlignment = 4096;

  // Opens `path` read-write (read-only when `writable` is false). Errors:
  // kNotFound when it does not exist, kPermissionDenied, kInvalidArgument when
  // it is neither a block device nor a regular file, kInternal otherwise.
  static Result<BlockDevice> open(const std::string& path, bool writable = true);

  BlockDevice(BlockDevice&& o) noexcept;
  BlockDevice& operator=(BlockDevice&& o) noexcept;
  BlockDevice(const BlockDevice&) = delete;
  BlockDevice& operator=(const BlockDevice&) = delete;
  ~BlockDevice();

  const std::string& path() const { return path_; }
  std::uint64_t size() const { return size_; }
  unsigned logical_block_size() const { return logical_block_size_; }
  bool is_block_device() const { return block_; }
  bool direct_io() const { return direct_fd_ >= 0; }

  // Writes/reads exactly n bytes at offset. Errors: kInternal with errno's words.
  Status write_at(std::uint64_t offset, const char* data, std::size_t n);
  Status read_at(std::uint64_t offset, char* data, std::size_t n);
  // Writes n zero bytes at offset in large chunks.
  Status zero_range(std::uint64_t offset, std::uint64_t n);

  // BLKDISCARD over [offset, offset+n). Returns false (not an error) when the
  // device does not support discard or is not a block device.
  Result<bool> discard(std::uint64_t offset, std::uint64_t n);

  // fsync() both descriptors.
  Status sync();
  // Drops cached pages so a following read comes from the device (verify).
  void drop_cache();

 private:
  BlockDevice() = default;
  bool aligned(std::uint64_t offset, const void* data, std::size_t n) const;

  std::string path_;
  int fd_ = -1;         // buffered
  int direct_fd_ = -1;  // O_DIRECT, or -1 when unsupported
  std::uint64_t size_ = 0;
  unsigned logical_block_size_ = 512;
  bool block_ = false;
};

}  // namespace kiln::agent
