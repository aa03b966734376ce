// Token counts of a provider request (docs/harness-contracts.md §6.1 budget math, made exact where it can
// be): the model family's own BPE encoding from gpt-tokenizer (pure JS, runs in workerd; its rank
// tables come through the rank loader port, ranks.ts) and OpenAI's documented chat framing; for
// Anthropic, whose tokenizer is not public, a calibrated multiple of o200k.
//
// OpenAI's framing (openai-cookbook "How to count tokens with tiktoken", §6–§7, checked against the
// API's `prompt_tokens` there): 3 tokens per message plus every string field's tokens (+1 for a
// `name`), 3 to prime the reply, and for `tools` per function 7 (o200k models; 10 for cl100k ones)
// + `name:description` + 3 if it has properties + per property 3 + `key:type:description` (enum
// items 3 each, −3 per enum), 12 once at the end. The cookbook leaves out assistant `tool_calls`:
// each is counted as its name + arguments + 3 (the legacy `function_call` framing).
import type { AgentMessage, ContentBlock } from "@iii-edge/protocol/harness";
import { isRecord } from "@iii-edge/protocol";
import { GptEncoding } from "gpt-tokenizer/GptEncoding";
import { defaultRanks } from "#default-ranks";
import { checkRankTable, TokenizerUnavailableError, type EncodingName, type RankLoader } from "./ranks.ts";

// The encodings a counter is built from, named here for callers of this module (the `./tokens` export).
export type { EncodingName } from "./ranks.ts";
export type TokenFamily = "openai" | "anthropic" | "other";

/** Anthropic publishes no tokenizer (only a count_tokens API call, a network round trip per
 * count). Measured on the same prompts, Claude 3.5+ tokenizes English prose ~16 %, math ~21 % and
 * Python code ~30 % longer than GPT-4o's o200k (Vantage / VentureBeat comparison, 2024–25). Agent
 * transcripts are mostly code, JSON arguments and tool output, so the o200k count is taken × 1.3:
 * the top of that range. Over-counting compacts a little early; under-counting sends a request the
 * API refuses, so the factor errs high. Provider-reported usage (turn_end) stays the trigger of the
 * per-turn path, so this only matters for the pre-flight and the summariser's own request. */
export const ANTHROPIC_TOKEN_FACTOR = 1.3;
/** Other families (Kimi, local models via LM Studio, …) have their own tokenizers, mostly with
 * smaller vocabularies than o200k's 200k entries: counted as o200k × 1.15. */
export const OTHER_TOKEN_FACTOR = 1.15;
/** OpenAI bills a high-detail 1024×1024 image 85 + 4 tiles × 170 tokens: images are counted so. */
export const IMAGE_TOKENS = 765;

const TOKENS_PER_MESSAGE = 3;
const TOKENS_PER_NAME = 1;
const REPLY_PRIMING_TOKENS = 3;
const TOOL_CALL_TOKENS = 3;
const TOOL_FRAMING: Record<
  EncodingName,
  { funcInit: number; propInit: number; propKey: number; enumInit: number; enumItem: number; funcEnd: number }
> = {
  o200k_base: { funcInit: 7, propInit: 3, propKey: 3, enumInit: -3, enumItem: 3, funcEnd: 12 },
  cl100k_base: { funcInit: 10, propInit: 3, propKey: 3, enumInit: -3, enumItem: 3, funcEnd: 12 },
};

/** OpenAI chat wire shapes (what the openai provider sends, and what a replay records). */
export type WireContent =
  | string
  | null
  | readonly ({ type: "text"; text: string } | { type: "image_url"; image_url: unknown } | { type: string; [k: string]: unknown })[];
export interface WireMessage {
  role: string;
  content?: WireContent;
  name?: string;
  tool_call_id?: string;
  tool_calls?: readonly { id?: string; type?: string; function?: { name?: string; arguments?: string } }[];
}
export interface WireTool {
  type?: string;
  function?: { name?: string; description?: string; parameters?: unknown };
}

