// The availability page's price per measured unit: exact micro-unit money,
// "not measured" with the API's reason (never a figure), and the tax in words.
import { describe, expect, it } from "vitest";
import type { KindAvailability, ProfileAvailability } from "../../src/api/types";
import { formatMicrosExact, taxText, unitRows } from "../../src/unit_price";

describe("formatMicrosExact", () => {
  it("writes integer micro-units as currency with all six decimals, exactly", () => {
    expect(formatMicrosExact(2811)).toBe("0.002811");
    expect(formatMicrosExact(0)).toBe("0.000000");
    expect(formatMicrosExact(14_400_000)).toBe("14.400000");
    expect(formatMicrosExact(1)).toBe("0.000001");
    // The dearest price over the smallest figure the API can give: exact.
    expect(formatMicrosExact(3_600_000_000_000_000)).toBe("3600000000.000000");
    expect(formatMicrosExact(-1_500_000)).toBe("-1.500000");
  });
  it("refuses what is not an exact integer rather than rounding it", () => {
    expect(formatMicrosExact(0.5)).toBeNull();
    expect(formatMicrosExact(Number.NaN)).toBeNull();
    expect(formatMicrosExact(2 ** 60)).toBeNull();
  });
});

const gemm = {
  median: 5123.456, unit: "TFLOPS", check: "gemm", source: "details.node_tflops", statistic: "median", nodes: 3,
  values: [4987.9, 5123.456, 5201], reports: [], reports_withheld: 3, failing_nodes: 1, refused_reports: 0,
};

function kind(over: Partial<KindAvailability>): KindAvailability {
  return { free: 1, price_per_second: 0.004, measured: {}, not_measured: {}, ...over };
}

const profile: ProfileAvailability = {
  profile: "gpu8",
  description: "",
  gpu: { model: "H100", count: 8 },
  kinds: {
    baremetal: kind({
      measured: { gemm, gpudirect_rdma_latency: { ...gemm, median: 1.61, unit: "us", check: "gpudirect_rdma_latency", nodes: 1, p99_median: 2.05 }, nccl_busbw: null, nccl_latency: null },
      price_per_tflop_hour: 2811,
      price_per_nccl_gbps_hour: null,
      not_measured: { nccl_busbw: "no passing report ran nccl_allreduce", price_per_nccl_gbps_hour: "nccl_busbw not measured" },
    }),
    virtual: kind({
      measured: { gemm: { ...gemm, median: 4700.25, nodes: 1 } },
      price_per_tflop_hour: 2681,
      price_per_nccl_gbps_hour: null,
    }),
  },
  virtualization_tax: {
    gemm: { relative: 0.0826, baremetal: 5123.456, virtual: 4700.25, unit: "TFLOPS" },
    price_per_tflop_hour: { relative: -0.0462, baremetal: 2811, virtual: 2681, unit: "micros per TFLOP-hour" },
    nccl_latency: { relative: 0.3736, baremetal: 18.2, virtual: 25, unit: "us" },
  },
};

describe("unitRows", () => {
  const rows = unitRows(profile);
  const row = (key: string) => rows.find((r) => r.key === key)!;
  it("shows the integer prices exactly, and each figure with its unit and node count", () => {
    expect(row("price_per_tflop_hour").baremetal).toMatchObject({ text: "0.002811 /h", measured: true });
    expect(row("price_per_tflop_hour").virtual.text).toBe("0.002681 /h");
    expect(row("gemm").baremetal).toMatchObject({ text: "5,123.456 TFLOPS", detail: "median of 3 nodes" });
    expect(row("gemm").virtual.detail).toBe("median of 1 node");
    expect(row("gpudirect_rdma_latency").baremetal.text).toBe("1.61 µs");
    expect(row("gpudirect_rdma_latency_p99").baremetal.text).toBe("2.05 µs");
  });
  it("says not measured, with the API's reason, and invents nothing", () => {
    expect(row("price_per_nccl_gbps_hour").baremetal).toEqual({
      text: "not measured", measured: false, reason: "nccl_busbw not measured" });
    expect(row("nccl_busbw").baremetal.reason).toBe("no passing report ran nccl_allreduce");
    expect(row("nccl_latency").virtual).toMatchObject({ text: "not measured", measured: false });
    expect(row("gpudirect_rdma_latency_p99").virtual.text).toBe("not measured");
  });
  it("puts the tax in words, not colour", () => {
    expect(taxText(profile, "gemm")).toBe("8.3% less on virtual");
    expect(taxText(profile, "price_per_tflop_hour")).toBe("4.6% cheaper on virtual");
    expect(taxText(profile, "nccl_latency")).toBe("37.4% slower on virtual");
    expect(taxText(profile, "nccl_busbw")).toBe("not measured on both kinds");
    expect(taxText({ ...profile, virtualization_tax: null }, "gemm")).toBe("not measured on both kinds");
  });
});
