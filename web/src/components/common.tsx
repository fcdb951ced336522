/** Small pieces every page uses. */

import type { ComponentChildren, JSX } from "preact";
import { useState } from "preact/hooks";

import type { ApiError, JobState } from "../api.js";
import { navigate } from "../router.js";
import { formatTime, useZone, type Zone } from "../time.js";

/** An error answer: its `ErrorBody` code and message (and fields, if any). */
export function ErrorView({ error, title }: { error: ApiError | undefined; title?: string }) {
  if (!error) return null;
  const details = error.body.details ?? [];
  return (
    <div class="error" role="alert">
      {title ? <span>{title}: </span> : null}
      <code class="error-code">{error.body.code}</code> <span class="error-message">{error.body.message}</span>
      {details.length > 0 ? (
        <ul>
          {details.map((d) => (
            <li key={d.field}>
              <code>{d.field}</code>: {d.message}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

/** A link inside the console that does not reload the page. */
export function Link(props: JSX.AnchorHTMLAttributes<HTMLAnchorElement> & { href: string }) {
  const { href, onClick, ...rest } = props;
  return (
    <a
      {...rest}
      href={href}
      onClick={(e) => {
        if (onClick) (onClick as (ev: MouseEvent) => void)(e);
        if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        navigate(href);
      }}
    />
  );
}

/** An instant in the chosen zone; the other zone in its tooltip. */
export function Time({ iso }: { iso: string | null | undefined }) {
  const z = useZone();
  if (!iso) return <span>—</span>;
  const other: Zone = z === "utc" ? "local" : "utc";
  return (
    <time dateTime={iso} title={formatTime(iso, other)}>
      {formatTime(iso, z)}
    </time>
  );
}

export function StateBadge({ state }: { state: JobState | string }) {
  return <span class={`badge state-${state}`}>{state.replace("_", " ")}</span>;
}

export function Badge({ children, kind }: { children: ComponentChildren; kind?: string }) {
  return <span class={`badge${kind ? ` badge-${kind}` : ""}`}>{children}</span>;
}

export function Loading({ what }: { what?: string }) {
  return (
    <p class="muted" role="status">
      Loading{what ? ` ${what}` : ""}…
    </p>
  );
}

/** Pretty JSON, or a note when there is none. */
export function Json({ value, label }: { value: unknown; label: string }) {
  if (value === undefined || value === null) return <p class="muted">None.</p>;
  return (
    <pre class="json" aria-label={label} tabIndex={0}>
      {JSON.stringify(value, null, 2)}
    </pre>
  );
}

/**
 * An id in full: ids are UUIDv7, whose first digits are a timestamp, so a
 * shortened one would not tell jobs of the same second apart.
 */
export function JobId({ id }: { id: string }) {
  return <code class="id">{id}</code>;
}

/**
 * A snippet shown in place and copied to the clipboard when the browser
 * allows it (a secure context); else selected, to copy by hand.
 */
export function CopyButton({ label, text }: { label: string; text: () => string }) {
  const [shown, setShown] = useState<string | null>(null);
  const [note, setNote] = useState("");
  const copy = async () => {
    const value = text();
    setShown(value);
    try {
      await navigator.clipboard.writeText(value);
      setNote("Copied to the clipboard.");
    } catch {
      setNote("Select the text below and copy it.");
    }
  };
  return (
    <div class="copy">
      <button type="button" onClick={copy}>
        {label}
      </button>
      {shown !== null ? (
        <div class="snippet">
          <span class="muted" role="status">
            {note}
          </span>
          <button type="button" class="link" aria-label={`Hide: ${label}`} onClick={() => setShown(null)}>
            Hide
          </button>
          <textarea readOnly aria-label={label} rows={shown.split("\n").length} value={shown} spellcheck={false} wrap="off" />
        </div>
      ) : null}
    </div>
  );
}

/** Numbers with a unit-less, fixed look. */
export function num(v: number | null | undefined, digits = 2): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "—";
  return Number.isInteger(v) ? String(v) : v.toFixed(digits);
}

export function pct(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "—";
  return `${(v * 100).toFixed(1)} %`;
}
