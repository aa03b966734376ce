// The providers worker against the engine core served in-process (tests/support/node-engine.ts) and a local replay of each provider's SSE
// (tests/support/provider-replay.ts): what a caller reads from the channel (frames in order, the
// final message, classified errors) and what the model was sent (auth header, tools, converted
// transcript). The credentials come from the real auth-credentials worker, with its proofs.
import type { AgentMessage, AssistantMessage, AssistantMessageEvent, ProviderStreamResponse } from "@iii-edge/protocol/harness";
import { channelUrl } from "@iii-edge/sdk-edge/channels";
import { runWorkers, type RunningWorkers } from "@iii-edge/sdk-edge/worker-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { worker as authWorker } from "@iii-edge/worker-auth-credentials";
import { freePort } from "@iii-edge/test-support/engine-server";
import { startNodeEngine, type NodeEngine } from "@iii-edge/test-support/node-engine";
import {
  call,
  callAgentTrigger,
  cutStream,
  overflow,
  rateLimited,
  replyWith,
  reply,
  say,
  serverError,
  stalled,
  startProviderReplay,
  think,
  unauthorized,
  type ReplayProvider,
  type ReplayServer,
} from "@iii-edge/test-support/provider-replay";
import { callingRound } from "@iii-edge/test-support/agent-messages";
import { until } from "@iii-edge/test-support/wait";
import { configFrom, DEFAULT_LIMITS, worker as providersWorker, type ProvidersConfig } from "../src/index.ts";

const CREDENTIALS_KEY = "providers-test-credentials-key-4f1d2a9c";
const OPENAI_KEY = "sk-test-openai-7Hq2mZ9xL4pR8vN1";
const ANTHROPIC_KEY = "sk-ant-test-3Jf8kW2qB6yT0cX5";
/** Short idle timeout so a stalled upstream is seen quickly; quick retries. */
const IDLE_TIMEOUT_MS = 1_500;
const MODELS_OVERRIDES = JSON.stringify([
  { provider: "openai", id: "gpt-4o", context_window: 64_000 },
  { provider: "openai", id: "local-llama", context_window: 8_192, supports_tools: true, transports: ["sse"] },
  { provider: "openai", id: "broken" },
]);

let replay: ReplayServer;
let engine: NodeEngine;
let auth: RunningWorkers;
let providers: RunningWorkers;
let caller: RunningWorkers;
let env: Record<string, string>;

async function listed(): Promise<string[]> {
  const r = await caller.client.trigger<unknown, { functions: { function_id: string }[] }>({
    function_id: "engine::functions::list",
    payload: {},
  });
  return r.functions.map((f) => f.function_id);
}

/** Its functions are the old worker's until the engine has seen its socket close: a new worker's
 * registrations would be refused as another worker's. */
const released = () => until(() => !engine.core.catalog.functions.has("auth::get_token"), "the old auth worker's functions released");

function startAuth(withEnv: Record<string, string>): RunningWorkers {
  return runWorkers(engine.wsUrl, [authWorker], { env: withEnv, workerName: "auth-credentials" });
}

beforeAll(async () => {
  replay = await startProviderReplay();
  env = {
    OPENAI_BASE_URL: replay.openaiBaseUrl,
    OPENAI_API_KEY: OPENAI_KEY,
    ANTHROPIC_BASE_URL: replay.anthropicBaseUrl,
    ANTHROPIC_API_KEY: ANTHROPIC_KEY,
    CREDENTIALS_KEY,
    MODELS_OVERRIDES,
  };
  engine = await startNodeEngine();
  auth = startAuth(env);
  const config: ProvidersConfig = {
    ...configFrom(env),
    limits: { ...DEFAULT_LIMITS, idle_timeout_ms: IDLE_TIMEOUT_MS, retry_base_delay_ms: 50 },
    // This suite fails one provider many times in a row on purpose, each case on its own: a breaker
    // opening between cases would answer later ones for it (its own tests: breaker.test.ts and
    // tests/harness/failover.test.ts).
    breaker: { failure_threshold: Number.MAX_SAFE_INTEGER, cool_down_ms: 0 },
  };
  providers = runWorkers(engine.wsUrl, [providersWorker], { env, config: { providers: config }, workerName: "providers" });
  caller = runWorkers(engine.wsUrl, [], { workerName: "providers-test-caller" });
  await until(
    async () => {
      const ids = await listed();
      return ["auth::get_token", "provider::openai::stream", "provider::anthropic::stream", "models::list"].every((id) => ids.includes(id));
    },
    "both workers registered",
    30_000,
  );
});

afterAll(async () => {
  await Promise.allSettled([auth?.shutdown(), providers?.shutdown(), caller?.shutdown()]);
  await engine?.stop();
  await replay?.close();
});

// ------------------------------------------------------------------ helpers

interface StreamRun {
  frames: AssistantMessageEvent[];
  /** When each frame arrived (ms since epoch). */
  arrivals: number[];
  /** The channel messages they came in (several frames each when asked with `batch_frames`). */
  items: number;
  result: ProviderStreamResponse;
  terminal: AssistantMessageEvent;
  message: AssistantMessage;
}

