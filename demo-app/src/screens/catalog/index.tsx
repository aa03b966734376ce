// Catalog, live: the user's functions first (the engine's and the harness's own folded under
// "System"; app/system.ts says which), the workers connected now, every function with its schemas
// and a form generated from its request schema (prefilled, validated before sending; result and
// time taken), trigger types and bindings, http routes (click to try), cron jobs with their next
// run. Reloaded when the engine pushes a change (engine::functions-available /
// engine::workers-available) and on every reconnect; while the link is down everything stays on
// screen, marked stale.
import { useEffect, useMemo, useState } from "preact/hooks";
import { connection, useLive } from "../../app/live.ts";
import { tabWorker } from "../../app/tab.ts";
import type { ScreenProps } from "../../app/types.ts";
import { splitFunctions, systemWorkers } from "../../app/system.ts";
import {
  listAll,
  isInternal,
  type BindingEntry,
  type CronJob,
  type FunctionDetail,
  type FunctionEntry,
  type TriggerTypeEntry,
  type WorkerEntry,
} from "../../app/engine.ts";
import { BadJson, JsonArea, SchemaFields, formable, problemsOf } from "../../schema-form/form.tsx";
import { templateOf, type JsonSchema, type Problem } from "../../schema-form/schema.ts";
import { Badge, Button, Field, Json, Panel, Table, since } from "../../ui/index.tsx";

/** Bindings and cron jobs have no change event of their own (a new binding by a connected worker
 * fires none; a job's next run moves as it runs): re-read this often while connected. */
export const TRIGGERS_POLL_MS = 5_000;

export default function CatalogScreen(props: ScreenProps) {
  const { iii } = props;
  const selected = props.params.get("fn") ?? undefined;
  const functions = useLive(() => listAll<FunctionEntry>(iii, "engine::functions::list", "functions", { include_internal: true }), [], {
    events: ["functions"],
  });
  const workers = useLive(() => listAll<WorkerEntry>(iii, "engine::workers::list", "workers"), [], { events: ["workers", "functions"] });
  return (
    <div class="screen catalog">
      <h1 class="sr-only">Catalog</h1>
      <div class="columns">
        <FunctionsPanel {...props} live={functions} selected={selected} />
        <FunctionDetailPanel {...props} functionId={selected} key={selected ?? "none"} />
      </div>
      <WorkersPanel live={workers} functions={functions.data ?? []} selfId={iii.workerId} />
      <TriggersPanels {...props} />
    </div>
  );
}

function FunctionsPanel({
  live,
  selected,
  navigate,
}: ScreenProps & { live: ReturnType<typeof useLive<FunctionEntry[]>>; selected?: string }) {
  const [search, setSearch] = useState("");
  const all = live.data ?? [];
  const needle = search.toLowerCase();
  const matches = (f: FunctionEntry) =>
    !needle || f.function_id.toLowerCase().includes(needle) || (f.description ?? "").toLowerCase().includes(needle);
  const { user, system } = useMemo(() => splitFunctions(all), [all]);
  // This tab's own demo functions after the ones the user's workers serve.
  const tab = `${tabWorker().prefix}::`;
  const mine = user.filter(matches).sort((a, b) => Number(a.function_id.startsWith(tab)) - Number(b.function_id.startsWith(tab)));
  const theirs = system.filter(matches);
  const snap = connection().snapshot;
  const item = (f: FunctionEntry) => (
    <li key={f.function_id} data-function={f.function_id} aria-current={f.function_id === selected ? "true" : undefined}>
      <a
        class="fn-link"
        href={`#/catalog?fn=${encodeURIComponent(f.function_id)}`}
        onClick={(e) => {
          e.preventDefault();
          navigate(`/catalog?fn=${encodeURIComponent(f.function_id)}`);
        }}
      >
        {f.function_id}
      </a>
      <span class="by">{f.worker_name}</span>
      {f.description && <div class="desc">{f.description}</div>}
    </li>
  );
  return (
    <Panel
      id="functions-panel"
      title="Functions"
      count={mine.length}
      stale={live.stale}
      staleSince={snap.lostAt}
      hint={
        <>
          Your workers' functions; the engine's and the harness's own are folded under <em>System</em>. Pick one to see its schemas and call
          it.
        </>
      }
    >
      <div class="toolbar">
        <Field label="Filter" inline>
          {(id) => (
            <input
              id={id}
              type="search"
              value={search}
              onInput={(e) => setSearch((e.currentTarget as HTMLInputElement).value)}
              placeholder="id or description"
            />
          )}
        </Field>
      </div>
      {live.error && !live.data && <p class="error">Could not list functions: {live.error.message}</p>}
      {live.data === undefined && !live.error ? (
        <p class="empty">Loading…</p>
      ) : (
        <>
          {mine.length === 0 && (
            <p class="empty">
              {needle ? "None of your functions match." : "No functions of yours yet: connect a worker and they show here."}
            </p>
          )}
          <ul id="functions" class="list">
            {mine.map(item)}
          </ul>
          {/* Open while a filter finds something only there, or the selected function is there. */}
          <details
            id="system-functions-group"
            class="system-group"
            open={
              (needle !== "" && mine.length === 0 && theirs.length > 0) || theirs.some((f) => f.function_id === selected) ? true : undefined
            }
          >
            <summary>
              System <small class="count">({theirs.length})</small>{" "}
              <span class="hint-inline">the engine's built-ins and the harness's workers</span>
            </summary>
            <ul id="system-functions" class="list">
              {theirs.map(item)}
            </ul>
          </details>
        </>
      )}
    </Panel>
  );
}

