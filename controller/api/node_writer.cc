#include "controller/api/node_writer.h"

#include <cstdio>

#include "common/clock.h"
#include "common/json_text.h"

namespace kiln::api {
namespace {

// Writes `"key":` with a leading comma after the first member.
class ObjectWriter {
 public:
  ObjectWriter(std::string& out, const std::set<std::string>& fields) : out_(out), fields_(fields) {
    out_.push_back('{');
  }
  void close() { out_.push_back('}'); }

  // True when `key` is wanted; then its name is already written.
  bool key(const char* key) {
    if (!fields_.empty() && std::string_view(key) != "id" && !fields_.contains(key)) return false;
    if (!first_) out_.push_back(',');
    first_ = false;
    append_json_string(out_, key);
    out_.push_back(':');
    return true;
  }
  void str(const char* k, std::string_view v) {
    if (key(k)) append_json_string(out_, v);
  }
  void str_or_null(const char* k, const std::string& v) {
    if (!key(k)) return;
    if (v.empty()) out_.append("null");
    else append_json_string(out_, v);
  }
  template <typename T>
  void opt_state(const char* k, const std::optional<T>& v) {
    if (!key(k)) return;
    if (v) append_json_string(out_, to_string(*v));
    else out_.append("null");
  }
  void boolean(const char* k, bool v) {
    if (key(k)) out_.append(v ? "true" : "false");
  }
  void integer(const char* k, int64_t v) {
    if (key(k)) out_.append(std::to_string(v));
  }
  void raw_json(const char* k, const nlohmann::json& v) {
    if (key(k)) out_.append(dump_json(v));
  }
  void strings(const char* k, const std::vector<std::string>& v) {
    if (!key(k)) return;
    out_.push_back('[');
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out_.push_back(',');
      append_json_string(out_, v[i]);
    }
    out_.push_back(']');
  }

 private:
  std::string& out_;
  const std::set<std::string>& fields_;
  bool first_ = true;
};

const std::set<std::string> kAll;

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  // Stored strings came from parsed JSON and are valid UTF-8; a row written
  // by an older kilnd may not be, and must not produce invalid JSON.
  if (!is_valid_utf8(s)) {
    append_json_string(out, to_valid_utf8(s));
    return;
  }
  out.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"': out.append("\\\""); break;
      case '\\': out.append("\\\\"); break;
      case '\b': out.append("\\b"); break;
      case '\f': out.append("\\f"); break;
      case '\n': out.append("\\n"); break;
      case '\r': out.append("\\r"); break;
      case '\t': out.append("\\t"); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out.append(buf);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

void append_node_json(std::string& out, const Node& node, Role role, NodeDetail detail,
                      const std::set<std::string>& fields, const RingView* ring) {
  ObjectWriter w(out, fields);
  w.str("id", node.id);
  w.str_or_null("name", node.name);
  w.str("kind", to_string(node.kind));
  if (w.key("ports")) {
    out.push_back('[');
    for (std::size_t i = 0; i < node.ports.size(); ++i) {
      if (i > 0) out.push_back(',');
      ObjectWriter p(out, kAll);
      p.str("id", node.ports[i].id);
      p.str("address", node.ports[i].address);
      p.boolean("pxe", node.ports[i].pxe);
      p.close();
    }
    out.push_back(']');
  }
  w.str("boot_mode", node.boot_mode);
  w.str_or_null("profile", node.profile);
  w.strings("traits", node.traits);
  w.str("provision_state", to_string(node.provision_state));
  w.opt_state("target_provision_state", node.target_provision_state);
  w.str("power_state", to_string(node.power_state));
  w.opt_state("target_power_state", node.target_power_state);
  w.boolean("maintenance", node.maintenance);
  w.str_or_null("tenant", node.tenant);
  w.str_or_null("allocation", node.allocation);
  w.str_or_null("last_validation", node.last_validation);
  w.strings("addresses", node.addresses);
  w.str_or_null("address_source", to_string(node.address_source));
  w.str_or_null("ssh", node.ssh);
  if (w.key("ssh_host_keys")) {
    out.push_back('[');
    for (std::size_t i = 0; i < node.ssh_host_keys.size(); ++i) {
      if (i > 0) out.push_back(',');
      ObjectWriter k(out, kAll);
      k.str("type", node.ssh_host_keys[i].type);
      k.str("key", node.ssh_host_keys[i].key);
      k.str("sha256", node.ssh_host_keys[i].sha256);
      k.close();
    }
    out.push_back(']');
  }
  w.str("created_at", format_rfc3339(node.created_at));
  w.str("updated_at", format_rfc3339(node.updated_at));
  w.integer("version", node.version);
  if (role != Role::kTenant) {
    if (w.key("bmc")) {
      ObjectWriter b(out, kAll);
      b.str("driver", node.bmc.driver);
      b.str("address", node.bmc.address);
      b.str_or_null("username", node.bmc.username);
      b.boolean("password_set", !node.bmc.password_sealed.empty());
      b.str_or_null("system_id", node.bmc.system_id);
      b.str_or_null("domain", node.bmc.domain);
      b.boolean("verify_tls", node.bmc.verify_tls);
      if (node.bmc.options.is_null()) {
        if (b.key("options")) out.append("{}");
      } else {
        b.raw_json("options", node.bmc.options);
      }
      b.close();
    }
    w.str_or_null("provision_step", node.provision_step);
    w.str_or_null("maintenance_reason", node.maintenance_reason);
    w.str_or_null("fault", node.fault);
    w.str_or_null("last_error", node.last_error);
    w.str_or_null("reservation", node.reservation);
    std::optional<std::string> owner = ring != nullptr ? ring->owner_of(ownership_key(node)) : std::nullopt;
    w.str_or_null("conductor", owner ? *owner : std::string());
  }
  if (detail == NodeDetail::kFull) w.raw_json("inventory", node.inventory);
  w.close();
}

}  // namespace kiln::api
