// The agent broker against a real SQLite store: boot tokens (one-time,
// hashed, replaced), lookup rules by phase and state, sessions across a
// broker restart and after the node moves on, the command queue (redelivery,
// stale results), waits that end when the operation loses the node; then the
// conductor's agent workflows end to end with an in-process agent.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "common/crypto.h"
#include "controller/agent/agent_broker.h"
#include "controller/agent/agent_channel.h"
#include "controller/conductor/conductor.h"
#include "controller/store/sqlite.h"
#include "drivers/fake/fake_driver.h"
#include "tests/unit/agent_broker/broker_harness.h"

using namespace kiln;
using namespace std::chrono_literals;
using S = ProvisionState;
using nlohmann::json;
using namespace kiln::testing;

TEST_CASE("boot tokens: one per boot attempt, stored hashed and sealed, one-time, new after forget") {
  Harness h;
  Node n = h.node("n1", "52:54:00:00:00:01", S::kCleaning, "wait_agent");
  std::string t1 = h.mint(n);
  CHECK(t1.size() == 64);
  auto stored = h.column("SELECT token_hash FROM agent_boot_tokens");
  REQUIRE(stored.size() == 1);
  CHECK(stored[0] == sha256_hex(t1));  // the hash, never the token
  auto sealed = h.column("SELECT token_sealed FROM agent_boot_tokens");
  REQUIRE(sealed.size() == 1);
  CHECK(sealed[0].find(t1) == std::string::npos);

  // Fetching the script again shows the same token: nobody can replace the
  // one the node is booting with by asking for the script.
  CHECK(h.mint(n) == t1);
  // A new boot attempt (set_boot_pxe forgets the node's agent state) mints a new one.
  REQUIRE(h.sync(h.broker().forget(n.id)));
  std::string t2 = h.mint(n);
  CHECK(t2 != t1);
  auto r = h.lookup("52:54:00:00:00:01", t1, "ramdisk");  // the old attempt's
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Code::kUnauthenticated);

  r = h.lookup("52:54:00:00:00:01", t2, "ramdisk");
  REQUIRE(r);
  CHECK(r->node.id == n.id);
  CHECK(r->session.size() == 64);
  CHECK(h.column("SELECT token_hash FROM agent_sessions") == std::vector<std::string>{sha256_hex(r->session)});
  CHECK(h.column("SELECT count(*) FROM agent_boot_tokens") == std::vector<std::string>{"0"});

  auto again = h.lookup("52:54:00:00:00:01", t2, "ramdisk");  // used
  REQUIRE_FALSE(again);
  CHECK(again.error().code == Code::kUnauthenticated);
  CHECK(contains(h.event_types(n.id), "agent.lookup"));
}

TEST_CASE("lookup: unknown MACs are 404, another node's MAC does not take a token, 409 when no agent is expected") {
  Harness h;
  Node a = h.node("a", "52:54:00:00:00:0a", S::kInspecting, "wait_agent");
  Node b = h.node("b", "52:54:00:00:00:0b", S::kInspecting, "wait_agent");
  std::string ta = h.mint(a);

  auto r = h.lookup("52:54:00:99:99:99", ta, "ramdisk");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Code::kNotFound);

  r = h.lookup("52:54:00:00:00:0b", ta, "ramdisk");  // a's token, b's MAC
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Code::kUnauthenticated);
  CHECK(h.lookup("52:54:00:00:00:0a", ta, "ramdisk"));  // not consumed by the wrong MAC

  AgentLookup wrong_node;
  wrong_node.macs = {"52:54:00:00:00:0b"};
  wrong_node.node = a.id;
  wrong_node.token = h.mint(b);
  wrong_node.phase = "ramdisk";
  auto w = h.sync(h.broker().lookup(wrong_node));
  REQUIRE_FALSE(w);
  CHECK(w.error().code == Code::kNotFound);

  Node idle = h.node("idle", "52:54:00:00:00:0c", S::kManageable);
  std::string ti = h.mint(idle);
  r = h.lookup("52:54:00:00:00:0c", ti, "ramdisk");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Code::kConflict);
  CHECK_THAT(r.error().message, Catch::Contains("manageable"));

  Node booting = h.node("booting", "52:54:00:00:00:0d", S::kDeploying, "wait_boot");
  std::string tb = h.mint(booting);
  r = h.lookup("52:54:00:00:00:0d", tb, "ramdisk");  // boots from disk now
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Code::kConflict);
}

