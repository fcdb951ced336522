/** The console: reads the session, then routes to a page (or to sign-in). */

import { useEffect, useState } from "preact/hooks";

import { asApiError, loadSession, session, type ApiError } from "./api.js";
import { ErrorView, Link, Loading } from "./components/common.js";
import { Layout } from "./components/Layout.js";
import { Control } from "./pages/Control.js";
import { JobDetail } from "./pages/JobDetail.js";
import { Jobs } from "./pages/Jobs.js";
import { Keys } from "./pages/Keys.js";
import { PodDetail, Pods } from "./pages/Pods.js";
import { Pools } from "./pages/Pools.js";
import { nextPath, SignIn } from "./pages/SignIn.js";
import { Usage } from "./pages/Usage.js";
import { href, match, navigate, useLocation, type Route } from "./router.js";
import { useStore } from "./store.js";

function Page({ route, search }: { route: Route; search: string }) {
  switch (route.name) {
    case "jobs":
      return <Jobs search={search} />;
    case "job":
      return <JobDetail id={route.id} key={route.id} />;
    case "pods":
      return <Pods />;
    case "pod":
      return <PodDetail id={route.id} key={route.id} />;
    case "pools":
      return <Pools />;
    case "control":
      return <Control />;
    case "keys":
      return <Keys />;
    case "usage":
      return <Usage />;
    default:
      return (
        <section>
          <h1>Not found</h1>
          <p>
            No such page. <Link href={href("/jobs")}>Go to the jobs.</Link>
          </p>
        </section>
      );
  }
}

export function App() {
  const loc = useLocation();
  const state = useStore(session);
  const [error, setError] = useState<ApiError | undefined>();
  const route = match(loc.pathname);

  useEffect(() => {
    if (state.status !== "unknown") return;
    loadSession().catch((e: unknown) => setError(asApiError(e)));
  }, [state.status]);

  // Signed out (or the session ended): to sign-in, coming back here after.
  useEffect(() => {
    if (state.status === "signed-out" && route.name !== "signin") {
      const next = loc.pathname + loc.search;
      navigate(`${href("/signin")}?next=${encodeURIComponent(next)}`, { replace: true });
    }
    if (state.status === "signed-in" && route.name === "signin") {
      navigate(nextPath(loc.search), { replace: true });
    }
  }, [state.status, route.name, loc.pathname, loc.search]);

  if (error) {
    return (
      <main id="main" class="signin">
        <h1>Hearth console</h1>
        <ErrorView error={error} title="The service did not answer" />
        <button type="button" onClick={() => location.reload()}>
          Try again
        </button>
      </main>
    );
  }
  if (state.status === "unknown") return <Loading what="the console" />;
  if (state.status === "signed-out") {
    return route.name === "signin" ? <SignIn search={loc.search} reason={state.reason} /> : <Loading />;
  }
  if (route.name === "signin") return <Loading />;
  return (
    <Layout route={route} session={state.session}>
      <Page route={route} search={loc.search} />
    </Layout>
  );
}
