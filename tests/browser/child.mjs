// A child process a browser test or benchmark starts (kilnd, kiln-vbmc),
// waited for until its stdout says it is ready.
//
//   const k = await startChild(kilnd, [...], /listening on ([\d.]+):(\d+)/, "kilnd");
//   k.match[1]; k.log(); k.proc.kill("SIGKILL");
//
// Rejects, with the child's stderr, when it exits first or is not ready
// within `ms`. stderr is kept (log()) for a failing test to print.

import { spawn } from "node:child_process";

export function startChild(bin, args, ready, what, ms = 20000) {
  const proc = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  proc.stderr.on("data", (d) => (log += d));
  return new Promise((ok, fail) => {
    let out = "";
    const t = setTimeout(() => fail(new Error(`${what} not ready within ${ms / 1000} s:\n${log}`)), ms);
    proc.stdout.on("data", (d) => {
      out += d;
      const match = ready.exec(out);
      if (match) {
        clearTimeout(t);
        ok({ proc, match, log: () => log });
      }
    });
    proc.on("exit", (code) => fail(new Error(`${what} exited (${code}):\n${log}`)));
  });
}
