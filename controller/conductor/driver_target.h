#pragma once
// The one place a Node becomes what a driver call needs (drivers/driver.h
// DriverTarget): node id, BMC, boot mode, MACs and the BMC password opened
// from its sealed form (a power-sync row: node id, BMC and password only,
// which is all a power read uses). Every caller (provisioning flows, on-demand
// validation, power sync) builds its target here, so a password that cannot
// be opened is an error with a reason everywhere, never an empty password.
//
// Pure apart from the SecretBox; callable from any thread.

#include "common/crypto.h"
#include "common/result.h"
#include "controller/model/node.h"
#include "controller/store/node_repo.h"
#include "drivers/driver.h"

namespace kiln {

// Errors: kInternal "cannot decrypt the BMC password: ..." when the sealed
// password does not open with this kilnd's key.
Result<DriverTarget> driver_target(const Node& node, const SecretBox& secrets);
// For a power read (PowerSync): no boot mode, no MACs. Errors as above.
Result<DriverTarget> driver_target(const PowerSyncNode& node, const SecretBox& secrets);

}  // namespace kiln
