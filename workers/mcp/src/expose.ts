// Which functions of the catalog the MCP server offers as tools, and under which names. Shared by
// the server (server.ts) and the client (client.ts), which marks what it registers as never
// exposed, so an engine that is both never serves MCP tools back out as its own.
import { globMatch, isRecord } from "@iii-edge/protocol";

/** The metadata key a function sets to decide for itself: `{mcp: {expose: true}}` (or `false`). */
export const EXPOSE_METADATA_KEY = "mcp";

/** Longest tool name: MCP clients in the wild (Claude's API among them) accept `^[A-Za-z0-9_-]{1,64}$`. */
export const MAX_TOOL_NAME_CHARS = 64;
/** Hex characters of a distinguished name's suffix: 64 bits of SHA-256 of the function id, so
 * nobody can choose an id whose suffix equals another function's (that takes ~2^64 tries). */
const NAME_HASH_CHARS = 16;
/** What a distinguished name ends in; a readable name never does (see toolNameOf). */
const HASHED_SUFFIX = new RegExp(`_[0-9a-f]{${NAME_HASH_CHARS}}$`);

/** How the server decides: explicit metadata first, then the `MCP_EXPOSE` globs. */
export interface ExposeRule {
  /** Function-id globs (`demo::*`, `edge::hello`); empty: only functions that opt in by metadata. */
  readonly globs: readonly string[];
}

/** `MCP_EXPOSE` as a rule: comma-separated globs, blanks ignored. */
export function exposeRuleFrom(setting: string | undefined): ExposeRule {
  return {
    globs: (setting ?? "")
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
  };
}

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

/** The first NAME_HASH_CHARS hex digits of SHA-256 of `text`. */
async function idHash(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  let hex = "";
  for (const b of digest.subarray(0, NAME_HASH_CHARS / 2)) hex += b.toString(16).padStart(2, "0");
  return hex;
}

/**
 * The tool name of a function id. One name never stands for two functions, whoever registers what
 * and in which order, so a name a client once listed always calls the function it was listed for:
 * - the readable name (`::` becomes `__`) only when it gives the id back exactly (`__` read as `::`)
 *   and does not look like a distinguished name: `pay::charge` is `pay__charge`, and only it can be;
 * - every other id (one with `.`, `:`, `__`, a space or any character outside `[A-Za-z0-9_-]`, or
 *   too long) gets its sanitised form, cut to fit, with `_` and 16 hex digits of SHA-256 of the id:
 *   `pay.:charge` is `pay__charge_<hash>`, never `pay__charge`.
 * Pure and stateless (the server keeps nothing between requests): the same id has the same name on
 * every isolate, after every restart.
 */
export async function toolNameOf(functionId: string): Promise<string> {
  const plain = functionId.replace(/::/g, "__").replace(/[^A-Za-z0-9_-]/g, "_");
  const readable =
    plain.length > 0 && plain.length <= MAX_TOOL_NAME_CHARS && plain.replace(/__/g, "::") === functionId && !HASHED_SUFFIX.test(plain);
  if (readable) return plain;
  return `${plain.slice(0, MAX_TOOL_NAME_CHARS - NAME_HASH_CHARS - 1)}_${await idHash(functionId)}`;
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
