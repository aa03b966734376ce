// Which functions of the catalog the MCP server offers as tools, and under which names. Shared by
// the server (server.ts) and the client (client.ts), which marks what it registers as never
// exposed, so an engine that is both never serves MCP tools back out as its own.
import { globMatch } from "@iii-edge/protocol";

/** The metadata key a function sets to decide for itself: `{mcp: {expose: true}}` (or `false`). */
export const EXPOSE_METADATA_KEY = "mcp";

/** Longest tool name: MCP clients in the wild (Claude's API among them) accept `^[A-Za-z0-9_-]{1,64}$`. */
export const MAX_TOOL_NAME_CHARS = 64;
/** Characters of a shortened name's hash suffix (32 bits: a collision among one catalog's tools is
 * not a concern, and the name stays readable). */
const NAME_HASH_CHARS = 8;

/** How the server decides: explicit metadata first, then the `MCP_EXPOSE` globs. */
export interface ExposeRule {
  /** Function-id globs (`demo::*`, `edge::hello`); empty: only functions that opt in by metadata. */
  readonly globs: readonly string[];
}

/** `MCP_EXPOSE` as a rule: comma-separated globs, blanks ignored. */
export function exposeRuleFrom(setting: string | undefined): ExposeRule {
  return { globs: (setting ?? "").split(",").map((s) => s.trim()).filter(Boolean) };
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** The function's own say: `metadata.mcp.expose` true or false, else undefined. */
function declared(metadata: unknown): boolean | undefined {
  const mcp = isRecord(metadata) ? metadata[EXPOSE_METADATA_KEY] : undefined;
  const expose = isRecord(mcp) ? mcp.expose : undefined;
  return typeof expose === "boolean" ? expose : undefined;
}

/**
 * Is this function offered? `metadata.mcp.expose` decides when set (`false` wins over any glob);
 * otherwise a glob of the rule must match, and functions marked `metadata.internal` (the harness's
 * plumbing) are left out of globs.
 */
export function isExposed(rule: ExposeRule, functionId: string, metadata: unknown): boolean {
  const own = declared(metadata);
  if (own !== undefined) return own;
  if (isRecord(metadata) && metadata.internal === true) return false;
  return rule.globs.some((g) => globMatch(g, functionId));
}

/** FNV-1a, 32 bits, as hex: a short stable suffix (not a security boundary). */
function shortHash(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(16).padStart(NAME_HASH_CHARS, "0");
}

/**
 * The tool name of a function id: `::` becomes `__` and any other character outside
 * `[A-Za-z0-9_-]` becomes `_`; a name past MAX_TOOL_NAME_CHARS is cut and ends in a hash of the id.
 * Deterministic, so a call finds its function again without any state on the server.
 */
export function toolNameOf(functionId: string): string {
  const plain = functionId.replace(/::/g, "__").replace(/[^A-Za-z0-9_-]/g, "_");
  if (plain.length <= MAX_TOOL_NAME_CHARS && plain.length > 0) return plain;
  return `${plain.slice(0, MAX_TOOL_NAME_CHARS - NAME_HASH_CHARS - 1)}_${shortHash(functionId)}`;
}

/** Characters a function-id segment keeps when built from an MCP server or tool name. */
const SEGMENT_UNSAFE = /[^A-Za-z0-9_.-]/g;
/** Longest segment taken from a server or tool name (function ids stay readable in listings). */
export const MAX_SEGMENT_CHARS = 96;

/** `mcp::<server>::<tool>`: the function id the client registers a server's tool under. */
export function clientFunctionId(server: string, tool: string): string {
  const seg = (s: string) => s.replace(SEGMENT_UNSAFE, "_").slice(0, MAX_SEGMENT_CHARS) || "_";
  return `mcp::${seg(server)}::${seg(tool)}`;
}
