// What a machine reports (common/machine_values.h), as kilnd, the agent and
// the drivers parse it. First byte: which parser and, for the printable
// ones, the length bound; the rest is the text. Each accepted value must be
// what the contract promises: an address is canonical (parses to itself),
// holds only hex digits, ':' and '.', and has no scope id; a host name and
// an interface name hold only their charset; printable_field's output always
// passes check_printable within its bound.
#include <cstdint>
#include <string>
#include <string_view>

#include "common/machine_values.h"

namespace {

bool only(std::string_view s, bool (*ok)(char)) {
  for (char c : s)
    if (!ok(c)) return false;
  return true;
}

bool address_char(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == ':' || c == '.'; }
bool host_char(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-' || c == '.'; }
bool ifname_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_' || c == '.';
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::size_t bound = data[0] >> 2;  // 0..63
  switch (data[0] % 4) {
    case 0: {
      kiln::Result<std::string> a = kiln::parse_ip_address(text);
      const bool dropped = kiln::is_loopback_or_link_local(text);
      if (!a) {
        if (dropped) __builtin_trap();  // only addresses can be loopback or link-local
        break;
      }
      if (a->empty() || a->size() > kiln::kMaxIpAddressText || !only(*a, address_char)) __builtin_trap();
      kiln::Result<std::string> again = kiln::parse_ip_address(*a);
      if (!again || *again != *a) __builtin_trap();
      if (kiln::is_loopback_or_link_local(*a) != dropped) __builtin_trap();
      break;
    }
    case 1: {
      kiln::Result<std::string> h = kiln::parse_hostname(text);
      if (h && (h->empty() || h->size() > 253 || !only(*h, host_char) || h->front() == '-' || h->back() == '-'))
        __builtin_trap();
      kiln::Result<std::string> i = kiln::parse_interface_name(text);
      if (i && (i->empty() || i->size() > kiln::kMaxInterfaceName || !only(*i, ifname_char))) __builtin_trap();
      break;
    }
    case 2: {
      std::string clean = kiln::printable_field(text, bound);
      if (clean.size() > bound || !kiln::check_printable(clean, bound)) __builtin_trap();
      if (!clean.empty() && (clean.front() == ' ' || clean.back() == ' ')) __builtin_trap();
      break;
    }
    case 3: {
      // Clean text passes check_printable; printable_field leaves clean,
      // trimmed, single-spaced text that fits as it is.
      if (kiln::check_printable(text, 4096)) {
        std::string clean = kiln::printable_field(text, 4096);
        if (clean.size() > text.size()) __builtin_trap();
      }
      break;
    }
  }
  return 0;
}
