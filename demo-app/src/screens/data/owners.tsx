// What a queue, a dead-letter queue or a state scope belongs to, in words a person knows: the
// engine's own queues are named by ids (`state:<trigger id>`, `durable:<topic>`), state scopes and
// keys by session ids. Each is shown with the function and worker behind it, or the session's
// title, the raw name kept in a tooltip.
import type { ComponentChildren } from "preact";
import type { BindingEntry } from "../../app/engine.ts";
import { sessionTitle, shortId, type SessionSummary } from "../../app/sessions.ts";

/** protocol: the engine's queue of deliveries for one `state` trigger, and of one durable topic. */
const STATE_QUEUE = "state:";
const DURABLE_QUEUE = "durable:";
/** The session-scoped state the harness keeps (`session:<session id>`). */
const SESSION_SCOPE = "session:";

export interface Owners {
  bindings: readonly BindingEntry[];
  sessions: ReadonlyMap<string, SessionSummary>;
}

const configOf = (b: BindingEntry) => (b.config ?? {}) as Record<string, unknown>;

function sessionName(owners: Owners, sid: string): string {
  const s = owners.sessions.get(sid);
  return s ? `session “${sessionTitle(s, sid)}” (${shortId(sid)})` : `session ${shortId(sid)}`;
}

/** A queue's name as a person reads it: what it delivers to, and whose that is. */
export function queueOwner(name: string, owners: Owners): { label: string; detail?: string } {
  if (name.startsWith(STATE_QUEUE)) {
    const id = name.slice(STATE_QUEUE.length);
    const b = owners.bindings.find((x) => x.id === id);
    if (!b) return { label: `state trigger ${shortId(id)}`, detail: "its binding is gone (its worker disconnected)" };
    const scope = configOf(b).scope;
    return {
      label: `state changes → ${b.function_id}`,
      detail: `${b.worker_name}'s state trigger${typeof scope === "string" ? ` on scope ${scope}` : ""}`,
    };
  }
  if (name.startsWith(DURABLE_QUEUE)) {
    const topic = name.slice(DURABLE_QUEUE.length);
    const subs = owners.bindings.filter((x) => x.trigger_type === "durable:subscriber" && configOf(x).topic === topic);
    return {
      label: `topic ${topic}`,
      detail: subs.length ? `subscribers: ${subs.map((x) => `${x.function_id} (${x.worker_name})`).join(", ")}` : "no subscriber now",
    };
  }
  return { label: name };
}

export function QueueName({ name, owners }: { name: string; owners: Owners }) {
  const o = queueOwner(name, owners);
  return (
    <span class="owned" title={name} data-queue-name={name}>
      <span class="owned-label">{o.label}</span>
      {o.detail && <small class="owned-detail"> {o.detail}</small>}
    </span>
  );
}

/** A state scope: `session:<sid>` names its session. */
export function scopeLabel(scope: string, owners: Owners): string {
  return scope.startsWith(SESSION_SCOPE) ? sessionName(owners, scope.slice(SESSION_SCOPE.length)) : scope;
}

/** A state key that is a session id, or starts with one (`<sid>/<call id>`), names its session. */
export function KeyName({ k, owners }: { k: string; owners: Owners }): ComponentChildren {
  const sid = [k, k.split("/")[0] ?? ""].find((x) => owners.sessions.has(x));
  return (
    <>
      <code>{k}</code>
      {sid && <small class="owned-detail"> {sessionName(owners, sid)}</small>}
    </>
  );
}
