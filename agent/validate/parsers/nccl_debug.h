#pragma once
// Parser for NCCL debug logs (NCCL_DEBUG=INFO or TRACE), as printed by any
// NCCL program (nccl-tests, PyTorch, ...), with or without Open MPI tags.
//
// It answers "which transports did NCCL pick": per connection the transport
// after `via` (P2P/IPC/read, P2P/CUMEM, SHM/direct/direct, NET/IB/0/GDRDMA,
// NET/Socket/0, NET/AWS Libfabric/1/GDRDMA, ...), whether GPUDirect RDMA was
// used, the network NCCL chose ("Using network IB|Socket|AWS Libfabric|..."),
// the IB/socket devices and OFI provider it selected, and the
// "GPU Direct RDMA Enabled/Disabled for HCA" lines.
//
// Result shape:
//   {
//     "format": "nccl-debug",
//     "nccl_version": str | null,
//     "ranks_seen": [int],                     // from "[1,N]<stdout>:" tags or "[dev]"
//     "network": {"name": "Socket"|"IB"|"AWS Libfabric"|..|null,   // "Using network X"
//                 "kind": "IB"|"Socket"|"OFI"|<name>|null,
//                 "using_network_lines": int,
//                 "ofi_provider": str|null, "ib_devices": [str], "socket_devices": [str],
//                 "ib_no_device": bool, "ib_no_device_lines": int,
//                 "socket_threads": int|null, "sockets_per_thread": int|null, "socket_thread_lines": int,
//                 "plugin_messages": [str]},
//     "gdr_hca": [{"plugin": "NET/IB", "hca_index": 0, "hca": "mlx5_0", "enabled": bool}],
//     "connections": [{"channel","from_rank","from_dev","to_rank","to_dev",
//                      "direction": "send"|"receive"|null, "via": str,
//                      "transport": "P2P/IPC"|"SHM"|"NET/IB"|..., "gdrdma": bool}],
//     "connection_counts": {"<via without device index>": n},  // e.g. "NET/Socket": 8
//     "net_connections": int, "net_gdrdma_connections": int,
//     "net_device_counts": {"0": n, ...},
//     "ring_channels": int,                    // distinct "Channel NN/MM :  r r r" ring lines
//     "connected_all_rings": int, "connected_all_trees": int,
//     "channel_counts": {"coll": 8, "p2p": 8, "p2p_per_peer": 1, ...} | null,
//     "warnings": [str],                       // "NCCL WARN" lines
//     "nccl_tests": {...} | null,              // parse_nccl_tests() of the same text, when it has a table
//     "summary": {"transports": [..], "gdrdma": bool, "net": "IB"|"Socket"|"OFI"|..|null,
//                 "socket_fallback": bool},
//     "health": {...}
//   }
// Health fails when inter-node connections run over NET/Socket (TCP fallback),
// when a "GPU Direct RDMA Disabled for HCA" line is present, when NET
// connections over an RDMA network do not use GDRDMA, and on NCCL WARN lines.

#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::agent {

// Parses an NCCL debug log. kInvalidArgument when no "NCCL INFO"/"NCCL WARN"
// line is present (NCCL_DEBUG was not set, or it is another tool's output).
Result<nlohmann::json> parse_nccl_debug(std::string_view text);

}  // namespace kiln::agent
