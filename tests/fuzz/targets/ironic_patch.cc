// The Ironic API's JSON Patch applier (controller/ironic/ironic_patch.h) on
// a client's PATCH /v1/nodes/{id} body, applied to a node's editable
// document as kilnd applies it. The input is the patch's JSON text. What the
// contract promises is checked: an accepted patch has at most kMaxPatchOps
// operations, names a field per operation, and gives the same document when
// applied again to a fresh copy (it is a pure function); a refused patch
// leaves the document exactly as it was, with a bounded message that never
// echoes a value (a driver_info password may be one).
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "controller/ironic/ironic_patch.h"

namespace {

const nlohmann::json& base_document() {
  static const nlohmann::json doc = nlohmann::json::parse(R"({
    "name": "node-0", "driver": "redfish",
    "driver_info": {"redfish_address": "https://10.0.0.9", "redfish_password": "******"},
    "extra": {"a": {"b": [1, 2, {"c": null}]}}, "properties": {}, "instance_info": {"image_source": "demo-os"},
    "maintenance": false, "resource_class": null})");
  return doc;
}

// A marker value: if it shows in a refusal message, a value was echoed.
constexpr std::string_view kCanary = "CANARY-9f3b";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  nlohmann::json patch = nlohmann::json::parse(reinterpret_cast<const char*>(data),
                                               reinterpret_cast<const char*>(data) + size, nullptr, false);
  if (patch.is_discarded()) return 0;
  // Values are replaced by the canary so an echo is detectable.
  if (patch.is_array())
    for (nlohmann::json& op : patch)
      if (op.is_object() && op.contains("value") && op["value"].is_string()) op["value"] = std::string(kCanary);
  nlohmann::json doc = base_document();
  kiln::Status s = kiln::ironic::apply_json_patch(doc, patch);
  if (!s) {
    if (doc != base_document()) __builtin_trap();  // all or nothing
    const std::string& m = s.error().message;
    if (m.size() > 1024 || m.find(kCanary) != std::string::npos) __builtin_trap();
    for (const kiln::FieldError& f : s.error().fields)
      if (f.message.find(kCanary) != std::string::npos) __builtin_trap();
    return 0;
  }
  if (!patch.is_array() || patch.size() > kiln::ironic::kMaxPatchOps) __builtin_trap();
  if (kiln::ironic::patched_fields(patch).size() != patch.size()) __builtin_trap();
  nlohmann::json again = base_document();
  if (!kiln::ironic::apply_json_patch(again, patch) || again != doc) __builtin_trap();
  if (!doc.is_object()) __builtin_trap();
  return 0;
}
