// /v1/images: the image catalogue, and the bytes of each image.
//
// Registration checks what can be checked cheaply: a local source (and a
// ramdisk's kernel) must be a readable regular file of the declared size
// inside an image directory (boot/image_dirs.h: nothing else on the host can
// be named); its SHA-256 is the agent's to verify while it writes (hashing
// GiBs on a request would stall it). An http(s) source must not name an
// address kilnd refuses to fetch from (boot/url_guard.h; names are checked
// again after DNS by the ImageFetcher), and is downloaded in the background,
// size and SHA-256 checked before the image turns "ready".
//
// An image registered with "source": "upload" starts "awaiting_upload"; its
// bytes arrive with PUT /v1/images/{id}/content (staff), streamed to a
// temporary file in kilnd's own image directory while they are hashed, and
// renamed into place (DATA_DIR/images/<id>) only when their size and SHA-256
// are the registered ones; the image then turns "ready". Anything else (a
// wrong checksum, too many or too few bytes, a client gone half-way) leaves
// no file behind and the image as it was. One upload per image at a time;
// an image that already has content takes none (delete and register again).
//
// A qcow2 (any of the three sources) is `converting` until the
// ImageConverter has made the raw+zstd file the agent is served
// (boot/image_converter.h), then `ready` or `failed` with the reason. A local
// qcow2 is inspected at registration: one with a backing file, an external
// data file or encryption, or no qcow2 at all, is a 422 naming /source.
//
// Content is served from the file with Range support and ETag = the sha256
// (for a qcow2, the converted file's).
// Who may read it: anyone for ramdisk images (iPXE has no credentials), staff
// or the agent session of a node deploying the image for os images. Those
// routes are public to the dispatcher and authenticate here, because an agent
// session is not an API token.
//
// No existence oracle (docs/tenancy.md): an image the caller may not see is
// answered exactly as a missing one, the same 404 with the same body bar the
// id it asked for, on every route. On the content routes that means:
// credentials are resolved before the image is read (bad ones are 401 for
// any id, and the store reads do not depend on the image existing); an os
// image is a 404 to an anonymous caller, and a private one to a tenant or to
// the session of a node deploying something else; only a public os image,
// which every tenant's catalogue lists, is a 403 to them.
//
// Range (common/http/byte_range.h): one range is a 206, several ranges the
// whole body, a range past the end 416; If-Range applies the range only when
// it is our strong ETag; a request with more than one Range field gets the
// whole body. Accept-Encoding is ignored: image bytes are sent as stored,
// never compressed on the fly (raw+gzip images are already compressed and are
// application/octet-stream, not Content-Encoding: gzip, so no client unpacks
// them behind the agent's checksum), and "identity;q=0" is not refused with a
// 406 either: RFC 9110 §12.5.3 lets a server answer with identity anyway, and
// a deploy that stalls on a client's preference helps nobody.

#include <unistd.h>

#include <cctype>
#include <mutex>
#include <optional>
#include <set>

#include "common/crypto.h"
#include "common/http/byte_range.h"
#include "common/ids.h"
#include "common/http/client.h"
#include "controller/agent/agent_authority.h"
#include "controller/api/boot_routes.h"
#include "controller/api/image_input.h"
#include "controller/api/json_input.h"
#include "controller/api/problem.h"
#include "controller/api/reply.h"
#include "controller/boot/image_converter.h"
#include "controller/boot/image_dirs.h"
#include "controller/boot/image_fetcher.h"

