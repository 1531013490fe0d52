// The files `kiln cluster up` writes (cli/cluster_files.h) from node values a
// machine reported: whatever the values, either the run is refused with a
// one-line printable message, or every line of every file has the one shape
// its writer means ("Host <token>", "  HostName <token>", ...), each token
// from the host-field charset. A value that breaks a line out of its shape
// (a second directive, a comment, an Ansible variable) traps.
//
// Input: fields separated by '\x01': name, id, ssh, gpus (decimal), then
// addresses; a '\x02' in the name field splits off a second node's name.
// The same fields also go to the known_hosts writer (names, key type = ssh
// field, key = gpus field): a line it accepts has exactly three fields.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cluster_files.h"
#include "cli/known_hosts_writer.h"

namespace {

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t at = s.find(sep, start);
    out.emplace_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

bool token(std::string_view t) {
  if (t.empty()) return false;
  for (char c : t)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
          c == '_' || c == ':'))
      return false;
  return true;
}

bool starts(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

void check_lines(const std::string& text, bool (*line_ok)(std::string_view)) {
  if (!text.empty() && text.back() != '\n') __builtin_trap();
  for (const std::string& line : split(text, '\n'))
    if (!line.empty() && !line_ok(line)) __builtin_trap();
}

bool comment_ok(std::string_view l) {
  constexpr std::string_view kTail = ": no address reported yet";
  return starts(l, "# ") && l.size() > 2 + kTail.size() && l.substr(l.size() - kTail.size()) == kTail &&
         token(l.substr(2, l.size() - 2 - kTail.size()));
}

bool ssh_line_ok(std::string_view l) {
  if (starts(l, "Host ")) return token(l.substr(5));
  if (starts(l, "  HostName ")) return token(l.substr(11));
  if (starts(l, "  User ")) return token(l.substr(7));
  return comment_ok(l);
}

bool hostfile_line_ok(std::string_view l) {
  const std::size_t sp = l.find(" slots=");
  if (sp == std::string_view::npos || !token(l.substr(0, sp))) return false;
  const std::string_view n = l.substr(sp + 7);
  if (n.empty() || n.size() > 4) return false;
  for (char c : n)
    if (c < '0' || c > '9') return false;
  return true;
}

bool inventory_line_ok(std::string_view l) {
  if (starts(l, "[")) return l.back() == ']' && token(l.substr(1, l.size() - 2));
  if (starts(l, "#")) return comment_ok(l);
  const std::vector<std::string> words = split(l, ' ');
  if (words.size() < 2 || words.size() > 3 || !token(words[0])) return false;
  if (!starts(words[1], "ansible_host=") || !token(std::string_view(words[1]).substr(13))) return false;
  return words.size() == 2 || (starts(words[2], "ansible_user=") && token(std::string_view(words[2]).substr(13)));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> f = split(std::string_view(reinterpret_cast<const char*>(data), size), '\x01');
  kiln::cli::ClusterNode n;
  n.group = "workers";
  n.id = f.size() > 1 ? f[1] : "n1";
  n.ssh = f.size() > 2 ? f[2] : "";
  n.gpus = 0;
  if (f.size() > 3)
    for (char c : f[3].substr(0, 18)) n.gpus = n.gpus * 10 + ((c >= '0' && c <= '9') ? c - '0' : 0);
  for (std::size_t i = 4; i < f.size(); ++i) n.addresses.push_back(f[i]);
  std::vector<kiln::cli::ClusterNode> nodes;
  const std::vector<std::string> names = split(f.empty() ? std::string() : f[0], '\x02');
  for (const std::string& name : names) {
    n.name = name;
    nodes.push_back(n);
  }
  if (f.size() > 3) {
    kiln::Result<std::string> kh = kiln::cli::known_hosts_line(names, f[2], f[3]);
    if (kh) {
      const std::vector<std::string> parts = split(kh->substr(0, kh->size() - 1), ' ');
      if (kh->back() != '\n' || parts.size() != 3 || parts[1] != f[2] || parts[2] != f[3]) __builtin_trap();
      for (const std::string& name : split(parts[0], ','))
        if (!token(name)) __builtin_trap();
      for (char c : parts[2])
        if (c == '\n') __builtin_trap();
    }
  }
  kiln::Result<kiln::cli::ClusterFiles> r = kiln::cli::render_cluster_files("c", nlohmann::json::array(), {"workers"}, nodes);
  if (!r) {
    for (char c : r.error().message)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) __builtin_trap();
    return 0;
  }
  check_lines(r->ssh_config, ssh_line_ok);
  check_lines(r->hostfile, hostfile_line_ok);
  check_lines(r->inventory, inventory_line_ok);
  (void)nlohmann::json::parse(r->cluster_json);  // throws (and aborts) if not JSON
  return 0;
}
