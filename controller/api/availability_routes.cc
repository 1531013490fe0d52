// GET /v1/availability: what a tenant can get now, what it costs, and how it
// measured.
//
// For every profile and both kinds (baremetal, virtual):
//   free              nodes available, not in maintenance, without a fault, not
//                     reserved (NodeStore::count_free_nodes); for virtual, plus
//                     the guests of the profile's flavour the hosts have room
//                     for (an allocation makes them on demand)
//   price_per_second  the profile's price.baremetal_per_second / virtual_per_second
//   measured          per headline check (nccl_allreduce bus bandwidth,
//                     hbm_bandwidth, pcie_bandwidth, jitter p99.9, nvme_read):
//                     the median of that check's value over the newest
//                     `window` passing reports of nodes of that profile and
//                     kind (?window=, default 20), with the sample count
// and, per profile, the virtualization tax of every headline check measured
// on both kinds: (baremetal - virtual) / baremetal for throughputs and
// (virtual - baremetal) / baremetal for jitter, so a positive tax always
// means the virtual machine does worse.

#include <algorithm>

#include "controller/api/reply.h"
#include "controller/api/validation_routes.h"
#include "controller/hosts/placement.h"

namespace kiln::api {
namespace {

using nlohmann::json;

const char* const kKinds[] = {"baremetal", "virtual"};
// Per host: a tiny flavour on a big host would otherwise plan thousands.
constexpr int64_t kMaxGuestsShown = 1000;

struct KindData {
  int64_t free = 0;
  std::vector<ValidationRecord> passing;
};

struct ProfileData {
  Profile profile;
  KindData kinds[2];
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

// {check: {"median", "unit", "samples"}} over the reports' passing values.
json measured_json(const std::vector<ValidationRecord>& reports, std::map<std::string, double>& medians) {
  json out = json::object();
  for (const HeadlineCheck& h : headline_checks()) {
    std::vector<double> values;
    for (const ValidationRecord& r : reports) {
      json v = headline_value(r.report, h.name);
      if (v.is_number()) values.push_back(v.get<double>());
    }
    if (values.empty()) continue;
    const double m = median(values);
    medians[h.name] = m;
    out[h.name] = {{"median", m}, {"unit", h.unit}, {"samples", values.size()}};
  }
  return out;
}

json price_of(const Profile& p, const char* kind) {
  const std::string key = std::string(kind) + "_per_second";
  if (p.doc.contains("price") && p.doc["price"].is_object() && p.doc["price"].contains(key) &&
      p.doc["price"][key].is_number())
    return p.doc["price"][key];
  return nullptr;
}

json availability_json(const std::vector<ProfileData>& data, int window) {
  json list = json::array();
  for (const ProfileData& d : data) {
    const Profile& p = d.profile;
    json kinds = json::object();
    std::map<std::string, double> med[2];
    for (int k = 0; k < 2; ++k) {
      kinds[kKinds[k]] = {{"free", d.kinds[k].free},
                          {"price_per_second", price_of(p, kKinds[k])},
                          {"measured", measured_json(d.kinds[k].passing, med[k])}};
    }
    json tax = json::object();
    for (const HeadlineCheck& h : headline_checks()) {
      auto bm = med[0].find(h.name);
      auto vm = med[1].find(h.name);
      if (bm == med[0].end() || vm == med[1].end() || bm->second == 0) continue;
      const double rel = h.higher_is_better ? (bm->second - vm->second) / bm->second
                                            : (vm->second - bm->second) / bm->second;
      tax[h.name] = {{"relative", rel}, {"baremetal", bm->second}, {"virtual", vm->second}, {"unit", h.unit}};
    }
    json gpu = p.doc.contains("gpu") && p.doc["gpu"].is_object() ? p.doc["gpu"] : json::object();
    list.push_back({{"profile", p.name},
                    {"description", p.doc.value("description", "")},
                    {"gpu", {{"model", gpu.value("model", "")}, {"count", gpu.value("count", 0)}}},
                    {"virtual_flavour", p.doc.contains("virtual") ? p.doc["virtual"] : json(nullptr)},
                    {"kinds", std::move(kinds)},
                    {"virtualization_tax", tax.empty() ? json(nullptr) : std::move(tax)}});
  }
  return {{"availability", std::move(list)}, {"window", window}};
}

// How many guests of the profile's virtual flavour the hosts still have room
// for (0 without a flavour): a virtual allocation books and makes them on
// demand (allocation_store.h). Blocking.
Result<int64_t> guests_free(NodeStore& store, const Profile& p) {
  Result<Flavour> flavour = flavour_of_profile(p.doc, p.name);
  if (!flavour) return int64_t{0};
  Result<std::vector<Host>> hosts = store.list_hosts();
  if (!hosts) return hosts.take_error();
  int64_t total = 0;
  for (const Host& h : *hosts) {
    Result<std::vector<HostReservation>> booked = store.host_reservations(h.id);
    if (!booked) return booked.take_error();
    total += guests_that_fit(h, std::move(*booked), *flavour, kMaxGuestsShown);
  }
  return total;
}

// Blocking: every read the page needs, on the BlockingPool.
Result<std::vector<ProfileData>> collect(NodeStore& store, const std::optional<std::string>& only, int window) {
  Result<std::vector<Profile>> profiles = store.list_profiles();
  if (!profiles) return profiles.take_error();
  Result<std::map<std::pair<std::string, std::string>, int64_t>> free = store.count_free_nodes();
  if (!free) return free.take_error();
  std::vector<ProfileData> out;
  for (Profile& p : *profiles) {
    if (only && p.name != *only) continue;
    ProfileData d;
    d.profile = std::move(p);
    for (int k = 0; k < 2; ++k) {
      auto it = free->find({d.profile.name, kKinds[k]});
      d.kinds[k].free = it == free->end() ? 0 : it->second;
      if (k == 1) {
        Result<int64_t> guests = guests_free(store, d.profile);
        if (!guests) return guests.take_error();
        d.kinds[k].free += *guests;
      }
      Result<std::vector<ValidationRecord>> recent =
          store.recent_passing_validations(d.profile.name, kKinds[k], window);
      if (!recent) return recent.take_error();
      d.kinds[k].passing = std::move(*recent);
    }
    out.push_back(std::move(d));
  }
  if (only && out.empty()) return Error(Code::kNotFound, "no such profile: " + *only);
  return out;
}

asio::awaitable<Result<http::Reply>> get_availability(ApiContext& ctx, Call& call) {
  int window = 20;
  if (auto w = call.query.get("window")) {
    char* end = nullptr;
    long v = std::strtol(w->c_str(), &end, 10);
    if (w->empty() || *end != '\0' || v < 1 || v > 200) co_return Error::invalid("window", "must be an integer from 1 to 200");
    window = static_cast<int>(v);
  }
  std::optional<std::string> only = call.query.get("profile");
  Result<std::vector<ProfileData>> data =
      co_await ctx.deps.db.run([&] { return collect(ctx.deps.store, only, window); });
  if (!data) co_return data.error();
  co_return json_reply(call.req, bhttp::status::ok, availability_json(*data, window));
}

}  // namespace

void add_availability_routes(RouteTable& t, ApiContext& ctx) {
  t.add({bhttp::verb::get, "/v1/availability", Access::kAnyRole, {"window", "profile"},
         [&ctx](Call& c) { return get_availability(ctx, c); }});
}

}  // namespace kiln::api
