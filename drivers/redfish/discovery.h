#pragma once
// Finding things in a Redfish service without building URIs by hand.
//
// Every URI the driver uses comes from the service itself: the service root's
// links, collection members, @odata.id values and action targets. The only
// fixed path is the service root, /redfish/v1/, which the standard fixes.
//
// Host system selection. A GPU server's BMC often lists more than one
// ComputerSystem: NVIDIA HGX boards expose the GPU baseboard as its own
// system ("HGX_Baseboard_0"), DPUs appear as systems, and so on. Power and
// boot must go to the host. When the node names a system (bmc.system_id) it
// must match a candidate's Id, the last segment of its URI, its full URI, or
// (for virtual BMCs that name systems after domains) its Name. Otherwise the
// candidates are scored from their own resource: SystemType "Physical", CPUs
// in ProcessorSummary, a Reset action and a Boot object count for a
// candidate; an Id or Name that looks like a baseboard, a GPU board or a DPU
// counts heavily against it. Ties go to the first listed.

#include <span>
#include <string>
#include <string_view>
#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "common/result.h"
#include "drivers/redfish/client.h"
#include "drivers/redfish/inventory_parts.h"  // looks_like_baseboard

namespace kiln::redfish {

// j["@odata.id"] when it is a string, else "".
std::string odata_id(const nlohmann::json& j);
// The @odata.id of j[key] (or j[key][key2] when key2 is given), else "".
std::string link_of(const nlohmann::json& j, const char* key, const char* key2 = nullptr);
// The @odata.id of every entry of j[key] when it is an array of links.
std::vector<std::string> links_of(const nlohmann::json& j, const char* key, const char* key2 = nullptr);
// Members[].@odata.id of a collection page.
std::vector<std::string> member_uris(const nlohmann::json& collection);
// Members@odata.nextLink of a collection page, "" on the last page.
std::string next_link(const nlohmann::json& collection);

struct SystemCandidate {
  std::string uri;
  nlohmann::json resource;
};

// Index of the host system in `candidates` (see the file comment). Errors:
// kNotFound when there are no candidates, or `system_id` matches none (the
// message lists the Ids there are).
Result<std::size_t> select_host_system(const std::vector<SystemCandidate>& candidates,
                                       std::string_view system_id);

struct HostSystem {
  std::string uri;
  nlohmann::json resource;
  std::string etag;  // ETag header, else the resource's @odata.etag
};

// The ETag of an answer: its header, else the body's @odata.etag.
std::string etag_of(const RfResponse& r);

// Finds (and caches in the client) the host ComputerSystem and returns its
// current resource. A cached URI that now answers 404 is discovered again.
// With `members` (the caller keeps them alive), a system already found is
// read for those top-level members only (RedfishClient::get); discovery
// reads every candidate whole, since it scores them.
// Errors: those of RedfishClient::get, and kNotFound from select_host_system.
asio::awaitable<Result<HostSystem>> find_host_system(RedfishClient& client, std::string system_id,
                                                     Deadline deadline,
                                                     std::span<const std::string_view> members = {});

}  // namespace kiln::redfish