TEST_CASE("os phase: the deploy secret first, then only deploying at wait_boot or validating") {
  Harness h;
  Node n = h.node("os", "52:54:00:00:01:01", S::kDeploying, "write_image");
  // No secret minted yet, or none presented: 401 before anything about the state.
  auto r = h.lookup("52:54:00:00:01:01", "", "os");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Code::kUnauthenticated);
  std::string secret = h.os_secret(n);
  CHECK(secret.size() == 64);
  CHECK(h.os_secret(n) == secret);  // the deploy's one secret, shown again (seed re-fetch)
  CHECK(h.column("SELECT secret_hash FROM agent_os_secrets") == std::vector<std::string>{sha256_hex(secret)});
  r = h.lookup("52:54:00:00:01:01", "", "os");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Code::kUnauthenticated);
  r = h.lookup("52:54:00:00:01:01", std::string(64, '0'), "os");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Code::kUnauthenticated);
  r = h.lookup("52:54:00:00:01:01", secret, "os");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Code::kConflict);

  h.move(n.id, S::kDeploying, "wait_boot");
  CHECK_FALSE(h.lookup("52:54:00:00:01:01", "", "os"));
  r = h.lookup("52:54:00:00:01:01", secret, "os");
  REQUIRE(r);
  CHECK(contains(h.event_types(n.id), "agent.os_booted"));
  // The session carries on into validating.
  h.move(n.id, S::kValidating, "validate");
  CHECK(h.heartbeat(r->session, n.id));

  CHECK(h.lookup("52:54:00:00:01:01", secret, "os"));  // an OS agent restarting in validating
  h.move(n.id, S::kActive);
  auto late = h.lookup("52:54:00:00:01:01", secret, "os");
  REQUIRE_FALSE(late);
  CHECK(late.error().code == Code::kConflict);
  // The next boot attempt forgets it: a former tenant's copy is worthless.
  REQUIRE(h.sync(h.broker().forget(n.id)));
  h.move(n.id, S::kDeploying, "wait_boot");
  late = h.lookup("52:54:00:00:01:01", secret, "os");
  REQUIRE_FALSE(late);
  CHECK(late.error().code == Code::kUnauthenticated);
  CHECK(h.os_secret(n) != secret);
}

TEST_CASE("os phase: the OS's addresses and ssh login are recorded from lookup and heartbeats, emptied by forget") {
  Harness h;
  Image img;
  img.name = "cloud-os";
  img.kind = "os";
  img.format = "raw";
  img.sha256 = std::string(64, 'a');
  img.size = 1;
  img.source = img.path = "/nonexistent";
  img.state = "ready";
  img.ssh_user = "ubuntu";
  REQUIRE(h.store().create_image(img));
  Node n = h.node("addr", "52:54:00:00:01:09", S::kDeploying, "wait_boot");
  REQUIRE(h.store().update_node_if(n.id, NodeCondition{}, [](Node& m) { m.image = "cloud-os"; return ok_status(); }, {}));
  std::string secret = h.os_secret(n);

  // The lookup carries them: with nothing to validate the node may be handed
  // over before any heartbeat.
  std::vector<std::string> first = {"fd00::9", "10.1.2.3", "10.1.2.4"};
  auto r = h.lookup("52:54:00:00:01:09", secret, "os", first);
  REQUIRE(r);
  Node seen = *h.store().get_node(n.id);
  CHECK(seen.addresses == first);
  CHECK(seen.ssh == "ubuntu@10.1.2.3");  // the image's user, the first IPv4 address
  CHECK(contains(h.event_types(n.id), "node.addresses"));

  // The same addresses again write nothing; a heartbeat without the field
  // changes nothing; new ones are written.
  const int64_t version = seen.version;
  REQUIRE(h.heartbeat(r->session, n.id, first));
  REQUIRE(h.heartbeat(r->session, n.id));
  CHECK(h.store().get_node(n.id)->version == version);
  std::vector<std::string> v6only = {"2001:db8::7"};
  REQUIRE(h.heartbeat(r->session, n.id, v6only));
  seen = *h.store().get_node(n.id);
  CHECK(seen.addresses == v6only);
  CHECK(seen.ssh == "ubuntu@2001:db8::7");

  // A new boot attempt: that OS is gone, and so is the way in.
  REQUIRE(h.sync(h.broker().forget(n.id)));
  seen = *h.store().get_node(n.id);
  CHECK(seen.addresses.empty());
  CHECK(seen.ssh.empty());
}

TEST_CASE("ssh_login picks the first IPv4 address, else the first address, and nothing without a user or an address") {
  CHECK(ssh_login("root", {"fd00::1", "192.0.2.5"}) == "root@192.0.2.5");
  CHECK(ssh_login("root", {"fd00::1", "fd00::2"}) == "root@fd00::1");
  CHECK(ssh_login("", {"192.0.2.5"}).empty());
  CHECK(ssh_login("root", {}).empty());
}

