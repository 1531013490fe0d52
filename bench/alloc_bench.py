#!/usr/bin/env python3
"""Allocation benchmark: tenants allocating and releasing fake nodes in a loop.

Usage: bench/alloc_bench.py BUILD_DIR [--nodes 1000] [--tenants 100] [--per 5] [--duration 60] [--keep]

One kilnd (BUILD_DIR/controller/kilnd) on loopback with a fresh data dir and
--nodes fake-driver nodes at zero delay, taken to `available` over the API.
Then --tenants tenants, each with a quota of --per nodes and its own token,
run one loop each for --duration seconds: POST /v1/allocations (count --per),
poll until ready, DELETE, poll until released. Measures:
  - allocations per second (full cycles: request, ready, released)
  - request->ready latency p50/p99 (controller overhead: the fake driver
    takes no time, so this is kilnd's own work plus the polling interval of
    the clients, 20 ms)
  - kilnd CPU seconds per allocation (utime+stime from /proc over the run)
Baseline, measured first in the same run: the same number of clients, each
driving --per nodes of its own straight through the operator's verbs (PUT
states/provision deploy, poll until active, undeploy, poll until available)
for the same duration: what the allocation layer (claim, quota, engine,
members, usage, events) adds over the deploys and cleanings it drives. Each
phase runs on a kilnd and data dir of its own, set up the same way, so
neither pays for the history the other wrote (with one kilnd for both, the
second phase read a database the first had grown). Needs --nodes >=
--tenants x --per.
Prints a Markdown table and writes bench/results/alloc.json.
Only loopback traffic; every loop is bounded by --duration.
"""
import argparse, hashlib, http.client, json, os, secrets, shutil, statistics, sys, tempfile, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from api_bench import start_kilnd  # noqa: E402 - the one way benches start kilnd

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIM6jHR8C6awzVMqmZAWuFW2u1isrYanrS/Ozu11WcKN8 bench@example"
POLL = 0.02


class Client:
    def __init__(self, port, token):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.h = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def call(self, method, path, body=None):
        self.c.request(method, path, json.dumps(body) if body is not None else None, self.h)
        r = self.c.getresponse(); data = r.read()
        return r.status, (json.loads(data) if data else None)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def parallel(n, fn, workers=8):
    errors = []
    def w(k):
        try:
            for i in range(k, n, workers): fn(i)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    ts = [threading.Thread(target=w, args=(k,)) for k in range(workers)]
    for t in ts: t.start()
    for t in ts: t.join()
    if errors: sys.exit(f"setup failed: {errors[0]}")


def prepare(port, token, nodes, tenants, per, images):
    admin = Client(port, token)
    path = os.path.join(images, "bench-os.img")
    with open(path, "wb") as f: f.write(b"\0" * 4096)
    s, body = admin.call("POST", "/v1/images", {"name": "bench-os", "kind": "os", "format": "raw", "source": path,
                                                "public": True, "size": 4096,
                                                "sha256": hashlib.sha256(b"\0" * 4096).hexdigest()})
    if s != 201: sys.exit(f"image: {s} {body}")
    ids = [None] * nodes
    def enroll(i):
        c = Client(port, token)
        s, b = c.call("POST", "/v1/nodes", {"name": f"b{i:05d}", "profile": "cpu-lab",
                                            "bmc": {"driver": "fake", "address": f"10.9.{i >> 8 & 255}.{i & 255}",
                                                    "username": "u", "password": "p"}})
        if s != 201: raise RuntimeError(f"enroll {s} {b}")
        ids[i] = b["id"]
        for target, want in (("manage", "manageable"), ("provide", "available")):
            s, b = c.call("PUT", f"/v1/nodes/{ids[i]}/states/provision", {"target": target})
            if s != 202: raise RuntimeError(f"{target} {s} {b}")
            for _ in range(3000):
                s, b = c.call("GET", f"/v1/nodes/{ids[i]}")
                if b["provision_state"] == want and not b.get("target_provision_state"): break
                time.sleep(POLL)
            else: raise RuntimeError(f"node {i} never {want}")
    parallel(nodes, enroll)
    tokens = [None] * tenants
    def tenant(i):
        c = Client(port, token)
        s, b = c.call("POST", "/v1/tenants", {"name": f"t{i:03d}", "quotas": [
            {"profile": "cpu-lab", "kind": "baremetal", "max_nodes": per}]})
        if s != 201: raise RuntimeError(f"tenant {s} {b}")
        s, b = c.call("POST", "/v1/tokens", {"name": f"t{i:03d}", "role": "tenant", "tenant": f"t{i:03d}"})
        if s != 201: raise RuntimeError(f"token {s} {b}")
        tokens[i] = b["token"]
    parallel(tenants, tenant)
    return tokens, ids


