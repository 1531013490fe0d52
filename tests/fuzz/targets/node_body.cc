// The node body readers of POST /v1/nodes and PATCH /v1/nodes/{id}, as the
// API runs them: parse_json (depth 64), then parse_node_create, and
// check_patch + apply_mutable_document for a merge patch. No crash; every
// error names a JSON pointer; an accepted name is a valid node name.
#include <cstdint>
#include <string_view>

#include "common/json_text.h"
#include "controller/api/node_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::Result<nlohmann::json> body = kiln::parse_json(text);
  if (!body) return 0;
  std::vector<kiln::FieldError> errors;
  kiln::api::NodeDraft draft = kiln::api::parse_node_create(*body, errors);
  // name is optional (a node may be known by its id only).
  if (errors.empty() && !draft.node.name.empty() && !kiln::api::valid_node_name(draft.node.name)) __builtin_trap();
  for (const kiln::FieldError& e : errors)
    if (!e.field.empty() && e.field[0] != '/') __builtin_trap();
  if (!body->is_object()) return 0;
  kiln::api::PasswordChange pw;
  std::vector<kiln::FieldError> patch_errors = kiln::api::check_patch(*body, pw);
  if (!patch_errors.empty()) return 0;
  kiln::Node node = draft.node;
  nlohmann::json doc = kiln::api::mutable_document(node);
  doc.merge_patch(*body);
  std::vector<kiln::FieldError> apply_errors;
  kiln::api::apply_mutable_document(doc, node, apply_errors);
  (void)kiln::dump_json(kiln::api::mutable_document(node));
  return 0;
}
