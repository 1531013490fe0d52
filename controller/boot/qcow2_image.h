#pragma once
// qcow2 images: inspect a tenant's qcow2 without trusting it, and convert it to
// the raw+sparse stream the agent writes (common/sparse_image.h,
// agent/deploy/stream_decoder.h).
//
// A qcow2 file is a set of pointers, and some of them point outside the file: a
// backing file ("read the rest of this disk from /etc/shadow"), an external
// data file (the same, for every cluster), an encryption key secret. Those are
// how a crafted image makes qemu-img read host files into an image we then
// serve, so they are refused before qemu-img ever opens the file: kilnd reads
// the header itself (parse_qcow2_header, a pure function of the header bytes),
// then asks qemu-img for its view and checks that both agree. qemu-img is
// always given the file through --image-opts with driver=qcow2 and
// file.driver=file, so no path (even one named "nbd:..." or "json:{...}") can
// be read as a protocol, and no probing can take another format.
//
// Threading: every function here blocks (file I/O, child processes) and is
// thread-safe; callers run it on the BlockingPool, never on an I/O thread.

#include <cstdint>
#include <span>
#include <string>

#include "common/result.h"

namespace kiln::boot {

struct Qcow2Info {
  int64_t virtual_size = 0;  // bytes of the disk the image describes
  int64_t file_size = 0;     // bytes of the qcow2 file
  int version = 0;           // 2 or 3
  int64_t cluster_size = 0;  // bytes, 512 .. 2 MiB
};

// Largest virtual size accepted: no disk we deploy to is larger, and a bound
// keeps every size computation far from overflow.
inline constexpr int64_t kMaxQcow2VirtualSize = int64_t{64} << 40;  // 64 TiB

// Parses and checks the qcow2 header, its header extensions and the bounds of
// its tables from `head`, the first bytes of the file (at least the cluster
// holding the header: the first kQcow2HeadBytes, the largest cluster qemu
// opens, or the whole file if shorter), and `file_size`, the size of the
// whole file. Pure: no I/O; any bytes and any size are safe to pass (the
// fuzzer does). Errors (all kUnprocessable, the message naming the reason):
// not a qcow2 ("not a qcow2 image (bad magic)"), unsupported version,
// truncated header or tables, a backing file, an external data file,
// encryption, unknown incompatible feature bits, the corrupt bit, a virtual
// size of 0, not a multiple of 512 or above kMaxQcow2VirtualSize, and fields
// out of their spec's range (cluster_bits, header_length, ...).
inline constexpr size_t kQcow2HeadBytes = size_t{2} << 20;
Result<Qcow2Info> parse_qcow2_header(std::span<const uint8_t> head, int64_t file_size);

// Blocking. Reads the header ITSELF (never trusting qemu first) and refuses,
// with kUnprocessable and a message naming the reason, everything
// parse_qcow2_header refuses. Then runs `qemu-img info --output=json` on it
// (argv, no shell, through --image-opts as above) and checks qemu agrees
// (format qcow2, same virtual-size, no backing-filename, no data-file, not
// encrypted); its JSON is parsed as untrusted and bounded. Errors:
// kUnprocessable (the image), kNotFound (no such file), kInternal (qemu-img
// missing or failing for a reason that is not the image's).
Result<Qcow2Info> inspect_qcow2(const std::string& path, const std::string& qemu_img = "/usr/bin/qemu-img");

struct ConvertOptions {
  std::string qemu_img = "/usr/bin/qemu-img";
  // Where the temporary raw files go (the same filesystem as dest is best);
  // empty means dest's directory.
  std::string work_dir;
  // Bytes of the virtual disk per qemu-img run over compressed clusters (a
  // positive multiple of 512). Each run costs a process start (~10 ms); the
  // last window's copy is the part of the work that cannot overlap qemu-img,
  // so smaller is faster down to a few dozen MiB. Two windows at most are on
  // disk at once, so this bounds the work directory's use too.
  int64_t slice_bytes = int64_t{64} << 20;
  // Largest virtual size converted: set this to the largest disk an image may
  // be deployed to (a qcow2 of a few KiB can describe 64 TiB of zeros).
  int64_t max_virtual_size = kMaxQcow2VirtualSize;
};

struct ConvertedImage {
  std::string sha256;        // lowercase hex of the raw+sparse file as written
  int64_t size = 0;          // bytes of the raw+sparse file
  int64_t virtual_size = 0;  // bytes of the disk it describes
};

// Blocking (seconds to minutes: callers run it on the BlockingPool; it starts
// two threads of its own). Inspects `source` (as above), asks `qemu-img map`
// for the layout of its disk (qcow2_map.h), and writes dest + ".part" as a
// raw+sparse stream in disk order, hashing as it writes: runs of zeros are
// fill chunks; plain clusters are copied straight from the qcow2 file at
// the offsets the map gives (the bounds checked); compressed clusters are
// decoded by `qemu-img convert` (image-opts as above) into sparse temporary
// raw files, slice_bytes of the disk at a time, one window ahead of the
// writer. Then it fsyncs and renames to dest (a dest already there is
// replaced). The stream's data is exactly `qemu-img convert -O raw`'s.
// On ANY failure every partial file (temp raw, .part) is removed and the error
// says why; a full disk (ENOSPC from us or qemu-img) gives kInsufficientStorage with a
// message starting "no space left on device". Errors: those of inspect_qcow2
// and parse_qemu_map, kInsufficientStorage (disk full), kUnprocessable (qemu-img
// cannot convert the image's data, with its words), kInvalidArgument
// (options), kInternal (I/O, qemu-img missing or timed out).
Result<ConvertedImage> convert_qcow2(const std::string& source, const std::string& dest, const ConvertOptions& opt);

}  // namespace kiln::boot
