#pragma once
// The VirtualNodeMaker of a profile (controller/store/allocation_store.h):
// how a virtual allocation of that profile books its guests on hosts and
// makes the nodes the pool lacks. Pure: the store calls it inside the claim's
// transaction.
//
// A made node is what POST /v1/nodes {"kind": "virtual"} makes
// (controller/api/virtual_nodes.cc): the profile, driver libvirt, available,
// powered off, on no host in particular (placement picks one). The
// allocation's traits are not copied onto it: traits describe hardware an
// operator vouched for, so an allocation that asks for traits is served from
// pooled nodes that carry them, never from made ones.

#include "common/result.h"
#include "controller/model/validation.h"
#include "controller/store/allocation_store.h"
#include "controller/store/catalogue_store.h"

namespace kiln {

// kInvalidArgument naming /profile when the profile has no `virtual` flavour.
Result<VirtualNodeMaker> virtual_node_maker(const Profile& profile);

// The maker allocation `a` claims with (the API's create, the engine's
// replacements): nullopt for bare metal, and for a profile without a virtual
// flavour (its pooled virtual nodes are claimed as they are). Reads the
// profile: blocking, call on the store's pool. Errors are the store's.
Result<std::optional<VirtualNodeMaker>> guest_maker(CatalogueStore& store, const Allocation& a);

}  // namespace kiln
