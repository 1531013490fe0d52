#include "controller/api/image_input.h"

#include <cctype>
#include <optional>
#include <vector>

#include "common/ids.h"
#include "controller/api/json_input.h"

namespace kiln::api {

namespace {

bool is_hex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

bool is_good_name(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
  return s != "." && s != "..";
}

// A POSIX portable login name, as useradd takes it.
bool is_login_name(std::string_view s) {
  if (s.empty() || s.size() > 32) return false;
  if (!std::islower(static_cast<unsigned char>(s[0])) && s[0] != '_') return false;
  for (char c : s)
    if (!std::islower(static_cast<unsigned char>(c)) && !std::isdigit(static_cast<unsigned char>(c)) && c != '_' &&
        c != '-')
      return false;
  return true;
}

Result<int64_t> file_size(const ImageSourceChecks& checks, const std::string& path) {
  if (!checks.file_size) return Error(Code::kInvalidArgument, "this kilnd has no image directory");
  return checks.file_size(path);
}

}  // namespace

bool is_url(std::string_view s) { return s.starts_with("http://") || s.starts_with("https://"); }

// Parses and checks a registration; errors name their field.
Result<Image> parse_image(const nlohmann::json& body, const ImageSourceChecks& checks) {
  std::vector<FieldError> errors;
  ObjectReader r(body, "", errors);
  std::optional<std::string> name = r.string("name", true);
  std::optional<std::string> kind = r.string("kind", true);
  std::optional<std::string> format = r.string("format", true);
  std::optional<std::string> sha = r.string("sha256", true);
  std::optional<int64_t> size = r.integer("size");
  if (body.is_object() && (!body.contains("size") || body["size"].is_null()))
    errors.push_back({"/size", "is required"});
  std::optional<std::string> source = r.string("source", true);
  std::optional<std::string> kernel = r.string("kernel");
  std::optional<std::string> kernel_args = r.string("kernel_args");
  std::optional<bool> is_public = r.boolean("public");
  std::optional<std::string> ssh_user = r.string("ssh_user");
  std::optional<bool> os_agent = r.boolean("os_agent");
  r.finish();

  if (name && !is_good_name(*name))
    errors.push_back({"/name", "must be 1-128 characters of letters, digits, '-', '_' and '.'"});
  if (name && is_uuid(*name)) errors.push_back({"/name", "must not look like a UUID"});
  if (kind && *kind != "os" && *kind != "ramdisk") errors.push_back({"/kind", "must be os or ramdisk"});
  if (format && *format != "raw" && *format != "raw+gzip" && *format != "raw+zstd" && *format != "qcow2")
    errors.push_back({"/format", "must be raw, raw+gzip, raw+zstd or qcow2"});
  // A qcow2 is converted for the agent (boot/image_converter.h); iPXE boots
  // a ramdisk's bytes as they are.
  if (format && *format == "qcow2" && kind && *kind == "ramdisk")
    errors.push_back({"/format", "a ramdisk image is not a qcow2"});
  if (format && *format == "qcow2" && !checks.can_convert)
    errors.push_back({"/format", "this kilnd converts no qcow2 images (no image directory)"});
  if (sha && !is_hex64(*sha)) errors.push_back({"/sha256", "must be 64 hexadecimal characters"});
  if (size && *size <= 0) errors.push_back({"/size", "must be a positive number of bytes"});
  const bool ramdisk = kind && *kind == "ramdisk";
  if (kind && !ramdisk) {
    if (kernel) errors.push_back({"/kernel", "only ramdisk images have a kernel"});
    if (kernel_args) errors.push_back({"/kernel_args", "only ramdisk images have kernel arguments"});
  }
  if (ramdisk && !kernel) errors.push_back({"/kernel", "is required for a ramdisk image"});
  // Tenants deploy os images; the deploy ramdisk is the provider's.
  if (ramdisk && is_public && *is_public) errors.push_back({"/public", "only os images can be public"});
  if (ramdisk && ssh_user) errors.push_back({"/ssh_user", "only os images have a login user"});
  if (ramdisk && os_agent) errors.push_back({"/os_agent", "only os images run an OS"});
  if (ssh_user && !is_login_name(*ssh_user))
    errors.push_back({"/ssh_user", "must be a login name: 1-32 of a-z, 0-9, '_' and '-', not starting with a digit or '-'"});
  if (ramdisk && kernel) {
    Result<int64_t> k = file_size(checks, *kernel);
    if (!k) errors.push_back({"/kernel", k.error().message});
  }
  if (source) {
    if (*source == kUploadSource) {
      if (!checks.can_upload) errors.push_back({"/source", "this kilnd has no image directory to upload into"});
      else if (size && *size > 0 && static_cast<uint64_t>(*size) > checks.upload_max)
        errors.push_back({"/size", "is more than this kilnd accepts in an upload (--image-upload-max " +
                                       std::to_string(checks.upload_max) + ")"});
    } else if (is_url(*source)) {
      Result<http::Url> url = http::Url::parse(*source);
      if (!url) errors.push_back({"/source", "is not a valid http(s) URL"});
      else if (!checks.url_allowed) errors.push_back({"/source", "downloads are not enabled in this kilnd; give a local path"});
      else if (Status allowed = checks.url_allowed(*url); !allowed)
        errors.push_back({"/source", allowed.error().fields.empty() ? allowed.error().message
                                                                      : allowed.error().fields.front().message});
    } else {
      Result<int64_t> s = file_size(checks, *source);
      if (!s) {
        errors.push_back({"/source", s.error().message + " (or give an http(s) URL)"});
      } else if (size && *size > 0 && *s != *size) {
        errors.push_back({"/size", "does not match the source file, which is " + std::to_string(*s) + " bytes"});
      }
    }
  }
  if (!errors.empty()) return invalid_fields(std::move(errors));

  Image img;
  img.name = *name;
  img.kind = *kind;
  img.format = *format;
  img.sha256 = *sha;
  for (char& c : img.sha256) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  img.size = *size;
  img.source = *source;
  img.kernel = kernel.value_or("");
  img.kernel_args = kernel_args.value_or("");
  img.is_public = is_public.value_or(false);
  if (!ramdisk) img.ssh_user = ssh_user.value_or("root");
  else img.ssh_user.clear();
  // Whether the deploy waits for the OS's kiln-agent or for cloud-init's
  // phone_home (model/image.h): the format's default unless said.
  img.os_agent = !ramdisk && os_agent.value_or(default_os_agent(img.format));
  // A raw image describes a disk of its own size; a compressed one's is
  // not known without reading it all (the agent stops at the disk's end);
  // a qcow2's is read by the route's inspection or the conversion.
  if (img.format == "raw") img.virtual_size = img.size;
  if (img.source == kUploadSource) {
    img.state = std::string(kImageAwaitingUpload);
  } else if (is_url(img.source)) {
    img.state = std::string(kImageDownloading);
  } else {
    img.state = std::string(img.format == "qcow2" ? kImageConverting : kImageReady);
    img.path = img.source;
  }
  return img;
}

}  // namespace kiln::api
