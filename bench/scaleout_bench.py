#!/usr/bin/env python3
"""Scale-out benchmark: several kilnd on one PostgreSQL, against one kilnd on SQLite.

Usage: bench/scaleout_bench.py KILND [--nodes 10000] [--duration 20] [--takeover-nodes 3000]
                               [--repeats 3] [--logs DIR] [--pg-conf KEY=VALUE]

KILND is a kilnd binary (a Release build: build/release/controller/kilnd, or a copy of it).
The script starts its own PostgreSQL 15 (initdb in a temp dir, Unix socket only, no TCP; its
settings are the defaults, fsync and synchronous_commit on, unless --pg-conf says otherwise), and
in one run measures:
  a. creating --nodes nodes over the API (8 keep-alive connections, POST /v1/nodes, as
     bench/api_bench.py): one kilnd on SQLite (the baseline), one kilnd on PostgreSQL, three
     kilnd on PostgreSQL seeded at once (3+3+2 connections, the nodes split evenly);
  b. wrk --latency for --duration seconds on GET /v1/nodes?limit=100 and GET /v1/nodes/{id}:
     -t2 -c8 against the one instance; for three instances one wrk per instance at the same
     time (-t1 -c3, -t1 -c3, -t1 -c2: 8 connections in all), req/s summed, p99 per instance;
  c. takeover: three kilnd (default --heartbeat-interval-ms 2000 / --conductor-timeout-ms 10000)
     with --takeover-nodes fake nodes made available; kill -9 one, poll GET /v1/conductors on a
     survivor every 50 ms until the dead one is alive=false with nodes 0 and the live ones'
     nodes sum to the total. --repeats times (the killed one restarted with a fresh data dir
     each time, until all three see three alive), then once with 300 / 2000 ms.
All instances share one --key-file; each has its own --data-dir. Prints Markdown tables and
writes bench/results/scaleout.json. Loopback and a Unix socket only; every loop is bounded;
every child (kilnd, wrk, PostgreSQL) is stopped at exit, on error too.
"""
import argparse, atexit, http.client, json, os, re, secrets, shutil, signal, statistics, subprocess, sys
import tempfile, threading, time

sys.dont_write_bytecode = True  # no bench/__pycache__ from the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from api_bench import start_kilnd, seed, rss_mb  # noqa: E402

PG_BIN = "/usr/lib/postgresql/15/bin"
PG_PORT = 5432  # only names the socket file inside our private socket dir: no clash possible

# ---------------------------------------------------------------- children and cleanup

_kilnds = []      # every kilnd Popen started here
_pg = {}          # {"data": dir, "sock": dir} while our PostgreSQL runs
_tmpdirs = []


def cleanup():
    for p in _kilnds:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in _kilnds:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill(); p.wait(timeout=10)
    _kilnds.clear()
    if _pg:
        subprocess.run(["runuser", "-u", "postgres", "--", f"{PG_BIN}/pg_ctl", "-D", _pg["data"], "-m", "fast",
                        "-w", "-t", "30", "stop"], capture_output=True, timeout=60)
        _pg.clear()
    for d in _tmpdirs:
        shutil.rmtree(d, ignore_errors=True)
    _tmpdirs.clear()


atexit.register(cleanup)
signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))
signal.signal(signal.SIGHUP, lambda *_: sys.exit("hangup"))


def tmpdir(prefix):
    d = tempfile.mkdtemp(prefix=prefix)
    _tmpdirs.append(d)
    return d


def loadavg():
    return [float(x) for x in open("/proc/loadavg").read().split()[:3]]


# ---------------------------------------------------------------- PostgreSQL

def pg_start(conf=()):
    data, sock = tmpdir("kiln-pg-data-"), tmpdir("kiln-pg-sock-")
    shutil.chown(data, "postgres", "postgres"); shutil.chown(sock, "postgres", "postgres")
    subprocess.run(["runuser", "-u", "postgres", "--", f"{PG_BIN}/initdb", "-D", data, "-A", "trust", "-U",
                    "postgres"], check=True, capture_output=True, timeout=120)
    _pg.update(data=data, sock=sock)
    subprocess.run(["runuser", "-u", "postgres", "--", f"{PG_BIN}/pg_ctl", "-D", data, "-l", f"{data}/server.log",
                    "-o", f"-k {sock} -c listen_addresses='' -p {PG_PORT}" + "".join(f" -c {c}" for c in conf),
                    "-w", "-t", "60", "start"],
                   check=True, capture_output=True, timeout=90)
    ver = subprocess.run([f"{PG_BIN}/postgres", "--version"], capture_output=True, text=True).stdout.strip()
    return ver


