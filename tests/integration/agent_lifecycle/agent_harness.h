#pragma once
// The harness of the agent lifecycle tests: kilnd (the real binary) driving
// nodes on kiln-vbmc, and TestAgent, a test-side kiln-agent speaking the
// protocol of docs/agent-protocol.md over HTTP. It "boots" the way a node
// would: when the node waits for an agent it fetches /boot/<mac>.ipxe and
// takes the one-time token from kiln.token=, looks up, heartbeats and runs
// commands (write_image downloads the image with its session and checks the
// sha256); at wait_boot it "boots the OS" (the script must now say local
// disk) and looks up in the os phase, or hands the OS to a real kiln-agent.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/crypto.h"
#include "kilnd/kilnd_process.h"
#include "redfish/vbmc_process.h"
#include "tests/support/http_test_client.h"
#include "tests/support/wait_until.h"

namespace kiln::testing {

using nlohmann::json;
using namespace std::chrono_literals;

const std::string kToken = "kiln_agent_lifecycle_admin_0001";
const std::string kUser = "admin";
const std::string kPassword = "s3cret";
const std::string kFixtures = KILN_REDFISH_FIXTURES;

inline Headers auth() { return {{"Authorization", "Bearer " + kToken}}; }
inline std::string text(const json& v) { return v.is_string() ? v.get<std::string>() : std::string(); }
inline bool is_free(const json& n) { return n["reservation"].is_null() || n["reservation"] == ""; }

inline bool fixtures_present() {
  struct stat st {};
  return ::stat(kFixtures.c_str(), &st) == 0;
}

inline uint16_t free_port(int type) {
  int fd = ::socket(AF_INET, type, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

inline json get(HttpTestClient& c, const std::string& target) {
  auto r = c.request("GET", target, "", auth());
  INFO(target << " -> " << r.body);
  REQUIRE(r.status == 200);
  return json::parse(r.body);
}

inline void put(HttpTestClient& c, const std::string& target, const json& body) {
  auto r = c.request("PUT", target, body.dump(), auth());
  INFO(target << " -> " << r.body);
  REQUIRE(r.status == 202);
}

template <typename Pred>
inline json wait_node(HttpTestClient& c, const std::string& name, Pred pred, std::chrono::milliseconds limit = 90s) {
  json n;
  if (kiln::testing::wait_until([&] { return pred(n = get(c, "/v1/nodes/" + name)); }, limit, 50ms)) return n;
  FAIL("node " << name << " never reached the expected condition: " << n.dump());
  return n;
}

inline json wait_stable(HttpTestClient& c, const std::string& name, const std::string& state,
                 std::chrono::milliseconds limit = 90s) {
  return wait_node(c, name, [&](const json& n) { return n["provision_state"] == state && is_free(n); }, limit);
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

// Registers the deploy ramdisk and an os image whose bytes are `os_bytes`.
// `data_dir` is kilnd's --data-dir: the files go to its images/ directory,
// the only place kilnd takes local image files from by default.
inline void register_images(HttpTestClient& c, const std::string& data_dir, const std::string& os_bytes) {
  const std::string dir = data_dir + "/images";
  std::string initrd = "initramfs-bytes", kernel = "kernel-bytes";
  write_file(dir + "/initrd", initrd);
  write_file(dir + "/vmlinuz", kernel);
  write_file(dir + "/os.img", os_bytes);
  json ramdisk = {{"name", "deploy-ramdisk"}, {"kind", "ramdisk"}, {"format", "raw"},
                  {"sha256", kiln::sha256_hex(initrd)}, {"size", initrd.size()}, {"source", dir + "/initrd"},
                  {"kernel", dir + "/vmlinuz"}, {"kernel_args", "console=ttyS0"}};
  auto r = c.request("POST", "/v1/images", ramdisk.dump(), auth());
  INFO(r.body);
  REQUIRE(r.status == 201);
  json os = {{"name", "demo-os"}, {"kind", "os"}, {"format", "raw"}, {"sha256", kiln::sha256_hex(os_bytes)},
             {"size", os_bytes.size()}, {"source", dir + "/os.img"}};
  r = c.request("POST", "/v1/images", os.dump(), auth());
  INFO(r.body);
  REQUIRE(r.status == 201);
}

// The value of `key=` in an iPXE script ("" when absent).
inline std::string script_arg(const std::string& script, const std::string& key) {
  auto p = script.find(key + "=");
  if (p == std::string::npos) return "";
  p += key.size() + 1;
  auto e = script.find_first_of(" \n\r", p);
  return script.substr(p, e == std::string::npos ? std::string::npos : e - p);
}

struct AgentBehaviour {
  bool silent = false;             // never calls back
  std::string corrupt_image;       // write_image reads these bytes instead of the image's
  std::chrono::milliseconds write_delay{0};
  // When set, the node's "OS" is handed to someone else at wait_boot (a real
  // kiln-agent the test starts) instead of this agent looking up in os phase;
  // it gets the deploy's os secret from write_image (what the ramdisk leaves
  // on the disk).
  std::function<void(const std::string& os_secret)> os_boot;
  bool tls = false;  // kilnd serves HTTPS
  // What the os-phase lookup and heartbeats report as the booted OS's
  // addresses (none: the field is left out, as a ramdisk agent does).
  std::vector<std::string> os_addresses;
};

// The test-side kiln-agent for one node.
class TestAgent {
 public:
  TestAgent(uint16_t port, std::string node, std::string mac, AgentBehaviour b = {})
      : port_(port), node_(std::move(node)), mac_(std::move(mac)), b_(std::move(b)) {
    thread_ = std::thread([this] { run(); });
  }
  ~TestAgent() {
    stop_ = true;
    thread_.join();
  }

  std::vector<std::string> commands() const {
    std::lock_guard<std::mutex> l(mu_);
    return commands_;
  }
  int heartbeats_ok() const { return heartbeats_ok_; }
  int heartbeats_401() const { return heartbeats_401_; }
  int stale_results() const { return stale_; }
  std::string last_image_sha() const {
    std::lock_guard<std::mutex> l(mu_);
    return image_sha_;
  }
  std::string local_boot_script() const {
    std::lock_guard<std::mutex> l(mu_);
    return local_script_;
  }
  bool busy_writing() const { return writing_; }
  // The last deploy-ramdisk script this agent fetched ("" before).
  std::string ramdisk_script() const {
    std::lock_guard<std::mutex> l(mu_);
    return ramdisk_script_;
  }
  // The arguments of the last write_image command (null before one).
  // The ISO of the last write_config_drive ("" before one).
  std::string config_drive() const {
    std::lock_guard<std::mutex> l(mu_);
    return config_drive_;
  }
  json write_image_args() const {
    std::lock_guard<std::mutex> l(mu_);
    return write_image_args_;
  }
  // The os secret write_image carried ("" before it ran).
  std::string os_secret() const {
    std::lock_guard<std::mutex> l(mu_);
    return os_secret_;
  }

 private:
  void run() {
    std::string session, phase;
    std::set<std::string> started;
    while (!stop_) {
      std::this_thread::sleep_for(100ms);
      if (b_.silent) continue;
      try {
        HttpTestClient c("127.0.0.1", port_, b_.tls, 5s);
        auto nr = c.request("GET", "/v1/nodes/" + node_, "", auth());
        if (nr.status != 200) continue;
        json n = json::parse(nr.body);
        std::string state = text(n["provision_state"]), step = text(n["provision_step"]);
        bool ramdisk_wanted = step == "wait_agent";
        bool os_wanted = state == "deploying" && step == "wait_boot";
        if (os_wanted && phase != "os" && b_.os_boot) {
          session.clear();
          phase = "os";
          b_.os_boot(os_secret());
          continue;
        }
        if (os_wanted && phase != "os") {
          // The node rebooted: its script now says "boot from disk"; the OS's agent looks up.
          auto s = c.request("GET", "/boot/" + mac_ + ".ipxe");
          {
            std::lock_guard<std::mutex> l(mu_);
            local_script_ = s.body;
          }
          json body = {{"macs", {mac_}}, {"phase", "os"}, {"secret", os_secret()}, {"version", "test-agent"}};
          if (!b_.os_addresses.empty()) body["addresses"] = b_.os_addresses;  // as kiln-agent does
          auto r = c.request("POST", "/v1/agent/lookup", body.dump());
          if (r.status == 200) {
            session = json::parse(r.body)["session"];
            phase = "os";
          }
          continue;
        }
        if (session.empty() && ramdisk_wanted) {
          // The node PXE-boots the deploy ramdisk.
          auto s = c.request("GET", "/boot/" + mac_ + ".ipxe");
          {
            std::lock_guard<std::mutex> l(mu_);
            ramdisk_script_ = s.body;
          }
          std::string token = script_arg(s.body, "kiln.token");
          if (token.empty()) continue;
          json body = {{"macs", {mac_}}, {"node", text(n["id"])}, {"token", token},
                       {"phase", "ramdisk"}, {"version", "test-agent"}};
          auto r = c.request("POST", "/v1/agent/lookup", body.dump());
          if (r.status == 200) {
            session = json::parse(r.body)["session"];
            phase = "ramdisk";
          }
          continue;
        }
        if (session.empty()) continue;
        Headers h = {{"Authorization", "Bearer " + session}};
        json hb = {{"node", text(n["id"])}, {"busy", ""}};
        if (phase == "os" && !b_.os_addresses.empty()) hb["addresses"] = b_.os_addresses;
        auto r = c.request("POST", "/v1/agent/heartbeat", hb.dump(), h);
        if (r.status == 401) {
          heartbeats_401_++;
          session.clear();
          phase.clear();
          continue;
        }
        if (r.status != 200) continue;
        heartbeats_ok_++;
        json reply = json::parse(r.body);
        if (reply["command"].is_null()) continue;
        json cmd = reply["command"];
        std::string id = cmd["id"];
        if (started.count(id)) continue;
        started.insert(id);
        {
          std::lock_guard<std::mutex> l(mu_);
          commands_.push_back(text(cmd["name"]));
        }
        json result = run_command(c, cmd, session);
        json post = {{"node", text(n["id"])}, {"command_id", id}};
        if (result.contains("error")) {
          post["status"] = "error";
          post["error"] = result["error"];
          post["result"] = json::object();
        } else {
          post["status"] = "ok";
          post["result"] = result;
        }
        HttpTestClient c2("127.0.0.1", port_, b_.tls, 5s);  // kilnd may have restarted meanwhile
        auto pr = c2.request("POST", "/v1/agent/results", post.dump(), h);
        if (pr.status == 409) stale_++;
      } catch (const std::exception&) {
        // kilnd restarting: keep trying, as the real agent does.
      }
    }
  }

  json run_command(HttpTestClient&, const json& cmd, const std::string& session) {
    std::string name = cmd["name"];
    if (name == "inspect")
      return {{"schema_version", 1}, {"agent_version", "test-agent"}, {"cpu", {{"model", "Test CPU"}, {"count", 2}}},
              {"memory", {{"total_bytes", 1 << 30}}}, {"disks", {{{"name", "vda"}, {"size_bytes", 1 << 30}}}},
              {"nics", {{{"name", "eth0"}, {"mac", mac_}}}}, {"gpus", json::array()},
              {"boot_mode", "uefi"}, {"hypervisor", {{"detected", false}}}};
    if (name == "wipe")
      return {{"disks", {{{"name", "vda"}, {"size_bytes", 1 << 30}, {"discarded", true}, {"overwritten", false},
                          {"verified", true}}}}};
    if (name == "validate") return {{"result", "pass"}, {"checks", json::array()}};
    if (name == "write_image") {
      writing_ = true;
      std::this_thread::sleep_for(b_.write_delay);
      writing_ = false;
      {
        std::lock_guard<std::mutex> l(mu_);
        os_secret_ = text(cmd["args"]["os_secret"]);
        write_image_args_ = cmd["args"];
      }
      std::string url = cmd["args"]["url"];
      auto slash = url.find('/', url.find("//") + 2);
      std::string path = url.substr(slash);
      HttpTestClient c("127.0.0.1", port_, b_.tls, 10s);
      auto r = c.request("GET", path, "", {{"Authorization", "Bearer " + session}});
      if (r.status != 200) return {{"error", "download failed: HTTP " + std::to_string(r.status) + " " + r.body}};
      std::string bytes = b_.corrupt_image.empty() ? r.body : b_.corrupt_image;
      std::string got = kiln::sha256_hex(bytes);
      std::string want = cmd["args"]["sha256"];
      {
        std::lock_guard<std::mutex> l(mu_);
        image_sha_ = got;
      }
      if (got != want) return {{"error", "sha256 mismatch: expected " + want + ", got " + got}};
      return {{"device", "/dev/vda"}, {"bytes_downloaded", bytes.size()}, {"bytes_written", bytes.size()},
              {"seconds", 0.1}, {"mb_per_s", 10}, {"sha256", got}, {"resumes", 0}};
    }
    if (name == "write_config_drive") {
      auto iso = kiln::base64_decode(text(cmd["args"]["iso_base64"]));
      if (!iso) return {{"error", "iso_base64: " + iso.error().message}};
      std::lock_guard<std::mutex> l(mu_);
      config_drive_ = *iso;
      return {{"device", "/dev/vda"}, {"table", "gpt"}, {"partition", 2}};
    }
    return {{"error", "unknown command " + name}};
  }

  std::atomic<uint16_t> port_;
  std::string node_, mac_;
  AgentBehaviour b_;
  std::atomic<bool> stop_{false};
  std::atomic<int> heartbeats_ok_{0}, heartbeats_401_{0}, stale_{0};
  std::atomic<bool> writing_{false};
  mutable std::mutex mu_;
  std::vector<std::string> commands_;
  std::string image_sha_, local_script_, os_secret_, ramdisk_script_;
  json write_image_args_;
  std::string config_drive_;
  std::thread thread_;
};

inline json redfish_node(const std::string& name, uint16_t port, const std::string& mac) {
  return {{"name", name},
          {"bmc",
           {{"driver", "redfish"},
            {"address", "https://127.0.0.1:" + std::to_string(port)},
            {"username", kUser},
            {"password", kPassword},
            {"verify_tls", false},
            {"options", {{"request_timeout_s", 5}, {"power_timeout_s", 20}}}}},
          {"ports", {{{"address", mac}}}}};
}

inline json ipmi_node(const std::string& name, uint16_t port, const std::string& mac) {
  return {{"name", name},
          {"bmc", {{"driver", "ipmi"}, {"address", "127.0.0.1:" + std::to_string(port)}, {"username", kUser},
                   {"password", kPassword}}},
          {"ports", {{{"address", mac}}}}};
}

inline std::vector<std::string> event_types(HttpTestClient& c, const std::string& node_id) {
  json evs = get(c, "/v1/events?limit=1000&node=" + node_id);
  std::vector<std::string> out;
  for (const auto& e : evs["events"]) out.push_back(e["type"]);
  return out;
}

inline bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

inline std::string os_bytes() {
  std::string s;
  for (int i = 0; i < 256 * 1024; ++i) s.push_back(static_cast<char>((i * 131) & 0xff));
  return s;
}

// Takes a fresh node to available through the agent (manage, provide).
inline void to_available(HttpTestClient& c, const std::string& name) {
  put(c, "/v1/nodes/" + name + "/states/provision", {{"target", "manage"}});
  wait_stable(c, name, "manageable");
  put(c, "/v1/nodes/" + name + "/states/provision", {{"target", "provide"}});
  wait_stable(c, name, "available");
}

}  // namespace kiln::testing
