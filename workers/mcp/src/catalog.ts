// The engine's catalog read as MCP tools: `engine::functions::list` (every page) for what exists and
// its metadata, `engine::functions::info` for the request formats of the exposed ones. Read afresh
// for every request — a Worker keeps nothing between requests, and the catalog is the truth.
import {
  IIIError,
  relayedCode,
  MAX_LIST_PAGE,
  mayCall,
  type CallOutcome,
  type FunctionDetail,
  type FunctionSummary,
  type Grant,
} from "@iii-edge/protocol";
import { isExposed, toolNameOf, type ExposeRule } from "./expose.ts";

/** What the server needs of one namespace's engine (its Durable Object stub satisfies it). */
export interface EngineCaller {
  trigger(req: {
    function_id: string;
    payload?: unknown;
    timeout_ms?: number;
    grant?: Grant;
    traceparent?: string;
    baggage?: string;
  }): Promise<CallOutcome>;
}

/** Most tools one listing offers: a catalog bigger than this is cut (in function-id order) rather
 * than read without end; a model given more tools than this cannot choose among them anyway. */
export const MAX_TOOLS = 512;
/** Most catalog pages read for one listing: MAX_LIST_PAGE functions each, so 20 000 functions. */
const MAX_LIST_PAGES = 20;
/** `engine::functions::info` answers at most this many ids per call (protocol's functionsInfoInput). */
const INFO_BATCH = 32;
/** A catalog read is the engine's own built-ins, answered in memory; this only bounds a stuck object. */
const CATALOG_CALL_TIMEOUT_MS = 10_000;

/** One tool: its MCP name, the function it calls and what the function says about itself. */
export interface ToolEntry {
  name: string;
  function_id: string;
  description?: string;
  inputSchema: { type: "object"; [k: string]: unknown };
  /** Set when the function publishes no object `request_format`: why its arguments go unchecked
   * (the tool is listed with PERMISSIVE_SCHEMA, and says so in its description). */
  unchecked?: string;
}

/** The inputSchema of a function without an object request_format: any object of arguments. */
export const PERMISSIVE_SCHEMA = { type: "object" } as const;
/** Functions whose unchecked arguments were logged in this isolate: said once each, not on every
 * listing (a notification stream re-lists every second). Bounded: past it, nothing more is said. */
const warnedUnchecked = new Set<string>();
const MAX_WARNED = 1_024;

async function call<T>(engine: EngineCaller, function_id: string, payload: unknown): Promise<T> {
  const out = await engine.trigger({ function_id, payload, timeout_ms: CATALOG_CALL_TIMEOUT_MS });
  if (!out.ok) throw new IIIError(relayedCode(out.error.code), `${function_id}: ${out.error.message}`);
  return out.result as T;
}

const isObjectSchema = (s: unknown): s is ToolEntry["inputSchema"] =>
  typeof s === "object" && s !== null && !Array.isArray(s) && (s as { type?: unknown }).type === "object";

/** Every function of the catalog (not the engine's internal built-ins), in pages. */
async function allFunctions(engine: EngineCaller): Promise<FunctionSummary[]> {
  const out: FunctionSummary[] = [];
  let offset: number | undefined = 0;
  for (let page = 0; page < MAX_LIST_PAGES && offset !== undefined; page++) {
    const r: { functions: FunctionSummary[]; next_offset?: number } = await call(engine, "engine::functions::list", {
      offset,
      limit: MAX_LIST_PAGE,
    });
    out.push(...r.functions);
    offset = r.next_offset;
  }
  return out;
}

function uncheckedReason(requestSchema: unknown): string {
  return requestSchema === undefined ? "it publishes no request_format" : "its request_format is not a JSON Schema of type object";
}

function warnOnce(functionId: string, reason: string): void {
  if (warnedUnchecked.has(functionId) || warnedUnchecked.size >= MAX_WARNED) return;
  warnedUnchecked.add(functionId);
  console.warn(
    `mcp: ${functionId} is exposed as a tool that takes any arguments, unchecked: ${reason} (give it an object JSON Schema to have calls checked)`,
  );
}

/**
 * The tools `rule` exposes, for `grant` (what it may call; every exposed tool when undefined): sorted
 * by function id, each under the one name toolNameOf gives its id. A function without an object
 * `request_format` is still a tool, one that takes any object (PERMISSIVE_SCHEMA, MCP wants an
 * object `inputSchema`) and is marked `unchecked`: leaving it out would hide it without a word.
 */
export async function exposedTools(engine: EngineCaller, rule: ExposeRule, grant?: Grant): Promise<ToolEntry[]> {
  // A name depends on the function id alone: whoever asks, and whatever else is registered, a name
  // from one listing always calls the same function.
  const candidates = (await allFunctions(engine))
    .filter((f) => isExposed(rule, f.function_id, f.metadata))
    .sort((a, b) => (a.function_id < b.function_id ? -1 : a.function_id > b.function_id ? 1 : 0));
  const details: FunctionDetail[] = [];
  for (let i = 0; i < candidates.length && details.length < MAX_TOOLS; i += INFO_BATCH) {
    const ids = candidates.slice(i, i + INFO_BATCH).map((f) => f.function_id);
    const r: { functions: (FunctionDetail | { function_id: string; error: "not_found" })[] } = await call(
      engine,
      "engine::functions::info",
      { function_ids: ids },
    );
    // A function gone between the two reads is simply not listed.
    for (const d of r.functions) if (!("error" in d)) details.push(d);
  }
  const named = await Promise.all(details.slice(0, MAX_TOOLS).map(async (d) => ({ d, name: await toolNameOf(d.function_id) })));
  // toolNameOf gives each id its own name; should two ever meet (a 64-bit hash collision), neither
  // is offered: the order of a listing never decides which function a name calls.
  const holders = new Map<string, number>();
  for (const { name } of named) holders.set(name, (holders.get(name) ?? 0) + 1);
  const tools: ToolEntry[] = [];
  for (const { d, name } of named) {
    if (holders.get(name) !== 1) continue;
    const tool: ToolEntry = isObjectSchema(d.request_schema)
      ? { name, function_id: d.function_id, inputSchema: d.request_schema }
      : { name, function_id: d.function_id, inputSchema: { ...PERMISSIVE_SCHEMA }, unchecked: uncheckedReason(d.request_schema) };
    if (d.description !== undefined) tool.description = d.description;
    if (tool.unchecked !== undefined) warnOnce(tool.function_id, tool.unchecked);
    tools.push(tool);
  }
  return grant ? tools.filter((t) => mayCall(grant, t.function_id)) : tools;
}

/** JSON with every object's keys sorted: the same schema read back from the engine's storage (after
 * an eviction or a reload) may list its keys in another order, and that is no change. */
function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`;
  if (typeof v === "object" && v !== null) {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .filter((k) => o[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(v) ?? "null";
}

/** A stable text for "did the tool list change": names, ids, descriptions and schemas. */
export function fingerprintOf(tools: readonly ToolEntry[]): string {
  return canonicalJson(tools.map((t) => [t.name, t.function_id, t.description ?? null, t.inputSchema, t.unchecked ?? null]));
}
