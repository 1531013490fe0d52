#!/usr/bin/env python3
"""API benchmark for kilnd: seed nodes over the API, then wrk.

Usage: bench/api_bench.py BUILD_DIR [--nodes 10000] [--big 100000] [--duration 20]

Measures, on one kilnd started here on loopback with a fresh data dir:
  - time to create N nodes over the API (8 keep-alive connections, POST /v1/nodes)
  - wrk -c8 -t2 for D seconds on GET /v1/nodes?limit=100 and GET /v1/nodes/{id}:
    requests/s and p99 latency
  - kilnd RSS after seeding N nodes, and after seeding up to --big nodes
Prints a Markdown table and writes bench/results/api.json.
Only loopback traffic; every loop is bounded.
"""
import argparse, http.client, json, os, re, secrets, shutil, signal, subprocess, sys, tempfile, threading, time

def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")

def start_kilnd(build, data, token, extra=(), exe=None):
    """Starts BUILD/controller/kilnd (or `exe`) on a loopback port with `extra` flags; waits for /readyz."""
    exe = exe or os.path.join(build, "controller", "kilnd")
    p = subprocess.Popen([exe, "--listen", "127.0.0.1:0", "--data-dir", data, "--bootstrap-token", token,
                          "--log-level", "warn", *extra], stdout=subprocess.PIPE,
                         stderr=open(os.path.join(data, "log"), "w"))
    line = p.stdout.readline().decode()
    m = re.match(r"listening on 127\.0\.0\.1:(\d+)", line)
    if not m:
        p.kill(); sys.exit(f"kilnd did not start: {line!r}")
    port = int(m.group(1))
    for _ in range(200):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2); c.request("GET", "/readyz")
            if c.getresponse().status == 200: break
        except OSError: pass
        time.sleep(0.05)
    return p, port

def seed(port, token, start, count, conns=8):
    """Creates nodes start..start+count-1; returns (seconds, ids)."""
    ids = [None] * count
    errors = []
    def worker(k):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        hdr = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        for i in range(k, count, conns):
            n = start + i
            body = json.dumps({"name": f"bench-{n:06d}", "profile": "h100-sxm-8x",
                               "bmc": {"driver": "fake", "address": f"10.{n>>16&255}.{n>>8&255}.{n&255}",
                                       "username": "admin", "password": "pw"},
                               "ports": [{"address": "02:%02x:%02x:%02x:%02x:01" % (n>>24&255, n>>16&255, n>>8&255, n&255)}]})
            c.request("POST", "/v1/nodes", body, hdr)
            r = c.getresponse(); data = r.read()
            if r.status != 201:
                errors.append((r.status, data[:200])); return
            ids[i] = json.loads(data)["id"]
    t0 = time.monotonic()
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(conns)]
    for t in ts: t.start()
    for t in ts: t.join()
    dt = time.monotonic() - t0
    if errors: sys.exit(f"seeding failed: {errors[0]}")
    return dt, ids

def wrk(port, token, path, duration, threads=2, conns=8):
    out = subprocess.run(["wrk", f"-t{threads}", f"-c{conns}", f"-d{duration}s", "--latency", "-H", f"Authorization: Bearer {token}",
                          f"http://127.0.0.1:{port}{path}"], capture_output=True, text=True, timeout=duration + 60).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    def ms(v, unit): return float(v) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
    m = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rps": rps, "p99_ms": ms(m.group(1), m.group(2)), "non_2xx": int(non2xx.group(1)) if non2xx else 0}

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build"); ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--big", type=int, default=100000); ap.add_argument("--duration", type=int, default=20)
    a = ap.parse_args()
    if not shutil.which("wrk"): sys.exit("wrk not found (apt-get install wrk)")
    token = "kiln_bench_" + secrets.token_hex(16)
    data = tempfile.mkdtemp(prefix="kiln-bench-")
    p, port = start_kilnd(a.build, data, token)
    res = {"machine": f"{os.cpu_count()} cores, " + open('/proc/meminfo').readline().split(':')[1].strip()}
    try:
        res["rss_empty_mb"] = rss_mb(p.pid)
        dt, ids = seed(port, token, 0, a.nodes)
        res["create_nodes"] = a.nodes; res["create_seconds"] = dt; res["create_per_s"] = a.nodes / dt
        res["rss_at_nodes_mb"] = rss_mb(p.pid)
        mid = ids[len(ids) // 2]
        res["list"] = wrk(port, token, "/v1/nodes?limit=100", a.duration)
        res["get"] = wrk(port, token, f"/v1/nodes/{mid}", a.duration)
        res["rss_after_wrk_mb"] = rss_mb(p.pid)
        if a.big > a.nodes:
            dt2, _ = seed(port, token, a.nodes, a.big - a.nodes)
            res["big_nodes"] = a.big; res["big_seed_seconds"] = dt2
            res["rss_at_big_mb"] = rss_mb(p.pid)
            res["list_at_big"] = wrk(port, token, "/v1/nodes?limit=100", max(5, a.duration // 4))
            res["rss_at_big_after_list_mb"] = rss_mb(p.pid)
    finally:
        p.send_signal(signal.SIGTERM); p.wait(timeout=20)
        shutil.rmtree(data, ignore_errors=True)
    os.makedirs("bench/results", exist_ok=True)
    with open("bench/results/api.json", "w") as f: json.dump(res, f, indent=2)
    print(json.dumps(res, indent=2))
    print()
    print("| figure | value | target |\n|---|---|---|")
    print(f"| create {a.nodes} nodes over the API (8 connections) | {res['create_seconds']:.1f} s ({res['create_per_s']:.0f}/s) | |")
    print(f"| GET /v1/nodes?limit=100, {a.nodes} nodes | {res['list']['rps']:.0f} req/s, p99 {res['list']['p99_ms']:.1f} ms | ≥ 2,000 req/s, p99 < 20 ms |")
    print(f"| GET /v1/nodes/{{id}} | {res['get']['rps']:.0f} req/s, p99 {res['get']['p99_ms']:.1f} ms | ≥ 15,000 req/s, p99 < 20 ms |")
    print(f"| kilnd RSS at {a.nodes} nodes (after wrk) | {res['rss_after_wrk_mb']:.0f} MB | |")
    if "rss_at_big_mb" in res:
        print(f"| kilnd RSS at {a.big} nodes | {res['rss_at_big_after_list_mb']:.0f} MB | < 150 MB |")
        print(f"| GET /v1/nodes?limit=100, {a.big} nodes | {res['list_at_big']['rps']:.0f} req/s, p99 {res['list_at_big']['p99_ms']:.1f} ms | |")

if __name__ == "__main__":
    main()
