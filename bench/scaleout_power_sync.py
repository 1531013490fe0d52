#!/usr/bin/env python3
"""Scale-out power sync: the sweep of a 10,000-BMC kiln-vbmc fleet, one kilnd against three.

Usage: bench/scaleout_power_sync.py KILND KILN_VBMC [--bmcs 10000] [--interval 30] [--api-manage N]
                                    [--logs DIR] [--out bench/results/scaleout-power-sync.json]

Run as root (PostgreSQL 15 is started as the postgres user, as in bench/scaleout_bench.py, whose
helpers this imports: the private PostgreSQL, kilnd instances with a shared --key-file, cleanup).
In one run:
  1. `kiln-vbmc --fleet N --fleet-protocols ipmi` (addresses 127.8.0.1 + i, one UDP port, as in
     bench/power-sync), a fresh PostgreSQL database;
  2. one kilnd (power sync off) enrolls N nodes over the API, driver "ipmi", address
     ADDR:PORT, username and password from the fleet's manifest (kilnd seals the passwords with
     the shared key file), 8 keep-alive connections;
  3. out of `enroll`: the first --api-manage nodes (default: all) through
     PUT /v1/nodes/NAME/states/provision {"target":"manage"} (which verifies each BMC), timed;
     the rest, if any, for the setup only, with SQL in PostgreSQL with every kilnd stopped:
     provision_state 'manageable', power_state 'off' (what a fresh fleet reports, and what the
     verb records);
  4. baseline: ONE kilnd on that database, --power-sync-interval --interval, --log-level info;
     its first (cold: new IPMI sessions) and second (warm) "power sync sweep" log lines;
  5. three kilnd on the same database, same flags, each its own --data-dir; once every one lists
     three live conductors, each one's cold and warm sweep from its log. The nodes per instance
     must add up to N (checked) and match GET /v1/conductors' per-conductor node counts; the
     round's wall time is the max over the instances.
Writes bench/results/scaleout-power-sync.json and prints a Markdown table. Every wait is bounded;
every child (fleet, kilnd, PostgreSQL) is stopped at exit, on error too.
"""
import argparse, atexit, json, os, re, resource, secrets, select, shutil, signal, subprocess, sys, time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scaleout_bench as so  # noqa: E402  (registers its own cleanup: kilnd, PostgreSQL, temp dirs)

_fleet = []


def stop_fleet():
    for p in _fleet:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill(); p.wait(timeout=10)
    _fleet.clear()


atexit.register(stop_fleet)  # runs before scaleout_bench's cleanup (atexit is last in, first out)


def cpu_s(pid):
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return None


