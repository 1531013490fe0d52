// The portal's benchmark: the size of the built assets (raw and gzip), and
// how long Chromium takes from navigation to the first meaningful element of
// each page, against a real kilnd with fake-driver nodes.
//
//   node bench/portal_bench.mjs KILND [--runs 15] [--nodes 10000]
//
// Needs web/dist (npm run build), web/node_modules (playwright-core) and
// Debian's /usr/bin/chromium (KILN_CHROMIUM to change it). Prints one line
// per figure (median, min, max over the runs) and a JSON summary at the end.
//
// What is timed, each run in a fresh browser context (cold cache, like a
// first visit), the pages interleaved so that load on the machine hits them
// alike:
//   home         a signed-in tenant opens / : until the availability card
//                ("Profile cpu-lab") is in a painted frame
//   fleet        an operator opens /fleet at --nodes nodes: until the node
//                table's first row is in a painted frame
//   fleet page   the same page, "Next page" pressed: until page 2's first row
//                is painted
//   baseline     in the same browser, an empty page on kilnd's origin
//                (answered by the browser's request routing, so only the
//                browser's own navigation and paint are in it): until its one
//                element is painted; and kilnd's GET /v1/whoami from node
//                (the API round trip every page starts with)
// Times are the page's performance.now() (milliseconds since the navigation
// started) at the requestAnimationFrame after the element appeared, read by
// an init script's MutationObserver: no polling from the test side in them.

import { createRequire } from "node:module";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { startChild } from "../tests/browser/child.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const webDir = resolve(here, "../web");
const args = process.argv.slice(2);
const kilnd = args[0];
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i < 0 ? dflt : Number(args[i + 1]);
};
const kRuns = opt("--runs", 15);
const kNodes = opt("--nodes", 10000);
const chromium = process.env.KILN_CHROMIUM ?? "/usr/bin/chromium";
for (const [ok, why] of [
  [kilnd && existsSync(kilnd), `usage: node bench/portal_bench.mjs KILND [--runs N] [--nodes N] (no kilnd at ${kilnd})`],
  [existsSync(chromium), `${chromium} is missing`],
  [existsSync(join(webDir, "dist", "index.html")), "web/dist is not built: npm run build in web/"],
  [existsSync(join(webDir, "node_modules", "playwright-core")), "web/node_modules has no playwright-core: npm ci in web/"],
]) {
  if (!ok) {
    console.error(why);
    process.exit(2);
  }
}
const { chromium: playwright } = createRequire(join(webDir, "package.json"))("playwright-core");

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const summary = (xs) => ({ median: +median(xs).toFixed(1), min: +Math.min(...xs).toFixed(1), max: +Math.max(...xs).toFixed(1), n: xs.length });

// --- the built assets ---

function files(dir) {
  return readdirSync(dir).flatMap((f) => (statSync(join(dir, f)).isDirectory() ? files(join(dir, f)) : [join(dir, f)]));
}
const dist = join(webDir, "dist");
const assets = files(dist).map((f) => {
  const bytes = readFileSync(f);
  return { file: relative(dist, f), raw: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length };
});
const total = assets.reduce((t, a) => ({ raw: t.raw + a.raw, gzip: t.gzip + a.gzip }), { raw: 0, gzip: 0 });
for (const a of assets) console.log(`asset ${a.file}: ${a.raw} B raw, ${a.gzip} B gzip -9`);
console.log(`assets total: ${total.raw} B raw, ${total.gzip} B gzip -9`);

// --- kilnd with fake nodes ---

const kAdmin = "kiln_portal_bench_admin_token_0001";
const dataDir = mkdtempSync(join(tmpdir(), "kiln-portal-bench-"));
mkdirSync(join(dataDir, "img"));
writeFileSync(join(dataDir, "img", "demo.img"), Buffer.alloc(4096));
const kilndChild = await startChild(kilnd, ["--listen", "127.0.0.1:0", "--data-dir", dataDir, "--bootstrap-token", kAdmin,
  "--image-dir", join(dataDir, "img"), "--power-sync-interval", "0", "--web-dir", dist, "--log-level", "warn"],
  /listening on ([\d.]+):(\d+)/, "kilnd");
const proc = kilndChild.proc;
const base = `http://${kilndChild.match[1]}:${kilndChild.match[2]}`;

