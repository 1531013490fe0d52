// Client-side routes, in the path (kilnd answers index.html for them):
//   /                    availability, the request form, allocations, usage
//   /allocations/{id}    one allocation, live
//   /fleet               the operators' fleet view
import { useEffect, useState } from "preact/hooks";

export type Route = { page: "home" } | { page: "allocation"; id: string } | { page: "fleet" };

export function parseRoute(path: string): Route {
  const m = /^\/allocations\/([^/]+)$/.exec(path);
  if (m !== null && m[1] !== undefined) return { page: "allocation", id: decodeURIComponent(m[1]) };
  if (path === "/fleet") return { page: "fleet" };
  return { page: "home" };
}

export function navigate(path: string): void {
  history.pushState(null, "", path);
  dispatchEvent(new PopStateEvent("popstate"));
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.pathname));
  useEffect(() => {
    const on = () => setRoute(parseRoute(location.pathname));
    addEventListener("popstate", on);
    return () => removeEventListener("popstate", on);
  }, []);
  return route;
}

// A same-origin link that navigates without a reload.
export function Link(props: { href: string; children: preact.ComponentChildren; class?: string }) {
  return (
    <a
      href={props.href}
      class={props.class}
      onClick={(e) => {
        if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey) return;
        e.preventDefault();
        navigate(props.href);
      }}
    >
      {props.children}
    </a>
  );
}