TEST_CASE("sessions survive a broker restart and end when the node leaves the state") {
  Harness h;
  Node n = h.node("s", "52:54:00:00:02:01", S::kCleaning, "wait_agent");
  auto r = h.lookup("52:54:00:00:02:01", h.mint(n), "ramdisk");
  REQUIRE(r);
  std::string session = r->session;

  h.restart_broker();
  auto hb = h.heartbeat(session, n.id);
  REQUIRE(hb);
  CHECK_FALSE(hb->command);
  CHECK(hb->heartbeat_interval_s == 2);
  Result<Node> who = h.sync(h.broker().session_node(session));
  REQUIRE(who);
  CHECK(who->id == n.id);

  // Cleaning leaves the ramdisk up for burn-in: still good there.
  h.move(n.id, S::kBurningIn, "burn_in");
  CHECK(h.heartbeat(session, n.id));
  auto wrong = h.heartbeat(session, "someone-else");
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().code == Code::kInvalidArgument);

  h.move(n.id, S::kAvailable);
  auto over = h.heartbeat(session, n.id);
  REQUIRE_FALSE(over);
  CHECK(over.error().code == Code::kUnauthenticated);
  CHECK(h.column("SELECT count(*) FROM agent_sessions") == std::vector<std::string>{"0"});
  auto unknown = h.heartbeat("not-a-session", n.id);
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().code == Code::kUnauthenticated);
}

TEST_CASE("a command is redelivered until its result, other ids are stale, errors carry the agent's words") {
  Harness h;
  Node n = h.node("c", "52:54:00:00:03:01", S::kDeploying, "write_image");
  auto r = h.lookup("52:54:00:00:03:01", h.mint(n), "ramdisk");
  REQUIRE(r);
  auto held = std::make_shared<std::atomic<bool>>(true);

  auto pending = h.spawn(h.broker().run_command(n.id, "inspect", json::object(), flag_check(held)));
  std::optional<AgentCommand> cmd;
  for (int i = 0; i < 200 && !cmd; ++i) {
    auto hb = h.heartbeat(r->session, n.id);
    REQUIRE(hb);
    cmd = hb->command;
    if (!cmd) std::this_thread::sleep_for(5ms);
  }
  REQUIRE(cmd);
  CHECK(cmd->name == "inspect");
  auto again = h.heartbeat(r->session, n.id);  // redelivered
  REQUIRE(again);
  REQUIRE(again->command);
  CHECK(again->command->id == cmd->id);
  CHECK(h.broker().last_heartbeat_ms(n.id).has_value());

  Status stale = h.post(r->session, n.id, "some-other-id", "ok");
  REQUIRE_FALSE(stale);
  CHECK(stale.error().code == Code::kConflict);
  REQUIRE(h.post(r->session, n.id, cmd->id, "ok", json{{"cpu", 1}}));
  auto result = pending.get();
  REQUIRE(result);
  CHECK((*result)["cpu"] == 1);
  Status twice = h.post(r->session, n.id, cmd->id, "ok");
  REQUIRE_FALSE(twice);
  CHECK(twice.error().code == Code::kConflict);
  auto idle = h.heartbeat(r->session, n.id);
  REQUIRE(idle);
  CHECK_FALSE(idle->command);

  // An error result fails the command with the agent's message.
  auto failing = h.spawn(h.broker().run_command(n.id, "write_image", json::object(), flag_check(held)));
  std::optional<AgentCommand> wi;
  for (int i = 0; i < 200 && !wi; ++i) {
    wi = h.heartbeat(r->session, n.id)->command;
    if (!wi) std::this_thread::sleep_for(5ms);
  }
  REQUIRE(wi);
  REQUIRE(h.post(r->session, n.id, wi->id, "error", json::object(), "sha256 mismatch: expected aa, got bb"));
  auto failed = failing.get();
  REQUIRE_FALSE(failed);
  CHECK(failed.error().message == "write_image failed: sha256 mismatch: expected aa, got bb");
  auto types = h.event_types(n.id);
  CHECK(contains(types, "agent.command_sent"));
  CHECK(contains(types, "agent.result"));
}

