// POST /v1/phone-home/{token} (controller/api/phone_home_routes.cc) as
// cloud-init's phone_home reaches it: Api::handle() in front of a real
// AgentBroker on a real SQLite store, a virtual node deploying with its
// NoCloud seed rendered, boot data bound to a DHCP lease file. The body is
// form-encoded as `requests` encodes cloud-init's dict.
#include <utility>  // before Asio

#include <fstream>
#include <string>
#include <vector>

#include "common/crypto.h"
#include "controller/api/api.h"
#include "controller/boot/boot_script.h"
#include "controller/conductor/conductor.h"
#include "tests/unit/agent_broker/broker_harness.h"  // the broker on a real store

using namespace kiln;
using namespace kiln::testing;
using nlohmann::json;
namespace bhttp = boost::beast::http;

namespace {

struct Reply {
  int status = 0;
  std::string text;
  json body;
};

// An SSH string (uint32 length, bytes): the wire format of key blobs.
std::string ssh_string(std::string_view v) {
  const auto n = static_cast<uint32_t>(v.size());
  return std::string{static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                     static_cast<char>(n)} +
         std::string(v);
}
// /etc/ssh/ssh_host_*_key.pub as cloud-init reads it (with its comment and newline).
std::string ed25519_line(char fill) {
  return "ssh-ed25519 " + base64_encode(ssh_string("ssh-ed25519") + ssh_string(std::string(32, fill))) + " root@vm\n";
}
std::string rsa_line() {
  return "ssh-rsa " + base64_encode(ssh_string("ssh-rsa") + ssh_string("\x01\x00\x01") + ssh_string(std::string(257, '\x7f'))) +
         " root@vm\n";
}

// application/x-www-form-urlencoded as `requests` writes a dict.
std::string form(const std::vector<std::pair<std::string, std::string>>& fields) {
  auto enc = [](const std::string& s) {
    std::string out;
    const char* hex = "0123456789ABCDEF";
    for (unsigned char c : s) {
      if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out.push_back(static_cast<char>(c));
      else if (c == ' ') out.push_back('+');
      else out += std::string("%") + hex[c >> 4] + hex[c & 15];
    }
    return out;
  };
  std::string body;
  for (const auto& [k, v] : fields) body += (body.empty() ? "" : "&") + enc(k) + "=" + enc(v);
  return body;
}

// An Api with the phone-home and NoCloud routes' dependencies over the broker harness.
class PhoneHomeApi {
 public:
  explicit PhoneHomeApi(Harness& h)
      : h_(h),
        dir_(make_dir()),
        conductor_(h.io(), h.store(), h.db(), drivers_, box_, clock_, ConductorOptions{}, Logger(LogLevel::kOff)),
        api_(deps()) {
    api_.set_ready(true);
  }
  ~PhoneHomeApi() {
    api_.shutdown();
    std::filesystem::remove_all(dir_);
  }

  // Leases `mac` to the address every request comes from.
  void lease(const std::string& mac) { std::ofstream(boot_.lease_file, std::ios::app) << "0 " << mac << " 127.0.0.1 * *\n"; }

  Reply send(bhttp::verb verb, const std::string& target, const std::string& body = "",
             const std::string& type = "application/x-www-form-urlencoded") {
    http::Request req{verb, target, 11};
    req.set(bhttp::field::host, "kiln.test:8080");
    if (!type.empty()) req.set(bhttp::field::content_type, type);
    req.body() = body;
    req.prepare_payload();
    http::RequestInfo info{"req-phone-home", "127.0.0.1:1", false};
    http::Reply r = h_.sync(api_.handle(req, info));
    Reply out;
    out.status = static_cast<int>(r.response.result_int());
    out.text = r.response.body();
    out.body = json::parse(out.text, nullptr, false);
    return out;
  }

 private:
  ApiDeps deps() {
    boot_.binding = boot::LeaseBinding::kLeaseFile;
    boot_.lease_file = dir_ + "/dhcp.leases";
    std::ofstream(boot_.lease_file).flush();
    ApiDeps d{h_.store(), h_.db(), conductor_, box_, clock_, Logger(LogLevel::kOff), [] { return std::size_t{0}; }};
    d.agent_broker = &h_.broker();
    d.agents = &h_.broker();
    d.boot = &boot_;
    d.nocloud_base_url = [] { return std::string("http://kiln.test:8080"); };
    return d;
  }

