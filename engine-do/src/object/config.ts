// What an Engine object reads from the deployment's vars and bindings, and the engine core's ports
// over workerd (core/ports.ts): the only place the object's settings are parsed.
import type { EngineRpc } from "@iii-edge/protocol";
import {
  MAX_CONNECTIONS_PER_PRINCIPAL,
  MAX_CONNECTIONS_PER_PRINCIPAL_ACROSS_NAMESPACES,
  openCallLimits,
  type OpenCallLimits,
} from "../core/bounds.ts";
import { edgeHostPort, type EdgeHostBinding, type KeyedObjectsBinding } from "../core/edge-hosts.ts";
import { httpFunctionsPort } from "../core/http-invoke.ts";
import type { Clock, EnginePorts, Log, Timers } from "../core/ports.ts";

const count = (v: string | undefined) => (v && /^\d+$/.test(v) ? Number(v) : undefined);

/** MAX_CONNECTIONS_PER_* (core/bounds.ts) may be lowered per deployment (tests use small ones). */
export function connectionLimits(env: Env): { perPrincipal?: number; perIp?: number } {
  const out: { perPrincipal?: number; perIp?: number } = {};
  const p = count(env.MAX_CONNECTIONS_PER_TOKEN);
  const i = count(env.MAX_CONNECTIONS_PER_IP);
  if (p !== undefined) out.perPrincipal = p;
  if (i !== undefined) out.perIp = i;
  return out;
}

/** MAX_OPEN_CALLS and MAX_OPEN_CALLS_PER_PRINCIPAL (core/bounds.ts) may be lowered per deployment
 * (tests use small ones); openCallLimits keeps a principal's share below what principals may hold. */
export function openCalls(env: Env): OpenCallLimits {
  return openCallLimits(count(env.MAX_OPEN_CALLS), count(env.MAX_OPEN_CALLS_PER_PRINCIPAL));
}

/** How many connections one principal may hold over every namespace: the var, or the default but
 * never below the per-namespace bound (a deployment that raised that one meant more sockets). */
export function acrossNamespaces(env: Env, perNamespace: number | undefined): number {
  const v = env.MAX_CONNECTIONS_PER_TOKEN_ACROSS_NAMESPACES;
  if (v && /^\d+$/.test(v) && Number(v) > 0) return Number(v);
  return Math.max(MAX_CONNECTIONS_PER_PRINCIPAL_ACROSS_NAMESPACES, perNamespace ?? MAX_CONNECTIONS_PER_PRINCIPAL);
}

/** Longest deadline INVOKE_TIMEOUT_MS may set: the bound of an `invokefunction`'s `timeout_ms`. */
const MAX_TIMEOUT_MS = 15 * 60_000;

/** INVOKE_TIMEOUT_MS, when it is a deadline a call may have (1…MAX_TIMEOUT_MS). */
export function invokeTimeout(env: Env): number | undefined {
  const v = env.INVOKE_TIMEOUT_MS;
  if (!v || !/^\d+$/.test(v)) return undefined;
  const ms = Number(v);
  return ms >= 1 && ms <= MAX_TIMEOUT_MS ? ms : undefined;
}

/** The wall clock, workerd's timers, structured log lines: what every role of the object runs on. */
export const clock: Clock = { now: () => Date.now() };
export const timers: Timers = { set: (fn, ms) => setTimeout(fn, ms), clear: (h) => clearTimeout(h as number) };
export const log: Log = {
  info: (msg, fields) => console.log(JSON.stringify({ level: "info", msg, ...fields })),
  warn: (msg, fields) => console.warn(JSON.stringify({ level: "warn", msg, ...fields })),
};
export const newId = (): string => crypto.randomUUID();

/** The engine core's ports over this object (core/ports.ts). */
export function enginePorts(ctx: DurableObjectState, env: Env, requestAlarm: (at: number) => void): EnginePorts {
  const sql = ctx.storage.sql;
  return {
    namespace: ctx.id.name ?? "default",
    sql: {
      exec: (q, ...b) => sql.exec(q, ...b).toArray() as never,
      transaction: (fn) => ctx.storage.transactionSync(fn),
    },
    clock,
    timers,
    alarm: { request: requestAlarm },
    log,
    newId,
    background: (p) => ctx.waitUntil(p.catch((e) => console.error("background task failed", e))),
    edgeHosts: edgeHosts(env),
    httpFunctions: httpFunctionsPort(env as unknown as Record<string, unknown>),
    otherNamespace: (ns): EngineRpc => env.ENGINE.getByName(ns),
  };
}

/** The Worker-hosted functions' hosts named by EDGE_HOSTS (core/edge-hosts.ts). */
function edgeHosts(env: Env): EnginePorts["edgeHosts"] {
  const hosts: EnginePorts["edgeHosts"] = {};
  for (const name of (env.EDGE_HOSTS ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    // Named by a var, so Env cannot type it: what the binding answers is parsed (core/edge-hosts.ts).
    const binding = (env as unknown as Record<string, unknown>)[name];
    if (binding) hosts[name] = edgeHostPort(name, binding as EdgeHostBinding, (objects) => keyedObjectsOf(env, objects));
  }
  return hosts;
}

/** Bindings a host may not name as its keyed objects: the engine's own classes. */
const ENGINE_BINDINGS = new Set(["ENGINE", "PRINCIPALS"]);

/** A host's `keyed_objects` binding in this Worker's env, when it is a Durable Object namespace
 * (named by another Worker's manifest, so Env cannot type it); undefined sends the call to the host. */
function keyedObjectsOf(env: Env, objects: string): KeyedObjectsBinding | undefined {
  if (ENGINE_BINDINGS.has(objects)) return undefined;
  const b = (env as unknown as Record<string, unknown>)[objects];
  return b && typeof (b as { getByName?: unknown }).getByName === "function" ? (b as KeyedObjectsBinding) : undefined;
}
