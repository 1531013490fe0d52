#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "controller/boot/dnsmasq_config.h"

using namespace kiln::boot;

namespace {
DnsmasqConfigInput input() {
  DnsmasqConfigInput in;
  in.interface = "kiln0";
  in.range_start = "10.77.0.100";
  in.range_end = "10.77.0.199";
  in.boot_url = "http://10.77.0.1:8080";
  in.ipxe_dir = "/usr/lib/ipxe";
  in.state_dir = "/var/lib/kiln/dnsmasq";
  in.user = "root";
  in.group = "root";
  return in;
}
std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);)
    if (!l.empty() && l[0] != '#') out.push_back(l);
  return out;
}
bool has(const std::vector<std::string>& ls, const std::string& l) {
  for (const auto& x : ls)
    if (x == l) return true;
  return false;
}
}  // namespace

TEST_CASE("dnsmasq config: DHCP+TFTP on one interface, DNS off, iPXE chain") {
  auto ls = lines(render_dnsmasq_config(input()));
  for (const char* want : {
           "port=0", "interface=kiln0", "bind-dynamic", "user=root", "group=root",
           "dhcp-range=10.77.0.100,10.77.0.199,1h",
           "dhcp-hostsdir=/var/lib/kiln/dnsmasq/hosts", "dhcp-leasefile=/var/lib/kiln/dnsmasq/leases",
           "pid-file=/var/lib/kiln/dnsmasq/dnsmasq.pid", "log-facility=/var/lib/kiln/dnsmasq/dnsmasq.log",
           "log-dhcp", "dhcp-ignore=tag:!known", "enable-tftp", "tftp-root=/usr/lib/ipxe",
           "dhcp-match=set:efi64,option:client-arch,7", "dhcp-match=set:efi64,option:client-arch,9",
           "dhcp-userclass=set:ipxe,iPXE",
           "dhcp-boot=tag:!nopxe,tag:!ipxe,tag:efi64,ipxe.efi", "dhcp-boot=tag:!nopxe,tag:!ipxe,tag:!efi64,undionly.kpxe",
           "dhcp-boot=tag:!nopxe,tag:ipxe,http://10.77.0.1:8080/boot/boot.ipxe",
           "dhcp-option-force=224,\"http://10.77.0.1:8080\"", "enable-ra",
           "dhcp-range=::,constructor:kiln0,ra-only"}) {
    INFO(want);
    CHECK(has(ls, want));
  }
  // Nothing points at the system configuration.
  for (const auto& l : ls) CHECK(l.find("/etc/") == std::string::npos);
}

TEST_CASE("dnsmasq config: discovery answers unknown MACs") {
  DnsmasqConfigInput in = input();
  in.discovery = true;
  auto ls = lines(render_dnsmasq_config(in));
  CHECK_FALSE(has(ls, "dhcp-ignore=tag:!known"));
  CHECK(has(ls, "dhcp-hostsdir=/var/lib/kiln/dnsmasq/hosts"));
}

TEST_CASE("dnsmasq hosts file: one dhcp-host line per MAC") {
  CHECK(hosts_file_name("52:54:00:12:34:56") == "52:54:00:12:34:56");
  CHECK(hosts_file_content("52:54:00:12:34:56") == "52:54:00:12:34:56,set:known\n");
  CHECK(hosts_file_content("52:54:00:12:34:56", false) == "52:54:00:12:34:56,set:known,set:nopxe\n");
}
