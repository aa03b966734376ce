// The live function catalog (docs/harness-contracts.md §6.5, "function schemas come from the live engine
// catalog"): an index of what is registered at the moment a run is provisioned, each function with
// its description and request schema, appended to the prompt. A function an iii-sdk worker
// registered a second ago is in it; nothing has to be registered with the harness.
import { isModelNever, isRecord } from "@iii-edge/protocol";

/** A trigger bound to the handler's trace. */
export type Trigger = <T>(functionId: string, payload: unknown, timeoutMs: number) => Promise<T>;

/** Ids the model must not see: engine internals and the harness's own machinery (every part-2
 * worker too: budgets, hooks, compaction, approvals and the policy are the harness's, not tools).
 * Listing them would cost every run thousands of prompt tokens for functions the shipped
 * permissions deny anyway. */
export const EXCLUDED_PREFIXES: readonly string[] = [
  "engine::",
  "turn::",
  "run::",
  "provisioning::",
  "provider::",
  "auth::",
  "session-",
  "budget::",
  "hook-fanout::",
  "context-compaction::",
  "approval::",
  "policy::",
  "harness::http::",
  "harness::sub_agents::",
  "harness::sessions::",
  "iii::",
];
/** Single ids left out for the same reason: the ingress, and the engine's write built-ins (the
 * model reads state and streams; the harness writes them). */
export const EXCLUDED_IDS: ReadonlySet<string> = new Set([
  "harness::trigger",
  "harness::stop_children",
  "state::set",
  "state::update",
  "state::delete",
  "stream::set",
  "stream::set_many",
  "stream::update",
  "stream::delete",
  "stream::send",
  "publish",
]);

/** Functions described in the prompt; past it the model is told to page `engine::functions::list`. */
export const MAX_CATALOG_FUNCTIONS = 200;
/** A function's description in the index: enough for a sentence or two. Any registrant writes
 * these, and every run's prompt carries them: a longer one is cut with a marker. */
export const MAX_DESCRIPTION_CHARS = 500;
/** An inlined request schema; a bigger one is left for `engine::functions::info`. */
export const MAX_SCHEMA_CHARS = 2_000;
/** One function's whole entry (id, description, inlined schema): 1 KiB, so no one registrant's
 * text can crowd out the others'; a schema that would pass it is left for engine::functions::info. */
export const MAX_ENTRY_CHARS = 1_024;
/** The whole catalog section (~4k tokens): the prompt stays small next to the context window
 * however many functions anyone registers; what does not fit is paged with engine::functions::list. */
export const MAX_CATALOG_CHARS = 16_384;
/** Listing pages read (1000 ids each, the engine's page maximum). */
export const MAX_LIST_PAGES = 5;
/** `engine::functions::info` takes at most 32 ids per call (protocol/README.md §7.1). */
export const INFO_BATCH = 32;
/** Each engine introspection call: a local call that answers in milliseconds. */
export const INTROSPECTION_TIMEOUT_MS = 5_000;

export interface CatalogEntry {
  function_id: string;
  description?: string;
  request_schema?: unknown;
}

export interface LiveCatalog {
  /** Every function id listed (excluded ones too): used to see which optional workers are present. */
  registered: Set<string> | null;
  entries: CatalogEntry[];
  /** How many eligible functions did not fit `MAX_CATALOG_FUNCTIONS`. */
  omitted: number;
}

export const isExcluded = (id: string): boolean => EXCLUDED_IDS.has(id) || EXCLUDED_PREFIXES.some((p) => id.startsWith(p));

