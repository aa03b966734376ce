// A real HTTP server on 127.0.0.1 that answers like OpenAI's chat completions
// (`POST /v1/chat/completions`) and Anthropic's messages (`POST /v1/messages`) do, byte for byte in
// their SSE framing, from scenarios a test enqueues per provider. Every request is recorded
// (headers, JSON body) so a test can assert what the model was sent. Scenarios are written once in
// semantic steps (`say`, `think`, `call`) and rendered in each provider's wire format.
import { mkdtempSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";

export type ReplayProvider = "openai" | "anthropic";

// ------------------------------------------------------------------ scenarios

export type Step =
  | { type: "text"; text: string }
  | { type: "thinking"; text: string; signature: string }
  | { type: "call"; name: string; arguments: unknown; id?: string };

export const say = (text: string): Step => ({ type: "text", text });
export const think = (text: string, signature = "EqQBCkYIBxgCKkB-replay-signature"): Step => ({ type: "thinking", text, signature });
export const call = (name: string, args: unknown, id?: string): Step =>
  id === undefined ? { type: "call", name, arguments: args } : { type: "call", name, arguments: args, id };
/** The harness's one tool (docs/harness-contracts.md §3.1): `agent_trigger {function, payload}`. */
export const callAgentTrigger = (fn: string, payload: unknown, id?: string): Step => call("agent_trigger", { function: fn, payload }, id);

export interface ReplyOptions {
  /** Token counts reported (OpenAI: the usage chunk when `stream_options.include_usage`). */
  usage?: { input: number; output: number; cache_read?: number; cache_write?: number; reasoning?: number };
  /** Default: `function_call` when a step calls, else `end`. */
  stop?: "end" | "length" | "function_call";
  /** Pause between SSE events (default: the server's; 0 = the whole body in one write). */
  chunkDelayMs?: number;
  /** Text, thinking and argument JSON are split into pieces of at most this many characters. */
  pieceChars?: number;
  /** Destroy the socket after this many events (a connection cut mid-stream). */
  cutAfterEvents?: number;
  /** Send this many events, then nothing more while keeping the connection open. */
  stallAfterEvents?: number;
  /** End with a provider error event instead of the normal end (Anthropic `event: error`,
   * OpenAI `data: {"error":…}`). */
  streamError?: { type: string; message: string };
  /** The model named in the response (default: the request's). */
  model?: string;
}

export type ErrorName = "rate_limited" | "server_error" | "unauthorized" | "overflow" | "overloaded";

export type Scenario =
  | { kind: "reply"; steps: Step[]; options: ReplyOptions }
  | { kind: "error"; error: ErrorName; status?: number; retryAfterSeconds?: number; retryAfterMs?: number }
  | { kind: "http"; status: number; headers?: Record<string, string>; body: string }
  | { kind: "raw"; events: string[]; options?: Pick<ReplyOptions, "chunkDelayMs" | "cutAfterEvents" | "stallAfterEvents"> };

export const reply = (...steps: Step[]): Scenario => ({ kind: "reply", steps, options: {} });
export const replyWith = (options: ReplyOptions, ...steps: Step[]): Scenario => ({ kind: "reply", steps, options });
export const rateLimited = (retry: { seconds?: number; ms?: number } = {}): Scenario => ({
  kind: "error",
  error: "rate_limited",
  retryAfterSeconds: retry.seconds,
  retryAfterMs: retry.ms,
});
export const serverError = (status = 500): Scenario => ({ kind: "error", error: "server_error", status });
export const unauthorized = (): Scenario => ({ kind: "error", error: "unauthorized" });
export const overflow = (): Scenario => ({ kind: "error", error: "overflow" });
export const cutStream = (afterEvents: number, ...steps: Step[]): Scenario => replyWith({ cutAfterEvents: afterEvents }, ...steps);
export const stalled = (afterEvents: number, ...steps: Step[]): Scenario => replyWith({ stallAfterEvents: afterEvents }, ...steps);

// ------------------------------------------------------------------ wire rendering

let serial = 0;
const randomId = (n: number) =>
  Array.from({ length: n }, () => "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"[Math.floor(Math.random() * 62)]).join(
    "",
  );

function pieces(text: string, size: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out.length > 0 ? out : [""];
}

const DEFAULT_PIECE_CHARS = 6;
const stopOf = (steps: readonly Step[], options: ReplyOptions) =>
  options.stop ?? (steps.some((s) => s.type === "call") ? "function_call" : "end");

/** OpenAI chat completion chunks (`data: {…}` … `data: [DONE]`). */
export function renderOpenAI(
  steps: readonly Step[],
  options: ReplyOptions,
  request: { model?: unknown; stream_options?: { include_usage?: unknown } },
): string[] {
  const size = options.pieceChars ?? DEFAULT_PIECE_CHARS;
  const includeUsage = request.stream_options?.include_usage === true;
  const base = {
    id: `chatcmpl-replay${++serial}`,
    object: "chat.completion.chunk",
    created: Math.floor(Date.now() / 1000),
    model: options.model ?? String(request.model ?? "replay-model"),
    system_fingerprint: "fp_replay",
  };
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
    `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...(includeUsage ? { usage: null } : {}) })}\n\n`;
  const events = [chunk({ role: "assistant", content: "", refusal: null })];
  let toolIndex = 0;
  for (const s of steps) {
    if (s.type === "text") for (const p of pieces(s.text, size)) events.push(chunk({ content: p }));
    else if (s.type === "thinking") for (const p of pieces(s.text, size)) events.push(chunk({ content: null, reasoning_content: p }));
    else {
      const index = toolIndex++;
      events.push(
        chunk({ tool_calls: [{ index, id: s.id ?? `call_${randomId(24)}`, type: "function", function: { name: s.name, arguments: "" } }] }),
      );
      for (const p of pieces(JSON.stringify(s.arguments), size))
        events.push(chunk({ tool_calls: [{ index, function: { arguments: p } }] }));
    }
  }
  if (options.streamError) {
    events.push(
      `data: ${JSON.stringify({ error: { message: options.streamError.message, type: options.streamError.type, param: null, code: null } })}\n\n`,
    );
    return events;
  }
  const stop = stopOf(steps, options);
  events.push(chunk({}, stop === "function_call" ? "tool_calls" : stop === "length" ? "length" : "stop"));
  if (includeUsage && options.usage) {
    const u = options.usage;
    const usage = {
      prompt_tokens: u.input + (u.cache_read ?? 0),
      completion_tokens: u.output,
      total_tokens: u.input + (u.cache_read ?? 0) + u.output,
      prompt_tokens_details: { cached_tokens: u.cache_read ?? 0, audio_tokens: 0 },
      completion_tokens_details: {
        reasoning_tokens: u.reasoning ?? 0,
        audio_tokens: 0,
        accepted_prediction_tokens: 0,
        rejected_prediction_tokens: 0,
      },
    };
    events.push(`data: ${JSON.stringify({ ...base, choices: [], usage })}\n\n`);
  }
  events.push("data: [DONE]\n\n");
  return events;
}

const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

/** Anthropic message events (`event: message_start` … `event: message_stop`). */
export function renderAnthropic(steps: readonly Step[], options: ReplyOptions, request: { model?: unknown }): string[] {
  const size = options.pieceChars ?? DEFAULT_PIECE_CHARS;
  const u = options.usage ?? { input: 10, output: 5 };
  const events = [
    sse("message_start", {
      type: "message_start",
      message: {
        id: `msg_replay${++serial}`,
        type: "message",
        role: "assistant",
        model: options.model ?? String(request.model ?? "replay-model"),
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: {
          input_tokens: u.input,
          cache_creation_input_tokens: u.cache_write ?? 0,
          cache_read_input_tokens: u.cache_read ?? 0,
          output_tokens: 1,
          service_tier: "standard",
        },
      },
    }),
    sse("ping", { type: "ping" }),
  ];
  steps.forEach((s, index) => {
    if (s.type === "text") {
      events.push(sse("content_block_start", { type: "content_block_start", index, content_block: { type: "text", text: "" } }));
      for (const p of pieces(s.text, size))
        events.push(sse("content_block_delta", { type: "content_block_delta", index, delta: { type: "text_delta", text: p } }));
    } else if (s.type === "thinking") {
      events.push(
        sse("content_block_start", {
          type: "content_block_start",
          index,
          content_block: { type: "thinking", thinking: "", signature: "" },
        }),
      );
      for (const p of pieces(s.text, size))
        events.push(sse("content_block_delta", { type: "content_block_delta", index, delta: { type: "thinking_delta", thinking: p } }));
      events.push(
        sse("content_block_delta", { type: "content_block_delta", index, delta: { type: "signature_delta", signature: s.signature } }),
      );
    } else {
      events.push(
        sse("content_block_start", {
          type: "content_block_start",
          index,
          content_block: { type: "tool_use", id: s.id ?? `toolu_01${randomId(22)}`, name: s.name, input: {} },
        }),
      );
      events.push(
        sse("content_block_delta", { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: "" } }),
      );
      for (const p of pieces(JSON.stringify(s.arguments), size))
        events.push(
          sse("content_block_delta", { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: p } }),
        );
    }
    events.push(sse("content_block_stop", { type: "content_block_stop", index }));
  });
  if (options.streamError) {
    events.push(sse("error", { type: "error", error: { type: options.streamError.type, message: options.streamError.message } }));
    return events;
  }
  const stop = stopOf(steps, options);
  events.push(
    sse("message_delta", {
      type: "message_delta",
      delta: { stop_reason: stop === "function_call" ? "tool_use" : stop === "length" ? "max_tokens" : "end_turn", stop_sequence: null },
      usage: { output_tokens: u.output },
    }),
  );
  events.push(sse("message_stop", { type: "message_stop" }));
  return events;
}

