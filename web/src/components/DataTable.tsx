/**
 * A table whose rows are reachable from the keyboard: Tab enters the table
 * on one row, arrows, Home and End move between rows, Enter opens the row.
 */

import type { ComponentChildren } from "preact";
import { useRef, useState } from "preact/hooks";

export interface Column<T> {
  header: string;
  cell: (row: T) => ComponentChildren;
  class?: string;
}

export interface DataTableProps<T> {
  caption: string;
  columns: Column<T>[];
  rows: T[];
  rowKey: (row: T) => string;
  onOpen?: (row: T) => void;
  empty?: ComponentChildren;
  /** Hide the caption visually (still read by screen readers). */
  captionHidden?: boolean;
}

export function DataTable<T>({ caption, columns, rows, rowKey, onOpen, empty, captionHidden }: DataTableProps<T>) {
  const [active, setActive] = useState(0);
  const body = useRef<HTMLTableSectionElement>(null);
  const current = Math.min(active, Math.max(0, rows.length - 1));

  const focusRow = (i: number) => {
    const n = Math.max(0, Math.min(rows.length - 1, i));
    setActive(n);
    const el = body.current?.children[n] as HTMLElement | undefined;
    el?.focus();
  };

  const onKeyDown = (e: KeyboardEvent, i: number, row: T) => {
    switch (e.key) {
      case "ArrowDown":
        e.preventDefault();
        focusRow(i + 1);
        break;
      case "ArrowUp":
        e.preventDefault();
        focusRow(i - 1);
        break;
      case "Home":
        e.preventDefault();
        focusRow(0);
        break;
      case "End":
        e.preventDefault();
        focusRow(rows.length - 1);
        break;
      case "Enter":
        if (onOpen && e.target === e.currentTarget) {
          e.preventDefault();
          onOpen(row);
        }
        break;
    }
  };

  return (
    <div class="table-wrap">
      <table class={onOpen ? "data clickable" : "data"}>
        <caption class={captionHidden ? "visually-hidden" : undefined}>{caption}</caption>
        <thead>
          <tr>
            {columns.map((c) => (
              <th scope="col" class={c.class} key={c.header}>
                {c.header}
              </th>
            ))}
          </tr>
        </thead>
        <tbody ref={body}>
          {rows.map((row, i) => (
            <tr
              key={rowKey(row)}
              tabIndex={i === current ? 0 : -1}
              onKeyDown={(e) => onKeyDown(e, i, row)}
              onFocus={() => setActive(i)}
              onDblClick={onOpen ? () => onOpen(row) : undefined}
            >
              {columns.map((c) => (
                <td class={c.class} key={c.header}>
                  {c.cell(row)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
      {rows.length === 0 ? <p class="muted empty">{empty ?? "Nothing to show."}</p> : null}
    </div>
  );
}
