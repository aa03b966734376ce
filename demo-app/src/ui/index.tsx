// The console's small component set: buttons, labelled fields, a nav of screens, tables, badges,
// a modal dialog, banners and live panels (stale marking). Native elements first (<button>,
// <label>, <dialog>, <table>), so keyboard use, focus and screen-reader names come for free;
// styles in ui.css. Every screen uses these; the agent and traces screens may too.
import type { ButtonHTMLAttributes, ComponentChildren } from "preact";
import { useEffect, useId, useRef } from "preact/hooks";

type ButtonProps = ButtonHTMLAttributes<HTMLButtonElement> & { variant?: "primary" | "secondary" | "danger" | "link"; busy?: boolean };

export function Button({ variant = "secondary", busy, children, class: cls, ...rest }: ButtonProps) {
  return (
    <button
      type="button"
      {...rest}
      class={`btn btn-${variant} ${cls ?? ""}`}
      aria-busy={busy ? "true" : undefined}
      disabled={rest.disabled || busy}
    >
      {children}
    </button>
  );
}

/** A label, a control and an optional hint/error, tied together by ids. `children(id, describedBy)` renders the control. */
export function Field(props: {
  label: ComponentChildren;
  hint?: ComponentChildren;
  error?: string;
  inline?: boolean;
  children: (id: string, describedBy: string | undefined) => ComponentChildren;
}) {
  const id = useId();
  const hintId = props.hint ? `${id}-hint` : undefined;
  const errId = props.error ? `${id}-err` : undefined;
  const describedBy = [hintId, errId].filter(Boolean).join(" ") || undefined;
  return (
    <div class={`field${props.inline ? " field-inline" : ""}${props.error ? " field-invalid" : ""}`}>
      <label for={id}>{props.label}</label>
      {props.children(id, describedBy)}
      {props.hint && (
        <small id={hintId} class="hint">
          {props.hint}
        </small>
      )}
      {props.error && (
        <small id={errId} class="error" role="alert">
          {props.error}
        </small>
      )}
    </div>
  );
}

export function Badge({
  kind = "neutral",
  children,
  title,
}: {
  kind?: "neutral" | "ok" | "warn" | "error" | "info";
  children: ComponentChildren;
  title?: string;
}) {
  return (
    <span class={`badge badge-${kind}`} title={title}>
      {children}
    </span>
  );
}

/** A banner for what a person must know before using a screen: engine unreachable, token refused,
 * no provider configured. `role="alert"` for errors (announced at once), `status` otherwise. */
export function Banner({
  kind,
  title,
  children,
  id,
  actions,
}: {
  kind: "error" | "warn" | "info";
  title: ComponentChildren;
  children?: ComponentChildren;
  id?: string;
  actions?: ComponentChildren;
}) {
  return (
    <div id={id} class={`banner banner-${kind}`} role={kind === "error" ? "alert" : "status"}>
      <strong>{title}</strong>
      {children && <div class="banner-body">{children}</div>}
      {actions && <div class="banner-actions">{actions}</div>}
    </div>
  );
}

/** A section whose content came from the engine: while `stale`, it stays on screen, marked. */
export function Panel({
  id,
  title,
  count,
  stale,
  staleSince,
  actions,
  children,
  hint,
}: {
  id?: string;
  title: ComponentChildren;
  count?: number;
  stale?: boolean;
  staleSince?: Date;
  actions?: ComponentChildren;
  hint?: ComponentChildren;
  children: ComponentChildren;
}) {
  const headingId = useId();
  return (
    <section id={id} class="panel" data-live="" data-stale={stale ? "true" : undefined} aria-labelledby={headingId}>
      <div class="panel-head">
        <h2 id={headingId}>
          {title} {count !== undefined && <small class="count">({count})</small>}{" "}
          {stale && (
            <small class="stale-tag" title={staleSince ? `from before ${staleSince.toLocaleTimeString()}` : undefined}>
              stale
            </small>
          )}
        </h2>
        {actions && <div class="panel-actions">{actions}</div>}
      </div>
      {hint && <p class="hint">{hint}</p>}
      {children}
    </section>
  );
}

export interface Column<T> {
  key: string;
  label: ComponentChildren;
  render: (row: T) => ComponentChildren;
  /** Hidden at phone width (the first column always shows). */
  wide?: boolean;
}

export function Table<T>({
  caption,
  columns,
  rows,
  rowKey,
  empty,
  id,
}: {
  caption: string;
  columns: Column<T>[];
  rows: T[];
  rowKey: (row: T) => string;
  empty?: ComponentChildren;
  id?: string;
}) {
  if (rows.length === 0) return <p class="empty">{empty ?? "Nothing yet."}</p>;
  return (
    <div class="table-wrap">
      <table id={id}>
        <caption class="sr-only">{caption}</caption>
        <thead>
          <tr>
            {columns.map((c) => (
              <th scope="col" key={c.key} class={c.wide ? "wide" : undefined}>
                {c.label}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={rowKey(r)} data-key={rowKey(r)}>
              {columns.map((c, i) =>
                i === 0 ? (
                  <th scope="row" key={c.key}>
                    {c.render(r)}
                  </th>
                ) : (
                  <td key={c.key} class={c.wide ? "wide" : undefined}>
                    {c.render(r)}
                  </td>
                ),
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** A modal dialog on the native <dialog>: focus moves in and is trapped, Esc cancels (onClose). */
export function Dialog({
  open,
  title,
  onClose,
  children,
  actions,
  id,
}: {
  open: boolean;
  title: ComponentChildren;
  onClose: () => void;
  children: ComponentChildren;
  actions: ComponentChildren;
  id?: string;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const headingId = useId();
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) d.showModal();
    if (!open && d.open) d.close();
  }, [open]);
  return (
    <dialog
      ref={ref}
      id={id}
      class="dialog"
      aria-labelledby={headingId}
      onCancel={(e) => {
        e.preventDefault();
        onClose();
      }}
    >
      <h2 id={headingId}>{title}</h2>
      <div class="dialog-body">{children}</div>
      <div class="dialog-actions">{actions}</div>
    </dialog>
  );
}

/** JSON, pretty-printed, in a scrollable block. */
export function Json({ value, id, kind }: { value: unknown; id?: string; kind?: "ok" | "error" }) {
  let text: string;
  try {
    text = value === undefined ? "(no result)" : JSON.stringify(value, null, 2);
  } catch {
    text = String(value);
  }
  return (
    <pre id={id} class={`json${kind ? ` json-${kind}` : ""}`}>
      {text}
    </pre>
  );
}

export const since = (ms: number | null | undefined): string => {
  if (!ms) return "–";
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  return `${Math.round(s / 3600)} h ago`;
};
