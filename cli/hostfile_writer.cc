#include "cli/hostfile_writer.h"

namespace kiln::cli {

std::string hostfile_text(const std::vector<HostfileEntry>& entries) {
  std::string s;
  for (const HostfileEntry& e : entries) s += e.address.str() + " slots=" + std::to_string(e.slots.value()) + "\n";
  return s;
}

}  // namespace kiln::cli