/** Each provider's error response, as its API sends it. */
function renderError(
  provider: ReplayProvider,
  s: Extract<Scenario, { kind: "error" }>,
): { status: number; headers: Record<string, string>; body: string } {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (s.retryAfterSeconds !== undefined) headers["retry-after"] = String(s.retryAfterSeconds);
  if (s.retryAfterMs !== undefined) headers["retry-after-ms"] = String(s.retryAfterMs);
  const oa = (status: number, message: string, type: string, code: string | null, param: string | null = null) => ({
    status,
    body: JSON.stringify({ error: { message, type, param, code } }),
  });
  const an = (status: number, type: string, message: string) => ({
    status,
    body: JSON.stringify({ type: "error", error: { type, message } }),
  });
  const table: Record<ErrorName, Record<ReplayProvider, { status: number; body: string }>> = {
    rate_limited: {
      openai: oa(
        429,
        "Rate limit reached for gpt-4o in organization org-replay on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 1s.",
        "requests",
        "rate_limit_exceeded",
      ),
      anthropic: an(429, "rate_limit_error", "This request would exceed the rate limit for your organization of 50 requests per minute."),
    },
    server_error: {
      openai: oa(s.status ?? 500, "The server had an error while processing your request. Sorry about that!", "server_error", null),
      anthropic: an(s.status ?? 500, "api_error", "Internal server error"),
    },
    overloaded: {
      openai: oa(503, "The engine is currently overloaded, please try again later", "server_error", null),
      anthropic: an(529, "overloaded_error", "Overloaded"),
    },
    unauthorized: {
      openai: oa(
        401,
        "Incorrect API key provided: sk-test-****. You can find your API key at https://platform.openai.com/account/api-keys.",
        "invalid_request_error",
        "invalid_api_key",
      ),
      anthropic: an(401, "authentication_error", "invalid x-api-key"),
    },
    overflow: {
      openai: oa(
        400,
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. Please reduce the length of the messages.",
        "invalid_request_error",
        "context_length_exceeded",
        "messages",
      ),
      anthropic: an(400, "invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"),
    },
  };
  const r = table[s.error][provider];
  if (provider === "anthropic") headers["request-id"] = `req_replay${++serial}`;
  return { status: r.status, headers, body: r.body };
}

