// Queues and state: every queue with what waits in it and what is being delivered, dead letters
// (redrive one, redrive all, discard), and the state store by scope. Live: state changes arrive
// through a `state` trigger bound while this screen is open (no polling); queues and dead letters
// have no change event in the engine, so they are polled (QUEUE_POLL_MS) while connected.
import type { DeadLetterEntry as DeadLetter, QueueTopic as Topic } from "@iii-edge/protocol";
import { useEffect, useRef, useState } from "preact/hooks";
import { connection, onEngineEvent, useLive, type StateEvent } from "../../app/live.ts";
import { tabWorker } from "../../app/tab.ts";
import type { ScreenProps } from "../../app/types.ts";
import { JsonArea } from "../../schema-form/form.tsx";
import { Badge, Button, Dialog, Field, Json, Panel, Table } from "../../ui/index.tsx";
import { listAll, type BindingEntry } from "../../app/engine.ts";
import { useSessionNames } from "../../app/sessions.ts";
import { KeyName, QueueName, queueOwner, scopeLabel, type Owners } from "./owners.tsx";

/** Queue depth and dead letters are re-read this often (the engine pushes no queue events). */
export const QUEUE_POLL_MS = 2_000;
/** Dead letters shown per queue (the rest: page through engine::queue::dlq_messages). */
export const DEAD_LETTERS_SHOWN = 50;
/** Values of a scope shown at once (state::list pages; more: narrow the scope). */
export const STATE_VALUES_SHOWN = 200;
/** State changes this close together reload the scope listings once. */
export const STATE_RELOAD_DEBOUNCE_MS = 200;
/** Keys remembered from state events per scope. */
export const MAX_WATCHED_KEYS = 500;

const ENGINE_QUEUE = /^(state|durable):/;

/** Bindings and session names behind the engine's queue and scope names are re-read this often. */
export const OWNERS_POLL_MS = 10_000;

export default function QueuesScreen(props: ScreenProps) {
  const bindings = useLive(() => listAll<BindingEntry>(props.iii, "engine::registered-triggers::list", "registered_triggers"), [], {
    events: ["functions", "workers"],
    pollMs: OWNERS_POLL_MS,
  });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    const t = setInterval(() => setTick((n) => n + 1), OWNERS_POLL_MS);
    return () => clearInterval(t);
  }, []);
  const sessions = useSessionNames(props.iii, props.status === "open", tick);
  const owners: Owners = { bindings: bindings.data ?? [], sessions };
  return (
    <div class="screen data">
      <h1 class="sr-only">Queues and state</h1>
      <QueuesPanel {...props} owners={owners} />
      <DeadLettersPanel {...props} owners={owners} />
      <StatePanel {...props} owners={owners} />
    </div>
  );
}

function QueuesPanel({ iii, owners }: ScreenProps & { owners: Owners }) {
  const [showEngine, setShowEngine] = useState(false);
  const topics = useLive(
    () => iii.trigger<unknown, { topics: Topic[] }>({ function_id: "engine::queue::list_topics", payload: {} }).then((r) => r.topics),
    [],
    { pollMs: QUEUE_POLL_MS },
  );
  const rows = (topics.data ?? []).filter((t) => showEngine || !ENGINE_QUEUE.test(t.name));
  return (
    <Panel
      id="queues-panel"
      title="Queues"
      count={rows.length}
      stale={topics.stale}
      staleSince={connection().snapshot.lostAt}
      hint={
        <>
          From <code>engine::queue::list_topics</code>, re-read every {QUEUE_POLL_MS / 1000} s. Depth: messages waiting; in flight: being
          delivered now. Depth is known for the durable backend (Cloudflare Queues report none).
        </>
      }
      actions={
        <label class="inline">
          <input type="checkbox" checked={showEngine} onChange={(e) => setShowEngine((e.currentTarget as HTMLInputElement).checked)} />{" "}
          engine queues (state fires, durable topics)
        </label>
      }
    >
      {topics.error && !topics.data && <p class="error">{topics.error.message}</p>}
      <Table
        id="queues"
        caption="Queues"
        rows={rows}
        rowKey={(t) => t.name}
        empty={topics.data ? "No queues configured." : "Loading…"}
        columns={[
          { key: "name", label: "Queue", render: (t) => <QueueName name={t.name} owners={owners} /> },
          { key: "backend", label: "Backend", render: (t) => t.backend ?? "engine" },
          { key: "type", label: "Type", wide: true, render: (t) => t.type ?? "–" },
          { key: "depth", label: "Depth", render: (t) => <span data-depth={t.depth}>{t.depth}</span> },
          { key: "inflight", label: "In flight", render: (t) => <span data-inflight={t.inflight}>{t.inflight}</span> },
        ]}
      />
    </Panel>
  );
}

