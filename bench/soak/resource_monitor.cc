#include "bench/soak/resource_monitor.h"

#include <algorithm>
#include <set>

#include "bench/soak/process_sample.h"

namespace kiln::soak {

namespace {

constexpr std::size_t kEdge = 5;          // samples at each end of the window
constexpr std::size_t kSeriesPoints = 60;  // points per series in the report

// At most kSeriesPoints of `points`, evenly spaced, as [t_s, rss_kib, fds].
template <typename Point>
nlohmann::json series(const std::vector<Point>& points) {
  nlohmann::json out = nlohmann::json::array();
  const std::size_t step = std::max<std::size_t>(1, points.size() / kSeriesPoints);
  for (std::size_t i = 0; i < points.size(); i += step)
    out.push_back({static_cast<double>(points[i].t_ms) / 1000.0, points[i].rss_kib, points[i].fds});
  if (!points.empty() && (points.size() - 1) % step != 0)
    out.push_back({static_cast<double>(points.back().t_ms) / 1000.0, points.back().rss_kib, points.back().fds});
  return out;
}

}  // namespace

ResourceMonitor::ResourceMonitor(Findings& findings, FlatnessBounds bounds) : findings_(findings), bounds_(bounds) {}

void ResourceMonitor::sample(const std::vector<KilndCluster::Process>& running, pid_t vbmc, int64_t now_ms) {
  std::set<std::pair<std::size_t, int>> alive;
  for (const KilndCluster::Process& p : running) {
    const auto key = std::make_pair(p.instance, p.incarnation);
    alive.insert(key);
    Followed& f = followed_[key];
    f.process = p;
    if (std::optional<ProcessSample> s = sample_process(p.pid))
      f.points.push_back({now_ms - p.ready_ms, s->rss_kib, s->fds});
  }
  for (auto& [key, f] : followed_)
    if (!f.judged && !alive.count(key)) judge(f);
  if (vbmc > 0) {
    if (vbmc_start_ms_ == 0) vbmc_start_ms_ = now_ms;
    if (std::optional<ProcessSample> s = sample_process(vbmc)) vbmc_.push_back({now_ms - vbmc_start_ms_, s->rss_kib, s->fds});
  }
}

void ResourceMonitor::finish() {
  for (auto& [key, f] : followed_)
    if (!f.judged) judge(f);
}

void ResourceMonitor::judge(Followed& f) {
  f.judged = true;
  const int64_t warm_ms = std::chrono::milliseconds(bounds_.warmup).count();
  std::vector<Point> after;
  for (const Point& p : f.points)
    if (p.t_ms >= warm_ms) after.push_back(p);
  const int64_t lived_ms = f.points.empty() ? 0 : f.points.back().t_ms;
  f.verdict = {{"instance", f.process.instance}, {"incarnation", f.process.incarnation}, {"pid", f.process.pid},
               {"lived_s", static_cast<double>(lived_ms) / 1000.0}, {"samples", f.points.size()}};
  if (!f.points.empty()) {
    f.verdict["rss_kib_first"] = f.points.front().rss_kib;
    f.verdict["rss_kib_last"] = f.points.back().rss_kib;
    f.verdict["fds_first"] = f.points.front().fds;
    f.verdict["fds_last"] = f.points.back().fds;
  }
  const int64_t window_ms = after.empty() ? 0 : after.back().t_ms - after.front().t_ms;
  if (after.size() < 2 * kEdge || window_ms < std::chrono::milliseconds(bounds_.min_window).count()) {
    f.verdict["judged"] = false;
    return;
  }
  auto edge = [&](bool first, auto field, bool highest) {
    auto b = first ? after.begin() : after.end() - kEdge;
    int64_t v = highest ? INT64_MIN : INT64_MAX;
    for (auto it = b; it != b + kEdge; ++it) v = highest ? std::max<int64_t>(v, (*it).*field) : std::min<int64_t>(v, (*it).*field);
    return v;
  };
  const int64_t rss_growth = edge(false, &Point::rss_kib, false) - edge(true, &Point::rss_kib, true);
  const int64_t fd_growth = edge(false, &Point::fds, false) - edge(true, &Point::fds, true);
  f.verdict["judged"] = true;
  f.verdict["window_s"] = static_cast<double>(window_ms) / 1000.0;
  f.verdict["rss_growth_kib"] = rss_growth;
  f.verdict["fd_growth"] = fd_growth;
  const std::string who = "kilnd " + std::to_string(f.process.instance) + " (process " +
                          std::to_string(f.process.incarnation) + ", pid " + std::to_string(f.process.pid) + ")";
  findings_.checked(invariant::kRssFlat, static_cast<int64_t>(after.size()));
  findings_.checked(invariant::kFdsFlat, static_cast<int64_t>(after.size()));
  if (rss_growth > bounds_.rss_bound_kib)
    findings_.broken(invariant::kRssFlat, who + ": RSS grew " + std::to_string(rss_growth) + " KiB over " +
                                              std::to_string(window_ms / 1000) + " s after its warm-up (bound " +
                                              std::to_string(bounds_.rss_bound_kib) + " KiB); series [s, KiB, fds]: " +
                                              series(after).dump());
  if (fd_growth > bounds_.fd_bound)
    findings_.broken(invariant::kFdsFlat, who + ": open descriptors grew by " + std::to_string(fd_growth) + " over " +
                                              std::to_string(window_ms / 1000) + " s after its warm-up (bound " +
                                              std::to_string(bounds_.fd_bound) + "); series [s, KiB, fds]: " +
                                              series(after).dump());
}

nlohmann::json ResourceMonitor::figures() const {
  nlohmann::json kilnd = nlohmann::json::array();
  for (const auto& [key, f] : followed_) {
    nlohmann::json v = f.verdict.is_null() ? nlohmann::json::object() : f.verdict;
    v["series"] = series(f.points);
    kilnd.push_back(std::move(v));
  }
  return {{"bounds",
           {{"warmup_s", bounds_.warmup.count()},
            {"min_window_s", bounds_.min_window.count()},
            {"rss_growth_kib_max", bounds_.rss_bound_kib},
            {"fd_growth_max", bounds_.fd_bound}}},
          {"series_columns", {"seconds since ready", "rss_kib", "fds"}},
          {"kilnd", kilnd},
          {"kiln_vbmc", series(vbmc_)}};
}

}  // namespace kiln::soak
