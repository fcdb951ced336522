/** The frame around every signed-in page: navigation, tenant, time zone, sign-out. */

import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";

import { asApiError, signOut, type ApiError, type Session } from "../api.js";
import { href, navigate, type Route } from "../router.js";
import { formatTime, setZone, useZone } from "../time.js";
import { ErrorView, Link } from "./common.js";

const NAV: { name: Route["name"]; path: string; label: string }[] = [
  { name: "jobs", path: "/jobs", label: "Jobs" },
  { name: "pods", path: "/pods", label: "Pods" },
  { name: "pools", path: "/pools", label: "Pools" },
  { name: "control", path: "/control", label: "Control" },
  { name: "keys", path: "/keys", label: "Keys" },
  { name: "usage", path: "/usage", label: "Usage" },
];

function section(route: Route): Route["name"] {
  if (route.name === "job") return "jobs";
  if (route.name === "pod") return "pods";
  return route.name;
}

export function Layout({ route, session, children }: { route: Route; session: Session; children: ComponentChildren }) {
  const z = useZone();
  const [error, setError] = useState<ApiError | undefined>();
  const current = section(route);
  return (
    <div class="app">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <Link class="brand" href={href("/jobs")}>
          Hearth
        </Link>
        <nav aria-label="Console">
          <ul>
            {NAV.map((n) => (
              <li key={n.name}>
                <Link href={href(n.path)} aria-current={current === n.name ? "page" : undefined}>
                  {n.label}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        <div class="who">
          <span class="tenant" title={`Tenant ${session.tenant_id}; this session ends at ${formatTime(session.expires_at, z)}`}>
            {session.tenant_name}
          </span>
          <button
            type="button"
            class="zone"
            aria-pressed={z === "utc"}
            title="Show times in UTC or in local time"
            onClick={() => setZone(z === "utc" ? "local" : "utc")}
          >
            {z === "utc" ? "UTC" : "Local time"}
          </button>
          <button
            type="button"
            onClick={async () => {
              try {
                await signOut();
                navigate(href("/signin"));
              } catch (e) {
                setError(asApiError(e));
              }
            }}
          >
            Sign out
          </button>
        </div>
      </header>
      <ErrorView error={error} title="Sign-out failed" />
      <main id="main" tabIndex={-1}>
        {children}
      </main>
    </div>
  );
}