const user = (text: string): AgentMessage => ({ role: "user", content: [{ type: "text", text }], timestamp: 1 });
const MODELS: Record<ReplayProvider, string> = { openai: "gpt-4o", anthropic: "claude-sonnet-4-5" };
/** How long to keep reading after the terminal frame, to see that nothing follows it. */
const AFTER_TERMINAL_MS = 150;

/** Call `provider::<p>::stream` as the orchestrator does: a fresh channel, the call not awaited
 * while the reader drains, stop at the terminal frame (then listen a moment longer, to see that
 * nothing follows it). The read end is a plain WebSocket, closed by us: under `wrangler dev` the
 * end of a channel otherwise reaches a reader only when the TCP connection goes (protocol/README.md
 * §10). */
async function stream(
  provider: ReplayProvider,
  payload: Record<string, unknown> = {},
  opts: { stopAfter?: (f: AssistantMessageEvent) => boolean } = {},
): Promise<StreamRun> {
  const ch = await caller.surface.channels.create();
  const ws = new WebSocket(channelUrl(engine.wsUrl, ch.reader));
  const frames: AssistantMessageEvent[] = [];
  const arrivals: number[] = [];
  let items = 0;
  const ended = new Promise<void>((resolve, reject) => {
    let quiet: ReturnType<typeof setTimeout> | undefined;
    const finish = () => (clearTimeout(quiet), ws.close(1000), resolve());
    ws.addEventListener("message", (e: MessageEvent) => {
      const item = JSON.parse(String(e.data)) as AssistantMessageEvent | AssistantMessageEvent[];
      items++;
      for (const frame of Array.isArray(item) ? item : [item]) {
        frames.push(frame);
        arrivals.push(Date.now());
        if (opts.stopAfter?.(frame)) finish();
        else if (frame.type === "done" || frame.type === "error") quiet = setTimeout(finish, AFTER_TERMINAL_MS);
      }
    });
    ws.addEventListener("close", () => (clearTimeout(quiet), resolve()));
    ws.addEventListener("error", () => reject(new Error("channel reader failed")));
  });
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener("open", () => resolve(), { once: true });
    ws.addEventListener("error", () => reject(new Error("cannot attach the channel reader")), { once: true });
  });
  const result = caller.client.trigger<unknown, ProviderStreamResponse>({
    function_id: `provider::${provider}::stream`,
    payload: { writer_ref: ch.writer, model: MODELS[provider], messages: [user("Hi")], ...payload },
    timeoutMs: 60_000,
  });
  result.catch(() => {}); // awaited below; a failed read must not leave it unhandled
  await ended;
  const terminal = frames[frames.length - 1]!;
  const message = terminal?.type === "done" ? terminal.message : terminal?.type === "error" ? terminal.error : (undefined as never);
  return { frames, arrivals, items, result: await result, terminal, message };
}

/** §4.2's rules, for any stream: `start` first, triplets per block with the running partial, a
 * `stop`, then exactly one terminal frame, last. */
function expectWellFormed(frames: AssistantMessageEvent[]): void {
  expect(frames[0]?.type).toBe("start");
  const terminals = frames.filter((f) => f.type === "done" || f.type === "error");
  expect(terminals).toHaveLength(1);
  expect(frames[frames.length - 1]).toBe(terminals[0]);
  expect(frames[frames.length - 2]?.type).toBe("stop");
  let open: string | undefined;
  for (const f of frames.slice(0, -2)) {
    const m = /^(text|thinking|functioncall)_(start|delta|end)$/.exec(f.type);
    if (!m) continue;
    expect("partial" in f && f.partial.role).toBe("assistant");
    if (m[2] === "start") {
      expect(open).toBeUndefined();
      open = m[1];
    } else {
      expect(open).toBe(m[1]);
      if (m[2] === "end") open = undefined;
    }
  }
  if (terminals[0]?.type === "done") expect(open).toBeUndefined();
}

const deltas = (frames: AssistantMessageEvent[], type: "text_delta" | "thinking_delta" | "functioncall_delta") =>
  frames.filter((f): f is Extract<AssistantMessageEvent, { delta: string }> => f.type === type).map((f) => f.delta);

// ------------------------------------------------------------------ streaming

describe.each(["openai", "anthropic"] as const)("%s: a text reply", (provider) => {
  it("streams text deltas in order, each with the running partial, and ends with the full message", async () => {
    const text = "Hello there! This reply arrives in several small pieces.";
    replay.enqueue(provider, replyWith({ usage: { input: 12, output: 9 } }, say(text)));
    const { frames, result, message } = await stream(provider);
    expectWellFormed(frames);
    const pieces = deltas(frames, "text_delta");
    expect(pieces.length).toBeGreaterThan(3);
    expect(pieces.join("")).toBe(text);
    let running = "";
    for (const f of frames) {
      if (f.type !== "text_delta") continue;
      running += f.delta;
      expect(f.partial.content).toEqual([{ type: "text", text: running }]);
    }
    expect(message).toMatchObject({
      role: "assistant",
      content: [{ type: "text", text }],
      stop_reason: "end",
      provider,
      model: MODELS[provider],
    });
    expect(message.usage).toMatchObject({ input: 12, output: 9 });
    expect(frames.some((f) => f.type === "usage")).toBe(true);
    expect(result).toEqual({ ok: true, status: "done" });
  });
});

