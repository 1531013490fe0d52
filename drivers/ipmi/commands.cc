#include "drivers/ipmi/commands.h"

#include <cstdio>

namespace kiln::ipmi {
namespace {

std::string hex2(uint8_t v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", v);
  return buf;
}

Error malformed(std::string what) { return Error(Code::kDriverError, std::move(what)); }

}  // namespace

std::string completion_code_text(uint8_t cc) {
  const char* text = nullptr;
  switch (cc) {
    case 0x00: text = "command completed normally"; break;
    case 0xC0: text = "node busy"; break;
    case 0xC1: text = "invalid command"; break;
    case 0xC2: text = "command invalid for given LUN"; break;
    case 0xC3: text = "timeout while processing command"; break;
    case 0xC4: text = "out of space"; break;
    case 0xC5: text = "reservation canceled or invalid reservation ID"; break;
    case 0xC6: text = "request data truncated"; break;
    case 0xC7: text = "request data length invalid"; break;
    case 0xC8: text = "request data field length limit exceeded"; break;
    case 0xC9: text = "parameter out of range"; break;
    case 0xCA: text = "cannot return number of requested data bytes"; break;
    case 0xCB: text = "requested sensor, data, or record not present"; break;
    case 0xCC: text = "invalid data field in request"; break;
    case 0xCD: text = "command illegal for specified sensor or record type"; break;
    case 0xCE: text = "command response could not be provided"; break;
    case 0xCF: text = "cannot execute duplicated request"; break;
    case 0xD0: text = "SDR repository in update mode"; break;
    case 0xD1: text = "device in firmware update mode"; break;
    case 0xD2: text = "BMC initialization in progress"; break;
    case 0xD3: text = "destination unavailable"; break;
    case 0xD4: text = "insufficient privilege"; break;
    case 0xD5: text = "command not supported in present state"; break;
    case 0xD6: text = "command sub-function disabled or unavailable"; break;
    case 0xFF: text = "unspecified error"; break;
    default: break;
  }
  if (text == nullptr) return hex2(cc) + " completion code";
  return hex2(cc) + " " + text;
}

std::string rmcp_status_text(uint8_t status) {
  const char* text = nullptr;
  switch (status) {
    case 0x00: text = "no errors"; break;
    case 0x01: text = "insufficient resources to create a session"; break;
    case 0x02: text = "invalid session ID"; break;
    case 0x03: text = "invalid payload type"; break;
    case 0x04: text = "invalid authentication algorithm"; break;
    case 0x05: text = "invalid integrity algorithm"; break;
    case 0x06: text = "no matching authentication payload"; break;
    case 0x07: text = "no matching integrity payload"; break;
    case 0x08: text = "inactive session ID"; break;
    case 0x09: text = "invalid role"; break;
    case 0x0A: text = "unauthorized role or privilege level requested"; break;
    case 0x0B: text = "insufficient resources to create a session at the requested role"; break;
    case 0x0C: text = "invalid name length"; break;
    case 0x0D: text = "unauthorized name"; break;
    case 0x0E: text = "unauthorized GUID"; break;
    case 0x0F: text = "invalid integrity check value"; break;
    case 0x10: text = "invalid confidentiality algorithm"; break;
    case 0x11: text = "no cipher suite match with proposed security algorithms"; break;
    case 0x12: text = "illegal or unrecognized parameter"; break;
    default: break;
  }
  if (text == nullptr) return hex2(status) + " RMCP+ status";
  return hex2(status) + " " + text;
}

bool rmcp_status_is_auth_failure(uint8_t status) {
  switch (status) {
    case 0x09: case 0x0A: case 0x0C: case 0x0D: case 0x0E: case 0x0F:
      return true;
    default:
      return false;
  }
}

Bytes channel_auth_caps_request(uint8_t privilege) {
  return Bytes{0x8E, static_cast<uint8_t>(privilege & 0x0F)};
}

Result<ChannelAuthCaps> parse_channel_auth_caps(ByteView d) {
  if (d.size() < 8) return malformed("Get Channel Authentication Capabilities response truncated");
  ChannelAuthCaps c;
  c.channel = d[0];
  // Byte 2 bit 7: extended data present; byte 4 bit 1: IPMI v2.0 connections supported.
  c.ipmi20_supported = (d[1] & 0x80) != 0 && (d[3] & 0x02) != 0;
  return c;
}

Result<DeviceId> parse_device_id(ByteView d) {
  if (d.size() < 11) return malformed("Get Device ID response truncated");
  DeviceId id;
  id.device_id = d[0];
  id.device_revision = d[1] & 0x0F;
  id.firmware_major = d[2] & 0x7F;
  id.firmware_minor = d[3];
  id.ipmi_version = d[4];
  id.manufacturer_id = static_cast<uint32_t>(d[6]) | (static_cast<uint32_t>(d[7]) << 8) |
                       (static_cast<uint32_t>(d[8] & 0x0F) << 16);
  id.product_id = static_cast<uint16_t>(d[9] | (d[10] << 8));
  return id;
}

Result<ChassisStatus> parse_chassis_status(ByteView d) {
  // Bytes: current power state, last power event, misc chassis state
  // (front panel byte optional). ipmi_sim and most BMCs send 3 or 4.
  if (d.size() < 3) return malformed("Get Chassis Status response truncated");
  ChassisStatus s;
  s.current_power_state = d[0];
  s.power_on = (d[0] & 0x01) != 0;
  s.power_fault = (d[0] & 0x10) != 0;
  return s;
}

Bytes set_boot_option_request(uint8_t param, ByteView param_data) {
  Bytes out;
  out.push_back(static_cast<uint8_t>(param & 0x7F));
  out.insert(out.end(), param_data.begin(), param_data.end());
  return out;
}

Bytes get_boot_option_request(uint8_t param) {
  return Bytes{static_cast<uint8_t>(param & 0x7F), 0x00, 0x00};
}

Bytes boot_flags_data(uint8_t device_selector, bool persistent, bool efi) {
  uint8_t b1 = kBootFlagValid;
  if (persistent) b1 |= kBootFlagPersistent;
  if (efi) b1 |= kBootFlagEfi;
  return Bytes{b1, static_cast<uint8_t>(device_selector & 0x3C), 0x00, 0x00, 0x00};
}

Result<BootFlags> parse_boot_flags(ByteView d) {
  if (d.size() < 2 + 5) return malformed("Get System Boot Options (boot flags) response truncated");
  if ((d[1] & 0x7F) != kBootParamBootFlags) {
    return malformed("Get System Boot Options answered parameter " + std::to_string(d[1] & 0x7F) +
                     " instead of 5");
  }
  BootFlags f;
  f.valid = (d[2] & kBootFlagValid) != 0;
  f.persistent = (d[2] & kBootFlagPersistent) != 0;
  f.efi = (d[2] & kBootFlagEfi) != 0;
  f.device_selector = d[3] & 0x3C;
  return f;
}

}  // namespace kiln::ipmi
