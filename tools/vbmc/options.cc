#include "tools/vbmc/options.h"

#include <algorithm>
#include <cstdint>
#include <charconv>
#include <fstream>
#include <iterator>
#include <sstream>

namespace kiln::vbmc {

namespace {

Result<int64_t> parse_int(const std::string& flag, const std::string& v, int64_t lo, int64_t hi) {
  int64_t out = 0;
  auto r = std::from_chars(v.data(), v.data() + v.size(), out);
  if (r.ec != std::errc() || r.ptr != v.data() + v.size() || out < lo || out > hi) {
    return Error(Code::kInvalidArgument, flag + ": expected an integer in " + std::to_string(lo) +
                                             ".." + std::to_string(hi) + ", got '" + v + "'");
  }
  return out;
}

Result<double> parse_fraction(const std::string& flag, const std::string& v) {
  double f = -1;
  try {
    std::size_t used = 0;
    f = std::stod(v, &used);
    if (used != v.size()) f = -1;
  } catch (...) {
    f = -1;
  }
  if (!(f >= 0.0 && f <= 1.0)) {
    return Error(Code::kInvalidArgument, flag + ": expected a number in 0..1, got '" + v + "'");
  }
  return f;
}

// HOST:PORT or [V6]:PORT.
Status parse_host_port(const std::string& flag, const std::string& value, std::string& host,
                       uint16_t& port) {
  const auto colon = value.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Error(Code::kInvalidArgument, flag + ": expected HOST:PORT, got '" + value + "'");
  }
  std::string h = value.substr(0, colon);
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  auto p = parse_int(flag + " port", value.substr(colon + 1), 0, 65535);
  if (!p) return p.take_error();
  host = h;
  port = static_cast<uint16_t>(*p);
  return ok_status();
}

// The first line of `path` (a trailing "\n" or "\r\n" dropped): the BMC
// password, so that it need not be on the command line.
Result<std::string> read_password_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(Code::kInvalidArgument, "--password-file: cannot read " + path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() > 4096) return Error(Code::kInvalidArgument, "--password-file: longer than 4096 bytes");
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (!text.empty() && text.back() == '\r') text.pop_back();
  if (text.empty()) return Error(Code::kInvalidArgument, "--password-file: " + path + " is empty");
  if (text.find_first_of(std::string("\n\r\0", 3)) != std::string::npos)
    return Error(Code::kInvalidArgument, "--password-file: must hold one line");
  return text;
}

}  // namespace

const char* vbmc_usage() {
  return "usage: kiln-vbmc (--libvirt-uri URI | --mockup DIR) [--redfish-listen HOST:PORT]\n"
         "                 [--ipmi-listen HOST:PORT] [--ipmi-system ID]\n"
         "                 [--user U] [--password P | --password-file F] [--max-sessions N] [--fault-500-rate F]\n"
         "                 [--latency-ms N] [--allowed-reset-types A,B,..] [--page-size N]\n"
         "                 [--etag-quirk none|weak|always-412] [--log-level debug|info|warn|error]\n"
         "                 [--settings-object] [--redirect-prefix] [--fault-status PATH=CODE]...\n"
         "       kiln-vbmc --fleet N --fleet-manifest FILE [--fleet-protocols ipmi,redfish]\n"
         "                 [--fleet-address-base 127.2.0.1] [--ipmi-listen HOST:PORT]\n"
         "                 [--redfish-listen HOST:PORT] [--seed N] [--user U] [--password P | --password-file F]\n"
         "                 [--fault-latency-ms N] [--fault-latency-fraction F]\n"
         "                 [--fault-drop-fraction F] [--fault-500-fraction F]\n"
         "                 [--fault-lockout-fraction F] [--fault-dead-fraction F]\n"
         "                 [--fault-bmc dead|lockout|http_500|latency=I[,J...]]...\n"
         "  Fleet BMC i answers at --fleet-address-base + i, IPMI and Redfish each on one\n"
         "  port shared by all addresses (only the ports of the -listen flags are used).\n";
}