namespace kiln::api {
namespace {

// What the agent is served (model/image.h served_file): its format, and its
// checksum and size once known (null while a qcow2 is not converted yet).
// Staff also see where the file is.
nlohmann::json served_json(const Image& i, bool staff) {
  ServedFile f = served_file(i);
  nlohmann::json j = {{"format", f.format}, {"sha256", nullptr}, {"size", nullptr}};
  if (!f.sha256.empty()) {
    j["sha256"] = f.sha256;
    j["size"] = f.size;
  }
  if (staff) j["path"] = f.path.empty() ? nlohmann::json(nullptr) : nlohmann::json(f.path);
  return j;
}

// Null when unknown (a compressed raw image registered directly).
nlohmann::json virtual_size_json(const Image& i) {
  return i.virtual_size > 0 ? nlohmann::json(i.virtual_size) : nlohmann::json(nullptr);
}

// What a tenant sees of a public image: enough to choose and verify it, not
// where the provider keeps it. In both views `state` is canonical and
// `status` the pre-qcow2 name kept for clients written against it ("error"
// where state is failed).
nlohmann::json tenant_image_json(const Image& i) {
  return {{"id", i.id},
          {"name", i.name},
          {"kind", i.kind},
          {"format", i.format},
          {"sha256", i.sha256},
          {"size", i.size},
          {"virtual_size", virtual_size_json(i)},
          {"served", served_json(i, false)},
          {"state", i.state},
          {"status", legacy_image_status(i.state)},
          {"public", true},
          {"ssh_user", i.ssh_user},
          {"os_agent", i.os_agent},
          {"created_at", i.created_at},
          {"updated_at", i.updated_at}};
}

// Staff see the tenant's view and where the provider keeps the image.
nlohmann::json image_json(const Image& i) {
  nlohmann::json j = tenant_image_json(i);
  j["served"] = served_json(i, true);
  j["source"] = i.source;
  j["path"] = i.path;
  j["last_error"] = i.last_error;
  j["public"] = i.is_public;
  if (i.kind == "ramdisk") {
    j.erase("ssh_user");
    j.erase("os_agent");
    j["kernel"] = i.kernel;
    j["kernel_args"] = i.kernel_args;
  }
  return j;
}

// The list body (JSON built outside coroutines: docs/coroutines.md rule 6).
// A tenant gets the public images only, each as tenant_image_json.
nlohmann::json images_json(const std::vector<Image>& images, const Principal& who) {
  nlohmann::json items = nlohmann::json::array();
  for (const Image& i : images) {
    if (who.is_staff())
      items.push_back(image_json(i));
    else if (i.is_public)
      items.push_back(tenant_image_json(i));
  }
  return {{"images", std::move(items)}, {"next", nullptr}};
}

nlohmann::json image_view(const Image& i, const Principal& who) {
  return who.is_staff() ? image_json(i) : tenant_image_json(i);
}

// Bytes read from the request body per write to the upload file.
constexpr std::size_t kUploadBufferBytes = 1024 * 1024;

// The size of a local file inside the image directories, or why it is not usable.
Result<int64_t> source_file_size(const boot::ImageDirs* dirs, const std::string& path) {
  if (dirs == nullptr) return Error(Code::kInvalidArgument, "this kilnd has no image directory");
  Result<std::shared_ptr<http::OpenFile>> f = dirs->open_source(path);
  if (!f) return f.take_error();
  return static_cast<int64_t>((*f)->size());
}

// A literal address in an http(s) URL that the fetcher would refuse anyway
// is refused at registration, naming the field.
Status check_url_literal(const boot::ImageFetcher* fetcher, const http::Url& url) {
  boost::system::error_code ec;
  std::string host = url.host;
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  boost::asio::ip::address a = boost::asio::ip::make_address(host, ec);
  if (ec || fetcher == nullptr) return ok_status();
  return fetcher->policy().check(a, url.port);
}

// What registration may ask of this kilnd's image directories and fetcher.
ImageSourceChecks source_checks(const boot::ImageFetcher* fetcher, const boot::ImageDirs* dirs, uint64_t upload_max,
                                bool can_convert) {
  ImageSourceChecks c;
  c.file_size = [dirs](const std::string& path) { return source_file_size(dirs, path); };
  if (fetcher != nullptr) c.url_allowed = [fetcher](const http::Url& url) { return check_url_literal(fetcher, url); };
  c.can_upload = dirs != nullptr;
  c.upload_max = upload_max;
  c.can_convert = can_convert;
  return c;
}

asio::awaitable<Result<http::Reply>> create_image(ApiContext& ctx, Call& call) {
  Result<nlohmann::json> body = parse_json_body(call.req, {"application/json"});
  if (!body) co_return body.error();
  boot::ImageFetcher* fetcher = ctx.deps.image_fetcher;
  boot::ImageConverter* converter = ctx.deps.image_converter;
  Result<Image> parsed = parse_image(
      *body, source_checks(fetcher, ctx.deps.image_dirs, ctx.deps.image_upload_max, converter != nullptr));
  if (!parsed) co_return parsed.error();
  Image img = std::move(*parsed);
  img.id = new_uuid();
  if (img.state == kImageConverting) {
    // A local qcow2 is inspected now: a backing file, an external data file,
    // encryption or a file that is no qcow2 is refused before it is
    // catalogued (a URL or upload is inspected once its bytes are here, and
    // ends `failed` instead).
    const std::string path = img.path;
    Result<boot::Qcow2Info> info = co_await ctx.deps.db.run([&] { return converter->inspect(path); });
    if (!info) {
      if (info.error().code != Code::kUnprocessable && info.error().code != Code::kInvalidArgument &&
          info.error().code != Code::kNotFound)
        co_return info.error();
      co_return Error(Code::kUnprocessable, "source: " + info.error().message,
                      {FieldError{"/source", info.error().message}});
    }
    img.virtual_size = info->virtual_size;
  }
  Result<Image> created = co_await ctx.deps.db.run([&] { return ctx.deps.store.create_image(img); });
  if (!created) co_return created.error();
  if (created->state == kImageDownloading) fetcher->fetch(*created);
  if (created->state == kImageConverting) converter->convert(*created);
  call.log.info("image registered", {{"image", created->id}, {"name", created->name}, {"kind", created->kind},
                                     {"state", created->state}});
  http::Reply reply = json_reply(call.req, bhttp::status::created, image_json(*created));
  reply.response.set(bhttp::field::location, "/v1/images/" + created->id);
  co_return reply;
}

// The one answer for an image that is missing or that the caller may not
// see: every route builds it here, so the two cannot drift apart.
Error no_such_image(const std::string& id) { return Error(Code::kNotFound, "no such image: " + id); }

asio::awaitable<Result<Image>> load_image(ApiContext& ctx, const std::string& id) {
  Result<Image> img = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_image(id); });
  if (!img && img.error().code == Code::kNotFound) co_return no_such_image(id);
  co_return img;
}

