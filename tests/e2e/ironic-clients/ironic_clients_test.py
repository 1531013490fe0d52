"""Kiln's Ironic-compatible API driven by the real OpenStack clients.

    ironic_clients_test.py KILND KILN_VBMC      (run.sh picks the interpreter)

Starts a real kilnd (SQLite in a fresh data dir, a loopback port), a kiln-vbmc
fleet of three Redfish BMCs, and, per Redfish node, the test-side kiln-agent
(agent_cli.mjs around tests/browser/portal/test_agent.mjs: the real agent
protocol, so inspect, cleaning and deploy complete without a VM). Then, with
Debian's clients exactly as an operator runs them (python3-openstackclient
6.0.0, python3-ironicclient 5.0.1, python3-openstacksdk 0.101), four flows run
side by side, each on its own nodes:

  cli     `openstack --os-auth-type admin_token --os-endpoint .../ironic
          --os-token <kiln token> baremetal ...`: node create (redfish
          driver_info), port create, manage/inspect/provide --wait, set
          --instance-info, deploy --config-drive <JSON dict> --wait, power,
          maintenance, list --long, show (password masked), undeploy --wait,
          delete refused while active (409) then done; a pinned
          --os-baremetal-api-version 1.78; cross-checked against /v1.
  sdk     openstacksdk with auth_type admin_token: create_node,
          set_node_provision_state(wait=True), wait_for_nodes_provision_state,
          ports, patch, power, maintenance, delete; a request pinned to 1.89
          (Metal3's floor) through the SDK's adapter (the CLIs refuse any
          version above 1.78, ironicclient's last known); auth_type http_basic
          with the token's name and with its id.
  tenant  tenant tokens through the CLI: a matrix of list / show / set /
          power / manage / maintenance / delete over the tenant's own node and
          another tenant's; the other's is never seen and nothing is changed.
  misc    the `baremetal` CLI with http_basic; errors the clients print
          (`node show nosuch` exits 1 with Kiln's reason from Ironic's error
          body; no credential and a wrong one are 401); version 1.10 creates
          nodes available, 1.11+ enroll; the version documents.

Every step asserts the client's exit code and its parsed output. A step whose
API piece is missing fails (never skips) and prints the client's own
--debug trace of the request and response. Exit 0: all passed; 1: a step
failed; 77: the clients, node, kilnd or kiln-vbmc are not here (SKIPPED).
"""

import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request

kSkip = 77
HERE = os.path.dirname(os.path.abspath(__file__))


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(kSkip)


if len(sys.argv) != 3:
    sys.exit("usage: ironic_clients_test.py KILND KILN_VBMC")
KILND, VBMC = sys.argv[1], sys.argv[2]
for path, what in [(KILND, "kilnd"), (VBMC, "kiln-vbmc")]:
    if not os.access(path, os.X_OK):
        skip(f"no {what} binary at {path}")
for tool in ["openstack", "baremetal", "node"]:
    if not shutil.which(tool):
        skip(f"{tool} is not installed (scripts/install-deps)")
try:
    import openstack  # noqa: E402  (Debian's python3-openstacksdk)
    import openstack.exceptions  # noqa: E402
except ImportError as e:
    skip(f"openstacksdk does not import under {sys.executable}: {e} (scripts/install-deps installs python3-openstacksdk)")

kAdmin = "kiln_ironic_clients_admin_0001"
kKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIM6jHR8C6awzVMqmZAWuFW2u1isrYanrS/Ozu11WcKN8 ci@example"
kMasked = "******"
# Each long CLI wait polls every 10 s (ironicclient's _LONG_ACTION_POLL_INTERVAL):
# these bounds are the client's own --wait time-outs, far above what a step takes.
kWaitShort, kWaitLong = 60, 120


# --- children -------------------------------------------------------------

class Child:
    """A child process whose stdout is read line by line on a thread (never
    blocking it on a full pipe) and whose stderr goes to a file."""

    def __init__(self, args, ready, what, log_path, timeout=30, env=None):
        self.what = what
        self.log_path = log_path
        self.lines = []
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=open(log_path, "w"), text=True, env=env)
        self._ready = threading.Event()
        self._match = None
        self._pattern = re.compile(ready)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(timeout):
            self.kill()
            raise RuntimeError(f"{what} not ready within {timeout} s:\n{self.log()}")
        if self._match is None:
            raise RuntimeError(f"{what} exited ({self.proc.poll()}):\n{self.log()}")

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if self._match is None:
                self._match = self._pattern.search(line)
                if self._match:
                    self._ready.set()
        self._ready.set()

    @property
    def match(self):
        return self._match

    def log(self):
        try:
            with open(self.log_path) as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def stop(self, sig=signal.SIGTERM, timeout=10):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reader.join(5)  # every line it printed is in self.lines

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Agent:
    """agent_cli.mjs for one node: what kilnd asked of it is read at stop()."""

    def __init__(self, base, node, mac, address, log_path):
        self.node = node
        self.child = Child(["node", os.path.join(HERE, "agent_cli.mjs"), base, kAdmin, node, mac, address],
                           r"agent ready", f"agent of {node}", log_path)
        self.result = None

    def stop(self):
        if self.result is None:
            self.child.stop(signal.SIGTERM, 10)
            for line in reversed(self.child.lines):
                if line.startswith("{"):
                    self.result = json.loads(line)
                    break
            else:
                self.result = {"commands": [], "errors": [f"agent printed no summary: {self.child.log()}"]}
        return self.result


# --- HTTP, for setup and for the cross-checks against /v1 -------------------

class Http:
    def __init__(self, base):
        self.base = base

    def call(self, method, path, body=None, token=kAdmin, headers=None, content_type="application/json"):
        """Returns (status, headers, parsed JSON or text)."""
        h = dict(headers or {})
        if token is not None:
            h["Authorization"] = f"Bearer {token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = content_type
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                status, hdrs, raw = r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            status, hdrs, raw = e.code, e.headers, e.read()
        text = raw.decode(errors="replace")
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = text
        return status, hdrs, parsed

    def ok(self, method, path, body=None, token=kAdmin, expect=None, content_type="application/json"):
        status, _, parsed = self.call(method, path, body, token, content_type=content_type)
        good = (status == expect) if expect is not None else 200 <= status < 300
        if not good:
            raise AssertionError(f"{method} {path} -> {status} {parsed}")
        return parsed


