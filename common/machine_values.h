#pragma once
// Values a machine reports (an agent's heartbeat, a BMC's Redfish tree),
// parsed into typed, bounded text before anything stores or shows them.
//
// What a machine says is hostile input: the OS-phase agent runs in the
// tenant's OS, and a BMC's firmware is not ours. A value that reaches a
// person's tools (an `ssh` line, ssh_config, inventory.ini, the portal) must
// not be able to carry a newline, a `%` scope id, a quote or anything else a
// reader would take as syntax. So every such value goes through one of these
// functions at the point it enters Kiln, and downstream code only ever sees
// their output:
//
//   parse_ip_address      an address an agent reports -> canonical text
//   parse_hostname        RFC 1123 host name -> lower-case text
//   parse_interface_name  a Linux interface name (strict charset)
//   check_printable       a short free-text field an agent sends: refused
//                         when it is not clean (names the rule it broke)
//   printable_field       a free-text field a BMC reports (names, serials,
//                         models): cleaned, never refused
//
// All are pure functions, never throw, and are fuzzed
// (tests/fuzz/targets/machine_values.cc). Error messages never echo the
// input: it may be megabytes long or hold terminal escapes.
//
// Used by controller/ (agent bodies), drivers/ (BMC values) and agent/ (the
// addresses it reports), hence common/.

#include <cstddef>
#include <string>
#include <string_view>

#include "common/result.h"

namespace kiln {

// The longest address text accepted (an IPv6 literal with an embedded IPv4
// is at most 45 characters: INET6_ADDRSTRLEN - 1).
inline constexpr std::size_t kMaxIpAddressText = 45;

// An IP address in canonical text: IPv4 as a strict dotted quad (four
// decimal octets 0-255, no leading zeros: "010.1.1.1" is octal to some
// readers and decimal to others, so it is refused), IPv6 in any RFC 4291
// text form, written back in RFC 5952 form (lower case, longest zero run
// compressed, "2001:db8::1").
//
// Refused (kInvalidArgument, a message saying why):
//  * a scope id ("fe80::1%eth0"): a zone names an interface of the sender,
//    means nothing to anyone else, and is where arbitrary text hides; the
//    agent never sends one (it prints addresses with inet_ntop);
//  * a prefix length, brackets, blanks, anything outside [0-9a-fA-F:.];
//  * the unspecified (0.0.0.0, ::), multicast and limited-broadcast
//    addresses, and IPv4-mapped IPv6 (::ffff:a.b.c.d): no interface of a
//    booted OS is reached at those;
//  * more than kMaxIpAddressText characters.
// Loopback and link-local addresses parse: whether to keep them is
// is_loopback_or_link_local's question.
Result<std::string> parse_ip_address(std::string_view text);

// True for loopback (127.0.0.0/8, ::1) and link-local (169.254.0.0/16,
// fe80::/10) addresses: nobody can log in at them from another machine, so
// neither the agent reports them nor kilnd keeps them. `address` is any text
// parse_ip_address accepts (canonical or not); false for anything else.
// The one home of that rule (the agent's reachable_addresses uses it too).
bool is_loopback_or_link_local(std::string_view address);

// A host name by RFC 1123 §2.1 (RFC 952's letters, digits and hyphens, a
// label may start with a digit): labels of 1-63 characters, not starting or
// ending with '-', joined by '.', at most 253 characters in all; one trailing
// '.' (the root) is accepted and dropped. Returned lower-cased. Refused:
// anything else (underscores, blanks, non-ASCII, empty labels).
Result<std::string> parse_hostname(std::string_view text);

// Linux's IFNAMSIZ less the NUL.
inline constexpr std::size_t kMaxInterfaceName = 15;

// A network interface name: 1-15 characters from [A-Za-z0-9_.-], not "."
// or "..". Stricter than the kernel (which takes any byte but '/', ':' and
// blanks), wide enough for what udev and people name interfaces (eth0,
// enp65s0f1np1, bond0.100, ib0, br-lab).
Result<std::string> parse_interface_name(std::string_view text);

// Whether `text` is a clean single-line field of at most `max_len` bytes:
// valid UTF-8 (no overlong forms, no surrogates), and no control character
// (C0, DEL, C1), no line or paragraph separator (U+2028, U+2029) and no
// bidirectional override or isolate (U+202A-U+202E, U+2066-U+2069: text
// that reads differently on screen from what it is). Refuses with a message
// naming the first rule broken ("is longer than 64 bytes", "holds a control
// character"). For fields where the sender can be told to fix itself.
Status check_printable(std::string_view text, std::size_t max_len);

// `text` made clean as check_printable defines it, never refused: each run
// of blanks (space, tab, newline, carriage return, vertical tab, form feed)
// becomes one space, other control characters, invalid UTF-8 and the
// separators/overrides above are dropped, blanks at both ends are trimmed
// (BMCs pad fixed-width fields), and the result is cut to at most
// `max_len` bytes at a character boundary. For what a BMC reports: a serial
// number with a stray control byte is still worth showing, and a refusal
// would fail an inspection over a label.
std::string printable_field(std::string_view text, std::size_t max_len);

}  // namespace kiln