// load_image for the caller: a tenant gets the same 404 for a private image
// as for a missing one, so it learns nothing of the provider's catalogue.
asio::awaitable<Result<Image>> load_visible_image(ApiContext& ctx, const Call& call, const std::string& id) {
  Result<Image> img = co_await load_image(ctx, id);
  if (img && !call.principal.is_staff() && !img->is_public) co_return no_such_image(id);
  co_return img;
}

asio::awaitable<Result<http::Reply>> list_images(ApiContext& ctx, Call& call) {
  Result<std::vector<Image>> images = co_await ctx.deps.db.run([&] { return ctx.deps.store.list_images(); });
  if (!images) co_return images.error();
  co_return json_reply(call.req, bhttp::status::ok, images_json(*images, call.principal));
}

asio::awaitable<Result<http::Reply>> get_image(ApiContext& ctx, Call& call) {
  const std::string id = call.param("id");
  Result<Image> img = co_await load_visible_image(ctx, call, id);
  if (!img) co_return img.error();
  co_return json_reply(call.req, bhttp::status::ok, image_view(*img, call.principal));
}

// PATCH /v1/images/{id}: only `public` changes; what an image is (its bytes,
// checksum, source) is fixed at registration.
Result<bool> parse_image_patch(const nlohmann::json& body) {
  std::vector<FieldError> errors;
  ObjectReader r(body, "", errors);
  std::optional<bool> is_public = r.boolean("public");
  r.finish();
  if (r.is_object() && !is_public && errors.empty()) errors.push_back({"/public", "is required"});
  if (!errors.empty()) return invalid_fields(std::move(errors));
  return *is_public;
}