describe.each(["openai", "anthropic"] as const)("%s: batch_frames", (provider) => {
  it("the events one chunk of the answer made cross the channel as one item, the same events in the same order", async () => {
    const text = "Hello there! This reply arrives in several small pieces.";
    replay.enqueue(provider, replyWith({ usage: { input: 12, output: 9 } }, say(text)));
    const single = await stream(provider);
    expect(single.items).toBe(single.frames.length);
    replay.enqueue(provider, replyWith({ usage: { input: 12, output: 9 } }, say(text)));
    const batched = await stream(provider, { batch_frames: true });
    expectWellFormed(batched.frames);
    expect(deltas(batched.frames, "text_delta").join("")).toBe(text);
    const shape = (frames: AssistantMessageEvent[]) => frames.map((f) => f.type);
    expect(shape(batched.frames)).toEqual(shape(single.frames));
    // The zero-latency replay sends the whole body at once: a handful of items, not one per event.
    expect(batched.items).toBeLessThan(batched.frames.length / 2);
  });
});

describe.each(["openai", "anthropic"] as const)("%s: a slow provider", (provider) => {
  // Batched too: a chunk's events go together, and a slow answer's chunks come one by one.
  it.each([{}, { batch_frames: true }])("each delta reaches the reader as it comes, not when the reply is over (%o)", async (asked) => {
    const DELAY_MS = 60;
    replay.enqueue(provider, replyWith({ chunkDelayMs: DELAY_MS, pieceChars: 4 }, say("one two three four five")));
    const { frames, arrivals, message } = await stream(provider, asked);
    expect(message.content).toEqual([{ type: "text", text: "one two three four five" }]);
    const firstDelta = frames.findIndex((f) => f.type === "text_delta");
    // Six pieces and the closing events still to come, DELAY_MS apart, after the first delta arrived.
    expect(arrivals[arrivals.length - 1]! - arrivals[firstDelta]!).toBeGreaterThanOrEqual(5 * DELAY_MS);
  });
});

describe.each(["openai", "anthropic"] as const)("%s: function calls", (provider) => {
  it("argument deltas split across chunks become one function_call block per call, with parsed arguments", async () => {
    const paris = { function: "weather::get", payload: { city: "Paris", days: 3, units: "metric" } };
    const oslo = { function: "weather::get", payload: { city: "Oslo" } };
    replay.enqueue(
      provider,
      reply(
        say("Checking both."),
        callAgentTrigger(paris.function, paris.payload, "call_paris"),
        callAgentTrigger(oslo.function, oslo.payload, "call_oslo"),
      ),
    );
    const { frames, message } = await stream(provider);
    expectWellFormed(frames);
    expect(message.stop_reason).toBe("function_call");
    expect(message.content).toEqual([
      { type: "text", text: "Checking both." },
      { type: "function_call", id: "call_paris", function_id: "agent_trigger", arguments: paris },
      { type: "function_call", id: "call_oslo", function_id: "agent_trigger", arguments: oslo },
    ]);
    expect(frames.filter((f) => f.type === "functioncall_start")).toHaveLength(2);
    expect(frames.filter((f) => f.type === "functioncall_end")).toHaveLength(2);
    // The JSON arrived in pieces; joined, they are both calls' argument texts.
    const args = deltas(frames, "functioncall_delta");
    expect(args.length).toBeGreaterThan(4);
    expect(args.join("")).toBe(JSON.stringify(paris) + JSON.stringify(oslo));
  });
});

describe("thinking", () => {
  it("openai-compatible reasoning_content (llama.cpp, vLLM, DeepSeek) becomes a thinking block before the text", async () => {
    replay.enqueue("openai", reply(think("The user greets me; answer briefly."), say("Hi!")));
    const { frames, message } = await stream("openai");
    expectWellFormed(frames);
    expect(deltas(frames, "thinking_delta").join("")).toBe("The user greets me; answer briefly.");
    expect(message.content).toEqual([
      { type: "thinking", text: "The user greets me; answer briefly." },
      { type: "text", text: "Hi!" },
    ]);
  });

  it("anthropic thinking keeps its signature, and goes back signed to the same model on the next round", async () => {
    replay.enqueue("anthropic", reply(think("Consider the weather first.", "sig-abc123"), say("Let me look.")));
    const first = await stream("anthropic");
    expectWellFormed(first.frames);
    expect(first.message.content).toEqual([
      { type: "thinking", text: "Consider the weather first.", signature: "sig-abc123" },
      { type: "text", text: "Let me look." },
    ]);
    replay.enqueue("anthropic", reply(say("Done.")));
    await stream("anthropic", { messages: [user("Weather?"), first.message, user("Go on")] });
    const sent = replay.requestsFor("anthropic").at(-1)!.body!;
    expect((sent.messages as { content: unknown[] }[])[1]!.content[0]).toEqual({
      type: "thinking",
      thinking: "Consider the weather first.",
      signature: "sig-abc123",
    });
  });
});

