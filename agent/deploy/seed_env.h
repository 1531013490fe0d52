#pragma once
// The agent seed's KEY=VALUE text (agent_seed.h says where it travels): the
// struct, and its pure parser and writer (fuzzed by fuzz/agent_seed).

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace kiln::agent {

struct AgentSeed {
  std::string api_url;
  std::string node_id;
  std::string os_secret;
  std::string tls_sha256;
};

constexpr std::uint64_t kSeedBlockBytes = 4096;
constexpr std::string_view kSeedMagic = "KILNSEED1\n";

// KEY=VALUE text (the format in agent_seed.h). Unknown keys and blank lines are
// skipped, so a shell-style env file with other variables parses too.
// Errors: kInvalidArgument naming the key for a value that is not plain
// (spaces, quotes, control bytes) or a secret/pin that is not lowercase hex,
// and for text over kSeedBlockBytes.
Result<AgentSeed> parse_seed_env(std::string_view text);
std::string render_seed_env(const AgentSeed& seed);

}  // namespace kiln::agent
