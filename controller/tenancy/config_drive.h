#pragma once
// The config drive: what a bare-metal node's tenant OS reads at first boot
// to let the tenant in (ARCHITECTURE.md "Tenancy, allocations, hand-off,
// usage", Hand-off). The agent writes it to a small partition at the end of
// the deployed disk (agent/deploy/config_drive_partition.h); a cloud image
// with cloud-init finds it by its label, as cloud-init's NoCloud datasource
// does (an ISO 9660 filesystem labelled "cidata" holding these files):
//
//   meta-data       instance-id and local-hostname (YAML)
//   user-data       "#cloud-config" with ssh_authorized_keys and the
//                   deploy's phone_home (below), or, when the
//                   tenant gave user data of their own, a MIME multipart
//                   message: the tenant's part first, then ours (below)
//   network-config  version 2: DHCP (v4) on the node's ports (below)
//
// Combining user data. cloud-init reads a multipart/mixed user-data and
// handles each part by its type; a text/plain part is typed by its first
// line ("#cloud-config", "#!", "#include", ...), so the tenant's text goes
// in as it is, whatever it is; a tenant's own MIME message goes in as a
// nested part. cloud-config parts are merged in order, and by default a
// later part's list replaces an earlier one's: our part comes last and
// says `merge_how: list(append)+dict(no_replace,recurse_list)+str()`, so the
// allocation's keys are added to any the tenant listed and no other key of
// the tenant's is replaced (cloud-init's "merging user data" reference).
//
// phone_home. cloud-init's phone_home module (cc_phone_home.py, once per
// instance, in the final stage) POSTs form fields to `url`: each key of
// `post` with its value, "N/A" for one it does not have; pub_key_* are the
// whole /etc/ssh/ssh_host_*_key.pub files. It tries `tries` times, 3 s
// apart, on any error. The URL is the deploy's one-time phone-home URL
// (AgentAuthority::phone_home_token), which kilnd's POST
// /v1/phone-home/{token} turns into the node's ssh_host_keys. A tenant's own
// cloud-config that sets phone_home keeps theirs (no_replace): kilnd then
// learns no host keys, and the tenant's ssh_config pins none.
//
// network-config names each of the node's ports (the NICs kilnd knows, by
// MAC): DHCP on each, required for "online". Matching by MAC says exactly
// which NICs are the provisioning network; a name glob over every NIC had
// to be `optional` (a GPU node has NICs nobody cabled), and with every link
// optional systemd-networkd-wait-online (systemd 252, Debian 12) waits its
// whole 2 minutes at each boot. cloud-init hands the config to netplan as it
// is (Ubuntu's and Debian 12's cloud images, images/build-cloud-image);
// cloud-init's own eni, networkd and sysconfig renderers would also name
// the interface after the config's key, so on such an image only its own
// network setup applies. A node with no ports (none known) gets DHCP on
// every NIC named e*, optional.
//
// Pure functions, any thread. No secret travels here: keys are public and
// user data is the tenant's own.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace kiln {

// The volume label cloud-init's NoCloud looks for.
inline constexpr std::string_view kConfigDriveLabel = "cidata";
// The largest drive kilnd sends to an agent (base64 in a command's
// arguments): what user data may make it. A drive without user data is ~56 KiB.
inline constexpr std::size_t kConfigDriveMaxBytes = 2 * 1024 * 1024;

// What the tenant gave their allocation for the OS to use.
struct TenantAccess {
  std::vector<std::string> ssh_keys;  // OpenSSH public keys (checked by the allocation API)
  std::string user_data;              // the tenant's own, may be empty
};

struct ConfigDriveInput {
  std::string instance_id;  // config_drive_instance_id()
  std::string hostname;     // config_drive_hostname()
  TenantAccess access;
  std::string phone_home_url;  // "" writes no phone_home block
  std::vector<std::string> macs;  // the node's ports (lowercase, colon-separated)
  int64_t time = 0;         // unix seconds: the filesystem's dates
};

// "<node id>" without an allocation, "<node id>-<allocation id>" with one
// (cloud-init names a directory after it, so no "/"):
// a new allocation of the same node is a new instance to cloud-init (its
// per-instance modules, key installation among them, run again).
std::string config_drive_instance_id(const std::string& node_id, const std::string& allocation_id);
// The node's name when it is a valid hostname label sequence (RFC 1123:
// letters, digits, '-' and '.', 1-63 per label, at most 253), else
// "kiln-<first 8 of the id>".
std::string config_drive_hostname(const std::string& node_name, const std::string& node_id);

std::string config_drive_meta_data(const ConfigDriveInput& in);
// The `phone_home` block (above) for `url`; "" for an empty url.
std::string phone_home_cloud_config(const std::string& url);
// `ours` (a "#cloud-config" document) alone when the tenant gave no user
// data, else the multipart message above: the tenant's part, then ours with
// the merge_how that appends to the tenant's lists. The config drive and a
// virtual node's NoCloud seed (controller/hosts/nocloud.h) both use it.
std::string combined_user_data(const std::string& tenant_user_data, const std::string& ours);
std::string config_drive_user_data(const TenantAccess& access, const std::string& phone_home_url = "");
// A MAC that is not 6 colon-separated hex octets is left out (never written).
std::string config_drive_network_config(const std::vector<std::string>& macs = {});

// The ISO 9660 image (labelled kConfigDriveLabel) with the three files.
// kInvalidArgument naming "user_data" when the image would exceed
// kConfigDriveMaxBytes.
Result<std::string> build_config_drive(const ConfigDriveInput& in);

}  // namespace kiln
