#pragma once
// Whether a caller may deploy the image a request names: the one rule behind
// a node's deploy verb (the conductor) and an allocation's image (the API).
//
//   - an image the caller cannot see is as unknown as a missing one: a tenant
//     sees public images only, and a private image's name is not the tenant's
//     to learn;
//   - only an `os` image is deployed (an `agent` or `ramdisk` image boots the
//     deploy ramdisk);
//   - and only once it is ready (image_deployable, image.h: 409 otherwise).
//
// Pure: no I/O; the caller looks the image up.

#include <optional>
#include <string>
#include <string_view>

#include "controller/model/image.h"

namespace kiln {

// Why `ref` cannot be deployed by this caller, as the message for the
// request's /image field (a 400), or nullopt when it can be, subject to
// image_deployable. `found` is the image `ref` named, null when there is none;
// `sees_private` is whether the caller may use private images (staff).
std::optional<std::string> image_use_refusal(const Image* found, std::string_view ref, bool sees_private);

}  // namespace kiln
