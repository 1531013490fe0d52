#include "drivers/redfish/body_parser.h"

#include "common/json_text.h"

namespace kiln::redfish {

namespace {

nlohmann::json parse_or_null(const std::string& body, std::span<const std::string_view> members) {
  if (body.empty()) return nullptr;
  Result<nlohmann::json> j = parse_json_members(body, members);
  if (!j) return nullptr;
  return std::move(*j);
}

}  // namespace

BodyParser::BodyParser(std::size_t inline_limit) : inline_limit_(inline_limit) {}

boost::asio::awaitable<nlohmann::json> BodyParser::parse(std::string body, std::span<const std::string_view> members) {
  if (body.size() < inline_limit_) co_return parse_or_null(body, members);
  ++off_thread_;
  co_return co_await pool_.run([&body, members] { return parse_or_null(body, members); });
}

}  // namespace kiln::redfish
