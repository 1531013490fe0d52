// A deploy of an image whose OS runs no kiln-agent (a distro cloud image:
// Image::os_agent false), through the real kilnd and API with the test-side
// ramdisk agent (agent_harness.h) on a Redfish node: the node is validated in
// the deploy ramdisk before anything is written, the image and config drive
// are written, the node boots its disk, and the deploy ends only when
// cloud-init's phone_home posts to the URL the config drive carries; without
// that post the deploying deadline fails it with the likely cause.
#include <catch2/catch.hpp>
#include "tests/support/skip.h"

#include "agent_lifecycle/agent_harness.h"

using namespace kiln::testing;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

json cloud_profile() {
  return {{"name", "cloud-lab"},
          {"gpu", {{"count", 0}}},
          {"nvme", {{"devices", 0}}},
          {"jitter", {{"duration_s", 1}}},
          {"thresholds", {{"jitter_p999_us_max", 1e6}}},
          {"plans", {{"quick", {"jitter"}}, {"full", {"jitter"}}}}};
}

// The phone-home token in a config drive: the URL's last segment
// ("<node id>.<64 hex>"), as cloud-init reads it from user-data.
std::string phone_home_token(const std::string& iso) {
  const std::string mark = "/v1/phone-home/";
  auto at = iso.find(mark);
  if (at == std::string::npos) return "";
  at += mark.size();
  auto end = at;
  while (end < iso.size() && (std::isxdigit(static_cast<unsigned char>(iso[end])) || iso[end] == '-' || iso[end] == '.'))
    ++end;
  return iso.substr(at, end - at);
}

std::string ssh_string(std::string_view v) {
  const auto n = static_cast<uint32_t>(v.size());
  return std::string{static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                     static_cast<char>(n)} +
         std::string(v);
}

// cloud-init's phone_home body (form-encoded, as `requests` sends its dict):
// an ed25519 host key line and the instance id.
std::string phone_home_body(const std::string& instance_id) {
  const std::string line =
      "ssh-ed25519 " + kiln::base64_encode(ssh_string("ssh-ed25519") + ssh_string(std::string(32, 'k'))) + " root@os\n";
  std::string enc;
  const char* hex = "0123456789ABCDEF";
  for (unsigned char ch : line) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.') enc.push_back(static_cast<char>(ch));
    else if (ch == ' ') enc.push_back('+');
    else enc += std::string("%") + hex[ch >> 4] + hex[ch & 15];
  }
  return "pub_key_ed25519=" + enc + "&instance_id=" + instance_id + "&hostname=cloudy";
}

json event_with_note(HttpTestClient& c, const std::string& node_id, const std::string& to_state) {
  json evs = get(c, "/v1/events?limit=1000&node=" + node_id);
  for (const auto& e : evs["events"])
    if (e.value("type", "") == "provision.transition" && e.value("to", "") == to_state &&
        e.contains("detail") && e["detail"].is_object() && e["detail"].contains("note"))
      return e;
  return json();
}

}  // namespace

