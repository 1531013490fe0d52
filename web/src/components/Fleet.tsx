// The operators' fleet view: counts per state, the nodes that need someone
// (quarantined or failed, with last_error), and the node table with
// server-side pagination (marker), filters and sort, power and maintenance
// actions behind a confirmation, and live updates from the event stream.
import { useState } from "preact/hooks";
import type { Node } from "../api/types";
import { FleetFilter, kPageSize, markerOf, nodesQuery, stateCounts } from "../fleet";
import { useLive } from "../live";
import type { Who } from "../who";
import { Confirm, State } from "./common";

const kStates = ["enroll", "verifying", "manageable", "inspecting", "inspect_failed", "cleaning", "clean_failed", "burning_in", "quarantined", "available", "deploying", "deploy_failed", "validating", "active"];
const kNeedsSomeone = ["quarantined", "deploy_failed", "clean_failed", "inspect_failed"];

// An action on one node, waiting for its confirmation.
interface Action {
  node: Node;
  label: string;
  run: () => Promise<unknown>;
}

export function Fleet(props: { who: Who }) {
  const { api } = props.who;
  const [filter, setFilter] = useState<FleetFilter>({ provision_state: "", profile: "", kind: "", tenant: "", maintenance: "", sort: "name" });
  // The markers of the pages before this one: Previous pops, Next pushes.
  const [markers, setMarkers] = useState<(string | null)[]>([null]);
  const [page, setPage] = useState<{ nodes: Node[]; next: string | null } | null>(null);
  const [counts, setCounts] = useState<Record<string, number>>({});
  const [attention, setAttention] = useState<Node[]>([]);
  const [pending, setPending] = useState<Action | null>(null);
  const [error, setError] = useState<string | null>(null);
  const marker = markers[markers.length - 1] ?? null;

  const reload = useLive({
    api,
    query: [filter, marker],
    load: async (current) => {
      try {
        const [list, metrics, ...bad] = await Promise.all([
          api.listNodes(nodesQuery(filter, marker)),
          api.metrics(),
          ...kNeedsSomeone.map((s) => api.listNodes({ provision_state: s, limit: 20 })),
        ]);
        if (!current()) return; // the filter or page changed meanwhile
        setPage(list);
        setCounts(stateCounts(metrics));
        setAttention(bad.flatMap((b) => b.nodes));
        setError(null);
      } catch (e) {
        if (current()) setError(e instanceof Error ? e.message : String(e));
      }
    },
    onEvent: (e) => e.type.startsWith("node.") || e.type.startsWith("provision.") || e.type.startsWith("power."),
  });

  const set = (key: keyof FleetFilter) => (e: Event) => {
    setFilter({ ...filter, [key]: (e.currentTarget as HTMLInputElement | HTMLSelectElement).value });
    setMarkers([null]);
  };
  const run = async (a: Action) => {
    setPending(null);
    try {
      await a.run();
      reload();
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
  };
  const total = Object.values(counts).reduce((a, b) => a + b, 0);

  return (
    <>
      <h1>Fleet</h1>
      {error !== null && <p role="alert" class="form-error">{error}</p>}
      <section aria-labelledby="counts-title">
        <h2 id="counts-title">Nodes per state ({total})</h2>
        <ul class="counts">
          {kStates.filter((s) => (counts[s] ?? 0) > 0).map((s) => (
            <li>
              <State value={s} /> <span class="count">{counts[s]}</span>
            </li>
          ))}
        </ul>
      </section>
      {attention.length > 0 && (
        <section aria-labelledby="attention-title">
          <h2 id="attention-title">Quarantined and failed</h2>
          <ul>
            {attention.map((n) => (
              <li>
                <strong>{n.name ?? n.id}</strong> <State value={n.provision_state} />: {n.last_error ?? n.maintenance_reason ?? "no reason recorded"}
              </li>
            ))}
          </ul>
        </section>
      )}
      <section aria-labelledby="nodes-title">
        <h2 id="nodes-title">Nodes</h2>
        <form class="filters" onSubmit={(e) => e.preventDefault()} aria-label="Filter nodes">
          <div>
            <label for="f-state">State</label>
            <select id="f-state" value={filter.provision_state} onChange={set("provision_state")}>
              <option value="">any</option>
              {kStates.map((s) => (
                <option value={s}>{s}</option>
              ))}
            </select>
          </div>
          <div>
            <label for="f-profile">Profile</label>
            <input id="f-profile" value={filter.profile} onChange={set("profile")} />
          </div>
          <div>
            <label for="f-kind">Kind</label>
            <select id="f-kind" value={filter.kind} onChange={set("kind")}>
              <option value="">any</option>
              <option value="baremetal">baremetal</option>
              <option value="virtual">virtual</option>
            </select>
          </div>
          <div>
            <label for="f-tenant">Tenant</label>
            <input id="f-tenant" value={filter.tenant} onChange={set("tenant")} />
          </div>
          <div>
            <label for="f-maintenance">Maintenance</label>
            <select id="f-maintenance" value={filter.maintenance} onChange={set("maintenance")}>
              <option value="">any</option>
              <option value="true">in maintenance</option>
              <option value="false">not in maintenance</option>
            </select>
          </div>
          <div>
            <label for="f-sort">Sort</label>
            <select id="f-sort" value={filter.sort} onChange={set("sort")}>
              <option value="name">name</option>
              <option value="-updated_at">recently changed</option>
              <option value="provision_state">state</option>
              <option value="created_at">created</option>
            </select>
          </div>
        </form>
        {page === null ? (
          <p role="status">Loading…</p>
        ) : (
          <>
            <div class="scroll" tabIndex={0} role="region" aria-label="Node table">
            <table class="list" aria-label="Nodes">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Kind</th>
                  <th scope="col">Profile</th>
                  <th scope="col">State</th>
                  <th scope="col">Power</th>
                  <th scope="col">Maintenance</th>
                  <th scope="col">Tenant</th>
                  <th scope="col">Actions</th>
                </tr>
              </thead>
              <tbody>
                {page.nodes.map((n) => (
                  <tr key={n.id} data-node={n.id}>
                    <td>{n.name ?? n.id}</td>
                    <td>{n.kind}</td>
                    <td>{n.profile ?? "—"}</td>
                    <td>
                      <State value={n.provision_state} />
                    </td>
                    <td>{n.power_state}</td>
                    <td>{n.maintenance ? `yes${n.maintenance_reason ? `: ${n.maintenance_reason}` : ""}` : "no"}</td>
                    <td>{n.tenant ?? "—"}</td>
                    <td class="actions">
                      <button type="button" class="secondary" onClick={() => setPending({ node: n, label: "Power on", run: () => api.setPower(n.id, "on") })}>
                        Power on<span class="sr-only"> {n.name ?? n.id}</span>
                      </button>
                      <button type="button" class="secondary" onClick={() => setPending({ node: n, label: "Power off", run: () => api.setPower(n.id, "off") })}>
                        Power off<span class="sr-only"> {n.name ?? n.id}</span>
                      </button>
                      {n.maintenance ? (
                        <button type="button" class="secondary" onClick={() => setPending({ node: n, label: "End maintenance", run: () => api.clearMaintenance(n.id) })}>
                          End maintenance<span class="sr-only"> {n.name ?? n.id}</span>
                        </button>
                      ) : (
                        <button type="button" class="secondary" onClick={() => setPending({ node: n, label: "Maintenance", run: () => api.setMaintenance(n.id, "set from the portal") })}>
                          Maintenance<span class="sr-only"> {n.name ?? n.id}</span>
                        </button>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
            </div>
            <nav class="pager" aria-label="Pages">
              <button type="button" class="secondary" disabled={markers.length === 1} onClick={() => setMarkers(markers.slice(0, -1))}>
                Previous page
              </button>
              <span>
                Page {markers.length} · {page.nodes.length} of up to {kPageSize}
              </span>
              <button type="button" class="secondary" disabled={page.next === null} onClick={() => setMarkers([...markers, markerOf(page.next)])}>
                Next page
              </button>
            </nav>
          </>
        )}
      </section>
      <Confirm
        open={pending !== null}
        title={pending === null ? "" : `${pending.label}: ${pending.node.name ?? pending.node.id}?`}
        confirmLabel={pending === null ? "" : `Yes, ${pending.label.toLowerCase()}`}
        onConfirm={() => pending !== null && void run(pending)}
        onCancel={() => setPending(null)}
      >
        <p>This acts on the node at once.</p>
      </Confirm>
    </>
  );
}
