#include "controller/model/image.h"

namespace kiln {

ServedFile served_file(const Image& image) {
  if (image.format == "qcow2") {
    const char* format = image.served_path.ends_with(kLegacyConvertedSuffix) ? "raw+zstd" : "raw+sparse";
    return {format, image.served_sha256, image.served_size, image.served_path};
  }
  return {image.format.empty() ? std::string("raw") : image.format, image.sha256, image.size, image.path};
}

Status image_deployable(const Image& image) {
  // An empty state is an image record built in code (tests, older callers)
  // that never went through registration: treated as ready, as before.
  if (image.state.empty() || image.state == kImageReady) return ok_status();
  std::string why = "image " + image.name + " is " + image.state;
  if (!image.last_error.empty()) why += ": " + image.last_error;
  std::string field = "is " + image.state + ", not ready";
  return Error(Code::kConflict, why, {FieldError{"/image", field}});
}

std::string_view legacy_image_status(std::string_view state) {
  if (state == kImageFailed) return "error";
  return state;
}

}  // namespace kiln
