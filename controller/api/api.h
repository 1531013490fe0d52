#pragma once
// Api: Kiln's REST API (v1) as an http::Handler.
//
// handle() turns one parsed request into a Reply and never touches a socket:
// it authenticates the bearer token, routes by path template, checks the
// role, runs the route, and turns every Error into RFC 9457 problem+json via
// http_status(). Every mutating request (POST/PUT/PATCH/DELETE) is recorded in
// the audit log — failed and unauthenticated ones too — and every request is
// timed into /metrics by route template. Routes live in *_routes.cc, one file
// per resource; the contract of each is in schemas/openapi.yaml, served as
// GET /openapi.json.
//
// Threading: handle() may run concurrently on several I/O threads. Store calls
// go through ApiDeps::db (a BlockingPool); the Api keeps no per-request state.
// The Api registers itself as the store's event listener (to wake SSE
// streams) and resets it in its destructor; it must outlive every Reply it
// returned (a stream's function refers to it), so stop the server first.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/blocking_pool.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "common/http/server.h"
#include "common/log.h"
#include "common/result.h"
#include "controller/agent/agent_broker.h"
#include "controller/conductor/conductor.h"
#include "controller/store/store.h"

namespace kiln {

namespace api {
class PortalAssets;
struct ApiContext;
struct RequestRecord;
}  // namespace api
class AgentAuthority;
class AllocationEngine;
class LeaseAddressLearner;
class HostRegistry;
namespace boot {
struct BootSettings;
class ImageFetcher;
class ImageDirs;
class ImageConverter;
}  // namespace boot

struct ApiDeps {
  NodeStore& store;
  BlockingPool& db;
  Conductor& conductor;
  const SecretBox& secrets;
  const Clock& clock;
  Logger log;
  // Live HTTP connections for /metrics (HttpServer::connection_count); may be empty.
  std::function<std::size_t()> connection_count;
  // SSE keep-alive comment interval: short enough that proxies with a 30-60 s
  // idle timeout keep the stream open.
  std::chrono::milliseconds sse_keepalive{std::chrono::seconds(15)};
  // The services below that a route cannot do without are declared by the
  // route (api::Needs, route_table.h): when one is null the route answers 503
  // naming it and its handler never runs. The others are optional, each with
  // the default its comment names.
  //
  // kiln-agent's side (/v1/agent/*; Needs::kAgentBroker).
  AgentBroker* agent_broker = nullptr;
  // --- boot chain and images (controller/boot; boot_routes.h) ---
  // Boot tokens and agent sessions, as the boot scripts and image serving
  // need them (the broker, behind its interface). Null: ramdisk boot scripts
  // answer 503 and os images need a staff token.
  AgentAuthority* agents = nullptr;
  // Records a node's addresses from the DHCP leases when its OS phones home
  // (lease_address_learner.h); null = kilnd has no lease file to learn from.
  LeaseAddressLearner* leased_addresses = nullptr;
  // Boot URL and deploy ramdisk name; null = defaults (URL from Host).
  const boot::BootSettings* boot = nullptr;
  // Downloads http(s) image sources; null = only local paths are accepted.
  boot::ImageFetcher* image_fetcher = nullptr;
  // The only directories image files are read from (registration and
  // serving); null = no local sources, no image bytes served, and uploads
  // answer 503 (Needs::kImageDirs).
  const boot::ImageDirs* image_dirs = nullptr;
  // Converts qcow2 images to what the agent is served; null = qcow2 refused.
  boot::ImageConverter* image_converter = nullptr;
  // Largest image upload (PUT /v1/images/{id}/content; --image-upload-max).
  uint64_t image_upload_max = uint64_t{64} << 30;
  // Also told the highest seq after every store commit that appended events
  // (the DnsmasqSupervisor resyncs its hosts on port changes). May be empty.
  std::function<void(int64_t)> on_events;
  // --- virtual nodes (hosts_routes.cc) ---
  // Hypervisor connections (POST /v1/hosts: Needs::kHosts).
  HostRegistry* hosts = nullptr;
  // kilnd's URL as guests reach it, for cloud-init user-data (the boot URL).
  std::function<std::string()> nocloud_base_url;
  // --- tenancy (controller/tenancy) ---
  // Drives allocations and releases them (creating and releasing one:
  // Needs::kAllocations; reads work without it).
  AllocationEngine* allocations = nullptr;
  // --- portal (web/; portal.h) ---
  // The portal's files, served for GET/HEAD requests no route matches; null:
  // those stay 404.
  const api::PortalAssets* portal = nullptr;
};

class Api {
 public:
  explicit Api(ApiDeps deps);
  ~Api();
  Api(const Api&) = delete;
  Api& operator=(const Api&) = delete;

  // The http::Handler. Never throws for bad input; a library exception
  // escaping a route becomes a 500 problem (and an error log line).
  asio::awaitable<http::Reply> handle(http::Request& req, const http::RequestInfo& info);

  // For HttpServer's ErrorResponder (413, 400, 503 raised by the transport).
  http::Response error_response(int status, std::string_view detail);

  // For ServerOptions::streamed_body: the body limit of a request whose route
  // reads its body as it arrives (RouteDef::streamed_body_max; image
  // uploads), nullopt for every other request. Thread-safe.
  std::optional<uint64_t> streamed_body(const http::RequestHeader& header) const;

  // Ends every SSE stream promptly (they return after their next wake-up,
  // which this triggers). New streams end at once. Thread-safe.
  void shutdown();

  // /readyz answers 200 only after set_ready(true) and while the store answers.
  void set_ready(bool ready);

  // Serves every request whose path is `prefix` or starts with `prefix` + "/"
  // by `handler` instead of the v1 routes and the portal: another API on the
  // same listener, TLS and tokens (the Ironic-compatible API,
  // controller/ironic). The handler builds every reply itself, errors
  // included, and fills `record` (route template, principal once known, node
  // id) so that handle() audits and times the request as it does a v1 one.
  // Set-up only, before the server starts; `prefix` starts with '/' and does
  // not end with one.
  using MountedHandler = std::function<asio::awaitable<http::Reply>(
      http::Request&, const http::RequestInfo&, const Logger&, api::RequestRecord&)>;
  void mount(std::string prefix, MountedHandler handler);

  // What the v1 routes share (store, pool, conductor, secrets, metrics), for
  // a mounted API's routes to call the same code. Lives as long as the Api.
  api::ApiContext& context();

  // Every route as (method, path template), e.g. ("GET", "/v1/nodes/{id}"):
  // for the OpenAPI consistency test and documentation tooling.
  std::vector<std::pair<std::string, std::string>> routes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Creates an admin token with `secret` iff no admin token exists (see auth.h).
Status bootstrap_admin_token(NodeStore& store, const std::string& secret, const Clock& clock);

}  // namespace kiln
