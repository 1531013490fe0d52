#pragma once
// AgentAuthority: what the boot chain and image serving (controller/boot,
// controller/api) need from the agent broker (controller/agent), as an
// interface so neither depends on the other's internals. Contract in
// docs/agent-protocol.md.

#include <string>
#include <string_view>
#include <vector>
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

  // Phone-home (cloud-init's phone_home, controller/tenancy/config_drive.h).
  // The deploy's one-time token for the URL in its user-data: derived from
  // the deploy's os secret (minted as os_secret() does), so it needs no
  // store of its own, a re-rendered seed carries the same one, and forget()
  // kills it with the secret. Never logged. kNotFound for an unknown node.
  // The defaults refuse: an authority without phone-home knows no token.
  virtual asio::awaitable<Result<std::string>> phone_home_token(const Node& node) {
    co_return Error(Code::kNotFound, "no phone-home for node " + node.id);
  }
  // The node whose current deploy `token` belongs to, while that token is
  // unused (the node has no ssh_host_keys yet). Nothing is minted or written.
  // kNotFound for a token of any other kind: malformed, unknown node, a
  // forgotten deploy's, used, wrong (one answer, so a prober learns nothing).
  virtual asio::awaitable<Result<Node>> phone_home_node(std::string token) {
    (void)token;
    co_return Error(Code::kNotFound, "unknown phone-home token");
  }
  // Uses up the token phone_home_node() checked for `node`: writes `keys`
  // as the node's ssh_host_keys with a node.ssh_host_keys event, only while
  // the node is as it was read (its version) and has no keys. kNotFound when
  // another post got there first; kPreconditionFailed when the node changed
  // meanwhile (the caller may check the token again).
  virtual asio::awaitable<Result<Node>> record_ssh_host_keys(const Node& node, std::vector<SshHostKey> keys,
                                                             std::string hostname) {
    (void)keys;
    (void)hostname;
    co_return Error(Code::kNotFound, "no phone-home for node " + node.id);
  }
};

}  // namespace kiln