/** The BPE count of a text; special-token text is counted as ordinary text (as the API does with
 * user input), never refused. */
export type TextCounter = (text: string) => number;

interface Encoding {
  countTokens(text: string, options?: { disallowedSpecial?: Set<string> }): number;
}
/** Built encoders, per rank source and encoding: each table is loaded and built once per process
 * (per isolate in a Worker), on its first count. */
const loaded = new Map<string, Promise<Encoding>>();
const NO_SPECIAL = { disallowedSpecial: new Set<string>() };

/** The encoding, built on first use from the rank table `ranks` gives (by default gpt-tokenizer's
 * own in Node; in a Worker bundle none: the Worker passes its static assets' loader, ranks.ts). A
 * table that cannot be loaded fails with `tokenizer_unavailable`, and the next call tries again. */
export function loadEncoding(name: EncodingName, ranks: RankLoader = defaultRanks): Promise<Encoding> {
  const key = `${ranks.source}\0${name}`;
  let p = loaded.get(key);
  if (!p) {
    p = (async () => {
      let table: unknown;
      try {
        table = await ranks.load(name);
      } catch (e) {
        if (e instanceof TokenizerUnavailableError) throw e;
        throw new TokenizerUnavailableError(name, `${ranks.source} failed to load it`, { cause: e });
      }
      const checked = checkRankTable(name, table, ranks.source);
      return GptEncoding.getEncodingApi(name, () => checked);
    })();
    const mine = p;
    p.catch(() => {
      if (loaded.get(key) === mine) loaded.delete(key);
    });
    loaded.set(key, p);
  }
  return p;
}

/** Which encoding and family a model is counted with. */
export function tokenizerSpec(model: { id: string; provider: string }): { encoding: EncodingName; family: TokenFamily; factor: number } {
  const id = model.id.trim().toLowerCase();
  const provider = model.provider.trim().toLowerCase();
  if (provider === "anthropic" || id.startsWith("claude"))
    return { encoding: "o200k_base", family: "anthropic", factor: ANTHROPIC_TOKEN_FACTOR };
  const openaiId = /^(gpt-|chatgpt-|o\d(?:$|[-.]))/.test(id);
  if (provider === "openai" || openaiId) {
    // gpt-4 / gpt-4-turbo / gpt-3.5 are cl100k; gpt-4o, gpt-4.1, gpt-4.5, gpt-5 and the o-series o200k.
    const cl100k = /^gpt-3\.5/.test(id) || /^gpt-4(?:$|-)/.test(id);
    return {
      encoding: cl100k ? "cl100k_base" : "o200k_base",
      family: openaiId ? "openai" : "other",
      factor: openaiId ? 1 : OTHER_TOKEN_FACTOR,
    };
  }
  return { encoding: "o200k_base", family: "other", factor: OTHER_TOKEN_FACTOR };
}

// ------------------------------------------------------------------ OpenAI chat wire counts (exact framing)

function contentTokens(content: WireContent | undefined, count: TextCounter): number {
  if (typeof content === "string") return count(content);
  if (!Array.isArray(content)) return 0;
  let n = 0;
  for (const part of content) {
    if (part.type === "text" && typeof part.text === "string") n += count(part.text);
    else if (part.type === "image_url") n += IMAGE_TOKENS;
  }
  return n;
}

/** One chat message, with its framing. */
export function wireMessageTokens(m: WireMessage, count: TextCounter): number {
  let n = TOKENS_PER_MESSAGE + count(m.role) + contentTokens(m.content, count);
  if (m.name) n += count(m.name) + TOKENS_PER_NAME;
  if (m.tool_call_id) n += count(m.tool_call_id);
  for (const c of m.tool_calls ?? []) n += count(c.function?.name ?? "") + count(c.function?.arguments ?? "") + TOOL_CALL_TOKENS;
  return n;
}