function DeadLettersPanel({ iii, navigate, owners }: ScreenProps & { owners: Owners }) {
  const dlq = useLive(
    async () => {
      const { topics } = await iii.trigger<unknown, { topics: { topic: string; count: number }[] }>({
        function_id: "engine::queue::dlq_topics",
        payload: {},
      });
      const lists = await Promise.all(
        topics
          .filter((t) => t.count > 0)
          .map((t) =>
            iii
              .trigger<unknown, { messages: DeadLetter[] }>({
                function_id: "engine::queue::dlq_messages",
                payload: { topic: t.topic, limit: DEAD_LETTERS_SHOWN },
              })
              .then((r) => ({ ...t, messages: r.messages })),
          ),
      );
      return lists;
    },
    [],
    { pollMs: QUEUE_POLL_MS },
  );
  const [notice, setNotice] = useState<{ kind: "ok" | "error"; text: string } | undefined>();
  const [discarding, setDiscarding] = useState<DeadLetter | undefined>();
  const act = async (what: string, fn: () => Promise<unknown>) => {
    try {
      await fn();
      setNotice({ kind: "ok", text: what });
    } catch (e) {
      setNotice({ kind: "error", text: `${what} failed: ${(e as Error).message}` });
    }
    dlq.reload();
  };
  const queues = dlq.data ?? [];
  const total = queues.reduce((n, q) => n + q.count, 0);
  return (
    <Panel
      id="dlq-panel"
      title="Dead letters"
      count={total}
      stale={dlq.stale}
      staleSince={connection().snapshot.lostAt}
      hint="Messages whose every attempt failed. Redrive puts one back on its queue (its handler runs again); discard drops it for good."
    >
      {notice && (
        <p class={notice.kind === "ok" ? "notice" : "error"} role="status" id="dlq-notice">
          {notice.text}
        </p>
      )}
      {dlq.data && queues.length === 0 && <p class="empty">No dead letters.</p>}
      {queues.map((q) => (
        <section key={q.topic} class="dlq-queue" data-queue={q.topic} aria-label={`Dead letters of ${queueOwner(q.topic, owners).label}`}>
          <h3>
            <QueueName name={q.topic} owners={owners} /> <small class="count">({q.count})</small>{" "}
            <Button
              onClick={() =>
                act(`redrove ${q.count} from ${q.topic}`, () =>
                  iii.trigger({ function_id: "iii::queue::redrive", payload: { queue: q.topic } }),
                )
              }
            >
              Redrive all
            </Button>
          </h3>
          <Table
            caption={`Dead letters of ${queueOwner(q.topic, owners).label}`}
            rows={q.messages}
            rowKey={(m) => m.message_id}
            columns={[
              {
                key: "fn",
                label: "Function",
                render: (m) => (
                  <a
                    href={`#/traces?function_id=${encodeURIComponent(m.function_id)}`}
                    onClick={(e) => {
                      e.preventDefault();
                      navigate(`/traces?function_id=${encodeURIComponent(m.function_id)}`);
                    }}
                  >
                    <code>{m.function_id}</code>
                  </a>
                ),
              },
              { key: "err", label: "Last error", render: (m) => <span class="error">{m.error}</span> },
              { key: "attempts", label: "Attempts", wide: true, render: (m) => String(m.attempts) },
              { key: "when", label: "Failed", wide: true, render: (m) => new Date(m.failed_at).toLocaleTimeString() },
              {
                key: "data",
                label: "Payload",
                wide: true,
                render: (m) => (
                  <details>
                    <summary>show</summary>
                    <Json value={m.data} />
                  </details>
                ),
              },
              {
                key: "act",
                label: "Actions",
                render: (m) => (
                  <div class="row">
                    <Button
                      variant="primary"
                      data-redrive={m.message_id}
                      aria-label={`Redrive ${m.function_id} message ${m.message_id}`}
                      onClick={() =>
                        act(`redrove ${m.message_id}`, () =>
                          iii.trigger({
                            function_id: "iii::queue::redrive_message",
                            payload: { queue: q.topic, message_id: m.message_id },
                          }),
                        )
                      }
                    >
                      Redrive
                    </Button>
                    <Button
                      variant="danger"
                      aria-label={`Discard ${m.function_id} message ${m.message_id}`}
                      onClick={() => setDiscarding(m)}
                    >
                      Discard
                    </Button>
                  </div>
                ),
              },
            ]}
          />
        </section>
      ))}
      <Dialog
        open={!!discarding}
        title="Discard this dead letter?"
        onClose={() => setDiscarding(undefined)}
        actions={
          <>
            <Button
              variant="danger"
              id="discard-yes"
              onClick={() => {
                const m = discarding!;
                setDiscarding(undefined);
                void act(`discarded ${m.message_id}`, () =>
                  iii.trigger({ function_id: "iii::queue::discard_message", payload: { queue: m.queue, message_id: m.message_id } }),
                );
              }}
            >
              Discard for good
            </Button>
            <Button onClick={() => setDiscarding(undefined)}>Keep it</Button>
          </>
        }
      >
        <p>
          The message for <code>{discarding?.function_id}</code> on {discarding && <QueueName name={discarding.queue} owners={owners} />} is
          deleted; nothing runs it again.
        </p>
      </Dialog>
    </Panel>
  );
}

