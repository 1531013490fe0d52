// parse_dnsmasq_leases: dnsmasq's lease file, strictly (controller/boot/dhcp_leases.h).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "controller/boot/dhcp_leases.h"

using namespace kiln;
using namespace kiln::boot;

TEST_CASE("dnsmasq leases: the real format, skipped hardware types and the IPv6 part") {
  const std::string text =
      "1767225600 52:54:00:77:00:01 10.77.0.150 kiln-ramdisk 01:52:54:00:77:00:01\n"
      "0 52:54:00:77:00:02 10.77.0.151 * *\n"
      "1767225600 01:02 10.77.0.152 * *\n"                           // another hardware type
      "1767225600 6-aa:bb:cc:dd:ee:ff 10.77.0.153 * *\n"              // with a type prefix
      "duid 00:01:00:01:2c:a9:6d:1e:52:54:00:12:34:56\n"
      "1767225600 12345 fd00::5 host 00:01:00:01:2c:a9:6d:1e:52:54\n";  // IPv6: skipped
  auto leases = parse_dnsmasq_leases(text);
  REQUIRE(leases);
  REQUIRE(leases->size() == 2);
  CHECK((*leases)[0].mac == "52:54:00:77:00:01");
  CHECK((*leases)[0].ip == "10.77.0.150");
  CHECK((*leases)[0].expiry == 1767225600);
  CHECK(leased_address(*leases, "52:54:00:77:00:01", 1767225599) == std::optional<std::string>("10.77.0.150"));
  CHECK_FALSE(leased_address(*leases, "52:54:00:77:00:01", 1767225600));  // expired
  CHECK(leased_address(*leases, "52:54:00:77:00:02", 4000000000) == std::optional<std::string>("10.77.0.151"));
  CHECK_FALSE(leased_address(*leases, "52:54:00:77:00:03", 0));
  CHECK(parse_dnsmasq_leases("")->empty());
  CHECK(parse_dnsmasq_leases("\n\n")->empty());
  // Upper case MACs are normalized.
  CHECK(parse_dnsmasq_leases("5 52:54:00:AB:CD:EF 10.0.0.1 * *\n")->at(0).mac == "52:54:00:ab:cd:ef");
}

TEST_CASE("dnsmasq leases: malformed lines are refused with their line number") {
  const char* bad[] = {
      "x 52:54:00:77:00:01 10.77.0.150 * *",          // expiry
      "-1 52:54:00:77:00:01 10.77.0.150 * *",
      "99999999999999999999 52:54:00:77:00:01 10.77.0.150 * *",
      "1 52:54:00:77:00:01 10.77.0.256 * *",          // address
      "1 52:54:00:77:00:01 10.77.0 * *",
      "1 52:54:00:77:00:01 10.77.0.01 * *",
      "1 52:54:00:77:00:01 fd00::1 * *",
      "1 52:54:00:77:00:zz 10.77.0.1 * *",            // MAC
      "1 52:54:00:77:00:01 10.77.0.1 *",              // fields
      "1 52:54:00:77:00:01 10.77.0.1 * * extra",
      "1\t52:54:00:77:00:01 10.77.0.1 * *",
  };
  for (const char* line : bad) {
    INFO(line);
    auto r = parse_dnsmasq_leases(std::string("0 52:54:00:00:00:01 10.0.0.1 * *\n") + line + "\n");
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("line 2") != std::string::npos);
  }
  CHECK_FALSE(parse_dnsmasq_leases(std::string("1 52:54:00:77:00:01 10.77.0.1 * *\0\n", 35)));
  CHECK_FALSE(parse_dnsmasq_leases(std::string(2000, 'a')));              // a line too long
  CHECK_FALSE(parse_dnsmasq_leases(std::string(kMaxLeaseFileBytes + 1, '\n')));  // a file too large
}

TEST_CASE("dnsmasq leases: LeaseFile reads the file each time, a missing file is no lease") {
  char tmpl[] = "/tmp/kiln-leases-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string path = std::string(tmpl) + "/leases";
  LeaseFile f(path);
  auto none = f.address_of("52:54:00:77:00:01", 0);
  REQUIRE(none);
  CHECK_FALSE(*none);
  std::ofstream(path) << "0 52:54:00:77:00:01 10.77.0.9 * *\n";
  CHECK(*f.address_of("52:54:00:77:00:01", 0) == std::optional<std::string>("10.77.0.9"));
  std::ofstream(path) << "garbage\n";
  CHECK_FALSE(f.address_of("52:54:00:77:00:01", 0));  // the caller fails closed
  std::remove(path.c_str());
  ::rmdir(tmpl);
}
