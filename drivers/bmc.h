#pragma once
// How a driver reaches a node's machine: the node's BMC block as the
// operator enrolled it. Plain data shared by the drivers and the controller
// (the Node record holds one); no I/O, no JSON policy (the API decides what
// each role sees, the store how it is laid out).

#include <string>

#include <nlohmann/json.hpp>

namespace kiln {

// How to reach a node's BMC (or hypervisor domain).
struct BmcInfo {
  std::string driver;           // fake | redfish | ipmi | libvirt
  std::string address;          // host[:port], URL, or libvirt URI
  std::string username;
  // The password sealed with SecretBox (never plaintext here); empty when unset.
  std::string password_sealed;
  std::string system_id;        // Redfish ComputerSystem id (optional)
  std::string domain;           // libvirt domain name (libvirt driver)
  bool verify_tls = true;
  // Driver-specific knobs, validated by the driver (the fake driver's delays and
  // injected failures, a Redfish CA file, an IPMI cipher suite).
  nlohmann::json options = nlohmann::json::object();
};

// What a node boots from next: the network (the deploy ramdisk) or its disk.
enum class BootDevice { kPxe, kDisk };

}  // namespace kiln
