// PXE end to end with the real pieces: kilnd (KilndProcess) runs with
// --pxe-interface on the host end of a veth pair; the other end lives in a
// network namespace this test creates, where busybox udhcpc plays the node's
// firmware and curl fetches iPXE over TFTP. Every name carries this run's
// pid, and the namespace and veth are removed however the test ends.
//
// kilnd itself stays in the test's namespace so the test reaches its API on
// loopback; the DHCP/TFTP side sees only the veth (dnsmasq is bound to it).
#include <catch2/catch.hpp>
#include "tests/support/skip.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/crypto.h"
#include "kilnd_process.h"
#include "tests/support/http_test_client.h"
#include "tests/support/wait_until.h"

using namespace kiln::testing;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string kToken = "kiln_boot_integration_admin_0001";
Headers auth() { return {{"Authorization", "Bearer " + kToken}}; }

// Runs a shell command; returns its exit code and (optionally) its output.
int sh(const std::string& cmd, std::string* out = nullptr) {
  std::string full = cmd + " 2>&1";
  FILE* p = ::popen(full.c_str(), "r");
  if (p == nullptr) return -1;
  std::string text;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) text.append(buf, n);
  int st = ::pclose(p);
  if (out != nullptr) *out = text;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool executable(const char* p) { return ::access(p, X_OK) == 0; }

// Why this machine cannot run the PXE test, or "" when it can.
std::string missing_prerequisite() {
  if (::geteuid() != 0) return "not root";
  if (!executable("/usr/sbin/dnsmasq")) return "dnsmasq is not installed (/usr/sbin/dnsmasq)";
  if (!executable("/usr/bin/busybox") && !executable("/bin/busybox")) return "busybox is not installed";
  if (!executable("/usr/bin/curl")) return "curl is not installed";
  if (::access("/usr/lib/ipxe/undionly.kpxe", R_OK) != 0) return "ipxe is not installed (/usr/lib/ipxe)";
  std::string out;
  const std::string probe = "kiln-probe-" + std::to_string(::getpid());
  if (sh("ip netns add " + probe, &out) != 0) return "cannot create a network namespace: " + out;
  sh("ip netns del " + probe);
  return "";
}

// A veth pair: `host` (with `address`/24, in this namespace) and `peer` inside
// the namespace `ns`. Removed on destruction.
struct Lab {
  explicit Lab(int n) {
    const std::string id = std::to_string(::getpid() % 100000);
    ns = "kiln-bt-" + id;
    host = "kbs" + id;
    peer = "kbc" + id;
    subnet = "10.213." + std::to_string(n) + ".";
    address = subnet + "1";
    cleanup();
    std::string out;
    const std::vector<std::string> cmds = {
        "ip netns add " + ns,
        "ip link add " + host + " type veth peer name " + peer,
        "ip link set " + peer + " netns " + ns,
        "ip addr add " + address + "/24 dev " + host,
        "ip link set " + host + " up",
        "ip netns exec " + ns + " ip link set lo up",
        "ip netns exec " + ns + " ip link set " + peer + " up",
    };
    for (const auto& c : cmds) {
      INFO(c << ": " << out);
      REQUIRE(sh(c, &out) == 0);
    }
    script = "/tmp/kiln-udhcpc-" + id + ".sh";
    lease_file = "/tmp/kiln-udhcpc-" + id + ".env";
    std::ofstream(script) << "#!/bin/sh\n"
                             "case \"$1\" in\n"
                             "  bound|renew)\n"
                             "    env > " + lease_file + "\n"
                             "    ip addr flush dev \"$interface\"\n"
                             "    ip addr add \"$ip/${mask:-24}\" dev \"$interface\"\n"
                             "    ;;\n"
                             "esac\n"
                             "exit 0\n";
    ::chmod(script.c_str(), 0755);
  }
  ~Lab() {
    cleanup();
    ::unlink(script.c_str());
    ::unlink(lease_file.c_str());
  }
  void cleanup() {
    sh("ip link del " + host);  // takes the peer with it
    sh("ip netns del " + ns);
  }
  void set_mac(const std::string& mac) {
    REQUIRE(sh("ip netns exec " + ns + " ip link set " + peer + " down") == 0);
    REQUIRE(sh("ip netns exec " + ns + " ip link set " + peer + " address " + mac) == 0);
    REQUIRE(sh("ip netns exec " + ns + " ip addr flush dev " + peer) == 0);
    REQUIRE(sh("ip netns exec " + ns + " ip link set " + peer + " up") == 0);
  }
  // One DHCP exchange from the namespace: the lease's environment, or empty
  // when no lease came (udhcpc -n gives up after `tries` discovers).
  std::map<std::string, std::string> dhcp(int tries = 4) {
    ::unlink(lease_file.c_str());
    std::string out;
    const std::string cmd = "ip netns exec " + ns + " busybox udhcpc -f -q -n -i " + peer + " -t " +
                            std::to_string(tries) + " -T 1 -A 1 -O 224 -s " + script;
    int rc = sh(cmd, &out);
    last_output = out;
    std::map<std::string, std::string> env;
    if (rc != 0) return env;
    std::stringstream ss(slurp(lease_file));
    for (std::string l; std::getline(ss, l);) {
      auto eq = l.find('=');
      if (eq != std::string::npos) env[l.substr(0, eq)] = l.substr(eq + 1);
    }
    return env;
  }

