#!/usr/bin/env python3
"""The read path against nginx: kilnd's node reads beside nginx serving the same bytes.

Usage: bench/read_path.py BUILD_DIR [--nodes 2000] [--duration 15] [--rounds 3]

One Release kilnd on loopback with a fresh data dir and N fake nodes (seeded
over the API), and Debian's nginx-light (worker_processes 2, access_log off)
serving, as static files, the very bytes kilnd returned for the same reads.
For each read, rounds alternate kilnd and nginx under the same wrk
(2 threads x 8 connections x D s); the median of the rounds is reported, with
the ratio kilnd/nginx:
  - GET /v1/nodes?limit=100           (a list page, staff view)
  - GET /v1/nodes/{id}                (one node)
  - the same two with If-None-Match: the ETag kilnd gave (a poller that already
    has the page; nginx answers its own 304 for its own ETag)
Prints a Markdown table and writes bench/results/read_path.json.
Loopback only; every step is bounded.
"""
import argparse, json, os, re, secrets, shutil, signal, statistics, subprocess, sys, tempfile, time
import http.client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from api_bench import seed, start_kilnd  # noqa: E402


def fetch(port, path, headers):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", path, headers=headers)
    r = c.getresponse()
    body = r.read()
    if r.status != 200:
        sys.exit(f"GET {path}: {r.status} {body[:200]!r}")
    return body, dict(r.getheaders())


def start_nginx(work, root, port):
    conf = os.path.join(work, "nginx.conf")
    os.makedirs(os.path.join(work, "tmp"), exist_ok=True)
    with open(conf, "w") as f:
        f.write(f"""
worker_processes 2;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log warn;
daemon off;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path {work}/tmp;
  proxy_temp_path {work}/tmp;
  fastcgi_temp_path {work}/tmp;
  uwsgi_temp_path {work}/tmp;
  scgi_temp_path {work}/tmp;
  default_type application/json;
  server {{
    listen 127.0.0.1:{port};
    root {root};
    location / {{ }}
  }}
}}
""")
    p = subprocess.Popen(["nginx", "-c", conf, "-p", work], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/node.json")
            if c.getresponse().status == 200:
                return p
        except OSError:
            pass
        time.sleep(0.05)
    p.kill()
    sys.exit("nginx did not start")


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wrk(port, path, duration, headers):
    cmd = ["wrk", "-t2", "-c8", f"-d{duration}s", "--latency"]
    for k, v in headers.items():
        cmd += ["-H", f"{k}: {v}"]
    out = subprocess.run(cmd + [f"http://127.0.0.1:{port}{path}"], capture_output=True, text=True,
                         timeout=duration + 60).stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not m:
        sys.exit(f"wrk gave no figure:\n{out}")
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if bad:
        sys.exit(f"wrk {path}: {bad.group(1)} non-2xx/3xx answers")
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--duration", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--exe", help="another kilnd binary (a baseline), else BUILD/controller/kilnd")
    a = ap.parse_args()
    for tool in ("wrk", "nginx"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found (scripts/install-deps installs it)")
    token = "kiln_bench_" + secrets.token_hex(16)
    data = tempfile.mkdtemp(prefix="kiln-read-bench-")
    work = tempfile.mkdtemp(prefix="kiln-read-nginx-")
    os.chmod(work, 0o755)  # nginx's workers run as nobody
    p, port = start_kilnd(a.build, data, token, exe=a.exe)
    n = None
    auth = {"Authorization": f"Bearer {token}"}
    res = {"machine": f"{os.cpu_count()} cores", "nodes": a.nodes, "duration_s": a.duration, "rounds": a.rounds,
           "kilnd": a.exe or os.path.join(a.build, "controller", "kilnd")}
    try:
        _, ids = seed(port, token, 0, a.nodes)
        mid = ids[len(ids) // 2]
        reads = {"list": ("/v1/nodes?limit=100", "/list.json"), "get": (f"/v1/nodes/{mid}", "/node.json")}
        root = os.path.join(work, "root")
        os.makedirs(root, mode=0o755)
        etags = {}
        for name, (kpath, npath) in reads.items():
            body, headers = fetch(port, kpath, auth)
            with open(os.path.join(root, npath.lstrip("/")), "wb") as f:
                f.write(body)
            os.chmod(os.path.join(root, npath.lstrip("/")), 0o644)
            res[f"{name}_bytes"] = len(body)
            etags[name] = headers.get("ETag") or headers.get("etag")
        nport = free_port()
        n = start_nginx(work, root, nport)
        nginx_etags = {}
        for name, (_, npath) in reads.items():
            body, headers = fetch(nport, npath, {})
            if len(body) != res[f"{name}_bytes"]:
                sys.exit(f"nginx served {len(body)} bytes of {npath}, kilnd {res[name + '_bytes']}")
            nginx_etags[name] = headers.get("ETag")
        cases = []
        for name, (kpath, npath) in reads.items():
            cases.append((name, kpath, npath, {}, {}))
            if etags[name]:
                cases.append((name + "_304", kpath, npath, {"If-None-Match": etags[name]},
                               {"If-None-Match": nginx_etags[name]}))
        for case, kpath, npath, kextra, nextra in cases:
            k_rounds, n_rounds = [], []
            for _ in range(a.rounds):
                k_rounds.append(wrk(port, kpath, a.duration, {**auth, **kextra}))
                n_rounds.append(wrk(nport, npath, a.duration, nextra))
            km, nm = statistics.median(k_rounds), statistics.median(n_rounds)
            res[case] = {"kilnd_rps": km, "nginx_rps": nm, "ratio": km / nm,
                         "kilnd_rounds": k_rounds, "nginx_rounds": n_rounds}
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=20)
        if n:
            n.send_signal(signal.SIGQUIT)
            n.wait(timeout=20)
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    os.makedirs("bench/results", exist_ok=True)
    with open("bench/results/read_path.json", "w") as f:
        json.dump(res, f, indent=2)
    print(json.dumps(res, indent=2))
    print("\n| read | kilnd req/s | nginx req/s | kilnd / nginx |\n|---|---|---|---|")
    for case in ("list", "list_304", "get", "get_304"):
        if case in res:
            r = res[case]
            print(f"| {case} | {r['kilnd_rps']:,.0f} | {r['nginx_rps']:,.0f} | {r['ratio']:.1%} |")


if __name__ == "__main__":
    main()
