#pragma once
// The body of POST /v1/images, read and checked (pure; fuzzed by
// fuzz/api_bodies). What needs the host (is a local file inside the image
// directories, and how big; may a URL's literal address be fetched) is asked
// through ImageSourceChecks, which the route builds from its ImageDirs and
// ImageFetcher (images_routes.cc) and a test or fuzzer from fakes.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/http/url.h"
#include "common/result.h"
#include "controller/model/image.h"

namespace kiln::api {

// The `source` of an image whose bytes are uploaded (PUT .../content).
inline constexpr std::string_view kUploadSource = "upload";

bool is_url(std::string_view s);

struct ImageSourceChecks {
  // The size of a local file inside the image directories, or why it is not
  // usable (a message that describes nothing outside them). Empty: none is.
  std::function<Result<int64_t>(const std::string& path)> file_size;
  // Whether a URL source may be fetched, as far as its literal address says
  // (kInvalidArgument naming /source when not). Empty: downloads are off.
  std::function<Status(const http::Url& url)> url_allowed;
  bool can_upload = false;  // an image directory to upload into
  bool can_convert = false;  // an ImageConverter for qcow2 sources
  uint64_t upload_max = 0;  // --image-upload-max
};

// Parses and checks a registration. kInvalidArgument listing every bad field
// by JSON pointer (/name, /kind, /format, /sha256, /size, /source, /kernel,
// /kernel_args, unknown fields). The image has no id or timestamps yet; its
// state is ready (local file), converting (local qcow2, which the route
// still inspects), downloading (URL) or awaiting_upload; a raw image's
// virtual_size is its size.
Result<Image> parse_image(const nlohmann::json& body, const ImageSourceChecks& checks);

}  // namespace kiln::api