def pg_createdb(name):
    subprocess.run(["psql", "-h", _pg["sock"], "-p", str(PG_PORT), "-U", "postgres", "-q", "-c",
                    f"create database {name}"], check=True, capture_output=True, timeout=60)
    return f"postgresql://postgres@/{name}?host={_pg['sock']}&port={PG_PORT}"


# ---------------------------------------------------------------- kilnd

class Instance:
    def __init__(self, exe, token, flags, logs, label):
        self.data = tmpdir("kiln-so-")
        self.label = label
        self.p, self.port = start_kilnd(None, self.data, token, flags, exe=exe)
        _kilnds.append(self.p)
        self.logs = logs

    def stop(self, sig=signal.SIGTERM):
        if self.p.poll() is None:
            self.p.send_signal(sig)
            try:
                self.p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.p.kill(); self.p.wait(timeout=10)
        self.keep_log()

    def keep_log(self):
        if self.logs and os.path.exists(os.path.join(self.data, "log")):
            shutil.copy(os.path.join(self.data, "log"), os.path.join(self.logs, f"{self.label}.log"))


def request(port, token, method, path, body=None, timeout=30):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        hdr = {"Authorization": f"Bearer {token}"}
        if body is not None:
            hdr["Content-Type"] = "application/json"
        c.request(method, path, json.dumps(body) if body is not None else None, hdr)
        r = c.getresponse()
        data = r.read()
        return r.status, (json.loads(data) if data else None)
    finally:
        c.close()


def conductors(port, token):
    st, body = request(port, token, "GET", "/v1/conductors", timeout=10)
    if st != 200:
        raise RuntimeError(f"GET /v1/conductors -> {st} {body}")
    return body["conductors"]


def self_id(inst, token):
    for c in conductors(inst.port, token):
        if c["self"]:
            return c["id"]
    raise RuntimeError("no conductor with self=true")