// ------------------------------------------------------------------ request checks (what the real APIs reject)

type Json = Record<string, unknown>;
const isJson = (v: unknown): v is Json => !!v && typeof v === "object" && !Array.isArray(v);

/** OpenAI: every `tool` message answers a call of the assistant message before it, and every call
 * is answered before the next non-tool message. */
function openaiProblem(body: Json): string | undefined {
  if (typeof body.model !== "string") return "you must provide a model parameter";
  if (!Array.isArray(body.messages)) return "'messages' is a required property";
  let open: string[] = [];
  for (const [i, m] of body.messages.entries()) {
    if (!isJson(m)) return `messages[${i}] is not an object`;
    if (m.role === "tool") {
      if (!open.includes(String(m.tool_call_id)))
        return `Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. (messages[${i}])`;
      open = open.filter((id) => id !== m.tool_call_id);
      continue;
    }
    if (open.length > 0)
      return `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${open.join(", ")}`;
    if (m.role === "assistant" && Array.isArray(m.tool_calls)) open = m.tool_calls.map((c) => String(isJson(c) ? c.id : ""));
  }
  return undefined;
}

/** Anthropic: the first turn is the user's, `max_tokens` is given, and each `tool_use` is answered
 * by a `tool_result` in the very next (user) turn. */
function anthropicProblem(body: Json): string | undefined {
  if (typeof body.model !== "string") return "model: Field required";
  if (typeof body.max_tokens !== "number") return "max_tokens: Field required";
  if (!Array.isArray(body.messages)) return "messages: Field required";
  const msgs = body.messages.filter(isJson);
  if (msgs[0] && msgs[0].role !== "user") return 'messages: first message must use the "user" role';
  for (let i = 0; i < msgs.length; i++) {
    const content = Array.isArray(msgs[i]!.content) ? (msgs[i]!.content as unknown[]).filter(isJson) : [];
    const uses = content.filter((b) => b.type === "tool_use").map((b) => String(b.id));
    const results = content.filter((b) => b.type === "tool_result").map((b) => String(b.tool_use_id));
    if (results.length > 0) {
      const prev = i > 0 && Array.isArray(msgs[i - 1]!.content) ? (msgs[i - 1]!.content as unknown[]).filter(isJson) : [];
      const prevUses = prev.filter((b) => b.type === "tool_use").map((b) => String(b.id));
      for (const r of results)
        if (!prevUses.includes(r))
          return `messages.${i}.content: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${r}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`;
    }
    if (uses.length > 0) {
      const next = msgs[i + 1];
      const answered =
        next && Array.isArray(next.content)
          ? (next.content as unknown[])
              .filter(isJson)
              .filter((b) => b.type === "tool_result")
              .map((b) => String(b.tool_use_id))
          : [];
      const missing = uses.filter((u) => !answered.includes(u));
      if (missing.length > 0)
        return `messages.${i + 1}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(", ")}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`;
    }
  }
  return undefined;
}

