// The portal's client-side logic that the pages rely on: SSH key shape,
// the SSE parser, problem+json field mapping, money, chart geometry, fleet
// queries.
import { describe, expect, it } from "vitest";
import { fieldOfPointer, toApiError } from "../../src/api/problem";
import { curvePath, formatBytes, jitterBars, jitterCeilings, jitterFigures, sweepPoints } from "../../src/charts";
import { markerOf, nodesQuery, stateCounts } from "../../src/fleet";
import { coalesced, tickets } from "../../src/reload";
import { formatDuration, formatMicros, formatPrice } from "../../src/money";
import { SseParser } from "../../src/sse";
import { sshKeyProblem } from "../../src/sshkey";
import { checkRequest, requestBody, RequestValues } from "../../src/request";

const kEd25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIM6jHR8C6awzVMqmZAWuFW2u1isrYanrS/Ozu11WcKN8 ci@example";

describe("sshKeyProblem", () => {
  it("accepts a real public key, with or without a comment", () => {
    expect(sshKeyProblem(kEd25519)).toBeNull();
    expect(sshKeyProblem(kEd25519.split(" ").slice(0, 2).join(" "))).toBeNull();
  });
  it("refuses an empty field, a private key, a wrong type, a truncated blob and a blob of another type", () => {
    expect(sshKeyProblem("  ")).toMatch(/Paste/);
    expect(sshKeyProblem("-----BEGIN OPENSSH PRIVATE KEY-----")).toMatch(/private key/);
    expect(sshKeyProblem("ssh-foo AAAA")).toMatch(/Unknown key type/);
    expect(sshKeyProblem("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIM6jHR8C6")).toMatch(/not base64/);
    expect(sshKeyProblem("ssh-rsa " + kEd25519.split(" ")[1])).toMatch(/does not hold a ssh-rsa key/);
    expect(sshKeyProblem("not a key")).toMatch(/Unknown key type/);
  });
});

describe("SseParser", () => {
  it("parses frames split anywhere, skips comments, keeps the last id", () => {
    const p = new SseParser();
    const text = ': keepalive\n\nid: 7\nevent: provision.transition\ndata: {"seq":7}\n\nid: 8\ndata: a\ndata: b\r\n\r\n';
    const out = [];
    for (const ch of text) out.push(...p.feed(ch));
    expect(out).toEqual([
      { id: "7", event: "provision.transition", data: '{"seq":7}' },
      { id: "8", event: "message", data: "a\nb" },
    ]);
  });
  it("holds an unterminated frame until its blank line arrives", () => {
    const p = new SseParser();
    expect(p.feed("id: 1\ndata: x\n")).toEqual([]);
    expect(p.feed("\n")).toEqual([{ id: "1", event: "message", data: "x" }]);
  });
});

describe("problem+json", () => {
  it("maps JSON pointers to form fields", () => {
    expect(fieldOfPointer("/ssh_keys/0")).toBe("ssh_keys");
    expect(fieldOfPointer("/count")).toBe("count");
    expect(fieldOfPointer("")).toBeNull();
    expect(fieldOfPointer("/")).toBeNull();
  });
  it("keeps detail and field errors, and survives a body that is not a problem", () => {
    const e = toApiError(409, { detail: "no capacity", errors: [{ field: "/count", message: "3 requested, 1 available" }, { bad: 1 }] });
    expect(e.status).toBe(409);
    expect(e.detail).toBe("no capacity");
    expect(e.fields).toEqual([{ field: "/count", message: "3 requested, 1 available" }]);
    expect(toApiError(502, null).detail).toBe("HTTP 502");
  });
});

describe("money and time", () => {
  it("shows per second and per hour, and never invents a price", () => {
    expect(formatPrice(0.001)).toEqual({ second: "0.001000", hour: "3.60" });
    expect(formatPrice(null)).toBeNull();
    expect(formatMicros(1_234_567)).toBe("1.23");
    expect(formatDuration(42)).toBe("42 s");
    expect(formatDuration(725)).toBe("12 min 05 s");
    expect(formatDuration(3 * 3600 + 240)).toBe("3 h 04 min");
  });
});

