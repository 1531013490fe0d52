#include "cli/host_fields.h"

#include <cstdio>

#include "common/machine_values.h"

namespace kiln::cli {

namespace {

bool ascii_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

Error refused(std::string_view text, const char* what) {
  return Error(Code::kInvalidArgument, describe_value(text) + " is not " + what);
}

}  // namespace

std::string describe_value(std::string_view text) {
  constexpr std::size_t kShown = 80;
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size() && i < kShown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\0': out += "\\0"; break;
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      default:
        if (c >= 0x20 && c < 0x7f) {
          out += static_cast<char>(c);
        } else {
          char hex[5];
          std::snprintf(hex, sizeof hex, "\\x%02x", c);
          out += hex;
        }
    }
  }
  out += text.size() > kShown ? "\"..." : "\"";
  return out;
}

Result<HostAlias> HostAlias::parse(std::string_view text) {
  const char* what = "a host name (1-255 of A-Z a-z 0-9 . _ -, not starting with '-' or '.')";
  if (text.empty() || text.size() > kMaxLength || text.front() == '-' || text.front() == '.')
    return refused(text, what);
  for (char c : text)
    if (!ascii_alnum(c) && c != '.' && c != '_' && c != '-') return refused(text, what);
  return HostAlias(std::string(text));
}

Result<IpLiteral> IpLiteral::parse(std::string_view text) {
  // The one home of what a node address is (common/machine_values.h), which
  // kilnd also applies when an agent reports one; its reasons are written
  // for the agent, so the CLI says what the value is not.
  Result<std::string> canonical = parse_ip_address(text);
  if (!canonical) return refused(text, "an IP address");
  const bool v6 = canonical->find(':') != std::string::npos;
  return IpLiteral(std::move(*canonical), v6);
}

Result<LoginName> LoginName::parse(std::string_view text) {
  const char* what = "a login name (1-32 of a-z 0-9 _ -, starting with a-z or '_')";
  if (text.empty() || text.size() > 32) return refused(text, what);
  const char first = text.front();
  if (!((first >= 'a' && first <= 'z') || first == '_')) return refused(text, what);
  for (char c : text)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return refused(text, what);
  return LoginName(std::string(text));
}

Result<SlotCount> SlotCount::from_gpus(int64_t gpus) {
  if (gpus < 0 || gpus > kMax)
    return Error(Code::kInvalidArgument, std::to_string(gpus) + " is not a GPU count (0-" + std::to_string(kMax) + ")");
  return SlotCount(gpus == 0 ? 1 : gpus);
}

Result<GroupName> GroupName::parse(std::string_view text) {
  const char* what = "a group name (1-63 of A-Z a-z 0-9 _ -, not starting with '-')";
  if (text.empty() || text.size() > 63 || text.front() == '-') return refused(text, what);
  for (char c : text)
    if (!ascii_alnum(c) && c != '_' && c != '-') return refused(text, what);
  return GroupName(std::string(text));
}

}  // namespace kiln::cli
