#include <map>

#include <catch2/catch.hpp>
#include <stdlib.h>
#include <unistd.h>
#include <fstream>

#include "tools/vbmc/domain_xml.h"
#include "tools/vbmc/mockup_backend.h"
#include "tools/vbmc/options.h"

using namespace kiln;
using namespace kiln::vbmc;

namespace {

const char* kDomain = R"(<domain type='test' id='1'>
  <name>test</name>
  <memory unit='KiB'>8388608</memory>
  <vcpu placement='static'>2</vcpu>
  <os>
    <type arch='i686'>hvm</type>
    <boot dev='hd'/>
  </os>
  <devices>
    <disk type='file' device='disk'>
      <source file='/guest/diskimage1'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <disk type='file' device='cdrom'>
      <target dev='sda' bus='sata'/>
    </disk>
    <interface type='network'>
      <mac address='AA:BB:CC:DD:EE:FF'/>
    </interface>
  </devices>
</domain>
)";

}  // namespace

TEST_CASE("domain XML: hardware and boot order", "[vbmc]") {
  DomainXmlInfo info = parse_domain_xml(kDomain);
  CHECK(info.vcpus == 2);
  CHECK(info.memory_kib == 8388608);
  REQUIRE(info.disks.size() == 1);
  CHECK(info.disks[0].name == "vda");
  CHECK(info.disks[0].source == "/guest/diskimage1");
  CHECK(info.macs == std::vector<std::string>{"aa:bb:cc:dd:ee:ff"});
  CHECK(info.boot_devs == std::vector<std::string>{"hd"});
  CHECK_FALSE(info.uefi);

  const std::string pxe = set_boot_devs(kDomain, {"network", "hd"});
  DomainXmlInfo after = parse_domain_xml(pxe);
  CHECK(after.boot_devs == std::vector<std::string>{"network", "hd"});
  CHECK(after.macs == info.macs);
  CHECK(pxe.find("<boot dev='hd'/>\n    <boot") == std::string::npos);  // old entry removed, not duplicated
  CHECK(parse_domain_xml(set_boot_devs(pxe, {"hd", "network"})).boot_devs ==
        std::vector<std::string>{"hd", "network"});
}

TEST_CASE("mockup power model follows the ResetType", "[vbmc]") {
  CHECK(*MockupBackend::power_after(false, "On") == true);
  CHECK(*MockupBackend::power_after(true, "ForceOff") == false);
  CHECK(*MockupBackend::power_after(true, "GracefulShutdown") == false);
  CHECK(*MockupBackend::power_after(true, "ForceRestart") == true);
  CHECK(*MockupBackend::power_after(false, "ForceRestart") == false);
  CHECK(*MockupBackend::power_after(false, "PowerCycle") == true);
  CHECK(*MockupBackend::power_after(true, "PushPowerButton") == false);
  CHECK_FALSE(MockupBackend::power_after(true, "Explode"));
}

TEST_CASE("kiln-vbmc --password-file reads the BMC password from a file, one line", "[vbmc]") {
  char tmpl[] = "/tmp/kiln-vbmc-pw-XXXXXX";
  int fd = mkstemp(tmpl);
  REQUIRE(fd >= 0);
  ::close(fd);
  const std::string path = tmpl;
  auto write = [&](const std::string& text) { std::ofstream(path, std::ios::binary | std::ios::trunc) << text; };
  write("s3cret\n");
  auto ok = parse_vbmc_args({"--mockup", "d", "--user", "admin", "--password-file", path});
  REQUIRE(ok);
  CHECK(ok->redfish.password == "s3cret");
  CHECK(ok->fleet.password == "s3cret");
  write("s3cret\r\n");
  CHECK(parse_vbmc_args({"--mockup", "d", "--password-file=" + path})->redfish.password == "s3cret");
  write("");
  CHECK_THAT(parse_vbmc_args({"--mockup", "d", "--password-file", path}).error().message, Catch::Contains("is empty"));
  write("one\ntwo\n");
  CHECK_THAT(parse_vbmc_args({"--mockup", "d", "--password-file", path}).error().message,
             Catch::Contains("one line"));
  ::unlink(path.c_str());
  CHECK_THAT(parse_vbmc_args({"--mockup", "d", "--password-file", path}).error().message,
             Catch::Contains("cannot read"));
}

TEST_CASE("kiln-vbmc flags", "[vbmc]") {
  auto ok = parse_vbmc_args({"--mockup", "/tmp/x", "--redfish-listen", "0.0.0.0:0", "--max-sessions=3",
                             "--allowed-reset-types", "On,ForceOff", "--fault-500-rate", "0.5"});
  REQUIRE(ok);
  CHECK(ok->mockup_dir == "/tmp/x");
  CHECK(ok->listen_host == "0.0.0.0");
  CHECK(ok->listen_port == 0);
  CHECK(ok->redfish.max_sessions == 3);
  CHECK(ok->redfish.allowed_reset_types == std::vector<std::string>{"On", "ForceOff"});
  CHECK(ok->redfish.fault_500_rate == 0.5);

  CHECK_THAT(parse_vbmc_args({"--bogus"}).error().message, Catch::Contains("unknown flag --bogus"));
  CHECK_FALSE(parse_vbmc_args({"--redfish-listen", "1.2.3.4:0"}));  // no back-end
  CHECK_FALSE(parse_vbmc_args({"--mockup", "d", "--libvirt-uri", "test:///default"}));
  CHECK_FALSE(parse_vbmc_args({"--mockup", "d", "--redfish-listen", "nope"}));
  CHECK_FALSE(parse_vbmc_args({"--mockup", "d", "--fault-500-rate", "2"}));
  CHECK_FALSE(parse_vbmc_args({"--mockup", "d", "--allowed-reset-types", "Explode"}));
  CHECK_FALSE(parse_vbmc_args({"--mockup", "d", "--etag-quirk", "odd"}));
  CHECK_FALSE(parse_vbmc_args({"--mockup"}));

  auto faults = parse_vbmc_args({"--mockup", "d", "--fault-status", "/redfish/v1/Chassis/1=500",
                                 "--fault-status=/redfish/v1/Systems/1/Memory/a=b=403"});
  REQUIRE(faults);
  CHECK(faults->redfish.fault_status == std::map<std::string, int>{{"/redfish/v1/Chassis/1", 500},
                                                                   {"/redfish/v1/Systems/1/Memory/a=b", 403}});
  CHECK_FALSE(parse_vbmc_args({"--mockup", "d", "--fault-status", "/x=200"}));  // not an error status
  CHECK_FALSE(parse_vbmc_args({"--mockup", "d", "--fault-status", "x=500"}));   // not a path
  CHECK_FALSE(parse_vbmc_args({"--mockup", "d", "--fault-status", "/x"}));
}
