#include "controller/model/image_use.h"

namespace kiln {

std::optional<std::string> image_use_refusal(const Image* found, std::string_view ref, bool sees_private) {
  if (found == nullptr || (!sees_private && !found->is_public)) return "no such image: " + std::string(ref);
  if (found->kind != "os")
    return "must be an os image; " + std::string(ref) + " is a " + found->kind + " image";
  return std::nullopt;
}

}  // namespace kiln
