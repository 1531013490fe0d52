// The bodies the portal sends and reads, as schemas/openapi.yaml defines them.
// Written by hand, and held to the spec by tests/unit/openapi_types.test.ts:
// each declaration names where it lives in the spec with an @openapi tag, and
// every field declared here must be in that schema with a compatible type
// (string, number, boolean, array, object; null only where the schema says
// nullable; a string union only as the schema's whole enum), and every field
// the schema requires must be declared here and not optional. A type may
// leave out fields the portal does not read.
//
// The tag's forms: `Name` (components/schemas/Name), `GET /v1/path` (the JSON
// body of its success answer), `POST /v1/path body` (its request body),
// `GET /v1/path query` (its query parameters), `file.json` (a schema file in
// schemas/), each optionally followed by a path into it: `.field`, `[]` for
// an array's items, `{}` for a map's values (`Usage.usage[]`).

/** @openapi Token.role */
export type Role = "admin" | "operator" | "tenant";

/** @openapi GET /v1/whoami */
export interface WhoAmI {
  token: string;
  name: string;
  role: Role;
  tenant: string | null;
}

// --- availability ---

/** @openapi Availability.availability[].kinds{}.measured{} */
export interface Measured {
  median: number;
  unit: string;
  samples: number;
}
// A figure priced per measured unit (controller/tenancy/unit_price.h): the
// median over nodes, each node's newest verdict, with what it came from.
/** @openapi Availability.availability[].kinds{}.measured{} */
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
/** @openapi Availability.availability[].kinds{} */
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
/** @openapi Availability.availability[] */
export interface ProfileAvailability {
  profile: string;
  description: string;
  gpu: { model: string; count: number };
  kinds: { baremetal: KindAvailability; virtual: KindAvailability };
  virtualization_tax: Record<string, { relative: number; baremetal: number; virtual: number; unit: string }> | null;
}
/** @openapi GET /v1/availability */
export interface AvailabilityList {
  window: number;
  availability: ProfileAvailability[];
}

// --- tenants ---

/** @openapi Tenant.quotas[] */
export interface Quota {
  profile: string;
  kind: string;
  max_nodes: number;
  in_use: number;
}
/** @openapi Tenant */
export interface Tenant {
  name: string;
  display_name: string;
  quotas: Quota[];
}
/** @openapi GET /v1/tenants */
export interface TenantList {
  tenants: Tenant[];
  next: string | null;
}

// --- images ---

/** @openapi Image */
export interface Image {
  id: string;
  name: string;
  kind: "os" | "ramdisk";
  status: string;
}
/** @openapi GET /v1/images */
export interface ImageList {
  images: Image[];
  next: string | null;
}

// --- allocations and usage ---

/** @openapi AllocationNode */
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
/** @openapi Allocation */
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
/** @openapi GET /v1/allocations */
export interface AllocationList {
  allocations: Allocation[];
  next: string | null;
}
// What the request form sends (src/request.ts builds it).
/** @openapi POST /v1/allocations body */
export interface AllocationInput {
  tenant?: string;
  profile: string;
  kind: string;
  count: number;
  image: string;
  ssh_keys: string[];
  lease_seconds?: number;
}
/** @openapi Usage.usage[] */
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
/** @openapi GET /v1/usage */
export interface Usage {
  usage: UsageRow[];
  totals: { seconds: number; cost_micros: number };
}
/** @openapi GET /v1/usage query */
export interface UsageQuery {
  allocation?: string;
}

// --- nodes ---

/** @openapi Node */
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
/** @openapi GET /v1/nodes */
export interface NodeList {
  nodes: Node[];
  next: string | null;
}
// The list's filters, sort and page (src/fleet.ts builds the fleet view's).
/** @openapi GET /v1/nodes query */
export interface NodeQuery {
  limit?: number;
  marker?: string;
  sort?: string;
  provision_state?: string;
  kind?: string;
  profile?: string;
  maintenance?: string;
  tenant?: string;
}
/** @openapi PUT /v1/nodes/{id}/states/power body */
export interface PowerRequest {
  target: "on" | "off" | "reboot" | "soft_off";
}
/** @openapi PUT /v1/nodes/{id}/maintenance body */
export interface MaintenanceRequest {
  reason?: string;
}

// --- validation reports ---

/** @openapi validation-report.schema.json checks[] */
export interface Check {
  name: string;
  status: "pass" | "fail" | "skip";
  value?: number | null;
  unit?: string;
  threshold?: { min?: number; max?: number; max_gap?: number } | null;
  details?: unknown;
}
/** @openapi validation-report.schema.json */
export interface ValidationReport {
  result: "pass" | "fail" | "error";
  error?: string;
  checks?: Check[];
  plan?: "quick" | "full" | "burn_in";
}
/** @openapi GET /v1/validations/{id} */
export interface ValidationRecord {
  id: string;
  node: string;
  kind: string;
  plan: string;
  phase: string;
  result: string;
  attempt: number;
  started_at: string;
  finished_at: string;
  summary: { pass?: number; fail?: number; skip?: number };
  failing: string[];
  report: ValidationReport;
}

// --- events ---

/** @openapi Event */
export interface KilnEvent {
  seq: number;
  ts: string;
  type: string;
  node: string | null;
  from: string | null;
  to: string | null;
  detail: Record<string, unknown>;
}
