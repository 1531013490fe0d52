#include "agent/validate/collective/collective_args.h"

#include <cctype>
#include <cmath>
#include <cstdint>

#include "agent/validate/collective/tcp_collective.h"

namespace kiln::agent {

namespace {

using nlohmann::json;

constexpr std::size_t kMaxRunChars = 128;
constexpr std::size_t kMaxUniqueIdChars = 1024;  // the contract's bound on the opaque id
constexpr std::size_t kNcclIdHexChars = 256;     // sizeof(ncclUniqueId) == 128 bytes

Error bad(CollectiveCommand c, const std::string& field, const std::string& must) {
  return Error(Code::kInvalidArgument, std::string(collective_command_name(c)) + ": " + field + " " + must,
               {FieldError{field, must}});
}

bool present(const json& args, const char* key) { return args.contains(key) && !args[key].is_null(); }

// An integer field in lo..hi; `fallback` when absent (nullopt: required).
Result<long long> int_field(CollectiveCommand c, const json& args, const char* key, long long lo, long long hi,
                            std::optional<long long> fallback) {
  const std::string must = "must be " + std::to_string(lo) + ".." + std::to_string(hi);
  if (!present(args, key)) {
    if (fallback) return *fallback;
    return bad(c, key, "is required (" + must + ")");
  }
  const json& v = args[key];
  if (!v.is_number_integer()) return bad(c, key, must);
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi)) return bad(c, key, must);
    return static_cast<long long>(u);
  }
  const auto s = v.get<std::int64_t>();
  if (s < lo || s > hi) return bad(c, key, must);
  return static_cast<long long>(s);
}

bool all_hex(std::string_view s) {
  for (char ch : s)
    if (!std::isxdigit(static_cast<unsigned char>(ch))) return false;
  return true;
}

Status check_unique_id(CollectiveCommand c, CollectiveKind kind, const std::string& id) {
  if (id.size() > kMaxUniqueIdChars) return bad(c, "unique_id", "must be at most 1024 characters");
  if (kind == CollectiveKind::kNccl) {
    const std::string_view prefix = "nccl:";
    if (id.rfind(prefix, 0) != 0 || id.size() != prefix.size() + kNcclIdHexChars ||
        !all_hex(std::string_view(id).substr(prefix.size())))
      return bad(c, "unique_id", "must be nccl:<256 hex digits> for collective nccl");
    return ok_status();
  }
  if (auto parsed = parse_tcp_unique_id(id); !parsed)
    return bad(c, "unique_id", "must be tcp:<ipv4>:<port>:<32 hex digits> for collective tcp");
  return ok_status();
}

}  // namespace

const char* collective_kind_name(CollectiveKind k) { return k == CollectiveKind::kNccl ? "nccl" : "tcp"; }

const char* collective_command_name(CollectiveCommand c) {
  return c == CollectiveCommand::kPrepare ? "collective_prepare" : "collective_run";
}

Result<CollectiveArgs> parse_collective_args(CollectiveCommand c, const json& args) {
  if (!args.is_object())
    return Error(Code::kInvalidArgument, std::string(collective_command_name(c)) + ": arguments must be an object");
  CollectiveArgs a;

  if (!present(args, "run") || !args["run"].is_string() || args["run"].get<std::string>().empty() ||
      args["run"].get<std::string>().size() > kMaxRunChars)
    return bad(c, "run", "must be a string of 1..128 characters");
  a.run = args["run"].get<std::string>();

  const std::string kind = present(args, "collective") && args["collective"].is_string()
                               ? args["collective"].get<std::string>()
                               : "";
  if (kind == "nccl") a.collective = CollectiveKind::kNccl;
  else if (kind == "tcp") a.collective = CollectiveKind::kTcp;
  else return bad(c, "collective", "must be \"nccl\" or \"tcp\"");

  auto nodes = int_field(c, args, "nodes", 2, 1024, std::nullopt);
  if (!nodes) return nodes.take_error();
  a.nodes = static_cast<int>(*nodes);

  auto gpus = int_field(c, args, "gpus_per_node", 0, 1024, -1);
  if (!gpus) return gpus.take_error();
  a.gpus_per_node = static_cast<int>(*gpus);

  auto max_mib = int_field(c, args, "max_mib", 1, 16384, a.collective == CollectiveKind::kTcp ? 8 : 1024);
  if (!max_mib) return max_mib.take_error();
  a.max_mib = static_cast<std::size_t>(*max_mib);

  auto iterations = int_field(c, args, "iterations", 1, 100, 5);
  if (!iterations) return iterations.take_error();
  a.iterations = static_cast<int>(*iterations);

  auto timeout = int_field(c, args, "timeout_s", 1, 3600, 600);
  if (!timeout) return timeout.take_error();
  a.timeout = std::chrono::seconds(*timeout);

  if (c == CollectiveCommand::kPrepare) return a;

  auto rank = int_field(c, args, "rank", 0, a.nodes - 1, std::nullopt);
  if (!rank) return rank.take_error();
  a.rank = static_cast<int>(*rank);

  if (!present(args, "unique_id") || !args["unique_id"].is_string())
    return bad(c, "unique_id", "is required (the id collective_prepare answered)");
  a.unique_id = args["unique_id"].get<std::string>();
  if (auto ok = check_unique_id(c, a.collective, a.unique_id); !ok) return ok.take_error();

  if (present(args, "min_busbw_gbps")) {
    const json& m = args["min_busbw_gbps"];
    if (!m.is_number() || !std::isfinite(m.get<double>()) || m.get<double>() < 0)
      return bad(c, "min_busbw_gbps", "must be a number >= 0 or null");
    a.min_busbw_gbps = m.get<double>();
  }
  return a;
}

}  // namespace kiln::agent
