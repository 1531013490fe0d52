#include "controller/ironic/ironic_error.h"

#include <nlohmann/json.hpp>

#include "common/json_text.h"

namespace kiln::ironic {

int ironic_status(Code code) {
  const int status = http_status(code);
  switch (status) {
    case 412: return 409;  // a stale condition: Ironic reports a conflict
    case 422: return 400;
    case 502:
    case 504: return 503;  // a BMC or a deadline: the service cannot do it now
    default: return status;
  }
}

http::Response error_response(const http::Request& req, int status, std::string_view faultstring) {
  nlohmann::json fault = {{"faultcode", status >= 500 ? "Server" : "Client"},
                          {"faultstring", to_valid_utf8(faultstring)},
                          {"debuginfo", nullptr}};
  nlohmann::json body = {{"error_message", dump_json(fault)}};
  http::Response res{static_cast<boost::beast::http::status>(status), req.version()};
  res.set(boost::beast::http::field::content_type, "application/json");
  res.set(boost::beast::http::field::cache_control, "no-store");
  res.keep_alive(req.keep_alive());
  res.body() = dump_json(body);
  res.prepare_payload();
  return res;
}

http::Response error_response(const http::Request& req, const Error& e) {
  return error_response(req, ironic_status(e.code), e.message);
}

}  // namespace kiln::ironic
