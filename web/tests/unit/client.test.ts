// The portal's API client (src/api/client.ts): each call is the route the
// spec names, with the token as a Bearer header (never in the URL), its
// query in the URL and its body as JSON; a failure is an ApiError.
import { afterEach, describe, expect, it, vi } from "vitest";
import { Api } from "../../src/api/client";
import { ApiError } from "../../src/api/problem";
import { nodesQuery } from "../../src/fleet";

interface Sent {
  method: string;
  url: string;
  auth: string | undefined;
  body: unknown;
}

// Answers every fetch with `status` and `answer`, and records what was sent.
function stubFetch(status = 200, answer: unknown = {}): Sent[] {
  const sent: Sent[] = [];
  vi.stubGlobal("fetch", async (url: string, init: RequestInit) => {
    const headers = (init.headers ?? {}) as Record<string, string>;
    sent.push({
      method: init.method ?? "GET",
      url,
      auth: headers["Authorization"],
      body: typeof init.body === "string" ? JSON.parse(init.body) : undefined,
    });
    return new Response(JSON.stringify(answer), { status, headers: { "Content-Type": "application/json" } });
  });
  return sent;
}

afterEach(() => {
  vi.unstubAllGlobals();
});

describe("Api", () => {
  it("calls each route with the token in a header", async () => {
    const sent = stubFetch();
    const api = new Api("t0ken");
    await api.whoami();
    await api.availability();
    await api.listTenants();
    await api.listImages();
    await api.getImage("img 1");
    await api.listAllocations();
    await api.getAllocation("a/1");
    await api.createAllocation({ profile: "p", kind: "baremetal", count: 2, image: "os", ssh_keys: ["k"] });
    await api.releaseAllocation("a1");
    await api.usage();
    await api.usage({ allocation: "a1" });
    await api.listNodes(nodesQuery({ provision_state: "active", profile: "", kind: "baremetal", tenant: " acme ", maintenance: "", sort: "name" }, "n-50"));
    await api.listNodes({ provision_state: "quarantined", limit: 20 });
    await api.setPower("n1", "off");
    await api.setMaintenance("n1", "set from the portal");
    await api.clearMaintenance("n1");
    await api.getValidation("v1");
    expect(sent.map((s) => `${s.method} ${s.url}`)).toEqual([
      "GET /v1/whoami",
      "GET /v1/availability",
      "GET /v1/tenants",
      "GET /v1/images",
      "GET /v1/images/img%201",
      "GET /v1/allocations",
      "GET /v1/allocations/a%2F1",
      "POST /v1/allocations",
      "DELETE /v1/allocations/a1",
      "GET /v1/usage",
      "GET /v1/usage?allocation=a1",
      "GET /v1/nodes?limit=50&provision_state=active&kind=baremetal&tenant=acme&sort=name&marker=n-50",
      "GET /v1/nodes?provision_state=quarantined&limit=20",
      "PUT /v1/nodes/n1/states/power",
      "PUT /v1/nodes/n1/maintenance",
      "DELETE /v1/nodes/n1/maintenance",
      "GET /v1/validations/v1",
    ]);
    expect(sent.every((s) => s.auth === "Bearer t0ken" && !s.url.includes("t0ken"))).toBe(true);
    expect(sent[7]!.body).toEqual({ profile: "p", kind: "baremetal", count: 2, image: "os", ssh_keys: ["k"] });
    expect(sent[13]!.body).toEqual({ target: "off" });
    expect(sent[14]!.body).toEqual({ reason: "set from the portal" });
    expect(sent.filter((s) => s.body !== undefined).length).toBe(3);
  });

  it("turns a problem+json answer into an ApiError with its field errors", async () => {
    stubFetch(409, { title: "Conflict", status: 409, detail: "3 requested, 1 available", errors: [{ field: "/count", message: "3 requested, 1 available" }] });
    const e = await new Api("t").getAllocation("a1").catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).status).toBe(409);
    expect((e as ApiError).fields).toEqual([{ field: "/count", message: "3 requested, 1 available" }]);
  });
});