/** List, filter, and fetch schemas. A listing failure gives `registered: null` and no entries (fail open). */
export async function readCatalog(trigger: Trigger): Promise<LiveCatalog> {
  const registered = new Set<string>();
  const described = new Map<string, string | undefined>();
  try {
    let offset = 0;
    for (let page = 0; page < MAX_LIST_PAGES; page++) {
      const res = await trigger<{ functions?: unknown; next_offset?: unknown }>(
        "engine::functions::list",
        { offset },
        INTROSPECTION_TIMEOUT_MS,
      );
      const functions = Array.isArray(res?.functions) ? res.functions : [];
      for (const f of functions) {
        if (!isRecord(f) || typeof f.function_id !== "string") continue;
        registered.add(f.function_id);
        // The kernel (marked where it is registered) is not the model's to call: not listed either.
        if (!isExcluded(f.function_id) && !isModelNever(f.metadata))
          described.set(f.function_id, typeof f.description === "string" ? f.description : undefined);
      }
      if (typeof res?.next_offset !== "number") break;
      offset = res.next_offset;
    }
  } catch {
    return { registered: null, entries: [], omitted: 0 };
  }
  const ids = [...described.keys()].sort();
  const shown = ids.slice(0, MAX_CATALOG_FUNCTIONS);
  const schemas = new Map<string, unknown>();
  const batches: string[][] = [];
  for (let i = 0; i < shown.length; i += INFO_BATCH) batches.push(shown.slice(i, i + INFO_BATCH));
  await Promise.all(
    batches.map(async (function_ids) => {
      try {
        const res = await trigger<{ functions?: unknown }>("engine::functions::info", { function_ids }, INTROSPECTION_TIMEOUT_MS);
        for (const d of Array.isArray(res?.functions) ? res.functions : []) {
          if (isRecord(d) && typeof d.function_id === "string" && d.request_schema !== undefined && d.request_schema !== null)
            schemas.set(d.function_id, d.request_schema);
        }
      } catch {
        // Schemas are a convenience: without them the index still lists the ids.
      }
    }),
  );
  const entries = shown.map((function_id) => {
    const entry: CatalogEntry = { function_id };
    const description = described.get(function_id);
    if (description) entry.description = description;
    if (schemas.has(function_id)) entry.request_schema = schemas.get(function_id);
    return entry;
  });
  return { registered, entries, omitted: ids.length - shown.length };
}

const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);
/** An id in the index: the engine allows 512 characters, more than any real id needs; with the
 * description at its bound the entry stays inside MAX_ENTRY_CHARS. */
const MAX_ID_CHARS = 256;

/** The catalog as a prompt section, bounded by `MAX_CATALOG_CHARS`. */
export function renderCatalog(catalog: LiveCatalog): string {
  const head = "# Live function catalog\n\nFunctions registered on the engine when this run started (call any of them with agent_trigger):";
  if (catalog.registered === null)
    return `${head}\n\n(The engine's function list could not be read just now: call engine::functions::list to see what is available.)`;
  if (catalog.entries.length === 0) return `${head}\n\n(none besides the engine's own)`;
  const lines: string[] = [head, ""];
  let size = head.length;
  let dropped = catalog.omitted;
  for (const [i, e] of catalog.entries.entries()) {
    let block = `- \`${clip(e.function_id, MAX_ID_CHARS)}\``;
    if (e.description) block += ` — ${clip(e.description.replace(/\s+/g, " ").trim(), MAX_DESCRIPTION_CHARS)}`;
    if (e.request_schema !== undefined) {
      const schema = JSON.stringify(e.request_schema);
      const inline = `\n  request: ${schema}`;
      block +=
        schema.length <= MAX_SCHEMA_CHARS && block.length + inline.length <= MAX_ENTRY_CHARS
          ? inline
          : `\n  request: (schema of ${schema.length} characters: read it with engine::functions::info)`;
    }
    if (size + block.length + 1 > MAX_CATALOG_CHARS) {
      dropped += catalog.entries.length - i;
      break;
    }
    lines.push(block);
    size += block.length + 1;
  }
  if (dropped > 0) lines.push("", `… and ${dropped} more: page through engine::functions::list to see them.`);
  return lines.join("\n");
}
