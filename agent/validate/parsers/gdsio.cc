#include "agent/validate/parsers/gdsio.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/validate/parsers/health.h"
#include "agent/validate/parsers/text_scan.h"

namespace kiln::agent {

using nlohmann::json;
namespace sc = scan;

namespace {

constexpr double kMaxExact = 9007199254740992.0;  // 2^53: integers a JSON double keeps exactly

// The summary as a run of tokens starting at "IoType:". Fields come in a
// fixed order; each reader consumes its label and value and says what was
// wrong when it cannot.
class Summary {
 public:
  Summary(const std::vector<std::string_view>& toks, std::size_t pos) : t_(toks), i_(pos) {}

  // `label` must be the next token; returns the token after it.
  std::optional<std::string_view> value(std::string_view label) {
    if (i_ + 1 >= t_.size() || t_[i_] != label) {
      fail(std::string(label) + " missing");
      return std::nullopt;
    }
    i_ += 2;
    return t_[i_ - 1];
  }

  std::optional<double> number(std::string_view label, double lo, double hi, std::string_view unit = {}) {
    auto v = value(label);
    if (!v) return std::nullopt;
    std::string_view s = *v;
    if (!s.empty() && s.back() == ',') s.remove_suffix(1);
    auto d = sc::to_double(s);
    if (!d || !std::isfinite(*d) || *d < lo || *d > hi) {
      fail(std::string(label) + " '" + std::string(*v) + "' is not a number in range");
      return std::nullopt;
    }
    if (!unit.empty()) {
      if (i_ >= t_.size() || sc::trim(t_[i_]).substr(0, unit.size()) != unit) {
        fail(std::string(label) + " is not followed by " + std::string(unit));
        return std::nullopt;
      }
      ++i_;
    }
    return d;
  }

  void fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
  }
  const std::string& error() const { return error_; }
  std::size_t pos() const { return i_; }

 private:
  const std::vector<std::string_view>& t_;
  std::size_t i_;
  std::string error_;
};

// "18421760/10485760(KiB)" -> {18421760, 10485760}.
bool dataset(std::string_view s, double& done, double& target) {
  if (!sc::ends_with(s, "(KiB)")) return false;
  s.remove_suffix(5);
  const std::size_t slash = s.find('/');
  if (slash == std::string_view::npos) return false;
  auto a = sc::to_int(s.substr(0, slash));
  auto b = sc::to_int(s.substr(slash + 1));
  if (!a || !b || *a < 0 || *b < 0 || static_cast<double>(*a) >= kMaxExact || static_cast<double>(*b) >= kMaxExact)
    return false;
  done = static_cast<double>(*a);
  target = static_cast<double>(*b);
  return true;
}

// "256(KiB)" or "16384-32768-4096(KiB)": digits and dashes only.
bool io_size(std::string_view s, std::string& out) {
  if (!sc::ends_with(s, "(KiB)")) return false;
  s.remove_suffix(5);
  if (s.empty() || s.size() > 64 || s.find_first_not_of("0123456789-") != std::string_view::npos) return false;
  out = std::string(s);
  return true;
}

bool is_upper_word(std::string_view s) {
  return !s.empty() && s.size() <= 32 && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789") == std::string_view::npos;
}

bool looks_like_error(std::string_view t) {
  for (const char* w : {"error", "failed", "fail ", "cannot", "unable", "not supported", "segmentation fault",
                        "invalid"})
    if (sc::icontains(t, w)) return true;
  return false;
}

// An error line is gdsio's only when it names gdsio, cuFile or the nvidia-fs
// driver: a stray error from another tool does not make its output gdsio's.
bool names_gds(std::string_view t) {
  for (const char* w : {"gdsio", "cufile", "cufio", "nvidia-fs", "nvidia_fs", "nvfs", "gds"})
    if (sc::icontains(t, w)) return true;
  return false;
}

}  // namespace

Result<json> parse_gdsio(std::string_view text) {
  json runs = json::array(), errors = json::array(), refused = json::array();
  bool gds_error = false;
  std::string joined;
  for (const std::string& raw : sc::lines(text)) {
    const std::string_view t = sc::trim(raw);
    if (t.empty()) continue;
    if (!sc::contains(t, "IoType:") && !sc::contains(t, "Throughput:") && looks_like_error(t)) {
      if (errors.size() < 64) errors.push_back(std::string(t.substr(0, 400)));
      gds_error |= names_gds(t);
      continue;
    }
    joined.append(t);
    joined.push_back(' ');
  }
  const auto toks = sc::split_ws(joined);
  for (std::size_t i = 0; i < toks.size(); ++i) {
    if (toks[i] != "IoType:") continue;
    Summary s(toks, i);
    json run;
    auto io = s.value("IoType:");
    auto xfer = s.value("XferType:");
    if (io && !is_upper_word(*io)) s.fail("IoType is not a name");
    if (xfer && !is_upper_word(*xfer)) s.fail("XferType is not a name");
    auto threads = s.number("Threads:", 1, 65536);
    double done = 0, target = 0;
    if (auto ds = s.value("DataSetSize:"); ds && !dataset(*ds, done, target)) s.fail("DataSetSize is not N/M(KiB)");
    std::string size;
    if (auto is = s.value("IOSize:"); is && !io_size(*is, size)) s.fail("IOSize is not N(KiB)");
    auto tput = s.number("Throughput:", 0, 1e6, "GiB/sec");
    auto lat = s.number("Avg_Latency:", 0, 1e9, "usecs");
    auto ops = s.number("ops:", 0, kMaxExact - 1);
    auto total = s.number("total_time", 0, 1e7, "secs");
    if (!s.error().empty() || !io || !xfer || !threads || !tput || !lat || !ops || !total) {
      if (refused.size() < 16) refused.push_back("summary " + std::to_string(runs.size() + refused.size()) + ": " +
                                                 (s.error().empty() ? "incomplete" : s.error()));
      continue;
    }
    if (std::floor(*threads) != *threads || std::floor(*ops) != *ops) {
      refused.push_back("summary " + std::to_string(runs.size() + refused.size()) + ": Threads and ops must be integers");
      continue;
    }
    run["io_type"] = std::string(*io);
    run["xfer_type"] = std::string(*xfer);
    run["threads"] = static_cast<std::int64_t>(*threads);
    run["dataset_kib"] = static_cast<std::int64_t>(done);
    run["dataset_target_kib"] = static_cast<std::int64_t>(target);
    run["io_size"] = size;
    run["throughput_gib_s"] = *tput;
    run["throughput_gb_s"] = *tput * 1.073741824;  // GiB -> 10^9 bytes
    run["avg_latency_us"] = *lat;
    run["ops"] = static_cast<std::int64_t>(*ops);
    run["total_time_s"] = *total;
    if (runs.size() < 256) runs.push_back(std::move(run));
    i = s.pos() - 1;
  }
  if (runs.empty() && refused.empty() && !gds_error)
    return Error(Code::kInvalidArgument,
                 "not gdsio output: no 'IoType:' summary and no gdsio/cuFile/nvidia-fs error line");

  Health h;
  for (const auto& e : errors) h.fail(e.get<std::string>());
  for (const auto& r : refused) h.fail("gdsio " + r.get<std::string>());
  if (runs.empty()) h.fail("no gdsio summary (IoType ... Throughput ...) was printed");
  return json{{"format", "gdsio"}, {"runs", std::move(runs)}, {"errors", std::move(errors)},
              {"refused", std::move(refused)}, {"health", h.to_json()}};
}

}  // namespace kiln::agent
