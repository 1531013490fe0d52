#pragma once
// Prometheus text exposition (format 0.0.4) for GET /metrics.
//
// RequestMetrics accumulates kiln_api_request_duration_seconds, a histogram
// labelled by method and route *template* (never the raw path, which would
// make one series per node). render_metrics() writes it together with the
// gauges and counters sampled at scrape time.

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/beast/http/verb.hpp>

namespace kiln::api {

// The method label: one of the methods the API serves, or "other". Beast
// passes unknown methods through as text; a label taken from that text would
// let any client add series to /metrics without bound.
std::string_view method_label(boost::beast::http::verb method);

class RequestMetrics {
 public:
  // Thread-safe. `route` is a route template or "unmatched", never a raw path.
  void observe(boost::beast::http::verb method, std::string_view route, double seconds);
  // Counts a request refused before anyone was authenticated (thread-safe).
  void count_rejected_anonymous() { rejected_anonymous_.fetch_add(1, std::memory_order_relaxed); }
  // Appends the histogram (HELP, TYPE, buckets, sum, count) to `out`.
  void render(std::string& out) const;

  static constexpr std::array<double, 11> kBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                      0.5,   1.0,  2.5,   5.0,  10.0};

 private:
  struct Series {
    std::array<uint64_t, kBuckets.size()> buckets{};  // cumulative counts per bound
    uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, Series> series_;
  std::atomic<uint64_t> rejected_anonymous_{0};
};

// A histogram sampled at scrape time: (upper bound, cumulative count) pairs.
struct HistogramSnapshot {
  std::vector<std::pair<double, uint64_t>> buckets;
  uint64_t count = 0;
  double sum = 0;
};

struct MetricsSnapshot {
  std::map<std::string, int64_t> nodes_by_state;  // every state present, zeros included
  std::map<std::string, int64_t> allocations_by_state;  // likewise
  HistogramSnapshot allocation_time_to_ready;  // seconds, request to ready
  std::map<std::pair<std::string, std::string>, uint64_t> operations;  // (operation, result)
  std::size_t connections = 0;
};

// Escapes a label value (backslash, quote, newline).
std::string escape_label(std::string_view v);

// The whole /metrics body.
std::string render_metrics(const MetricsSnapshot& snapshot, const RequestMetrics& requests);

}  // namespace kiln::api
