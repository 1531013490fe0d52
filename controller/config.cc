#include "controller/config.h"

#include <charconv>
#include <cstdlib>
#include <string_view>

namespace kiln {
namespace {

bool parse_int(std::string_view s, long long lo, long long hi, long long* out) {
  long long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

Status parse_listen(std::string_view v, KilndConfig& c) {
  auto colon = v.rfind(':');
  if (colon == std::string_view::npos) return Error::invalid("--listen", "must be HOST:PORT");
  std::string_view host = v.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  long long port = 0;
  if (host.empty() || !parse_int(v.substr(colon + 1), 0, 65535, &port))
    return Error::invalid("--listen", "must be HOST:PORT with a port from 0 to 65535");
  c.listen_host = std::string(host);
  c.listen_port = static_cast<uint16_t>(port);
  return ok_status();
}

Status apply(std::string_view flag, std::string_view v, KilndConfig& c) {
  long long n = 0;
  if (flag == "--listen") return parse_listen(v, c);
  if (flag == "--data-dir") {
    if (v.empty()) return Error::invalid(std::string(flag), "must not be empty");
    c.data_dir = std::string(v);
  } else if (flag == "--key-file") {
    if (v.empty()) return Error::invalid(std::string(flag), "must not be empty");
    c.key_file = std::string(v);
  } else if (flag == "--database") {
    // Where the store lives: empty is SQLite in --data-dir; a PostgreSQL URL
    // is the database several kilnd share (docs/scale-out.md).
    if (!v.empty() && v.rfind("postgresql://", 0) != 0 && v.rfind("postgres://", 0) != 0)
      return Error::invalid(std::string(flag), "must be a postgresql:// URL (or empty for SQLite in --data-dir)");
    c.database = std::string(v);
  } else if (flag == "--bootstrap-token") {
    if (v.size() < 16) return Error::invalid(std::string(flag), "must be at least 16 characters");
    c.bootstrap_token = std::string(v);
  } else if (flag == "--tls-cert") {
    c.tls_cert = std::string(v);
  } else if (flag == "--tls-key") {
    c.tls_key = std::string(v);
  } else if (flag == "--log-level") {
    if (!parse_log_level(v, &c.log_level)) return Error::invalid(std::string(flag), "must be debug, info, warn, error or off");
  } else if (flag == "--io-threads") {
    if (!parse_int(v, 1, 64, &n)) return Error::invalid(std::string(flag), "must be an integer from 1 to 64");
    c.io_threads = static_cast<int>(n);
  } else if (flag == "--step-timeout") {
    if (!parse_int(v, 1, 7 * 86400, &n)) return Error::invalid(std::string(flag), "must be seconds from 1 to 604800");
    c.step_timeout = std::chrono::seconds(n);
  } else if (flag == "--timeout") {
    auto eq = v.find('=');
    auto state = eq == std::string_view::npos ? std::nullopt : parse_provision_state(v.substr(0, eq));
    if (!state || !is_transient(*state) || !parse_int(v.substr(eq + 1), 1, 7 * 86400, &n))
      return Error::invalid(std::string(flag), "must be STATE=SECONDS for a transient state (e.g. deploying=1800)");
    c.state_timeouts[*state] = std::chrono::seconds(n);
  } else if (flag == "--timeout-check-ms") {
    if (!parse_int(v, 10, 600000, &n)) return Error::invalid(std::string(flag), "must be milliseconds from 10 to 600000");
    c.timeout_check_interval = std::chrono::milliseconds(n);
  } else if (flag == "--allocation-interval-ms") {
    if (!parse_int(v, 10, 600000, &n)) return Error::invalid(std::string(flag), "must be milliseconds from 10 to 600000");
    c.allocation_interval = std::chrono::milliseconds(n);
  } else if (flag == "--power-sync-interval") {
    if (!parse_int(v, 0, 86400, &n)) return Error::invalid(std::string(flag), "must be seconds from 0 (off) to 86400");
    c.power_sync_interval = std::chrono::seconds(n);
  } else if (flag == "--power-sync-concurrency") {
    if (!parse_int(v, 1, 100000, &n)) return Error::invalid(std::string(flag), "must be an integer from 1 to 100000");
    c.power_sync_concurrency = static_cast<std::size_t>(n);
  } else if (flag == "--power-sync-max-failures") {
    if (!parse_int(v, 1, 1000, &n)) return Error::invalid(std::string(flag), "must be an integer from 1 to 1000");
    c.power_sync_max_failures = static_cast<int>(n);
  } else if (flag == "--heartbeat-interval-ms") {
    if (!parse_int(v, 10, 600000, &n)) return Error::invalid(std::string(flag), "must be milliseconds from 10 to 600000");
    c.heartbeat_interval = std::chrono::milliseconds(n);
  } else if (flag == "--conductor-timeout-ms") {
    if (!parse_int(v, 10, 3600000, &n))
      return Error::invalid(std::string(flag), "must be milliseconds from 10 to 3600000");
    c.conductor_timeout = std::chrono::milliseconds(n);
  } else if (flag == "--advertise-url") {
    if (v.rfind("http://", 0) != 0 && v.rfind("https://", 0) != 0)
      return Error::invalid(std::string(flag), "must be an http:// or https:// URL");
    c.advertise_url = std::string(v);
  } else if (flag == "--boot-url") {
    if (v.rfind("http://", 0) != 0 && v.rfind("https://", 0) != 0)
      return Error::invalid(std::string(flag), "must be an http:// or https:// URL");
    c.boot_url = std::string(v);
  } else if (flag == "--pxe-interface") {
    if (v.empty() || v.size() >= 16) return Error::invalid(std::string(flag), "must be a network interface name");
    c.pxe_interface = std::string(v);
  } else if (flag == "--pxe-range") {
    auto comma = v.find(',');
    if (comma == std::string_view::npos || comma == 0 || comma + 1 == v.size())
      return Error::invalid(std::string(flag), "must be START,END (e.g. 10.77.0.100,10.77.0.199)");
    c.pxe_range_start = std::string(v.substr(0, comma));
    c.pxe_range_end = std::string(v.substr(comma + 1));
  } else if (flag == "--pxe-address") {
    if (v.empty()) return Error::invalid(std::string(flag), "must be an IPv4 address");
    c.pxe_address = std::string(v);
  } else if (flag == "--pxe-discovery") {
    if (v != "true" && v != "false" && v != "1" && v != "0")
      return Error::invalid(std::string(flag), "takes no value (or true/false)");
    c.pxe_discovery = v == "true" || v == "1";
  } else if (flag == "--dnsmasq") {
    if (v.empty()) return Error::invalid(std::string(flag), "must be a path");
    c.dnsmasq = std::string(v);
  } else if (flag == "--ipxe-dir") {
    if (v.empty()) return Error::invalid(std::string(flag), "must be a directory");
    c.ipxe_dir = std::string(v);
  } else if (flag == "--deploy-ramdisk") {
    if (v.empty()) return Error::invalid(std::string(flag), "must be an image name");
    c.deploy_ramdisk = std::string(v);
  } else if (flag == "--lease-binding") {
    if (v != "auto" && v != "on" && v != "off") return Error::invalid(std::string(flag), "must be auto, on or off");
    c.lease_binding = std::string(v);
  } else if (flag == "--dhcp-leases") {
    if (v.empty() || v[0] != '/') return Error::invalid(std::string(flag), "must be an absolute path");
    c.dhcp_leases = std::string(v);
  } else if (flag == "--multinode-collective") {
    if (v != "nccl" && v != "tcp") return Error::invalid(std::string(flag), "must be nccl or tcp (tcp: tests only)");
    c.multinode_collective = std::string(v);
  } else if (flag == "--multinode-assemble-timeout") {
    if (!parse_int(v, 1, 86400, &n)) return Error::invalid(std::string(flag), "must be seconds from 1 to 86400");
    c.multinode_assemble_timeout = std::chrono::seconds(n);
  } else if (flag == "--image-dir") {
    if (v.empty()) return Error::invalid(std::string(flag), "must be a directory");
    c.image_dirs.emplace_back(v);
  } else if (flag == "--web-dir") {
    if (v.empty()) return Error::invalid(std::string(flag), "must be a directory");
    c.web_dir = std::string(v);
  } else if (flag == "--image-url-allow") {
    Result<boot::Cidr> cidr = boot::parse_cidr(v);
    if (!cidr) return cidr.take_error();
    c.image_url_allow.push_back(*cidr);
  } else if (flag == "--max-body-bytes") {
    if (!parse_int(v, 1024, 1LL << 32, &n)) return Error::invalid(std::string(flag), "must be bytes from 1024 to 4294967296");
    c.max_body_bytes = static_cast<std::size_t>(n);
  } else if (flag == "--image-upload-max") {
    if (!parse_int(v, 1024, 1LL << 50, &n))
      return Error::invalid(std::string(flag), "must be bytes from 1024 to 1125899906842624");
    c.image_upload_max = static_cast<uint64_t>(n);
  } else {
    return Error::invalid(std::string(flag), "unknown flag (see --help)");
  }
  return ok_status();
}

}  // namespace

std::string kilnd_usage() {
  return R"(usage: kilnd [flags]
  --listen HOST:PORT        API address (default 127.0.0.1:8080; port 0 picks one)   KILN_LISTEN
  --data-dir DIR            SQLite file DIR/kiln.db and key DIR/kiln.key (default ./var)  KILN_DATA_DIR
  --key-file PATH           the secret-sealing key (default DATA_DIR/kiln.key; created when
                            absent); instances sharing a database need the same one  KILN_KEY_FILE
  --database URL            postgresql://USER@HOST:PORT/DB: the store several kilnd share
                            (default: SQLite in --data-dir; docs/scale-out.md)    KILN_DATABASE
  --bootstrap-token TOKEN   create this admin token if no admin token exists      KILN_BOOTSTRAP_TOKEN
  --tls-cert FILE           PEM certificate: serve HTTPS (with --tls-key)          KILN_TLS_CERT
  --tls-key FILE            PEM private key                                        KILN_TLS_KEY
  --log-level LEVEL         debug|info|warn|error|off (default info)               KILN_LOG_LEVEL
  --io-threads N            I/O threads (default 2)
  --step-timeout SECONDS    timeout of every transient state (default 1800)        KILN_STEP_TIMEOUT
  --timeout STATE=SECONDS   per-state timeout override, repeatable (e.g. verifying=300)
  --timeout-check-ms MS     retry of a failed timeout check; between kilnd, the adoption pass (default 2000)
  --allocation-interval-ms MS  retry interval while an allocation is moving (default 1000; events and lease ends act at once)
  --power-sync-interval S   seconds between power-state sweeps, 0 = off (default 60)
  --power-sync-concurrency N  BMC calls in flight during a sweep (default 256)
  --power-sync-max-failures N failed sweeps in a row before power_failure (default 3)
  --heartbeat-interval-ms MS  how often this conductor heartbeats and re-reads the others
                            (default 2000 with --database, 60000 alone on SQLite)  KILN_HEARTBEAT_INTERVAL_MS
  --conductor-timeout-ms MS silence after which a conductor is dead and its nodes move to the
                            others (default 10000; above the heartbeat interval)  KILN_CONDUCTOR_TIMEOUT_MS
  --advertise-url URL       the API URL this conductor registers (default http(s)://<host>:<port>
                            of the listen address)                                 KILN_ADVERTISE_URL
  --max-body-bytes N        largest request body (default 4194304)
  --image-dir DIR           where registered local image files may lie, repeatable
                            (default DATA_DIR/images); nothing outside can be registered
  --web-dir DIR             the portal's built files, served at / (default: web/dist of
                            the source tree kilnd was built from)                 KILN_WEB_DIR
  --image-upload-max N      largest image upload, PUT /v1/images/{id}/content, in bytes
                            (default 68719476736, 64 GiB)
  --image-url-allow CIDR    let image downloads reach these addresses although they are
                            loopback, link-local or metadata ones, repeatable
  --boot-url URL            base URL nodes reach kilnd at (default http://<listen host>:<port>,
                            or http://<pxe address>:<port> with PXE)
  --pxe-interface IFACE     turn PXE on: run dnsmasq (DHCP+TFTP) bound to IFACE only
  --pxe-range START,END     DHCP range on IFACE (required with --pxe-interface)
  --pxe-address IP          kilnd's IPv4 on IFACE (default: the interface's first)
  --pxe-discovery           answer unknown MACs too (default: ignore them)
  --dnsmasq PATH            dnsmasq binary (default /usr/sbin/dnsmasq)
  --ipxe-dir DIR            iPXE binaries served over TFTP (default /usr/lib/ipxe)
  --deploy-ramdisk NAME     ramdisk image booted for agent work (default deploy-ramdisk)
  --lease-binding MODE      auto|on|off: serve per-MAC boot scripts and NoCloud seeds only
                            to the address DHCP leased to that MAC. auto (default): bind to
                            dnsmasq's leases (--pxe-interface) or --dhcp-leases, and with
                            neither refuse them all; on: refuse to start without a lease
                            file; off: serve anyone (unsafe outside a lab)
  --dhcp-leases FILE        a dnsmasq lease file to bind to (default DATA_DIR/dnsmasq/leases
                            with --pxe-interface)
  --multinode-collective C  nccl_multinode collective: nccl (default) or tcp, a test-only
                            TCP all-reduce that proves the rendezvous without GPUs
  --multinode-assemble-timeout S  seconds a validating node waits for the rest of its
                            allocation before nccl_multinode runs with those present (default 600)
  --help
)";
}

