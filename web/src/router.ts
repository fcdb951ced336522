/**
 * Client-side routes under the console's base (`/console/`): the server
 * answers index.html for any path below it, so every view has a URL that can
 * be shared and reloaded, filters included.
 */

import { useEffect, useState } from "preact/hooks";

export const BASE = "/console";

export interface Loc {
  pathname: string;
  search: string;
}

const EVENT = "hearth:navigate";

function read(): Loc {
  return { pathname: location.pathname, search: location.search };
}

/** Goes to `href` (a path under the base, with its query) without a reload. */
export function navigate(href: string, options: { replace?: boolean } = {}): void {
  const url = new URL(href, location.href);
  const target = url.pathname + url.search + url.hash;
  if (target === location.pathname + location.search + location.hash) return;
  if (options.replace) history.replaceState(null, "", target);
  else history.pushState(null, "", target);
  window.dispatchEvent(new Event(EVENT));
}

export function useLocation(): Loc {
  const [loc, setLoc] = useState(read);
  useEffect(() => {
    const update = () => setLoc(read());
    window.addEventListener("popstate", update);
    window.addEventListener(EVENT, update);
    return () => {
      window.removeEventListener("popstate", update);
      window.removeEventListener(EVENT, update);
    };
  }, []);
  return loc;
}

export type Route =
  | { name: "signin" }
  | { name: "jobs" }
  | { name: "job"; id: string }
  | { name: "pods" }
  | { name: "pod"; id: string }
  | { name: "pools" }
  | { name: "control" }
  | { name: "keys" }
  | { name: "usage" }
  | { name: "not-found" };

export function match(pathname: string): Route {
  let rest = pathname.startsWith(BASE) ? pathname.slice(BASE.length) : pathname;
  rest = rest.replace(/\/+$/, "");
  const parts = rest.split("/").filter((p) => p !== "").map(decodeURIComponent);
  const [first, second, ...more] = parts;
  if (more.length > 0) return { name: "not-found" };
  switch (first) {
    case undefined:
      return { name: "jobs" };
    case "signin":
      return second === undefined ? { name: "signin" } : { name: "not-found" };
    case "jobs":
      return second === undefined ? { name: "jobs" } : { name: "job", id: second };
    case "pods":
      return second === undefined ? { name: "pods" } : { name: "pod", id: second };
    case "pools":
    case "control":
    case "keys":
    case "usage":
      return second === undefined ? { name: first } : { name: "not-found" };
    default:
      return { name: "not-found" };
  }
}

/** The console URL of a path below the base: `href("/jobs/1")`. */
export function href(path: string): string {
  return BASE + path;
}
