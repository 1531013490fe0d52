#pragma once
// Ownership: who held which node when, read from the event log, and the
// quota held to it at every claim.
//
// node.claimed and node.released are written in the transaction that sets
// and clears a node's tenant, so the log says exactly which tenant held a
// node at each seq. From that:
//   * quota-never-exceeded, at every event and not only at samples: after
//     each claim, the nodes the tenant holds are at most its quota (every
//     node the soak lets tenants claim is of the one profile and kind the
//     quotas name);
//   * a node is never claimed while another allocation holds it, and is
//     released by the allocation that holds it (tenant-isolation);
//   * owner_at() tells the isolation probe whose an event was when it was
//     written, so a tenant's own feed can be held to "only its own".
//
// An allocation's tenant is read from its name: the soak names each
// allocation "<tenant>-<n>" and creates them with the tenant's own token.
//
// Not thread-safe: the soak's driving thread.

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench/soak/event_feed.h"
#include "bench/soak/findings.h"

namespace kiln::soak {

class Ownership {
 public:
  // `quotas`: tenant -> the most nodes it may hold.
  Ownership(Findings& findings, std::map<std::string, int64_t> quotas);

  void on_event(const Event& e);

  // The tenant that held `node` when event `seq` was written; "" for none.
  // Only for seq <= processed_seq().
  std::string owner_at(const std::string& node, int64_t seq) const;
  // The tenant that holds `node` now (as of processed_seq()); "" for none.
  std::string holder(const std::string& node) const;
  // The tenant whose allocation `id` is; "" when the log has not named it.
  std::string allocation_tenant(const std::string& id) const;
  // The nodes each tenant holds now.
  std::map<std::string, std::vector<std::string>> held() const;
  int64_t processed_seq() const { return processed_; }
  // The most nodes each tenant ever held at once.
  const std::map<std::string, int64_t>& peaks() const { return peaks_; }

  // The tenant part of an allocation name the soak made ("acme-12" -> "acme").
  static std::string tenant_of_name(const std::string& name);

 private:
  struct Interval {
    std::string tenant;
    std::string allocation;
    int64_t from_seq = 0;
    int64_t to_seq = INT64_MAX;  // released at this seq (inclusive); max while held
  };

  void on_claimed(const Event& e, const std::string& tenant);
  void on_released(const Event& e, const std::string& tenant);

  Findings& findings_;
  std::map<std::string, int64_t> quotas_;
  std::unordered_map<std::string, std::vector<Interval>> intervals_;  // node -> its holders in order
  std::unordered_map<std::string, std::string> allocation_tenant_;
  std::map<std::string, int64_t> count_;
  std::map<std::string, int64_t> peaks_;
  int64_t processed_ = 0;
};

}  // namespace kiln::soak