async function api(method, path, body, token = kAdmin) {
  const headers = { Authorization: `Bearer ${token}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${path} -> ${r.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

let browser;
try {
  await api("POST", "/v1/tenants", { name: "acme", quotas: [{ profile: "cpu-lab", kind: "baremetal", max_nodes: 4 }] });
  const tenant = (await api("POST", "/v1/tokens", { name: "bench-tenant", role: "tenant", tenant: "acme" })).token;
  const operator = (await api("POST", "/v1/tokens", { name: "bench-ops", role: "operator" })).token;
  const t0 = Date.now();
  for (let i = 0; i < kNodes; i += 32)
    await Promise.all(Array.from({ length: Math.min(32, kNodes - i) }, (_, j) =>
      api("POST", "/v1/nodes", { name: `rack-${String(i + j).padStart(5, "0")}`, profile: "cpu-lab", bmc: { driver: "fake", address: `bmc-${i + j}` } })));
  console.log(`seeded ${kNodes} nodes in ${((Date.now() - t0) / 1000).toFixed(1)} s`);

  browser = await playwright.launch({ executablePath: chromium, headless: true, args: ["--no-sandbox", "--disable-gpu"] });
  console.log(`chromium ${browser.version()}`);

  // A fresh context whose pages record when `selector` first appears (in a
  // painted frame) and, when `token` is given, start signed in.
  async function open(selector, token) {
    const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    await context.addInitScript(({ selector, token, origin }) => {
      if (token !== null && location.origin === origin) sessionStorage.setItem("kiln.token", token);
      window.__first = null;
      const obs = new MutationObserver(() => {
        if (window.__first !== null || document.querySelector(selector) === null) return;
        window.__first = -1;
        obs.disconnect();
        requestAnimationFrame(() => (window.__first = performance.now()));
      });
      obs.observe(document, { childList: true, subtree: true, characterData: true });
    }, { selector, token, origin: base });
    const page = await context.newPage();
    page.on("request", (r) => {
      if (!r.url().startsWith(base + "/") && !r.url().startsWith("data:")) throw new Error(`request left kilnd's origin: ${r.url()}`);
    });
    return { context, page };
  }
  async function firstElement(page) {
    await page.waitForFunction(() => window.__first !== null && window.__first >= 0, null, { timeout: 30000, polling: 20 });
    return page.evaluate(() => window.__first);
  }

  const t = { empty: [], home: [], fleet: [], fleetPage: [], whoami: [] };
  for (let run = 0; run <= kRuns; run++) {
    const keep = run > 0; // run 0 warms kilnd's and Chromium's caches of their own code; not counted

    {
      const { context, page } = await open("#first", null);
      await page.route(`${base}/__bench_empty`, (r) => r.fulfill({ status: 200, contentType: "text/html", body: "<!doctype html><title>empty</title><p id=first>empty</p>" }));
      await page.goto(`${base}/__bench_empty`);
      const ms = await firstElement(page);
      if (keep) t.empty.push(ms);
      await context.close();
    }
    {
      const { context, page } = await open('article[aria-label="Profile cpu-lab"]', tenant);
      await page.goto(base + "/");
      const ms = await firstElement(page);
      if (keep) t.home.push(ms);
      await context.close();
    }
    {
      const { context, page } = await open('table[aria-label="Nodes"] tbody tr', operator);
      await page.goto(base + "/fleet");
      const ms = await firstElement(page);
      await page.getByText("Page 1 ·").waitFor();
      // The page change, timed inside the page: press, then the frame that
      // shows page 2's rows ("Page 2" itself shows at once, before its data).
      const change = await page.evaluate(() => new Promise((done) => {
        const firstCell = () => document.querySelector('table[aria-label="Nodes"] tbody tr td')?.textContent;
        const before = firstCell();
        const start = performance.now();
        const obs = new MutationObserver(() => {
          const now = firstCell();
          if (now === undefined || now === before) return;
          obs.disconnect();
          requestAnimationFrame(() => done(performance.now() - start));
        });
        obs.observe(document.body, { childList: true, subtree: true, characterData: true });
        [...document.querySelectorAll("button")].find((b) => b.textContent.trim() === "Next page").click();
      }));
      if (keep) {
        t.fleet.push(ms);
        t.fleetPage.push(change);
      }
      await context.close();
    }
    for (let i = 0; i < 5; i++) {
      const s = performance.now();
      await api("GET", "/v1/whoami", undefined, tenant);
      if (keep) t.whoami.push(performance.now() - s);
    }
  }

  const figures = {
    assets: { files: assets, total },
    nodes: kNodes,
    runs: kRuns,
    baseline_empty_page_ms: summary(t.empty),
    baseline_whoami_ms: summary(t.whoami),
    home_first_render_ms: summary(t.home),
    fleet_first_render_ms: summary(t.fleet),
    fleet_page_change_ms: summary(t.fleetPage),
  };
  for (const [k, v] of Object.entries(figures)) if (v && v.median !== undefined) console.log(`${k}: median ${v.median} (min ${v.min}, max ${v.max}, n ${v.n})`);
  console.log(JSON.stringify(figures));
} finally {
  await browser?.close().catch(() => {});
  proc.kill("SIGKILL");
  rmSync(dataDir, { recursive: true, force: true });
}
