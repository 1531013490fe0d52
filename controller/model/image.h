#pragma once
// Image: an entry of the image catalogue (docs/agent-protocol.md). `os` images
// are written to a node's disk by the agent; `ramdisk` images are the deploy
// ramdisk booted by iPXE (initramfs in `source`, kernel in `kernel`).

#include <cstdint>
#include <string>

namespace kiln {

struct Image {
  std::string id;           // UUID
  std::string name;         // unique
  std::string kind;         // os | ramdisk
  std::string format;       // raw | raw+gzip | raw+zstd
  std::string sha256;       // of the file as served (lowercase hex)
  int64_t size = 0;         // bytes of the file as served
  std::string source;       // what was registered: a path, an http(s) URL, or "upload"
  std::string path;         // the local file kilnd serves (source, or its downloaded/uploaded copy)
  std::string kernel;       // ramdisk: local path of the kernel
  std::string kernel_args;  // ramdisk: extra kernel arguments
  std::string status;       // ready | downloading | error | awaiting_upload
  std::string last_error;
  int64_t created_at = 0;   // ms since the epoch
  int64_t updated_at = 0;
  bool is_public = false;   // listed to tenants and deployable in their allocations
  std::string ssh_user = "root";  // os: the account cloud-init installs the tenant's keys for
};

}  // namespace kiln
