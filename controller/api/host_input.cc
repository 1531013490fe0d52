#include "controller/api/host_input.h"

#include <utility>
#include <vector>

#include "common/ids.h"
#include "controller/api/json_input.h"
#include "drivers/libvirt/uri.h"

namespace kiln::api {

namespace {

bool known_uri(const std::string& uri) {
  static const char* kSchemes[] = {"qemu://", "qemu:///", "qemu+ssh://", "qemu+tls://", "qemu+tcp://",
                                   "qemu+unix://", "qemu+libssh2://", "qemu+libssh://", "test://", "test:///"};
  for (const char* s : kSchemes)
    if (uri.rfind(s, 0) == 0 && uri.size() > std::string(s).size() - 1) return true;
  return false;
}

HostOptions parse_options(const nlohmann::json* o, std::string pointer, std::vector<FieldError>& errors) {
  HostOptions out;
  if (!o) return out;
  ObjectReader r(*o, std::move(pointer), errors);
  if (auto v = r.boolean("force_tcg")) out.force_tcg = *v;
  for (auto [key, field] : {std::pair<const char*, std::string*>{"network", &out.network},
                            {"bridge", &out.bridge},
                            {"pool", &out.pool},
                            {"pool_dir", &out.pool_dir},
                            {"ovmf_code", &out.ovmf_code},
                            {"ovmf_vars", &out.ovmf_vars},
                            {"console_dir", &out.console_dir}}) {
    if (auto v = r.string(key)) {
      if (v->size() > 1024) r.error(key, "must be at most 1024 characters");
      else *field = *v;
    }
  }
  if (r.has("cpu_allocation_ratio")) {
    const nlohmann::json& v = (*o)["cpu_allocation_ratio"];
    if (!v.is_number() || v.get<double>() <= 0 || v.get<double>() > 64)
      r.error("cpu_allocation_ratio", "must be a number in (0, 64]");
    else out.cpu_allocation_ratio = v.get<double>();
  }
  if (auto v = r.integer("reserved_memory_mib")) {
    if (*v < 0) r.error("reserved_memory_mib", "must be >= 0");
    else out.reserved_memory_mib = *v;
  }
  r.finish();
  return out;
}

}  // namespace

Result<HostInput> parse_host_create(const nlohmann::json& body) {
  std::vector<FieldError> errors;
  ObjectReader r(body, "", errors);
  Host h;
  if (auto v = r.string("name", true)) {
    if (v->empty() || v->size() > 255 || is_uuid(*v)) r.error("name", "must be 1-255 characters and not a UUID");
    else h.name = *v;
  }
  if (auto v = r.string("uri", true)) {
    // Checked first, and never echoed: the value holds a secret.
    if (libvirt::uri_has_password(*v))
      r.error("uri", "must not hold a password (user:password@): give it in the password field");
    else if (v->size() > 2048)
      r.error("uri", "must be at most 2048 characters");
    else if (!known_uri(*v))
      r.error("uri", "must be a libvirt URI: qemu:///system, qemu+ssh://host/system, qemu+tls://host/system, "
                     "or test:///default");
    else h.uri = *v;
  }
  if (auto v = r.string("username")) {
    if (v->size() > 255) r.error("username", "must be at most 255 characters");
    else h.username = *v;
  }
  std::optional<std::string> password = r.string("password");
  if (password && password->size() > 1024) r.error("password", "must be at most 1024 characters");
  const nlohmann::json* options = r.object("options");
  h.options = parse_options(options, r.pointer("options"), errors);
  r.finish();
  if (!errors.empty()) return invalid_fields(std::move(errors));
  return HostInput{std::move(h), std::move(password)};
}

}  // namespace kiln::api