def until(what, fn, timeout=60, every=0.2):
    end = time.monotonic() + timeout
    last = None
    while True:
        last = fn()
        if last:
            return last
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s: {what}")
        time.sleep(every)


# --- the clients --------------------------------------------------------------

class CliResult:
    def __init__(self, argv, rc, out, err):
        self.argv, self.rc, self.out, self.err = argv, rc, out, err

    def json(self):
        try:
            return json.loads(self.out)
        except ValueError:
            raise AssertionError(f"not JSON on stdout of {self.cmdline()}:\n{self.out[-2000:]}")

    def cmdline(self):
        shown = []
        for a in self.argv:
            shown.append("<secret>" if a.startswith("kiln_") else a)
        return " ".join(shown)

    def trace(self):
        """The request and response lines of --debug, and the last words."""
        keep = [l for l in self.err.splitlines()
                if l.startswith(("REQ:", "RESP:", "RESP BODY:", "Request returned", "GET call", "PUT call",
                                 "POST call", "PATCH call", "DELETE call"))
                or "HTTP" in l or "Error" in l or "error" in l]
        tail = self.err.splitlines()[-3:]
        return "\n".join((keep[-24:] if keep else []) + ["..."] + tail)

    def describe(self):
        return f"$ {self.cmdline()}\nexit {self.rc}\nstdout: {self.out[-1500:]}\nclient trace:\n{self.trace()}"


class Clients:
    def __init__(self, endpoint, home):
        self.endpoint = endpoint
        # ironicclient caches the negotiated version per host:port under
        # ~/.cache: a private HOME keeps runs (and other users) apart.
        self.env = dict(os.environ, HOME=home, OS_CLOUD="", PYTHONWARNINGS="ignore")
        for k in list(self.env):
            if k.startswith("OS_") and k != "OS_CLOUD":
                del self.env[k]

    def run(self, argv, timeout=240):
        p = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=timeout)
        return CliResult(argv, p.returncode, p.stdout, p.stderr)

    def osc(self, *args, token=kAdmin, version=None, timeout=240):
        argv = ["openstack", "--debug", "--os-auth-type", "admin_token", "--os-endpoint", self.endpoint,
                "--os-token", token]
        if version:
            argv += ["--os-baremetal-api-version", version]
        return self.run(argv + ["baremetal", *args], timeout)

    def baremetal(self, *args, auth, timeout=240):
        """ironicclient's own `baremetal` CLI; auth is a list of --os-* flags."""
        return self.run(["baremetal", "--debug", "--os-endpoint", self.endpoint, *auth, *args], timeout)


def expect_ok(r):
    if r.rc != 0:
        raise AssertionError(f"the client failed\n{r.describe()}")
    return r


def expect_fail(r, http_codes, reason=None):
    """The client exits 1 and prints one of `http_codes` ("(HTTP 404)") and,
    when given, `reason` (Kiln's words from the error body)."""
    if r.rc == 0:
        raise AssertionError(f"the client succeeded where it must fail with HTTP {http_codes}\n{r.describe()}")
    last = r.err.strip().splitlines()[-1] if r.err.strip() else ""
    if not any(f"(HTTP {c})" in r.err for c in http_codes):
        raise AssertionError(f"the client failed, but not with HTTP {http_codes}: {last}\n{r.describe()}")
    if reason is not None and reason not in r.err:
        raise AssertionError(f"the client did not print Kiln's reason {reason!r}; it printed {last!r}\n{r.describe()}")
    return r


def eq(actual, expected, what):
    if actual != expected:
        raise AssertionError(f"{what}: expected {expected!r}, got {actual!r}")


# --- flows ----------------------------------------------------------------------

class Flow:
    """An ordered list of steps on its own nodes. A step's failure is recorded
    and the flow goes on (later steps often still say something) unless the
    step was `critical` (nothing after it can run)."""

    def __init__(self, name):
        self.name = name
        self.results = []  # (title, "PASS"|"FAIL"|"NOT RUN", seconds, detail)
        self.stopped = None

    def step(self, title, fn, critical=False):
        if self.stopped:
            self.results.append((title, "NOT RUN", 0.0, f"after the critical step {self.stopped!r} failed"))
            return None
        t0 = time.monotonic()
        try:
            v = fn()
            self.results.append((title, "PASS", time.monotonic() - t0, ""))
            print(f"[{self.name}] PASS {title} ({time.monotonic() - t0:.1f} s)", flush=True)
            return v
        except Exception as e:  # noqa: BLE001 - a step's failure is its result
            detail = str(e) if isinstance(e, AssertionError) else "".join(traceback.format_exception(e))[-3000:]
            self.results.append((title, "FAIL", time.monotonic() - t0, detail))
            print(f"[{self.name}] FAIL {title} ({time.monotonic() - t0:.1f} s)", flush=True)
            if critical:
                self.stopped = title
            return None

    def failed(self):
        return [r for r in self.results if r[1] != "PASS"]


def redfish_driver_info(bmc):
    return {
        "redfish_address": f"https://{bmc['address']}:{bmc['port']}",
        "redfish_username": bmc["username"],
        "redfish_password": bmc["password"],
        "redfish_system_id": f"/redfish/v1/Systems/{bmc['system_id']}",
        "redfish_verify_ca": "False",
    }


def node_by_name(rows, name, key="Name"):
    for r in rows:
        if r.get(key) == name:
            return r
    return None


