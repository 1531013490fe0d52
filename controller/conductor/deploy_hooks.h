#pragma once
// What a deploy asks of the rest of kilnd, as callbacks the conductor is
// given (ConductorOptions) and hands to its Workflow: the allocation's SSH
// keys and user data, a node's own config drive, the phone-home URL and the
// wait for it. Apart from workflow.h so that conductor.h, which only carries
// them, does not include the workflow.

#include <functional>
#include <optional>
#include <string>
#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange

#include <boost/asio/awaitable.hpp>

#include "common/result.h"
#include "controller/model/node.h"
#include "controller/tenancy/config_drive.h"

namespace kiln {

namespace asio = boost::asio;

// What the config drive carries from allocation `id` (its SSH keys and user
// data): the allocation store's get_allocation, on the store's pool.
// kNotFound when there is no such allocation; other errors fail the step.
using TenantAccessLookup = std::function<asio::awaitable<Result<TenantAccess>>(std::string id)>;
// The deploy's one-time phone-home URL for node `id` (AgentBroker::
// phone_home_url), which the config drive's user-data gives cloud-init's
// phone_home; "" when kilnd has no boot URL. Errors fail the step.
using PhoneHomeLookup = std::function<asio::awaitable<Result<std::string>>(std::string id)>;
// A config drive the node was given with its deploy rather than through an
// allocation (the Ironic API's configdrive object, kept in Node::ironic):
// its keys and user data, and a host name ("" = the node's). nullopt when
// the node has none. Pure: reads only the node record it is given.
struct OwnConfigDrive {
  TenantAccess access;
  std::string hostname;
};
using OwnConfigDriveOf = std::function<std::optional<OwnConfigDrive>(const Node& node)>;
// False once the operation no longer holds the node; cheap enough to call
// every few hundred milliseconds (agent waits poll it).
using HeldCheck = std::function<asio::awaitable<bool>()>;
// Until node `id`'s deployed OS has posted to the deploy's phone-home URL
// (AgentBroker::wait_for_phone_home): ok, kConflict once `still_held` turns
// false, kUnavailable on shutdown, or a store error.
using PhoneHomeWait = std::function<asio::awaitable<Status>(std::string id, HeldCheck still_held)>;

}  // namespace kiln
