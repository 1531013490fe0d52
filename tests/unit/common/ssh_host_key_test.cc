// common/ssh_host_key.h: the host key rule and the SHA256 fingerprint,
// checked against the real reader: keys made by ssh-keygen, fingerprints as
// `ssh-keygen -l` prints them.

#include "common/ssh_host_key.h"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/crypto.h"
#include "tests/support/skip.h"

using kiln::Result;

namespace {

// stdout of `command`, and its exit status.
std::pair<std::string, int> run(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return {"", -1};
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = ::pclose(p);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kiln-hostkey-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

TEST_CASE("ssh host keys: keys ssh-keygen makes parse, with the fingerprint ssh-keygen -l prints") {
  if (run("command -v ssh-keygen").second != 0) KILN_SKIP("ssh-keygen is not installed");
  TempDir dir;
  struct Kind {
    const char* args;
    const char* type;
  };
  for (const Kind& k : {Kind{"-t ed25519", "ssh-ed25519"}, Kind{"-t ecdsa -b 256", "ecdsa-sha2-nistp256"},
                        Kind{"-t ecdsa -b 384", "ecdsa-sha2-nistp384"}, Kind{"-t ecdsa -b 521", "ecdsa-sha2-nistp521"},
                        Kind{"-t rsa -b 2048", "ssh-rsa"}}) {
    INFO(k.type);
    const std::filesystem::path key = dir.path / (std::string(k.type) + "_key");
    REQUIRE(run("ssh-keygen -q -N '' -C 'root@node 1' " + std::string(k.args) + " -f '" + key.string() + "'").second == 0);
    const std::string line = read_file(key.string() + ".pub");  // "<type> <base64> root@node 1\n"
    Result<kiln::SshHostKey> parsed = kiln::parse_ssh_host_key_line(line);
    REQUIRE(parsed);
    CHECK(parsed->type == k.type);
    CHECK(line.rfind(parsed->type + " " + parsed->key + " ", 0) == 0);
    // `ssh-keygen -l -E sha256 -f F` prints "<bits> SHA256:<b64> <comment> (<TYPE>)".
    auto [printed, rc] = run("ssh-keygen -l -E sha256 -f '" + key.string() + ".pub'");
    REQUIRE(rc == 0);
    std::istringstream fields(printed);
    std::string bits, fingerprint;
    fields >> bits >> fingerprint;
    CHECK(parsed->sha256 == fingerprint);
    // The same key given as its two fields.
    Result<kiln::SshHostKey> again = kiln::parse_ssh_host_key(parsed->type, parsed->key);
    REQUIRE(again);
    CHECK(again->sha256 == fingerprint);
    // Named as another type, it is refused.
    const std::string other = parsed->type == "ssh-ed25519" ? "ssh-rsa" : "ssh-ed25519";
    Result<kiln::SshHostKey> wrong = kiln::parse_ssh_host_key(other, parsed->key);
    REQUIRE_FALSE(wrong);
    CHECK(wrong.error().fields.at(0).field == "key");
  }
}

TEST_CASE("ssh host keys: the fingerprint is SHA256: and unpadded base64 of the blob's SHA-256") {
  // SHA-256("") = e3b0c442..., whose base64 is 47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=.
  CHECK(kiln::ssh_key_sha256_fingerprint("") == "SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU");
}

TEST_CASE("ssh host keys: a public key line is <type> <base64> [comment], nothing else") {
  const std::string k = "AAAAC3NzaC1lZDI1NTE5AAAAIM6jHR8C6awzVMqmZAWuFW2u1isrYanrS/Ozu11WcKN8";
  for (const std::string& good : {"ssh-ed25519 " + k, "ssh-ed25519 " + k + "\n", "ssh-ed25519 " + k + " root@h\r\n",
                                  "ssh-ed25519\t" + k + "  a comment with blanks"}) {
    Result<kiln::SshHostKey> r = kiln::parse_ssh_host_key_line(good);
    REQUIRE(r);
    CHECK(r->key == k);
  }
  for (const std::string& bad : {std::string(""), std::string("N/A"), std::string("ssh-ed25519"), k, "ssh-dss " + k,
                                 "ssh-ed25519 " + k + "\nssh-rsa AAAA", "ssh-ed25519 " + k + " \x1b[2J",
                                 "ssh-ed25519 " + k.substr(4), "ssh-ed25519 " + std::string(20000, 'A')}) {
    INFO(bad.substr(0, 60));
    Result<kiln::SshHostKey> r = kiln::parse_ssh_host_key_line(bad);
    REQUIRE_FALSE(r);
    REQUIRE(r.error().fields.size() == 1);
    CHECK(r.error().fields[0].field == "key");
    // Never echoes the machine's text.
    CHECK(r.error().message.find("\x1b") == std::string::npos);
    CHECK(r.error().message.size() < 200);
  }
}