def run(port, tokens, per, duration):
    deadline = time.monotonic() + duration
    ready_ms, cycles, refused, failed = [], [0], [0], [0]
    lock = threading.Lock()
    def loop(tok):
        c = Client(port, tok)
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            s, a = c.call("POST", "/v1/allocations", {"profile": "cpu-lab", "kind": "baremetal", "count": per,
                                                      "image": "bench-os", "ssh_keys": [KEY]})
            if s != 202:
                with lock: refused[0] += 1
                time.sleep(POLL); continue
            state = a["state"]
            while state not in ("ready", "failed") and time.monotonic() < deadline + 30:
                time.sleep(POLL)
                s, a = c.call("GET", f"/v1/allocations/{a['id']}"); state = a["state"]
            t_ready = time.monotonic()
            if state != "ready":
                with lock: failed[0] += 1
            c.call("DELETE", f"/v1/allocations/{a['id']}")
            while state != "released" and time.monotonic() < deadline + 60:
                time.sleep(POLL)
                s, a = c.call("GET", f"/v1/allocations/{a['id']}"); state = a["state"]
            with lock:
                if state == "released" and t_ready - t0 >= 0: ready_ms.append((t_ready - t0) * 1000)
                cycles[0] += 1
    ts = [threading.Thread(target=loop, args=(t,)) for t in tokens]
    t0 = time.monotonic()
    for t in ts: t.start()
    for t in ts: t.join()
    return time.monotonic() - t0, cycles[0], ready_ms, refused[0], failed[0]


def run_direct(port, token, groups, duration):
    """The baseline: each client deploys and undeploys its own nodes."""
    deadline = time.monotonic() + duration
    ready_ms, cycles = [], [0]
    lock = threading.Lock()
    def wait_all(c, ids, want):
        pending = set(ids)
        while pending and time.monotonic() < deadline + 60:
            time.sleep(POLL)
            for i in list(pending):
                s, b = c.call("GET", f"/v1/nodes/{i}")
                if b["provision_state"] == want and not b.get("target_provision_state"): pending.discard(i)
        return not pending
    def loop(ids):
        c = Client(port, token)
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            for i in ids:
                s, b = c.call("PUT", f"/v1/nodes/{i}/states/provision", {"target": "deploy", "image": "bench-os"})
                if s != 202: raise RuntimeError(f"deploy {s} {b}")
            ok = wait_all(c, ids, "active")
            t_ready = time.monotonic()
            for i in ids:
                s, b = c.call("PUT", f"/v1/nodes/{i}/states/provision", {"target": "undeploy"})
                if s != 202: raise RuntimeError(f"undeploy {s} {b}")
            ok = wait_all(c, ids, "available") and ok
            with lock:
                if ok: ready_ms.append((t_ready - t0) * 1000)
                cycles[0] += 1
    ts = [threading.Thread(target=loop, args=(g,)) for g in groups]
    t0 = time.monotonic()
    for t in ts: t.start()
    for t in ts: t.join()
    return time.monotonic() - t0, cycles[0], ready_ms


