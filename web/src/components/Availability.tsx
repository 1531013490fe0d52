// Capacity per profile, bare metal and virtual side by side: free nodes,
// price per second and per hour, the measured medians of the headline checks
// (never a made-up figure: "not measured" when no passing report has one),
// the virtualization tax, and, for a tenant, its quota and use.
import type { KindAvailability, ProfileAvailability, Quota } from "../api/types";
import { formatPrice } from "../money";
import { UnitCell, unitRows } from "../unit_price";

const kKinds = [
  { key: "baremetal", label: "Bare metal" },
  { key: "virtual", label: "Virtual" },
] as const;

// Taxes the price-per-unit table shows in its own column.
const kUnitTaxes = new Set(["gemm", "nccl_busbw", "gpudirect_rdma_latency", "nccl_latency", "price_per_tflop_hour",
  "price_per_nccl_gbps_hour"]);

// The figures shown for every kind, measured or not.
const kHeadline: { check: string; label: string }[] = [
  { check: "nccl_allreduce", label: "NCCL bus bandwidth" },
  { check: "hbm_bandwidth", label: "HBM bandwidth" },
  { check: "jitter", label: "Jitter p99.9" },
];

function Measured(props: { kind: KindAvailability; check: string }) {
  const m = props.kind.measured[props.check];
  if (m === undefined || m === null || !("samples" in m)) return <span class="unmeasured">not measured</span>;
  return (
    <span title={`median of ${m.samples} passing report${m.samples === 1 ? "" : "s"}`}>
      {m.median.toLocaleString(undefined, { maximumFractionDigits: 1 })} {m.unit}
    </span>
  );
}

function KindColumn(props: { label: string; kind: KindAvailability; quota: Quota | undefined; tenant: boolean }) {
  const price = formatPrice(props.kind.price_per_second);
  return (
    <section class="kind" aria-label={props.label}>
      <h4>{props.label}</h4>
      <dl>
        <dt>Free</dt>
        <dd class="free">{props.kind.free}</dd>
        <dt>Price</dt>
        <dd>{price === null ? <span class="unmeasured">not priced</span> : <>{price.second} /s · {price.hour} /h</>}</dd>
        {kHeadline.map((h) => (
          <>
            <dt>{h.label}</dt>
            <dd>
              <Measured kind={props.kind} check={h.check} />
            </dd>
          </>
        ))}
        {props.tenant && (
          <>
            <dt>Your quota</dt>
            <dd>{props.quota === undefined ? "none" : `${props.quota.in_use} of ${props.quota.max_nodes} in use`}</dd>
          </>
        )}
      </dl>
    </section>
  );
}

function UnitValue(props: { cell: UnitCell }) {
  const c = props.cell;
  if (!c.measured) return <span class="unmeasured" title={c.reason}>{c.text}</span>;
  return (
    <>
      {c.text}
      {c.detail !== undefined && <span class="muted unit-detail"> ({c.detail})</span>}
    </>
  );
}

// Price per measured unit beside the price: one table, a row per figure with
// its name as the row header, the kinds and the tax as column headers.
function UnitPrices(props: { profile: ProfileAvailability }) {
  return (
    <table class="list unit-prices">
      <caption>Price per measured unit</caption>
      <thead>
        <tr>
          <th scope="col">Figure</th>
          <th scope="col">Bare metal</th>
          <th scope="col">Virtual</th>
          <th scope="col">Virtualization tax</th>
        </tr>
      </thead>
      <tbody>
        {unitRows(props.profile).map((r) => (
          <tr key={r.key} data-row={r.key}>
            <th scope="row">{r.label}</th>
            <td>
              <UnitValue cell={r.baremetal} />
            </td>
            <td>
              <UnitValue cell={r.virtual} />
            </td>
            <td>{r.tax}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

// The headline checks' taxes, "" when none was measured on both kinds.
function headlineTaxes(p: ProfileAvailability): string {
  return Object.entries(p.virtualization_tax ?? {})
    .filter(([check]) => !kUnitTaxes.has(check))
    .map(([check, t]) => `${check} ${(t.relative * 100).toFixed(1)}%`)
    .join(", ");
}

export function Availability(props: { profiles: ProfileAvailability[]; quotas: Quota[] | null }) {
  if (props.profiles.length === 0) return <p>No profiles are defined yet.</p>;
  return (
    <div class="availability">
      {props.profiles.map((p) => (
        <article class="profile" aria-label={`Profile ${p.profile}`} key={p.profile}>
          <h3>{p.profile}</h3>
          <p class="muted">
            {p.description}
            {p.gpu.count > 0 && ` · ${p.gpu.count}× ${p.gpu.model}`}
          </p>
          <div class="kinds">
            {kKinds.map((k) => (
              <KindColumn
                label={k.label}
                kind={p.kinds[k.key]}
                tenant={props.quotas !== null}
                quota={props.quotas?.find((q) => q.profile === p.profile && q.kind === k.key)}
              />
            ))}
          </div>
          <UnitPrices profile={p} />
          <p class="tax">
            Virtualization tax:{" "}
            {headlineTaxes(p) === "" ? (
              <span class="unmeasured">not measured on both kinds</span>
            ) : (
              headlineTaxes(p)
            )}
          </p>
        </article>
      ))}
    </div>
  );
}
