// A failed call as the portal shows it: the problem+json detail and its field
// errors, keyed by JSON pointer ("/count", "/ssh_keys/0"), for the form to
// show next to the field they name.

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
