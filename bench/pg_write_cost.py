#!/usr/bin/env python3
"""What one node create costs on PostgreSQL, on both sides of the socket.

Usage: bench/pg_write_cost.py KILND [--nodes 3000] [--conns 8] [--no-analyze] [--perf FILE]
                              [--runs 1]

KILND is a kilnd binary (a Release build; several may be given with --runs alternating them:
`bench/pg_write_cost.py A B --runs 3` runs A, B, A, B, A, B). For each run it starts its own
PostgreSQL 15 (initdb in a temp dir, Unix socket only, default settings: fsync and
synchronous_commit on) with pg_stat_statements loaded, one kilnd on it, creates 200 nodes to warm
up, runs ANALYZE (unless --no-analyze: then the tables have no statistics, as on a database
created minutes ago), resets PostgreSQL's statistics, and creates --nodes nodes over the API
(POST /v1/nodes as bench/api_bench.py, --conns keep-alive connections). It prints, per create:
kilnd's CPU and every PostgreSQL process's CPU (utime+stime from /proc), WAL syncs
(pg_stat_wal), commits (pg_stat_database), and the statements by total time
(pg_stat_statements). --perf FILE also records `perf record -a -g` over the creates (root).
Run as root (PostgreSQL is started as the postgres user with runuser). Loopback and a Unix socket
only; every child is stopped at exit.
"""
import argparse, os, secrets, subprocess, sys, time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scaleout_bench as sb  # noqa: E402
from api_bench import seed  # noqa: E402


def cpu_seconds(pids):
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass  # a backend that ended meanwhile
    return total / os.sysconf("SC_CLK_TCK")


def postgres_pids():
    out = subprocess.run(["pgrep", "-u", "postgres"], capture_output=True, text=True).stdout.split()
    return [int(x) for x in out]


def psql(db, q):
    return subprocess.run(["psql", "-h", sb._pg["sock"], "-p", str(sb.PG_PORT), "-U", "postgres", "-d", db, "-Atc", q],
                          capture_output=True, text=True, check=True).stdout.strip()


def one_run(exe, a):
    token = "kiln_bench_" + secrets.token_hex(16)
    try:
        sb.pg_start(["shared_preload_libraries=pg_stat_statements"])
        key = os.path.join(sb.tmpdir("kiln-pgw-"), "kiln.key")
        url = sb.pg_createdb("bench_write")
        inst = sb.Instance(exe, token, ["--database", url, "--key-file", key], None, "pg")
        seed(inst.port, token, 0, 200)
        psql("bench_write", "CREATE EXTENSION pg_stat_statements")
        if not a.no_analyze:
            psql("bench_write", "ANALYZE")
        psql("bench_write", "SELECT pg_stat_reset(); SELECT pg_stat_reset_shared('wal'); SELECT pg_stat_statements_reset()")
        k0, p0 = cpu_seconds([inst.p.pid]), cpu_seconds(postgres_pids())
        perf = None
        if a.perf:
            perf = subprocess.Popen(["perf", "record", "-a", "-g", "-F", "499", "-o", a.perf], stderr=subprocess.DEVNULL)
            time.sleep(1)
        dt, _ = seed(inst.port, token, 200, a.nodes, conns=a.conns)
        if perf:
            perf.send_signal(2)
            perf.wait()
        k1, p1 = cpu_seconds([inst.p.pid]), cpu_seconds(postgres_pids())
        time.sleep(0.6)  # statistics reach the shared counters after each backend's next report
        wal_syncs = int(psql("bench_write", "SELECT wal_sync FROM pg_stat_wal"))
        commits = int(psql("bench_write", "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"))
        n = a.nodes
        print(f"{os.path.basename(exe)}: {n} creates over {a.conns} connections in {dt:.2f} s = {n / dt:.0f}/s; "
              f"per create: kilnd CPU {(k1 - k0) / n * 1000:.2f} ms, PostgreSQL CPU {(p1 - p0) / n * 1000:.2f} ms, "
              f"WAL syncs {wal_syncs / n:.2f}, commits {commits / n:.2f}")
        print(psql("bench_write", "SELECT calls, round(total_exec_time::numeric, 1) AS ms, "
                   "left(regexp_replace(query, '\\s+', ' ', 'g'), 110) FROM pg_stat_statements "
                   "WHERE query NOT LIKE '%pg_stat%' ORDER BY total_exec_time DESC LIMIT 14"))
        inst.stop()
    finally:
        sb.cleanup()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kilnd", nargs="+", help="kilnd binaries (Release), run alternately")
    ap.add_argument("--nodes", type=int, default=3000)
    ap.add_argument("--conns", type=int, default=8)
    ap.add_argument("--runs", type=int, default=1, help="rounds over the binaries")
    ap.add_argument("--no-analyze", action="store_true", help="leave the tables without statistics")
    ap.add_argument("--perf", help="record perf -a -g over the creates into this file (last run wins)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root (PostgreSQL is started as the postgres user with runuser)")
    for _ in range(a.runs):
        for exe in a.kilnd:
            one_run(os.path.abspath(exe), a)


if __name__ == "__main__":
    main()