Result<KilndConfig> parse_kilnd_config(int argc, char** argv, bool* help) {
  KilndConfig c;
  *help = false;
  // Environment first, flags override.
  const std::pair<const char*, const char*> env[] = {
      {"KILN_LISTEN", "--listen"},         {"KILN_DATA_DIR", "--data-dir"}, {"KILN_KEY_FILE", "--key-file"},
      {"KILN_DATABASE", "--database"},
      {"KILN_BOOTSTRAP_TOKEN", "--bootstrap-token"}, {"KILN_TLS_CERT", "--tls-cert"},
      {"KILN_TLS_KEY", "--tls-key"},       {"KILN_LOG_LEVEL", "--log-level"},
      {"KILN_STEP_TIMEOUT", "--step-timeout"}, {"KILN_WEB_DIR", "--web-dir"},
      {"KILN_HEARTBEAT_INTERVAL_MS", "--heartbeat-interval-ms"},
      {"KILN_CONDUCTOR_TIMEOUT_MS", "--conductor-timeout-ms"}, {"KILN_ADVERTISE_URL", "--advertise-url"},
  };
  for (const auto& [var, flag] : env) {
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') {
      Status s = apply(flag, v, c);
      if (!s) return Error(Code::kInvalidArgument, std::string(var) + ": " + s.error().fields[0].message);
    }
  }
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      *help = true;
      return c;
    }
    std::string_view flag = a, value;
    if (a == "--pxe-discovery") {  // the one flag without a value
      c.pxe_discovery = true;
      continue;
    }
    if (auto eq = a.find('='); eq != std::string_view::npos && a.rfind("--", 0) == 0) {
      flag = a.substr(0, eq);
      value = a.substr(eq + 1);
    } else {
      if (i + 1 >= argc) return Error::invalid(std::string(a), "needs a value");
      value = argv[++i];
    }
    Status s = apply(flag, value, c);
    if (!s) return s.take_error();
  }
  if (!c.pxe_interface.empty() && c.pxe_range_start.empty())
    return Error::invalid("--pxe-range", "is required with --pxe-interface");
  if (c.lease_binding == "on" && c.pxe_interface.empty() && c.dhcp_leases.empty())
    return Error::invalid("--lease-binding", "on needs a lease file: --pxe-interface or --dhcp-leases");
  // A heartbeat that is set, or the 2 s PostgreSQL peers beat at by default
  // (MembershipOptions::kPeerHeartbeat), must fit in the timeout. Alone on
  // SQLite with the default heartbeat the timeout judges no one.
  if (c.heartbeat_interval || !c.database.empty()) {
    const std::chrono::milliseconds beat = c.heartbeat_interval.value_or(std::chrono::seconds(2));
    if (c.conductor_timeout <= beat)
      return Error::invalid("--conductor-timeout-ms", "must be longer than --heartbeat-interval-ms");
  }
  if (c.tls_cert.empty() != c.tls_key.empty())
    return Error::invalid(c.tls_cert.empty() ? "--tls-cert" : "--tls-key", "--tls-cert and --tls-key go together");
  return c;
}

}  // namespace kiln
