/**
 * Sign-in: the API key is posted once to `POST /v1/session`, which answers
 * with an HttpOnly session cookie. The key stays in this form's field until
 * it is sent, then the field is cleared; it is never stored.
 */

import { useRef, useState } from "preact/hooks";

import { asApiError, signIn, type ApiError } from "../api.js";
import { ErrorView } from "../components/common.js";
import { useTitle } from "../hooks.js";
import { BASE, href, navigate } from "../router.js";

/** Where to go after signing in: a console path from `?next=`, else the jobs. */
export function nextPath(search: string): string {
  const next = new URLSearchParams(search).get("next");
  if (next && next.startsWith(`${BASE}/`) && !next.startsWith("//") && !next.startsWith(`${BASE}/signin`)) return next;
  return href("/jobs");
}

export function SignIn({ search, reason }: { search: string; reason?: string | undefined }) {
  useTitle("Sign in");
  const [error, setError] = useState<ApiError | undefined>();
  const [busy, setBusy] = useState(false);
  const input = useRef<HTMLInputElement>(null);

  const submit = async (e: Event) => {
    e.preventDefault();
    const field = input.current;
    if (!field) return;
    const key = field.value.trim();
    if (key === "") {
      setError(asApiError(new Error("Enter an API key.")));
      return;
    }
    setBusy(true);
    setError(undefined);
    try {
      await signIn(key);
      field.value = "";
      navigate(nextPath(search), { replace: true });
    } catch (err) {
      field.value = "";
      setError(asApiError(err));
      field.focus();
    } finally {
      setBusy(false);
    }
  };

  return (
    <main class="signin" id="main">
      <form onSubmit={submit} aria-labelledby="signin-title" autocomplete="off">
        <h1 id="signin-title">Hearth console</h1>
        <p class="muted">Sign in with one of your tenant's API keys. It is exchanged for a session and not kept.</p>
        {reason ? (
          <p class="notice" role="status">
            {reason}
          </p>
        ) : null}
        <label for="api-key">API key</label>
        <input
          id="api-key"
          name="api-key"
          ref={input}
          type="password"
          autocomplete="off"
          spellcheck={false}
          placeholder="hk_..."
          required
          autofocus
        />
        <button type="submit" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
        <ErrorView error={error} title="Sign-in failed" />
      </form>
    </main>
  );
}
