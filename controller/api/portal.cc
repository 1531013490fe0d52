#include "controller/api/portal.h"

#include <array>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string_view>
#include <system_error>

#include "common/crypto.h"
#include "controller/api/query.h"

namespace kiln::api {
namespace {

namespace fs = std::filesystem;

constexpr std::uintmax_t kMaxTotalBytes = std::uintmax_t{64} << 20;
constexpr int kMaxDepth = 8;

struct TypeByExtension {
  std::string_view ext;
  std::string_view type;
};
constexpr std::array<TypeByExtension, 14> kTypes{{
    {".html", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".mjs", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".json", "application/json"},
    {".map", "application/json"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".ico", "image/x-icon"},
    {".webp", "image/webp"},
    {".woff2", "font/woff2"},
    {".txt", "text/plain; charset=utf-8"},
    {".webmanifest", "application/manifest+json"},
    {".wasm", "application/wasm"},
}};

std::string content_type_for(std::string_view name) {
  for (const TypeByExtension& t : kTypes)
    if (name.size() > t.ext.size() && name.ends_with(t.ext)) return std::string(t.type);
  return "application/octet-stream";
}

// A client route of the single-page app (see portal.h).
bool is_client_route(const http::Request& req, std::string_view path) {
  if (path == "/v1" || path.starts_with("/v1/")) return false;
  std::string_view last = path.substr(path.rfind('/') + 1);
  if (last.find('.') != std::string_view::npos) return false;
  return req[bhttp::field::accept].find("text/html") != std::string_view::npos;
}

// If-None-Match names `etag` (a list, or "*"; weak forms compare equal).
bool not_modified(const http::Request& req, std::string_view etag) {
  std::string_view inm = req[bhttp::field::if_none_match];
  if (inm.empty()) return false;
  if (inm == "*") return true;
  while (!inm.empty()) {
    std::size_t comma = inm.find(',');
    std::string_view tag = inm.substr(0, comma);
    while (!tag.empty() && tag.front() == ' ') tag.remove_prefix(1);
    while (!tag.empty() && tag.back() == ' ') tag.remove_suffix(1);
    if (tag.starts_with("W/")) tag.remove_prefix(2);
    if (tag == etag) return true;
    if (comma == std::string_view::npos) break;
    inm.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

Result<PortalAssets> PortalAssets::load(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::path(dir) / "index.html", ec))
    return Error(Code::kNotFound, "no portal in " + dir + " (index.html missing: run make build)");
  PortalAssets out;
  std::uintmax_t total = 0;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec);
  if (ec) return Error(Code::kInternal, "cannot list " + dir + ": " + ec.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return Error(Code::kInternal, "cannot list " + dir + ": " + ec.message());
    const fs::path& p = it->path();
    const std::string name = p.filename().string();
    fs::file_status st = it->symlink_status(ec);
    if (ec) return Error(Code::kInternal, "cannot stat " + p.string() + ": " + ec.message());
    if (name.starts_with(".") || fs::is_symlink(st)) {
      if (fs::is_directory(st)) it.disable_recursion_pending();
      continue;
    }
    if (fs::is_directory(st)) {
      if (it.depth() + 1 >= kMaxDepth) it.disable_recursion_pending();
      continue;
    }
    if (!fs::is_regular_file(st)) continue;
    std::ifstream in(p, std::ios::binary);
    std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) return Error(Code::kInternal, "cannot read " + p.string());
    total += body.size();
    if (total > kMaxTotalBytes)
      return Error(Code::kInvalidArgument, "the portal in " + dir + " is larger than 64 MiB");
    std::string url = "/" + fs::relative(p, dir).generic_string();
    File f;
    f.content_type = content_type_for(name);
    f.etag = "\"" + sha256_hex(body).substr(0, 32) + "\"";
    f.immutable = url.starts_with("/assets/");
    f.body = std::move(body);
    out.files_.emplace(std::move(url), std::move(f));
  }
  // serve() answers "/" with it: a symlinked index.html was skipped above.
  if (!out.files_.contains("/index.html"))
    return Error(Code::kNotFound, "no portal in " + dir + " (index.html is not a regular file)");
  return out;
}

std::optional<http::Response> PortalAssets::serve(const http::Request& req) const {
  if (req.method() != bhttp::verb::get && req.method() != bhttp::verb::head) return std::nullopt;
  std::string_view path = split_target(req.target()).first;
  if (path == "/" || path == "/index.html") return reply(req, files_.at("/index.html"));
  if (path == "/v1" || path.starts_with("/v1/")) return std::nullopt;
  if (auto f = files_.find(path); f != files_.end()) return reply(req, f->second);
  if (is_client_route(req, path)) return reply(req, files_.at("/index.html"));
  return std::nullopt;
}

http::Response PortalAssets::reply(const http::Request& req, const File& f) const {
  const bool fresh = not_modified(req, f.etag);
  http::Response res{fresh ? bhttp::status::not_modified : bhttp::status::ok, req.version()};
  res.set(bhttp::field::etag, f.etag);
  res.set(bhttp::field::cache_control, f.immutable ? "public, max-age=31536000, immutable" : "no-cache");
  res.set("Content-Security-Policy", kContentSecurityPolicy);
  res.set("X-Content-Type-Options", "nosniff");
  res.set("Referrer-Policy", "no-referrer");
  res.set("X-Frame-Options", "DENY");
  res.keep_alive(req.keep_alive());
  if (!fresh) {
    res.set(bhttp::field::content_type, f.content_type);
    res.body() = f.body;
  }
  res.prepare_payload();
  return res;
}

}  // namespace kiln::api
