#!/usr/bin/python3
"""Kiln's Ironic-compatible API (/ironic) against Ironic 21.4 itself, same run.

Usage: bench/ironic_api_bench.py KILND [--nodes 1000] [--shows 300] [--lists 15]
                                 [--version 1.78] [--install-ironic]

Ironic is Debian 12's (ironic-api and its dependency python3-ironic, 21.4.x)
run the way its standalone docs describe: the single-process `ironic` command
(API and conductor in one process, [DEFAULT]rpc_transport = none, so no
message queue and no json-rpc), auth_strategy = noauth, SQLite created by
`ironic-dbsync create_schema`, only the ipmi hardware type (ipmitool power and
management, ipxe boot, direct deploy: nothing contacts a BMC on enroll, list or
show), power sync off. It is not in scripts/install-deps (about 200
packages, a system user, uwsgi): install it with --install-ironic or
`apt-get install --no-install-recommends ironic-api` (a Debian policy-rc.d that
exits 101 keeps its init script from starting a service).

kilnd is started here on loopback with a fresh data dir, power sync off.
Each server is measured alone (Ironic first, then stopped; then kilnd), over
one keep-alive HTTP/1.1 connection, with the same request bodies and the
same microversion header (X-OpenStack-Ironic-API-Version):

  enroll  POST /v1/nodes, N times (driver ipmi with ipmi_address,
          ipmi_username and ipmi_password, properties, extra, resource_class:
          the same bytes for both; Kiln seals the password, Ironic stores it)
  list    GET /v1/nodes/detail with the N nodes (one page: both must return
          all N), --lists times
  show    GET /v1/nodes/{uuid} of nodes picked by one seeded sequence, --shows times

Figures are per-request latencies from the client (median, p90, p99) and the
ratio Ironic/Kiln of the medians. Prints a Markdown table; writes
bench/results/ironic_api.json. Only loopback traffic; every wait is bounded.
"""
import argparse
import http.client
import json
import os
import random
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from api_bench import start_kilnd  # noqa: E402  (the same kilnd launcher as the /v1 bench)

