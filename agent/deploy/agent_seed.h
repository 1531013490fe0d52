#pragma once
// The os-phase agent's seed: what it needs to prove to kilnd that it runs on
// the node kilnd just deployed (docs/agent-protocol.md, "Trust").
//
//   KILN_API=<kilnd URL>          optional (DHCP option 224 also says it)
//   KILN_NODE=<node uuid>         optional hint
//   KILN_OS_SECRET=<hex>          the deploy's secret, presented at lookup
//   KILN_TLS_SHA256=<hex>         kilnd's certificate pin; absent = plain HTTP
//
// KEY=VALUE lines, as written by kilnd for a virtual node (the NoCloud seed's
// kiln-agent.env, /etc/kiln/agent.env from user-data) and by the ramdisk
// agent on a bare-metal node's disk: the seed block, the last 4 KiB of the
// deployed disk, "KILNSEED1\n" then the lines, zero-padded. The end of the
// disk is outside any image smaller than the disk, so the block neither
// touches the image nor is touched by it; an image that fills the whole disk
// leaves no room and write_image fails with a clear error. The config drive
// (config_drive_partition.h), written next, covers the disk's end and moves
// the block to the first 4 KiB of its partition. The OS's agent looks for
// the magic in its disks' last 4 KiB, then at the start of each of their
// partitions. Secrets are never logged.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "agent/deploy/seed_env.h"  // AgentSeed, parse_seed_env, render_seed_env
#include "agent/net/http_client.h"
#include "common/result.h"

namespace kiln::agent {

// Writes the seed block at the end of the disk or file at `device`, which
// holds an image of `image_bytes`. kInvalidArgument when the block would
// overlap the image; kInternal on I/O errors. Blocking.
Status write_seed_block(const std::string& device, std::uint64_t image_bytes, const AgentSeed& seed);

// The seed block of `device`; nullopt when it has none (or cannot be read).
std::optional<AgentSeed> read_seed_block(const std::string& device);
// The seed block at byte `offset` of `device` (a config drive partition's start).
std::optional<AgentSeed> read_seed_block_at(const std::string& device, std::uint64_t offset);

// The seed of the first managed disk under `root` (block_devices.h) whose
// last 4 KiB, or the first 4 KiB of one of its partitions (by
// /sys/block/<disk>/<part>/start), is a seed block; nullopt when none is.
std::optional<AgentSeed> find_seed_on_disks(const std::string& root);

// A virtual node's seed: when <root>/sys/class/dmi/id/product_serial is
// "ds=nocloud-net;s=<url>" (what kilnd puts in the domain's SMBIOS; "ds=nocloud;..." too), GET
// <url>kiln-agent.env (kilnd serves it only to the VM's leased address).
// nullopt when the serial names no NoCloud seed. Errors: the HTTP client's,
// kUnavailable for a non-200 answer, the parser's. Blocking.
Result<std::optional<AgentSeed>> fetch_nocloud_seed(const std::string& root, const HttpClientOptions& http);

}  // namespace kiln::agent
