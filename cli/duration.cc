#include "cli/duration.h"

#include <cctype>

#include "common/clock.h"

namespace kiln::cli {

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  if (text.empty()) return std::nullopt;
  int64_t total_ms = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    int64_t n = 0;
    std::size_t digits = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      n = n * 10 + (text[i++] - '0');
      if (++digits > 12) return std::nullopt;
    }
    if (digits == 0) return std::nullopt;
    std::string_view unit;
    std::size_t start = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    unit = text.substr(start, i - start);
    if (unit.empty() && i == text.size() && start == text.size() && total_ms == 0) unit = "s";
    if (unit == "ms") total_ms += n;
    else if (unit == "s") total_ms += n * 1000;
    else if (unit == "m") total_ms += n * 60'000;
    else if (unit == "h") total_ms += n * 3'600'000;
    else if (unit == "d") total_ms += n * 86'400'000;
    else return std::nullopt;
    if (total_ms > int64_t{366} * 86'400'000) return std::nullopt;
  }
  if (total_ms <= 0) return std::nullopt;
  return std::chrono::milliseconds(total_ms);
}

std::string short_span(std::chrono::milliseconds span) {
  int64_t s = span.count() / 1000;
  if (s < 0) s = 0;
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m" + (s % 60 ? std::to_string(s % 60) + "s" : "");
  if (s < 86400) return std::to_string(s / 3600) + "h" + (s % 3600 / 60 ? std::to_string(s % 3600 / 60) + "m" : "");
  return std::to_string(s / 86400) + "d";
}

namespace {

// "3m12s" -> "3m": a table row reads at a glance; JSON keeps the exact time.
std::string coarse(std::string span) {
  std::size_t i = 0;
  while (i < span.size() && std::isdigit(static_cast<unsigned char>(span[i]))) ++i;
  while (i < span.size() && std::isalpha(static_cast<unsigned char>(span[i]))) ++i;
  return span.substr(0, i);
}

}  // namespace

std::string relative_time(const std::string& rfc3339, int64_t now_ms) {
  std::optional<int64_t> t = parse_rfc3339(rfc3339);
  if (!t) return rfc3339;
  const int64_t d = now_ms - *t;
  if (d >= 0) return coarse(short_span(std::chrono::milliseconds(d))) + " ago";
  return "in " + coarse(short_span(std::chrono::milliseconds(-d)));
}

}  // namespace kiln::cli
