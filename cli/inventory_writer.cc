#include "cli/inventory_writer.h"

namespace kiln::cli {

std::string inventory_text(const std::vector<InventoryGroup>& groups) {
  std::string s;
  for (const InventoryGroup& g : groups) {
    s += "[" + g.name.str() + "]\n";
    for (const InventoryHost& h : g.hosts) {
      if (!h.address) {
        s += "# " + h.name.str() + ": no address reported yet\n";
        continue;
      }
      s += h.name.str() + " ansible_host=" + h.address->str();
      if (h.user) s += " ansible_user=" + h.user->str();
      s += "\n";
    }
    s += "\n";
  }
  return s;
}

}  // namespace kiln::cli