  Harness& h_;
  std::string dir_;
  boot::BootSettings boot_;
  SecretBox box_{SecretBox::Key{7, 7, 7}};
  SystemClock clock_;
  DriverRegistry drivers_;
  Conductor conductor_;
  Api api_;
};

// A virtual node deploying, waiting for its OS, its MAC leased to the caller.
Node deploying_vm(Harness& h, PhoneHomeApi& a, const std::string& name, const std::string& mac) {
  Node n = h.node(name, mac, S::kDeploying, "wait_boot");
  Result<Node> vm = h.store().update_node_if(n.id, NodeCondition{}, [](Node& m) { m.kind = NodeKind::kVirtual; return ok_status(); }, {});
  REQUIRE(vm);
  a.lease(mac);
  return *vm;
}

// The phone-home URL's path in the node's rendered NoCloud user-data.
std::string seed_phone_home_path(PhoneHomeApi& a, const Node& n) {
  Reply seed = a.send(bhttp::verb::get, "/v1/nocloud/" + n.id + "/user-data", "", "");
  INFO(seed.text);
  REQUIRE(seed.status == 200);
  const std::string prefix = "phone_home:\n  url: \"http://kiln.test:8080";
  const std::size_t at = seed.text.find(prefix);
  REQUIRE(at != std::string::npos);
  const std::size_t start = at + prefix.size();
  const std::string path = seed.text.substr(start, seed.text.find('"', start) - start);
  CHECK(path.rfind("/v1/phone-home/" + n.id + ".", 0) == 0);
  CHECK(seed.text.find("  post: [pub_key_rsa, pub_key_ecdsa, pub_key_ed25519, instance_id, hostname]\n  tries: 10\n") !=
        std::string::npos);
  return path;
}

std::vector<json> host_key_events(Harness& h, const std::string& node_id) {
  auto evs = h.store().list_events(0, 1000, node_id, std::nullopt);
  REQUIRE(evs);
  std::vector<json> out;
  for (const auto& e : *evs)
    if (e.type == "node.ssh_host_keys") out.push_back(e.detail);
  return out;
}

}  // namespace

TEST_CASE("phone-home: the seed's one-time URL stores the OS's host keys once, and a replay is the unknown-token 404") {
  Harness h;
  PhoneHomeApi a(h);
  Node n = deploying_vm(h, a, "vm-a", "52:54:00:00:0a:01");
  const std::string path = seed_phone_home_path(a, n);
  // A second rendering (cloud-init fetching again) carries the same URL.
  CHECK(seed_phone_home_path(a, n) == path);

  const std::string body = form({{"pub_key_rsa", rsa_line()}, {"pub_key_ecdsa", "N/A"},
                                 {"pub_key_ed25519", ed25519_line('\x05')}, {"instance_id", n.id},
                                 {"hostname", "vm-a"}});
  Reply ok = a.send(bhttp::verb::post, path, body);
  INFO(ok.text);
  REQUIRE(ok.status == 204);
  Node stored = *h.store().get_node(n.id);
  REQUIRE(stored.ssh_host_keys.size() == 2);
  CHECK(stored.ssh_host_keys[0].type == "ssh-rsa");
  CHECK(stored.ssh_host_keys[1].type == "ssh-ed25519");
  CHECK(stored.ssh_host_keys[1].sha256 ==
        ssh_key_sha256_fingerprint(ssh_string("ssh-ed25519") + ssh_string(std::string(32, '\x05'))));
  std::vector<json> events = host_key_events(h, n.id);
  REQUIRE(events.size() == 1);
  CHECK(events[0]["ssh_host_keys"][1]["sha256"] == stored.ssh_host_keys[1].sha256);
  CHECK(events[0]["hostname"] == "vm-a");

  // Used up: the same post again, or other keys, is the 404 an unknown token gets.
  Reply replay = a.send(bhttp::verb::post, path, body);
  CHECK(replay.status == 404);
  Reply other = a.send(bhttp::verb::post, path,
                       form({{"pub_key_ed25519", ed25519_line('\x06')}, {"instance_id", n.id}}));
  CHECK(other.status == 404);
  CHECK(h.store().get_node(n.id)->ssh_host_keys[1].sha256 == stored.ssh_host_keys[1].sha256);
  CHECK(host_key_events(h, n.id).size() == 1);
}

