// Who is signed in: the API client holding their token and what
// GET /v1/whoami said of it. The shell (App.tsx) makes it at sign-in and
// hands it to every page; it lives here, not in App.tsx, so that the pages
// do not import the shell that imports them.
import type { Api } from "./api/client";
import type { Role } from "./api/types";

export interface Who {
  api: Api;
  role: Role;
  tenant: string | null;
}
