// Capacity per profile, bare metal and virtual side by side: free nodes,
// price per second and per hour, the measured medians of the headline checks
// (never a made-up figure: "not measured" when no passing report has one),
// the virtualization tax, and, for a tenant, its quota and use.
import { KindAvailability, ProfileAvailability, Quota } from "../api";
import { formatPrice } from "../money";

const kKinds = [
  { key: "baremetal", label: "Bare metal" },
  { key: "virtual", label: "Virtual" },
] as const;

// The figures shown for every kind, measured or not.
const kHeadline: { check: string; label: string }[] = [
  { check: "nccl_allreduce", label: "NCCL bus bandwidth" },
  { check: "hbm_bandwidth", label: "HBM bandwidth" },
  { check: "jitter", label: "Jitter p99.9" },
];

function Measured(props: { kind: KindAvailability; check: string }) {
  const m = props.kind.measured[props.check];
  if (m === undefined) return <span class="unmeasured">not measured</span>;
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
          <p class="tax">
            Virtualization tax:{" "}
            {p.virtualization_tax === null ? (
              <span class="unmeasured">not measured on both kinds</span>
            ) : (
              Object.entries(p.virtualization_tax)
                .map(([check, t]) => `${check} ${(t.relative * 100).toFixed(1)}%`)
                .join(", ")
            )}
          </p>
        </article>
      ))}
    </div>
  );
}