asio::awaitable<Result<http::Reply>> patch_image(ApiContext& ctx, Call& call) {
  const std::string id = call.param("id");
  Result<nlohmann::json> body = parse_json_body(call.req, {"application/merge-patch+json", "application/json"});
  if (!body) co_return body.error();
  Result<bool> is_public = parse_image_patch(*body);
  if (!is_public) co_return is_public.error();
  Result<Image> img = co_await load_image(ctx, id);
  if (!img) co_return img.error();
  if (*is_public && img->kind != "os") co_return Error::invalid("/public", "only os images can be public");
  const bool want = *is_public;
  Result<Image> saved = co_await ctx.deps.db.run([&] { return ctx.deps.store.set_image_public(img->id, want); });
  if (!saved) co_return saved.error();
  call.log.info("image updated", {{"image", saved->id}, {"public", want ? "true" : "false"}});
  co_return json_reply(call.req, bhttp::status::ok, image_json(*saved));
}

asio::awaitable<Result<http::Reply>> delete_image(ApiContext& ctx, Call& call) {
  const std::string id = call.param("id");
  Result<Image> img = co_await load_image(ctx, id);
  if (!img) co_return img.error();
  Status s = co_await ctx.deps.db.run([&] { return ctx.deps.store.delete_image(img->id); });
  if (!s) co_return s.error();
  // A downloaded or uploaded copy is kilnd's; a registered local path is the operator's.
  boot::ImageFetcher* fetcher = ctx.deps.image_fetcher;
  if (fetcher != nullptr && is_url(img->source)) ::unlink(fetcher->path_for(img->id).c_str());
  if (ctx.deps.image_dirs != nullptr && img->source == kUploadSource)
    ::unlink(ctx.deps.image_dirs->own_file(img->id).c_str());
  // A converted file goes with its last image (others may share it).
  if (boot::ImageConverter* converter = ctx.deps.image_converter; converter != nullptr && img->format == "qcow2") {
    const Image gone = *img;
    co_await ctx.deps.db.run([&] { converter->release(gone); });
  }
  call.log.info("image deleted", {{"image", img->id}, {"name", img->name}});
  co_return empty_reply(call.req);
}

// Who asks for an image's bytes: nobody (no Authorization), an API token, or
// the agent session of a node.
struct ContentCaller {
  std::optional<Principal> principal;
  std::optional<Node> node;
  bool anonymous() const { return !principal && !node; }
};

// Resolves the caller's credentials before the image is looked up, so the
// store reads (and the answer to bad credentials: 401) are the same whether
// the image exists or not.
asio::awaitable<Result<ContentCaller>> content_caller(ApiContext& ctx, Call& call) {
  ContentCaller caller;
  auto it = call.req.find(bhttp::field::authorization);
  if (it == call.req.end()) co_return caller;
  Result<Principal> p = co_await authenticate(call.req, ctx.deps.store, ctx.deps.db, ctx.deps.clock);
  if (p) {
    caller.principal = std::move(*p);
    co_return caller;
  }
  if (p.error().code != Code::kUnauthenticated) co_return p.error();
  AgentAuthority* agents = ctx.deps.agents;
  if (agents == nullptr) co_return p.error();
  std::string_view value = it->value();
  std::string bearer;
  if (value.size() > 7 && (value.substr(0, 7) == "Bearer " || value.substr(0, 7) == "bearer "))
    bearer = std::string(value.substr(7));
  Result<Node> node = co_await agents->session_node(bearer);
  if (!node) {
    if (node.error().code == Code::kUnauthenticated || node.error().code == Code::kNotFound)
      co_return Error(Code::kUnauthenticated, "unknown token or agent session");
    co_return node.error();
  }
  call.node_id = node->id;
  caller.node = std::move(*node);
  co_return caller;
}

// What `caller` may do with `img`'s bytes (see the top of the file). An image
// the caller may not even know of is kHidden and answered exactly as a
// missing one: no 401 or 403 that would tell a private image exists.
enum class ContentAccess { kHidden, kVisible, kReadable };

