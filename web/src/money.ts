// Prices and costs. The API gives prices per second as decimal numbers
// (profile price.*_per_second) and costs in integer micro-units; the portal
// shows both per second and per hour, never inventing a figure: null stays
// "not priced".

export function perHour(perSecond: number): number {
  return perSecond * 3600;
}

export function formatPrice(perSecond: number | null | undefined): { second: string; hour: string } | null {
  if (perSecond === null || perSecond === undefined || !Number.isFinite(perSecond)) return null;
  return { second: perSecond.toFixed(6), hour: perHour(perSecond).toFixed(2) };
}

export function formatMicros(micros: number): string {
  return (micros / 1_000_000).toFixed(2);
}

// "3 h 04 min", "12 min 05 s", "42 s": for leases and elapsed times.
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const r = s % 60;
  if (h > 0) return `${h} h ${String(m).padStart(2, "0")} min`;
  if (m > 0) return `${m} min ${String(r).padStart(2, "0")} s`;
  return `${r} s`;
}
