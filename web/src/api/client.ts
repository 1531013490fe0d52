// The REST API as the portal uses it: one typed call per route, so no
// component spells a URL or guesses a body's shape (the shapes are
// ./types.ts, held to schemas/openapi.yaml by a test). Every call carries the
// session's token as a Bearer header (never in a URL), and every failure
// becomes an ApiError (./problem.ts).
import { followEvents, StreamHandle } from "../sse";
import { toApiError } from "./problem";
import type {
  Allocation,
  AllocationInput,
  AllocationList,
  AvailabilityList,
  Image,
  ImageList,
  KilnEvent,
  MaintenanceRequest,
  Node,
  NodeList,
  NodeQuery,
  PowerRequest,
  TenantList,
  Usage,
  UsageQuery,
  ValidationRecord,
  WhoAmI,
} from "./types";

// A path segment from an id or name.
const seg = encodeURIComponent;

// "?a=1&b=2" from the defined entries, in their order; "" when none are.
function query(params: object): string {
  const q = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== undefined) q.set(key, String(value));
  const s = q.toString();
  return s === "" ? "" : `?${s}`;
}

export class Api {
  constructor(private readonly token: string) {}

  // Who the token is: its role decides what the portal shows.
  whoami(): Promise<WhoAmI> {
    return this.call("GET", "/v1/whoami");
  }

  availability(): Promise<AvailabilityList> {
    return this.call("GET", "/v1/availability");
  }

  // Staff see every tenant; a tenant token sees its own.
  listTenants(): Promise<TenantList> {
    return this.call("GET", "/v1/tenants");
  }

  listImages(): Promise<ImageList> {
    return this.call("GET", "/v1/images");
  }

  getImage(id: string): Promise<Image> {
    return this.call("GET", `/v1/images/${seg(id)}`);
  }

  listAllocations(): Promise<AllocationList> {
    return this.call("GET", "/v1/allocations");
  }

  getAllocation(id: string): Promise<Allocation> {
    return this.call("GET", `/v1/allocations/${seg(id)}`);
  }

  createAllocation(body: AllocationInput): Promise<Allocation> {
    return this.call("POST", "/v1/allocations", body);
  }

  releaseAllocation(id: string): Promise<Allocation> {
    return this.call("DELETE", `/v1/allocations/${seg(id)}`);
  }

  usage(q: UsageQuery = {}): Promise<Usage> {
    return this.call("GET", `/v1/usage${query(q)}`);
  }

  listNodes(q: NodeQuery): Promise<NodeList> {
    return this.call("GET", `/v1/nodes${query(q)}`);
  }

  setPower(node: string, target: PowerRequest["target"]): Promise<Node> {
    const body: PowerRequest = { target };
    return this.call("PUT", `/v1/nodes/${seg(node)}/states/power`, body);
  }

  setMaintenance(node: string, reason: string): Promise<Node> {
    const body: MaintenanceRequest = { reason };
    return this.call("PUT", `/v1/nodes/${seg(node)}/maintenance`, body);
  }

  clearMaintenance(node: string): Promise<Node> {
    return this.call("DELETE", `/v1/nodes/${seg(node)}/maintenance`);
  }

  getValidation(id: string): Promise<ValidationRecord> {
    return this.call("GET", `/v1/validations/${seg(id)}`);
  }

  // Follows the event stream until close(), resuming after a drop (../sse.ts);
  // a message that is not a JSON event is skipped.
  followEvents(onEvent: (e: KilnEvent) => void): StreamHandle {
    return followEvents(
      "/v1/events/stream",
      this.token,
      (m) => {
        let e: KilnEvent;
        try {
          e = JSON.parse(m.data) as KilnEvent;
        } catch {
          return; // not JSON: not an event the portal knows
        }
        onEvent(e);
      },
      () => {},
    );
  }

  // The Prometheus text of /metrics (unauthenticated; the fleet view counts
  // nodes per state from it).
  async metrics(): Promise<string> {
    const res = await fetch("/metrics", { cache: "no-store" });
    return res.text();
  }

  private async call<T>(method: string, path: string, body?: unknown): Promise<T> {
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
}
