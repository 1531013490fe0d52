// Command data builders/parsers, error texts and BMC address parsing.

#include <catch2/catch.hpp>

#include "drivers/ipmi/commands.h"
#include "drivers/ipmi/session.h"
#include "tests/unit/ipmi/test_bytes.h"

using namespace kiln;
using namespace kiln::ipmi;
using namespace kiln::ipmi::test;

TEST_CASE("completion codes read as text", "[commands]") {
  CHECK(completion_code_text(0xC1) == "0xC1 invalid command");
  CHECK(completion_code_text(0xD4) == "0xD4 insufficient privilege");
  CHECK(completion_code_text(0xCC) == "0xCC invalid data field in request");
  CHECK(completion_code_text(0x80) == "0x80 completion code");
  CHECK(rmcp_status_text(0x0D) == "0x0D unauthorized name");
  CHECK(rmcp_status_text(0x11) == "0x11 no cipher suite match with proposed security algorithms");
  CHECK(rmcp_status_is_auth_failure(0x0D));
  CHECK_FALSE(rmcp_status_is_auth_failure(0x01));
}

TEST_CASE("Get Channel Authentication Capabilities request and reply", "[commands]") {
  CHECK(channel_auth_caps_request(4) == Bytes{0x8E, 0x04});
  // channel 1, v2.0 ext data + MD5/none, status, ext caps: IPMI 2.0, OEM 0, aux 0
  auto caps = parse_channel_auth_caps(hex("01 95 04 02 000000 00"));
  REQUIRE(caps.ok());
  CHECK(caps->channel == 1);
  CHECK(caps->ipmi20_supported);
  auto v15 = parse_channel_auth_caps(hex("01 15 04 01 000000 00"));
  REQUIRE(v15.ok());
  CHECK_FALSE(v15->ipmi20_supported);
  CHECK_FALSE(parse_channel_auth_caps(hex("01 95 04 02 0000")).ok());
}

TEST_CASE("Get Device ID reply parses (ipmi_sim's MontaVista identity)", "[commands]") {
  // device 0, rev 3, fw 9.08, IPMI 2.0, support 0x9f, mfg 0x001291, product 0x0f02
  auto id = parse_device_id(hex("00 03 09 08 02 9f 911200 020f"));
  REQUIRE(id.ok());
  CHECK(id->device_revision == 3);
  CHECK(id->firmware_major == 9);
  CHECK(id->firmware_minor == 0x08);
  CHECK(id->ipmi_version == 0x02);
  CHECK(id->manufacturer_id == 0x1291);
  CHECK(id->product_id == 0x0f02);
  CHECK_FALSE(parse_device_id(hex("00 03 09 08 02 9f 911200 02")).ok());
}

TEST_CASE("Get Chassis Status reads the power-on bit", "[commands]") {
  auto on = parse_chassis_status(hex("01 00 00 00"));
  REQUIRE(on.ok());
  CHECK(on->power_on);
  auto off = parse_chassis_status(hex("60 00 00"));
  REQUIRE(off.ok());
  CHECK_FALSE(off->power_on);
  auto fault = parse_chassis_status(hex("11 00 00"));
  REQUIRE(fault.ok());
  CHECK(fault->power_fault);
  auto trunc = parse_chassis_status(hex("01 00"));
  REQUIRE_FALSE(trunc.ok());
  CHECK(trunc.error().code == Code::kDriverError);
}

TEST_CASE("boot flags match `ipmitool chassis bootdev pxe options=efiboot,persistent`",
          "[commands]") {
  // ipmitool: flags[0] = 0x80 valid | 0x40 persistent | 0x20 efiboot; flags[1] = 0x04 pxe.
  CHECK(boot_flags_data(kBootDevicePxe, true, true) == Bytes{0xE0, 0x04, 0, 0, 0});
  CHECK(boot_flags_data(kBootDeviceDisk, false, false) == Bytes{0x80, 0x08, 0, 0, 0});
  CHECK(set_boot_option_request(kBootParamBootFlags, boot_flags_data(kBootDevicePxe, false, true)) ==
        Bytes{0x05, 0xA0, 0x04, 0, 0, 0});
  CHECK(set_boot_option_request(kBootParamFlagValidClearing, Bytes{0x08}) == Bytes{0x03, 0x08});
  CHECK(get_boot_option_request(kBootParamBootFlags) == Bytes{0x05, 0x00, 0x00});
}

TEST_CASE("Get System Boot Options parameter 5 parses", "[commands]") {
  auto f = parse_boot_flags(hex("01 05 e0 04 00 00 00"));
  REQUIRE(f.ok());
  CHECK(f->valid);
  CHECK(f->persistent);
  CHECK(f->efi);
  CHECK(f->device_selector == kBootDevicePxe);
  // ipmi_sim answers only the device selector (flags byte 0).
  auto sim = parse_boot_flags(hex("01 05 00 08 00 00 00"));
  REQUIRE(sim.ok());
  CHECK_FALSE(sim->valid);
  CHECK(sim->device_selector == kBootDeviceDisk);
  // Locked bit on the parameter byte is tolerated; another parameter is not.
  CHECK(parse_boot_flags(hex("01 85 80 04 00 00 00")).ok());
  CHECK_FALSE(parse_boot_flags(hex("01 04 80 04 00 00 00")).ok());
  CHECK_FALSE(parse_boot_flags(hex("01 05 80 04 00 00")).ok());
}

TEST_CASE("BMC addresses parse with an optional port", "[commands]") {
  auto a = parse_bmc_address("10.0.0.5");
  REQUIRE(a.ok());
  CHECK(a->host == "10.0.0.5");
  CHECK(a->port == 623);
  auto b = parse_bmc_address("bmc-17.lab:6230");
  REQUIRE(b.ok());
  CHECK(b->host == "bmc-17.lab");
  CHECK(b->port == 6230);
  auto c = parse_bmc_address("[fd00::1]:624");
  REQUIRE(c.ok());
  CHECK(c->host == "fd00::1");
  CHECK(c->port == 624);
  for (const char* bad : {"", ":623", "host:", "host:0", "host:70000", "host:12a", "fd00::1",
                          "[fd00::1", "[fd00::1]x", "a b"}) {
    INFO(bad);
    auto r = parse_bmc_address(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Code::kInvalidArgument);
    REQUIRE(r.error().fields.size() == 1);
    CHECK(r.error().fields[0].field == "/bmc/address");
  }
}
