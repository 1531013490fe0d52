// How pages reload what they show: events drive reloads, so they are
// coalesced; and a page's query changes (a filter, a page of the fleet, the
// allocation in the address), so an answer to an older query must never
// overwrite the answer to the newer one.

// Runs `load` now and again whenever `kick()` is called, never two at once
// and coalescing kicks that arrive while one runs: a burst of fifty events
// costs at most two requests.
export function coalesced(load: () => Promise<void>): () => void {
  let running = false;
  let again = false;
  const kick = (): void => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    void load().finally(() => {
      running = false;
      if (again) {
        again = false;
        kick();
      }
    });
  };
  return kick;
}

// One per page: each query the page makes draws a ticket, and `current()`
// on a ticket says whether it is still the newest. A load that awaited an
// answer checks its ticket before showing it: the fleet's unfiltered page 1
// arriving after the filtered one would otherwise replace it.
export function tickets(): () => { current: () => boolean } {
  let newest = 0;
  return () => {
    const mine = ++newest;
    return { current: () => mine === newest };
  };
}