IRONIC_CONF = """[DEFAULT]
auth_strategy = noauth
rpc_transport = none
host = ironic-bench
enabled_hardware_types = ipmi
enabled_bios_interfaces = no-bios
enabled_boot_interfaces = ipxe
enabled_console_interfaces = no-console
enabled_deploy_interfaces = direct
enabled_inspect_interfaces = no-inspect
enabled_management_interfaces = ipmitool
enabled_network_interfaces = noop
enabled_power_interfaces = ipmitool
enabled_raid_interfaces = no-raid
enabled_rescue_interfaces = no-rescue
enabled_storage_interfaces = noop
enabled_vendor_interfaces = no-vendor
default_network_interface = noop
use_stderr = true
[api]
host_ip = 127.0.0.1
port = {port}
api_workers = 1
max_limit = {max_limit}
[database]
connection = sqlite:///{data}/ironic.sqlite
[deploy]
http_root = {data}/httpboot
http_url = http://127.0.0.1:1
[pxe]
tftp_root = {data}/tftpboot
[dhcp]
dhcp_provider = none
[conductor]
automated_clean = false
sync_power_state_interval = -1
[oslo_concurrency]
lock_path = {data}/locks
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(port, path, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", path)
            if c.getresponse().status == 200:
                return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def ironic_version():
    return subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "python3-ironic"],
                          capture_output=True, text=True).stdout.strip()


def install_ironic():
    policy = "/usr/sbin/policy-rc.d"
    if not (os.path.exists(policy) and "exit 101" in open(policy).read()):
        sys.exit(f"refusing to install ironic-api without a {policy} that exits 101: "
                 "its postinst would start an Ironic service on this machine")
    cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "ironic-api"]
    if os.path.exists("/tmp/kiln-apt.lock"):
        cmd = ["flock", "/tmp/kiln-apt.lock"] + cmd
    if os.geteuid() != 0:
        cmd = ["sudo"] + cmd
    subprocess.run(cmd, check=True, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))


def start_ironic(data, max_limit, wal):
    port = free_port()
    conf = os.path.join(data, "ironic.conf")
    for d in ["httpboot", "tftpboot"]:
        os.makedirs(os.path.join(data, d), exist_ok=True)
    with open(conf, "w") as f:
        f.write(IRONIC_CONF.format(port=port, data=data, max_limit=max_limit))
    subprocess.run(["ironic-dbsync", "--config-file", conf, "create_schema"], check=True,
                   stdout=subprocess.DEVNULL, stderr=open(os.path.join(data, "dbsync.log"), "w"), timeout=120)
    if wal:
        # journal_mode=WAL is stored in the file, so Ironic's connections
        # (oslo.db: synchronous left at SQLite's FULL) open it in WAL mode.
        subprocess.run(["sqlite3", os.path.join(data, "ironic.sqlite"), "PRAGMA journal_mode=WAL;"], check=True,
                       stdout=subprocess.DEVNULL, timeout=30)
    p = subprocess.Popen(["ironic", "--config-file", conf], stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(data, "ironic.log"), "w"))
    if not wait_http(port, "/", 60):
        p.kill()
        sys.exit(f"Ironic did not answer within 60 s; see {data}/ironic.log")
    return p, port


def node_body(i):
    """The enroll body both servers get, byte for byte."""
    return json.dumps({
        "name": f"bench-{i:06d}",
        "driver": "ipmi",
        "driver_info": {"ipmi_address": f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}",
                        "ipmi_username": "admin", "ipmi_password": "pw"},
        "resource_class": "bench",
        "properties": {"cpu_arch": "x86_64", "cpus": 8, "memory_mb": 65536, "local_gb": 400},
        "extra": {"rack": f"r{i % 40:02d}"},
    })


class Client:
    def __init__(self, port, prefix, headers):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.prefix = prefix
        self.headers = headers

    def call(self, method, path, body=None):
        h = dict(self.headers)
        if body is not None:
            h["Content-Type"] = "application/json"
        t0 = time.perf_counter()
        self.conn.request(method, self.prefix + path, body, h)
        r = self.conn.getresponse()
        data = r.read()
        dt = time.perf_counter() - t0
        return r.status, data, dt


def summary(samples):
    s = sorted(samples)

    def pct(p):
        return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]
    return {"n": len(s), "median_ms": statistics.median(s) * 1000, "p90_ms": pct(90) * 1000,
            "p99_ms": pct(99) * 1000, "total_s": sum(s)}


def measure(client, nodes, shows, lists, seed):
    enroll, ids = [], []
    for i in range(nodes):
        status, data, dt = client.call("POST", "/v1/nodes", node_body(i))
        if status != 201:
            sys.exit(f"POST /v1/nodes #{i} -> {status} {data[:300]!r}")
        enroll.append(dt)
        ids.append(json.loads(data)["uuid"])
    listing = []
    for _ in range(lists):
        status, data, dt = client.call("GET", "/v1/nodes/detail")
        if status != 200:
            sys.exit(f"GET /v1/nodes/detail -> {status} {data[:300]!r}")
        got = len(json.loads(data)["nodes"])
        if got != nodes:
            sys.exit(f"GET /v1/nodes/detail returned {got} nodes, not {nodes}")
        listing.append(dt)
    list_bytes = len(data)
    rng = random.Random(seed)
    showing = []
    for _ in range(shows):
        status, data, dt = client.call("GET", f"/v1/nodes/{ids[rng.randrange(nodes)]}")
        if status != 200:
            sys.exit(f"GET /v1/nodes/<uuid> -> {status} {data[:300]!r}")
        showing.append(dt)
    # What a show carries, to compare the two answers' size and fields.
    return {"enroll": summary(enroll), "list": summary(listing), "show": summary(showing),
            "list_bytes": list_bytes, "show_bytes": len(data), "show_fields": sorted(json.loads(data))}


def machine():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = open("/proc/meminfo").readline().split(":")[1].strip()
    return f"{os.cpu_count()} cores ({cpu}), {mem}, Linux {os.uname().release}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kilnd", help="the kilnd binary (a Release build for figures worth quoting)")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--shows", type=int, default=300)
    ap.add_argument("--lists", type=int, default=15)
    ap.add_argument("--version", default="1.78", help="the microversion both servers are sent")
    ap.add_argument("--install-ironic", action="store_true")
    ap.add_argument("--out", default="bench/results/ironic_api.json")
    a = ap.parse_args()

    if not shutil.which("ironic") or not shutil.which("ironic-dbsync"):
        if not a.install_ironic:
            sys.exit("Ironic is not installed: run with --install-ironic, or "
                     "apt-get install --no-install-recommends ironic-api (Debian 12: Ironic 21.4)")
        install_ironic()
    version_header = {"X-OpenStack-Ironic-API-Version": a.version, "Accept": "application/json"}
    res = {"machine": machine(), "load_before": os.getloadavg(), "nodes": a.nodes, "shows": a.shows,
           "lists": a.lists, "microversion": a.version, "ironic": ironic_version(),
           "kilnd": os.path.realpath(a.kilnd), "command": " ".join(sys.argv)}

    for key, wal in [("ironic_figures", False), ("ironic_wal_figures", True)]:
        data = tempfile.mkdtemp(prefix="ironic-bench-")
        try:
            p, port = start_ironic(data, max(1000, a.nodes), wal)
            try:
                res[key] = measure(Client(port, "", version_header), a.nodes, a.shows, a.lists, 7)
                print(f"{key}:", json.dumps({k: v for k, v in res[key].items() if k != "show_fields"}), flush=True)
            finally:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
        finally:
            shutil.rmtree(data, ignore_errors=True)

    token = "kiln_bench_" + secrets.token_hex(16)
    data = tempfile.mkdtemp(prefix="kiln-ironic-bench-")
    try:
        k, port = start_kilnd(None, data, token, extra=["--power-sync-interval", "0"],
                              exe=a.kilnd)
        try:
            res["kiln_figures"] = measure(Client(port, "/ironic", dict(version_header, **{"X-Auth-Token": token})),
                                          a.nodes, a.shows, a.lists, 7)
        finally:
            k.send_signal(signal.SIGTERM)
            k.wait(timeout=20)
    finally:
        shutil.rmtree(data, ignore_errors=True)
    res["load_after"] = os.getloadavg()
    i_fields, k_fields = set(res["ironic_figures"]["show_fields"]), set(res["kiln_figures"]["show_fields"])
    res["show_fields_only_ironic"] = sorted(i_fields - k_fields)
    res["show_fields_only_kiln"] = sorted(k_fields - i_fields)

    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=2)
    print(json.dumps(res, indent=2))
    print()
    print(f"| request ({a.nodes} nodes, microversion {a.version}) | Ironic {res['ironic']}, as shipped "
          "| Ironic, SQLite in WAL | Kiln /ironic | Ironic / Kiln (as shipped, WAL) |")
    print("|---|---|---|---|---|")

    def cell(f):
        return f"{f['median_ms']:.2f} ms (p90 {f['p90_ms']:.2f}, p99 {f['p99_ms']:.2f})"
    for key, label in [("enroll", "enroll: `POST /v1/nodes`"), ("list", "list: `GET /v1/nodes/detail`"),
                       ("show", "show: `GET /v1/nodes/{uuid}`")]:
        i, w, k = res["ironic_figures"][key], res["ironic_wal_figures"][key], res["kiln_figures"][key]
        print(f"| {label} | {cell(i)} | {cell(w)} | {cell(k)} "
              f"| {i['median_ms'] / k['median_ms']:.1f}x, {w['median_ms'] / k['median_ms']:.1f}x |")
    print()
    print(f"bytes: list Ironic {res['ironic_figures']['list_bytes']}, Kiln {res['kiln_figures']['list_bytes']}; "
          f"show Ironic {res['ironic_figures']['show_bytes']}, Kiln {res['kiln_figures']['show_bytes']}; "
          f"show fields only in Ironic {res['show_fields_only_ironic']}, only in Kiln {res['show_fields_only_kiln']}")


if __name__ == "__main__":
    main()
