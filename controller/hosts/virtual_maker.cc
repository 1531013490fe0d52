#include "controller/hosts/virtual_maker.h"

#include "controller/hosts/placement.h"

namespace kiln {

Result<VirtualNodeMaker> virtual_node_maker(const Profile& profile) {
  Result<Flavour> flavour = flavour_of_profile(profile.doc, profile.name);
  if (!flavour) return flavour.take_error();
  VirtualNodeMaker m;
  std::string profile_name = profile.name;
  m.make = [profile_name](const Allocation&) {
    Node n;
    n.kind = NodeKind::kVirtual;
    n.profile = profile_name;
    n.provision_state = ProvisionState::kAvailable;
    n.power_state = PowerState::kOff;
    n.bmc.driver = "libvirt";
    n.bmc.options = nlohmann::json::object();
    return n;
  };
  Flavour f = *flavour;
  m.plan = [f](const Host& host, const std::vector<HostReservation>& booked, const std::string& node_id) {
    return plan_placement(host, booked, f, node_id);
  };
  return m;
}

Result<std::optional<VirtualNodeMaker>> guest_maker(CatalogueStore& store, const Allocation& a) {
  if (a.kind != NodeKind::kVirtual) return std::optional<VirtualNodeMaker>();
  Result<Profile> p = store.get_profile(a.profile);
  if (!p) return p.take_error();
  Result<VirtualNodeMaker> m = virtual_node_maker(*p);
  if (!m) return std::optional<VirtualNodeMaker>();
  return std::optional<VirtualNodeMaker>(std::move(*m));
}

}  // namespace kiln