// ------------------------------------------------------------------ the server

export interface RecordedRequest {
  provider: ReplayProvider;
  method: string;
  path: string;
  /** Lower-case header names. */
  headers: Record<string, string>;
  /** The parsed JSON body (undefined when it was not JSON). */
  body: Json | undefined;
  received_at: number;
  /** The client went away before the response ended (e.g. the stream was cancelled). */
  aborted: boolean;
}

export interface ReplayServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** What OPENAI_BASE_URL should be (`<url>/v1`). */
  readonly openaiBaseUrl: string;
  /** What ANTHROPIC_BASE_URL should be (`<url>`, the SDK convention: no /v1). */
  readonly anthropicBaseUrl: string;
  /** Scenarios answer requests in order, one each. */
  enqueue(provider: ReplayProvider, ...scenarios: Scenario[]): void;
  /** Scenarios for the requests `match` picks (one conversation among several at once), in order, one
   * each; they answer before the shared queue. Forgotten by reset(). */
  enqueueFor(provider: ReplayProvider, match: (r: RecordedRequest) => boolean, ...scenarios: Scenario[]): void;
  /** What answers when the queue is empty (benchmarks: a reply repeated forever). Without one an
   * unexpected request gets a 400 naming the problem. */
  setDefault(provider: ReplayProvider, scenario: Scenario | undefined): void;
  pending(provider: ReplayProvider): number;
  readonly requests: readonly RecordedRequest[];
  requestsFor(provider: ReplayProvider): RecordedRequest[];
  /** Resolves with the n-th request (1-based) of a provider once it has arrived. */
  waitForRequest(provider: ReplayProvider, n: number, timeoutMs?: number): Promise<RecordedRequest>;
  /** Forget queued scenarios, defaults and recorded requests. */
  reset(): void;
  close(): Promise<void>;
}

