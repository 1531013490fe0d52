#pragma once
// MPI hostfile text (Open MPI's format, which MPICH's Hydra also reads):
// "<address> slots=<n>" per reachable node. The address is a canonical IP
// literal and the count a bounded integer (cli/host_fields.h), so a line can
// hold nothing else: no second host, no comment, no extra option. Pure and
// thread-compatible.

#include <string>
#include <vector>

#include "cli/host_fields.h"

namespace kiln::cli {

struct HostfileEntry {
  IpLiteral address;
  SlotCount slots;
};

std::string hostfile_text(const std::vector<HostfileEntry>& entries);

}  // namespace kiln::cli
