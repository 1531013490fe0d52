// A test-side kiln-agent for one node, speaking the real agent protocol
// (docs/agent-protocol.md) to kilnd, as the C++ integration tests' TestAgent
// does (tests/integration/agent_lifecycle/agent_harness.h). Fake-driver nodes
// never run an agent, so they never report addresses; a node whose BMC is a
// kiln-vbmc Redfish BMC and whose work is done by this agent goes the way a
// lab machine does: the ramdisk phase (boot token from /boot/<mac>.ipxe,
// lookup, heartbeats, commands), then the os phase, whose lookup and
// heartbeats report the booted OS's addresses. kilnd turns those into the
// node's `addresses` and `ssh` line, which is what the portal shows.
//
//   const agent = startAgent({ base, adminToken, node: "agent-0", mac, addresses, report });
//   ...
//   agent.stop();

import { createHash } from "node:crypto";

const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");

// The value of `key=` in an iPXE script ("" when absent).
function scriptArg(script, key) {
  const m = new RegExp(`${key}=([^\\s]+)`).exec(script);
  return m ? m[1] : "";
}

export function startAgent({ base, adminToken, node, mac, addresses, report }) {
  let stopped = false;
  let session = "";
  let phase = "";
  let osSecret = "";
  const started = new Set();
  const commands = [];
  const errors = [];

  async function call(method, path, body, token) {
    const headers = {};
    if (token) headers.Authorization = `Bearer ${token}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const r = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: r.status, text: await r.text() };
  }

  async function run(cmd) {
    switch (cmd.name) {
      case "inspect":
        return { schema_version: 1, agent_version: "browser-test-agent", cpu: { model: "Test CPU", count: 2 },
          memory: { total_bytes: 1 << 30 }, disks: [{ name: "vda", size_bytes: 1 << 30 }],
          nics: [{ name: "eth0", mac }], gpus: [], boot_mode: "uefi", hypervisor: { detected: false } };
      case "wipe":
        return { disks: [{ name: "vda", size_bytes: 1 << 30, discarded: true, overwritten: false, verified: true }] };
      case "validate":
        return report;
      case "write_image": {
        osSecret = cmd.args.os_secret ?? "";
        const r = await fetch(base + new URL(cmd.args.url).pathname, { headers: { Authorization: `Bearer ${session}` } });
        if (!r.ok) return { error: `download failed: HTTP ${r.status}` };
        const bytes = Buffer.from(await r.arrayBuffer());
        const got = sha256(bytes);
        if (got !== cmd.args.sha256) return { error: `sha256 mismatch: expected ${cmd.args.sha256}, got ${got}` };
        return { device: "/dev/vda", bytes_downloaded: bytes.length, bytes_written: bytes.length, seconds: 0.1,
          mb_per_s: 10, sha256: got, resumes: 0 };
      }
      case "write_config_drive":
        return { device: "/dev/vda", table: "gpt", partition: 2 };
      default:
        return { error: `unknown command ${cmd.name}` };
    }
  }

  async function tick() {
    const nr = await call("GET", `/v1/nodes/${node}`, undefined, adminToken);
    if (nr.status !== 200) return;
    const n = JSON.parse(nr.text);
    const ramdiskWanted = n.provision_step === "wait_agent";
    const osWanted = n.provision_state === "deploying" && n.provision_step === "wait_boot";
    if (osWanted && phase !== "os") {
      // The node rebooted into its OS: the OS's agent looks up with the
      // secret the ramdisk left on the disk, and reports its addresses.
      const r = await call("POST", "/v1/agent/lookup", { macs: [mac], phase: "os", secret: osSecret, version: "browser-test-agent", addresses });
      if (r.status === 200) {
        session = JSON.parse(r.text).session;
        phase = "os";
      }
      return;
    }
    if (session === "" && ramdiskWanted) {
      // The node PXE-boots the deploy ramdisk: its script carries the boot token.
      const s = await call("GET", `/boot/${mac}.ipxe`);
      const token = scriptArg(s.text, "kiln.token");
      if (token === "") return;
      const r = await call("POST", "/v1/agent/lookup", { macs: [mac], node: n.id, token, phase: "ramdisk", version: "browser-test-agent" });
      if (r.status === 200) {
        session = JSON.parse(r.text).session;
        phase = "ramdisk";
      }
      return;
    }
    if (session === "") return;
    const hb = { node: n.id, busy: "" };
    if (phase === "os") hb.addresses = addresses;
    const r = await call("POST", "/v1/agent/heartbeat", hb, session);
    if (r.status === 401) {
      session = "";
      phase = "";
      return;
    }
    if (r.status !== 200) return;
    const cmd = JSON.parse(r.text).command;
    if (cmd === null || started.has(cmd.id)) return;
    started.add(cmd.id);
    commands.push(cmd.name);
    const result = await run(cmd);
    const post = { node: n.id, command_id: cmd.id };
    // A validation report may carry its own "error" (a failed run is still a
    // result); any other command's "error" is the command failing.
    if (result.error !== undefined && cmd.name !== "validate") Object.assign(post, { status: "error", error: result.error, result: {} });
    else Object.assign(post, { status: "ok", result });
    await call("POST", "/v1/agent/results", post, session);
  }

  const loop = (async () => {
    while (!stopped) {
      try {
        await tick();
      } catch (e) {
        errors.push(String(e));
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  })();

  return {
    commands,
    errors,
    async stop() {
      stopped = true;
      await loop;
    },
  };
}