TEST_CASE("an image without kiln-agent: validated in the ramdisk before the write, active once cloud-init phones home") {
  if (!fixtures_present()) {
    KILN_SKIP("skipping: " << kFixtures << " is absent");
  }
  VbmcProcess bmc({"--redfish-listen", "127.0.0.1:0", "--user", kUser, "--password", kPassword, "--mockup",
                   kFixtures + "/supermicro-hgx-h100"});
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken, "--power-sync-interval", "0", "--timeout", "deploying=20",
                              "--timeout-check-ms", "200"});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  std::string img = os_bytes();
  register_images(c, dir.path(), img);
  // The same bytes as an image whose OS runs no agent (a cloud image's shape,
  // without the conversion a qcow2 would need).
  json cloud = {{"name", "cloud-os"}, {"kind", "os"}, {"format", "raw"}, {"sha256", kiln::sha256_hex(img)},
                {"size", img.size()}, {"source", dir.path() + "/images/os.img"}, {"os_agent", false},
                {"ssh_user", "debian"}};
  auto r = c.request("POST", "/v1/images", cloud.dump(), auth());
  INFO(r.body);
  REQUIRE(r.status == 201);
  CHECK(json::parse(r.body)["os_agent"] == false);
  CHECK(get(c, "/v1/images/demo-os")["os_agent"] == true);
  r = c.request("POST", "/v1/profiles", cloud_profile().dump(), auth());
  INFO(r.body);
  REQUIRE(r.status == 201);

  const std::string mac = "52:54:00:a9:0c:01";
  k.lease_to_loopback(mac);  // the phone-home comes from the node's leased address
  json node = redfish_node("cloudy", bmc.port(), mac);
  node["profile"] = "cloud-lab";
  r = c.request("POST", "/v1/nodes", node.dump(), auth());
  INFO(r.body);
  REQUIRE(r.status == 201);
  const std::string id = json::parse(r.body)["id"];
  TestAgent agent(k.port(), "cloudy", mac);
  to_available(c, "cloudy");
  const std::size_t before_deploy = agent.commands().size();

  put(c, "/v1/nodes/cloudy/states/provision", {{"target", "deploy"}, {"image", "cloud-os"}});
  json n = wait_node(c, "cloudy", [](const json& v) { return v["provision_step"] == "wait_phone_home"; });
  CHECK(n["provision_state"] == "deploying");
  // Validated in the ramdisk first, then written: nothing of the tenant's is
  // on a node that has not passed the gate.
  std::vector<std::string> cmds = agent.commands();
  std::vector<std::string> deploy_cmds(cmds.begin() + static_cast<std::ptrdiff_t>(before_deploy), cmds.end());
  CHECK(deploy_cmds == std::vector<std::string>{"validate", "write_image", "write_config_drive"});
  json validations = get(c, "/v1/nodes/cloudy/validations?limit=50");
  std::string pre_write;
  for (const auto& v : validations["validations"])
    if (v["phase"] == "pre_handoff") pre_write = text(v["id"]);
  REQUIRE_FALSE(pre_write.empty());
  CHECK(text(get(c, "/v1/nodes/cloudy")["last_validation"]) == pre_write);
  // Waiting for the OS: its script boots the disk, and no OS agent is wanted.
  auto script = c.request("GET", "/boot/" + mac + ".ipxe");
  CHECK(script.body.find("kiln.token") == std::string::npos);
  json lookup = {{"macs", {mac}}, {"phase", "os"}, {"secret", agent.os_secret()}, {"version", "test-agent"}};
  CHECK(c.request("POST", "/v1/agent/lookup", lookup.dump()).status == 409);
  std::this_thread::sleep_for(1s);
  CHECK(get(c, "/v1/nodes/cloudy")["provision_state"] == "deploying");

  // cloud-init's phone_home, to the URL in the config drive the agent wrote.
  const std::string token = phone_home_token(agent.config_drive());
  REQUIRE(token.rfind(id + ".", 0) == 0);
  Headers form = {{"Content-Type", "application/x-www-form-urlencoded"}};
  auto ph = c.request("POST", "/v1/phone-home/" + token, phone_home_body(id), form);
  INFO(ph.body);
  CHECK(ph.status / 100 == 2);
  n = wait_stable(c, "cloudy", "active");
  CHECK(text(n["last_error"]).empty());
  REQUIRE(n["ssh_host_keys"].size() == 1);
  CHECK(n["ssh_host_keys"][0]["type"] == "ssh-ed25519");
  // Validating measured nothing again; its note names the pre-write report.
  json noted = event_with_note(c, id, "active");
  INFO(noted.dump());
  CHECK_THAT(text(noted["detail"]["note"]),
             Catch::StartsWith("validated in the deploy ramdisk before the image was written") &&
                 Catch::EndsWith("report " + pre_write));
  CHECK(get(c, "/v1/nodes/cloudy/validations?limit=50")["validations"].size() == validations["validations"].size());
  // A replay of the post is the unknown token's 404.
  CHECK(c.request("POST", "/v1/phone-home/" + token, phone_home_body(id), form).status == 404);

  // Redeployed, and the OS never phones home: the deadline fails the deploy
  // at wait_phone_home, naming the likely cause; the last deploy's token is
  // dead.
  put(c, "/v1/nodes/cloudy/states/provision", {{"target", "undeploy"}});
  wait_stable(c, "cloudy", "available", 60s);
  put(c, "/v1/nodes/cloudy/states/provision", {{"target", "deploy"}, {"image", "cloud-os"}});
  wait_node(c, "cloudy", [](const json& v) { return v["provision_step"] == "wait_phone_home"; });
  CHECK(c.request("POST", "/v1/phone-home/" + token, phone_home_body(id), form).status == 404);
  n = wait_stable(c, "cloudy", "deploy_failed", 60s);
  CHECK(text(n["last_error"]) == "the OS did not phone home within 20s: is cloud-init's phone_home enabled in the image?");
}