type Schema = { type?: unknown; description?: unknown; properties?: unknown; enum?: unknown };
const stripDot = (s: string) => (s.endsWith(".") ? s.slice(0, -1) : s);

/** The `tools` of a request (cookbook §7 framing). */
export function wireToolsTokens(tools: readonly WireTool[], encoding: EncodingName, count: TextCounter): number {
  if (tools.length === 0) return 0;
  const f = TOOL_FRAMING[encoding];
  let n = 0;
  for (const t of tools) {
    const fn = t.function ?? {};
    n += f.funcInit + count(`${fn.name ?? ""}:${stripDot(typeof fn.description === "string" ? fn.description : "")}`);
    const params = isRecord(fn.parameters) ? (fn.parameters as Schema) : {};
    const props = isRecord(params.properties) ? (params.properties as Record<string, Schema>) : {};
    const keys = Object.keys(props);
    if (keys.length === 0) continue;
    n += f.propInit;
    for (const key of keys) {
      const p = isRecord(props[key]) ? props[key] : {};
      n += f.propKey;
      if (Array.isArray(p.enum)) {
        n += f.enumInit;
        for (const item of p.enum) n += f.enumItem + count(String(item));
      }
      const type = typeof p.type === "string" ? p.type : Array.isArray(p.type) ? p.type.join("|") : "object";
      n += count(`${key}:${type}:${stripDot(typeof p.description === "string" ? p.description : "")}`);
    }
  }
  return n + f.funcEnd;
}

/** A whole chat-completions request (messages with the system one, tools, reply priming). */
export function wireRequestTokens(
  req: { messages: readonly WireMessage[]; tools?: readonly WireTool[] },
  encoding: EncodingName,
  count: TextCounter,
): number {
  let n = REPLY_PRIMING_TOKENS;
  for (const m of req.messages) n += wireMessageTokens(m, count);
  return n + wireToolsTokens(req.tools ?? [], encoding, count);
}

// ------------------------------------------------------------------ AgentMessages as the providers send them

const PERMISSION_DENIED_MARKER = "[PERMISSION_DENIED]";
const textOf = (blocks: readonly ContentBlock[]): string =>
  blocks
    .filter((b): b is { type: "text"; text: string } => b.type === "text")
    .map((b) => b.text)
    .join("\n");

/** A function result's text as the providers render it (a denial carries its envelope). */
function resultText(content: readonly ContentBlock[], details: unknown): string {
  const text = textOf(content);
  if (!isRecord(details) || details.status !== "denied" || text.startsWith(PERMISSION_DENIED_MARKER)) return text;
  return `${PERMISSION_DENIED_MARKER}\n${JSON.stringify(details)}${text ? `\n${text}` : ""}`;
}

const imageParts = (blocks: readonly ContentBlock[]) =>
  blocks.filter((b) => b.type === "image").map(() => ({ type: "image_url", image_url: {} }) as const);

/**
 * One AgentMessage as the chat messages a provider makes of it (openai.ts's mapping: results become
 * `tool` messages, thinking is not sent back, calls become `tool_calls`). For Anthropic the same
 * shapes are counted and then scaled, signed thinking included (it is sent back to the same model).
 */
