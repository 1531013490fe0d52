// How a page keeps what it shows live: it loads, then loads again whenever an
// event from the SSE stream says what it shows may have changed (no polling),
// coalescing bursts of events, and never letting the answer to an older
// query (the previous allocation, the unfiltered fleet page) overwrite the
// answer to the newer one (src/reload.ts).
import { useEffect, useMemo, useRef } from "preact/hooks";
import type { Api } from "./api/client";
import type { KilnEvent } from "./api/types";
import { coalesced, tickets } from "./reload";

// Follows the event stream while mounted; each event goes to the latest
// `onEvent` (so closures stay fresh without reconnecting).
function useEvents(api: Api, onEvent: (e: KilnEvent) => void): void {
  const latest = useRef(onEvent);
  latest.current = onEvent;
  useEffect(() => {
    const h = api.followEvents((e) => latest.current(e));
    return () => h.close();
  }, [api]);
}

export interface Live {
  api: Api;
  // What the page shows, as the values that make it (an id, a filter, a
  // page marker): when one changes, the page loads again, and answers to
  // the loads before are dropped. The same number of values on every render.
  query: unknown[];
  // Loads and shows; after each await, shows nothing unless `current()` (its
  // query is still the newest).
  load: (current: () => boolean) => Promise<void>;
  // Whether the event may change what the page shows (a page may also note
  // the event itself: the allocation page keeps when each node changed state).
  onEvent: (e: KilnEvent) => boolean;
}

// Runs `load` now, for every new query, and for every event `onEvent` wants;
// returns the reload for a page to call after an action of its own.
export function useLive(live: Live): () => void {
  const ticket = useMemo(tickets, []);
  const reload = useMemo(() => {
    const query = ticket();
    return coalesced(() => live.load(query.current));
  }, [live.api, ...live.query]);
  useEffect(() => reload(), [reload]);
  useEvents(live.api, (e) => {
    if (live.onEvent(e)) reload();
  });
  return reload;
}
