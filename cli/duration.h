#pragma once
// Durations as people type them (--timeout 30m, 90s, 1h30m, 2h) and times as
// tables show them ("3m ago", "in 5m"). Pure functions; any thread.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::cli {

// "90s", "30m", "1h30m", "500ms", or a bare number of seconds; nullopt for
// anything else, zero, or more than a year.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

// "12s", "3m", "2h5m", "4d": a short, rounded-down span.
std::string short_span(std::chrono::milliseconds span);

// An RFC 3339 time relative to `now_ms`: "3m ago" or "in 5m"; the text
// unchanged when it is not a time.
std::string relative_time(const std::string& rfc3339, int64_t now_ms);

}  // namespace kiln::cli