def cli_flow(f, cl, http, bmc, mac, agent_of):
    name = "ironic-cli-0"
    info = redfish_driver_info(bmc)
    st = {}

    def create():
        args = ["node", "create", "--driver", "redfish", "--name", name, "--resource-class", "cpu-lab",
                "--extra", "owner_ticket=OPS-1", "-f", "json"]
        for k, v in info.items():
            args += ["--driver-info", f"{k}={v}"]
        n = expect_ok(cl.osc(*args)).json()
        eq(n.get("name"), name, "name")
        eq(n.get("driver"), "redfish", "driver")
        eq(n.get("provision_state"), "enroll", "provision_state of a node created at 1.78 (enroll from 1.11)")
        eq(n.get("target_provision_state"), None, "target_provision_state")
        if not re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", n.get("uuid") or ""):
            raise AssertionError(f"uuid is not a UUID: {n.get('uuid')!r}")
        di = n.get("driver_info") or {}
        eq(di.get("redfish_password"), kMasked, "driver_info.redfish_password on read")
        for k in ["redfish_address", "redfish_username", "redfish_system_id", "redfish_verify_ca"]:
            eq(di.get(k), info[k], f"driver_info.{k} read back as written")
        eq(n.get("extra"), {"owner_ticket": "OPS-1"}, "extra")
        eq(n.get("resource_class"), "cpu-lab", "resource_class")
        eq(n.get("maintenance"), False, "maintenance")
        st["uuid"] = n["uuid"]
        # The same node on /v1.
        v1 = http.ok("GET", f"/v1/nodes/{name}")
        eq(v1.get("name"), name, "/v1 name of the node created through /ironic")
    f.step("node create --driver redfish (enroll, password masked, the same node on /v1)", create, critical=True)

    def port():
        p = expect_ok(cl.osc("port", "create", mac, "--node", st["uuid"], "-f", "json")).json()
        eq(p.get("address"), mac, "port address")
        eq(p.get("node_uuid"), st["uuid"], "port node_uuid")
        rows = expect_ok(cl.osc("port", "list", "--node", name, "-f", "json")).json()
        eq([r.get("Address") for r in rows], [mac], "port list --node")
        st["port"] = p["uuid"]
    f.step("port create MAC --node UUID, port list --node", port, critical=True)

    # The agent answers for the node from here (it looks the node up by name).
    agent_of(name)

    def provision(verb, expected, timeout):
        def go():
            r = expect_ok(cl.osc("node", verb, name, "--wait", str(timeout)))
            n = expect_ok(cl.osc("node", "show", name, "-f", "json")).json()
            eq(n.get("provision_state"), expected, f"provision_state after {verb} --wait")
            eq(n.get("target_provision_state"), None, f"target_provision_state after {verb}")
            eq(n.get("last_error"), None, f"last_error after {verb}")
            return r
        return go

    f.step("node manage --wait (verifying -> manageable)", provision("manage", "manageable", kWaitShort), critical=True)
    f.step("node inspect --wait (inspecting -> manageable, by the agent)", provision("inspect", "manageable", kWaitShort))
    f.step("node provide --wait (cleaning -> available)", provision("provide", "available", kWaitLong), critical=True)

    def set_image():
        expect_ok(cl.osc("node", "set", name, "--instance-info", "image_source=demo-os"))
        n = expect_ok(cl.osc("node", "show", name, "-f", "json")).json()
        eq((n.get("instance_info") or {}).get("image_source"), "demo-os", "instance_info.image_source")
        eq((n.get("driver_info") or {}).get("redfish_password"), kMasked, "driver_info.redfish_password in node show")
    f.step("node set --instance-info image_source=demo-os (node show: password masked)", set_image, critical=True)

    def deploy():
        cd = {"meta_data": {"hostname": name}, "user_data": "#cloud-config\nruncmd: [echo ironic-clients]\n",
              "network_data": {"links": [], "networks": [], "services": []}}
        expect_ok(cl.osc("node", "deploy", name, "--config-drive", json.dumps(cd), "--wait", str(kWaitLong)))
        n = expect_ok(cl.osc("node", "show", name, "-f", "json")).json()
        eq(n.get("provision_state"), "active", "provision_state after deploy --wait")
        eq(n.get("target_provision_state"), None, "target_provision_state when active")
        eq(n.get("power_state"), "power on", "power_state when active")
        eq((n.get("instance_info") or {}).get("image_source"), "demo-os", "instance_info.image_source when active")
        v1 = http.ok("GET", f"/v1/nodes/{name}")
        eq(v1.get("provision_state"), "active", "/v1 provision_state")
    f.step("node deploy --config-drive <JSON dict> --wait (-> active)", deploy, critical=True)

    def delete_active():
        # Ironic refuses to delete an active node (409); ironicclient retries a
        # 409 five times, 2 s apart, before it gives up.
        expect_fail(cl.osc("node", "delete", name), ["409"])
        eq(http.ok("GET", f"/v1/nodes/{name}").get("provision_state"), "active", "the node after a refused delete")
    f.step("node delete while active is refused (409), node kept", delete_active)

    def power():
        for target, word in [("off", "power off"), ("on", "power on")]:
            expect_ok(cl.osc("node", "power", target, name))

            def reached():
                n = expect_ok(cl.osc("node", "show", name, "-f", "json", "-c", "power_state",
                                     "-c", "target_power_state")).json()
                return n if n.get("power_state") == word and n.get("target_power_state") is None else None
            until(f"power_state {word}", reached, timeout=30, every=0.5)
    f.step("node power off, node power on (power_state follows)", power)

    def maintenance():
        expect_ok(cl.osc("node", "maintenance", "set", name, "--reason", "swap a DIMM"))
        n = expect_ok(cl.osc("node", "show", name, "-f", "json")).json()
        eq(n.get("maintenance"), True, "maintenance after set")
        eq(n.get("maintenance_reason"), "swap a DIMM", "maintenance_reason")
        rows = expect_ok(cl.osc("node", "list", "--maintenance", "-f", "json")).json()
        if node_by_name(rows, name) is None:
            raise AssertionError(f"node list --maintenance does not list {name}: {rows}")
        expect_ok(cl.osc("node", "maintenance", "unset", name))
        n = expect_ok(cl.osc("node", "show", name, "-f", "json")).json()
        eq(n.get("maintenance"), False, "maintenance after unset")
        eq(n.get("maintenance_reason"), None, "maintenance_reason after unset")
    f.step("node maintenance set --reason / list --maintenance / unset", maintenance)

    def lists():
        rows = expect_ok(cl.osc("node", "list", "--long", "-f", "json")).json()
        row = node_by_name(rows, name)
        if row is None:
            raise AssertionError(f"{name} not in node list --long: {[r.get('Name') for r in rows]}")
        eq(row.get("UUID"), st["uuid"], "UUID column")
        eq(row.get("Provisioning State"), "active", "Provisioning State column")
        eq(row.get("Driver"), "redfish", "Driver column")
        eq((row.get("Driver Info") or {}).get("redfish_password"), kMasked, "Driver Info password in list --long")
        eq(row.get("Resource Class"), "cpu-lab", "Resource Class column")
        rows = expect_ok(cl.osc("node", "list", "--provision-state", "active", "--driver", "redfish",
                                "-f", "json")).json()
        eq([r.get("Name") for r in rows], [name], "node list --provision-state active --driver redfish")
        rows = expect_ok(cl.osc("node", "list", "--provision-state", "enroll", "-f", "json")).json()
        if node_by_name(rows, name):
            raise AssertionError("node list --provision-state enroll lists the active node")
    f.step("node list --long -f json, filtered lists", lists)

    def pinned():
        r = expect_ok(cl.osc("node", "show", name, "-f", "json", version="1.78"))
        n = r.json()
        eq(n.get("uuid"), st["uuid"], "uuid at 1.78")
        eq(n.get("provision_state"), "active", "provision_state at 1.78")
        if '-H "X-OpenStack-Ironic-API-Version: 1.78"' not in r.err:
            raise AssertionError(f"the client did not send version 1.78\n{r.describe()}")
        answered = re.findall(r"^RESP: \[\d+\].*X-Openstack-Ironic-Api-Version: ([\d.]+)", r.err, re.M | re.I)
        if not answered or any(v != "1.78" for v in answered):
            raise AssertionError(f"responses said X-OpenStack-Ironic-API-Version {answered}, not 1.78\n{r.describe()}")
    f.step("--os-baremetal-api-version 1.78 node show (sent and answered at 1.78)", pinned)

    def undeploy():
        expect_ok(cl.osc("node", "undeploy", name, "--wait", str(kWaitLong)))
        n = expect_ok(cl.osc("node", "show", name, "-f", "json")).json()
        eq(n.get("provision_state"), "available", "provision_state after undeploy --wait")
        eq(n.get("instance_uuid"), None, "instance_uuid after undeploy")
    f.step("node undeploy --wait (-> available)", undeploy)

    def delete():
        expect_ok(cl.osc("node", "delete", name))
        expect_fail(cl.osc("node", "show", name, "-f", "json"), ["404"])
        status, _, body = http.call("GET", f"/v1/nodes/{st['uuid']}")
        eq(status, 404, f"/v1 status of the deleted node ({body})")
        rows = expect_ok(cl.osc("port", "list", "-f", "json")).json()
        if any(r.get("Address") == mac for r in rows):
            raise AssertionError(f"the deleted node's port is still listed: {rows}")
    f.step("node delete (gone from /ironic and /v1, its port too)", delete)