interface WatchedKey {
  key: string;
  value: unknown;
  event: StateEvent["event_type"];
  at: number;
}

function StatePanel({ iii, owners }: ScreenProps & { owners: Owners }) {
  const [scope, setScope] = useState<string | undefined>();
  const [watched, setWatched] = useState<Map<string, Map<string, WatchedKey>>>(new Map());
  const [lastEvent, setLastEvent] = useState(0);
  const reloadTimer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  // Bound to every state change while this screen is open.
  useEffect(() => tabWorker().watchState(), []);
  useEffect(
    () =>
      onEngineEvent("state", (ev) => {
        setWatched((prev) => {
          const next = new Map(prev);
          const keys = new Map(next.get(ev.scope) ?? []);
          keys.delete(ev.key);
          keys.set(ev.key, { key: ev.key, value: ev.new_value, event: ev.event_type, at: Date.now() });
          while (keys.size > MAX_WATCHED_KEYS) keys.delete(keys.keys().next().value!);
          next.set(ev.scope, keys);
          return next;
        });
        // One reload of the listings for a burst of changes.
        clearTimeout(reloadTimer.current);
        reloadTimer.current = setTimeout(() => setLastEvent(Date.now()), STATE_RELOAD_DEBOUNCE_MS);
      }),
    [],
  );
  useEffect(() => () => clearTimeout(reloadTimer.current), []);
  const groups = useLive(async () => {
    const out: string[] = [];
    let offset: number | undefined = 0;
    while (offset !== undefined) {
      const page: { groups: string[]; next_offset?: number } = await iii.trigger({
        function_id: "state::list_groups",
        payload: { offset },
      });
      out.push(...page.groups);
      offset = page.next_offset;
    }
    return out;
  }, [lastEvent]);
  // A page of keys and the page of values in the same key order (state::list_keys pairs with state::list).
  const values = useLive(async () => {
    if (!scope) return [] as { key: string; value: unknown }[];
    const [page, vals] = await Promise.all([
      iii.trigger<unknown, { keys: string[] }>({ function_id: "state::list_keys", payload: { scope, limit: STATE_VALUES_SHOWN } }),
      iii.trigger<unknown, unknown[]>({ function_id: "state::list", payload: { scope, limit: STATE_VALUES_SHOWN } }),
    ]);
    return page.keys.map((key, i) => ({ key, value: vals[i] }));
  }, [scope, lastEvent]);
  const scopes = [...new Set([...(groups.data ?? []), ...watched.keys()])].sort();
  const keys = scope ? [...(watched.get(scope)?.values() ?? [])].reverse() : [];
  const lostAt = connection().snapshot.lostAt;
  return (
    <Panel
      id="state-panel"
      title="State"
      count={scopes.length}
      stale={groups.stale}
      staleSince={lostAt}
      hint={
        <>
          Scopes from <code>state::list_groups</code>, keys and values from <code>state::list_keys</code> and <code>state::list</code>.
          Changes arrive live through a <code>state</code> trigger this tab binds while the screen is open.
        </>
      }
    >
      <div class="columns">
        <div>
          <h3>Scopes</h3>
          {scopes.length === 0 ? (
            <p class="empty">{groups.data ? "No state yet." : "Loading…"}</p>
          ) : (
            <ul id="state-scopes" class="list">
              {scopes.map((s) => (
                <li key={s} data-scope={s} aria-current={s === scope ? "true" : undefined}>
                  <Button variant="link" onClick={() => setScope(s)} aria-pressed={s === scope ? "true" : "false"} title={s}>
                    {scopeLabel(s, owners) === s ? <code>{s}</code> : scopeLabel(s, owners)}
                  </Button>
                  {watched.get(s) && <Badge kind="info">{watched.get(s)!.size} changed</Badge>}
                </li>
              ))}
            </ul>
          )}
          <StateWriter iii={iii} scope={scope} />
        </div>
        <div>
          {!scope ? (
            <p class="empty">Pick a scope.</p>
          ) : (
            <>
              <h3>
                Keys changed in <code>{scope}</code> since this screen opened
              </h3>
              <Table
                id="state-keys"
                caption={`Keys of ${scope} seen changing`}
                rows={keys}
                rowKey={(k) => k.key}
                empty="None yet: a write shows here the moment it happens."
                columns={[
                  { key: "key", label: "Key", render: (k) => <KeyName k={k.key} owners={owners} /> },
                  {
                    key: "value",
                    label: "Value",
                    render: (k) => (
                      <code class="cfg" data-state-value={k.key}>
                        {k.event === "state:deleted" ? "(deleted)" : JSON.stringify(k.value)}
                      </code>
                    ),
                  },
                  {
                    key: "event",
                    label: "Change",
                    wide: true,
                    render: (k) => (
                      <>
                        <Badge kind={k.event === "state:deleted" ? "warn" : "ok"}>{k.event.replace("state:", "")}</Badge>{" "}
                        {new Date(k.at).toLocaleTimeString()}
                      </>
                    ),
                  },
                ]}
              />
              <h3>
                Keys in <code>{scope}</code> <small class="count">({values.data?.length ?? "…"})</small>{" "}
                {values.stale && <small class="stale-tag">stale</small>}
              </h3>
              <Table
                id="state-values"
                caption={`Keys and values of ${scope}`}
                rows={values.data ?? []}
                rowKey={(e) => e.key}
                empty={values.data ? "No keys." : "Loading…"}
                columns={[
                  { key: "key", label: "Key", render: (e) => <KeyName k={e.key} owners={owners} /> },
                  {
                    key: "value",
                    label: "Value",
                    wide: true,
                    render: (e) => (
                      <code class="cfg" data-stored-value={e.key}>
                        {JSON.stringify(e.value)}
                      </code>
                    ),
                  },
                ]}
              />
            </>
          )}
        </div>
      </div>
    </Panel>
  );
}

