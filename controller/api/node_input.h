#pragma once
// Node request bodies: POST /v1/nodes and PATCH /v1/nodes/{id}.
//
// Both go through the same field rules (parse_mutable_fields), so a PATCH
// cannot produce a node that a POST would refuse. A PATCH is a JSON Merge
// Patch over mutable_document(node) — the node's writable fields as JSON —
// whose result is parsed again with those rules. BMC passwords never appear in
// the document: a patch's bmc.password is taken out first (a string sets it,
// null clears it).
//
// A BMC address holding credentials ("https://user:pw@bmc") is refused
// naming /bmc/address without echoing it.
//
// These functions check shape and format only; the route asks the conductor
// to validate the BMC block against its driver.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "controller/api/json_input.h"
#include "controller/model/node.h"

namespace kiln::api {

// The fields every node has, bare metal or virtual: name, boot_mode,
// profile, traits, tenant; the one place their limits live (names per
// valid_node_name, the others at most 255 characters, each trait 1-255).
// Reads them from `r` onto `node`, resetting absent ones to their defaults;
// errors are recorded in `errors` (through `r` where they name a key).
// Used by bare-metal create and PATCH (below) and by virtual create.
void parse_common_fields(ObjectReader& r, Node& node, std::vector<FieldError>& errors);

// 1-255 characters of [A-Za-z0-9._~-], not a UUID.
bool valid_node_name(std::string_view name);
// Six hex pairs separated by ':' or '-' -> lowercase colon form; nullopt otherwise.
std::optional<std::string> normalize_mac(std::string_view mac);

// Password edit requested by a body.
struct PasswordChange {
  bool clear = false;
  std::optional<std::string> plaintext;  // to seal; never log
};

struct PortDraft {
  std::string address;  // normalized
  bool pxe = true;
};

struct NodeDraft {
  Node node;  // fields from the body, defaults elsewhere
  PasswordChange password;
  std::vector<PortDraft> ports;
};

// Parses a create body; field errors are appended to `errors`.
NodeDraft parse_node_create(const nlohmann::json& body, std::vector<FieldError>& errors);

// The writable fields of `node` as JSON (no password).
nlohmann::json mutable_document(const Node& node);

// Checks the top-level and bmc keys of a merge patch: read-only fields get
// "read-only", unknown ones "unknown field". Also takes out bmc.password.
std::vector<FieldError> check_patch(const nlohmann::json& patch, PasswordChange& password);

// Parses a patched mutable document onto `node` (which keeps every other field).
void apply_mutable_document(const nlohmann::json& doc, Node& node, std::vector<FieldError>& errors);

}  // namespace kiln::api
