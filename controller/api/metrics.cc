#include "controller/api/metrics.h"

#include <cstdio>

namespace kiln::api {
namespace {

std::string format_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

std::string escape_label(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out.append("\\\\");
    else if (c == '"') out.append("\\\"");
    else if (c == '\n') out.append("\\n");
    else out.push_back(c);
  }
  return out;
}

std::string_view method_label(boost::beast::http::verb method) {
  using boost::beast::http::verb;
  switch (method) {
    case verb::get:
    case verb::head:
    case verb::post:
    case verb::put:
    case verb::patch:
    case verb::delete_:
    case verb::options:
      return boost::beast::http::to_string(method);
    default:
      return "other";
  }
}

void RequestMetrics::observe(boost::beast::http::verb method, std::string_view route, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  Series& s = series_[{std::string(method_label(method)), std::string(route)}];
  for (std::size_t i = 0; i < kBuckets.size(); ++i)
    if (seconds <= kBuckets[i]) ++s.buckets[i];
  ++s.count;
  s.sum += seconds;
}

void RequestMetrics::render(std::string& out) const {
  out.append("# HELP kiln_api_rejected_anonymous_total Requests refused before any caller was authenticated (not audited).\n");
  out.append("# TYPE kiln_api_rejected_anonymous_total counter\n");
  out.append("kiln_api_rejected_anonymous_total ")
      .append(std::to_string(rejected_anonymous_.load(std::memory_order_relaxed)))
      .append("\n");
  out.append("# HELP kiln_api_request_duration_seconds Time to produce an API response.\n");
  out.append("# TYPE kiln_api_request_duration_seconds histogram\n");
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, s] : series_) {
    std::string labels = "method=\"" + escape_label(key.first) + "\",route=\"" +
                         escape_label(key.second) + "\"";
    for (std::size_t i = 0; i < kBuckets.size(); ++i) {
      char le[32];
      std::snprintf(le, sizeof le, "%g", kBuckets[i]);
      out.append("kiln_api_request_duration_seconds_bucket{").append(labels).append(",le=\"")
          .append(le).append("\"} ").append(std::to_string(s.buckets[i])).append("\n");
    }
    out.append("kiln_api_request_duration_seconds_bucket{").append(labels)
        .append(",le=\"+Inf\"} ").append(std::to_string(s.count)).append("\n");
    out.append("kiln_api_request_duration_seconds_sum{").append(labels).append("} ")
        .append(format_double(s.sum)).append("\n");
    out.append("kiln_api_request_duration_seconds_count{").append(labels).append("} ")
        .append(std::to_string(s.count)).append("\n");
  }
}

std::string render_metrics(const MetricsSnapshot& snapshot, const RequestMetrics& requests) {
  std::string out;
  out.append("# HELP kiln_nodes Nodes by provision state.\n# TYPE kiln_nodes gauge\n");
  for (const auto& [state, n] : snapshot.nodes_by_state)
    out.append("kiln_nodes{provision_state=\"").append(escape_label(state)).append("\"} ")
        .append(std::to_string(n)).append("\n");
  out.append("# HELP kiln_allocations Allocations by state.\n# TYPE kiln_allocations gauge\n");
  for (const auto& [state, n] : snapshot.allocations_by_state)
    out.append("kiln_allocations{state=\"").append(escape_label(state)).append("\"} ")
        .append(std::to_string(n)).append("\n");
  const HistogramSnapshot& ready = snapshot.allocation_time_to_ready;
  out.append("# HELP kiln_allocation_time_to_ready_seconds Time from an allocation's request to ready.\n");
  out.append("# TYPE kiln_allocation_time_to_ready_seconds histogram\n");
  for (const auto& [le, n] : ready.buckets)
    out.append("kiln_allocation_time_to_ready_seconds_bucket{le=\"").append(format_double(le)).append("\"} ")
        .append(std::to_string(n)).append("\n");
  out.append("kiln_allocation_time_to_ready_seconds_bucket{le=\"+Inf\"} ").append(std::to_string(ready.count))
      .append("\n");
  out.append("kiln_allocation_time_to_ready_seconds_sum ").append(format_double(ready.sum)).append("\n");
  out.append("kiln_allocation_time_to_ready_seconds_count ").append(std::to_string(ready.count)).append("\n");
  requests.render(out);
  out.append("# HELP kiln_operations_total Node operations finished, by kind and result.\n");
  out.append("# TYPE kiln_operations_total counter\n");
  for (const auto& [key, n] : snapshot.operations)
    out.append("kiln_operations_total{operation=\"").append(escape_label(key.first))
        .append("\",result=\"").append(escape_label(key.second)).append("\"} ")
        .append(std::to_string(n)).append("\n");
  out.append("# HELP kiln_http_connections Live HTTP connections.\n");
  out.append("# TYPE kiln_http_connections gauge\n");
  out.append("kiln_http_connections ").append(std::to_string(snapshot.connections)).append("\n");
  return out;
}

}  // namespace kiln::api
