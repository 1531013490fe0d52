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
//
// Price per measured unit (controller/tenancy/unit_price.h has the rules):
// per kind, measured.gemm / nccl_busbw / gpudirect_rdma_latency /
// nccl_latency (the median over nodes, each node's newest verdict, with the
// per-node values and the reports used), price_micros_per_hour, and
// price_per_tflop_hour / price_per_nccl_gbps_hour in integer micro-units;
// each null with its reason in not_measured. The tax covers these figures and
// the two prices too. A tenant is shown the ids of only the reports it may
// read (ValidationStore::get_validation's rule): the others' figures are in
// `values`, so the median is still reproducible, but not which node or report
// gave them.

#include <algorithm>
#include <optional>
#include <set>

#include "controller/api/reply.h"
#include "controller/api/validation_routes.h"
#include "controller/hosts/placement.h"
#include "controller/tenancy/unit_price.h"
#include "controller/tenancy/usage.h"

namespace kiln::api {
namespace {

using nlohmann::json;

constexpr NodeKind kKinds[] = {NodeKind::kBaremetal, NodeKind::kVirtual};
// Per host: a tiny flavour on a big host would otherwise plan thousands.
constexpr int64_t kMaxGuestsShown = 1000;

struct KindData {
  int64_t free = 0;
  std::vector<ValidationRecord> passing;
  KindUnitPrices units;
};

struct ProfileData {
  Profile profile;
  KindData kinds[2];
};

// The report ids the reader may see; empty optional: every one (staff).
using Readable = std::optional<std::set<std::string>>;

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

json price_of(const Profile& p, NodeKind kind) {
  const json* listed = listed_price_per_second(p.doc, kind);
  return listed ? *listed : json(nullptr);
}

double in_unit(int64_t milli) { return static_cast<double>(milli) / static_cast<double>(kFigureScale); }

json optional_int(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }

// One figure of unit_price.h as measured.<field>, or null.
json figure_json(const FigureMeasurement& f, const Readable& readable) {
  if (!f.median_milli) return nullptr;
  const FigureSpec& spec = figure_spec(f.id);
  json values = json::array();
  json reports = json::array();
  int64_t withheld = 0;
  for (const NodeFigure& n : f.nodes) {
    values.push_back(in_unit(n.milli));
    if (!readable || readable->count(n.report_id) != 0) reports.push_back(n.report_id);
    else ++withheld;
  }
  json out = {{"median", in_unit(*f.median_milli)},
              {"unit", spec.unit},
              {"check", f.check},
              {"source", spec.source},
              {"statistic", "median"},
              {"nodes", f.nodes.size()},
              {"values", std::move(values)},
              {"reports", std::move(reports)},
              {"reports_withheld", withheld},
              {"failing_nodes", f.failing_nodes},
              {"refused_reports", f.refused_reports}};
  if (f.id == UnitFigure::kGpudirectRdmaLatency)
    out["p99_median"] = f.p99_median_milli ? json(in_unit(*f.p99_median_milli)) : json(nullptr);
  return out;
}

// Adds the measured-unit fields of one kind to its object.
void add_unit_prices(json& kind, const KindUnitPrices& u, const Readable& readable) {
  json not_measured = json::object();
  for (const FigureMeasurement& f : u.figures) {
    const char* field = figure_spec(f.id).field;
    kind["measured"][field] = figure_json(f, readable);
    if (!f.median_milli) not_measured[field] = f.not_measured;
  }
  kind["price_micros_per_hour"] = optional_int(u.price_micros_per_hour);
  kind["price_per_tflop_hour"] = optional_int(u.price_per_tflop_hour);
  kind["price_per_nccl_gbps_hour"] = optional_int(u.price_per_nccl_gbps_hour);
  if (!u.price_per_tflop_hour) not_measured["price_per_tflop_hour"] = u.price_per_tflop_hour_not_measured;
  if (!u.price_per_nccl_gbps_hour) not_measured["price_per_nccl_gbps_hour"] = u.price_per_nccl_gbps_hour_not_measured;
  kind["not_measured"] = std::move(not_measured);
}

// The tax entry of one figure or price measured on both kinds; positive: the
// VM does worse (less throughput, more latency, a dearer unit).
void add_tax(json& tax, const char* name, std::optional<double> bm, std::optional<double> vm, bool higher_is_better,
             const char* unit) {
  if (!bm || !vm || *bm == 0) return;
  const double rel = higher_is_better ? (*bm - *vm) / *bm : (*vm - *bm) / *bm;
  tax[name] = {{"relative", rel}, {"baremetal", *bm}, {"virtual", *vm}, {"unit", unit}};
}

void add_unit_taxes(json& tax, const KindUnitPrices& bm, const KindUnitPrices& vm) {
  for (const FigureSpec& spec : unit_figures()) {
    const FigureMeasurement& b = bm.figure(spec.id);
    const FigureMeasurement& v = vm.figure(spec.id);
    // Bus bandwidth from two different checks is not one figure.
    if (!b.median_milli || !v.median_milli || b.check != v.check) continue;
    add_tax(tax, spec.field, in_unit(*b.median_milli), in_unit(*v.median_milli), spec.higher_is_better, spec.unit);
  }
  auto as_double = [](const std::optional<int64_t>& v) {
    return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
  };
  add_tax(tax, "price_per_tflop_hour", as_double(bm.price_per_tflop_hour), as_double(vm.price_per_tflop_hour), false,
          "micros per TFLOP-hour");
  if (bm.figure(UnitFigure::kNcclBusbw).check == vm.figure(UnitFigure::kNcclBusbw).check)
    add_tax(tax, "price_per_nccl_gbps_hour", as_double(bm.price_per_nccl_gbps_hour),
            as_double(vm.price_per_nccl_gbps_hour), false, "micros per GB/s-hour");
}

json availability_json(const std::vector<ProfileData>& data, int window, const Readable& readable) {
  json list = json::array();
  for (const ProfileData& d : data) {
    const Profile& p = d.profile;
    json kinds = json::object();
    std::map<std::string, double> med[2];
    for (int k = 0; k < 2; ++k) {
      const std::string name(to_string(kKinds[k]));
      kinds[name] = {{"free", d.kinds[k].free},
                          {"price_per_second", price_of(p, kKinds[k])},
                          {"measured", measured_json(d.kinds[k].passing, med[k])}};
      add_unit_prices(kinds[name], d.kinds[k].units, readable);
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
    add_unit_taxes(tax, d.kinds[0].units, d.kinds[1].units);
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

// Which of the reports the figures name `tenant` may read: each is asked of
// the store under the tenant's rule (at most `window` per kind). Blocking.
Result<std::set<std::string>> readable_reports(NodeStore& store, const std::vector<ProfileData>& data,
                                               const std::string& tenant) {
  std::set<std::string> asked;
  std::set<std::string> out;
  for (const ProfileData& d : data)
    for (const KindData& k : d.kinds)
      for (const FigureMeasurement& f : k.units.figures)
        for (const NodeFigure& n : f.nodes) {
          if (!asked.insert(n.report_id).second) continue;
          Result<ValidationRecord> v = store.get_validation(n.report_id, tenant);
          if (v) out.insert(n.report_id);
          else if (v.error().code != Code::kNotFound) return v.take_error();
        }
  return out;
}

// Blocking: every read the page needs, on the BlockingPool.
Result<std::vector<ProfileData>> collect(NodeStore& store, const std::optional<std::string>& only, int window) {
  Result<std::vector<Profile>> profiles = store.list_profiles();
  if (!profiles) return profiles.take_error();
  Result<std::map<std::pair<std::string, NodeKind>, int64_t>> free = store.count_free_nodes();
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
      d.kinds[k].units = unit_prices(d.profile.doc, d.profile.name, kKinds[k], d.kinds[k].passing);
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
  // Staff read every report; anyone else only those the store lets them
  // (a tenant: its own nodes' of its own period; no tenant: none).
  const bool staff = call.principal.is_staff();
  const std::string tenant = call.principal.tenant;
  Readable readable;
  Result<std::vector<ProfileData>> data = co_await ctx.deps.db.run([&]() -> Result<std::vector<ProfileData>> {
    Result<std::vector<ProfileData>> d = collect(ctx.deps.store, only, window);
    if (!d || staff) return d;
    readable.emplace();
    if (tenant.empty()) return d;
    Result<std::set<std::string>> r = readable_reports(ctx.deps.store, *d, tenant);
    if (!r) return r.take_error();
    readable = std::move(*r);
    return d;
  });
  if (!data) co_return data.error();
  co_return json_reply(call.req, bhttp::status::ok, availability_json(*data, window, readable));
}

}  // namespace

void add_availability_routes(RouteTable& t, ApiContext& ctx) {
  t.add({bhttp::verb::get, "/v1/availability", Access::kAnyRole, {"window", "profile"},
         [&ctx](Call& c) { return get_availability(ctx, c); }});
}

}  // namespace kiln::api
