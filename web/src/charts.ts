// Pure geometry for the validation charts (inline SVG, no chart library):
// scales and the points of the NCCL bus-bandwidth curve on a log2 size axis.

export interface SweepPoint {
  bytes: number;
  busbw_gbps: number;
}

// The sweep points of a check's details ({"sizes": [{bytes, busbw_gbps}]}),
// sorted by size; anything malformed is dropped, never guessed.
export function sweepPoints(details: unknown): SweepPoint[] {
  if (typeof details !== "object" || details === null) return [];
  const sizes = (details as { sizes?: unknown }).sizes;
  if (!Array.isArray(sizes)) return [];
  const out: SweepPoint[] = [];
  for (const s of sizes) {
    if (typeof s !== "object" || s === null) continue;
    const { bytes, busbw_gbps } = s as { bytes?: unknown; busbw_gbps?: unknown };
    if (typeof bytes === "number" && bytes > 0 && typeof busbw_gbps === "number" && Number.isFinite(busbw_gbps))
      out.push({ bytes, busbw_gbps });
  }
  return out.sort((a, b) => a.bytes - b.bytes);
}

export interface Box {
  width: number;
  height: number;
  left: number;
  right: number;
  top: number;
  bottom: number;
}

// SVG coordinates of `points` in `box`: x on log2(bytes), y linear from 0 to
// max(busbw, floor) with 10% headroom.
export function curvePath(points: SweepPoint[], box: Box, floor: number | null): { xy: [number, number][]; yMax: number; floorY: number | null } {
  if (points.length === 0) return { xy: [], yMax: 0, floorY: null };
  const lo = Math.log2(points[0]!.bytes);
  const hi = Math.log2(points[points.length - 1]!.bytes);
  const yMax = Math.max(...points.map((p) => p.busbw_gbps), floor ?? 0) * 1.1 || 1;
  const w = box.width - box.left - box.right;
  const h = box.height - box.top - box.bottom;
  const x = (b: number) => box.left + (hi === lo ? w / 2 : ((Math.log2(b) - lo) / (hi - lo)) * w);
  const y = (v: number) => box.top + h - (v / yMax) * h;
  return {
    xy: points.map((p) => [round(x(p.bytes)), round(y(p.busbw_gbps))]),
    yMax,
    floorY: floor === null ? null : round(y(floor)),
  };
}

export function formatBytes(b: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (b >= 1024 && i < units.length - 1) {
    b /= 1024;
    i++;
  }
  return `${Number.isInteger(b) ? b : b.toFixed(1)} ${units[i]}`;
}

function round(v: number): number {
  return Math.round(v * 10) / 10;
}

// --- the jitter check (agent/validate/checks/jitter.cc) ---
//
// Its details hold the scheduling-gap quantiles in microseconds (p50_us,
// p99_us, p99_9_us, p99_99_us, max_us) and stall counts. The gaps span
// orders of magnitude (a few us at p50, ms at max on a noisy host), so the
// chart draws them as bars on a log10 axis of whole decades, with the
// profile's ceilings (threshold.max on p99.9, threshold.max_gap on max) as
// lines on the same axis.

export interface JitterQuantile {
  label: string;
  us: number;
}
export interface JitterFigures {
  quantiles: JitterQuantile[];
  stalls: { over_10us: number; over_100us: number; over_1ms: number } | null;
  samples: number | null;
}

const kJitterKeys: [string, string][] = [
  ["p50_us", "p50"],
  ["p99_us", "p99"],
  ["p99_9_us", "p99.9"],
  ["p99_99_us", "p99.99"],
  ["max_us", "max"],
];

// The figures of a jitter check's details, or null when it has none of the
// quantiles; a quantile that is missing or not a finite number >= 0 is
// left out, never guessed.
export function jitterFigures(details: unknown): JitterFigures | null {
  if (typeof details !== "object" || details === null) return null;
  const d = details as Record<string, unknown>;
  const quantiles: JitterQuantile[] = [];
  for (const [key, label] of kJitterKeys) {
    const v = d[key];
    if (typeof v === "number" && Number.isFinite(v) && v >= 0) quantiles.push({ label, us: v });
  }
  if (quantiles.length === 0) return null;
  const s = d["stalls"] as Record<string, unknown> | undefined;
  const count = (k: string) => (typeof s?.[k] === "number" ? (s[k] as number) : NaN);
  const stalls = typeof s === "object" && s !== null ? { over_10us: count("over_10us"), over_100us: count("over_100us"), over_1ms: count("over_1ms") } : null;
  const valid = stalls !== null && Object.values(stalls).every((n) => Number.isInteger(n) && n >= 0);
  const samples = typeof d["samples"] === "number" ? (d["samples"] as number) : null;
  return { quantiles, stalls: valid ? stalls : null, samples };
}

export interface JitterBar {
  label: string;
  us: number;
  y: number;
  width: number;
}
export interface JitterGeometry {
  bars: JitterBar[];
  // x of each ceiling, keyed by the quantile it bounds ("p99.9", "max").
  ceilings: { label: string; us: number; x: number }[];
  // The decades on the axis (1, 10, 100 ... us) and their x.
  ticks: { us: number; x: number }[];
}

// Bars of `quantiles` in `box`, one row of `row` px each from box.top; x on
// log10(us) between the whole decades around every value and ceiling. A gap
// under the lowest decade (0 us) draws at the axis's start.
export function jitterBars(quantiles: JitterQuantile[], box: Box, row: number, ceilings: { label: string; us: number }[]): JitterGeometry {
  const all = [...quantiles.map((q) => q.us), ...ceilings.map((c) => c.us)].filter((v) => v > 0);
  const lo = all.length > 0 ? Math.floor(Math.log10(Math.min(...all))) : 0;
  let hi = all.length > 0 ? Math.ceil(Math.log10(Math.max(...all))) : 1;
  if (hi <= lo) hi = lo + 1;
  const w = box.width - box.left - box.right;
  const x = (us: number) => box.left + (us <= 0 ? 0 : ((Math.log10(us) - lo) / (hi - lo)) * w);
  const ticks: { us: number; x: number }[] = [];
  for (let e = lo; e <= hi; e++) ticks.push({ us: 10 ** e, x: round(x(10 ** e)) });
  return {
    bars: quantiles.map((q, i) => ({ label: q.label, us: q.us, y: box.top + i * row, width: round(x(q.us) - box.left) })),
    ceilings: ceilings.map((c) => ({ ...c, x: round(x(c.us)) })),
    ticks,
  };
}

// The ceilings a jitter check's threshold sets: max bounds p99.9, max_gap
// the longest gap.
export function jitterCeilings(threshold: unknown): { label: string; us: number }[] {
  if (typeof threshold !== "object" || threshold === null) return [];
  const t = threshold as Record<string, unknown>;
  const out: { label: string; us: number }[] = [];
  if (typeof t["max"] === "number") out.push({ label: "p99.9", us: t["max"] });
  if (typeof t["max_gap"] === "number") out.push({ label: "max", us: t["max_gap"] });
  return out;
}
