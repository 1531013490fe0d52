#pragma once
// PortalAssets: the tenant portal's built files (web/dist, written by
// `make build`), read once at start-up and served from memory for GET and
// HEAD requests that no API route matches (Api::handle asks it last, so no
// API route can be shadowed by a file).
//
// Why it is shaped like this:
//  - A request path never reaches the filesystem. load() lists the directory
//    once; serve() looks the path up in that map by exact name. "..", "%2e%2e",
//    a symlink swapped in later or a file added after start cannot be served.
//  - "/" and the portal's client routes get index.html. A client route is the
//    rule single-page-app servers use: GET/HEAD, the last segment has no dot,
//    the client accepts text/html, and it is not under /v1/ (API clients keep
//    their problem+json 404).
//  - Files under assets/ carry a content hash in their names (Vite), so they
//    are cached for a year as immutable; everything else (index.html) is
//    revalidated on every load (no-cache + ETag, 304 on If-None-Match) so a
//    new build shows at once.
//  - Every portal response carries a strict Content-Security-Policy: scripts,
//    styles and connections only from kilnd's own origin, no inline script,
//    no framing; plus nosniff and no-referrer.
// Thread-safety: immutable after load(); serve() is const and safe from any
// thread. It does no I/O.

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "common/http/server.h"
#include "common/result.h"

namespace kiln::api {

class PortalAssets {
 public:
  // The Content-Security-Policy every portal response carries.
  static constexpr const char* kContentSecurityPolicy =
      "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
      "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
      "form-action 'self'; frame-ancestors 'none'";

  // Reads every regular file under `dir` (symlinks and dot-files skipped, at
  // most 8 levels, 64 MiB in all). kNotFound when `dir` or `dir`/index.html
  // is missing (the portal was not built); kInvalidArgument when the files
  // exceed the bound; kInternal when a file cannot be read.
  static Result<PortalAssets> load(const std::string& dir);

  // The reply for `req`, or nullopt when `req` is not for the portal (not
  // GET/HEAD, under /v1/, or neither a file nor a client route): the caller
  // then answers 404 as it would without a portal.
  std::optional<http::Response> serve(const http::Request& req) const;

  std::size_t file_count() const { return files_.size(); }

 private:
  struct File {
    std::string body;
    std::string content_type;
    std::string etag;  // a strong validator: "<sha256 prefix>"
    bool immutable = false;
  };
  http::Response reply(const http::Request& req, const File& f) const;

  std::map<std::string, File, std::less<>> files_;  // key: URL path, "/index.html"
};

}  // namespace kiln::api