interface CallResult {
  kind: "ok" | "error";
  text: string;
  value?: unknown;
  ms: number;
  at: number;
}

function FunctionDetailPanel({ iii, functionId, navigate }: ScreenProps & { functionId?: string }) {
  const detail = useLive<FunctionDetail | undefined>(
    () =>
      functionId
        ? iii.trigger({ function_id: "engine::functions::info", payload: { function_id: functionId } })
        : Promise.resolve(undefined),
    [functionId],
    { events: ["functions"] },
  );
  const schema = (detail.data?.request_schema ?? undefined) as JsonSchema | undefined;
  const [payload, setPayload] = useState<unknown>(undefined);
  const [touched, setTouched] = useState(false);
  const [mode, setMode] = useState<"form" | "json">("form");
  const [problems, setProblems] = useState<Problem[]>([]);
  const [result, setResult] = useState<CallResult | undefined>();
  const [busy, setBusy] = useState(false);
  const [isVoid, setVoid] = useState(false);
  const snap = connection().snapshot;
  const schemaKey = JSON.stringify(schema ?? null);
  // A fresh template for each function, and when its schema changes (until the person edits it).
  useEffect(() => {
    if (!detail.data || touched) return;
    setPayload(templateOf(schema));
  }, [schemaKey, !!detail.data]);
  const canForm = formable(schema);
  const shownMode = canForm ? mode : "json";
  if (!functionId) {
    return (
      <Panel id="function-detail" title="Call a function" hint="Pick a function on the left: its request schema becomes a form.">
        <p class="empty">No function selected.</p>
      </Panel>
    );
  }
  const edit = (v: unknown) => {
    setTouched(true);
    setPayload(v);
    if (problems.length) setProblems(problemsOf(schema, v));
  };
  const send = async (e: Event) => {
    e.preventDefault();
    const found = problemsOf(schema, payload);
    setProblems(found);
    if (found.length) return;
    setBusy(true);
    const started = performance.now();
    try {
      const value = await iii.trigger({
        function_id: functionId,
        payload: payload instanceof BadJson ? undefined : payload,
        action: isVoid ? { type: "void" } : undefined,
      });
      const ms = performance.now() - started;
      setResult({ kind: "ok", value, ms, at: Date.now(), text: `${isVoid ? "sent" : "ok"} in ${ms.toFixed(1)} ms` });
    } catch (err) {
      const ms = performance.now() - started;
      const code = (err as { code?: string }).code ?? "error";
      setResult({ kind: "error", value: (err as Error).message, ms, at: Date.now(), text: `${code} after ${ms.toFixed(1)} ms` });
    } finally {
      setBusy(false);
    }
  };
  const d = detail.data;
  const resultStale = result !== undefined && (snap.status !== "open" || result.at < snap.openedAt);
  return (
    <Panel
      id="function-detail"
      title={<code>{functionId}</code>}
      stale={detail.stale}
      staleSince={snap.lostAt}
      actions={
        <a
          href={`#/traces?function_id=${encodeURIComponent(functionId)}`}
          onClick={(e) => {
            e.preventDefault();
            navigate(`/traces?function_id=${encodeURIComponent(functionId)}`);
          }}
        >
          Traces of this function →
        </a>
      }
    >
      {detail.error && (
        <p class="error" role="alert">
          {(detail.error as { code?: string }).code === "not_found"
            ? "This function is gone (its worker disconnected)."
            : detail.error.message}
        </p>
      )}
      {d && (
        <>
          <p class="desc">
            {d.description ?? "No description."}{" "}
            <span class="by">
              by {d.worker_name}
              {d.kind ? ` · ${d.kind}` : ""}
            </span>
          </p>
          <div class="schemas">
            <details>
              <summary>Request schema</summary>
              <Json value={d.request_schema ?? "(none published)"} />
            </details>
            <details>
              <summary>Response schema</summary>
              <Json value={d.response_schema ?? "(none published)"} />
            </details>
          </div>
          {d.registered_triggers.length > 0 && (
            <p class="hint">
              Bound to:{" "}
              {d.registered_triggers.map((t) => (
                <Badge key={t.id} kind={t.status === "active" ? "info" : "warn"} title={JSON.stringify(t.config)}>
                  {t.trigger_type}
                </Badge>
              ))}
            </p>
          )}
        </>
      )}
      <form id="call-form" onSubmit={send} noValidate aria-describedby={problems.length ? "call-problems" : undefined}>
        {canForm && (
          <div class="segmented" role="group" aria-label="Edit the payload as">
            <Button aria-pressed={shownMode === "form" ? "true" : "false"} onClick={() => setMode("form")}>
              Form
            </Button>
            <Button aria-pressed={shownMode === "json" ? "true" : "false"} onClick={() => setMode("json")}>
              JSON
            </Button>
          </div>
        )}
        {shownMode === "form" && schema ? (
          <SchemaFields schema={schema} value={payload} onChange={edit} problems={problems} />
        ) : (
          <Field
            label="Payload (JSON)"
            hint={schema ? "Checked against the request schema before it is sent." : "This function publishes no request schema."}
          >
            {(id, dsc) => <JsonArea id={id} aria-describedby={dsc} value={payload} onChange={edit} />}
          </Field>
        )}
        {problems.length > 0 && (
          <div id="call-problems" class="problems" role="alert">
            <strong>Not sent: fix {problems.length === 1 ? "this" : "these"} first</strong>
            <ul>
              {problems.map((p, i) => (
                <li key={i}>
                  <code>{p.path || "payload"}</code> {p.message}
                </li>
              ))}
            </ul>
          </div>
        )}
        <div class="row">
          <Button type="submit" variant="primary" busy={busy}>
            Call
          </Button>
          <Button
            onClick={() => {
              setTouched(false);
              setProblems([]);
              setPayload(templateOf(schema));
            }}
          >
            Reset to template
          </Button>
          <label class="inline">
            <input type="checkbox" checked={isVoid} onChange={(e) => setVoid((e.currentTarget as HTMLInputElement).checked)} /> fire and
            forget (void)
          </label>
        </div>
      </form>
      {result && (
        <div id="call-result" class="result" data-kind={result.kind} data-stale={resultStale ? "true" : undefined} aria-live="polite">
          <p class="result-head">
            <Badge kind={result.kind === "ok" ? "ok" : "error"}>{result.kind}</Badge> <span id="call-time">{result.text}</span>{" "}
            {resultStale && <small class="stale-tag">stale</small>}
          </p>
          <Json id="call-value" value={result.value} kind={result.kind} />
        </div>
      )}
    </Panel>
  );
}

