#pragma once
// Time source. Production code takes a Clock& so tests can use FakeClock and
// never depend on wall-clock time. Times are milliseconds since the Unix epoch.

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t now_ms() const = 0;
};

class SystemClock : public Clock {
 public:
  int64_t now_ms() const override;
};

class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t start_ms = 1'700'000'000'000) : now_(start_ms) {}
  int64_t now_ms() const override { return now_.load(); }
  void advance_ms(int64_t d) { now_ += d; }

 private:
  std::atomic<int64_t> now_;
};

// RFC 3339 UTC with milliseconds: "2026-11-21T04:49:05.123Z".
std::string format_rfc3339(int64_t ms);
// Reads "YYYY-MM-DDTHH:MM:SS[.fff...]Z" or with a "+HH:MM"/"-HH:MM" offset
// (RFC 3339 section 5.6) into ms since the epoch; nullopt when malformed.
std::optional<int64_t> parse_rfc3339(std::string_view text);

}  // namespace kiln
