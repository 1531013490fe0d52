// Request nodes: the form checks what it can before submitting (the SSH
// key's shape, the count, the lease; for staff, the tenant the nodes are
// for: src/request.ts) and shows the server's problem+json
// field errors next to the field each JSON pointer names. A field in error
// has aria-invalid="true" and its message tied to it with aria-describedby.
import { useEffect, useState } from "preact/hooks";
import type { Api } from "../api/client";
import { ApiError, fieldOfPointer } from "../api/problem";
import type { Allocation, ProfileAvailability } from "../api/types";
import { checkRequest, Errors, FieldName, kFields, requestBody } from "../request";

function errorProps(errors: Errors, name: FieldName) {
  const msg = errors[name];
  return msg === undefined ? {} : { "aria-invalid": "true" as const, "aria-describedby": `${name}-error` };
}

function FieldError(props: { errors: Errors; name: FieldName }) {
  const msg = props.errors[props.name];
  if (msg === undefined) return null;
  return (
    <p id={`${props.name}-error`} class="field-error">
      {msg}
    </p>
  );
}

export interface RequestFormProps {
  api: Api;
  profiles: ProfileAvailability[];
  images: string[];
  // Staff's form: the tenants they may request for (a Tenant field first).
  // null for a tenant, whose allocations are always its own.
  tenants: { name: string; display_name: string }[] | null;
  onCreated: (a: Allocation) => void;
}

export function RequestForm(props: RequestFormProps) {
  const onBehalf = props.tenants !== null;
  const [tenant, setTenant] = useState("");
  const [profile, setProfile] = useState(props.profiles[0]?.profile ?? "");
  const [kind, setKind] = useState("baremetal");
  const [count, setCount] = useState("1");
  const [image, setImage] = useState(props.images[0] ?? "");
  const [sshKey, setSshKey] = useState("");
  const [lease, setLease] = useState("");
  const [errors, setErrors] = useState<Errors>({});
  const [formError, setFormError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // The lists arrive after the form: pick their first entry until the user picks.
  useEffect(() => {
    if (!props.images.includes(image)) setImage(props.images[0] ?? "");
  }, [props.images]);
  useEffect(() => {
    if (!props.profiles.some((p) => p.profile === profile)) setProfile(props.profiles[0]?.profile ?? "");
  }, [props.profiles]);

  const submit = async (ev: Event) => {
    ev.preventDefault();
    setFormError(null);
    const values = { tenant, profile, kind, count, image, sshKey, lease };
    const e = checkRequest(values, onBehalf);
    setErrors(e);
    if (Object.keys(e).length > 0) {
      focusFirst(e);
      return;
    }
    const body = requestBody(values, onBehalf);
    setBusy(true);
    try {
      const a = await props.api.createAllocation(body);
      props.onCreated(a);
    } catch (err) {
      if (!(err instanceof ApiError)) {
        setFormError(err instanceof Error ? err.message : "The request failed.");
      } else {
        const server: Errors = {};
        const other: string[] = [];
        for (const f of err.fields) {
          const name = fieldOfPointer(f.field) as FieldName | null;
          if (name !== null && kFields.includes(name)) server[name] ??= f.message;
          else other.push(f.message);
        }
        setErrors(server);
        setFormError(Object.keys(server).length > 0 && other.length === 0 ? null : [err.detail, ...other].join(" "));
        focusFirst(server);
      }
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="request" onSubmit={submit} noValidate aria-labelledby="request-title">
      <h2 id="request-title">Request nodes</h2>
      <div class="grid">
        {props.tenants !== null && (
          <div class="field">
            <label for="tenant">Tenant</label>
            <select id="tenant" value={tenant} onChange={(e) => setTenant(e.currentTarget.value)} {...errorProps(errors, "tenant")}>
              <option value="">Choose a tenant…</option>
              {props.tenants.map((t) => (
                <option value={t.name}>{t.display_name !== "" && t.display_name !== t.name ? `${t.name} (${t.display_name})` : t.name}</option>
              ))}
            </select>
            <FieldError errors={errors} name="tenant" />
          </div>
        )}
        <div class="field">
          <label for="profile">Profile</label>
          <select id="profile" value={profile} onChange={(e) => setProfile(e.currentTarget.value)} {...errorProps(errors, "profile")}>
            {props.profiles.map((p) => (
              <option value={p.profile}>{p.profile}</option>
            ))}
          </select>
          <FieldError errors={errors} name="profile" />
        </div>
        <div class="field">
          <label for="kind">Kind</label>
          <select id="kind" value={kind} onChange={(e) => setKind(e.currentTarget.value)} {...errorProps(errors, "kind")}>
            <option value="baremetal">baremetal</option>
            <option value="virtual">virtual</option>
          </select>
          <FieldError errors={errors} name="kind" />
        </div>
        <div class="field">
          <label for="count">Count</label>
          <input id="count" type="number" min="1" step="1" value={count} onInput={(e) => setCount(e.currentTarget.value)} {...errorProps(errors, "count")} />
          <FieldError errors={errors} name="count" />
        </div>
        <div class="field">
          <label for="image">Image</label>
          <select id="image" value={image} onChange={(e) => setImage(e.currentTarget.value)} {...errorProps(errors, "image")}>
            {props.images.map((i) => (
              <option value={i}>{i}</option>
            ))}
          </select>
          <FieldError errors={errors} name="image" />
        </div>
        <div class="field wide">
          <label for="ssh_keys">SSH key</label>
          <textarea
            id="ssh_keys"
            rows={2}
            spellcheck={false}
            placeholder="ssh-ed25519 AAAA… you@laptop"
            value={sshKey}
            onInput={(e) => setSshKey(e.currentTarget.value)}
            {...errorProps(errors, "ssh_keys")}
          />
          <FieldError errors={errors} name="ssh_keys" />
        </div>
        <div class="field">
          <label for="lease_seconds">Lease (hours)</label>
          <input id="lease_seconds" type="number" min="0" step="any" value={lease} onInput={(e) => setLease(e.currentTarget.value)} {...errorProps(errors, "lease_seconds")} />
          <FieldError errors={errors} name="lease_seconds" />
        </div>
      </div>
      {formError !== null && (
        <p class="form-error" role="alert">
          {formError}
        </p>
      )}
      <button type="submit" disabled={busy}>
        Request
      </button>
    </form>
  );
}

function focusFirst(e: Errors): void {
  const first = kFields.find((f) => e[f] !== undefined);
  if (first !== undefined) queueMicrotask(() => document.getElementById(first)?.focus());
}
