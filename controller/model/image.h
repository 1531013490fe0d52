#pragma once
// Image: an entry of the image catalogue (docs/agent-protocol.md). `os` images
// are written to a node's disk by the agent; `ramdisk` images are the deploy
// ramdisk booted by iPXE (initramfs in `source`, kernel in `kernel`).
//
// Two files may stand behind an os image. The *source* is what was
// registered: its `format`, `sha256` and `size` are the registration's and
// `path` is kilnd's local copy of it (the image-dir file itself, or the
// downloaded or uploaded copy). What the agent is *served* is the source
// itself for raw, raw+gzip and raw+zstd, and for a qcow2 the raw+sparse file
// (common/sparse_image.h) kilnd converted it to (controller/boot/image_converter.h), whose checksum,
// size and path are the `served_*` fields. served_file() is the one place that
// says which is which. Virtual nodes back their disk on the qcow2 source
// (`path`), already inspected at registration.
//
// `state` is the image's lifecycle, the canonical field:
//   awaiting_upload -> (upload) -> ready | converting
//   downloading     -> ready | converting | failed
//   converting      -> ready | failed
// with `last_error` saying why it failed. Only a `ready` image is deployed
// (image_deployable). The API still shows the older `status` field, derived
// from `state` by legacy_image_status for clients written before qcow2.

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace kiln {

// The values of Image::state.
inline constexpr std::string_view kImageAwaitingUpload = "awaiting_upload";
inline constexpr std::string_view kImageDownloading = "downloading";
inline constexpr std::string_view kImageConverting = "converting";
inline constexpr std::string_view kImageReady = "ready";
inline constexpr std::string_view kImageFailed = "failed";

struct Image {
  std::string id;           // UUID
  std::string name;         // unique
  std::string kind;         // os | ramdisk
  std::string format;       // of the source: raw | raw+gzip | raw+zstd | qcow2
  std::string sha256;       // of the source file (lowercase hex)
  int64_t size = 0;         // bytes of the source file
  std::string source;       // what was registered: a path, an http(s) URL, or "upload"
  std::string path;         // the local source file (source, or its downloaded/uploaded copy)
  std::string kernel;       // ramdisk: local path of the kernel
  std::string kernel_args;  // ramdisk: extra kernel arguments
  std::string state;        // see the top of the file
  std::string last_error;
  int64_t created_at = 0;   // ms since the epoch
  int64_t updated_at = 0;
  bool is_public = false;   // listed to tenants and deployable in their allocations
  std::string ssh_user = "root";  // os: the account cloud-init installs the tenant's keys for
  // os: whether the image's OS runs kiln-agent. Kiln's own raw images do
  // (the OS's agent reports its addresses and runs the pre-hand-off
  // validation); a distro cloud image (a genericcloud qcow2 with cloud-init)
  // does not, and is deployed by the flows for images without one
  // (controller/model/steps.h): validated in the deploy ramdisk before the
  // write, and booted when cloud-init phones home. Default at registration:
  // true for raw, raw+gzip and raw+zstd, false for qcow2
  // (default_os_agent); an explicit value wins.
  bool os_agent = true;
  // Bytes of the disk the image describes; 0 when unknown (raw+gzip and
  // raw+zstd registered directly: the agent then stops at the disk's end).
  int64_t virtual_size = 0;
  // qcow2 only, once converted: the raw+sparse file served to the agent (or
  // raw+zstd for a file an older kilnd converted: served_file()). Several
  // images with the same source sha256 share one converted file.
  std::string served_sha256;
  int64_t served_size = 0;
  std::string served_path;
};

// Image::os_agent when the registration does not say: a qcow2 is a distro
// cloud image, whose OS runs no kiln-agent; the raw formats are what Kiln's
// own image builds make, with the agent.
inline bool default_os_agent(std::string_view format) { return format != "qcow2"; }

// The name of a converted qcow2's file ends so; one that ends ".raw.zst" was
// converted by an older kilnd to raw+zstd, which the agent still reads, and
// is served as that until the image is registered again.
inline constexpr std::string_view kConvertedSuffix = ".simg";
inline constexpr std::string_view kLegacyConvertedSuffix = ".raw.zst";

// What the agent is served for an image: format, checksum, size, local path.
// For a qcow2 not yet converted, everything but the format is empty.
struct ServedFile {
  std::string format;
  std::string sha256;
  int64_t size = 0;
  std::string path;
};
ServedFile served_file(const Image& image);

// Whether `image` may be deployed now: ok, or kConflict naming /image and
// the image's state ("image X is converting"; with last_error when failed).
// The one rule behind node deploy, allocations and the content route.
Status image_deployable(const Image& image);

// The pre-qcow2 `status` the API still shows: the state, except that
// `failed` reads "error" as it did.
std::string_view legacy_image_status(std::string_view state);

}  // namespace kiln