def wait_alive(insts, token, n, limit_s=60):
    """Until every instance in `insts` sees exactly n live conductors."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        try:
            if all(sum(1 for c in conductors(i.port, token) if c["alive"]) == n for i in insts):
                return
        except (OSError, RuntimeError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"instances did not all see {n} live conductors within {limit_s} s")


def send_all(insts, token, reqs, conns_per_instance=3):
    """Sends (method, path, body, expected) requests, spread round robin over the instances, each
    instance served by `conns_per_instance` keep-alive connections. Returns (seconds, failures)."""
    failures = []
    lock = threading.Lock()
    total_conns = len(insts) * conns_per_instance

    def worker(k):
        inst = insts[k % len(insts)]
        c = http.client.HTTPConnection("127.0.0.1", inst.port, timeout=60)
        hdr = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        for j in range(k, len(reqs), total_conns):
            method, path, body, expect = reqs[j]
            try:
                c.request(method, path, json.dumps(body), hdr)
                r = c.getresponse(); data = r.read()
                st = r.status
            except OSError as e:
                st, data = -1, str(e).encode()
                c.close(); c = http.client.HTTPConnection("127.0.0.1", inst.port, timeout=60)
            if st != expect:
                with lock:
                    failures.append((method, path, st, data[:200].decode(errors="replace")))
        c.close()

    t0 = time.monotonic()
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(total_conns)]
    for t in ts: t.start()
    for t in ts: t.join()
    return time.monotonic() - t0, failures


def all_nodes(port, token):
    out, path = [], "/v1/nodes?limit=1000"
    for _ in range(10000):
        st, page = request(port, token, "GET", path, timeout=60)
        if st != 200:
            raise RuntimeError(f"GET {path} -> {st}")
        out.extend(page["nodes"])
        if not page.get("next"):
            return out
        path = page["next"][page["next"].find("/v1/"):]
    raise RuntimeError("node listing did not end")


def wait_nodes(port, token, state, count, limit_s):
    """Until `count` nodes are in `state` with no reservation; returns seconds waited."""
    t0 = time.monotonic()
    last = {}
    while time.monotonic() - t0 < limit_s:
        nodes = all_nodes(port, token)
        done = sum(1 for n in nodes if n["provision_state"] == state and not n.get("reservation"))
        if done == count and len(nodes) == count:
            return time.monotonic() - t0
        last = {}
        for n in nodes:
            last[n["provision_state"]] = last.get(n["provision_state"], 0) + 1
        time.sleep(1.0)
    raise RuntimeError(f"nodes not all {state} within {limit_s} s: {last}")


# ---------------------------------------------------------------- wrk

def run_wrk(port, token, path, duration, threads, conns):
    """One wrk process (started, not waited for)."""
    return subprocess.Popen(["wrk", f"-t{threads}", f"-c{conns}", f"-d{duration}s", "--latency",
                             "-H", f"Authorization: Bearer {token}", f"http://127.0.0.1:{port}{path}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def parse_wrk(out):
    def ms(v, unit): return float(v) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)\b", out)
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", out)
    total = re.search(r"(\d+) requests in", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if not (rps and p99 and total):
        raise RuntimeError(f"wrk output not understood: {out!r}")
    lat = re.search(r"Latency\s+[\d.]+\w+\s+[\d.]+\w+\s+([\d.]+)(us|ms|s)\b", out)  # avg, stdev, max
    return {"rps": float(rps.group(1)), "p50_ms": ms(*p50.groups()), "p99_ms": ms(*p99.groups()),
            "max_ms": ms(*lat.groups()) if lat else None,
            "requests": int(total.group(1)), "non_2xx": int(non2xx.group(1)) if non2xx else 0,
            "socket_errors": sum(int(x) for x in sock.groups()) if sock else 0,
            "socket_error_kinds": dict(zip(("connect", "read", "write", "timeout"), map(int, sock.groups())))
            if sock else {}}


def wrk_group(insts, token, path_of, duration):
    """wrk on every instance at once: -t2 -c8 for one, 8 connections split (3, 3, 2) for three."""
    if len(insts) == 1:
        split = [(2, 8)]
    else:
        split = [(1, c) for c in ([3, 3, 2] if len(insts) == 3 else [max(1, 8 // len(insts))] * len(insts))]
    procs = [run_wrk(i.port, token, path_of(k), duration, t, c) for k, (i, (t, c)) in enumerate(zip(insts, split))]
    per = []
    for p in procs:
        out, _ = p.communicate(timeout=duration + 60)
        per.append(parse_wrk(out))
    return {"rps": sum(x["rps"] for x in per), "p99_ms_max": max(x["p99_ms"] for x in per),
            "non_2xx": sum(x["non_2xx"] for x in per), "socket_errors": sum(x["socket_errors"] for x in per),
            "requests": sum(x["requests"] for x in per), "per_instance": per}


# ---------------------------------------------------------------- scenarios

def seed_split(insts, token, count):
    """Seeds `count` nodes through the instances at once, split evenly, 8 connections in all."""
    conns = [3, 3, 2] if len(insts) == 3 else [8 // len(insts)] * len(insts)
    share = [count // len(insts) + (1 if k < count % len(insts) else 0) for k in range(len(insts))]
    starts = [sum(share[:k]) for k in range(len(insts))]
    out, errs = [None] * len(insts), []

    def one(k):
        try:
            out[k] = seed(insts[k].port, token, starts[k], share[k], conns=conns[k])
        except BaseException as e:  # seed() exits on a non-201
            errs.append(repr(e))

    t0 = time.monotonic()
    ts = [threading.Thread(target=one, args=(k,)) for k in range(len(insts))]
    for t in ts: t.start()
    for t in ts: t.join()
    dt = time.monotonic() - t0
    if errs:
        raise RuntimeError(f"seeding failed: {errs}")
    ids = [i for _, part in out for i in part]
    if None in ids or len(ids) != count:
        raise RuntimeError("seeding lost nodes (a connection failed)")
    return dt, ids


def counters(port, names):
    """Prometheus counters from GET /metrics, summed by name (absent: 0)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
    finally:
        c.close()
    out = dict.fromkeys(names, 0)
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in out: out[parts[0]] += int(float(parts[1]))
    return out


