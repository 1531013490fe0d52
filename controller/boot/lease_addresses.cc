#include "controller/boot/lease_addresses.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>

#include "common/machine_values.h"

namespace kiln::boot {

namespace {

bool current(const DhcpLease& l, int64_t now_s) { return l.expiry == 0 || l.expiry > now_s; }

// Leases run for one length, so the later expiry was granted later; 0 (never
// expires) is latest. A tie goes to the line further down the file (the
// caller walks in file order and keeps `l` on >=).
bool granted_later(const DhcpLease& l, const DhcpLease& than) {
  if (than.expiry == 0) return l.expiry == 0;
  return l.expiry == 0 || l.expiry >= than.expiry;
}

// The canonical text of a leased address a login could use; nullopt for one
// parse_ip_address refuses (the lease parser already checked the dotted
// quad; this is the one rule every stored address goes through).
std::optional<std::string> usable(const std::string& ip) {
  Result<std::string> a = parse_ip_address(ip);
  if (!a || is_loopback_or_link_local(*a)) return std::nullopt;
  return *a;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

LeaseIndex::LeaseIndex(std::vector<DhcpLease> leases) : leases_(std::move(leases)) {
  for (std::size_t i = 0; i < leases_.size(); ++i) {
    by_mac_.emplace(leases_[i].mac, i);
    if (std::optional<std::string> a = usable(leases_[i].ip)) by_ip_.emplace(*a, i);
  }
}

std::vector<std::string> LeaseIndex::node_addresses(const std::vector<std::string>& macs,
                                                    const std::vector<std::string>& recorded, int64_t now_s) const {
  std::set<std::string> mine;  // normalized MACs
  for (const std::string& m : macs) mine.insert(lower(m));

  std::set<std::string> leased;
  for (const std::string& mac : mine) {
    auto [b, e] = by_mac_.equal_range(mac);
    const DhcpLease* newest = nullptr;
    for (auto it = b; it != e; ++it) {
      const DhcpLease& l = leases_[it->second];
      if (!current(l, now_s)) continue;
      if (newest == nullptr || granted_later(l, *newest)) newest = &l;
    }
    if (newest == nullptr) continue;
    if (std::optional<std::string> a = usable(newest->ip)) leased.insert(*a);
  }

  std::set<std::string> kept;
  for (const std::string& r : recorded) {
    std::optional<std::string> a = usable(r);
    if (!a || leased.count(*a)) continue;
    // Any line for this address that is not a current lease of ours: the
    // file knows it and does not give it to this node now.
    if (by_ip_.count(*a) == 0) kept.insert(*a);
  }

  std::vector<std::string> out;
  for (const std::string& a : leased)
    if (out.size() < kMaxLeasedAddresses) out.push_back(a);
  for (const std::string& a : kept)
    if (out.size() < kMaxLeasedAddresses) out.push_back(a);
  return out;
}

}  // namespace kiln::boot
