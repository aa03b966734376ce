// Live data for screens: the connection snapshot as a hook, engine events (catalog and worker
// changes pushed by the engine's discovery triggers) as a small bus, and `useLive`, which loads
// something from the engine, reloads it on reconnect and on the events named, and says whether
// what it holds is stale (fetched before the link last opened, or the link is down now).
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import type { FunctionSummary } from "@iii-edge/protocol";
import type { ConsoleConnection, ConnectionSnapshot } from "./connection.ts";

export interface EngineEvents {
  /** engine::functions-available: the whole function list, pushed the moment it changes. */
  functions: FunctionSummary[];
  /** engine::workers-available: a worker came, went or described itself. */
  workers: unknown;
  /** A `state` trigger fire (§8.3), while a screen has the tab bound to state changes. */
  state: StateEvent;
}

export interface StateEvent {
  type: "state";
  event_type: "state:created" | "state:updated" | "state:deleted";
  scope: string;
  key: string;
  old_value: unknown;
  new_value: unknown;
}
export type EngineEvent = keyof EngineEvents;

type Handler<E extends EngineEvent> = (payload: EngineEvents[E]) => void;
const handlers: { [E in EngineEvent]: Set<Handler<E>> } = { functions: new Set(), workers: new Set(), state: new Set() };
const latest: Partial<EngineEvents> = {};

export function emit<E extends EngineEvent>(event: E, payload: EngineEvents[E]): void {
  latest[event] = payload;
  for (const h of handlers[event]) h(payload);
}
export function onEngineEvent<E extends EngineEvent>(event: E, h: Handler<E>): () => void {
  handlers[event].add(h);
  return () => handlers[event].delete(h);
}
export function lastEvent<E extends EngineEvent>(event: E): EngineEvents[E] | undefined {
  return latest[event];
}

let conn: ConsoleConnection | undefined;
export function setConnection(c: ConsoleConnection): void {
  conn = c;
}
export function connection(): ConsoleConnection {
  if (!conn) throw new Error("the console connection is not set up yet");
  return conn;
}

/** The connection snapshot, re-rendering on every change. */
export function useConnection(): ConnectionSnapshot {
  const c = connection();
  const [snap, setSnap] = useState(c.snapshot);
  useEffect(() => {
    setSnap(c.snapshot);
    return c.subscribe(setSnap);
  }, [c]);
  return snap;
}

/** Events arriving this close together cause one reload. */
const RELOAD_DEBOUNCE_MS = 150;

export interface Live<T> {
  data: T | undefined;
  error: (Error & { code?: string }) | undefined;
  /** Shown data is from before the link last dropped (or the link is down). */
  stale: boolean;
  loading: boolean;
  fetchedAt: number | undefined;
  reload(): void;
}

/**
 * Load `load()` while connected; again on each reconnect, on the engine events named, every
 * `pollMs` if given, and on `reload()`. Keeps the last data across an outage, marked stale.
 */
export function useLive<T>(load: () => Promise<T>, deps: unknown[], opts: { events?: EngineEvent[]; pollMs?: number } = {}): Live<T> {
  const snap = useConnection();
  const [state, setState] = useState<{ data?: T; error?: Error; fetchedAt?: number; loading: boolean }>({ loading: true });
  const loadRef = useRef(load);
  loadRef.current = load;
  const seq = useRef(0);
  const run = useCallback(() => {
    const mine = ++seq.current;
    const started = Date.now();
    setState((s) => ({ ...s, loading: true }));
    loadRef.current().then(
      (data) => mine === seq.current && setState({ data, fetchedAt: started, loading: false }),
      (error: Error) => mine === seq.current && setState((s) => ({ ...s, error, loading: false })),
    );
  }, []);
  const open = snap.status === "open";
  useEffect(() => {
    if (open) run();
  }, [open, snap.openedAt, run, ...deps]);
  useEffect(() => {
    if (!opts.events?.length) return;
    let t: ReturnType<typeof setTimeout> | undefined;
    const soon = () => {
      clearTimeout(t);
      t = setTimeout(() => connection().snapshot.status === "open" && run(), RELOAD_DEBOUNCE_MS);
    };
    const offs = opts.events.map((e) => onEngineEvent(e, soon));
    return () => (clearTimeout(t), offs.forEach((o) => o()));
  }, [run, (opts.events ?? []).join(",")]);
  useEffect(() => {
    if (!opts.pollMs || !open) return;
    const t = setInterval(run, opts.pollMs);
    return () => clearInterval(t);
  }, [run, opts.pollMs, open]);
  const stale = !open || state.fetchedAt === undefined || state.fetchedAt < snap.openedAt;
  return {
    data: state.data,
    error: state.error,
    stale: state.data !== undefined && stale,
    loading: state.loading,
    fetchedAt: state.fetchedAt,
    reload: run,
  };
}