TEST_CASE("waits end promptly when the operation loses the node, and on shutdown") {
  Harness h;
  Node n = h.node("w", "52:54:00:00:04:01", S::kDeploying, "wait_agent");
  auto held = std::make_shared<std::atomic<bool>>(true);

  auto wait = h.spawn(h.broker().wait_for_agent(n.id, AgentPhase::kRamdisk, flag_check(held)));
  CHECK(wait.wait_for(100ms) == std::future_status::timeout);
  auto t0 = std::chrono::steady_clock::now();
  *held = false;
  REQUIRE(wait.wait_for(2s) == std::future_status::ready);
  CHECK(std::chrono::steady_clock::now() - t0 < 1s);
  Status s = wait.get();
  REQUIRE_FALSE(s);
  CHECK(s.error().code == Code::kConflict);

  *held = true;
  auto cmd = h.spawn(h.broker().run_command(n.id, "wipe", json::object(), flag_check(held)));
  CHECK(cmd.wait_for(100ms) == std::future_status::timeout);
  *held = false;
  REQUIRE(cmd.wait_for(2s) == std::future_status::ready);
  CHECK(cmd.get().error().code == Code::kConflict);

  // A lookup ends a wait; a session from before a restart counts at once.
  *held = true;
  auto waiting = h.spawn(h.broker().wait_for_agent(n.id, AgentPhase::kRamdisk, flag_check(held)));
  REQUIRE(h.lookup("52:54:00:00:04:01", h.mint(n), "ramdisk"));
  REQUIRE(waiting.wait_for(2s) == std::future_status::ready);
  CHECK(waiting.get());
  h.restart_broker();
  CHECK(h.sync(h.broker().wait_for_agent(n.id, AgentPhase::kRamdisk, flag_check(held))));
  // forget() drops the session: a fresh boot must look up again.
  REQUIRE(h.sync(h.broker().forget(n.id)));
  auto after_forget = h.spawn(h.broker().wait_for_agent(n.id, AgentPhase::kRamdisk, flag_check(held)));
  CHECK(after_forget.wait_for(100ms) == std::future_status::timeout);
  h.broker().shutdown();
  REQUIRE(after_forget.wait_for(2s) == std::future_status::ready);
  CHECK(after_forget.get().error().code == Code::kUnavailable);
}

TEST_CASE("the phone-home wait ends when the OS's host keys are stored, after a restart too, and with its operation") {
  Harness h;
  Node n = h.node("ph", "52:54:00:00:04:21", S::kDeploying, "wait_phone_home");
  auto held = std::make_shared<std::atomic<bool>>(true);
  auto wait = h.spawn(h.broker().wait_for_phone_home(n.id, flag_check(held)));
  CHECK(wait.wait_for(300ms) == std::future_status::timeout);
  // The post (phone_home_routes.cc) records the keys; the wait sees them in the store.
  const std::string blob = std::string("\0\0\0\x0bssh-ed25519\0\0\0\x20", 19) + std::string(32, 'k');
  Result<SshHostKey> key = parse_ssh_host_key("ssh-ed25519", base64_encode(blob));
  REQUIRE(key);
  Result<Node> now = h.sync(h.broker().phone_home_node(h.sync(h.broker().phone_home_token(n)).value()));
  REQUIRE(now);
  REQUIRE(h.sync(h.broker().record_ssh_host_keys(*now, {*key}, "ph")));
  REQUIRE(wait.wait_for(2s) == std::future_status::ready);
  CHECK(wait.get());
  // A resumed step (kilnd restarted after the post) finds it at once.
  h.restart_broker();
  CHECK(h.sync(h.broker().wait_for_phone_home(n.id, flag_check(held))));
  // A new boot attempt forgets the keys: the wait is for that deploy's post,
  // and ends with its operation.
  REQUIRE(h.sync(h.broker().forget(n.id)));
  auto again = h.spawn(h.broker().wait_for_phone_home(n.id, flag_check(held)));
  CHECK(again.wait_for(300ms) == std::future_status::timeout);
  *held = false;
  REQUIRE(again.wait_for(2s) == std::future_status::ready);
  CHECK(again.get().error().code == Code::kConflict);
}

TEST_CASE("inventory check: the keys the schema requires") {
  CHECK(check_inventory(json{{"cpu", json::object()}, {"memory", json::object()}, {"disks", json::array()}, {"nics", json::array()},
                             {"boot_mode", "uefi"}, {"hypervisor", json::object()}}));
  Status shape = check_inventory(json{{"cpu", json::object()}, {"memory", json::object()}, {"disks", json::object()}, {"nics", json::array()},
                                      {"boot_mode", "uefi"}, {"hypervisor", json::object()}});
  REQUIRE_FALSE(shape);
  CHECK_THAT(shape.error().message, Catch::Contains("disks must be an array"));
  Status s = check_inventory(json{{"cpu", json::object()}});
  REQUIRE_FALSE(s);
  CHECK_THAT(s.error().message, Catch::Contains("memory"));
  CHECK_FALSE(check_inventory(json::array()));
  // When the agent's schema is in the tree, this list is its "required".
  std::ifstream f(std::string(KILN_SOURCE_DIR) + "/schemas/inventory.schema.json");
  if (f) {
    json schema = json::parse(f);
    std::vector<std::string> required = schema.value("required", std::vector<std::string>{});
    for (const std::string& k : inventory_required_keys()) CHECK(contains(required, k));
    for (const std::string& k : required) CHECK(contains(inventory_required_keys(), k));
  }
  Image img;
  img.id = "11111111-2222-3333-4444-555555555555";
  img.sha256 = "ab";
  img.size = 42;
  img.format = "raw+zstd";
  json a = write_image_args(img, "http://10.0.0.1:8080");
  CHECK(a["url"] == "http://10.0.0.1:8080/v1/images/11111111-2222-3333-4444-555555555555/content");
  CHECK(a["size"] == 42);
  CHECK(a["format"] == "raw+zstd");
  CHECK(a["device"] == "");
  CHECK_FALSE(a.contains("os_secret"));
  json b = write_image_args(img, "http://10.0.0.1:8080", std::string(64, 'a'), std::string(64, 'b'));
  CHECK(b["os_secret"] == std::string(64, 'a'));
  CHECK(b["tls_sha256"] == std::string(64, 'b'));
}