  std::string ns, host, peer, subnet, address, script, lease_file, last_output;
};

std::string hex_decode(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

pid_t dnsmasq_pid(const KilndProcess& k) {
  long pid = std::atol(slurp(k.data_dir() + "/dnsmasq/dnsmasq.pid").c_str());
  if (pid <= 1 || ::kill(static_cast<pid_t>(pid), 0) != 0) return -1;
  return static_cast<pid_t>(pid);
}

bool wait_for(const std::function<bool()>& cond, std::chrono::milliseconds limit) {
  return wait_until(cond, limit, 50ms);
}

}  // namespace

TEST_CASE("PXE: DHCP for known MACs only, option 224, TFTP, dnsmasq restart, port removal") {
  const std::string why = missing_prerequisite();
  if (!why.empty()) {
    KILN_SKIP("skipping the PXE integration test: " << why);
  }
  Lab lab(static_cast<int>(::getpid() % 200) + 20);
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken, "--pxe-interface", lab.host, "--pxe-range",
                              lab.subnet + "100," + lab.subnet + "150"});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  const std::string boot_url = "http://" + lab.address + ":" + std::to_string(k.port());
  INFO("kilnd log:\n" << k.log());
  REQUIRE(wait_for([&] { return dnsmasq_pid(k) > 0; }, 5s));
  const pid_t first = dnsmasq_pid(k);
  std::string conf = slurp(dir.path() + "/dnsmasq/dnsmasq.conf");
  CHECK(conf.find("interface=" + lab.host + "\n") != std::string::npos);

  // An enrolled node with the namespace's MAC.
  const std::string mac = "52:54:00:7b:" + std::to_string(10 + ::getpid() % 80) + ":01";
  lab.set_mac(mac);
  json body = {{"name", "pxe-node"},
               {"bmc", {{"driver", "fake"}, {"address", "b"}, {"username", "u"}, {"password", "p"}}}};
  auto n = c.request("POST", "/v1/nodes", body.dump(), auth());
  REQUIRE(n.status == 201);
  std::string node = json::parse(n.body)["id"];
  auto p = c.request("POST", "/v1/ports", json{{"node", node}, {"address", mac}}.dump(), auth());
  REQUIRE(p.status == 201);
  std::string port = json::parse(p.body)["id"];
  REQUIRE(wait_for([&] { return ::access((dir.path() + "/dnsmasq/hosts/" + mac).c_str(), F_OK) == 0; }, 5s));

  SECTION("lease in range, option 224, TFTP, restart after kill -9, forgotten after port removal") {
    auto lease = lab.dhcp();
    INFO("udhcpc: " << lab.last_output << "\ndnsmasq log:\n" << slurp(dir.path() + "/dnsmasq/dnsmasq.log"));
    REQUIRE(lease.count("ip") == 1);
    const std::string ip = lease["ip"];
    CHECK(ip.rfind(lab.subnet, 0) == 0);
    const int last = std::stoi(ip.substr(lab.subnet.size()));
    CHECK(last >= 100);
    CHECK(last <= 150);
    CHECK(lease["serverid"] == lab.address);
    REQUIRE(lease.count("opt224") == 1);
    CHECK(hex_decode(lease["opt224"]) == boot_url);
    // BIOS PXE ROMs (no client-arch 7/9, no iPXE user class) are sent undionly.kpxe.
    CHECK(lease["boot_file"] == "undionly.kpxe");

    // TFTP from the namespace: byte-identical to Debian's iPXE binary.
    const std::string got = dir.path() + "/undionly.kpxe";
    std::string out;
    REQUIRE(sh("ip netns exec " + lab.ns + " curl -sS --max-time 20 -o " + got + " tftp://" + lab.address +
                   "/undionly.kpxe", &out) == 0);
    CHECK(slurp(got) == slurp("/usr/lib/ipxe/undionly.kpxe"));
    CHECK(slurp(got).size() > 10000);

    // dnsmasq killed: kilnd notices, starts it again, DHCP works again.
    REQUIRE(::kill(first, SIGKILL) == 0);
    REQUIRE(wait_for([&] { pid_t now = dnsmasq_pid(k); return now > 0 && now != first; }, 10s));
    CHECK(k.log().find("dnsmasq exited; restarting") != std::string::npos);
    CHECK(k.log().find("killed by signal 9") != std::string::npos);
    auto again = lab.dhcp();
    INFO("udhcpc: " << lab.last_output);
    CHECK(again.count("ip") == 1);

    // The port goes: its file goes, dnsmasq is told (SIGHUP), the MAC is unknown.
    REQUIRE(c.request("DELETE", "/v1/ports/" + port, "", auth()).status == 204);
    REQUIRE(wait_for([&] { return ::access((dir.path() + "/dnsmasq/hosts/" + mac).c_str(), F_OK) != 0; }, 5s));
    REQUIRE(wait_for([&] { return k.log().find("dnsmasq reloads its hosts (SIGHUP)") != std::string::npos; }, 5s));
    std::this_thread::sleep_for(300ms);  // dnsmasq re-reads the directory on its next loop
    auto gone = lab.dhcp(3);
    INFO("udhcpc: " << lab.last_output);
    CHECK(gone.empty());
    CHECK(dnsmasq_pid(k) > 0);  // SIGHUP reloaded it, did not kill it
  }

  SECTION("an unknown MAC gets no answer (discovery off)") {
    lab.set_mac("52:54:00:de:ad:" + std::to_string(10 + ::getpid() % 80));
    auto lease = lab.dhcp(3);
    INFO("udhcpc: " << lab.last_output);
    CHECK(lease.empty());
    CHECK(slurp(dir.path() + "/dnsmasq/dnsmasq.log").find("ignored") != std::string::npos);
  }

  SECTION("kilnd stops dnsmasq when it stops") {
    const pid_t pid = dnsmasq_pid(k);
    REQUIRE(pid > 0);
    CHECK(k.terminate() == 0);
    CHECK(wait_for([&] { return ::kill(pid, 0) != 0; }, 5s));
  }
}

