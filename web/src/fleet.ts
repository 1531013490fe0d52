// The fleet view's query: filters and sort as /v1/nodes takes them, and the
// counts per state read from /metrics (kiln_nodes{provision_state="..."}).
import type { NodeQuery } from "./api/types";

export interface FleetFilter {
  provision_state: string;
  profile: string;
  kind: string;
  tenant: string;
  maintenance: string;
  sort: string;
}

export const kPageSize = 50;

// The page of nodes the filter and marker name: empty filters are left out.
export function nodesQuery(f: FleetFilter, marker: string | null, limit = kPageSize): NodeQuery {
  const q: NodeQuery = { limit };
  for (const key of ["provision_state", "profile", "kind", "tenant", "maintenance", "sort"] as const) {
    const v = f[key].trim();
    if (v !== "") q[key] = v;
  }
  if (marker !== null) q.marker = marker;
  return q;
}

// The marker of the page after this one, from the list's `next` URL.
export function markerOf(next: string | null): string | null {
  if (next === null) return null;
  try {
    return new URL(next, "http://x").searchParams.get("marker");
  } catch {
    return null;
  }
}

export function stateCounts(metrics: string): Record<string, number> {
  const out: Record<string, number> = {};
  const re = /^kiln_nodes\{provision_state="([a-z_]+)"\} (\d+)$/gm;
  for (let m = re.exec(metrics); m !== null; m = re.exec(metrics)) out[m[1]!] = Number(m[2]);
  return out;
}