describe("usage", () => {
  it("openai: the include_usage chunk gives input (less cached), output, cache_read, reasoning, and cost from the catalog's pricing", async () => {
    replay.enqueue("openai", replyWith({ usage: { input: 1_000, output: 200, cache_read: 400, reasoning: 50 } }, say("ok")));
    const { frames, message } = await stream("openai");
    const usage = frames.filter((f) => f.type === "usage").at(-1);
    const expected = { input: 1_000, output: 200, cache_read: 400, reasoning: 50 };
    expect(usage).toMatchObject({ type: "usage", usage: expected });
    // gpt-4o: $2.5 in, $10 out, $1.25 cached per 1M tokens.
    const cost = (1_000 * 2.5 + 200 * 10 + 400 * 1.25) / 1e6;
    expect(message.usage?.cost_usd).toBeCloseTo(cost, 12);
    expect(replay.requestsFor("openai").at(-1)!.body!.stream_options).toEqual({ include_usage: true });
  });

  it("anthropic: message_start's input and cache counts, message_delta's output", async () => {
    replay.enqueue("anthropic", replyWith({ usage: { input: 30, output: 12, cache_read: 100, cache_write: 5 } }, say("ok")));
    const { message } = await stream("anthropic");
    expect(message.usage).toMatchObject({ input: 30, output: 12, cache_read: 100, cache_write: 5 });
    expect(message.usage?.cost_usd).toBeGreaterThan(0);
  });
});

// ------------------------------------------------------------------ failures