def sdk_flow(f, endpoint, http, bmc, mac, agent_of, basic_name, basic_id, basic_secret):
    name = "ironic-sdk-0"
    st = {}

    def connect(auth_type, auth):
        return openstack.connect(auth_type=auth_type, auth=dict(auth, endpoint=endpoint),
                                 load_yaml_config=False, load_envvars=False)

    conn = connect("admin_token", {"token": kAdmin})

    def create():
        n = conn.baremetal.create_node(driver="redfish", name=name, provision_state="enroll",
                                       resource_class="sdk-lab", driver_info=redfish_driver_info(bmc))
        eq(n.provision_state, "enroll", "provision_state")
        eq(n.driver_info.get("redfish_password"), kMasked, "driver_info.redfish_password")
        st["id"] = n.id
        p = conn.baremetal.create_port(node_uuid=n.id, address=mac)
        eq(p.address, mac, "port address")
        ports = list(conn.baremetal.ports(details=True, node=name))
        eq([x.address for x in ports], [mac], "ports(node=name)")
    f.step("create_node(provision_state=enroll), create_port, ports(node=)", create, critical=True)
    agent_of(name)

    def manage_inspect_provide():
        n = conn.baremetal.set_node_provision_state(name, "manage", wait=True, timeout=kWaitShort)
        eq(n.provision_state, "manageable", "after manage")
        n = conn.baremetal.set_node_provision_state(name, "inspect", wait=True, timeout=kWaitShort)
        eq(n.provision_state, "manageable", "after inspect")
        n = conn.baremetal.set_node_provision_state(name, "provide", wait=True, timeout=kWaitLong)
        eq(n.provision_state, "available", "after provide")
    f.step("set_node_provision_state manage / inspect / provide (wait=True)", manage_inspect_provide, critical=True)

    def patch():
        n = conn.baremetal.patch_node(name, [{"op": "add", "path": "/instance_info/image_source", "value": "demo-os"},
                                             {"op": "add", "path": "/extra/rack", "value": "r12"}])
        eq(n.instance_info.get("image_source"), "demo-os", "instance_info.image_source after patch")
        eq(n.extra, {"rack": "r12"}, "extra after patch")
        n = conn.baremetal.patch_node(name, [{"op": "remove", "path": "/extra/rack"}])
        eq(n.extra, {}, "extra after remove")
    f.step("patch_node add/remove nested paths", patch, critical=True)

    def deploy():
        conn.baremetal.set_node_provision_state(name, "active", config_drive={"meta_data": {"hostname": name},
                                                                            "user_data": "#cloud-config\n"})
        nodes = conn.baremetal.wait_for_nodes_provision_state([name], "active", timeout=kWaitLong)
        eq([n.provision_state for n in nodes], ["active"], "wait_for_nodes_provision_state")
    f.step("set_node_provision_state(active, config_drive=dict) + wait_for_nodes_provision_state", deploy, critical=True)

    def power_maintenance():
        conn.baremetal.set_node_power_state(name, "power off", wait=True, timeout=30)
        eq(conn.baremetal.get_node(name).power_state, "power off", "power_state")
        conn.baremetal.set_node_power_state(name, "power on", wait=True, timeout=30)
        eq(conn.baremetal.get_node(name).power_state, "power on", "power_state")
        conn.baremetal.set_node_maintenance(name, reason="sdk says so")
        n = conn.baremetal.get_node(name)
        eq((n.is_maintenance, n.maintenance_reason), (True, "sdk says so"), "maintenance")
        conn.baremetal.unset_node_maintenance(name)
        eq(conn.baremetal.get_node(name).is_maintenance, False, "maintenance after unset")
    f.step("set_node_power_state off/on (wait), set/unset_node_maintenance", power_maintenance)

    def pinned_189():
        # Metal3's baremetal-operator (gophercloud) pins 1.89; the SDK's
        # adapter sends both OpenStack-API-Version and X-OpenStack-Ironic-API-Version.
        r = conn.baremetal.get(f"/nodes/{name}", microversion="1.89")
        eq(r.status_code, 200, f"GET /v1/nodes/{name} at 1.89 ({r.text[:300]})")
        eq(r.headers.get("X-OpenStack-Ironic-API-Version"), "1.89", "X-OpenStack-Ironic-API-Version answered")
        eq(r.json().get("provision_state"), "active", "provision_state at 1.89")
        mx = r.headers.get("X-OpenStack-Ironic-API-Maximum-Version", "0.0")
        if tuple(int(x) for x in mx.split(".")) < (1, 89):
            raise AssertionError(f"maximum version {mx} is below Metal3's 1.89")
    f.step("GET a node pinned to 1.89 (Metal3's floor) through the SDK's adapter", pinned_189)

    def lists():
        names = [n.name for n in conn.baremetal.nodes(details=True, provision_state="active")]
        if name not in names:
            raise AssertionError(f"nodes(details=True, provision_state=active) lacks {name}: {names}")
        # One node a page: the SDK follows each page's absolute `next`. A
        # second node of this flow's own resource class makes two pages that
        # no other flow deletes under the marker.
        conn.baremetal.create_node(driver="ipmi", name="ironic-sdk-1", provision_state="enroll",
                                   resource_class="sdk-lab",
                                   driver_info={"ipmi_address": "192.0.2.10", "ipmi_username": "admin"})
        r = conn.baremetal.get("/nodes?limit=1&resource_class=sdk-lab")
        eq(r.status_code, 200, f"GET /nodes?limit=1&resource_class=sdk-lab ({r.text[:300]})")
        body = r.json()
        eq(len(body.get("nodes", [])), 1, "nodes on a page of limit=1")
        nxt = body.get("next") or ""
        if not re.match(r"^https?://.*/v1/nodes\?.*marker=", nxt):
            raise AssertionError(f"next is not an absolute URL with a marker: {nxt!r}")
        paged = sorted(n.name for n in conn.baremetal.nodes(limit=1, resource_class="sdk-lab"))
        eq(paged, [name, "ironic-sdk-1"], "nodes(limit=1, resource_class=sdk-lab) following next")
        conn.baremetal.delete_node("ironic-sdk-1")
    f.step("nodes(details=True, provision_state=), nodes(limit=1, resource_class=) over two pages", lists)

    def basic():
        for user in [basic_name, basic_id]:
            c = connect("http_basic", {"username": user, "password": basic_secret})
            eq(c.baremetal.get_node(name).id, st["id"], f"get_node over http_basic as {user}")
        c = connect("http_basic", {"username": basic_name, "password": basic_secret + "x"})
        try:
            c.baremetal.get_node(name)
        except openstack.exceptions.HttpException as e:
            eq(e.status_code, 401, "status of a wrong Basic secret")
        else:
            raise AssertionError("a wrong Basic secret was accepted")
        c = connect("http_basic", {"username": "someone-else", "password": basic_secret})
        try:
            c.baremetal.get_node(name)
        except openstack.exceptions.HttpException as e:
            eq(e.status_code, 401, "status of a secret under another user name")
        else:
            raise AssertionError("a secret under another token's name was accepted")
    f.step("auth_type http_basic with the token's name and id (wrong secret, wrong user: 401)", basic)

    def undeploy_delete():
        conn.baremetal.set_node_provision_state(name, "deleted", wait=True, timeout=kWaitLong)
        eq(conn.baremetal.get_node(name).provision_state, "available", "after deleted")
        conn.baremetal.delete_node(name)
        eq(conn.baremetal.find_node(name), None, "find_node after delete")
    f.step("set_node_provision_state(deleted, wait=True), delete_node", undeploy_delete)