def api_scenario(label, insts, token, nodes, duration):
    la0 = loadavg()
    dt, ids = seed_split(insts, token, nodes)
    r = {"instances": len(insts), "create_nodes": nodes, "create_seconds": dt, "create_per_s": nodes / dt}
    print(f"[{label}] created {nodes} nodes in {dt:.1f} s ({nodes / dt:.0f}/s)", flush=True)
    mid = ids[len(ids) // 2]
    r["list"] = wrk_group(insts, token, lambda k: "/v1/nodes?limit=100", duration)
    print(f"[{label}] list: {r['list']['rps']:.0f} req/s, p99 max {r['list']['p99_ms_max']:.1f} ms, "
          f"non-2xx {r['list']['non_2xx']}", flush=True)
    r["get"] = wrk_group(insts, token, lambda k: f"/v1/nodes/{mid}", duration)
    print(f"[{label}] get: {r['get']['rps']:.0f} req/s, p99 max {r['get']['p99_ms_max']:.1f} ms, "
          f"non-2xx {r['get']['non_2xx']}", flush=True)
    r["rss_mb"] = [rss_mb(i.p.pid) for i in insts]
    # GET /v1/conductors counts every member's nodes: 20 calls one after
    # another on the first instance, checked to add up to every node.
    times = []
    for _ in range(20):
        t0 = time.monotonic()
        listed = conductors(insts[0].port, token)
        times.append(1000.0 * (time.monotonic() - t0))
        owned = sum(c["nodes"] for c in listed if c["alive"])
        if owned != nodes:
            raise RuntimeError(f"GET /v1/conductors: live conductors own {owned} nodes, not {nodes}")
    r["conductors_ms"] = statistics.median(times)
    print(f"[{label}] GET /v1/conductors: median {r['conductors_ms']:.1f} ms", flush=True)
    # Read cache hits, and on PostgreSQL the generation reads and the
    # statements that answered them, over the whole scenario.
    names = ("kiln_api_read_cache_hits_total", "kiln_api_read_cache_misses_total",
             "kiln_api_generation_reads_total", "kiln_api_generation_statements_total")
    r["counters"] = dict.fromkeys(names, 0)
    for i in insts:
        for k, v in counters(i.port, names).items(): r["counters"][k] += v
    print(f"[{label}] counters: {r['counters']}", flush=True)
    r["loadavg_before"], r["loadavg_after"] = la0, loadavg()
    return r


def takeover_once(insts, ids, token, total, timeout_ms, victim):
    """kill -9 insts[victim]; poll a survivor until the ring settled. Returns seconds."""
    dead = ids[victim]
    survivor = insts[(victim + 1) % len(insts)]
    t0 = time.monotonic()
    insts[victim].p.kill()
    insts[victim].p.wait(timeout=10)
    limit = timeout_ms / 1000.0 + 30
    polls, last = 0, None
    while time.monotonic() - t0 < limit:
        try:
            cs = conductors(survivor.port, token)
            polls += 1
            d = [c for c in cs if c["id"] == dead]
            live = sum(c["nodes"] for c in cs if c["alive"])
            last = [(c["id"][:8], c["alive"], c["nodes"]) for c in cs if c["alive"] or c["id"] == dead]
            if d and not d[0]["alive"] and d[0]["nodes"] == 0 and live == total:
                return time.monotonic() - t0, polls
        except (OSError, RuntimeError) as e:
            last = repr(e)
        time.sleep(0.05)
    raise RuntimeError(f"ring did not settle within {limit} s after kill -9: {last}")


def takeover_scenario(exe, token, key, logs, total, repeats, hb_ms, to_ms, url, existing=None, tag=""):
    flags = ["--database", url, "--key-file", key, "--heartbeat-interval-ms", str(hb_ms),
             "--conductor-timeout-ms", str(to_ms)]
    gen = [0]

    def start(k):
        gen[0] += 1
        return Instance(exe, token, flags, logs, f"takeover{tag}-{k}-gen{gen[0]}")

    insts = [start(k) for k in range(3)]
    res = {"heartbeat_interval_ms": hb_ms, "conductor_timeout_ms": to_ms, "nodes": total, "runs_s": [],
           "polls": []}
    try:
        wait_alive(insts, token, 3, limit_s=max(60, 3 * to_ms / 1000))
        if existing is None:
            names = [f"to-{n:05d}" for n in range(total)]
            dt, f = send_all(insts, token, [("POST", "/v1/nodes", {"name": nm, "bmc": {
                "driver": "fake", "address": f"bmc-{n}", "username": "admin", "password": "pw"}}, 201)
                for n, nm in enumerate(names)])
            if f: raise RuntimeError(f"enroll: {len(f)} failed, first {f[0]}")
            res["enroll_seconds"] = dt
            dt, f = send_all(insts, token, [("PUT", f"/v1/nodes/{nm}/states/provision", {"target": "manage"}, 202)
                                            for nm in names])
            if f: raise RuntimeError(f"manage: {len(f)} failed, first {f[0]}")
            res["manage_send_seconds"] = dt
            res["manage_wait_seconds"] = wait_nodes(insts[0].port, token, "manageable", total, 600)
            # provide through another instance than manage went through
            dt, f = send_all(insts, token, [("PUT", f"/v1/nodes/{names[(n + 1) % total]}/states/provision",
                                             {"target": "provide"}, 202) for n in range(total)])
            if f: raise RuntimeError(f"provide: {len(f)} failed, first {f[0]}")
            res["provide_send_seconds"] = dt
            res["provide_wait_seconds"] = wait_nodes(insts[0].port, token, "available", total, 600)
            print(f"[takeover{tag}] {total} nodes available: enroll {res['enroll_seconds']:.1f} s, manage "
                  f"{res['manage_send_seconds']:.1f}+{res['manage_wait_seconds']:.1f} s, provide "
                  f"{res['provide_send_seconds']:.1f}+{res['provide_wait_seconds']:.1f} s", flush=True)
        for r in range(repeats):
            ids = [self_id(i, token) for i in insts]
            victim = r % 3
            la = loadavg()
            s, polls = takeover_once(insts, ids, token, total, to_ms, victim)
            insts[victim].keep_log()
            res["runs_s"].append(s); res["polls"].append(polls)
            res.setdefault("loadavg_at_kill", []).append(la)
            print(f"[takeover{tag}] hb {hb_ms} ms / timeout {to_ms} ms, run {r + 1}: ring settled {s:.2f} s "
                  f"after kill -9 ({polls} polls)", flush=True)
            # restart the killed one, fresh data dir, until all three see three alive
            t0 = time.monotonic()
            insts[victim] = start(victim)
            wait_alive(insts, token, 3, limit_s=max(60, 3 * to_ms / 1000))
            res.setdefault("rejoin_seconds", []).append(time.monotonic() - t0)
        res["median_s"] = statistics.median(res["runs_s"])
        # every node still available and free after the takeovers
        nodes = all_nodes(insts[0].port, token)
        res["after"] = {"nodes": len(nodes),
                        "available_free": sum(1 for n in nodes if n["provision_state"] == "available"
                                              and not n.get("reservation"))}
    finally:
        for i in insts:
            i.stop()
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kilnd", help="kilnd binary (Release)")
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--duration", type=int, default=20)
    ap.add_argument("--takeover-nodes", type=int, default=3000, help="0: no takeover scenario (API figures only)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--logs", help="keep every kilnd's log here")
    ap.add_argument("--pg-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a PostgreSQL setting (-c), e.g. synchronous_commit=off; default: none (durable commits)")
    ap.add_argument("--out", default="bench/results/scaleout.json")
    a = ap.parse_args()
    exe = os.path.abspath(a.kilnd)
    if not os.access(exe, os.X_OK): sys.exit(f"{exe}: not executable")
    if not shutil.which("wrk"): sys.exit("wrk not found (apt-get install wrk)")
    for b in ("initdb", "pg_ctl", "postgres"):
        if not os.access(f"{PG_BIN}/{b}", os.X_OK): sys.exit(f"{PG_BIN}/{b} not found (postgresql-15)")
    if os.geteuid() != 0: sys.exit("run as root (PostgreSQL is started as the postgres user with runuser)")
    logs = os.path.abspath(a.logs) if a.logs else None
    if logs: os.makedirs(logs, exist_ok=True)

    token = "kiln_bench_" + secrets.token_hex(16)
    res = {"machine": f"{os.cpu_count()} cores, " + open('/proc/meminfo').readline().split(':')[1].strip(),
           "kilnd": exe, "loadavg_start": loadavg(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    try:
        res["postgresql"] = pg_start(a.pg_conf)
        res["pg_conf"] = a.pg_conf
        shared = tmpdir("kiln-so-shared-")
        key = os.path.join(shared, "kiln.key")

        # a. + b., the baseline first: one kilnd on SQLite
        i = Instance(exe, token, [], logs, "sqlite")
        try: res["sqlite"] = api_scenario("sqlite", [i], token, a.nodes, a.duration)
        finally: i.stop()

        url = pg_createdb("bench_one")
        i = Instance(exe, token, ["--database", url, "--key-file", key], logs, "pg1")
        try: res["pg1"] = api_scenario("pg x1", [i], token, a.nodes, a.duration)
        finally: i.stop()

        url = pg_createdb("bench_three")
        # the first creates the schema (and the key file, already there); the others after it
        insts = []
        try:
            for k in range(3):
                insts.append(Instance(exe, token, ["--database", url, "--key-file", key], logs, f"pg3-{k}"))
            wait_alive(insts, token, 3)
            res["pg3"] = api_scenario("pg x3", insts, token, a.nodes, a.duration)
        finally:
            for x in insts: x.stop()

        # c. takeover, defaults, then the fast setting on the same database (nodes already available)
        if a.takeover_nodes > 0:
            url = pg_createdb("bench_takeover")
            res["takeover_default"] = takeover_scenario(exe, token, key, logs, a.takeover_nodes, a.repeats, 2000,
                                                        10000, url)
            res["takeover_fast"] = takeover_scenario(exe, token, key, logs, a.takeover_nodes, 1, 300, 2000, url,
                                                     existing=True, tag="-fast")
        res["loadavg_end"] = loadavg()
    finally:
        cleanup()
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "w") as f: json.dump(res, f, indent=2)
    print(json.dumps(res, indent=2))
    print_tables(res, a)


def print_tables(res, a):
    s, p1, p3 = res["sqlite"], res["pg1"], res["pg3"]
    print(f"\n| figure | SQLite, 1 kilnd (baseline) | PostgreSQL, 1 kilnd | PostgreSQL, 3 kilnd |\n|---|---|---|---|")
    print(f"| create {a.nodes} nodes (8 connections) | {s['create_seconds']:.1f} s ({s['create_per_s']:.0f}/s) | "
          f"{p1['create_seconds']:.1f} s ({p1['create_per_s']:.0f}/s) | {p3['create_seconds']:.1f} s "
          f"({p3['create_per_s']:.0f}/s) |")
    for key, name in (("list", "GET /v1/nodes?limit=100"), ("get", "GET /v1/nodes/{id}")):
        per3 = ", ".join(f"{x['p99_ms']:.1f}" for x in p3[key]["per_instance"])
        print(f"| {name} | {s[key]['rps']:.0f} req/s, p99 {s[key]['p99_ms_max']:.1f} ms | {p1[key]['rps']:.0f} "
              f"req/s, p99 {p1[key]['p99_ms_max']:.1f} ms | {p3[key]['rps']:.0f} req/s (sum), p99 {per3} ms |")
        print(f"| {name}: non-2xx / socket errors | {s[key]['non_2xx']} / {s[key]['socket_errors']} | "
              f"{p1[key]['non_2xx']} / {p1[key]['socket_errors']} | {p3[key]['non_2xx']} / "
              f"{p3[key]['socket_errors']} |")
    print(f"| GET /v1/conductors, median of 20 | {s['conductors_ms']:.1f} ms | {p1['conductors_ms']:.1f} ms | "
          f"{p3['conductors_ms']:.1f} ms |")
    print("\n| takeover (3 kilnd, kill -9 of one) | runs | median |\n|---|---|---|")
    for k in ("takeover_default", "takeover_fast"):
        if k not in res: continue
        t = res[k]
        print(f"| heartbeat {t['heartbeat_interval_ms']} ms, timeout {t['conductor_timeout_ms']} ms, {t['nodes']} "
              f"nodes | {', '.join(f'{x:.2f}' for x in t['runs_s'])} s | {t['median_s']:.2f} s |")


if __name__ == "__main__":
    main()