/** A small state::set form, to try the store from here. */
function StateWriter({ iii, scope }: { iii: ScreenProps["iii"]; scope?: string }) {
  const [s, setS] = useState(scope ?? "");
  const [key, setKey] = useState("");
  const [value, setValue] = useState<unknown>("hello");
  const [out, setOut] = useState<string | undefined>();
  useEffect(() => {
    if (scope) setS(scope);
  }, [scope]);
  return (
    <form
      class="state-writer"
      onSubmit={async (e) => {
        e.preventDefault();
        try {
          await iii.trigger({ function_id: "state::set", payload: { scope: s, key, value } });
          setOut(`wrote ${s}/${key}`);
        } catch (err) {
          setOut(`${(err as { code?: string }).code ?? "error"}: ${(err as Error).message}`);
        }
      }}
    >
      <h3>Write a value</h3>
      <Field label="Scope">
        {(id) => <input id={id} value={s} required onInput={(e) => setS((e.currentTarget as HTMLInputElement).value)} />}
      </Field>
      <Field label="Key">
        {(id) => <input id={id} value={key} required onInput={(e) => setKey((e.currentTarget as HTMLInputElement).value)} />}
      </Field>
      <Field label="Value (JSON)">{(id) => <JsonArea id={id} rows={2} value={value} onChange={setValue} />}</Field>
      <Button type="submit">state::set</Button>
      {out && (
        <p class="hint" role="status">
          {out}
        </p>
      )}
    </form>
  );
}