// ---------------------------------------------------------------------------
// The conductor's agent workflows, with the fake BMC under the name "redfish"
// and the broker's capabilities on top, and an agent played by a thread.

namespace {

class Lab {
 public:
  explicit Lab(std::chrono::milliseconds timeout = 30s, TenantAccessLookup tenant_access = {})
      : dir_(make_dir()), work_(asio::make_work_guard(io_)), db_(2) {
    auto s = open_sqlite_store({.path = dir_ + "/kiln.db"});
    REQUIRE(s);
    store_ = std::move(*s);
    REQUIRE(store_->migrate());
    broker_ = std::make_unique<AgentBroker>(*store_, db_, clock_, box_, fast(), Logger(LogLevel::kOff));
    broker_->set_boot_url("http://kilnd.test:8080");
    auto d = make_fake_driver(io_.get_executor());
    d->name = "redfish";
    add_agent_capabilities(*d, *broker_, *store_, db_);
    drivers_.add(std::move(d));
    ConductorOptions o;
    o.default_timeout = timeout;
    o.timeout_check_interval = 20ms;
    o.tenant_access = std::move(tenant_access);
    conductor_ = std::make_unique<Conductor>(io_, *store_, db_, drivers_, box_, clock_, o, Logger(LogLevel::kOff));
    thread_ = std::thread([this] { io_.run(); });
    REQUIRE(sync(conductor_->start()));
  }
  ~Lab() {
    stop_agent();
    conductor_->stop();
    broker_->shutdown();
    work_.reset();
    io_.stop();
    thread_.join();
    db_.stop();
    std::filesystem::remove_all(dir_);
  }
  template <typename T>
  T sync(asio::awaitable<T> a) {
    return asio::co_spawn(io_, std::move(a), asio::use_future).get();
  }

  Node enroll(const std::string& name, const std::string& mac) {
    Node n;
    n.name = name;
    n.bmc.driver = "redfish";
    n.bmc.address = "bmc-" + name;
    Port p;
    p.address = mac;
    n.ports.push_back(p);
    auto r = store_->create_node(n, EventDraft{.type = "node.created"});
    REQUIRE(r);
    mac_ = mac;
    return *r;
  }
  Result<Node> verb(const std::string& node, ProvisionEvent v, const std::string& image = "",
                    const std::string& allocation = "") {
    ProvisionArgs args{image, allocation};
    return sync(conductor_->provision(node, v, args, Actor{"t", "tester", "admin", "r"}));
  }
  // A ready os image in the catalogue (the Lab's agent only pretends to write it).
  void add_os_image(const std::string& name) {
    Image img;
    img.name = name;
    img.kind = "os";
    img.format = "raw";
    img.sha256 = std::string(64, 'c');
    img.size = 1024;
    img.source = "/nowhere/" + name;
    img.state = "ready";
    REQUIRE(store_->create_image(img));
  }
  // A node enrolled, managed and provided through the agent, and os image `image`.
  Node available_with_image(const std::string& name, const std::string& mac, const std::string& image) {
    add_os_image(image);
    Node n = enroll(name, mac);
    start_agent();
    REQUIRE(verb(n.id, ProvisionEvent::kManage));
    wait_stable(n.id, S::kManageable);
    REQUIRE(verb(n.id, ProvisionEvent::kProvide));
    wait_stable(n.id, S::kAvailable);
    return n;
  }
  Node get(const std::string& node) {
    auto r = store_->get_node(node);
    REQUIRE(r);
    return *r;
  }
  Node wait_stable(const std::string& node, S state, std::chrono::milliseconds limit = 10s) {
    auto end = std::chrono::steady_clock::now() + limit;
    Node n;
    while (std::chrono::steady_clock::now() < end) {
      n = get(node);
      if (n.provision_state == state && n.reservation.empty()) return n;
      std::this_thread::sleep_for(5ms);
    }
    FAIL("node did not reach " << to_string(state) << "; it is " << to_string(n.provision_state)
                               << " step=" << n.provision_step << " last_error=" << n.last_error);
    return n;
  }
  Node wait_step(const std::string& node, const std::string& step, std::chrono::milliseconds limit = 10s) {
    auto end = std::chrono::steady_clock::now() + limit;
    Node n;
    while (std::chrono::steady_clock::now() < end) {
      n = get(node);
      if (n.provision_step == step) return n;
      std::this_thread::sleep_for(5ms);
    }
    FAIL("node never reached step " << step << "; it is at " << n.provision_step);
    return n;
  }

