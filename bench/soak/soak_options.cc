#include "bench/soak/soak_options.h"

#include <charconv>
#include <string_view>

namespace kiln::soak {

const char* to_string(Backend b) { return b == Backend::kSqlite ? "sqlite" : "postgresql"; }

namespace {

bool parse_uint(std::string_view v, uint64_t max, uint64_t* out) {
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n > max) return false;
  *out = n;
  return true;
}

Status seconds_flag(std::string_view flag, std::string_view v, uint64_t min, std::chrono::seconds* out) {
  uint64_t n = 0;
  if (!parse_uint(v, 30 * 86400, &n) || n < min)
    return Error::invalid(std::string(flag), "must be whole seconds from " + std::to_string(min) + " to 2592000");
  *out = std::chrono::seconds(n);
  return ok_status();
}

Status apply(SoakOptions& o, std::string_view flag, std::string_view v) {
  if (flag == "--duration") return seconds_flag(flag, v, 1, &o.duration);
  if (flag == "--kill-every") return seconds_flag(flag, v, 5, &o.kill_every);
  if (flag == "--bmc-pause-every") return seconds_flag(flag, v, 5, &o.bmc_pause_every);
  if (flag == "--warmup") return seconds_flag(flag, v, 0, &o.warmup);
  if (flag == "--seed") {
    if (!parse_uint(v, UINT64_MAX, &o.seed)) return Error::invalid("--seed", "must be a non-negative integer");
    return ok_status();
  }
  if (flag == "--backend") {
    if (v == "sqlite") o.backend = Backend::kSqlite;
    else if (v == "postgresql") o.backend = Backend::kPostgresql;
    else return Error::invalid("--backend", "must be sqlite or postgresql");
    return ok_status();
  }
  if (flag == "--kilnd" || flag == "--vbmc") {
    if (v.empty() || v[0] != '/') return Error::invalid(std::string(flag), "must be an absolute path");
    (flag == "--kilnd" ? o.kilnd_path : o.vbmc_path) = std::string(v);
    return ok_status();
  }
  if (flag == "--report") {
    if (v.empty()) return Error::invalid("--report", "must name a file");
    o.report_path = std::string(v);
    return ok_status();
  }
  return Error::invalid(std::string(flag), "unknown flag");
}

}  // namespace

Result<SoakOptions> parse_soak_args(const std::vector<std::string>& args) {
  SoakOptions o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a == "--help" || a == "-h") {
      o.help = true;
      continue;
    }
    if (a == "--verbose") {
      o.verbose = true;
      continue;
    }
    std::string_view flag = a;
    std::string_view value;
    if (auto eq = a.find('='); eq != std::string_view::npos && a.rfind("--", 0) == 0) {
      flag = a.substr(0, eq);
      value = a.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return Error::invalid(std::string(a), "needs a value");
    }
    if (Status s = apply(o, flag, value); !s) return s.take_error();
  }
  return o;
}

const char* soak_usage() {
  return "kiln-soak: a chaos soak of kilnd with invariants checked all along\n"
         "\n"
         "  --duration SECONDS         how long the chaos runs (default 180)\n"
         "  --seed N                   seeds the soak's random choices (default: from the clock, printed)\n"
         "  --backend sqlite|postgresql  one kilnd on SQLite, or three on one PostgreSQL (default sqlite)\n"
         "  --report FILE              writes the run's figures as JSON\n"
         "  --kill-every SECONDS       mean time between two kill -9 of kilnd (default 45)\n"
         "  --bmc-pause-every SECONDS  mean time between two pauses of every BMC (default 30)\n"
         "  --warmup SECONDS           a kilnd process's warm-up before RSS and descriptors must stay flat (default 20)\n"
         "  --kilnd PATH, --vbmc PATH  drive these binaries instead of the build's own (e.g. Release ones)\n"
         "  --verbose                  prints every action and finding\n"
         "\n"
         "Exit status: 0 every invariant held; 1 one broke (the first is named); 2 bad flags;\n"
         "3 the soak could not set up; 77 PostgreSQL asked for and not installed.\n";
}

}  // namespace kiln::soak
