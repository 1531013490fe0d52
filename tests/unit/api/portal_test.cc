// The portal's file serving (controller/api/portal.h): what is served, with
// which headers, what is never served, and that API routes keep priority.

#include "controller/api/portal.h"

#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/unit/api/api_harness.h"

using namespace kiln;
using namespace kiln::test;
using kiln::api::PortalAssets;
using V = http::bhttp::verb;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// A built portal as Vite lays it out, plus things that must never be served.
struct PortalDir {
  PortalDir() {
    char tmpl[] = "/tmp/kiln-portal-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    root = tmpl;
    dist = root / "dist";
    write(dist / "index.html", "<!doctype html><title>Kiln</title>");
    write(dist / "assets" / "index-3f2a9c.js", "console.log('kiln')");
    write(dist / "assets" / "index-77aa01.css", "body{}");
    write(dist / "favicon.svg", "<svg/>");
    write(dist / ".env", "SECRET=1");
    write(root / "outside.txt", "outside the portal");
    fs::create_symlink(root / "outside.txt", dist / "linked.txt");
    fs::create_directory_symlink(root, dist / "assets" / "up");
  }
  ~PortalDir() { fs::remove_all(root); }
  fs::path root, dist;
};

http::Request get(const std::string& target, const std::string& accept = "") {
  http::Request req{V::get, target, 11};
  if (!accept.empty()) req.set(http::bhttp::field::accept, accept);
  return req;
}

constexpr const char* kBrowserAccept = "text/html,application/xhtml+xml,*/*;q=0.8";

}  // namespace

TEST_CASE("portal: a directory without index.html is not a portal") {
  CHECK(PortalAssets::load("/nonexistent/kiln-web").error().code == Code::kNotFound);
  PortalDir d;
  fs::remove(d.dist / "index.html");
  CHECK(PortalAssets::load(d.dist.string()).error().code == Code::kNotFound);
  fs::create_symlink(d.root / "outside.txt", d.dist / "index.html");  // only regular files are served
  CHECK(PortalAssets::load(d.dist.string()).error().code == Code::kNotFound);
}

TEST_CASE("portal: index.html is revalidated, hashed assets are immutable, types follow the name") {
  PortalDir d;
  Result<PortalAssets> p = PortalAssets::load(d.dist.string());
  REQUIRE(p);
  CHECK(p->file_count() == 4);  // index, js, css, favicon: no dot-file, no symlink

  std::optional<http::Response> index = p->serve(get("/"));
  REQUIRE(index);
  CHECK(index->result_int() == 200);
  CHECK(index->body() == "<!doctype html><title>Kiln</title>");
  CHECK((*index)[http::bhttp::field::content_type] == "text/html; charset=utf-8");
  CHECK((*index)[http::bhttp::field::cache_control] == "no-cache");
  CHECK((*index)["Content-Security-Policy"] == PortalAssets::kContentSecurityPolicy);
  CHECK((*index)["X-Content-Type-Options"] == "nosniff");
  const std::string etag((*index)[http::bhttp::field::etag]);
  CHECK(etag.size() == 34);

  http::Request again = get("/?from=bookmark");
  again.set(http::bhttp::field::if_none_match, "W/\"other\", " + etag);
  std::optional<http::Response> cached = p->serve(again);
  REQUIRE(cached);
  CHECK(cached->result_int() == 304);
  CHECK(cached->body().empty());

  std::optional<http::Response> js = p->serve(get("/assets/index-3f2a9c.js"));
  REQUIRE(js);
  CHECK(js->body() == "console.log('kiln')");
  CHECK((*js)[http::bhttp::field::content_type] == "text/javascript; charset=utf-8");
  CHECK((*js)[http::bhttp::field::cache_control] == "public, max-age=31536000, immutable");
  CHECK((*p->serve(get("/assets/index-77aa01.css")))[http::bhttp::field::content_type] == "text/css; charset=utf-8");
  CHECK((*p->serve(get("/favicon.svg")))[http::bhttp::field::content_type] == "image/svg+xml");

  http::Request head{V::head, "/assets/index-3f2a9c.js", 11};
  CHECK(p->serve(head)->result_int() == 200);
}

TEST_CASE("portal: client routes get index.html, but API paths, other methods and unknown files do not") {
  PortalDir d;
  Result<PortalAssets> p = PortalAssets::load(d.dist.string());
  REQUIRE(p);
  std::optional<http::Response> fleet = p->serve(get("/fleet", kBrowserAccept));
  REQUIRE(fleet);
  CHECK(fleet->body() == "<!doctype html><title>Kiln</title>");
  CHECK(p->serve(get("/allocations/a-1", kBrowserAccept))->result_int() == 200);

  CHECK_FALSE(p->serve(get("/fleet")));                             // not a browser navigation
  CHECK_FALSE(p->serve(get("/v1/nope", kBrowserAccept)));           // the API's 404
  CHECK_FALSE(p->serve(get("/v1", kBrowserAccept)));
  CHECK_FALSE(p->serve(get("/assets/missing-000.js", kBrowserAccept)));  // a file, not a route
  http::Request post{V::post, "/", 11};
  CHECK_FALSE(p->serve(post));
}

TEST_CASE("portal: nothing outside the listed files is reachable") {
  PortalDir d;
  Result<PortalAssets> p = PortalAssets::load(d.dist.string());
  REQUIRE(p);
  for (const char* target : {"/.env", "/linked.txt", "/assets/up/outside.txt", "/../outside.txt",
                             "/assets/../../outside.txt", "/assets/%2e%2e/%2e%2e/outside.txt",
                             "/assets//index-3f2a9c.js", "/ASSETS/index-3f2a9c.js"}) {
    INFO(target);
    std::optional<http::Response> r = p->serve(get(target));
    CHECK_FALSE(r);
  }
  // Files added after start are not served either: the listing is fixed at load().
  write(d.dist / "assets" / "late-000.js", "late");
  CHECK_FALSE(p->serve(get("/assets/late-000.js")));
}

TEST_CASE("portal: kilnd's API answers as before with the portal in front of the 404") {
  PortalDir d;
  Result<PortalAssets> p = PortalAssets::load(d.dist.string());
  REQUIRE(p);
  ApiHarness h(std::chrono::seconds(15), HostRegistryOptions(), &*p);
  Resp index = h.call(V::get, "/", "");
  CHECK(index.status == 200);
  CHECK(index.header("content-type") == "text/html; charset=utf-8");
  CHECK(h.call(V::get, "/healthz", "").json["status"] == "ok");
  CHECK(h.call(V::get, "/v1/nodes", "").status == 401);
  Resp missing = h.call(V::get, "/v1/nope", "", "", {.headers = {{"Accept", kBrowserAccept}}});
  CHECK(missing.status == 404);
  CHECK(missing.header("content-type") == "application/problem+json");
  CHECK(h.call(V::get, "/fleet", "", "", {.headers = {{"Accept", kBrowserAccept}}}).status == 200);
  CHECK(h.call(V::post, "/", h.kAdminSecret, "{}").status == 404);
}
