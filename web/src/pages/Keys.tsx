/**
 * The tenant's API keys: create one (a name and an optional expiry; the key
 * is shown this once), list them with their last use, revoke one.
 */

import { useState } from "preact/hooks";

import { api, asApiError, ok, session, type ApiError, type Schemas } from "../api.js";
import { Badge, CopyButton, ErrorView, Loading, Time } from "../components/common.js";
import { DataTable } from "../components/DataTable.js";
import { useResource, useTitle } from "../hooks.js";
import { useStore } from "../store.js";
import { parseInstant, useZone } from "../time.js";

type Key = Schemas["ApiKeyResponse"];

export function keyStatus(k: Key, now: number = Date.now()): "revoked" | "expired" | "active" {
  if (k.revoked_at) return "revoked";
  if (k.expires_at && new Date(k.expires_at).getTime() <= now) return "expired";
  return "active";
}

export function Keys() {
  useTitle("API keys");
  const z = useZone();
  const keys = useResource(async (signal) => ok(await api().GET("/v1/keys", { signal })), []);
  const [created, setCreated] = useState<Schemas["CreatedKeyResponse"] | null>(null);
  const [createError, setCreateError] = useState<ApiError | undefined>();
  const [revokeError, setRevokeError] = useState<ApiError | undefined>();
  const [confirming, setConfirming] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const current = useStore(session);
  const sessionKey = current.status === "signed-in" ? current.session.api_key_id : null;

  const create = async (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const data = new FormData(form);
    const name = String(data.get("name") ?? "").trim();
    const expires = String(data.get("expires_at") ?? "").trim();
    const body: Schemas["CreateKeyRequest"] = {};
    if (name) body.name = name;
    if (expires) {
      const iso = parseInstant(expires, z);
      if (!iso) {
        setCreateError(asApiError(new Error("The expiry is RFC 3339 or YYYY-MM-DD HH:MM.")));
        return;
      }
      body.expires_at = iso;
    }
    setBusy(true);
    setCreateError(undefined);
    try {
      const key = ok(await api().POST("/v1/keys", { body }));
      setCreated(key);
      form.reset();
      keys.reload(true);
    } catch (err) {
      setCreateError(asApiError(err));
    } finally {
      setBusy(false);
    }
  };

  const revoke = async (k: Key) => {
    setRevokeError(undefined);
    try {
      ok(await api().DELETE("/v1/keys/{api_key_id}", { params: { path: { api_key_id: k.api_key_id } } }));
      setConfirming(null);
      keys.reload(true);
    } catch (err) {
      setRevokeError(asApiError(err));
    }
  };

  return (
    <section aria-labelledby="keys-title">
      <h1 id="keys-title">API keys</h1>
      <form class="filters" onSubmit={create} aria-labelledby="create-key-title">
        <h2 id="create-key-title" class="inline">
          New key
        </h2>
        <label>
          Name <input name="name" placeholder="ci" spellcheck={false} pattern="[A-Za-z0-9][A-Za-z0-9._:@/\-]{0,63}" />
        </label>
        <label>
          Expires (optional){" "}
          <input name="expires_at" placeholder={z === "utc" ? "2027-06-30 00:00Z" : "2027-06-30 00:00"} size={18} />
        </label>
        <button type="submit" disabled={busy}>
          Create key
        </button>
      </form>
      <ErrorView error={createError} title="Could not create the key" />
      {created ? (
        <div class="created-key" role="status" aria-labelledby="created-key-title">
          <h2 id="created-key-title">Key “{created.name}” created</h2>
          <p>
            Store it now: it is shown this once and cannot be read again.
            {created.expires_at ? (
              <>
                {" "}
                It stops working at <Time iso={created.expires_at} />.
              </>
            ) : null}
          </p>
          <input class="secret" readOnly aria-label="New API key" value={created.api_key} size={60} onFocus={(e) => e.currentTarget.select()} />
          <CopyButton label="Copy the key" text={() => created.api_key} />
          <button type="button" onClick={() => setCreated(null)}>
            I have stored it
          </button>
        </div>
      ) : null}
      <ErrorView error={keys.error} title="Could not list the keys" />
      <ErrorView error={revokeError} title="Could not revoke the key" />
      {keys.loading && !keys.data ? <Loading what="keys" /> : null}
      {keys.data ? (
        <DataTable
          caption="Your API keys, oldest first"
          captionHidden
          columns={[
            {
              header: "Name",
              cell: (k) => (
                <>
                  {k.name}
                  {k.api_key_id === sessionKey ? (
                    <>
                      {" "}
                      <Badge kind="session">this session's key</Badge>
                    </>
                  ) : null}
                </>
              ),
            },
            { header: "Key", cell: (k) => <code>{k.prefix}…</code> },
            {
              header: "Status",
              cell: (k) => {
                const s = keyStatus(k);
                return <Badge kind={`key-${s}`}>{s}</Badge>;
              },
            },
            { header: "Created", cell: (k) => <Time iso={k.created_at} /> },
            { header: "Expires", cell: (k) => (k.expires_at ? <Time iso={k.expires_at} /> : "never") },
            { header: "Last used", cell: (k) => (k.last_used_at ? <Time iso={k.last_used_at} /> : "never") },
            { header: "Revoked", cell: (k) => <Time iso={k.revoked_at} /> },
            {
              header: "Actions",
              cell: (k) =>
                k.revoked_at ? null : confirming === k.api_key_id ? (
                  <span class="confirm">
                    {k.api_key_id === sessionKey ? <span class="notice">This session was opened with it: revoking it signs you out. </span> : null}
                    <button type="button" class="danger" onClick={() => revoke(k)} aria-label={`Confirm revoking key ${k.name}`}>
                      Revoke now
                    </button>{" "}
                    <button type="button" onClick={() => setConfirming(null)}>
                      Keep
                    </button>
                  </span>
                ) : (
                  <button type="button" onClick={() => setConfirming(k.api_key_id)} aria-label={`Revoke key ${k.name} (${k.prefix})`}>
                    Revoke
                  </button>
                ),
            },
          ]}
          rows={keys.data}
          rowKey={(k) => k.api_key_id}
          empty="No keys."
        />
      ) : null}
    </section>
  );
}
