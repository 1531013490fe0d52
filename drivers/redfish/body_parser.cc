#include "drivers/redfish/body_parser.h"

#include "common/json_text.h"

namespace kiln::redfish {

namespace {

nlohmann::json parse_or_null(const std::string& body) {
  if (body.empty()) return nullptr;
  Result<nlohmann::json> j = parse_json(body);
  if (!j) return nullptr;
  return std::move(*j);
}

}  // namespace

BodyParser::BodyParser(std::size_t inline_limit) : inline_limit_(inline_limit) {}

boost::asio::awaitable<nlohmann::json> BodyParser::parse(std::string body) {
  if (body.size() < inline_limit_) co_return parse_or_null(body);
  ++off_thread_;
  co_return co_await pool_.run([&body] { return parse_or_null(body); });
}

}  // namespace kiln::redfish
