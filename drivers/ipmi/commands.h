#pragma once
// The IPMI commands the driver speaks: request data builders and response
// parsers (pure, no I/O), plus the texts for completion codes and RMCP+
// status codes so errors carry the BMC's words.
//
// Spec references (IPMI v2.0 rev 1.1):
//   20.1  Get Device ID (App 0x06, cmd 0x01)
//   22.13 Get Channel Authentication Capabilities (App, cmd 0x38)
//   22.18 Set Session Privilege Level (App, cmd 0x3B)
//   22.19 Close Session (App, cmd 0x3C)
//   28.2  Get Chassis Status (Chassis 0x00, cmd 0x01)
//   28.3  Chassis Control (Chassis, cmd 0x02)
//   28.12 Set System Boot Options (Chassis, cmd 0x08)
//   28.13 Get System Boot Options (Chassis, cmd 0x09), Table 28-14 parameters
//   5.2   completion codes (Table 5-2); 13.24 RMCP+ status codes (Table 13-15)

#include <cstdint>
#include <string>

#include "common/result.h"
#include "drivers/ipmi/rmcpplus_crypto.h"

namespace kiln::ipmi {

inline constexpr uint8_t kNetFnChassis = 0x00;
inline constexpr uint8_t kNetFnApp = 0x06;

inline constexpr uint8_t kCmdGetDeviceId = 0x01;
inline constexpr uint8_t kCmdGetChannelAuthCaps = 0x38;
inline constexpr uint8_t kCmdSetSessionPrivilege = 0x3B;
inline constexpr uint8_t kCmdCloseSession = 0x3C;

inline constexpr uint8_t kCmdGetChassisStatus = 0x01;
inline constexpr uint8_t kCmdChassisControl = 0x02;
inline constexpr uint8_t kCmdSetBootOptions = 0x08;
inline constexpr uint8_t kCmdGetBootOptions = 0x09;

// "0xC1 invalid command", "0xD4 insufficient privilege", ...; unknown codes
// print as "0xNN completion code" (OEM/command-specific range included).
std::string completion_code_text(uint8_t cc);
// RMCP+ session setup status (Open Session Response, RAKP 2/4):
// "0x0D unauthorized name", ...
std::string rmcp_status_text(uint8_t status);
// True for RMCP+ statuses that mean the credentials or privilege were refused
// (unauthorized name/role/GUID, invalid integrity check value...).
bool rmcp_status_is_auth_failure(uint8_t status);

// ---- Get Channel Authentication Capabilities ------------------------------------

// Request data: channel 0x0E ("this channel") with bit 7 asking for IPMI v2.0
// extended data, and the privilege level we intend to use.
Bytes channel_auth_caps_request(uint8_t privilege);
struct ChannelAuthCaps {
  uint8_t channel = 0;
  bool ipmi20_supported = false;  // extended capabilities bit 1
};
// Data after the completion code (8 bytes).
Result<ChannelAuthCaps> parse_channel_auth_caps(ByteView data);

// ---- Get Device ID -----------------------------------------------------------------

struct DeviceId {
  uint8_t device_id = 0;
  uint8_t device_revision = 0;
  uint8_t firmware_major = 0;
  uint8_t firmware_minor = 0;  // BCD
  uint8_t ipmi_version = 0;    // BCD, 0x02 = 2.0
  uint32_t manufacturer_id = 0;
  uint16_t product_id = 0;
};
Result<DeviceId> parse_device_id(ByteView data);

// ---- Chassis -------------------------------------------------------------------------

struct ChassisStatus {
  bool power_on = false;
  bool power_fault = false;
  uint8_t current_power_state = 0;  // the raw byte
};
Result<ChassisStatus> parse_chassis_status(ByteView data);

enum class ChassisControl : uint8_t {
  kPowerDown = 0x00,
  kPowerUp = 0x01,
  kPowerCycle = 0x02,
  kHardReset = 0x03,
  kSoftShutdown = 0x05,  // "initiate soft-shutdown via ACPI by emulating a fatal overtemperature"
};

// ---- System boot options ----------------------------------------------------------------

// Boot option parameter selectors (Table 28-14).
inline constexpr uint8_t kBootParamSetInProgress = 0;
inline constexpr uint8_t kBootParamFlagValidClearing = 3;
inline constexpr uint8_t kBootParamInfoAck = 4;
inline constexpr uint8_t kBootParamBootFlags = 5;

// Boot device selector values (param 5 data byte 2, bits 5:2, shown shifted).
inline constexpr uint8_t kBootDevicePxe = 0x04;
inline constexpr uint8_t kBootDeviceDisk = 0x08;

// Param 5 data byte 1 bits.
inline constexpr uint8_t kBootFlagValid = 0x80;
inline constexpr uint8_t kBootFlagPersistent = 0x40;
inline constexpr uint8_t kBootFlagEfi = 0x20;

// Set System Boot Options request data: parameter selector (bit 7 clear =
// parameter valid/unlocked) followed by the parameter data.
Bytes set_boot_option_request(uint8_t param, ByteView param_data);
// Get System Boot Options request data: param, set selector 0, block selector 0.
Bytes get_boot_option_request(uint8_t param);

// Boot flags (param 5): 5 data bytes [valid|persistent|efi, device, 0, 0, 0].
Bytes boot_flags_data(uint8_t device_selector, bool persistent, bool efi);

struct BootFlags {
  bool valid = false;
  bool persistent = false;
  bool efi = false;
  uint8_t device_selector = 0;  // masked to bits 5:2
};
// Parses the Get System Boot Options response data for parameter 5:
// [version, param (bit 7 = locked), 5 data bytes].
Result<BootFlags> parse_boot_flags(ByteView data);

}  // namespace kiln::ipmi
