#!/usr/bin/env python3
"""Image streaming: kilnd's GET /v1/images/{id}/content against nginx.

Both servers serve the same file from the page cache on loopback in the same
run: kilnd (its content route, sendfile(2), an os image read with a staff
token, as an agent's write_image reads it) and Debian's nginx-light (sendfile
on, as many workers as kilnd has I/O threads, a config of its own in a temp
dir). The clients are curl processes (C, so the client costs the same for both
servers): `--clients` of them at once, each downloading the whole file
`--downloads` times. Rounds alternate kilnd and nginx; the median of the
rounds is reported, with the ratio kilnd/nginx.

Usage: bench/image_stream/run.py BUILD_DIR [--size-mib 1024] [--clients 16]
       [--downloads 1] [--rounds 3] [--io-threads 2]
"""
import argparse
import hashlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

TOKEN = "kiln_bench_image_stream_admin_0001"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def make_file(path, size):
    """`size` bytes of incompressible data, and their sha256."""
    h = hashlib.sha256()
    block = os.urandom(4 << 20)
    left = size
    with open(path, "wb") as f:
        while left > 0:
            chunk = block[: min(left, len(block))]
            f.write(chunk)
            h.update(chunk)
            left -= len(chunk)
    return h.hexdigest()


def wait_http(url, headers=None, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        try:
            req = urllib.request.Request(url, method="HEAD", headers=headers or {})
            with urllib.request.urlopen(req, timeout=2) as r:
                if r.status in (200, 206):
                    return
        except Exception:
            time.sleep(0.1)
    raise SystemExit("server at %s did not come up" % url)


def start_kilnd(kilnd, work, io_threads, image_dir):
    data = os.path.join(work, "kilnd")
    os.makedirs(data)
    log = open(os.path.join(work, "kilnd.log"), "w")
    p = subprocess.Popen([kilnd, "--listen", "127.0.0.1:0", "--data-dir", data, "--bootstrap-token", TOKEN,
                          "--io-threads", str(io_threads), "--image-dir", image_dir, "--log-level", "warn", "--power-sync-interval", "0"],
                         stdout=subprocess.PIPE, stderr=log, text=True)
    line = p.stdout.readline()
    if not line.startswith("listening on "):
        raise SystemExit("kilnd did not start: " + line)
    port = int(line.strip().rsplit(":", 1)[1])
    return p, port


def register(port, path, size, sha):
    body = json.dumps({"name": "bench", "kind": "os", "format": "raw", "sha256": sha, "size": size,
                       "source": path}).encode()
    req = urllib.request.Request("http://127.0.0.1:%d/v1/images" % port, data=body, method="POST",
                                 headers={"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)["id"]


def start_nginx(work, root, workers):
    port = free_port()
    conf = os.path.join(work, "nginx.conf")
    with open(conf, "w") as f:
        f.write("""
worker_processes %d;
pid %s/nginx.pid;
error_log %s/nginx-error.log warn;
daemon off;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_timeout 75;
  client_body_temp_path %s/tmp;
  proxy_temp_path %s/tmp;
  fastcgi_temp_path %s/tmp;
  uwsgi_temp_path %s/tmp;
  scgi_temp_path %s/tmp;
  server {
    listen 127.0.0.1:%d;
    root %s;
    location / { }
  }
}
""" % (workers, work, work, work, work, work, work, work, port, root))
    os.makedirs(os.path.join(work, "tmp"), exist_ok=True)
    p = subprocess.Popen(["nginx", "-c", conf, "-p", work], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return p, port


def download_round(url, headers, clients, downloads, size):
    """Aggregate bytes/s of `clients` curl processes, each fetching `url` `downloads` times."""
    cmd = ["curl", "-sS", "--fail"]
    for k, v in headers.items():
        cmd += ["-H", "%s: %s" % (k, v)]
    for _ in range(downloads):
        cmd += ["-o", "/dev/null", "-w", "%{size_download}\\n", url]
    start = time.perf_counter()
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(clients)]
    total = 0
    for p in procs:
        out, _ = p.communicate()
        if p.returncode != 0:
            raise SystemExit("curl failed (%d)" % p.returncode)
        total += sum(int(x) for x in out.split())
    secs = time.perf_counter() - start
    expected = clients * downloads * size
    if total != expected:
        raise SystemExit("short downloads: %d of %d bytes" % (total, expected))
    return total / secs, secs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--downloads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--io-threads", type=int, default=2)
    a = ap.parse_args()
    kilnd = os.path.join(a.build_dir, "controller", "kilnd")
    if not os.access(kilnd, os.X_OK):
        raise SystemExit("no kilnd at " + kilnd)
    if shutil.which("nginx") is None:
        raise SystemExit("nginx is not installed (apt-get install nginx-light)")
    work = tempfile.mkdtemp(prefix="kiln-image-bench-")
    procs = []
    try:
        root = os.path.join(work, "www")
        os.makedirs(root)
        os.chmod(work, 0o755)
        size = a.size_mib << 20
        path = os.path.join(root, "image.raw")
        sha = make_file(path, size)
        os.chmod(root, 0o755)
        os.chmod(path, 0o644)
        k, kport = start_kilnd(kilnd, work, a.io_threads, root)
        procs.append(k)
        image = register(kport, path, size, sha)
        n, nport = start_nginx(work, root, a.io_threads)
        procs.append(n)
        kurl = "http://127.0.0.1:%d/v1/images/%s/content" % (kport, image)
        kheaders = {"Authorization": "Bearer " + TOKEN}
        nurl = "http://127.0.0.1:%d/image.raw" % nport
        wait_http(kurl, kheaders)
        wait_http(nurl)
        # Warm the page cache and both servers once.
        download_round(kurl, kheaders, 1, 1, size)
        download_round(nurl, {}, 1, 1, size)
        kr, nr = [], []
        for i in range(a.rounds):
            kb, ks = download_round(kurl, kheaders, a.clients, a.downloads, size)
            nb, ns = download_round(nurl, {}, a.clients, a.downloads, size)
            kr.append(kb)
            nr.append(nb)
            print("round %d: kilnd %.2f GB/s (%.1f s), nginx %.2f GB/s (%.1f s), ratio %.2f"
                  % (i + 1, kb / 1e9, ks, nb / 1e9, ns, kb / nb), flush=True)
        km, nm = statistics.median(kr), statistics.median(nr)
        print("median of %d rounds, %d clients x %d x %d MiB: kilnd %.2f GB/s, nginx %.2f GB/s, ratio %.2f"
              % (a.rounds, a.clients, a.downloads, a.size_mib, km / 1e9, nm / 1e9, km / nm))
        print(json.dumps({"kilnd_gbps": round(km / 1e9, 3), "nginx_gbps": round(nm / 1e9, 3),
                          "ratio": round(km / nm, 3), "rounds": a.rounds, "clients": a.clients,
                          "size_mib": a.size_mib, "downloads": a.downloads}))
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