Result<VbmcOptions> parse_vbmc_args(const std::vector<std::string>& args) {
  VbmcOptions o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string value;
    bool has_value = false;
    const auto eq = flag.find('=');
    if (flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_value = true;
    }
    if (flag == "--help" || flag == "-h") {
      o.help = true;
      continue;
    }
    if (flag.rfind("--", 0) != 0) return Error(Code::kInvalidArgument, "unexpected argument '" + flag + "'");
    if (flag == "--settings-object" || flag == "--redirect-prefix") {
      if (has_value) return Error(Code::kInvalidArgument, flag + ": takes no value");
      if (flag == "--settings-object") o.redfish.settings_object = true;
      else o.redfish.redirect_prefix = true;
      continue;
    }
    static const char* const kFlags[] = {"--libvirt-uri", "--mockup", "--redfish-listen", "--user",
                                         "--password", "--password-file", "--max-sessions", "--fault-500-rate",
                                         "--latency-ms", "--page-size", "--allowed-reset-types",
                                         "--etag-quirk", "--log-level", "--ipmi-listen",
                                         "--ipmi-system", "--fleet", "--fleet-protocols",
                                         "--fleet-manifest", "--fleet-address-base", "--seed",
                                         "--fault-latency-ms", "--fault-latency-fraction",
                                         "--fault-drop-fraction", "--fault-500-fraction",
                                         "--fault-lockout-fraction", "--fault-dead-fraction",
                                         "--fault-bmc", "--fault-status"};
    if (std::find(std::begin(kFlags), std::end(kFlags), flag) == std::end(kFlags)) {
      return Error(Code::kInvalidArgument, "unknown flag " + flag);
    }
    if (!has_value) {
      if (i + 1 >= args.size()) return Error(Code::kInvalidArgument, flag + ": missing value");
      value = args[++i];
    }
    if (flag == "--libvirt-uri") {
      o.libvirt_uri = value;
    } else if (flag == "--mockup") {
      o.mockup_dir = value;
    } else if (flag == "--redfish-listen") {
      if (auto st = parse_host_port(flag, value, o.listen_host, o.listen_port); !st) return st.take_error();
      o.fleet.redfish_port = o.listen_port;
    } else if (flag == "--ipmi-listen") {
      if (auto st = parse_host_port(flag, value, o.ipmi_host, o.ipmi_port); !st) return st.take_error();
      o.ipmi = true;
      o.fleet.ipmi_port = o.ipmi_port;
    } else if (flag == "--ipmi-system") {
      if (value.empty()) return Error(Code::kInvalidArgument, "--ipmi-system: must not be empty");
      o.ipmi_system = value;
    } else if (flag == "--user") {
      if (value.empty()) return Error(Code::kInvalidArgument, "--user: must not be empty");
      o.redfish.user = value;
      o.fleet.user = value;
    } else if (flag == "--password" || flag == "--password-file") {
      std::string password = value;
      if (flag == "--password-file") {
        // The secret stays off the command line (ps shows it to every user).
        Result<std::string> read = read_password_file(value);
        if (!read) return read.take_error();
        password = std::move(*read);
      }
      o.redfish.password = password;
      o.fleet.password = password;
    } else if (flag == "--fleet") {
      auto n = parse_int(flag, value, 1, 65000);
      if (!n) return n.take_error();
      o.fleet.count = static_cast<std::size_t>(*n);
    } else if (flag == "--fleet-protocols") {
      std::stringstream ss(value);
      std::string p;
      o.fleet.ipmi = false;
      o.fleet.redfish = false;
      while (std::getline(ss, p, ',')) {
        if (p == "ipmi") o.fleet.ipmi = true;
        else if (p == "redfish") o.fleet.redfish = true;
        else return Error(Code::kInvalidArgument, "--fleet-protocols: unknown protocol '" + p + "' (ipmi, redfish)");
      }
      if (!o.fleet.ipmi && !o.fleet.redfish) {
        return Error(Code::kInvalidArgument, "--fleet-protocols: give ipmi, redfish or both");
      }
    } else if (flag == "--fleet-manifest") {
      if (value.empty()) return Error(Code::kInvalidArgument, "--fleet-manifest: must not be empty");
      o.fleet.manifest_path = value;
    } else if (flag == "--fleet-address-base") {
      o.fleet.address_base = value;
    } else if (flag == "--seed") {
      auto n = parse_int(flag, value, 0, INT64_MAX);
      if (!n) return n.take_error();
      o.fleet.seed = static_cast<uint64_t>(*n);
    } else if (flag == "--fault-latency-ms") {
      auto n = parse_int(flag, value, 0, 3600000);
      if (!n) return n.take_error();
      o.fleet.fault_latency = std::chrono::milliseconds(*n);
    } else if (flag == "--fault-latency-fraction" || flag == "--fault-drop-fraction" ||
               flag == "--fault-500-fraction" || flag == "--fault-lockout-fraction" ||
               flag == "--fault-dead-fraction") {
      auto f = parse_fraction(flag, value);
      if (!f) return f.take_error();
      if (flag == "--fault-latency-fraction") o.fleet.latency_fraction = *f;
      else if (flag == "--fault-drop-fraction") o.fleet.drop_fraction = *f;
      else if (flag == "--fault-500-fraction") o.fleet.http500_fraction = *f;
      else if (flag == "--fault-lockout-fraction") o.fleet.lockout_fraction = *f;
      else o.fleet.dead_fraction = *f;
    } else if (flag == "--fault-bmc") {
      const auto eq2 = value.find('=');
      const std::string kind = value.substr(0, eq2);
      if (eq2 == std::string::npos || !is_fleet_fault_kind(kind)) {
        return Error(Code::kInvalidArgument,
                     "--fault-bmc: expected dead|lockout|http_500|latency=I[,J...], got '" + value + "'");
      }
      std::stringstream ss(value.substr(eq2 + 1));
      std::string idx;
      bool any = false;
      while (std::getline(ss, idx, ',')) {
        auto n = parse_int(flag + " index", idx, 0, 65000);
        if (!n) return n.take_error();
        o.fleet.fault_bmcs.emplace_back(kind, static_cast<std::size_t>(*n));
        any = true;
      }
      if (!any) return Error(Code::kInvalidArgument, "--fault-bmc: give at least one BMC index");
    } else if (flag == "--max-sessions") {
      auto n = parse_int(flag, value, 0, 100000);
      if (!n) return n.take_error();
      o.redfish.max_sessions = static_cast<int>(*n);
    } else if (flag == "--fault-status") {
      const auto eq2 = value.rfind('=');
      if (eq2 == std::string::npos || eq2 == 0 || value[0] != '/') {
        return Error(Code::kInvalidArgument, "--fault-status: give PATH=CODE, e.g. /redfish/v1/Chassis/1=500");
      }
      auto code = parse_int(flag, value.substr(eq2 + 1), 400, 599);
      if (!code) return code.take_error();
      o.redfish.fault_status[value.substr(0, eq2)] = static_cast<int>(*code);
    } else if (flag == "--fault-500-rate") {
      auto f = parse_fraction(flag, value);
      if (!f) return f.take_error();
      o.redfish.fault_500_rate = *f;
    } else if (flag == "--latency-ms") {
      auto n = parse_int(flag, value, 0, 3600000);
      if (!n) return n.take_error();
      o.redfish.latency = std::chrono::milliseconds(*n);
    } else if (flag == "--page-size") {
      auto n = parse_int(flag, value, 0, 100000);
      if (!n) return n.take_error();
      o.redfish.page_size = static_cast<int>(*n);
    } else if (flag == "--allowed-reset-types") {
      std::stringstream ss(value);
      std::string t;
      o.redfish.allowed_reset_types.clear();
      while (std::getline(ss, t, ',')) {
        if (t.empty()) continue;
        const auto& std_types = standard_reset_types();
        if (std::find(std_types.begin(), std_types.end(), t) == std_types.end()) {
          return Error(Code::kInvalidArgument, "--allowed-reset-types: unknown ResetType '" + t + "'");
        }
        o.redfish.allowed_reset_types.push_back(t);
      }
      if (o.redfish.allowed_reset_types.empty()) {
        return Error(Code::kInvalidArgument, "--allowed-reset-types: give at least one ResetType");
      }
    } else if (flag == "--etag-quirk") {
      if (value != "none" && value != "weak" && value != "always-412") {
        return Error(Code::kInvalidArgument, "--etag-quirk: expected none, weak or always-412, got '" + value + "'");
      }
      o.redfish.etag_quirk = value;
    } else if (flag == "--log-level") {
      if (!parse_log_level(value, &o.log_level)) {
        return Error(Code::kInvalidArgument, "--log-level: expected debug, info, warn, error or off");
      }
    } else {
      return Error(Code::kInvalidArgument, "unknown flag " + flag);
    }
  }
  if (o.help) return o;
  if (o.ipmi || (o.fleet.count > 0 && o.fleet.ipmi)) {
    if (o.redfish.user.size() > 16) {
      return Error(Code::kInvalidArgument, "--user: IPMI user names are at most 16 bytes");
    }
    if (o.redfish.password.size() > 20) {
      return Error(Code::kInvalidArgument, "--password: IPMI v2.0 passwords are at most 20 bytes");
    }
  }
  if (o.fleet.count > 0) {
    if (!o.libvirt_uri.empty() || !o.mockup_dir.empty()) {
      return Error(Code::kInvalidArgument, "--fleet serves in-memory machines: drop --libvirt-uri / --mockup");
    }
    if (o.fleet.manifest_path.empty()) {
      return Error(Code::kInvalidArgument, "--fleet needs --fleet-manifest FILE");
    }
    const double share = o.fleet.dead_fraction + o.fleet.lockout_fraction +
                         o.fleet.http500_fraction + o.fleet.latency_fraction;
    if (share > 1.0 + 1e-9) {
      return Error(Code::kInvalidArgument,
                   "the dead, lockout, 500 and latency fractions add up to more than 1");
    }
    for (const auto& f : o.fleet.fault_bmcs) {
      if (f.second >= o.fleet.count) {
        return Error(Code::kInvalidArgument, "--fault-bmc: index " + std::to_string(f.second) +
                                                 " is outside the fleet of " + std::to_string(o.fleet.count));
      }
    }
    return o;
  }
  if (!o.fleet.manifest_path.empty() || !o.fleet.fault_bmcs.empty()) {
    return Error(Code::kInvalidArgument, "--fleet-manifest and --fault-bmc need --fleet N");
  }
  if (o.libvirt_uri.empty() == o.mockup_dir.empty()) {
    return Error(Code::kInvalidArgument, "give exactly one of --libvirt-uri URI and --mockup DIR");
  }
  return o;
}

}  // namespace kiln::vbmc
