// The test-side kiln-agent (tests/browser/portal/test_agent.mjs, the real
// agent protocol) as a child process, for tests written in another language:
// the Ironic client test drives kilnd with Python's clients and needs the
// agent's side of inspect, cleaning and deploy done without a VM.
//
//   node agent_cli.mjs BASE_URL ADMIN_TOKEN NODE MAC ADDRESS[,ADDRESS...]
//
// Prints "agent ready" once it runs; on SIGTERM or SIGINT it stops and prints
// one JSON line {"commands": [...], "errors": [...]}: the commands kilnd gave
// it, in order, and anything that went wrong talking to kilnd. The report it
// answers `validate` with passes the cpu-lab profile's quick plan.

import { startAgent } from "../../browser/portal/test_agent.mjs";

const [base, adminToken, node, mac, addresses] = process.argv.slice(2);
if (!base || !adminToken || !node || !mac || !addresses) {
  console.error("usage: agent_cli.mjs BASE_URL ADMIN_TOKEN NODE MAC ADDRESS[,ADDRESS...]");
  process.exit(2);
}

const report = {
  plan: "quick",
  result: "pass",
  checks: [
    { name: "gpu_inventory", status: "pass", value: 0, unit: "gpus" },
    { name: "jitter", status: "pass", value: 120, unit: "us", threshold: { max: 20000 } },
    { name: "nvme_read", status: "pass", value: 1.5, unit: "GB/s", threshold: { min: 0.02 } },
  ],
};

const agent = startAgent({ base, adminToken, node, mac, addresses: addresses.split(","), report });
console.log("agent ready");

let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  await agent.stop();
  console.log(JSON.stringify({ commands: agent.commands, errors: agent.errors }));
  process.exit(0);
}
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