function WorkersPanel({
  live,
  functions,
  selfId,
}: {
  live: ReturnType<typeof useLive<WorkerEntry[]>>;
  functions: FunctionEntry[];
  selfId?: string;
}) {
  const byWorker = useMemo(() => {
    const m = new Map<string, string[]>();
    for (const f of functions) if (!isInternal(f)) m.set(f.worker_name, [...(m.get(f.worker_name) ?? []), f.function_id]);
    return m;
  }, [functions]);
  const system = useMemo(() => systemWorkers(functions), [functions]);
  // The user's workers first; the harness's own (mostly kernel functions) after them.
  const rows = [...(live.data ?? [])].sort((a, b) => Number(system.has(a.name)) - Number(system.has(b.name)));
  return (
    <Panel
      id="workers-panel"
      title="Workers"
      count={rows.length}
      stale={live.stale}
      staleSince={connection().snapshot.lostAt}
      hint={
        <>
          Connected workers; updated on <code>engine::workers-available</code>.
        </>
      }
    >
      <Table
        id="workers"
        caption="Connected workers"
        rows={rows}
        rowKey={(w) => w.id}
        empty={live.data ? "No workers connected." : "Loading…"}
        columns={[
          {
            key: "name",
            label: "Worker",
            render: (w) => (
              <>
                {w.name} {w.id === selfId && <Badge kind="info">this tab</Badge>}
                {system.has(w.name) && <Badge kind="neutral">system</Badge>}
              </>
            ),
          },
          { key: "runtime", label: "Runtime", render: (w) => w.runtime ?? "–" },
          {
            key: "fns",
            label: "Functions",
            render: (w) => (
              <span title={(byWorker.get(w.name) ?? []).join("\n")}>
                {w.function_count}
                {(byWorker.get(w.name) ?? []).length > 0 && (
                  <span class="fn-names">
                    {" "}
                    · {(byWorker.get(w.name) ?? []).slice(0, 3).join(", ")}
                    {(byWorker.get(w.name) ?? []).length > 3 ? "…" : ""}
                  </span>
                )}
              </span>
            ),
          },
          {
            key: "since",
            label: "Connected",
            render: (w) => (
              <time dateTime={new Date(w.connected_at_ms).toISOString()} title={new Date(w.connected_at_ms).toLocaleString()}>
                {since(w.connected_at_ms)}
              </time>
            ),
          },
          { key: "active", label: "Running", wide: true, render: (w) => String(w.active_invocations) },
        ]}
      />
    </Panel>
  );
}

