#include "controller/api/node_input.h"

#include <cctype>
#include <set>

#include "common/http/url.h"
#include "common/ids.h"
#include "controller/api/json_input.h"

namespace kiln::api {
namespace {

constexpr std::size_t kMaxLen = 255;

const std::set<std::string, std::less<>> kReadOnlyFields = {
    "id", "kind", "ports", "provision_state", "target_provision_state", "provision_step",
    "power_state", "target_power_state", "maintenance", "maintenance_reason", "fault",
    "last_error", "allocation", "inventory", "last_validation", "reservation", "created_at",
    "updated_at", "version", "host", "deadline_at"};
const std::set<std::string, std::less<>> kMutableFields = {"name", "bmc", "boot_mode", "profile",
                                                           "traits", "tenant"};
const std::set<std::string, std::less<>> kBmcFields = {
    "driver", "address", "username", "password", "system_id", "domain", "verify_tls", "options"};

bool check_len(ObjectReader& r, std::string_view key, const std::string& v, bool allow_empty) {
  if (v.size() > kMaxLen) {
    r.error(key, "must be at most 255 characters");
    return false;
  }
  if (!allow_empty && v.empty()) {
    r.error(key, "must not be empty");
    return false;
  }
  return true;
}

void parse_bmc(const nlohmann::json& value, std::string pointer, BmcInfo& bmc,
               PasswordChange& password, std::vector<FieldError>& errors) {
  ObjectReader r(value, std::move(pointer), errors);
  if (auto v = r.string("driver", true); v && check_len(r, "driver", *v, false)) bmc.driver = *v;
  if (auto v = r.string("address", true); v && check_len(r, "address", *v, false)) {
    // Never echoed: the value holds a secret. Credentials go in username/password.
    if (http::url_has_userinfo(*v))
      r.error("address", "must not hold credentials (user:password@): give them in username and password");
    else bmc.address = *v;
  }
  bmc.username.clear();
  if (auto v = r.string("username"); v && check_len(r, "username", *v, true)) bmc.username = *v;
  if (auto v = r.string("password")) {
    if (v->size() > 1024) r.error("password", "must be at most 1024 characters");
    else password.plaintext = std::move(*v);
  }
  bmc.system_id.clear();
  if (auto v = r.string("system_id"); v && check_len(r, "system_id", *v, true)) bmc.system_id = *v;
  bmc.domain.clear();
  if (auto v = r.string("domain"); v && check_len(r, "domain", *v, true)) bmc.domain = *v;
  bmc.verify_tls = r.boolean("verify_tls").value_or(true);
  const nlohmann::json* options = r.object("options");
  bmc.options = options ? *options : nlohmann::json::object();
  r.finish();
}

// Fields shared by create and PATCH (the mutable ones).
void parse_mutable_fields(ObjectReader& r, Node& node, PasswordChange& password,
                          std::vector<FieldError>& errors) {
  parse_common_fields(r, node, errors);
  if (const nlohmann::json* bmc = r.object("bmc", true))
    parse_bmc(*bmc, r.pointer("bmc"), node.bmc, password, errors);
}

}  // namespace

void parse_common_fields(ObjectReader& r, Node& node, std::vector<FieldError>& errors) {
  node.name.clear();
  if (auto v = r.string("name")) {
    if (!valid_node_name(*v))
      r.error("name", "must be 1-255 characters of A-Z a-z 0-9 . _ ~ - and not a UUID");
    else node.name = *v;
  }
  node.boot_mode = "uefi";
  if (auto v = r.string("boot_mode")) {
    if (*v != "uefi" && *v != "bios") r.error("boot_mode", "must be one of uefi, bios");
    else node.boot_mode = *v;
  }
  node.profile.clear();
  if (auto v = r.string("profile"); v && check_len(r, "profile", *v, true)) node.profile = *v;
  node.traits.clear();
  if (auto v = r.string_array("traits")) {
    bool ok = true;
    for (std::size_t i = 0; i < v->size(); ++i) {
      const std::string& t = (*v)[i];
      if (t.empty() || t.size() > kMaxLen) {
        ok = false;
        errors.push_back({json_pointer_append(r.pointer("traits"), std::to_string(i)),
                          "must be 1-255 characters"});
      }
    }
    if (ok) node.traits = std::move(*v);
  }
  node.tenant.clear();
  if (auto v = r.string("tenant"); v && check_len(r, "tenant", *v, true)) node.tenant = *v;
}

bool valid_node_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxLen || is_uuid(name)) return false;
  for (char c : name) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '~' ||
              c == '-';
    if (!ok) return false;
  }
  return true;
}

