// The REST API (v1) as the portal uses it: every call carries the session's
// token as a Bearer header (never in a URL), and every failure becomes an
// ApiError holding the problem+json detail and its field errors, keyed by
// JSON pointer ("/count", "/ssh_keys/0"), for the form to show next to the
// field they name.

export interface FieldError {
  field: string;
  message: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
    readonly fields: FieldError[],
  ) {
    super(detail);
  }
}

export type Role = "admin" | "operator" | "tenant";

export class Api {
  constructor(private readonly token: string) {}

  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { Authorization: `Bearer ${this.token}`, Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const res = await fetch(path, { method, headers, body: body === undefined ? null : JSON.stringify(body), cache: "no-store" });
    const text = await res.text();
    let json: unknown = null;
    try {
      json = text === "" ? null : JSON.parse(text);
    } catch {
      json = null;
    }
    if (!res.ok) throw toApiError(res.status, json);
    return json as T;
  }

  get<T>(path: string): Promise<T> {
    return this.call<T>("GET", path);
  }

  // Who the token is (GET /v1/whoami): its role decides what the portal shows.
  async whoami(): Promise<{ role: Role; tenant: string | null }> {
    const me = await this.get<{ role: Role; tenant: string | null }>("/v1/whoami");
    return { role: me.role, tenant: me.tenant };
  }
}

export function toApiError(status: number, body: unknown): ApiError {
  const p = (typeof body === "object" && body !== null ? body : {}) as { detail?: unknown; title?: unknown; errors?: unknown };
  const detail = typeof p.detail === "string" ? p.detail : typeof p.title === "string" ? p.title : `HTTP ${status}`;
  const fields: FieldError[] = [];
  if (Array.isArray(p.errors))
    for (const e of p.errors)
      if (typeof e === "object" && e !== null && typeof e.field === "string" && typeof e.message === "string")
        fields.push({ field: e.field, message: e.message });
  return new ApiError(status, detail, fields);
}

// The form field a problem's JSON pointer names: "/ssh_keys/0" -> "ssh_keys",
// "/count" -> "count"; "" or "/" (the whole body) -> null.
export function fieldOfPointer(pointer: string): string | null {
  const first = pointer.split("/")[1];
  if (first === undefined || first === "") return null;
  return first.replace(/~1/g, "/").replace(/~0/g, "~");
}

// --- the shapes the portal reads (schemas/openapi.yaml) ---

export interface Measured {
  median: number;
  unit: string;
  samples: number;
}
// A figure priced per measured unit (controller/tenancy/unit_price.h): the
// median over nodes, each node's newest verdict, with what it came from.
export interface UnitMeasured {
  median: number;
  unit: string;
  check: string;
  source: string;
  statistic: string;
  nodes: number;
  values: number[];
  reports: string[];
  reports_withheld: number;
  failing_nodes: number;
  refused_reports: number;
  p99_median?: number | null;
}
export type UnitFigureName = "gemm" | "nccl_busbw" | "gpudirect_rdma_latency" | "nccl_latency";
export interface KindAvailability {
  free: number;
  price_per_second: number | null;
  // The headline checks (Measured, absent when not measured) and the unit
  // figures (UnitMeasured, null when not measured: the reason is in not_measured).
  measured: Record<string, Measured | UnitMeasured | null>;
  // Integer micro-units; null when not measured or not priced.
  price_micros_per_hour?: number | null;
  price_per_tflop_hour?: number | null;
  price_per_nccl_gbps_hour?: number | null;
  not_measured?: Record<string, string>;
}
export interface ProfileAvailability {
  profile: string;
  description: string;
  gpu: { model: string; count: number };
  kinds: { baremetal: KindAvailability; virtual: KindAvailability };
  virtualization_tax: Record<string, { relative: number; baremetal: number; virtual: number; unit: string }> | null;
}
export interface Quota {
  profile: string;
  kind: string;
  max_nodes: number;
  in_use: number;
}
export interface Tenant {
  name: string;
  display_name: string;
  quotas: Quota[];
}
export interface MemberNode {
  id: string;
  member: string;
  reason?: string;
  joined_at: string | null;
  left_at: string | null;
  name?: string | null;
  state?: string;
  step?: string | null;
  last_validation?: string | null;
  addresses?: string[];
  ssh?: string | null;
  // The OS's SSH host keys, posted by cloud-init's phone_home.
  ssh_host_keys?: { type: string; key: string; sha256: string }[];
}
export interface Allocation {
  id: string;
  name: string;
  tenant: string;
  profile: string;
  kind: string;
  count: number;
  image: string;
  state: string;
  last_error: string | null;
  lease_seconds: number | null;
  expires_at: string | null;
  ready_at: string | null;
  nodes: MemberNode[];
  former_nodes: MemberNode[];
  history: { at: string; from: string | null; to: string; reason?: string }[];
  created_at: string;
}
export interface UsageRow {
  allocation: string;
  node: string;
  profile: string;
  kind: string;
  started_at: string;
  ended_at: string | null;
  seconds: number;
  price_micros_per_second: number;
  cost_micros: number;
}
export interface Node {
  id: string;
  name: string | null;
  kind: string;
  profile: string | null;
  provision_state: string;
  power_state: string;
  maintenance: boolean;
  maintenance_reason?: string | null;
  last_error?: string | null;
  tenant: string | null;
  allocation: string | null;
  last_validation: string | null;
}
export interface Check {
  name: string;
  status: "pass" | "fail" | "skip";
  value?: number | null;
  unit?: string;
  threshold?: { min?: number; max?: number; max_gap?: number } | null;
  details?: unknown;
}
export interface ValidationRecord {
  id: string;
  node: string;
  report: { result: string; error?: string; checks?: Check[]; plan?: string };
}
