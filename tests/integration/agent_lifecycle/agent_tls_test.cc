// TLS for the agent (docs/agent-protocol.md, "TLS"), against a running kilnd
// serving HTTPS with a throw-away self-signed certificate: the deploy
// ramdisk's command line carries the certificate's SHA-256 (checked against
// `openssl x509 -outform DER | sha256sum`, an independent observer), so does
// write_image for the seed, and a real kiln-agent in the os phase talks to
// kilnd only over TLS to exactly that certificate: a wrong pin, or no pin at
// all, and kilnd never hears from it.
#include <catch2/catch.hpp>
#include "tests/support/skip.h"

#include <cstdio>
#include <filesystem>

#include "agent_lifecycle/agent_harness.h"
#include "tests/support/logged_child.h"
#include "tests/support/self_signed_cert.h"

using namespace kiln::testing;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// SHA-256 of the certificate's DER encoding, computed by the openssl CLI.
std::string openssl_pin(const std::string& cert_file) {
  const std::string cmd = "openssl x509 -in '" + cert_file + "' -outform DER | sha256sum";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[128] = {};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, p);
  ::pclose(p);
  std::string out(buf, n);
  return out.substr(0, out.find(' '));
}

// A real os-phase kiln-agent on a fake root holding the node's MAC, with
// `seed` as its --seed-file.
std::unique_ptr<LoggedChild> os_agent(const std::string& dir, const std::string& tag, uint16_t port,
                                       const std::string& mac, const std::string& seed) {
  const std::string root = dir + "/root-" + tag;
  const std::string net = root + "/sys/class/net/eth0";
  std::filesystem::create_directories(net + "/device");
  write_file(net + "/address", mac + "\n");
  write_file(net + "/type", "1\n");
  write_file(root + "/seed.env", seed);
  return std::make_unique<LoggedChild>(
      std::vector<std::string>{KILN_AGENT_BIN, "run", "--api", "https://127.0.0.1:" + std::to_string(port), "--phase",
                               "os", "--root", root, "--seed-file", root + "/seed.env", "--log-level", "debug"},
      dir + "/agent-" + tag + ".log");
}

}  // namespace

TEST_CASE("agent TLS: the ramdisk command line and the seed carry kilnd's certificate pin, and the agent holds to it") {
  if (!fixtures_present()) KILN_SKIP("the Redfish fixtures are absent: " << kFixtures);
  VbmcProcess bmc({"--redfish-listen", "127.0.0.1:0", "--user", kUser, "--password", kPassword, "--mockup",
                   kFixtures + "/supermicro-hgx-h100"});
  TempDir dir;
  SelfSignedCert cert;
  const std::string pin = openssl_pin(cert.cert_file());
  REQUIRE(pin.size() == 64);
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken, "--power-sync-interval", "0", "--tls-cert",
                              cert.cert_file(), "--tls-key", cert.key_file()});
  k.start();
  HttpTestClient c("127.0.0.1", k.port(), true);
  register_images(c, dir.path(), os_bytes());
  const std::string mac = "52:54:00:a9:20:01";
  k.lease_to_loopback(mac);
  auto r = c.request("POST", "/v1/nodes", redfish_node("pinned", bmc.port(), mac).dump(), auth());
  REQUIRE(r.status == 201);

  std::atomic<bool> os_booted{false};
  std::mutex mu;
  std::string secret;
  AgentBehaviour b;
  b.tls = true;
  b.os_boot = [&](const std::string& s) {
    std::lock_guard<std::mutex> l(mu);
    secret = s;
    os_booted = true;
  };
  TestAgent ramdisk(k.port(), "pinned", mac, b);
  to_available(c, "pinned");

  // The deploy ramdisk's kernel arguments: an https boot URL and the pin.
  const std::string script = ramdisk.ramdisk_script();
  INFO(script);
  CHECK(script_arg(script, "kiln.tls_sha256") == pin);
  CHECK_THAT(script_arg(script, "kiln.api"), Catch::StartsWith("https://"));

  put(c, "/v1/nodes/pinned/states/provision", {{"target", "deploy"}, {"image", "demo-os"}});
  wait_node(c, "pinned", [](const json& n) { return n["provision_step"] == "wait_boot"; });
  for (int i = 0; i < 100 && !os_booted; ++i) std::this_thread::sleep_for(50ms);
  REQUIRE(os_booted);
  // write_image hands the ramdisk agent the pin for the seed block.
  json args = ramdisk.write_image_args();
  CHECK(text(args["tls_sha256"]) == pin);
  CHECK_THAT(text(args["url"]), Catch::StartsWith("https://"));
  std::string os_secret;
  {
    std::lock_guard<std::mutex> l(mu);
    os_secret = secret;
  }
  REQUIRE(os_secret.size() == 64);

  // The OS's agent with a wrong pin: the handshake's certificate does not
  // match, nothing is sent, and the node never hears of it.
  const std::string wrong(64, 'a');
  auto bad = os_agent(dir.path(), "wrong-pin", k.port(), mac,
                      "KILN_OS_SECRET=" + os_secret + "\nKILN_TLS_SHA256=" + wrong + "\n");
  // Without a pin, an https URL is refused outright.
  auto unpinned = os_agent(dir.path(), "no-pin", k.port(), mac, "KILN_OS_SECRET=" + os_secret + "\n");
  bool refused = false, no_pin = false;
  for (int i = 0; i < 100 && !(refused && no_pin); ++i) {
    std::this_thread::sleep_for(100ms);
    refused = bad->log().find("is not the pinned one") != std::string::npos;
    no_pin = unpinned->log().find("needs kilnd's certificate pin") != std::string::npos;
  }
  INFO(bad->log());
  INFO(unpinned->log());
  CHECK(refused);
  CHECK(no_pin);
  CHECK(get(c, "/v1/nodes/pinned")["provision_step"] == "wait_boot");
  bad->stop();
  unpinned->stop();

  // The right pin: the lookup is the "OS booted" signal and the deploy ends.
  auto good = os_agent(dir.path(), "pin", k.port(), mac,
                       "KILN_OS_SECRET=" + os_secret + "\nKILN_TLS_SHA256=" + pin + "\n");
  json n = wait_stable(c, "pinned", "active");
  INFO(good->log());
  CHECK(text(n["last_error"]).empty());
  good->stop();
}
