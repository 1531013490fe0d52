// CTest entry for the portal's Vitest suite: runs `vitest run` in WEB_DIR,
// or exits 77 (SKIPPED) when web/node_modules was not installed.
//   node vitest.mjs WEB_DIR
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";

const web = process.argv[2];
const bin = join(web, "node_modules", ".bin", "vitest");
if (!existsSync(bin)) {
  console.log("SKIP: web/node_modules is not installed: run `npm ci` in web/ (make build does)");
  process.exit(77);
}
const r = spawnSync(bin, ["run"], { cwd: web, stdio: "inherit" });
process.exit(r.status ?? 1);