  // The agent: boots into the ramdisk when the node expects one (a boot
  // script would mint the token), into the OS at wait_boot, and answers
  // commands. `write_image_error` makes write_image fail with that message.
  void start_agent(std::string write_image_error = "") {
    agent_ = std::thread([this, write_image_error] {
      std::string session, phase;
      while (!stop_) {
        std::this_thread::sleep_for(10ms);
        Node n = get(mac_node());
        if (session.empty() || (phase == "ramdisk" && agent_expected(n, "os"))) {
          std::string want = agent_expected(n, "os") ? "os" : (agent_expected(n, "ramdisk") ? "ramdisk" : "");
          if (want.empty()) continue;
          AgentLookup l;
          l.macs = {mac_};
          l.phase = want;
          if (want == "ramdisk") {
            auto t = sync(broker_->boot_token(n));
            if (!t) continue;
            l.token = *t;
          } else {
            // What the ramdisk left on the disk (write_image's os_secret).
            auto t = sync(broker_->os_secret(n));
            if (!t) continue;
            l.secret = *t;
          }
          auto r = sync(broker_->lookup(l));
          if (!r) continue;
          session = r->session;
          phase = want;
          lookups++;
          continue;
        }
        auto hb = sync(broker_->heartbeat(session, n.id, ""));
        if (!hb) {
          session.clear();
          continue;
        }
        if (!hb->command) continue;
        commands.push_back(hb->command->name + " " + hb->command->args.dump());
        AgentResultPost p;
        p.node = n.id;
        p.command_id = hb->command->id;
        p.status = "ok";
        if (hb->command->name == "inspect")
          p.result = {{"schema_version", 1}, {"cpu", {{"count", 4}}}, {"memory", json::object()}, {"disks", json::array()},
                      {"nics", json::array()}, {"gpus", json::array()}, {"boot_mode", "uefi"},
                      {"hypervisor", json::object()}};
        if (hb->command->name == "write_image" && !write_image_error.empty()) {
          p.status = "error";
          p.error = write_image_error;
        }
        if (hb->command->name == "validate") p.result = {{"result", "pass"}, {"checks", json::array()}};
        Status s = sync(broker_->post_result(session, p));
        (void)s;
      }
    });
  }
  void stop_agent() {
    stop_ = true;
    if (agent_.joinable()) agent_.join();
    stop_ = false;
  }
  std::string mac_node() {
    auto p = store_->find_port_by_address(mac_);
    REQUIRE(p);
    return p->node_id;
  }

  Result<Node> validate_now(const std::string& node, ValidationPlan plan) {
    return sync(conductor_->validate_now(node, plan, Actor{"t", "tester", "admin", "r"}));
  }
  // Gives the node a profile (created when missing) so it has something to validate against.
  void give_profile(const std::string& node) {
    Profile p;
    p.name = "lab";
    p.doc = {{"name", "lab"}, {"gpu", {{"count", 0}}}};
    (void)store_->create_profile(p);
    auto r = store_->update_node_if(node, NodeCondition{}, [](Node& m) { m.profile = "lab"; return ok_status(); }, {});
    REQUIRE(r);
  }
  NodeStore& store() { return *store_; }
  Node wait_free(const std::string& node, std::chrono::milliseconds limit = 10s) {
    auto end = std::chrono::steady_clock::now() + limit;
    Node n;
    while (std::chrono::steady_clock::now() < end) {
      n = get(node);
      if (n.reservation.empty()) return n;
      std::this_thread::sleep_for(5ms);
    }
    FAIL("node still reserved at step " << n.provision_step);
    return n;
  }

  std::vector<std::string> commands;
  std::atomic<int> lookups{0};

 private:
  std::string dir_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  BlockingPool db_;
  SecretBox box_{SecretBox::Key{1, 2, 3}};
  SystemClock clock_;
  std::unique_ptr<NodeStore> store_;
  std::unique_ptr<AgentBroker> broker_;
  DriverRegistry drivers_;
  std::unique_ptr<Conductor> conductor_;
  std::thread thread_;
  std::thread agent_;
  std::atomic<bool> stop_{false};
  std::string mac_;
};

}  // namespace