export interface ReplayOptions {
  /** Default pause between SSE events; 0 (the default) writes each body at once — zero latency. */
  chunkDelayMs?: number;
}

const ROUTES: Record<string, ReplayProvider> = {
  "/v1/chat/completions": "openai",
  "/chat/completions": "openai",
  "/v1/messages": "anthropic",
};
/** Bound on a request body the replay accepts (a long transcript with images fits). */
const MAX_REQUEST_BYTES = 32 * 1024 * 1024;

export async function startProviderReplay(options: ReplayOptions = {}): Promise<ReplayServer> {
  const queues: Record<ReplayProvider, Scenario[]> = { openai: [], anthropic: [] };
  const matched: { provider: ReplayProvider; match: (r: RecordedRequest) => boolean; scenarios: Scenario[] }[] = [];
  const defaults: Partial<Record<ReplayProvider, Scenario>> = {};
  const requests: RecordedRequest[] = [];
  const waiters = new Set<() => void>();
  const defaultDelay = options.chunkDelayMs ?? 0;

  const json = (res: http.ServerResponse, status: number, provider: ReplayProvider, message: string) => {
    const body =
      provider === "anthropic"
        ? { type: "error", error: { type: "invalid_request_error", message } }
        : { error: { message, type: "invalid_request_error", param: null, code: null } };
    res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
  };

  const stream = async (
    res: http.ServerResponse,
    events: string[],
    o: Pick<ReplyOptions, "chunkDelayMs" | "cutAfterEvents" | "stallAfterEvents">,
  ) => {
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", connection: "keep-alive" });
    const delay = o.chunkDelayMs ?? defaultDelay;
    const limit = o.cutAfterEvents ?? o.stallAfterEvents;
    const send = limit === undefined ? events : events.slice(0, limit);
    const write = (text: string) => new Promise<void>((resolve) => (res.write(text) ? resolve() : res.once("drain", () => resolve())));
    if (delay <= 0) {
      if (send.length > 0) await write(send.join(""));
    } else {
      for (const e of send) {
        if (res.destroyed) return;
        await write(e);
        await new Promise((r) => setTimeout(r, delay));
      }
    }
    if (o.cutAfterEvents !== undefined) {
      // Let the bytes leave, then drop the connection without the chunked terminator.
      await new Promise((r) => setTimeout(r, 20));
      res.socket?.destroy();
      return;
    }
    if (o.stallAfterEvents !== undefined) return; // held open until the client leaves or close()
    res.end();
  };

  const server = http.createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    const provider = ROUTES[path];
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size <= MAX_REQUEST_BYTES) chunks.push(c);
    });
    req.on("end", () => {
      if (!provider || req.method !== "POST") {
        res
          .writeHead(404, { "content-type": "application/json" })
          .end(JSON.stringify({ error: { message: `replay: no route ${req.method} ${path}` } }));
        return;
      }
      let body: Json | undefined;
      try {
        const parsed: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        body = isJson(parsed) ? parsed : undefined;
      } catch {
        body = undefined;
      }
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(", ") : v;
      const record: RecordedRequest = { provider, method: req.method, path, headers, body, received_at: Date.now(), aborted: false };
      requests.push(record);
      for (const w of waiters) w();
      res.on("close", () => {
        if (!res.writableFinished) record.aborted = true;
      });
      if (size > MAX_REQUEST_BYTES) return json(res, 413, provider, "request too large for the replay");
      if (!body) return json(res, 400, provider, "replay: the body is not a JSON object");
      if (body.stream !== true) return json(res, 400, provider, "replay: only stream:true requests are replayed");
      const problem = provider === "openai" ? openaiProblem(body) : anthropicProblem(body);
      if (problem) return json(res, 400, provider, problem);
      const own = matched.find((m) => m.provider === provider && m.scenarios.length > 0 && m.match(record));
      const scenario = own?.scenarios.shift() ?? queues[provider].shift() ?? defaults[provider];
      if (!scenario) return json(res, 400, provider, `replay: no scenario queued for ${provider} (request ${requests.length})`);
      switch (scenario.kind) {
        case "error": {
          const r = renderError(provider, scenario);
          res.writeHead(r.status, r.headers).end(r.body);
          return;
        }
        case "http":
          res.writeHead(scenario.status, scenario.headers ?? {}).end(scenario.body);
          return;
        case "raw":
          void stream(res, scenario.events, scenario.options ?? {});
          return;
        case "reply": {
          const events =
            provider === "openai"
              ? renderOpenAI(scenario.steps, scenario.options, body)
              : renderAnthropic(scenario.steps, scenario.options, body);
          void stream(res, events, scenario.options);
          return;
        }
      }
    });
  });
  // Keep-alive sockets must not hold close() open.
  server.keepAliveTimeout = 1_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;

  return {
    url,
    openaiBaseUrl: `${url}/v1`,
    anthropicBaseUrl: url,
    enqueue: (provider, ...scenarios) => void queues[provider].push(...scenarios),
    enqueueFor: (provider, match, ...scenarios) => void matched.push({ provider, match, scenarios }),
    setDefault: (provider, scenario) => void (defaults[provider] = scenario),
    pending: (provider) => queues[provider].length,
    requests,
    requestsFor: (provider) => requests.filter((r) => r.provider === provider),
    waitForRequest(provider, n, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const got = requests.filter((r) => r.provider === provider)[n - 1];
          if (!got) return false;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(got);
          return true;
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`replay: request ${n} for ${provider} did not arrive within ${timeoutMs} ms`));
        }, timeoutMs);
        if (!check()) waiters.add(check);
      });
    },
    reset() {
      queues.openai.length = 0;
      queues.anthropic.length = 0;
      matched.length = 0;
      delete defaults.openai;
      delete defaults.anthropic;
      requests.length = 0;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** What `npm start` needs to send its model requests to `replay`: OpenAI always, Anthropic too
 * when asked (a suite that checks an unconfigured provider leaves it out). */
export function replayEnv(replay: ReplayServer, providers: { anthropic?: boolean } = {}): Record<string, string> {
  return {
    OPENAI_BASE_URL: replay.openaiBaseUrl,
    OPENAI_API_KEY: "sk-test",
    ...(providers.anthropic ? { ANTHROPIC_BASE_URL: replay.anthropicBaseUrl, ANTHROPIC_API_KEY: "sk-ant-test" } : {}),
  };
}

/** A policy rules file (`III_PERMISSIONS_PATH`) holding `rules`, in a fresh temporary folder. */
export function permissionsFile(rules: string): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), "iii-permissions-")), "iii-permissions.yaml");
  writeFileSync(file, rules);
  return file;
}
