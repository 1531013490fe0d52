// The fleet view's query: filters and sort as /v1/nodes takes them, and the
// counts per state read from /metrics (kiln_nodes{provision_state="..."}).

export interface FleetFilter {
  provision_state: string;
  profile: string;
  kind: string;
  tenant: string;
  maintenance: string;
  sort: string;
}

export const kPageSize = 50;

export function nodesQuery(f: FleetFilter, marker: string | null, limit = kPageSize): string {
  const q = new URLSearchParams();
  q.set("limit", String(limit));
  for (const key of ["provision_state", "profile", "kind", "tenant", "maintenance", "sort"] as const) {
    const v = f[key].trim();
    if (v !== "") q.set(key, v);
  }
  if (marker !== null) q.set("marker", marker);
  return `/v1/nodes?${q.toString()}`;
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
