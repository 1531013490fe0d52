#include "controller/api/merge_patch.h"

namespace kiln::api {

void apply_merge_patch(nlohmann::json& target, const nlohmann::json& patch) {
  if (!patch.is_object()) {
    target = patch;
    return;
  }
  if (!target.is_object()) target = nlohmann::json::object();
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    if (it->is_null()) {
      target.erase(it.key());
    } else {
      apply_merge_patch(target[it.key()], *it);
    }
  }
}

}  // namespace kiln::api
