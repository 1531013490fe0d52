// The request form's logic, apart from its rendering: what the form checks
// before submitting, and the POST /v1/allocations body it sends. A tenant's
// allocation is its own (kilnd takes the tenant from the token); staff
// (operator, admin) must name the tenant the nodes are for ("tenant" is
// required for them, 400 naming /tenant without it), so their form has a
// Tenant field and the body carries it.
import type { AllocationInput } from "./api/types";
import { sshKeyProblem } from "./sshkey";

export type FieldName = "tenant" | "profile" | "kind" | "count" | "image" | "ssh_keys" | "lease_seconds";
export type Errors = Partial<Record<FieldName, string>>;

// In the form's order: the first one in error gets the focus.
export const kFields: FieldName[] = ["tenant", "profile", "kind", "count", "image", "ssh_keys", "lease_seconds"];

export interface RequestValues {
  tenant: string; // "" for a tenant's own form (no Tenant field)
  profile: string;
  kind: string;
  count: string;
  image: string;
  sshKey: string;
  lease: string; // hours; "" for no lease
}

// What is wrong with the values, per field (empty when nothing is).
// `onBehalf`: the form is staff's, so a tenant must be chosen.
export function checkRequest(v: RequestValues, onBehalf: boolean): Errors {
  const e: Errors = {};
  if (onBehalf && v.tenant === "") e.tenant = "Choose the tenant these nodes are for.";
  if (v.profile === "") e.profile = "Choose a profile.";
  const n = Number(v.count);
  if (!Number.isInteger(n) || n < 1) e.count = "Ask for a whole number of nodes, at least 1.";
  if (v.image === "") e.image = "Choose an image.";
  const key = sshKeyProblem(v.sshKey);
  if (key !== null) e.ssh_keys = key;
  if (v.lease !== "") {
    const h = Number(v.lease);
    if (!Number.isFinite(h) || h <= 0) e.lease_seconds = "A lease is a positive number of hours (or leave it empty).";
  }
  return e;
}

// The POST /v1/allocations body for checked values.
export function requestBody(v: RequestValues, onBehalf: boolean): AllocationInput {
  const body: AllocationInput = { profile: v.profile, kind: v.kind, count: Number(v.count), image: v.image, ssh_keys: [v.sshKey.trim()] };
  if (onBehalf) body.tenant = v.tenant;
  if (v.lease !== "") body.lease_seconds = Math.round(Number(v.lease) * 3600);
  return body;
}
