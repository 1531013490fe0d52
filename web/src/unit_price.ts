// Price per measured unit, as the availability page shows it: the API's
// integer micro-unit prices written out exactly (no float touches money), the
// measured figures, and the virtualization tax in words, so no meaning rests
// on colour. Never an estimate: a null figure is "not measured", with the
// API's reason.
import type { KindAvailability, ProfileAvailability, UnitMeasured } from "./api/types";

// An integer number of micro-units as currency units with all six decimals:
// 2811 -> "0.002811", 14400000 -> "14.400000". Exact for every integer a
// double holds exactly (the API's prices stay far below 2^53); anything else
// (a fraction, NaN) is not a price and gives null.
export function formatMicrosExact(micros: number): string | null {
  if (!Number.isSafeInteger(micros)) return null;
  const sign = micros < 0 ? "-" : "";
  const digits = String(Math.abs(micros)).padStart(7, "0");
  return `${sign}${digits.slice(0, -6)}.${digits.slice(-6)}`;
}

export type UnitRowKey =
  | "price_per_tflop_hour"
  | "price_per_nccl_gbps_hour"
  | "gemm"
  | "nccl_busbw"
  | "gpudirect_rdma_latency"
  | "gpudirect_rdma_latency_p99"
  | "nccl_latency";

// One row of the table: its header, and per kind the shown text and, when
// not measured, why.
export interface UnitCell {
  text: string;
  measured: boolean;
  reason?: string;
  detail?: string;
}
export interface UnitRow {
  key: UnitRowKey;
  label: string;
  baremetal: UnitCell;
  virtual: UnitCell;
  tax: string;
}

const kRows: { key: UnitRowKey; label: string }[] = [
  { key: "price_per_tflop_hour", label: "Cost per TFLOP-hour" },
  { key: "price_per_nccl_gbps_hour", label: "Cost per GB/s of NCCL bus bandwidth per hour" },
  { key: "gemm", label: "Measured GEMM per node (BF16)" },
  { key: "nccl_busbw", label: "NCCL bus bandwidth per node" },
  { key: "gpudirect_rdma_latency", label: "GPUDirect RDMA latency" },
  { key: "gpudirect_rdma_latency_p99", label: "GPUDirect RDMA latency p99" },
  { key: "nccl_latency", label: "NCCL all-reduce latency at 8 B" },
];

function figure(kind: KindAvailability, name: string): UnitMeasured | null {
  const m = kind.measured[name];
  return m !== undefined && m !== null && "nodes" in m ? m : null;
}

function number(v: number): string {
  return v.toLocaleString("en-US", { maximumFractionDigits: 3 });
}

function nodesDetail(m: UnitMeasured): string {
  return `${m.statistic} of ${m.nodes} node${m.nodes === 1 ? "" : "s"}`;
}

function notMeasured(kind: KindAvailability, field: string): UnitCell {
  return { text: "not measured", measured: false, reason: kind.not_measured?.[field] };
}

function cellOf(kind: KindAvailability, key: UnitRowKey): UnitCell {
  switch (key) {
    case "price_per_tflop_hour":
    case "price_per_nccl_gbps_hour": {
      const v = kind[key];
      const text = v === null || v === undefined ? null : formatMicrosExact(v);
      if (text === null) return notMeasured(kind, key);
      return { text: `${text} /h`, measured: true, detail: `${v} micro-units` };
    }
    case "gpudirect_rdma_latency_p99": {
      const m = figure(kind, "gpudirect_rdma_latency");
      if (m === null) return notMeasured(kind, "gpudirect_rdma_latency");
      if (m.p99_median === null || m.p99_median === undefined)
        return { text: "not measured", measured: false, reason: "no report of these nodes gave a p99" };
      return { text: `${number(m.p99_median)} µs`, measured: true, detail: nodesDetail(m) };
    }
    default: {
      const m = figure(kind, key);
      if (m === null) return notMeasured(kind, key);
      const unit = m.unit === "us" ? "µs" : m.unit;
      return { text: `${number(m.median)} ${unit}`, measured: true, detail: nodesDetail(m) };
    }
  }
}

// The tax in words: what the VM loses (throughput), adds (latency) or costs
// more (price); "not measured on both kinds" otherwise.
export function taxText(p: ProfileAvailability, key: UnitRowKey): string {
  if (key === "gpudirect_rdma_latency_p99") return "not compared";
  const t = p.virtualization_tax?.[key];
  if (t === undefined) return "not measured on both kinds";
  const pct = `${(Math.abs(t.relative) * 100).toFixed(1)}%`;
  const higherIsBetter = key === "gemm" || key === "nccl_busbw";
  if (t.relative === 0) return "none";
  if (higherIsBetter) return t.relative > 0 ? `${pct} less on virtual` : `${pct} more on virtual`;
  if (key.startsWith("price")) return t.relative > 0 ? `${pct} dearer on virtual` : `${pct} cheaper on virtual`;
  return t.relative > 0 ? `${pct} slower on virtual` : `${pct} faster on virtual`;
}

export function unitRows(p: ProfileAvailability): UnitRow[] {
  return kRows.map((r) => ({
    key: r.key,
    label: r.label,
    baremetal: cellOf(p.kinds.baremetal, r.key),
    virtual: cellOf(p.kinds.virtual, r.key),
    tax: taxText(p, r.key),
  }));
}
