// An in-memory engine for the pipeline tests: the real session-storage worker (node:sqlite in
// memory) and this worker registered on one surface, state with compare-and-set, streams, engine
// channels, `models::get`, and a scripted summariser as `provider::openai::stream` that records
// what it was asked. `void` calls run in the background (`settled()` waits for them).
import { IIIError, type StreamChannelRef } from "@iii-edge/protocol";
import type { AgentMessage, Model } from "@iii-edge/protocol/harness";
import type { TriggerRequest } from "@iii-edge/sdk-edge/client";
import type { ChannelWriter, Channels, WorkerHandler, WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { openSqliteStore, registerSessionStorage } from "@iii-edge/worker-session-storage/node";
import { worker, type ContextCompactionConfig } from "../../src/index.ts";
import { DEFAULT_CONFIG } from "../../src/config.ts";

export interface SummaryCall {
  system_prompt: string;
  user_prompt: string;
  max_tokens: number | undefined;
  model: string;
}

/** What the summariser answers: a text, or an error frame of a kind. */
export type SummaryScript = { text: string } | { error: string };

const canonical = (v: unknown): string =>
  JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b)))
      : x,
  );

export function fakeEngine(opts: { config?: Partial<ContextCompactionConfig>; models?: Model[]; now?: () => number } = {}) {
  const handlers = new Map<string, WorkerHandler>();
  const state = new Map<string, unknown>();
  const streams: { stream_name: string; group_id: string; item_id: string; data: unknown }[] = [];
  const summaries: SummaryCall[] = [];
  const script: SummaryScript[] = [];
  const calls: string[] = [];
  const background: Promise<unknown>[] = [];
  const models = new Map((opts.models ?? []).map((m) => [`${m.provider}:${m.id}`, m]));

  // ---------------------------------------------------------------- channels
  const chans = new Map<string, { items: string[]; closed: boolean; wake: (() => void)[] }>();
  let nextChan = 0;
  const channels: Channels = {
    async create() {
      const id = `ch${++nextChan}`;
      chans.set(id, { items: [], closed: false, wake: [] });
      return {
        writer: { channel_id: id, access_key: "k", direction: "write" },
        reader: { channel_id: id, access_key: "k", direction: "read" },
      };
    },
    async openWriter(ref: StreamChannelRef): Promise<ChannelWriter> {
      const c = chans.get(ref.channel_id)!;
      const flush = () => c.wake.splice(0).forEach((w) => w());
      return {
        write: (item) => {
          c.items.push(typeof item === "string" ? item : new TextDecoder().decode(item));
          flush();
        },
        close: () => {
          c.closed = true;
          flush();
        },
        closed: new Promise(() => undefined),
      };
    },
    read(ref: StreamChannelRef) {
      const c = chans.get(ref.channel_id)!;
      return {
        async *[Symbol.asyncIterator]() {
          for (;;) {
            if (c.items.length > 0) {
              yield c.items.shift()!;
              continue;
            }
            if (c.closed) return;
            await new Promise<void>((r) => c.wake.push(r));
          }
        },
      };
    },
  };

  // ---------------------------------------------------------------- builtins and stand-ins
  const builtins: Record<string, (p: Record<string, unknown>) => unknown> = {
    "state::get": (p) => state.get(`${p.scope}\u0000${p.key}`),
    "state::set": (p) => {
      const k = `${p.scope}\u0000${p.key}`;
      const old = state.get(k) ?? null;
      state.set(k, p.value);
      return { old_value: old, new_value: p.value };
    },
    "state::update": (p) => {
      const k = `${p.scope}\u0000${p.key}`;
      const old = state.get(k) ?? null;
      if ("expected" in p && canonical(old) !== canonical(p.expected ?? null))
        throw new IIIError("state_conflict", "expected value differs");
      const ops = p.ops as { type: string; path: string; value: unknown }[];
      let v: unknown = old;
      for (const op of ops) if (op.type === "set" && op.path === "") v = op.value;
      state.set(k, v);
      return { old_value: old, new_value: v };
    },
    "stream::set": (p) => {
      streams.push({ stream_name: String(p.stream_name), group_id: String(p.group_id), item_id: String(p.item_id), data: p.data });
      return { old_value: null, new_value: p.data };
    },
    "stream::list_items": (p) => {
      const items = streams
        .filter((s) => s.stream_name === p.stream_name && s.group_id === p.group_id && s.item_id > String(p.after ?? ""))
        .sort((a, b) => (a.item_id < b.item_id ? -1 : 1))
        .map((s) => ({ item_id: s.item_id, data: s.data }));
      return { items, next: null };
    },
    "models::get": (p) => models.get(`${p.provider}:${p.id}`) ?? null,
    "provider::openai::stream": async (p) => {
      const msgs = p.messages as AgentMessage[];
      const first = msgs[0];
      summaries.push({
        system_prompt: String(p.system_prompt),
        user_prompt: first && first.role === "user" && first.content[0]?.type === "text" ? first.content[0].text : "",
        max_tokens: p.max_tokens as number | undefined,
        model: String(p.model),
      });
      const w = await channels.openWriter(p.writer_ref as StreamChannelRef);
      const next = script.shift() ?? { text: `summary ${summaries.length}` };
      const assistant = (text: string) => ({
        role: "assistant",
        content: text ? [{ type: "text", text }] : [],
        stop_reason: "end",
        model: String(p.model),
        provider: "openai",
        timestamp: Date.now(),
      });
      if ("error" in next)
        w.write(
          JSON.stringify({
            type: "error",
            error: { ...assistant(""), stop_reason: "error", error_kind: next.error, error_message: `scripted ${next.error}` },
          }),
        );
      else w.write(JSON.stringify({ type: "done", message: assistant(next.text) }));
      w.close();
      return { ok: true, status: "done" };
    },
  };

  const trigger = async <I, O>(req: TriggerRequest<I>): Promise<O> => {
    calls.push(req.function_id);
    const run = async (): Promise<unknown> => {
      const b = builtins[req.function_id];
      if (b) return b((req.payload ?? {}) as Record<string, unknown>);
      const h = handlers.get(req.function_id);
      if (!h) throw new IIIError("function_not_found", `Function ${req.function_id} not found`);
      return h(req.payload, { function_id: req.function_id, metadata: undefined, trigger });
    };
    if (req.action?.type === "void") {
      background.push(run().catch((e: unknown) => console.warn(`void ${req.function_id}: ${String(e)}`)));
      return undefined as O;
    }
    // a JSON round trip, as over the wire
    const out = await run();
    return (out === undefined ? undefined : JSON.parse(JSON.stringify(out))) as O;
  };

  const surface: WorkerSurface = {
    runtime: "node",
    registerFunction: (id, h) => void handlers.set(id, h),
    registerTrigger: () => undefined,
    trigger,
    channels,
    env: {},
  };
  registerSessionStorage(surface, { store: openSqliteStore(":memory:").store });
  worker.register(surface, { ...DEFAULT_CONFIG, ...opts.config, ...(opts.now ? { now: opts.now } : {}) });

  const call = <O = unknown>(function_id: string, payload: unknown) => trigger<unknown, O>({ function_id, payload });
  return {
    call,
    state,
    streams,
    summaries,
    script,
    calls,
    async settled() {
      while (background.length > 0) await background.shift();
    },
  };
}