def start_fleet(vbmc, count, manifest):
    p = subprocess.Popen([vbmc, "--fleet", str(count), "--fleet-protocols", "ipmi", "--fleet-manifest", manifest,
                          "--fleet-address-base", "127.8.0.1", "--log-level", "error"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    _fleet.append(p)
    end, buf = time.monotonic() + 120, b""
    while time.monotonic() < end and p.poll() is None:
        r, _, _ = select.select([p.stdout], [], [], 1.0)
        if r:
            chunk = os.read(p.stdout.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
            if b"fleet ready" in buf and b"\n" in buf[buf.find(b"fleet ready"):]:
                line = buf[buf.find(b"fleet ready"):].split(b"\n")[0].decode()
                return p, line
    raise RuntimeError(f"kiln-vbmc fleet not ready within 120 s: {buf[-500:]!r}")


SWEEP = re.compile(r"^(\S+) \S+ \"?power sync sweep\"?.*?\bnodes=(\d+).*?\bfailed=(\d+).*?\bdrifted=(\d+)"
                   r".*?\bfaulted=(\d+).*?\bseconds=([\d.]+)")


def sweeps_in(inst):
    out = []
    path = os.path.join(inst.data, "log")
    if not os.path.exists(path):
        return out
    for line in open(path, errors="replace"):
        m = SWEEP.search(line)
        if m:
            out.append({"at": m.group(1), "nodes": int(m.group(2)), "failed": int(m.group(3)),
                        "drifted": int(m.group(4)), "faulted": int(m.group(5)), "seconds": float(m.group(6))})
    return out


def wait_sweeps(insts, n, limit_s):
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if all(len(sweeps_in(i)) >= n for i in insts):
            return [sweeps_in(i)[:n] for i in insts]
        for i in insts:
            if i.p.poll() is not None:
                raise RuntimeError(f"{i.label} exited ({i.p.returncode}) while waiting for sweeps")
        time.sleep(1.0)
    raise RuntimeError(f"not {n} sweeps on every instance within {limit_s} s: "
                       f"{[len(sweeps_in(i)) for i in insts]}")


def log_problems(inst):
    """warn/error lines of an instance's log (first few, and a count)."""
    path = os.path.join(inst.data, "log")
    bad = [l.rstrip() for l in open(path, errors="replace") if re.match(r"^\S+ (warn|error) ", l)]
    # expected at every start on loopback: no lease binding; /readyz probed (503) before ready
    other = [l for l in bad if "lease binding is off" not in l and "/readyz" not in l]
    return {"count": len(bad), "unexpected": len(other), "first_unexpected": other[:10]}


def psql(url_db, sql):
    r = subprocess.run(["psql", "-h", so._pg["sock"], "-p", str(so.PG_PORT), "-U", "postgres", "-d", url_db,
                        "-At", "-c", sql], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"psql: {r.stderr.strip()}")
    return r.stdout.strip()


def state_counts(db):
    rows = psql(db, "select provision_state, power_state, count(*) from nodes group by 1, 2 order by 1, 2")
    return [l.split("|") for l in rows.splitlines() if l]


def scenario(label, n, exe, token, flags, logs, interval, total):
    insts = []
    la0 = so.loadavg()
    try:
        t0 = time.monotonic()
        for k in range(n):
            insts.append(so.Instance(exe, token, flags, logs, f"{label}-{k}"))
        so.wait_alive(insts, token, n, limit_s=90)
        settled = time.monotonic() - t0
        if settled >= interval:
            print(f"[{label}] warning: ring settled after {settled:.1f} s, not before the first sweep", flush=True)
        cpu0 = [cpu_s(i.p.pid) for i in insts]
        per = wait_sweeps(insts, 2, limit_s=3 * interval + 1200)
        cpu1 = [cpu_s(i.p.pid) for i in insts]
        cs = so.conductors(insts[0].port, token)
        ids = [so.self_id(i, token) for i in insts]
        owned = {c["id"]: c["nodes"] for c in cs if c["alive"]}
        res = {"instances": n, "ring_settled_s": settled, "loadavg_before": la0, "loadavg_after": so.loadavg(),
               "per_instance": [], "conductors": cs}
        for k, i in enumerate(insts):
            res["per_instance"].append({"label": i.label, "conductor": ids[k], "cold": per[k][0], "warm": per[k][1],
                                        "conductor_nodes": owned.get(ids[k]),
                                        "kilnd_cpu_s_during_sweeps": (cpu1[k] - cpu0[k])
                                        if cpu0[k] is not None and cpu1[k] is not None else None,
                                        "rss_mb": so.rss_mb(i.p.pid), "log_problems": log_problems(i)})
        for phase in ("cold", "warm"):
            res[f"{phase}_nodes_sum"] = sum(x[phase]["nodes"] for x in res["per_instance"])
            res[f"{phase}_max_s"] = max(x[phase]["seconds"] for x in res["per_instance"])
            res[f"{phase}_failed_sum"] = sum(x[phase]["failed"] for x in res["per_instance"])
        res["nodes_sum_ok"] = res["cold_nodes_sum"] == total and res["warm_nodes_sum"] == total
        for x in res["per_instance"]:
            print(f"[{label}] {x['label']}: cold {x['cold']['nodes']} nodes {x['cold']['seconds']:.2f} s, warm "
                  f"{x['warm']['nodes']} nodes {x['warm']['seconds']:.2f} s, failed {x['cold']['failed']}/"
                  f"{x['warm']['failed']}, owns {x['conductor_nodes']}, {x['log_problems']['unexpected']} unexpected warn/error lines",
                  flush=True)
        print(f"[{label}] sums: cold {res['cold_nodes_sum']}, warm {res['warm_nodes_sum']} (of {total}); max "
              f"cold {res['cold_max_s']:.2f} s, warm {res['warm_max_s']:.2f} s", flush=True)
        return res
    finally:
        for i in insts:
            i.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kilnd")
    ap.add_argument("vbmc")
    ap.add_argument("--bmcs", type=int, default=10000)
    ap.add_argument("--interval", type=int, default=30, help="--power-sync-interval, seconds")
    ap.add_argument("--api-manage", type=int, default=None,
                    help="nodes moved to manageable through the API (timed; default all); the rest with SQL")
    ap.add_argument("--logs", help="keep every kilnd's log here")
    ap.add_argument("--out", default="bench/results/scaleout-power-sync.json")
    a = ap.parse_args()
    exe, vbmc = os.path.abspath(a.kilnd), os.path.abspath(a.vbmc)
    for f in (exe, vbmc):
        if not os.access(f, os.X_OK): sys.exit(f"{f}: not executable")
    if os.geteuid() != 0: sys.exit("run as root (PostgreSQL runs as the postgres user through runuser)")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # inherited by the fleet and kilnd
    logs = os.path.abspath(a.logs) if a.logs else None
    if logs: os.makedirs(logs, exist_ok=True)
    token = "kiln_bench_" + secrets.token_hex(16)
    res = {"machine": f"{os.cpu_count()} cores, " + open('/proc/meminfo').readline().split(':')[1].strip(),
           "kilnd": exe, "vbmc": vbmc, "bmcs": a.bmcs, "power_sync_interval_s": a.interval,
           "ulimit_n": hard, "loadavg_start": so.loadavg(),
           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    try:
        work = so.tmpdir("kiln-psync-")
        manifest = os.path.join(work, "manifest.json")
        t0 = time.monotonic()
        fleet, ready = start_fleet(vbmc, a.bmcs, manifest)
        res["fleet_ready"], res["fleet_start_s"] = ready, time.monotonic() - t0
        print(f"# {ready} ({res['fleet_start_s']:.1f} s)", flush=True)
        bmcs = [e for e in json.load(open(manifest)) if e.get("protocol", "ipmi") == "ipmi"][:a.bmcs]
        if len(bmcs) != a.bmcs: raise RuntimeError(f"manifest lists {len(bmcs)} IPMI BMCs, not {a.bmcs}")

        res["postgresql"] = so.pg_start()
        db = "psync"
        url = so.pg_createdb(db)
        key = os.path.join(so.tmpdir("kiln-psync-shared-"), "kiln.key")
        base = ["--database", url, "--key-file", key]

        # setup: enroll over the API, then out of enroll
        setup = so.Instance(exe, token, base + ["--power-sync-interval", "0"], logs, "setup")
        try:
            names = [f"ps-{k:05d}" for k in range(a.bmcs)]
            reqs = [("POST", "/v1/nodes", {"name": nm, "bmc": {"driver": "ipmi", "address": f"{e['address']}:{e['port']}",
                                                                "username": e["username"], "password": e["password"]}},
                     201) for nm, e in zip(names, bmcs)]
            dt, f = so.send_all([setup], token, reqs, conns_per_instance=8)
            if f: raise RuntimeError(f"enroll: {len(f)} failed, first {f[0]}")
            res["enroll_s"] = dt
            print(f"# enrolled {a.bmcs} ipmi nodes over the API in {dt:.1f} s ({a.bmcs / dt:.0f}/s)", flush=True)
            m = a.bmcs if a.api_manage is None else min(a.api_manage, a.bmcs)
            if m:
                t0 = time.monotonic()
                dt, f = so.send_all([setup], token, [("PUT", f"/v1/nodes/{nm}/states/provision", {"target": "manage"},
                                                      202) for nm in names[:m]], conns_per_instance=8)
                sample = set(names[:m])
                end, st = time.monotonic() + 600, {}
                while time.monotonic() < end:
                    st = {}
                    for node in so.all_nodes(setup.port, token):
                        if node["name"] in sample:
                            k = (node["provision_state"], bool(node.get("reservation")))
                            st[k] = st.get(k, 0) + 1
                    if st.get(("manageable", False), 0) + st.get(("enroll", False), 0) == m:
                        break
                    time.sleep(1.0)
                total_s = time.monotonic() - t0
                res["api_manage"] = {"nodes": m, "send_s": dt, "send_failures": len(f),
                                     "first_failure": f[0] if f else None, "until_settled_s": total_s,
                                     "manageable": st.get(("manageable", False), 0),
                                     "verbs_per_s": m / total_s,
                                     "extrapolated_s_for_all": a.bmcs / (m / total_s)}
                print(f"# manage over the API: {m} nodes in {total_s:.1f} s ({m / total_s:.1f}/s, "
                      f"{res['api_manage']['manageable']} manageable; {a.bmcs} would take ~"
                      f"{res['api_manage']['extrapolated_s_for_all'] / 60:.0f} min)", flush=True)
        finally:
            setup.stop()
        res["setup_problems"] = log_problems(setup)
        before = state_counts(db)
        n = psql(db, "update nodes set provision_state = 'manageable', power_state = 'off', version = version + 1 "
                     "where provision_state = 'enroll' and coalesce(reservation, '') = ''")  # kilnd all stopped
        res["sql_setup"] = {"before": before, "update": n, "after": state_counts(db)}
        print(f"# SQL setup (kilnd stopped): {before} -> {res['sql_setup']['after']}", flush=True)

        flags = base + ["--power-sync-interval", str(a.interval), "--log-level", "info"]
        res["one"] = scenario("one", 1, exe, token, flags, logs, a.interval, a.bmcs)
        res["three"] = scenario("three", 3, exe, token, flags, logs, a.interval, a.bmcs)
        res["fleet_cpu_s"] = cpu_s(fleet.pid)
        res["final_states"] = state_counts(db)
        res["loadavg_end"] = so.loadavg()
        for ph in ("cold", "warm"):
            res[f"{ph}_ratio_three_over_one"] = res["three"][f"{ph}_max_s"] / res["one"][f"{ph}_max_s"]
    finally:
        stop_fleet()
        so.cleanup()
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        with open(a.out, "w") as fo: json.dump(res, fo, indent=2)
    print_table(res)


def print_table(res):
    one, three = res["one"], res["three"]
    print("\n| run | instance | cold sweep: nodes | cold s | warm sweep: nodes | warm s | failed (cold/warm) |")
    print("|---|---|---|---|---|---|---|")
    x = one["per_instance"][0]
    print(f"| 1 kilnd (baseline) | - | {x['cold']['nodes']} | {x['cold']['seconds']:.2f} | {x['warm']['nodes']} | "
          f"{x['warm']['seconds']:.2f} | {x['cold']['failed']}/{x['warm']['failed']} |")
    for k, x in enumerate(three["per_instance"]):
        print(f"| 3 kilnd | {k} | {x['cold']['nodes']} | {x['cold']['seconds']:.2f} | {x['warm']['nodes']} | "
              f"{x['warm']['seconds']:.2f} | {x['cold']['failed']}/{x['warm']['failed']} |")
    print(f"| 3 kilnd | sum / max | {three['cold_nodes_sum']} | {three['cold_max_s']:.2f} | {three['warm_nodes_sum']} | "
          f"{three['warm_max_s']:.2f} | {three['cold_failed_sum']}/{three['warm_failed_sum']} |")
    print(f"\nratio, 3 kilnd (max) / 1 kilnd: cold {res['cold_ratio_three_over_one']:.2f}, warm "
          f"{res['warm_ratio_three_over_one']:.2f}; load average start {res['loadavg_start']}, end {res['loadavg_end']}")


if __name__ == "__main__":
    main()