TEST_CASE("agent workflows: inspect and provide through the agent, burn-in skipped without a profile") {
  Lab lab;
  Node n = lab.enroll("bm", "52:54:00:00:10:01");
  lab.start_agent();
  REQUIRE(lab.verb(n.id, ProvisionEvent::kManage));
  lab.wait_stable(n.id, S::kManageable);
  REQUIRE(lab.verb(n.id, ProvisionEvent::kInspect));
  Node m = lab.wait_stable(n.id, S::kManageable);
  CHECK(m.inventory["cpu"]["count"] == 4);
  CHECK(m.power_state == PowerState::kOff);
  REQUIRE(lab.verb(n.id, ProvisionEvent::kProvide));
  m = lab.wait_stable(n.id, S::kAvailable);
  CHECK(m.last_error.empty());
  lab.stop_agent();
  REQUIRE(lab.commands.size() == 2);
  CHECK(lab.commands[0] == "inspect {}");
  CHECK(lab.commands[1] == "wipe {\"full_overwrite\":false}");
}

TEST_CASE("agent workflows: deploy is refused at once without a usable os image") {
  Lab lab;
  Node n = lab.enroll("bm", "52:54:00:00:11:01");
  lab.start_agent();
  REQUIRE(lab.verb(n.id, ProvisionEvent::kManage));
  lab.wait_stable(n.id, S::kManageable);
  REQUIRE(lab.verb(n.id, ProvisionEvent::kProvide));
  lab.wait_stable(n.id, S::kAvailable);
  auto r = lab.verb(n.id, ProvisionEvent::kDeploy, "no-such-image");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Code::kInvalidArgument);
  REQUIRE(r.error().fields.size() == 1);
  CHECK(r.error().fields[0].field == "/image");
  CHECK(lab.get(n.id).provision_state == S::kAvailable);
  auto empty = lab.verb(n.id, ProvisionEvent::kDeploy, "");
  REQUIRE_FALSE(empty);
  CHECK(empty.error().fields[0].field == "/image");
}

TEST_CASE("agent workflows: abort during wait_agent ends the wait, an agent that never calls back times out") {
  SECTION("abort") {
    Lab lab;
    Node n = lab.enroll("bm", "52:54:00:00:12:01");
    REQUIRE(lab.verb(n.id, ProvisionEvent::kManage));
    lab.wait_stable(n.id, S::kManageable);
    REQUIRE(lab.verb(n.id, ProvisionEvent::kProvide));
    lab.wait_step(n.id, "wait_agent");
    REQUIRE(lab.verb(n.id, ProvisionEvent::kAbort));
    Node m = lab.wait_stable(n.id, S::kCleanFailed);
    CHECK_THAT(m.last_error, Catch::Contains("aborted") && Catch::Contains("(step wait_agent)"));
  }
  SECTION("timeout") {
    Lab lab(1500ms);
    Node n = lab.enroll("bm", "52:54:00:00:12:02");
    REQUIRE(lab.verb(n.id, ProvisionEvent::kManage));
    lab.wait_stable(n.id, S::kManageable);
    REQUIRE(lab.verb(n.id, ProvisionEvent::kInspect));
    Node m = lab.wait_stable(n.id, S::kInspectFailed);
    CHECK(m.last_error == "timed out after 1.5s in inspecting (step wait_agent)");
  }
}

TEST_CASE("agent workflows: on-demand validation of a node at rest boots the ramdisk, validates, powers off") {
  Lab lab(2s);
  Node n = lab.enroll("bm", "52:54:00:00:13:01");
  lab.start_agent();
  REQUIRE(lab.verb(n.id, ProvisionEvent::kManage));
  lab.wait_stable(n.id, S::kManageable);
  REQUIRE(lab.verb(n.id, ProvisionEvent::kProvide));
  lab.wait_stable(n.id, S::kAvailable);
  lab.give_profile(n.id);
  const int lookups_before = lab.lookups;

  Result<Node> started = lab.validate_now(n.id, ValidationPlan::kFull);
  REQUIRE(started);
  CHECK_FALSE(started->reservation.empty());
  Node m = lab.wait_free(n.id);
  CHECK(m.provision_state == S::kAvailable);  // on demand never moves the node
  CHECK(m.provision_step.empty());
  CHECK(m.power_state == PowerState::kOff);
  CHECK(m.last_error.empty());
  CHECK(lab.lookups == lookups_before + 1);  // a fresh ramdisk boot
  REQUIRE_FALSE(lab.commands.empty());
  CHECK_THAT(lab.commands.back(), Catch::StartsWith("validate ") && Catch::Contains("\"plan\":\"full\""));
  auto recs = lab.store().list_validations(n.id, "", 10, "");
  REQUIRE(recs);
  REQUIRE(recs->size() == 1);
  CHECK((*recs)[0].phase == "on_demand");
  CHECK((*recs)[0].result == "pass");
  CHECK(m.last_validation == (*recs)[0].id);
  CHECK(lab.store().agent_sessions_of(n.id)->empty());  // the ramdisk's agent is forgotten

  // The agent is gone: the run times out at wait_agent, stores an error
  // report, and still powers the node off.
  lab.stop_agent();
  started = lab.validate_now(n.id, ValidationPlan::kQuick);
  REQUIRE(started);
  m = lab.wait_free(n.id);
  CHECK(m.provision_state == S::kAvailable);
  CHECK(m.power_state == PowerState::kOff);
  recs = lab.store().list_validations(n.id, "", 10, "");
  REQUIRE(recs);
  REQUIRE(recs->size() == 2);
  CHECK((*recs)[0].result == "error");
  CHECK((*recs)[0].report["error"] == "on-demand validation failed at step wait_agent: timed out after 2 s");
}