def tenant_flow(f, cl, http, tokens, fake_report):
    """acme-0 belongs to acme's allocation, globex-0 to globex's: each
    tenant's CLI sees only its own node and changes nothing of the other's."""
    st = {}

    def setup():
        for t in ["acme", "globex"]:
            http.ok("POST", "/v1/nodes", {"name": f"{t}-0", "profile": "cpu-lab", "traits": [f"{t}-only"],
                                          "bmc": {"driver": "fake", "address": f"bmc-{t}",
                                                  "options": {"validation_script": [fake_report]}}})
        for t in ["acme", "globex"]:
            n = f"{t}-0"
            for target, stable in [("manage", "manageable"), ("provide", "available")]:
                http.ok("PUT", f"/v1/nodes/{n}/states/provision", {"target": target})
                until(f"{n} {stable}", lambda: (http.ok("GET", f"/v1/nodes/{n}").get("provision_state") == stable
                                               and not http.ok("GET", f"/v1/nodes/{n}").get("reservation")), 30)
        for t in ["acme", "globex"]:
            a = http.ok("POST", "/v1/allocations", {"profile": "cpu-lab", "kind": "baremetal", "count": 1,
                                                    "image": "demo-os", "ssh_keys": [kKey], "traits": [f"{t}-only"]},
                        token=tokens[t], expect=202)
            st[t] = a["id"]
        for t in ["acme", "globex"]:
            until(f"{t}'s allocation ready",
                  lambda: http.ok("GET", f"/v1/allocations/{st[t]}", token=tokens[t]).get("state") == "ready", 60)
        for t in ["acme", "globex"]:
            st[f"{t}-uuid"] = expect_ok(cl.osc("node", "show", f"{t}-0", "-f", "json")).json()["uuid"]
    f.step("setup: acme-0 and globex-0 held by their tenants' allocations (through /v1)", setup, critical=True)

    def as_tenant(t, *args, version=None):
        return cl.osc(*args, token=tokens[t], version=version)

    def list_own():
        for t, other in [("acme", "globex"), ("globex", "acme")]:
            rows = expect_ok(as_tenant(t, "node", "list", "-f", "json")).json()
            eq(sorted(r.get("Name") for r in rows), [f"{t}-0"], f"node list as {t}")
            rows = expect_ok(as_tenant(t, "node", "list", "--long", "-f", "json")).json()
            eq(sorted(r.get("Name") for r in rows), [f"{t}-0"], f"node list --long as {t}")
    f.step("node list / list --long as each tenant: its own node only", list_own)

    def show():
        n = expect_ok(as_tenant("acme", "node", "show", "acme-0", "-f", "json")).json()
        eq(n.get("uuid"), st["acme-uuid"], "acme shows acme-0")
        eq(n.get("provision_state"), "active", "acme-0 provision_state")
        if (n.get("driver_info") or {}).get("password") not in (None, kMasked):
            raise AssertionError(f"a tenant reads a BMC password: {n.get('driver_info')}")
        for ident in ["globex-0", st["globex-uuid"]]:
            expect_fail(as_tenant("acme", "node", "show", ident, "-f", "json"), ["404"])
    f.step("node show: own 200, other tenant's by name and UUID 404", show)

    def before_after(check):
        before = {t: http.ok("GET", f"/v1/nodes/{t}-0") for t in ["acme", "globex"]}
        check()
        for t in ["acme", "globex"]:
            after = http.ok("GET", f"/v1/nodes/{t}-0")
            for k in ["provision_state", "maintenance", "extra", "tenant", "name"]:
                eq(after.get(k), before[t].get(k), f"{t}-0 {k} after a refused tenant call")

    def refused(args_for, own_codes, other_codes):
        def check():
            with concurrent.futures.ThreadPoolExecutor(4) as ex:
                own = ex.submit(as_tenant, "acme", *args_for("acme-0"))
                other = ex.submit(as_tenant, "acme", *args_for("globex-0"))
                other_uuid = ex.submit(as_tenant, "acme", *args_for(st["globex-uuid"]))
                expect_fail(own.result(), own_codes)
                expect_fail(other.result(), other_codes)
                expect_fail(other_uuid.result(), other_codes)
        return lambda: before_after(check)

    # Staff-only verbs: a tenant is refused on its own node (403, as on /v1)
    # and on another's (403 or 404: either tells it nothing).
    f.step("node set --extra: own 403, other's 403/404, nothing changed",
           refused(lambda n: ["node", "set", n, "--extra", "k=v"], ["403"], ["403", "404"]))
    f.step("node manage (provision): own 403, other's 403/404, nothing changed",
           refused(lambda n: ["node", "undeploy", n], ["403"], ["403", "404"]))
    f.step("node maintenance set: own 403, other's 403/404, nothing changed",
           refused(lambda n: ["node", "maintenance", "set", n], ["403"], ["403", "404"]))
    f.step("node delete: own 403, other's 403/404, nothing deleted",
           refused(lambda n: ["node", "delete", n], ["403"], ["403", "404"]))

    def power_state(n):
        # Ironic's words ("power on"), as the Ironic view shows them to staff.
        status, _, body = http.call("GET", f"/ironic/v1/nodes/{n}", token=None, headers={"X-Auth-Token": kAdmin})
        eq(status, 200, f"GET /ironic/v1/nodes/{n} as admin")
        return body.get("power_state")

    def power():
        # A tenant powers its own node (as on /v1); another's is a 404.
        expect_ok(as_tenant("acme", "node", "power", "off", "acme-0"))
        until("acme-0 power off", lambda: power_state("acme-0") == "power off", 30)
        expect_ok(as_tenant("acme", "node", "power", "on", "acme-0"))
        until("acme-0 power on", lambda: power_state("acme-0") == "power on", 30)
        expect_fail(as_tenant("acme", "node", "power", "off", "globex-0"), ["404"])
        time.sleep(0.5)
        eq(power_state("globex-0"), "power on", "globex-0 power_state after acme's refused power off")
    f.step("node power off/on: own node 202, other tenant's 404 and still on", power)

    def ports():
        # Ports are staff-only on /v1 (GET /v1/ports is 403 to a tenant); the
        # Ironic view keeps /v1's roles.
        v1_status = http.call("GET", "/v1/ports", token=tokens["acme"])[0]
        eq(v1_status, 403, "GET /v1/ports as a tenant")
        expect_fail(as_tenant("acme", "port", "list", "-f", "json"), ["403"])
        expect_fail(as_tenant("acme", "port", "list", "--node", "globex-0", "-f", "json"), ["403", "404"])
    f.step("port list as a tenant: 403 as on /v1 (own and other's node)", ports)


