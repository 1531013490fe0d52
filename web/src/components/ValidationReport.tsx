// A validation report: failing checks first with their reasons, the NCCL bus
// bandwidth curve (log size axis) when the report has a sweep, and every
// measured figure against its floor (or ceiling, for jitter).
import { useEffect, useState } from "preact/hooks";
import type { Api } from "../api/client";
import type { Check, ValidationRecord } from "../api/types";
import { curvePath, formatBytes, jitterBars, jitterCeilings, jitterFigures, sweepPoints } from "../charts";
import { State } from "./common";

function reasonOf(c: Check): string {
  const d = c.details;
  if (typeof d === "string") return d;
  if (typeof d === "object" && d !== null && typeof (d as { reason?: unknown }).reason === "string") return (d as { reason: string }).reason;
  return "";
}

export function ValidationReport(props: { api: Api; id: string }) {
  const [rec, setRec] = useState<ValidationRecord | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    setRec(null);
    props.api
      .getValidation(props.id)
      .then(setRec)
      .catch((e: unknown) => setError(e instanceof Error ? e.message : String(e)));
  }, [props.id]);
  if (error !== null) return <p class="form-error">{error}</p>;
  if (rec === null) return <p role="status">Loading report…</p>;
  const report = rec.report;
  const checks = [...(report.checks ?? [])].sort((a, b) => Number(b.status === "fail") - Number(a.status === "fail"));
  const sweeps = checks.filter((c) => sweepPoints(c.details).length > 0);
  const jitters = checks.filter((c) => jitterFigures(c.details) !== null);
  const figures = checks.filter((c) => typeof c.value === "number" && c.threshold != null && (c.threshold.min !== undefined || c.threshold.max !== undefined));
  return (
    <section class="report" aria-label={`Validation report ${rec.id}`}>
      <h3>
        Validation {rec.report.plan ?? ""} <State value={report.result} />
      </h3>
      {report.error !== undefined && <p class="form-error">{report.error}</p>}
      <table class="list">
        <thead>
          <tr>
            <th scope="col">Check</th>
            <th scope="col">Result</th>
            <th scope="col">Value</th>
            <th scope="col">Reason</th>
          </tr>
        </thead>
        <tbody>
          {checks.map((c) => (
            <tr class={c.status === "fail" ? "failing" : ""}>
              <td>{c.name}</td>
              <td>
                <State value={c.status} />
              </td>
              <td>{typeof c.value === "number" ? `${c.value} ${c.unit ?? ""}` : "—"}</td>
              <td>{reasonOf(c)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {sweeps.map((c) => (
        <BusBandwidthChart check={c} />
      ))}
      {jitters.map((c) => (
        <JitterChart check={c} />
      ))}
      {figures.length > 0 && <FloorChart checks={figures} />}
    </section>
  );
}

const kBox = { width: 560, height: 240, left: 56, right: 16, top: 16, bottom: 40 };

function BusBandwidthChart(props: { check: Check }) {
  const points = sweepPoints(props.check.details);
  const floor = props.check.threshold?.min ?? null;
  const { xy, yMax, floorY } = curvePath(points, kBox, floor);
  const title = `${props.check.name}: bus bandwidth against message size`;
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${kBox.width} ${kBox.height}`} role="img" aria-label={`${title}, ${points.length} sizes from ${formatBytes(points[0]!.bytes)} to ${formatBytes(points[points.length - 1]!.bytes)}`}>
        <line x1={kBox.left} y1={kBox.height - kBox.bottom} x2={kBox.width - kBox.right} y2={kBox.height - kBox.bottom} class="axis" />
        <line x1={kBox.left} y1={kBox.top} x2={kBox.left} y2={kBox.height - kBox.bottom} class="axis" />
        <text x={kBox.left - 6} y={kBox.top + 4} class="tick" text-anchor="end">
          {yMax.toFixed(0)}
        </text>
        <text x={kBox.left - 6} y={kBox.height - kBox.bottom} class="tick" text-anchor="end">
          0
        </text>
        {floorY !== null && (
          <>
            <line x1={kBox.left} y1={floorY} x2={kBox.width - kBox.right} y2={floorY} class="floor" />
            <text x={kBox.width - kBox.right} y={floorY - 4} class="tick" text-anchor="end">
              floor {floor} GB/s
            </text>
          </>
        )}
        <polyline points={xy.map((p) => p.join(",")).join(" ")} class="curve" />
        {xy.map((p, i) => (
          <circle cx={p[0]} cy={p[1]} r="3" class="dot">
            <title>
              {formatBytes(points[i]!.bytes)}: {points[i]!.busbw_gbps} GB/s
            </title>
          </circle>
        ))}
        {xy.map((p, i) =>
          i % Math.max(1, Math.ceil(xy.length / 6)) === 0 || i === xy.length - 1 ? (
            <text x={p[0]} y={kBox.height - kBox.bottom + 16} class="tick" text-anchor="middle">
              {formatBytes(points[i]!.bytes)}
            </text>
          ) : null,
        )}
        <text x={kBox.left + 4} y={kBox.height - 4} class="tick">
          message size (log scale)
        </text>
      </svg>
      <figcaption>{title} (GB/s)</figcaption>
    </figure>
  );
}

function us(v: number): string {
  return `${v >= 100 ? v.toFixed(0) : Number(v.toPrecision(3))} us`;
}

// The scheduling-gap quantiles as bars on a log axis (charts.ts), the
// profile's ceilings as lines; the name read out says every figure, and the
// stall counts are in the caption, so nothing is only in the picture.
function JitterChart(props: { check: Check }) {
  const f = jitterFigures(props.check.details)!;
  const row = 26;
  const box = { width: 560, height: f.quantiles.length * row + 44, left: 70, right: 36, top: 8, bottom: 36 };
  const ceilings = jitterCeilings(props.check.threshold);
  const g = jitterBars(f.quantiles, box, row, ceilings);
  const axisY = box.top + f.quantiles.length * row + 2;
  const name =
    `${props.check.name}: scheduling gaps, ` +
    f.quantiles.map((q) => `${q.label} ${us(q.us)}`).join(", ") +
    (ceilings.length > 0 ? `; ceiling ${ceilings.map((c) => `${c.label} ${us(c.us)}`).join(", ")}` : "");
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${box.width} ${box.height}`} role="img" aria-label={name}>
        {g.bars.map((b) => {
          const over = ceilings.some((c) => c.label === b.label && b.us > c.us);
          return (
            <g>
              <text x={box.left - 8} y={b.y + 15} class="tick" text-anchor="end">
                {b.label}
              </text>
              <rect x={box.left} y={b.y} width={Math.max(1, b.width)} height={row - 8} class={over ? "bar fail" : "bar"}>
                <title>
                  {b.label}: {us(b.us)}
                </title>
              </rect>
              <text x={box.left + Math.min(b.width, box.width - box.left - box.right - 70) + 4} y={b.y + 15} class="tick">
                {us(b.us)}
              </text>
            </g>
          );
        })}
        {g.ceilings.map((c) => {
          // Across the row of the quantile it bounds, so the line reads as that bar's limit.
          const bar = g.bars.find((b) => b.label === c.label);
          return (
            <line x1={c.x} y1={bar === undefined ? box.top - 4 : bar.y - 3} x2={c.x} y2={bar === undefined ? axisY : bar.y + row - 5} class="floor">
              <title>
                ceiling on {c.label}: {us(c.us)}
              </title>
            </line>
          );
        })}
        <line x1={box.left} y1={axisY} x2={box.width - box.right} y2={axisY} class="axis" />
        {g.ticks.map((t) => (
          <text x={t.x} y={axisY + 14} class="tick" text-anchor="middle">
            {t.us >= 1000 ? `${t.us / 1000} ms` : `${t.us} us`}
          </text>
        ))}
        <text x={box.left} y={box.height - 4} class="tick">
          scheduling gap (log scale)
        </text>
      </svg>
      <figcaption>
        {props.check.name}: scheduling gaps by quantile{ceilings.length > 0 && ", the line marks the ceiling"}
        {f.stalls !== null && (
          <>
            . Stalls: {f.stalls.over_10us} over 10 us, {f.stalls.over_100us} over 100 us, {f.stalls.over_1ms} over 1 ms
            {f.samples !== null && <> in {f.samples} samples</>}
          </>
        )}
      </figcaption>
    </figure>
  );
}

// Each figure as a bar scaled to its own limit: the limit line sits at 3/4 of
// the room a bar has, so "above the floor" and "below the ceiling" read the
// same way across units. A bar stops at its room (the exact figure is in its
// label and title), which keeps the label clear of the bar.
function FloorChart(props: { checks: Check[] }) {
  const row = 28;
  const left = 150;
  const width = 560;
  const room = width - left - 20 - 90; // 90: the label after the longest bar
  const limitAt = 0.75 * room;
  const height = props.checks.length * row + 24;
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${width} ${height}`} role="img" aria-label="Measured figures against their floors and ceilings">
        {props.checks.map((c, i) => {
          const limit = (c.threshold?.min ?? c.threshold?.max)!;
          const isMax = c.threshold?.min === undefined;
          const value = c.value as number;
          const scale = limitAt / (limit || 1);
          const w = Math.min(room, Math.max(1, value * scale));
          const y = 8 + i * row;
          return (
            <g>
              <text x={left - 8} y={y + 14} class="tick" text-anchor="end">
                {c.name}
              </text>
              <rect x={left} y={y} width={w} height={row - 10} class={c.status === "fail" ? "bar fail" : "bar"}>
                <title>
                  {value} {c.unit} ({isMax ? "ceiling" : "floor"} {limit})
                </title>
              </rect>
              <line x1={left + limitAt} y1={y - 2} x2={left + limitAt} y2={y + row - 8} class="floor" />
              <text x={left + w + 4} y={y + 14} class="tick">
                {value} {c.unit}
              </text>
            </g>
          );
        })}
      </svg>
      <figcaption>Measured against the profile's floor (or ceiling for latency), marked by the line</figcaption>
    </figure>
  );
}
