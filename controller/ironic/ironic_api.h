#pragma once
// IronicApi: the part of OpenStack Ironic's REST API that Ironic's clients
// use (openstack baremetal, openstacksdk, gophercloud / Metal3,
// terraform-provider-ironic), served under a prefix of kilnd's listener over
// the same nodes, store, engine and tokens as /v1. docs/ironic-api.md says
// what is served and how Kiln's nodes look through it.
//
// The frame is here: the version documents, microversion negotiation, the
// version headers on every reply (errors too), authentication, role checks
// and Ironic's error body. Routes are added by the files named in
// ironic_routes.h.
//
// Lifetime and threading: construct after the Api and before the server
// starts; it mounts itself on the Api (Api::mount), which then calls it
// concurrently from the I/O threads. It must outlive the server's last
// request (declare it after the Api in main).

#include <memory>
#include <string>
#include <string_view>

#include "controller/api/api.h"

namespace kiln::ironic {

// Where the API is mounted on kilnd's listener: the endpoint a client is
// given is http(s)://host:port/ironic.
inline constexpr std::string_view kIronicPrefix = "/ironic";

class IronicApi {
 public:
  // Mounts itself on `api` under `prefix` (starts with '/', no trailing '/').
  explicit IronicApi(Api& api, std::string prefix = std::string(kIronicPrefix));
  ~IronicApi();
  IronicApi(const IronicApi&) = delete;
  IronicApi& operator=(const IronicApi&) = delete;

  // Every route as (method, path template with the prefix), for tests.
  std::vector<std::pair<std::string, std::string>> routes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::ironic