def misc_flow(f, cl, http, endpoint, bmc, basic_name, basic_secret):
    basic = ["--os-auth-type", "http_basic", "--os-username", basic_name, "--os-password", basic_secret]

    def versions():
        status, hdrs, doc = http.call("GET", "/ironic/", token=None)
        eq(status, 200, "GET /ironic/ status")
        v = (doc.get("versions") or [{}])[0]
        eq((v.get("id"), v.get("status")), ("v1", "CURRENT"), "/ironic/ versions[0]")
        if not v.get("min_version") or not v.get("version"):
            raise AssertionError(f"version document without min_version/version: {doc}")
        status, hdrs, doc = http.call("GET", "/ironic/v1", token=None)
        eq(status, 200, "GET /ironic/v1 status")
        for h in ["X-OpenStack-Ironic-API-Minimum-Version", "X-OpenStack-Ironic-API-Maximum-Version",
                  "X-OpenStack-Ironic-API-Version"]:
            if not hdrs.get(h):
                raise AssertionError(f"GET /ironic/v1 has no {h} header")
        status, hdrs, doc = http.call("GET", "/ironic/v1/nodes", token=kAdmin,
                                      headers={"X-OpenStack-Ironic-API-Version": "1.999"})
        eq(status, 406, "a version above the maximum")
        if not hdrs.get("X-OpenStack-Ironic-API-Maximum-Version"):
            raise AssertionError("a 406 without X-OpenStack-Ironic-API-Maximum-Version")
    f.step("version documents at /ironic/ and /ironic/v1, 406 above the maximum", versions)

    def show_nosuch():
        status, _, body = http.call("GET", "/ironic/v1/nodes/nosuch", token=kAdmin)
        eq(status, 404, "status of GET /ironic/v1/nodes/nosuch")
        try:
            fault = json.loads(body["error_message"])
            reason = fault["faultstring"]
        except (TypeError, KeyError, ValueError):
            raise AssertionError(f"not Ironic's error body (error_message holding JSON with faultstring): {body!r}")
        expect_fail(cl.osc("node", "show", "nosuch"), ["404"], reason)
        expect_fail(cl.baremetal("node", "show", "nosuch", auth=basic), ["404"], reason)
    f.step("node show nosuch: exit 1 with Kiln's reason (openstack and baremetal)", show_nosuch)

    def unauthenticated():
        status, _, body = http.call("GET", "/ironic/v1/nodes", token=None)
        eq(status, 401, "no credential")
        if not isinstance(body, dict) or "error_message" not in body:
            raise AssertionError(f"401 not in Ironic's error format: {body!r}")
        expect_fail(cl.baremetal("node", "list", auth=["--os-auth-type", "none"]), ["401"])
        expect_fail(cl.osc("node", "list", token="kiln_not_a_token_of_this_kilnd"), ["401"])
        expect_fail(cl.baremetal("node", "list", auth=basic[:-1] + [basic_secret + "x"]), ["401"])
    f.step("no credential, a wrong token, a wrong Basic secret: 401 from the clients", unauthenticated)

    def baremetal_cli():
        args = ["node", "create", "--driver", "redfish", "--name", "bm-cli-0", "-f", "json"]
        for k, v in redfish_driver_info(bmc).items():
            args += ["--driver-info", f"{k}={v}"]
        n = expect_ok(cl.baremetal(*args, auth=basic)).json()
        eq(n.get("provision_state"), "enroll", "provision_state")
        eq((n.get("driver_info") or {}).get("redfish_password"), kMasked, "masked password")
        expect_ok(cl.baremetal("node", "manage", "bm-cli-0", "--wait", str(kWaitShort), auth=basic))
        rows = expect_ok(cl.baremetal("node", "list", "--provision-state", "manageable", "-f", "json", auth=basic)).json()
        if node_by_name(rows, "bm-cli-0") is None:
            raise AssertionError(f"baremetal node list --provision-state manageable lacks bm-cli-0: {rows}")
        rows = expect_ok(cl.baremetal("node", "validate", "bm-cli-0", "-f", "json", auth=basic)).json()
        by_iface = {r.get("Interface"): r for r in rows}
        for iface in ["power", "management"]:
            if (by_iface.get(iface) or {}).get("Result") is not True:
                raise AssertionError(f"node validate: {iface} is not valid for a reachable Redfish BMC: {rows}")
        drivers = expect_ok(cl.baremetal("driver", "list", "-f", "json", auth=basic)).json()
        names = {d.get("Supported driver(s)") for d in drivers}
        for d in ["redfish", "ipmi", "fake-hardware"]:
            if d not in names:
                raise AssertionError(f"baremetal driver list lacks {d}: {names}")
        expect_ok(cl.baremetal("node", "delete", "bm-cli-0", auth=basic))
    f.step("baremetal CLI over http_basic: create redfish, manage --wait, list, validate, driver list, delete",
           baremetal_cli)

    def version_gates():
        # Ironic creates nodes in `available` below 1.11 and in `enroll` from it.
        n = expect_ok(cl.osc("node", "create", "--driver", "fake-hardware", "--name", "v110-0", "-f", "json",
                             version="1.10")).json()
        eq(n.get("provision_state"), "available", "provision_state of a node created at 1.10")
        n = expect_ok(cl.osc("node", "create", "--driver", "fake-hardware", "--name", "v111-0", "-f", "json",
                             version="1.11")).json()
        eq(n.get("provision_state"), "enroll", "provision_state of a node created at 1.11")
        for name in ["v110-0", "v111-0"]:
            expect_ok(cl.osc("node", "delete", name))
    f.step("--os-baremetal-api-version 1.10 creates available, 1.11 enroll", version_gates)