TEST_CASE("phone-home: wrong, malformed and cross-node tokens and unbound callers all get the one 404") {
  Harness h;
  PhoneHomeApi a(h);
  Node n = deploying_vm(h, a, "vm-a", "52:54:00:00:0b:01");
  Node m = deploying_vm(h, a, "vm-b", "52:54:00:00:0b:02");
  const std::string path = seed_phone_home_path(a, n);
  const std::string other_path = seed_phone_home_path(a, m);
  const std::string hex = path.substr(path.rfind('.') + 1);
  const std::string body = form({{"pub_key_ed25519", ed25519_line('\x05')}, {"instance_id", n.id}});
  std::string flipped = hex;
  flipped[0] = flipped[0] == 'a' ? 'b' : 'a';
  for (const std::string& token :
       {n.id + "." + flipped, m.id + "." + hex, n.id, hex, n.name + "." + hex, n.id + "." + hex + "0",
        n.id + "." + std::string(64, 'A'), std::string("x.") + hex, "." + hex}) {
    INFO(token);
    Reply r = a.send(bhttp::verb::post, "/v1/phone-home/" + token, body);
    CHECK(r.status == 404);
    CHECK(r.body["detail"] == "no such resource: /v1/phone-home/" + token);
  }
  // vm-a's token never writes vm-b, whatever the body names.
  Reply cross = a.send(bhttp::verb::post, path, form({{"pub_key_ed25519", ed25519_line('\x05')}, {"instance_id", m.id}}));
  CHECK(cross.status == 400);
  CHECK(h.store().get_node(m.id)->ssh_host_keys.empty());
  CHECK(h.store().get_node(n.id)->ssh_host_keys.empty());
  // A caller not holding the node's lease: the same 404, before the body.
  Node far = h.node("vm-c", "52:54:00:00:0b:03", S::kDeploying, "wait_boot");
  Result<std::string> far_token = h.sync(h.broker().phone_home_token(far));
  REQUIRE(far_token);
  Reply unbound = a.send(bhttp::verb::post, "/v1/phone-home/" + *far_token,
                         form({{"pub_key_ed25519", ed25519_line('\x05')}, {"instance_id", far.id}}));
  CHECK(unbound.status == 404);
  CHECK(h.store().get_node(far.id)->ssh_host_keys.empty());
  // Both real tokens still work.
  CHECK(a.send(bhttp::verb::post, path, body).status == 204);
  CHECK(a.send(bhttp::verb::post, other_path, form({{"pub_key_ed25519", ed25519_line('\x07')}, {"instance_id", m.id}}))
            .status == 204);
}