ContentAccess content_access(const Image& img, const ContentCaller& caller) {
  if (img.kind == "ramdisk") return ContentAccess::kReadable;  // iPXE has no credentials
  if (caller.principal && caller.principal->is_staff()) return ContentAccess::kReadable;
  if (caller.node && (caller.node->image == img.id || caller.node->image == img.name)) return ContentAccess::kReadable;
  // Public os images are in every tenant's catalogue: refusing their bytes
  // with 403 tells nothing. Anonymous callers see no catalogue at all.
  if (img.is_public && !caller.anonymous()) return ContentAccess::kVisible;
  return ContentAccess::kHidden;
}

// Serves the file at `path` for `req`: Range, HEAD (the server), ETag.
Result<http::Reply> file_reply(const ApiContext& ctx, const Call& call, const std::string& path,
                               int64_t expected_size, const std::string& etag, bool no_store) {
  if (ctx.deps.image_dirs == nullptr) return Error(Code::kUnavailable, "this kilnd has no image directory");
  // Opened through the image directories every time: a registered path that
  // has since become a symlink out of them (or was registered by an older
  // kilnd) is refused, not served.
  Result<std::shared_ptr<http::OpenFile>> file = ctx.deps.image_dirs->open_stored(path);
  if (!file) return Error(Code::kConflict, "the image file cannot be served (" + file.error().message + "); re-register it");
  const uint64_t size = (*file)->size();
  if (expected_size >= 0 && static_cast<int64_t>(size) != expected_size)
    return Error(Code::kConflict, "the image file is " + std::to_string(size) + " bytes, registered as " +
                                      std::to_string(expected_size) + "; re-register it");
  const http::Request& req = call.req;
  std::string_view range_header;
  // Two Range fields are two lists of ranges: several ranges, the whole body.
  if (auto r = req.find(bhttp::field::range); r != req.end() && req.count(bhttp::field::range) == 1)
    range_header = r->value();
  // If-Range with another validator (a weak or stale ETag, a date: we send no
  // Last-Modified): the client's partial copy is stale; send it all.
  if (auto ir = req.find(bhttp::field::if_range); ir != req.end() && (etag.empty() || ir->value() != etag))
    range_header = {};
  http::RangeRequest range = http::parse_range(range_header, size);

  http::Reply reply;
  if (range.kind == http::RangeRequest::Kind::kUnsatisfiable) {
    // The header is not echoed: it is the client's text, up to the header limit.
    Error err(Code::kInvalidArgument, "the range asked for is outside the " + std::to_string(size) +
                                          " bytes of this file",
              {FieldError{"Range", "not satisfiable"}});
    reply.response = problem_response(err, req.version(), req.keep_alive(), 416);
    reply.response.set(bhttp::field::content_range, http::unsatisfied_range(size));
    return reply;
  }
  const bool partial = range.kind == http::RangeRequest::Kind::kPartial;
  reply.response = http::Response{partial ? bhttp::status::partial_content : bhttp::status::ok, req.version()};
  reply.response.keep_alive(req.keep_alive());
  reply.response.set(bhttp::field::content_type, "application/octet-stream");
  reply.response.set(bhttp::field::accept_ranges, "bytes");
  if (!etag.empty()) reply.response.set(bhttp::field::etag, etag);
  if (no_store) reply.response.set(bhttp::field::cache_control, "private, no-store");
  http::FileBody body;
  body.file = std::move(*file);
  if (partial) {
    reply.response.set(bhttp::field::content_range, http::content_range(range.range, size));
    body.offset = range.range.first;
    body.length = range.range.length();
  } else {
    body.length = size;
  }
  reply.file = std::move(body);
  return reply;
}

asio::awaitable<Result<http::Reply>> image_bytes(ApiContext& ctx, Call& call, bool kernel) {
  const std::string id = call.param("id");
  Result<ContentCaller> caller = co_await content_caller(ctx, call);
  if (!caller) co_return caller.error();
  Result<Image> img = co_await load_image(ctx, id);
  if (!img) co_return img.error();
  switch (content_access(*img, *caller)) {
    case ContentAccess::kHidden: co_return no_such_image(id);
    case ContentAccess::kVisible:
      co_return Error(Code::kPermissionDenied, "os image content is for staff and the nodes deploying it");
    case ContentAccess::kReadable: break;
  }
  if (kernel) {
    if (img->kind != "ramdisk" || img->kernel.empty())
      co_return Error(Code::kNotFound, "image " + img->name + " has no kernel (only ramdisk images do)");
    co_return file_reply(ctx, call, img->kernel, -1, "", false);
  }
  if (Status ready = image_deployable(*img); !ready) co_return ready.error();
  // What the agent writes: the source itself, or a qcow2's converted file.
  ServedFile served = served_file(*img);
  co_return file_reply(ctx, call, served.path, served.size, "\"" + served.sha256 + "\"", img->kind == "os");
}