export function toWireMessages(m: AgentMessage, family: TokenFamily): WireMessage[] {
  const blocks = Array.isArray(m.content) ? (m.content as ContentBlock[]) : [];
  switch (m.role) {
    case "user": {
      const out: WireMessage[] = [];
      for (const b of blocks)
        if (b.type === "function_result")
          out.push({ role: "tool", tool_call_id: b.function_call_id, content: resultText(b.content ?? [], undefined) });
      const text = blocks
        .filter((b) => b.type === "text" && b.text !== "")
        .map((b) => (b as { text: string }).text)
        .join("\n");
      const images = imageParts(blocks);
      if (text || images.length > 0)
        out.push({ role: "user", content: images.length > 0 ? [...(text ? [{ type: "text", text } as const] : []), ...images] : text });
      return out;
    }
    case "assistant": {
      let text = textOf(blocks);
      if (family === "anthropic") for (const b of blocks) if (b.type === "thinking") text += b.text;
      const calls =
        m.stop_reason === "error" || m.stop_reason === "aborted"
          ? []
          : blocks.filter((b): b is Extract<ContentBlock, { type: "function_call" }> => b.type === "function_call");
      if (!text && calls.length === 0) return [];
      const w: WireMessage = { role: "assistant", content: text || null };
      if (calls.length > 0)
        w.tool_calls = calls.map((c) => ({
          id: c.id,
          type: "function",
          function: { name: c.function_id, arguments: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments ?? {}) },
        }));
      return [w];
    }
    case "function_result": {
      const out: WireMessage[] = [{ role: "tool", tool_call_id: m.function_call_id, content: resultText(blocks, m.details) }];
      const images = imageParts(blocks);
      if (images.length > 0) out.push({ role: "user", content: images });
      return out;
    }
    default:
      return []; // custom messages never reach a model
  }
}

/** Function schemas (AgentFunction) as chat `tools`; anything unreadable counts as its JSON. */
export function toWireTools(tools: readonly unknown[]): WireTool[] {
  return tools.map((t) => {
    if (!isRecord(t)) return { function: { name: "", description: JSON.stringify(t) ?? "" } };
    if (isRecord(t.function)) return t as WireTool;
    return {
      type: "function",
      function: {
        name: typeof t.name === "string" ? t.name : "",
        description: typeof t.description === "string" ? t.description : "",
        parameters: t.parameters,
      },
    };
  });
}

/** Counts for one model: every figure is the family's own (scaled for Anthropic and others). */
export class TokenCounter {
  readonly encoding: EncodingName;
  readonly family: TokenFamily;
  readonly factor: number;
  private readonly bpe: Encoding;

  constructor(bpe: Encoding, spec: { encoding: EncodingName; family: TokenFamily; factor: number }) {
    this.bpe = bpe;
    this.encoding = spec.encoding;
    this.family = spec.family;
    this.factor = spec.factor;
  }

  /** The raw BPE count of a text (not scaled). */
  readonly raw: TextCounter = (text) => (text ? this.bpe.countTokens(text, NO_SPECIAL) : 0);

  private scale(n: number): number {
    return this.factor === 1 ? n : Math.ceil(n * this.factor);
  }

  text(text: string): number {
    return this.scale(this.raw(text));
  }

  /** One transcript message, framing included. */
  message(m: AgentMessage): number {
    let n = 0;
    for (const w of toWireMessages(m, this.family)) n += wireMessageTokens(w, this.raw);
    return this.scale(n);
  }

  /** What a request costs besides its messages: the system prompt, the tools, the reply priming. */
  fixed(system: string | null | undefined, tools: readonly unknown[] | undefined): number {
    let n = REPLY_PRIMING_TOKENS;
    if (system) n += wireMessageTokens({ role: "system", content: system }, this.raw);
    n += wireToolsTokens(toWireTools(tools ?? []), this.encoding, this.raw);
    return this.scale(n);
  }

  /** A whole request: fixed part + every message. */
  request(req: { system?: string | null; messages: readonly AgentMessage[]; tools?: readonly unknown[] }): number {
    let n = this.fixed(req.system, req.tools);
    for (const m of req.messages) n += this.message(m);
    return n;
  }
}

/** The counter of a model (its encoding loaded once per process, from `ranks`). */
export async function counterFor(model: { id: string; provider: string }, ranks?: RankLoader): Promise<TokenCounter> {
  const spec = tokenizerSpec(model);
  return new TokenCounter(await loadEncoding(spec.encoding, ranks), spec);
}