describe("charts", () => {
  it("reads sweep points, drops malformed ones and sorts by size", () => {
    const pts = sweepPoints({ sizes: [{ bytes: 1 << 30, busbw_gbps: 450 }, { bytes: 8 << 20, busbw_gbps: 120 }, { bytes: "x" }, null] });
    expect(pts).toEqual([{ bytes: 8 << 20, busbw_gbps: 120 }, { bytes: 1 << 30, busbw_gbps: 450 }]);
    expect(sweepPoints("a reason")).toEqual([]);
  });
  it("puts sizes on a log axis and the floor inside the plot", () => {
    const box = { width: 100, height: 100, left: 0, right: 0, top: 0, bottom: 0 };
    const r = curvePath([{ bytes: 1, busbw_gbps: 0 }, { bytes: 2, busbw_gbps: 50 }, { bytes: 4, busbw_gbps: 100 }], box, 100);
    expect(r.xy.map((p) => p[0])).toEqual([0, 50, 100]);  // evenly spaced doublings
    expect(r.yMax).toBeCloseTo(110);
    expect(r.floorY).toBeCloseTo(9.1, 1);
    expect(formatBytes(8 << 20)).toBe("8 MiB");
  });
});

describe("fleet", () => {
  it("builds the node list query with only the filters set", () => {
    const q = nodesQuery({ provision_state: "active", profile: "", kind: "baremetal", tenant: " acme ", maintenance: "", sort: "name" }, "n-50");
    expect(q).toEqual({ limit: 50, provision_state: "active", kind: "baremetal", tenant: "acme", sort: "name", marker: "n-50" });
    expect(markerOf("http://kiln:8080/v1/nodes?limit=50&marker=abc")).toBe("abc");
    expect(markerOf(null)).toBeNull();
  });
  it("reads counts per state from /metrics", () => {
    const m = '# TYPE kiln_nodes gauge\nkiln_nodes{provision_state="active"} 3\nkiln_nodes{provision_state="enroll"} 60\nkiln_other 1\n';
    expect(stateCounts(m)).toEqual({ active: 3, enroll: 60 });
  });
});

describe("reload", () => {
  it("coalesces kicks that arrive while a load runs into one more load", async () => {
    let loads = 0;
    let release: () => void = () => {};
    const kick = coalesced(() => {
      loads++;
      return new Promise<void>((ok) => (release = ok));
    });
    kick();
    kick();
    kick();
    expect(loads).toBe(1);
    release();
    await new Promise((ok) => setTimeout(ok, 0));
    expect(loads).toBe(2);
    release();
    await new Promise((ok) => setTimeout(ok, 0));
    expect(loads).toBe(2);
  });
  it("shows only the newest query's answer when an older one arrives last", async () => {
    const ticket = tickets();
    let shown = "";
    const answers: Record<string, (v: string) => void> = {};
    const query = (name: string) => {
      const mine = ticket();
      return coalesced(async () => {
        const v = await new Promise<string>((ok) => (answers[name] = ok));
        if (mine.current()) shown = v;
      });
    };
    query("page 1")();
    query("filtered")();
    answers["filtered"]("enroll only");
    await new Promise((ok) => setTimeout(ok, 0));
    answers["page 1"]("every state");
    await new Promise((ok) => setTimeout(ok, 0));
    expect(shown).toBe("enroll only");
  });
});

