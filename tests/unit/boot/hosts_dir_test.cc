#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "controller/boot/hosts_dir.h"

using namespace kiln::boot;
namespace fs = std::filesystem;

namespace {
struct Dir {
  Dir() {
    char t[] = "/tmp/kiln-hosts-XXXXXX";
    REQUIRE(mkdtemp(t) != nullptr);
    path = t;
  }
  ~Dir() { fs::remove_all(path); }
  std::string path;
};
std::set<std::string> names(const std::string& d) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(d)) out.insert(e.path().filename());
  return out;
}
std::string slurp(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

TEST_CASE("hosts dir: sync adds, keeps, rewrites and removes files, reload only when needed") {
  Dir d;
  HostsDir h(d.path + "/hosts");
  const std::string a = "52:54:00:00:00:0a", b = "52:54:00:00:00:0b", c = "52:54:00:00:00:0c";

  auto r = h.sync({a, b});
  REQUIRE(r);
  CHECK(r->added == 2);
  CHECK_FALSE(r->needs_reload());  // dnsmasq picks new files up by itself
  CHECK(names(h.dir()) == std::set<std::string>{a, b});
  CHECK(slurp(h.dir() + "/" + a) == a + ",set:known\n");

  r = h.sync({a, b});
  REQUIRE(r);
  CHECK(r->added + r->removed + r->rewritten == 0);

  // A file someone edited is put back, and that needs a reload.
  { std::ofstream(h.dir() + "/" + b) << "garbage\n"; }
  r = h.sync({a, b, c});
  REQUIRE(r);
  CHECK(r->added == 1);
  CHECK(r->rewritten == 1);
  CHECK(r->needs_reload());
  CHECK(slurp(h.dir() + "/" + b) == b + ",set:known\n");

  // Removing a MAC removes its file: dnsmasq needs SIGHUP to forget it.
  r = h.sync({c});
  REQUIRE(r);
  CHECK(r->removed == 2);
  CHECK(r->needs_reload());
  CHECK(names(h.dir()) == std::set<std::string>{c});

  // Leftovers of an interrupted write are cleaned without a reload.
  { std::ofstream(h.dir() + "/.tmp-x") << "x"; }
  r = h.sync({c});
  REQUIRE(r);
  CHECK_FALSE(r->needs_reload());
  CHECK(names(h.dir()) == std::set<std::string>{c});
}

TEST_CASE("hosts dir: an unwritable directory is an error naming it") {
  HostsDir h("/proc/kiln-no-such-dir/hosts");
  auto r = h.sync({"52:54:00:00:00:01"});
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("/proc/kiln-no-such-dir") != std::string::npos);
}

TEST_CASE("hosts dir: ports with pxe=false are known for DHCP but tagged nopxe") {
  Dir d;
  HostsDir h(d.path + "/hosts");
  const std::string pxe = "52:54:00:00:00:0a", vm = "52:54:00:00:00:0b";
  std::set<std::string> pxe_macs{pxe}, dhcp_only{vm}, none;
  auto r = h.sync(pxe_macs, dhcp_only);
  REQUIRE(r);
  CHECK(r->added == 2);
  CHECK(slurp(h.dir() + "/" + pxe) == pxe + ",set:known\n");
  CHECK(slurp(h.dir() + "/" + vm) == vm + ",set:known,set:nopxe\n");
  // The same MAC becoming a PXE port is a rewrite, which dnsmasq needs a SIGHUP for.
  std::set<std::string> both{pxe, vm};
  r = h.sync(both, none);
  REQUIRE(r);
  CHECK(r->rewritten == 1);
  CHECK(r->needs_reload());
  CHECK(slurp(h.dir() + "/" + vm) == vm + ",set:known\n");
}