def figures(wall, cycles, ready_ms, cpu):
    q = statistics.quantiles(ready_ms, n=100) if len(ready_ms) >= 2 else [float("nan")] * 99
    return {"duration_s": round(wall, 1), "cycles": cycles, "cycles_per_s": round(cycles / wall, 2),
            "ready_p50_ms": round(statistics.median(ready_ms), 1) if ready_ms else None,
            "ready_p99_ms": round(q[98], 1), "kilnd_cpu_s": round(cpu, 2),
            "kilnd_cpu_ms_per_cycle": round(cpu * 1000 / cycles, 1) if cycles else None}


def phase(a, run_phase):
    """Starts a fresh kilnd, sets it up (prepare), runs run_phase(port, token, tokens, ids) and
    stops it; returns (setup seconds, what run_phase returned, kilnd CPU seconds of the phase)."""
    data = tempfile.mkdtemp(prefix="kiln-alloc-bench-")
    images = os.path.join(data, "images"); os.makedirs(images, exist_ok=True)
    token = "kiln_bench_" + secrets.token_hex(16)
    p, port = start_kilnd(a.build, data, token, ("--image-dir", images, "--power-sync-interval", "0"))
    try:
        t0 = time.monotonic()
        tokens, ids = prepare(port, token, a.nodes, a.tenants, a.per, images)
        setup = time.monotonic() - t0
        cpu0 = cpu_seconds(p.pid)
        out = run_phase(port, token, tokens, ids)
        return setup, out, cpu_seconds(p.pid) - cpu0
    finally:
        p.send_signal(2); p.wait(timeout=30)
        if not a.keep: shutil.rmtree(data, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build"); ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--tenants", type=int, default=100); ap.add_argument("--per", type=int, default=5)
    ap.add_argument("--duration", type=int, default=60)
    ap.add_argument("--keep", action="store_true", help="keep each phase's data dir (the database) for a look after")
    a = ap.parse_args()
    if a.nodes < a.tenants * a.per: sys.exit("--nodes must be at least --tenants x --per (the baseline's nodes)")
    def direct(port, token, tokens, ids):
        groups = [ids[k * a.per:(k + 1) * a.per] for k in range(a.tenants)]
        return run_direct(port, token, groups, a.duration)
    def allocations(port, token, tokens, ids):
        return run(port, tokens, a.per, a.duration)
    base_setup, base_run, base_cpu = phase(a, direct)
    base = figures(*base_run, base_cpu)
    setup, (wall, cycles, ready_ms, refused, failed), cpu = phase(a, allocations)
    alloc = figures(wall, cycles, ready_ms, cpu)
    res = {"nodes": a.nodes, "tenants": a.tenants, "per": a.per,
           "setup_s": {"baseline": round(base_setup, 1), "allocations": round(setup, 1)},
           "allocations": dict(alloc, refused=refused, failed=failed), "baseline_direct_verbs": base,
           "ratio": {k: (round(alloc[k] / base[k], 2) if base.get(k) else None)
                     for k in ("cycles_per_s", "ready_p50_ms", "ready_p99_ms", "kilnd_cpu_ms_per_cycle")}}
    os.makedirs(os.path.join(os.path.dirname(__file__), "results"), exist_ok=True)
    with open(os.path.join(os.path.dirname(__file__), "results", "alloc.json"), "w") as f: json.dump(res, f, indent=1)
    print(f"{a.nodes} nodes, {a.tenants} clients x {a.per} nodes, {a.duration} s each, "
          f"setup {res['setup_s']['baseline']} s and {res['setup_s']['allocations']} s (a kilnd each)")
    print("| figure | allocations | baseline (direct verbs) | ratio |\n|---|---|---|---|")
    for k in ("cycles", "cycles_per_s", "ready_p50_ms", "ready_p99_ms", "kilnd_cpu_s", "kilnd_cpu_ms_per_cycle"):
        print(f"| {k} | {alloc[k]} | {base[k]} | {res['ratio'].get(k, '')} |")
    print(f"allocations refused {refused}, failed {failed}")


if __name__ == "__main__":
    main()