describe("failures become one classified terminal error", () => {
  it("anthropic 429 with retry-after: 1 is waited out and retried, and the stream then succeeds", async () => {
    const before = replay.requestsFor("anthropic").length;
    replay.enqueue("anthropic", rateLimited({ seconds: 1 }), reply(say("after the wait")));
    const t0 = Date.now();
    const { frames, message, result } = await stream("anthropic");
    expect(Date.now() - t0).toBeGreaterThanOrEqual(950);
    expectWellFormed(frames);
    expect(message.content).toEqual([{ type: "text", text: "after the wait" }]);
    expect(result.status).toBe("done");
    expect(replay.requestsFor("anthropic").length - before).toBe(2);
    // Nothing was written for the failed attempt: one start, one stream.
    expect(frames.filter((f) => f.type === "start")).toHaveLength(1);
  });

  it("openai 429 with retry-after-ms, then success", async () => {
    replay.enqueue("openai", rateLimited({ ms: 100 }), reply(say("second try")));
    const { message } = await stream("openai");
    expect(message.stop_reason).toBe("end");
    expect(message.content).toEqual([{ type: "text", text: "second try" }]);
  });

  it("a 429 on every attempt ends rate_limited after the bounded attempts", async () => {
    const before = replay.requestsFor("openai").length;
    replay.enqueue("openai", rateLimited({ ms: 10 }), rateLimited({ ms: 10 }), rateLimited({ ms: 10 }));
    const { frames, message, result } = await stream("openai");
    expectWellFormed(frames);
    expect(message).toMatchObject({ stop_reason: "error", error_kind: "rate_limited" });
    expect(message.error_message).toMatch(/HTTP 429.*Rate limit reached/);
    expect(replay.requestsFor("openai").length - before).toBe(DEFAULT_LIMITS.max_attempts);
    expect(result).toEqual({ ok: true, status: "error", error_kind: "rate_limited" });
  });

  it.each(["openai", "anthropic"] as const)("%s 401 → auth_expired, not retried, the key not quoted", async (provider) => {
    const before = replay.requestsFor(provider).length;
    replay.enqueue(provider, unauthorized());
    const { frames, message } = await stream(provider);
    expectWellFormed(frames);
    expect(message).toMatchObject({ stop_reason: "error", error_kind: "auth_expired" });
    expect(replay.requestsFor(provider).length - before).toBe(1);
    expect(JSON.stringify(frames)).not.toContain(provider === "openai" ? OPENAI_KEY : ANTHROPIC_KEY);
  });

  it("a 500 on every attempt → transient, after retries", async () => {
    const before = replay.requestsFor("anthropic").length;
    replay.enqueue("anthropic", serverError(), serverError(502), serverError(503));
    const { message } = await stream("anthropic");
    expect(message).toMatchObject({ stop_reason: "error", error_kind: "transient" });
    expect(message.error_message).toContain("HTTP 503");
    expect(replay.requestsFor("anthropic").length - before).toBe(3);
  });

  it("a 500 then success is retried", async () => {
    replay.enqueue("openai", serverError(), reply(say("recovered")));
    const { message } = await stream("openai");
    expect(message.content).toEqual([{ type: "text", text: "recovered" }]);
  });

  it.each(["openai", "anthropic"] as const)(
    "%s: a stream cut mid-way → transient, keeping the text that arrived, not retried",
    async (provider) => {
      const before = replay.requestsFor(provider).length;
      replay.enqueue(provider, cutStream(6, say("This sentence will never be finished by the model")));
      const { frames, message, result } = await stream(provider);
      expectWellFormed(frames);
      expect(message).toMatchObject({ stop_reason: "error", error_kind: "transient" });
      expect(message.error_message).toMatch(/cut|ended before/);
      const got = deltas(frames, "text_delta").join("");
      expect(got.length).toBeGreaterThan(0);
      expect(message.content).toEqual([{ type: "text", text: got }]);
      expect(result.error_kind).toBe("transient");
      expect(replay.requestsFor(provider).length - before).toBe(1);
    },
  );

  it("a call cut before it completed is not in the error message (a failed turn must not run it)", async () => {
    replay.enqueue(
      "anthropic",
      cutStream(7, say("Running it."), call("agent_trigger", { function: "fs::delete", payload: { path: "/tmp/x" } })),
    );
    const { frames, message } = await stream("anthropic");
    expect(frames.some((f) => f.type === "functioncall_start")).toBe(true);
    expect(message.stop_reason).toBe("error");
    expect(message.content.every((b) => b.type !== "function_call")).toBe(true);
  });

  it.each(["openai", "anthropic"] as const)("%s: the overflow error body → context_overflow", async (provider) => {
    replay.enqueue(provider, overflow());
    const { message } = await stream(provider);
    expect(message).toMatchObject({ stop_reason: "error", error_kind: "context_overflow" });
  });

  it("anthropic `event: error` mid-stream: overloaded → transient, rate_limit_error → rate_limited", async () => {
    replay.enqueue("anthropic", replyWith({ streamError: { type: "overloaded_error", message: "Overloaded" } }, say("partial")));
    const a = await stream("anthropic");
    expectWellFormed(a.frames);
    expect(a.message).toMatchObject({ error_kind: "transient", content: [{ type: "text", text: "partial" }] });
    replay.enqueue("anthropic", replyWith({ streamError: { type: "rate_limit_error", message: "slow down" } }));
    expect((await stream("anthropic")).message.error_kind).toBe("rate_limited");
  });

  it("openai `data: {error}` mid-stream about context length → context_overflow", async () => {
    replay.enqueue(
      "openai",
      replyWith(
        { streamError: { type: "invalid_request_error", message: "This model's maximum context length is 8192 tokens" } },
        say("x"),
      ),
    );
    expect((await stream("openai")).message.error_kind).toBe("context_overflow");
  });

  it("an upstream that goes silent ends after the idle timeout, and the upstream request is dropped", async () => {
    replay.enqueue("openai", stalled(3, say("I am about to stall")));
    const t0 = Date.now();
    const { frames, message } = await stream("openai");
    expectWellFormed(frames);
    expect(message).toMatchObject({ stop_reason: "error", error_kind: "transient" });
    expect(message.error_message).toContain(`no data from the provider for ${IDLE_TIMEOUT_MS / 1000} s`);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(IDLE_TIMEOUT_MS - 100);
    await until(() => replay.requestsFor("openai").at(-1)!.aborted, "the replay saw the request dropped");
  });

  it("a reader that leaves cancels the upstream request", async () => {
    replay.enqueue("anthropic", stalled(4, say("streaming to nobody")));
    const { frames, result } = await stream("anthropic", {}, { stopAfter: (f) => f.type === "text_delta" });
    expect(frames.some((f) => f.type === "done" || f.type === "error")).toBe(false);
    expect(result).toEqual({ ok: true, status: "cancelled" });
    expect(replay.requestsFor("anthropic").at(-1)!.aborted).toBe(true);
  });

  it("a malformed request → terminal error permanent, nothing sent upstream; no writer_ref → invalid_input", async () => {
    const before = replay.requests.length;
    const { frames, message } = await stream("openai", { messages: [{ role: "robot", content: [] }] });
    expectWellFormed(frames);
    expect(message).toMatchObject({ stop_reason: "error", error_kind: "permanent" });
    expect(message.error_message).toContain("messages[0]");
    expect(replay.requests.length).toBe(before);
    await expect(
      caller.client.trigger({ function_id: "provider::openai::stream", payload: { model: "gpt-4o", messages: [] } }),
    ).rejects.toMatchObject({ code: "invalid_input" });
  });
});

// ------------------------------------------------------------------ what the model was sent

