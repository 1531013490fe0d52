// The API's body readers besides nodes and agents: POST /v1/ports, /v1/tokens,
// /v1/hosts, /v1/images, a profile document and a tenant's create and patch
// bodies (controller/api/{port,token,host,image,profile,tenant}_input.h). The
// first byte picks the reader, the rest is the body, parsed as kilnd parses
// it. What a reader accepts must hold its promises: a normalised MAC, a token
// whose tenant goes with its role, a host URI without a password, a profile
// with a name, a tenant with a valid name and no two quotas for one profile
// and kind, an image whose status follows from its source (the image
// directories and the URL policy are fakes here: image_input.h asks them).
#include <cstdint>
#include <set>
#include <utility>
#include <string>
#include <string_view>

#include "common/json_text.h"
#include "controller/api/allocation_input.h"
#include "controller/api/host_input.h"
#include "controller/api/image_input.h"
#include "controller/api/port_input.h"
#include "controller/api/profile_input.h"
#include "controller/api/tenant_input.h"
#include "controller/api/token_input.h"
#include "controller/tenancy/ssh_key.h"
#include "drivers/libvirt/uri.h"

namespace {
bool unique_quotas(const kiln::Tenant& t) {
  std::set<std::pair<std::string, kiln::NodeKind>> seen;
  for (const kiln::TenantQuota& q : t.quotas)
    if (q.max_nodes < 0 || !seen.insert({q.profile, q.kind}).second) return false;
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t which = data[0] % 7;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  kiln::Result<nlohmann::json> body = kiln::parse_json(text);
  if (!body) return 0;
  using namespace kiln::api;
  switch (which) {
    case 0: {
      kiln::Result<PortInput> p = parse_port_create(*body);
      if (p && p->mac.size() != 17) __builtin_trap();
      if (!p && p.error().fields.empty()) __builtin_trap();  // a refusal names its field
      break;
    }
    case 1: {
      kiln::Result<TokenInput> t = parse_token_create(*body);
      if (t && (t->name.empty() || t->name.size() > 255)) __builtin_trap();
      if (t && (t->role == Role::kTenant) == t->tenant.empty()) __builtin_trap();
      if (!t && t.error().fields.empty()) __builtin_trap();
      break;
    }
    case 2: {
      kiln::Result<HostInput> h = parse_host_create(*body);
      if (h && (kiln::libvirt::uri_has_password(h->host.uri) || h->host.name.empty())) __builtin_trap();
      if (!h && h.error().fields.empty()) __builtin_trap();
      break;
    }
    case 3: {
      ImageSourceChecks checks;
      checks.file_size = [](const std::string& path) -> kiln::Result<int64_t> {
        if (path.rfind("img/", 0) != 0) return kiln::Error(kiln::Code::kInvalidArgument, "is not a file in an image directory");
        return static_cast<int64_t>(path.size()) * 1000;
      };
      checks.url_allowed = [](const kiln::http::Url& url) -> kiln::Status {
        if (url.host.rfind("127.", 0) == 0) return kiln::Error::invalid("/source", "loopback");
        return kiln::ok_status();
      };
      checks.can_upload = data[0] & 0x80;
      checks.upload_max = 1 << 20;
      checks.can_convert = data[0] & 0x40;
      kiln::Result<kiln::Image> img = parse_image(*body, checks);
      if (!img) {
        if (img.error().fields.empty()) __builtin_trap();
        break;
      }
      if (img->size <= 0 || img->sha256.size() != 64) __builtin_trap();
      for (char c : img->sha256)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) __builtin_trap();
      if (img->kind == "ramdisk" && img->kernel.empty()) __builtin_trap();
      if (img->source == kUploadSource && (img->state != kiln::kImageAwaitingUpload || !checks.can_upload))
        __builtin_trap();
      if (img->state == kiln::kImageReady && img->source.rfind("img/", 0) != 0) __builtin_trap();
      if (img->format == "qcow2" && (img->state == kiln::kImageReady || img->kind != "os" || !checks.can_convert))
        __builtin_trap();
      break;
    }
    case 5: {
      kiln::Result<kiln::Tenant> t = parse_tenant_create(*body);
      if (!t) {
        if (t.error().fields.empty()) __builtin_trap();  // a refusal names the field
        break;
      }
      if (t->name.empty() || t->name.size() > 63 || !unique_quotas(*t)) __builtin_trap();
      kiln::Result<kiln::Tenant> patched = apply_tenant_patch(*t, *body);
      if (patched && (patched->name != t->name || !unique_quotas(*patched))) __builtin_trap();
      break;
    }
    case 6: {
      // Allocation requests: an accepted one has checked keys and bounds.
      kiln::Result<AllocationRequest> a = parse_allocation_create(*body);
      if (!a) {
        if (a.error().fields.empty()) __builtin_trap();
      } else {
        const kiln::Allocation& x = a->allocation;
        if (x.count < 1 || x.count > kMaxAllocationCount || x.ssh_keys.empty()) __builtin_trap();
        for (const std::string& k : x.ssh_keys)
          if (!kiln::check_ssh_public_key(k, "/ssh_keys/0")) __builtin_trap();
        if (x.lease_seconds != 0 && (x.lease_seconds < kMinLeaseSeconds || x.lease_seconds > kMaxLeaseSeconds))
          __builtin_trap();
      }
      kiln::Result<int64_t> lease = parse_lease(*body);
      if (lease && (*lease < kMinLeaseSeconds || *lease > kMaxLeaseSeconds)) __builtin_trap();
      if (!lease && lease.error().fields.empty()) __builtin_trap();
      break;
    }
    default: {
      kiln::Status s = check_profile_doc(*body);
      if (s && !(body->is_object() && body->contains("name") && (*body)["name"].is_string())) __builtin_trap();
      break;
    }
  }
  return 0;
}
