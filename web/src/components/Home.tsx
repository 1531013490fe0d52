// The tenant's home: what exists, the request form, its allocations (live)
// and what they cost. Staff see capacity and every tenant's allocations, and
// request nodes on behalf of a tenant they pick.
import { useEffect, useState } from "preact/hooks";
import type { Allocation, ProfileAvailability, Quota, Tenant, UsageRow } from "../api/types";
import { useLive } from "../live";
import { formatMicros } from "../money";
import { Link, navigate } from "../route";
import type { Who } from "../who";
import { Availability } from "./Availability";
import { State } from "./common";
import { RequestForm } from "./RequestForm";

export function Home(props: { who: Who }) {
  const { api, role } = props.who;
  const tenant = role === "tenant";
  const [profiles, setProfiles] = useState<ProfileAvailability[] | null>(null);
  const [quotas, setQuotas] = useState<Quota[] | null>(null);
  const [images, setImages] = useState<string[]>([]);
  // Staff request on behalf of a tenant: every tenant, for the form's picker.
  const [tenants, setTenants] = useState<Tenant[] | null>(null);
  const [allocations, setAllocations] = useState<Allocation[]>([]);
  const [usage, setUsage] = useState<{ rows: UsageRow[]; cost: number; seconds: number } | null>(null);
  const [error, setError] = useState<string | null>(null);

  useLive({
    api,
    query: [],
    load: async () => {
      try {
        const [avail, allocs, use] = await Promise.all([api.availability(), api.listAllocations(), api.usage()]);
        setProfiles(avail.availability);
        setAllocations(allocs.allocations);
        setUsage({ rows: use.usage, cost: use.totals.cost_micros, seconds: use.totals.seconds });
        if (tenant) {
          const t = await api.listTenants();
          setQuotas(t.tenants[0]?.quotas ?? []);
        }
        setError(null);
      } catch (e) {
        setError(e instanceof Error ? e.message : String(e));
      }
    },
    // Allocation and node changes move capacity, quotas and the list.
    onEvent: (e) => e.type.startsWith("allocation.") || e.type.startsWith("node."),
  });

  // What the request form offers, read once.
  useEffect(() => {
    void api
      .listImages()
      .then((r) => setImages(r.images.filter((i) => i.kind === "os" && i.status === "ready").map((i) => i.name)))
      .catch(() => setImages([]));
    if (!tenant)
      void api
        .listTenants()
        .then((r) => setTenants(r.tenants))
        .catch((e: unknown) => setError(e instanceof Error ? e.message : String(e)));
  }, [api]);

  return (
    <>
      {error !== null && <p role="alert" class="form-error">{error}</p>}
      <section aria-labelledby="avail-title">
        <h2 id="avail-title">Availability</h2>
        {profiles === null ? <p role="status">Loading…</p> : <Availability profiles={profiles} quotas={tenant ? quotas : null} />}
      </section>
      {profiles !== null && (tenant || tenants !== null) && (
        <RequestForm
          api={api}
          profiles={profiles}
          images={images}
          tenants={tenant ? null : tenants}
          onCreated={(a) => navigate(`/allocations/${encodeURIComponent(a.id)}`)}
        />
      )}
      <section aria-labelledby="allocs-title">
        <h2 id="allocs-title">{tenant ? "Your allocations" : "Allocations"}</h2>
        {allocations.length === 0 ? (
          <p>No allocations yet.</p>
        ) : (
          <table class="list">
            <thead>
              <tr>
                <th scope="col">Name</th>
                {!tenant && <th scope="col">Tenant</th>}
                <th scope="col">Profile</th>
                <th scope="col">Kind</th>
                <th scope="col">Nodes</th>
                <th scope="col">State</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {allocations.map((a) => (
                <tr key={a.id} data-allocation={a.id}>
                  <td>
                    <Link href={`/allocations/${encodeURIComponent(a.id)}`}>{a.name}</Link>
                  </td>
                  {!tenant && <td>{a.tenant}</td>}
                  <td>{a.profile}</td>
                  <td>{a.kind}</td>
                  <td>{a.count}</td>
                  <td>
                    <State value={a.state} />
                  </td>
                  <td>{new Date(a.created_at).toLocaleString()}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
      <section aria-labelledby="usage-title">
        <h2 id="usage-title">Usage and cost</h2>
        {usage === null ? (
          <p role="status">Loading…</p>
        ) : (
          <p>
            {usage.rows.length} metered node{usage.rows.length === 1 ? "" : "s"}, {Math.round(usage.seconds)} node-seconds,{" "}
            <strong class="cost">{formatMicros(usage.cost)}</strong> so far.
          </p>
        )}
      </section>
    </>
  );
}
