#pragma once
// The file `kilnd backup` writes: a POSIX ustar archive of plain files, so an
// operator can list and unpack it with tar(1), and kilnd reads it back with
// this small, strict reader (docs/operations.md, "Backup and restore").
//
// Members, in this order:
//   manifest.json     what the backup is (backup.cc writes and checks it)
//   manifest.sha256   the SHA-256 hex of manifest.json: a flipped byte in the
//                     manifest is caught like one in the database
//   kiln.db           the database copy (its SHA-256 is in the manifest)
//
// The reader treats the file as untrusted input: only regular-file members
// with a plain name (no '/', no "..", at most 100 bytes) are accepted, every
// header's checksum is verified, sizes are bounded by the caller, and a
// member's bytes are streamed to a callback rather than loaded whole.
//
// Errors (Result values, one-line messages naming the member or the offset):
// kInvalidArgument for a malformed or truncated archive; kInternal for I/O.
// Thread: plain blocking calls on the caller's thread.

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace kiln::backup {

// Appends members to an open file. The caller owns the FILE* and closes it.
class TarWriter {
 public:
  explicit TarWriter(std::FILE* out) : out_(out) {}
  // A member holding `data`.
  Status add(std::string_view name, std::string_view data, int64_t mtime);
  // A member holding the bytes of the file at `path` (size read first).
  Status add_file(std::string_view name, const std::string& path, int64_t mtime);
  // The two zero blocks that end an archive.
  Status finish();

 private:
  Status header(std::string_view name, int64_t size, int64_t mtime);
  Status pad(int64_t size);
  std::FILE* out_;
};

// One member as the reader meets it; `read` streams its bytes in chunks to
// `sink` and must be called at most once (unread bytes are skipped).
struct TarMember {
  std::string name;
  int64_t size = 0;
};

// Reads members in order. For each, `on_member` is called with the member and
// a function that streams its content to a sink; it returns an error to stop.
// `max_member_bytes` bounds every member.
using TarSink = std::function<Status(std::string_view chunk)>;
using TarVisitor = std::function<Status(const TarMember&, const std::function<Status(const TarSink&)>& read)>;
Status read_tar(std::FILE* in, int64_t max_member_bytes, const TarVisitor& on_member);

}  // namespace kiln::backup
