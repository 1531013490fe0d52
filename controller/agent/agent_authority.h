#pragma once
// AgentAuthority: what the boot chain and image serving (controller/boot,
// controller/api) need from the agent broker (controller/agent), as an
// interface so neither depends on the other's internals. Contract in
// docs/agent-protocol.md.

#include <string>
#include <string_view>
#include <utility>  // before Asio (docs/coroutines.md)

#include <boost/asio/awaitable.hpp>

#include "common/result.h"
#include "controller/model/node.h"

namespace kiln {

namespace asio = boost::asio;

class AgentAuthority {
 public:
  virtual ~AgentAuthority() = default;
  // A fresh one-time boot token for `node` (stored hashed; replaces any
  // earlier unused one). Put into the ramdisk's kernel args.
  virtual asio::awaitable<Result<std::string>> mint_boot_token(const Node& node) = 0;
  // The node an agent session bearer belongs to; kUnauthenticated when the
  // session is unknown or over.
  virtual asio::awaitable<Result<Node>> session_node(std::string bearer) = 0;
};

}  // namespace kiln
