#pragma once
// The values the CLI writes into files that other programs read (ssh_config,
// inventory.ini, hostfile, known_hosts), each as a type that can only hold a
// value every one of those formats carries as one plain token.
//
// Why types and not escaping: the values come from kilnd, which got most of
// them from a machine (an agent's heartbeat, a BMC). ssh_config, Ansible's
// INI inventory and MPI hostfiles have no escaping that all their readers
// agree on: a newline starts a new directive, `#` a comment, `=` a variable,
// `%` an ssh token, a space a second argument, `[` a host range or a group.
// So a value is parsed once, here, against a charset none of those readers
// gives a meaning to, and the writers accept only these types; a value that
// does not parse is refused, never repaired or quoted.
//
// Every parse is pure, thread-compatible and bounded; a refusal is
// kInvalidArgument whose message quotes the value with describe_value() (so
// an error line cannot itself carry a newline or a terminal escape).

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace kiln::cli {

// A host alias (ssh_config `Host`, an inventory host name, a known_hosts
// name): 1-255 of A-Z a-z 0-9 . _ -, not starting with '-' (an ssh option)
// or '.'. kilnd's node names also allow '~'; such a node is refused here.
class HostAlias {
 public:
  static constexpr std::size_t kMaxLength = 255;
  static Result<HostAlias> parse(std::string_view text);
  const std::string& str() const { return v_; }

 private:
  explicit HostAlias(std::string v) : v_(std::move(v)) {}
  std::string v_;
};

// An IPv4 or IPv6 address as kiln::parse_ip_address (common/machine_values.h)
// accepts it, held in its canonical text form ("fd00::9", never
// "FD00:0::9"): no scope id (`%eth0` is free text), no brackets, no port, no
// embedded NUL; not the unspecified, a multicast or the broadcast address,
// nor IPv4-mapped IPv6.
class IpLiteral {
 public:
  static Result<IpLiteral> parse(std::string_view text);
  const std::string& str() const { return v_; }
  bool is_v6() const { return v6_; }

 private:
  IpLiteral(std::string v, bool v6) : v_(std::move(v)), v6_(v6) {}
  std::string v_;
  bool v6_ = false;
};

// A login name as POSIX tools accept it: [a-z_][a-z0-9_-]{0,31} (kilnd's
// image `ssh_user` rule is the same set).
class LoginName {
 public:
  static Result<LoginName> parse(std::string_view text);
  const std::string& str() const { return v_; }

 private:
  explicit LoginName(std::string v) : v_(std::move(v)) {}
  std::string v_;
};

// An MPI slot count: 1..kMax. from_gpus() maps a profile's GPU count
// (0 for a CPU node) to slots, as the hostfile always did: 0 -> 1.
class SlotCount {
 public:
  static constexpr int64_t kMax = 4096;
  static Result<SlotCount> from_gpus(int64_t gpus);
  int64_t value() const { return v_; }

 private:
  explicit SlotCount(int64_t v) : v_(v) {}
  int64_t v_ = 1;
};

// An Ansible group name: 1-63 of A-Z a-z 0-9 _ -, not starting with '-'
// (the cluster spec's group rule is narrower; this is the writer's own bound).
class GroupName {
 public:
  static Result<GroupName> parse(std::string_view text);
  const std::string& str() const { return v_; }

 private:
  explicit GroupName(std::string v) : v_(std::move(v)) {}
  std::string v_;
};

// `text` quoted for an error message: printable ASCII as is, `"` and `\` and
// every other byte escaped (\n, \r, \t, \0, \xNN), cut after 80 bytes with
// "..." so one hostile value cannot flood a terminal or a CI log.
std::string describe_value(std::string_view text);

}  // namespace kiln::cli