// Images with an upload in progress: one upload per image at a time.
class UploadsInFlight {
 public:
  bool claim(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    return ids_.insert(id).second;
  }
  void release(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    ids_.erase(id);
  }

 private:
  std::mutex mu_;
  std::set<std::string> ids_;
};

// Releases a claim when the upload ends, however it ends.
class UploadClaim {
 public:
  UploadClaim(UploadsInFlight& uploads, std::string id) : uploads_(uploads), id_(std::move(id)) {}
  ~UploadClaim() { uploads_.release(id_); }
  UploadClaim(const UploadClaim&) = delete;
  UploadClaim& operator=(const UploadClaim&) = delete;

 private:
  UploadsInFlight& uploads_;
  std::string id_;
};

// Whether `img` may take the upload `call` carries, checked before a byte of
// the body is read (a refusal is answered without the client sending it).
Status check_upload(const Call& call, const Image& img) {
  if (call.info.body == nullptr)
    return Error(Code::kInternal, "the server did not stream this body (ServerOptions::streamed_body)");
  if (img.source != kUploadSource)
    return Error(Code::kConflict, "image " + img.name + " was registered with a source (" +
                                      (is_url(img.source) ? "a URL" : "a local file") +
                                      "); only images registered with \"source\": \"upload\" take an upload");
  if (img.state != kImageAwaitingUpload)
    return Error(Code::kConflict, "image " + img.name + " already has its content (state " + img.state +
                                      "); delete it and register it again to replace it");
  auto type = call.req.find(bhttp::field::content_type);
  if (type != call.req.end()) {
    std::string_view t = type->value();
    t = t.substr(0, t.find(';'));
    while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
    if (!boost::beast::iequals(t, "application/octet-stream"))
      return Error(Code::kUnsupportedMedia, "an image upload is application/octet-stream, not " + std::string(t));
  }
  std::optional<uint64_t> declared = call.info.body->content_length();
  if (declared && *declared != static_cast<uint64_t>(img.size))
    return Error::invalid("/size", "image " + img.name + " is registered as " + std::to_string(img.size) +
                                       " bytes; the request body has " + std::to_string(*declared));
  return ok_status();
}

// Reads the body into `file`, hashing it: its SHA-256, or why not (a body
// longer or shorter than `size` is /size's fault).
asio::awaitable<Result<std::string>> receive_upload(http::BodyReader& body, boot::UploadFile& file,
                                                    uint64_t size) {
  std::vector<char> buf(kUploadBufferBytes);
  Sha256 hash;
  uint64_t total = 0;
  while (true) {
    Result<std::size_t> n = co_await body.read_some(buf.data(), buf.size());
    if (!n) co_return n.error();
    if (*n == 0) break;
    total += *n;
    if (total > size)
      co_return Error::invalid("/size", "the request body is longer than the " + std::to_string(size) +
                                            " bytes the image is registered with");
    const std::string_view chunk(buf.data(), *n);
    hash.update(chunk);
    Status written = file.write(chunk);
    if (!written) co_return written.error();
  }
  if (total != size)
    co_return Error::invalid("/size", "the request body has " + std::to_string(total) + " bytes; the image is registered with " +
                                          std::to_string(size));
  co_return hash.hex_digest();
}