std::optional<std::string> normalize_mac(std::string_view mac) {
  if (mac.size() != 17) return std::nullopt;
  char sep = mac[2];
  if (sep != ':' && sep != '-') return std::nullopt;
  std::string out;
  out.reserve(17);
  for (std::size_t i = 0; i < 17; ++i) {
    char c = mac[i];
    if (i % 3 == 2) {
      if (c != sep) return std::nullopt;
      out.push_back(':');
    } else {
      if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
  }
  return out;
}

NodeDraft parse_node_create(const nlohmann::json& body, std::vector<FieldError>& errors) {
  NodeDraft d;
  ObjectReader r(body, "", errors);
  if (!r.is_object()) return d;
  parse_mutable_fields(r, d.node, d.password, errors);
  if (auto v = r.string("kind")) {
    if (auto k = parse_node_kind(*v)) d.node.kind = *k;
    else r.error("kind", "must be one of baremetal, virtual");
  }
  if (const nlohmann::json* ports = r.array("ports")) {
    std::set<std::string> seen;
    for (std::size_t i = 0; i < ports->size(); ++i) {
      ObjectReader p((*ports)[i], json_pointer_append(r.pointer("ports"), std::to_string(i)), errors);
      PortDraft draft;
      if (auto a = p.string("address", true)) {
        if (auto mac = normalize_mac(*a)) {
          if (!seen.insert(*mac).second) p.error("address", "duplicate address in this request");
          draft.address = *mac;
        } else {
          p.error("address", "must be a MAC address (six hex pairs separated by ':' or '-')");
        }
      }
      draft.pxe = p.boolean("pxe").value_or(true);
      p.finish();
      d.ports.push_back(std::move(draft));
    }
  }
  r.finish();
  return d;
}

nlohmann::json mutable_document(const Node& node) {
  nlohmann::json bmc = {
      {"driver", node.bmc.driver},        {"address", node.bmc.address},
      {"verify_tls", node.bmc.verify_tls}, {"options", node.bmc.options},
  };
  if (!node.bmc.username.empty()) bmc["username"] = node.bmc.username;
  if (!node.bmc.system_id.empty()) bmc["system_id"] = node.bmc.system_id;
  if (!node.bmc.domain.empty()) bmc["domain"] = node.bmc.domain;
  nlohmann::json doc = {{"bmc", std::move(bmc)},
                        {"boot_mode", node.boot_mode},
                        {"traits", node.traits}};
  if (!node.name.empty()) doc["name"] = node.name;
  if (!node.profile.empty()) doc["profile"] = node.profile;
  if (!node.tenant.empty()) doc["tenant"] = node.tenant;
  return doc;
}

std::vector<FieldError> check_patch(const nlohmann::json& patch, PasswordChange& password) {
  std::vector<FieldError> errors;
  if (!patch.is_object()) {
    errors.push_back({"", "must be an object"});
    return errors;
  }
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    std::string ptr = json_pointer_append("", it.key());
    if (kReadOnlyFields.contains(it.key())) {
      errors.push_back({ptr, "read-only"});
    } else if (!kMutableFields.contains(it.key())) {
      errors.push_back({ptr, "unknown field"});
    } else if (it.key() == "bmc" && it->is_object()) {
      for (auto b = it->begin(); b != it->end(); ++b) {
        std::string bptr = json_pointer_append(ptr, b.key());
        if (b.key() == "password_set") errors.push_back({bptr, "read-only"});
        else if (!kBmcFields.contains(b.key())) errors.push_back({bptr, "unknown field"});
        else if (b.key() == "password") {
          if (b->is_null()) password.clear = true;
          else if (!b->is_string()) errors.push_back({bptr, "must be a string"});
          else if (b->get_ref<const std::string&>().size() > 1024)
            errors.push_back({bptr, "must be at most 1024 characters"});
          else password.plaintext = b->get<std::string>();
        }
      }
    }
  }
  return errors;
}

void apply_mutable_document(const nlohmann::json& doc, Node& node, std::vector<FieldError>& errors) {
  PasswordChange ignored;  // passwords are handled by check_patch
  nlohmann::json stripped = doc;
  if (stripped.contains("bmc") && stripped["bmc"].is_object()) stripped["bmc"].erase("password");
  ObjectReader rs(stripped, "", errors);
  if (!rs.is_object()) return;
  parse_mutable_fields(rs, node, ignored, errors);
  rs.finish();
}

}  // namespace kiln::api
