// check_ssh_public_key against keys made by OpenSSH's ssh-keygen (the
// independent writer of the format) and against each way a line can be wrong.
#include <catch2/catch.hpp>

#include <string>

#include "controller/tenancy/ssh_key.h"

using namespace kiln;

namespace {

// Public halves of throwaway keys made with ssh-keygen 9.2 for these tests.
const std::string kEd25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIM6jHR8C6awzVMqmZAWuFW2u1isrYanrS/Ozu11WcKN8 ci@example";
const std::string kRsa3072 =
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQC9C0g5wNCbkLJ9qdpQ7Um41ziYk57CGqhgPB9ogxc+a+kPeE/OpuCvBZjs6KhPPHJ5dp5OGsfEB+4NmSgrDybRfi7A7O2eCWx5+x0obpWICi81eV5Ohs0oqc92ltoEP+d68fZMfGUGwQF7e83CvHpf+KGVWZMv3K3vxBoPB07BhhMkB9AiHAHswqoypDETE6iq8KXV/w60lh+2HDiZ0XBnkOYvLlLCFDeuw8CSKoopj5H6TwWLXI7cyi9QkfXotXUMB+o4Dic8p4rFM8sGA2Bwcbs88pfPcTtoW4c0sJ7PkGrIMoDsxuG3oiYQjK4Yp4Sf1Bjy0js8FfcD9Vt9oe6S0Tu3Nhtalnx/SiPPcZoZi4xHruahZIc/zsMUlXPcq8miB4Pw0dUPk2oI3V7MK31xJerv7YK0GyxyLz3f8yXoheKB0JoNki4OiQ5JV5/cUbF6eB9cjMhmcYes8M/m42SYywre5obebkthjmy/DwBnTR9XHW/Om6QZPPKqDJcODqs= ops@example";
const std::string kRsa1024 =
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQC7bmr3I04vSvpkI4+nH1Kawy/eoZAe2+jT+dtFE8iNdww/nW/ChUhUB1mCmipVBV8wA1+CVbQbSqsRuqrgvBWWLtV331T6X3HMxSHK37NYbPagOgW9S7NuwhzODMBe77PTZMR6KiFgRBn5Dvrc9vIymZqkgVhxxGwTqQtNUBzK/w== old@example";
const std::string kEcdsa256 =
    "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBDHrzSTuT3gCsw+ARiW6PdiJWdwoyi2GjWQ8PjL4EAFYB+1brU/AC06zEk8P8zH2RXTf36LHAS1lL49hyy++oLw= e256";
const std::string kEcdsa521 =
    "ecdsa-sha2-nistp521 AAAAE2VjZHNhLXNoYTItbmlzdHA1MjEAAAAIbmlzdHA1MjEAAACFBAA7mFaIsP7kPeJmX4RrxakVe3xH2FzRMlOpTXhy6y4I8mByGONHC8uKFlK5VPaAazpGwcIAozJRY9j19KWu4ZozpQDbgCEsJjsiXMS9b+jdOFSToP1TghaT5Rh9lT9Eolb63Ezvjg/b3XQKVPQqNX3IuA60j3MbhoT9QIp8urZXC0ipuQ== e521";

std::string problem(const std::string& line) {
  Status s = check_ssh_public_key(line, "/ssh_keys/3");
  if (s) return "";
  REQUIRE(s.error().fields.size() == 1);
  CHECK(s.error().fields[0].field == "/ssh_keys/3");
  return s.error().fields[0].message;
}

std::string blob_of(const std::string& line) { return line.substr(line.find(' ') + 1, line.rfind(' ') - line.find(' ') - 1); }

}  // namespace

TEST_CASE("ssh keys: what ssh-keygen writes is accepted, comment or not", "[ssh_key]") {
  for (const std::string& k : {kEd25519, kRsa3072, kEcdsa256, kEcdsa521}) {
    INFO(k);
    CHECK(problem(k).empty());
    CHECK(problem(k.substr(0, k.rfind(' '))).empty());  // without the comment
  }
  CHECK(problem("  " + kEd25519).empty());
}

TEST_CASE("ssh keys: each kind of bad line is refused with its reason", "[ssh_key]") {
  CHECK(problem(kRsa1024) == "RSA key of 1024 bits; at least 2048 are required");
  CHECK(problem("").find("empty") != std::string::npos);
  CHECK(problem("ssh-ed25519").find("OpenSSH public key") != std::string::npos);
  CHECK(problem("ssh-dss AAAAB3NzaC1kc3M= x").find("unknown key type 'ssh-dss'") != std::string::npos);
  CHECK(problem("command=\"/bin/true\" " + kEd25519).find("unknown key type") != std::string::npos);
  CHECK(problem("ssh-ed25519 not*base64 x") == "key is not valid base64");
  // The blob names another type than the line.
  CHECK(problem("ssh-rsa " + blob_of(kEd25519)) == "key blob is a ssh-ed25519 key, not ssh-rsa");
  CHECK(problem("ecdsa-sha2-nistp384 " + blob_of(kEcdsa256)).find("not ecdsa-sha2-nistp384") != std::string::npos);
  // Truncated: the last 8 base64 characters (6 bytes) cut off.
  std::string b = blob_of(kEd25519);
  CHECK(problem("ssh-ed25519 " + b.substr(0, b.size() - 8)) == "ed25519 key must be 32 bytes");
  // Trailing data after the key's fields ("AAAA" is four zero bytes).
  CHECK(problem("ssh-ed25519 " + b + "AAAA") == "key blob has trailing data");
  CHECK(problem(kEd25519 + "\nssh-ed25519 AAAA") == "must be a single line");
  CHECK(problem(std::string(20000, 'a')).find("16384") != std::string::npos);
}