TEST_CASE("agent workflows: on demand is refused for an active node (it runs the tenant's OS)") {
  Lab lab;
  Node n = lab.enroll("bm", "52:54:00:00:14:01");
  lab.give_profile(n.id);
  auto r = lab.store().update_node_if(n.id, NodeCondition{}, [](Node& m) {
    m.provision_state = S::kActive;
    return ok_status();
  }, {});
  REQUIRE(r);
  Result<Node> refused = lab.validate_now(n.id, ValidationPlan::kQuick);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == Code::kConflict);
  CHECK_THAT(refused.error().message, Catch::Contains("is active") && Catch::Contains("tenant's OS"));
}

TEST_CASE("agent workflows: deploy writes the config drive with the allocation's keys after the image") {
  const std::string key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq9kx1f7pZ8bC4oTb0FvZ7yJb1m2cQ7dWq8p0JqGq1a t@lab";
  std::atomic<int> asked{0};
  TenantAccessLookup access = [&](std::string id) -> asio::awaitable<Result<TenantAccess>> {
    ++asked;
    if (id != "alloc-1") co_return Error(Code::kNotFound, "no allocation " + id);
    TenantAccess a;
    a.ssh_keys = {key};
    co_return a;
  };
  Lab lab(30s, access);
  Node n = lab.available_with_image("gpu-01", "52:54:00:00:16:01", "demo-os");
  REQUIRE(lab.verb(n.id, ProvisionEvent::kDeploy, "demo-os", "alloc-1"));
  Node m = lab.wait_stable(n.id, S::kActive);
  CHECK(m.last_error.empty());
  lab.stop_agent();
  CHECK(asked == 1);
  // write_image, then write_config_drive with kilnd's ISO in base64.
  std::size_t image_at = lab.commands.size(), drive_at = lab.commands.size();
  for (std::size_t i = 0; i < lab.commands.size(); ++i) {
    if (lab.commands[i].rfind("write_image ", 0) == 0) image_at = i;
    if (lab.commands[i].rfind("write_config_drive ", 0) == 0) drive_at = i;
  }
  REQUIRE(drive_at < lab.commands.size());
  CHECK(image_at + 1 == drive_at);
  json args = json::parse(lab.commands[drive_at].substr(std::string("write_config_drive ").size()));
  auto iso = base64_decode(args["iso_base64"].get<std::string>());
  REQUIRE(iso);
  CHECK(iso->substr(32769, 5) == "CD001");
  CHECK(iso->substr(32808, 6) == "cidata");
  CHECK(iso->find(key) != std::string::npos);
  CHECK(iso->find("local-hostname: \"gpu-01\"") != std::string::npos);
  CHECK(iso->find("instance-id: \"" + n.id + "-alloc-1\"") != std::string::npos);
}

TEST_CASE("agent workflows: an allocation the lookup does not know gives a drive without keys, a failing one fails") {
  TenantAccessLookup access = [](std::string id) -> asio::awaitable<Result<TenantAccess>> {
    if (id == "broken") co_return Error(Code::kUnavailable, "store is down");
    co_return Error(Code::kNotFound, "no allocation " + id);
  };
  Lab lab(30s, access);
  Node n = lab.available_with_image("gpu-02", "52:54:00:00:17:01", "demo-os");
  SECTION("unknown: deployed, no keys") {
    REQUIRE(lab.verb(n.id, ProvisionEvent::kDeploy, "demo-os", "gone"));
    Node m = lab.wait_stable(n.id, S::kActive);
    CHECK(m.last_error.empty());
  }
  SECTION("the lookup fails: the deploy fails at write_config_drive with the reason") {
    REQUIRE(lab.verb(n.id, ProvisionEvent::kDeploy, "demo-os", "broken"));
    Node m = lab.wait_stable(n.id, S::kDeployFailed);
    CHECK(m.last_error.find("config drive: allocation broken: store is down") != std::string::npos);
  }
}