TEST_CASE("phone-home: a bad field is a 400 naming it, nothing is stored, and the token still works") {
  Harness h;
  PhoneHomeApi a(h);
  Node n = deploying_vm(h, a, "vm-a", "52:54:00:00:0c:01");
  const std::string path = seed_phone_home_path(a, n);
  const int64_t version = h.store().get_node(n.id)->version;
  const std::string good = ed25519_line('\x05');
  struct Bad {
    std::vector<std::pair<std::string, std::string>> fields;
    std::string field;
  };
  const std::string k = good.substr(12, good.find(' ', 12) - 12);
  for (const Bad& b : std::vector<Bad>{
           {{{"pub_key_ed25519", "ssh-ed25519 " + k.substr(4)}, {"instance_id", n.id}}, "pub_key_ed25519"},
           {{{"pub_key_ed25519", "ssh-ed25519 " + k + "\nssh-rsa AAAA"}, {"instance_id", n.id}}, "pub_key_ed25519"},
           {{{"pub_key_ed25519", rsa_line()}, {"instance_id", n.id}}, "pub_key_ed25519"},
           {{{"pub_key_rsa", "ssh-dss AAAAB3NzaC1kc3M="}, {"pub_key_ed25519", good}, {"instance_id", n.id}}, "pub_key_rsa"},
           {{{"pub_key_ecdsa", good}, {"instance_id", n.id}}, "pub_key_ecdsa"},
           {{{"pub_key_rsa", "N/A"}, {"pub_key_ecdsa", "N/A"}, {"pub_key_ed25519", "N/A"}, {"instance_id", n.id}},
            "pub_key_ed25519"},
           {{{"pub_key_ed25519", good}, {"instance_id", n.id}, {"hostname", "vm_a;reboot"}}, "hostname"},
           {{{"pub_key_ed25519", good}, {"instance_id", "i-other"}}, "instance_id"},
           {{{"pub_key_ed25519", good}}, "instance_id"},
           {{{"pub_key_ed25519", good}, {"pub_key_ed25519", good}, {"instance_id", n.id}}, "pub_key_ed25519"},
       }) {
    INFO(b.field);
    Reply r = a.send(bhttp::verb::post, path, form(b.fields));
    INFO(r.text);
    CHECK(r.status == 400);
    REQUIRE(r.body.contains("errors"));
    CHECK(r.body["errors"][0]["field"] == b.field);
    CHECK(r.text.find(k.substr(0, 20)) == std::string::npos);  // the reason, never the value
  }
  Reply escape = a.send(bhttp::verb::post, path, "pub_key_ed25519=%zz&instance_id=" + n.id);
  CHECK(escape.status == 400);
  Reply json_body = a.send(bhttp::verb::post, path, json({{"pub_key_ed25519", good}}).dump(), "application/json");
  CHECK(json_body.status == 415);
  // Over 64 KiB: 413, whatever it holds.
  Reply big = a.send(bhttp::verb::post, path,
                     form({{"pub_key_ed25519", good}, {"instance_id", n.id}, {"x", std::string(70 * 1024, 'a')}}));
  CHECK(big.status == 413);
  Node after = *h.store().get_node(n.id);
  CHECK(after.ssh_host_keys.empty());
  CHECK(after.version == version);
  CHECK(host_key_events(h, n.id).empty());
  // Nothing was used up: the real post still lands (the config drive's
  // "<node>-<allocation>" instance id form is the NoCloud one here: the node's id).
  CHECK(a.send(bhttp::verb::post, path, form({{"pub_key_ed25519", good}, {"instance_id", n.id}})).status == 204);
}

TEST_CASE("phone-home: the next boot attempt's forget() kills the old token and clears the keys") {
  Harness h;
  PhoneHomeApi a(h);
  Node n = deploying_vm(h, a, "vm-a", "52:54:00:00:0d:01");
  const std::string first = seed_phone_home_path(a, n);
  const std::string body = form({{"pub_key_ed25519", ed25519_line('\x05')}, {"instance_id", n.id}});
  REQUIRE(a.send(bhttp::verb::post, first, body).status == 204);
  REQUIRE(h.store().get_node(n.id)->ssh_host_keys.size() == 1);

  REQUIRE(h.sync(h.broker().forget(n.id)));
  CHECK(h.store().get_node(n.id)->ssh_host_keys.empty());
  std::vector<json> events = host_key_events(h, n.id);
  REQUIRE(events.size() == 2);
  CHECK(events[1]["ssh_host_keys"].empty());
  // The old URL is dead, before and after the new deploy renders its seed.
  CHECK(a.send(bhttp::verb::post, first, body).status == 404);
  const std::string second = seed_phone_home_path(a, n);
  CHECK(second != first);
  CHECK(a.send(bhttp::verb::post, first, body).status == 404);
  CHECK(h.store().get_node(n.id)->ssh_host_keys.empty());
  // An unused token dies the same way.
  REQUIRE(h.sync(h.broker().forget(n.id)));
  CHECK(a.send(bhttp::verb::post, second, body).status == 404);
  const std::string third = seed_phone_home_path(a, n);
  CHECK(a.send(bhttp::verb::post, third, body).status == 204);
}
