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
  // The one-time boot token of the node's current boot attempt, for the
  // ramdisk's kernel args. Minted (stored hashed and sealed) when the attempt
  // has none; fetching the script again returns the same token, so a second
  // fetch never replaces the one the node is booting with. The attempt ends
  // when a ramdisk lookup consumes the token or forget() starts a new one.
  // kNotFound for an unknown node.
  virtual asio::awaitable<Result<std::string>> boot_token(const Node& node) = 0;
  // The per-deploy secret the node's os-phase agent must present at lookup
  // (minted when the deploy has none yet; stored hashed and sealed). Handed
  // out in write_image arguments and a virtual node's NoCloud seed; never
  // logged. kNotFound for an unknown node.
  virtual asio::awaitable<Result<std::string>> os_secret(const Node& node) = 0;
  // The node an agent session bearer belongs to; kUnauthenticated when the
  // session is unknown or over.
  virtual asio::awaitable<Result<Node>> session_node(std::string bearer) = 0;
};

}  // namespace kiln
