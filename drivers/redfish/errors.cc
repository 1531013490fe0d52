#include "drivers/redfish/errors.h"

#include "common/machine_values.h"

namespace kiln::redfish {

namespace {

constexpr std::size_t kMaxBmcMessage = 1024;

std::string str_field(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return {};
  // The BMC's words reach a node's last_error, logs and the CLI: cleaned
  // and bounded where they enter (common/machine_values.h).
  return printable_field(it->get<std::string>(), kMaxBmcMessage);
}

void add_extended_info(const nlohmann::json& holder, std::vector<BmcMessage>& out) {
  if (!holder.is_object()) return;
  auto it = holder.find("@Message.ExtendedInfo");
  if (it == holder.end() || !it->is_array()) return;
  for (const auto& m : *it) {
    BmcMessage msg{str_field(m, "MessageId"), str_field(m, "Message")};
    if (!msg.message_id.empty() || !msg.message.empty()) out.push_back(std::move(msg));
  }
}

}  // namespace

std::vector<BmcMessage> extract_messages(const nlohmann::json& body) {
  std::vector<BmcMessage> out;
  if (!body.is_object()) return out;
  auto err = body.find("error");
  if (err != body.end() && err->is_object()) {
    add_extended_info(*err, out);
    if (out.empty()) {
      BmcMessage top{str_field(*err, "code"), str_field(*err, "message")};
      if (!top.message_id.empty() || !top.message.empty()) out.push_back(std::move(top));
    }
  }
  if (out.empty()) add_extended_info(body, out);
  return out;
}

std::string describe_messages(const std::vector<BmcMessage>& messages) {
  std::string out;
  for (const auto& m : messages) {
    if (!out.empty()) out += "; ";
    if (m.message.empty()) {
      out += m.message_id;
    } else {
      out += m.message;
      if (!m.message_id.empty()) out += " (" + m.message_id + ")";
    }
  }
  return out;
}

Error http_error(std::string_view what, int status, const nlohmann::json& body) {
  std::string words = describe_messages(extract_messages(body));
  std::string msg = "redfish: " + std::string(what) + " -> HTTP " + std::to_string(status);
  if (!words.empty()) msg += ": " + words;
  Code code = Code::kDriverError;
  if (status == 401 || status == 403) code = Code::kUnauthenticated;
  else if (status == 404) code = Code::kNotFound;
  else if (status == 405) code = Code::kMethodNotAllowed;
  else if (status == 412) code = Code::kPreconditionFailed;
  return Error(code, std::move(msg));
}

}  // namespace kiln::redfish
