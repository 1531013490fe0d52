#include "cli/api_client.h"

#include "common/json_text.h"

namespace kiln::cli {

namespace {

// Long enough for a slow store, short enough that a CLI never hangs on a
// silent server: waits are built from many such calls, never one long one.
constexpr std::chrono::seconds kRequestTimeout{30};

Code code_for_status(int status) {
  switch (status) {
    case 400: return Code::kInvalidArgument;
    case 401: return Code::kUnauthenticated;
    case 403: return Code::kPermissionDenied;
    case 404: return Code::kNotFound;
    case 405: return Code::kMethodNotAllowed;
    case 409: return Code::kConflict;
    case 412: return Code::kPreconditionFailed;
    case 413: return Code::kPayloadTooLarge;
    case 415: return Code::kUnsupportedMedia;
    case 422: return Code::kUnprocessable;
    case 503: return Code::kUnavailable;
    case 507: return Code::kInsufficientStorage;
    case 504: return Code::kTimeout;
    default: return Code::kInternal;
  }
}

}  // namespace

ApiClient::ApiClient(Config config)
    : config_(std::move(config)), http_(std::make_unique<http::HttpClient>(io_.get_executor())) {}

ApiClient::~ApiClient() {
  http_->close();
  http_.reset();
}

http::ClientRequest ApiClient::request_for(http::bhttp::verb method, const std::string& path) const {
  http::ClientRequest req;
  req.method = method;
  req.url = path.rfind("http", 0) == 0 ? path : config_.url + path;
  if (!config_.token.empty()) req.headers["Authorization"] = "Bearer " + config_.token;
  req.headers["Accept"] = "application/json";
  req.timeout = kRequestTimeout;
  req.ca_file = config_.ca_file;
  return req;
}

Error ApiClient::error_from(const http::Response& response) {
  const int status = static_cast<int>(response.result_int());
  Error e(code_for_status(status), "HTTP " + std::to_string(status));
  nlohmann::json problem = nlohmann::json::parse(response.body(), nullptr, false);
  if (problem.is_object()) {
    if (problem.contains("detail") && problem["detail"].is_string()) e.message = problem["detail"];
    if (problem.contains("errors") && problem["errors"].is_array()) {
      for (const auto& f : problem["errors"]) {
        if (!f.is_object()) continue;
        e.fields.push_back({f.value("field", std::string()), f.value("message", std::string())});
      }
    }
  } else if (!response.body().empty() && response.body().size() < 200) {
    e.message += ": " + response.body();
  }
  return e;
}

Result<nlohmann::json> ApiClient::call(http::bhttp::verb method, const std::string& path, const nlohmann::json* body,
                                       const char* content_type) {
  http::ClientRequest req = request_for(method, path);
  if (body) {
    req.body = dump_json(*body);
    req.content_type = content_type;
  }
  Result<http::Response> r = run_sync(io_, http_->request(std::move(req)));
  if (!r) return r.take_error();
  if (r->result_int() / 100 != 2) return error_from(*r);
  if (r->body().empty()) return nlohmann::json();
  nlohmann::json j = nlohmann::json::parse(r->body(), nullptr, false);
  if (j.is_discarded()) return Error(Code::kInternal, "kilnd answered " + path + " with something that is not JSON");
  return j;
}

Result<nlohmann::json> ApiClient::get(const std::string& path) { return call(http::bhttp::verb::get, path, nullptr, ""); }
Result<nlohmann::json> ApiClient::post(const std::string& path, const nlohmann::json& body) {
  return call(http::bhttp::verb::post, path, &body, "application/json");
}
Result<nlohmann::json> ApiClient::put(const std::string& path, const nlohmann::json& body) {
  return call(http::bhttp::verb::put, path, &body, "application/json");
}
Result<nlohmann::json> ApiClient::patch(const std::string& path, const nlohmann::json& body) {
  return call(http::bhttp::verb::patch, path, &body, "application/merge-patch+json");
}
Result<nlohmann::json> ApiClient::del(const std::string& path) { return call(http::bhttp::verb::delete_, path, nullptr, ""); }

Result<nlohmann::json> ApiClient::list(const std::string& path, const std::string& key) {
  nlohmann::json items = nlohmann::json::array();
  std::string next = path;
  // A bound on pages: a server that keeps answering `next` must not loop us forever.
  for (int page = 0; page < 10000 && !next.empty(); ++page) {
    Result<nlohmann::json> r = get(next);
    if (!r) return r.take_error();
    if (r->contains(key) && (*r)[key].is_array())
      for (auto& item : (*r)[key]) items.push_back(std::move(item));
    next = r->contains("next") && (*r)["next"].is_string() ? (*r)["next"].get<std::string>() : "";
  }
  return nlohmann::json{{key, std::move(items)}};
}

}  // namespace kiln::cli
