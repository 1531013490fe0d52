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