TEST_CASE("PXE: a bad --pxe-interface stops kilnd at start with a clear message") {
  std::string out, err;
  TempDir dir;
  int rc = KilndProcess::run_to_exit({"--listen", "127.0.0.1:0", "--data-dir", dir.path(),
                                      "--pxe-interface", "kiln-nope0", "--pxe-range", "10.0.0.10,10.0.0.20"},
                                     &out, &err);
  CHECK(rc == 1);
  CHECK(err.find("kiln-nope0") != std::string::npos);
  rc = KilndProcess::run_to_exit({"--listen", "127.0.0.1:0", "--data-dir", dir.path(),
                                  "--pxe-interface", "lo"},
                                 &out, &err);
  CHECK(rc == 2);
  CHECK(err.find("--pxe-range") != std::string::npos);
}

TEST_CASE("kilnd serves image bytes with Range, HEAD and 416, os images need authorization") {
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  std::string content(1 << 20, 'x');
  for (std::size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 31 % 251);
  const std::string path = dir.path() + "/images/os.raw";  // kilnd's default image directory
  std::ofstream(path, std::ios::binary) << content;
  json body = {{"name", "os-img"}, {"kind", "os"}, {"format", "raw"}, {"sha256", kiln::sha256_hex(content)},
               {"size", content.size()}, {"source", path}};
  auto r = c.request("POST", "/v1/images", body.dump(), auth());
  INFO(r.body);
  REQUIRE(r.status == 201);
  body["size"] = content.size() + 1;
  body["name"] = "os-img-2";
  auto bad = c.request("POST", "/v1/images", body.dump(), auth());
  CHECK(bad.status == 400);
  CHECK(json::parse(bad.body)["errors"][0]["field"] == "/size");

  // A private os image without credentials: as if missing (no existence oracle).
  CHECK(c.request("GET", "/v1/images/os-img/content").status == 404);
  CHECK(c.request("GET", "/v1/images/os-img/content", "", {{"Authorization", "Bearer kiln_nonsense"}}).status == 401);
  Headers range = auth();
  range["Range"] = "bytes=100-199";
  auto part = c.request("GET", "/v1/images/os-img/content", "", range);
  CHECK(part.status == 206);
  CHECK(part.body == content.substr(100, 100));
  range["Range"] = "bytes=" + std::to_string(content.size()) + "-";
  CHECK(c.request("GET", "/v1/images/os-img/content", "", range).status == 416);
  auto whole = c.request("GET", "/v1/images/os-img/content", "", auth());
  CHECK(whole.status == 200);
  CHECK(whole.body == content);

  std::string out;
  if (sh("curl --version", &out) == 0) {
    sh("curl -sS -I -H 'Authorization: Bearer " + kToken + "' http://127.0.0.1:" + std::to_string(k.port()) +
           "/v1/images/os-img/content",
       &out);
    CHECK(out.rfind("HTTP/1.1 200", 0) == 0);
    CHECK(out.find("Content-Length: " + std::to_string(content.size())) != std::string::npos);
    CHECK(out.find("ETag: \"" + kiln::sha256_hex(content) + "\"") != std::string::npos);
  }
}
