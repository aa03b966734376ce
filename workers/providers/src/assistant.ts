// The assistant message being streamed, and the AssistantMessageEvents (docs/harness-contracts.md §4.2) it
// emits: `start` first, a `*_start/_delta/_end` triplet per content block — each frame with the
// running `partial` — `usage` as soon as known, then `stop` and exactly one terminal `done` or
// `error`.
import type {
  AssistantMessage,
  AssistantMessageEvent,
  ContentBlock,
  ErrorKind,
  Model,
  StopReason,
  Usage,
} from "@iii-edge/protocol/harness";

export type Emit = (event: AssistantMessageEvent) => void;
type BlockKind = "text" | "thinking" | "function_call";

const TOKENS_PER_PRICING_UNIT = 1_000_000;

/** Arguments as far as they parse: the whole JSON once complete, the last parse that worked before. */
function parseArguments(raw: string): { ok: true; value: unknown } | { ok: false } {
  if (raw.trim() === "") return { ok: true, value: {} };
  try {
    return { ok: true, value: JSON.parse(raw) };
  } catch {
    return { ok: false };
  }
}

export class AssistantBuilder {
  readonly message: AssistantMessage;
  private openIndex: number | undefined;
  private openKind: BlockKind | undefined;
  private readonly rawArguments = new Map<number, string>();
  private terminal = false;
  private started = false;

  private readonly emit: Emit;
  private readonly pricing: Model["pricing"] | undefined;

  constructor(emit: Emit, meta: { provider: string; model: string; timestamp: number }, pricing?: Model["pricing"]) {
    this.emit = emit;
    this.pricing = pricing;
    this.message = {
      role: "assistant",
      content: [],
      stop_reason: "end",
      usage: null,
      model: meta.model,
      provider: meta.provider,
      timestamp: meta.timestamp,
    };
  }

  get ended(): boolean {
    return this.terminal;
  }
  get functionCalls(): number {
    return this.message.content.filter((b) => b.type === "function_call").length;
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.emit({ type: "start", partial: this.message });
  }

  private open(kind: BlockKind, block: ContentBlock): number {
    this.closeBlock();
    this.message.content.push(block);
    this.openIndex = this.message.content.length - 1;
    this.openKind = kind;
    if (kind === "text") this.emit({ type: "text_start", partial: this.message });
    else if (kind === "thinking") this.emit({ type: "thinking_start", partial: this.message });
    else this.emit({ type: "functioncall_start", partial: this.message });
    return this.openIndex;
  }

  beginText(): number {
    return this.open("text", { type: "text", text: "" });
  }
  beginThinking(signature?: unknown): number {
    return this.open("thinking", signature === undefined ? { type: "thinking", text: "" } : { type: "thinking", text: "", signature });
  }
  beginCall(id: string, functionId: string): number {
    const index = this.open("function_call", { type: "function_call", id, function_id: functionId, arguments: {} });
    this.rawArguments.set(index, "");
    return index;
  }

  /** A text fragment: into the open text block, or a new one. */
  text(delta: string): void {
    if (!delta) return;
    if (this.openKind !== "text") this.beginText();
    const block = this.message.content[this.openIndex!] as { type: "text"; text: string };
    block.text += delta;
    this.emit({ type: "text_delta", partial: this.message, delta });
  }

  thinking(delta: string): void {
    if (!delta) return;
    if (this.openKind !== "thinking") this.beginThinking();
    const block = this.message.content[this.openIndex!] as { type: "thinking"; text: string };
    block.text += delta;
    this.emit({ type: "thinking_delta", partial: this.message, delta });
  }

  /** Anthropic's signature of the open thinking block (arrives as deltas; carried by the next frame). */
  signature(delta: string): void {
    if (this.openKind !== "thinking") return;
    const block = this.message.content[this.openIndex!] as { type: "thinking"; text: string; signature?: unknown };
    block.signature = (typeof block.signature === "string" ? block.signature : "") + delta;
  }