interface RouteTry {
  status?: number;
  body?: string;
  ms?: number;
  error?: string;
}

function TriggersPanels({ iii }: ScreenProps) {
  const types = useLive(() => listAll<TriggerTypeEntry>(iii, "engine::triggers::list", "triggers"), [], {
    events: ["functions", "workers"],
  });
  // A binding added by a worker already connected changes no function or worker: re-read too.
  const bindings = useLive(() => listAll<BindingEntry>(iii, "engine::registered-triggers::list", "registered_triggers"), [], {
    events: ["functions", "workers"],
    pollMs: TRIGGERS_POLL_MS,
  });
  const cron = useLive(
    () => iii.trigger<unknown, { jobs: CronJob[] }>({ function_id: "engine::cron::jobs", payload: {} }).then((r) => r.jobs),
    [],
    { events: ["functions", "workers"], pollMs: TRIGGERS_POLL_MS },
  );
  const lostAt = connection().snapshot.lostAt;
  const all = bindings.data ?? [];
  const routes = all.filter((b) => b.trigger_type === "http");
  const others = all.filter((b) => b.trigger_type !== "http" && b.trigger_type !== "cron");
  const cronBindings = new Map(all.filter((b) => b.trigger_type === "cron").map((b) => [b.id, b]));
  const mine = tabWorker().prefix;
  return (
    <>
      <Panel
        id="routes-panel"
        title="HTTP routes"
        count={routes.length}
        stale={bindings.stale}
        staleSince={lostAt}
        hint="http triggers: each route calls its function. Try one from here."
      >
        <Table
          id="routes"
          caption="HTTP routes"
          rows={routes}
          rowKey={(r) => r.id}
          empty={bindings.data ? "No http triggers." : "Loading…"}
          columns={[
            { key: "route", label: "Route", render: (r) => <RouteCell binding={r} /> },
            { key: "fn", label: "Function", render: (r) => <code>{r.function_id}</code> },
            { key: "by", label: "Worker", wide: true, render: (r) => r.worker_name },
          ]}
        />
      </Panel>
      <Panel
        id="cron-panel"
        title="Cron jobs"
        count={cron.data?.length}
        stale={cron.stale || bindings.stale}
        staleSince={lostAt}
        hint="cron triggers with their next occurrence (engine::cron::jobs)."
      >
        <Table
          id="cron"
          caption="Cron jobs"
          rows={cron.data ?? []}
          rowKey={(j) => j.job_id}
          empty={cron.data ? "No cron jobs." : "Loading…"}
          columns={[
            { key: "expr", label: "Schedule", render: (j) => <code>{j.expression}</code> },
            { key: "fn", label: "Function", render: (j) => <code>{cronBindings.get(j.job_id)?.function_id ?? j.job_id}</code> },
            {
              key: "next",
              label: "Next run",
              render: (j) => (j.next_time ? <time dateTime={j.next_time}>{new Date(j.next_time).toLocaleString()}</time> : "–"),
            },
            {
              key: "runs",
              label: "Runs",
              wide: true,
              render: (j) => `${j.runs}${j.skipped ? ` (${j.skipped} skipped)` : ""}${j.running ? " · running" : ""}`,
            },
          ]}
        />
      </Panel>
      <Panel
        id="triggers-panel"
        title="Trigger types and bindings"
        count={types.data?.length}
        stale={types.stale || bindings.stale}
        staleSince={lostAt}
      >
        <Table
          id="trigger-types"
          caption="Trigger types"
          rows={types.data ?? []}
          rowKey={(t) => t.id}
          columns={[
            { key: "id", label: "Type", render: (t) => <code>{t.id}</code> },
            { key: "by", label: "Provider", render: (t) => t.worker_name },
            { key: "desc", label: "What it does", wide: true, render: (t) => t.description },
          ]}
        />
        <h3>
          Bindings <small class="count">({others.length})</small>
        </h3>
        <Table
          id="bindings"
          caption="Trigger bindings"
          rows={others}
          rowKey={(b) => b.id}
          empty="No other bindings."
          columns={[
            { key: "type", label: "Type", render: (b) => <code>{b.trigger_type}</code> },
            {
              key: "fn",
              label: "Function",
              render: (b) => (
                <>
                  <code>{b.function_id}</code>
                  {b.function_id.startsWith(`${mine}::`) && (
                    <>
                      {" "}
                      <Badge kind="info">this tab</Badge>
                    </>
                  )}
                </>
              ),
            },
            { key: "cfg", label: "Config", wide: true, render: (b) => <code class="cfg">{b.config_summary}</code> },
            { key: "status", label: "Status", render: (b) => <Badge kind={b.status === "active" ? "ok" : "warn"}>{b.status}</Badge> },
          ]}
        />
      </Panel>
    </>
  );
}