# --- main ---------------------------------------------------------------------

def main():
    work = tempfile.mkdtemp(prefix="kiln-ironic-clients-")
    children = []
    agents = []
    try:
        image_dir = os.path.join(work, "img")
        os.mkdir(image_dir)
        demo = bytes(4096)
        with open(os.path.join(image_dir, "demo.img"), "wb") as fh:
            fh.write(demo)
        with open(os.path.join(image_dir, "initrd"), "w") as fh:
            fh.write("initramfs-bytes")
        with open(os.path.join(image_dir, "vmlinuz"), "w") as fh:
            fh.write("kernel-bytes")
        macs = {"cli": "52:54:00:1c:00:01", "sdk": "52:54:00:1c:00:02"}
        # kilnd serves a MAC's boot script (with its boot token) only to the
        # address DHCP leased to it: both to loopback, where the agents run.
        leases = os.path.join(work, "dhcp.leases")
        with open(leases, "w") as fh:
            for i, m in enumerate(macs.values()):
                fh.write(f"0 {m} 127.0.0.1 agent-{i} *\n")
        data = os.path.join(work, "data")
        os.mkdir(data)
        kilnd = Child([KILND, "--listen", "127.0.0.1:0", "--data-dir", data, "--bootstrap-token", kAdmin,
                       "--image-dir", image_dir, "--allocation-interval-ms", "100", "--power-sync-interval", "0",
                       "--timeout-check-ms", "200", "--log-level", "warn", "--dhcp-leases", leases],
                      r"listening on ([\d.]+):(\d+)", "kilnd", os.path.join(work, "kilnd.log"))
        children.append(kilnd)
        base = f"http://{kilnd.match.group(1)}:{kilnd.match.group(2)}"
        endpoint = base + "/ironic"
        manifest = os.path.join(work, "bmc.json")
        vbmc = Child([VBMC, "--fleet", "3", "--fleet-manifest", manifest, "--fleet-protocols", "redfish",
                      "--redfish-listen", "127.0.0.1:0", "--user", "admin", "--password", "s3cret",
                      "--log-level", "warn"], r"fleet ready", "kiln-vbmc", os.path.join(work, "vbmc.log"))
        children.append(vbmc)
        with open(manifest) as fh:
            bmcs = json.load(fh)

        http = Http(base)
        until("kilnd ready", lambda: http.call("GET", "/readyz", token=None)[0] == 200, 20)
        http.ok("POST", "/v1/images", {"name": "demo-os", "kind": "os", "format": "raw", "public": True,
                                       "source": os.path.join(image_dir, "demo.img"), "size": len(demo),
                                       "sha256": hashlib.sha256(demo).hexdigest()})
        http.ok("POST", "/v1/images", {"name": "deploy-ramdisk", "kind": "ramdisk", "format": "raw",
                                       "source": os.path.join(image_dir, "initrd"),
                                       "kernel": os.path.join(image_dir, "vmlinuz"), "size": 15,
                                       "sha256": hashlib.sha256(b"initramfs-bytes").hexdigest()})
        tokens = {}
        for t in ["acme", "globex"]:
            http.ok("POST", "/v1/tenants", {"name": t, "quotas": [{"profile": "cpu-lab", "kind": "baremetal",
                                                                   "max_nodes": 2}]})
            tokens[t] = http.ok("POST", "/v1/tokens", {"name": f"{t}-cli", "role": "tenant", "tenant": t})["token"]
        basic = http.ok("POST", "/v1/tokens", {"name": "ironic-basic", "role": "admin"})
        basic_name, basic_id, basic_secret = "ironic-basic", basic["id"], basic["token"]

        home = os.path.join(work, "home")
        os.mkdir(home)
        cl = Clients(endpoint, home)
        fake_report = {"plan": "quick", "result": "pass", "checks": []}

        lock = threading.Lock()

        def agent_for(mac, address):
            def start(node):
                a = Agent(base, node, mac, address, os.path.join(work, f"agent-{node}.log"))
                with lock:
                    agents.append(a)
            return start

        flows = {
            "cli": Flow("cli"), "sdk": Flow("sdk"), "tenant": Flow("tenant"), "misc": Flow("misc"),
        }
        jobs = {
            "cli": lambda: cli_flow(flows["cli"], cl, http, bmcs[0], macs["cli"], agent_for(macs["cli"], "192.0.2.71")),
            "sdk": lambda: sdk_flow(flows["sdk"], endpoint, http, bmcs[1], macs["sdk"],
                                    agent_for(macs["sdk"], "192.0.2.72"), basic_name, basic_id, basic_secret),
            "tenant": lambda: tenant_flow(flows["tenant"], cl, http, tokens, fake_report),
            "misc": lambda: misc_flow(flows["misc"], cl, http, endpoint, bmcs[2], basic_name, basic_secret),
        }
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as ex:
            futures = {k: ex.submit(v) for k, v in jobs.items()}
            for k, fu in futures.items():
                try:
                    fu.result()
                except Exception as e:  # noqa: BLE001 - a flow's own crash is a failure
                    flows[k].results.append(("(the flow itself)", "FAIL", 0.0,
                                             "".join(traceback.format_exception(e))[-3000:]))
        elapsed = time.monotonic() - t0

        agent_errors = []
        for a in agents:
            r = a.stop()
            print(f"agent of {a.node}: commands {r['commands']}")
            if r["errors"]:
                agent_errors.append(f"agent of {a.node}: {r['errors'][:5]}")
        cli_agent = next((a for a in agents if a.node == "ironic-cli-0"), None)
        if cli_agent and flows["cli"].stopped is None:
            cmds = cli_agent.result["commands"]
            for c in ["inspect", "wipe", "write_image", "write_config_drive"]:
                if c not in cmds:
                    agent_errors.append(f"ironic-cli-0's agent was never asked to {c} (commands: {cmds})")

        print()
        print(f"Kiln's /ironic with the real clients: {elapsed:.0f} s of flows")
        failed = 0
        for flow in flows.values():
            for title, status, secs, detail in flow.results:
                print(f"  {status:7} [{flow.name}] {title} ({secs:.1f} s)")
                if status != "PASS":
                    failed += 1
        for e in agent_errors:
            print(f"  FAIL    [agent] {e}")
            failed += 1
        for flow in flows.values():
            for title, status, secs, detail in flow.results:
                if status == "FAIL":
                    print(f"\n--- [{flow.name}] {title}\n{detail}")
        if failed:
            print(f"\n--- kilnd log (tail)\n{kilnd.log()[-3000:]}")
            print(f"\n{failed} step(s) failed")
            return 1
        print("\nall steps passed")
        return 0
    finally:
        for a in agents:
            a.child.kill()
        for c in reversed(children):
            c.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