asio::awaitable<Result<http::Reply>> upload_image(ApiContext& ctx, UploadsInFlight& uploads, Call& call) {
  const std::string id = call.param("id");
  Result<Image> found = co_await load_image(ctx, id);
  if (!found) co_return found.error();
  if (!uploads.claim(found->id))
    co_return Error(Code::kConflict, "an upload of image " + found->name + " is already in progress");
  UploadClaim claim(uploads, found->id);
  // Again under the claim: an upload that finished meanwhile has made it ready.
  Result<Image> img = co_await load_image(ctx, found->id);
  if (!img) co_return img.error();
  Status allowed = check_upload(call, *img);
  if (!allowed) co_return allowed.error();

  Result<std::unique_ptr<boot::UploadFile>> file = ctx.deps.image_dirs->create_upload(img->id);
  if (!file) co_return file.error();
  Result<std::string> digest = co_await receive_upload(*call.info.body, **file, static_cast<uint64_t>(img->size));
  if (!digest) {
    // The UploadFile's destructor removes the temporary file.
    // (A stalled or vanished client has its connection closed already.)
    call.log.info("image upload refused", {{"image", img->id}, {"error", digest.error().message}});
    co_return digest.error();
  }
  if (*digest != img->sha256) {
    call.log.info("image upload refused", {{"image", img->id}, {"error", "sha256 mismatch"}});
    co_return Error(Code::kInvalidArgument, "sha256: the uploaded bytes do not match the registered checksum",
                    {FieldError{"/sha256", "the uploaded bytes have SHA-256 " + *digest + ", the image is registered with " +
                                               img->sha256}});
  }
  boot::UploadFile& upload = **file;
  Result<std::string> path = co_await ctx.deps.db.run([&upload] { return upload.install(); });
  if (!path) co_return path.error();
  Image update = *img;
  // An uploaded qcow2 is inspected and converted from here (a refused one
  // ends `failed` with the reason).
  const bool convert = img->format == "qcow2" && ctx.deps.image_converter != nullptr;
  if (img->format == "qcow2" && !convert) {
    update.state = std::string(kImageFailed);
    update.last_error = "this kilnd converts no qcow2 images";
  } else {
    update.state = std::string(convert ? kImageConverting : kImageReady);
    update.last_error.clear();
  }
  update.path = *path;
  Result<Image> stored = co_await ctx.deps.db.run([&] { return ctx.deps.store.update_image(update); });
  if (!stored) {
    ::unlink(path->c_str());
    if (stored.error().code == Code::kNotFound)
      co_return Error(Code::kNotFound, "image " + img->name + " was deleted during its upload");
    co_return stored.error();
  }
  if (stored->state == kImageConverting) ctx.deps.image_converter->convert(*stored);
  call.log.info("image uploaded", {{"image", stored->id}, {"name", stored->name}, {"size", std::to_string(stored->size)}});
  co_return json_reply(call.req, bhttp::status::ok, image_json(*stored));
}

}  // namespace

void add_image_routes(RouteTable& t, ApiContext& ctx) {
  using V = bhttp::verb;
  t.add({V::post, "/v1/images", Access::kStaff, {}, [&ctx](Call& c) { return create_image(ctx, c); }});
  t.add({V::get, "/v1/images", Access::kAnyRole, {}, [&ctx](Call& c) { return list_images(ctx, c); }});
  t.add({V::get, "/v1/images/{id}", Access::kAnyRole, {}, [&ctx](Call& c) { return get_image(ctx, c); }});
  t.add({V::patch, "/v1/images/{id}", Access::kStaff, {}, [&ctx](Call& c) { return patch_image(ctx, c); }});
  t.add({V::delete_, "/v1/images/{id}", Access::kStaff, {}, [&ctx](Call& c) { return delete_image(ctx, c); }});
  auto uploads = std::make_shared<UploadsInFlight>();
  t.add({V::put, "/v1/images/{id}/content", Access::kStaff, {},
         [&ctx, uploads](Call& c) { return upload_image(ctx, *uploads, c); }, ctx.deps.image_upload_max},
        Needs::kImageDirs);
  for (V v : {V::get, V::head}) {
    t.add({v, "/v1/images/{id}/content", Access::kPublic, {},
           [&ctx](Call& c) { return image_bytes(ctx, c, false); }});
    t.add({v, "/v1/images/{id}/kernel", Access::kPublic, {},
           [&ctx](Call& c) { return image_bytes(ctx, c, true); }});
  }
}

}  // namespace kiln::api