const TOOL = {
  name: "agent_trigger",
  description: "Call any function by id.",
  parameters: { type: "object", properties: { function: { type: "string" }, payload: { type: "object" } }, required: ["function"] },
};
const denial = {
  schema_version: 1,
  status: "denied",
  denied_by: "permissions",
  function_id: "fs::delete",
  rule_id: "no-deletes",
  rule_action: "deny",
  reason: "Deleting files is not allowed.",
};
/** One transcript with every message kind: a call answered, a call denied, an image, a custom note. */
const TRANSCRIPT: unknown[] = [
  {
    role: "user",
    content: [
      { type: "text", text: "What's the weather in Paris?" },
      { type: "image", mime: "image/png", data: "iVBORw0KGgo=" },
    ],
    timestamp: 1,
  },
  callingRound(
    { type: "text", text: "Let me check." },
    { id: "call_a", function: "weather::get", payload: { city: "Paris" } },
    { model: "m", provider: "openai", timestamp: 2 },
  ),
  {
    role: "function_result",
    function_call_id: "call_a",
    function_id: "agent_trigger",
    content: [{ type: "text", text: "sunny, 21°C" }],
    details: {},
    is_error: false,
    timestamp: 3,
  },
  { role: "custom", custom_type: "ui_note", content: "never sent to a model", timestamp: 4 },
  {
    role: "assistant",
    content: [
      {
        type: "function_call",
        id: "call_b",
        function_id: "agent_trigger",
        arguments: { function: "fs::delete", payload: { path: "/etc" } },
      },
    ],
    stop_reason: "function_call",
    model: "m",
    provider: "openai",
    timestamp: 5,
  },
  {
    role: "function_result",
    function_call_id: "call_b",
    function_id: "agent_trigger",
    content: [{ type: "text", text: "Denied by policy." }],
    details: denial,
    is_error: true,
    timestamp: 6,
  },
  { role: "user", content: "thanks", timestamp: 7 },
];
const deniedText = `[PERMISSION_DENIED]\n${JSON.stringify(denial)}\nDenied by policy.`;

describe("the request the provider receives", () => {
  it("openai: Bearer key, tools, system + converted transcript (tool messages, denial prefix, no custom)", async () => {
    replay.enqueue("openai", reply(say("ok")));
    await stream("openai", { system_prompt: "You are an iii agent.", messages: TRANSCRIPT, tools: [TOOL], max_tokens: 500 });
    const req = replay.requestsFor("openai").at(-1)!;
    expect(req.path).toBe("/v1/chat/completions");
    expect(req.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    expect(req.body).toMatchObject({ model: "gpt-4o", stream: true, max_tokens: 500 });
    expect(req.body!.tools).toEqual([{ type: "function", function: TOOL }]);
    expect(req.body!.messages).toEqual([
      { role: "system", content: "You are an iii agent." },
      {
        role: "user",
        content: [
          { type: "text", text: "What's the weather in Paris?" },
          { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
        ],
      },
      {
        role: "assistant",
        content: "Let me check.",
        tool_calls: [
          {
            id: "call_a",
            type: "function",
            function: { name: "agent_trigger", arguments: JSON.stringify({ function: "weather::get", payload: { city: "Paris" } }) },
          },
        ],
      },
      { role: "tool", tool_call_id: "call_a", content: "sunny, 21°C" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: "call_b",
            type: "function",
            function: { name: "agent_trigger", arguments: JSON.stringify({ function: "fs::delete", payload: { path: "/etc" } }) },
          },
        ],
      },
      { role: "tool", tool_call_id: "call_b", content: deniedText },
      { role: "user", content: "thanks" },
    ]);
  });

  it("anthropic: x-api-key, anthropic-version, system, input_schema tools, tool_result blocks in user turns", async () => {
    replay.enqueue("anthropic", reply(say("ok")));
    await stream("anthropic", { system_prompt: "You are an iii agent.", messages: TRANSCRIPT, tools: [TOOL] });
    const req = replay.requestsFor("anthropic").at(-1)!;
    expect(req.path).toBe("/v1/messages");
    expect(req.headers["x-api-key"]).toBe(ANTHROPIC_KEY);
    expect(req.headers.authorization).toBeUndefined();
    expect(req.headers["anthropic-version"]).toBe("2023-06-01");
    // No max_tokens from the caller: the default, capped by claude-sonnet-4-5's 64k maximum.
    expect(req.body).toMatchObject({ model: "claude-sonnet-4-5", stream: true, max_tokens: 16_384 });
    expect(req.body!.system).toEqual([{ type: "text", text: "You are an iii agent.", cache_control: { type: "ephemeral" } }]);
    expect(req.body!.tools).toEqual([{ name: TOOL.name, description: TOOL.description, input_schema: TOOL.parameters }]);
    expect(req.body!.messages).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "What's the weather in Paris?" },
          { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
        ],
      },
      {
        role: "assistant",
        content: [
          { type: "text", text: "Let me check." },
          { type: "tool_use", id: "call_a", name: "agent_trigger", input: { function: "weather::get", payload: { city: "Paris" } } },
        ],
      },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "call_a", content: [{ type: "text", text: "sunny, 21°C" }] }] },
      {
        role: "assistant",
        content: [{ type: "tool_use", id: "call_b", name: "agent_trigger", input: { function: "fs::delete", payload: { path: "/etc" } } }],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "call_b", content: [{ type: "text", text: deniedText }], is_error: true },
          { type: "text", text: "thanks", cache_control: { type: "ephemeral" } },
        ],
      },
    ]);
  });

  it.each(["openai", "anthropic"] as const)(
    "%s: a call with no recorded result is answered, so the provider accepts the transcript",
    async (provider) => {
      replay.enqueue(provider, reply(say("ok")));
      const interrupted = {
        role: "assistant",
        content: [{ type: "function_call", id: "call_lost", function_id: "agent_trigger", arguments: {} }],
        stop_reason: "function_call",
        model: "m",
        provider: "openai",
        timestamp: 2,
      };
      const { message } = await stream(provider, { messages: [user("go"), interrupted, user("still there?")] });
      expect(message.stop_reason).toBe("end"); // the replay rejects a transcript the real API would reject
    },
  );
});