  /** A JSON fragment of call `index`'s arguments. */
  callArguments(index: number, delta: string): void {
    const block = this.message.content[index];
    if (!delta || block?.type !== "function_call") return;
    const raw = (this.rawArguments.get(index) ?? "") + delta;
    this.rawArguments.set(index, raw);
    const parsed = parseArguments(raw);
    if (parsed.ok) block.arguments = parsed.value;
    this.emit({ type: "functioncall_delta", partial: this.message, delta });
  }

  /** A call's name when it arrives after its id (some OpenAI-compatible servers split them; others
   * repeat it in every chunk, so a name already known is kept). */
  nameCall(index: number, name: string): void {
    const block = this.message.content[index];
    if (block?.type === "function_call" && name && !block.function_id) block.function_id = name;
  }

  /** End the open block (if `index` is given, only when it is that one). */
  closeBlock(index?: number): void {
    if (this.openIndex === undefined || (index !== undefined && index !== this.openIndex)) return;
    const kind = this.openKind;
    const at = this.openIndex;
    this.openIndex = undefined;
    this.openKind = undefined;
    if (kind === "text") this.emit({ type: "text_end", partial: this.message });
    else if (kind === "thinking") this.emit({ type: "thinking_end", partial: this.message });
    else {
      this.finishArguments(at);
      this.emit({ type: "functioncall_end", partial: this.message });
    }
  }

  /** Complete arguments parse to their value; arguments that never became JSON stay as their raw
   * text, so whoever dispatches the call can tell the model its arguments were malformed. */
  private finishArguments(index: number): void {
    const block = this.message.content[index];
    const raw = this.rawArguments.get(index);
    if (block?.type !== "function_call" || raw === undefined) return;
    const parsed = parseArguments(raw);
    block.arguments = parsed.ok ? parsed.value : raw;
  }

  /** Merge what the provider reported (fields it repeats replace the earlier count). */
  usage(update: Usage): void {
    const u: Usage = { ...(this.message.usage ?? {}) };
    for (const [k, v] of Object.entries(update) as [keyof Usage, number | undefined][])
      if (typeof v === "number" && Number.isFinite(v)) u[k] = v;
    if (this.pricing) {
      const p = this.pricing;
      u.cost_usd =
        ((u.input ?? 0) * p.input_per_1m +
          (u.output ?? 0) * p.output_per_1m +
          (u.cache_read ?? 0) * (p.cache_read_per_1m ?? p.input_per_1m) +
          (u.cache_write ?? 0) * (p.cache_write_per_1m ?? p.input_per_1m)) /
        TOKENS_PER_PRICING_UNIT;
    }
    this.message.usage = u;
    this.emit({ type: "usage", usage: { ...u } });
  }

  /** The normal end: close the open block, `stop`, `done`. A reply with calls stops for them even
   * when the server said "stop" (some local servers do). */
  finish(reason: StopReason): void {
    if (this.terminal) return;
    this.start();
    this.closeBlock();
    for (const index of this.rawArguments.keys()) this.finishArguments(index);
    const stop: StopReason = reason === "end" && this.functionCalls > 0 ? "function_call" : reason;
    this.message.stop_reason = stop;
    this.terminal = true;
    this.emit({ type: "stop", stop_reason: stop });
    this.emit({ type: "done", message: this.message });
  }

  /** The failed end: `stop` with the error, then the terminal `error` frame. Text and thinking that
   * arrived are kept; function calls are dropped — a turn that failed must not run them. */
  fail(kind: ErrorKind, errorMessage: string): void {
    if (this.terminal) return;
    this.start();
    this.openIndex = undefined;
    this.openKind = undefined;
    this.message.content = this.message.content.filter((b) => b.type !== "function_call");
    this.message.stop_reason = "error";
    this.message.error_kind = kind;
    this.message.error_message = errorMessage;
    this.terminal = true;
    this.emit({ type: "stop", stop_reason: "error", error_message: errorMessage, error_kind: kind });
    this.emit({ type: "error", error: this.message });
  }
}
