// One allocation, live: every event about it or its members (pushed by the
// SSE stream) reloads it, so state and step change without a reload and
// without a polling loop. Each node shows its state, step, time in that
// state, its ssh line with a copy button and its last validation as charts.
// Release asks for confirmation first.
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError } from "../api/problem";
import type { Allocation, MemberNode } from "../api/types";
import { useLive } from "../live";
import { formatDuration, formatMicros } from "../money";
import { Link } from "../route";
import { hostKeyFingerprints, sshCommand } from "../ssh_line";
import type { Who } from "../who";
import { Confirm, State } from "./common";
import { ValidationReport } from "./ValidationReport";

export function AllocationPage(props: { who: Who; id: string }) {
  const { api } = props.who;
  const [alloc, setAlloc] = useState<Allocation | null>(null);
  const [missing, setMissing] = useState<string | null>(null);
  const [cost, setCost] = useState<{ micros: number; seconds: number } | null>(null);
  const [since, setSince] = useState<Record<string, { state: string; at: number }>>({});
  const [confirming, setConfirming] = useState(false);
  const [actionError, setActionError] = useState<string | null>(null);
  const [shownReport, setShownReport] = useState<string | null>(null);
  const [now, setNow] = useState(Date.now());
  // The allocation names its image by id; people know it by name.
  const [imageName, setImageName] = useState<string | null>(null);
  const imageNameOf = useRef<string | null>(null); // the image id imageName was read for

  const reload = useLive({
    api,
    query: [props.id],
    load: async (current) => {
      try {
        const a = await api.getAllocation(props.id);
        if (!current()) return; // another allocation is shown now
        setAlloc(a);
        setMissing(null);
        if (imageNameOf.current !== a.image) {
          imageNameOf.current = a.image;
          const img = await api.getImage(a.image).catch(() => null);
          if (!current()) return;
          if (img !== null) setImageName(img.name);
        }
        const u = await api.usage({ allocation: a.id });
        if (!current()) return;
        setCost({ micros: u.totals.cost_micros, seconds: u.totals.seconds });
      } catch (e) {
        if (!current()) return;
        if (e instanceof ApiError && e.status === 404) setMissing(e.detail);
        else setActionError(e instanceof Error ? e.message : String(e));
      }
    },
    // Events about this allocation or its members (all of them until it is
    // loaded); a node's new state starts its "in state for" clock.
    onEvent: (e) => {
      const members = new Set((alloc?.nodes ?? []).map((n) => n.id));
      const mine = e.detail["allocation"] === props.id || e.detail["allocation"] === alloc?.id || (e.node !== null && members.has(e.node));
      if (!mine && alloc !== null) return false;
      if (e.node !== null && e.to !== null) {
        const node = e.node;
        const to = e.to;
        setSince((s) => ({ ...s, [node]: { state: to, at: Date.parse(e.ts) } }));
      }
      return true;
    },
  });
  // The elapsed times tick on the page; data only moves when events say so.
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, []);

  // Arriving here from the request form (or a link) removes the element that
  // had the focus, which drops it to <body>: a keyboard or screen-reader user
  // would start again from the top, hearing nothing. Put it on the heading
  // instead, once per allocation, and only when nothing else holds it.
  const title = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    if (alloc !== null && (document.activeElement === null || document.activeElement === document.body)) title.current?.focus();
  }, [alloc?.id]);

  if (missing !== null)
    return (
      <section>
        <h1>Allocation not found</h1>
        <p>{missing}</p>
        <Link href="/">Back</Link>
      </section>
    );
  if (alloc === null) return <p role="status">Loading…</p>;

  const release = async () => {
    setConfirming(false);
    try {
      await api.releaseAllocation(alloc.id);
      reload();
    } catch (e) {
      setActionError(e instanceof Error ? e.message : String(e));
    }
  };
  const releasable = alloc.state !== "releasing" && alloc.state !== "released";
  const elapsed = (n: MemberNode): string => {
    const s = since[n.id];
    const start = s !== undefined && s.state === n.state ? s.at : n.joined_at !== null ? Date.parse(n.joined_at) : NaN;
    return Number.isNaN(start) ? "" : formatDuration((now - start) / 1000);
  };

  return (
    <article aria-labelledby="alloc-title">
      <p>
        <Link href="/">← All allocations</Link>
      </p>
      <h1 id="alloc-title" tabIndex={-1} ref={title}>
        Allocation {alloc.name} <State value={alloc.state} />
      </h1>
      <p class="muted">
        {alloc.count} × {alloc.profile} ({alloc.kind}) for tenant {alloc.tenant}, image {imageName ?? alloc.image}
        {alloc.expires_at !== null && <> · lease until {new Date(alloc.expires_at).toLocaleString()}</>}
        {cost !== null && (
          <>
            {" "}
            · cost so far <strong class="cost">{formatMicros(cost.micros)}</strong> ({Math.round(cost.seconds)} node-seconds)
          </>
        )}
      </p>
      {alloc.last_error !== null && <p class="form-error">{alloc.last_error}</p>}
      {actionError !== null && <p class="form-error" role="alert">{actionError}</p>}
      {releasable && (
        <button type="button" class="danger" onClick={() => setConfirming(true)}>
          Release
        </button>
      )}
      <Confirm
        open={confirming}
        title={`Release ${alloc.name}?`}
        confirmLabel="Yes, release the nodes"
        onConfirm={() => void release()}
        onCancel={() => setConfirming(false)}
      >
        <p>
          Its {alloc.nodes.length} node{alloc.nodes.length === 1 ? "" : "s"} will be wiped and returned to the pool. This cannot be undone.
        </p>
      </Confirm>

      <h2>Nodes</h2>
      <table class="list" aria-label="Nodes of this allocation">
        <thead>
          <tr>
            <th scope="col">Node</th>
            <th scope="col">State</th>
            <th scope="col">Step</th>
            <th scope="col">In state for</th>
            <th scope="col">SSH</th>
            <th scope="col">Validation</th>
          </tr>
        </thead>
        <tbody>
          {alloc.nodes.map((n) => (
            <tr key={n.id} data-node={n.id}>
              <td>{n.name ?? n.id}</td>
              <td>
                <State value={n.state} />
              </td>
              <td class="step">{n.step ?? "—"}</td>
              <td>{elapsed(n)}</td>
              <td>
                <NodeSsh ssh={n.ssh} hostKeys={n.ssh_host_keys} />
              </td>
              <td>
                {n.last_validation ? (
                  <button type="button" class="secondary" aria-expanded={shownReport === n.last_validation} onClick={() => setShownReport(shownReport === n.last_validation ? null : (n.last_validation ?? null))}>
                    Report for {n.name ?? n.id}
                  </button>
                ) : (
                  <span class="muted">none yet</span>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {shownReport !== null && <ValidationReport api={api} id={shownReport} />}

      {alloc.former_nodes.length > 0 && (
        <>
          <h2>Replaced or released nodes</h2>
          <ul>
            {alloc.former_nodes.map((n) => (
              <li key={n.id}>
                {n.name ?? n.id}: {n.member}
                {n.reason !== undefined && <> — {n.reason}</>}
              </li>
            ))}
          </ul>
        </>
      )}

      <h2>Timeline</h2>
      <ol class="timeline">
        {alloc.history.map((h) => (
          <li>
            <time dateTime={h.at}>{new Date(h.at).toLocaleTimeString()}</time> {h.from ?? "—"} → <State value={h.to} />
            {h.reason !== undefined && <> — {h.reason}</>}
          </li>
        ))}
      </ol>
    </article>
  );
}

// The node's ssh line, rebuilt from its checked parts (src/ssh_line.ts):
// what a machine reported is never shown or copied as it came.
// The host key fingerprints under it let the tenant check ssh's first
// prompt (or the known_hosts `kiln cluster up` writes) against what the
// node's OS reported at boot.
function NodeSsh(props: { ssh: string | null | undefined; hostKeys: unknown }) {
  if (!props.ssh) return <span class="muted">not reachable yet</span>;
  const command = sshCommand(props.ssh);
  if (command === null) return <span class="muted">no usable address reported</span>;
  const fingerprints = hostKeyFingerprints(props.hostKeys);
  return (
    <>
      <SshLine command={command} />
      {fingerprints.length > 0 && (
        <ul class="host-keys" aria-label="Host key fingerprints">
          {fingerprints.map((f) => (
            <li key={f}>
              <code>{f}</code>
            </li>
          ))}
        </ul>
      )}
    </>
  );
}

// The button's text stays "Copy" (its accessible name must keep containing
// its visible text); "Copied" is announced by a status element beside it.
function SshLine(props: { command: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <span class="ssh">
      <code>{props.command}</code>{" "}
      <button
        type="button"
        class="secondary"
        aria-label={`Copy ${props.command}`}
        onClick={async () => {
          await navigator.clipboard.writeText(props.command);
          setCopied(true);
          setTimeout(() => setCopied(false), 2000);
        }}
      >
        Copy
      </button>{" "}
      <span role="status" class="muted">
        {copied ? "Copied" : ""}
      </span>
    </span>
  );
}