describe("the request form's check and body", () => {
  const v: RequestValues = { tenant: "", profile: "cpu-lab", kind: "baremetal", count: "2", image: "demo-os", sshKey: ` ${kEd25519} `, lease: "1.5" };
  it("asks staff for a tenant, and a tenant's own form for none", () => {
    expect(checkRequest(v, true)).toEqual({ tenant: "Choose the tenant these nodes are for." });
    expect(checkRequest(v, false)).toEqual({});
    expect(checkRequest({ ...v, tenant: "acme" }, true)).toEqual({});
  });
  it("names the tenant in staff's body only, and turns hours into lease seconds", () => {
    expect(requestBody({ ...v, tenant: "acme" }, true)).toEqual({
      tenant: "acme", profile: "cpu-lab", kind: "baremetal", count: 2, image: "demo-os", ssh_keys: [kEd25519], lease_seconds: 5400,
    });
    const own = requestBody({ ...v, tenant: "acme", lease: "" }, false);
    expect(own).not.toHaveProperty("tenant");
    expect(own).not.toHaveProperty("lease_seconds");
  });
  it("refuses a fractional count, a bad key and a negative lease, each on its field", () => {
    expect(Object.keys(checkRequest({ ...v, count: "1.5", sshKey: "ssh-ed25519 nope", lease: "-1" }, false)).sort()).toEqual(["count", "lease_seconds", "ssh_keys"]);
  });
});

describe("the jitter chart", () => {
  // As kiln-agent's jitter check writes them (agent/validate/checks/jitter.cc).
  const details = {
    cpu: 1, pinned: true, samples: 1000000, p50_us: 4.2, p99_us: 18, p99_9_us: 120, p99_99_us: 640, max_us: 2100,
    stalls: { over_10us: 5200, over_100us: 1100, over_1ms: 3 },
  };
  const box = { width: 560, height: 200, left: 70, right: 24, top: 8, bottom: 36 };

  it("reads the quantiles in order and the stalls, dropping what is not a number", () => {
    const f = jitterFigures(details)!;
    expect(f.quantiles).toEqual([
      { label: "p50", us: 4.2 }, { label: "p99", us: 18 }, { label: "p99.9", us: 120 }, { label: "p99.99", us: 640 }, { label: "max", us: 2100 },
    ]);
    expect(f.stalls).toEqual({ over_10us: 5200, over_100us: 1100, over_1ms: 3 });
    expect(f.samples).toBe(1000000);
    const partial = jitterFigures({ p50_us: 3, p99_us: "x", max_us: -1, stalls: { over_10us: 1 } })!;
    expect(partial.quantiles).toEqual([{ label: "p50", us: 3 }]);
    expect(partial.stalls).toBeNull();
    expect(jitterFigures({ sizes: [] })).toBeNull();
    expect(jitterFigures("a reason")).toBeNull();
  });

  it("draws bars on a log10 axis of whole decades, ceilings on the same axis", () => {
    const f = jitterFigures(details)!;
    const ceilings = jitterCeilings({ max: 200, max_gap: 5000 });
    expect(ceilings).toEqual([{ label: "p99.9", us: 200 }, { label: "max", us: 5000 }]);
    const g = jitterBars(f.quantiles, box, 26, ceilings);
    // 4.2 us .. 5000 us: the decades 1 us .. 10 ms over 466 px, 116.5 px each.
    expect(g.ticks).toEqual([{ us: 1, x: 70 }, { us: 10, x: 186.5 }, { us: 100, x: 303 }, { us: 1000, x: 419.5 }, { us: 10000, x: 536 }]);
    expect(g.bars.map((b) => b.width)).toEqual([72.6, 146.2, 242.2, 326.9, 387]);
    expect(g.bars.map((b) => b.y)).toEqual([8, 34, 60, 86, 112]);
    expect(g.ceilings.map((c) => c.x)).toEqual([338.1, 500.9]);
  });

  it("keeps one decade when every figure is in it, and puts a 0 us gap at the axis's start", () => {
    const g = jitterBars([{ label: "p50", us: 0 }, { label: "max", us: 5 }], box, 26, []);
    expect(g.ticks.map((t) => t.us)).toEqual([1, 10]);
    expect(g.bars[0]!.width).toBe(0);
    expect(jitterCeilings(null)).toEqual([]);
  });
});