/** A route: method + path; "Try" sends it from this page and shows the answer. */
function RouteCell({ binding }: { binding: BindingEntry }) {
  const cfg = (binding.config ?? {}) as { api_path?: string; http_method?: string };
  const method = (cfg.http_method ?? "GET").toUpperCase();
  const path = `/${(cfg.api_path ?? "").replace(/^\/+/, "")}`;
  const [open, setOpen] = useState(false);
  const [url, setUrl] = useState(path.replace(/:([A-Za-z0-9_]+)/g, "$1-example"));
  const [body, setBody] = useState("{}");
  const [res, setRes] = useState<RouteTry | undefined>();
  const [busy, setBusy] = useState(false);
  const send = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    const started = performance.now();
    try {
      const r = await fetch(url, {
        method,
        body: method === "GET" || method === "HEAD" ? undefined : body,
        headers: method === "GET" ? undefined : { "content-type": "application/json" },
      });
      setRes({ status: r.status, body: await r.text(), ms: performance.now() - started });
    } catch (err) {
      setRes({ error: String(err), ms: performance.now() - started });
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="route">
      <Badge kind="info">{method}</Badge> <code>{path}</code>{" "}
      <Button variant="link" aria-expanded={open ? "true" : "false"} onClick={() => setOpen(!open)}>
        {open ? "close" : "try"}
      </Button>
      {open && (
        <form class="route-try" onSubmit={send}>
          <Field label={`${method} URL`}>
            {(id) => <input id={id} value={url} onInput={(e) => setUrl((e.currentTarget as HTMLInputElement).value)} />}
          </Field>
          {method !== "GET" && method !== "HEAD" && (
            <Field label="Body">
              {(id) => <textarea id={id} rows={3} value={body} onInput={(e) => setBody((e.currentTarget as HTMLTextAreaElement).value)} />}
            </Field>
          )}
          <Button type="submit" variant="primary" busy={busy}>
            Send
          </Button>
          {res && (
            <p class="route-result">
              <Badge kind={res.status && res.status < 400 ? "ok" : "error"}>{res.status ?? "failed"}</Badge> in {res.ms?.toFixed(1)} ms
            </p>
          )}
          {res && <pre class="json">{res.error ?? res.body}</pre>}
        </form>
      )}
    </div>
  );
}