// ------------------------------------------------------------------ credentials through auth-credentials

describe("credentials", () => {
  it("a stored credential beats the environment; deleting it brings the environment key back", async () => {
    const stored = "sk-stored-openai-Zp4Qm8Rt2Lw6";
    await caller.client.trigger({ function_id: "auth::set_token", payload: { provider: "openai", type: "api_key", key: stored } });
    replay.enqueue("openai", reply(say("a")), reply(say("b")));
    await stream("openai");
    expect(replay.requestsFor("openai").at(-1)!.headers.authorization).toBe(`Bearer ${stored}`);
    await caller.client.trigger({ function_id: "auth::delete_token", payload: { provider: "openai" } });
    await stream("openai");
    expect(replay.requestsFor("openai").at(-1)!.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
  });

  it("a stored base_url points the provider elsewhere; an unreachable server → transient after the retries", async () => {
    const closed = await freePort(); // nothing listens there
    await caller.client.trigger({
      function_id: "auth::set_token",
      payload: { provider: "openai", type: "api_key", key: OPENAI_KEY, base_url: `http://127.0.0.1:${closed}/v1` },
    });
    try {
      const before = replay.requests.length;
      const { frames, message } = await stream("openai");
      expectWellFormed(frames);
      expect(message).toMatchObject({ stop_reason: "error", error_kind: "transient" });
      expect(message.error_message).toMatch(new RegExp(`^openai: cannot reach 127\\.0\\.0\\.1:${closed}: .*ECONNREFUSED`));
      expect(replay.requests.length).toBe(before);
    } finally {
      await caller.client.trigger({ function_id: "auth::delete_token", payload: { provider: "openai" } });
    }
  });

  it("an anthropic OAuth credential goes as Bearer with the oauth beta flag", async () => {
    await caller.client.trigger({
      function_id: "auth::set_token",
      payload: { provider: "anthropic", type: "oauth", access_token: "oat-test-token-123456" },
    });
    try {
      replay.enqueue("anthropic", reply(say("hi")));
      await stream("anthropic");
      const h = replay.requestsFor("anthropic").at(-1)!.headers;
      expect(h.authorization).toBe("Bearer oat-test-token-123456");
      expect(h["x-api-key"]).toBeUndefined();
      expect(h["anthropic-beta"]).toBe("oauth-2025-04-20");
    } finally {
      await caller.client.trigger({ function_id: "auth::delete_token", payload: { provider: "anthropic" } });
    }
  });

  it("no credential configured → terminal auth_expired naming the provider, nothing sent upstream", async () => {
    await auth.shutdown();
    await released();
    const { ANTHROPIC_API_KEY: _, ...withoutAnthropic } = env;
    auth = startAuth(withoutAnthropic);
    // Until the restarted worker registers, the stream reports the lookup failure (transient).
    await until(async () => (await listed()).includes("auth::get_token"), "auth-credentials registered again");
    const before = replay.requests.length;
    const { frames, message } = await stream("anthropic");
    expectWellFormed(frames);
    expect(message).toMatchObject({
      stop_reason: "error",
      error_kind: "auth_expired",
      error_message: "no credential configured for anthropic",
    });
    expect(replay.requests.length).toBe(before);
  });

  it("a local OpenAI-compatible server (its own base URL) with no key configured: the request goes without authorization", async () => {
    await auth.shutdown();
    await released();
    const { OPENAI_API_KEY: _, ...withoutOpenAI } = env;
    auth = startAuth(withoutOpenAI);
    await until(async () => (await listed()).includes("auth::get_token"), "auth-credentials registered again");
    replay.enqueue("openai", reply(say("served by a local model")));
    const { frames, message } = await stream("openai");
    expectWellFormed(frames);
    expect(message).toMatchObject({ stop_reason: "end" });
    expect(replay.requestsFor("openai").at(-1)!.headers.authorization).toBeUndefined();
  });
});

// ------------------------------------------------------------------ models catalog

describe("models catalog", () => {
  const models = <T>(fn: string, payload: unknown) => caller.client.trigger<unknown, T>({ function_id: `models::${fn}`, payload });

  it("lists the built-in table, filtered by provider and capability", async () => {
    const all = await models<{ provider: string; id: string }[]>("list", {});
    expect(all.some((m) => m.provider === "openai")).toBe(true);
    expect(all.some((m) => m.provider === "anthropic")).toBe(true);
    const anthropicOnly = await models<{ provider: string }[]>("list", { provider: "anthropic" });
    expect(anthropicOnly.length).toBeGreaterThan(0);
    expect(anthropicOnly.every((m) => m.provider === "anthropic")).toBe(true);
    const thinking = await models<{ id: string }[]>("list", { capability: "thinking" });
    expect(thinking.map((m) => m.id)).toContain("claude-sonnet-4-5");
    expect(thinking.map((m) => m.id)).not.toContain("gpt-4o");
    expect(await models("list", { capability: "teleportation" })).toEqual([]);
  });

  it("get: a known model with limits and pricing, a dated snapshot by its alias, null when unknown", async () => {
    expect(await models("get", { provider: "anthropic", id: "claude-sonnet-4-5" })).toMatchObject({
      context_window: 200_000,
      max_output_tokens: 64_000,
      supports_tools: true,
      pricing: { input_per_1m: 3, output_per_1m: 15 },
    });
    expect(await models("get", { provider: "anthropic", id: "claude-sonnet-4-5-20250929" })).toMatchObject({
      id: "claude-sonnet-4-5-20250929",
      context_window: 200_000,
    });
    expect(await models("get", { provider: "openai", id: "gpt-unknown" })).toBeUndefined(); // null travels as "no result"
  });

  it("supports: capabilities, unknown capability → false, unknown model → known:false", async () => {
    expect(await models("supports", { provider: "openai", id: "gpt-4o", capability: "tools" })).toEqual({ supported: true, known: true });
    expect(await models("supports", { provider: "openai", id: "gpt-4o", capability: "streaming" })).toEqual({
      supported: true,
      known: true,
    });
    expect(await models("supports", { provider: "openai", id: "gpt-4o", capability: "thinking" })).toEqual({
      supported: false,
      known: true,
    });
    expect(await models("supports", { provider: "openai", id: "gpt-4o", capability: "telepathy" })).toEqual({
      supported: false,
      known: true,
    });
    expect(await models("supports", { provider: "openai", id: "nope", capability: "tools" })).toEqual({ supported: false, known: false });
  });

  it("MODELS_OVERRIDES corrects a table entry and adds a local model; a broken entry is skipped", async () => {
    expect(await models("get", { provider: "openai", id: "gpt-4o" })).toMatchObject({
      context_window: 64_000,
      pricing: { input_per_1m: 2.5 },
    });
    expect(await models("get", { provider: "openai", id: "local-llama" })).toMatchObject({ context_window: 8_192, supports_tools: true });
    expect(await models("get", { provider: "openai", id: "broken" })).toBeUndefined();
  });

  it("models::register is stored in state scope `models` and overrides the table; streams use it", async () => {
    const r = await models("register", { model: { provider: "anthropic", id: "claude-sonnet-4-5", context_window: 1_000_000 } });
    expect(r).toEqual({ ok: true, key: "anthropic:claude-sonnet-4-5" });
    const row = await caller.client.trigger({
      function_id: "state::get",
      payload: { scope: "models", key: "anthropic:claude-sonnet-4-5" },
    });
    expect(row).toMatchObject({ context_window: 1_000_000 });
    expect(await models("get", { provider: "anthropic", id: "claude-sonnet-4-5" })).toMatchObject({
      context_window: 1_000_000,
      max_output_tokens: 64_000,
      pricing: { input_per_1m: 3 },
    });

    await models("register", {
      model: { provider: "anthropic", id: "claude-small-test", context_window: 50_000, max_output_tokens: 1_000 },
    });
    expect((await models<{ id: string }[]>("list", { provider: "anthropic" })).map((m) => m.id)).toContain("claude-small-test");
    replay.enqueue("anthropic", reply(say("ok")));
    // The restarted auth worker has no anthropic key: store one for this call.
    await caller.client.trigger({
      function_id: "auth::set_token",
      payload: { provider: "anthropic", type: "api_key", key: ANTHROPIC_KEY },
    });
    await stream("anthropic", { model: "claude-small-test" });
    expect(replay.requestsFor("anthropic").at(-1)!.body!.max_tokens).toBe(1_000);
  });

  it("bad input → invalid_input, nothing stored", async () => {
    await expect(models("register", { model: { provider: "openai", id: "no-window" } })).rejects.toMatchObject({ code: "invalid_input" });
    await expect(models("get", { provider: "OpenAI!", id: "x" })).rejects.toMatchObject({ code: "invalid_input" });
    expect(
      await caller.client.trigger({ function_id: "state::get", payload: { scope: "models", key: "openai:no-window" } }),
    ).toBeUndefined();
  });
});
